package alipay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

func refundReq(outTradeNo, outRefundNo string, amount int64) orderpay.RefundRequest {
	return orderpay.RefundRequest{OutTradeNo: outTradeNo, OutRefundNo: outRefundNo, Amount: amount, Reason: "退货"}
}

func TestRefund_FundChangeYIsRefundedWithThisRefundsAmount(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	e.paid(t, "RF_1", 1000)

	first := e.ch.Refund(context.Background(), refundReq("RF_1", "RF_1_a", 300))
	if first.Outcome != orderpay.OutcomeRefunded || first.Amount != 300 || first.Raw == "" {
		t.Fatalf("first refund: %+v", first)
	}
	// refund_fee is now 5.50, the cumulative total; Amount is this refund's.
	second := e.ch.Refund(context.Background(), refundReq("RF_1", "RF_1_b", 250))
	if second.Outcome != orderpay.OutcomeRefunded || second.Amount != 250 || !strings.Contains(second.Detail, "refund_fee=5.50") {
		t.Fatalf("second refund: %+v", second)
	}
	// A resend of the first refunds nothing more and says the same.
	if again := e.ch.Refund(context.Background(), refundReq("RF_1", "RF_1_a", 300)); again.Outcome != orderpay.OutcomeRefunded || again.Amount != 300 {
		t.Fatalf("resend: %+v", again)
	}
	if got := e.refunded(t, "RF_1"); got != 550 {
		t.Fatalf("refunded %d at the channel, want 550", got)
	}
	for no, want := range map[string]int64{"RF_1_a": 300, "RF_1_b": 250} {
		if q := e.ch.QueryRefund(context.Background(), "RF_1", no); q.Outcome != orderpay.OutcomeRefunded || q.Amount != want {
			t.Errorf("query %s: %+v, want Refunded %d", no, q, want)
		}
	}
}

func TestRefund_PendingUntilSettled(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{RefundDelay: time.Minute})
	e.paid(t, "RF_slow", 800)

	res := e.ch.Refund(context.Background(), refundReq("RF_slow", "RF_slow_1", 800))
	if res.Outcome != orderpay.OutcomeRefundPending || res.Amount != 800 || !strings.Contains(res.Detail, "fund_change=N") {
		t.Fatalf("refund: %+v, want RefundPending (fund_change=N)", res)
	}
	if q := e.ch.QueryRefund(context.Background(), "RF_slow", "RF_slow_1"); q.Outcome != orderpay.OutcomeRefundPending || q.Amount != 0 {
		t.Fatalf("query before settlement: %+v, want RefundPending", q)
	}
	e.clock.Advance(time.Minute)
	if q := e.ch.QueryRefund(context.Background(), "RF_slow", "RF_slow_1"); q.Outcome != orderpay.OutcomeRefunded || q.Amount != 800 {
		t.Fatalf("query after settlement: %+v, want Refunded 800", q)
	}
	if again := e.ch.Refund(context.Background(), refundReq("RF_slow", "RF_slow_1", 800)); again.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("resend after settlement: %+v", again)
	}
}

func TestRefund_BusinessRefusalsAreRejected(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	e.paid(t, "RJ_paid", 1000)
	e.paid(t, "RJ_fin", 1000)
	if err := e.sim.AlipayFinishTrade("RJ_fin"); err != nil {
		t.Fatal(err)
	}
	e.scanned(t, "RJ_wait", 1000)
	e.accepted(t, "RJ_pending", 1000)
	if r := e.ch.Refund(context.Background(), refundReq("RJ_paid", "a", 600)); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("setup refund: %+v", r)
	}

	for _, tc := range []struct {
		name    string
		req     orderpay.RefundRequest
		subCode string
	}{
		{"same number, other amount", refundReq("RJ_paid", "a", 700), "ACQ.DISCORDANT_REPEAT_REQUEST"},
		{"more than what remains", refundReq("RJ_paid", "b", 401), "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"},
		{"finished trade", refundReq("RJ_fin", "a", 100), "ACQ.TRADE_HAS_FINISHED"},
		{"unpaid trade", refundReq("RJ_wait", "a", 100), "ACQ.TRADE_STATUS_ERROR"},
		{"not scanned", refundReq("RJ_pending", "a", 100), "ACQ.TRADE_NOT_EXIST"},
		{"unknown trade", refundReq("RJ_never", "a", 100), "ACQ.TRADE_NOT_EXIST"},
	} {
		res := e.ch.Refund(context.Background(), tc.req)
		if res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, tc.subCode) || res.Amount != 0 {
			t.Errorf("%s: %+v, want Rejected %s", tc.name, res, tc.subCode)
		}
	}
	if got := e.refunded(t, "RJ_paid"); got != 600 {
		t.Fatalf("refunded %d, want 600", got)
	}
}

func TestRefund_InvalidRequestIsRejectedWithoutACall(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	for name, req := range map[string]orderpay.RefundRequest{
		"no refund number":    refundReq("RN_1", "", 100),
		"65-char refund no":   refundReq("RN_1", strings.Repeat("r", 65), 100),
		"zero amount":         refundReq("RN_1", "a", 0),
		"above the maximum":   refundReq("RN_1", "a", orderpay.MaxChannelAmount+1),
		"bad out_trade_no":    refundReq("RN-1", "a", 100),
		"more than the total": {OutTradeNo: "RN_1", OutRefundNo: "a", Amount: 101, Total: 100},
		"negative amount":     refundReq("RN_1", "a", -5),
		"empty out_trade_no":  refundReq("", "a", 100),
	} {
		if res := e.ch.Refund(context.Background(), req); res.Outcome != orderpay.OutcomeRejected || res.Raw != "" ||
			!strings.HasPrefix(res.Detail, "not sent") {
			t.Errorf("%s: %+v, want Rejected without a call", name, res)
		}
	}
}

// Every call fault leaves the refund Unknown; resending it with the same number then
// settles it exactly once, whether or not the faulted call had taken effect.
func TestRefund_EveryCallFaultIsUnknownAndAResendRefundsOnce(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, sim.Config{})
			e.paid(t, "RU_1", 1000)
			e.fault(t, sim.MethodRefund, f.kind, f.applied)
			start := time.Now()
			res := e.faulty(t, f.kind).Refund(context.Background(), refundReq("RU_1", "RU_1_a", 400))
			if res.Outcome != orderpay.OutcomeUnknown || res.Amount != 0 {
				t.Fatalf("refund: %+v, want Unknown", res)
			}
			if d := time.Since(start); f.kind == sim.FaultTimeout && d > 3*time.Second {
				t.Fatalf("took %v: the timeout did not bound the call", d)
			}
			if q := e.ch.QueryRefund(context.Background(), "RU_1", "RU_1_a"); q.Outcome == orderpay.OutcomeUnknown {
				t.Fatalf("query during a refund fault: %+v, want an answer", q)
			}
			want := int64(0)
			if f.applied {
				want = 400
			}
			if got := e.refunded(t, "RU_1"); got != want {
				t.Fatalf("refunded %d at the channel, want %d", got, want)
			}

			e.noFaults()
			if again := e.ch.Refund(context.Background(), refundReq("RU_1", "RU_1_a", 400)); again.Outcome != orderpay.OutcomeRefunded || again.Amount != 400 {
				t.Fatalf("resend: %+v, want Refunded 400", again)
			}
			if got := e.refunded(t, "RU_1"); got != 400 {
				t.Fatalf("refunded %d after the resend, want 400", got)
			}
		})
	}
}

func TestQueryRefund_EachAnswer(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	e.paid(t, "QR_1", 900)
	e.accepted(t, "QR_pending", 900)
	if r := e.ch.Refund(context.Background(), refundReq("QR_1", "QR_1_a", 200)); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("refund: %+v", r)
	}
	for _, tc := range []struct {
		outTradeNo, outRefundNo string
		want                    orderpay.Outcome
		amount                  int64
	}{
		{"QR_1", "QR_1_a", orderpay.OutcomeRefunded, 200},
		{"QR_1", "QR_1_none", orderpay.OutcomeRefundPending, 0}, // not received: no refund_status
		{"QR_1", "", orderpay.OutcomeRefundPending, 0},          // the number defaults to out_trade_no
		{"QR_pending", "x", orderpay.OutcomeUnknown, 0},         // ACQ.TRADE_NOT_EXIST
		{"QR_never", "x", orderpay.OutcomeUnknown, 0},
	} {
		q := e.ch.QueryRefund(context.Background(), tc.outTradeNo, tc.outRefundNo)
		if q.Outcome != tc.want || q.Amount != tc.amount {
			t.Errorf("query %s/%s: %+v, want %s %d", tc.outTradeNo, tc.outRefundNo, q, tc.want, tc.amount)
		}
	}
}

func TestQueryRefund_EveryCallFaultIsUnknown(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, sim.Config{})
			e.paid(t, "QU_1", 900)
			if r := e.ch.Refund(context.Background(), refundReq("QU_1", "QU_1_a", 900)); r.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("refund: %+v", r)
			}
			e.fault(t, sim.MethodRefundQuery, f.kind, f.applied)
			if q := e.faulty(t, f.kind).QueryRefund(context.Background(), "QU_1", "QU_1_a"); q.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("query: %+v, want Unknown", q)
			}
		})
	}
}

func TestRefundAndQueryRefund_SignedGatewayAnswers(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	refunds := []struct {
		reply  string
		want   orderpay.Outcome
		amount int64
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","fund_change":"Y","refund_fee":"8.00"}`, orderpay.OutcomeRefunded, 300},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","fund_change":"N","refund_fee":"0.00"}`, orderpay.OutcomeRefundPending, 300},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1"}`, orderpay.OutcomeRefundPending, 300},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","fund_change":"Y","refund_fee":"2.99"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","fund_change":"Y","refund_fee":"3.00"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SELLER_BALANCE_NOT_ENOUGH","sub_msg":"卖家余额不足"}`, orderpay.OutcomeRefundRetry, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.REASON_TRADE_BEEN_FREEZEN"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.INVALID_PARAMETER"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_ALLOW_REFUND"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_HAS_FINISHED"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.DISCORDANT_REPEAT_REQUEST"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40001","msg":"Missing Required Arguments","sub_code":"isv.missing-signature"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40003","msg":"Insufficient Conditions","sub_code":"isv.x"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40006","msg":"Insufficient Permissions","sub_code":"isv.insufficient-isv-permissions"}`, orderpay.OutcomeRejected, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"40005","msg":"Call Limited","sub_code":"aop.ACQ.CALL_LIMITED"}`, orderpay.OutcomeUnknown, 0},
	}
	for _, tc := range refunds {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		got := ch.Refund(context.Background(), refundReq("OC_1", "OC_1_r", 300))
		if got.Outcome != tc.want || got.Amount != tc.amount {
			t.Errorf("refund %s: %s %d (%s), want %s %d", tc.reply, got.Outcome, got.Amount, got.Detail, tc.want, tc.amount)
		}
	}

	queries := []struct {
		reply  string
		want   orderpay.Outcome
		amount int64
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","out_request_no":"OC_1_r","refund_amount":"3.00","refund_status":"REFUND_SUCCESS"}`, orderpay.OutcomeRefunded, 300},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","refund_status":"REFUND_SUCCESS"}`, orderpay.OutcomeRefunded, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","out_request_no":"OC_1_r","refund_amount":"3.001","refund_status":"REFUND_SUCCESS"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","out_request_no":"OTHER","refund_amount":"3.00","refund_status":"REFUND_SUCCESS"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","refund_amount":"3.00","refund_status":"REFUND_SUCCESS"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","refund_status":"REFUND_PROCESSING"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1"}`, orderpay.OutcomeRefundPending, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown, 0},
	}
	for _, tc := range queries {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		got := ch.QueryRefund(context.Background(), "OC_1", "OC_1_r")
		if got.Outcome != tc.want || got.Amount != tc.amount {
			t.Errorf("query %s: %s %d (%s), want %s %d", tc.reply, got.Outcome, got.Amount, got.Detail, tc.want, tc.amount)
		}
	}
}

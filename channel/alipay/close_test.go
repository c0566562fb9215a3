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

func TestClose_NotScannedIsNotPaidAndTheCodeStillWorks(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	qr := e.accepted(t, "CL_pending", 500)
	res := e.ch.Close(context.Background(), "CL_pending")
	if res.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(res.Detail, "ACQ.TRADE_NOT_EXIST") || res.Raw == "" {
		t.Fatalf("close: %+v, want NotPaid (ACQ.TRADE_NOT_EXIST)", res)
	}
	// NotPaid, not Closed: the close stopped nothing, only the deadline will.
	if _, err := e.sim.Pay(context.Background(), qr); err != nil {
		t.Fatalf("pay after a NotPaid close: %v", err)
	}
}

func TestClose_WaitingTradeIsClosed(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	qr := e.scanned(t, "CL_wait", 500)
	if res := e.ch.Close(context.Background(), "CL_wait"); res.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("close: %+v, want Closed", res)
	}
	if q := e.ch.Query(context.Background(), "CL_wait"); q.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("query after close: %+v, want Closed", q)
	}
	if _, err := e.sim.Pay(context.Background(), qr); err == nil {
		t.Fatal("paid after a close")
	}
}

func TestClose_PaidOrAlreadyClosedIsUnknown(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	e.paid(t, "CL_paid", 500)
	e.scanned(t, "CL_closed", 500)
	if res := e.ch.Close(context.Background(), "CL_closed"); res.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("first close: %+v", res)
	}
	for _, no := range []string{"CL_paid", "CL_closed"} {
		res := e.ch.Close(context.Background(), no)
		if res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "ACQ.TRADE_STATUS_ERROR") ||
			!strings.Contains(res.Detail, "query") {
			t.Errorf("close %s: %+v, want Unknown saying to query", no, res)
		}
	}
	if q := e.ch.Query(context.Background(), "CL_paid"); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("query: %+v, want Paid", q)
	}
}

func TestClose_EveryCallFaultIsUnknown(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, sim.Config{})
			e.scanned(t, "CL_f", 500)
			e.fault(t, sim.MethodClose, f.kind, f.applied)
			start := time.Now()
			if res := e.faulty(t, f.kind).Close(context.Background(), "CL_f"); res.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("close: %+v, want Unknown", res)
			}
			if d := time.Since(start); f.kind == sim.FaultTimeout && d > 3*time.Second {
				t.Fatalf("took %v: the timeout did not bound the call", d)
			}
			e.noFaults()
			// The query tells what happened.
			want := orderpay.OutcomeNotPaid
			if f.applied {
				want = orderpay.OutcomeClosed
			}
			if q := e.ch.Query(context.Background(), "CL_f"); q.Outcome != want {
				t.Fatalf("query: %+v, want %s", q, want)
			}
		})
	}
}

func TestCancel_EachStateOfTheTrade(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{RefundDelay: time.Minute})
	pendingQR := e.accepted(t, "CA_pending", 500)
	waitQR := e.scanned(t, "CA_wait", 500)
	e.scanned(t, "CA_closed", 500)
	e.ch.Close(context.Background(), "CA_closed")
	e.paid(t, "CA_paid", 1234)
	e.paid(t, "CA_part", 1000)
	if r := e.ch.Refund(context.Background(), orderpay.RefundRequest{OutTradeNo: "CA_part", OutRefundNo: "p1", Amount: 100}); r.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("partial refund: %+v", r)
	}

	for _, tc := range []struct {
		outTradeNo string
		want       orderpay.Outcome
	}{
		{"CA_pending", orderpay.OutcomeClosed},
		{"CA_wait", orderpay.OutcomeClosed},
		{"CA_closed", orderpay.OutcomeClosed},
		{"CA_never", orderpay.OutcomeClosed}, // never precreated: nothing can be paid under it now
		{"CA_paid", orderpay.OutcomeRefundPending},
		{"CA_part", orderpay.OutcomeUnknown}, // refunds exist: ACQ.TRADE_STATUS_ERROR, query
	} {
		res := e.ch.Cancel(context.Background(), tc.outTradeNo)
		if res.Outcome != tc.want {
			t.Errorf("cancel %s: %+v, want %s", tc.outTradeNo, res, tc.want)
		}
	}
	for _, qr := range []string{pendingQR, waitQR} {
		if _, err := e.sim.Pay(context.Background(), qr); err == nil {
			t.Fatal("paid after a cancel")
		}
	}
	if pre := e.precreate(t, "CA_never", 500, e.clock.Now().Add(time.Hour), ""); pre.Outcome != orderpay.OutcomeRejected {
		t.Fatalf("precreate after cancel: %+v, want Rejected", pre)
	}

	// The paid trade: the cancel's refund is numbered with the out_trade_no, and confirmed
	// like any refund.
	res := e.ch.Cancel(context.Background(), "CA_paid")
	if res.Outcome != orderpay.OutcomeRefundPending || res.OutRefundNo != "CA_paid" || res.TradeNo == "" {
		t.Fatalf("cancel again: %+v", res)
	}
	if q := e.ch.QueryRefund(context.Background(), "CA_paid", res.OutRefundNo); q.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("refund query before settlement: %+v", q)
	}
	e.clock.Advance(time.Minute)
	if q := e.ch.QueryRefund(context.Background(), "CA_paid", res.OutRefundNo); q.Outcome != orderpay.OutcomeRefunded || q.Amount != 1234 {
		t.Fatalf("refund query after settlement: %+v, want Refunded 1234", q)
	}
	if got := e.refunded(t, "CA_paid"); got != 1234 {
		t.Fatalf("refunded %d at the channel, want 1234", got)
	}
}

func TestCancel_RetryFlagYAndFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, sim.Config{})
			qr := e.accepted(t, "CA_f", 500)
			e.fault(t, sim.MethodCancel, f.kind, f.applied)
			res := e.faulty(t, f.kind).Cancel(context.Background(), "CA_f")
			if res.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("cancel: %+v, want Unknown", res)
			}
			if (f.kind == sim.FaultSystemError || f.kind == sim.FaultUnknownError || f.kind == sim.FaultRateLimited) &&
				!strings.Contains(res.Detail, "retry_flag=Y") {
				t.Errorf("detail %q does not show retry_flag=Y", res.Detail)
			}
			e.noFaults()
			_, err := e.sim.Scan(context.Background(), qr)
			if cancelled := err != nil; cancelled != f.applied {
				t.Fatalf("scan after the cancel: %v, want cancelled=%v", err, f.applied)
			}
		})
	}
}

func TestCancel_SignedGatewayAnswers(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	for _, tc := range []struct {
		reply string
		want  orderpay.Outcome
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","retry_flag":"N","action":"close"}`, orderpay.OutcomeClosed},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","retry_flag":"N","action":"refund"}`, orderpay.OutcomeRefundPending},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","retry_flag":"Y","action":"close"}`, orderpay.OutcomeUnknown},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","retry_flag":"N"}`, orderpay.OutcomeUnknown},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","retry_flag":"N","action":"something_new"}`, orderpay.OutcomeUnknown},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","retry_flag":"N","action":"close"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","retry_flag":"N"}`, orderpay.OutcomeNotPaid},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR","retry_flag":"Y"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR","retry_flag":"N"}`, orderpay.OutcomeUnknown},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown},
	} {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		if got := ch.Cancel(context.Background(), "OC_1"); got.Outcome != tc.want {
			t.Errorf("cancel %s: %s (%s), want %s", tc.reply, got.Outcome, got.Detail, tc.want)
		}
	}
	closes := []struct {
		reply string
		want  orderpay.Outcome
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1"}`, orderpay.OutcomeClosed},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","trade_no":"1"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}`, orderpay.OutcomeNotPaid},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, orderpay.OutcomeUnknown},
		{`{"code":"40005","msg":"Call Limited","sub_code":"aop.ACQ.CALL_LIMITED"}`, orderpay.OutcomeUnknown},
		{`{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, orderpay.OutcomeUnknown},
	}
	for _, tc := range closes {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		if got := ch.Close(context.Background(), "OC_1"); got.Outcome != tc.want {
			t.Errorf("close %s: %s (%s), want %s", tc.reply, got.Outcome, got.Detail, tc.want)
		}
	}
}

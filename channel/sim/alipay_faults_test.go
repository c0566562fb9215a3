package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
)

// alipayAnswer is what a client made of one gateway call under a fault: the verified codes, or
// the error the SDK returned (a timeout, a non-JSON body, an unsigned or forged answer).
type alipayAnswer struct {
	code, subCode, retryFlag string
	err                      error
}

func (a alipayAnswer) is(code, subCode string) bool {
	return a.err == nil && a.code == code && a.subCode == subCode
}

// alipayFaultCase is one call fault on one of the Alipay methods this file covers: the rule, the
// state it meets, the call, what the caller sees, and whether the operation took effect.
type alipayFaultCase struct {
	name    string
	rule    sim.FaultRule
	prepare func(t *testing.T, b *bundle) string // returns the QR code, if any
	call    func(ctx context.Context, b *bundle) alipayAnswer
	answer  func(a alipayAnswer) bool
	effect  func(t *testing.T, b *bundle, qr string)
}

func alipayRefundCall(ctx context.Context, b *bundle) alipayAnswer {
	rsp, err := b.client.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: "FT", OutRequestNo: "FT_r1", RefundAmount: "10.00"})
	if err != nil {
		return alipayAnswer{err: err}
	}
	return alipayAnswer{code: string(rsp.Code), subCode: rsp.SubCode}
}

func alipayCloseCall(ctx context.Context, b *bundle) alipayAnswer {
	rsp, err := b.client.TradeClose(ctx, alipay.TradeClose{OutTradeNo: "FT"})
	if err != nil {
		return alipayAnswer{err: err}
	}
	return alipayAnswer{code: string(rsp.Code), subCode: rsp.SubCode}
}

func alipayCancelCall(ctx context.Context, b *bundle) alipayAnswer {
	rsp, err := b.client.TradeCancel(ctx, alipay.TradeCancel{OutTradeNo: "FT"})
	if err != nil {
		return alipayAnswer{err: err}
	}
	return alipayAnswer{code: string(rsp.Code), subCode: rsp.SubCode, retryFlag: rsp.RetryFlag}
}

func alipayRefundQueryCall(ctx context.Context, b *bundle) alipayAnswer {
	rsp, err := b.client.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: "FT", OutRequestNo: "FT"})
	if err != nil {
		return alipayAnswer{err: err}
	}
	return alipayAnswer{code: string(rsp.Code), subCode: rsp.SubCode}
}

func alipayBillCall(ctx context.Context, b *bundle) alipayAnswer {
	rsp, err := b.client.BillDownloadURLQuery(ctx, alipay.BillDownloadURLQuery{BillType: "trade", BillDate: "2025-03-13"})
	if err != nil {
		return alipayAnswer{err: err}
	}
	return alipayAnswer{code: string(rsp.Code), subCode: rsp.SubCode}
}

func alipayPaidFT(t *testing.T, b *bundle) string {
	b.alipayPaid(t, "FT", "10.00")
	return ""
}

func alipayPendingFT(t *testing.T, b *bundle) string {
	return b.precreate(t, "FT", "10.00", b.clock.Now().Add(time.Hour), "")
}

func alipayScannedFT(t *testing.T, b *bundle) string { return b.alipayScanned(t, "FT", "10.00") }

func alipayNoState(*testing.T, *bundle) string { return "" }

func alipayTimedOut(a alipayAnswer) bool { return errors.Is(a.err, context.DeadlineExceeded) }

// alipayNoVerifiedAnswer: the SDK refused the body (not JSON, or its signature does not verify).
func alipayNoVerifiedAnswer(a alipayAnswer) bool {
	return a.err != nil && !errors.Is(a.err, context.DeadlineExceeded)
}

// alipayUnsignedWith: the SDK returned the unsigned body as an *alipay.Error, unverified.
func alipayUnsignedWith(code, subCode string) func(alipayAnswer) bool {
	return func(a alipayAnswer) bool {
		var e *alipay.Error
		return errors.As(a.err, &e) && e != nil && string(e.Code) == code && e.SubCode == subCode
	}
}

func alipayRefunded(want int64) func(t *testing.T, b *bundle, _ string) {
	return func(t *testing.T, b *bundle, _ string) {
		t.Helper()
		if e := alipayEntry(t, b.sim, "FT"); e.Refunded != want || len(b.sim.AlipayRefunds("FT")) != min(int(want), 1) {
			t.Fatalf("ledger %+v, refunds %+v; want refunded %d", e, b.sim.AlipayRefunds("FT"), want)
		}
	}
}

func alipayStatus(want string) func(t *testing.T, b *bundle, _ string) {
	return func(t *testing.T, b *bundle, _ string) {
		t.Helper()
		if e := alipayEntry(t, b.sim, "FT"); e.Status != want {
			t.Fatalf("ledger %+v, want %s", e, want)
		}
	}
}

// alipayScannable checks whether the pending code can still be scanned.
func alipayScannable(want bool) func(t *testing.T, b *bundle, qr string) {
	return func(t *testing.T, b *bundle, qr string) {
		t.Helper()
		_, err := b.sim.Scan(context.Background(), qr)
		if got := err == nil; got != want {
			t.Fatalf("scan after the call: err %v, want scannable=%v", err, want)
		}
		if !want && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("scan: err %v, want ECONFLICT", err)
		}
	}
}

func alipayNoEffect(*testing.T, *bundle, string) {}

func alipayRule(method, kind string, applied bool) sim.FaultRule {
	return sim.FaultRule{Channel: "alipay", Method: method, Kind: kind, Applied: applied}
}

func TestAlipayFaults_NewMethodsAnswerAndTakeEffectAsTheRuleSays(t *testing.T) {
	t.Parallel()
	cases := []alipayFaultCase{
		// refund: applied means the money went back although the caller cannot know.
		{"refund timeout applied", alipayRule(sim.MethodRefund, sim.FaultTimeout, true), alipayPaidFT, alipayRefundCall, alipayTimedOut, alipayRefunded(1000)},
		{"refund timeout not applied", alipayRule(sim.MethodRefund, sim.FaultTimeout, false), alipayPaidFT, alipayRefundCall, alipayTimedOut, alipayRefunded(0)},
		{"refund http_500 applied", alipayRule(sim.MethodRefund, sim.FaultHTTP500, true), alipayPaidFT, alipayRefundCall, alipayNoVerifiedAnswer, alipayRefunded(1000)},
		{"refund http_500 not applied", alipayRule(sim.MethodRefund, sim.FaultHTTP500, false), alipayPaidFT, alipayRefundCall, alipayNoVerifiedAnswer, alipayRefunded(0)},
		{"refund system_error applied", alipayRule(sim.MethodRefund, sim.FaultSystemError, true), alipayPaidFT, alipayRefundCall,
			func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") }, alipayRefunded(1000)},
		{"refund system_error not applied", alipayRule(sim.MethodRefund, sim.FaultSystemError, false), alipayPaidFT, alipayRefundCall,
			func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") }, alipayRefunded(0)},
		{"refund unknown_error applied", alipayRule(sim.MethodRefund, sim.FaultUnknownError, true), alipayPaidFT, alipayRefundCall,
			func(a alipayAnswer) bool { return a.is("20000", "isp.unknow-error") }, alipayRefunded(1000)},
		{"refund unknown_error not applied", alipayRule(sim.MethodRefund, sim.FaultUnknownError, false), alipayPaidFT, alipayRefundCall,
			func(a alipayAnswer) bool { return a.is("20000", "isp.unknow-error") }, alipayRefunded(0)},
		{"refund unsigned applied", alipayRule(sim.MethodRefund, sim.FaultUnsigned, true), alipayPaidFT, alipayRefundCall,
			alipayUnsignedWith("10000", ""), alipayRefunded(1000)},
		{"refund unsigned not applied", alipayRule(sim.MethodRefund, sim.FaultUnsigned, false), alipayPaidFT, alipayRefundCall,
			alipayUnsignedWith("40004", "ACQ.SYSTEM_ERROR"), alipayRefunded(0)},
		{"refund bad_signature applied", alipayRule(sim.MethodRefund, sim.FaultBadSignature, true), alipayPaidFT, alipayRefundCall, alipayNoVerifiedAnswer, alipayRefunded(1000)},
		{"refund bad_signature not applied", alipayRule(sim.MethodRefund, sim.FaultBadSignature, false), alipayPaidFT, alipayRefundCall, alipayNoVerifiedAnswer, alipayRefunded(0)},
		{"refund rate_limited", alipayRule(sim.MethodRefund, sim.FaultRateLimited, false), alipayPaidFT, alipayRefundCall,
			func(a alipayAnswer) bool { return a.is("40005", "aop.ACQ.CALL_LIMITED") }, alipayRefunded(0)},

		// close
		{"close timeout applied", alipayRule(sim.MethodClose, sim.FaultTimeout, true), alipayScannedFT, alipayCloseCall, alipayTimedOut, alipayStatus(sim.AlipayTradeClosed)},
		{"close timeout not applied", alipayRule(sim.MethodClose, sim.FaultTimeout, false), alipayScannedFT, alipayCloseCall, alipayTimedOut, alipayStatus(sim.AlipayWaitBuyerPay)},
		{"close http_500 not applied", alipayRule(sim.MethodClose, sim.FaultHTTP500, false), alipayScannedFT, alipayCloseCall, alipayNoVerifiedAnswer, alipayStatus(sim.AlipayWaitBuyerPay)},
		{"close unknown_error applied", alipayRule(sim.MethodClose, sim.FaultUnknownError, true), alipayScannedFT, alipayCloseCall,
			func(a alipayAnswer) bool { return a.is("20000", "isp.unknow-error") }, alipayStatus(sim.AlipayTradeClosed)},
		{"close unsigned not applied", alipayRule(sim.MethodClose, sim.FaultUnsigned, false), alipayScannedFT, alipayCloseCall,
			alipayUnsignedWith("40004", "ACQ.SYSTEM_ERROR"), alipayStatus(sim.AlipayWaitBuyerPay)},
		{"close rate_limited", alipayRule(sim.MethodClose, sim.FaultRateLimited, false), alipayScannedFT, alipayCloseCall,
			func(a alipayAnswer) bool { return a.is("40005", "aop.ACQ.CALL_LIMITED") }, alipayStatus(sim.AlipayWaitBuyerPay)},

		// cancel: a failed cancel says retry_flag=Y.
		{"cancel system_error not applied", alipayRule(sim.MethodCancel, sim.FaultSystemError, false), alipayPendingFT, alipayCancelCall,
			func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") && a.retryFlag == "Y" }, alipayScannable(true)},
		{"cancel system_error applied", alipayRule(sim.MethodCancel, sim.FaultSystemError, true), alipayPendingFT, alipayCancelCall,
			func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") && a.retryFlag == "Y" }, alipayScannable(false)},
		{"cancel rate_limited", alipayRule(sim.MethodCancel, sim.FaultRateLimited, false), alipayPendingFT, alipayCancelCall,
			func(a alipayAnswer) bool { return a.is("40005", "aop.ACQ.CALL_LIMITED") && a.retryFlag == "Y" }, alipayScannable(true)},
		{"cancel timeout applied on a paid trade", alipayRule(sim.MethodCancel, sim.FaultTimeout, true), alipayPaidFT, alipayCancelCall, alipayTimedOut, alipayRefunded(1000)},
		{"cancel bad_signature applied", alipayRule(sim.MethodCancel, sim.FaultBadSignature, true), alipayPendingFT, alipayCancelCall, alipayNoVerifiedAnswer, alipayScannable(false)},
		{"cancel http_500 not applied", alipayRule(sim.MethodCancel, sim.FaultHTTP500, false), alipayPendingFT, alipayCancelCall, alipayNoVerifiedAnswer, alipayScannable(true)},

		// refund query and bill: nothing to take effect, only the answer.
		{"refund query unknown_error", alipayRule(sim.MethodRefundQuery, sim.FaultUnknownError, false), alipayPaidFT, alipayRefundQueryCall,
			func(a alipayAnswer) bool { return a.is("20000", "isp.unknow-error") }, alipayNoEffect},
		{"refund query bad_signature applied", alipayRule(sim.MethodRefundQuery, sim.FaultBadSignature, true), alipayPaidFT, alipayRefundQueryCall, alipayNoVerifiedAnswer, alipayNoEffect},
		{"refund query timeout", alipayRule(sim.MethodRefundQuery, sim.FaultTimeout, false), alipayPaidFT, alipayRefundQueryCall, alipayTimedOut, alipayNoEffect},
		{"bill system_error", alipayRule(sim.MethodBill, sim.FaultSystemError, false), alipayNoState, alipayBillCall,
			func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") }, alipayNoEffect},
		{"bill unsigned applied", alipayRule(sim.MethodBill, sim.FaultUnsigned, true), alipayNoState, alipayBillCall, alipayUnsignedWith("10000", ""), alipayNoEffect},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{})
			qr := tc.prepare(t, b)
			if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{tc.rule}}); err != nil {
				t.Fatal(err)
			}
			// A timeout fault holds the answer until the client gives up, after 300 ms. Other
			// faults answer, but a forged signature may first wait for the forger's key.
			limit := 10 * time.Second
			if tc.rule.Kind == sim.FaultTimeout {
				limit = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			a := tc.call(ctx, b)
			if !tc.answer(a) {
				t.Fatalf("answer %+v", a)
			}
			if st := b.sim.Faults(); st.Fired[0] != 1 {
				t.Fatalf("the rule fired %d times, want 1", st.Fired[0])
			}
			_ = b.sim.SetFaults(sim.FaultPlan{})
			tc.effect(t, b, qr)
		})
	}
}

// A refund retried after an answer that was lost under a fault refunds once.
func TestAlipayFaults_RefundResentAfterAnAppliedTimeoutRefundsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	alipayPaidFT(t, b)
	r := alipayRule(sim.MethodRefund, sim.FaultTimeout, true)
	r.Limit = 1
	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{r}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if a := alipayRefundCall(ctx, b); !alipayTimedOut(a) {
		t.Fatalf("first call: %+v, want a timeout", a)
	}
	if rsp := b.alipayRefund(t, "FT", "FT_r1", "10.00"); rsp.Code != alipay.CodeSuccess || rsp.FundChange != "Y" || rsp.RefundFee != "10.00" {
		t.Fatalf("resend: %+v", rsp)
	}
	alipayRefunded(1000)(t, b, "")
}

// Fault draws for calls about one trade are keyed on its out_trade_no: naming the trade by
// trade_no, or using other refund numbers, meets the same faults.
func TestAlipayFaults_RefundCallsAreKeyedOnTheOutTradeNo(t *testing.T) {
	t.Parallel()
	const calls = 24
	plan := sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{{
		Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultRateLimited, Probability: 0.5,
	}}}
	pattern := func(byTradeNo bool) []bool {
		b := setup(t, sim.Config{})
		tradeNo := b.alipayPaid(t, "FK", "10.00")
		if err := b.sim.SetFaults(plan); err != nil {
			t.Fatal(err)
		}
		var fired []bool
		for i := range calls {
			req := alipay.TradeRefund{OutTradeNo: "FK", OutRequestNo: "n" + string(rune('a'+i)), RefundAmount: "10.01"}
			if byTradeNo {
				req.OutTradeNo, req.TradeNo = "", tradeNo
				req.OutRequestNo = "other" + string(rune('a'+i))
			}
			rsp, err := b.client.TradeRefund(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			fired = append(fired, rsp.Code == "40005")
		}
		return fired
	}
	byOut, byTradeNo := pattern(false), pattern(true)
	some := 0
	for i := range byOut {
		if byOut[i] {
			some++
		}
		if byOut[i] != byTradeNo[i] {
			t.Fatalf("draw %d differs: by out_trade_no %v, by trade_no %v", i, byOut, byTradeNo)
		}
	}
	if some == 0 || some == calls {
		t.Fatalf("probability 0.5 fired %d of %d times", some, calls)
	}
}

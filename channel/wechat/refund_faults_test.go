package wechat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// refundFault puts refund fault rules in force at the simulator.
func (e *env) refundFault(t *testing.T, rules ...sim.FaultRule) {
	t.Helper()
	if err := e.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: rules}); err != nil {
		t.Fatal(err)
	}
}

func wxRefundReq(outTradeNo, outRefundNo string, amount, total int64) orderpay.RefundRequest {
	return orderpay.RefundRequest{OutTradeNo: outTradeNo, OutRefundNo: outRefundNo, Amount: amount, Total: total, Reason: "退货"}
}

// A balance refusal (403 NOT_ENOUGH) is RefundRetry naming the code, and refunds nothing; a
// refusal for good is still Rejected while the account is short; after the top-up the same
// request under the same number refunds once, and more than what remains is Rejected.
func TestRefund_BalanceRefusalIsRetryAndRefundsOnceAfterTopUp(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	no := e.paid(t, 1000)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1})
	req := wxRefundReq(no, no+"R1", 400, 1000)

	for _, what := range []string{"refund", "the same refund while still short"} {
		res := e.ch.Refund(ctx, req)
		if res.Outcome != orderpay.OutcomeRefundRetry || !strings.Contains(res.Detail, "NOT_ENOUGH") || res.Amount != 0 || res.Raw == "" {
			t.Fatalf("%s: %+v, want RefundRetry with NOT_ENOUGH", what, res)
		}
	}
	if l := e.ledger(t, no); l.Refunded != 0 || len(l.Refunds) != 0 {
		t.Fatalf("ledger after the refusals: %+v, want nothing refunded", l)
	}
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "RESOURCE_NOT_EXISTS") {
		t.Fatalf("query of the refused refund: %+v, want Unknown", q)
	}
	// A request WeChat refuses for good is Rejected, short or not (here: a total that is
	// not the order's).
	if r := e.ch.Refund(ctx, wxRefundReq(no, no+"R2", 100, 999)); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "INVALID_REQUEST") {
		t.Fatalf("a wrong total while short: %+v, want Rejected", r)
	}

	if err := e.sim.TopUp(orderpay.ChannelWechat); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"the same refund after the top-up", "its resend"} {
		if res := e.ch.Refund(ctx, req); res.Outcome != orderpay.OutcomeRefunded || res.Amount != 400 {
			t.Fatalf("%s: %+v, want Refunded 400", what, res)
		}
	}
	l := e.ledger(t, no)
	if l.Refunded != 400 || len(l.Refunds) != 1 || l.Refunds[0].OutRefundNo != no+"R1" || l.Refunds[0].Amount != 400 ||
		l.Refunds[0].Status != sim.LedgerRefundSuccess || l.Refunds[0].SettledAt.IsZero() {
		t.Fatalf("ledger after the top-up: %+v, want exactly one refund of 400", l)
	}
	if r := e.ch.Refund(ctx, wxRefundReq(no, no+"R3", 601, 1000)); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "INVALID_REQUEST") {
		t.Fatalf("more than what remains: %+v, want Rejected", r)
	}
	if l := e.ledger(t, no); l.Refunded != 400 || len(l.Refunds) != 1 {
		t.Fatalf("ledger after the refused refund: %+v", l)
	}
}

func TestRefund_BalanceShortageEndsAfterItsDelayOnTheSimClock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	no := e.paid(t, 500)
	e.refundFault(t, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: sim.Duration(30 * time.Minute), Limit: 1})
	req := wxRefundReq(no, no+"R1", 500, 500)
	if r := e.ch.Refund(ctx, req); r.Outcome != orderpay.OutcomeRefundRetry {
		t.Fatalf("refund: %+v, want RefundRetry", r)
	}
	e.clock.Advance(29 * time.Minute)
	if r := e.ch.Refund(ctx, req); r.Outcome != orderpay.OutcomeRefundRetry {
		t.Fatalf("a minute before the shortage ends: %+v, want RefundRetry", r)
	}
	e.clock.Advance(time.Minute)
	if r := e.ch.Refund(ctx, req); r.Outcome != orderpay.OutcomeRefunded || r.Amount != 500 {
		t.Fatalf("once the shortage ended: %+v, want Refunded 500", r)
	}
	if l := e.ledger(t, no); l.Refunded != 500 || len(l.Refunds) != 1 {
		t.Fatalf("ledger %+v", l)
	}
}

// 429 FREQUENCY_LIMITED on a refund create says the refund was not accepted: RefundRetry.
// The same answer to a refund query says nothing about the refund: Unknown.
func TestRefund_FrequencyLimitIsRetryOnCreateAndUnknownOnQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	no := e.paid(t, 800)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultRateLimited, Limit: 1})
	req := wxRefundReq(no, no+"R1", 800, 800)
	if r := e.ch.Refund(ctx, req); r.Outcome != orderpay.OutcomeRefundRetry || !strings.Contains(r.Detail, "429 FREQUENCY_LIMITED") {
		t.Fatalf("rate-limited refund: %+v, want RefundRetry", r)
	}
	if l := e.ledger(t, no); l.Refunded != 0 || len(l.Refunds) != 0 {
		t.Fatalf("a rate-limited refund moved money: %+v", l)
	}
	if r := e.ch.Refund(ctx, req); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("the same number again: %+v, want Refunded", r)
	}
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefundQuery, Kind: sim.FaultRateLimited, Limit: 1})
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "429 FREQUENCY_LIMITED") {
		t.Fatalf("rate-limited refund query: %+v, want Unknown", q)
	}
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("the query again: %+v, want Refunded", q)
	}
	if l := e.ledger(t, no); l.Refunded != 800 || len(l.Refunds) != 1 {
		t.Fatalf("ledger %+v, want exactly one refund of 800", l)
	}
}

// A refund WeChat accepts and then ends ABNORMAL or CLOSED: the create is pending, the query
// after it ends is RefundAbnormal, and so is its REFUND.ABNORMAL or REFUND.CLOSED
// notification; nothing was refunded, and the amount can go back under another number.
func TestRefund_AbnormalAndClosedEndsAreRefundAbnormal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kind, status string }{
		{sim.FaultAbnormal, sim.WechatRefundAbnormal},
		{sim.FaultClosed, sim.WechatRefundClosed},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			e, m, refunding := refundEnv(t, false)
			ctx := context.Background()
			no := e.paid(t, 1000)
			e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: tc.kind, Delay: sim.Duration(5 * time.Minute), Limit: 1})
			if r := refunding.Refund(ctx, wxRefundReq(no, no+"R1", 700, 1000)); r.Outcome != orderpay.OutcomeRefundPending || r.Amount != 700 {
				t.Fatalf("create: %+v, want RefundPending", r)
			}
			if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefundPending {
				t.Fatalf("query before it ends: %+v, want RefundPending", q)
			}
			e.clock.Advance(5 * time.Minute)
			q := e.ch.QueryRefund(ctx, no, no+"R1")
			if q.Outcome != orderpay.OutcomeRefundAbnormal || q.Amount != 700 || !strings.Contains(q.Detail, tc.status) {
				t.Fatalf("query after it ends: %+v, want RefundAbnormal (%s)", q, tc.status)
			}
			_, ns, errs := m.wait(t, 1)
			if n := ns[0]; errs[0] != nil || n.Outcome != orderpay.OutcomeRefundAbnormal || n.OutRefundNo != no+"R1" ||
				n.RefundAmount != 700 || !strings.HasPrefix(n.Detail, "REFUND."+tc.status) {
				t.Fatalf("notification: %+v %v, want a verified RefundAbnormal REFUND.%s", n, errs[0], tc.status)
			}
			l := e.ledger(t, no)
			if l.Refunded != 0 || len(l.Refunds) != 1 || l.Refunds[0] != (sim.LedgerRefund{OutRefundNo: no + "R1", Amount: 700, Status: tc.status}) {
				t.Fatalf("ledger: %+v, want one %s refund and nothing refunded", l, tc.status)
			}
			if r := e.ch.Refund(ctx, wxRefundReq(no, no+"R2", 1000, 1000)); r.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("the whole amount under another number: %+v, want Refunded", r)
			}
			if l := e.ledger(t, no); l.Refunded != 1000 {
				t.Fatalf("ledger after the second refund: %+v", l)
			}
		})
	}
}

// 403 USER_ACCOUNT_ABNORMAL: the buyer's account cannot take the money back, so a person
// must act; nothing was refunded.
func TestRefund_UserAccountAbnormalIsRefundAbnormal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	no := e.paid(t, 900)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultAccountAbnormal})
	r := e.ch.Refund(ctx, wxRefundReq(no, no+"R1", 900, 900))
	if r.Outcome != orderpay.OutcomeRefundAbnormal || !strings.Contains(r.Detail, "USER_ACCOUNT_ABNORMAL") || r.Amount != 0 {
		t.Fatalf("refund: %+v, want RefundAbnormal with USER_ACCOUNT_ABNORMAL", r)
	}
	if l := e.ledger(t, no); l.Refunded != 0 || len(l.Refunds) != 0 {
		t.Fatalf("ledger %+v, want nothing refunded", l)
	}
}

// A slow refund is PROCESSING (RefundPending) until the rule's delay has passed on the
// simulated clock, however short Config.RefundDelay is; then Refunded.
func TestRefund_SlowIsPendingUntilItsDelay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	no := e.paid(t, 600)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(time.Hour)})
	if r := e.ch.Refund(ctx, wxRefundReq(no, no+"R1", 600, 600)); r.Outcome != orderpay.OutcomeRefundPending || !strings.Contains(r.Detail, "PROCESSING") {
		t.Fatalf("refund: %+v, want RefundPending", r)
	}
	e.clock.Advance(time.Hour - time.Second)
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("query before the delay: %+v, want RefundPending", q)
	}
	if l := e.ledger(t, no); l.Refunded != 0 || len(l.Refunds) != 1 || l.Refunds[0].Status != sim.LedgerRefundProcessing {
		t.Fatalf("ledger before the delay: %+v", l)
	}
	e.clock.Advance(time.Second)
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefunded || q.Amount != 600 {
		t.Fatalf("query after the delay: %+v, want Refunded 600", q)
	}
	if l := e.ledger(t, no); l.Refunded != 600 || l.Refunds[0].Status != sim.LedgerRefundSuccess {
		t.Fatalf("ledger after the delay: %+v", l)
	}
}

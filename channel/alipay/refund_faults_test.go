package alipay_test

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

// entry is outTradeNo's ledger entry at the simulated Alipay.
func (e *env) entry(t *testing.T, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, l := range e.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	t.Fatalf("no trade %s at the channel", outTradeNo)
	return sim.LedgerEntry{}
}

// A balance refusal is RefundRetry naming Alipay's sub_code, and refunds nothing; a refusal
// for good (more than what remains) is still Rejected while the account is short; after the
// top-up the same request under the same number refunds once.
func TestRefund_BalanceRefusalIsRetryAndRefundsOnceAfterTopUp(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	ctx := context.Background()
	e.paid(t, "RB_1", 1000)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelAlipay, Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1})
	req := refundReq("RB_1", "RB_1_a", 400)

	for _, what := range []string{"refund", "the same refund while still short"} {
		res := e.ch.Refund(ctx, req)
		if res.Outcome != orderpay.OutcomeRefundRetry || !strings.Contains(res.Detail, "ACQ.SELLER_BALANCE_NOT_ENOUGH") ||
			res.Amount != 0 || res.Raw == "" {
			t.Fatalf("%s: %+v, want RefundRetry with ACQ.SELLER_BALANCE_NOT_ENOUGH", what, res)
		}
	}
	if l := e.entry(t, "RB_1"); l.Refunded != 0 || len(l.Refunds) != 0 {
		t.Fatalf("ledger after the refusals: %+v, want nothing refunded", l)
	}
	// Alipay's query cannot tell "never received" from "not settled": pending, never done.
	if q := e.ch.QueryRefund(ctx, "RB_1", "RB_1_a"); q.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("query of the refused refund: %+v", q)
	}
	if r := e.ch.Refund(ctx, refundReq("RB_1", "RB_1_b", 1001)); r.Outcome != orderpay.OutcomeRejected ||
		!strings.Contains(r.Detail, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL") {
		t.Fatalf("more than the trade while short: %+v, want Rejected", r)
	}

	if err := e.sim.TopUp(orderpay.ChannelAlipay); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"the same refund after the top-up", "its resend"} {
		if res := e.ch.Refund(ctx, req); res.Outcome != orderpay.OutcomeRefunded || res.Amount != 400 {
			t.Fatalf("%s: %+v, want Refunded 400", what, res)
		}
	}
	l := e.entry(t, "RB_1")
	if l.Refunded != 400 || len(l.Refunds) != 1 || l.Refunds[0].OutRefundNo != "RB_1_a" || l.Refunds[0].Amount != 400 ||
		l.Refunds[0].Status != sim.LedgerRefundSuccess {
		t.Fatalf("ledger after the top-up: %+v, want exactly one refund of 400", l)
	}
	if r := e.ch.Refund(ctx, refundReq("RB_1", "RB_1_c", 601)); r.Outcome != orderpay.OutcomeRejected {
		t.Fatalf("more than what remains: %+v, want Rejected", r)
	}
	if l := e.entry(t, "RB_1"); l.Refunded != 400 || len(l.Refunds) != 1 {
		t.Fatalf("ledger after the refused refund: %+v", l)
	}
}

func TestRefund_BalanceShortageEndsAfterItsDelayOnTheSimClock(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	ctx := context.Background()
	e.paid(t, "RBD_1", 500)
	e.refundFault(t, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: sim.Duration(30 * time.Minute), Limit: 1})
	req := refundReq("RBD_1", "RBD_1_a", 500)
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
	if l := e.entry(t, "RBD_1"); l.Refunded != 500 || len(l.Refunds) != 1 {
		t.Fatalf("ledger %+v", l)
	}
}

// A slow refund is pending (fund_change=N, then no refund_status) until the rule's delay
// has passed on the simulated clock, then Refunded.
func TestRefund_SlowIsPendingUntilItsDelay(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	ctx := context.Background()
	e.paid(t, "RS_1", 600)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelAlipay, Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(time.Hour)})
	if r := e.ch.Refund(ctx, refundReq("RS_1", "RS_1_a", 600)); r.Outcome != orderpay.OutcomeRefundPending || !strings.Contains(r.Detail, "fund_change=N") {
		t.Fatalf("refund: %+v, want RefundPending", r)
	}
	e.clock.Advance(time.Hour - time.Second)
	if q := e.ch.QueryRefund(ctx, "RS_1", "RS_1_a"); q.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("query before the delay: %+v, want RefundPending", q)
	}
	if l := e.entry(t, "RS_1"); l.Refunded != 0 || len(l.Refunds) != 1 || l.Refunds[0].Status != sim.LedgerRefundProcessing {
		t.Fatalf("ledger before the delay: %+v", l)
	}
	e.clock.Advance(time.Second)
	if q := e.ch.QueryRefund(ctx, "RS_1", "RS_1_a"); q.Outcome != orderpay.OutcomeRefunded || q.Amount != 600 {
		t.Fatalf("query after the delay: %+v, want Refunded 600", q)
	}
	if l := e.entry(t, "RS_1"); l.Refunded != 600 || l.Refunds[0].Status != sim.LedgerRefundSuccess {
		t.Fatalf("ledger after the delay: %+v", l)
	}
}

// Alipay has no refund-specific frequency refusal: the simulator's rate limit on a refund is
// the gateway's 40005, which says nothing definite and stays Unknown; nothing is refunded,
// and the same number then refunds once.
func TestRefund_RateLimitIsUnknownAndRefundsNothing(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	ctx := context.Background()
	e.paid(t, "RL_1", 300)
	e.refundFault(t, sim.FaultRule{Channel: orderpay.ChannelAlipay, Method: sim.MethodRefund, Kind: sim.FaultRateLimited, Limit: 1})
	if r := e.ch.Refund(ctx, refundReq("RL_1", "RL_1_a", 300)); r.Outcome != orderpay.OutcomeUnknown || !strings.Contains(r.Detail, "40005") {
		t.Fatalf("rate-limited refund: %+v, want Unknown (40005)", r)
	}
	if l := e.entry(t, "RL_1"); l.Refunded != 0 || len(l.Refunds) != 0 {
		t.Fatalf("ledger %+v", l)
	}
	if r := e.ch.Refund(ctx, refundReq("RL_1", "RL_1_a", 300)); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("the same number again: %+v", r)
	}
}

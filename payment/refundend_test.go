package payment_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
)

// paidAndRefused pays orderNo by channel and has the order system refuse the payment, so
// that the payment center records its full refund (due now); it returns the refund number.
func (b *bundle) paidAndRefused(t *testing.T, orderNo, channel string) string {
	t.Helper()
	ctx := context.Background()
	req := b.request(orderNo)
	req.Channel = channel
	res, err := b.svc.Pay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	b.deliver(t)
	outTradeNo := "P" + orderNo + "A01"
	if err := b.svc.RefundRejected(ctx, orderpay.PaymentSucceeded{PaymentNo: "P" + orderNo, OrderNo: orderNo, Amount: 4990,
		Channel: channel, OutTradeNo: outTradeNo}, orderpay.RefundReasonCancelled); err != nil {
		t.Fatal(err)
	}
	return payment.AutoRefundNo(outTradeNo)
}

func (b *bundle) refund(t *testing.T, no string) *orderpay.ChannelRefund {
	t.Helper()
	r, err := b.store.ChannelRefund(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// messages counts the unpublished outbox messages of a subject, and returns the last.
func (b *bundle) messages(t *testing.T, subject string) (int, orderpay.RefundEventPayload) {
	t.Helper()
	msgs, err := b.store.UnpublishedMessages(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var last orderpay.RefundEventPayload
	for _, m := range msgs {
		if m.Subject == subject {
			n++
			if err := json.Unmarshal(m.Payload, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n, last
}

// WeChat Pay accepts a refund, then it ends ABNORMAL (the buyer's card was closed): it goes
// to the operators' queue with the channel's words, the money still owed; an operator who
// paid it back by bank transfer resolves it, once, with the reference, and the payment
// counts the money returned.
func TestAbnormalRefundIsQueuedAndResolvedByAnOperator(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{}
	b := setupWith(t, func(c *payment.Config) { c.Observer = obs })
	ctx := context.Background()
	no := b.paidAndRefused(t, "AB1", orderpay.ChannelWechat)
	if err := b.sim.EndWechatRefund(no, sim.WechatRefundAbnormal); err != nil {
		t.Fatal(err)
	}
	b.refundAll(t)
	r := b.refund(t, no)
	if r.Status != orderpay.ChannelRefundNeedsAction || !strings.Contains(r.Problem, "ABNORMAL") || r.NeedsActionAt.IsZero() {
		t.Fatalf("refund after the channel ended it abnormally: %+v", r)
	}
	if obs.answers(orderpay.OutcomeRefundAbnormal) == 0 {
		t.Fatalf("refund answers %v: none abnormal", obs.refunds)
	}
	if l := b.ledger(t, "PAB1A01"); l.Refunded != 0 {
		t.Fatalf("the channel moved money for an abnormal refund: %+v", l)
	}
	queue, err := b.svc.RefundsNeedingAction(ctx, 10)
	if err != nil || len(queue) != 1 || queue[0].OutRefundNo != no || queue[0].OrderNo != "AB1" || queue[0].Amount != 4990 {
		t.Fatalf("queue %+v, %v", queue, err)
	}
	if n, ev := b.messages(t, orderpay.SubjectRefundNeedsAction); n != 1 || ev.OutRefundNo != no || ev.Problem != r.Problem || ev.OrderNo != "AB1" {
		t.Fatalf("%d refund.needs_action, last %+v", n, ev)
	}
	// Nothing more happens by itself.
	b.clock.Advance(30 * 24 * time.Hour)
	if got := b.refundAll(t); got != (payment.RefundResult{}) {
		t.Fatalf("the refund worker touched a queued refund: %+v", got)
	}

	// Only a refund of the queue can be resolved, and it needs a reference.
	if _, err := b.svc.ResolveRefund(ctx, no, "operator:admin", "", "note"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("resolve without a reference: %v", err)
	}
	for range 2 { // idempotent
		v, err := b.svc.ResolveRefund(ctx, no, "operator:admin", "BANK-2026-001", "transferred to the buyer's new card")
		if err != nil || v.Status != orderpay.ChannelRefundResolved || v.ResolvedBy != "operator:admin" || v.ResolvedRef != "BANK-2026-001" ||
			v.OrderNo != "AB1" {
			t.Fatalf("resolve: %+v, %v", v, err)
		}
	}
	if _, err := b.svc.ResolveRefund(ctx, no, "operator:admin", "BANK-2026-002", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("resolve again with another reference: %v", err)
	}
	if p := b.wantStatus(t, "PAB1", orderpay.PaymentSuccess); p.Refunded != 4990 {
		t.Fatalf("payment refunded %d, want 4990 once", p.Refunded)
	}
	if n, ev := b.messages(t, orderpay.SubjectRefundSucceeded); n != 1 || ev.Status != orderpay.ChannelRefundResolved || ev.ResolvedRef != "BANK-2026-001" {
		t.Fatalf("%d refund.succeeded, last %+v", n, ev)
	}
	if queue, _ := b.svc.RefundsNeedingAction(ctx, 10); len(queue) != 0 {
		t.Fatalf("queue after the resolution: %+v", queue)
	}
	h, _ := b.store.History(ctx, orderpay.EntityRefund, no)
	last := h[len(h)-1]
	if last.Event != string(orderpay.ChannelRefundEventResolve) || last.Actor != "operator:admin" || !strings.Contains(last.Reason, "BANK-2026-001") {
		t.Fatalf("history ends %+v", last)
	}
	// The operator's retry of a refund whose money is back changes nothing.
	if r, err := b.svc.RetryRefund(ctx, no, "operator:admin"); err != nil || r.Status != orderpay.ChannelRefundResolved {
		t.Fatalf("retry of a resolved refund: %+v, %v", r, err)
	}
}

// A refund the channel refuses for good (here a refund of more than the trade's total, as a
// bug would make it: the adapter refuses to send it) is never retried: it goes before an
// operator at once, on both channels. A refund on its way cannot be resolved outside the
// channel, which may still make it.
func TestRefundRefusedForGoodGoesBeforeAnOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		orderNo := "BUG" + channel
		auto := b.paidAndRefused(t, orderNo, channel)
		if _, err := b.svc.ResolveRefund(ctx, auto, "operator:admin", "BANK-1", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("%s: resolving a refund on its way: %v", channel, err)
		}
		bad := &orderpay.ChannelRefund{OutRefundNo: "X" + orderNo, OutTradeNo: "P" + orderNo + "A01", PaymentNo: "P" + orderNo,
			Channel: channel, Amount: 9999, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundPending,
			NextAt: b.clock.Now(), CreatedAt: b.clock.Now(), UpdatedAt: b.clock.Now()}
		if err := b.store.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateChannelRefund(ctx, bad) }); err != nil {
			t.Fatal(err)
		}
	}
	got := b.refundAll(t)
	if got.Succeeded != 2 || got.NeedsAction != 2 || got.Retrying != 0 {
		t.Fatalf("refund worker: %+v", got)
	}
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		r := b.refund(t, "XBUG"+channel)
		if r.Status != orderpay.ChannelRefundNeedsAction || !strings.Contains(r.Problem, "refused for good") || r.Tries != 0 {
			t.Fatalf("%s: %+v", channel, r)
		}
	}
}

// The merchant's balance cannot cover a refund, on each channel: the refusal is recorded and
// the refund is sent again on the retry plan, under its own number, each refusal in its
// history, until the simulator's account is topped up; then it succeeds, once, and the
// ledger shows exactly one refund of the amount.
func TestBalanceRefusalIsRetriedUntilTheBalanceIsRestored(t *testing.T) {
	t.Parallel()
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		t.Run(channel, func(t *testing.T) {
			t.Parallel()
			obs := &countingObserver{}
			b := setupWith(t, func(c *payment.Config) { c.Observer = obs }, func(c *sim.Config) {
				c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: channel, Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1}}}
			})
			ctx := context.Background()
			no := b.paidAndRefused(t, "BAL"+channel, channel)
			plan := orderpay.DefaultRefundRetryPlan
			first := b.clock.Now()
			for try := 1; try <= 3; try++ {
				got := b.refundAll(t)
				r := b.refund(t, no)
				if got.Retrying != 1 || r.Status != orderpay.ChannelRefundPending || r.Tries != try || r.Retried != try ||
					!r.RetryingSince.Equal(first) || !strings.Contains(r.Problem, "NOT_ENOUGH") {
					t.Fatalf("refusal %d: worker %+v, refund %+v", try, got, r)
				}
				if wait := r.NextAt.Sub(b.clock.Now()); wait != plan.Schedule[try-1] {
					t.Fatalf("refusal %d: next try in %s, want %s", try, wait, plan.Schedule[try-1])
				}
				// Not sent again before its time.
				if got := b.refundAll(t); got != (payment.RefundResult{}) {
					t.Fatalf("refusal %d: sent again early: %+v", try, got)
				}
				b.clock.Set(r.NextAt)
			}
			if l := b.ledger(t, "PBAL"+channel+"A01"); l.Refunded != 0 || len(l.Refunds) != 0 {
				t.Fatalf("a refused refund moved money: %+v", l)
			}
			if err := b.sim.TopUp(channel); err != nil {
				t.Fatal(err)
			}
			if got := b.refundAll(t); got.Succeeded != 1 {
				t.Fatalf("after the top-up: %+v", got)
			}
			r := b.refund(t, no)
			if r.Status != orderpay.ChannelRefundSuccess || r.Retried != 3 {
				t.Fatalf("refund %+v", r)
			}
			l := b.ledger(t, "PBAL"+channel+"A01")
			if l.Refunded != 4990 || len(l.Refunds) != 1 || l.Refunds[0].OutRefundNo != no || l.Refunds[0].Amount != 4990 {
				t.Fatalf("ledger %+v: one refund of 4990 under %s", l, no)
			}
			h, _ := b.store.History(ctx, orderpay.EntityRefund, no)
			retries := 0
			for _, e := range h {
				if e.Event == string(orderpay.ChannelRefundEventRetry) {
					retries++
				}
			}
			if retries != 3 {
				t.Fatalf("history has %d retries, want 3: %+v", retries, h)
			}
			if obs.answers(orderpay.OutcomeRefundRetry) != 3 || obs.answers(orderpay.OutcomeRefunded) != 1 {
				t.Fatalf("refund answers %v", obs.refunds)
			}
		})
	}
}

// A shortage nobody tops up: the retries run out within the plan's window and the refund
// goes before an operator with the last refusal; after the top-up an operator's retry sends
// it again under the same number and it succeeds once.
func TestRetriesThatRunOutGoBeforeAnOperatorWhoRetries(t *testing.T) {
	t.Parallel()
	plan := orderpay.RefundRetryPlan{Schedule: []time.Duration{time.Minute, 5 * time.Minute}, Every: time.Hour, For: 3 * time.Hour}
	b := setupWith(t, func(c *payment.Config) { c.RefundRetryPlan = plan }, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1}}}
	})
	ctx := context.Background()
	no := b.paidAndRefused(t, "RUN1", orderpay.ChannelAlipay)
	start := b.clock.Now()
	var tries int
	for {
		got := b.refundAll(t)
		r := b.refund(t, no)
		if r.Status == orderpay.ChannelRefundNeedsAction {
			if got.NeedsAction != 1 {
				t.Fatalf("worker %+v", got)
			}
			break
		}
		tries++
		if tries > 10 || r.NextAt.After(start.Add(plan.For)) {
			t.Fatalf("refusal %d: next try %s is past the window: %+v", tries, r.NextAt.Sub(start), r)
		}
		b.clock.Set(r.NextAt)
	}
	// 1m, 5m, then hourly: tries at +1m, +6m, +1h6m, +2h6m; the refusal at +2h6m has no
	// try left within 3 h.
	r := b.refund(t, no)
	if tries != 4 || r.Retried != 4 || !strings.Contains(r.Problem, "5 times") || !strings.Contains(r.Problem, "SELLER_BALANCE_NOT_ENOUGH") {
		t.Fatalf("after %d retries: %+v", tries, r)
	}
	if err := b.sim.TopUp(orderpay.ChannelAlipay); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if r, err := b.svc.RetryRefund(ctx, no, "operator:li"); err != nil || r.Status != orderpay.ChannelRefundPending || r.Tries != 0 {
			t.Fatalf("operator's retry: %+v, %v", r, err)
		}
	}
	if got := b.refundAll(t); got.Succeeded != 1 {
		t.Fatalf("after the operator's retry: %+v", got)
	}
	if l := b.ledger(t, "PRUN1A01"); l.Refunded != 4990 || len(l.Refunds) != 1 {
		t.Fatalf("ledger %+v", l)
	}
	h, _ := b.store.History(ctx, orderpay.EntityRefund, no)
	var byOperator bool
	for _, e := range h {
		byOperator = byOperator || (e.Event == string(orderpay.ChannelRefundEventOperatorRetry) && e.Actor == "operator:li")
	}
	if !byOperator {
		t.Fatalf("the operator's retry is not in the history: %+v", h)
	}
}

// A refund the channel accepted and settles slowly is queried until it settles, never
// taken as failed however long it takes; a WeChat refund refused for frequency is sent
// again a minute later.
func TestSlowAndFrequencyRefusedRefundsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{
			{Channel: orderpay.ChannelAlipay, Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(6 * time.Hour), Limit: 1},
			{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultRateLimited, Limit: 1},
		}}
	})
	slow := b.paidAndRefused(t, "SLOW1", orderpay.ChannelAlipay)
	freq := b.paidAndRefused(t, "FREQ1", orderpay.ChannelWechat)
	got := b.refundAll(t)
	if got.Pending != 1 || got.Retrying != 1 {
		t.Fatalf("first run: %+v", got)
	}
	if r := b.refund(t, freq); r.Status != orderpay.ChannelRefundPending || r.Tries != 1 || !strings.Contains(r.Problem, "FREQUENCY_LIMITED") {
		t.Fatalf("frequency refusal: %+v", r)
	}
	for range 100 {
		b.clock.Advance(5 * time.Minute)
		b.refundAll(t)
		if b.refund(t, slow).Status == orderpay.ChannelRefundSuccess {
			break
		}
		if r := b.refund(t, slow); r.Status != orderpay.ChannelRefundProcessing {
			t.Fatalf("slow refund %+v", r)
		}
	}
	for _, no := range []string{slow, freq} {
		if r := b.refund(t, no); r.Status != orderpay.ChannelRefundSuccess {
			t.Fatalf("refund %+v did not end", r)
		}
	}
	if l := b.ledger(t, "PSLOW1A01"); l.Refunded != 4990 || len(l.Refunds) != 1 {
		t.Fatalf("ledger %+v", l)
	}
}

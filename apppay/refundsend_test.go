package apppay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/clocktest"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

// refusingChannel is a channel whose refunds meet what a real one does, at random: made at
// once, accepted and settled later, refused for now (the merchant's balance), or no answer
// at all, sometimes after taking effect. Like a real channel it refunds a refund number
// once, however often it is sent, and never more than a trade's amount.
type refusingChannel struct {
	mu       sync.Mutex
	rng      *rand.Rand
	made     map[string]int64 // out_refund_no → amount refunded
	byTrade  map[string]int64 // out_trade_no → refunded in all
	amount   map[string]int64 // out_trade_no → its amount
	overdraw int              // refunds asked past a trade's amount
}

func (c *refusingChannel) Name() string { return orderpay.ChannelAlipay }
func (c *refusingChannel) Precreate(context.Context, orderpay.PrecreateRequest) orderpay.PrecreateResult {
	return orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown}
}
func (c *refusingChannel) Query(context.Context, string) orderpay.QueryResult {
	return orderpay.QueryResult{Outcome: orderpay.OutcomeUnknown}
}
func (c *refusingChannel) Close(context.Context, string) orderpay.CloseResult {
	return orderpay.CloseResult{Outcome: orderpay.OutcomeUnknown}
}
func (c *refusingChannel) VerifyNotification(context.Context, http.Header, []byte) (*orderpay.Notification, error) {
	return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "no notifications here")
}
func (c *refusingChannel) Ack() orderpay.NotifyReply                    { return orderpay.NotifyReply{} }
func (c *refusingChannel) NotificationTrade(http.Header, []byte) string { return "" }

// make refunds r once; it reports false if that would pass the trade's amount.
func (c *refusingChannel) make(r orderpay.RefundRequest) bool {
	if _, done := c.made[r.OutRefundNo]; done {
		return true
	}
	if c.byTrade[r.OutTradeNo]+r.Amount > c.amount[r.OutTradeNo] {
		c.overdraw++
		return false
	}
	c.made[r.OutRefundNo] = r.Amount
	c.byTrade[r.OutTradeNo] += r.Amount
	return true
}

func (c *refusingChannel) Refund(_ context.Context, r orderpay.RefundRequest) orderpay.RefundResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch roll := c.rng.IntN(10); {
	case roll < 3:
		if c.make(r) {
			return orderpay.RefundResult{Outcome: orderpay.OutcomeRefunded, Amount: r.Amount}
		}
		return orderpay.RefundResult{Outcome: orderpay.OutcomeRejected, Detail: "refund exceeds the trade"}
	case roll < 5:
		return orderpay.RefundResult{Outcome: orderpay.OutcomeRefundRetry, Detail: "ACQ.SELLER_BALANCE_NOT_ENOUGH"}
	case roll < 7:
		c.make(r) // taken, the answer lost
		return orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Detail: "timeout"}
	case roll < 9:
		c.make(r) // accepted; settled by the time it is queried
		return orderpay.RefundResult{Outcome: orderpay.OutcomeRefundPending}
	default:
		return orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Detail: "timeout before it arrived"}
	}
}

func (c *refusingChannel) QueryRefund(_ context.Context, _, outRefundNo string) orderpay.RefundResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if amount, ok := c.made[outRefundNo]; ok && c.rng.IntN(4) != 0 {
		return orderpay.RefundResult{Outcome: orderpay.OutcomeRefunded, Amount: amount}
	}
	return orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown}
}

// App refunds end with exactly their money back, whatever the channel says on the way:
// random sequences of partial refunds (some asked twice) meet a channel that refuses for
// now, accepts and settles later, and answers nothing (having refunded, or not); the
// payment center's refund worker runs until nothing is owed. Then, for every payment: each
// of its app refunds is SUCCESS, the channel refunded each exactly once and by its amount,
// never past the payment; the payment counts what its app refunded; and the app was told of
// each refund once.
func TestAppRefundsEndWithTheMoneyBackUnderChannelRefusals(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	clock := clocktest.New(time.Now().Truncate(time.Second))
	quiet := slog.New(slog.DiscardHandler)
	ch := &refusingChannel{rng: rand.New(rand.NewPCG(11, 13)), made: map[string]int64{}, byTrade: map[string]int64{}, amount: map[string]int64{}}
	var apps *apppay.Service
	pc, err := payment.New(payment.Config{Store: store, Channels: map[string]orderpay.Channel{orderpay.ChannelAlipay: ch},
		NotifyURL: func(string) string { return "http://127.0.0.1/notify" }, Clock: clock, Logger: quiet,
		RefundFinal: func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
			return apps.RefundFinal(ctx, tx, r, at)
		}})
	if err != nil {
		t.Fatal(err)
	}
	apps, err = apppay.New(apppay.Config{Store: store, Payments: pc, Channels: []string{orderpay.ChannelAlipay}, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app, _, err := apps.CreateApp(ctx, apppay.CreateAppRequest{Name: "a", Channels: []string{orderpay.ChannelAlipay}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	type asked struct {
		no     string
		amount int64
	}
	accepted := map[string][]asked{} // payment → its accepted refunds
	amounts := map[string]int64{}
	for i := range 20 {
		amount := 100 + rng.Int64N(10000)
		no := paid(t, store, app, fmt.Sprintf("AP%020d", 1000+i), amount)
		ch.amount[no+"A01"], amounts[no] = amount, amount
		left := amount
		for j := range 1 + rng.IntN(5) {
			want := 1 + rng.Int64N(max(1, amount/2))
			refundNo := fmt.Sprintf("R%d-%d", i, j)
			for range 1 + rng.IntN(2) { // some asked twice: the same refund
				_, _, err := apps.CreateRefund(ctx, app, no, apppay.CreateRefundRequest{RefundNo: refundNo, Amount: want})
				switch {
				case want <= left && err != nil:
					t.Fatalf("refund %s of %d (left %d): %v", refundNo, want, left, err)
				case want > left && orderpay.ErrorCode(err) != orderpay.ECONFLICT:
					t.Fatalf("refund %s of %d (left %d): %v, want ECONFLICT", refundNo, want, left, err)
				}
			}
			if want <= left {
				left -= want
				accepted[no] = append(accepted[no], asked{refundNo, want})
			}
		}
	}

	// The refund worker runs, an hour of the clock at a time, until nothing is owed; an
	// operator retries whatever reaches the queue.
	for round := 0; ; round++ {
		if round > 2000 {
			t.Fatal("refunds still owed after 2000 rounds")
		}
		if _, err := pc.RefundDue(ctx, 500, 4); err != nil {
			t.Fatal(err)
		}
		queued, err := store.RefundsNeedingAction(ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range queued {
			if _, err := pc.RetryRefund(ctx, r.OutRefundNo, "operator:test"); err != nil {
				t.Fatal(err)
			}
		}
		var owed int
		if err := store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM refunds WHERE status NOT IN ('SUCCESS', 'RESOLVED')`).Scan(&owed); err != nil {
			t.Fatal(err)
		}
		if owed == 0 {
			break
		}
		clock.Advance(time.Hour)
	}

	told := map[string]int{}
	msgs, err := store.UnpublishedMessages(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Subject == orderpay.SubjectAppRefundSucceeded {
			var p orderpay.AppRefundPayload
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			told[p.RefundNo]++
		}
	}
	// The channel's answers took every path: refused for now and sent again, asked again
	// after no answer, made at once.
	var retried, again, once int
	if err := store.DB().QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN retried > 0 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN attempts > 1 AND retried = 0 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN attempts = 1 AND retried = 0 THEN 1 ELSE 0 END), 0) FROM refunds`).Scan(&retried, &again, &once); err != nil {
		t.Fatal(err)
	}
	if retried == 0 || again == 0 || once == 0 {
		t.Fatalf("refunds retried after a refusal %d, asked again after no answer %d, made at the first answer %d: want some of each", retried, again, once)
	}
	if ch.overdraw != 0 {
		t.Fatalf("the channel was asked %d times to refund past a trade's amount", ch.overdraw)
	}
	for no, refunds := range accepted {
		var sum int64
		for _, a := range refunds {
			sum += a.amount
			v, err := apps.Refund(ctx, app, a.no)
			if err != nil || v.Status != apppay.RefundSuccess || v.Amount != a.amount {
				t.Fatalf("refund %s: %+v, %v", a.no, v, err)
			}
			if got := ch.made[v.OutRefundNo]; got != a.amount {
				t.Fatalf("refund %s: the channel refunded %d, want %d", a.no, got, a.amount)
			}
			if told[a.no] != 1 {
				t.Fatalf("refund %s: the app was told %d times", a.no, told[a.no])
			}
		}
		p, err := store.Payment(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		ap, err := store.AppPayment(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		if p.Refunded != sum || ap.RefundReserved != sum || ch.byTrade[no+"A01"] != sum || sum > amounts[no] {
			t.Fatalf("payment %s of %d: refunded %d, reserved %d, the channel %d; the app's refunds sum to %d",
				no, amounts[no], p.Refunded, ap.RefundReserved, ch.byTrade[no+"A01"], sum)
		}
	}
}

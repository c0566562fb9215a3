package payment_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

func dropAll(c *sim.Config) {
	c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}
}

// countingObserver counts queries by trigger, notifications by result and refund answers
// by class.
type countingObserver struct {
	orderpay.NopObserver
	mu            sync.Mutex
	queries       map[string]int
	notifications map[string]int
	refunds       map[orderpay.Outcome]int
	exhausted     atomic.Int64
}

func (o *countingObserver) Notification(_, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.notifications == nil {
		o.notifications = map[string]int{}
	}
	o.notifications[result]++
}

func (o *countingObserver) RefundAnswer(_ string, outcome orderpay.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refunds == nil {
		o.refunds = map[orderpay.Outcome]int{}
	}
	o.refunds[outcome]++
}

func (o *countingObserver) results(result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.notifications[result]
}

func (o *countingObserver) answers(outcome orderpay.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refunds[outcome]
}

func (o *countingObserver) Query(_, trigger string, _ orderpay.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queries == nil {
		o.queries = map[string]int{}
	}
	o.queries[trigger]++
}

func (o *countingObserver) QueriesExhausted(string) { o.exhausted.Add(1) }

func (o *countingObserver) count(trigger string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queries[trigger]
}

// Every notification is lost: the pending query, due 10 s after the attempt was submitted,
// finds the payment; the row is gone with the attempt's PAYING state.
func TestScheduledQueryFindsALostPayment(t *testing.T) {
	t.Parallel()
	b := setup(t, dropAll)
	ctx := context.Background()
	res, err := b.svc.Pay(ctx, b.request("Q1"))
	if err != nil {
		t.Fatal(err)
	}
	pq, err := b.store.PendingQuery(ctx, "PQ1A01")
	if err != nil || !pq.NextAt.Equal(b.clock.Now().Add(10*time.Second)) || pq.Attempts != 0 {
		t.Fatalf("pending query %+v, %v; want one due in 10 s", pq, err)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.svc.QueryDue(ctx, 100, 4); n != 0 {
		t.Fatalf("%d queries before they were due", n)
	}
	b.clock.Advance(10 * time.Second)
	if n, err := b.svc.QueryDue(ctx, 100, 4); err != nil || n != 1 {
		t.Fatalf("QueryDue = %d, %v", n, err)
	}
	b.wantStatus(t, "PQ1", orderpay.PaymentSuccess)
	if _, err := b.store.PendingQuery(ctx, "PQ1A01"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("the pending query outlived the payment: %v", err)
	}
}

// An attempt nobody pays is queried on the schedule (10 s, 30 s, 1 m, 1 m 30 s, …, counted
// from its submission) until its deadline plus grace, and flagged when its queries run out.
func TestQueriesFollowTheScheduleThenAreFlagged(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{}
	b := setupWith(t, func(c *payment.Config) { c.Observer, c.MaxQueryAttempts = obs, 9 })
	ctx := context.Background()
	start := b.clock.Now()
	if _, err := b.svc.Pay(ctx, b.request("Q2")); err != nil { // deadline in 30 minutes
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 90 * time.Second, 2 * time.Minute,
		5 * time.Minute, 7 * time.Minute, 17 * time.Minute, 27 * time.Minute}
	for i, at := range want {
		pq, err := b.store.PendingQuery(ctx, "PQ2A01")
		if err != nil {
			t.Fatal(err)
		}
		if !pq.NextAt.Equal(start.Add(at)) || pq.Attempts != i {
			t.Fatalf("step %d: next at +%v after %d queries, want +%v after %d", i, pq.NextAt.Sub(start), pq.Attempts, at, i)
		}
		b.clock.Set(pq.NextAt)
		if n, err := b.svc.QueryDue(ctx, 100, 1); err != nil || n != 1 {
			t.Fatalf("step %d: QueryDue = %d, %v", i, n, err)
		}
	}
	pq, _ := b.store.PendingQuery(ctx, "PQ2A01")
	if !pq.Flagged || pq.Attempts != 9 || obs.exhausted.Load() != 1 || obs.count("sweep") != 9 {
		t.Fatalf("after the last query: %+v, exhausted %d, sweeps %d", pq, obs.exhausted.Load(), obs.count("sweep"))
	}
	if flagged, _ := b.store.PendingQueries(ctx, true, 10); len(flagged) != 1 {
		t.Fatalf("flagged list %+v", flagged)
	}
	b.clock.Advance(time.Hour)
	if n, _ := b.svc.QueryDue(ctx, 100, 1); n != 0 {
		t.Fatal("a flagged query is still swept")
	}
}

// The schedule never runs past the deadline plus grace: the timeout close owns the attempt
// from then on.
func TestQueriesStopAtTheDeadlinePlusGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := b.clock.Now()
	req := b.request("Q3")
	req.Deadline = start.Add(45 * time.Second)
	if _, err := b.svc.Pay(ctx, req); err != nil {
		t.Fatal(err)
	}
	for range 3 { // at 10 s, 30 s and 1 m
		pq, _ := b.store.PendingQuery(ctx, "PQ3A01")
		b.clock.Set(pq.NextAt)
		b.svc.QueryDue(ctx, 100, 1)
	}
	// The next step of the schedule (1 m 30 s) is past the deadline plus grace (75 s).
	pq, _ := b.store.PendingQuery(ctx, "PQ3A01")
	if want := req.Deadline.Add(payment.CloseGraceDefault); pq.Attempts != 3 || !pq.NextAt.Equal(want) {
		t.Fatalf("after 3 queries: next at +%v (attempts %d), want +%v", pq.NextAt.Sub(start), pq.Attempts, want.Sub(start))
	}
}

// A timer and the sweeper (or two instances) reach the same step at once: exactly one of
// them queries.
func TestTheSameStepIsTakenOnce(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{}
	b := setupWith(t, func(c *payment.Config) { c.Observer = obs })
	ctx := context.Background()
	if _, err := b.svc.Pay(ctx, b.request("Q4")); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(10 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.svc.RunQuery(ctx, "PQ4A01", 0, "schedule")
		}()
	}
	wg.Wait()
	pq, _ := b.store.PendingQuery(ctx, "PQ4A01")
	if pq.Attempts != 1 {
		t.Fatalf("the step was taken %d times", pq.Attempts)
	}
	// The queries themselves may race before the step is claimed, but a stale timer (set for
	// an earlier step) queries nothing.
	before := obs.count("schedule")
	if out, err := b.svc.RunQuery(ctx, "PQ4A01", 0, "schedule"); out != "" || err != nil {
		t.Fatalf("stale step ran: %s, %v", out, err)
	}
	if obs.count("schedule") != before {
		t.Fatal("a stale timer queried the channel")
	}
}

// A buyer polling an unpaid order triggers a query, at most once a second: with every
// notification lost, the buyer's read is what finds the payment.
func TestPollQueriesOncePerInterval(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{}
	b := setupWith(t, func(c *payment.Config) { c.Observer = obs }, dropAll)
	ctx := context.Background()
	res, err := b.svc.Pay(ctx, b.request("Q5"))
	if err != nil {
		t.Fatal(err)
	}
	if ev, attempts, err := b.svc.Poll(ctx, "Q6"); ev != nil || attempts != nil || err != nil {
		t.Fatalf("an order with no payment: %+v, attempts %+v, %v; want nothing", ev, attempts, err)
	}
	// The first look: a notification may be on its way, nothing is asked. The attempt it
	// read with the payment comes back, with its code.
	ev, attempts, err := b.svc.Poll(ctx, "Q5")
	if ev != nil || err != nil {
		t.Fatalf("first look: %+v, %v; want no result", ev, err)
	}
	if len(attempts) != 1 || attempts[0].OutTradeNo != "PQ5A01" || attempts[0].Status != orderpay.ChannelOrderPaying ||
		attempts[0].QRCode != res.QRCode || !attempts[0].QRExpiresAt.Equal(res.ExpiresAt.Truncate(time.Millisecond)) {
		t.Fatalf("first look's attempts %+v, want PQ5A01 PAYING with the code %q", attempts, res.QRCode)
	}
	if n := obs.count("poll"); n != 0 {
		t.Fatalf("%d poll queries at the first look, want none", n)
	}
	b.clock.Advance(time.Second) // the grace is over
	b.svc.Poll(ctx, "Q5")
	b.svc.Poll(ctx, "Q5") // within the interval: no second query
	if n := obs.count("poll"); n != 1 {
		t.Fatalf("%d poll queries, want 1", n)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	// The poll's own query finds it paid, and the poll returns the success.
	ev, attempts, err = b.svc.Poll(ctx, "Q5")
	if err != nil || ev == nil || ev.OrderNo != "Q5" || ev.PaymentNo != "PQ5" || ev.Amount != b.request("Q5").Amount ||
		ev.OutTradeNo != "PQ5A01" || ev.TradeNo == "" || ev.PaidAt.IsZero() {
		t.Fatalf("poll after paying: %+v, %v", ev, err)
	}
	if len(attempts) != 1 || attempts[0].Status != orderpay.ChannelOrderSuccess || attempts[0].TradeNo != ev.TradeNo {
		t.Fatalf("poll after paying: attempts %+v, want PQ5A01 SUCCESS with trade %s", attempts, ev.TradeNo)
	}
	if got, err := b.svc.Result(ctx, "Q5"); err != nil || got == nil || *got != *ev {
		t.Fatalf("Result %+v, %v; want what the poll returned, %+v", got, err, ev)
	}
	b.wantStatus(t, "PQ5", orderpay.PaymentSuccess)
	b.svc.Poll(ctx, "Q5") // paid: nothing to ask
	if n := obs.count("poll"); n != 2 {
		t.Fatalf("%d poll queries, want 2", n)
	}
}

// One buyer reading 20 open QR orders again and again triggers at most
// WatchQueriesPerBuyerDefault channel queries in a window, whatever the number of their
// orders (each order alone would be queried once a second); the rest of their reads
// answer from the database. Another buyer's watch still queries in that window, and the
// first buyer's reads query again once their window ends.
func TestWatchQueriesAreBoundedPerBuyer(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			obs := &countingObserver{}
			b := setupWith(t, func(c *payment.Config) {
				c.Observer = obs
				if engine == "postgres" {
					c.Store = storetest.OpenPostgres(t)
				}
			})
			ctx := context.Background()
			watch := func(orderNo, buyer string) {
				t.Helper()
				p, read, err := b.store.PaymentWithAttempts(ctx, orderNo)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := b.svc.PollRead(ctx, orderNo, buyer, p, read); err != nil {
					t.Fatal(err)
				}
			}
			var mallorys []string
			for i := range 20 {
				no := fmt.Sprintf("M%02d", i)
				if _, err := b.svc.Pay(ctx, b.request(no)); err != nil {
					t.Fatal(err)
				}
				mallorys = append(mallorys, no)
			}
			if _, err := b.svc.Pay(ctx, b.request("A01")); err != nil {
				t.Fatal(err)
			}
			for _, no := range mallorys {
				watch(no, "mallory") // the first looks start each payment's grace
			}
			watch("A01", "alice")
			b.clock.Advance(time.Second) // the grace is over
			// Ten rounds over all 20 orders, one per query interval, inside one window.
			for range 10 {
				for _, no := range mallorys {
					watch(no, "mallory")
				}
				b.clock.Advance(900 * time.Millisecond)
			}
			if n := obs.count("poll"); n != payment.WatchQueriesPerBuyerDefault {
				t.Fatalf("one buyer's reads of 20 orders made %d channel queries in a window, want %d", n, payment.WatchQueriesPerBuyerDefault)
			}
			watch("A01", "alice")
			if n := obs.count("poll"); n != payment.WatchQueriesPerBuyerDefault+1 {
				t.Fatalf("another buyer's watch made %d queries, want 1", n-payment.WatchQueriesPerBuyerDefault)
			}
			b.clock.Advance(payment.WatchQueryWindowDefault)
			for _, no := range mallorys {
				watch(no, "mallory")
			}
			if n := obs.count("poll"); n != 2*payment.WatchQueriesPerBuyerDefault+1 {
				t.Fatalf("after the window, the buyer's reads made %d queries, want %d", n-payment.WatchQueriesPerBuyerDefault-1,
					payment.WatchQueriesPerBuyerDefault)
			}
		})
	}
}

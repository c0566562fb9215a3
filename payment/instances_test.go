package payment_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// twoPools opens two stores on one fresh PostgreSQL schema, each with its own pool: what
// two `serve` instances on one database have (docs/design.md §10).
func twoPools(t *testing.T) (*sqlstore.Store, *sqlstore.Store) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	var stores [2]*sqlstore.Store
	for i := range stores {
		s, err := sqlstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	return stores[0], stores[1]
}

// refundGate sits before the simulator's WeChat refund endpoint. The first send waits up
// to arrive for a second one; then it goes on at once, and the second waits for hold (a
// test's condition) before it goes on. It counts the sends and the most at once.
type refundGate struct {
	next    http.Handler
	arrive  time.Duration
	hold    func()
	mu      sync.Mutex
	sends   int
	now     int
	most    int
	arrived chan struct{}
}

func (g *refundGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v3/refund/domestic/refunds" {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	g.sends++
	n := g.sends
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	if n == 1 {
		select {
		case <-g.arrived:
		case <-time.After(g.arrive):
		}
	} else {
		close(g.arrived)
		g.hold()
	}
	g.next.ServeHTTP(w, r)
}

func (g *refundGate) counts() (sends, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sends, g.most
}

// Two instances on one PostgreSQL database meet one refund that the channel keeps refusing
// for now, at the try after which no other fits the retry plan (review defect 3). Both
// pick it up at once. Were both to send it, the first send would be refused (a frequency
// limit: the operators' queue, committed first) while the second is made at the channel:
// the money went back, yet orderpay would show it owed and an operator resolving it would
// pay the buyer twice. A worker claims the refund before it sends: one instance sends, the
// other leaves it; whatever the channel said is what orderpay shows, and the refund is
// never sent twice at once.
func TestTwoInstancesSendARefundOnce(t *testing.T) {
	t.Parallel()
	pg1, pg2 := twoPools(t)
	plan := orderpay.RefundRetryPlan{Every: time.Minute, For: time.Minute} // one retry, then the queue
	b := setupWith(t, func(c *payment.Config) { c.Store, c.RefundRetryPlan = pg1, plan }, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultRateLimited, Limit: 1}}}
	})
	other := b.twin(t, pg2)
	ctx := context.Background()
	no := b.paidAndRefused(t, "TWO1", orderpay.ChannelWechat)
	if got := b.refundAll(t); got.Retrying != 1 {
		t.Fatalf("first send: %+v, want refused for now", got)
	}
	r := b.refund(t, no)
	b.clock.Set(r.NextAt) // the last try the plan has
	// The next send is refused for now too (one more frequency limit); a send after it is
	// made.
	if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund,
		Kind: sim.FaultRateLimited, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	gate := &refundGate{next: b.gw.next, arrive: time.Second, arrived: make(chan struct{})}
	gate.hold = func() { // the second send goes on once the first one's answer is committed
		deadline := time.Now().Add(time.Second) // within the adapter's timeout (2 s)
		for time.Now().Before(deadline) {
			if r, err := pg1.ChannelRefund(ctx, no); err == nil && r.Status != orderpay.ChannelRefundPending {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.gw.next = gate
	var wg sync.WaitGroup
	var errs [2]error
	for i, svc := range []*payment.Service{b.svc, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = svc.RefundDue(ctx, 10, 1)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i+1, err)
		}
	}
	sends, most := gate.counts()
	r = b.refund(t, no)
	l := b.ledger(t, "PTWO1A01")
	t.Logf("sends %d (at most %d at once); refund %s; the channel refunded %d fen", sends, most, r.Status, l.Refunded)
	switch {
	case l.Refunded == 4990 && r.Status != orderpay.ChannelRefundSuccess:
		t.Fatalf("the channel refunded %d fen, but orderpay shows the refund %s (problem %q): an operator would pay it twice",
			l.Refunded, r.Status, r.Problem)
	case l.Refunded == 0 && r.Status == orderpay.ChannelRefundSuccess:
		t.Fatalf("orderpay shows the refund SUCCESS, but the channel refunded nothing")
	case most > 1:
		t.Fatalf("%d sends of the refund were at the channel at once", most)
	case r.Status != orderpay.ChannelRefundSuccess && r.Status != orderpay.ChannelRefundNeedsAction:
		t.Fatalf("refund %s (unknown %v): the send's answer was not recorded", r.Status, r.Unknown)
	}
	p, err := pg2.Payment(ctx, "PTWO1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int64{true: 4990, false: 0}[r.Status == orderpay.ChannelRefundSuccess]; p.Refunded != want {
		t.Fatalf("the payment counts %d fen refunded, want %d", p.Refunded, want)
	}
}

// An operator cannot settle outside the channel a refund whose last send is still on its
// way or whose answer was unknown: the channel may yet make it. One the channel was asked
// to make can be settled, with a warning that says so.
func TestResolvingARefundTheChannelMayStillMake(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		ctx := context.Background()
		b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund,
			Kind: sim.FaultAccountAbnormal}}})
		no := b.paidAndRefused(t, "RES1", orderpay.ChannelWechat)
		if got := b.refundAll(t); got.NeedsAction != 1 {
			t.Fatalf("%+v: want the refund before an operator", got)
		}
		set := func(col string, v any) {
			t.Helper()
			if _, err := b.store.DB().Exec(b.store.Rebind(`UPDATE refunds SET `+col+` = ? WHERE out_refund_no = ?`), v, no); err != nil {
				t.Fatal(err)
			}
		}
		set("claimed_until", orderpay.Millis(b.clock.Now().Add(time.Minute))) // a send on its way
		if _, err := b.svc.ResolveRefund(ctx, no, "operator:ann", "BANK-1", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("resolving a refund with a send on its way: %v, want ECONFLICT", err)
		}
		set("claimed_until", 0)
		set("unknown", 1) // its last answer was unknown
		if _, err := b.svc.ResolveRefund(ctx, no, "operator:ann", "BANK-1", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("resolving a refund whose last answer was unknown: %v, want ECONFLICT", err)
		}
		set("unknown", 0)
		v, err := b.svc.ResolveRefund(ctx, no, "operator:ann", "BANK-1", "")
		if err != nil || v.Status != orderpay.ChannelRefundResolved || v.Sends != 1 || v.Warning == "" {
			t.Fatalf("resolved: %+v, %v: want RESOLVED with a warning that the channel was asked once", v, err)
		}
		if r := b.refund(t, no); r.Status != orderpay.ChannelRefundResolved || r.ResolvedBy != "operator:ann" {
			t.Fatalf("refund %+v", r)
		}
	})
}

// faultyStore's transactions wait at a barrier after they find no refund of a number, as
// two instances deciding one refund at once both do before either inserts it.
type faultyStore struct {
	orderpay.Store
	wait func()
}

func (s faultyStore) InTx(ctx context.Context, fn func(tx orderpay.Tx) error) error {
	return s.Store.InTx(ctx, func(tx orderpay.Tx) error { return fn(barrierTx{Tx: tx, wait: s.wait}) })
}

type barrierTx struct {
	orderpay.Tx
	wait func()
}

func (t barrierTx) ChannelRefund(ctx context.Context, no string) (*orderpay.ChannelRefund, error) {
	r, err := t.Tx.ChannelRefund(ctx, no)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		t.wait()
	}
	return r, err
}

// Two instances refuse one payment at once (the direct call on one, the bus delivery on
// the other): both read that no refund exists, then both insert it. The second insert is a
// conflict, which on PostgreSQL ended its transaction; the code then read inside it and
// failed EINTERNAL (25P02), logged and redelivered (review defect 3). Now both succeed,
// one refund exists, and the channel is asked for it once.
func TestTwoInstancesRefusingOnePaymentAtOnce(t *testing.T) {
	t.Parallel()
	pg1, pg2 := twoPools(t)
	var arrived atomic.Int32
	both := make(chan struct{})
	barrier := func() {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(3 * time.Second):
		}
	}
	b := setupWith(t, func(c *payment.Config) { c.Store = pg1 })
	ctx := context.Background()
	res, err := b.svc.Pay(ctx, b.request("REF2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	b.deliver(t)
	ev := orderpay.PaymentSucceeded{PaymentNo: "PREF2", OrderNo: "REF2", Amount: 4990, Channel: orderpay.ChannelAlipay, OutTradeNo: "PREF2A01"}
	one, two := b.twin(t, faultyStore{Store: pg1, wait: barrier}), b.twin(t, faultyStore{Store: pg2, wait: barrier})
	var wg sync.WaitGroup
	var errs [2]error
	for i, svc := range []*payment.Service{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = svc.RefundRejected(ctx, ev, orderpay.RefundReasonCancelled)
		}()
	}
	wg.Wait()
	if arrived.Load() < 2 {
		t.Fatalf("only %d instance(s) reached the barrier", arrived.Load())
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v (code %s)", i+1, err, orderpay.ErrorCode(err))
		}
	}
	rs, err := pg2.ChannelRefunds(ctx, "PREF2A01")
	if err != nil || len(rs) != 1 || rs[0].OutRefundNo != payment.AutoRefundNo("PREF2A01") || rs[0].Amount != 4990 {
		t.Fatalf("refunds %+v, %v: want one of 4990", rs, err)
	}
}

package order_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// The property of backup stock (docs/design.md §6.2), over random arrival orders: one SKU
// of either policy ("payment" for odd seeds, "reserve" for even ones), of random stock,
// buckets and backup, and a random
// sequence of creates, payments (in the payment center's own transaction or after it),
// buyers' cancels, payments of cancelled orders, time passing with the hold sweeper, and
// second deliveries of a payment success, alone or racing the first, all through the real
// order.Service. After every step, read on one snapshot:
//
//   - available + locked + sold + backup left = stock created + backup units, and no
//     count below zero;
//   - sold = the units of the PAID orders;
//   - backup used = the units of the payments served from the backup (the model's count),
//     and each line the backup served is a PAID order's;
//   - no payment was both taken (its order PAID) and refused (refunded); a refused payment's
//     order is CANCELLED, and refused for the same reason every time;
//   - every count, and every order's status, is what a model of the rules says.

func TestBackupStockPropertySQLite(t *testing.T) {
	t.Parallel()
	runBackupProperty(t, 12, 150, func(t *testing.T) orderpay.Store { return storetest.OpenSQLite(t) })
}

func TestBackupStockPropertyPostgres(t *testing.T) {
	t.Parallel()
	storetest.RequirePostgres(t)
	runBackupProperty(t, 6, 120, func(t *testing.T) orderpay.Store { return storetest.OpenPostgres(t) })
}

// runBackupProperty runs seeds 1 to seeds, and checks once they all ended that the runs
// did meet what the property is about: late payments the backup served, under both
// policies, and payments sold out after a backup ran out.
func runBackupProperty(t *testing.T, seeds uint64, steps int, open func(t *testing.T) orderpay.Store) {
	var mu sync.Mutex
	seen := map[string]int{}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for _, want := range []string{"served " + string(orderpay.StockAtPayment), "served " + string(orderpay.StockReserve), "sold out, the backup short"} {
			if seen[want] == 0 {
				t.Errorf("no run met %q (%v): the seeds no longer exercise it", want, seen)
			}
		}
		t.Logf("runs met %v", seen)
	})
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			met := backupProperty(t, open(t), seed, steps)
			mu.Lock()
			defer mu.Unlock()
			for _, k := range met {
				seen[k]++
			}
		})
	}
}

// propOrder is one order as the model sees it.
type propOrder struct {
	o   *orderpay.Order
	qty int64
	// status is what the model expects; held says a reserve order's hold stands until
	// holdUntil.
	status    orderpay.OrderStatus
	held      bool
	holdUntil time.Time
	// ev is its payment success once the buyer paid; taken and refused count the
	// deliveries the order system took and refused, reason the refusals' reason.
	ev             *orderpay.PaymentSucceeded
	taken, refused int
	reason         string
}

type propModel struct {
	policy                            orderpay.StockPolicy
	initial, units                    int64
	available, locked, sold, backupLf int64
	backupUsed                        int64 // units
	backupPayments                    int   // payments served from the backup
	orders                            []*propOrder
}

// backupProperty runs one seed's steps, checking the property after each, and says what
// the run met.
func backupProperty(t *testing.T, store orderpay.Store, seed uint64, steps int) (met []string) {
	rng := rand.New(rand.NewPCG(seed, 38))
	b := setup(t, store, order.Config{Payments: closing(orderpay.CloseDone)})
	ctx := context.Background()
	m := &propModel{policy: orderpay.StockAtPayment, initial: 2 + rng.Int64N(9), units: rng.Int64N(9)}
	if seed%2 == 0 {
		m.policy = orderpay.StockReserve
	}
	buckets := 1 + rng.IntN(3)
	m.available, m.backupLf = m.initial, m.units
	n := order.NewSKU{SKU: "prop", MerchantID: "m1", Title: "Property tea", Price: 300, Stock: m.initial, BackupUnits: m.units,
		StockPolicy: m.policy, StockBuckets: buckets}
	if m.policy == orderpay.StockReserve {
		n.ReserveMinutes = 10
	}
	if _, _, err := b.svc.CreateSKU(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %s, %d units over %d buckets, %d aside", seed, m.policy, m.initial, buckets, m.units)

	// deliver tells the order system of o's payment as the payment center does: in its own
	// transaction (then, if that fails, after its commit), or after its commit only. An
	// answer that is neither taken nor refused (ECONFLICT: a race lost to another delivery
	// that cancelled the order) is delivered again, as the payment center and the bus do.
	deliver := func(p *propOrder, inTx bool) error {
		var err error
		if inTx {
			var after func()
			if err = store.InTx(ctx, func(tx orderpay.Tx) (err error) {
				after, err = b.svc.PaymentSucceededTx(ctx, tx, *p.ev)
				return err
			}); err == nil {
				after()
				return nil
			}
		}
		for try := 0; ; try++ {
			err = b.svc.PaymentSucceeded(ctx, *p.ev)
			if _, refused := orderpay.Refusal(err); refused || orderpay.ErrorCode(err) != orderpay.ECONFLICT || try == 3 {
				return err
			}
		}
	}
	// record counts one delivery's answer.
	record := func(step int, p *propOrder, err error) {
		if err == nil {
			p.taken++
			return
		}
		reason, refused := orderpay.Refusal(err)
		if !refused {
			t.Fatalf("step %d: a delivery for order %s: %v, neither taken nor refused", step, p.o.No, err)
		}
		if p.refused > 0 && reason != p.reason {
			t.Fatalf("step %d: order %s refused for %s, before for %s", step, p.o.No, reason, p.reason)
		}
		p.refused++
		p.reason = reason
	}
	// sell is the model of a payment arriving for a pending order: the held units, the
	// sellable ones, the backup, or sold out.
	sell := func(p *propOrder) (string, orderpay.OrderStatus) {
		switch {
		case p.held:
			m.locked -= p.qty
			m.sold += p.qty
			p.held = false
		case m.available >= p.qty:
			m.available -= p.qty
			m.sold += p.qty
		case m.backupLf >= p.qty:
			m.backupLf -= p.qty
			m.backupUsed += p.qty
			m.backupPayments++
			m.sold += p.qty
		default:
			return orderpay.RefundReasonSoldOut, orderpay.OrderCancelled
		}
		return "", orderpay.OrderPaid
	}
	pick := func(ok func(p *propOrder) bool) *propOrder {
		var c []*propOrder
		for _, p := range m.orders {
			if ok(p) {
				c = append(c, p)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}

	counts := map[string]int{}
	for step := range steps {
		// The first third of the run is mostly buyers ordering, the rest mostly paying, so
		// that many orders are pending when the sellable units run out.
		var kind string
		r := rng.IntN(14)
		if step < steps/3 && r < 11 {
			r = min(r, 8) % 5 // 9 in 14: a create
		} else if step >= steps/3 && r < 5 && rng.IntN(3) > 0 {
			r = 5 + rng.IntN(6) // a third of the creates only
		}
		if r >= 12 && m.policy != orderpay.StockReserve {
			r = 0 // no holds: another create instead of time passing
		}
		switch {
		case r < 5:
			kind = "create"
			qty := 1 + rng.Int64N(2)
			o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: fmt.Sprintf("buyer-%d-%d", seed, step),
				Items: []order.ItemRequest{{SKU: "prop", Qty: qty}}})
			if m.available < qty { // the backup is not for sale
				if orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
					t.Fatalf("step %d: %d asked of %d sellable: %v, want EOUTOFSTOCK", step, qty, m.available, err)
				}
				kind = "create refused"
				break
			}
			if err != nil {
				t.Fatalf("step %d: create %d of %d sellable: %v", step, qty, m.available, err)
			}
			p := &propOrder{o: o, qty: qty, status: orderpay.OrderPendingPayment}
			if m.policy == orderpay.StockReserve {
				m.available -= qty
				m.locked += qty
				p.held, p.holdUntil = true, orderpay.Now(b.clock).Add(10*time.Minute)
			}
			m.orders = append(m.orders, p)
		case r < 8:
			kind = "pay"
			p := pick(func(p *propOrder) bool { return p.ev == nil && p.status != orderpay.OrderPaid })
			if p == nil {
				continue
			}
			ev := paidEvent(t, b, p.o)
			p.ev = &ev
			var reason string
			if p.status == orderpay.OrderCancelled { // the buyer cancelled it: a late payment
				kind, reason = "pay a cancelled order", orderpay.RefundReasonCancelled
			} else if reason, p.status = sell(p); reason != "" {
				kind = "pay, sold out"
				if m.units > 0 {
					met = append(met, "sold out, the backup short")
				}
			}
			err := deliver(p, rng.IntN(2) == 0)
			record(step, p, err)
			if got, _ := orderpay.Refusal(err); got != reason {
				t.Fatalf("step %d: %s: order %s answered %v, want refusal %q", step, kind, p.o.No, err, reason)
			}
		case r < 10:
			kind = "deliver again"
			p := pick(func(p *propOrder) bool { return p.ev != nil })
			if p == nil {
				continue
			}
			record(step, p, deliver(p, rng.IntN(2) == 0))
		case r < 11:
			kind = "pay, two deliveries at once"
			p := pick(func(p *propOrder) bool { return p.ev == nil && p.status == orderpay.OrderPendingPayment })
			if p == nil {
				continue
			}
			ev := paidEvent(t, b, p.o)
			p.ev = &ev
			var reason string
			reason, p.status = sell(p)
			// The direct call in the payment center's transaction and the bus's delivery
			// meet: the order is paid once, or refused both times.
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() { errs[i] = deliver(p, i == 0) })
			}
			wg.Wait()
			for _, err := range errs {
				record(step, p, err)
				if got, _ := orderpay.Refusal(err); got != reason {
					t.Fatalf("step %d: %s: order %s answered %v, want refusal %q", step, kind, p.o.No, err, reason)
				}
			}
		case r < 12:
			kind = "cancel"
			p := pick(func(p *propOrder) bool { return p.ev == nil && p.status == orderpay.OrderPendingPayment })
			if p == nil {
				continue
			}
			if _, err := b.svc.Cancel(ctx, p.o.No); err != nil {
				t.Fatalf("step %d: cancel %s: %v", step, p.o.No, err)
			}
			p.status = orderpay.OrderCancelled
			if p.held {
				p.held = false
				m.locked -= p.qty
				m.available += p.qty
			}
		default:
			kind = "time passes"
			b.clock.Advance(time.Duration(1+rng.IntN(6)) * time.Minute)
			res, err := b.svc.ReleaseExpiredHolds(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			released := 0
			for _, p := range m.orders {
				if p.held && !p.holdUntil.After(orderpay.Now(b.clock)) {
					p.held = false
					m.locked -= p.qty
					m.available += p.qty
					released++
				}
			}
			if res.Released != released {
				t.Fatalf("step %d: the sweeper released %d holds, want %d", step, res.Released, released)
			}
		}
		counts[kind]++
		checkBackupProperty(t, step, kind, store, m)
	}
	t.Logf("steps: %v; %d payments (%d units) served from the backup of %d", counts, m.backupPayments, m.backupUsed, m.units)
	if m.backupPayments > 0 {
		met = append(met, "served "+string(m.policy))
	}
	return met
}

func checkBackupProperty(t *testing.T, step int, kind string, store orderpay.Store, m *propModel) {
	t.Helper()
	snap, err := store.(*sqlstore.Store).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var st orderpay.Stock
	for _, s := range snap.Stock {
		if s.SKU == "prop" {
			st = s
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%s): %s; stock %+v", step, kind, fmt.Sprintf(format, args...), st)
	}
	if st.Available+st.Locked+st.Sold+st.BackupLeft != m.initial+m.units {
		fail("available + locked + sold + backup left = %d, want %d created + %d aside", st.Available+st.Locked+st.Sold+st.BackupLeft, m.initial, m.units)
	}
	if st.Available < 0 || st.Locked < 0 || st.Sold < 0 || st.BackupUsed < 0 || st.BackupLeft < 0 || st.Total != m.initial+st.BackupUsed {
		fail("a count below zero, or a total that is not %d created + the backup used", m.initial)
	}
	for _, r := range snap.StockRows {
		if r.Available < 0 || r.Locked < 0 || r.Sold < 0 || r.Available+r.Locked+r.Sold != r.Total {
			fail("bucket %d does not add up: %+v", r.Bucket, r)
		}
	}
	want := orderpay.Stock{SKU: "prop", Available: m.available, Locked: m.locked, Sold: m.sold, Total: m.initial + m.backupUsed,
		BackupUnits: m.units, BackupUsed: m.backupUsed, BackupLeft: m.backupLf}
	if st != want {
		fail("the model says %+v", want)
	}
	status := map[string]orderpay.OrderStatus{}
	var paidUnits int64
	for _, o := range snap.Orders {
		status[o.No] = o.Status
		if o.Status == orderpay.OrderPaid {
			paidUnits += o.Items[0].Qty
		}
	}
	if st.Sold != paidUnits {
		fail("sold %d but PAID orders hold %d units", st.Sold, paidUnits)
	}
	var served int64
	for _, s := range snap.BackupSales {
		served += s.Qty
		if status[s.OrderNo] != orderpay.OrderPaid {
			fail("the backup served order %s, which is %s", s.OrderNo, status[s.OrderNo])
		}
	}
	if served != st.BackupUsed || len(snap.BackupSales) != m.backupPayments {
		fail("the backup served %d lines of %d units; the model counts %d payments of %d units", len(snap.BackupSales), served, m.backupPayments, m.backupUsed)
	}
	for _, p := range m.orders {
		got := status[p.o.No]
		if got != p.status {
			fail("order %s is %s, the model says %s", p.o.No, got, p.status)
		}
		if p.taken > 0 && p.refused > 0 {
			fail("order %s's payment was both taken and refused (refunded): %d and %d deliveries", p.o.No, p.taken, p.refused)
		}
		if (p.taken > 0) != (got == orderpay.OrderPaid) || (p.refused > 0 && got != orderpay.OrderCancelled) {
			fail("order %s is %s after %d deliveries taken and %d refused", p.o.No, got, p.taken, p.refused)
		}
	}
}

package order_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// capsSKUs are the SKUs of the buyer cap tests: plenty of stock of each kind, and one SKU
// with caps of its own.
var capsSKUs = []order.NewSKU{
	{SKU: "rice", MerchantID: "m1", Title: "Rice 5kg", Price: 4500, Stock: 5000, ProductType: orderpay.ProductNormal},
	{SKU: "dumpling", MerchantID: "m1", Title: "Dumplings", Price: 2500, Stock: 1000, ProductType: orderpay.ProductSpecial},
	{SKU: "durian", MerchantID: "m2", Title: "Durian", Price: 9900, Stock: 1000, ProductType: orderpay.ProductFast},
	{SKU: "shrimp", MerchantID: "m2", Title: "Shrimp 500g", Price: 6800, Stock: 1000, ProductType: orderpay.ProductFast},
	{SKU: "maotai", MerchantID: "m3", Title: "Maotai 500ml", Price: 149900, Stock: 1000, ProductType: orderpay.ProductNormal,
		MaxPerOrder: 3, MaxUnpaidPerBuyer: 4},
}

// nextKey is a new Idempotency-Key: the tests' orders are each a new one, where the same
// request again would be the duplicate-submit guard's replay of the first.
func nextKey() string { return fmt.Sprint("caps-", capsKeys.Add(1)) }

var capsKeys atomic.Int64

func capsSetup(t *testing.T, store orderpay.Store, cfg order.Config) bundle {
	t.Helper()
	b := setup(t, store, cfg)
	for _, n := range capsSKUs {
		if _, _, err := b.svc.CreateSKU(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// written counts what an order's creation writes: orders, their lines, their history and
// outbox rows, stock holds and request keys; and the units locked.
func written(t *testing.T, s *sqlstore.Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"orders", "order_items", "history", "outbox", "stock_holds", "request_keys", "buyer_purchases"} {
		var n int64
		if err := s.DB().QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	var locked, available int64
	if err := s.DB().QueryRow(`SELECT COALESCE(SUM(locked), 0), COALESCE(SUM(available), 0) FROM stock`).Scan(&locked, &available); err != nil {
		t.Fatal(err)
	}
	out["locked"], out["available"] = locked, available
	return out
}

func TestBuyerCapsRefuseAndWriteNothingSQLite(t *testing.T) {
	t.Parallel()
	buyerCapsRefused(t, storetest.OpenSQLite(t))
}

func TestBuyerCapsRefuseAndWriteNothingPostgres(t *testing.T) {
	t.Parallel()
	buyerCapsRefused(t, storetest.OpenPostgres(t))
}

// With the default caps: one buyer cannot take a product's whole stock in one order (the
// finding: 5,000 of 5,000); nor more of a fast SKU than its cap in unpaid orders, nor more
// unpaid fast orders; a SKU's own caps come before its kind's. Each refusal has its code
// and writes nothing; a cancel, a payment and the timeout close each give the buyer room
// again, as the cap counts only unpaid orders.
func buyerCapsRefused(t *testing.T, store *sqlstore.Store) {
	// The timeout close finds nothing paid.
	p := &payments{close: func(string) (orderpay.CloseOutcome, error) { return orderpay.CloseDone, nil }}
	b := capsSetup(t, store, order.Config{Payments: p})
	ctx := context.Background()
	create := func(buyer string, items ...order.ItemRequest) (*orderpay.Order, error) {
		return b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: buyer, Items: items, IdempotencyKey: nextKey()})
	}
	must := func(buyer string, items ...order.ItemRequest) *orderpay.Order {
		t.Helper()
		o, err := create(buyer, items...)
		if err != nil {
			t.Fatalf("%s orders %+v: %v", buyer, items, err)
		}
		return o
	}
	refused := func(code, buyer string, items ...order.ItemRequest) {
		t.Helper()
		before := written(t, store)
		o, err := create(buyer, items...)
		if orderpay.ErrorCode(err) != code {
			t.Fatalf("%s orders %+v: %+v, %v; want %s", buyer, items, o, err, code)
		}
		if after := written(t, store); !maps.Equal(before, after) {
			t.Fatalf("the refused order (%v) wrote: before %v, after %v", err, before, after)
		}
	}
	item := func(sku string, qty int64) order.ItemRequest { return order.ItemRequest{SKU: sku, Qty: qty} }

	// The finding: the whole stock in one request.
	refused(orderpay.EQUANTITYCAP, "mallory", item("rice", 5000))
	if st := stockOf(t, store, "rice"); st.Available != 5000 || st.Locked != 0 {
		t.Fatalf("rice stock after the refusal: %+v", st)
	}
	// Two lines of one SKU count together.
	normal := orderpay.DefaultBuyerCaps[orderpay.ProductNormal].PerOrder
	refused(orderpay.EQUANTITYCAP, "mallory", item("rice", normal), item("rice", 1))
	must("ann", item("rice", normal))

	// Fast goods: per order, then units held unpaid, then unpaid orders.
	fast := orderpay.DefaultBuyerCaps[orderpay.ProductFast]
	refused(orderpay.EQUANTITYCAP, "ben", item("durian", fast.PerOrder+1))
	first := must("ben", item("durian", fast.PerOrder))
	must("ben", item("durian", fast.UnpaidUnits-fast.PerOrder))
	refused(orderpay.EUNPAIDCAP, "ben", item("durian", 1))
	must("cat", item("durian", 1)) // another buyer is not held back
	for range fast.UnpaidOrders - 2 {
		must("ben", item("shrimp", 1))
	}
	refused(orderpay.EUNPAIDORDERS, "ben", item("shrimp", 1))
	// A normal order of ben's counts apart from his fast ones.
	must("ben", item("rice", 1))
	// A cancel gives back an order and its units.
	if _, err := b.svc.Cancel(ctx, first.No); err != nil {
		t.Fatal(err)
	}
	second := must("ben", item("durian", fast.PerOrder))
	refused(orderpay.EUNPAIDORDERS, "ben", item("shrimp", 1))
	// So does a payment: a paid order holds nothing unpaid.
	ev := settled(t, store, orderpay.PaymentSucceeded{PaymentNo: "P" + second.No, OrderNo: second.No, Amount: second.Payable})
	if err := b.svc.PaymentSucceeded(ctx, ev); err != nil {
		t.Fatal(err)
	}
	third := must("ben", item("durian", fast.PerOrder))
	refused(orderpay.EUNPAIDORDERS, "ben", item("durian", 1))
	// And the timeout close, once every fast order of ben's is past its deadline.
	b.clock.Advance(orderpay.DefaultPayWindows[orderpay.ProductFast] + 2*time.Minute)
	if _, err := b.svc.ExpireDue(ctx, time.Minute, 100, 1); err != nil {
		t.Fatal(err)
	}
	if o, _ := b.svc.Order(ctx, third.No); o.Status != orderpay.OrderCancelled {
		t.Fatalf("ben's last fast order is %s after the timeout close", o.Status)
	}
	for range fast.UnpaidOrders - 1 {
		must("ben", item("shrimp", 1))
	}
	must("ben", item("durian", fast.UnpaidUnits-fast.PerOrder), item("shrimp", 1))

	// A SKU's own caps come first: maotai, a normal SKU, takes 3 per order and 4 unpaid.
	refused(orderpay.EQUANTITYCAP, "dan", item("maotai", 4))
	must("dan", item("maotai", 3))
	refused(orderpay.EUNPAIDCAP, "dan", item("maotai", 2))
	must("dan", item("maotai", 1))
}

func TestBuyerCapDefaultsPerKindSQLite(t *testing.T) {
	t.Parallel()
	buyerCapDefaults(t, func() *sqlstore.Store { return storetest.OpenSQLite(t) })
}

func TestBuyerCapDefaultsPerKindPostgres(t *testing.T) {
	t.Parallel()
	buyerCapDefaults(t, func() *sqlstore.Store { return storetest.OpenPostgres(t) })
}

// Every kind of goods has its three caps by default, tighter the shorter its pay window,
// and a service configured with none (order.Config.BuyerCaps nil) enforces each of them
// for each kind: the cap passes, one more is refused.
func buyerCapDefaults(t *testing.T, open func() *sqlstore.Store) {
	kinds := []orderpay.ProductType{orderpay.ProductNormal, orderpay.ProductSpecial, orderpay.ProductFast} // longest window first
	for i, k := range kinds {
		c := orderpay.DefaultBuyerCaps[k]
		if c.PerOrder <= 0 || c.UnpaidUnits < c.PerOrder || c.UnpaidOrders <= 0 {
			t.Fatalf("default caps of %s: %+v", k, c)
		}
		if i > 0 {
			looser := orderpay.DefaultBuyerCaps[kinds[i-1]]
			if c.PerOrder >= looser.PerOrder || c.UnpaidUnits >= looser.UnpaidUnits || c.UnpaidOrders >= looser.UnpaidOrders {
				t.Errorf("the default caps of %s %+v are not tighter than those of %s %+v", k, c, kinds[i-1], looser)
			}
		}
	}
	b := capsSetup(t, open(), order.Config{})
	ctx := context.Background()
	skuOf := map[orderpay.ProductType]string{orderpay.ProductNormal: "rice", orderpay.ProductSpecial: "dumpling", orderpay.ProductFast: "durian"}
	for _, k := range kinds {
		c := orderpay.DefaultBuyerCaps[k]
		create := func(buyer string, qty int64) error {
			_, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: buyer, Items: []order.ItemRequest{{SKU: skuOf[k], Qty: qty}},
				IdempotencyKey: nextKey()})
			return err
		}
		if err := create("per-order-"+string(k), c.PerOrder+1); orderpay.ErrorCode(err) != orderpay.EQUANTITYCAP {
			t.Errorf("%s: %d units in one order: %v, want EQUANTITYCAP", k, c.PerOrder+1, err)
		}
		if err := create("per-order-"+string(k), c.PerOrder); err != nil {
			t.Errorf("%s: %d units in one order: %v", k, c.PerOrder, err)
		}
		// Units: whole orders of PerOrder, then the rest, then one more.
		units := "units-" + string(k)
		left := c.UnpaidUnits
		for left > 0 {
			if err := create(units, min(left, c.PerOrder)); err != nil {
				t.Fatalf("%s: %d units unpaid of %d: %v", k, c.UnpaidUnits-left, c.UnpaidUnits, err)
			}
			left -= min(left, c.PerOrder)
		}
		if err := create(units, 1); orderpay.ErrorCode(err) != orderpay.EUNPAIDCAP {
			t.Errorf("%s: a unit past %d unpaid: %v, want EUNPAIDCAP", k, c.UnpaidUnits, err)
		}
		orders := "orders-" + string(k)
		for n := range c.UnpaidOrders {
			if err := create(orders, 1); err != nil {
				t.Fatalf("%s: unpaid order %d of %d: %v", k, n+1, c.UnpaidOrders, err)
			}
		}
		if err := create(orders, 1); orderpay.ErrorCode(err) != orderpay.EUNPAIDORDERS {
			t.Errorf("%s: an unpaid order past %d: %v, want EUNPAIDORDERS", k, c.UnpaidOrders, err)
		}
	}
}

// pausingStore holds the first transaction that read a buyer's unpaid holdings until a
// second one has read them too, or a second has passed: the worst interleaving, both
// reading before either writes, if nothing keeps the second from reading.
type pausingStore struct {
	orderpay.Store
	reads      atomic.Int32
	secondRead chan struct{}
	once       sync.Once
}

func (p *pausingStore) InTx(ctx context.Context, fn func(tx orderpay.Tx) error) error {
	return p.Store.InTx(ctx, func(tx orderpay.Tx) error { return fn(&pausingTx{Tx: tx, p: p}) })
}

type pausingTx struct {
	orderpay.Tx
	p *pausingStore
}

func (t *pausingTx) LockBuyerUnpaid(ctx context.Context, buyerID string, skus []string) (*orderpay.UnpaidHoldings, error) {
	h, err := t.Tx.LockBuyerUnpaid(ctx, buyerID, skus)
	if err != nil {
		return h, err
	}
	if t.p.reads.Add(1) == 1 {
		select {
		case <-t.p.secondRead:
		case <-time.After(time.Second):
		}
	} else {
		t.p.once.Do(func() { close(t.p.secondRead) })
	}
	return h, nil
}

func TestConcurrentCreatesOfOneBuyerStayWithinTheCapsSQLite(t *testing.T) {
	t.Parallel()
	concurrentCapped(t, func(t *testing.T) *sqlstore.Store { return storetest.OpenSQLite(t) })
}

// On PostgreSQL the store's transactions are READ COMMITTED: a count read, then an
// insert, lets two transactions both count before either inserts, unless the count waits
// for a lock on the buyer.
func TestConcurrentCreatesOfOneBuyerStayWithinTheCapsPostgres(t *testing.T) {
	t.Parallel()
	concurrentCapped(t, func(t *testing.T) *sqlstore.Store { return storetest.OpenPostgres(t) })
}

// Two creates of one buyer at once, the first held after its count until the second has
// counted too (or a second has passed), where the cap has room for only one of them: one
// order is created, the other refused with the cap's code. The same request sent twice at
// once (one Idempotency-Key) is one order, which both answers are, and no refusal.
func concurrentCapped(t *testing.T, open func(*testing.T) *sqlstore.Store) {
	for _, tc := range []struct {
		name    string
		caps    orderpay.BuyerCaps
		item    order.ItemRequest
		code    string
		sameKey bool
	}{
		{"unpaid orders", orderpay.BuyerCaps{orderpay.ProductFast: {UnpaidOrders: 1}}, order.ItemRequest{SKU: "durian", Qty: 1}, orderpay.EUNPAIDORDERS, false},
		{"unpaid units", orderpay.BuyerCaps{orderpay.ProductNormal: {UnpaidUnits: 3}}, order.ItemRequest{SKU: "rice", Qty: 2}, orderpay.EUNPAIDCAP, false},
		{"one request twice", orderpay.BuyerCaps{orderpay.ProductFast: {UnpaidOrders: 1}}, order.ItemRequest{SKU: "durian", Qty: 1}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := open(t)
			ps := &pausingStore{Store: store, secondRead: make(chan struct{})}
			b := capsSetup(t, ps, order.Config{BuyerCaps: tc.caps})
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			orders := make([]*orderpay.Order, 2)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprint("k", i)
					if tc.sameKey {
						key = "k"
					}
					orders[i], errs[i] = b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "eve", Items: []order.ItemRequest{tc.item},
						IdempotencyKey: key})
				}()
			}
			wg.Wait()
			if tc.sameKey {
				if errs[0] != nil || errs[1] != nil || orders[0].No != orders[1].No {
					t.Fatalf("one request twice: %v, %v; want one order for both", errs, orders)
				}
				if st := stockOf(t, store, tc.item.SKU); st.Locked != tc.item.Qty {
					t.Fatalf("%s stock %+v; want %d locked", tc.item.SKU, st, tc.item.Qty)
				}
				return
			}
			created, refused := 0, 0
			for _, err := range errs {
				switch orderpay.ErrorCode(err) {
				case "":
					created++
				case tc.code:
					refused++
				default:
					t.Errorf("a create: %v", err)
				}
			}
			if created != 1 || refused != 1 {
				t.Fatalf("created %d and refused %d (%v); want one of each", created, refused, errs)
			}
			if st := stockOf(t, store, tc.item.SKU); st.Locked != tc.item.Qty {
				t.Fatalf("%s stock %+v; want %d locked", tc.item.SKU, st, tc.item.Qty)
			}
		})
	}
}

func TestBuyerCapsOverSequencesSQLite(t *testing.T) {
	t.Parallel()
	capsOverSequences(t, storetest.OpenSQLite(t))
}

func TestBuyerCapsOverSequencesPostgres(t *testing.T) {
	t.Parallel()
	capsOverSequences(t, storetest.OpenPostgres(t))
}

// Random sequences of one buyer's creates, cancels, payments and timeout closes, against a
// model of what the buyer holds unpaid: every create is accepted or refused as the model
// says, with the model's code, and after every step the store's count of the buyer's
// unpaid orders and units (Tx.LockBuyerUnpaid) is the model's. Paid and closed orders
// hold nothing.
func capsOverSequences(t *testing.T, store *sqlstore.Store) {
	caps := orderpay.BuyerCaps{
		orderpay.ProductNormal: {PerOrder: 3, UnpaidUnits: 5, UnpaidOrders: 3},
		orderpay.ProductFast:   {PerOrder: 2, UnpaidUnits: 3, UnpaidOrders: 2},
	}
	p := &payments{close: func(string) (orderpay.CloseOutcome, error) { return orderpay.CloseDone, nil }}
	b := capsSetup(t, store, order.Config{Payments: p, BuyerCaps: caps})
	ctx := context.Background()
	kindOf := map[string]orderpay.ProductType{"rice": orderpay.ProductNormal, "durian": orderpay.ProductFast, "shrimp": orderpay.ProductFast}
	skus := []string{"durian", "rice", "shrimp"} // sorted: the order the caps are checked in
	type held struct {
		kind  orderpay.ProductType
		units map[string]int64
	}
	open := map[string]held{} // the model: the buyer's unpaid orders
	openNos := func() []string { return slices.Sorted(maps.Keys(open)) }
	want := func(units map[string]int64) string { // the model's answer to a create
		kind := orderpay.ProductNormal
		for sku, n := range units {
			if kindOf[sku] == orderpay.ProductFast {
				kind = orderpay.ProductFast
			}
			if n > caps[kindOf[sku]].PerOrder {
				return orderpay.EQUANTITYCAP
			}
		}
		orders := int64(0)
		for _, h := range open {
			if h.kind == kind {
				orders++
			}
		}
		if orders+1 > caps[kind].UnpaidOrders {
			return orderpay.EUNPAIDORDERS
		}
		for sku, n := range units {
			for _, h := range open {
				n += h.units[sku]
			}
			if n > caps[kindOf[sku]].UnpaidUnits {
				return orderpay.EUNPAIDCAP
			}
		}
		return ""
	}
	rng := rand.New(rand.NewPCG(35, 3))
	counts := map[string]int{}
	for step := range 150 {
		var did string
		switch op := rng.IntN(10); {
		case op < 6: // create
			var items []order.ItemRequest
			units := map[string]int64{}
			for range 1 + rng.IntN(2) {
				it := order.ItemRequest{SKU: skus[rng.IntN(len(skus))], Qty: 1 + rng.Int64N(3)}
				items, units[it.SKU] = append(items, it), units[it.SKU]+it.Qty
			}
			code := want(units)
			o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "zoe", Items: items, IdempotencyKey: nextKey()})
			if orderpay.ErrorCode(err) != code {
				t.Fatalf("step %d: create %+v with %v unpaid: %v, want %q", step, items, open, err, code)
			}
			if err == nil {
				open[o.No] = held{o.ProductType, units}
			}
			did = "create " + cmp.Or(code, "ok")
		case op < 8 && len(open) > 0: // cancel or pay one
			no := openNos()[rng.IntN(len(open))]
			if op == 6 {
				if _, err := b.svc.Cancel(ctx, no); err != nil {
					t.Fatalf("step %d: cancel %s: %v", step, no, err)
				}
				did = "cancel"
			} else {
				o, _ := b.svc.Order(ctx, no)
				if err := b.svc.PaymentSucceeded(ctx, settled(t, store, orderpay.PaymentSucceeded{PaymentNo: "P" + no, OrderNo: no, Amount: o.Payable})); err != nil {
					t.Fatalf("step %d: pay %s: %v", step, no, err)
				}
				did = "pay"
			}
			delete(open, no)
		case op == 8: // the timeout close of every fast order
			b.clock.Advance(orderpay.DefaultPayWindows[orderpay.ProductFast] + 2*time.Minute)
			if _, err := b.svc.ExpireDue(ctx, time.Minute, 1000, 1); err != nil {
				t.Fatalf("step %d: timeout close: %v", step, err)
			}
			for no, h := range open {
				if h.kind == orderpay.ProductFast {
					delete(open, no)
				}
			}
			did = "timeout"
		default:
			continue
		}
		counts[did]++
		var got *orderpay.UnpaidHoldings
		if err := store.InTx(ctx, func(tx orderpay.Tx) (err error) { got, err = tx.LockBuyerUnpaid(ctx, "zoe", skus); return err }); err != nil {
			t.Fatal(err)
		}
		wantOrders, wantUnits := map[orderpay.ProductType]int64{}, map[string]int64{}
		for _, h := range open {
			wantOrders[h.kind]++
			for sku, n := range h.units {
				wantUnits[sku] += n
			}
		}
		if !maps.Equal(got.Orders, wantOrders) || !maps.Equal(got.Units, wantUnits) {
			t.Fatalf("step %d (%s): the store counts %+v; the model %v %v", step, did, got, wantOrders, wantUnits)
		}
	}
	// The sequence went through every kind of step, and every answer a create can have.
	for _, k := range []string{"create ok", "create " + orderpay.EQUANTITYCAP, "create " + orderpay.EUNPAIDORDERS, "create " + orderpay.EUNPAIDCAP, "cancel", "pay", "timeout"} {
		if counts[k] == 0 {
			t.Errorf("no %q in the sequence: %v", k, counts)
		}
	}
}

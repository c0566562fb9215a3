package order_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type bundle struct {
	svc   *order.Service
	store orderpay.Store
	clock *clocktest.Clock
}

func setup(t *testing.T, store orderpay.Store, cfg order.Config) bundle {
	t.Helper()
	clock := clocktest.New(now)
	cfg.Store, cfg.Clock = store, clock
	svc, err := order.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []order.NewSKU{
		{SKU: "tea", MerchantID: "m1", Title: "Longjing tea 250g", Price: 12800, Stock: 10, ProductType: orderpay.ProductNormal},
		{SKU: "mooncake", MerchantID: "m2", Title: "Mooncake box", Price: 8800, Stock: 5, ProductType: orderpay.ProductSpecial},
		{SKU: "lychee", MerchantID: "m1", Title: "Lychee 1kg", Price: 3990, Stock: 3, ProductType: orderpay.ProductFast},
	} {
		if _, _, err := svc.CreateSKU(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return bundle{svc: svc, store: store, clock: clock}
}

// settled records what the payment center has recorded before it tells the order system
// of ev: the SUCCESS payment (once), paid through ev's attempt (P…A01 at alipay, unless
// ev says otherwise). It returns ev with those filled in: the order system confirms every
// result against that record.
func settled(t testing.TB, s orderpay.Store, ev orderpay.PaymentSucceeded) orderpay.PaymentSucceeded {
	ev.Channel, ev.OutTradeNo = cmp.Or(ev.Channel, "alipay"), cmp.Or(ev.OutTradeNo, ev.PaymentNo+"A01")
	ctx := context.Background()
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		err := tx.CreatePayment(ctx, &orderpay.Payment{No: ev.PaymentNo, OrderNo: ev.OrderNo, Amount: ev.Amount, Status: orderpay.PaymentSuccess,
			Subject: "x", PayDeadline: now.Add(time.Hour), PaidChannel: ev.Channel, PaidOutTradeNo: ev.OutTradeNo, CreatedAt: now, UpdatedAt: now, PaidAt: now})
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			return nil // recorded before
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	return ev
}

func stockOf(t *testing.T, s orderpay.Store, sku string) orderpay.Stock {
	t.Helper()
	st, err := s.Stock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return *st
}

func TestCreateOrderPricesLocksStockAndSetsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 2}, {SKU: "mooncake", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != orderpay.OrderPendingPayment || o.Total != 2*12800+8800 || o.Payable != o.Total || len(o.Items) != 2 {
		t.Fatalf("order = %+v", o)
	}
	// The special offer's 30 minutes win over the tea's 3 days.
	if o.ProductType != orderpay.ProductSpecial || !o.PayDeadline.Equal(now.Add(30*time.Minute)) {
		t.Fatalf("deadline %v (%s), want now+30m (special)", o.PayDeadline, o.ProductType)
	}
	if len(o.No) != 20 || o.No[:14] != "20261122180000" { // yyyyMMddHHmmss in UTC+8, then 6 digits
		t.Fatalf("order number %q", o.No)
	}
	if st := stockOf(t, b.store, "tea"); st.Available != 8 || st.Locked != 2 {
		t.Fatalf("tea stock %+v", st)
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	if len(msgs) != 1 || msgs[0].Subject != orderpay.SubjectOrderCreated || msgs[0].ID != "order.created:"+o.No {
		t.Fatalf("outbox = %+v", msgs)
	}
	var ev orderpay.OrderEventPayload
	if err := json.Unmarshal(msgs[0].Payload, &ev); err != nil || ev.OrderNo != o.No || ev.Payable != o.Payable || ev.BuyerID != "alice" {
		t.Fatalf("order.created payload %s: %v", msgs[0].Payload, err)
	}
	got, err := b.svc.Order(ctx, o.No)
	if err != nil || got.Payable != o.Payable || len(got.Items) != 2 || got.Items[1].SKU != "mooncake" || got.Items[1].MerchantID != "m2" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if got.RemainingSeconds(now.Add(10*time.Minute)) != 20*60 || got.RemainingSeconds(now.Add(31*time.Minute)) != 0 {
		t.Fatal("remaining seconds wrong")
	}
}

// Bad requests are refused with a clear code and leave no trace: no stock moves, no order,
// no event.
func TestCreateOrderBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  order.CreateOrderRequest
		code string
	}{
		{"no buyer", order.CreateOrderRequest{Items: []order.ItemRequest{{SKU: "tea", Qty: 1}}}, orderpay.EINVALID},
		{"no items", order.CreateOrderRequest{BuyerID: "alice"}, orderpay.EINVALID},
		{"zero qty", order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 0}}}, orderpay.EINVALID},
		{"negative qty", order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: -3}}}, orderpay.EINVALID},
		{"huge qty", order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 1 << 40}}}, orderpay.EINVALID},
		{"unknown sku", order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}, {SKU: "caviar", Qty: 1}}}, orderpay.EINVALID},
		// The first line fits, the second does not: the first line's lock must roll back too.
		{"too little stock", order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}, {SKU: "lychee", Qty: 4}}}, orderpay.EOUTOFSTOCK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.CreateOrder(ctx, tc.req)
			if code := orderpay.ErrorCode(err); code != tc.code {
				t.Fatalf("code %q (%v), want %q", code, err, tc.code)
			}
		})
	}
	for sku, want := range map[string]int64{"tea": 10, "lychee": 3} {
		if st := stockOf(t, b.store, sku); st.Available != want || st.Locked != 0 {
			t.Fatalf("%s stock changed: %+v", sku, st)
		}
	}
	if msgs, _ := b.store.UnpublishedMessages(ctx, 10); len(msgs) != 0 {
		t.Fatalf("a refused order left events: %+v", msgs)
	}
}

func TestCreateSKUValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	ok := order.NewSKU{SKU: "new", MerchantID: "m1", Title: "New", Price: 100, Stock: 1}
	for name, mutate := range map[string]func(n *order.NewSKU){
		"bad sku code":   func(n *order.NewSKU) { n.SKU = "a b" },
		"no merchant":    func(n *order.NewSKU) { n.MerchantID = "" },
		"no title":       func(n *order.NewSKU) { n.Title = " " },
		"zero price":     func(n *order.NewSKU) { n.Price = 0 },
		"negative stock": func(n *order.NewSKU) { n.Stock = -1 },
		"bad type":       func(n *order.NewSKU) { n.ProductType = "luxury" },
		"bad policy":     func(n *order.NewSKU) { n.StockPolicy = "whenever" },
		"hold on order":  func(n *order.NewSKU) { n.ReserveMinutes = 5 },
		"hold on payment": func(n *order.NewSKU) {
			n.StockPolicy, n.ReserveMinutes = orderpay.StockAtPayment, 5
		},
		"negative hold": func(n *order.NewSKU) { n.StockPolicy, n.ReserveMinutes = orderpay.StockReserve, -1 },
		"hold too long": func(n *order.NewSKU) {
			n.StockPolicy, n.ReserveMinutes = orderpay.StockReserve, order.ReserveMinutesMax+1
		},
	} {
		n := ok
		mutate(&n)
		if _, _, err := b.svc.CreateSKU(ctx, n); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "tea", MerchantID: "m1", Title: "Dup", Price: 1, Stock: 1}); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("duplicate SKU: %v, want ECONFLICT", err)
	}
	sku, st, err := b.svc.CreateSKU(ctx, ok)
	if err != nil || sku.ProductType != orderpay.ProductNormal || sku.StockPolicy != orderpay.StockAtOrder || st.Available != 1 {
		t.Fatalf("defaults not applied: %+v %+v %v", sku, st, err)
	}
}

// The timestamp scheme can draw a number that is taken; the order is then created with a
// fresh draw, not refused.
func TestOrderNumberCollisionIsRetried(t *testing.T) {
	t.Parallel()
	calls := 0
	b := setup(t, storetest.OpenSQLite(t), order.Config{NewOrderNo: func(context.Context, time.Time) (string, error) {
		calls++
		if calls <= 3 {
			return "20261122180000000001", nil
		}
		return fmt.Sprintf("20261122180000%06d", calls), nil
	}})
	ctx := context.Background()
	req := order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}}}
	first, err := b.svc.CreateOrder(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.BuyerID = "bob" // not alice's same request again, which the duplicate guard would answer
	second, err := b.svc.CreateOrder(ctx, req)
	if err != nil || second.No == first.No {
		t.Fatalf("second order %v, %v", second, err)
	}
	if st := stockOf(t, b.store, "tea"); st.Locked != 2 {
		t.Fatalf("the collided attempts leaked stock: %+v", st)
	}
}

func TestPaymentSucceededIsAppliedOnce(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay",
		OutTradeNo: "P" + o.No + "A01", PaidAt: now})
	for i := 0; i < 3; i++ { // the direct call, then the bus, then a redelivery
		// Applied tells a repeat with a read, no write transaction.
		before, _, _ := store.Counters()
		if applied := b.svc.Applied(ctx, ev); applied != (i > 0) {
			t.Fatalf("delivery %d: Applied %v", i, applied)
		}
		if after, _, _ := store.Counters(); after != before {
			t.Fatalf("Applied wrote %d transactions", after-before)
		}
		if err := b.svc.PaymentSucceeded(ctx, ev); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	got, _ := b.svc.Order(ctx, o.No)
	if got.Status != orderpay.OrderPaid || got.PaymentNo != ev.PaymentNo {
		t.Fatalf("order after payment: %+v", got)
	}
	if st := stockOf(t, b.store, "tea"); st.Available != 7 || st.Locked != 0 || st.Sold != 3 {
		t.Fatalf("stock after payment %+v", st)
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	paid := 0
	for _, m := range msgs {
		if m.Subject == orderpay.SubjectOrderPaid {
			paid++
		}
	}
	if paid != 1 {
		t.Fatalf("%d order.paid events, want 1", paid)
	}
	h, _ := b.store.History(ctx, orderpay.EntityOrder, o.No)
	if len(h) != 2 || h[1].To != "PAID" {
		t.Fatalf("history %+v", h)
	}
	// A payment of the wrong amount (the payment center's record says so) is refused; one
	// the payment center has no record of, or of another order or amount than its record,
	// is a forgery: it changes nothing.
	o2, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "bob", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	wrong := settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o2.No, OrderNo: o2.No, Amount: 1})
	if _, refused := orderpay.Refusal(b.svc.PaymentSucceeded(ctx, wrong)); !refused {
		t.Fatalf("wrong amount: not refused")
	}
	for name, forged := range map[string]orderpay.PaymentSucceeded{
		"no record":     {PaymentNo: "Pother", OrderNo: o2.No, Amount: 1, Channel: "alipay", OutTradeNo: "PotherA01"},
		"unknown order": {PaymentNo: "Pother", OrderNo: "nope", Amount: 1, Channel: "alipay", OutTradeNo: "PotherA01"},
		"another order": {PaymentNo: wrong.PaymentNo, OrderNo: o.No, Amount: 1, Channel: "alipay", OutTradeNo: wrong.OutTradeNo},
		"the order's payable": {PaymentNo: wrong.PaymentNo, OrderNo: o2.No, Amount: o2.Payable, Channel: "alipay",
			OutTradeNo: wrong.OutTradeNo},
	} {
		if err := b.svc.PaymentSucceeded(ctx, forged); !orderpay.IsUnconfirmed(err) {
			t.Errorf("%s: %v, want it unconfirmed", name, err)
		}
	}
	if got, _ := b.svc.Order(ctx, o2.No); got.Status != orderpay.OrderPendingPayment {
		t.Fatalf("order %s is %s after forged results", o2.No, got.Status)
	}
}

func TestConcurrentBuyersSQLite(t *testing.T) {
	t.Parallel()
	concurrentBuyers(t, storetest.OpenSQLite(t))
}

func TestConcurrentBuyersPostgres(t *testing.T) {
	t.Parallel()
	concurrentBuyers(t, storetest.OpenPostgres(t))
}

// 50 buyers race for the last 10 lychees through the service; exactly 10 orders are created,
// and once paid exactly 10 units are sold.
func concurrentBuyers(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "hot", MerchantID: "m1", Title: "Hot", Price: 100, Stock: 10, ProductType: orderpay.ProductFast}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var orders []*orderpay.Order
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: fmt.Sprint("buyer", i), Items: []order.ItemRequest{{SKU: "hot", Qty: 1}}})
			if err != nil {
				if orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
					t.Errorf("buyer %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			orders = append(orders, o)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(orders) != 10 {
		t.Fatalf("%d orders created for 10 units", len(orders))
	}
	for _, o := range orders {
		if err := b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay"})); err != nil {
			t.Fatal(err)
		}
	}
	if st := stockOf(t, b.store, "hot"); st.Sold != 10 || st.Available != 0 || st.Locked != 0 {
		t.Fatalf("stock %+v, want exactly 10 sold", st)
	}
}

func TestOppositeItemOrdersDoNotDeadlockSQLite(t *testing.T) {
	t.Parallel()
	oppositeItemOrders(t, storetest.OpenSQLite(t))
}

func TestOppositeItemOrdersDoNotDeadlockPostgres(t *testing.T) {
	t.Parallel()
	oppositeItemOrders(t, storetest.OpenPostgres(t))
}

// Buyers order the same two SKUs listed in opposite orders, all at once, then all pay, then
// all of those are cancelled-or-paid: every transaction takes the stock rows in one order, so
// none waits on another in a cycle, and every order goes through.
func oppositeItemOrders(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	orders := make(chan *orderpay.Order, 40)
	for i := 0; i < 40; i++ {
		items := []order.ItemRequest{{SKU: "tea", Qty: 1}, {SKU: "mooncake", Qty: 1}}
		if i%2 == 1 {
			items[0], items[1] = items[1], items[0]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: fmt.Sprint("b", i), Items: items})
			if err != nil {
				if orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
					errs <- err
				}
				return
			}
			orders <- o
			if err := b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable})); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(orders)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	n := 0
	for range orders {
		n++
	}
	// Mooncake has 5 units: exactly 5 orders get both items.
	if n != 5 {
		t.Fatalf("%d orders went through, want 5", n)
	}
	if st := stockOf(t, b.store, "mooncake"); st.Sold != 5 || st.Available != 0 || st.Locked != 0 {
		t.Fatalf("mooncake %+v", st)
	}
	if st := stockOf(t, b.store, "tea"); st.Sold != 5 || st.Available != 5 || st.Locked != 0 {
		t.Fatalf("tea %+v", st)
	}
}

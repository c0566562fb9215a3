package storetest

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// testBuyerUnpaid: LockBuyerUnpaid counts a buyer's PENDING_PAYMENT orders by product type
// and the units of the SKUs asked for in them, and nothing paid, cancelled or another
// buyer's; and a second transaction locking the same buyer waits for the first to end.
func testBuyerUnpaid(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 100)
	newSKU(t, s, "cup", 100)
	order := func(no, buyer string, kind orderpay.ProductType, lines map[string]int64) *orderpay.Order {
		o := &orderpay.Order{No: no, BuyerID: buyer, Status: orderpay.OrderPendingPayment, ProductType: kind,
			PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
		for _, sku := range []string{"cup", "tea"} {
			if qty, ok := lines[sku]; ok {
				o.Items = append(o.Items, orderpay.OrderItem{Line: len(o.Items) + 1, SKU: sku, MerchantID: "m1", Title: sku,
					UnitPrice: 1999, Qty: qty, Amount: 1999 * qty, Payable: 1999 * qty})
				o.Total += 1999 * qty
			}
		}
		o.Payable = o.Total
		mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, o) })
		return o
	}
	move := func(no string, to orderpay.OrderStatus, ev orderpay.OrderEvent) {
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.TransitionOrder(ctx, orderpay.OrderChange{No: no, From: orderpay.OrderPendingPayment, To: to, Event: ev,
				At: t0.Add(time.Minute), Actor: "test", PaymentNo: "P" + no})
		})
	}
	order("U1", "ann", orderpay.ProductNormal, map[string]int64{"tea": 2, "cup": 1})
	order("U2", "ann", orderpay.ProductFast, map[string]int64{"tea": 3})
	order("U3", "ann", orderpay.ProductFast, map[string]int64{"tea": 5})
	move("U3", orderpay.OrderCancelled, orderpay.OrderEventCancel)
	order("U4", "ann", orderpay.ProductNormal, map[string]int64{"tea": 7})
	move("U4", orderpay.OrderPaid, orderpay.OrderEventPay)
	order("U5", "bob", orderpay.ProductNormal, map[string]int64{"tea": 11})

	read := func(buyer string, skus ...string) *orderpay.UnpaidHoldings {
		t.Helper()
		var h *orderpay.UnpaidHoldings
		mustTx(t, s, func(tx orderpay.Tx) (err error) { h, err = tx.LockBuyerUnpaid(ctx, buyer, skus); return err })
		return h
	}
	h := read("ann", "tea")
	if want := map[orderpay.ProductType]int64{orderpay.ProductNormal: 1, orderpay.ProductFast: 1}; !maps.Equal(h.Orders, want) {
		t.Fatalf("ann's unpaid orders %v, want %v", h.Orders, want)
	}
	if want := map[string]int64{"tea": 5}; !maps.Equal(h.Units, want) {
		t.Fatalf("ann's unpaid units %v, want %v (tea only)", h.Units, want)
	}
	if h := read("ann", "tea", "cup"); !maps.Equal(h.Units, map[string]int64{"tea": 5, "cup": 1}) {
		t.Fatalf("ann's unpaid units of tea and cup %v", h.Units)
	}
	if h := read("ann"); len(h.Units) != 0 || len(h.Orders) != 2 {
		t.Fatalf("ann's unpaid holdings, no SKU asked for: %+v", h)
	}
	if h := read("cat", "tea"); len(h.Units) != 0 || len(h.Orders) != 0 {
		t.Fatalf("a buyer with no order: %+v", h)
	}

	// The lock: a second transaction locking ann waits until the first, which creates an
	// order of hers, has committed, and then counts that order.
	locked, release := make(chan struct{}), make(chan struct{})
	var released sync.Once
	// A failure below must not leave the first transaction open: the store's cleanup
	// would wait for it.
	defer released.Do(func() { close(release) })
	first := make(chan error, 1)
	go func() {
		first <- s.InTx(ctx, func(tx orderpay.Tx) error {
			if _, err := tx.LockBuyerUnpaid(ctx, "ann", []string{"tea"}); err != nil {
				return err
			}
			select {
			case <-locked: // a retry
			default:
				close(locked)
			}
			<-release
			o := newOrder("U6", "tea", 4)
			o.BuyerID = "ann"
			return tx.CreateOrder(ctx, o)
		})
	}()
	<-locked
	second := make(chan *orderpay.UnpaidHoldings, 1)
	go func() {
		var h *orderpay.UnpaidHoldings
		err := s.InTx(ctx, func(tx orderpay.Tx) (err error) { h, err = tx.LockBuyerUnpaid(ctx, "ann", []string{"tea"}); return err })
		if err != nil {
			t.Error(err)
		}
		second <- h
	}()
	select {
	case h := <-second:
		t.Fatalf("a second transaction read ann's holdings while the first held her lock: %+v", h)
	case <-time.After(300 * time.Millisecond):
	}
	released.Do(func() { close(release) })
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if h := <-second; h == nil || h.Units["tea"] != 9 || h.Orders[orderpay.ProductNormal] != 2 {
		t.Fatalf("the second transaction read %+v, want the first's order counted", h)
	}
}

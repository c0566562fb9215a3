package order_test

import (
	"context"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// wantStock checks a SKU's counts, backup included, and that every unit is counted once.
func wantStock(t *testing.T, b bundle, sku string, want orderpay.Stock, initial int64) {
	t.Helper()
	want.SKU = sku
	got := stockOf(t, b.store, sku)
	if got != want {
		t.Fatalf("stock of %s %+v, want %+v", sku, got, want)
	}
	if got.Available+got.Locked+got.Sold+got.BackupLeft != initial+got.BackupUnits || got.Total != initial+got.BackupUsed {
		t.Fatalf("stock of %s does not count every unit once: %+v, created with %d", sku, got, initial)
	}
}

func wantSoldOut(t *testing.T, err error, what string) {
	t.Helper()
	if reason, refused := orderpay.Refusal(err); !refused || reason != orderpay.RefundReasonSoldOut {
		t.Fatalf("%s: %v; want refused as sold out (the payment refunded)", what, err)
	}
}

func TestBackupStockServesLatePaymentsUntilGoneSQLite(t *testing.T) {
	t.Parallel()
	backupServesLatePayments(t, storetest.OpenSQLite(t))
}

func TestBackupStockServesLatePaymentsUntilGonePostgres(t *testing.T) {
	t.Parallel()
	backupServesLatePayments(t, storetest.OpenPostgres(t))
}

// A "payment" SKU with 2 sellable units and 2 kept aside. Four buyers order while the 2
// are there; the first two payments take them, the next two arrive after they ran out and
// the backup serves them (PAID, their units from the backup, not refunded); the fifth
// finds the backup gone too and is cancelled and refused as sold out, as without a
// backup. The backup is never sold at creation, and a second delivery of each payment
// changes nothing.
func backupServesLatePayments(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	sku, st, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "late", MerchantID: "m1", Title: "Late tea", Price: 500, Stock: 2, BackupUnits: 2,
		StockPolicy: orderpay.StockAtPayment})
	if err != nil || sku.StockPolicy != orderpay.StockAtPayment || st.BackupUnits != 2 || st.BackupLeft != 2 || st.Available != 2 {
		t.Fatalf("create: %+v %+v %v", sku, st, err)
	}
	wantStock(t, b, "late", orderpay.Stock{Available: 2, Total: 2, BackupUnits: 2, BackupLeft: 2}, 2)
	// 3 units asked while 2 are sellable: the backup is not for sale.
	if _, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "greedy", Items: []order.ItemRequest{{SKU: "late", Qty: 3}}}); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
		t.Fatalf("3 of 2 sellable with 2 aside: %v, want EOUTOFSTOCK", err)
	}
	var orders []*orderpay.Order
	for range 5 {
		orders = append(orders, newOrder(t, b, "late", 1))
	}
	pay := func(i int) error { return b.svc.PaymentSucceeded(ctx, paidEvent(t, b, orders[i])) }

	for i := range 2 {
		if err := pay(i); err != nil {
			t.Fatal(err)
		}
	}
	wantStock(t, b, "late", orderpay.Stock{Sold: 2, Total: 2, BackupUnits: 2, BackupLeft: 2}, 2)
	// Sold out for new orders, backup or not.
	if _, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "after", Items: []order.ItemRequest{{SKU: "late", Qty: 1}}}); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
		t.Fatalf("an order after the sellable units ran out: %v, want EOUTOFSTOCK", err)
	}

	// The late payments: the backup serves them.
	if err := pay(2); err != nil {
		t.Fatalf("the first late payment: %v; want PAID from the backup", err)
	}
	wantStatus(t, b, orders[2].No, orderpay.OrderPaid)
	wantStock(t, b, "late", orderpay.Stock{Sold: 3, Total: 3, BackupUnits: 2, BackupUsed: 1, BackupLeft: 1}, 2)
	if err := pay(2); err != nil { // the bus delivers it again
		t.Fatal(err)
	}
	wantStock(t, b, "late", orderpay.Stock{Sold: 3, Total: 3, BackupUnits: 2, BackupUsed: 1, BackupLeft: 1}, 2)
	if err := pay(3); err != nil {
		t.Fatalf("the second late payment: %v; want PAID from the backup", err)
	}
	wantStatus(t, b, orders[3].No, orderpay.OrderPaid)
	wantStock(t, b, "late", orderpay.Stock{Sold: 4, Total: 4, BackupUnits: 2, BackupUsed: 2, BackupLeft: 0}, 2)
	for _, o := range orders[2:4] {
		if n := countSubject(t, b, orderpay.SubjectOrderPaid, "order.paid:"+o.No); n != 1 {
			t.Fatalf("order %s has %d order.paid events, want 1", o.No, n)
		}
	}

	// The backup is gone: the old path, cancelled and refunded as sold out, every delivery.
	for range 2 {
		wantSoldOut(t, pay(4), "the payment after the backup ran out")
	}
	lost := wantStatus(t, b, orders[4].No, orderpay.OrderCancelled)
	if lost.PaymentNo != "" {
		t.Fatalf("the cancelled order names payment %q", lost.PaymentNo)
	}
	if n := countSubject(t, b, orderpay.SubjectOrderCancelled, "order.cancelled:"+lost.No); n != 1 {
		t.Fatalf("%d order.cancelled events, want 1", n)
	}
	wantStock(t, b, "late", orderpay.Stock{Sold: 4, Total: 4, BackupUnits: 2, BackupUsed: 2, BackupLeft: 0}, 2)
	for _, o := range orders[:4] {
		wantStatus(t, b, o.No, orderpay.OrderPaid)
	}
}

// The payment center's own transaction (PaymentSucceededTx) takes the backup the same way:
// the late payment commits with its order PAID and its unit from the backup.
func TestBackupStockInThePaymentCentersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "late", MerchantID: "m1", Title: "Late tea", Price: 500, Stock: 1, BackupUnits: 1,
		StockPolicy: orderpay.StockAtPayment}); err != nil {
		t.Fatal(err)
	}
	first, late := newOrder(t, b, "late", 1), newOrder(t, b, "late", 1)
	for _, o := range []*orderpay.Order{first, late} {
		ev := paidEvent(t, b, o)
		var after func()
		if err := b.store.InTx(ctx, func(tx orderpay.Tx) (err error) {
			after, err = b.svc.PaymentSucceededTx(ctx, tx, ev)
			return err
		}); err != nil {
			t.Fatalf("order %s in the payment's transaction: %v", o.No, err)
		}
		after()
		wantStatus(t, b, o.No, orderpay.OrderPaid)
	}
	wantStock(t, b, "late", orderpay.Stock{Sold: 2, Total: 2, BackupUnits: 1, BackupUsed: 1}, 1)
}

// "reserve": a payment after the hold was released deducts again; with the sellable units
// gone meanwhile, the backup serves it. A payment while the hold stands sells the held
// units and leaves the backup alone.
func TestBackupStockServesAReservePaymentAfterItsHoldWasReleased(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "heldlate", MerchantID: "m1", Title: "Held tea", Price: 700, Stock: 1, BackupUnits: 1,
		StockPolicy: orderpay.StockReserve, ReserveMinutes: 10}); err != nil {
		t.Fatal(err)
	}
	late := newOrder(t, b, "heldlate", 1)
	b.clock.Advance(10 * time.Minute)
	if res, err := b.svc.ReleaseExpiredHolds(ctx, 100); err != nil || res.Released != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	quick := newOrder(t, b, "heldlate", 1)
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, quick)); err != nil {
		t.Fatal(err)
	}
	wantStock(t, b, "heldlate", orderpay.Stock{Sold: 1, Total: 1, BackupUnits: 1, BackupLeft: 1}, 1)
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, late)); err != nil {
		t.Fatalf("the payment after the hold was released and the unit sold: %v; want PAID from the backup", err)
	}
	wantStatus(t, b, late.No, orderpay.OrderPaid)
	wantStock(t, b, "heldlate", orderpay.Stock{Sold: 2, Total: 2, BackupUnits: 1, BackupUsed: 1}, 1)
	if h := holdOf(t, b, late.No); h.State != orderpay.HoldReleased {
		t.Fatalf("hold of the late order %+v", h)
	}
}

// backup_units: 0 to BackupUnitsMax, and never for the "order" policy, whose payment sells
// the units its order locked and never finds them gone. A refused SKU writes nothing.
func TestBackupStockValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	ok := order.NewSKU{SKU: "new", MerchantID: "m1", Title: "New", Price: 100, Stock: 1, StockPolicy: orderpay.StockAtPayment}
	for name, mutate := range map[string]func(n *order.NewSKU){
		"negative":           func(n *order.NewSKU) { n.BackupUnits = -1 },
		"too many":           func(n *order.NewSKU) { n.BackupUnits = order.BackupUnitsMax + 1 },
		"order policy":       func(n *order.NewSKU) { n.StockPolicy, n.BackupUnits = orderpay.StockAtOrder, 1 },
		"the default policy": func(n *order.NewSKU) { n.StockPolicy, n.BackupUnits = "", 1 },
	} {
		n := ok
		mutate(&n)
		if _, _, err := b.svc.CreateSKU(ctx, n); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	if _, err := b.store.SKU(ctx, "new"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a refused SKU was written: %v", err)
	}
	for _, n := range []order.NewSKU{
		{SKU: "most", MerchantID: "m1", Title: "Most", Price: 100, StockPolicy: orderpay.StockReserve, BackupUnits: order.BackupUnitsMax},
		{SKU: "none", MerchantID: "m1", Title: "None", Price: 100, Stock: 3, StockPolicy: orderpay.StockAtPayment},
	} {
		if _, _, err := b.svc.CreateSKU(ctx, n); err != nil {
			t.Fatalf("%s: %v", n.SKU, err)
		}
		wantStock(t, b, n.SKU, orderpay.Stock{Available: n.Stock, Total: n.Stock, BackupUnits: n.BackupUnits, BackupLeft: n.BackupUnits}, n.Stock)
	}
}

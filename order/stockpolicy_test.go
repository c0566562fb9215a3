package order_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// policySetup is setup plus a "payment" SKU (3 units, limit 5 per buyer) and a "reserve"
// SKU (2 units, held 10 minutes).
func policySetup(t *testing.T) bundle {
	t.Helper()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	for _, n := range []order.NewSKU{
		{SKU: "paylater", MerchantID: "m1", Title: "Pay-time tea", Price: 500, Stock: 3, StockPolicy: orderpay.StockAtPayment, LimitPerBuyer: 5},
		{SKU: "held", MerchantID: "m1", Title: "Held tea", Price: 700, Stock: 2, StockPolicy: orderpay.StockReserve, ReserveMinutes: 10},
	} {
		if _, _, err := b.svc.CreateSKU(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// paidEvent is the payment center's payment.succeeded of o, its SUCCESS recorded (settled).
func paidEvent(t testing.TB, b bundle, o *orderpay.Order) orderpay.PaymentSucceeded {
	return settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay",
		OutTradeNo: "P" + o.No + "A01", PaidAt: now})
}

func wantStatus(t *testing.T, b bundle, no string, status orderpay.OrderStatus) *orderpay.Order {
	t.Helper()
	o, err := b.svc.Order(context.Background(), no)
	if err != nil || o.Status != status {
		t.Fatalf("order %s: %+v, %v; want %s", no, o, err, status)
	}
	return o
}

func countSubject(t *testing.T, b bundle, subject, id string) int {
	t.Helper()
	msgs, err := b.store.UnpublishedMessages(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if m.Subject == subject && m.ID == id {
			n++
		}
	}
	return n
}

func TestReserveMinutesDefaultsAndShows(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	sku, _, err := b.svc.CreateSKU(context.Background(), order.NewSKU{SKU: "r", MerchantID: "m1", Title: "R", Price: 1, Stock: 1, StockPolicy: orderpay.StockReserve})
	if err != nil || sku.ReserveMinutes != order.ReserveMinutesDefault {
		t.Fatalf("reserve SKU without reserve_minutes: %+v, %v", sku, err)
	}
	if got, _ := b.store.SKU(context.Background(), "r"); got.ReserveMinutes != order.ReserveMinutesDefault {
		t.Fatalf("stored %+v", got)
	}
}

// "payment": the create only checks; the payment deducts.
func TestPaymentPolicyChecksAtCreateDeductsAtPayment(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	ctx := context.Background()
	o := newOrder(t, b, "paylater", 2)
	if st := stockOf(t, b.store, "paylater"); st.Available != 3 || st.Locked != 0 || st.Sold != 0 {
		t.Fatalf("stock after create %+v: nothing may be deducted", st)
	}
	// Two lines of the SKU are checked together: 2 + 2 > 3.
	_, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "bob", Items: []order.ItemRequest{{SKU: "paylater", Qty: 2}, {SKU: "paylater", Qty: 2}}})
	if orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
		t.Fatalf("4 of 3 available in two lines: %v, want EOUTOFSTOCK", err)
	}
	if _, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "bob", Items: []order.ItemRequest{{SKU: "paylater", Qty: 4}}}); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
		t.Fatalf("4 of 3 available: %v, want EOUTOFSTOCK", err)
	}
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, o)); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b, o.No, orderpay.OrderPaid)
	if st := stockOf(t, b.store, "paylater"); st.Available != 1 || st.Locked != 0 || st.Sold != 2 {
		t.Fatalf("stock after payment %+v", st)
	}
	// A cancel gives nothing back: nothing was taken.
	c := newOrder(t, b, "paylater", 1)
	b.svc = mustService(t, b, closing(orderpay.CloseDone))
	if _, err := b.svc.Cancel(ctx, c.No); err != nil {
		t.Fatal(err)
	}
	if st := stockOf(t, b.store, "paylater"); st.Available != 1 || st.Sold != 2 {
		t.Fatalf("stock after a cancel %+v", st)
	}
}

// mustService is a second Service on the same store and clock, with a payment center.
func mustService(t *testing.T, b bundle, p orderpay.PaymentCenter) *order.Service {
	t.Helper()
	svc, err := order.New(order.Config{Store: b.store, Clock: b.clock, Payments: p})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Two buyers race for the last unit of a "payment" SKU and both pay: one order is PAID, the
// other is cancelled (its purchase count given back, order.cancelled written once) and its
// payment refused as sold out, however often the payment is delivered.
func TestPaymentPolicyLastUnitPaidTwiceOneIsCancelledAndRefused(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	ctx := context.Background()
	first := newOrder(t, b, "paylater", 3)
	second := newOrder(t, b, "paylater", 3)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, o := range []*orderpay.Order{first, second} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.svc.PaymentSucceeded(ctx, paidEvent(t, b, o)) }()
	}
	wg.Wait()
	winner, loser, loserErr := first, second, errs[1]
	if errs[0] != nil {
		winner, loser, loserErr = second, first, errs[0]
	}
	if errs[0] != nil && errs[1] != nil {
		t.Fatalf("both refused: %v / %v", errs[0], errs[1])
	}
	if reason, refused := orderpay.Refusal(loserErr); orderpay.ErrorCode(loserErr) != orderpay.ECONFLICT || !refused || reason != orderpay.RefundReasonSoldOut {
		t.Fatalf("the second payment: %v; want ECONFLICT, sold out", loserErr)
	}
	wantStatus(t, b, winner.No, orderpay.OrderPaid)
	lost := wantStatus(t, b, loser.No, orderpay.OrderCancelled)
	if lost.PaymentNo != "" {
		t.Fatalf("the cancelled order names payment %q", lost.PaymentNo)
	}
	if st := stockOf(t, b.store, "paylater"); st.Available != 0 || st.Locked != 0 || st.Sold != 3 || st.Total != 3 {
		t.Fatalf("stock %+v", st)
	}
	if n, _ := b.store.BuyerPurchases(ctx, loser.BuyerID, "paylater"); n != 0 {
		t.Fatalf("the cancelled buyer still counts %d units", n)
	}
	// The bus delivers the same payment again, twice: refused the same way, nothing more.
	for range 2 {
		err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, loser))
		if reason, refused := orderpay.Refusal(err); orderpay.ErrorCode(err) != orderpay.ECONFLICT || !refused || reason != orderpay.RefundReasonSoldOut {
			t.Fatalf("redelivery: %v", err)
		}
	}
	h, _ := b.store.History(ctx, orderpay.EntityOrder, loser.No)
	if len(h) != 2 || h[1].To != string(orderpay.OrderCancelled) || h[1].Actor != "system" || h[1].Reason != order.SoldOutReason {
		t.Fatalf("history of the sold-out order %+v", h)
	}
	if n := countSubject(t, b, orderpay.SubjectOrderCancelled, "order.cancelled:"+loser.No); n != 1 {
		t.Fatalf("%d order.cancelled events, want 1", n)
	}
	if n := countSubject(t, b, orderpay.SubjectOrderPaid, "order.paid:"+loser.No); n != 0 {
		t.Fatalf("the sold-out order has %d order.paid events", n)
	}
}

func holdOf(t *testing.T, b bundle, no string) orderpay.StockHold {
	t.Helper()
	hs, err := b.store.StockHolds(context.Background(), no)
	if err != nil || len(hs) != 1 {
		t.Fatalf("holds of %s: %+v, %v", no, hs, err)
	}
	return hs[0]
}

// "reserve": the create locks for the SKU's minutes; the sweeper releases the hold when it
// ends (not before); a payment after that deducts again.
func TestReserveHoldExpiresThenPaymentDeductsAgain(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	ctx := context.Background()
	o := newOrder(t, b, "held", 1)
	if st := stockOf(t, b.store, "held"); st.Available != 1 || st.Locked != 1 {
		t.Fatalf("stock after create %+v", st)
	}
	if h := holdOf(t, b, o.No); h.State != orderpay.HoldStanding || !h.HoldUntil.Equal(now.Add(10*time.Minute)) || h.Qty != 1 {
		t.Fatalf("hold %+v", h)
	}
	b.clock.Advance(10*time.Minute - time.Millisecond)
	if res, err := b.svc.ReleaseExpiredHolds(ctx, 100); err != nil || res.Released != 0 {
		t.Fatalf("sweep before the end: %+v, %v", res, err)
	}
	b.clock.Advance(time.Millisecond)
	if res, err := b.svc.ReleaseExpiredHolds(ctx, 100); err != nil || res.Released != 1 {
		t.Fatalf("sweep at the end: %+v, %v", res, err)
	}
	if st := stockOf(t, b.store, "held"); st.Available != 2 || st.Locked != 0 {
		t.Fatalf("stock after release %+v", st)
	}
	if res, _ := b.svc.ReleaseExpiredHolds(ctx, 100); res.Released != 0 {
		t.Fatalf("a second sweep released again: %+v", res)
	}
	wantStatus(t, b, o.No, orderpay.OrderPendingPayment) // the order itself is still payable
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, o)); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b, o.No, orderpay.OrderPaid)
	if st := stockOf(t, b.store, "held"); st.Available != 1 || st.Locked != 0 || st.Sold != 1 {
		t.Fatalf("stock after the payment deducted again %+v", st)
	}
	if h := holdOf(t, b, o.No); h.State != orderpay.HoldReleased {
		t.Fatalf("hold after the late payment %+v", h)
	}
}

// Paid while held: the hold's units are sold and the sweeper finds nothing to release.
func TestReservePaidWhileHeldSellsTheLockedUnits(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	ctx := context.Background()
	o := newOrder(t, b, "held", 2)
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, o)); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, o)); err != nil { // the bus, again
		t.Fatal(err)
	}
	if h := holdOf(t, b, o.No); h.State != orderpay.HoldSold {
		t.Fatalf("hold %+v", h)
	}
	b.clock.Advance(time.Hour)
	if res, err := b.svc.ReleaseExpiredHolds(ctx, 100); err != nil || res.Released != 0 {
		t.Fatalf("sweep after the payment: %+v, %v", res, err)
	}
	if st := stockOf(t, b.store, "held"); st.Available != 0 || st.Locked != 0 || st.Sold != 2 {
		t.Fatalf("stock %+v", st)
	}
}

// A cancel while the hold stands gives the units back; a cancel after the sweeper did
// gives nothing back twice.
func TestReserveCancelReleasesOnlyAStandingHold(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	b.svc = mustService(t, b, closing(orderpay.CloseDone))
	ctx := context.Background()
	held := newOrder(t, b, "held", 1)
	expired := newOrder(t, b, "held", 1)
	if _, err := b.svc.Cancel(ctx, held.No); err != nil {
		t.Fatal(err)
	}
	if st := stockOf(t, b.store, "held"); st.Available != 1 || st.Locked != 1 {
		t.Fatalf("stock after cancelling a held order %+v", st)
	}
	if h := holdOf(t, b, held.No); h.State != orderpay.HoldReleased {
		t.Fatalf("hold of the cancelled order %+v", h)
	}
	b.clock.Advance(10 * time.Minute)
	if res, _ := b.svc.ReleaseExpiredHolds(ctx, 100); res.Released != 1 {
		t.Fatalf("sweep: %+v", res)
	}
	if _, err := b.svc.Cancel(ctx, expired.No); err != nil {
		t.Fatal(err)
	}
	if st := stockOf(t, b.store, "held"); st.Available != 2 || st.Locked != 0 || st.Sold != 0 {
		t.Fatalf("stock after cancelling an expired hold %+v", st)
	}
}

// The hold expired and another buyer took the units: the late payment finds none, the
// order is cancelled and the payment refused as sold out.
func TestReservePaymentAfterReleaseWithNothingLeftIsRefused(t *testing.T) {
	t.Parallel()
	b := policySetup(t)
	ctx := context.Background()
	late := newOrder(t, b, "held", 2)
	b.clock.Advance(10 * time.Minute)
	if res, _ := b.svc.ReleaseExpiredHolds(ctx, 100); res.Released != 1 {
		t.Fatalf("sweep: %+v", res)
	}
	quick := newOrder(t, b, "held", 2)
	if err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, quick)); err != nil {
		t.Fatal(err)
	}
	err := b.svc.PaymentSucceeded(ctx, paidEvent(t, b, late))
	if reason, refused := orderpay.Refusal(err); orderpay.ErrorCode(err) != orderpay.ECONFLICT || !refused || reason != orderpay.RefundReasonSoldOut {
		t.Fatalf("late payment: %v; want refused as sold out", err)
	}
	wantStatus(t, b, late.No, orderpay.OrderCancelled)
	wantStatus(t, b, quick.No, orderpay.OrderPaid)
	if st := stockOf(t, b.store, "held"); st.Available != 0 || st.Locked != 0 || st.Sold != 2 {
		t.Fatalf("stock %+v", st)
	}
}

// A hold never outlasts the pay deadline: a fast-moving SKU (15 minutes to pay) held for an
// hour is held 15 minutes.
func TestReserveHoldEndsAtThePayDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	if _, _, err := b.svc.CreateSKU(context.Background(), order.NewSKU{SKU: "fastheld", MerchantID: "m1", Title: "F", Price: 100, Stock: 5,
		ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockReserve, ReserveMinutes: 60}); err != nil {
		t.Fatal(err)
	}
	o := newOrder(t, b, "fastheld", 1)
	if h := holdOf(t, b, o.No); !h.HoldUntil.Equal(o.PayDeadline) || !o.PayDeadline.Equal(now.Add(15*time.Minute)) {
		t.Fatalf("hold until %v, deadline %v", h.HoldUntil, o.PayDeadline)
	}
}

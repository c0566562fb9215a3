package order_test

import (
	"context"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

func TestReceiptDeadlineExtensionsAndAutoConfirm(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); receiptDeadlines(t, storetest.OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); receiptDeadlines(t, storetest.OpenPostgres(t)) })
}

// A parcel's receipt countdown: ten days from shipping; the buyer extends once, the
// merchant and the platform as often as they need; at the deadline receipt is confirmed
// for the buyer, and the order, with nothing else open, is received and completed.
func receiptDeadlines(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	addr := orderpay.Address{Name: "Li Lei", Phone: "13800138000", Detail: "1 Wensan Road, Hangzhou"}
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Address: addr, Items: []order.ItemRequest{{SKU: "tea", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable})); err != nil {
		t.Fatal(err)
	}
	parcels, err := b.svc.Shipments(ctx, o.No)
	if err != nil || len(parcels) != 1 || parcels[0].Status != orderpay.ShipmentPending || parcels[0].Units() != 1 {
		t.Fatalf("parcels %+v, %v", parcels, err)
	}
	no := parcels[0].No
	shippedAt := b.clock.Now()
	sh, err := b.svc.Ship(ctx, no, "SF Express", "SF1234567890", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if sh.Status != orderpay.ShipmentShipped || !sh.ReceiveBy.Equal(shippedAt.Add(orderpay.ReceiptWindow)) {
		t.Fatalf("shipped %+v", sh)
	}
	if got, _ := b.store.Order(ctx, o.No); got.Status != orderpay.OrderShipped {
		t.Fatalf("order %s after its only parcel shipped", got.Status)
	}
	// The buyer's one extension: three days; a second is refused.
	if sh, err = b.svc.BuyerExtendReceipt(ctx, o.No, no, "alice"); err != nil || !sh.ReceiveBy.Equal(shippedAt.Add(13*24*time.Hour)) || !sh.BuyerExtended {
		t.Fatalf("buyer extension: %+v, %v", sh, err)
	}
	if _, err := b.svc.BuyerExtendReceipt(ctx, o.No, no, "alice"); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("second buyer extension: %v", err)
	}
	if _, err := b.svc.BuyerExtendReceipt(ctx, o.No, no, "mallory"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("someone else's extension: %v", err)
	}
	// The merchant twice, the platform once.
	for _, by := range []string{orderpay.ExtendByMerchant, orderpay.ExtendByMerchant, orderpay.ExtendByPlatform} {
		if sh, err = b.svc.ExtendReceipt(ctx, no, by, "admin:"+by, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if !sh.ReceiveBy.Equal(shippedAt.Add(16*24*time.Hour)) || sh.Extensions != 4 {
		t.Fatalf("after four extensions: %+v", sh)
	}
	if _, err := b.svc.ExtendReceipt(ctx, no, orderpay.ExtendByMerchant, "admin", 31*24*time.Hour); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("a 31-day extension: %v", err)
	}
	// Just before the deadline nothing happens; just after, receipt is confirmed.
	b.clock.Set(sh.ReceiveBy.Add(-time.Second))
	if res, err := b.svc.AutoConfirmDue(ctx, 10); err != nil || res.Received != 0 {
		t.Fatalf("before the deadline: %+v, %v", res, err)
	}
	b.clock.Set(sh.ReceiveBy.Add(time.Second))
	if res, err := b.svc.AutoConfirmDue(ctx, 10); err != nil || res.Received != 1 {
		t.Fatalf("after the deadline: %+v, %v", res, err)
	}
	if sh, _ = b.store.Shipment(ctx, no); sh.Status != orderpay.ShipmentReceived || sh.ReceivedBy != "auto" {
		t.Fatalf("parcel %+v", sh)
	}
	if got, _ := b.store.Order(ctx, o.No); got.Status != orderpay.OrderCompleted {
		t.Fatalf("order %s after its only parcel was received", got.Status)
	}
	msgs, err := b.store.UnpublishedMessages(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Subject]++
	}
	for _, s := range []string{orderpay.SubjectOrderShipped, orderpay.SubjectOrderReceived, orderpay.SubjectOrderCompleted} {
		if seen[s] != 1 {
			t.Errorf("%d %s messages, want 1 (%v)", seen[s], s, seen)
		}
	}
	// Confirming again is a no-op; an address change after shipping is refused.
	if _, err := b.svc.ConfirmReceipt(ctx, o.No, no, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.ChangeAddress(ctx, o.No, "alice", addr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("address change after shipping: %v", err)
	}
}

// An auto-confirmation that read a deadline an extension then moved does not apply.
func TestAutoConfirmLosesToAnExtension(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "bob", Address: orderpay.Address{Name: "Bob", Phone: "+86 21 5555 0101", Detail: "Shanghai"},
		Items: []order.ItemRequest{{SKU: "lychee", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable})); err != nil {
		t.Fatal(err)
	}
	parcels, _ := b.svc.Shipments(ctx, o.No)
	sh, err := b.svc.Ship(ctx, parcels[0].No, "YTO", "YT99", "admin")
	if err != nil {
		t.Fatal(err)
	}
	err = b.store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: sh.No, From: orderpay.ShipmentShipped, To: orderpay.ShipmentReceived,
			Event: orderpay.ShipmentEventReceive, At: b.clock.Now(), Actor: "system", ReceivedBy: "auto", PrevReceiveBy: sh.ReceiveBy.Add(-time.Hour)})
	})
	if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("an auto-confirmation on a stale deadline: %v", err)
	}
	if got, _ := b.store.Shipment(ctx, sh.No); got.Status != orderpay.ShipmentShipped {
		t.Fatalf("parcel %s", got.Status)
	}
}

package order_test

import (
	"context"
	"log/slog"
	"testing"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// An order read with its requests while the last refund's money comes back is seen either
// before the money (PAID, the request REFUNDING) or after it (REFUNDED, SUCCESS), never
// half-way. Page reads them with Store.OrderPage, on one snapshot; the worst
// interleaving, the refund committing between the read of the order and the read of its
// requests, is forced on both engines in sqlstore (TestOrderPageReadsOneSnapshot). Here
// the real refund's landing is read on both sides of it. A page that was shown every
// request ended with the order still PAID stopped following it, and never showed it
// REFUNDED.
func TestPageShowsARefundWithItsOrderSQLite(t *testing.T) {
	t.Parallel()
	detailAroundRefund(t, storetest.OpenSQLite(t))
}

func TestPageShowsARefundWithItsOrderPostgres(t *testing.T) {
	t.Parallel()
	detailAroundRefund(t, storetest.OpenPostgres(t))
}

func detailAroundRefund(t *testing.T, store orderpay.Store) {
	ctx := context.Background()
	b := setup(t, store, order.Config{AutoApproveRefundMax: -1, Logger: slog.New(slog.DiscardHandler)})
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}},
		Address: orderpay.Address{Name: "Li Lei", Phone: "13800138000", Detail: "1 Wensan Road, Hangzhou"}})
	if err != nil {
		t.Fatal(err)
	}
	paidWithPayment(t, b, o)
	a, err := b.svc.RequestAfterSale(ctx, o.No, order.AfterSaleRequest{BuyerID: "alice", Kind: orderpay.AfterSaleRefund, Reason: "changed my mind",
		Items: []order.AfterSaleItemRequest{{Line: o.Items[0].Line, Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Approve(ctx, a.No, "merchant"); err != nil {
		t.Fatal(err)
	}
	check := func(when string, wantOrder orderpay.OrderStatus, wantRequest orderpay.AfterSaleStatus) {
		t.Helper()
		page, err := b.svc.Page(ctx, o.No)
		if err != nil {
			t.Fatal(err)
		}
		got, sales := page.Order, page.Sales
		if got.Status != wantOrder || len(sales) != 1 || sales[0].Status != wantRequest {
			t.Fatalf("%s: the order is %s with requests %+v; want %s with one %s", when, got.Status, sales, wantOrder, wantRequest)
		}
	}
	check("read before the refund lands", orderpay.OrderPaid, orderpay.AfterSaleRefunding)
	// The channel's money comes back.
	r, err := store.ChannelRefund(ctx, a.No)
	if err != nil {
		t.Fatal(err)
	}
	r.Status = orderpay.ChannelRefundSuccess
	if err := store.InTx(ctx, func(tx orderpay.Tx) error { return b.svc.AfterSaleRefundFinal(ctx, tx, r, b.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	check("read after it", orderpay.OrderRefunded, orderpay.AfterSaleSucceeded)
}

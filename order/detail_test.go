package order_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// An order read with its requests while the last refund's money comes back is seen either
// before the money (PAID, the request REFUNDING) or after it (REFUNDED, SUCCESS), never
// half-way: the worst interleaving, the refund committing between the read of the order and
// the read of its requests, is forced on both engines. A page that was shown every request
// ended with the order still PAID stopped following it, and never showed it REFUNDED.
func TestDetailNeverShowsARefundEndedOnAnOrderStillPaidSQLite(t *testing.T) {
	t.Parallel()
	detailDuringRefund(t, storetest.OpenSQLite(t))
}

func TestDetailNeverShowsARefundEndedOnAnOrderStillPaidPostgres(t *testing.T) {
	t.Parallel()
	detailDuringRefund(t, storetest.OpenPostgres(t))
}

func detailDuringRefund(t *testing.T, store orderpay.Store) {
	ctx := context.Background()
	hs := &hookedStore{Store: store}
	b := setup(t, hs, order.Config{AutoApproveRefundMax: -1, Logger: slog.New(slog.DiscardHandler)})
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
	// The channel's money comes back, through the store itself, just after the order is
	// read and before its parcels and requests are.
	hs.beforeParcels = func() {
		r, err := store.ChannelRefund(ctx, a.No)
		if err != nil {
			t.Error(err)
			return
		}
		r.Status = orderpay.ChannelRefundSuccess
		if err := store.InTx(ctx, func(tx orderpay.Tx) error { return b.svc.AfterSaleRefundFinal(ctx, tx, r, b.clock.Now()) }); err != nil {
			t.Error(err)
		}
	}
	check := func(when string, wantOrder orderpay.OrderStatus, wantRequest orderpay.AfterSaleStatus) {
		t.Helper()
		got, _, sales, err := b.svc.Detail(ctx, o.No)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != wantOrder || len(sales) != 1 || sales[0].Status != wantRequest {
			t.Fatalf("%s: the order is %s with requests %+v; want %s with one %s", when, got.Status, sales, wantOrder, wantRequest)
		}
	}
	check("read while the refund lands", orderpay.OrderPaid, orderpay.AfterSaleRefunding)
	if !hs.fired() {
		t.Fatal("the refund never landed during the read")
	}
	check("read after it", orderpay.OrderRefunded, orderpay.AfterSaleSucceeded)
}

// hookedStore runs beforeParcels once, at the first read of an order's parcels, whether
// through the store or a view of it.
type hookedStore struct {
	orderpay.Store
	once          sync.Once
	beforeParcels func()
	ran           bool
}

func (s *hookedStore) hook() {
	if s.beforeParcels != nil {
		s.once.Do(func() { s.beforeParcels(); s.ran = true })
	}
}

func (s *hookedStore) fired() bool { return s.ran }

func (s *hookedStore) Shipments(ctx context.Context, orderNo string) ([]orderpay.Shipment, error) {
	s.hook()
	return s.Store.Shipments(ctx, orderNo)
}

func (s *hookedStore) View(ctx context.Context, fn func(r orderpay.Reader) error) error {
	return s.Store.View(ctx, func(r orderpay.Reader) error { return fn(&hookedReader{Reader: r, s: s}) })
}

type hookedReader struct {
	orderpay.Reader
	s *hookedStore
}

func (r *hookedReader) Shipments(ctx context.Context, orderNo string) ([]orderpay.Shipment, error) {
	r.s.hook()
	return r.Reader.Shipments(ctx, orderNo)
}

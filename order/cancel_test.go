package order_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// payments is a PaymentCenter of function fields, for the order system's own decisions.
type payments struct {
	close  func(orderNo string) (orderpay.CloseOutcome, error)
	result map[string]*orderpay.PaymentSucceeded // by order number
	mu     sync.Mutex                            // the timeout close calls Close from several goroutines
	calls  []string
}

var _ orderpay.PaymentCenter = (*payments)(nil)

func (p *payments) Pay(context.Context, orderpay.PayRequest) (*orderpay.PayResult, error) {
	return nil, orderpay.Errorf(orderpay.EINTERNAL, "not in this test")
}

func (p *payments) Close(_ context.Context, orderNo string) (orderpay.CloseOutcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, orderNo)
	return p.close(orderNo)
}

func (p *payments) RefundRejected(context.Context, orderpay.PaymentSucceeded, string) error {
	return nil
}

func (p *payments) Poll(ctx context.Context, orderNo string) (*orderpay.PaymentSucceeded, []orderpay.ChannelOrder, error) {
	ev, err := p.Result(ctx, orderNo)
	return ev, nil, err
}

// PollRead answers from the results set, whatever the store holds of the payment.
func (p *payments) PollRead(ctx context.Context, orderNo, _ string, _ *orderpay.Payment, _ []orderpay.ChannelOrder) (*orderpay.PaymentSucceeded, []orderpay.ChannelOrder, error) {
	return p.Poll(ctx, orderNo)
}

func (p *payments) Result(_ context.Context, orderNo string) (*orderpay.PaymentSucceeded, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.result[orderNo], nil
}

func closing(outcome orderpay.CloseOutcome) *payments {
	return &payments{close: func(string) (orderpay.CloseOutcome, error) { return outcome, nil }}
}

var buyers atomic.Int64

// newOrder creates an order for a buyer of its own, so that orders for the same items are
// not one order to the duplicate guard.
func newOrder(t *testing.T, b bundle, sku string, qty int64) *orderpay.Order {
	t.Helper()
	buyer := fmt.Sprint("alice-", buyers.Add(1))
	o, err := b.svc.CreateOrder(context.Background(), order.CreateOrderRequest{BuyerID: buyer, Items: []order.ItemRequest{{SKU: sku, Qty: qty}}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestCancelReleasesStockAndWritesTheEvent(t *testing.T) {
	t.Parallel()
	for _, outcome := range []orderpay.CloseOutcome{orderpay.CloseDone, orderpay.CloseNotPaidYet} {
		t.Run(string(outcome), func(t *testing.T) {
			t.Parallel()
			b := setup(t, storetest.OpenSQLite(t), order.Config{Payments: closing(outcome)})
			ctx := context.Background()
			o := newOrder(t, b, "tea", 4)
			got, err := b.svc.Cancel(ctx, o.No)
			if err != nil || got.Status != orderpay.OrderCancelled || got.ClosedAt.IsZero() {
				t.Fatalf("cancel: %+v, %v", got, err)
			}
			if st := stockOf(t, b.store, "tea"); st.Available != 10 || st.Locked != 0 {
				t.Fatalf("stock not released: %+v", st)
			}
			msgs, _ := b.store.UnpublishedMessages(ctx, 10)
			if len(msgs) != 2 || msgs[1].ID != "order.cancelled:"+o.No {
				t.Fatalf("outbox %+v", msgs)
			}
			if again, err := b.svc.Cancel(ctx, o.No); err != nil || again.Status != orderpay.OrderCancelled {
				t.Fatalf("a second cancel: %+v, %v", again, err)
			}
			if st := stockOf(t, b.store, "tea"); st.Available != 10 {
				t.Fatalf("a second cancel released stock again: %+v", st)
			}
			// A payment that still arrives is refused, so that the payment center refunds it.
			err = b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable}))
			if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("payment after cancel: %v", err)
			}
		})
	}
}

func TestCancelIsRefusedWhenPaidOrUnknown(t *testing.T) {
	t.Parallel()
	for outcome, code := range map[orderpay.CloseOutcome]string{orderpay.ClosePaid: orderpay.ECONFLICT, orderpay.CloseUnknown: orderpay.EUNAVAILABLE} {
		t.Run(string(outcome), func(t *testing.T) {
			t.Parallel()
			b := setup(t, storetest.OpenSQLite(t), order.Config{Payments: closing(outcome)})
			o := newOrder(t, b, "tea", 1)
			if _, err := b.svc.Cancel(context.Background(), o.No); orderpay.ErrorCode(err) != code {
				t.Fatalf("cancel: %v, want %s", err, code)
			}
			if got, _ := b.svc.Order(context.Background(), o.No); got.Status != orderpay.OrderPendingPayment {
				t.Fatalf("order %s after a refused cancel", got.Status)
			}
			if st := stockOf(t, b.store, "tea"); st.Locked != 1 {
				t.Fatalf("stock %+v", st)
			}
		})
	}
}

func TestCancelAPaidOrderDoesNotAskTheChannel(t *testing.T) {
	t.Parallel()
	p := closing(orderpay.CloseDone)
	b := setup(t, storetest.OpenSQLite(t), order.Config{Payments: p})
	ctx := context.Background()
	o := newOrder(t, b, "tea", 1)
	if err := b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable})); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Cancel(ctx, o.No); orderpay.ErrorCode(err) != orderpay.ECONFLICT || len(p.calls) != 0 {
		t.Fatalf("cancel of a paid order: %v, close calls %v", err, p.calls)
	}
	if _, err := b.svc.Cancel(ctx, "nope"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("cancel of an unknown order: %v", err)
	}
}

// The timeout close takes only orders past deadline + grace; it cancels those whose payment
// is closed, pulls the result of a paid one whose result never arrived, and leaves
// undecided ones alone.
func TestExpireDue(t *testing.T) {
	t.Parallel()
	outcomes := map[string]orderpay.CloseOutcome{}
	p := &payments{close: func(no string) (orderpay.CloseOutcome, error) { return outcomes[no], nil }}
	b := setup(t, storetest.OpenSQLite(t), order.Config{Payments: p})
	ctx := context.Background()
	closed := newOrder(t, b, "lychee", 1) // fast: 15 minutes
	paid := newOrder(t, b, "lychee", 1)
	unknown := newOrder(t, b, "lychee", 1)
	later := newOrder(t, b, "tea", 1) // normal: 3 days
	outcomes[closed.No], outcomes[paid.No], outcomes[unknown.No] = orderpay.CloseDone, orderpay.ClosePaid, orderpay.CloseUnknown
	// The paid order's result was lost on its way (a crash): the sweep pulls it.
	ev := settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + paid.No, OrderNo: paid.No, Amount: paid.Payable, Channel: "alipay"})
	p.result = map[string]*orderpay.PaymentSucceeded{paid.No: &ev}

	b.clock.Advance(15 * time.Minute) // at the deadline, inside the grace
	if res, err := b.svc.ExpireDue(ctx, time.Minute, 100, 4); err != nil || len(p.calls) != 0 || res != (order.ExpireResult{}) {
		t.Fatalf("before the grace ran out: %+v, %v, calls %v", res, err, p.calls)
	}
	b.clock.Advance(2 * time.Minute)
	res, err := b.svc.ExpireDue(ctx, time.Minute, 100, 4)
	if err != nil || res != (order.ExpireResult{Cancelled: 1, Paid: 1, Open: 1}) {
		t.Fatalf("ExpireDue: %+v, %v", res, err)
	}
	for no, want := range map[string]orderpay.OrderStatus{closed.No: orderpay.OrderCancelled, paid.No: orderpay.OrderPaid,
		unknown.No: orderpay.OrderPendingPayment, later.No: orderpay.OrderPendingPayment} {
		if got, _ := b.svc.Order(ctx, no); got.Status != want {
			t.Errorf("order %s is %s, want %s", no, got.Status, want)
		}
	}
	if st := stockOf(t, b.store, "lychee"); st.Locked != 1 || st.Sold != 1 || st.Available != 1 {
		t.Fatalf("lychee stock %+v", st)
	}
	h, _ := b.store.History(ctx, orderpay.EntityOrder, closed.No)
	if len(h) != 2 || h[1].Actor != "system" || h[1].To != "CANCELLED" {
		t.Fatalf("history %+v", h)
	}
}

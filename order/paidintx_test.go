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

func TestPaymentInTxRacingCancelSQLite(t *testing.T) {
	t.Parallel()
	paymentInTxRacingCancel(t, storetest.OpenSQLite(t))
}

func TestPaymentInTxRacingCancelPostgres(t *testing.T) {
	t.Parallel()
	paymentInTxRacingCancel(t, storetest.OpenPostgres(t))
}

// The order system takes a payment in the payment center's transaction while the buyer
// cancels the order. On PostgreSQL under READ COMMITTED the order read at the start of that
// transaction may be stale by the time it is updated. Every round ends one way, never
// both: the order is paid and its unit sold, and the cancel is refused; or the order is
// cancelled and its unit is available again, and the payment, failed in the transaction
// and told again after its commit (as the payment center does), is refused, so that it is
// refunded. The units add up after every round.
func paymentInTxRacingCancel(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{Payments: closing(orderpay.CloseDone)})
	ctx := context.Background()
	const rounds, units = 20, 100
	if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: "pu-erh", MerchantID: "m1", Title: "Pu-erh cake", Price: 6800, Stock: units,
		ProductType: orderpay.ProductNormal}); err != nil {
		t.Fatal(err)
	}
	paid := int64(0)
	for round := range rounds {
		o := newOrder(t, b, "pu-erh", 1)
		ev := settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay", OutTradeNo: "P" + o.No + "A01"})
		var cancelErr, inTxErr, toldErr error
		var after func()
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_, cancelErr = b.svc.Cancel(ctx, o.No)
		})
		wg.Go(func() {
			<-start
			// Rounds start the payment later and later, so that it meets the cancel at
			// every point of it, from before it to after it.
			time.Sleep(time.Duration(round) * 25 * time.Microsecond)
			inTxErr = store.InTx(ctx, func(tx orderpay.Tx) (err error) {
				after, err = b.svc.PaymentSucceededTx(ctx, tx, ev)
				return err
			})
			if inTxErr != nil {
				toldErr = b.svc.PaymentSucceeded(ctx, ev)
			} else {
				after()
			}
		})
		close(start)
		wg.Wait()
		got, err := store.Order(ctx, o.No)
		if err != nil {
			t.Fatal(err)
		}
		_, refused := orderpay.Refusal(toldErr)
		switch got.Status {
		case orderpay.OrderPaid:
			paid++
			if cancelErr == nil || got.PaymentNo != ev.PaymentNo || (inTxErr != nil && toldErr != nil) {
				t.Fatalf("round %d: paid, but cancel %v, in the transaction %v, after it %v", round, cancelErr, inTxErr, toldErr)
			}
		case orderpay.OrderCancelled:
			if cancelErr != nil || inTxErr == nil || !refused {
				t.Fatalf("round %d: cancelled, but cancel %v, in the transaction %v, after it %v (want a refusal)", round, cancelErr, inTxErr, toldErr)
			}
		default:
			t.Fatalf("round %d: order %s", round, got.Status)
		}
		if st := stockOf(t, store, "pu-erh"); st.Sold != paid || st.Locked != 0 || st.Available+st.Sold != units {
			t.Fatalf("round %d: stock %+v with %d orders paid", round, st, paid)
		}
	}
	t.Logf("%d of %d rounds paid, the rest cancelled", paid, rounds)
}

// staleTx runs afterRead once an order has been read in it: the test's way to put another
// transaction between the read and the update that depends on it.
type staleTx struct {
	orderpay.Tx
	afterRead func()
}

func (tx staleTx) Order(ctx context.Context, no string) (*orderpay.Order, error) {
	o, err := tx.Tx.Order(ctx, no)
	tx.afterRead()
	return o, err
}

// The worst interleaving, forced, on PostgreSQL under READ COMMITTED: the buyer's cancel
// commits after the payment's transaction read the order as unpaid and before it updates
// it. The update finds the order moved, the transaction's part fails and rolls back, and
// the payment told after its commit is refused: the order stays cancelled, its unit is
// available again, and nothing was sold.
func TestPaymentInTxAfterACancelCommittedPostgres(t *testing.T) {
	t.Parallel()
	store := storetest.OpenPostgres(t)
	b := setup(t, store, order.Config{Payments: closing(orderpay.CloseDone)})
	ctx := context.Background()
	for round := range 5 {
		o := newOrder(t, b, "tea", 1)
		ev := settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay", OutTradeNo: "P" + o.No + "A01"})
		var cancelErr error
		err := store.InTx(ctx, func(tx orderpay.Tx) error {
			_, err := b.svc.PaymentSucceededTx(ctx, staleTx{Tx: tx, afterRead: func() { _, cancelErr = b.svc.Cancel(ctx, o.No) }}, ev)
			return err
		})
		if cancelErr != nil || orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("round %d: cancel %v; the payment's part %v, want ECONFLICT", round, cancelErr, err)
		}
		told := b.svc.PaymentSucceeded(ctx, ev)
		if _, refused := orderpay.Refusal(told); !refused {
			t.Fatalf("round %d: the payment told after the commit: %v, want a refusal", round, told)
		}
		got, _ := store.Order(ctx, o.No)
		if got.Status != orderpay.OrderCancelled || got.PaymentNo != "" {
			t.Fatalf("round %d: order %+v", round, got)
		}
		if st := stockOf(t, store, "tea"); st.Sold != 0 || st.Locked != 0 || st.Available != 10 {
			t.Fatalf("round %d: stock %+v", round, st)
		}
	}
}

// Package storetest is the conformance suite every orderpay.Store runs: the same tests on
// SQLite and on PostgreSQL, so that the engines cannot drift apart.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/sqlstore"
)

// Factory returns a new, empty, migrated store for one test; it registers its own cleanup.
type Factory func(t *testing.T) orderpay.Store

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s orderpay.Store)
	}{
		{"SKUCreateAndRead", testSKU},
		{"StockLockIsConditional", testStockLock},
		{"FiftyBuyersTenUnitsSellExactlyTen", testConcurrentBuyers},
		{"StockSplitOverBucketsMovesExactly", testStockBuckets},
		{"BucketedStockUnderContentionHasNoFalseShortage", testBucketContention},
		{"RefundBeforeShippingLosesToAConcurrentShipment", testRefundRacingShipment},
		{"OrderCreateReadAndDuplicateNumber", testOrderCreate},
		{"FailedTxWritesNothing", testRollback},
		{"FailedSavepointUndoesItsOwnWritesOnly", testSavepoint},
		{"OrderTransitionIsConditional", testOrderTransition},
		{"ViewReadsOneSnapshot", testView},
		{"OrderPageReadsWhatItsStateCallsFor", testOrderPage},
		{"HistoryOfOneTransactionInOrder", testHistoryInOneTx},
		{"ConcurrentPayAppliesOnce", testConcurrentTransition},
		{"PaymentOnePerOrder", testPayment},
		{"ChannelOrderOneOpenAttempt", testChannelOrders},
		{"NotificationRecordedOnce", testNotifications},
		{"RequestKeyClaimedOnceUntilItExpires", testRequestKeys},
		{"PurchaseLimitsAndBlocklist", testAntiAbuse},
		{"BuyerUnpaidCountedUnderTheBuyersLock", testBuyerUnpaid},
		{"OutboxWrittenWithTheTransaction", testOutbox},
		{"ChannelRefundsAreConditionalAndBounded", testChannelRefunds},
		{"RefundQueueMovesOnceUnderRaces", testRefundQueue},
		{"SweeperQueriesTakeOnlyDueRows", testDueQueries},
		{"OrderSequenceBlocksNeverOverlap", testOrderSeq},
		{"CouponUsedOnceRestoredByItsOrder", testCoupons},
		{"SellAvailableStockIsConditional", testSellAvailableStock},
		{"StockHoldsEndOnce", testStockHolds},
		{"StockHoldRacedByPaymentAndSweeperMovesOnce", testStockHoldRace},
		{"BackupStockServesRunsOutAndAddsUp", testBackupStock},
		{"BackupStockAfterAFailedGatherTakesTheWholeLine", testBackupAfterAFailedGather},
		{"BackupStockLastUnitRacedGoesToOnePayment", testBackupLastUnitRace},
		{"OperationsLogAndSearch", testOpsLog},
		{"AuditLogKeepsOperatorActions", testAuditLog},
		{"RetentionRemovesOnlyWhatOperatorsRead", testRetention},
		{"StatsCountWhatTheGaugesShow", testStats},
		{"ReconciliationDayAndReports", testReconciliation},
		{"AppsKeysPaymentsAndRefundsAreConditional", testApps},
		{"AppRefundsRacingNeverExceedTheAmount", testAppRefundRace},
		{"EveryTransitionOffItsMachineIsRefused", testTransitionsOffTheTable},
		{"EventsAreConfirmedByTheRecords", testConfirmEvent},
		{"RefundClaimsOverSequences", testRefundClaimsOverSequences},
		{"FeesAndChannelRefundsReadBack", testFees},
		{"RefundSharesOfOneAttemptMeetingSumToItsFee", testRefundSharesMeet},
		{"ReconciliationLayersFiguresAndLastClose", testReconciliationLayers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func mustTx(t *testing.T, s orderpay.Store, fn func(tx orderpay.Tx) error) {
	t.Helper()
	if err := s.InTx(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := orderpay.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func newSKU(t *testing.T, s orderpay.Store, sku string, stock int64) {
	t.Helper()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(context.Background(), &orderpay.SKU{SKU: sku, MerchantID: "m1", Title: "Tea " + sku, Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder, CreatedAt: t0}, stock)
	})
}

func wantStock(t *testing.T, s orderpay.Store, sku string, available, locked, sold int64) {
	t.Helper()
	st, err := s.Stock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if st.Available != available || st.Locked != locked || st.Sold != sold {
		t.Fatalf("stock %s = available %d locked %d sold %d, want %d %d %d", sku, st.Available, st.Locked, st.Sold, available, locked, sold)
	}
	if st.Available+st.Locked+st.Sold != st.Total {
		t.Fatalf("stock %s does not add up: %+v", sku, st)
	}
}

func newOrder(no, sku string, qty int64) *orderpay.Order {
	return &orderpay.Order{No: no, BuyerID: "b1", Status: orderpay.OrderPendingPayment, Total: 1999 * qty, Payable: 1999 * qty,
		ProductType: orderpay.ProductNormal, PayDeadline: t0.Add(72 * time.Hour), CreatedAt: t0, UpdatedAt: t0,
		Items: []orderpay.OrderItem{{Line: 1, SKU: sku, MerchantID: "m1", Title: "Tea", UnitPrice: 1999, Qty: qty, Amount: 1999 * qty, Payable: 1999 * qty}}}
}

func testSKU(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 5)
	got, err := s.SKU(ctx, "tea")
	if err != nil {
		t.Fatal(err)
	}
	if got.Price != 1999 || got.MerchantID != "m1" || got.ProductType != orderpay.ProductNormal || !got.CreatedAt.Equal(t0) {
		t.Fatalf("sku read back as %+v", got)
	}
	wantStock(t, s, "tea", 5, 0, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "tea", MerchantID: "m2", Title: "x", Price: 1, ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockAtOrder, CreatedAt: t0}, 99)
	}), orderpay.ECONFLICT)
	wantStock(t, s, "tea", 5, 0, 0) // the failed create changed nothing
	_, err = s.SKU(ctx, "coffee")
	wantCode(t, err, orderpay.ENOTFOUND)
	_, err = s.Stock(ctx, "coffee")
	wantCode(t, err, orderpay.ENOTFOUND)
}

func testStockLock(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 5)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "tea", 3) })
	wantStock(t, s, "tea", 2, 3, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "tea", 3) }), orderpay.EOUTOFSTOCK)
	wantStock(t, s, "tea", 2, 3, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "nope", 1) }), orderpay.ENOTFOUND)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "tea", 0) }), orderpay.EINVALID)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "tea", -1) }), orderpay.EINVALID)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellLockedStock(ctx, "tea", 2) })
	wantStock(t, s, "tea", 2, 1, 2)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.ReleaseLockedStock(ctx, "tea", 1) })
	wantStock(t, s, "tea", 3, 0, 2)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellLockedStock(ctx, "tea", 1) }), orderpay.ECONFLICT)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.ReleaseLockedStock(ctx, "tea", 1) }), orderpay.ECONFLICT)
	wantStock(t, s, "tea", 3, 0, 2)
}

// 50 buyers race for 10 units: each locks one unit and creates its order in one
// transaction, then the winners pay. Exactly 10 orders exist, 10 units are sold, and the
// 40 losers left nothing behind.
func testConcurrentBuyers(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "hot", 10)
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.InTx(ctx, func(tx orderpay.Tx) error {
				if err := tx.LockStock(ctx, "hot", 1); err != nil {
					return err
				}
				return tx.CreateOrder(ctx, newOrder(fmt.Sprintf("O%03d", i), "hot", 1))
			})
		}()
	}
	wg.Wait()
	var won []int
	for i, err := range errs {
		switch orderpay.ErrorCode(err) {
		case "":
			won = append(won, i)
		case orderpay.EOUTOFSTOCK:
		default:
			t.Fatalf("buyer %d: unexpected error %v", i, err)
		}
	}
	if len(won) != 10 {
		t.Fatalf("%d buyers got stock, want exactly 10", len(won))
	}
	for i := range errs {
		_, err := s.Order(ctx, fmt.Sprintf("O%03d", i))
		if (err == nil) != (errs[i] == nil) {
			t.Fatalf("buyer %d: order exists = %v but lock error = %v", i, err == nil, errs[i])
		}
	}
	for _, i := range won {
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: fmt.Sprintf("O%03d", i), From: orderpay.OrderPendingPayment,
				To: orderpay.OrderPaid, Event: orderpay.OrderEventPay, At: t0, Actor: "test", PaymentNo: "P"}); err != nil {
				return err
			}
			return tx.SellLockedStock(ctx, "hot", 1)
		})
	}
	wantStock(t, s, "hot", 0, 0, 10)
}

func testOrderCreate(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	o := newOrder("O1", "tea", 2)
	o.Items = append(o.Items, orderpay.OrderItem{Line: 2, SKU: "tea", MerchantID: "m1", Title: "Tea", UnitPrice: 1999, Qty: 1, Amount: 1999, Payable: 1999})
	o.Total, o.Payable = 3*1999, 3*1999
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, o) })
	got, err := s.Order(ctx, "O1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != orderpay.OrderPendingPayment || got.Payable != 3*1999 || len(got.Items) != 2 || got.Items[1].Line != 2 ||
		!got.PayDeadline.Equal(o.PayDeadline) || got.BuyerID != "b1" {
		t.Fatalf("order read back as %+v", got)
	}
	h, err := s.History(ctx, orderpay.EntityOrder, "O1")
	if err != nil || len(h) != 1 || h[0].To != string(orderpay.OrderPendingPayment) || h[0].Event != "create" {
		t.Fatalf("history after create = %+v, %v", h, err)
	}
	if !reflect.DeepEqual(got.Items, o.Items) {
		t.Fatalf("items read back as %+v; want %+v", got.Items, o.Items)
	}
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, newOrder("O1", "tea", 1)) }), orderpay.ECONFLICT)
	if again, _ := s.Order(ctx, "O1"); !reflect.DeepEqual(again.Items, o.Items) {
		t.Fatalf("after a create under a taken number, the items are %+v; want %+v", again.Items, o.Items)
	}
	_, err = s.Order(ctx, "O404")
	wantCode(t, err, orderpay.ENOTFOUND)
}

// A transaction that fails half-way leaves no trace: not the stock it locked, not the
// order, not its history, not its outbox message.
func testRollback(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	boom := errors.New("boom")
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.LockStock(ctx, "tea", 4); err != nil {
			return err
		}
		if err := tx.CreateOrder(ctx, newOrder("O1", "tea", 4)); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, orderpay.Message{ID: "order.created:O1", Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{}`), CreatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v, want the callback's error", err)
	}
	wantStock(t, s, "tea", 10, 0, 0)
	_, err = s.Order(ctx, "O1")
	wantCode(t, err, orderpay.ENOTFOUND)
	if h, _ := s.History(ctx, orderpay.EntityOrder, "O1"); len(h) != 0 {
		t.Fatalf("history survived the rollback: %+v", h)
	}
	if msgs, _ := s.UnpublishedMessages(ctx, 10); len(msgs) != 0 {
		t.Fatalf("outbox message survived the rollback: %+v", msgs)
	}
}

// A savepoint that fails undoes what it wrote (stock, rows, history, outbox), and only that:
// what the transaction wrote before it and after it commits.
func testSavepoint(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	boom := errors.New("boom")
	write := func(tx orderpay.Tx, no string, qty int64) error {
		if err := tx.LockStock(ctx, "tea", qty); err != nil {
			return err
		}
		if err := tx.CreateOrder(ctx, newOrder(no, "tea", qty)); err != nil {
			return err
		}
		return tx.Enqueue(ctx, orderpay.Message{ID: "order.created:" + no, Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{}`), CreatedAt: t0})
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := write(tx, "O1", 1); err != nil {
			return err
		}
		if err := tx.Savepoint(ctx, func() error {
			if err := write(tx, "O2", 2); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			return fmt.Errorf("the failed savepoint returned %v, want its error", err)
		}
		// A savepoint that fails on the engine (too few units) leaves the transaction usable.
		if err := tx.Savepoint(ctx, func() error { return write(tx, "O3", 100) }); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
			return fmt.Errorf("the savepoint short of stock returned %v, want EOUTOFSTOCK", err)
		}
		if err := tx.Savepoint(ctx, func() error { return write(tx, "O4", 3) }); err != nil {
			return err
		}
		return write(tx, "O5", 1)
	})
	wantStock(t, s, "tea", 5, 5, 0)
	for no, want := range map[string]bool{"O1": true, "O2": false, "O3": false, "O4": true, "O5": true} {
		_, err := s.Order(ctx, no)
		if got := err == nil; got != want {
			t.Errorf("order %s exists: %v, want %v (%v)", no, got, want, err)
		}
		h, _ := s.History(ctx, orderpay.EntityOrder, no)
		if (len(h) == 1) != want {
			t.Errorf("order %s history %+v, want it only if the order exists", no, h)
		}
	}
	msgs, _ := s.UnpublishedMessages(ctx, 10)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	if want := []string{"order.created:O1", "order.created:O4", "order.created:O5"}; !slices.Equal(ids, want) {
		t.Errorf("outbox %v, want %v", ids, want)
	}
}

func testOrderTransition(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, newOrder("O1", "tea", 1)) })
	paid := t0.Add(time.Minute)
	pay := orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid, Event: orderpay.OrderEventPay,
		At: paid, Actor: "payment-center", Reason: "notified", PaymentNo: "PO1"}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionOrder(ctx, pay) })
	got, _ := s.Order(ctx, "O1")
	if got.Status != orderpay.OrderPaid || got.PaymentNo != "PO1" || !got.PaidAt.Equal(paid) || !got.UpdatedAt.Equal(paid) {
		t.Fatalf("after pay: %+v", got)
	}
	// The same transition again is refused: the row is no longer PENDING_PAYMENT.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionOrder(ctx, pay) }), orderpay.ECONFLICT)
	cancel := orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled, Event: orderpay.OrderEventCancel, At: paid, Actor: "buyer"}
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionOrder(ctx, cancel) }), orderpay.ECONFLICT)
	if got, _ := s.Order(ctx, "O1"); got.Status != orderpay.OrderPaid || !got.ClosedAt.IsZero() {
		t.Fatalf("a refused cancel changed the order: %+v", got)
	}
	pay.No = "O404"
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionOrder(ctx, pay) }), orderpay.ENOTFOUND)
	h, _ := s.History(ctx, orderpay.EntityOrder, "O1")
	if len(h) != 2 || h[1].From != "PENDING_PAYMENT" || h[1].To != "PAID" || h[1].Event != "pay" || h[1].Actor != "payment-center" || h[1].Reason != "notified" {
		t.Fatalf("history = %+v", h)
	}
}

// View's reads see one committed state: an order paid by a transaction that commits between
// two reads of one view is PENDING_PAYMENT to both, with its one history line, and PAID
// after. Under PostgreSQL's READ COMMITTED the second read would see the payment.
func testView(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, newOrder("O1", "tea", 1)) })
	pay := orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid, Event: orderpay.OrderEventPay,
		At: t0.Add(time.Minute), Actor: "payment-center", Reason: "notified", PaymentNo: "PO1"}
	err := s.View(ctx, func(r orderpay.Reader) error {
		before, err := r.Order(ctx, "O1")
		if err != nil {
			return err
		}
		// Another connection pays it and commits, while the view is open.
		mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionOrder(ctx, pay) })
		after, err := r.Order(ctx, "O1")
		if err != nil {
			return err
		}
		h, err := r.History(ctx, orderpay.EntityOrder, "O1")
		if err != nil {
			return err
		}
		if before.Status != orderpay.OrderPendingPayment || after.Status != orderpay.OrderPendingPayment || len(h) != 1 {
			t.Errorf("one view read the order %s, then %s, with %d history lines; want PENDING_PAYMENT twice and 1 line",
				before.Status, after.Status, len(h))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Order(ctx, "O1"); err != nil || got.Status != orderpay.OrderPaid {
		t.Fatalf("after the view the order is %+v, %v; want PAID", got, err)
	}
}

// Twenty handlers (a notification, its duplicates, queries) race to mark one order paid:
// exactly one applies, and the stock moves once.
func testConcurrentTransition(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.LockStock(ctx, "tea", 1); err != nil {
			return err
		}
		return tx.CreateOrder(ctx, newOrder("O1", "tea", 1))
	})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.InTx(ctx, func(tx orderpay.Tx) error {
				if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
					Event: orderpay.OrderEventPay, At: t0, Actor: fmt.Sprint("handler-", i), PaymentNo: "PO1"}); err != nil {
					return err
				}
				return tx.SellLockedStock(ctx, "tea", 1)
			})
		}()
	}
	wg.Wait()
	applied := 0
	for _, err := range errs {
		switch orderpay.ErrorCode(err) {
		case "":
			applied++
		case orderpay.ECONFLICT:
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if applied != 1 {
		t.Fatalf("%d handlers applied the payment, want 1", applied)
	}
	wantStock(t, s, "tea", 9, 0, 1)
	if h, _ := s.History(ctx, orderpay.EntityOrder, "O1"); len(h) != 2 {
		t.Fatalf("history has %d entries, want create + one pay", len(h))
	}
}

func testPayment(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	p := &orderpay.Payment{No: "PO1", OrderNo: "O1", Amount: 1999, Status: orderpay.PaymentUnpaid, Subject: "Tea",
		PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreatePayment(ctx, p) })
	dup := *p
	dup.No = "PO1-bis"
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreatePayment(ctx, &dup) }), orderpay.ECONFLICT)
	// The conflict does not end the transaction (on PostgreSQL a unique violation would):
	// it goes on, reads the payment there is, and commits what it writes next.
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &dup); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return fmt.Errorf("a second payment for O1: %v, want ECONFLICT", err)
		}
		if there, err := tx.PaymentByOrder(ctx, "O1"); err != nil || there.No != "PO1" {
			return fmt.Errorf("the payment there is: %+v, %v", there, err)
		}
		return tx.CreatePayment(ctx, &orderpay.Payment{No: "PO3", OrderNo: "O3", Amount: 1, Status: orderpay.PaymentUnpaid, Subject: "x",
			PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0})
	})
	if p3, err := s.PaymentByOrder(ctx, "O3"); err != nil || p3.No != "PO3" {
		t.Fatalf("the write after a conflict: %+v, %v", p3, err)
	}
	got, err := s.PaymentByOrder(ctx, "O1")
	if err != nil || got.No != "PO1" || got.Amount != 1999 || got.Status != orderpay.PaymentUnpaid || !got.PayDeadline.Equal(p.PayDeadline) {
		t.Fatalf("PaymentByOrder = %+v, %v", got, err)
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "PO1", From: orderpay.PaymentUnpaid, To: orderpay.PaymentPaying, Event: orderpay.PaymentEventStart, At: t0, Actor: "t"})
	})
	succeed := orderpay.PaymentChange{No: "PO1", From: orderpay.PaymentPaying, To: orderpay.PaymentSuccess, Event: orderpay.PaymentEventSucceed,
		At: t0.Add(time.Second), Actor: "t", PaidChannel: "alipay", PaidOutTradeNo: "PO1A01"}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionPayment(ctx, succeed) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionPayment(ctx, succeed) }), orderpay.ECONFLICT)
	got, _ = s.Payment(ctx, "PO1")
	if got.Status != orderpay.PaymentSuccess || got.PaidChannel != "alipay" || got.PaidOutTradeNo != "PO1A01" || !got.PaidAt.Equal(succeed.At) {
		t.Fatalf("after succeed: %+v", got)
	}
	_, err = s.Payment(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)
	_, err = s.PaymentByOrder(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)

	// A payment made locked holds its PAYING lock until the time given, as if LockPrepay had
	// taken it; one made plainly holds none.
	lock := func(no string, at time.Time) bool {
		t.Helper()
		var locked bool
		mustTx(t, s, func(tx orderpay.Tx) (err error) {
			locked, err = tx.LockPrepay(ctx, no, at.Add(time.Second), at)
			return err
		})
		return locked
	}
	locked := &orderpay.Payment{No: "PO2", OrderNo: "O2", Amount: 1999, Status: orderpay.PaymentUnpaid, Subject: "Tea",
		PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateLockedPayment(ctx, locked, t0.Add(time.Minute)) })
	if lock("PO2", t0.Add(30*time.Second)) {
		t.Fatal("a payment made locked until t0+1m was locked again at t0+30s")
	}
	if !lock("PO2", t0.Add(time.Minute)) {
		t.Fatal("a payment made locked until t0+1m could not be locked at t0+1m")
	}
	if !lock("PO1", t0) {
		t.Fatal("a payment made plainly holds a lock")
	}
	if got, _ := s.PaymentByOrder(ctx, "O2"); got.No != "PO2" || got.Status != orderpay.PaymentUnpaid || got.Amount != 1999 {
		t.Fatalf("a payment made locked reads back as %+v", got)
	}
}

func testChannelOrders(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreatePayment(ctx, &orderpay.Payment{No: "PO1", OrderNo: "O1", Amount: 1999, Status: orderpay.PaymentUnpaid, Subject: "Tea", PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0})
	})
	attempt := func(seq int, channel string) *orderpay.ChannelOrder {
		return &orderpay.ChannelOrder{OutTradeNo: fmt.Sprintf("PO1A%02d", seq), PaymentNo: "PO1", Channel: channel, Seq: seq, Amount: 1999,
			Status: orderpay.ChannelOrderCreated, CreatedAt: t0, UpdatedAt: t0}
	}
	// PaymentWithAttempts reads a payment with no attempt yet as the payment alone.
	if p, attempts, err := s.PaymentWithAttempts(ctx, "O1"); err != nil || p.No != "PO1" || p.Amount != 1999 || attempts != nil {
		t.Fatalf("PaymentWithAttempts before any attempt = %+v, %+v, %v", p, attempts, err)
	}
	_, _, err := s.PaymentWithAttempts(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateChannelOrder(ctx, attempt(1, "alipay")) })
	// A second open attempt at the same channel is refused: a repeated pay request must
	// find the first one, not create a second payable code.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateChannelOrder(ctx, attempt(2, "alipay")) }), orderpay.ECONFLICT)
	// Switching channel is allowed.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateChannelOrder(ctx, attempt(2, "wechat")) })

	// An answer that was unknown: PAYING without a QR code, flagged unknown.
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A01", From: orderpay.ChannelOrderCreated, To: orderpay.ChannelOrderPaying,
			Event: orderpay.ChannelOrderEventSubmit, At: t0, Actor: "t", Unknown: true, Raw: "timeout"})
	})
	co, err := s.ChannelOrder(ctx, "PO1A01")
	if err != nil || co.Status != orderpay.ChannelOrderPaying || !co.Unknown || co.QRCode != "" {
		t.Fatalf("after unknown submit: %+v %v", co, err)
	}
	exp := t0.Add(time.Hour)
	qr := orderpay.NewInstruction("alipay", orderpay.MethodQR, "code", "https://qr/1")
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.AttachInstruction(ctx, "PO1A01", "https://qr/1", qr, exp, t0) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.AttachInstruction(ctx, "PO1A01", "https://qr/2", nil, exp, t0) }), orderpay.ECONFLICT)
	co, _ = s.ChannelOrder(ctx, "PO1A01")
	if co.QRCode != "https://qr/1" || co.Unknown || !co.QRExpiresAt.Equal(exp) || co.Method != orderpay.MethodQR ||
		co.Pay.Field("code") != "https://qr/1" || co.Pay.Kind != orderpay.PayKindQR {
		t.Fatalf("after AttachInstruction: %+v, pay %+v", co, co.Pay)
	}
	// Once it expired, a fresh instruction for the same trade replaces it (not before).
	fresh := orderpay.NewInstruction("alipay", orderpay.MethodQR, "code", "https://qr/3")
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.AttachInstruction(ctx, "PO1A01", "https://qr/3", fresh, exp.Add(time.Hour), exp.Add(-time.Millisecond))
	}), orderpay.ECONFLICT)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.AttachInstruction(ctx, "PO1A01", "https://qr/3", fresh, exp.Add(time.Hour), exp)
	})
	if co, _ = s.ChannelOrder(ctx, "PO1A01"); co.QRCode != "https://qr/3" || !co.QRExpiresAt.Equal(exp.Add(time.Hour)) {
		t.Fatalf("after a fresh instruction: %+v", co)
	}
	// Another method of the same channel has an open attempt of its own, with its payer
	// and its instruction, read back whole.
	wap := orderpay.NewInstruction("alipay", orderpay.MethodInApp, "trade_no", "2026112722001")
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "PO1A09", PaymentNo: "PO1", Channel: "alipay", Seq: 9, Amount: 1000,
			Status: orderpay.ChannelOrderPaying, Method: orderpay.MethodInApp, Payer: "2088000000000001", Pay: wap, QRExpiresAt: exp,
			CreatedAt: t0, UpdatedAt: t0})
	})
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "PO1A10", PaymentNo: "PO1", Channel: "alipay", Seq: 10, Amount: 1000,
			Status: orderpay.ChannelOrderCreated, Method: orderpay.MethodInApp, CreatedAt: t0, UpdatedAt: t0})
	}), orderpay.ECONFLICT)
	if co, err := s.ChannelOrder(ctx, "PO1A09"); err != nil || co.Method != orderpay.MethodInApp || co.Payer != "2088000000000001" ||
		co.Pay == nil || co.Pay.Kind != orderpay.PayKindInApp || co.Pay.Field("trade_no") != "2026112722001" || co.Pay.Check() != nil {
		t.Fatalf("the in-app attempt: %+v, %v", co, err)
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A09", From: orderpay.ChannelOrderPaying, To: orderpay.ChannelOrderClosed,
			Event: orderpay.ChannelOrderEventClose, At: t0, Actor: "t"})
	})
	// Once the first attempt is closed, a new alipay attempt may open.
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A01", From: orderpay.ChannelOrderPaying, To: orderpay.ChannelOrderClosed,
			Event: orderpay.ChannelOrderEventClose, At: t0, Actor: "t"})
	})
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateChannelOrder(ctx, attempt(3, "alipay")) })
	all, err := s.ChannelOrders(ctx, "PO1")
	if err != nil || len(all) != 4 || all[0].Seq != 1 || all[2].Seq != 3 || all[1].Channel != "wechat" || all[3].Seq != 9 {
		t.Fatalf("ChannelOrders = %+v, %v", all, err)
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A03", From: orderpay.ChannelOrderCreated, To: orderpay.ChannelOrderPaying,
			Event: orderpay.ChannelOrderEventSubmit, At: t0, Actor: "t", QRCode: "https://qr/3", QRExpiresAt: exp})
	})
	paidAt := t0.Add(2 * time.Minute)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A03", From: orderpay.ChannelOrderPaying, To: orderpay.ChannelOrderSuccess,
			Event: orderpay.ChannelOrderEventSucceed, At: paidAt, Actor: "t", TradeNo: "2026112222001", PaidAt: paidAt, Raw: "notify"})
	})
	// The ended attempt keeps its trade and time, not its code: nobody is shown it again.
	co, _ = s.ChannelOrder(ctx, "PO1A03")
	if co.Status != orderpay.ChannelOrderSuccess || co.TradeNo != "2026112222001" || !co.PaidAt.Equal(paidAt) || co.QRCode != "" || co.Pay != nil {
		t.Fatalf("after succeed: %+v", co)
	}
	// PaymentWithAttempts reads the payment and every attempt, by Seq, each as
	// ChannelOrder reads it.
	p, attempts, err := s.PaymentWithAttempts(ctx, "O1")
	if err != nil || p.No != "PO1" || p.OrderNo != "O1" || p.Status != orderpay.PaymentUnpaid || len(attempts) != 4 {
		t.Fatalf("PaymentWithAttempts = %+v, %+v, %v", p, attempts, err)
	}
	if byNo, _ := s.PaymentByOrder(ctx, "O1"); *byNo != *p {
		t.Fatalf("PaymentWithAttempts read the payment as %+v, PaymentByOrder as %+v", p, byNo)
	}
	for i, a := range attempts {
		one, _ := s.ChannelOrder(ctx, a.OutTradeNo)
		if !reflect.DeepEqual(a, *one) {
			t.Fatalf("PaymentWithAttempts attempt %d = %+v, ChannelOrder = %+v", i+1, a, *one)
		}
	}
	h, _ := s.History(ctx, orderpay.EntityChannelOrder, "PO1A03")
	if len(h) != 3 || h[2].Raw != "notify" || h[2].To != "SUCCESS" {
		t.Fatalf("history = %+v", h)
	}
	_, err = s.ChannelOrder(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)
}

// A verified notification is stored once: a redelivery (same channel, same notify id)
// stores nothing more, in a transaction of its own or beside another record in one; the
// same notify id on another channel is another notification. The records are written when
// the transaction commits, and a transaction that fails writes none.
func testNotifications(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	snap, ok := s.(interface {
		Snapshot(ctx context.Context) (*sqlstore.Snapshot, error)
	})
	if !ok {
		t.Skip("the store has no snapshot to read its notifications from")
	}
	stored := func() []string {
		t.Helper()
		sn, err := snap.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range sn.Notifications {
			out = append(out, n.Channel+"/"+n.NotifyID+"/"+n.Raw)
		}
		slices.Sort(out)
		return out
	}
	rec := orderpay.NotificationRecord{Channel: "alipay", NotifyID: "n1", OutTradeNo: "PO1A01", Outcome: orderpay.OutcomePaid, Amount: 1999, Raw: "a=b", ReceivedAt: t0}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.RecordNotification(ctx, rec) })
	again := rec
	again.Raw = "a=b&again"
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.RecordNotification(ctx, again) })
	if got := stored(); !slices.Equal(got, []string{"alipay/n1/a=b"}) {
		t.Fatalf("after a redelivery the records are %v; want the first alone", got)
	}
	other := rec
	other.Channel = "wechat"
	second := rec
	second.NotifyID = "n2"
	mustTx(t, s, func(tx orderpay.Tx) error {
		for _, r := range []orderpay.NotificationRecord{other, again, second} {
			if err := tx.RecordNotification(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if got := stored(); !slices.Equal(got, []string{"alipay/n1/a=b", "alipay/n2/a=b", "wechat/n1/a=b"}) {
		t.Fatalf("the records are %v; want n1 and n2 at alipay, n1 at wechat, each once", got)
	}
	failed := rec
	failed.NotifyID = "n3"
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.RecordNotification(ctx, failed); err != nil {
			return err
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "the transaction fails")
	}), orderpay.ECONFLICT)
	if got := stored(); len(got) != 3 {
		t.Fatalf("a failed transaction kept its record: %v", got)
	}
}

func testOutbox(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	for i := 1; i <= 3; i++ {
		no := fmt.Sprint("O", i)
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.CreateOrder(ctx, newOrder(no, "tea", 1)); err != nil {
				return err
			}
			return tx.Enqueue(ctx, orderpay.Message{ID: "order.created:" + no, Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{"order_no":"` + no + `"}`), CreatedAt: t0})
		})
	}
	msgs, err := s.UnpublishedMessages(ctx, 10)
	if err != nil || len(msgs) != 3 || msgs[0].ID != "order.created:O1" || msgs[2].ID != "order.created:O3" ||
		string(msgs[1].Payload) != `{"order_no":"O2"}` || msgs[1].Subject != orderpay.SubjectOrderCreated || !msgs[1].CreatedAt.Equal(t0) {
		t.Fatalf("UnpublishedMessages = %+v, %v", msgs, err)
	}
	if limited, _ := s.UnpublishedMessages(ctx, 2); len(limited) != 2 {
		t.Fatalf("limit 2 returned %d", len(limited))
	}
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.Enqueue(ctx, orderpay.Message{ID: "order.created:O1", Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{}`), CreatedAt: t0})
	}), orderpay.ECONFLICT)
	if err := s.MarkPublished(ctx, []string{"order.created:O1", "order.created:O3"}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	msgs, _ = s.UnpublishedMessages(ctx, 10)
	if len(msgs) != 1 || msgs[0].ID != "order.created:O2" {
		t.Fatalf("after MarkPublished: %+v", msgs)
	}

	// A transaction's messages and transitions are written together before it commits
	// (in one statement on PostgreSQL), each table's in the order they were made.
	msg := func(id string) orderpay.Message {
		return orderpay.Message{ID: id, Subject: orderpay.SubjectOrderPaid, Payload: []byte(`{"id":"` + id + `"}`), CreatedAt: t0}
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.Enqueue(ctx, msg("m1")); err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O2", From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled,
			Event: orderpay.OrderEventCancel, At: t0, Actor: "t"}); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, msg("m2"), msg("m3")); err != nil {
			return err
		}
		return tx.Enqueue(ctx, msg("m4"))
	})
	msgs, _ = s.UnpublishedMessages(ctx, 10)
	if len(msgs) != 5 || msgs[1].ID != "m1" || msgs[2].ID != "m2" || msgs[4].ID != "m4" || string(msgs[3].Payload) != `{"id":"m3"}` {
		t.Fatalf("after a transaction's batch: %+v", msgs)
	}
	if h, _ := s.History(ctx, orderpay.EntityOrder, "O2"); len(h) != 2 || h[1].To != string(orderpay.OrderCancelled) {
		t.Fatalf("history of O2 after the batch: %+v", h)
	}
	// A message id written before fails the transaction when its batch is written, and
	// nothing of it is kept: not the new message beside it, not its transition.
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O3", From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled,
			Event: orderpay.OrderEventCancel, At: t0, Actor: "t"}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, msg("m5"), msg("m2"))
	})
	wantCode(t, err, orderpay.ECONFLICT)
	if !strings.Contains(err.Error(), "m2") {
		t.Errorf("the conflict does not name the message: %v", err)
	}
	if after, _ := s.UnpublishedMessages(ctx, 10); len(after) != 5 {
		t.Fatalf("a failed batch left messages: %+v", after)
	}
	if o, _ := s.Order(ctx, "O3"); o.Status != orderpay.OrderPendingPayment {
		t.Fatalf("a failed batch kept its transition: O3 is %s", o.Status)
	}
}

// paidAttempt makes a payment with one paid attempt for the refund tests.
func paidAttempt(t *testing.T, s orderpay.Store, no string, amount int64) {
	t.Helper()
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + no, OrderNo: no, Amount: amount, Status: orderpay.PaymentSuccess,
			Subject: "x", PayDeadline: t0.Add(time.Hour), PaidOutTradeNo: "P" + no + "A01", CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + no + "A01", PaymentNo: "P" + no, Channel: "alipay", Seq: 1,
			Amount: amount, Status: orderpay.ChannelOrderSuccess, CreatedAt: t0, UpdatedAt: t0})
	})
}

func testChannelRefunds(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	paidAttempt(t, s, "O1", 1000)
	r := &orderpay.ChannelRefund{OutRefundNo: "PO1A01R1", OutTradeNo: "PO1A01", PaymentNo: "PO1", Channel: "alipay", Amount: 1000,
		Reason: orderpay.RefundReasonDuplicate, Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateChannelRefund(ctx, r) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateChannelRefund(ctx, r) }), orderpay.ECONFLICT)
	got, err := s.ChannelRefund(ctx, "PO1A01R1")
	if err != nil || got.Amount != 1000 || got.Status != orderpay.ChannelRefundPending || got.Reason != orderpay.RefundReasonDuplicate || !got.NextAt.Equal(t0) {
		t.Fatalf("refund read back as %+v, %v", got, err)
	}
	_, err = s.ChannelRefund(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)

	next := t0.Add(10 * time.Second)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.RescheduleChannelRefund(ctx, "PO1A01R1", orderpay.ChannelRefundPending, 0, true, next, t0)
	})
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.RescheduleChannelRefund(ctx, "PO1A01R1", orderpay.ChannelRefundProcessing, 0, true, next, t0)
	}), orderpay.ECONFLICT)
	got, _ = s.ChannelRefund(ctx, "PO1A01R1")
	if !got.Unknown || got.Attempts != 1 || !got.NextAt.Equal(next) {
		t.Fatalf("after reschedule: %+v", got)
	}
	if due, _ := s.DueChannelRefunds(ctx, t0, 10); len(due) != 0 {
		t.Fatalf("due before next_at: %+v", due)
	}
	if due, _ := s.DueChannelRefunds(ctx, next, 10); len(due) != 1 {
		t.Fatalf("not due at next_at: %+v", due)
	}
	done := t0.Add(time.Minute)
	succeed := orderpay.ChannelRefundChange{OutRefundNo: "PO1A01R1", From: orderpay.ChannelRefundPending, To: orderpay.ChannelRefundSuccess,
		Event: orderpay.ChannelRefundEventSucceed, At: done, Actor: "channel:alipay", NextAt: done}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, succeed) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, succeed) }), orderpay.ECONFLICT)
	got, _ = s.ChannelRefund(ctx, "PO1A01R1")
	if got.Status != orderpay.ChannelRefundSuccess || !got.RefundedAt.Equal(done) || got.Unknown || got.Attempts != 2 {
		t.Fatalf("after success: %+v", got)
	}
	if due, _ := s.DueChannelRefunds(ctx, done.Add(time.Hour), 10); len(due) != 0 {
		t.Fatalf("a final refund is still due: %+v", due)
	}
	if all, _ := s.ChannelRefunds(ctx, "PO1A01"); len(all) != 1 {
		t.Fatalf("refunds of the attempt: %+v", all)
	}
	if h, _ := s.History(ctx, orderpay.EntityRefund, "PO1A01R1"); len(h) != 2 || h[1].To != "SUCCESS" {
		t.Fatalf("refund history %+v", h)
	}
	// A payment's refunded total never passes its amount.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.AddPaymentRefunded(ctx, "PO1", 600, done) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.AddPaymentRefunded(ctx, "PO1", 401, done) }), orderpay.ECONFLICT)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.AddPaymentRefunded(ctx, "PO1", 400, done) })
	if p, _ := s.Payment(ctx, "PO1"); p.Refunded != 1000 {
		t.Fatalf("refunded %d, want 1000", p.Refunded)
	}
}

func testDueQueries(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	for i, d := range []time.Duration{time.Minute, 2 * time.Hour} {
		o := newOrder(fmt.Sprint("O", i), "tea", 1)
		o.PayDeadline = t0.Add(d)
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.CreateOrder(ctx, o); err != nil {
				return err
			}
			if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Status: orderpay.PaymentPaying,
				Subject: "x", PayDeadline: o.PayDeadline, CreatedAt: t0.Add(time.Duration(i) * time.Minute), UpdatedAt: t0}); err != nil {
				return err
			}
			return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + o.No + "A01", PaymentNo: "P" + o.No, Channel: "alipay",
				Seq: 1, Amount: o.Payable, Status: orderpay.ChannelOrderPaying, CreatedAt: t0.Add(time.Duration(i) * time.Minute), UpdatedAt: t0})
		})
	}
	at := t0.Add(time.Hour)
	if due, err := s.DueOrders(ctx, at, 10); err != nil || len(due) != 1 || due[0] != "O0" {
		t.Fatalf("DueOrders = %v, %v", due, err)
	}
	if due, err := s.DuePayments(ctx, at, 10); err != nil || len(due) != 1 || due[0].No != "PO0" {
		t.Fatalf("DuePayments = %+v, %v", due, err)
	}
	if due, err := s.PayingChannelOrders(ctx, t0.Add(30*time.Second), 10); err != nil || len(due) != 1 || due[0].OutTradeNo != "PO0A01" {
		t.Fatalf("PayingChannelOrders = %+v, %v", due, err)
	}
	if due, _ := s.PayingChannelOrders(ctx, t0.Add(time.Hour), 1); len(due) != 1 {
		t.Fatalf("the limit was not applied: %+v", due)
	}
	if open, err := s.OpenAttemptsPastDeadline(ctx, at, 10); err != nil || len(open) != 1 || open[0].OutTradeNo != "PO0A01" {
		t.Fatalf("OpenAttemptsPastDeadline = %+v, %v", open, err)
	}
	// Once paid, an order is no longer due.
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O0", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: t0, Actor: "test", PaymentNo: "PO0"})
	})
	if due, _ := s.DueOrders(ctx, t0.Add(time.Hour*3), 10); len(due) != 1 || due[0] != "O1" {
		t.Fatalf("DueOrders after payment = %v", due)
	}
}

// A transaction's transitions are written together, but as if one by one: in the order
// they were made (raw answers beside theirs), seen by a read of the history in the same
// transaction, and gone with a transaction that fails.
func testHistoryInOneTx(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 10)
	at := t0.Add(time.Minute)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreateOrder(ctx, newOrder("O1", "tea", 1)); err != nil {
			return err
		}
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "PO1", OrderNo: "O1", Amount: 1999, Status: orderpay.PaymentUnpaid,
			Subject: "x", PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "PO1A01", PaymentNo: "PO1", Channel: "alipay", Seq: 1,
			Amount: 1999, Status: orderpay.ChannelOrderCreated, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A01", From: orderpay.ChannelOrderCreated,
			To: orderpay.ChannelOrderPaying, Event: orderpay.ChannelOrderEventSubmit, At: at, Actor: "test"}); err != nil {
			return err
		}
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PO1A01", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: at, Actor: "channel:alipay",
			Raw: "trade_status=TRADE_SUCCESS"}); err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: at, Actor: "payment-center", PaymentNo: "PO1"}); err != nil {
			return err
		}
		h, err := tx.History(ctx, orderpay.EntityOrder, "O1")
		if err != nil {
			return err
		}
		if len(h) != 2 || h[0].To != string(orderpay.OrderPendingPayment) || h[1].To != string(orderpay.OrderPaid) {
			t.Errorf("inside its transaction the order's history is %+v; want created, then paid", h)
		}
		return nil
	})
	attempt, err := s.History(ctx, orderpay.EntityChannelOrder, "PO1A01")
	if err != nil {
		t.Fatal(err)
	}
	order, err := s.History(ctx, orderpay.EntityOrder, "O1")
	if err != nil {
		t.Fatal(err)
	}
	var to []string
	for _, h := range attempt {
		to = append(to, h.To)
	}
	if want := []string{"CREATED", "PAYING", "SUCCESS"}; !slices.Equal(to, want) {
		t.Fatalf("the attempt's history went to %v; want %v", to, want)
	}
	if attempt[0].Raw != "" || attempt[1].Raw != "" || attempt[2].Raw != "trade_status=TRADE_SUCCESS" {
		t.Fatalf("raw answers %q, %q, %q; want only the last, the channel's", attempt[0].Raw, attempt[1].Raw, attempt[2].Raw)
	}
	if len(order) != 2 || order[1].To != string(orderpay.OrderPaid) {
		t.Fatalf("the order's history is %+v; want created, then paid", order)
	}
	// Made in this order: the order created, the attempt created, paying, paid; the order paid.
	seqs := []int64{order[0].Seq, attempt[0].Seq, attempt[1].Seq, attempt[2].Seq, order[1].Seq}
	if !slices.IsSorted(seqs) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		t.Fatalf("history numbers %v do not follow the order the transitions were made in", seqs)
	}

	failed := errors.New("refused after its transitions")
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.CreateOrder(ctx, newOrder("O2", "tea", 1)); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("the failing transaction returned %v", err)
	}
	if h, err := s.History(ctx, orderpay.EntityOrder, "O2"); err != nil || len(h) != 0 {
		t.Fatalf("a failed transaction left the history %+v, %v", h, err)
	}
}

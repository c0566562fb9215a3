package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/httpapi"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// An order's timeline is read from many tables. A payment committed while it is read shows
// in all of it or in none: the worst interleaving, the payment committing just after the
// order is read and before its history is, is forced on both engines. Read apart, the
// timeline showed a PENDING_PAYMENT order whose last transition made it PAID.
func TestTimelineReadsOneSnapshotSQLite(t *testing.T) {
	t.Parallel()
	timelineDuringPayment(t, storetest.OpenSQLite(t))
}

func TestTimelineReadsOneSnapshotPostgres(t *testing.T) {
	t.Parallel()
	timelineDuringPayment(t, storetest.OpenPostgres(t))
}

func timelineDuringPayment(t *testing.T, store *sqlstore.Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	err := store.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.CreateSKU(ctx, &orderpay.SKU{SKU: "tea", MerchantID: "m1", Title: "Tea", Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder, CreatedAt: at}, 5); err != nil {
			return err
		}
		return tx.CreateOrder(ctx, &orderpay.Order{No: "O1", BuyerID: "b1", Status: orderpay.OrderPendingPayment, Total: 1999,
			Payable: 1999, ProductType: orderpay.ProductNormal, PayDeadline: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at,
			Items: []orderpay.OrderItem{{Line: 1, SKU: "tea", MerchantID: "m1", Title: "Tea", UnitPrice: 1999, Qty: 1, Amount: 1999, Payable: 1999}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	ops := &hookedOps{Store: store}
	ops.beforeHistory = func() {
		err := store.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
				Event: orderpay.OrderEventPay, At: at.Add(time.Minute), Actor: "payment-center", Reason: "notified", PaymentNo: "PO1"})
		})
		if err != nil {
			t.Error(err)
		}
	}
	api := (&httpapi.Server{Ops: ops, Audit: store, AdminToken: "admin", Logger: slog.New(slog.DiscardHandler)}).Handler()
	check := func(when string, want orderpay.OrderStatus, wantTransitions int) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/admin/orders/O1/timeline", nil)
		r.Header.Set("Authorization", "Bearer admin")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", when, w.Code, w.Body)
		}
		var got struct {
			Order struct {
				Status orderpay.OrderStatus `json:"status"`
			} `json:"order"`
			Events []struct {
				Kind   string `json:"kind"`
				Entity string `json:"entity"`
				To     string `json:"to"`
			} `json:"events"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		var to []string
		for _, e := range got.Events {
			if e.Kind == "transition" && e.Entity == orderpay.EntityOrder {
				to = append(to, e.To)
			}
		}
		if got.Order.Status != want || len(to) != wantTransitions || to[len(to)-1] != string(want) {
			t.Fatalf("%s: the timeline shows the order %s with transitions to %v; want %s, the last of %d", when, got.Order.Status, to, want, wantTransitions)
		}
	}
	check("read while the payment lands", orderpay.OrderPendingPayment, 1)
	if !ops.fired() {
		t.Fatal("the payment never landed during the read")
	}
	check("read after it", orderpay.OrderPaid, 2)
}

// hookedOps runs beforeHistory once, at the first read of any history, whether through the
// store or a view of it.
type hookedOps struct {
	*sqlstore.Store
	once          sync.Once
	beforeHistory func()
	ran           bool
}

func (s *hookedOps) hook() {
	s.once.Do(func() { s.beforeHistory(); s.ran = true })
}

func (s *hookedOps) fired() bool { return s.ran }

func (s *hookedOps) History(ctx context.Context, entity, no string) ([]orderpay.HistoryEntry, error) {
	s.hook()
	return s.Store.History(ctx, entity, no)
}

func (s *hookedOps) ViewOps(ctx context.Context, fn func(v orderpay.OpsSnapshot) error) error {
	return s.Store.ViewOps(ctx, func(v orderpay.OpsSnapshot) error { return fn(&hookedSnapshot{OpsSnapshot: v, s: s}) })
}

type hookedSnapshot struct {
	orderpay.OpsSnapshot
	s *hookedOps
}

func (v *hookedSnapshot) History(ctx context.Context, entity, no string) ([]orderpay.HistoryEntry, error) {
	v.s.hook()
	return v.OpsSnapshot.History(ctx, entity, no)
}

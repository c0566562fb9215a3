package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"orderpay"
)

// openEngine opens an empty store on engine: SQLite in a temporary file, or PostgreSQL in
// a schema of its own on the ORDERPAY_TEST_PG server (skipped without one, unless CI
// requires it).
func openEngine(t testing.TB, engine string) *Store {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "page.db")
	if engine == "postgres" {
		server := postgresServer(t)
		schemaDSN, drop, err := NewSchema(ctx, server, fmt.Sprintf("t_page_%d", time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = drop() })
		dsn = schemaDSN
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pageRefundOrder stores a paid order with one after-sales request whose refund is on its
// way (PAID, REFUNDING), and returns the transaction that lands the refund (REFUNDED,
// SUCCESS).
func pageRefundOrder(t *testing.T, s *Store) (land func(tx orderpay.Tx) error) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.CreateSKU(ctx, &orderpay.SKU{SKU: "tea", MerchantID: "m1", Title: "Tea", Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder, CreatedAt: at}, 5); err != nil {
			return err
		}
		if err := tx.CreateOrder(ctx, &orderpay.Order{No: "O1", BuyerID: "b1", Status: orderpay.OrderPendingPayment, Total: 1999,
			Payable: 1999, ProductType: orderpay.ProductNormal, PayDeadline: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at,
			Items: []orderpay.OrderItem{{Line: 1, SKU: "tea", MerchantID: "m1", Title: "Tea", UnitPrice: 1999, Qty: 1, Amount: 1999, Payable: 1999}}}); err != nil {
			return err
		}
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "PO1", OrderNo: "O1", Amount: 1999, Status: orderpay.PaymentSuccess,
			PayDeadline: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at, PaidAt: at}); err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: at, Actor: "payment-center", PaymentNo: "PO1"}); err != nil {
			return err
		}
		return tx.CreateAfterSale(ctx, &orderpay.AfterSale{No: "ASO101", OrderNo: "O1", Seq: 1, PaymentNo: "PO1", BuyerID: "b1",
			Kind: orderpay.AfterSaleRefund, Status: orderpay.AfterSaleRefunding, Amount: 1999, CreatedAt: at, UpdatedAt: at,
			Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "tea", Qty: 1, Amount: 1999}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(tx orderpay.Tx) error {
		later := at.Add(time.Minute)
		if err := tx.TransitionAfterSale(ctx, orderpay.AfterSaleChange{No: "ASO101", From: orderpay.AfterSaleRefunding,
			To: orderpay.AfterSaleSucceeded, Event: orderpay.AfterSaleEventSucceed, At: later, Actor: "system"}); err != nil {
			return err
		}
		return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPaid, To: orderpay.OrderRefunded,
			Event: orderpay.OrderEventRefund, At: later, Actor: "system"})
	}
}

// wantPage fails unless page shows the order in status with its one request in sale.
func wantPage(t *testing.T, when string, page *orderpay.OrderPage, status orderpay.OrderStatus, sale orderpay.AfterSaleStatus) {
	t.Helper()
	if page.Order.Status != status || len(page.Sales) != 1 || page.Sales[0].Status != sale || len(page.Sales[0].Items) != 1 ||
		len(page.Order.Items) != 1 || page.Parcels == nil || len(page.Parcels) != 0 || page.Payment != nil {
		t.Fatalf("%s: the page shows the order %s (%d items), requests %+v, parcels %v, payment %v; want %s with one %s request of one item",
			when, page.Order.Status, len(page.Order.Items), page.Sales, page.Parcels, page.Payment, status, sale)
	}
}

// An order's page is read on one snapshot. The worst interleaving is forced on both
// engines: the refund lands (the request SUCCESS, the order REFUNDED, in one transaction)
// after the page's read of the order and before its read of the requests. The page shows
// the order and its request both before the refund, never the request ended on an order
// still PAID: a page shown that stopped following the order and never showed it REFUNDED.
// On PostgreSQL the reads go in one batch, so the gate is a read in the batch that waits
// for an advisory lock the test holds until the refund has committed.
func TestOrderPageReadsOneSnapshot(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			s := openEngine(t, engine)
			land := pageRefundOrder(t, s)
			reads, page := orderPageReads("O1")
			var gate read
			var landed error
			if engine == "sqlite" {
				gate = read{query: `SELECT 1`, row: func(scanner) error {
					landed = s.InTx(ctx, land)
					return nil
				}}
			} else {
				key := rand.Int64N(1 << 40)
				lock, err := s.db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Close()
				if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
					t.Fatal(err)
				}
				gate = read{query: `SELECT pg_advisory_xact_lock_shared(?)`, args: []any{key}, row: func(scanner) error { return nil }}
				go func() {
					// Once the batch waits at the gate, land the refund, then open the gate.
					for waiting := false; !waiting; {
						time.Sleep(5 * time.Millisecond)
						if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
							WHERE locktype = 'advisory' AND NOT granted AND objid = $1::bigint % 4294967296)`, key).Scan(&waiting); err != nil {
							landed = err
							break
						}
					}
					if landed == nil {
						landed = s.InTx(ctx, land)
					}
					if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil && landed == nil {
						landed = err
					}
				}()
			}
			gated := append([]read{reads[0], gate}, reads[1:]...)
			if err := s.readTogether(ctx, gated...); err != nil {
				t.Fatal(err)
			}
			if landed != nil {
				t.Fatalf("landing the refund during the read: %v", landed)
			}
			during, err := page()
			if err != nil {
				t.Fatal(err)
			}
			wantPage(t, "read while the refund lands", during, orderpay.OrderPaid, orderpay.AfterSaleRefunding)
			after, err := s.OrderPage(ctx, "O1")
			if err != nil {
				t.Fatal(err)
			}
			wantPage(t, "read after it", after, orderpay.OrderRefunded, orderpay.AfterSaleSucceeded)
		})
	}
}

// A read that fails among others fails them all, and leaves nothing open: on PostgreSQL
// the connection goes back to the pool out of the batch's transaction, so that the next
// read and write on it (the pool is cut to one connection) work, and it is kept (pgx would
// throw away a connection left in a transaction, and the next read would open a new one,
// preparing its statements again). SQLite's store needs more than one connection: its
// checkpointer holds one of its own.
func TestReadTogetherFailureLeavesTheConnectionClean(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			s := openEngine(t, engine)
			pageRefundOrder(t, s)
			backend := func() int64 { return 0 }
			if engine == "postgres" {
				s.db.SetMaxOpenConns(1)
				backend = func() int64 {
					var pid int64
					if err := s.db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
						t.Fatal(err)
					}
					return pid
				}
			}
			before := backend()
			reads, _ := orderPageReads("O1")
			bad := read{query: `SELECT 1 / (SELECT COUNT(*) - COUNT(*) FROM orders)`, row: func(r scanner) error {
				var n int64
				return r.Scan(&n)
			}}
			if err := s.readTogether(ctx, append([]read{reads[0], bad}, reads[1:]...)...); err == nil {
				t.Fatal("a read dividing by zero did not fail")
			}
			page, err := s.OrderPage(ctx, "O1")
			if err != nil {
				t.Fatalf("the read after a failed one: %v", err)
			}
			wantPage(t, "after a failed read", page, orderpay.OrderPaid, orderpay.AfterSaleRefunding)
			if after := backend(); after != before {
				t.Fatalf("the connection was replaced after the failed read: backend %d, then %d", before, after)
			}
			if err := s.InTx(ctx, func(tx orderpay.Tx) error {
				return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPaid, To: orderpay.OrderRefunded,
					Event: orderpay.OrderEventRefund, At: time.Now(), Actor: "system"})
			}); err != nil {
				t.Fatalf("a write after a failed read: %v", err)
			}
		})
	}
}

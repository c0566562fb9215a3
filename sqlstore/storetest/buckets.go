package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"orderpay"
)

// A SKU split over buckets: its stock is spread over them, a move of more than one bucket
// holds gathers from several, fifty racing one-unit locks on ten units win exactly ten
// times, and every count adds up and stays at or above zero in every bucket.
func testStockBuckets(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "flash", MerchantID: "m1", Title: "Flash sale kettle", Price: 100,
			ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockAtOrder, StockBuckets: 4, CreatedAt: t0}, 10)
	})
	if sku, err := s.SKU(ctx, "flash"); err != nil || sku.StockBuckets != 4 {
		t.Fatalf("sku %+v, %v: want 4 buckets", sku, err)
	}
	wantStock(t, s, "flash", 10, 0, 0)
	// 10 over 4 buckets is 3, 3, 2, 2: 5 units are in no single bucket.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "flash", 5) })
	wantStock(t, s, "flash", 5, 5, 0)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellLockedStock(ctx, "flash", 5) })
	wantStock(t, s, "flash", 5, 0, 5)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "flash", 6) }), orderpay.EOUTOFSTOCK)
	wantStock(t, s, "flash", 5, 0, 5) // the failed gather moved nothing

	var won atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.InTx(ctx, func(tx orderpay.Tx) error { return tx.LockStock(ctx, "flash", 1) })
			switch orderpay.ErrorCode(err) {
			case "":
				won.Add(1)
			case orderpay.EOUTOFSTOCK:
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := won.Load(); n != 5 {
		t.Fatalf("%d one-unit locks won on 5 available units", n)
	}
	wantStock(t, s, "flash", 0, 5, 5)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.ReleaseLockedStock(ctx, "flash", 5) })
	wantStock(t, s, "flash", 5, 0, 5)
}

// Bucketed stock under contention: 8 buckets of 2 units, 5 buyers of 3 units at once, so
// that every move gathers from several buckets and the buyers meet on the same rows. Over
// 30 rounds, every lock (create), sale of locked units (payment), sale of available units
// (the "payment" policy), release (cancel) and restock (return) succeeds: 15 units are
// asked of 16, so a shortage would be false. On PostgreSQL under READ COMMITTED a gather
// that reads a bucket's count and then takes exactly that count finds the row changed by a
// concurrent take and must not give up on it. The stock equation holds after every step.
func testBucketContention(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "hot", MerchantID: "m1", Title: "Hot kettle", Price: 100,
			ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockAtOrder, StockBuckets: 8, CreatedAt: t0}, 16)
	})
	const buyers, qty = 5, 3
	type step struct {
		name string
		move func(tx orderpay.Tx) error
		// available, locked and sold afterwards
		want [3]int64
	}
	steps := []step{
		{"lock at create", func(tx orderpay.Tx) error { return tx.LockStock(ctx, "hot", qty) }, [3]int64{1, 15, 0}},
		{"sell locked at payment", func(tx orderpay.Tx) error { return tx.SellLockedStock(ctx, "hot", qty) }, [3]int64{1, 0, 15}},
		{"restock a return", func(tx orderpay.Tx) error { return tx.RestockSold(ctx, "hot", qty) }, [3]int64{16, 0, 0}},
		{"sell available at payment", func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "hot", qty) }, [3]int64{1, 0, 15}},
		{"restock again", func(tx orderpay.Tx) error { return tx.RestockSold(ctx, "hot", qty) }, [3]int64{16, 0, 0}},
		{"lock again", func(tx orderpay.Tx) error { return tx.LockStock(ctx, "hot", qty) }, [3]int64{1, 15, 0}},
		{"release at cancel", func(tx orderpay.Tx) error { return tx.ReleaseLockedStock(ctx, "hot", qty) }, [3]int64{16, 0, 0}},
	}
	for round := range 30 {
		for _, st := range steps {
			var wg sync.WaitGroup
			errs := make(chan error, buyers)
			start := make(chan struct{})
			for range buyers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if err := s.InTx(ctx, st.move); err != nil {
						errs <- err
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("round %d, %s: a false shortage: %v", round, st.name, err)
			}
			if t.Failed() {
				t.FailNow()
			}
			wantStock(t, s, "hot", st.want[0], st.want[1], st.want[2])
		}
	}
}

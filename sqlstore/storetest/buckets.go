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

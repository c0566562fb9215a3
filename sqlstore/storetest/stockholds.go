package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// A deduction at payment moves available straight to sold, and only if enough is
// available, on one row and over buckets alike.
func testSellAvailableStock(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "paylater", MerchantID: "m1", Title: "Pay-time tea", Price: 100,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtPayment, CreatedAt: t0}, 3)
	})
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "paylater", 2) })
	wantStock(t, s, "paylater", 1, 0, 2)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "paylater", 2) }), orderpay.EOUTOFSTOCK)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "nope", 1) }), orderpay.ENOTFOUND)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "paylater", 0) }), orderpay.EINVALID)
	wantStock(t, s, "paylater", 1, 0, 2)

	// 10 over 4 buckets (3, 3, 2, 2): 5 units are gathered from several rows, and a
	// deduction one unit short rolls back whole with its transaction.
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "flashpay", MerchantID: "m1", Title: "Flash kettle", Price: 100,
			ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockAtPayment, StockBuckets: 4, CreatedAt: t0}, 10)
	})
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "flashpay", 5) })
	wantStock(t, s, "flashpay", 5, 0, 5)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "flashpay", 6) }), orderpay.EOUTOFSTOCK)
	wantStock(t, s, "flashpay", 5, 0, 5)
}

// A reserve SKU's hold: written once per order line, listed, due by its end, and ended
// once, to SOLD or RELEASED, never both.
func testStockHolds(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "held", MerchantID: "m1", Title: "Held tea", Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockReserve, ReserveMinutes: 15, CreatedAt: t0}, 10)
	})
	if sku, err := s.SKU(ctx, "held"); err != nil || sku.StockPolicy != orderpay.StockReserve || sku.ReserveMinutes != 15 {
		t.Fatalf("sku %+v, %v: want reserve for 15 minutes", sku, err)
	}
	hold := func(no string, until time.Time) {
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.LockStock(ctx, "held", 2); err != nil {
				return err
			}
			if err := tx.CreateOrder(ctx, newOrder(no, "held", 2)); err != nil {
				return err
			}
			return tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: no, Line: 1, SKU: "held", Qty: 2, HoldUntil: until, CreatedAt: t0})
		})
	}
	hold("O1", t0.Add(15*time.Minute))
	hold("O2", t0.Add(5*time.Minute))
	hold("O3", t0.Add(30*time.Minute))
	wantStock(t, s, "held", 4, 6, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: "O1", Line: 1, SKU: "held", Qty: 2, HoldUntil: t0, CreatedAt: t0})
	}), orderpay.ECONFLICT)

	hs, err := s.StockHolds(ctx, "O1")
	if err != nil || len(hs) != 1 || hs[0].State != orderpay.HoldStanding || hs[0].Qty != 2 || hs[0].SKU != "held" ||
		!hs[0].HoldUntil.Equal(t0.Add(15*time.Minute)) || !hs[0].CreatedAt.Equal(t0) {
		t.Fatalf("holds of O1 = %+v, %v", hs, err)
	}
	if hs, err := s.StockHolds(ctx, "O9"); err != nil || len(hs) != 0 {
		t.Fatalf("holds of an order with none = %+v, %v", hs, err)
	}
	due := func(at time.Time) []string {
		t.Helper()
		hs, err := s.DueStockHolds(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		var nos []string
		for _, h := range hs {
			nos = append(nos, h.OrderNo)
		}
		return nos
	}
	if got := fmt.Sprint(due(t0.Add(15 * time.Minute))); got != "[O2 O1]" { // an end at the instant is due
		t.Fatalf("due at +15m: %s", got)
	}
	if got := due(t0.Add(4 * time.Minute)); len(got) != 0 {
		t.Fatalf("due at +4m: %v", got)
	}

	// O2 is paid while held, O1 released by the sweeper: each ends once.
	at := t0.Add(20 * time.Minute)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.EndStockHold(ctx, "O2", 1, orderpay.HoldSold, at); err != nil {
			return err
		}
		return tx.SellLockedStock(ctx, "held", 2)
	})
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.EndStockHold(ctx, "O1", 1, orderpay.HoldReleased, at); err != nil {
			return err
		}
		return tx.ReleaseLockedStock(ctx, "held", 2)
	})
	wantStock(t, s, "held", 6, 2, 2)
	for _, to := range []orderpay.HoldState{orderpay.HoldSold, orderpay.HoldReleased} {
		wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.EndStockHold(ctx, "O1", 1, to, at) }), orderpay.ECONFLICT)
		wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.EndStockHold(ctx, "O2", 1, to, at) }), orderpay.ECONFLICT)
	}
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.EndStockHold(ctx, "O9", 1, orderpay.HoldSold, at) }), orderpay.ENOTFOUND)
	// HELD → HELD is no transition of the hold's machine: refused like any other the store
	// is asked for, with ECONFLICT.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.EndStockHold(ctx, "O3", 1, orderpay.HoldStanding, at) }), orderpay.ECONFLICT)
	if got := fmt.Sprint(due(t0.Add(time.Hour))); got != "[O3]" { // ended holds are never due again
		t.Fatalf("due at +1h after two ended: %s", got)
	}
	hs, _ = s.StockHolds(ctx, "O2")
	if hs[0].State != orderpay.HoldSold || !hs[0].UpdatedAt.Equal(at) {
		t.Fatalf("O2's hold %+v", hs[0])
	}
	// A hold ended in a transaction that rolls back stays HELD.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.EndStockHold(ctx, "O3", 1, orderpay.HoldReleased, at); err != nil {
			return err
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "changed my mind")
	}), orderpay.ECONFLICT)
	if hs, _ := s.StockHolds(ctx, "O3"); hs[0].State != orderpay.HoldStanding {
		t.Fatalf("O3's hold after a rollback %+v", hs[0])
	}
}

// Twenty holds, each raced by a payment (HELD → SOLD, locked → sold) and the sweeper
// (HELD → RELEASED, locked → available) in transactions of their own: exactly one of the
// two ends each hold, and the units move once, so the stock adds up to the winners.
func testStockHoldRace(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	const holds = 20
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "raced", MerchantID: "m1", Title: "Raced tea", Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockReserve, ReserveMinutes: 1, StockBuckets: 3, CreatedAt: t0}, holds)
	})
	for i := range holds {
		no := fmt.Sprintf("R%02d", i)
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.LockStock(ctx, "raced", 1); err != nil {
				return err
			}
			if err := tx.CreateOrder(ctx, newOrder(no, "raced", 1)); err != nil {
				return err
			}
			return tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: no, Line: 1, SKU: "raced", Qty: 1, HoldUntil: t0, CreatedAt: t0})
		})
	}
	var mu sync.Mutex
	wins := map[orderpay.HoldState]int{}
	var wg sync.WaitGroup
	for i := range holds {
		no := fmt.Sprintf("R%02d", i)
		for _, to := range []orderpay.HoldState{orderpay.HoldSold, orderpay.HoldReleased} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.InTx(ctx, func(tx orderpay.Tx) error {
					if err := tx.EndStockHold(ctx, no, 1, to, t0); err != nil {
						return err
					}
					if to == orderpay.HoldSold {
						return tx.SellLockedStock(ctx, "raced", 1)
					}
					return tx.ReleaseLockedStock(ctx, "raced", 1)
				})
				switch orderpay.ErrorCode(err) {
				case "":
					mu.Lock()
					wins[to]++
					mu.Unlock()
				case orderpay.ECONFLICT:
				default:
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if wins[orderpay.HoldSold]+wins[orderpay.HoldReleased] != holds {
		t.Fatalf("wins %v: want exactly one per hold (%d)", wins, holds)
	}
	wantStock(t, s, "raced", int64(wins[orderpay.HoldReleased]), 0, int64(wins[orderpay.HoldSold]))
	if hs, err := s.DueStockHolds(ctx, t0.Add(time.Hour), 100); err != nil || len(hs) != 0 {
		t.Fatalf("holds still due after the race: %+v, %v", hs, err)
	}
}

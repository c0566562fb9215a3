package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/sqlstore"
)

// backupSKU creates a "payment" SKU with stock sellable units over buckets rows, and
// backup units kept aside (none if 0), in one transaction, as the order system does.
func backupSKU(t *testing.T, s orderpay.Store, sku string, stock, backup int64, buckets int) {
	t.Helper()
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreateSKU(ctx, &orderpay.SKU{SKU: sku, MerchantID: "m1", Title: "Late tea " + sku, Price: 1999,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtPayment, StockBuckets: buckets, CreatedAt: t0}, stock); err != nil {
			return err
		}
		if backup == 0 {
			return nil
		}
		return tx.CreateStockBackup(ctx, sku, backup)
	})
}

// wantBackup checks a SKU's counts, backup included, and that every unit is counted once:
// available + locked + sold + backup left = the stock it was created with + backup units,
// through the stock's own total (initial + backup used).
func wantBackup(t *testing.T, s orderpay.Store, sku string, initial, available, sold, units, used int64) {
	t.Helper()
	st, err := s.Stock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	want := orderpay.Stock{SKU: sku, Available: available, Sold: sold, Total: initial + used, BackupUnits: units, BackupUsed: used, BackupLeft: units - used}
	if *st != want {
		t.Fatalf("stock %s = %+v, want %+v", sku, *st, want)
	}
	if st.Available+st.Locked+st.Sold+st.BackupLeft != initial+units {
		t.Fatalf("stock %s does not count every unit once: %+v", sku, *st)
	}
}

// backupOrder writes a pending order of qty units of sku, for a backup sale to name.
func backupOrder(t *testing.T, s orderpay.Store, no, sku string, qty int64) {
	t.Helper()
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(context.Background(), newOrder(no, sku, qty)) })
}

// A SKU's backup is read with its stock, serves a sale only while enough remains (each sale
// moving the units from remaining to used and onto bucket 0's sold and total, and naming
// its order line, once), runs out with EOUTOFSTOCK having moved nothing, and a SKU without
// one has none to give. The table's CHECKs refuse counts that do not add up.
func testBackupStock(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	backupSKU(t, s, "late", 2, 3, 1)
	wantBackup(t, s, "late", 2, 2, 0, 3, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateStockBackup(ctx, "late", 5) }), orderpay.ECONFLICT)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateStockBackup(ctx, "late", 0) }), orderpay.EINVALID)

	// The sellable units go first, at payment; the backup is untouched by them.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellAvailableStock(ctx, "late", 2) })
	wantBackup(t, s, "late", 2, 0, 2, 3, 0)

	for _, no := range []string{"L1", "L2", "L3"} {
		backupOrder(t, s, no, "late", 1)
	}
	backupOrder(t, s, "L4", "late", 2)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L1", 1, "late", 1, t0) })
	wantBackup(t, s, "late", 2, 0, 3, 3, 1)
	// The same line again: refused, and its transaction moved nothing.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L1", 1, "late", 1, t0) }), orderpay.ECONFLICT)
	wantBackup(t, s, "late", 2, 0, 3, 3, 1)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L2", 1, "late", 1, t0) })
	// Two units asked of one left: out of stock, nothing moved, and the one left still serves.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L4", 1, "late", 2, t0) }), orderpay.EOUTOFSTOCK)
	wantBackup(t, s, "late", 2, 0, 4, 3, 2)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L3", 1, "late", 1, t0) })
	wantBackup(t, s, "late", 2, 0, 5, 3, 3)
	// Run out.
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "L4", 1, "late", 1, t0) }), orderpay.EOUTOFSTOCK)
	wantBackup(t, s, "late", 2, 0, 5, 3, 3)

	// No backup: out of stock; no SKU: not found; no units: invalid.
	backupSKU(t, s, "plain", 1, 0, 1)
	backupOrder(t, s, "N1", "plain", 1)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "N1", 1, "plain", 1, t0) }), orderpay.EOUTOFSTOCK)
	wantBackup(t, s, "plain", 1, 1, 0, 0, 0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "N1", 1, "nope", 1, t0) }), orderpay.ENOTFOUND)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, "N1", 1, "late", 0, t0) }), orderpay.EINVALID)

	// A restock (a return) puts a sold unit back into available and leaves the backup alone.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.RestockSold(ctx, "late", 1) })
	wantBackup(t, s, "late", 2, 1, 4, 3, 3)

	// The CHECKs: no count below zero, used + remaining = units.
	db := s.(sqlStore).DB()
	for _, bad := range []string{
		`UPDATE stock_backup SET remaining = remaining - 1 WHERE sku = 'late'`,
		`UPDATE stock_backup SET used = used - 4, remaining = remaining + 4 WHERE sku = 'late'`,
		`UPDATE stock_backup SET units = units + 1 WHERE sku = 'late'`,
	} {
		if _, err := db.ExecContext(ctx, bad); err == nil {
			t.Fatalf("%s: accepted", bad)
		}
	}
	wantBackup(t, s, "late", 2, 1, 4, 3, 3)

	// The auditor's snapshot reads each backup with its SKU's stock, and the lines it served.
	snap, err := s.(*sqlstore.Store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got orderpay.Stock
	for _, st := range snap.Stock {
		if st.SKU == "late" {
			got = st
		}
	}
	if got.BackupUnits != 3 || got.BackupUsed != 3 || got.BackupLeft != 0 || got.Total != 5 {
		t.Fatalf("snapshot stock of late %+v", got)
	}
	if fmt.Sprint(snap.BackupSales) != "[{L1 1 late 1} {L2 1 late 1} {L3 1 late 1}]" {
		t.Fatalf("snapshot backup sales %v", snap.BackupSales)
	}
}

// A sale at payment that finds too few units moves nothing, so that the payment's
// transaction can go on to the backup, which then serves the whole line. On PostgreSQL a
// gather over buckets can take units and only then find too few (another payment took a
// bucket's unit between its read and its take): it puts back what it took. That
// interleaving is forced: another transaction holds bucket 2's unit while the gather
// reads four units and takes buckets 0 and 1, then commits while the gather waits on it.
func testBackupAfterAFailedGather(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	backupSKU(t, s, "spread", 4, 5, 4) // one unit a bucket
	backupOrder(t, s, "G1", "spread", 5)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.SellAvailableStock(ctx, "spread", 5); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
			return fmt.Errorf("5 of 4 sellable: %v, want EOUTOFSTOCK", err)
		}
		return tx.SellBackupStock(ctx, "G1", 1, "spread", 5, t0)
	})
	wantBackup(t, s, "spread", 4, 4, 5, 5, 5)
	wantBuckets(t, s, "spread", "0: 1 5 6, 1: 1 0 1, 2: 1 0 1, 3: 1 0 1")
	if !isPostgres(s) {
		return // one writer at a time: a gather's read is never stale
	}

	backupSKU(t, s, "racing", 4, 4, 4)
	backupOrder(t, s, "G2", "racing", 4)
	db := s.(sqlStore).DB()
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(ctx, `UPDATE stock SET available = available - 1, sold = sold + 1 WHERE sku = 'racing' AND bucket = 2`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(ctx, func(tx orderpay.Tx) error {
			if err := tx.SellAvailableStock(ctx, "racing", 4); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
				return fmt.Errorf("4 of 3 sellable: %v, want EOUTOFSTOCK", err)
			}
			return tx.SellBackupStock(ctx, "G2", 1, "racing", 4, t0)
		})
	}()
	for deadline := time.Now().Add(5 * time.Second); !waitingOn(ctx, s, "UPDATE stock SET available%"); {
		if time.Now().After(deadline) {
			t.Fatal("the gather never waited on bucket 2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Buckets 0, 1 and 3 have their units back; bucket 2's went to the other payment; the
	// backup served all four and bucket 0 counts them.
	wantBuckets(t, s, "racing", "0: 1 4 5, 1: 1 0 1, 2: 0 1 1, 3: 1 0 1")
	wantBackup(t, s, "racing", 4, 3, 5, 4, 4)
}

// wantBuckets checks each bucket's available, sold and total.
func wantBuckets(t *testing.T, s orderpay.Store, sku, want string) {
	t.Helper()
	rows, err := s.(sqlStore).DB().QueryContext(context.Background(), s.(interface{ Rebind(string) string }).Rebind(
		`SELECT bucket, available, sold, total FROM stock WHERE sku = ? ORDER BY bucket`), sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var b, available, sold, total int64
		if err := rows.Scan(&b, &available, &sold, &total); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d: %d %d %d", b, available, sold, total))
	}
	if g := strings.Join(got, ", "); g != want {
		t.Fatalf("buckets of %s (available sold total): %s, want %s", sku, g, want)
	}
}

// Two payments race for the last backup unit: the first takes it and holds its
// transaction open while the second runs (on PostgreSQL under READ COMMITTED the second
// waits on the backup's row in its conditional update, then finds it spent; on SQLite it
// waits for the writer). Exactly one gets it, whichever way they meet.
func testBackupLastUnitRace(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	backupSKU(t, s, "last", 0, 1, 1)
	backupOrder(t, s, "R1", "last", 1)
	backupOrder(t, s, "R2", "last", 1)
	first, second := raceHeldOn(t, s, "UPDATE stock_backup SET remaining%",
		func(ctx context.Context, tx orderpay.Tx) error {
			return tx.SellBackupStock(ctx, "R1", 1, "last", 1, t0)
		},
		func(ctx context.Context, tx orderpay.Tx) error {
			return tx.SellBackupStock(ctx, "R2", 1, "last", 1, t0)
		})
	if first != nil {
		t.Fatalf("the first payment: %v", first)
	}
	wantCode(t, second, orderpay.EOUTOFSTOCK)
	wantBackup(t, s, "last", 0, 0, 1, 1, 1)

	// Many at once, on several units: exactly as many sales as units, never more.
	backupSKU(t, s, "many", 0, 5, 1)
	const payers = 12
	for i := range payers {
		backupOrder(t, s, fmt.Sprintf("M%d", i), "many", 1)
	}
	errs := make(chan error, payers)
	for i := range payers {
		go func() {
			errs <- s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SellBackupStock(ctx, fmt.Sprintf("M%d", i), 1, "many", 1, t0) })
		}()
	}
	served := 0
	for range payers {
		err := <-errs
		switch orderpay.ErrorCode(err) {
		case "":
			served++
		case orderpay.EOUTOFSTOCK:
		default:
			t.Fatalf("a payment: %v", err)
		}
	}
	if served != 5 {
		t.Fatalf("%d payments served by a backup of 5", served)
	}
	wantBackup(t, s, "many", 0, 0, 5, 5, 5)
}

package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

// ---- backup stock (migration 0028) ----

func (q *queries) CreateStockBackup(ctx context.Context, sku string, units int64) error {
	if units <= 0 {
		return orderpay.Errorf(orderpay.EINVALID, "backup units must be positive")
	}
	return q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "sku %q already has a backup", sku) },
		`INSERT INTO stock_backup (sku, units, used, remaining) VALUES (?, ?, 0, ?)`, sku, units, units)
}

// SellBackupStock takes the units from the backup's row first, conditionally (the one
// statement that decides whether the backup serves this payment: two payments racing for
// the last unit cannot both match it), then records the line and adds the units to bucket
// 0's sold and total, whose row this transaction then holds too. Every payment that takes
// from a backup locks the two rows in that order.
func (q *queries) SellBackupStock(ctx context.Context, orderNo string, line int, sku string, qty int64, at time.Time) error {
	if qty <= 0 {
		return orderpay.Errorf(orderpay.EINVALID, "quantity must be positive")
	}
	n, err := q.exec(ctx, `UPDATE stock_backup SET remaining = remaining - ?, used = used + ? WHERE sku = ? AND remaining >= ?`,
		qty, qty, sku, qty)
	if err != nil {
		return err
	}
	if n != 1 {
		if _, err := q.Stock(ctx, sku); err != nil {
			return err
		}
		return orderpay.Errorf(orderpay.EOUTOFSTOCK, "not enough backup stock for sku %q", sku)
	}
	if err := q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s line %d was served by the backup already", orderNo, line)
	}, `INSERT INTO stock_backup_sales (order_no, line, sku, qty, sold_at) VALUES (?, ?, ?, ?, ?)`, orderNo, line, sku, qty, ms(at)); err != nil {
		return err
	}
	if n, err = q.exec(ctx, `UPDATE stock SET sold = sold + ?, total = total + ? WHERE sku = ? AND bucket = 0`, qty, qty, sku); err != nil {
		return err
	}
	if n != 1 {
		return orderpay.Errorf(orderpay.EINTERNAL, "sku %q has a backup but no stock bucket 0", sku)
	}
	return nil
}

// SnapshotBackupSale is one order line a SKU's backup served, and how many units.
type SnapshotBackupSale struct {
	OrderNo string
	Line    int
	SKU     string
	Qty     int64
}

// snapshotBackup adds each backup's counts to its SKU's Stock (snap.Stock, by SKU, is
// complete by then) and reads the lines the backups served.
func (q *queries) snapshotBackup(ctx context.Context, snap *Snapshot) error {
	bySKU := make(map[string]int, len(snap.Stock))
	for i, st := range snap.Stock {
		bySKU[st.SKU] = i
	}
	err := q.snapshotEach(ctx, `SELECT sku, units, used, remaining FROM stock_backup ORDER BY sku`, func(r scanner) error {
		var sku string
		var units, used, left int64
		if err := r.Scan(&sku, &units, &used, &left); err != nil {
			return err
		}
		i, ok := bySKU[sku]
		if !ok { // a backup whose SKU has no stock row: the auditor names it
			snap.Stock = append(snap.Stock, orderpay.Stock{SKU: sku})
			i = len(snap.Stock) - 1
			bySKU[sku] = i
		}
		snap.Stock[i].BackupUnits, snap.Stock[i].BackupUsed, snap.Stock[i].BackupLeft = units, used, left
		return nil
	})
	if err != nil {
		return err
	}
	return q.snapshotEach(ctx, `SELECT order_no, line, sku, qty FROM stock_backup_sales ORDER BY order_no, line`, func(r scanner) error {
		var b SnapshotBackupSale
		if err := r.Scan(&b.OrderNo, &b.Line, &b.SKU, &b.Qty); err != nil {
			return err
		}
		snap.BackupSales = append(snap.BackupSales, b)
		return nil
	})
}

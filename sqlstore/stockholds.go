package sqlstore

import (
	"context"
	"fmt"
	"time"

	"orderpay"
)

// ---- stock policies "payment" and "reserve" (migration 0010) ----

func (q *queries) SellAvailableStock(ctx context.Context, sku string, qty int64) error {
	ok, err := q.moveStock(ctx, sku, qty, "available", "sold")
	if err != nil || ok {
		return err
	}
	if _, err := q.Stock(ctx, sku); err != nil {
		return err
	}
	return orderpay.Errorf(orderpay.EOUTOFSTOCK, "not enough stock for sku %q", sku)
}

func (q *queries) CreateStockHold(ctx context.Context, h *orderpay.StockHold) error {
	return q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s line %d already has a stock hold", h.OrderNo, h.Line)
	}, `INSERT INTO stock_holds (order_no, line, sku, qty, hold_until, state, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		h.OrderNo, h.Line, h.SKU, h.Qty, ms(h.HoldUntil), string(orderpay.HoldStanding), ms(h.CreatedAt), ms(h.CreatedAt))
}

func (q *queries) EndStockHold(ctx context.Context, orderNo string, line int, to orderpay.HoldState, at time.Time) error {
	if err := q.checked(orderpay.HoldMachine, orderpay.EntityStockHold, fmt.Sprintf("%s/%d", orderNo, line), string(orderpay.HoldStanding),
		string(orderpay.HoldEventTo(to)), string(to)); err != nil {
		return err
	}
	n, err := q.exec(ctx, `UPDATE stock_holds SET state = ?, updated_at = ? WHERE order_no = ? AND line = ? AND state = ?`,
		string(to), ms(at), orderNo, line, string(orderpay.HoldStanding))
	if err != nil || n == 1 {
		return err
	}
	var state string
	if err := q.row(ctx, `SELECT state FROM stock_holds WHERE order_no = ? AND line = ?`, orderNo, line).Scan(&state); err != nil {
		return notFound(err, "stock hold of order", orderNo)
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "the stock hold of order %s line %d is %s, not HELD", orderNo, line, state)
}

const stockHoldColumns = `order_no, line, sku, qty, hold_until, state, created_at, updated_at`

func (q *queries) stockHolds(ctx context.Context, query string, args ...any) ([]orderpay.StockHold, error) {
	var out []orderpay.StockHold
	err := q.snapshotEach(ctx, query, func(r scanner) error {
		var h orderpay.StockHold
		var until, created, updated int64
		if err := r.Scan(&h.OrderNo, &h.Line, &h.SKU, &h.Qty, &until, &h.State, &created, &updated); err != nil {
			return err
		}
		h.HoldUntil, h.CreatedAt, h.UpdatedAt = orderpay.FromMillis(until), orderpay.FromMillis(created), orderpay.FromMillis(updated)
		out = append(out, h)
		return nil
	}, args...)
	return out, err
}

func (q *queries) StockHolds(ctx context.Context, orderNo string) ([]orderpay.StockHold, error) {
	return q.stockHolds(ctx, `SELECT `+stockHoldColumns+` FROM stock_holds WHERE order_no = ? ORDER BY line`, orderNo)
}

// dueStockHoldsQuery is the stock holds' sweeper's read, on stock_holds_due.
const dueStockHoldsQuery = `SELECT ` + stockHoldColumns + ` FROM stock_holds WHERE state = 'HELD' AND hold_until <= ?
		ORDER BY hold_until LIMIT ?`

func (q *queries) DueStockHolds(ctx context.Context, at time.Time, limit int) ([]orderpay.StockHold, error) {
	return q.stockHolds(ctx, dueStockHoldsQuery, ms(at), limit)
}

package sqlstore

import (
	"context"
	"database/sql"

	"orderpay"
)

// Snapshot is every row the consistency auditor needs, read in one read-only transaction so
// that the tables agree with each other: an order, its payment and its stock are never seen
// half-way through a change. It does not include history; the auditor loads the history of
// each order it reports through Store.History.
type Snapshot struct {
	Orders        []orderpay.Order // with their items, by order number
	Payments      []orderpay.Payment
	ChannelOrders []orderpay.ChannelOrder // by payment number, then seq
	Refunds       []SnapshotRefund
	// AppPayments are the business apps' payments (migration 0019), by payment number.
	AppPayments []orderpay.AppPayment
	// Stock is each SKU's counts summed over its buckets, as Store.Stock reports them.
	Stock []orderpay.Stock
	// StockRows is every bucket, so that a negative count or a broken equation in one
	// bucket cannot hide behind a sum that looks right.
	StockRows []SnapshotStockRow
	// BackupSales is every order line a SKU's backup served (migration 0028), by order and
	// line; the backups' own counts are in Stock.
	BackupSales []SnapshotBackupSale
	SKUs        []orderpay.SKU // the catalogue, for each SKU's stock policy
	// StockHolds is every hold of a "reserve" SKU, whatever its state, by order and line.
	StockHolds    []orderpay.StockHold
	Notifications []orderpay.NotificationRecord
	// UnpublishedOutbox counts the outbox messages the relay has not published yet;
	// UnpublishedMessages are those messages, oldest first.
	UnpublishedOutbox   int
	UnpublishedMessages []orderpay.Message
	// Shipments (with items) by number, and AfterSales (with items) by number.
	Shipments  []orderpay.Shipment
	AfterSales []orderpay.AfterSale
}

// SnapshotRefund is one row of the refunds table (migration 0002): money the payment center
// sends back for one channel order. The domain's ChannelRefund mirrors the table's columns
// exactly, so the snapshot uses it as it is.
type SnapshotRefund = orderpay.ChannelRefund

// SnapshotStockRow is one bucket of a SKU's stock.
type SnapshotStockRow struct {
	SKU       string
	Bucket    int
	Available int64
	Locked    int64
	Sold      int64
	Total     int64
}

// Snapshot reads every order (with items), payment, channel order, refund, stock bucket,
// SKU and notification, and the unpublished outbox, in one read-only transaction (see
// view). It takes no write lock, so a running server is not held up, although the auditor
// normally reads once the system has settled.
func (s *Store) Snapshot(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{}
	if err := s.view(ctx, func(q *queries) error { return q.snapshotInto(ctx, snap) }); err != nil {
		return nil, err
	}
	return snap, nil
}

// View runs fn in one read-only transaction, so that every read in it sees the same
// committed state: an order read with its parcels and requests is never seen half-way
// through a change to them.
func (s *Store) View(ctx context.Context, fn func(r orderpay.Reader) error) error {
	return s.view(ctx, func(q *queries) error { return fn(q) })
}

// ViewOps is View with the console's reads too (the operations and audit logs), for an
// order's timeline.
func (s *Store) ViewOps(ctx context.Context, fn func(r orderpay.OpsSnapshot) error) error {
	return s.view(ctx, func(q *queries) error { return fn(q) })
}

// view runs fn on the queries of one read-only transaction: REPEATABLE READ on
// PostgreSQL (READ COMMITTED would give each statement its own snapshot), and on SQLite a
// deferred transaction, whose WAL read snapshot is fixed by its first read. It takes no
// write lock and is never counted as a write.
func (s *Store) view(ctx context.Context, fn func(q *queries) error) error {
	orderpay.Step(ctx, orderpay.StepStatement, "snapshot")
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d == postgresDialect {
		opts.Isolation = sql.LevelRepeatableRead
	}
	sqlTx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return translate(err)
	}
	// Read-only: there is nothing to commit, and rolling back ends the snapshot.
	defer sqlTx.Rollback()
	return fn(&queries{db: sqlTx, d: s.d, buckets: s.buckets, stmts: s.stmts, tx: sqlTx, counts: s.counts, moves: s.moves})
}

func (q *queries) snapshotInto(ctx context.Context, snap *Snapshot) error {
	// Every query is read to the end and closed before the next one starts: a transaction
	// holds one connection, and pgx cannot run a second query while rows are still open.
	err := q.snapshotEach(ctx, `SELECT `+snapshotOrderColumns+` FROM orders ORDER BY order_no`, func(r scanner) error {
		o, err := scanSnapshotOrder(r)
		if err == nil {
			snap.Orders = append(snap.Orders, *o)
		}
		return err
	})
	if err != nil {
		return err
	}
	byNo := make(map[string]int, len(snap.Orders))
	for i, o := range snap.Orders {
		byNo[o.No] = i
	}
	err = q.snapshotEach(ctx, `SELECT order_no, line, sku, merchant_id, title, unit_price, qty, amount, discount, payable
		FROM order_items ORDER BY order_no, line`, func(r scanner) error {
		var no string
		var it orderpay.OrderItem
		if err := r.Scan(&no, &it.Line, &it.SKU, &it.MerchantID, &it.Title, &it.UnitPrice, &it.Qty, &it.Amount, &it.Discount, &it.Payable); err != nil {
			return err
		}
		if i, ok := byNo[no]; ok { // the foreign key guarantees it
			snap.Orders[i].Items = append(snap.Orders[i].Items, it)
		}
		return nil
	})
	if err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT `+paymentColumns+` FROM payments ORDER BY payment_no`, func(r scanner) error {
		p, err := scanPaymentRow(r)
		if err == nil {
			snap.Payments = append(snap.Payments, *p)
		}
		return err
	})
	if err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT `+channelOrderColumns+` FROM channel_orders ORDER BY payment_no, seq`, func(r scanner) error {
		co, err := scanChannelOrder(r)
		if err == nil {
			snap.ChannelOrders = append(snap.ChannelOrders, *co)
		}
		return err
	})
	if err != nil {
		return err
	}

	snap.AppPayments, err = list(ctx, q, scanAppPayment, `SELECT `+appPaymentColumns+` FROM app_payments ORDER BY payment_no`)
	if err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT `+channelRefundColumns+` FROM refunds ORDER BY out_refund_no`, func(r scanner) error {
		rf, err := scanChannelRefund(r)
		if err == nil {
			snap.Refunds = append(snap.Refunds, *rf)
		}
		return err
	})
	if err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT sku, bucket, available, locked, sold, total FROM stock ORDER BY sku, bucket`, func(r scanner) error {
		var row SnapshotStockRow
		if err := r.Scan(&row.SKU, &row.Bucket, &row.Available, &row.Locked, &row.Sold, &row.Total); err != nil {
			return err
		}
		snap.StockRows = append(snap.StockRows, row)
		return nil
	})
	if err != nil {
		return err
	}
	// The per-SKU sums are the same as Store.Stock's SUM over the buckets, taken from the
	// rows just read so that they cannot disagree with them.
	for _, row := range snap.StockRows {
		if n := len(snap.Stock); n == 0 || snap.Stock[n-1].SKU != row.SKU {
			snap.Stock = append(snap.Stock, orderpay.Stock{SKU: row.SKU})
		}
		st := &snap.Stock[len(snap.Stock)-1]
		st.Available += row.Available
		st.Locked += row.Locked
		st.Sold += row.Sold
		st.Total += row.Total
	}
	if err := q.snapshotBackup(ctx, snap); err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT `+skuColumns+` FROM skus ORDER BY sku`, func(r scanner) error {
		sku, err := scanSKU(r)
		if err == nil {
			snap.SKUs = append(snap.SKUs, *sku)
		}
		return err
	})
	if err != nil {
		return err
	}

	if snap.StockHolds, err = q.stockHolds(ctx, `SELECT `+stockHoldColumns+` FROM stock_holds ORDER BY order_no, line`); err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT channel, notify_id, out_trade_no, outcome, amount, raw, received_at
		FROM notifications ORDER BY received_at, channel, notify_id`, func(r scanner) error {
		var n orderpay.NotificationRecord
		var received int64
		if err := r.Scan(&n.Channel, &n.NotifyID, &n.OutTradeNo, &n.Outcome, &n.Amount, &n.Raw, &received); err != nil {
			return err
		}
		n.ReceivedAt = orderpay.FromMillis(received)
		snap.Notifications = append(snap.Notifications, n)
		return nil
	})
	if err != nil {
		return err
	}

	err = q.snapshotEach(ctx, `SELECT msg_id, subject, payload, created_at FROM outbox WHERE published_at = 0 ORDER BY seq`, func(r scanner) error {
		var m orderpay.Message
		var payload string
		var created int64
		if err := r.Scan(&m.ID, &m.Subject, &payload, &created); err != nil {
			return err
		}
		m.Payload, m.CreatedAt = []byte(payload), orderpay.FromMillis(created)
		snap.UnpublishedMessages = append(snap.UnpublishedMessages, m)
		return nil
	})
	snap.UnpublishedOutbox = len(snap.UnpublishedMessages)
	if err != nil {
		return err
	}
	return q.snapshotFulfilment(ctx, snap)
}

// snapshotEach runs query and calls fn for every row, closing the rows before it returns.
func (q *queries) snapshotEach(ctx context.Context, query string, fn func(r scanner) error, args ...any) error {
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

const snapshotOrderColumns = `order_no, buyer_id, status, total, discount, payable, product_type, pay_deadline,
	payment_no, created_at, updated_at, paid_at, closed_at, coupon_id`

// scanSnapshotOrder scans one orders row (snapshotOrderColumns), without its items. It reads
// the same columns as queries.Order, which scans *sql.Row inline.
func scanSnapshotOrder(r scanner) (*orderpay.Order, error) {
	var o orderpay.Order
	var deadline, created, updated, paid, closed int64
	if err := r.Scan(&o.No, &o.BuyerID, &o.Status, &o.Total, &o.Discount, &o.Payable, &o.ProductType, &deadline,
		&o.PaymentNo, &created, &updated, &paid, &closed, &o.CouponID); err != nil {
		return nil, err
	}
	o.PayDeadline, o.CreatedAt, o.UpdatedAt = orderpay.FromMillis(deadline), orderpay.FromMillis(created), orderpay.FromMillis(updated)
	o.PaidAt, o.ClosedAt = orderpay.FromMillis(paid), orderpay.FromMillis(closed)
	return &o, nil
}

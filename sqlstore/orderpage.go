package sqlstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"orderpay"
)

// A read is one query with what takes each of its rows. Reads are built apart from being
// run, so that several can run together (readTogether).
type read struct {
	query string
	args  []any
	row   func(r scanner) error
	// when, if set, says whether the read is needed, given the rows of the reads before
	// it. SQLite does not run a read not needed. PostgreSQL runs every read, in one round
	// trip, and the caller drops what it does not need.
	when func() bool
}

// run runs one read on q.
func (q *queries) run(ctx context.Context, rd read) error {
	return q.snapshotEach(ctx, rd.query, rd.row, rd.args...)
}

// readTogether runs reads on one snapshot, in their order. On PostgreSQL they go in one
// round trip: a pgx batch that opens a REPEATABLE READ, READ ONLY transaction, runs them
// all and rolls back. On SQLite, where a statement costs no round trip, they run one after
// another in a read transaction (view), each only when needed.
func (s *Store) readTogether(ctx context.Context, reads ...read) error {
	if s.d != postgresDialect {
		return s.view(ctx, func(q *queries) error {
			for _, rd := range reads {
				if rd.when != nil && !rd.when() {
					continue
				}
				if err := q.run(ctx, rd); err != nil {
					return err
				}
			}
			return nil
		})
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return translate(err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errors.New("sqlstore: a PostgreSQL connection that is not pgx's")
		}
		ctx := statementContext(ctx)
		err := batchReads(ctx, c.Conn(), s.d, reads)
		if c.Conn().PgConn().TxStatus() != 'I' {
			// A read failed inside the batch's transaction, and PostgreSQL skipped the rest,
			// the ROLLBACK too: end it before the connection goes back to the pool.
			_, rerr := c.Conn().Exec(ctx, "ROLLBACK")
			err = errors.Join(err, rerr)
		}
		return translate(err)
	})
}

// batchReads sends reads in one batch, between a BEGIN of a read-only REPEATABLE READ
// transaction and its ROLLBACK, and hands each read its rows.
func batchReads(ctx context.Context, conn *pgx.Conn, d *dialect, reads []read) (err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	for _, rd := range reads {
		b.Queue(d.rebind(rd.query), rd.args...)
	}
	b.Queue("ROLLBACK")
	res := conn.SendBatch(ctx, b)
	defer func() { err = errors.Join(err, res.Close()) }()
	if _, err := res.Exec(); err != nil {
		return err
	}
	for _, rd := range reads {
		rows, err := res.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := rd.row(rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	_, err = res.Exec()
	return err
}

// OrderPage reads an order as its buyer's page shows it, on one snapshot (readTogether).
func (s *Store) OrderPage(ctx context.Context, no string) (*orderpay.OrderPage, error) {
	reads, page := orderPageReads(no)
	if err := s.readTogether(ctx, reads...); err != nil {
		return nil, err
	}
	return page()
}

// orderPageReads are the reads of the order no's page, and what makes the page of their
// rows: the order first, then its payment with its attempts (used while it is pending),
// its parcels, and its after-sales requests and their items (used once it has a payment
// number). On PostgreSQL all of them go in the one round trip; SQLite skips those the
// order does not call for.
func orderPageReads(no string) ([]read, func() (*orderpay.OrderPage, error)) {
	orderRd, order := orderRead(no)
	pending := func() bool {
		o, err := order()
		return err == nil && o.Status == orderpay.OrderPendingPayment
	}
	paid := func() bool {
		o, err := order()
		return err == nil && o.PaymentNo != ""
	}
	paymentRd, payment := paymentWithAttemptsRead(no)
	paymentRd.when = pending
	parcelsRd, parcels := shipmentsRead(no)
	parcelsRd.when = paid
	var sales salesRead
	salesRd := sales.requests(`order_no = ? ORDER BY seq`, no)
	salesRd.when = paid
	itemsRd := sales.items(`SELECT i.after_sale_no, i.line, i.sku, i.qty, i.amount FROM after_sale_items i
		JOIN after_sales a ON a.after_sale_no = i.after_sale_no WHERE a.order_no = ? ORDER BY i.after_sale_no, i.line`, no)
	itemsRd.when = func() bool { return paid() && len(sales.out) > 0 }
	return []read{orderRd, paymentRd, parcelsRd, salesRd, itemsRd}, func() (*orderpay.OrderPage, error) {
		o, err := order()
		if err != nil {
			return nil, err
		}
		page := &orderpay.OrderPage{Order: o}
		if pending() {
			page.Payment, page.Attempts, err = payment()
			if err != nil && orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
				return nil, err
			}
		}
		if paid() {
			page.Parcels, page.Sales = parcels(), sales.result()
		}
		return page, nil
	}
}

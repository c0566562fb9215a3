package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
)

// queryer is what *sql.DB and *sql.Tx have in common.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries holds every query. On the Store it runs on the pool (reads, outbox); inside InTx
// it runs on the transaction and is the orderpay.Tx.
type queries struct {
	db queryer
	d  *dialect
	// buckets caches each SKU's stock_buckets, which never changes once the SKU exists,
	// so that a stock move does not read it again; shared by the Store and its transactions.
	buckets *sync.Map
	// stmts, if set, prepares each query once and reuses it on every connection (SQLite,
	// whose driver would parse the SQL again on every call); tx is the transaction the
	// queries run in, if any. PostgreSQL's driver caches its prepared statements itself.
	stmts *stmtCache
	tx    *sql.Tx
	// counts, shared by the Store and its transactions, counts transactions and row writes.
	counts *Counts
	// writes, set on a SQLite Store's own queries (not a transaction's; nil on
	// PostgreSQL), is the store's writer: its one-writer lock (writeLock), which a write
	// statement run alone, a transaction and the checkpointer take before they take a
	// connection, and the group transaction they commit in.
	writes *writer
	// batch, in a write transaction (InTx), holds the transitions appended and the outbox
	// messages enqueued since the last statement that needed them written (writeBatch).
	batch *writeBatch
	// moves, shared by the Store and its transactions, are the history's codes
	// (historyMoves).
	moves *historyMoves
}

// Counts are what a Store did since it was opened: write transactions committed (each
// InTx, and each write statement run alone, outside one), the commits they took (on
// SQLite a group of them commits once: writer), and rows the writes changed (inserted,
// updated or deleted). A read run alone is not counted.
type Counts struct {
	Transactions atomic.Int64
	Commits      atomic.Int64
	RowsWritten  atomic.Int64
	// refused counts, by entity, the transitions refused because their machine does not
	// have them (an *atomic.Int64 each); log says so (Store.SetLogger).
	refused sync.Map
	log     atomic.Pointer[slog.Logger]
}

// refuse is the store's answer to a transition of key that m does not have: nothing is
// written, an error line names the entity and the pair, the refusal is counted, and the
// caller gets m's ECONFLICT.
func (c *Counts) refuse(m orderpay.TransitionChecker, entity, key, from, event, to string) error {
	n, _ := c.refused.LoadOrStore(entity, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	log := c.log.Load()
	if log == nil {
		log = slog.Default()
	}
	log.Error("transition refused by its machine: nothing written", "entity", entity, "key", key, "from", from, "event", event, "to", to,
		"machine", m.Name())
	return m.Refuse(key, from, event, to)
}

// checked is nil if m has the transition from --event--> to of entity key, and the
// store's refusal (refuse) otherwise: every transition is checked so before it writes.
func (q *queries) checked(m orderpay.TransitionChecker, entity, key, from, event, to string) error {
	if m.PermitsNames(from, event, to) {
		return nil
	}
	return q.counts.refuse(m, entity, key, from, event, to)
}

var _ orderpay.Tx = (*queries)(nil)

// stmt is query prepared, bound to the transaction if there is one, or nil when it is not
// cached (no cache, or a query made up of a variable list the cache does not keep).
func (q *queries) stmt(ctx context.Context, query string) *sql.Stmt {
	if q.stmts == nil {
		return nil
	}
	st := q.stmts.get(ctx, query)
	if st != nil && q.tx != nil {
		return q.tx.StmtContext(ctx, st)
	}
	return st
}

// statementContext is the context a statement runs in: the caller's values, but not its
// end. A statement is short and runs to its end; a transaction whose caller's context
// ends is still rolled back as a whole (database/sql watches the context given to
// BeginTx). A context that can end makes both drivers watch it statement by statement,
// each with a goroutine of its own, for every statement run.
func statementContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func (q *queries) exec(ctx context.Context, query string, args ...any) (int64, error) {
	stepping := q.step(ctx, query)
	if q.tx == nil && q.writes != nil {
		// A write run alone is a member of the group transaction on its own.
		var n int64
		err := q.writes.run(ctx, busyTimeoutMS*time.Millisecond, func(tx *sql.Tx) error {
			var err error
			n, err = (&queries{db: tx, d: q.d, stmts: q.stmts, tx: tx}).exec(ctx, query, args...)
			return err
		})
		if n > 0 && err == nil {
			q.counts.RowsWritten.Add(n)
		}
		if stepping {
			orderpay.StepNote(ctx, effect(n, err))
		}
		return n, err
	}
	ctx = statementContext(ctx)
	query = q.d.rebind(query)
	var res sql.Result
	var err error
	if st := q.stmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = q.db.ExecContext(ctx, query, args...)
	}
	if err != nil {
		if stepping {
			orderpay.StepNote(ctx, effect(0, translate(err)))
		}
		return 0, translate(err)
	}
	n, err := res.RowsAffected()
	if q.tx == nil && q.counts != nil { // a statement outside InTx is a transaction of its own
		q.counts.Transactions.Add(1)
		q.counts.Commits.Add(1)
	}
	if n > 0 && q.counts != nil {
		q.counts.RowsWritten.Add(n)
	}
	if stepping {
		orderpay.StepNote(ctx, effect(n, err))
	}
	return n, err
}

// insert runs an INSERT of one row that does nothing when a row of the same key exists,
// and answers taken() then: a conflict never aborts the transaction (PostgreSQL ends a
// transaction at a failed statement), so the caller may go on and read the row there.
func (q *queries) insert(ctx context.Context, taken func() error, query string, args ...any) error {
	n, err := q.exec(ctx, query+` ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return taken()
	}
	return nil
}

func (q *queries) row(ctx context.Context, query string, args ...any) *sql.Row {
	q.step(ctx, query)
	ctx = statementContext(ctx)
	query = q.d.rebind(query)
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.db.QueryRowContext(ctx, query, args...)
}

func (q *queries) rows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q.step(ctx, query)
	ctx = statementContext(ctx)
	query = q.d.rebind(query)
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.db.QueryContext(ctx, query, args...)
}

// stmtCacheMax bounds the statements kept: every query of the store is a constant but a few
// built with a list of a variable length, which are run without caching past the bound.
const stmtCacheMax = 512

// stmtCache keeps one prepared statement per query text. database/sql prepares it on each
// connection the first time it runs there and keeps it, transactions included.
type stmtCache struct {
	db *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

// get is query's statement, prepared now if it is new. The lock is never held while it
// prepares: preparing takes a connection from the pool, and a transaction that holds one
// (and the database's write lock) must be able to read the cache while the pool is busy,
// or it waits for a connection held by someone who waits for it. Two callers may prepare
// the same new query at once; the second one's statement is closed.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.m[query]
	full := len(c.m) >= stmtCacheMax
	c.mu.RUnlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil // run unprepared: the error, if real, comes back from the run
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.m[query]; ok {
		st.Close()
		return have
	}
	if len(c.m) >= stmtCacheMax {
		st.Close()
		return nil
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// notFound turns sql.ErrNoRows into ENOTFOUND naming what was missing.
func notFound(err error, what, key string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return orderpay.NotFound(what, key)
	}
	return translate(err)
}

func ms(t time.Time) int64 { return orderpay.Millis(t) }

// ---- SKUs and stock ----

func (q *queries) CreateSKU(ctx context.Context, s *orderpay.SKU, stock int64) error {
	buckets := max(s.StockBuckets, 1)
	err := q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "sku %q already exists", s.SKU) },
		`INSERT INTO skus (sku, merchant_id, title, price, product_type, stock_policy, limit_per_buyer, stock_buckets,
		reserve_minutes, warehouse, weight_g, volume_cm3, created_at, max_per_order, max_unpaid_per_buyer, queued, queue_wait_ms, queue_pace)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.SKU, s.MerchantID, s.Title, s.Price, string(s.ProductType), string(s.StockPolicy), s.LimitPerBuyer, buckets,
		s.ReserveMinutes, cmp.Or(s.Warehouse, orderpay.DefaultWarehouse), s.WeightG, s.VolumeCm3, ms(s.CreatedAt), s.MaxPerOrder, s.MaxUnpaidPerBuyer,
		boolInt64(s.Queued), s.QueueWait.Milliseconds(), s.QueuePace)
	if err != nil {
		return err
	}
	// The stock is spread evenly; the first buckets take the remainder.
	for b := range int64(buckets) {
		n := stock/int64(buckets) + boolInt64(b < stock%int64(buckets))
		if _, err := q.exec(ctx, `INSERT INTO stock (sku, bucket, available, locked, sold, total) VALUES (?, ?, ?, 0, 0, ?)`,
			s.SKU, b, n, n); err != nil {
			return err
		}
	}
	return nil
}

func boolInt64(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

const skuColumns = `sku, merchant_id, title, price, product_type, stock_policy, limit_per_buyer, stock_buckets,
	reserve_minutes, warehouse, weight_g, volume_cm3, created_at, max_per_order, max_unpaid_per_buyer, queued, queue_wait_ms, queue_pace`

func scanSKU(row scanner) (*orderpay.SKU, error) {
	var s orderpay.SKU
	var created, queued, wait int64
	if err := row.Scan(&s.SKU, &s.MerchantID, &s.Title, &s.Price, &s.ProductType, &s.StockPolicy, &s.LimitPerBuyer, &s.StockBuckets,
		&s.ReserveMinutes, &s.Warehouse, &s.WeightG, &s.VolumeCm3, &created, &s.MaxPerOrder, &s.MaxUnpaidPerBuyer, &queued, &wait, &s.QueuePace); err != nil {
		return nil, err
	}
	s.CreatedAt = orderpay.FromMillis(created)
	s.Queued, s.QueueWait = queued != 0, time.Duration(wait)*time.Millisecond
	return &s, nil
}

func (q *queries) SKU(ctx context.Context, sku string) (*orderpay.SKU, error) {
	s, err := scanSKU(q.row(ctx, `SELECT `+skuColumns+` FROM skus WHERE sku = ?`, sku))
	if err != nil {
		return nil, notFound(err, "sku", sku)
	}
	return s, nil
}

func (q *queries) Stock(ctx context.Context, sku string) (*orderpay.Stock, error) {
	st := orderpay.Stock{SKU: sku}
	var buckets int
	// A SKU has at most one backup row: joined to each bucket, it adds nothing to the sums.
	err := q.row(ctx, `SELECT COUNT(*), COALESCE(SUM(s.available), 0), COALESCE(SUM(s.locked), 0), COALESCE(SUM(s.sold), 0),
		COALESCE(SUM(s.total), 0), COALESCE(MAX(b.units), 0), COALESCE(MAX(b.used), 0), COALESCE(MAX(b.remaining), 0)
		FROM stock s LEFT JOIN stock_backup b ON b.sku = s.sku WHERE s.sku = ?`, sku).Scan(&buckets, &st.Available, &st.Locked, &st.Sold,
		&st.Total, &st.BackupUnits, &st.BackupUsed, &st.BackupLeft)
	if err != nil {
		return nil, err
	}
	if buckets == 0 {
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "sku %q not found", sku)
	}
	return &st, nil
}

// stockBuckets is how many rows the SKU's stock is split over.
func (q *queries) stockBuckets(ctx context.Context, sku string) (int64, error) {
	if n, ok := q.buckets.Load(sku); ok {
		return n.(int64), nil
	}
	var n int64
	if err := q.row(ctx, `SELECT stock_buckets FROM skus WHERE sku = ?`, sku).Scan(&n); err != nil {
		return 0, notFound(err, "sku", sku)
	}
	q.buckets.Store(sku, n)
	return n, nil
}

// moveStock moves qty between two counts of a SKU with conditional statements only, so
// that two buyers can never both take the last unit (库存超卖: never read, then
// write). A SKU split over buckets is tried bucket by bucket from a random one, each try one
// conditional update of one row; if no single bucket holds qty, the units are gathered from
// several (each take conditional too), all in the caller's transaction. A move that finds
// too few units (false) leaves every row as it found it: the takes a gather made are put
// back, so that the transaction may go on.
func (q *queries) moveStock(ctx context.Context, sku string, qty int64, from, to string) (bool, error) {
	if qty <= 0 {
		return false, orderpay.Errorf(orderpay.EINVALID, "quantity must be positive")
	}
	buckets, err := q.stockBuckets(ctx, sku)
	if err != nil {
		return false, err
	}
	move := func(bucket, n int64) (bool, error) {
		res, err := q.exec(ctx, `UPDATE stock SET `+from+` = `+from+` - ?, `+to+` = `+to+` + ?
			WHERE sku = ? AND bucket = ? AND `+from+` >= ?`, n, n, sku, bucket, n)
		return res == 1, err
	}
	start := int64(0)
	if buckets > 1 {
		start = mrand.Int64N(buckets)
	}
	for i := range buckets {
		if ok, err := move((start+i)%buckets, qty); ok || err != nil {
			return ok, err
		}
	}
	if buckets == 1 {
		return false, nil
	}
	// No bucket holds qty alone: gather from several, each take conditional on the bucket
	// holding what it takes. Under READ COMMITTED (PostgreSQL) a count read a moment ago may
	// be stale: a concurrent move of the same bucket makes the take match no row. That is no
	// shortage, so the buckets are read again and what they hold now is taken. It gives up
	// only when the buckets, read afresh, hold fewer units than are left to move: then the
	// caller's transaction rolls back the takes that did move.
	left := qty
	var taken []bucketCount
	for pass := 0; ; pass++ {
		if pass == maxGatherPasses {
			return false, orderpay.Errorf(orderpay.EUNAVAILABLE, "the stock of sku %q kept changing under this move; try again", sku)
		}
		hs, err := q.bucketCounts(ctx, sku, from)
		if err != nil {
			return false, err
		}
		var held int64
		for _, h := range hs {
			held += h.n
		}
		if held < left {
			return false, q.putBack(ctx, sku, taken, from, to)
		}
		for _, h := range hs {
			n := min(h.n, left)
			ok, err := move(h.bucket, n)
			if err != nil {
				return false, err
			}
			if ok {
				left -= n
				taken = append(taken, bucketCount{h.bucket, n})
			}
			if left == 0 {
				return true, nil
			}
		}
	}
}

// putBack undoes the takes of a gather that gave up: each moves its units back from to to
// from on its bucket. This transaction updated those rows, so it holds them (PostgreSQL's
// row locks, SQLite's one writer): nobody moved the units since, and each update matches.
func (q *queries) putBack(ctx context.Context, sku string, taken []bucketCount, from, to string) error {
	for _, h := range taken {
		n, err := q.exec(ctx, `UPDATE stock SET `+to+` = `+to+` - ?, `+from+` = `+from+` + ?
			WHERE sku = ? AND bucket = ? AND `+to+` >= ?`, h.n, h.n, sku, h.bucket, h.n)
		if err != nil {
			return err
		}
		if n != 1 {
			return orderpay.Errorf(orderpay.EINTERNAL, "sku %q bucket %d: the %d units this move took could not be put back", sku, h.bucket, h.n)
		}
	}
	return nil
}

// maxGatherPasses bounds how often a gather reads the buckets again after losing takes to
// concurrent moves. Each lost take means another transaction moved units of the SKU, so it
// is reached only under a storm of moves; the move then fails as unavailable (try again),
// never as out of stock.
const maxGatherPasses = 1000

type bucketCount struct{ bucket, n int64 }

// bucketCounts reads the buckets of sku whose count col is positive, in bucket order (the
// order every gather takes them in, so that two gathers never wait on each other).
func (q *queries) bucketCounts(ctx context.Context, sku, col string) ([]bucketCount, error) {
	rows, err := q.rows(ctx, `SELECT bucket, `+col+` FROM stock WHERE sku = ? AND `+col+` > 0 ORDER BY bucket`, sku)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []bucketCount
	for rows.Next() {
		var h bucketCount
		if err := rows.Scan(&h.bucket, &h.n); err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, rows.Err()
}

func (q *queries) LockStock(ctx context.Context, sku string, qty int64) error {
	ok, err := q.moveStock(ctx, sku, qty, "available", "locked")
	if err != nil || ok {
		return err
	}
	if _, err := q.Stock(ctx, sku); err != nil {
		return err
	}
	return orderpay.Errorf(orderpay.EOUTOFSTOCK, "not enough stock for sku %q", sku)
}

func (q *queries) SellLockedStock(ctx context.Context, sku string, qty int64) error {
	ok, err := q.moveStock(ctx, sku, qty, "locked", "sold")
	if err != nil || ok {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "sku %q has fewer than %d locked units", sku, qty)
}

func (q *queries) ReleaseLockedStock(ctx context.Context, sku string, qty int64) error {
	ok, err := q.moveStock(ctx, sku, qty, "locked", "available")
	if err != nil || ok {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "sku %q has fewer than %d locked units", sku, qty)
}

// ---- orders ----

func (q *queries) CreateOrder(ctx context.Context, o *orderpay.Order) error {
	items := make([][]any, len(o.Items))
	for i, it := range o.Items {
		items[i] = []any{o.No, it.Line, it.SKU, it.MerchantID, it.Title, it.UnitPrice, it.Qty, it.Amount, it.Discount, it.Payable}
	}
	err := q.insertWithRows(ctx, `INSERT INTO orders (order_no, buyer_id, status, total, discount, payable, product_type,
		pay_deadline, payment_no, created_at, updated_at, paid_at, closed_at, coupon_id, address_name, address_phone, address_detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, []any{
		o.No, o.BuyerID, string(o.Status), o.Total, o.Discount, o.Payable, string(o.ProductType),
		ms(o.PayDeadline), o.PaymentNo, ms(o.CreatedAt), ms(o.UpdatedAt), ms(o.PaidAt), ms(o.ClosedAt), o.CouponID,
		o.Address.Name, o.Address.Phone, o.Address.Detail},
		`INSERT INTO order_items (order_no, line, sku, merchant_id, title, unit_price, qty, amount, discount, payable)`, items)
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		return orderpay.Errorf(orderpay.ECONFLICT, "order number %q is taken", o.No)
	}
	if err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityOrder, EntityNo: o.No,
		To: string(o.Status), Event: "create", Actor: "buyer:" + o.BuyerID, At: o.CreatedAt})
}

// Order reads the order and its items in one statement (one round trip, and on PostgreSQL
// one transaction, for the read a buyer's every poll makes).
func (q *queries) Order(ctx context.Context, no string) (*orderpay.Order, error) {
	rd, order := orderRead(no)
	if err := q.run(ctx, rd); err != nil {
		return nil, err
	}
	return order()
}

// orderRead reads the order no with its items, one row per item (or one row of zeros for
// an order with none). Its result is the order, or ENOTFOUND.
func orderRead(no string) (read, func() (*orderpay.Order, error)) {
	var o *orderpay.Order
	rd := read{query: `SELECT o.order_no, o.buyer_id, o.status, o.total, o.discount, o.payable, o.product_type, o.pay_deadline,
		o.payment_no, o.created_at, o.updated_at, o.paid_at, o.closed_at, o.coupon_id, o.address_name, o.address_phone, o.address_detail,
		COALESCE(i.line, 0), COALESCE(i.sku, ''), COALESCE(i.merchant_id, ''), COALESCE(i.title, ''), COALESCE(i.unit_price, 0),
		COALESCE(i.qty, 0), COALESCE(i.amount, 0), COALESCE(i.discount, 0), COALESCE(i.payable, 0)
		FROM orders o LEFT JOIN order_items i ON i.order_no = o.order_no WHERE o.order_no = ? ORDER BY i.line`, args: []any{no},
		row: func(rows scanner) error {
			var r orderpay.Order
			var deadline, created, updated, paid, closed int64
			var it orderpay.OrderItem
			if err := rows.Scan(&r.No, &r.BuyerID, &r.Status, &r.Total, &r.Discount, &r.Payable, &r.ProductType, &deadline,
				&r.PaymentNo, &created, &updated, &paid, &closed, &r.CouponID, &r.Address.Name, &r.Address.Phone, &r.Address.Detail,
				&it.Line, &it.SKU, &it.MerchantID, &it.Title, &it.UnitPrice, &it.Qty, &it.Amount, &it.Discount, &it.Payable); err != nil {
				return err
			}
			if o == nil {
				r.PayDeadline, r.CreatedAt, r.UpdatedAt = orderpay.FromMillis(deadline), orderpay.FromMillis(created), orderpay.FromMillis(updated)
				r.PaidAt, r.ClosedAt = orderpay.FromMillis(paid), orderpay.FromMillis(closed)
				o = &r
			}
			if it.Line > 0 {
				o.Items = append(o.Items, it)
			}
			return nil
		}}
	return rd, func() (*orderpay.Order, error) {
		if o == nil {
			return nil, orderpay.NotFound("order", no)
		}
		return o, nil
	}
}

// update runs a conditional UPDATE of one row: it sets sets (each "col = ?" with its arg)
// only where the key matches and the status is still from. Zero rows means the row is gone
// (ENOTFOUND) or already moved on (ECONFLICT).
// It is refused, with nothing written, unless m has the transition (checked).
func (q *queries) transition(ctx context.Context, m orderpay.TransitionChecker, table, keyCol, key, from, to string, sets []string, args []any, h orderpay.HistoryEntry) error {
	return q.transitionIf(ctx, m, table, keyCol, key, from, to, sets, args, h, "")
}

// transitionIf is transition with one more condition on the row (cond, its arguments last
// in condArgs), for a change that must not apply twice although its status does not move.
func (q *queries) transitionIf(ctx context.Context, m orderpay.TransitionChecker, table, keyCol, key, from, to string, sets []string, args []any, h orderpay.HistoryEntry,
	cond string, condArgs ...any) error {
	if err := q.checked(m, h.Entity, key, from, h.Event, to); err != nil {
		return err
	}
	sets = append([]string{"status = ?"}, sets...)
	args = append([]any{to}, args...)
	args = append(args, key, from)
	where := keyCol + ` = ? AND status = ?`
	if cond != "" {
		where += " AND " + cond
		args = append(args, condArgs...)
	}
	n, err := q.exec(ctx, `UPDATE `+table+` SET `+strings.Join(sets, ", ")+` WHERE `+where, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		var cur string
		err := q.row(ctx, `SELECT status FROM `+table+` WHERE `+keyCol+` = ?`, key).Scan(&cur)
		if err != nil {
			return notFound(err, h.Entity, key)
		}
		if cur == from {
			return orderpay.Errorf(orderpay.ECONFLICT, "%s %s changed since it was read", h.Entity, key)
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "%s %s is %s, not %s", h.Entity, key, cur, from)
	}
	h.From, h.To = from, to
	return q.appendHistory(ctx, h)
}

func (q *queries) TransitionOrder(ctx context.Context, c orderpay.OrderChange) error {
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	switch c.To {
	case orderpay.OrderPaid:
		sets, args = append(sets, "paid_at = ?", "payment_no = ?"), append(args, ms(c.At), c.PaymentNo)
	case orderpay.OrderCancelled:
		sets, args = append(sets, "closed_at = ?"), append(args, ms(c.At))
	}
	return q.transition(ctx, orderpay.OrderMachine, "orders", "order_no", c.No, string(c.From), string(c.To), sets, args,
		orderpay.HistoryEntry{Entity: orderpay.EntityOrder, EntityNo: c.No, Event: string(c.Event), Actor: c.Actor, Reason: c.Reason, At: c.At})
}

// ---- payments ----

func (q *queries) CreatePayment(ctx context.Context, p *orderpay.Payment) error {
	return q.CreateLockedPayment(ctx, p, time.Time{})
}

func (q *queries) CreateLockedPayment(ctx context.Context, p *orderpay.Payment, until time.Time) error {
	// ON CONFLICT DO NOTHING: an order's payment that exists is no error of the statement,
	// which on PostgreSQL would end the transaction; the caller may go on and read it.
	n, err := q.exec(ctx, `INSERT INTO payments (payment_no, order_no, amount, refunded, status, subject, pay_deadline,
		paid_channel, paid_out_trade_no, created_at, updated_at, paid_at, prepay_lock_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		p.No, p.OrderNo, p.Amount, p.Refunded, string(p.Status), p.Subject, ms(p.PayDeadline),
		p.PaidChannel, p.PaidOutTradeNo, ms(p.CreatedAt), ms(p.UpdatedAt), ms(p.PaidAt), ms(until))
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "order %q already has a payment", p.OrderNo)
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityPayment, EntityNo: p.No,
		To: string(p.Status), Event: "create", Actor: "payment-center", Reason: "order " + p.OrderNo, At: p.CreatedAt})
}

const paymentColumns = `payment_no, order_no, amount, refunded, status, subject, pay_deadline,
	paid_channel, paid_out_trade_no, created_at, updated_at, paid_at`

func scanPaymentRow(row scanner) (*orderpay.Payment, error) {
	var p orderpay.Payment
	var deadline, created, updated, paid int64
	if err := row.Scan(&p.No, &p.OrderNo, &p.Amount, &p.Refunded, &p.Status, &p.Subject, &deadline,
		&p.PaidChannel, &p.PaidOutTradeNo, &created, &updated, &paid); err != nil {
		return nil, err
	}
	p.PayDeadline, p.CreatedAt = orderpay.FromMillis(deadline), orderpay.FromMillis(created)
	p.UpdatedAt, p.PaidAt = orderpay.FromMillis(updated), orderpay.FromMillis(paid)
	return &p, nil
}

func scanPayment(row *sql.Row, key string) (*orderpay.Payment, error) {
	p, err := scanPaymentRow(row)
	if err != nil {
		return nil, notFound(err, "payment", key)
	}
	return p, nil
}

func (q *queries) Payment(ctx context.Context, no string) (*orderpay.Payment, error) {
	return scanPayment(q.row(ctx, `SELECT `+paymentColumns+` FROM payments WHERE payment_no = ?`, no), no)
}

func (q *queries) PaymentByOrder(ctx context.Context, orderNo string) (*orderpay.Payment, error) {
	return scanPayment(q.row(ctx, `SELECT `+paymentColumns+` FROM payments WHERE order_no = ?`, orderNo), "for order "+orderNo)
}

// PaymentWithAttempts reads the payment and its attempts in one statement.
func (q *queries) PaymentWithAttempts(ctx context.Context, orderNo string) (*orderpay.Payment, []orderpay.ChannelOrder, error) {
	rd, payment := paymentWithAttemptsRead(orderNo)
	if err := q.run(ctx, rd); err != nil {
		return nil, nil, err
	}
	return payment()
}

// paymentWithAttemptsRead reads the order's payment and its attempts: the payment's columns
// on every row, an attempt's (or zeros, for a payment with none) after them. Its result is
// the payment and its attempts by Seq, or ENOTFOUND.
func paymentWithAttemptsRead(orderNo string) (read, func() (*orderpay.Payment, []orderpay.ChannelOrder, error)) {
	var p *orderpay.Payment
	var attempts []orderpay.ChannelOrder
	rd := read{query: `SELECT ` + qualified("p", paymentColumns) + `, COALESCE(c.out_trade_no, ''), COALESCE(c.payment_no, ''),
		COALESCE(c.channel, ''), COALESCE(c.seq, 0), COALESCE(c.amount, 0), COALESCE(c.status, ''), COALESCE(c.unknown, 0),
		COALESCE(c.qr_code, ''), COALESCE(c.qr_expires_at, 0), COALESCE(c.trade_no, ''), COALESCE(c.created_at, 0),
		COALESCE(c.updated_at, 0), COALESCE(c.paid_at, 0), COALESCE(c.method, ''), COALESCE(c.payer, ''), COALESCE(c.pay, ''),
		COALESCE(c.fee_recorded, 0), COALESCE(c.fee, 0), COALESCE(c.fee_rate, 0), COALESCE(c.channel_refunded, 0)
		FROM payments p LEFT JOIN channel_orders c ON c.payment_no = p.payment_no WHERE p.order_no = ? ORDER BY c.seq`,
		args: []any{orderNo},
		row: func(rows scanner) error {
			dest, attempt := channelOrderScan()
			pr, err := scanPaymentRow(&withColumns{r: rows, extra: dest})
			if err != nil {
				return err
			}
			if p == nil {
				p = pr
			}
			if co := attempt(); co.OutTradeNo != "" {
				attempts = append(attempts, *co)
			}
			return nil
		}}
	return rd, func() (*orderpay.Payment, []orderpay.ChannelOrder, error) {
		if p == nil {
			return nil, nil, orderpay.NotFound("payment", "for order "+orderNo)
		}
		return p, attempts, nil
	}
}

func (q *queries) TransitionPayment(ctx context.Context, c orderpay.PaymentChange) error {
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	if c.To == orderpay.PaymentSuccess {
		// The paid attempt's opening is copied beside, for the charts (migration 0033).
		sets = append(sets, "paid_at = ?", "paid_channel = ?", "paid_out_trade_no = ?",
			"paid_attempt_at = COALESCE((SELECT created_at FROM channel_orders WHERE out_trade_no = ?), 0)")
		args = append(args, ms(c.At), c.PaidChannel, c.PaidOutTradeNo, c.PaidOutTradeNo)
	}
	if c.ReleasePrepay {
		sets = append(sets, "prepay_lock_until = 0")
	}
	return q.transition(ctx, orderpay.PaymentMachine, "payments", "payment_no", c.No, string(c.From), string(c.To), sets, args,
		orderpay.HistoryEntry{Entity: orderpay.EntityPayment, EntityNo: c.No, Event: string(c.Event), Actor: c.Actor, Reason: c.Reason, At: c.At})
}

// ---- channel orders ----

func (q *queries) CreateChannelOrder(ctx context.Context, co *orderpay.ChannelOrder) error {
	err := q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "payment %s already has an open %s attempt, or %s is taken", co.PaymentNo, co.Channel, co.OutTradeNo)
	}, `INSERT INTO channel_orders (`+channelOrderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		co.OutTradeNo, co.PaymentNo, co.Channel, co.Seq, co.Amount, string(co.Status), boolInt(co.Unknown),
		co.QRCode, ms(co.QRExpiresAt), co.TradeNo, ms(co.CreatedAt), ms(co.UpdatedAt), ms(co.PaidAt),
		string(methodOf(co.Method)), co.Payer, payJSON(co.Pay), boolInt(co.FeeRecorded), co.Fee, int64(co.FeeRate), co.ChannelRefunded)
	if err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityChannelOrder, EntityNo: co.OutTradeNo,
		To: string(co.Status), Event: "create", Actor: "payment-center", Reason: "payment " + co.PaymentNo + " via " + co.Channel + " " +
			string(methodOf(co.Method)), At: co.CreatedAt})
}

// methodOf is m, or MethodQR for none (an attempt made before methods).
func methodOf(m orderpay.PayMethod) orderpay.PayMethod {
	if m == "" {
		return orderpay.MethodQR
	}
	return m
}

// payJSON is an instruction as the pay column keeps it: JSON, or "" for none.
func payJSON(p *orderpay.PayInstruction) string {
	if p == nil {
		return ""
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "" // a map of strings always marshals
	}
	return string(b)
}

// payOf reads the pay column; a value that does not read is no instruction.
func payOf(s string) *orderpay.PayInstruction {
	if s == "" {
		return nil
	}
	var p orderpay.PayInstruction
	if json.Unmarshal([]byte(s), &p) != nil {
		return nil
	}
	return &p
}

const channelOrderColumns = `out_trade_no, payment_no, channel, seq, amount, status, unknown,
	qr_code, qr_expires_at, trade_no, created_at, updated_at, paid_at, method, payer, pay,
	fee_recorded, fee, fee_rate, channel_refunded`

type scanner interface{ Scan(dest ...any) error }

// list runs query and scans each row with scan.
func list[T any](ctx context.Context, q *queries, scan func(scanner) (*T, error), query string, args ...any) ([]T, error) {
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

func scanChannelOrder(row scanner) (*orderpay.ChannelOrder, error) {
	dest, attempt := channelOrderScan()
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	return attempt(), nil
}

// channelOrderScan returns the scan destinations of channelOrderColumns, and what makes
// the attempt of the values scanned into them.
func channelOrderScan() ([]any, func() *orderpay.ChannelOrder) {
	var co orderpay.ChannelOrder
	var unknown, feeRecorded int
	var expires, created, updated, paid, feeRate int64
	var pay string
	dest := []any{&co.OutTradeNo, &co.PaymentNo, &co.Channel, &co.Seq, &co.Amount, &co.Status, &unknown,
		&co.QRCode, &expires, &co.TradeNo, &created, &updated, &paid, &co.Method, &co.Payer, &pay,
		&feeRecorded, &co.Fee, &feeRate, &co.ChannelRefunded}
	return dest, func() *orderpay.ChannelOrder {
		co.Unknown, co.Pay = unknown != 0, payOf(pay)
		co.FeeRecorded, co.FeeRate = feeRecorded != 0, orderpay.FeeRate(feeRate)
		co.QRExpiresAt, co.CreatedAt = orderpay.FromMillis(expires), orderpay.FromMillis(created)
		co.UpdatedAt, co.PaidAt = orderpay.FromMillis(updated), orderpay.FromMillis(paid)
		return &co
	}
}

func (q *queries) ChannelOrder(ctx context.Context, outTradeNo string) (*orderpay.ChannelOrder, error) {
	co, err := scanChannelOrder(q.row(ctx, `SELECT `+channelOrderColumns+` FROM channel_orders WHERE out_trade_no = ?`, outTradeNo))
	if err != nil {
		return nil, notFound(err, "channel order", outTradeNo)
	}
	return co, nil
}

func (q *queries) ChannelOrders(ctx context.Context, paymentNo string) ([]orderpay.ChannelOrder, error) {
	return q.channelOrders(ctx, `SELECT `+channelOrderColumns+` FROM channel_orders WHERE payment_no = ? ORDER BY seq`, paymentNo)
}

// channelOrders runs a query whose columns are channelOrderColumns.
func (q *queries) channelOrders(ctx context.Context, query string, args ...any) ([]orderpay.ChannelOrder, error) {
	return list(ctx, q, scanChannelOrder, query, args...)
}

func (q *queries) TransitionChannelOrder(ctx context.Context, c orderpay.ChannelOrderChange) error {
	sets, args := []string{"updated_at = ?", "unknown = ?"}, []any{ms(c.At), boolInt(c.Unknown)}
	switch {
	case c.QRCode != "" || c.Pay != nil:
		sets, args = append(sets, "qr_code = ?", "pay = ?", "qr_expires_at = ?"), append(args, c.QRCode, payJSON(c.Pay), ms(c.QRExpiresAt))
	case c.To != orderpay.ChannelOrderCreated && c.To != orderpay.ChannelOrderPaying:
		// An ended attempt's instruction (its code, its link) is shown to nobody again, and
		// was most of the bytes of each of a shop's million attempts: it goes as it ends.
		sets = append(sets, "qr_code = ''", "pay = ''")
	}
	if c.TradeNo != "" {
		sets, args = append(sets, "trade_no = ?"), append(args, c.TradeNo)
	}
	if !c.PaidAt.IsZero() {
		sets, args = append(sets, "paid_at = ?"), append(args, ms(c.PaidAt))
	}
	if c.FeeRecorded {
		sets, args = append(sets, "fee_recorded = 1", "fee = ?", "fee_rate = ?"), append(args, c.Fee, int64(c.FeeRate))
	}
	if err := q.transition(ctx, orderpay.ChannelOrderMachine, "channel_orders", "out_trade_no", c.OutTradeNo, string(c.From), string(c.To), sets, args,
		orderpay.HistoryEntry{Entity: orderpay.EntityChannelOrder, EntityNo: c.OutTradeNo, Event: string(c.Event),
			Actor: c.Actor, Reason: c.Reason, Raw: c.Raw, At: c.At}); err != nil {
		return err
	}
	// The safety net of an attempt lives exactly as long as the attempt is PAYING.
	if c.To != orderpay.ChannelOrderPaying {
		return q.deletePendingQuery(ctx, c.OutTradeNo)
	}
	return nil
}

func (q *queries) AttachInstruction(ctx context.Context, outTradeNo, qrCode string, pay *orderpay.PayInstruction, expiresAt, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE channel_orders SET qr_code = ?, pay = ?, qr_expires_at = ?, unknown = 0, updated_at = ?
		WHERE out_trade_no = ? AND status = ? AND ((qr_code = '' AND pay = '') OR qr_expires_at <= ?)`,
		qrCode, payJSON(pay), ms(expiresAt), ms(at), outTradeNo, string(orderpay.ChannelOrderPaying), ms(at))
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "channel order %s is not PAYING without an instruction the buyer can still use", outTradeNo)
	}
	return nil
}

// ---- notifications, history, outbox ----

func (q *queries) RecordNotification(ctx context.Context, n orderpay.NotificationRecord) error {
	return q.insertLater(ctx, `INSERT INTO notifications (channel, notify_id, out_trade_no, outcome, amount, raw, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, notify_id) DO NOTHING`,
		n.Channel, n.NotifyID, n.OutTradeNo, string(n.Outcome), n.Amount, n.Raw, ms(n.ReceivedAt))
}

func (q *queries) appendHistory(ctx context.Context, h orderpay.HistoryEntry) error {
	if h.Raw == "" && q.batch != nil {
		q.batch.history = append(q.batch.history, h)
		return nil
	}
	// The raw answer is stored beside its row, by the row's seq: the rows appended before it
	// go in first, so that seq keeps the order the transitions were made in.
	if err := q.flushHistory(ctx); err != nil {
		return err
	}
	entries := []orderpay.HistoryEntry{h}
	if err := q.resolveMoves(ctx, entries); err != nil {
		return err
	}
	var sb strings.Builder
	args := q.writeHistoryInsert(&sb, entries, nil)
	if q.d == postgresDialect {
		// One statement: the history row's INSERT inside a WITH gives its seq to the raw
		// answer's (SQLite has no INSERT inside a WITH).
		n, err := q.exec(ctx, `WITH h AS (`+sb.String()+` RETURNING seq) INSERT INTO history_raw (seq, raw, at) SELECT seq, ?, ? FROM h`,
			append(args, h.Raw, ms(h.At))...)
		if err == nil && n != 1 {
			err = fmt.Errorf("sqlstore: a raw answer's history wrote %d raw rows, not 1", n)
		}
		if err == nil && q.counts != nil {
			q.counts.RowsWritten.Add(1) // the history row; exec counted the raw one
		}
		return err
	}
	var seq int64
	err := q.row(ctx, sb.String()+` RETURNING seq`, args...).Scan(&seq)
	if err != nil {
		return translate(err)
	}
	if q.counts != nil {
		q.counts.RowsWritten.Add(1)
	}
	_, err = q.exec(ctx, `INSERT INTO history_raw (seq, raw, at) VALUES (?, ?, ?)`, seq, h.Raw, ms(h.At))
	return err
}

// insertWithRows inserts one row (insert, with its args) and its rows in another table
// (rows, each the args of one row of into: "INSERT INTO table (columns)"), an order and its
// lines say. The rows go in one statement, and on PostgreSQL the first row with them: its
// INSERT inside a WITH (the foreign keys are checked at the statement's end).
func (q *queries) insertWithRows(ctx context.Context, insert string, args []any, into string, rows [][]any) error {
	values := make([]string, len(rows))
	all := []any{}
	for i, r := range rows {
		values[i] = "(" + inList(len(r)) + ")"
		all = append(all, r...)
	}
	rowsSQL := into + ` VALUES ` + strings.Join(values, ", ")
	if len(rows) > 0 && q.d == postgresDialect {
		_, err := q.exec(ctx, `WITH parent AS (`+insert+`) `+rowsSQL, append(slices.Clip(args), all...)...)
		if err == nil && q.counts != nil {
			q.counts.RowsWritten.Add(1) // the first row; exec counted the others
		}
		return err
	}
	if _, err := q.exec(ctx, insert, args...); err != nil || len(rows) == 0 {
		return err
	}
	_, err := q.exec(ctx, rowsSQL, all...)
	return err
}

// writeBatch is what a write transaction appended and has not written yet: its transitions'
// history rows and its outbox messages. A transaction appends a history row with most of
// its changes, several in one (a paid order: the attempt, the payment, the order, its
// parcels), and a message or two; one INSERT of them all costs about what one of them
// alone does, and on PostgreSQL the two tables' rows go in one statement. They are
// written before the commit and before anything in the transaction reads them.
type writeBatch struct {
	history []orderpay.HistoryEntry
	// moves are the history codes the transaction read or gave that the store did not know
	// (historyMoves): the store learns them once the transaction has committed.
	moves  map[historyMove]int16
	outbox []orderpay.Message
	// rows are single-row INSERTs whose outcome the transaction does not wait for (a
	// notification's record and its log entry): on PostgreSQL they go in the same one
	// statement.
	rows []deferredRow
}

// deferredRow is one INSERT of a writeBatch: its SQL (with ? placeholders) and arguments.
type deferredRow struct {
	query string
	args  []any
}

// insertLater runs the single-row INSERT query in the transaction's batch, written with
// its history and outbox; outside a transaction, at once.
func (q *queries) insertLater(ctx context.Context, query string, args ...any) error {
	if q.batch == nil {
		_, err := q.exec(ctx, query, args...)
		return err
	}
	q.batch.rows = append(q.batch.rows, deferredRow{query, args})
	return nil
}

// historyRowsMax and outboxRowsMax bound the rows of one INSERT: 6 and 4 parameters each,
// well within both engines' limits, and few statement texts for the cache.
const (
	historyRowsMax = 32
	outboxRowsMax  = 16
)

// Savepoint runs fn in a savepoint. The batch is written first, so that from there on it
// holds only what fn appends: if fn fails (or its rows fail to be written), they are dropped
// with the savepoint's rollback, and the transaction goes on as it was before fn.
func (q *queries) Savepoint(ctx context.Context, fn func() error) error {
	if q.tx == nil {
		return orderpay.Errorf(orderpay.EINTERNAL, "sqlstore: a savepoint outside a transaction")
	}
	if err := q.flush(ctx); err != nil {
		return err
	}
	if _, err := q.tx.ExecContext(statementContext(ctx), `SAVEPOINT fn`); err != nil {
		return translate(err)
	}
	ferr := fn()
	if ferr == nil {
		if ferr = q.flush(ctx); ferr == nil {
			_, err := q.tx.ExecContext(statementContext(ctx), `RELEASE SAVEPOINT fn`)
			return translate(err)
		}
	}
	if q.batch != nil {
		q.batch.history, q.batch.outbox, q.batch.rows = q.batch.history[:0], q.batch.outbox[:0], q.batch.rows[:0]
		// A code given in fn is given no more: it is read (or given) again when next written.
		clear(q.batch.moves)
	}
	if _, err := q.tx.ExecContext(statementContext(ctx), `ROLLBACK TO SAVEPOINT fn`); err != nil {
		return translate(err)
	}
	if _, err := q.tx.ExecContext(statementContext(ctx), `RELEASE SAVEPOINT fn`); err != nil {
		return translate(err)
	}
	return ferr
}

// flush writes the batched transitions and messages, each table's in the order they were
// appended.
func (q *queries) flush(ctx context.Context) error {
	if q.batch == nil {
		return nil
	}
	b := q.batch
	if q.d.numbered && len(b.history) <= historyRowsMax && len(b.outbox) <= outboxRowsMax && len(b.history)+len(b.outbox)+len(b.rows) > 1 {
		return q.flushAsOne(ctx)
	}
	if err := q.flushHistory(ctx); err != nil {
		return err
	}
	for _, r := range b.rows {
		if _, err := q.exec(ctx, r.query, r.args...); err != nil {
			return err
		}
	}
	b.rows = b.rows[:0]
	for len(b.outbox) > 0 {
		n := min(len(b.outbox), outboxRowsMax)
		var sb strings.Builder
		args := writeOutboxInsert(&sb, b.outbox[:n], nil)
		if _, err := q.exec(ctx, sb.String(), args...); err != nil {
			return outboxConflict(err, b.outbox[:n])
		}
		b.outbox = b.outbox[n:]
	}
	return nil
}

// flushAsOne writes the whole batch in one PostgreSQL statement: each INSERT (the history's,
// every deferred row's, the outbox's) a data-modifying WITH that returns a 1 per row it
// wrote, and the statement their count. The INSERTs touch different tables, so the order
// PostgreSQL runs them in does not matter; the history's rows keep theirs in one INSERT.
func (q *queries) flushAsOne(ctx context.Context) error {
	b := q.batch
	var sb strings.Builder
	var args []any
	parts := 0
	part := func(write func()) {
		if parts > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "w%d AS (", parts)
		write()
		sb.WriteString(" RETURNING 1)")
		parts++
	}
	if err := q.resolveMoves(ctx, b.history); err != nil {
		return err
	}
	sb.WriteString("WITH ")
	if len(b.history) > 0 {
		part(func() { args = q.writeHistoryInsert(&sb, b.history, args) })
	}
	for _, r := range b.rows {
		part(func() { sb.WriteString(r.query); args = append(args, r.args...) })
	}
	if len(b.outbox) > 0 {
		part(func() { args = writeOutboxInsert(&sb, b.outbox, args) })
	}
	sb.WriteString(" SELECT ")
	for i := range parts {
		if i > 0 {
			sb.WriteString(" + ")
		}
		fmt.Fprintf(&sb, "(SELECT COUNT(*) FROM w%d)", i)
	}
	var written int64
	if err := q.row(ctx, sb.String(), args...).Scan(&written); err != nil {
		return outboxConflict(translate(err), b.outbox)
	}
	if q.counts != nil {
		q.counts.RowsWritten.Add(written)
	}
	b.history, b.outbox, b.rows = b.history[:0], b.outbox[:0], b.rows[:0]
	return nil
}

func (q *queries) flushHistory(ctx context.Context) error {
	if q.batch == nil {
		return nil
	}
	if err := q.resolveMoves(ctx, q.batch.history); err != nil {
		return err
	}
	for len(q.batch.history) > 0 {
		n := min(len(q.batch.history), historyRowsMax)
		var sb strings.Builder
		args := q.writeHistoryInsert(&sb, q.batch.history[:n], nil)
		if _, err := q.exec(ctx, sb.String(), args...); err != nil {
			return err
		}
		q.batch.history = q.batch.history[n:]
	}
	return nil
}

// writeOutboxInsert writes the INSERT of msgs into the outbox to sb and returns args with
// its arguments appended.
func writeOutboxInsert(sb *strings.Builder, msgs []orderpay.Message, args []any) []any {
	sb.WriteString(`INSERT INTO outbox (msg_id, subject, payload, created_at, published_at) VALUES `)
	for i, m := range msgs {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, 0)")
		args = append(args, m.ID, m.Subject, string(m.Payload), ms(m.CreatedAt))
	}
	return args
}

// outboxConflict says which messages were written already when an outbox INSERT of msgs
// failed on a message id that exists.
func outboxConflict(err error, msgs []orderpay.Message) error {
	if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		return err
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	if len(ids) == 1 {
		return orderpay.Errorf(orderpay.ECONFLICT, "outbox message %q was already written", ids[0])
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "an outbox message of %q was already written", ids)
}

// Enqueue writes msgs to the outbox. In a write transaction they are batched (writeBatch)
// and written before it commits: a message id written already fails the transaction then.
func (q *queries) Enqueue(ctx context.Context, msgs ...orderpay.Message) error {
	if q.batch != nil {
		q.batch.outbox = append(q.batch.outbox, msgs...)
		return nil
	}
	for _, m := range msgs {
		var sb strings.Builder
		args := writeOutboxInsert(&sb, []orderpay.Message{m}, nil)
		if _, err := q.exec(ctx, sb.String(), args...); err != nil {
			return outboxConflict(err, []orderpay.Message{m})
		}
	}
	return nil
}

// unpublishedMessagesQuery is the relay's read, on outbox_unpublished.
const unpublishedMessagesQuery = `SELECT msg_id, subject, payload, created_at FROM outbox WHERE published_at = 0 ORDER BY seq LIMIT ?`

func (q *queries) UnpublishedMessages(ctx context.Context, limit int) ([]orderpay.Message, error) {
	rows, err := q.rows(ctx, unpublishedMessagesQuery, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.Message
	for rows.Next() {
		var m orderpay.Message
		var payload string
		var created int64
		if err := rows.Scan(&m.ID, &m.Subject, &payload, &created); err != nil {
			return nil, err
		}
		m.Payload, m.CreatedAt = []byte(payload), orderpay.FromMillis(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

func (q *queries) MarkPublished(ctx context.Context, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{ms(at)}
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := q.exec(ctx, `UPDATE outbox SET published_at = ? WHERE published_at = 0 AND msg_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	return err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (q *queries) SKUs(ctx context.Context) ([]orderpay.SKU, error) {
	rows, err := q.rows(ctx, `SELECT `+skuColumns+` FROM skus ORDER BY sku`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.SKU
	for rows.Next() {
		s, err := scanSKU(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, rows.Err()
}

package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
	"orderpay/sqlstore"
)

// A shop in its third year: `bench --history N` measures the same figures on an empty
// database and on one that holds N past orders, and their ratio.
//
// The past orders are not invented column by column. A few template orders are taken
// through the real flow first, by the running server (completed, returned, refunded before
// shipping, cancelled): every row they left, in every table, is
// then copied N times by the database itself (one INSERT … SELECT per table), each copy
// with its own order number (a day of the past year and twelve digits, as the order
// numbers are), its own buyer, and every timestamp moved to its day. What a retention
// pass would have removed by now is not copied (logs, published messages, raw channel
// bodies, ended holds, expired keys); a retention pass runs after it all the same.

// historyKinds are the templates' final states and their shares of the history.
var historyKinds = []struct {
	name  string
	share float64
}{
	{"completed", 0.72},
	{"returned", 0.04},
	{"refunded", 0.06},
	// Cancelled before a code was asked for. An order abandoned after its code was shown
	// ends only when its payment is closed, past its deadline and the close grace (half
	// an hour on): the bench does not wait for that, and counts those here.
	{"cancelled", 0.18},
}

// historyBuyerShare is buyers per past order: 1,000,000 orders from 200,000 buyers.
const historyBuyerShare = 5

// HistoryPrefill is what the prefill did.
type HistoryPrefill struct {
	Orders    int            `json:"orders"`
	Templates []string       `json:"templates"`
	Rows      map[string]int `json:"rows_by_table"`
	Seconds   float64        `json:"seconds"`
	// BytesPerOrder is what the past orders take, every table and index, after the
	// retention pass: the store's size after the prefill less its size before, over Orders.
	BytesPerOrder float64 `json:"bytes_per_order"`
	// TableBytesPerOrder is the same by table (its indexes included).
	TableBytesPerOrder map[string]float64 `json:"table_bytes_per_order"`
}

// historyTemplate is one template order: its number, its buyer and which kind it is.
type historyTemplate struct {
	kind, orderNo, buyer string
}

// historyRecent is how many recent orders the bench takes through the real flow before
// either round, in the history's shares: the first of each kind is a template, and all of
// them fill the console's pages (a list of 100 orders, an audit log of 500 actions) on
// both databases, so that each route shows as many rows on the empty one.
const historyRecent = 600

// runHistoryTemplates takes historyRecent orders through the real flow, 8 at a time, and
// waits until everything they set off has ended (refunds settled, messages published). It
// returns the first order of each kind.
func runHistoryTemplates(ctx context.Context, e *env, way PayWay, progress func(string)) ([]historyTemplate, error) {
	began := time.Now()
	sku := e.runID + "-history"
	if err := e.client.CreateSKU(ctx, sku, 4990, 4*historyRecent, "normal"); err != nil {
		return nil, err
	}
	kinds := make([]int, historyRecent)
	for i := range kinds {
		kinds[i] = historyKindOf(float64(i) / historyRecent)
	}
	// One of each kind first: the templates.
	for k := range historyKinds {
		kinds[k] = k
	}
	orders := make([]historyTemplate, historyRecent)
	var next atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= historyRecent || ctx.Err() != nil {
					return
				}
				kind := historyKinds[kinds[i]].name
				buyer := fmt.Sprintf("recent-%d-%s", i, e.runID)
				no, err := historyTemplateOrder(ctx, e, way, kind, buyer, sku)
				if err != nil {
					errs <- fmt.Errorf("history: recent order %d (%s): %w", i, kind, err)
					return
				}
				orders[i] = historyTemplate{kind: kind, orderNo: no, buyer: buyer}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("history: %d recent orders through the flow in %.1f s", historyRecent, time.Since(began).Seconds()))
	// Quiet: every message published, no refund in flight, no attempt or payment open.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var outbox, refunds, payments int
		err := e.store.DB().QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM outbox WHERE published_at = 0),
			(SELECT COUNT(*) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')),
			(SELECT COUNT(*) FROM payments WHERE status IN ('UNPAID', 'PAYING'))`).Scan(&outbox, &refunds, &payments)
		if err != nil {
			return nil, err
		}
		if outbox+refunds+payments == 0 {
			break
		}
		if time.Since(began) > 20*time.Second && int(time.Since(began).Seconds())%10 == 0 {
			progress(fmt.Sprintf("history: waiting: %d unpublished, %d refunds in flight, %d payments open", outbox, refunds, payments))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("history templates: after three minutes, %d messages unpublished, %d refunds in flight, %d payments open",
				outbox, refunds, payments)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	progress(fmt.Sprintf("history: quiet after %.1f s", time.Since(began).Seconds()))
	return orders[:len(historyKinds)], nil
}

// historyKindOf is the kind at r in [0, 1) by the shares.
func historyKindOf(r float64) int {
	k := 0
	for ; k < len(historyKinds)-1 && r >= historyKinds[k].share; k++ {
		r -= historyKinds[k].share
	}
	return k
}

// historyTemplateOrder takes one order to the final state of kind.
func historyTemplateOrder(ctx context.Context, e *env, way PayWay, kind, buyer, sku string) (string, error) {
	c := e.client.As(buyer)
	o, err := c.CreateOrder(ctx, buyer, "", Item{SKU: sku, Qty: 2})
	if err != nil {
		return "", err
	}
	no := o.OrderNo
	if kind == "cancelled" {
		_, err := c.Cancel(ctx, no)
		return no, err
	}
	if claims, err := benchPayer(ctx, e, way, buyer); err != nil {
		return "", err
	} else if claims != nil {
		c = e.client.AsWith(buyer, claims)
	}
	p, err := c.PayBy(ctx, no, PayRequest{Channel: way.Channel, Method: way.Method})
	if err != nil {
		return "", err
	}
	if _, err := c.WalletPayAs(ctx, deviceFor(p.Pay, buyer, e.shopDevice(no))); err != nil {
		return "", err
	}
	if _, _, err := c.waitStatus(ctx, no, string(orderpay.OrderPaid), 5*time.Millisecond); err != nil {
		return "", err
	}
	d, err := c.OrderDetail(ctx, no)
	if err != nil {
		return "", err
	}
	first := AfterSaleItem{Line: d.Items[0].Line, Qty: 1}
	review := func(a *AfterSaleView, steps ...string) error {
		for _, s := range steps {
			if s == "ship-back" {
				a, err = c.ShipBack(ctx, no, a.AfterSaleNo, buyer, "ZTO", "ZT"+a.AfterSaleNo)
			} else if s != "approve" || a.Status == "REQUESTED" {
				a, err = e.client.ReviewAfterSale(ctx, a.AfterSaleNo, s, "")
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	if kind == "refunded" {
		a, err := c.RequestAfterSale(ctx, no, buyer, "refund", "changed my mind", first)
		if err != nil {
			return "", err
		}
		return no, review(a, "approve")
	}
	if _, err := c.ChangeAddress(ctx, no, buyer, Address{Name: buyer, Phone: "13800138000", Detail: "1 History Road"}); err != nil {
		return "", err
	}
	for i, sh := range d.Shipments {
		if _, err := e.client.Ship(ctx, sh.ShipmentNo, "SF Express", fmt.Sprintf("SF%s%d", no, i)); err != nil {
			return "", err
		}
		if _, err := c.ConfirmReceipt(ctx, no, sh.ShipmentNo, buyer); err != nil {
			return "", err
		}
	}
	if kind == "returned" {
		a, err := c.RequestAfterSale(ctx, no, buyer, "return", "not as described", first)
		if err != nil {
			return "", err
		}
		return no, review(a, "approve", "ship-back", "receive-goods")
	}
	return no, nil
}

// textCopy is the SQL of a copy's text column src: the template's order number and buyer
// replaced by the copy's (k, t: prefillHistory's keys and templates).
func textCopy(src string) string {
	return fmt.Sprintf(`REPLACE(REPLACE(%s, t.order_no, k.order_no), t.buyer, k.buyer)`, src)
}

// historyColumn is one column of a table as the prefill copies it.
type historyColumn struct {
	name     string
	text     bool // TEXT: the template's order number and buyer are replaced in it
	identity bool // given by the database: left out, except history's seq
}

// historyKeep is, for a table a retention pass thins, the timestamp column and how long it
// is kept (published, logs, raw bodies), and any more condition: a copy older than that is
// not made.
var historyKeep = map[string]struct {
	column string
	period func(orderpay.RetentionPolicy) time.Duration
	also   string
}{
	"notification_log": {"received_at", func(p orderpay.RetentionPolicy) time.Duration { return p.Logs }, ""},
	"query_log":        {"at", func(p orderpay.RetentionPolicy) time.Duration { return p.Logs }, ""},
	"webhook_attempts": {"at", func(p orderpay.RetentionPolicy) time.Duration { return p.Logs }, ""},
	"outbox":           {"published_at", func(p orderpay.RetentionPolicy) time.Duration { return p.Published }, ""},
	"stock_holds":      {"updated_at", func(p orderpay.RetentionPolicy) time.Duration { return p.Published }, ""},
	"tickets":          {"updated_at", func(p orderpay.RetentionPolicy) time.Duration { return p.Published }, ""},
	"history_raw":      {"at", func(p orderpay.RetentionPolicy) time.Duration { return p.RawBodies }, ""},
	// An idempotency key lives a day; every past order is older.
	"request_keys": {"expires_at", func(orderpay.RetentionPolicy) time.Duration { return 0 }, ""},
}

// historyUnique are text columns unique on their own whose values do not carry the order
// number: each copy gets the template's value with its own number after it.
var historyUnique = map[string][]string{
	"notifications": {"notify_id"},
	"outbox":        {"msg_id"},
}

// historySkip are tables the prefill never copies: the schema's own, the counts (the
// triggers count the copies), the reconciliations (a report is a day's, with an item per
// difference, not an order's), the queries still to make (an abandoned attempt's last one
// waits minutes; a year-old one was made long ago), and the prefill's.
func historySkip(table string) bool {
	return table == "schema_migrations" || table == "pending_queries" || strings.HasPrefix(table, "reconciliation") ||
		strings.HasPrefix(table, "status_count") || strings.HasPrefix(table, "chart_") || strings.HasPrefix(table, "prefill_") ||
		strings.HasPrefix(table, "sqlite_")
}

// historyTables lists the store's tables and their columns.
func historyTables(ctx context.Context, s *sqlstore.Store) (map[string][]historyColumn, error) {
	db := s.DB()
	out := map[string][]historyColumn{}
	if s.Dialect() == "postgres" {
		rows, err := db.QueryContext(ctx, `SELECT c.table_name, c.column_name, c.data_type, c.is_identity
			FROM information_schema.columns c JOIN information_schema.tables t
			  ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
			WHERE c.table_schema = current_schema() ORDER BY c.table_name, c.ordinal_position`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var table, col, typ, ident string
			if err := rows.Scan(&table, &col, &typ, &ident); err != nil {
				return nil, err
			}
			if !historySkip(table) {
				out[table] = append(out[table], historyColumn{name: col, text: typ == "text", identity: ident == "YES"})
			}
		}
		return out, rows.Err()
	}
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		return nil, err
	}
	var tables []string
	auto := map[string]bool{}
	for rows.Next() {
		var name string
		var ddl *string
		if err := rows.Scan(&name, &ddl); err != nil {
			rows.Close()
			return nil, err
		}
		if !historySkip(name) {
			tables = append(tables, name)
			auto[name] = ddl != nil && strings.Contains(strings.ToUpper(*ddl), "AUTOINCREMENT")
		}
	}
	rows.Close()
	for _, table := range tables {
		cols, err := db.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?)`, table)
		if err != nil {
			return nil, err
		}
		for cols.Next() {
			var name, typ string
			var pk int
			if err := cols.Scan(&name, &typ, &pk); err != nil {
				cols.Close()
				return nil, err
			}
			out[table] = append(out[table], historyColumn{name: name, text: strings.EqualFold(typ, "TEXT"),
				identity: pk == 1 && auto[table] && strings.EqualFold(typ, "INTEGER")})
		}
		cols.Close()
		if err := cols.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// historyOrder lists the tables so that a table comes after those its foreign keys refer
// to (then by name).
func historyOrder(ctx context.Context, s *sqlstore.Store, tables map[string][]historyColumn) ([]string, error) {
	refers := map[string][]string{}
	for table := range tables {
		q := `SELECT "table" FROM pragma_foreign_key_list(?)`
		if s.Dialect() == "postgres" {
			q = `SELECT f.relname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class f ON f.oid = k.confrelid
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE k.contype = 'f' AND n.nspname = current_schema() AND c.relname = $1`
		}
		rows, err := s.DB().QueryContext(ctx, q, table)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var to string
			if err := rows.Scan(&to); err != nil {
				rows.Close()
				return nil, err
			}
			if to != table {
				refers[table] = append(refers[table], to)
			}
		}
		rows.Close()
	}
	names := make([]string, 0, len(tables))
	for table := range tables {
		names = append(names, table)
	}
	sort.Strings(names)
	var out []string
	placed := map[string]bool{}
	var place func(string)
	place = func(t string) {
		if placed[t] {
			return
		}
		placed[t] = true
		for _, to := range refers[t] {
			place(to)
		}
		out = append(out, t)
	}
	for _, t := range names {
		place(t)
	}
	return out, nil
}

// prefillHistory copies the templates n times as past orders spread over the year before
// now (the last a day before it), and runs a retention pass.
// prefillExec runs one statement of the prefill, again while the database refuses it as
// busy: on SQLite the shop's server, running beside, folds the status counts the copies
// made, and one of its write transactions can outlast the busy timeout on a loaded
// machine. A refused statement changed nothing.
func prefillExec(ctx context.Context, db *sql.DB, q string, args ...any) (sql.Result, error) {
	for try := 1; ; try++ {
		res, err := db.ExecContext(ctx, q, args...)
		if err == nil || !sqlstore.Retryable(err) || try == 30 {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func prefillHistory(ctx context.Context, e *env, templates []historyTemplate, n int, progress func(string)) (*HistoryPrefill, error) {
	began := time.Now()
	s := e.store
	db := s.DB()
	pg := s.Dialect() == "postgres"
	sizeBefore, err := dbBytesInUse(ctx, s)
	if err != nil {
		return nil, err
	}
	tablesBefore, err := tableBytes(ctx, s)
	if err != nil {
		return nil, err
	}
	rep := &HistoryPrefill{Orders: n, Rows: map[string]int{}, TableBytesPerOrder: map[string]float64{}}
	for _, t := range templates {
		rep.Templates = append(rep.Templates, t.kind+" "+t.orderNo)
	}
	tables, err := historyTables(ctx, s)
	if err != nil {
		return nil, err
	}
	exec := func(q string, args ...any) error {
		if _, err := prefillExec(ctx, db, s.Rebind(q), args...); err != nil {
			return fmt.Errorf("history prefill: %w\n%s", err, q)
		}
		return nil
	}
	// The templates, and each template's rows of every table.
	if err := exec(`CREATE TABLE prefill_templates (tmpl INTEGER PRIMARY KEY, order_no TEXT NOT NULL, buyer TEXT NOT NULL,
		seq_base BIGINT NOT NULL DEFAULT 0)`); err != nil {
		return nil, err
	}
	defer func() {
		for table := range tables {
			db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS prefill_src_`+table)
		}
		db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS prefill_templates`)
		db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS prefill_keys`)
	}()
	for i, t := range templates {
		if err := exec(`INSERT INTO prefill_templates (tmpl, order_no, buyer) VALUES (?, ?, ?)`, i, t.orderNo, t.buyer); err != nil {
			return nil, err
		}
	}
	names, err := historyOrder(ctx, s, tables)
	if err != nil {
		return nil, err
	}
	var copied []string
	for _, table := range names {
		var match []string
		for _, c := range tables[table] {
			if c.text {
				match = append(match, fmt.Sprintf(`s.%s LIKE '%%' || t.order_no || '%%'`, c.name))
			}
		}
		if len(match) == 0 {
			continue
		}
		if err := exec(fmt.Sprintf(`CREATE TABLE prefill_src_%[1]s AS SELECT t.tmpl AS prefill_tmpl, s.* FROM %[1]s s
			JOIN prefill_templates t ON %[2]s`, table, strings.Join(match, " OR "))); err != nil {
			return nil, err
		}
		var rows int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM prefill_src_`+table).Scan(&rows); err != nil {
			return nil, err
		}
		if rows > 0 {
			copied = append(copied, table)
		}
	}
	// History keeps its order by seq: each copy's transitions get seqs of their own, in
	// the copies' order, after every seq there is, and a raw body goes with its transition.
	var seqFrom, seqSpan int64
	if slices.Contains(copied, "transitions") {
		if err := exec(`UPDATE prefill_templates SET seq_base = (SELECT COALESCE(MIN(seq), 0) FROM prefill_src_transitions h
			WHERE h.prefill_tmpl = prefill_templates.tmpl)`); err != nil {
			return nil, err
		}
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(h.seq - t.seq_base), 0) + 1 FROM prefill_src_transitions h
			JOIN prefill_templates t ON t.tmpl = h.prefill_tmpl`).Scan(&seqSpan); err != nil {
			return nil, err
		}
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM transitions`).Scan(&seqFrom); err != nil {
			return nil, err
		}
	}
	// The copies: number i is on day now − 365 days + i × 364 days / n, of template drawn
	// by the shares, for one of n / 5 buyers.
	if err := exec(`CREATE TABLE prefill_keys (i BIGINT PRIMARY KEY, tmpl INTEGER NOT NULL, order_no TEXT NOT NULL,
		buyer TEXT NOT NULL, shift BIGINT NOT NULL, tail TEXT NOT NULL)`); err != nil {
		return nil, err
	}
	var templateAt []int64
	for _, t := range templates {
		var at int64
		if err := db.QueryRowContext(ctx, s.Rebind(`SELECT created_at FROM orders WHERE order_no = ?`), t.orderNo).Scan(&at); err != nil {
			return nil, err
		}
		templateAt = append(templateAt, at)
	}
	now := time.Now()
	first := now.Add(-365 * 24 * time.Hour)
	step := 364 * 24 * time.Hour / time.Duration(n)
	rng := rand.New(rand.NewPCG(uint64(n), 39))
	buyers := max(n/historyBuyerShare, 1)
	const batch = 500
	for from := 0; from < n; from += batch {
		var sb strings.Builder
		var args []any
		sb.WriteString(`INSERT INTO prefill_keys (i, tmpl, order_no, buyer, shift, tail) VALUES `)
		for i := from; i < min(from+batch, n); i++ {
			tmpl := historyKindOf(rng.Float64())
			at := first.Add(time.Duration(i) * step)
			no := orderpay.BillDay(at) + fmt.Sprintf("%012d", (uint64(i)*2654435761)%1_000_000_000_000)
			if i > from {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, i, tmpl, strings.ReplaceAll(no, "-", ""), fmt.Sprintf("buyer-%d", (i*7919)%buyers),
				at.UnixMilli()-templateAt[tmpl], fmt.Sprintf("-%d", i))
		}
		if err := exec(sb.String(), args...); err != nil {
			return nil, err
		}
	}
	progress(fmt.Sprintf("history: %d templates, %d keys in %.1f s", len(templates), n, time.Since(began).Seconds()))
	// One INSERT … SELECT per table and slice of copies.
	policy := orderpay.DefaultRetention
	const slice = 100_000
	for _, table := range copied {
		var cols, exprs []string
		for _, c := range tables[table] {
			src := "s." + c.name
			switch {
			case (table == "transitions" || table == "history_raw") && c.name == "seq" && seqSpan > 0:
				exprs = append(exprs, fmt.Sprintf(`%d + k.i * %d + (%s - t.seq_base)`, seqFrom, seqSpan, src))
			case c.identity:
				continue
			case table == "transitions" && c.name == "entity_key":
				// The key of the copy's own number (the entity is its move's).
				exprs = append(exprs, s.EntityKeySQL("m.entity", textCopy("s.entity_no")))
			case slices.Contains(historyUnique[table], c.name):
				exprs = append(exprs, src+` || k.tail`)
			case c.text:
				exprs = append(exprs, textCopy(src))
			default:
				// Milliseconds since 1970 move to the copy's day; amounts, counts and
				// flags stay.
				exprs = append(exprs, fmt.Sprintf(`CASE WHEN %[1]s BETWEEN 1000000000000 AND 9999999999999 THEN %[1]s + k.shift ELSE %[1]s END`, src))
			}
			cols = append(cols, c.name)
		}
		where := "k.i >= ? AND k.i < ?"
		var keepArg []any
		if keep, ok := historyKeep[table]; ok {
			where += fmt.Sprintf(` AND s.%s + k.shift >= ?`, keep.column)
			keepArg = append(keepArg, now.Add(-keep.period(policy)).UnixMilli())
		}
		joins := ""
		if table == "transitions" {
			joins = " JOIN history_moves m ON m.code = s.move"
		}
		began := time.Now()
		total := 0
		for from := 0; from < n; from += slice {
			res, err := prefillExec(ctx, db, s.Rebind(fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM prefill_src_%s s
				JOIN prefill_keys k ON k.tmpl = s.prefill_tmpl JOIN prefill_templates t ON t.tmpl = s.prefill_tmpl%s WHERE %s`,
				table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table, joins, where)), append([]any{from, from + slice}, keepArg...)...)
			if err != nil {
				return nil, fmt.Errorf("history prefill of %s: %w", table, err)
			}
			rows, _ := res.RowsAffected()
			total += int(rows)
		}
		rep.Rows[table] = total
		progress(fmt.Sprintf("history: %s, %d rows in %.1f s", table, total, time.Since(began).Seconds()))
	}
	if pg && seqSpan > 0 {
		if err := exec(`SELECT setval(pg_get_serial_sequence('transitions', 'seq'), (SELECT MAX(seq) FROM transitions))`); err != nil {
			return nil, err
		}
	}
	// A copy is an order like any other: its timeline is found by its number.
	var lastNo string
	if err := db.QueryRowContext(ctx, s.Rebind(`SELECT order_no FROM prefill_keys WHERE i = ?`), n-1).Scan(&lastNo); err != nil {
		return nil, err
	}
	if hist, err := s.History(ctx, orderpay.EntityOrder, lastNo); err != nil || len(hist) == 0 {
		return nil, fmt.Errorf("history prefill: the copy %s has no timeline (%v)", lastNo, err)
	}
	// The counts the triggers kept, folded as serve does.
	for {
		moved, err := s.FoldCounts(ctx)
		if err != nil {
			return nil, err
		}
		if moved == 0 {
			break
		}
	}
	for table := range tables {
		if err := exec(`DROP TABLE IF EXISTS prefill_src_` + table); err != nil {
			return nil, err
		}
	}
	for _, t := range []string{"prefill_templates", "prefill_keys"} {
		if err := exec(`DROP TABLE ` + t); err != nil {
			return nil, err
		}
	}
	if _, err := s.Retain(ctx, now, policy); err != nil {
		return nil, err
	}
	if pg {
		// The counts' deltas are queues a shop keeps a few rows long, folded as
		// they come; the copies put a million in them at once, and their tables and
		// indexes would keep the pages they took, empty, as no shop's would. A plain
		// vacuum gives those pages back only while no one waits to lock the table, and the
		// server's fold takes it every pass: autovacuum then gave them back bit by bit
		// during the measures, and every read of a queue (the charts', the scrape's)
		// walked the empty pages until it had. VACUUM FULL writes each queue anew, its
		// indexes too, waiting for the fold.
		for _, t := range []string{"status_count_deltas", "chart_count_deltas"} {
			if err := exec(`VACUUM FULL ` + t); err != nil {
				return nil, err
			}
		}
		// What autovacuum does on a database that has lived: statistics, and the
		// visibility map that lets an index-only scan skip the table.
		if err := exec(`VACUUM ANALYZE`); err != nil {
			return nil, err
		}
		// And its pages written out, as the checkpoints of a year have: otherwise the
		// prefill's and the vacuum's dirty pages are written by the next checkpoint,
		// during the measurements after it.
		if err := exec(`CHECKPOINT`); err != nil {
			return nil, err
		}
	} else if err := exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return nil, err
	}
	rep.Seconds = round1(time.Since(began).Seconds())
	size, err := dbBytesInUse(ctx, s)
	if err != nil {
		return nil, err
	}
	rep.BytesPerOrder = round1(float64(size-sizeBefore) / float64(n))
	after, err := tableBytes(ctx, s)
	if err != nil {
		return nil, err
	}
	for table, b := range after {
		if d := b - tablesBefore[table]; d > 0 {
			rep.TableBytesPerOrder[table] = round1(float64(d) / float64(n))
		}
	}
	return rep, nil
}

// tableBytes is each table's size with its indexes (PostgreSQL: with its TOAST; SQLite:
// its pages in use).
func tableBytes(ctx context.Context, s *sqlstore.Store) (map[string]int64, error) {
	q := `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r'`
	if s.Dialect() != "postgres" {
		q = `SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d LEFT JOIN sqlite_schema m ON m.name = d.name
			GROUP BY COALESCE(m.tbl_name, d.name)`
	}
	rows, err := s.DB().QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] += n
	}
	return out, rows.Err()
}

// HistoryFigures are the reads, a scrape, the workers' passes, a retention pass and a
// reconciliation, on one database.
type HistoryFigures struct {
	// RoutesMS is each read route's latency over its requests (trimmedMeanMS), by name.
	RoutesMS map[string]float64 `json:"routes_ms"`
	// RouteBlocksMS is each route's trimmed mean in each block of historyRouteBlocks, in
	// the order measured: a block of the shop and the control's next to it are a pair
	// (pairedRatio).
	RouteBlocksMS map[string][]float64 `json:"route_blocks_ms"`
	ScrapeMS      float64              `json:"scrape_ms"`
	// ScrapesMS is each scrape, in the order made: one of the shop and the control's next
	// to it are a pair.
	ScrapesMS []float64 `json:"scrapes_ms"`
	// PassesMS is each background worker's pass over a quiet while (passMeans), by worker:
	// reported, not bounded (tens of microseconds, which the scheduler blurs).
	PassesMS map[string]float64 `json:"passes_ms"`
	// SweeperPassCPUUS is the server's CPU over that while, over every pass of every
	// worker in it, in microseconds: the bounded figure of a sweeper pass.
	SweeperPassCPUUS float64 `json:"sweeper_pass_cpu_us"`
	RetentionMS      float64 `json:"retention_ms"`
	ReconcileMS      float64 `json:"reconcile_ms"`
}

// historyRoute is one read route the bench times.
type historyRoute struct {
	name, path string
	admin      bool
}

// historyRoutes are the buyer's and the console's read routes, about order (one of the
// bench's, of buyer) and the shop's history.
func historyRoutes(order, buyer string) []historyRoute {
	today := orderpay.BillDay(time.Now())
	day := strings.ReplaceAll(today, "-", "")
	var out []historyRoute
	for _, r := range []struct{ name, path string }{
		{"buyer: order", "/v1/orders/" + order},
		{"buyer: orders", "/v1/orders"},
		{"buyer: refunds", "/v1/orders/" + order + "/refunds"},
		{"buyer: coupons", "/v1/buyers/" + buyer + "/coupons"},
		{"buyer: catalogue", "/v1/skus"},
	} {
		out = append(out, historyRoute{name: r.name, path: r.path})
	}
	for _, r := range []struct{ name, path string }{
		{"console: newest orders", "/admin/orders"},
		{"console: search PAID", "/admin/orders?q=PAID"},
		{"console: search COMPLETED", "/admin/orders?q=COMPLETED"},
		// CANCELLED is a fifth of the history; REFUNDED is rare in it.
		{"console: search CANCELLED", "/admin/orders?q=CANCELLED"},
		{"console: search REFUNDED", "/admin/orders?q=REFUNDED"},
		{"console: search number prefix (today)", "/admin/orders?q=" + day},
		{"console: search number prefix (year)", "/admin/orders?q=" + day[:4]},
		{"console: search whole number", "/admin/orders?q=" + order},
		{"console: search buyer", "/admin/orders?q=" + url.QueryEscape(buyer)},
		{"console: timeline", "/admin/orders/" + order + "/timeline"},
		// The reason most of the history's refunds have, a page both databases fill: a
		// page of every refund of it would measure the control's few against the shop's 500.
		{"console: refunds by reason", "/admin/refunds?reason=" + orderpay.RefundReasonAfterSales + "&limit=20"},
		{"console: refunds needing action", "/admin/refunds/needs-action"},
		{"console: charts (24 h)", "/admin/charts"},
		{"console: pending queries", "/admin/pending-queries"},
		{"console: stuck payments", "/admin/payments/stuck"},
		{"console: after-sales queue", "/admin/after-sales"},
		{"console: audit log", "/admin/audit"},
		{"console: reconciliations", "/admin/reconciliations"},
		{"console: webhook deliveries", "/admin/webhooks/deliveries"},
		{"console: blocklist", "/admin/blocklist"},
		{"console: channels", "/admin/channels"},
	} {
		out = append(out, historyRoute{name: r.name, path: r.path, admin: true})
	}
	return out
}

// historyRouteRequests is how many times each route is read on each database, in
// historyRouteBlocks blocks that alternate between the two; the median is kept.
const (
	historyRouteRequests = 600
	historyRouteBlocks   = 12
	// historyScrapes is how many scrapes are timed on each database, each gathering.
	historyScrapes = 30
)

// historyReader is one database's side of the reads: its env, and the order and buyer
// its routes are about.
type historyReader struct {
	e            *env
	order, buyer string
	f            *HistoryFigures
}

// measureHistoryReads times the read routes and a scrape on both databases, alternating
// so that a slower moment of the machine falls on both, then a retention pass and a
// reconciliation of today's Alipay bill on each.
func measureHistoryReads(ctx context.Context, sides ...*historyReader) error {
	routes := make([][]historyRoute, len(sides))
	for i, s := range sides {
		s.f = &HistoryFigures{RoutesMS: map[string]float64{}, RouteBlocksMS: map[string][]float64{}}
		routes[i] = historyRoutes(s.order, s.buyer)
	}
	for r := range routes[0] {
		times := make([][]time.Duration, len(sides))
		for range historyRouteBlocks {
			for i, s := range sides {
				route := routes[i][r]
				c := s.e.client.As(s.buyer)
				var header http.Header
				if route.admin {
					header = http.Header{"Authorization": {"Bearer " + c.AdminToken}}
				}
				block := make([]time.Duration, 0, historyRouteRequests/historyRouteBlocks)
				for range historyRouteRequests / historyRouteBlocks {
					var out json.RawMessage
					t0 := time.Now()
					if err := c.Call(ctx, http.MethodGet, c.API+route.path, header, nil, &out); err != nil {
						return fmt.Errorf("%s (GET %s): %w", route.name, route.path, err)
					}
					block = append(block, time.Since(t0))
				}
				times[i] = append(times[i], block...)
				s.f.RouteBlocksMS[route.name] = append(s.f.RouteBlocksMS[route.name], trimmedMeanMS(block))
			}
		}
		for i, s := range sides {
			s.f.RoutesMS[routes[i][r].name] = trimmedMeanMS(times[i])
		}
	}
	// Scrapes a little more than a snapshot apart on each, so that each gathers: thirty,
	// as nine left the figure to a couple of scrapes the machine delayed (a ratio of 1.2
	// on SQLite in one run, 0.93 for the control).
	scrapes := make([][]time.Duration, len(sides))
	for range historyScrapes {
		for i, s := range sides {
			t0 := time.Now()
			if _, err := metricSamples(ctx, s.e.server.MetricsURL()); err != nil {
				return err
			}
			scrapes[i] = append(scrapes[i], time.Since(t0))
		}
		sleepCtx(ctx, 1100*time.Millisecond)
	}
	for i, s := range sides {
		s.f.ScrapeMS = trimmedMeanMS(slices.Clone(scrapes[i]))
		for _, d := range scrapes[i] {
			s.f.ScrapesMS = append(s.f.ScrapesMS, round3(float64(d.Microseconds())/1000))
		}
		t0 := time.Now()
		if _, err := s.e.store.Retain(ctx, time.Now(), orderpay.DefaultRetention); err != nil {
			return err
		}
		s.f.RetentionMS = round3(float64(time.Since(t0).Microseconds()) / 1000)
		// Today's bill is out tomorrow morning: the channel's clock moves there for the
		// call and back after it.
		day := orderpay.BillDay(time.Now())
		start, _, _ := orderpay.BillDayRange(day)
		s.e.simClock.jumpTo(start.AddDate(0, 0, 1).Add(10*time.Hour + 30*time.Minute))
		t0 = time.Now()
		_, err := s.e.client.Reconcile(ctx, orderpay.ChannelAlipay, day)
		s.f.ReconcileMS = round3(float64(time.Since(t0).Microseconds()) / 1000)
		s.e.simClock.jumpTo(time.Now())
		if err != nil {
			return fmt.Errorf("reconciliation: %w", err)
		}
	}
	return nil
}

// metricSamples reads the server's /metrics page and returns its samples by name and
// labels ("name{a=b}").
func metricSamples(ctx context.Context, metricsURL string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	out := map[string]float64{}
	for _, line := range strings.Split(sb.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// workerPasses is, by worker, how many passes so far took at most each bucket's bound
// (seconds), from the histogram orderpay_worker_pass_seconds at /metrics.
func workerPasses(ctx context.Context, metricsURL string) (map[string]map[float64]float64, error) {
	m, err := metricSamples(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	out := map[string]map[float64]float64{}
	for k, v := range m {
		labels, ok := strings.CutPrefix(k, "orderpay_worker_pass_seconds_bucket{")
		if !ok {
			continue
		}
		var worker, le string
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), `",`) {
			name, value, _ := strings.Cut(kv, "=")
			value = strings.Trim(value, `"`)
			switch name {
			case "worker":
				worker = value
			case "le":
				le = value
			}
		}
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil || worker == "" {
			continue
		}
		if out[worker] == nil {
			out[worker] = map[float64]float64{}
		}
		out[worker][bound] = v
	}
	return out, nil
}

// historyFastest is the share of the fastest samples a figure is the mean of: the slowest
// tenth, a pass the scheduler or the collector delayed, would move a mean, and a median
// flips between the two modes a pass often has (its database page in cache or not).
const historyFastest = 0.9

// passMeans is each worker's mean pass in ms between two readings of workerPasses, of the
// fastest historyFastest of the passes, each bucket's passes taken at its middle (the
// buckets are 5 µs apart where most passes fall).
func passMeans(before, after map[string]map[float64]float64) map[string]float64 {
	out := map[string]float64{}
	for name, a := range after {
		bounds := make([]float64, 0, len(a))
		for b := range a {
			bounds = append(bounds, b)
		}
		sort.Float64s(bounds)
		total := a[math.Inf(1)] - before[name][math.Inf(1)]
		if total <= 0 {
			continue
		}
		want := total * historyFastest
		var taken, sum, prevBound, prevCount float64
		for _, b := range bounds {
			count := a[b] - before[name][b]
			in := math.Min(count-prevCount, want-taken)
			if math.IsInf(b, 1) {
				b = prevBound
			}
			if in > 0 {
				sum += in * (prevBound + b) / 2
				taken += in
			}
			if taken >= want {
				break
			}
			prevBound, prevCount = b, count
		}
		out[name] = round3(sum / taken * 1000)
	}
	return out
}

// trimmedMeanMS is the mean of the fastest historyFastest of ds, in milliseconds to the
// microsecond.
func trimmedMeanMS(ds []time.Duration) float64 {
	slices.Sort(ds)
	keep := ds[:max(1, int(float64(len(ds))*historyFastest))]
	var sum time.Duration
	for _, d := range keep {
		sum += d
	}
	return round3(float64((sum / time.Duration(len(keep))).Microseconds()) / 1000)
}

// pairedRatio is the median over i of shop[i] / control[i]: each pair measured one right
// after the other, so that a slow moment of the machine moves one pair, not the figure. 0
// if there are none.
func pairedRatio(shop, control []float64) float64 {
	var rs []float64
	for i := range min(len(shop), len(control)) {
		if shop[i] > 0 && control[i] > 0 {
			rs = append(rs, shop[i]/control[i])
		}
	}
	return medianOf(rs)
}

// medianOf is the median of vs (the mean of the middle two of an even count), 0 of none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// HistoryReport is `bench --history`: the same figures on the empty database and with the
// past orders, and each ratio, big ÷ empty.
type HistoryReport struct {
	Prefill *HistoryPrefill `json:"prefill"`
	// Empty and Big are the shop's figures before and after its prefill.
	Empty HistoryRound `json:"empty"`
	Big   HistoryRound `json:"big"`
	// Ratios is by figure the shop's after ÷ before over the control's (benchHistory; the
	// CPU per order, the pay path's p99, the routes and the scrape paired, pairedRatio);
	// Control the control's own after ÷ before. Bounded are the figures the shop's age must
	// not move (at most HistoryRatioMax each): CPU per order, the pay path's p99, each read
	// route, a scrape and each worker's pass.
	Ratios  map[string]float64 `json:"ratios"`
	Control map[string]float64 `json:"control_ratios"`
	Bounded []string           `json:"bounded"`
	// Worst is the bounded figure with the largest ratio.
	Worst      string  `json:"worst"`
	WorstRatio float64 `json:"worst_ratio"`
}

// HistoryRatioMax is the most a bounded figure may grow with the history.
const HistoryRatioMax = 1.1

// HistoryRound is one database's figures.
type HistoryRound struct {
	ServerCPUPerPaidOrderMS float64 `json:"server_cpu_ms_per_paid_order"` // the mean of the rounds'
	// ServerCPURoundsMS is each round's server CPU per paid order, in the order run.
	ServerCPURoundsMS []float64 `json:"server_cpu_ms_per_paid_order_rounds"`
	RSAPerPaidOrderMS float64   `json:"rsa_cpu_ms_per_paid_order"`
	PaidLatencyP99MS  float64   `json:"paid_latency_p99_ms"` // the median of the rounds'
	// PaidLatencyP99RoundsMS is each round's p99, in the order run.
	PaidLatencyP99RoundsMS []float64 `json:"paid_latency_p99_rounds_ms"`
	OrdersPerSecond        float64   `json:"orders_per_second"`
	HistoryFigures
}

// historySweep is the servers' --sweep-interval with --history (1 s by default; 20 ms is
// its least), so that historyQuiet holds a couple of thousand passes of each sweeper.
const (
	historySweep = 20 * time.Millisecond
	historyQuiet = 45 * time.Second
)

// historyRounds is how many times the phases run on each server in a block, alternating,
// with Orders orders each. The pay path's p99 is each round's, and its figure the median of
// the rounds' (a round the machine stalled in moves it little); its ratio is paired round
// by round (pairedRatio).
const historyRounds = 4

// benchHistory runs two servers, the control and the shop, on empty databases. Both take
// the same recent orders (runHistoryTemplates); then a block of measurements runs on both,
// alternating between them: the phases, every read route, a scrape, the workers' passes
// over a quiet while, a retention pass and a reconciliation. The shop is then given
// cfg.History past orders (prefillHistory) and the block runs again.
//
// A figure's ratio is the shop's after ÷ before, over the control's after ÷ before: the
// shop against itself, so that what differs between two processes (where the kernel put
// them, what their caches hold) cancels, and against the control, so that the machine
// being slower or faster in the second block cancels too. What is measured in pairs (the
// rounds' CPU per order and p99, the routes' blocks, the scrapes) is compared pair by
// pair: the median of the shop's over the control's, after over before, so that a moment
// the machine stalled moves one pair and not the figure. HistoryReport.Control is the
// control's own ratio (1 on a steady machine). rep keeps the shop's phases of the first
// block.
func benchHistory(ctx context.Context, cfg BenchConfig, way PayWay, rep *BenchReport, serverArgs []string) error {
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	h := &HistoryReport{Ratios: map[string]float64{}, Control: map[string]float64{}}
	serverArgs = append(serverArgs, "--sweep-interval", historySweep.String())
	var sides [2]*benchEnv // the control, the shop
	for i := range sides {
		args := serverArgs
		var pprof string
		if cfg.Profile != "" {
			// Each server profiles on its own address (the later --pprof is the one taken).
			var err error
			if pprof, err = freeAddr(); err != nil {
				return err
			}
			args = append(slices.Clip(serverArgs), "--pprof", pprof)
		}
		b, err := startBenchEnv(ctx, cfg, way, args)
		if err != nil {
			return err
		}
		defer b.e.close()
		b.pprof = pprof
		sides[i] = b
	}
	rep.Store = sides[0].e.store.Dialect()
	var templates [2][]historyTemplate
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, b := range sides {
		wg.Go(func() { templates[i], errs[i] = runHistoryTemplates(ctx, b.e, way, progress) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	before, err := historyBlock(ctx, cfg, *rep, sides, "before", progress)
	if err != nil {
		return err
	}
	*rep = *before[1].phases
	if h.Prefill, err = prefillHistory(ctx, sides[1].e, templates[1], cfg.History, progress); err != nil {
		return err
	}
	progress(fmt.Sprintf("history: %d past orders in %.0f s, %.0f bytes each", cfg.History, h.Prefill.Seconds, h.Prefill.BytesPerOrder))
	after, err := historyBlock(ctx, cfg, *rep, sides, "after", progress)
	if err != nil {
		return err
	}
	h.Empty, h.Big = before[1].HistoryRound, after[1].HistoryRound
	rep.History = h
	ratio := func(name string, shopAfter, shopBefore, ctlAfter, ctlBefore float64, bounded bool) {
		if shopBefore <= 0 || ctlBefore <= 0 || ctlAfter <= 0 {
			return
		}
		control := ctlAfter / ctlBefore
		r := round3(shopAfter / shopBefore / control)
		h.Ratios[name], h.Control[name] = r, round3(control)
		if bounded {
			h.Bounded = append(h.Bounded, name)
			if r > h.WorstRatio {
				h.Worst, h.WorstRatio = name, r
			}
		}
	}
	c0, c1, s0, s1 := before[0].HistoryRound, after[0].HistoryRound, before[1].HistoryRound, after[1].HistoryRound
	// The bounded figures measured in pairs, paired: each the median over the rounds (route
	// blocks, scrapes) of the shop's over the control's next to it, after over before.
	// Control is still the control's own figure after over before.
	paired := func(name string, shop0, ctl0, shop1, ctl1 []float64, ctlBefore, ctlAfter float64) {
		before, after := pairedRatio(shop0, ctl0), pairedRatio(shop1, ctl1)
		if before <= 0 || after <= 0 || ctlBefore <= 0 {
			return
		}
		r := round3(after / before)
		h.Ratios[name], h.Control[name] = r, round3(ctlAfter/ctlBefore)
		h.Bounded = append(h.Bounded, name)
		if r > h.WorstRatio {
			h.Worst, h.WorstRatio = name, r
		}
	}
	paired("server CPU per paid order", s0.ServerCPURoundsMS, c0.ServerCPURoundsMS, s1.ServerCPURoundsMS, c1.ServerCPURoundsMS,
		c0.ServerCPUPerPaidOrderMS, c1.ServerCPUPerPaidOrderMS)
	paired("pay path p99", s0.PaidLatencyP99RoundsMS, c0.PaidLatencyP99RoundsMS, s1.PaidLatencyP99RoundsMS, c1.PaidLatencyP99RoundsMS,
		c0.PaidLatencyP99MS, c1.PaidLatencyP99MS)
	ratio("paid orders per second", s1.OrdersPerSecond, s0.OrdersPerSecond, c1.OrdersPerSecond, c0.OrdersPerSecond, false)
	ratio("RSA floor", s1.RSAPerPaidOrderMS, s0.RSAPerPaidOrderMS, c1.RSAPerPaidOrderMS, c0.RSAPerPaidOrderMS, false)
	for name := range s1.RoutesMS {
		paired(name, s0.RouteBlocksMS[name], c0.RouteBlocksMS[name], s1.RouteBlocksMS[name], c1.RouteBlocksMS[name], c0.RoutesMS[name], c1.RoutesMS[name])
	}
	paired("scrape", s0.ScrapesMS, c0.ScrapesMS, s1.ScrapesMS, c1.ScrapesMS, c0.ScrapeMS, c1.ScrapeMS)
	ratio("sweeper pass, server CPU", s1.SweeperPassCPUUS, s0.SweeperPassCPUUS, c1.SweeperPassCPUUS, c0.SweeperPassCPUUS, true)
	for name, v := range s1.PassesMS {
		ratio("pass: "+name, v, s0.PassesMS[name], c1.PassesMS[name], c0.PassesMS[name], false)
	}
	ratio("retention pass", s1.RetentionMS, s0.RetentionMS, c1.RetentionMS, c0.RetentionMS, false)
	ratio("reconciliation", s1.ReconcileMS, s0.ReconcileMS, c1.ReconcileMS, c0.ReconcileMS, false)
	sort.Strings(h.Bounded)
	return nil
}

// historySide is one server's figures of one block, with its last phases' report.
type historySide struct {
	HistoryRound
	phases *BenchReport
}

// historyBlock measures both servers, alternating: the phases historyRounds times, the
// reads, and the workers' passes over a quiet while.
func historyBlock(ctx context.Context, cfg BenchConfig, base BenchReport, sides [2]*benchEnv, block string, progress func(string)) ([2]*historySide, error) {
	out := [2]*historySide{{}, {}}
	for r := range historyRounds {
		for i, b := range sides {
			one := base
			side := cfg
			if cfg.Profile != "" {
				// A profile of each server's throughput phase in each round: PATH.before0.shop, …
				side.pprofAddr = b.pprof
				side.Profile = fmt.Sprintf("%s.%s%d.%s", cfg.Profile, block, r, []string{"control", "shop"}[i])
			}
			if err := benchPhases(ctx, b.e, side, &one, b.buy, &b.reads, fmt.Sprintf("%s%d-", block, r)); err != nil {
				return out, err
			}
			o := out[i]
			o.ServerCPUPerPaidOrderMS += one.ServerCPUPerPaidOrderMS / historyRounds
			o.ServerCPURoundsMS = append(o.ServerCPURoundsMS, one.ServerCPUPerPaidOrderMS)
			o.RSAPerPaidOrderMS += one.RSAPerPaidOrderMS / historyRounds
			o.OrdersPerSecond += one.OrdersPerSecond / historyRounds
			o.PaidLatencyP99RoundsMS = append(o.PaidLatencyP99RoundsMS, one.PaidLatencyP99MS)
			o.phases = &one
			progress(fmt.Sprintf("history: %s, round %d, the %s: %.2f ms CPU per order, p99 %.1f ms",
				block, r+1, []string{"control", "shop"}[i], one.ServerCPUPerPaidOrderMS, one.PaidLatencyP99MS))
		}
	}
	readers := make([]*historyReader, 2)
	for i, b := range sides {
		buyer := fmt.Sprintf("%s%d-throughput-buyer-%d", block, historyRounds-1, cfg.Orders)
		readers[i] = &historyReader{e: b.e, buyer: buyer}
		if err := b.e.store.DB().QueryRowContext(ctx, b.e.store.Rebind(`SELECT order_no FROM orders WHERE buyer_id = ?`), buyer).
			Scan(&readers[i].order); err != nil {
			return out, fmt.Errorf("bench: %s's order: %w", buyer, err)
		}
	}
	if err := measureHistoryReads(ctx, readers...); err != nil {
		return out, fmt.Errorf("bench: reads: %w", err)
	}
	// The workers' passes over a quiet while, both servers idle: what a pass costs when
	// it finds nothing to do, which is what a scan of the history would make grow.
	// Each pass takes tens of microseconds, near what the clock and the scheduler blur;
	// the server's CPU over the while, over every pass of every worker, is the figure a
	// sweeper pass is bounded by (at --sweep-interval 20ms, thousands of passes).
	var before [2]map[string]map[float64]float64
	var cpuBefore [2]time.Duration
	for i, b := range sides {
		var err error
		if before[i], err = workerPasses(ctx, b.e.server.MetricsURL()); err != nil {
			return out, err
		}
		if cpuBefore[i], err = ProcessCPU(b.e.server.PID()); err != nil {
			return out, err
		}
	}
	progress(fmt.Sprintf("history: %s: the workers' passes over %s of quiet", block, historyQuiet))
	sleepCtx(ctx, historyQuiet)
	for i, b := range sides {
		cpu, err := ProcessCPU(b.e.server.PID())
		if err != nil {
			return out, err
		}
		after, err := workerPasses(ctx, b.e.server.MetricsURL())
		if err != nil {
			return out, err
		}
		readers[i].f.PassesMS = passMeans(before[i], after)
		var passes float64
		for name, a := range after {
			passes += a[math.Inf(1)] - before[i][name][math.Inf(1)]
		}
		if passes > 0 {
			readers[i].f.SweeperPassCPUUS = round3(float64((cpu - cpuBefore[i]).Nanoseconds()) / 1000 / passes)
		}
		o := out[i]
		o.HistoryFigures = *readers[i].f
		o.ServerCPUPerPaidOrderMS, o.RSAPerPaidOrderMS = round3(o.ServerCPUPerPaidOrderMS), round3(o.RSAPerPaidOrderMS)
		o.OrdersPerSecond = round1(o.OrdersPerSecond)
		o.PaidLatencyP99MS = round3(medianOf(o.PaidLatencyP99RoundsMS))
	}
	return out, nil
}

// printHistory writes the history half of a bench report.
func printHistory(w io.Writer, h *HistoryReport) {
	p := h.Prefill
	fmt.Fprintf(w, "history: %d past orders prefilled in %.1f s, %.0f bytes per order (tables and indexes, after retention)\n",
		p.Orders, p.Seconds, p.BytesPerOrder)
	tables := make([]string, 0, len(p.TableBytesPerOrder))
	for t := range p.TableBytesPerOrder {
		tables = append(tables, t)
	}
	sort.Slice(tables, func(i, j int) bool { return p.TableBytesPerOrder[tables[i]] > p.TableBytesPerOrder[tables[j]] })
	for _, t := range tables {
		fmt.Fprintf(w, "  %-24s %8.0f bytes per order, %d rows\n", t, p.TableBytesPerOrder[t], p.Rows[t])
	}
	fmt.Fprintf(w, "the shop's figures before and after its history; ratio = its after ÷ before over the control server's (shown)\n")
	fmt.Fprintf(w, "%-44s %12s %12s %8s %8s\n", "figure", "before", "after", "control", "ratio")
	line := func(name string, a, b float64, unit string) {
		mark := ""
		if slices.Contains(h.Bounded, name) && h.Ratios[name] > HistoryRatioMax {
			mark = "  over " + fmt.Sprint(HistoryRatioMax)
		}
		fmt.Fprintf(w, "%-44s %10.3f%-2s %10.3f%-2s %8.3f %8.3f%s\n", name, a, unit, b, unit, h.Control[name], h.Ratios[name], mark)
	}
	line("server CPU per paid order", h.Empty.ServerCPUPerPaidOrderMS, h.Big.ServerCPUPerPaidOrderMS, "ms")
	line("RSA floor", h.Empty.RSAPerPaidOrderMS, h.Big.RSAPerPaidOrderMS, "ms")
	line("pay path p99", h.Empty.PaidLatencyP99MS, h.Big.PaidLatencyP99MS, "ms")
	line("paid orders per second", h.Empty.OrdersPerSecond, h.Big.OrdersPerSecond, "")
	for _, r := range historyRoutes("", "") {
		line(r.name, h.Empty.RoutesMS[r.name], h.Big.RoutesMS[r.name], "ms")
	}
	line("scrape", h.Empty.ScrapeMS, h.Big.ScrapeMS, "ms")
	line("sweeper pass, server CPU", h.Empty.SweeperPassCPUUS, h.Big.SweeperPassCPUUS, "µs")
	var workers []string
	for name := range h.Big.PassesMS {
		workers = append(workers, name)
	}
	sort.Strings(workers)
	for _, name := range workers {
		line("pass: "+name, h.Empty.PassesMS[name], h.Big.PassesMS[name], "ms")
	}
	line("retention pass", h.Empty.RetentionMS, h.Big.RetentionMS, "ms")
	line("reconciliation", h.Empty.ReconcileMS, h.Big.ReconcileMS, "ms")
	fmt.Fprintf(w, "worst bounded ratio: %.3f (%s)\n", h.WorstRatio, h.Worst)
}

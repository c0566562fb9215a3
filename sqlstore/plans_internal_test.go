package sqlstore

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"orderpay"
)

// planFixtureOrders is how many past orders the plan test's fixture holds: enough that
// either planner reads a table from end to end only if it has no better way.
const planFixtureOrders = 20000

// planFixtureBase is when the fixture's first order was placed (2025-01-01), in ms; one
// came every 25 minutes after it, up to planFixtureEnd.
const (
	planFixtureBase = int64(1735660800000)
	planFixtureEnd  = planFixtureBase + planFixtureOrders*1500000
)

// A planned statement: one that serves a page or runs on a schedule over a table that grows
// with the history. Its plan must reach its rows through index, and read no table whole.
type plannedStatement struct {
	name  string
	query string
	args  []any
	// index is the index the plan must use (a regular expression of their names: one of
	// them), per engine ("" for both: the same).
	index, sqliteIndex, postgresIndex string
	// walk allows a walk of the index in its order (SQLite's SCAN … USING INDEX): the
	// statement stops at its LIMIT, or the index holds only the rows it is for (a partial one).
	walk bool
	// small are tables the statement may read whole: a few rows whatever the history.
	small []string
	// sortsOpen allows a sort of all the rows the index found: the open ones of a partial
	// index (orders awaiting payment), not the history.
	sortsOpen bool
	// custom: PostgreSQL plans the statement for its arguments each time, and that plan is
	// the one checked, for the args given. Its generic plan expects a third of the table
	// in any window and costs more than the custom plan of a day's window, so a prepared
	// statement never comes to it.
	custom bool
}

// plannedStatements are the statements the plan test checks, each the very text the store
// runs (constants and builders shared with the code).
func plannedStatements(d *dialect) []plannedStatement {
	const limit = 50
	orders := func(f orderpay.OrderFilter) (string, []any) {
		q, args, ok := d.ordersQuery(f, limit)
		if !ok {
			panic(fmt.Sprintf("no query for %+v", f))
		}
		return q, args
	}
	var out []plannedStatement
	add := func(st plannedStatement) { out = append(out, st) }
	// By any status but the open one, rare (PAID, SHIPPED: 2 % of the fixture's orders each)
	// or common (most end COMPLETED or CANCELLED): on orders_by_status. A walk of the newest
	// orders instead would pass every newer order of other statuses, which is the history
	// when the status is rare and, when it is common, as many as a busy day has made (the
	// orders just paid, not yet shipped).
	for _, status := range []orderpay.OrderStatus{orderpay.OrderPaid, orderpay.OrderShipped, orderpay.OrderReceived,
		orderpay.OrderRefunded, orderpay.OrderCompleted, orderpay.OrderCancelled} {
		q, args := orders(orderpay.OrderFilter{Status: status})
		add(plannedStatement{name: "console search by status " + string(status), query: q, args: args, index: "orders_by_status"})
	}
	q, args := orders(orderpay.OrderFilter{Status: orderpay.OrderPendingPayment})
	add(plannedStatement{name: "console search by status PENDING_PAYMENT", query: q, args: args,
		index: "orders_pending_by_deadline|orders_unpaid_by_buyer", walk: true, sortsOpen: true})
	q, args = orders(orderpay.OrderFilter{NoPrefix: "2025"})
	add(plannedStatement{name: "console search by order-number prefix", query: q, args: args,
		sqliteIndex: "sqlite_autoindex_orders_1", postgresIndex: "orders_by_no_bytes"})
	q, args = orders(orderpay.OrderFilter{NoPrefix: "20250101000000000007"})
	add(plannedStatement{name: "console search by a whole order number", query: q, args: args,
		sqliteIndex: "sqlite_autoindex_orders_1", postgresIndex: "orders_pkey"})
	q, args = orders(orderpay.OrderFilter{BuyerID: "b7"})
	add(plannedStatement{name: "console search by buyer, and the buyer's order list", query: q, args: args, index: "orders_by_buyer"})
	q, args = orders(orderpay.OrderFilter{})
	add(plannedStatement{name: "console list, newest first", query: q, args: args, index: "orders_by_created", walk: true})
	for _, st := range []plannedStatement{
		{name: "timeout close: due orders", query: dueOrdersQuery, args: []any{int64(1), limit}, index: "orders_pending_by_deadline"},
		{name: "payment close: due payments", query: duePaymentsQuery, args: []any{int64(1), limit}, index: "payments_open_by_deadline"},
		{name: "paying attempts", query: payingChannelOrdersQuery, args: []any{int64(1), limit}, index: "channel_orders_paying_by_age"},
		{name: "refunds due", query: dueChannelRefundsQuery, args: []any{int64(1), int64(1), limit}, index: "refunds_due"},
		{name: "refunds needing action", query: refundsNeedingActionQuery, args: []any{limit}, index: "refunds_needing_action", walk: true},
		{name: "pending queries due", query: duePendingQueriesQuery, args: []any{int64(1), limit}, index: "pending_queries_due"},
		{name: "stock holds due", query: dueStockHoldsQuery, args: []any{int64(1), limit}, index: "stock_holds_due"},
		{name: "receipt auto-confirm: shipments due", query: dueShipmentsQuery, args: []any{int64(1), limit}, index: "shipments_receive_due"},
		{name: "webhook deliveries due", query: dueDeliveriesQuery(0), args: []any{int64(1), limit}, index: "webhook_deliveries_due"},
		// PostgreSQL may sort the due deliveries it found (those still PENDING, not the history).
		{name: "webhook deliveries due, two subscribers skipped", query: dueDeliveriesQuery(2), args: []any{int64(1), "s1", "s2", limit},
			index: "webhook_deliveries_due", sortsOpen: true},
		{name: "app payments due", query: dueAppPaymentsQuery, args: []any{int64(1), limit}, index: "app_payments_due"},
		{name: "tickets: serving a queued SKU", query: waitingTicketsQuery, args: []any{"tea", int64(1) << 62, limit}, index: "tickets_waiting"},
		{name: "tickets: queued SKUs' expiry", query: queuedSKUsQuery, index: "tickets_waiting", walk: true},
		{name: "tickets: a buyer's ticket of a key", query: `SELECT ` + ticketColumns + ` FROM tickets WHERE ` + ticketByKeyWhere, args: []any{"b", "k"}, index: "tickets_key"},
		{name: "tickets: a buyer's live ticket of a SKU", query: `SELECT ` + ticketColumns + ` FROM tickets WHERE ` + liveTicketWhere, args: []any{"b", "tea"}, index: "tickets_live"},
		{name: "relay: unpublished outbox", query: unpublishedMessagesQuery, args: []any{limit}, index: "outbox_unpublished", walk: true},
		{name: "status-count scrape", query: statusCountsQuery, small: []string{"status_counts", "status_count_deltas", "c"}},
		{name: "scrape: attempts' safety net", query: scrapePendingQuery, small: []string{"pending_queries"}},
		{name: "scrape: unpublished outbox", query: scrapeOutboxQuery, index: "outbox_unpublished", walk: true},
		{name: "scrape: refunds in flight", query: scrapeRefundsInFlightQuery, index: "refunds_due", walk: true},
		{name: "scrape: refunds needing action", query: scrapeRefundsNeedingActionQuery, index: "refunds_needing_action", walk: true},
		{name: "console after-sales queue, waiting for review", query: afterSalesSelect + afterSalesQueueWhere(orderpay.AfterSaleRequested), args: []any{limit},
			index: "after_sales_by_status|after_sales_open", sortsOpen: true}, // the open requests' partial index, sorted: the few open ones
		{name: "console after-sales queue, refunded", query: afterSalesSelect + afterSalesQueueWhere(orderpay.AfterSaleSucceeded), args: []any{limit},
			index: "after_sales_by_status"},
		// A kind's latest running total and its latest before the window, each one row of
		// chart_totals' key (kind, hour) from its end; the deltas not folded yet are a few
		// rows whatever the history.
		{name: "console charts: running totals", query: chartTotalsQuery,
			args:  []any{chartNotification, chartNotification, planFixtureEnd/msPerHour - 24, planFixtureEnd/msPerHour - 24, chartNotification},
			index: "chart_totals_pkey|sqlite_autoindex_chart_totals_1", small: []string{"chart_count_deltas", "l", "b"}},
		// Each reason's newest on the index; the merge reads and sorts those (r0, r1), at
		// most a page each.
		{name: "console refunds by two reasons", query: refundsByReasonQuery(2, limit), args: []any{"late", "duplicate"},
			index: "refunds_by_reason", small: []string{"r0", "r1"}, sortsOpen: true},
	} {
		add(st)
	}
	retentionIndexes := map[string]string{
		"notification log": "notification_log_by_time", "query log": "query_log_by_time", "webhook attempts": "webhook_attempts_by_time",
		"webhook bodies": "webhook_deliveries_with_body", "published outbox": "outbox_published", "stock holds": "stock_holds_ended",
		"request keys": "request_keys_expiry", "tickets": "tickets_ended", "raw bodies": "history_raw_by_time",
		"chart counts": "chart_totals_pkey|sqlite_autoindex_chart_totals_1",
	}
	for what, index := range retentionIndexes {
		stmt, ok := retentionStatements(d)[what]
		if !ok {
			panic("no retention statement for " + what)
		}
		// The charts' totals are a table ninety days long at most, whose generic plan would
		// read from its start (where the oldest hours are): planned for its cut-off, as
		// its custom plan.
		args := []any{retentionBatch} // after the time, at each other placeholder (retainOnce)
		for range strings.Count(stmt, "?") - 1 {
			args = append([]any{int64(1)}, args...)
		}
		add(plannedStatement{name: "retention: " + what, query: stmt, args: args, index: index, custom: what == "chart counts"})
	}
	if len(retentionStatements(d)) != len(retentionIndexes) {
		panic("a retention statement is not planned")
	}
	return out
}

// expected is the index st's plan must use on d.
func (st plannedStatement) expected(d *dialect) string {
	switch {
	case d == postgresDialect && st.postgresIndex != "":
		return st.postgresIndex
	case d != postgresDialect && st.sqliteIndex != "":
		return st.sqliteIndex
	}
	return st.index
}

var (
	// SQLite: "SCAN orders" reads the table; "SCAN orders USING INDEX x" walks all of x.
	sqliteScan = regexp.MustCompile(`^SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?`)
	// PostgreSQL: a Seq Scan reads the table.
	postgresSeqScan = regexp.MustCompile(`Seq Scan on (\w+)`)
)

// planProblems is what is wrong with plan, the plan of st on d: empty when it reaches its
// rows through the expected index and reads no table whole.
func planProblems(d *dialect, st plannedStatement, plan string) []string {
	var out []string
	small := func(table string) bool {
		for _, s := range st.small {
			if s == table {
				return true
			}
		}
		return false
	}
	index := st.expected(d)
	for _, line := range strings.Split(plan, "\n") {
		if d == postgresDialect {
			if m := postgresSeqScan.FindStringSubmatch(line); m != nil && !small(m[1]) {
				out = append(out, "reads table "+m[1]+" whole (Seq Scan)")
			}
			// A full sort of what an index found: every match is read before the LIMIT.
			if strings.Contains(line, "Sort") && !strings.Contains(line, "Incremental Sort") && !strings.Contains(line, "Sort Key") &&
				!st.sortsOpen && st.small == nil {
				out = append(out, "sorts all its matches: "+strings.TrimSpace(line))
			}
			continue
		}
		if m := sqliteScan.FindStringSubmatch(line); m != nil && !small(m[1]) {
			switch {
			case m[2] == "":
				out = append(out, "reads table "+m[1]+" whole ("+line+")")
			case !st.walk || !regexp.MustCompile(`^(?:`+index+`)$`).MatchString(m[2]):
				out = append(out, "walks all of index "+m[2]+" ("+line+")")
			}
		}
		if strings.Contains(line, "USE TEMP B-TREE FOR ORDER BY") && !st.sortsOpen {
			out = append(out, "sorts all its matches ("+line+")")
		}
	}
	if index != "" && !regexp.MustCompile(`\b(?:`+index+`)\b`).MatchString(plan) {
		out = append(out, "does not use index "+index)
	}
	return out
}

// checkPlans is the failures of the statements' plans on s, each naming its statement, with
// its SQL and plan.
func checkPlans(t *testing.T, s *Store, sts []plannedStatement) []string {
	t.Helper()
	var failures []string
	for _, st := range sts {
		plan := planOf(t, s, st.custom, st.query, st.args...)
		if problems := planProblems(s.d, st, plan); len(problems) > 0 {
			failures = append(failures, fmt.Sprintf("%s: the plan %s\nSQL: %s\nplan:\n%s",
				st.name, strings.Join(problems, "; "), strings.Join(strings.Fields(st.query), " "), plan))
			continue
		}
		t.Logf("%s:\n%s", st.name, plan)
	}
	return failures
}

// Every statement that serves a page or runs on a schedule over a table that grows with
// the history is bounded by what it returns: on a fixture of a year of orders,
// in realistic final states, its plan reads no table whole and uses its index, on both
// engines (PostgreSQL's generic plan, which a prepared statement comes to, included).
// Then, without orders_by_status, the test fails, naming the status search, its SQL and
// its plan: the check is not one that passes whatever the plan.
//
// ORDERPAY_TEST_PLAN_DROP_INDEX=<index> drops that index first, to see the test fail
// naming the statements that needed it.
func TestStatementPlansAreBounded(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, engine)
			fillPlanFixture(t, s, planFixtureOrders)
			if name := os.Getenv("ORDERPAY_TEST_PLAN_DROP_INDEX"); name != "" {
				planExec(t, s, `DROP INDEX `+name)
			}
			check := func(stage string) {
				for _, f := range checkPlans(t, s, plannedStatements(s.d)) {
					t.Errorf("%s%s", stage, f)
				}
			}
			if engine == "sqlite" {
				// As the server runs: it never runs ANALYZE.
				check("without statistics: ")
			}
			planExec(t, s, `ANALYZE`)
			check("")

			t.Run("without orders_by_status", func(t *testing.T) {
				if os.Getenv("ORDERPAY_TEST_PLAN_DROP_INDEX") == "orders_by_status" {
					t.Skip("dropped already")
				}
				planExec(t, s, `DROP INDEX orders_by_status`) // the statistics stay: those of the table and the other indexes
				var status []plannedStatement
				for _, st := range plannedStatements(s.d) {
					if st.name == "console search by status PAID" {
						status = append(status, st)
					}
				}
				if len(status) != 1 {
					t.Fatalf("no statement named console search by status PAID")
				}
				failures := checkPlans(t, s, status)
				if len(failures) != 1 || !strings.HasPrefix(failures[0], "console search by status PAID: the plan ") ||
					!strings.Contains(failures[0], "does not use index orders_by_status") ||
					!strings.Contains(failures[0], "SQL: "+strings.Join(strings.Fields(status[0].query), " ")) {
					t.Fatalf("without orders_by_status, the failures are %q", failures)
				}
				t.Logf("without orders_by_status, as expected:\n%s", failures[0])
			})
		})
	}
}

// queryPlan is the engine's plan of query with args: SQLite's EXPLAIN QUERY PLAN, or
// PostgreSQL's generic plan of the PREPAREd statement (the plan a statement the store
// prepares comes to after a few runs, whatever its arguments).
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	return planOf(t, s, false, query, args...)
}

// planOf is queryPlan, or with custom PostgreSQL's plan of the statement for args.
func planOf(t *testing.T, s *Store, custom bool, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var lines []string
	run := func(q string, args ...any) {
		rows, err := conn.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			for i := range vals {
				vals[i] = new(any)
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			// The plan's text is the last column on both engines (SQLite's detail, PostgreSQL's line).
			lines = append(lines, strings.TrimRight(fmtAny(*(vals[len(vals)-1].(*any))), " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if s.d != postgresDialect {
		run(`EXPLAIN QUERY PLAN `+query, args...)
		for i, l := range lines {
			lines[i] = strings.TrimSpace(l)
		}
		return strings.Join(lines, "\n")
	}
	exec := func(q string) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if custom {
		exec(`SET plan_cache_mode = force_custom_plan`)
	} else {
		exec(`SET plan_cache_mode = force_generic_plan`)
	}
	defer exec(`RESET plan_cache_mode`)
	exec(`PREPARE planned AS ` + s.Rebind(query))
	defer exec(`DEALLOCATE planned`)
	explain := `EXPLAIN EXECUTE planned`
	if len(args) > 0 {
		literals := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				literals[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			default:
				literals[i] = fmt.Sprint(v)
			}
		}
		explain += `(` + strings.Join(literals, ", ") + `)`
	}
	run(explain)
	return strings.Join(lines, "\n")
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	}
	return ""
}

func planExec(t *testing.T, s *Store, stmt string, args ...any) {
	t.Helper()
	if _, err := s.db.ExecContext(context.Background(), s.Rebind(stmt), args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// fillPlanFixture stores n past orders over a year, in a realistic mix of final states
// (a few still open), with their payments, attempts, refunds, shipments, stock holds,
// webhooks, tickets, outbox messages and logs, written a table at a time by INSERT … SELECT
// from a series, the same SQL on both engines; and folds the status counts they made.
func fillPlanFixture(t *testing.T, s *Store, n int) {
	t.Helper()
	const base = planFixtureBase
	// Row i of the series, 1…n: an order placed at base + i × 25 minutes, numbered by its
	// day (yyyyMMdd, a year's days mapped to months of 31) and i.
	series := fmt.Sprintf(`WITH RECURSIVE series (i) AS (SELECT CAST(1 AS BIGINT) UNION ALL SELECT i + 1 FROM series WHERE i < %d) `, n)
	at := fmt.Sprintf(`(%d + i * 1500000)`, base)
	day := fmt.Sprintf(`((i - 1) * 365 / %d)`, n)
	no := `CAST(20250000 + (1 + ` + day + ` / 31) * 100 + 1 + ` + day + ` % 31 AS TEXT) || CAST(100000000000 + i AS TEXT)`
	stmts := []string{
		`INSERT INTO skus (sku, merchant_id, title, price, product_type, stock_policy, created_at) VALUES ('tea', 'm1', 'Tea', 100, 'NORMAL', 'AT_ORDER', 0)`,
		`INSERT INTO apps (app_id, name, webhook_urls, webhook_secret, channels, created_at, updated_at) VALUES ('app1', 'App', '', '', '', 0, 0)`,
		// Mostly completed or cancelled; 0.2 % still awaiting payment.
		series + `INSERT INTO orders (order_no, buyer_id, status, total, discount, payable, product_type, pay_deadline, payment_no, created_at, updated_at)
			SELECT ` + no + `, 'b' || CAST(i % 997 AS TEXT),
				CASE WHEN i % 500 = 0 THEN 'PENDING_PAYMENT' WHEN i % 100 < 60 THEN 'COMPLETED' WHEN i % 100 < 90 THEN 'CANCELLED'
					WHEN i % 100 < 93 THEN 'REFUNDED' WHEN i % 100 < 96 THEN 'RECEIVED' WHEN i % 100 < 98 THEN 'SHIPPED' ELSE 'PAID' END,
				100 + i, 0, 100 + i, 'NORMAL', ` + at + ` + 900000, 'P' || CAST(i AS TEXT), ` + at + `, ` + at + ` FROM series`,
		series + `INSERT INTO payments (payment_no, order_no, amount, status, subject, pay_deadline, created_at, updated_at)
			SELECT 'P' || CAST(i AS TEXT), ` + no + `, 100 + i,
				CASE WHEN i % 500 = 0 THEN 'UNPAID' WHEN i % 100 BETWEEN 60 AND 89 THEN 'CLOSED' ELSE 'SUCCESS' END,
				'Tea', ` + at + ` + 900000, ` + at + `, ` + at + ` FROM series`,
		series + `INSERT INTO channel_orders (out_trade_no, payment_no, channel, seq, amount, status, created_at, updated_at)
			SELECT 'T' || CAST(i AS TEXT), 'P' || CAST(i AS TEXT), 'alipay', 1, 100 + i,
				CASE WHEN i % 500 = 0 THEN 'PAYING' WHEN i % 100 BETWEEN 60 AND 89 THEN 'CLOSED' ELSE 'SUCCESS' END,
				` + at + `, ` + at + ` FROM series`,
		series + `INSERT INTO refunds (out_refund_no, out_trade_no, payment_no, channel, amount, reason, status, next_at, created_at, updated_at, needs_action_at)
			SELECT 'R' || CAST(i AS TEXT), 'T' || CAST(i AS TEXT), 'P' || CAST(i AS TEXT), 'alipay', 1,
				CASE i % 10 WHEN 0 THEN 'late' WHEN 1 THEN 'duplicate' ELSE 'after_sale' END,
				CASE WHEN i % 1000 = 90 THEN 'PENDING' WHEN i % 1000 = 91 THEN 'NEEDS_ACTION' ELSE 'SUCCESS' END,
				` + at + `, ` + at + `, ` + at + `, CASE WHEN i % 1000 = 91 THEN ` + at + ` ELSE 0 END FROM series WHERE i % 100 BETWEEN 90 AND 92`,
		// Returns of received orders: most refunded, some refused, a few waiting for review.
		series + `INSERT INTO after_sales (after_sale_no, order_no, seq, payment_no, buyer_id, kind, status, amount, created_at, updated_at)
			SELECT 'AS' || CAST(i AS TEXT), ` + no + `, 1, 'P' || CAST(i AS TEXT), 'b' || CAST(i % 997 AS TEXT), 'RETURN',
				CASE WHEN i % 1000 = 940 THEN 'REQUESTED' WHEN i % 1000 = 950 THEN 'APPROVED' WHEN i % 5 = 0 THEN 'REJECTED' ELSE 'SUCCESS' END,
				1, ` + at + `, ` + at + ` FROM series WHERE i % 100 BETWEEN 93 AND 95`,
		series + `INSERT INTO pending_queries (out_trade_no, payment_no, channel, next_at, flagged, created_at, updated_at)
			SELECT 'T' || CAST(i AS TEXT), 'P' || CAST(i AS TEXT), 'alipay', ` + at + `, CASE WHEN i % 500 = 0 THEN 0 ELSE 1 END,
				` + at + `, ` + at + ` FROM series WHERE i % 10 = 0`,
		series + `INSERT INTO stock_holds (order_no, line, sku, qty, hold_until, state, created_at, updated_at)
			SELECT ` + no + `, 1, 'tea', 1, ` + at + `, CASE WHEN i % 500 = 0 THEN 'HELD' WHEN i % 100 BETWEEN 60 AND 89 THEN 'RELEASED' ELSE 'SOLD' END,
				` + at + `, ` + at + ` FROM series`,
		series + `INSERT INTO shipments (shipment_no, order_no, seq, merchant_id, warehouse, status, weight_g, volume_cm3, receive_by, created_at, updated_at)
			SELECT 'S' || CAST(i AS TEXT), ` + no + `, 1, 'm1', 'default', CASE WHEN i % 100 BETWEEN 96 AND 97 THEN 'SHIPPED' ELSE 'RECEIVED' END,
				1, 1, ` + at + ` + 864000000, ` + at + `, ` + at + ` FROM series WHERE i % 100 < 60 OR i % 100 BETWEEN 90 AND 97`,
		// Delivered webhooks lose their bodies to retention after a while: the newest tenth keep theirs.
		series + `INSERT INTO webhook_deliveries (msg_id, subscriber, subject, payload, order_no, payment_no, status, next_at, created_at, updated_at, delivered_at)
			SELECT 'M' || CAST(i AS TEXT), 's1', 'order.paid', CASE WHEN i > ` + fmt.Sprint(n*9/10) + ` THEN '{}' ELSE '' END, ` + no + `, 'P' || CAST(i AS TEXT),
				CASE WHEN i % 500 = 0 THEN 'PENDING' WHEN i % 500 = 1 THEN 'FAILED' ELSE 'SUCCEEDED' END, ` + at + `, ` + at + `, ` + at + `,
				CASE WHEN i % 500 IN (0, 1) THEN 0 ELSE ` + at + ` END FROM series`,
		series + `INSERT INTO webhook_attempts (delivery_id, kind, http_status, at) SELECT i, 'delivery', 200, ` + at + ` FROM series`,
		series + `INSERT INTO app_payments (payment_no, order_key, app_id, merchant_order_no, amount, subject, channel, expires_at, status, request_hash, created_at, updated_at)
			SELECT 'AP' || CAST(i AS TEXT), 'K' || CAST(i AS TEXT), 'app1', 'MO' || CAST(i AS TEXT), 100, 'x', 'alipay', ` + at + `,
				CASE WHEN i % 500 = 0 THEN 'OPEN' WHEN i % 3 = 0 THEN 'CLOSED' ELSE 'SUCCESS' END, 'h', ` + at + `, ` + at + ` FROM series`,
		series + `INSERT INTO tickets (ticket_id, sku, buyer_id, qty, state, order_no, request, request_key, request_hash, created_at, expires_at, updated_at)
			SELECT 'TK' || CAST(i AS TEXT), 'tea', 'b' || CAST(i AS TEXT), 1, CASE WHEN i % 500 = 0 THEN 'WAITING' WHEN i % 3 = 0 THEN 'EXPIRED' ELSE 'ORDERED' END,
				CASE WHEN i % 3 = 0 OR i % 500 = 0 THEN '' ELSE 'TKO' || CAST(i AS TEXT) END, '{}', 'k' || CAST(i AS TEXT), 'h', ` + at + `, ` + at + ` + 60000, ` + at + ` FROM series`,
		series + `INSERT INTO outbox (msg_id, subject, payload, created_at, published_at)
			SELECT 'M' || CAST(i AS TEXT), 'order.paid', '{}', ` + at + `, CASE WHEN i > ` + fmt.Sprint(n-20) + ` THEN 0 ELSE ` + at + ` + 1000 END FROM series`,
		series + `INSERT INTO notification_log (received_at, channel, out_trade_no, verified, result, raw)
			SELECT ` + at + `, 'alipay', 'T' || CAST(i AS TEXT), 1, 'applied', '' FROM series`,
		series + `INSERT INTO query_log (at, channel, out_trade_no, trigger_name, outcome)
			SELECT ` + at + `, 'alipay', 'T' || CAST(i AS TEXT), 'sweeper', 'paid' FROM series`,
		series + `INSERT INTO request_keys (buyer_id, request_key, request_hash, order_no, created_at, expires_at)
			SELECT 'b' || CAST(i AS TEXT), 'k', 'h', ` + no + `, ` + at + `, ` + at + ` + 86400000 FROM series`,
		series + `INSERT INTO history_raw (seq, raw, at) SELECT i, '{}', ` + at + ` FROM series`,
	}
	// The counts' triggers left a delta per row: folded here in two statements each, as
	// FoldCounts would in batches (which the race detector makes slow on SQLite).
	stmts = append(stmts, `INSERT INTO status_counts (kind, status, n) SELECT kind, status, SUM(delta) FROM status_count_deltas
			WHERE true GROUP BY kind, status ON CONFLICT (kind, status) DO UPDATE SET n = status_counts.n + excluded.n`,
		`DELETE FROM status_count_deltas`,
		chartTotalsFill(s.d, `SELECT hour, kind, bucket, delta AS n FROM chart_count_deltas`),
		`DELETE FROM chart_count_deltas`)
	for _, stmt := range stmts {
		planExec(t, s, stmt)
	}
}

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// The console's charts, from the counts of migrations 0036 (by the hour) and 0037 (running
// totals).

// chartCountsMigration is the migration that makes chart_counts.
const chartCountsMigration = 36

// The kinds of the charts' counts.
const (
	chartNotification = "notification" // bucket: verified (0 or 1), ':', result
	chartPaidLatency  = "paid_latency" // bucket: the latency's bound in ms (orderpay.PaidLatencyBounds), or chartBeyond
)

// chartBeyond is the paid-latency bucket past the last bound.
const chartBeyond = "beyond"

// msPerHour is a chart hour in the stores' milliseconds: an hour's key is a time's
// milliseconds divided by it, the same hours as orderpay.ChartHour.
const msPerHour = int64(time.Hour / time.Millisecond)

// paidLatencyBucket is the SQL of the bucket of the latency d (an expression in ms).
func paidLatencyBucket(d string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for _, bound := range orderpay.PaidLatencyBounds {
		fmt.Fprintf(&b, " WHEN %s <= %[2]d THEN '%[2]d'", d, bound.Milliseconds())
	}
	fmt.Fprintf(&b, " ELSE '%s' END", chartBeyond)
	return b.String()
}

// Each counted row's hour, kind and bucket, for a row named r (NEW in a trigger), and the
// condition a payment row must meet to be counted.
func notificationCount(r string) (hour, bucket string) {
	return fmt.Sprintf("%s.received_at / %d", r, msPerHour), fmt.Sprintf("CAST(%[1]s.verified AS TEXT) || ':' || %[1]s.result", r)
}

func paidLatencyCount(r string) (hour, bucket string) {
	return fmt.Sprintf("%s.paid_at / %d", r, msPerHour), paidLatencyBucket(fmt.Sprintf("(%[1]s.paid_at - %[1]s.paid_attempt_at)", r))
}

// chartCountsSteps make chart_counts' triggers and fill it: a notification logged, and a
// payment that becomes paid (or is written paid) with its attempt's opening known.
func chartCountsSteps(d *dialect) []string {
	const insert = `INSERT INTO chart_count_deltas (hour, kind, bucket, delta) VALUES`
	nHour, nBucket := notificationCount("NEW")
	pHour, pBucket := paidLatencyCount("NEW")
	notified := fmt.Sprintf(`%s (%s, '%s', %s, 1)`, insert, nHour, chartNotification, nBucket)
	paid := fmt.Sprintf(`%s (%s, '%s', %s, 1)`, insert, pHour, chartPaidLatency, pBucket)
	const paidNow, paidNew = `NEW.status = 'SUCCESS' AND OLD.status <> 'SUCCESS' AND NEW.paid_attempt_at > 0`, `NEW.status = 'SUCCESS' AND NEW.paid_attempt_at > 0`
	var out []string
	if d == postgresDialect {
		for _, f := range []struct{ name, body string }{{"chart_count_notification", notified}, {"chart_count_paid", paid}} {
			out = append(out, fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    %s;
    RETURN NULL;
END
$$`, f.name, f.body))
		}
		out = append(out,
			`CREATE TRIGGER notification_log_chart_count AFTER INSERT ON notification_log FOR EACH ROW EXECUTE FUNCTION chart_count_notification()`,
			`CREATE TRIGGER payments_chart_count_update AFTER UPDATE OF status ON payments FOR EACH ROW WHEN (`+paidNow+`) EXECUTE FUNCTION chart_count_paid()`,
			`CREATE TRIGGER payments_chart_count_insert AFTER INSERT ON payments FOR EACH ROW WHEN (`+paidNew+`) EXECUTE FUNCTION chart_count_paid()`,
			// The charts no longer read these two tables: autovacuum as for any other (0035).
			`ALTER TABLE payments RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
				autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)`,
			`ALTER TABLE notification_log RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
				autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)`,
			// A queue, as status_count_deltas is.
			`ALTER TABLE chart_count_deltas SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)`)
	} else {
		out = append(out,
			`CREATE TRIGGER notification_log_chart_count AFTER INSERT ON notification_log BEGIN `+notified+`; END`,
			`CREATE TRIGGER payments_chart_count_update AFTER UPDATE OF status ON payments WHEN `+paidNow+` BEGIN `+paid+`; END`,
			`CREATE TRIGGER payments_chart_count_insert AFTER INSERT ON payments WHEN `+paidNew+` BEGIN `+paid+`; END`)
	}
	// Once, after the triggers (on PostgreSQL, making them locks the tables against writers
	// until the migration commits): the rows already there.
	nHour, nBucket = notificationCount("r")
	pHour, pBucket = paidLatencyCount("r")
	out = append(out,
		fmt.Sprintf(`INSERT INTO chart_counts (hour, kind, bucket, n) SELECT h, '%s', b, COUNT(*) FROM
			(SELECT %s AS h, %s AS b FROM notification_log r) c GROUP BY h, b`, chartNotification, nHour, nBucket),
		fmt.Sprintf(`INSERT INTO chart_counts (hour, kind, bucket, n) SELECT h, '%s', b, COUNT(*) FROM
			(SELECT %s AS h, %s AS b FROM payments r WHERE r.status = 'SUCCESS' AND r.paid_attempt_at > 0) c GROUP BY h, b`, chartPaidLatency, pHour, pBucket))
	return out
}

// chartTotalsMigration is the migration that keeps the charts' counts as running totals.
const chartTotalsMigration = 37

// chartTotalsFill is the statement that makes chart_totals' rows from counts by hour, kind
// and bucket (the rows of fine, a query of hour, kind, bucket and n): for each kind and
// each hour it has, every bucket's count from the first hour to that one. Every hour of a
// kind is crossed with every bucket of the kind (a dense grid), so that a running sum over
// the hours carries a bucket through the hours that did not count it.
func chartTotalsFill(d *dialect, fine string) string {
	return fmt.Sprintf(`INSERT INTO chart_totals (hour, kind, counts)
		WITH f AS (SELECT hour, kind, bucket, SUM(n) AS n FROM (%s) src GROUP BY hour, kind, bucket),
		grid AS (SELECT h.hour, h.kind, b.bucket, COALESCE(f.n, 0) AS n
			FROM (SELECT DISTINCT hour, kind FROM f) h JOIN (SELECT DISTINCT kind, bucket FROM f) b ON b.kind = h.kind
			LEFT JOIN f ON f.hour = h.hour AND f.kind = h.kind AND f.bucket = b.bucket),
		run AS (SELECT hour, kind, bucket, SUM(n) OVER (PARTITION BY kind, bucket ORDER BY hour) AS total FROM grid)
		SELECT hour, kind, CAST(%s(bucket, total) AS TEXT) FROM run WHERE total <> 0 GROUP BY hour, kind`, fine, d.objectAgg)
}

// chartTotalsSteps carry chart_counts' rows over to chart_totals and drop chart_counts.
func chartTotalsSteps(d *dialect) []string {
	return []string{chartTotalsFill(d, `SELECT hour, kind, bucket, n FROM chart_counts`), `DROP TABLE chart_counts`}
}

// chartTotalsQuery is a chart's read of one kind from an hour on: the kind's latest row
// (sign 1), its latest row before the hour (sign -1; none if the kind counted nothing
// before), each a row of the key found from its end, and the deltas not yet folded from
// the hour on, each its bucket and delta.
const chartTotalsQuery = `SELECT 1, counts, '', 0 FROM (SELECT counts FROM chart_totals WHERE kind = ? ORDER BY hour DESC LIMIT 1) l
	UNION ALL SELECT -1, counts, '', 0 FROM (SELECT counts FROM chart_totals WHERE kind = ? AND hour < ? ORDER BY hour DESC LIMIT 1) b
	UNION ALL SELECT 1, '', bucket, delta FROM chart_count_deltas WHERE hour >= ? AND kind = ?`

// chartCounts is one kind's counts by bucket from since's hour on (orderpay.ChartHour): the
// latest total less the total before the hour, and the deltas not folded yet.
func (q *queries) chartCounts(ctx context.Context, kind string, since time.Time) (map[string]int64, error) {
	hour := orderpay.ChartHour(since).UnixMilli() / msPerHour
	rows, err := q.rows(ctx, chartTotalsQuery, kind, kind, hour, hour, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var sign, delta int64
		var counts, bucket string
		if err := rows.Scan(&sign, &counts, &bucket, &delta); err != nil {
			return nil, err
		}
		if counts == "" {
			out[bucket] += delta
			continue
		}
		totals, err := decodeChartTotals(counts)
		if err != nil {
			return nil, err
		}
		for b, n := range totals {
			out[b] += sign * n
		}
	}
	maps.DeleteFunc(out, func(_ string, n int64) bool { return n == 0 })
	return out, rows.Err()
}

// decodeChartTotals is a chart_totals row's counts by bucket.
func decodeChartTotals(counts string) (map[string]int64, error) {
	var out map[string]int64
	if err := json.Unmarshal([]byte(counts), &out); err != nil {
		return nil, fmt.Errorf("sqlstore: chart totals %q: %w", counts, err)
	}
	return out, nil
}

// addChartTotals is chart_totals' fold: each hour and kind's deltas added to the row of
// that hour (made from the kind's row before it, if it is not there yet) and to every row
// of the kind after it (none, but for a delta that arrives after a later hour's). The
// folds of all instances take one lock first (on SQLite the write lock is already theirs):
// a fold that made an hour's row from the row before it while another added to that row
// would lose the other's deltas.
func addChartTotals(ctx context.Context, q *queries, sums []keyDelta) error {
	type hourKind struct {
		hour int64
		kind string
	}
	var order []hourKind
	merged := map[hourKind]map[string]int64{}
	for _, s := range sums {
		hour, ok := s.key[0].(int64)
		if !ok {
			return fmt.Errorf("sqlstore: chart delta hour %v (%T)", s.key[0], s.key[0])
		}
		k := hourKind{hour, textOf(s.key[1])}
		if merged[k] == nil {
			merged[k] = map[string]int64{}
			order = append(order, k)
		}
		merged[k][textOf(s.key[2])] += s.delta
	}
	if len(order) == 0 {
		return nil
	}
	if q.d.lockChartFold != "" {
		if _, err := q.exec(ctx, q.d.lockChartFold); err != nil {
			return err
		}
	}
	for _, k := range order {
		if err := q.addChartTotal(ctx, k.hour, k.kind, merged[k]); err != nil {
			return err
		}
	}
	return nil
}

// chartTotalRead, where a test sets it, runs between addChartTotal's first read and its
// first write.
var chartTotalRead func()

// addChartTotal adds deltas to a kind's running totals from hour on.
func (q *queries) addChartTotal(ctx context.Context, hour int64, kind string, deltas map[string]int64) error {
	// The row of the hour, or the one before it to start from.
	var at int64
	var old string
	err := q.row(ctx, `SELECT hour, counts FROM chart_totals WHERE kind = ? AND hour <= ? ORDER BY hour DESC LIMIT 1`, kind, hour).Scan(&at, &old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if chartTotalRead != nil {
		chartTotalRead()
	}
	counts, err := addToTotals(old, deltas)
	if err != nil {
		return err
	}
	if old != "" && at == hour {
		err = q.setChartTotal(ctx, hour, kind, old, counts)
	} else {
		err = q.expectOne(q.exec(ctx, `INSERT INTO chart_totals (hour, kind, counts) VALUES (?, ?, ?)`, hour, kind, counts))
	}
	if err != nil {
		return err
	}
	// The rows after it, if any.
	rows, err := q.rows(ctx, `SELECT hour, counts FROM chart_totals WHERE kind = ? AND hour > ? ORDER BY hour`, kind, hour)
	if err != nil {
		return err
	}
	type later struct {
		hour   int64
		counts string
	}
	var after []later
	for rows.Next() {
		var l later
		if err := rows.Scan(&l.hour, &l.counts); err != nil {
			rows.Close()
			return err
		}
		after = append(after, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, l := range after {
		counts, err := addToTotals(l.counts, deltas)
		if err != nil {
			return err
		}
		if err := q.setChartTotal(ctx, l.hour, kind, l.counts, counts); err != nil {
			return err
		}
	}
	return nil
}

// setChartTotal writes a row's counts on the condition that it still holds what was read.
func (q *queries) setChartTotal(ctx context.Context, hour int64, kind, old, counts string) error {
	return q.expectOne(q.exec(ctx, `UPDATE chart_totals SET counts = ? WHERE hour = ? AND kind = ? AND counts = ?`, counts, hour, kind, old))
}

// expectOne is an error unless a write changed one row: under the fold's lock, a row read
// is not changed by anyone else.
func (q *queries) expectOne(n int64, err error) error {
	if err == nil && n != 1 {
		err = fmt.Errorf("sqlstore: chart totals: %d rows written, want 1 (changed outside the fold's lock)", n)
	}
	return err
}

// addToTotals is the counts old (a row's, or none) with deltas added, encoded.
func addToTotals(old string, deltas map[string]int64) (string, error) {
	counts := map[string]int64{}
	if old != "" {
		var err error
		if counts, err = decodeChartTotals(old); err != nil {
			return "", err
		}
	}
	for b, d := range deltas {
		counts[b] += d
	}
	maps.DeleteFunc(counts, func(_ string, n int64) bool { return n == 0 })
	encoded, err := json.Marshal(counts) // its keys sorted
	return string(encoded), err
}

// textOf is a text column's value as a row scanned into an any gave it.
func textOf(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

func (q *queries) PaidLatencyCounts(ctx context.Context, since time.Time) ([]orderpay.LatencyCount, error) {
	counts, err := q.chartCounts(ctx, chartPaidLatency, since)
	if err != nil {
		return nil, err
	}
	var out []orderpay.LatencyCount
	for _, bound := range orderpay.PaidLatencyBounds {
		if n := counts[strconv.FormatInt(bound.Milliseconds(), 10)]; n > 0 {
			out = append(out, orderpay.LatencyCount{UpTo: bound, Count: n})
		}
	}
	if n := counts[chartBeyond]; n > 0 {
		out = append(out, orderpay.LatencyCount{Count: n})
	}
	return out, nil
}

func (q *queries) NotificationOutcomes(ctx context.Context, since time.Time) ([]orderpay.NotificationOutcomeCount, error) {
	counts, err := q.chartCounts(ctx, chartNotification, since)
	if err != nil {
		return nil, err
	}
	out := make([]orderpay.NotificationOutcomeCount, 0, len(counts))
	for bucket, n := range counts {
		verified, result, ok := strings.Cut(bucket, ":")
		if !ok {
			return nil, fmt.Errorf("sqlstore: chart bucket %q is not verified:result", bucket)
		}
		out = append(out, orderpay.NotificationOutcomeCount{Verified: verified == "1", Result: result, Count: int(n)})
	}
	// Verified first, then by result: the order the chart draws its bars in.
	slices.SortFunc(out, func(a, b orderpay.NotificationOutcomeCount) int {
		if a.Verified != b.Verified {
			if a.Verified {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Result, b.Result)
	})
	return out, nil
}

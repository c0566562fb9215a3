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

// The console's charts, from the hourly counts of migrations 0036 and 0037.

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

// chartHoursMigration is the migration that keeps an hour's buckets in one row.
const chartHoursMigration = 37

// chartHoursSteps carry chart_counts' rows over to chart_hours, an hour and kind's into one
// object, and drop chart_counts.
func chartHoursSteps(d *dialect) []string {
	return []string{
		fmt.Sprintf(`INSERT INTO chart_hours (hour, kind, counts) SELECT hour, kind, CAST(%s(bucket, n) AS TEXT) FROM chart_counts
			WHERE n <> 0 GROUP BY hour, kind`, d.objectAgg),
		`DROP TABLE chart_counts`,
	}
}

// chartHoursQuery is a chart's read: one kind's hours from an hour on, each its buckets'
// counts, and the deltas not yet folded, each its bucket and delta. chart_hours is read on
// its key from the hour (two rows an hour, one of this kind); the deltas are the last
// second's or so.
const chartHoursQuery = `SELECT counts, '', 0 FROM chart_hours WHERE hour >= ? AND kind = ?
	UNION ALL SELECT '', bucket, delta FROM chart_count_deltas WHERE hour >= ? AND kind = ?`

// chartCounts is one kind's counts by bucket from since's hour on (orderpay.ChartHour).
func (q *queries) chartCounts(ctx context.Context, kind string, since time.Time) (map[string]int64, error) {
	hour := orderpay.ChartHour(since).UnixMilli() / msPerHour
	rows, err := q.rows(ctx, chartHoursQuery, hour, kind, hour, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var counts, bucket string
		var delta int64
		if err := rows.Scan(&counts, &bucket, &delta); err != nil {
			return nil, err
		}
		if counts == "" {
			out[bucket] += delta
			continue
		}
		hourly, err := decodeChartHour(counts)
		if err != nil {
			return nil, err
		}
		for b, n := range hourly {
			out[b] += n
		}
	}
	maps.DeleteFunc(out, func(_ string, n int64) bool { return n == 0 })
	return out, rows.Err()
}

// decodeChartHour is an hour's counts by bucket from its row.
func decodeChartHour(counts string) (map[string]int64, error) {
	var out map[string]int64
	if err := json.Unmarshal([]byte(counts), &out); err != nil {
		return nil, fmt.Errorf("sqlstore: chart hour %q: %w", counts, err)
	}
	return out, nil
}

// addChartHours is chart_hours' fold: each hour and kind's deltas merged into its row
// (made if it is not there) by a conditional update on the counts read, read again if
// another instance's fold changed them first. The counts only grow, so a row with the
// counts read has not changed since.
func addChartHours(ctx context.Context, q *queries, sums []keyDelta) error {
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
	for _, k := range order {
		if err := q.addChartHour(ctx, k.hour, k.kind, merged[k]); err != nil {
			return err
		}
	}
	return nil
}

// chartHourTries bounds the conditional updates of one hour's row in one fold.
const chartHourTries = 20

// chartHourRead, where a test sets it, runs between addChartHour's read and its write.
var chartHourRead func()

// addChartHour adds deltas to an hour and kind's row.
func (q *queries) addChartHour(ctx context.Context, hour int64, kind string, deltas map[string]int64) error {
	for range chartHourTries {
		var old string
		err := q.row(ctx, `SELECT counts FROM chart_hours WHERE hour = ? AND kind = ?`, hour, kind).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if chartHourRead != nil {
			chartHourRead()
		}
		counts := map[string]int64{}
		if old != "" {
			if counts, err = decodeChartHour(old); err != nil {
				return err
			}
		}
		for b, d := range deltas {
			counts[b] += d
		}
		maps.DeleteFunc(counts, func(_ string, n int64) bool { return n == 0 })
		encoded, err := json.Marshal(counts) // its keys sorted
		if err != nil {
			return err
		}
		var n int64
		if old == "" {
			n, err = q.exec(ctx, `INSERT INTO chart_hours (hour, kind, counts) VALUES (?, ?, ?) ON CONFLICT (hour, kind) DO NOTHING`,
				hour, kind, string(encoded))
		} else {
			n, err = q.exec(ctx, `UPDATE chart_hours SET counts = ? WHERE hour = ? AND kind = ? AND counts = ?`, string(encoded), hour, kind, old)
		}
		if err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
	}
	return fmt.Errorf("sqlstore: chart hour %d %s changed %d times under one fold", hour, kind, chartHourTries)
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

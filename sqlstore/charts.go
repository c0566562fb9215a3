package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// The console's charts, from the hourly counts of migration 0036.

// chartCountsMigration is the migration that makes chart_counts.
const chartCountsMigration = 36

// The kinds of chart_counts.
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

// chartCountsQuery is a chart's read: one kind's counts from an hour on, folded and not
// yet folded, by bucket. chart_counts is read on its key from the hour (both kinds' rows
// of the window, a few dozen an hour); the deltas are the last second's or so.
const chartCountsQuery = `SELECT bucket, CAST(SUM(n) AS BIGINT) FROM (SELECT bucket, n FROM chart_counts WHERE hour >= ? AND kind = ?
	UNION ALL SELECT bucket, delta FROM chart_count_deltas WHERE hour >= ? AND kind = ?) c GROUP BY bucket`

// chartCounts is one kind's counts by bucket from since's hour on (orderpay.ChartHour).
func (q *queries) chartCounts(ctx context.Context, kind string, since time.Time) (map[string]int64, error) {
	hour := orderpay.ChartHour(since).UnixMilli() / msPerHour
	rows, err := q.rows(ctx, chartCountsQuery, hour, kind, hour, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var bucket string
		var n int64
		if err := rows.Scan(&bucket, &n); err != nil {
			return nil, err
		}
		if n != 0 {
			out[bucket] = n
		}
	}
	return out, rows.Err()
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

package sqlstore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"orderpay"
)

// statusCounted are the tables counted by status in status_counts (migration 0025), each
// under its own name as the kind.
var statusCounted = []string{"orders", "payments", "webhook_deliveries"}

// statusCountsMigration is the migration that makes status_counts.
const statusCountsMigration = 25

// migrationExtras are the statements a migration runs after those of its file, written for
// each engine by version: a trigger's body holds semicolons that the files' splitting would
// cut, an index may exist on one engine only, and a step may differ between the engines
// (historyCodesSteps).
var migrationExtras = map[int]func(d *dialect) []string{
	statusCountsMigration:   statusCountsSteps,
	orderSearchMigration:    orderSearchExtras,
	historyCodesMigration:   historyCodesSteps,
	historyPhrasesMigration: historyPhrasesSteps,
	chartsReadsMigration:    chartsReadsSteps,
	chartCountsMigration:    chartCountsSteps,
	chartTotalsMigration:    chartTotalsSteps,
}

// migrationSteps are the statements of migrationExtras for version on d, if any.
func migrationSteps(d *dialect, version int) []string {
	if f := migrationExtras[version]; f != nil {
		return f(d)
	}
	return nil
}

// statusCountsSteps make status_counts' triggers and fill it.
func statusCountsSteps(d *dialect) []string {
	const insert = `INSERT INTO status_count_deltas (kind, status, delta) VALUES`
	var out []string
	if d == postgresDialect {
		out = append(out, `CREATE FUNCTION status_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        `+insert+` (TG_ARGV[0], OLD.status, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        `+insert+` (TG_ARGV[0], NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$`)
	}
	if d == postgresDialect {
		// A queue: rows come and go every second. Vacuumed at every thousand dead rows, not
		// at a fifth of the table, so that the reads that scan it stay short.
		out = append(out, `ALTER TABLE status_count_deltas SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)`)
	}
	for _, table := range statusCounted {
		if d == postgresDialect {
			out = append(out, fmt.Sprintf(`CREATE TRIGGER %[1]s_status_count AFTER INSERT OR DELETE OR UPDATE OF status ON %[1]s
				FOR EACH ROW EXECUTE FUNCTION status_count_delta('%[1]s')`, table))
		} else {
			out = append(out,
				fmt.Sprintf(`CREATE TRIGGER %[1]s_status_count_insert AFTER INSERT ON %[1]s
					BEGIN %[2]s ('%[1]s', NEW.status, 1); END`, table, insert),
				fmt.Sprintf(`CREATE TRIGGER %[1]s_status_count_update AFTER UPDATE OF status ON %[1]s WHEN OLD.status <> NEW.status
					BEGIN %[2]s ('%[1]s', OLD.status, -1), ('%[1]s', NEW.status, 1); END`, table, insert),
				fmt.Sprintf(`CREATE TRIGGER %[1]s_status_count_delete AFTER DELETE ON %[1]s
					BEGIN %[2]s ('%[1]s', OLD.status, -1); END`, table, insert))
		}
		// Once, after the trigger: on PostgreSQL making it locks the table against writers
		// until the migration commits, so no row is counted twice or missed.
		out = append(out, fmt.Sprintf(`INSERT INTO status_counts (kind, status, n) SELECT '%[1]s', status, COUNT(*) FROM %[1]s GROUP BY status`, table))
	}
	return out
}

// FoldCountsBatch bounds the deltas one FoldCounts takes of each counter.
const FoldCountsBatch = 10000

// counter is a table of counts kept by triggers: the queue of deltas they add to, and the
// table those are folded into, by its key columns.
type counter struct {
	deltas, counts string
	keys           []string
	// add adds the deltas, summed by key and in the keys' order, to the counts; nil: each
	// key's row gets n = n + its delta.
	add func(ctx context.Context, q *queries, sums []keyDelta) error
}

// keyDelta is a key's deltas summed: its values as the deltas' rows gave them.
type keyDelta struct {
	key   []any
	delta int64
}

// counters are the counts FoldCounts folds: the status counts (migration 0025) and the
// charts' hourly counts (migrations 0036 and 0037).
var counters = []counter{
	{deltas: "status_count_deltas", counts: "status_counts", keys: []string{"kind", "status"}},
	{deltas: "chart_count_deltas", counts: "chart_totals", keys: []string{"hour", "kind", "bucket"}, add: addChartTotals},
}

// foldPendingQuery is whether any counter has a delta to fold: a row of each queue at most.
var foldPendingQuery = func() string {
	parts := make([]string, len(counters))
	for i, c := range counters {
		parts[i] = fmt.Sprintf(`(SELECT COUNT(*) FROM (SELECT 1 FROM %s LIMIT 1) d%d)`, c.deltas, i)
	}
	return `SELECT ` + strings.Join(parts, ` + `)
}()

// FoldCounts moves up to FoldCountsBatch rows of each counter's deltas into its counts,
// in one transaction, and returns how many it moved; with none to move it writes nothing.
// Instances may fold at once: a delta is deleted by one of them only, and added by that one.
func (s *Store) FoldCounts(ctx context.Context) (int, error) {
	// A read first: an idle store commits nothing (on SQLite a write takes the one writer's
	// lock, and the checkpointer runs after any commit).
	var pending int
	switch err := s.row(ctx, foldPendingQuery).Scan(&pending); {
	case err != nil:
		return 0, err
	case pending == 0:
		return 0, nil
	}
	var moved int
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		q := tx.(*queries)
		moved = 0
		for _, c := range counters {
			n, err := q.fold(ctx, c)
			if err != nil {
				return err
			}
			moved += n
		}
		return nil
	})
	return moved, err
}

// fold moves up to FoldCountsBatch of c's deltas into its counts.
func (q *queries) fold(ctx context.Context, c counter) (int, error) {
	keys := strings.Join(c.keys, ", ")
	rows, err := q.rows(ctx, fmt.Sprintf(`DELETE FROM %[1]s WHERE id IN (SELECT id FROM %[1]s ORDER BY id LIMIT ?) RETURNING %[2]s, delta`,
		c.deltas, keys), FoldCountsBatch)
	if err != nil {
		return 0, err
	}
	sums := map[string]*keyDelta{}
	moved := 0
	for rows.Next() {
		key := make([]any, len(c.keys))
		dest := make([]any, len(c.keys)+1)
		for i := range key {
			dest[i] = &key[i]
		}
		var delta int64
		dest[len(key)] = &delta
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return 0, err
		}
		id := fmt.Sprintf("%v", key)
		if sums[id] == nil {
			sums[id] = &keyDelta{key: key}
		}
		sums[id].delta += delta
		moved++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	ids := make([]string, 0, len(sums))
	for id := range sums {
		ids = append(ids, id)
	}
	// In one order, so that two folding instances never wait on each other's rows.
	sort.Strings(ids)
	ordered := make([]keyDelta, 0, len(ids))
	for _, id := range ids {
		if sums[id].delta != 0 {
			ordered = append(ordered, *sums[id])
		}
	}
	if c.add != nil {
		return moved, c.add(ctx, q, ordered)
	}
	upsert := fmt.Sprintf(`INSERT INTO %s (%s, n) VALUES (%s, ?) ON CONFLICT (%[2]s) DO UPDATE SET n = %[1]s.n + excluded.n`,
		c.counts, keys, inList(len(c.keys)))
	for _, s := range ordered {
		if _, err := q.exec(ctx, upsert, append(s.key, s.delta)...); err != nil {
			return 0, err
		}
	}
	return moved, nil
}

// statusCountsQuery is the scrape's read: status_counts and the deltas not folded yet,
// never the counted tables.
const statusCountsQuery = `SELECT kind, status, CAST(SUM(n) AS BIGINT) FROM (SELECT kind, status, n FROM status_counts
		UNION ALL SELECT kind, status, delta FROM status_count_deltas) c GROUP BY kind, status`

// statusCounts reads the counts of status_counts with the deltas not folded yet: a few
// rows per kind and status, and the deltas of the last second or so, whatever the history.
func (s *Store) statusCounts(ctx context.Context) (map[string]map[string]int64, error) {
	rows, err := s.rows(ctx, statusCountsQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for _, kind := range statusCounted {
		out[kind] = map[string]int64{}
	}
	for rows.Next() {
		var kind, status string
		var n int64
		if err := rows.Scan(&kind, &status, &n); err != nil {
			return nil, err
		}
		if n != 0 && out[kind] != nil {
			out[kind][status] = n
		}
	}
	return out, rows.Err()
}

package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// On PostgreSQL, the charts' two tables are vacuumed after chartsVacuumRows rows inserted
// or changed, not after a fifth of the table (migration 0035): their storage parameters
// say so once migrated. The other tables keep autovacuum's defaults.
func TestChartsTablesAreVacuumedAfterAFixedNumberOfRows(t *testing.T) {
	t.Parallel()
	s := openEngine(t, "postgres")
	ctx := context.Background()
	options := func(table string) []string {
		t.Helper()
		var opts []string
		rows, err := s.db.QueryContext(ctx, `SELECT unnest(reloptions) FROM pg_class
			WHERE relname = $1 AND relnamespace = current_schema()::regnamespace`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var o string
			if err := rows.Scan(&o); err != nil {
				t.Fatal(err)
			}
			opts = append(opts, o)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(opts)
		return opts
	}
	want := []string{
		"autovacuum_vacuum_insert_scale_factor=0", fmt.Sprintf("autovacuum_vacuum_insert_threshold=%d", chartsVacuumRows),
		"autovacuum_vacuum_scale_factor=0", fmt.Sprintf("autovacuum_vacuum_threshold=%d", chartsVacuumRows),
	}
	for _, table := range []string{"payments", "notification_log"} {
		if got := options(table); !slices.Equal(got, want) {
			t.Errorf("%s: storage parameters %q, want %q", table, got, want)
		}
	}
	if got := options("orders"); len(got) != 0 {
		t.Errorf("orders: storage parameters %q, want none", got)
	}
}

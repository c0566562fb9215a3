package sqlstore

import (
	"context"
	"strings"
	"testing"
)

// A buyer's ticket is found through its partial unique index, on both engines (PostgreSQL's
// generic plan, which a prepared statement comes to, included): a lookup that read the
// whole table made every admission of a 50,000-buyer burst slower than the last.
func TestTicketLookupsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, engine)
			for where, index := range map[string]string{ticketByKeyWhere: "tickets_key", liveTicketWhere: "tickets_live"} {
				plan := ticketPlan(t, s, `SELECT `+ticketColumns+` FROM tickets WHERE `+where)
				if !strings.Contains(plan, index) {
					t.Errorf("WHERE %s: the plan does not use %s:\n%s", where, index, plan)
				}
				t.Logf("WHERE %s:\n%s", where, plan)
			}
		})
	}
}

// ticketPlan is the engine's plan of query, with "b" and "k" for its two parameters.
func ticketPlan(t *testing.T, s *Store, query string) string {
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
			lines = append(lines, strings.TrimSpace(fmtAny(*(vals[len(vals)-1].(*any)))))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if s.d != postgresDialect {
		run(`EXPLAIN QUERY PLAN `+query, "b", "k")
		return strings.Join(lines, "\n")
	}
	exec := func(q string) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SET plan_cache_mode = force_generic_plan`)
	defer exec(`RESET plan_cache_mode`)
	exec(`PREPARE ticket_plan AS ` + s.Rebind(query))
	defer exec(`DEALLOCATE ticket_plan`)
	run(`EXPLAIN EXECUTE ticket_plan('b', 'k')`)
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

package explore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"orderpay/internal/testmark"
)

// A PostgreSQL case database is used again by the next case, put back as its template
// left it: after cases that write orders, payments, refunds, tickets and their history
// (with the triggers that count statuses), every table holds the template's rows, byte for
// byte in COPY's text, and every sequence stands where the template's does; the next case
// on it runs as on a new one.
func TestCaseDatabaseIsPutBackAsTheTemplateLeftIt(t *testing.T) {
	dsn := os.Getenv("ORDERPAY_TEST_PG")
	if dsn == "" {
		t.Skip("ORDERPAY_TEST_PG is not set")
	}
	testmark.Reached(t, testmark.Postgres)
	ctx := context.Background()
	e := &Explorer{Engine: "postgres", PG: dsn}
	defer e.Close()
	names := []string{"requested/base: aftersale.approve@5 | aftersale.reject", "ticket-waiting/base: ticket.serve@13 | i2.ticket.serve",
		"refunding/base: refund.send@8 | i2.refund.send", "unpaid/base: cancel@3 | crash", "requested/base: aftersale.approve@5 | aftersale.reject"}
	var sessions map[string]bool // the case database's sessions after the case before
	runPutBack(t, e, names, func(name string, c Case) {
		tpl := e.fixtures[c.Profile.Name]
		if len(e.caseDBs) != 1 || len(tpl.free) != 1 {
			t.Fatalf("after %s: %d case databases made, %d free; want the one, free again", name, len(e.caseDBs), len(tpl.free))
		}
		slot := tpl.free[0]
		got, err := snapshot(ctx, withDatabase(dsn, slot.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := sameSnapshot(got, tpl.snap); err != nil {
			t.Fatalf("after %s the case database is not its template: %v", name, err)
		}
		// Its two instances' stores are kept, with their sessions, for the next case: a
		// case without a crash ran on sessions the case before left.
		if len(slot.stores) != 2 {
			t.Fatalf("after %s, %d stores kept on the case database; want both instances'", name, len(slot.stores))
		}
		list, err := column(ctx, e.admin, `SELECT pid::text || ' ' || backend_start::text FROM pg_stat_activity WHERE datname = $1`, slot.name)
		if err != nil {
			t.Fatal(err)
		}
		now := map[string]bool{}
		for _, s := range list {
			now[s] = true
		}
		// All but one, at most: a pool may close a connection of its own accord (the
		// history codes' keeps one idle; a full run on a loaded machine saw one go).
		if sessions != nil && !strings.Contains(name, "crash") {
			var gone []string
			for s := range sessions {
				if !now[s] {
					gone = append(gone, s)
				}
			}
			if len(gone) > 1 {
				t.Errorf("after %s, %d of the %d sessions of the case before are gone (%v); want them used again", name, len(gone), len(sessions), gone)
			}
		}
		sessions = now
	})
}

// runPutBack runs the named cases in turn on e, each to pass, with after called after
// each, and then wants the first case's trace and the last's the same (the names begin and
// end with the same case).
func runPutBack(t *testing.T, e *Explorer, names []string, after func(name string, c Case)) {
	t.Helper()
	var traces []string
	for _, name := range names {
		c, err := ParseCase(name)
		if err != nil {
			t.Fatal(err)
		}
		r := e.Run(context.Background(), c)
		if r.Failed() {
			t.Fatalf("%s: %v\n%s", name, r.Failures, r.Trace)
		}
		traces = append(traces, r.Trace.String())
		after(name, c)
	}
	if traces[0] != traces[len(traces)-1] {
		t.Errorf("the first case ran otherwise on the database used again:\n%s\nthen\n%s", traces[0], traces[len(traces)-1])
	}
}

func sameSnapshot(got, want *pgSnapshot) error {
	if fmt.Sprint(got.tables) != fmt.Sprint(want.tables) {
		return fmt.Errorf("tables %v; want %v", got.tables, want.tables)
	}
	for _, table := range want.tables {
		if !bytes.Equal(got.rows[table], want.rows[table]) {
			return fmt.Errorf("table %s holds\n%s\nwant\n%s", table, got.rows[table], want.rows[table])
		}
	}
	if fmt.Sprint(got.seqs) != fmt.Sprint(want.seqs) {
		return fmt.Errorf("sequences %v; want %v", got.seqs, want.seqs)
	}
	return nil
}

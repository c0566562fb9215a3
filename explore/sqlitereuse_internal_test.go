package explore

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// A SQLite case database is used again by the next case, with its store's connections
// open, put back as its template left it: after cases that write orders, payments,
// refunds, tickets and their history (with the triggers that count statuses and chart
// them), a crash and a restart among them, every table holds the template's rows, the same
// literals in the same rowid order, and the next case on it runs as on a new one.
func TestSQLiteCaseDatabaseIsPutBackAsTheTemplateLeftIt(t *testing.T) {
	ctx := context.Background()
	e := &Explorer{Engine: "sqlite", Dir: t.TempDir()}
	defer e.Close()
	names := []string{"requested/base: aftersale.approve@5 | aftersale.reject", "ticket-waiting/base: ticket.serve@13 | ticket.serve",
		"refunding/base: refund.send@8 | notify", "unpaid/base: cancel@3 | crash", "paid/base: refund.send@2 | crash",
		"requested/base: aftersale.approve@5 | aftersale.reject"}
	var pool *sql.DB
	runPutBack(t, e, names, func(name string, c Case) {
		tpl := e.fixtures[c.Profile.Name]
		if len(tpl.spare) != 1 || tpl.spare[0].store == nil {
			t.Fatalf("after %s: %d case databases free; want the one, its store kept", name, len(tpl.spare))
		}
		// The connections are the last case's, save after a restart (a new store's).
		if db := tpl.spare[0].store.DB(); pool != nil && db != pool && c.B != crashOp {
			t.Fatalf("after %s the case database's store has connections of its own; want the last case's", name)
		} else {
			pool = db
		}
		got, err := sqliteSnap(ctx, tpl.spare[0].path)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameSQLite(got, tpl.sq); err != nil {
			t.Fatalf("after %s the case database is not its template: %v", name, err)
		}
	})
}

func sameSQLite(got, want *sqliteSnapshot) error {
	for _, part := range []struct{ got, want []sqliteTable }{{got.counted, want.counted}, {got.others, want.others}} {
		if len(part.got) != len(part.want) {
			return fmt.Errorf("%d tables; want %d", len(part.got), len(part.want))
		}
		for i, w := range part.want {
			if g := part.got[i]; g != w {
				return fmt.Errorf("table %s holds\n%s\nwant\n%s", w.name, g.insert, w.insert)
			}
		}
	}
	return nil
}

package sqlstore

import (
	"fmt"
	"testing"
)

// rebind numbers PostgreSQL's placeholders in order, leaves SQLite's alone, and gives the
// same answer from memory as when it first rewrote a query, and past its bound.
func TestRebind(t *testing.T) {
	d := &dialect{numbered: true}
	const q = "UPDATE t SET a = ?, b = ? WHERE c = ?"
	const want = "UPDATE t SET a = $1, b = $2 WHERE c = $3"
	for range 2 {
		if got := d.rebind(q); got != want {
			t.Fatalf("rebind(%q) = %q, want %q", q, got, want)
		}
	}
	if got := sqliteDialect.rebind(q); got != q {
		t.Fatalf("sqlite rebind changed the query: %q", got)
	}
	for i := range reboundMax + 10 {
		q := fmt.Sprintf("SELECT %d FROM t WHERE a = ? AND b = ?", i)
		want := fmt.Sprintf("SELECT %d FROM t WHERE a = $1 AND b = $2", i)
		if got := d.rebind(q); got != want {
			t.Fatalf("query %d: rebind = %q, want %q", i, got, want)
		}
	}
	n := 0
	d.rebound.Range(func(any, any) bool { n++; return true })
	if n > reboundMax {
		t.Fatalf("%d rewritten queries remembered, want at most %d", n, reboundMax)
	}
}

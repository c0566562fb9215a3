package sqlstore

import (
	"context"
	"testing"
)

// Every SQLite connection of the pool keeps 16 MiB of pages (cache_size in KiB, negative),
// not SQLite's 2 MiB, with the rest of the store's settings: several connections at once,
// each asked.
func TestSQLiteConnectionsKeepTheirPages(t *testing.T) {
	s := openEngine(t, "sqlite")
	ctx := context.Background()
	var conns []interface{ Close() error }
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 3 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var cache, temp int
		var journal string
		if err := c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&temp); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
			t.Fatal(err)
		}
		if cache != -16384 || temp != 2 || journal != "wal" {
			t.Errorf("connection %d: cache_size %d, temp_store %d, journal_mode %q; want -16384, 2 (memory), wal", len(conns), cache, temp, journal)
		}
	}
}

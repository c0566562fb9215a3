package sqlstore

import (
	"context"
	"testing"
)

// Every SQLite connection of the pool has the store's settings, its readers a page cache of
// readerCacheKiB (cache_size in KiB, negative): several connections at once, each asked.
// The writer's own connection, once it has written, has writerCacheKiB.
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
		if cache != -readerCacheKiB || temp != 2 || journal != "wal" {
			t.Errorf("connection %d: cache_size %d, temp_store %d, journal_mode %q; want -%d, 2 (memory), wal", len(conns), cache, temp, journal, readerCacheKiB)
		}
	}
	if _, err := s.exec(ctx, `UPDATE status_counts SET n = n WHERE kind = ''`); err != nil {
		t.Fatal(err)
	}
	var cache int
	if err := s.writes.conn.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
		t.Fatal(err)
	}
	if cache != -writerCacheKiB {
		t.Errorf("the writer's connection: cache_size %d; want -%d", cache, writerCacheKiB)
	}
}

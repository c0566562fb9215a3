package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"orderpay"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) orderpay.Store { return storetest.OpenSQLite(t) })
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.RequirePostgres(t)
	storetest.Run(t, func(t *testing.T) orderpay.Store { return storetest.OpenPostgres(t) })
}

// Opening a store twice runs the migrations once: the second open finds them applied.
func TestMigrationsAreIdempotent(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	path := filepath.Join(t.TempDir(), "nested", "orderpay.db")
	for i := 0; i < 2; i++ {
		s, err := sqlstore.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var n int
		if err := s.DB().QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(files) {
			t.Fatalf("open %d: %d migrations recorded, want %d", i, n, len(files))
		}
		s.Close()
	}
}

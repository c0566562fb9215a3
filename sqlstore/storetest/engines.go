package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay/internal/testmark"
	"orderpay/sqlstore"
)

// SQLiteDSN returns the path of a fresh SQLite database in a temp dir, with every
// migration applied (WriteMigratedSQLite).
func SQLiteDSN(t testing.TB) string {
	path := filepath.Join(t.TempDir(), "orderpay.db")
	WriteMigratedSQLite(t, path)
	return path
}

// migratedSQLite is the file of an empty SQLite store with every migration applied, made
// once per test process. Under the race detector SQLite (modernc.org/sqlite, Go) runs
// many times slower, and migrating a store from nothing took 1.6 s of CPU: most of a
// short test, and minutes over the suite. A copy of this file takes milliseconds, and
// opening it finds every migration applied, as a restarted server does.
var migratedSQLite = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "orderpay-migrated-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orderpay.db")
	s, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	// Closing the last connection checkpoints the log into the file and removes it: the
	// file alone is the whole database.
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return nil, fmt.Errorf("storetest: the migrated store's log is left after it closed (%d bytes)", st.Size())
	}
	return os.ReadFile(path)
})

// WriteMigratedSQLite writes an empty SQLite database with every migration applied at
// path (private to its owner, as the store creates its files), for a store or a server
// about to open it.
func WriteMigratedSQLite(t testing.TB, path string) {
	t.Helper()
	if err := CopyMigratedSQLite(path); err != nil {
		t.Fatal(err)
	}
}

// CopyMigratedSQLite is WriteMigratedSQLite for code with no test at hand.
func CopyMigratedSQLite(path string) error {
	b, err := migratedSQLite()
	if err != nil {
		return fmt.Errorf("storetest: a migrated SQLite store: %w", err)
	}
	return os.WriteFile(path, b, 0o600)
}

// OpenSQLite opens a fresh SQLite store that is closed when the test ends.
func OpenSQLite(t testing.TB) *sqlstore.Store {
	return open(t, SQLiteDSN(t))
}

// RequirePostgres returns the DSN in ORDERPAY_TEST_PG, or skips the test when it is unset,
// unless ORDERPAY_TEST_PG_REQUIRED=1 (set by CI) makes that a failure.
func RequirePostgres(t testing.TB) string {
	dsn := os.Getenv("ORDERPAY_TEST_PG")
	if dsn == "" {
		if os.Getenv("ORDERPAY_TEST_PG_REQUIRED") == "1" {
			t.Fatal("ORDERPAY_TEST_PG is not set but ORDERPAY_TEST_PG_REQUIRED=1")
		}
		t.Skip("ORDERPAY_TEST_PG not set; scripts/test starts a throwaway PostgreSQL and sets it")
	}
	testmark.Reached(t, testmark.Postgres)
	return dsn
}

var schemaSeq atomic.Int64

// PostgresDSN creates a new schema on the ORDERPAY_TEST_PG server and returns a DSN whose
// search_path is that schema, so that tests run in parallel without seeing each other. The
// schema is dropped when the test ends.
func PostgresDSN(t testing.TB) string {
	dsn := RequirePostgres(t)
	schemaDSN, drop, err := sqlstore.NewSchema(context.Background(), dsn, fmt.Sprintf("t_%d_%d", time.Now().UnixNano(), schemaSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop() })
	return schemaDSN
}

// OpenPostgres opens a store in a fresh schema (see PostgresDSN).
func OpenPostgres(t testing.TB) *sqlstore.Store {
	s := open(t, PostgresDSN(t))
	if s.Dialect() != "postgres" {
		t.Fatalf("dialect %q, want postgres", s.Dialect())
	}
	return s
}

func open(t testing.TB, dsn string) *sqlstore.Store {
	s, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"orderpay/internal/testmark"
	"orderpay/sqlstore"
)

// SQLiteDSN returns the path of a fresh SQLite database in a temp dir.
func SQLiteDSN(t testing.TB) string {
	return filepath.Join(t.TempDir(), "orderpay.db")
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

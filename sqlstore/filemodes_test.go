package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"orderpay/sqlstore"
)

// A new SQLite store is its owner's only: its directory 0700, the database, its
// write-ahead log and shared-memory files 0600. A directory that was there is left as it
// is (serve warns about it).
func TestNewSQLiteStoreIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	path := filepath.Join(root, "data", "orderpay.db")
	s, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO status_counts (kind, status, n) VALUES ('x', 'y', 1)`); err != nil {
		t.Fatal(err)
	}
	files := sqlstore.SQLiteFiles(path)
	if len(files) != 3 {
		t.Fatalf("SQLiteFiles %v", files)
	}
	want := map[string]os.FileMode{filepath.Dir(path): 0o700}
	for _, f := range files {
		want[f] = 0o600
	}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %#o, want %#o", p, fi.Mode().Perm(), mode)
		}
	}
	if sqlstore.SQLiteFiles("postgres://h/db") != nil {
		t.Error("a PostgreSQL DSN has SQLite files")
	}

	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o755)
	s2, err := sqlstore.Open(ctx, "sqlite:"+filepath.Join(shared, "orderpay.db"))
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing directory was changed to %#o", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(shared, "orderpay.db")); fi.Mode().Perm() != 0o600 {
		t.Errorf("a new database in an existing directory: mode %#o", fi.Mode().Perm())
	}
}

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A first start makes the data its owner's only: the data directory and the key
// directories 0700; the SQLite database, its log and shared-memory files, the development
// admin token, the order-number key, the simulator's secret keys and its state's journal
// 0600 (its state directory 0700). Nothing is warned about.
func TestFreshDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	logs := &syncBuffer{}
	m, _ := startMain(t, "", func(m *Main) {
		m.Config.DataDir, m.Config.AdminToken, m.Stderr = dir, "", logs
	})
	if m.AdminToken == "" {
		t.Fatal("no development admin token")
	}
	want := map[string]fs.FileMode{
		dir:                                        0o700,
		filepath.Join(dir, "orderpay.db"):          0o600,
		filepath.Join(dir, "orderpay.db-wal"):      0o600,
		filepath.Join(dir, "orderpay.db-shm"):      0o600,
		filepath.Join(dir, devAdminTokenFile):      0o600,
		filepath.Join(dir, "keys"):                 0o700,
		filepath.Join(dir, "keys", "order-no.key"): 0o600,
		// The built-in simulator's state: its trades, refunds and notifications due.
		filepath.Join(dir, "simulator"):                  0o700,
		filepath.Join(dir, "simulator", "journal.jsonl"): 0o600,
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
	// The simulator's keys: every directory 0700, every file 0600 but its public keys and
	// certificates.
	err := filepath.WalkDir(filepath.Join(dir, "keys"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		// Only a certificate or a public key may be readable by others.
		public := false
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			public = !strings.Contains(string(b), "PRIVATE") &&
				(strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") || strings.Contains(string(b), "-----BEGIN PUBLIC KEY-----"))
		}
		switch {
		case d.IsDir() && fi.Mode().Perm() != 0o700:
			t.Errorf("%s: mode %#o, want 0700", p, fi.Mode().Perm())
		case !d.IsDir() && !public && fi.Mode().Perm() != 0o600:
			t.Errorf("%s: mode %#o, want 0600", p, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "tighten the mode") {
		t.Fatalf("a fresh start warned about modes:\n%s", logs.String())
	}
}

// A data directory and a database that were there with modes others can read are warned
// about at start, by path and mode, and left as they were.
func TestLooseExistingDataIsWarnedAbout(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "orderpay.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]fs.FileMode{dir: 0o755, db: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncBuffer{}
	startMain(t, "", func(m *Main) { m.Config.DataDir, m.Stderr = dir, logs })
	out := logs.String()
	for _, w := range []string{"path=" + dir + " mode=0755 want=0700", "path=" + db + " mode=0644 want=0600"} {
		if !strings.Contains(out, w) {
			t.Errorf("the log does not warn %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "level=WARN") {
		t.Errorf("no warning:\n%s", out)
	}
	for p, mode := range map[string]fs.FileMode{dir: 0o755, db: 0o644} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != mode {
			t.Errorf("%s was changed to %#o", p, fi.Mode().Perm())
		}
	}
}

package main

import (
	"cmp"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"orderpay/sqlstore"
)

// The data directory holds the SQLite database (webhook secrets, buyers' names and
// phones), the development admin token and the keys: serve makes what it creates there its
// owner's only, directories 0700 and files 0600 (the simulator's public keys and
// certificates, 0644, are public, in its 0700 key directories). What was there before is
// left as it is, and warned about when others may read it (warnLooseModes): a directory an
// operator made, say for a backup group, is theirs to change.
const (
	privateDirMode  fs.FileMode = 0o700
	privateFileMode fs.FileMode = 0o600
)

// privatePaths are the directories and files of the data that only serve's user may
// read: the data directory, the SQLite database's files, the development admin token, the
// key directory (and the directories in it), the built-in simulator's state and the
// order-number key. Those that do not
// exist are skipped by warnLooseModes.
func (c *Config) privatePaths() []string {
	paths := []string{c.DataDir, filepath.Join(c.DataDir, devAdminTokenFile)}
	paths = append(paths, sqlstore.SQLiteFiles(cmp.Or(c.DB, filepath.Join(c.DataDir, "orderpay.db")))...)
	keys := cmp.Or(c.KeysDir, filepath.Join(c.DataDir, "keys"))
	_ = filepath.WalkDir(keys, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			paths = append(paths, path)
		}
		return nil
	})
	paths = append(paths, filepath.Join(c.DataDir, "simulator"), filepath.Join(c.DataDir, "simulator", "journal.jsonl"))
	return append(paths, c.orderNoKeyPath())
}

// warnLooseModes logs a warning for each path that exists and that users other than its
// owner may read, write or enter: its path and mode, never its content.
func warnLooseModes(log *slog.Logger, paths []string) {
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		want := privateFileMode
		if fi.IsDir() {
			want = privateDirMode
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			log.Warn("others on this machine can reach orderpay's data: tighten the mode (serve leaves what it did not create as it is)",
				"path", p, "mode", fmt.Sprintf("%#o", perm), "want", fmt.Sprintf("%#o", want))
		}
	}
}

package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Commits only append to SQLite's write-ahead log, past the 1000 pages at which SQLite's
// default would checkpoint in the committing transaction; the store's checkpointer then
// copies the whole log into the database file, and the commits after it write the log from
// its beginning.
func TestCheckpointsAreTheCheckpointersNotTheCommits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wal.db")
	s := openCheckpointedByTest(t, path)

	if _, err := s.db.ExecContext(ctx, `CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const commits = 1500
	body := string(make([]byte, 3000)) // most of a page: each commit adds a page or more
	for i := range commits {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO filler (id, body) VALUES (?, ?)`, i, body); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if pages := fi.Size() / (4096 + 24); pages < commits {
		t.Fatalf("the log holds %d pages after %d commits of a page or more: a commit checkpointed", pages, commits)
	}
	busy, logPages, copied, err := s.checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if busy || logPages < commits || copied != logPages {
		t.Fatalf("checkpoint: %d of %d log pages copied, want all of at least %d", copied, logPages, commits)
	}
	// A reader in the middle of a read of the log keeps the log from being started again.
	// The checkpoint does not wait for it (its busy timeout is 10 s; the writers would
	// wait behind it): it says busy, and the one after the reader has finished starts the
	// log again, so that the commits after it write the log from its beginning.
	insert := func(from, n int) {
		for i := range n {
			if _, err := s.db.ExecContext(ctx, `INSERT INTO filler (id, body) VALUES (?, ?)`, from+i, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	const read, more = 200, 10
	insert(commits, read)
	reader, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var rows int
	if _, err := reader.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		t.Fatal(err)
	}
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM filler`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	busy, _, _, err = s.checkpoint(ctx)
	if waited := time.Since(start); err != nil || !busy || waited > busyTimeoutMS*time.Millisecond/2 {
		t.Fatalf("checkpoint beside a reader: busy %v, %v, after %v", busy, err, waited)
	}
	if _, err := reader.ExecContext(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if busy, logPages, copied, err = s.checkpoint(ctx); err != nil || busy || copied != logPages {
		t.Fatalf("checkpoint after the reader: busy %v, %d of %d pages copied, %v", busy, copied, logPages, err)
	}
	insert(commits+read, more)
	if _, logPages, _, err = s.checkpoint(ctx); err != nil || logPages > 4*more {
		t.Fatalf("the log holds %d pages after %d more commits, %v: it was not started again", logPages, more, err)
	}
	// The connections the checkpoints used wait for locks as before.
	var timeout int
	for range 3 {
		if err := s.db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil || timeout != busyTimeoutMS {
			t.Fatalf("a pool connection's busy timeout is %d, %v; want %d", timeout, err, busyTimeoutMS)
		}
	}
}

// A checkpoint copies the log's bulk without the store's write lock: a write of the store
// (which takes that lock) commits while the checkpoint is between its two goes, without
// waiting for it; the second go copies that write too and starts the log again.
func TestCheckpointCopiesBesideTheWriters(t *testing.T) {
	ctx := context.Background()
	s := openCheckpointedByTest(t, filepath.Join(t.TempDir(), "wal.db"))
	if _, err := s.exec(ctx, `CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	body := string(make([]byte, 3000))
	for i := range 100 {
		if _, err := s.exec(ctx, `INSERT INTO filler (id, body) VALUES (?, ?)`, i, body); err != nil {
			t.Fatal(err)
		}
	}
	met := false
	checkpointCopied = func() {
		done := make(chan error, 1)
		go func() {
			_, err := s.exec(ctx, `INSERT INTO filler (id, body) VALUES (?, ?)`, 1000, body)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the write between the checkpoint's goes: %v", err)
			}
			met = true
		case <-time.After(5 * time.Second):
			t.Error("the write between the checkpoint's goes waited for the checkpoint: it holds the write lock")
			<-done
		}
	}
	defer func() { checkpointCopied = nil }()
	busy, logPages, copied, err := s.checkpoint(ctx)
	checkpointCopied = nil
	if err != nil || busy || copied != logPages || !met {
		t.Fatalf("checkpoint: busy %v, %d of %d log pages copied, %v; the write met it: %v", busy, copied, logPages, err, met)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM filler`).Scan(&n); err != nil || n != 101 {
		t.Fatalf("%d rows, %v; want 101", n, err)
	}
	// The log was started again: the next commit writes it from its beginning.
	if _, err := s.exec(ctx, `INSERT INTO filler (id, body) VALUES (?, ?)`, 1001, body); err != nil {
		t.Fatal(err)
	}
	if _, logPages, _, err = s.checkpoint(ctx); err != nil || logPages > 4 {
		t.Fatalf("the log holds %d pages after one more commit, %v: it was not started again", logPages, err)
	}
}

// openCheckpointedByTest opens a SQLite store at path whose checkpointer is stopped: only
// the test checkpoints. It is closed when the test ends.
func openCheckpointedByTest(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	close(s.stopCheckpoints)
	<-s.checkpointsDone
	s.stopCheckpoints = nil
	return s
}

package sqlstore

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// A transaction that runs a statement it has not run before needs a second connection, to
// prepare it, while it holds one and the database's write lock. Writes run alone at that
// moment, more of them than the pool has connections, wait their turn without a
// connection: the transaction prepares, runs and commits, and every write then succeeds.
//
// Before the store's writes queued in Go, each of those writes took a connection and
// waited in SQLite's busy handler for the write lock the transaction held; the statement
// cache held its lock while preparing; so the transaction waited for a connection, the
// writes waited for the transaction, and after 10 s every write failed busy (the chaos
// harness saw a server stop after a restart, its log full of SQLITE_BUSY).
func TestATransactionPreparesWhileWritesQueue(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.exec(ctx, `CREATE TABLE marks (id INTEGER PRIMARY KEY, at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const writers = 24 // three times the pool
	inTx, writersStarted := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, writers)
	go func() {
		<-inTx
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.exec(ctx, `INSERT INTO marks (id, at) VALUES (?, ?)`, i+1, time.Now().UnixMilli())
			}()
		}
		// Long enough for each writer to be waiting for the lock, whichever lock it is.
		time.Sleep(300 * time.Millisecond)
		close(writersStarted)
	}()
	var counted int
	txErr := s.InTx(ctx, func(tx orderpay.Tx) error {
		q := tx.(*queries)
		if _, err := q.exec(ctx, `INSERT INTO marks (id, at) VALUES (0, 0)`); err != nil {
			return err
		}
		close(inTx)
		<-writersStarted
		// A statement no one has run yet: the cache prepares it on the pool.
		return q.row(ctx, `SELECT COUNT(*) FROM marks WHERE at >= ? /* first run */`, 0).Scan(&counted)
	})
	if txErr != nil {
		t.Fatalf("the transaction: %v", txErr)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i+1, err)
		}
	}
	if counted != 1 {
		t.Errorf("the transaction counted %d rows, want its own 1", counted)
	}
	var n int
	if err := s.row(ctx, `SELECT COUNT(*) FROM marks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := writers + 1; n != want {
		t.Errorf("%d rows, want %d", n, want)
	}
}

// A write run alone inside a transaction of the same goroutine cannot have the lock the
// transaction holds: it fails busy after the time SQLite would have waited, rather than
// hang.
func TestAWriteWaitsForTheLockAtMostItsLimit(t *testing.T) {
	l := newWriteLock()
	if err := l.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := l.lockFor(context.Background(), 50*time.Millisecond)
	if orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("lockFor while held: %v, want EUNAVAILABLE", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.lock(ctx); err != context.Canceled {
		t.Fatalf("lock with an ended context: %v", err)
	}
	l.unlock()
	if err := l.lockFor(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("lockFor when free: %v", err)
	}
	l.unlock()
}

package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

// writeLock is a SQLite store's one-writer lock. A transaction, a write statement run
// alone and the checkpointer each take it before they take a connection from the pool, so
// a writer waiting its turn holds no connection.
//
// That is what keeps the pool from locking up. A transaction holds a connection and the
// database's write lock, and may need a second connection (to prepare a statement it has
// not run before). If writers waiting for the database's write lock held the rest of the
// pool, each in SQLite's busy wait, the transaction would wait for them and they for it,
// until their busy timeout failed them all, and again with the next ones.
type writeLock chan struct{}

func newWriteLock() *writeLock {
	l := make(writeLock, 1)
	return &l
}

// tryLock takes the lock if it is free, and reports whether it did.
func (l *writeLock) tryLock() bool {
	select {
	case *l <- struct{}{}:
		return true
	default:
		return false
	}
}

// lock waits for the lock as long as ctx lasts.
func (l *writeLock) lock(ctx context.Context) error {
	select {
	case *l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockFor waits for the lock at most limit (the time SQLite itself would wait for its
// write lock), and fails busy after that.
func (l *writeLock) lockFor(ctx context.Context, limit time.Duration) error {
	select {
	case *l <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case *l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return orderpay.Errorf(orderpay.EUNAVAILABLE, "the database is busy: another write held it for %s", limit)
	}
}

func (l *writeLock) unlock() { <-*l }

package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"orderpay"
)

// writer is a SQLite store's writes: its one-writer lock, and a group commit.
//
// Every write transaction (InTx) and every write statement run alone is a member of a
// group: one SQLite transaction that the writers queued for the lock join, one after the
// other, and that commits once for them all. A member that finds no one waiting behind it
// commits the group; one that finds someone waiting leaves the transaction open for them
// and waits for the commit. So a writer alone commits at once, as if there were no group,
// and writers that would have waited for each other's commits share one: the pages they
// all change (the ends of the history, the outbox and their indexes) go to the log once
// per group rather than once per writer.
//
// A member is all or nothing: after the first, each runs in a savepoint, and a member
// that fails is rolled back to it, leaving the others. No member's caller is answered
// before the group has ended, a failed member's included (it may have failed on what
// another wrote): a failed commit fails them all, and nothing of any is kept.
type writer struct {
	db   *sql.DB
	lock *writeLock
	// conn is the connection every group's transaction runs on, taken from db by the
	// first and kept (only the lock's holder reads or changes it): nil before that, after
	// it failed to begin one, and once the store is closed or renewed. In WAL mode a
	// connection throws away every page it keeps in its cache when another connection
	// has committed since its own last transaction; the writer is the only one that
	// commits, so on a connection of its own it keeps the upper levels of the indexes it
	// writes from one transaction to the next, where a connection taken from the pool
	// each time read them from the file again (on a file of gigabytes, a level more).
	// connIdle is true while it is held with no transaction open on it (Connections).
	conn     *sql.Conn
	connIdle atomic.Bool
	// waiting counts the writers waiting for the lock; open is the group left open for
	// them, if any (only the lock's holder reads or changes it).
	waiting atomic.Int32
	open    *group
	counts  *Counts
	// maxAge bounds how long a group stays open after its first member (groupAge).
	maxAge time.Duration
}

// group is one SQLite transaction shared by its members.
type group struct {
	tx      *sql.Tx
	since   time.Time // when its first member was done
	members int       // committed into the transaction so far
	broken  error     // set when the transaction can no longer commit
	err     error     // the commit's result, once done is closed
	done    chan struct{}
}

// A group is left open for the next writer only while it is smaller than groupMembersMax
// and its first member has waited less than groupAge; the wait of a member whose successor
// never came (its context ended while it waited for the lock) is cut at groupWait.
const (
	groupMembersMax = 16
	groupAge        = 5 * time.Millisecond
	groupWait       = 10 * time.Millisecond
)

func newWriter(db *sql.DB, counts *Counts) *writer {
	return &writer{db: db, lock: newWriteLock(), counts: counts, maxAge: groupAge}
}

// acquire takes the lock, waiting as long as ctx lasts, or at most limit if positive (then
// failing busy, as SQLite would).
func (w *writer) acquire(ctx context.Context, limit time.Duration) error {
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	if w.lock.tryLock() {
		return nil
	}
	// Another writer holds it: the explorer, if it runs this operation, is told (it is the
	// other operation's turn until the lock is free), and at once when it is taken.
	orderpay.StepWaiting(ctx, "write lock")
	var err error
	if limit > 0 {
		err = w.lock.lockFor(ctx, limit)
	} else {
		err = w.lock.lock(ctx)
	}
	if err == nil {
		orderpay.Step(ctx, orderpay.StepAcquired, "write lock")
	}
	return err
}

// run runs fn as one member of a group. The caller holds no lock.
func (w *writer) run(ctx context.Context, limit time.Duration, fn func(tx *sql.Tx) error) error {
	if err := w.acquire(ctx, limit); err != nil {
		return err
	}
	// However it ends (a panic too), the lock is let go: the explorer is told, after.
	defer orderpay.StepReleased(ctx, "write lock")
	g := w.open
	if g == nil {
		tx, err := w.begin()
		if err != nil {
			w.lock.unlock()
			return translate(err)
		}
		g = &group{tx: tx, done: make(chan struct{})}
		w.open = g
	}
	defer func() {
		// A member that panics leaves no lock held, nor a transaction open: the group is
		// rolled back, and its members told.
		if p := recover(); p != nil {
			g.broken = fmt.Errorf("sqlstore: a transaction panicked: %v", p)
			w.end(g)
			w.lock.unlock()
			panic(p)
		}
	}()
	err := w.member(ctx, g, fn)
	// Unbroken, a group has a member: a first member that fails breaks it.
	if g.broken == nil && w.waiting.Load() > 0 && g.members < groupMembersMax && time.Since(g.since) < w.maxAge {
		w.lock.unlock()
		w.await(g)
	} else {
		w.end(g)
		w.lock.unlock()
	}
	// A member that failed was undone, but it may have failed on what a member before it
	// wrote (a key taken): that is committed, or gone, by the time it is answered, as it
	// would have been without the group.
	if err != nil {
		return err
	}
	return g.err
}

// begin begins a group's transaction on the writer's connection, taking one from the pool
// if it has none and giving it the writer's page cache (writerCacheKiB). A connection that
// fails to begin one is closed; if it was a kept one that went bad, one taken afresh
// tries again, as the pool's own BeginTx would. The caller holds the lock.
func (w *writer) begin() (*sql.Tx, error) {
	// The group's transaction is the store's, not the caller's: it outlives the caller's
	// context, which ends only its own member (run).
	bg := context.Background()
	for {
		kept := w.conn != nil
		if !kept {
			c, err := w.db.Conn(bg)
			if err != nil {
				return nil, err
			}
			if _, err := c.ExecContext(bg, fmt.Sprintf(`PRAGMA cache_size = -%d`, writerCacheKiB)); err != nil {
				discard(c)
				return nil, err
			}
			w.conn = c
		}
		w.connIdle.Store(false)
		tx, err := w.conn.BeginTx(bg, nil)
		if err == nil {
			return tx, nil
		}
		w.release()
		if !kept || !(errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)) {
			return nil, err
		}
	}
}

// release closes the writer's connection: with its larger cache it never serves the
// readers (readerCacheKiB). The caller holds the lock, or nothing else runs on the store.
func (w *writer) release() {
	w.connIdle.Store(false)
	if w.conn != nil {
		discard(w.conn)
		w.conn = nil
	}
}

// discard closes c rather than give it back to its pool: database/sql closes a
// connection whose Raw says it went bad.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
}

// handTo gives w's connection, cache and all, to n, the writer of the store that renews
// w's. Nothing runs on w: no group is open.
func (w *writer) handTo(n *writer) {
	n.conn, w.conn = w.conn, nil
	n.connIdle.Store(n.conn != nil)
	w.connIdle.Store(false)
}

// member runs fn in g. The first member runs in the transaction itself, and a failure
// rolls the whole of it back (there is nothing else in it); the others each in a
// savepoint. A member fails if its context ends while it runs, as a transaction begun on
// that context would.
func (w *writer) member(ctx context.Context, g *group, fn func(tx *sql.Tx) error) error {
	bg := context.Background()
	first := g.members == 0
	if !first {
		if _, err := g.tx.ExecContext(bg, `SAVEPOINT member`); err != nil {
			g.broken = translate(err)
			return g.broken
		}
	}
	err := fn(g.tx)
	if err == nil {
		err = ctx.Err()
	}
	switch {
	case err != nil && first:
		g.broken = err // roll it all back: nothing else is in it
	case err != nil:
		if _, rerr := g.tx.ExecContext(bg, `ROLLBACK TO member`); rerr != nil {
			// SQLite rolled the whole transaction back itself (a full disk, say): the
			// members before this one are lost too, and are told so at the end.
			g.broken = translate(rerr)
		} else if _, rerr := g.tx.ExecContext(bg, `RELEASE member`); rerr != nil {
			g.broken = translate(rerr)
		}
	case !first:
		if _, rerr := g.tx.ExecContext(bg, `RELEASE member`); rerr != nil {
			g.broken = translate(rerr)
			err = g.broken
		}
	}
	if err == nil {
		if g.members++; first {
			g.since = time.Now()
		}
	}
	return err
}

// end commits g, or rolls it back if it is broken, and answers its members. The caller
// holds the lock.
func (w *writer) end(g *group) {
	if g.broken != nil {
		_ = g.tx.Rollback()
		g.err = g.broken
	} else if err := g.tx.Commit(); err != nil {
		g.err = translate(err)
	} else {
		w.counts.Transactions.Add(int64(g.members))
		w.counts.Commits.Add(1)
	}
	w.open = nil
	w.connIdle.Store(w.conn != nil)
	close(g.done)
}

// await waits for g to end. If no one has ended it after groupWait (the writer it was
// left open for gave up waiting for the lock), it ends g itself.
func (w *writer) await(g *group) {
	t := time.NewTimer(groupWait)
	select {
	case <-g.done:
		t.Stop()
		return
	case <-t.C:
	}
	_ = w.lock.lock(context.Background())
	if w.open == g {
		w.end(g)
	}
	w.lock.unlock()
}

// settle takes the lock for a writer that is not a member (the checkpointer, Close): it
// ends the group left open, if any, first.
func (w *writer) settle(ctx context.Context) error {
	if err := w.acquire(ctx, 0); err != nil {
		return err
	}
	if w.open != nil {
		w.end(w.open)
	}
	return nil
}

// Alone makes the store's writes depend on its callers only, as the explorer needs (a
// case must run the same way every time): every SQLite transaction commits on its own,
// never left open for the next writer (whether a group stays open depends on the wall
// clock, groupAge), and no checkpoint runs in the background (it takes the write lock
// when a timer says). Closing the store's last connection still checkpoints. A no-op on
// PostgreSQL.
func (s *Store) Alone() {
	if s.writes != nil {
		s.writes.maxAge = 0
	}
	if s.stopCheckpoints != nil {
		close(s.stopCheckpoints)
		<-s.checkpointsDone
		s.stopCheckpoints = nil
	}
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// groupStore is a SQLite store with a table of marks; without checkpoints, it has no
// checkpointer (whose commits would end a group early) and groups wait for every member.
func groupStore(t *testing.T, checkpoints bool) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "group.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !checkpoints {
		close(s.stopCheckpoints)
		<-s.checkpointsDone
		s.stopCheckpoints = nil
		// Members one after the other, however slowly they run (the race detector).
		s.writes.maxAge = time.Minute
	}
	for _, ddl := range []string{
		`CREATE TABLE marks (name TEXT PRIMARY KEY)`,
		`CREATE TABLE parents (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE children (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := s.exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mark(ctx context.Context, tx orderpay.Tx, name string) error {
	_, err := tx.(*queries).exec(ctx, `INSERT INTO marks (name) VALUES (?)`, name)
	return err
}

func marks(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.rows(context.Background(), `SELECT name FROM marks ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitForWaiters blocks until n writers wait for the lock.
func waitForWaiters(t *testing.T, w *writer, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.waiting.Load() != n {
		if time.Now().After(deadline) {
			t.Errorf("%d writers waiting, want %d", w.waiting.Load(), n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// runGroup runs first in a transaction, which waits (holding the lock) until each of the
// other writers waits for the lock, and returns each one's error, first's at 0.
func runGroup(t *testing.T, s *Store, first func(ctx context.Context, tx orderpay.Tx) error, others ...func(ctx context.Context, cancel context.CancelFunc) error) []error {
	t.Helper()
	errs := make([]error, 1+len(others))
	inside := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx := context.Background()
		errs[0] = s.InTx(ctx, func(tx orderpay.Tx) error {
			close(inside)
			waitForWaiters(t, s.writes, int32(len(others)))
			return first(ctx, tx)
		})
	})
	<-inside
	for i, w := range others {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs[i+1] = w(ctx, cancel)
		})
	}
	wg.Wait()
	return errs
}

// inTx is a writer for runGroup: fn in a transaction.
func inTx(s *Store, fn func(ctx context.Context, tx orderpay.Tx) error) func(ctx context.Context, cancel context.CancelFunc) error {
	return func(ctx context.Context, _ context.CancelFunc) error {
		return s.InTx(ctx, func(tx orderpay.Tx) error { return fn(ctx, tx) })
	}
}

// Writers that queued while one wrote commit with it, once: each member's work is kept or
// undone as a whole, one failing or ending its context undoes only its own, and no member
// is answered before the commit.
func TestAGroupCommitsOnceForTheWritersQueuedTogether(t *testing.T) {
	s := groupStore(t, false)
	tx0, commits0, _ := s.Counters()
	refused := errors.New("refused")
	errs := runGroup(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "a") },
		inTx(s, func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "b") }),
		inTx(s, func(ctx context.Context, tx orderpay.Tx) error {
			if err := mark(ctx, tx, "c"); err != nil {
				return err
			}
			return refused
		}),
		func(ctx context.Context, cancel context.CancelFunc) error {
			return s.InTx(ctx, func(tx orderpay.Tx) error {
				if err := mark(ctx, tx, "d"); err != nil {
					return err
				}
				cancel() // its caller gave up while it ran
				return nil
			})
		},
		func(ctx context.Context, _ context.CancelFunc) error {
			_, err := s.exec(ctx, `INSERT INTO marks (name) VALUES (?)`, "e") // a write run alone
			return err
		},
		func(ctx context.Context, _ context.CancelFunc) error {
			// A conflict with member a's write: once answered, the caller finds that write
			// committed (an identical request replays the first one's order this way).
			err := s.InTx(ctx, func(tx orderpay.Tx) error { return mark(ctx, tx, "a") })
			var n int
			if rerr := s.row(ctx, `SELECT COUNT(*) FROM marks WHERE name = 'a'`).Scan(&n); rerr != nil || n != 1 {
				t.Errorf("after the conflict, %d committed marks a (%v), want 1", n, rerr)
			}
			return err
		},
	)
	if errs[0] != nil || errs[1] != nil || errs[4] != nil {
		t.Errorf("members a, b, e: %v, %v, %v; want no error", errs[0], errs[1], errs[4])
	}
	if !errors.Is(errs[2], refused) {
		t.Errorf("member c: %v, want its own error", errs[2])
	}
	if !errors.Is(errs[3], context.Canceled) {
		t.Errorf("member d: %v, want context.Canceled", errs[3])
	}
	if orderpay.ErrorCode(errs[5]) != orderpay.ECONFLICT {
		t.Errorf("second a: %v, want ECONFLICT", errs[5])
	}
	if got, want := marks(t, s), []string{"a", "b", "e"}; !slices.Equal(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
	tx1, commits1, _ := s.Counters()
	if tx1-tx0 != 3 || commits1-commits0 != 1 {
		t.Errorf("%d transactions in %d commits, want 3 in 1", tx1-tx0, commits1-commits0)
	}
}

// A commit that fails fails every member of the group, and keeps nothing of any.
func TestAGroupWhoseCommitFailsFailsEveryMember(t *testing.T) {
	s := groupStore(t, false)
	errs := runGroup(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "a") },
		inTx(s, func(ctx context.Context, tx orderpay.Tx) error {
			// A deferred foreign key is checked at the commit.
			_, err := tx.(*queries).exec(ctx, `INSERT INTO children (id, parent) VALUES (1, 99)`)
			return err
		}),
		inTx(s, func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "c") }),
	)
	for i, err := range errs {
		if err == nil {
			t.Errorf("member %d: no error, want the commit's", i)
		}
	}
	if got := marks(t, s); len(got) != 0 {
		t.Errorf("marks %v, want none", got)
	}
}

// A member that ends the whole transaction (as SQLite does itself on a full disk) takes
// the members before it down with it, which are told; the next writer begins afresh.
func TestAMemberThatEndsTheTransactionFailsTheGroup(t *testing.T) {
	s := groupStore(t, false)
	gone := errors.New("the transaction was rolled back")
	errs := runGroup(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "a") },
		inTx(s, func(ctx context.Context, tx orderpay.Tx) error {
			if _, err := tx.(*queries).db.ExecContext(ctx, `ROLLBACK`); err != nil {
				return err
			}
			return gone
		}),
	)
	if errs[0] == nil {
		t.Error("member a: no error, but its work was rolled back")
	}
	if !errors.Is(errs[1], gone) {
		t.Errorf("member b: %v, want its own error", errs[1])
	}
	if got := marks(t, s); len(got) != 0 {
		t.Errorf("marks %v, want none", got)
	}
	if err := s.InTx(context.Background(), func(tx orderpay.Tx) error { return mark(context.Background(), tx, "c") }); err != nil {
		t.Fatalf("the next writer: %v", err)
	}
	if got, want := marks(t, s), []string{"c"}; !slices.Equal(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
}

// A group left open for a writer that never comes (its context ended while it waited for
// the lock) is committed by its member after groupWait.
func TestAGroupLeftOpenForNoOneCommits(t *testing.T) {
	s := groupStore(t, false)
	s.writes.waiting.Add(1) // a writer counted as waiting, which never takes the lock
	start := time.Now()
	err := s.InTx(context.Background(), func(tx orderpay.Tx) error { return mark(context.Background(), tx, "a") })
	s.writes.waiting.Add(-1)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < groupWait {
		t.Errorf("answered after %s, before the group could have been committed for it (%s)", took, groupWait)
	}
	if got, want := marks(t, s), []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
	if s.writes.open != nil {
		t.Error("a group is still open")
	}
}

// Over random sequences of concurrent writers (transactions that succeed, fail after
// writing, end their context, or conflict; writes run alone), with the checkpointer
// running: what is kept is exactly what was answered success, and the counters agree.
func TestGroupsKeepExactlyWhatSucceeded(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			s := groupStore(t, true)
			rng := rand.New(rand.NewPCG(seed, 7))
			const writers, each = 8, 40
			plans := make([][]int, writers)
			for i := range plans {
				for range each {
					plans[i] = append(plans[i], rng.IntN(5))
				}
			}
			tx0, c0, _ := s.Counters()
			var mu sync.Mutex
			var kept []string
			var wg sync.WaitGroup
			for i, plan := range plans {
				wg.Go(func() {
					for j, kind := range plan {
						name := fmt.Sprintf("w%02d-%03d", i, j)
						ctx, cancel := context.WithCancel(context.Background())
						var err error
						switch kind {
						case 0: // succeeds
							err = s.InTx(ctx, func(tx orderpay.Tx) error { return mark(ctx, tx, name) })
						case 1: // fails after writing
							err = s.InTx(ctx, func(tx orderpay.Tx) error {
								if err := mark(ctx, tx, name); err != nil {
									return err
								}
								return errors.New("no")
							})
						case 2: // its caller gives up while it runs
							err = s.InTx(ctx, func(tx orderpay.Tx) error {
								err := mark(ctx, tx, name)
								cancel()
								return err
							})
						case 3: // conflicts with its own first write
							err = s.InTx(ctx, func(tx orderpay.Tx) error {
								if err := mark(ctx, tx, name); err != nil {
									return err
								}
								return mark(ctx, tx, name)
							})
						case 4: // a write run alone
							_, err = s.exec(ctx, `INSERT INTO marks (name) VALUES (?)`, name)
						}
						cancel()
						if err == nil {
							mu.Lock()
							kept = append(kept, name)
							mu.Unlock()
						}
						if rng := rand.N(3); rng == 0 {
							time.Sleep(time.Duration(rand.N(200)) * time.Microsecond)
						}
					}
				})
			}
			wg.Wait()
			slices.Sort(kept)
			if got := marks(t, s); !slices.Equal(got, kept) {
				t.Fatalf("kept %d marks, answered success for %d:\n%v\n%v", len(got), len(kept), got, kept)
			}
			tx1, c1, _ := s.Counters()
			if int(tx1-tx0) != len(kept) || c1-c0 > tx1-tx0 || c1-c0 == 0 {
				t.Errorf("%d transactions in %d commits, for %d successes", tx1-tx0, c1-c0, len(kept))
			}
			t.Logf("%d successes in %d commits", len(kept), c1-c0)
		})
	}
}

// A member that panics leaves the lock free and no transaction open; the members before it
// are told their work is gone.
func TestAMemberThatPanicsReleasesTheLock(t *testing.T) {
	s := groupStore(t, false)
	errs := runGroup(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return mark(ctx, tx, "a") },
		func(ctx context.Context, _ context.CancelFunc) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("recovered: %v", p)
				}
			}()
			return s.InTx(ctx, func(tx orderpay.Tx) error {
				if err := mark(ctx, tx, "b"); err != nil {
					return err
				}
				panic("a bug")
			})
		},
	)
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("members: %v, %v; want both failed", errs[0], errs[1])
	}
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(tx orderpay.Tx) error { return mark(context.Background(), tx, "c") })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next writer never got the lock")
	}
	if got, want := marks(t, s), []string{"c"}; !slices.Equal(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
}

// The writer's transactions run on one connection it keeps, so that the pages its
// connection cached survive from one write to the next (in WAL mode, a connection drops
// them when another has committed). A connection's own setting (its page cache's size)
// made in one write transaction is there in the next, with the pool's other connections
// in use by readers meanwhile; between writes, the kept connection counts as idle.
func TestTheWriterKeepsItsConnection(t *testing.T) {
	s := groupStore(t, false)
	ctx := context.Background()
	cacheSize := func(tx orderpay.Tx) (n int, err error) {
		err = tx.(*queries).db.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&n)
		return n, err
	}
	if err := s.InTx(ctx, func(tx orderpay.Tx) error {
		_, err := tx.(*queries).db.ExecContext(ctx, `PRAGMA cache_size = -4321`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, inUse := s.Connections(); inUse != 0 {
		t.Fatalf("between writes, %d connections in use; want the writer's kept one idle", inUse)
	}
	// Readers hold most of the other connections while the next writes begin.
	var held []*sql.Conn
	for range 5 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for i := range 3 {
		var got int
		if err := s.InTx(ctx, func(tx orderpay.Tx) error {
			var err error
			got, err = cacheSize(tx)
			if err == nil {
				err = mark(ctx, tx, fmt.Sprint("w", i))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != -4321 {
			t.Fatalf("write %d ran on a connection whose cache_size is %d: not the writer's kept one", i, got)
		}
	}
	for _, c := range held {
		c.Close()
	}
}

// A kept connection that has gone bad is given back, and the next write begins on one
// taken afresh rather than failing.
func TestTheWriterReplacesABadConnection(t *testing.T) {
	s := groupStore(t, false)
	ctx := context.Background()
	if err := s.InTx(ctx, func(tx orderpay.Tx) error { return mark(ctx, tx, "a") }); err != nil {
		t.Fatal(err)
	}
	bad := s.writes.conn
	if bad == nil {
		t.Fatal("the writer kept no connection")
	}
	discard(bad)
	if err := s.InTx(ctx, func(tx orderpay.Tx) error { return mark(ctx, tx, "b") }); err != nil {
		t.Fatalf("a write after the kept connection went bad: %v", err)
	}
	if s.writes.conn == nil || s.writes.conn == bad {
		t.Fatal("the writer did not take a new connection")
	}
	if got := marks(t, s); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("marks %v, want [a b]", got)
	}
}

package natsbus

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"orderpay"
)

// TimerQueue sets timers on the bus without making its caller wait: SetTimer queues the
// timer in memory and returns, and a few publishers set it on the broker, retrying while
// the bus is down. It is how the buyer's calls (pay) schedule their queries: the database
// is the truth (the pending-query row is committed with the attempt), and a broker timer
// is only the fast path, so a pay call never waits on NATS (docs/design.md §2, §1.4).
//
// Setting a name that is still queued replaces the queued timer in place, as the broker
// would. Timers of one name are published by one publisher, in the order they were set, so
// the broker ends with the last. The queue is bounded (maxQueuedTimers): past that, new
// names are dropped and logged, and Close drops what is left; the sweeper over the
// pending-query table takes those when they are due.
type TimerQueue struct {
	bus    *Bus
	shards []*timerShard
	log    *slog.Logger

	dropMu   sync.Mutex
	dropped  int
	lastDrop time.Time
}

// Timer queue sizing: timerPublishers publishers, and at most maxQueuedTimers timers
// waiting in all (some 200 bytes each): minutes of a busy shop's payments with the bus down.
const (
	timerPublishers = 4
	maxQueuedTimers = 100_000
	// timerRetryMax caps the wait between tries of a timer the broker refused.
	timerRetryMax = 5 * time.Second
)

var _ orderpay.Timers = (*TimerQueue)(nil)

type queuedTimer struct {
	at      time.Time
	payload []byte
}

// timerShard is one publisher's queue: names in the order they were first queued, and
// each name's latest timer.
type timerShard struct {
	mu      sync.Mutex
	order   []string
	pending map[string]queuedTimer
	wake    chan struct{} // a timer was queued
	retry   chan struct{} // the bus became ready: try a refused timer again now
}

// Timers returns the bus's timer queue, started on first use and stopped by Close.
func (b *Bus) Timers() *TimerQueue {
	b.timerOnce.Do(func() {
		q := &TimerQueue{bus: b, log: b.log.With("component", "timer-queue")}
		for range timerPublishers {
			q.shards = append(q.shards, &timerShard{pending: map[string]queuedTimer{}, wake: make(chan struct{}, 1), retry: make(chan struct{}, 1)})
		}
		b.OnReady(q.wakeAll)
		for _, sh := range q.shards {
			b.bgWG.Add(1)
			go func() {
				defer b.bgWG.Done()
				q.publish(sh)
			}()
		}
		b.timerQ = q
	})
	return b.timerQ
}

// SetTimer queues the timer and returns at once; it never fails for the broker's sake.
func (q *TimerQueue) SetTimer(_ context.Context, name string, at time.Time, payload []byte) error {
	sh := q.shards[shardOf(name, len(q.shards))]
	sh.mu.Lock()
	if _, queued := sh.pending[name]; !queued {
		if len(sh.order) >= maxQueuedTimers/len(q.shards) {
			sh.mu.Unlock()
			q.drop(name)
			return nil
		}
		sh.order = append(sh.order, name)
	}
	sh.pending[name] = queuedTimer{at: at, payload: payload}
	sh.mu.Unlock()
	select {
	case sh.wake <- struct{}{}:
	default:
	}
	return nil
}

// Len is the number of timers waiting to be set on the broker.
func (q *TimerQueue) Len() int {
	n := 0
	for _, sh := range q.shards {
		sh.mu.Lock()
		n += len(sh.order)
		sh.mu.Unlock()
	}
	return n
}

// drop logs a timer the full queue could not take, at most once a minute with the count.
func (q *TimerQueue) drop(name string) {
	q.dropMu.Lock()
	defer q.dropMu.Unlock()
	q.dropped++
	if now := time.Now(); now.Sub(q.lastDrop) >= time.Minute {
		q.log.Warn("timer queue full: timers dropped; the sweeper takes them when due", "dropped", q.dropped, "last", name)
		q.lastDrop, q.dropped = now, 0
	}
}

func (q *TimerQueue) wakeAll() {
	for _, sh := range q.shards {
		select {
		case sh.retry <- struct{}{}:
		default:
		}
	}
}

// publish sets sh's timers on the broker, oldest name first, until the bus closes.
func (q *TimerQueue) publish(sh *timerShard) {
	ctx := q.bus.bg
	failures := 0
	for {
		sh.mu.Lock()
		var name string
		var t queuedTimer
		if len(sh.order) > 0 {
			name = sh.order[0]
			t = sh.pending[name]
		}
		sh.mu.Unlock()
		if name == "" {
			select {
			case <-ctx.Done():
				return
			case <-sh.wake:
			}
			continue
		}
		err := q.bus.SetTimer(ctx, name, t.at, t.payload)
		if ctx.Err() != nil {
			return
		}
		if orderpay.ErrorCode(err) == orderpay.EINVALID {
			// Never settable: trying again would hold up every timer behind it.
			q.log.Error("timer dropped; the sweeper takes it when due", "timer", name, "err", err)
			sh.done(name, t)
			continue
		}
		if err != nil {
			failures++
			wait := min(attachRetryMin<<min(failures-1, 10), timerRetryMax)
			if failures == 1 || failures%20 == 0 {
				q.log.Warn("timer not set yet; retrying", "timer", name, "queued", q.Len(), "failures", failures, "retry_in", wait, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-sh.retry:
			case <-time.After(wait):
			}
			continue
		}
		failures = 0
		sh.done(name, t)
	}
}

// done removes name, the shard's first, once t is set; unless it was set again meanwhile:
// then its newer timer stays queued, at the front, and goes next.
func (sh *timerShard) done(name string, t queuedTimer) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cur := sh.pending[name]; cur.at.Equal(t.at) && string(cur.payload) == string(t.payload) {
		delete(sh.pending, name)
		sh.order = sh.order[1:]
	}
}

func shardOf(name string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

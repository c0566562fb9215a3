package natsbus

import (
	"container/heap"
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
// A timer due further ahead than the bus's TimerHorizon (a minute) waits in the process
// until it is that close, and only then goes onto the broker. That is what keeps a million
// pending timers within a gigabyte: on the broker a timer costs about a kilobyte of memory
// (its subject's index entries, its schedule, its message in the block cache, and the
// garbage collector's headroom over all of that), while waiting here it costs one map entry
// and one heap slot, some 150 bytes with its name and payload (farTimer). Waiting here is no
// less safe: a timer lost with this process is taken by the sweeper, as one lost with the
// broker is. A far timer does not withdraw a near one already set on the broker under the
// same name; handlers check the due time the payload carries.
//
// Setting a name that is still queued replaces the queued timer in place, as the broker
// would. Timers of one name are published by one publisher, in the order they were set, so
// the broker ends with the last. The queue is bounded (maxQueuedTimers): past that, new
// names are dropped and logged, and Close drops what is left; the sweeper over the
// pending-query table takes those when they are due.
type TimerQueue struct {
	bus    *Bus
	shards []*timerShard
	far    farTimers
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
	// maxFarTimers bounds the timers waiting in the process for their horizon (some 150
	// bytes each: 2,000,000 are about 300 MB); past it new names are dropped and logged.
	maxFarTimers = 2_000_000
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
		q.far = farTimers{byName: map[string]farTimer{}, wake: make(chan struct{}, 1)}
		b.OnReady(q.wakeAll)
		b.bgWG.Add(1)
		go func() {
			defer b.bgWG.Done()
			q.moveFar()
		}()
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
	if h := q.bus.cfg.TimerHorizon; h > 0 && time.Until(at) > h {
		q.setFar(name, at, payload)
		return nil
	}
	q.far.forget(name)
	q.setNear(name, at, payload)
	return nil
}

// setNear queues the timer for the broker now.
func (q *TimerQueue) setNear(name string, at time.Time, payload []byte) {
	sh := q.shards[shardOf(name, len(q.shards))]
	sh.mu.Lock()
	if _, queued := sh.pending[name]; !queued {
		if len(sh.order) >= maxQueuedTimers/len(q.shards) {
			sh.mu.Unlock()
			q.drop(name)
			return
		}
		sh.order = append(sh.order, name)
	}
	sh.pending[name] = queuedTimer{at: at, payload: payload}
	sh.mu.Unlock()
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// farTimers are the timers waiting for their horizon: the latest of each name, and a heap
// of (due time, name) in which an entry whose name has since been set again, or forgotten,
// is skipped when it comes up.
type farTimers struct {
	mu     sync.Mutex
	byName map[string]farTimer
	heap   farHeap
	wake   chan struct{} // a timer earlier than every other was added
}

type farTimer struct {
	at      int64 // unix nanoseconds
	payload []byte
}

type farEntry struct {
	at   int64
	name string // shares its bytes with the byName key
}

type farHeap []farEntry

func (h farHeap) Len() int           { return len(h) }
func (h farHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h farHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *farHeap) Push(x any)        { *h = append(*h, x.(farEntry)) }
func (h *farHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (q *TimerQueue) setFar(name string, at time.Time, payload []byte) {
	f := &q.far
	f.mu.Lock()
	if _, ok := f.byName[name]; !ok && len(f.byName) >= maxFarTimers {
		f.mu.Unlock()
		q.drop(name)
		return
	}
	ns := at.UnixNano()
	f.byName[name] = farTimer{at: ns, payload: payload}
	heap.Push(&f.heap, farEntry{at: ns, name: name})
	first := f.heap[0].at == ns
	// Entries of names set again pile up in the heap; when they are most of it, drop them.
	if len(f.heap) > 2*len(f.byName)+1024 {
		live := f.heap[:0]
		for _, e := range f.heap {
			if t, ok := f.byName[e.name]; ok && t.at == e.at {
				live = append(live, e)
			}
		}
		clear(f.heap[len(live):])
		f.heap = live
		heap.Init(&f.heap)
	}
	f.mu.Unlock()
	if first {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// forget drops a far timer of name: it was set again, nearer.
func (f *farTimers) forget(name string) {
	f.mu.Lock()
	delete(f.byName, name)
	f.mu.Unlock()
}

// Far is the number of timers waiting in the process for their horizon.
func (q *TimerQueue) Far() int {
	q.far.mu.Lock()
	defer q.far.mu.Unlock()
	return len(q.far.byName)
}

// moveFar hands each far timer to the broker's queue once it is within the horizon, until
// the bus closes.
func (q *TimerQueue) moveFar() {
	ctx, f, horizon := q.bus.bg, &q.far, q.bus.cfg.TimerHorizon
	for {
		f.mu.Lock()
		var wait time.Duration = -1
		edge := time.Now().Add(horizon).UnixNano()
		type move struct {
			name string
			t    farTimer
		}
		var moves []move
		for len(f.heap) > 0 && len(moves) < 1024 {
			e := f.heap[0]
			if e.at > edge {
				wait = time.Duration(e.at - edge)
				break
			}
			heap.Pop(&f.heap)
			if t, ok := f.byName[e.name]; ok && t.at == e.at {
				delete(f.byName, e.name)
				moves = append(moves, move{e.name, t})
			}
		}
		f.mu.Unlock()
		for _, m := range moves {
			q.setNear(m.name, time.Unix(0, m.t.at), m.t.payload)
		}
		if len(moves) == 1024 {
			continue
		}
		var tick <-chan time.Time
		var t *time.Timer
		if wait >= 0 {
			t = time.NewTimer(wait)
			tick = t.C
		}
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-tick:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
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

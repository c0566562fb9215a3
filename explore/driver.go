package explore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"orderpay"
)

// The driver runs a case's operations one step at a time. Each operation runs in a
// goroutine of its own with a Stepper in its context; at every step it tells the driver
// and waits. The driver alone decides which operation goes on next, so that one case runs
// the same way every time: one operation moves at a time, and the others wait at a step,
// or for a lock the moving one holds.

type opState int

const (
	parked  opState = iota // at a step, waiting for the driver
	running                // granted; the driver waits for its next event
	blocked                // waiting for a lock another operation holds
	done
)

type evKind int

const (
	evStep evKind = iota
	evWaiting
	evNote
	evDone
	evReleased
)

type event struct {
	run  *opRun
	kind evKind
	step orderpay.StepKind
	what string
}

// crashed is the panic that ends an operation crashed at a step.
type crashed struct{}

// opRun is one operation running in a case.
type opRun struct {
	d      *driver
	label  string // "A", "B"
	op     *Op
	grant  chan bool // true: go on; false: crash here
	state  opState
	steps  int    // steps reached so far
	at     string // the step it is parked at
	woke   *event // a step it reached while another moved, not yet traced
	notes  []string
	cancel context.CancelFunc
	dead   atomic.Bool // crashed: every later step ends it again
	err    error
	panic  any
	stalls int
	// rowLock: blocked in PostgreSQL on a row lock (counted in pg_stat_activity).
	rowLock bool
	// waitsOn is what it blocked waiting for ("write lock", "row lock", ...), and
	// releasesBefore the driver's count of releases when it did.
	waitsOn        string
	releasesBefore int
}

func (r *opRun) Step(ctx context.Context, kind orderpay.StepKind, what string) {
	if r.dead.Load() {
		panic(crashed{})
	}
	r.d.events <- event{run: r, kind: evStep, step: kind, what: what}
	if !<-r.grant {
		r.dead.Store(true)
		panic(crashed{})
	}
}

func (r *opRun) Waiting(ctx context.Context, on string) {
	r.d.events <- event{run: r, kind: evWaiting, what: on}
}

func (r *opRun) Note(ctx context.Context, effect string) {
	r.d.events <- event{run: r, kind: evNote, what: effect}
}

func (r *opRun) Released(ctx context.Context, what string) {
	r.d.events <- event{run: r, kind: evReleased, what: what}
}

type driver struct {
	events chan event
	trace  *Trace
	// pg counts the sessions of this case's database waiting for a lock (nil on SQLite).
	pg     *sql.DB
	dbName string
	// stall is how long an operation may go without a step before it is taken as waiting
	// for something the driver cannot see; stuck is set when every operation waits.
	stall time.Duration
	stuck bool
	// tick moves the virtual clock on a second.
	tick func()
	runs []*opRun
	// releases counts the transactions ended and write locks let go by the operations.
	releases int
}

func newDriver(t *Trace) *driver {
	return &driver{events: make(chan event, 1024), trace: t, stall: 10 * time.Second}
}

// start runs op in a goroutine of its own, as label, until its first step.
func (d *driver) start(ctx context.Context, w *World, op *Op, label string) *opRun {
	r := &opRun{d: d, label: label, op: op, grant: make(chan bool), state: running}
	d.runs = append(d.runs, r)
	ctx, r.cancel = context.WithCancel(ctx)
	ctx = orderpay.WithStepper(ctx, r)
	d.trace.add("%s starts %s", label, op.Name)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(crashed); !ok {
					r.panic = p
				}
			}
			d.events <- event{run: r, kind: evDone}
		}()
		r.err = op.Run(ctx, w, r.label)
	}()
	d.wait(r)
	return r
}

// advance lets r, parked at a step, go on to its next step, its end, or a lock.
func (d *driver) advance(r *opRun) {
	if r.state != parked {
		panic("explore: advance of an operation not parked")
	}
	r.state = running
	r.grant <- true
	d.wait(r)
}

// crash ends r where it is parked, as a crash would: its transaction is rolled back, and
// nothing after the step runs.
func (d *driver) crash(r *opRun) {
	d.trace.add("%s crashes at step %d (%s)", r.label, r.steps, r.at)
	r.state = running
	r.grant <- false
	r.cancel()
	d.wait(r)
}

// wait waits until r parks, ends or blocks, tracing its steps and effects. Events of other
// operations that arrive meanwhile (one waking from a lock and reaching its next step) are
// kept, and traced when the driver turns to them.
func (d *driver) wait(r *opRun) {
	d.await(r)
	d.collectWakes(r)
}

// wakeGrace* is how long the driver waits, after the moving operation stopped, for those
// waiting on a lock to wake: a lock it let go is taken at once (a SQLite write lock in
// microseconds, a PostgreSQL row lock in a few milliseconds), and what runs next must not
// depend on how fast that was. An operation waiting for SQLite's write lock or a row lock
// can wake only once an operation let one go (released): until then the driver does not
// wait for it. One waiting for something else (a lease, a poll) may wake at any time.
const (
	wakeGraceSQLite   = 20 * time.Millisecond
	wakeGracePostgres = 50 * time.Millisecond
)

func (d *driver) collectWakes(r *opRun) {
	grace := wakeGraceSQLite
	if d.pg != nil {
		grace = wakeGracePostgres
	}
	var deadline <-chan time.Time
	for {
		waiting := false
		for _, o := range d.runs {
			if o.state == blocked && o.woke == nil && d.mayWake(o) {
				waiting = true
			}
		}
		if !waiting {
			return
		}
		if deadline == nil {
			deadline = time.After(grace)
		}
		select {
		case ev := <-d.events:
			d.other(ev)
		case <-deadline:
			return
		}
	}
}

// mayWake tells whether o, blocked, may have woken by now.
func (d *driver) mayWake(o *opRun) bool {
	switch {
	case o.rowLock, o.waitsOn == "write lock":
		return d.releases > o.releasesBefore
	default:
		return true
	}
}

func (d *driver) await(r *opRun) {
	var poll <-chan time.Time
	if d.pg != nil {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	lastEvent := time.Now()
	for {
		select {
		case ev := <-d.events:
			if ev.run != r {
				d.other(ev)
				continue
			}
			lastEvent = time.Now()
			switch ev.kind {
			case evNote:
				r.notes = append(r.notes, ev.what)
				continue
			case evReleased:
				d.releases++
				continue
			case evWaiting:
				d.flush(r)
				r.state, r.waitsOn, r.releasesBefore = blocked, ev.what, d.releases
				d.trace.add("%s waits for the %s", r.label, ev.what)
				return
			case evStep:
				d.park(r, ev)
				return
			case evDone:
				d.end(r)
				return
			}
		case <-poll:
			if n := d.lockWaits(); n > d.rowLocked() {
				d.flush(r)
				r.state, r.rowLock, r.waitsOn, r.releasesBefore = blocked, true, "row lock", d.releases
				d.trace.add("%s waits for a row lock", r.label)
				return
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(lastEvent) > d.stall {
			d.flush(r)
			r.state, r.waitsOn = blocked, ""
			d.trace.add("%s stalls (no step for %s): taken as waiting", r.label, d.stall)
			return
		}
	}
}

// other keeps an event of an operation the driver is not waiting for.
func (d *driver) other(ev event) {
	o := ev.run
	switch ev.kind {
	case evNote:
		o.notes = append(o.notes, ev.what)
	case evReleased:
		d.releases++
	case evStep, evDone:
		e := ev
		o.woke = &e
	case evWaiting:
		// a woken operation that waits again: still blocked
	}
}

// resume makes o, blocked, current again: if it woke meanwhile, its step is traced now;
// if not, the driver waits for it.
func (d *driver) resume(o *opRun) {
	if o.woke == nil {
		o.state = running
		d.wait(o)
		return
	}
	ev := *o.woke
	o.woke, o.rowLock = nil, false
	if ev.kind == evDone {
		d.end(o)
		return
	}
	d.park(o, ev)
}

func (d *driver) park(r *opRun, ev event) {
	d.flush(r)
	r.steps++
	r.at = string(ev.step)
	if ev.what != "" {
		r.at += " " + ev.what
	}
	r.state, r.rowLock, r.stalls = parked, false, 0
	d.trace.add("%s#%d %s", r.label, r.steps, r.at)
}

func (d *driver) end(r *opRun) {
	d.flush(r)
	r.state = done
	switch {
	case r.panic != nil:
		d.trace.add("%s PANICS: %v", r.label, r.panic)
	case r.dead.Load():
		d.trace.add("%s is gone (crashed)", r.label)
	case r.err != nil:
		d.trace.add("%s ends: %s", r.label, errText(r.err))
	default:
		d.trace.add("%s ends: ok", r.label)
	}
}

func (d *driver) flush(r *opRun) {
	for _, n := range r.notes {
		d.trace.add("    %s", n)
	}
	r.notes = r.notes[:0]
}

func errText(err error) string {
	code := orderpay.ErrorCode(err)
	msg := orderpay.ErrorMessage(err)
	if code == "" {
		return msg
	}
	return code + " " + msg
}

// lockWaits counts the case database's sessions waiting for a lock.
func (d *driver) lockWaits() int {
	var n int
	_ = d.pg.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, d.dbName).Scan(&n)
	return n
}

// rowLocked is how many of the waits counted are already known.
func (d *driver) rowLocked() int {
	n := 0
	for _, r := range d.runs {
		if r.state == blocked && r.rowLock && r.woke == nil {
			n++
		}
	}
	return n
}

// abandon ends every operation still running, when a case stops early (stuck, or no
// such step): each parked one crashes where it is, so that nothing it holds outlives the
// case; one waiting for a lock is let go once the others are gone.
func (d *driver) abandon() {
	for _, r := range d.runs {
		if r.state == parked {
			d.crash(r)
		}
	}
	for _, r := range d.runs {
		if r.state != done {
			r.cancel()
			for r.woke == nil && r.state != done {
				ev := <-d.events
				if ev.run == r && ev.kind == evDone {
					d.end(r)
				} else if ev.kind != evNote {
					d.other(ev)
				}
			}
			if r.state != done && r.woke != nil {
				d.resume(r)
				if r.state == parked {
					d.crash(r)
				}
			}
		}
	}
}

// finish runs r to its end. When r waits for a lock another operation holds, that one
// goes on (to its end, or until it waits in turn), and r after it.
func (d *driver) finish(r *opRun, others ...*opRun) {
	for r.state != done && !d.stuck {
		switch r.state {
		case parked:
			d.advance(r)
		case blocked:
			moved := false
			for _, o := range others {
				if o.state == parked {
					d.finish(o, append(without(others, o), r)...)
					moved = true
					break
				}
				if o.state == blocked && o.woke != nil {
					d.resume(o)
					moved = true
					break
				}
			}
			if !moved {
				// Nothing else can move: time passes for the one that waits (a lease or a
				// poll runs out on the virtual clock).
				if r.stalls++; r.stalls > 60 {
					d.stuck = true
					d.trace.add("STUCK: every operation waits")
					return
				}
				if r.woke == nil && d.tick != nil {
					d.tick()
					d.trace.add("(a second passes)")
				}
				d.resume(r)
			}
		}
	}
}

func without(rs []*opRun, x *opRun) []*opRun {
	var out []*opRun
	for _, r := range rs {
		if r != x {
			out = append(out, r)
		}
	}
	return out
}

// Trace is what a case did, step by step, for its replay.
type Trace struct {
	lines []string
}

func (t *Trace) add(format string, args ...any) {
	t.lines = append(t.lines, fmt.Sprintf(format, args...))
}

// String is the trace, one line per event.
func (t *Trace) String() string { return strings.Join(t.lines, "\n") + "\n" }

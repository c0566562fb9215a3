package chaos

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"orderpay/natsbus"
)

// The timer benchmark: 1,000,000 pending deadlines and queries, whose goal is a fire
// lateness p99 ≤ 1 s with the process RSS ≤ 1 GiB. It runs the broker orderpay
// runs by default, an embedded JetStream with its file store, in this process, so that the
// RSS it reports is the broker's and the handlers' together, as in `orderpay serve`.

// Defaults of TimerBenchConfig.
const (
	DefaultTimerBenchTimers = 1_000_000
	// DefaultTimerBenchWindow spreads the due times over 5 minutes: 1,000,000 timers then
	// fire at 3,333 a second, some 800 times the rate of 1,000,000 deadlines spread over
	// the 3-day normal pay window, so that a busy broker and busy handlers are what is
	// measured; and the whole run (set, window, drain) stays under ten minutes.
	DefaultTimerBenchWindow = 5 * time.Minute
	// DefaultTimerBenchLead is the time from the start of the set phase to the first due
	// time. It must exceed the set phase, so that all the timers are pending at once (the
	// report counts those set after they were due): 2 minutes covers 1,000,000 sets at
	// 8,300 a second or more.
	DefaultTimerBenchLead           = 2 * time.Minute
	DefaultTimerBenchSetConcurrency = 64
	DefaultTimerBenchWorkers        = 16
	// DefaultTimerBenchDrain is how long after the last due time the bench waits for
	// timers that have not fired before it calls them missing.
	DefaultTimerBenchDrain = 2 * time.Minute
)

// TimerBenchConfig is one timer benchmark run. Zero fields take the documented defaults.
type TimerBenchConfig struct {
	// Timers is how many timers are set: half named like deadlines ("deadline.<order_no>"),
	// half like active queries ("query.<out_trade_no>", payment.QueryTimerName). Defaults to
	// 1,000,000.
	Timers int
	// Window is the span the due times are spread over, evenly, in an order unrelated to the
	// order they are set in. Defaults to 5 minutes.
	Window time.Duration
	// Lead is the time from the start of the set phase to the first due time. Defaults to 2
	// minutes.
	Lead time.Duration
	// SetConcurrency is how many SetTimer calls are in flight at once. Defaults to 64.
	SetConcurrency int
	// Workers is the handler goroutines of each of the two consumers (deadlines, queries),
	// as serve runs 16 for its queries. Defaults to 16.
	Workers int
	// HandlerTime is how long each handler call takes (a sleep standing for the database
	// and the channel); timers that wait for a free worker are late by that wait. Defaults
	// to 0.
	HandlerTime time.Duration
	// Drain is how long after the last due time the bench waits for the rest to fire.
	// Defaults to 2 minutes.
	Drain time.Duration
	// StoreDir is the JetStream store. Defaults to a temp dir, removed afterwards.
	StoreDir string
	// Horizon is the bus's TimerHorizon: timers are set through the bus's timer queue, as
	// serve sets them, and a timer due further ahead waits in the process until it is this
	// close. Defaults to natsbus.DefaultTimerHorizon; negative sets every timer on the
	// broker at once.
	Horizon time.Duration
	// Seed orders the due times. Defaults to 1.
	Seed uint64
	// Progress receives a line every 10 seconds. Defaults to none.
	Progress io.Writer
	// MemoryLimit is the Go runtime's soft memory limit for the run (debug.SetMemoryLimit,
	// the GOMEMLIMIT of serve), in bytes; 0 leaves the process's own. Without one the
	// collector lets the heap grow to twice what is live, and the broker holds some 650
	// MiB live while a million timers fire in random order (its schedule index, subject
	// trees and cached store blocks).
	MemoryLimit int64
}

func (c TimerBenchConfig) withDefaults() TimerBenchConfig {
	c.Timers = cmp.Or(c.Timers, DefaultTimerBenchTimers)
	c.Window = cmp.Or(c.Window, DefaultTimerBenchWindow)
	c.Lead = cmp.Or(c.Lead, DefaultTimerBenchLead)
	c.SetConcurrency = cmp.Or(c.SetConcurrency, DefaultTimerBenchSetConcurrency)
	c.Workers = cmp.Or(c.Workers, DefaultTimerBenchWorkers)
	c.Drain = cmp.Or(c.Drain, DefaultTimerBenchDrain)
	c.Seed = cmp.Or(c.Seed, 1)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c TimerBenchConfig) validate() error {
	switch {
	case c.Timers < 2:
		return errors.New("timer bench: at least 2 timers (one deadline, one query)")
	case c.Window <= 0, c.Lead <= 0, c.Drain <= 0:
		return errors.New("timer bench: window, lead and drain must be positive")
	case c.SetConcurrency < 1, c.Workers < 1:
		return errors.New("timer bench: set concurrency and workers must be at least 1")
	case c.HandlerTime < 0:
		return errors.New("timer bench: handler time must not be negative")
	}
	return nil
}

// TimerBenchReport is what a timer benchmark measured.
type TimerBenchReport struct {
	Timers         int     `json:"timers"`
	WindowSeconds  float64 `json:"window_seconds"`
	LeadSeconds    float64 `json:"lead_seconds"`
	SetConcurrency int     `json:"set_concurrency"`
	Workers        int     `json:"workers_per_consumer"`
	HandlerTimeMS  float64 `json:"handler_time_ms"`
	// MemoryLimitBytes is the Go soft memory limit the run had; 0 for none.
	MemoryLimitBytes int64 `json:"memory_limit_bytes"`

	// Set phase.
	Set          int     `json:"set"`
	SetErrors    int     `json:"set_errors"` // SetTimer calls that failed (retried up to 3 times)
	SetSeconds   float64 `json:"set_seconds"`
	SetPerSecond float64 `json:"set_per_second"`
	// SetAfterDue counts timers whose SetTimer returned after their due time: they were
	// never all pending at once, and their lateness includes the set.
	SetAfterDue int `json:"set_after_due"`
	// Pending is the stream's message count once every timer was set, and InProcess the
	// timers then waiting in the process for their horizon (or to be published).
	Pending   int `json:"pending_after_set"`
	InProcess int `json:"in_process_after_set"`
	// HorizonSeconds is the bus's timer horizon; negative: none.
	HorizonSeconds float64 `json:"horizon_seconds"`

	// Fire phase.
	Fired       int     `json:"fired"`       // timers handled at least once
	Duplicates  int     `json:"duplicates"`  // handler calls beyond the first, per timer
	Missing     int     `json:"missing"`     // set, but never handled
	Redelivered int     `json:"redelivered"` // handler calls with Delivered > 1
	LateOver1s  int     `json:"late_over_1s"`
	LatenessP50 float64 `json:"lateness_p50_ms"` // time.Now() − Timer.Due at the handler's start
	LatenessP99 float64 `json:"lateness_p99_ms"`
	LatenessMax float64 `json:"lateness_max_ms"`
	// ClientErrors counts the NATS client's asynchronous errors by text ("nats: slow
	// consumer, messages dropped").
	ClientErrors map[string]int64 `json:"client_errors,omitempty"`
	// LeftInStream is the stream's message count at the end: 0 when every schedule was
	// purged and every fired timer acked.
	LeftInStream int `json:"left_in_stream"`

	// Memory and disk.
	PeakRSSBytes   int64     `json:"peak_rss_bytes"`        // VmHWM of /proc/self/status at the end
	MaxSampledRSS  int64     `json:"max_sampled_rss_bytes"` // the largest VmRSS sampled every 250 ms
	GoHeapSysBytes int64     `json:"go_heap_sys_bytes"`     // runtime.MemStats.HeapSys at the end
	StoreBytesPeak int64     `json:"store_bytes_after_set"` // the JetStream store on disk, all timers pending
	StoreBytesEnd  int64     `json:"store_bytes_end"`
	TotalSeconds   float64   `json:"total_seconds"`
	FirstDueAt     time.Time `json:"first_due_at"`
	LastDueAt      time.Time `json:"last_due_at"`
}

// Pass reports whether the run met the goal: every timer fired exactly once, lateness p99 ≤
// 1 s, and the peak RSS ≤ 1 GiB.
func (r *TimerBenchReport) Pass() bool {
	return r.Set == r.Timers && r.Fired == r.Set && r.Missing == 0 && r.Duplicates == 0 &&
		r.LatenessP99 <= 1000 && r.PeakRSSBytes > 0 && r.PeakRSSBytes <= 1<<30
}

// timerName is the name of timer i: even ones are deadlines, named after an order number,
// odd ones active queries, named after the out_trade_no of the order's first attempt, as
// payment.QueryTimerName names them. Both have the subject lengths of real ones (20-digit
// order numbers).
func timerName(i int) string {
	orderNo := fmt.Sprintf("%s%014d", benchOrderPrefix, i/2)
	if i%2 == 0 {
		return "deadline." + orderNo
	}
	return "query.P" + orderNo + "A01"
}

const benchOrderPrefix = "202611"

// timerIndex is the inverse of timerName.
func timerIndex(name string) (int, bool) {
	var no string
	var odd int
	if s, ok := strings.CutPrefix(name, "deadline."); ok {
		no = s
	} else if s, ok := strings.CutPrefix(name, "query.P"); ok {
		if no, ok = strings.CutSuffix(s, "A01"); !ok {
			return 0, false
		}
		odd = 1
	} else {
		return 0, false
	}
	digits, ok := strings.CutPrefix(no, benchOrderPrefix)
	if !ok || len(digits) != 14 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > 1<<40 {
		return 0, false
	}
	return int(n)*2 + odd, true
}

// ProcMemory is the resident set of a process, from /proc/<pid>/status.
type ProcMemory struct {
	RSS int64 // VmRSS, bytes: resident now
	HWM int64 // VmHWM, bytes: the peak resident set so far
}

// ParseProcStatus reads VmRSS and VmHWM out of a /proc/<pid>/status file.
func ParseProcStatus(r io.Reader) (ProcMemory, error) {
	var m ProcMemory
	var seen int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			return m, fmt.Errorf("proc status: %s: unexpected value %q", key, val)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("proc status: %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if seen < 2 {
		return m, errors.New("proc status: no VmRSS and VmHWM")
	}
	return m, nil
}

// selfMemory is this process's resident set; zero where /proc is missing.
func selfMemory() ProcMemory {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ProcMemory{}
	}
	defer f.Close()
	m, _ := ParseProcStatus(f)
	return m
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// LatenessSummary summarises lateness: p50, p99 (nearest rank) and max in milliseconds, and
// how many exceed 1 s. It sorts ds.
func LatenessSummary(ds []time.Duration) (p50, p99, maxMS float64, over1s int) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0, 0, 0, 0
	}
	i, _ := slices.BinarySearch(ds, time.Second+1)
	return ms(Percentile(ds, 50)), ms(Percentile(ds, 99)), ms(ds[len(ds)-1]), len(ds) - i
}

// TimerBench sets cfg.Timers timers on an embedded JetStream in this process, due evenly
// over cfg.Window starting cfg.Lead after the set phase begins, handles them with
// natsbus.HandleTimers, and measures how late each fired, whether each fired exactly once,
// and the process's resident memory and the store's size on disk.
func TimerBench(ctx context.Context, cfg TimerBenchConfig) (*TimerBenchReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir := cfg.StoreDir
	if dir == "" {
		d, err := os.MkdirTemp("", "orderpay-timerbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if cfg.MemoryLimit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(cfg.MemoryLimit))
	}
	started := time.Now()
	bus, err := natsbus.Open(ctx, natsbus.Config{StoreDir: dir, TimerHorizon: cfg.Horizon})
	if err != nil {
		return nil, err
	}
	defer bus.Close()

	n := cfg.Timers
	rep := &TimerBenchReport{Timers: n, WindowSeconds: cfg.Window.Seconds(), LeadSeconds: cfg.Lead.Seconds(),
		SetConcurrency: cfg.SetConcurrency, Workers: cfg.Workers, HandlerTimeMS: ms(cfg.HandlerTime),
		HorizonSeconds: cmp.Or(cfg.Horizon, natsbus.DefaultTimerHorizon).Seconds()}
	queue := bus.Timers()
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		rep.MemoryLimitBytes = limit
	}

	// RSS, sampled through the whole run; VmHWM covers what the samples miss.
	var maxRSS atomic.Int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if m := selfMemory(); m.RSS > maxRSS.Load() {
				maxRSS.Store(m.RSS)
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopSampling(); <-sampled }()

	// The client's asynchronous errors: a slow consumer here means the timer iterator
	// dropped messages, and those come back only when the pull request is given up on.
	var clientErrs sync.Map // error text → *atomic.Int64
	bus.Conn().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c, _ := clientErrs.LoadOrStore(err.Error(), new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	})

	// What the handlers saw, per timer.
	fires := make([]atomic.Int32, n)
	late := make([]time.Duration, n) // written once, by the first handler call of the timer
	var fired, dups, redelivered, strangers atomic.Int64
	handle := func(_ context.Context, t natsbus.Timer) error {
		lateness := time.Since(t.Due)
		i, ok := timerIndex(t.Name)
		if !ok || i >= n {
			strangers.Add(1)
			return nil
		}
		if t.Delivered > 1 {
			redelivered.Add(1)
		}
		if fires[i].Add(1) == 1 {
			late[i] = lateness
			fired.Add(1)
		} else {
			dups.Add(1)
		}
		if cfg.HandlerTime > 0 {
			time.Sleep(cfg.HandlerTime)
		}
		return nil
	}
	// Two consumers, as deadlines and queries would have in serve.
	for _, c := range []struct{ durable, pattern string }{{"bench-deadlines", "deadline.>"}, {"bench-queries", "query.>"}} {
		stop, err := bus.HandleTimers(ctx, c.durable, c.pattern, cfg.Workers, handle)
		if err != nil {
			return nil, err
		}
		defer stop()
	}

	// Due times: evenly spaced over the window, assigned to the timers in a random order,
	// so that the store holds them in an order unrelated to when they fire.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7133))
	slot := rng.Perm(n)
	setStart := time.Now()
	base := setStart.Add(cfg.Lead)
	due := func(i int) time.Time {
		return base.Add(time.Duration((float64(slot[i]) + 0.5) * float64(cfg.Window) / float64(n)))
	}
	rep.FirstDueAt, rep.LastDueAt = base, base.Add(cfg.Window)
	payloadQuery := []byte(`{"attempts":0}`)

	var next, setOK, setErrs, setLate atomic.Int64
	progressDone := make(chan struct{})
	progressStop := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-progressStop:
				return
			case <-t.C:
			}
			fmt.Fprintf(cfg.Progress, "timers: %4.0fs  set %d/%d  fired %d  duplicates %d  rss %s  %s\n",
				time.Since(started).Seconds(), setOK.Load(), n, fired.Load(), dups.Load(), mib(selfMemory().RSS), brokerState(ctx, bus, queue))
		}
	}()
	defer func() { close(progressStop); <-progressDone }()

	var wg sync.WaitGroup
	for range cfg.SetConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				at := due(i)
				var err error
				for try := 0; try < 3; try++ {
					if err = queue.SetTimer(ctx, timerName(i), at, payloadQuery); err == nil {
						break
					}
					setErrs.Add(1)
				}
				if err != nil {
					continue
				}
				setOK.Add(1)
				if time.Now().After(at) {
					setLate.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.SetSeconds = round3(time.Since(setStart).Seconds())
	rep.Set, rep.SetErrors, rep.SetAfterDue = int(setOK.Load()), int(setErrs.Load()), int(setLate.Load())
	rep.SetPerSecond = round1(float64(rep.Set) / time.Since(setStart).Seconds())
	stream, err := bus.JetStream().Stream(ctx, natsbus.TimerStream)
	if err != nil {
		return nil, err
	}
	if info, err := stream.Info(ctx); err == nil {
		rep.Pending = int(info.State.Msgs)
	}
	rep.InProcess = queue.Far() + queue.Len()
	rep.StoreBytesPeak = dirSize(dir)
	fmt.Fprintf(cfg.Progress, "timers: set %d in %.1fs (%.0f/s), %d pending in the stream, store %s on disk\n",
		rep.Set, rep.SetSeconds, rep.SetPerSecond, rep.Pending, mib(rep.StoreBytesPeak))

	// Fire phase: until every timer set has fired and the stream is empty (every schedule
	// purged, every fired timer acked), or the drain after the last due time is over.
	giveUp := rep.LastDueAt.Add(cfg.Drain)
	for {
		if fired.Load() >= int64(rep.Set) {
			if info, err := stream.Info(ctx); err == nil && info.State.Msgs == 0 {
				break
			}
		}
		if time.Now().After(giveUp) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// A redelivery of an acked timer would show here (acks are waited for within AckWait).
	time.Sleep(2 * time.Second)
	if info, err := stream.Info(ctx); err == nil {
		rep.LeftInStream = int(info.State.Msgs)
	}

	lat := make([]time.Duration, 0, n)
	for i := range fires {
		if fires[i].Load() > 0 {
			lat = append(lat, late[i])
		}
	}
	rep.Fired = len(lat)
	rep.Duplicates, rep.Redelivered = int(dups.Load()), int(redelivered.Load())
	rep.Missing = rep.Set - rep.Fired
	rep.LatenessP50, rep.LatenessP99, rep.LatenessMax, rep.LateOver1s = LatenessSummary(lat)

	clientErrs.Range(func(k, v any) bool {
		if rep.ClientErrors == nil {
			rep.ClientErrors = map[string]int64{}
		}
		rep.ClientErrors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})

	mem := selfMemory()
	rep.PeakRSSBytes, rep.MaxSampledRSS = mem.HWM, max(maxRSS.Load(), mem.RSS)
	var goMem runtime.MemStats
	runtime.ReadMemStats(&goMem)
	rep.GoHeapSysBytes = int64(goMem.HeapSys)
	rep.StoreBytesEnd = dirSize(dir)
	rep.TotalSeconds = round3(time.Since(started).Seconds())
	if s := strangers.Load(); s > 0 {
		return rep, fmt.Errorf("timer bench: %d timers fired that were never set", s)
	}
	return rep, nil
}

// brokerState is the timer stream's message count and each consumer's backlog, for the
// progress line: where timers wait when they are late.
func brokerState(ctx context.Context, bus *natsbus.Bus, queue *natsbus.TimerQueue) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	js := bus.JetStream()
	s, err := js.Stream(ctx, natsbus.TimerStream)
	if err != nil {
		return "stream: " + err.Error()
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "stream: " + err.Error()
	}
	out := fmt.Sprintf("in process %d  stream %d msgs", queue.Far()+queue.Len(), info.State.Msgs)
	for _, name := range []string{"bench-deadlines", "bench-queries"} {
		c, err := s.Consumer(ctx, name)
		if err != nil {
			continue
		}
		ci, err := c.Info(ctx)
		if err != nil {
			continue
		}
		out += fmt.Sprintf("  %s pending %d ack-pending %d waiting %d", strings.TrimPrefix(name, "bench-"), ci.NumPending, ci.NumAckPending, ci.NumWaiting)
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// PrintTimerBench writes the report as text.
func PrintTimerBench(w io.Writer, r *TimerBenchReport) {
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "timer bench: %d timers (half deadline.*, half query.*) due evenly over %gs from %gs after the set began; "+
		"embedded JetStream in this process; %d workers per consumer, handler %g ms\n",
		r.Timers, r.WindowSeconds, r.LeadSeconds, r.Workers, r.HandlerTimeMS)
	fmt.Fprintf(w, "  set:       %d in %.1f s = %.0f timers/s (%d in flight), %d errors, %d set after their due time\n",
		r.Set, r.SetSeconds, r.SetPerSecond, r.SetConcurrency, r.SetErrors, r.SetAfterDue)
	horizon := "none: every timer on the broker at once"
	if r.HorizonSeconds > 0 {
		horizon = fmt.Sprintf("%gs", r.HorizonSeconds)
	}
	fmt.Fprintf(w, "  pending:   %d messages in %s, %s on disk; %d waiting in the process (horizon %s)\n",
		r.Pending, natsbus.TimerStream, mib(r.StoreBytesPeak), r.InProcess, horizon)
	fmt.Fprintf(w, "  fired:     %d once, %d duplicates, %d missing, %d redelivered; %d left in the stream\n",
		r.Fired, r.Duplicates, r.Missing, r.Redelivered, r.LeftInStream)
	if len(r.ClientErrors) > 0 {
		fmt.Fprintf(w, "  client:    asynchronous errors %v\n", r.ClientErrors)
	}
	fmt.Fprintf(w, "  lateness:  p50 %.1f ms   p99 %.1f ms   max %.1f ms   (%d over 1 s)\n",
		r.LatenessP50, r.LatenessP99, r.LatenessMax, r.LateOver1s)
	limit := "none"
	if r.MemoryLimitBytes > 0 {
		limit = mib(r.MemoryLimitBytes)
	}
	fmt.Fprintf(w, "  memory:    peak RSS (VmHWM) %s, max sampled VmRSS %s, Go heap %s (soft limit %s); store at the end %s\n",
		mib(r.PeakRSSBytes), mib(r.MaxSampledRSS), mib(r.GoHeapSysBytes), limit, mib(r.StoreBytesEnd))
	fmt.Fprintf(w, "  goal (all fire once, p99 ≤ 1 s, RSS ≤ 1 GiB): %s   (%.0f s in all)\n", verdict, r.TotalSeconds)
}

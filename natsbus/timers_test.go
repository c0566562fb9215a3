package natsbus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A timer fires at its due time, not before, with its payload; setting it again replaces
// it; timers are deleted once handled.
func TestTimersFireOnceAtTheirTime(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	ctx := context.Background()
	mu, fired, firedAt := recordTimers(t, b, "test-timers", "t.>")
	start := time.Now()
	due := start.Add(700 * time.Millisecond)
	if err := b.SetTimer(ctx, "t.a", due, []byte("first")); err != nil {
		t.Fatal(err)
	}
	// Replaced before it fires: only the second schedule of t.a fires.
	if err := b.SetTimer(ctx, "t.a", due.Add(200*time.Millisecond), []byte("second")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTimer(ctx, "t.b", start.Add(300*time.Millisecond), []byte("b")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(fired["t.a"]) + len(fired["t.b"])
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrongly kept first schedule of t.a
	mu.Lock()
	defer mu.Unlock()
	if len(fired["t.a"]) != 1 || string(fired["t.a"][0].Payload) != "second" || len(fired["t.b"]) != 1 {
		t.Fatalf("fired %+v", fired)
	}
	if firedAt["t.a"].Before(due.Add(200 * time.Millisecond)) {
		t.Fatalf("t.a fired %v early", due.Add(200*time.Millisecond).Sub(firedAt["t.a"]))
	}
	if !fired["t.a"][0].Due.Equal(due.Add(200 * time.Millisecond)) {
		t.Fatalf("due time %v travelled as %v", due.Add(200*time.Millisecond), fired["t.a"][0].Due)
	}
}

// A failing handler gets the timer again.
func TestTimerHandlerFailureRetries(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
	ctx := context.Background()
	got := make(chan Timer, 4)
	stop, err := b.HandleTimers(ctx, "retry-timers", "r.>", 1, func(_ context.Context, tm Timer) error {
		got <- tm
		if tm.Delivered == 1 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.SetTimer(ctx, "r.x", time.Now().Add(100*time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		select {
		case tm := <-got:
			if tm.Delivered != want {
				t.Fatalf("delivery %d reported as %d", want, tm.Delivered)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d never came", want)
		}
	}
}

// The process stops while its one timer worker is busy and the client holds the next
// timers it pulled: those go back at once as the iterator drains, and the next start gets
// every timer without waiting out AckWait.
func TestHandleTimers_stop_handsBackHeldTimersAtOnce(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), AckWait: time.Hour})
	ctx := t.Context()
	busy := make(chan struct{})
	var once sync.Once
	stop, err := b.HandleTimers(ctx, "held", "h.>", 1, func(ctx context.Context, tm Timer) error {
		once.Do(func() { close(busy) })
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, name := range []string{"h.1", "h.2", "h.3", "h.4"} {
		if err := b.SetTimer(ctx, name, now, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	<-busy
	waitFor(t, 10*time.Second, "the other timers pulled into the client", func() bool {
		c, err := b.JetStream().Consumer(ctx, TimerStream, "held")
		return err == nil && c.CachedInfo().NumAckPending == 4
	})
	stop()

	var mu sync.Mutex
	got := map[string]bool{}
	stop2, err := b.HandleTimers(ctx, "held", "h.>", 4, func(_ context.Context, tm Timer) error {
		mu.Lock()
		defer mu.Unlock()
		got[tm.Name] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	waitFor(t, 10*time.Second, "all four timers after the restart (AckWait is an hour)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 4
	})
}

// The timer queue is bounded while the bus is down: past maxQueuedTimers, new names are
// dropped (the sweeper's), a queued name set again still replaces its timer, and no call
// waits.
func TestTimerQueue_boundedWhileTheBusIsDown(t *testing.T) {
	t.Parallel()
	srv, err := StartEmbedded(t.TempDir(), ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	stopServer(srv)
	b, err := Open(t.Context(), Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := b.Timers()
	at := time.Now().Add(DefaultTimerHorizon / 2) // within the horizon: for the broker now
	start := time.Now()
	for i := range maxQueuedTimers + 1000 {
		if err := q.SetTimer(t.Context(), fmt.Sprintf("query.T%d", i), at, nil); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	n := q.Len()
	if n > maxQueuedTimers || n < maxQueuedTimers*9/10 {
		t.Fatalf("%d timers queued after %d set, want at most %d and most of them", n, maxQueuedTimers+1000, maxQueuedTimers)
	}
	if err := q.SetTimer(t.Context(), "query.T0", at.Add(time.Minute), []byte("again")); err != nil || q.Len() != n {
		t.Fatalf("setting a queued name again: %v, %d queued (was %d)", err, q.Len(), n)
	}
	t.Logf("%d SetTimer calls with the bus down in %s; %d queued", maxQueuedTimers+1001, took, n)
}

// A timer the broker can never take (a name that is no subject token) is dropped, and the
// timers queued behind it are set.
func TestTimerQueue_dropsWhatCanNeverBeSet(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	fired := make(chan string, 8)
	stop, err := b.HandleTimers(t.Context(), "q", "query.>", 2, func(_ context.Context, tm Timer) error {
		fired <- tm.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	q := b.Timers()
	now := time.Now()
	// Four good names queued behind the bad one, on its publisher.
	names := []string{"query.bad name"}
	for i := 0; len(names) < 5; i++ {
		if name := fmt.Sprintf("query.%d", i); shardOf(name, timerPublishers) == shardOf(names[0], timerPublishers) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if err := q.SetTimer(t.Context(), name, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for len(got) < 4 {
		select {
		case name := <-fired:
			got[name] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("fired %v; the timers behind the bad one are stuck", got)
		}
	}
	waitFor(t, 10*time.Second, "an empty queue", func() bool { return q.Len() == 0 })
}

// A timer due beyond the horizon waits in the process, off the broker, and goes onto it in
// time to fire at its due time; set again nearer, only the nearer one fires.
func TestTimerQueue_farTimersWaitInTheProcessUntilTheirHorizon(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), TimerHorizon: 400 * time.Millisecond})
	ctx := context.Background()
	mu, fired, firedAt := recordTimers(t, b, "test-far", "far.>")
	q := b.Timers()
	due := time.Now().Add(1500 * time.Millisecond)
	if err := q.SetTimer(ctx, "far.a", due, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := q.SetTimer(ctx, "far.b", due.Add(time.Second), []byte("b far")); err != nil {
		t.Fatal(err)
	}
	if err := q.SetTimer(ctx, "far.b", time.Now().Add(200*time.Millisecond), []byte("b near")); err != nil {
		t.Fatal(err)
	}
	if q.Far() != 1 {
		t.Fatalf("%d timers wait in the process, want far.a", q.Far())
	}
	time.Sleep(100 * time.Millisecond)
	stream, err := b.JetStream().Stream(ctx, TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs > 1 { // far.b's near timer at most
		t.Fatalf("%d timers on the broker before far.a's horizon, want far.a kept off it", info.State.Msgs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(fired["far.a"])
		mu.Unlock()
		if n >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second + 300*time.Millisecond) // past far.b's far due time
	mu.Lock()
	defer mu.Unlock()
	if len(fired["far.a"]) != 1 || !fired["far.a"][0].Due.Equal(due) || firedAt["far.a"].Before(due) {
		t.Fatalf("far.a fired %+v at %v, due %v", fired["far.a"], firedAt["far.a"], due)
	}
	if len(fired["far.b"]) != 1 || string(fired["far.b"][0].Payload) != "b near" {
		t.Fatalf("far.b fired %+v; want only its nearer timer", fired["far.b"])
	}
	if q.Far() != 0 {
		t.Fatalf("%d timers still wait in the process", q.Far())
	}
}

// recordTimers handles the timers matching pattern until the test ends, recording each
// delivery and when the last came, under the returned lock.
func recordTimers(t *testing.T, b *Bus, durable, pattern string) (mu *sync.Mutex, fired map[string][]Timer, firedAt map[string]time.Time) {
	t.Helper()
	mu, fired, firedAt = &sync.Mutex{}, map[string][]Timer{}, map[string]time.Time{}
	stop, err := b.HandleTimers(context.Background(), durable, pattern, 4, func(_ context.Context, tm Timer) error {
		mu.Lock()
		defer mu.Unlock()
		fired[tm.Name] = append(fired[tm.Name], tm)
		firedAt[tm.Name] = time.Now()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return mu, fired, firedAt
}

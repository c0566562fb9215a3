package natsbus

import (
	"context"
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
	var mu sync.Mutex
	fired := map[string][]Timer{}
	firedAt := map[string]time.Time{}
	stop, err := b.HandleTimers(ctx, "test-timers", "t.>", 4, func(_ context.Context, tm Timer) error {
		mu.Lock()
		defer mu.Unlock()
		fired[tm.Name] = append(fired[tm.Name], tm)
		firedAt[tm.Name] = time.Now()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
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

package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
)

// waitFor polls cond until it holds or the deadline passes. Tests wait on outcomes, never
// on fixed sleeps, so they stay green on a slow machine.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openBus opens an embedded bus in dir and closes it when the test ends.
func openBus(t *testing.T, cfg Config) *Bus {
	t.Helper()
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func streamMsgs(t *testing.T, b *Bus) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(t.Context(), b.StreamName())
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

// streamIDs returns the message IDs stored in the stream, in stream order.
func streamIDs(t *testing.T, b *Bus) []string {
	t.Helper()
	s, err := b.JetStream().Stream(t.Context(), b.StreamName())
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	n := streamMsgs(t, b)
	ids := make([]string, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("get msg %d: %v", seq, err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func paymentSucceeded(no string) orderpay.Message {
	return orderpay.Message{
		ID:      "payment.succeeded:" + no,
		Subject: orderpay.SubjectPaymentSucceeded,
		Payload: fmt.Appendf(nil, `{"payment_no":%q}`, no),
	}
}

func TestConfig_defaultsAndValidation(t *testing.T) {
	t.Parallel()
	cfg := Config{StoreDir: "x"}.withDefaults()
	// Replicas stays 0: it is detected at connect (TestReplicas_detectedAtConnect).
	if cfg.Stream != "ORDERPAY" || cfg.Replicas != 0 || cfg.DuplicateWindow != 2*time.Minute ||
		len(cfg.Subjects) != 5 || cfg.Logger == nil || cfg.AckWait != 30*time.Second ||
		cfg.RetryDelay != time.Second || cfg.MaxRetryDelay != 30*time.Second ||
		cfg.MaxAge != 7*24*time.Hour || cfg.MaxBytes != 1<<30 || cfg.TimerMaxAge != 24*time.Hour || cfg.TimerMaxBytes != 1<<30 {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}

	for name, bad := range map[string]Config{
		"embedded without store dir": {},
		"embedded with 3 replicas":   {StoreDir: "x", Replicas: 3},
		"negative replicas":          {URL: "nats://127.0.0.1:4222", Replicas: -1},
		"six replicas":               {URL: "nats://127.0.0.1:4222", Replicas: 6},
		"max age under the window":   {StoreDir: "x", MaxAge: time.Minute},
		"timers dropped before due":  {StoreDir: "x", TimerMaxAge: time.Second},
		"listen with external URL":   {URL: "nats://127.0.0.1:4222", ListenAddr: "127.0.0.1:0"},
		"negative window":            {StoreDir: "x", DuplicateWindow: -time.Second},
		"retry above ceiling":        {StoreDir: "x", RetryDelay: time.Minute},
	} {
		if err := bad.withDefaults().validate(); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: got %v, want EINVALID", name, err)
		}
	}
}

func TestRetryDelay_growsAndCaps(t *testing.T) {
	t.Parallel()
	for delivered, want := range map[uint64]time.Duration{
		0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		5: 16 * time.Second, 6: 30 * time.Second, 1000: 30 * time.Second,
	} {
		if got := retryDelay(delivered, time.Second, 30*time.Second); got != want {
			t.Errorf("retryDelay(%d) = %s, want %s", delivered, got, want)
		}
	}
}

// The relay crashed after publishing and before marking, so the same message is published
// twice: the stream must hold it once.
func TestPublish_sameIDTwice_storedOnce(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})

	m := paymentSucceeded("P1")
	for i := range 2 {
		if err := b.Publish(t.Context(), m); err != nil {
			t.Fatalf("publish #%d: %v", i+1, err)
		}
	}
	if err := b.Publish(t.Context(), paymentSucceeded("P2")); err != nil {
		t.Fatalf("publish P2: %v", err)
	}
	if got, want := streamIDs(t, b), []string{"payment.succeeded:P1", "payment.succeeded:P2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream holds %v, want %v", got, want)
	}
}

func TestPublish_rejectsMessageWithoutIDOrOutsideStream(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})

	m := paymentSucceeded("P1")
	m.ID = ""
	if err := b.Publish(t.Context(), m); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("publish without ID: got %v, want EINVALID", err)
	}
	m = paymentSucceeded("P1")
	m.Subject = "nobody.listens"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.Publish(ctx, m); err == nil {
		t.Fatal("publish to a subject outside the stream succeeded; the relay would mark it published and lose it")
	}
}

// The broker restarts (the process is restarted): messages stored before are still there,
// and so is the duplicate window, so a relay re-publishing after the restart adds nothing.
func TestBus_closeAndReopen_keepsMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	b, err := Open(t.Context(), Config{StoreDir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, no := range []string{"P1", "P2"} {
		if err := b.Publish(t.Context(), paymentSucceeded(no)); err != nil {
			t.Fatalf("publish %s: %v", no, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	b2 := openBus(t, Config{StoreDir: dir})
	if err := b2.Publish(t.Context(), paymentSucceeded("P2")); err != nil {
		t.Fatalf("re-publish P2: %v", err)
	}
	if got, want := streamIDs(t, b2), []string{"payment.succeeded:P1", "payment.succeeded:P2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after re-open the stream holds %v, want %v", got, want)
	}
}

// The order system's handler fails once (say its database is briefly unavailable): the
// event comes back after the retry delay, is handled, and is acked, with nothing left
// pending.
func TestSubscribe_handlerFailsOnce_redeliveredThenAcked(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), RetryDelay: 100 * time.Millisecond})

	var (
		mu   sync.Mutex
		seen []orderpay.Message
	)
	stop, err := b.Subscribe(t.Context(), "order-system", "payment.>", func(ctx context.Context, m orderpay.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m)
		if len(seen) == 1 {
			return errors.New("database is locked")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer stop()

	before := time.Now()
	if err := b.Publish(t.Context(), paymentSucceeded("P1")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, 10*time.Second, "the second delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 2
	})

	cons, err := b.JetStream().Consumer(t.Context(), b.StreamName(), "order-system")
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	waitFor(t, 5*time.Second, "nothing pending or unacked", func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == 1
	})

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("handler called %d times, want 2", len(seen))
	}
	for _, m := range seen {
		if m.ID != "payment.succeeded:P1" || m.Subject != orderpay.SubjectPaymentSucceeded ||
			string(m.Payload) != `{"payment_no":"P1"}` {
			t.Errorf("handler got %+v", m)
		}
		if m.CreatedAt.Before(before.Add(-time.Second)) || m.CreatedAt.After(time.Now()) {
			t.Errorf("CreatedAt %s is not the time the message was stored", m.CreatedAt)
		}
	}
}

// The process stops while a handler is running: the handler's context is cancelled, the
// message goes back at once, and the next start of the same durable consumer gets it
// without waiting out AckWait.
func TestSubscribe_stopDuringHandler_messageReturnedAtOnce(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), AckWait: time.Hour})

	started := make(chan struct{})
	stop, err := b.Subscribe(t.Context(), "points", "payment.>", func(ctx context.Context, m orderpay.Message) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if err := b.Publish(t.Context(), paymentSucceeded("P1")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	<-started
	stop() // returns only once the handler has
	stop() // and is safe to repeat

	got := make(chan orderpay.Message, 1)
	stop2, err := b.Subscribe(t.Context(), "points", "payment.>", func(ctx context.Context, m orderpay.Message) error {
		got <- m
		return nil
	})
	if err != nil {
		t.Fatalf("second Subscribe: %v", err)
	}
	defer stop2()
	select {
	case m := <-got:
		if m.ID != "payment.succeeded:P1" {
			t.Fatalf("got %q", m.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message not redelivered after the subscription stopped")
	}
}

// Later issues deliver timers as scheduled messages: the stream must allow them.
func TestOpen_streamAllowsSchedulesAndDedup(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir(), DuplicateWindow: time.Minute})
	s, err := b.JetStream().Stream(t.Context(), b.StreamName())
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	c := s.CachedInfo().Config
	if !c.AllowMsgSchedules || c.Duplicates != time.Minute || c.Storage != jetstream.FileStorage {
		t.Fatalf("stream config: schedules=%v duplicates=%s storage=%s", c.AllowMsgSchedules, c.Duplicates, c.Storage)
	}
}

// orderpay serve --nats nats://…: the bus connects to a server it does not own, and
// closing the bus leaves that server running.
func TestOpen_externalServer(t *testing.T) {
	t.Parallel()
	srv, err := StartEmbedded(t.TempDir(), ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	defer stopServer(srv)

	b, err := Open(t.Context(), Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := b.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.Server() != nil {
		t.Error("a bus on an external server reports an embedded one")
	}
	if err := b.Publish(t.Context(), paymentSucceeded("P1")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("server gone after the bus closed: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

// The embedded server cannot take its port (another broker holds it): StartEmbedded says
// so at once instead of hanging until the ready timeout.
func TestStartEmbedded_reportsStartFailure(t *testing.T) {
	t.Parallel()
	if _, err := StartEmbedded(""); err == nil {
		t.Fatal("StartEmbedded without a store dir succeeded")
	}
	if _, err := StartEmbedded(t.TempDir(), ListenOn("not-an-address")); err == nil {
		t.Fatal("StartEmbedded with a bad listen address succeeded")
	}

	first, err := StartEmbedded(t.TempDir(), ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	defer stopServer(first)
	addr := first.Addr().String()
	start := time.Now()
	second, err := StartEmbedded(t.TempDir(), ListenOn(addr))
	if err == nil {
		stopServer(second)
		t.Fatalf("a second server on %s started", addr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failure took %s to report", d)
	}
	t.Logf("second server on %s: %v", addr, err)
}

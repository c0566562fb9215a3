package natsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// memOutbox is an in-memory orderpay.Outbox: test scaffolding for the relay's logic. The
// real outbox table lives in sqlstore.
type memOutbox struct {
	mu          sync.Mutex
	msgs        []orderpay.Message
	publishedAt map[string]time.Time
	reads       int
	// markErr, if set, fails the next MarkPublished (then clears itself).
	markErr error
}

var _ orderpay.Outbox = (*memOutbox)(nil)

func newMemOutbox(msgs ...orderpay.Message) *memOutbox {
	return &memOutbox{msgs: msgs, publishedAt: map[string]time.Time{}}
}

func (o *memOutbox) Enqueue(msgs ...orderpay.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.msgs = append(o.msgs, msgs...)
}

func (o *memOutbox) UnpublishedMessages(ctx context.Context, limit int) ([]orderpay.Message, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	var out []orderpay.Message
	for _, m := range o.msgs {
		if len(out) == limit {
			break
		}
		if _, done := o.publishedAt[m.ID]; !done {
			out = append(out, m)
		}
	}
	return out, nil
}

func (o *memOutbox) MarkPublished(ctx context.Context, ids []string, at time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.markErr; err != nil {
		o.markErr = nil
		return err
	}
	for _, id := range ids {
		o.publishedAt[id] = at
	}
	return nil
}

// published returns the IDs marked published, in outbox order.
func (o *memOutbox) published() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for _, m := range o.msgs {
		if _, ok := o.publishedAt[m.ID]; ok {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func (o *memOutbox) readCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}

// Publisher is a mock Publisher made of a function field.
type mockPublisher struct {
	PublishFn func(ctx context.Context, m orderpay.Message) error
}

var _ Publisher = (*mockPublisher)(nil)

func (p *mockPublisher) Publish(ctx context.Context, m orderpay.Message) error {
	return p.PublishFn(ctx, m)
}

func messages(nos ...string) []orderpay.Message {
	out := make([]orderpay.Message, len(nos))
	for i, no := range nos {
		out[i] = paymentSucceeded(no)
	}
	return out
}

func ids(msgs []orderpay.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// Five committed events, a batch of three: two runs publish them all in outbox order, and
// each is marked published at the relay's clock.
func TestRelay_publishesInOrderAndMarks(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	msgs := messages("P1", "P2", "P3", "P4", "P5")
	outbox := newMemOutbox(msgs...)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r := &Relay{Outbox: outbox, Publisher: b, Batch: 3, Clock: func() time.Time { return now }}

	for i, want := range []int{3, 2, 0} {
		res, err := r.RunOnce(t.Context())
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if res.Published != want {
			t.Fatalf("run %d published %d, want %d", i+1, res.Published, want)
		}
	}
	if got, want := streamIDs(t, b), ids(msgs); !slices.Equal(got, want) {
		t.Fatalf("stream order %v, want %v", got, want)
	}
	if got := outbox.published(); !slices.Equal(got, ids(msgs)) {
		t.Fatalf("marked %v, want all", got)
	}
	for id, at := range outbox.publishedAt {
		if !at.Equal(now) {
			t.Errorf("%s marked at %s, want the relay clock's %s", id, at, now)
		}
	}
}

// A batch sent asynchronously to the broker, whose third message no stream takes: the
// relay marks the two before it, reports the third, and leaves it and the rest in the
// outbox, while the broker holds the first two in outbox order.
func TestRelay_batchMarksOnlyTheAckedPrefix(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	msgs := messages("P1", "P2", "P3", "P4", "P5")
	msgs[2].Subject = "nowhere.captured"
	outbox := newMemOutbox(msgs...)
	r := &Relay{Outbox: outbox, Publisher: b, Batch: 10}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := r.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), msgs[2].ID) {
		t.Fatalf("err %v, want one naming %s", err, msgs[2].ID)
	}
	if res.Published != 2 {
		t.Fatalf("published %d, want 2", res.Published)
	}
	if got, want := outbox.published(), ids(msgs[:2]); !slices.Equal(got, want) {
		t.Fatalf("marked %v, want %v", got, want)
	}
	if got := streamIDs(t, b); len(got) < 2 || !slices.Equal(got[:2], ids(msgs[:2])) {
		t.Fatalf("stream %v, want it to start with %v", got, ids(msgs[:2]))
	}
}

// The broker fails on the third publish (it restarts): the first two are marked, the third
// and everything after it are not, and the next run resumes at the third, in order.
func TestRelay_publishFails_marksOnlyWhatTheBrokerAcked(t *testing.T) {
	t.Parallel()
	msgs := messages("P1", "P2", "P3", "P4", "P5")
	outbox := newMemOutbox(msgs...)
	var (
		calls int
		sent  []string
		down  = true
	)
	pub := &mockPublisher{PublishFn: func(ctx context.Context, m orderpay.Message) error {
		calls++
		if down && calls == 3 {
			return errors.New("nats: no responders available for request")
		}
		sent = append(sent, m.ID)
		return nil
	}}
	r := &Relay{Outbox: outbox, Publisher: pub}

	res, err := r.RunOnce(t.Context())
	if err == nil {
		t.Fatal("run with a failing publish reported success")
	}
	if res.Published != 2 {
		t.Fatalf("published %d, want 2", res.Published)
	}
	if calls != 3 {
		t.Fatalf("publish called %d times, want 3: the relay must stop at the first failure", calls)
	}
	if got, want := outbox.published(), ids(msgs[:2]); !slices.Equal(got, want) {
		t.Fatalf("marked %v, want %v", got, want)
	}

	down = false
	if res, err := r.RunOnce(t.Context()); err != nil || res.Published != 3 {
		t.Fatalf("run after recovery: %+v, %v", res, err)
	}
	if want := ids(msgs); !slices.Equal(sent, want) {
		t.Fatalf("broker received %v, want %v", sent, want)
	}
	if got := outbox.published(); !slices.Equal(got, ids(msgs)) {
		t.Fatalf("marked %v, want all", got)
	}
}

// The relay published but could not mark (the process died, or the database failed):
// the next run publishes the same IDs again and the broker keeps one copy of each.
func TestRelay_markFails_republishIsDroppedByBroker(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	msgs := messages("P1", "P2", "P3")
	outbox := newMemOutbox(msgs...)
	outbox.markErr = errors.New("database is locked")
	r := &Relay{Outbox: outbox, Publisher: b}

	if res, err := r.RunOnce(t.Context()); err == nil || res.Published != 0 {
		t.Fatalf("run with a failing mark: %+v, %v; want an error and nothing counted", res, err)
	}
	if got := outbox.published(); len(got) != 0 {
		t.Fatalf("marked %v although MarkPublished failed", got)
	}
	if res, err := r.RunOnce(t.Context()); err != nil || res.Published != 3 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	if got, want := streamIDs(t, b), ids(msgs); !slices.Equal(got, want) {
		t.Fatalf("stream holds %v, want each message once: %v", got, want)
	}
}

// A payment commits while the relay sleeps through a long interval: Poke gets the event to
// the broker at once.
func TestRelay_pokeWakesRun(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	outbox := newMemOutbox()
	r := &Relay{Outbox: outbox, Publisher: b, Interval: time.Hour}

	runRelay(t, r)

	// Run's first pass has seen an empty outbox; from now on only a poke can wake it
	// within the hour.
	waitFor(t, 5*time.Second, "the relay's first pass", func() bool { return outbox.readCount() >= 1 })
	outbox.Enqueue(paymentSucceeded("P1"))
	r.Poke()
	r.Poke() // coalesced, never blocks

	waitFor(t, 5*time.Second, "the poked message on the stream", func() bool { return streamMsgs(t, b) == 1 })
	waitFor(t, 5*time.Second, "the poked message marked", func() bool { return len(outbox.published()) == 1 })
}

// runRelay runs r until the test ends, and fails the test if Run returns an error.
func runRelay(t *testing.T, r *Relay) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// Commits poked close together share one run: the relay lingers after a poke, then reads
// them all and publishes them in one batch.
func TestRelay_lingerGathersPokedCommitsIntoOneRun(t *testing.T) {
	t.Parallel()
	b := openBus(t, Config{StoreDir: t.TempDir()})
	outbox := newMemOutbox()
	r := &Relay{Outbox: outbox, Publisher: b, Interval: time.Hour, Linger: 200 * time.Millisecond}

	runRelay(t, r)
	waitFor(t, 5*time.Second, "the relay's first pass", func() bool { return outbox.readCount() >= 1 })
	for _, no := range []string{"P1", "P2", "P3"} {
		outbox.Enqueue(paymentSucceeded(no))
		r.Poke()
	}
	waitFor(t, 5*time.Second, "the three messages marked", func() bool { return len(outbox.published()) == 3 })
	if n := outbox.readCount(); n != 2 {
		t.Fatalf("the outbox was read %d times, want 2: the first pass and one run for the three pokes", n)
	}
}

// A backlog larger than one batch drains without waiting for the interval between batches.
func TestRelay_runDrainsBacklog(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		sent []string
	)
	pub := &mockPublisher{PublishFn: func(ctx context.Context, m orderpay.Message) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, m.ID)
		return nil
	}}
	var nos []string
	for i := range 25 {
		nos = append(nos, fmt.Sprintf("P%02d", i))
	}
	msgs := messages(nos...)
	outbox := newMemOutbox(msgs...)
	r := &Relay{Outbox: outbox, Publisher: pub, Batch: 10, Interval: time.Hour}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, 5*time.Second, "the backlog to drain", func() bool { return len(outbox.published()) == len(msgs) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sent, ids(msgs)) {
		t.Fatalf("published %v, want outbox order", sent)
	}
}

func TestRelay_misconfigured(t *testing.T) {
	t.Parallel()
	if _, err := (&Relay{Publisher: &mockPublisher{}}).RunOnce(t.Context()); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("RunOnce without an outbox: %v", err)
	}
	if err := (&Relay{Outbox: newMemOutbox()}).Run(t.Context()); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("Run without a publisher: %v", err)
	}
}

func TestRelayErrorWait_growsAndCaps(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		interval time.Duration
		failures int
		want     time.Duration
	}{
		{200 * ms, 1, 200 * ms},
		{200 * ms, 2, 400 * ms},
		{200 * ms, 6, 5 * time.Second},
		{200 * ms, 100, 5 * time.Second},
		{time.Hour, 3, time.Hour},
	} {
		if got := relayErrorWait(c.interval, c.failures); got != c.want {
			t.Errorf("relayErrorWait(%s, %d) = %s, want %s", c.interval, c.failures, got, c.want)
		}
	}
}

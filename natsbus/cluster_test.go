package natsbus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
	"orderpay/natsbus/natstest"
)

// syncBuffer is a log destination that tests read while the bus writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openExternal opens a bus on url, waits until its streams exist and a whole upkeep pass
// (updates included) is done, and closes it when the test ends.
func openExternal(t *testing.T, cfg Config) *Bus {
	t.Helper()
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "an upkeep pass", func() bool { return b.passes.Load() > 0 })
	return b
}

// adminJS is a JetStream client of the test's own, as an operator's nats CLI.
func adminJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo()
}

func TestDetectReplicas(t *testing.T) {
	t.Parallel()
	a, b, c, d, e := "nats://127.0.0.1:4222", "nats://127.0.0.1:4223", "nats://127.0.0.1:4224", "nats://10.0.0.4:4222", "nats://10.0.0.5:4222"
	for _, tc := range []struct {
		cluster string
		servers []string
		want    int
	}{
		{"", []string{a}, 1},
		{"", []string{a, b, c}, 1}, // several URLs of servers in no cluster: no replication possible
		{"prod", []string{a}, 1},
		{"prod", []string{a, b}, 2},
		{"prod", []string{a, b, a}, 2},
		{"prod", []string{a, b, c}, 3},
		{"prod", []string{a, b, c, d, e}, 3},
	} {
		if got := detectReplicas(tc.cluster, tc.servers); got != tc.want {
			t.Errorf("detectReplicas(%q, %v) = %d, want %d", tc.cluster, tc.servers, got, tc.want)
		}
	}
}

// Replicas 0 is detected at connect: 1 on the embedded server and on a single server, 3 on
// a three-node cluster, whether the client is given every node or one (the cluster
// announces the others). Both streams and the consumers get them.
func TestReplicas_detectedAtConnect(t *testing.T) {
	t.Parallel()
	embedded := openBus(t, Config{StoreDir: t.TempDir()})
	if got := embedded.Replicas(); got != 1 {
		t.Errorf("embedded: %d replicas, want 1", got)
	}

	single, err := StartEmbedded(t.TempDir(), ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(single) })
	if got := openExternal(t, Config{URL: single.ClientURL()}).Replicas(); got != 1 {
		t.Errorf("single server: %d replicas, want 1", got)
	}

	cl := natstest.StartCluster(t, 3)
	b := openExternal(t, Config{URL: cl.URLs()})
	if got := b.Replicas(); got != 3 {
		t.Errorf("3-node cluster: %d replicas, want 3", got)
	}
	if _, err := b.Subscribe(t.Context(), "points", "", func(context.Context, orderpay.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	stopTimers, err := b.HandleTimers(t.Context(), "queries", "query.>", 2, func(context.Context, Timer) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer stopTimers()
	waitFor(t, 30*time.Second, "consumers attached", func() bool { return b.Ready() == nil })
	js := adminJS(t, cl.URL(0))
	for _, name := range []string{DefaultStream, TimerStream} {
		info := streamInfo(t, js, name)
		if info.Config.Replicas != 3 || natstest.Peers(info.Cluster) != 3 {
			t.Errorf("stream %s: %d replicas configured, %d peers; want 3 and 3", name, info.Config.Replicas, natstest.Peers(info.Cluster))
		}
	}
	for stream, durable := range map[string]string{DefaultStream: "points", TimerStream: "queries"} {
		ci, err := js.Consumer(t.Context(), stream, durable)
		if err != nil {
			t.Fatal(err)
		}
		if n := natstest.Peers(ci.CachedInfo().Cluster); n != 3 {
			t.Errorf("consumer %s: %d peers, want 3 (the stream's)", durable, n)
		}
	}

	if got := openExternal(t, Config{URL: cl.URL(1)}).Replicas(); got != 3 {
		t.Errorf("3-node cluster through one URL: %d replicas, want 3", got)
	}
}

// The rules of planStreamUpdate, one limit at a time: raise below the floor, keep an
// operator's higher value, lower orderpay's own, treat "no limit" as the highest.
func TestPlanStreamUpdate(t *testing.T) {
	t.Parallel()
	b := &Bus{cfg: Config{StoreDir: "x"}.withDefaults()}
	want := b.eventStreamConfig(3)
	mine := want.Metadata
	legacy := jetstream.StreamConfig{Name: DefaultStream, Subjects: DefaultSubjects(), Storage: jetstream.FileStorage, Replicas: 1,
		Retention: jetstream.LimitsPolicy, MaxBytes: -1, Duplicates: DefaultDuplicateWindow, AllowMsgSchedules: true, AllowRollup: true}
	with := func(f func(*jetstream.StreamConfig)) jetstream.StreamConfig {
		c := want
		c.Metadata = map[string]string{}
		for k, v := range mine {
			c.Metadata[k] = v
		}
		f(&c)
		return c
	}
	for name, tc := range map[string]struct {
		have              jetstream.StreamConfig
		replicas          int
		maxAge            time.Duration
		maxBytes          int64
		changes, keptWord string
	}{
		"as wanted: nothing to do": {have: with(func(*jetstream.StreamConfig) {}), replicas: 3, maxAge: DefaultMaxAge, maxBytes: DefaultMaxBytes},
		"legacy: every limit is orderpay's, brought to the new ones": {have: legacy, replicas: 3, maxAge: DefaultMaxAge, maxBytes: DefaultMaxBytes,
			changes: "replicas 1 → 3"},
		"operator raised replicas and retention: kept": {have: with(func(c *jetstream.StreamConfig) { c.Replicas, c.MaxAge, c.MaxBytes = 5, 30*24*time.Hour, 4<<30 }),
			replicas: 5, maxAge: 30 * 24 * time.Hour, maxBytes: 4 << 30, keptWord: "replicas 5 (orderpay would set 3)"},
		"operator removed the limits: kept": {have: with(func(c *jetstream.StreamConfig) { c.MaxAge, c.MaxBytes = 0, -1 }),
			replicas: 3, maxAge: 0, maxBytes: -1, keptWord: "max_age 0s (orderpay would set 168h0m0s)"},
		"operator lowered below the floor: raised": {have: with(func(c *jetstream.StreamConfig) { c.Replicas, c.MaxAge = 1, time.Hour }),
			replicas: 3, maxAge: DefaultMaxAge, maxBytes: DefaultMaxBytes, changes: "max_age 1h0m0s → 168h0m0s"},
		"orderpay's own higher value, configuration lowered: lowered": {have: with(func(c *jetstream.StreamConfig) {
			c.MaxAge, c.Metadata[metaMaxAge] = 30*24*time.Hour, (30 * 24 * time.Hour).String()
		}), replicas: 3, maxAge: DefaultMaxAge, maxBytes: DefaultMaxBytes, changes: "max_age 720h0m0s → 168h0m0s"},
	} {
		upd, changes, kept := planStreamUpdate(tc.have, want)
		if upd.Replicas != tc.replicas || upd.MaxAge != tc.maxAge || upd.MaxBytes != tc.maxBytes {
			t.Errorf("%s: update to replicas %d, max age %s, max bytes %d; want %d, %s, %d", name,
				upd.Replicas, upd.MaxAge, upd.MaxBytes, tc.replicas, tc.maxAge, tc.maxBytes)
		}
		if got := strings.Join(changes, "; "); !strings.Contains(got, tc.changes) || (tc.changes == "" && tc.have.Metadata != nil && got != "") {
			t.Errorf("%s: changes %q, want %q among them", name, got, tc.changes)
		}
		if got := strings.Join(kept, "; "); !strings.Contains(got, tc.keptWord) || (tc.keptWord == "" && got != "") {
			t.Errorf("%s: kept %q, want %q", name, got, tc.keptWord)
		}
		if len(changes) > 0 && upd.Metadata[metaMaxAge] != mine[metaMaxAge] {
			t.Errorf("%s: update records max age %q, want orderpay's %q", name, upd.Metadata[metaMaxAge], mine[metaMaxAge])
		}
	}
}

// The consumer rules: an operator's longer ack wait and larger pending limit are kept, a
// shorter ack wait is raised, and explicit replicas below the floor go back to the stream's.
func TestPlanConsumerUpdate(t *testing.T) {
	t.Parallel()
	want := jetstream.ConsumerConfig{Durable: "d", FilterSubject: "order.>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 64}
	have := want
	have.AckWait, have.MaxAckPending, have.Replicas = 2*time.Minute, 5000, 5
	upd, changes, kept := planConsumerUpdate(have, want, 3)
	if len(changes) != 0 || upd.AckWait != 2*time.Minute || upd.MaxAckPending != 5000 || upd.Replicas != 5 || len(kept) != 2 {
		t.Errorf("operator's raise: changes %v, kept %v, update %+v", changes, kept, upd)
	}
	have = want
	have.AckWait, have.Replicas, have.FilterSubject = 10*time.Second, 1, "order.paid"
	upd, changes, _ = planConsumerUpdate(have, want, 3)
	if len(changes) != 3 || upd.AckWait != 30*time.Second || upd.Replicas != 0 || upd.FilterSubject != "order.>" {
		t.Errorf("below the floor: changes %v, update %+v", changes, upd)
	}
}

// The operator: orderpay set to one replica on a three-node cluster, the operator
// scales the streams to three and gives them longer retention, and orderpay restarts
// (twice). It keeps what the operator raised, says at warn what it would have set, and
// still follows its own configuration where the value is its own. A stream made by an
// older orderpay (one replica, no limits, no metadata) is brought to the new defaults.
func TestOperatorRaisedLimits_keptAcrossRestarts(t *testing.T) {
	t.Parallel()
	cl := natstest.StartCluster(t, 3)
	js := adminJS(t, cl.URLs())
	ctx := t.Context()

	// An older orderpay's streams.
	old := Config{StoreDir: "x"}.withDefaults()
	b := &Bus{cfg: old}
	for _, c := range b.streamConfigs(1) {
		c.MaxAge, c.MaxBytes, c.Metadata = 0, -1, nil
		if _, err := js.CreateStream(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	bus := openExternal(t, Config{URL: cl.URLs()})
	if _, err := bus.Subscribe(ctx, "points", "", func(context.Context, orderpay.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "consumer attached", func() bool { return bus.Ready() == nil })
	// The streams are updated in the background, after connecting: wait for it (a loaded
	// machine took longer than the consumer), then see it done.
	waitFor(t, 30*time.Second, "streams brought to the new defaults", func() bool {
		return streamInfo(t, js, DefaultStream).Config.Replicas == 3 && streamInfo(t, js, TimerStream).Config.Replicas == 3
	})
	bus.Close()
	for name, maxAge := range map[string]time.Duration{DefaultStream: DefaultMaxAge, TimerStream: DefaultTimerMaxAge} {
		info := streamInfo(t, js, name)
		if c := info.Config; c.Replicas != 3 || c.MaxAge != maxAge || c.MaxBytes != 1<<30 || c.Metadata[metaReplicas] != "3" {
			t.Fatalf("older orderpay's %s: replicas %d, max age %s, max bytes %d, metadata %v; want 3, %s, 1 GiB",
				name, c.Replicas, c.MaxAge, c.MaxBytes, c.Metadata, maxAge)
		}
	}

	// orderpay told to use one replica: the three were its own, so it follows.
	openExternal(t, Config{URL: cl.URLs(), Replicas: 1}).Close()
	if r := streamInfo(t, js, DefaultStream).Config.Replicas; r != 1 {
		t.Fatalf("orderpay's own replicas not lowered to its configured 1: %d", r)
	}

	// The operator scales both streams to 3, keeps events for 30 days up to 4 GiB and
	// timers for 2 days, and lets the points consumer wait 2 minutes for acks.
	for name, f := range map[string]func(*jetstream.StreamConfig){
		DefaultStream: func(c *jetstream.StreamConfig) { c.Replicas, c.MaxAge, c.MaxBytes = 3, 30*24*time.Hour, 4<<30 },
		TimerStream:   func(c *jetstream.StreamConfig) { c.Replicas, c.MaxAge = 3, 48*time.Hour },
	} {
		c := streamInfo(t, js, name).Config
		f(&c)
		if _, err := js.UpdateStream(ctx, c); err != nil {
			t.Fatalf("operator's update of %s: %v", name, err)
		}
	}
	cons, err := js.Consumer(ctx, DefaultStream, "points")
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.AckWait = 2 * time.Minute
	if _, err := js.UpdateConsumer(ctx, DefaultStream, cc); err != nil {
		t.Fatal(err)
	}

	// orderpay, still configured for one replica and the default retention, restarts twice.
	logs := &syncBuffer{}
	for range 2 {
		b := openExternal(t, Config{URL: cl.URLs(), Replicas: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if _, err := b.Subscribe(ctx, "points", "", func(context.Context, orderpay.Message) error { return nil }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "consumer attached", func() bool { return b.Ready() == nil })
		b.Close()
	}
	events, timers := streamInfo(t, js, DefaultStream).Config, streamInfo(t, js, TimerStream).Config
	if events.Replicas != 3 || events.MaxAge != 30*24*time.Hour || events.MaxBytes != 4<<30 {
		t.Errorf("events after restarts: replicas %d, max age %s, max bytes %d; want the operator's 3, 720h, 4 GiB", events.Replicas, events.MaxAge, events.MaxBytes)
	}
	if timers.Replicas != 3 || timers.MaxAge != 48*time.Hour {
		t.Errorf("timers after restarts: replicas %d, max age %s; want the operator's 3, 48h", timers.Replicas, timers.MaxAge)
	}
	cons, err = js.Consumer(ctx, DefaultStream, "points")
	if err != nil {
		t.Fatal(err)
	}
	if w := cons.CachedInfo().Config.AckWait; w != 2*time.Minute {
		t.Errorf("consumer ack wait after restarts: %s, want the operator's 2m", w)
	}
	for _, line := range []string{"replicas 3 (orderpay would set 1)", "max_age 720h0m0s (orderpay would set 168h0m0s)",
		"max_bytes 4294967296 (orderpay would set 1073741824)", "max_age 48h0m0s (orderpay would set 24h0m0s)", "ack wait 2m0s (orderpay would set 30s)"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no warning about %q in the logs:\n%s", line, logs.String())
		}
	}
	if strings.Count(logs.String(), "level=WARN msg=\"stream changed by an operator: kept\"") < 2 {
		t.Errorf("the kept values were not logged at warn on each start:\n%s", logs.String())
	}
}

// Killing (SIGKILL) the node that leads the event stream: an instance started after the
// streams have new leaders is ready within 5 s and publishes; the stream still has 3
// replicas.
func TestOpen_oneOfThreeNodesDown_readyUnder5s(t *testing.T) {
	t.Parallel()
	cl := natstest.StartCluster(t, 3, natstest.Processes())
	first := openExternal(t, Config{URL: cl.URLs()})
	if _, err := first.Subscribe(t.Context(), "points", "", func(context.Context, orderpay.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "consumer attached", func() bool { return first.Ready() == nil })
	first.Close()

	js := adminJS(t, cl.URLs())
	leader := cl.Index(streamInfo(t, js, DefaultStream).Cluster.Leader)
	killed := time.Now()
	cl.Kill(leader)
	// Both streams and the consumer elect new leaders among the two left: the instance
	// starts on a cluster that lost a node, not in the middle of its elections.
	waitFor(t, 60*time.Second, "new leaders", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var cis []*jetstream.ClusterInfo
		for _, name := range []string{DefaultStream, TimerStream} {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return false
			}
			cis = append(cis, s.CachedInfo().Cluster)
		}
		c, err := js.Consumer(ctx, DefaultStream, "points")
		if err != nil {
			return false
		}
		for _, ci := range append(cis, c.CachedInfo().Cluster) {
			if ci == nil || ci.Leader == "" || ci.Leader == cl.Name(leader) {
				return false
			}
		}
		return true
	})
	t.Logf("killed %s (the event stream's leader); streams and consumer re-led after %s", cl.Name(leader), time.Since(killed).Round(time.Millisecond))

	start := time.Now()
	b, err := Open(t.Context(), Config{URL: cl.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opened := time.Since(start)
	if _, err := b.Subscribe(t.Context(), "points", "", func(context.Context, orderpay.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "ready", func() bool { return b.Ready() == nil })
	ready := time.Since(start)
	if err := b.Publish(t.Context(), paymentSucceeded("P-one-down")); err != nil {
		t.Fatal(err)
	}
	published := time.Since(start)
	t.Logf("one of three nodes down: Open returned after %s, ready after %s, first publish acked after %s", opened, ready, published)
	if ready > 5*time.Second {
		t.Errorf("ready after %s with one of three nodes down, want under 5 s", ready)
	}
	if info := streamInfo(t, js, DefaultStream); info.Config.Replicas != 3 || natstest.Peers(info.Cluster) != 3 {
		t.Errorf("stream with a node down: %d replicas configured, %d peers; want 3", info.Config.Replicas, natstest.Peers(info.Cluster))
	}
}

// The bus is down when the instance starts: Open returns anyway, Ready says why, a publish
// fails at once (the outbox keeps the message), a timer is queued without waiting. When
// the server comes back: the streams are made, the relay publishes what the outbox kept,
// the subscription gets it, and the queued timer fires.
func TestOpen_busDown_startsAndCatchesUpWhenBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := StartEmbedded(dir, ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	addr, url := srv.Addr().String(), srv.ClientURL()
	stopServer(srv)

	ctx := t.Context()
	start := time.Now()
	b, err := Open(ctx, Config{URL: url, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open with the bus down: %v", err)
	}
	defer b.Close()
	opened := time.Since(start)
	if err := b.Ready(); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("Ready with the bus down: %v", err)
	}
	var mu sync.Mutex
	var got []string
	if _, err := b.Subscribe(ctx, "points", "", func(_ context.Context, m orderpay.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.ID)
		return nil
	}); err != nil {
		t.Fatalf("Subscribe with the bus down: %v", err)
	}
	fired := make(chan Timer, 4)
	stopTimers, err := b.HandleTimers(ctx, "queries", "query.>", 1, func(_ context.Context, tm Timer) error {
		fired <- tm
		return nil
	})
	if err != nil {
		t.Fatalf("HandleTimers with the bus down: %v", err)
	}
	defer stopTimers()

	outbox := newMemOutbox(messages("P1", "P2", "P3")...)
	relay := &Relay{Outbox: outbox, Publisher: b, Interval: time.Hour} // only pokes run it
	if _, err := relay.RunOnce(ctx); err == nil {
		t.Fatal("a publish with the bus down succeeded")
	}
	if n := len(outbox.published()); n != 0 {
		t.Fatalf("%d messages marked published with the bus down", n)
	}
	b.OnReady(relay.Poke)
	rctx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	go relay.Run(rctx)

	q := b.Timers()
	for _, p := range []string{"1", "2", "3"} { // set again: the last one is the timer
		if err := q.SetTimer(ctx, "query.T1", time.Now().Add(200*time.Millisecond), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("%d timers queued, want 1", n)
	}
	t.Logf("bus down: Open returned after %s; Ready: %v", opened, b.Ready())

	srv, err = StartEmbedded(dir, ListenOn(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer(srv)
	back := time.Now()
	waitFor(t, 30*time.Second, "ready once the bus is back", func() bool { return b.Ready() == nil })
	waitFor(t, 30*time.Second, "outbox published", func() bool { return len(outbox.published()) == 3 })
	waitFor(t, 30*time.Second, "events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	select {
	case tm := <-fired:
		if string(tm.Payload) != "3" {
			t.Errorf("timer fired with %q, want the last set, 3", tm.Payload)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued timer never fired")
	}
	t.Logf("bus back: ready, outbox published, events and timer delivered after %s", time.Since(back).Round(time.Millisecond))
	if n := q.Len(); n != 0 {
		t.Errorf("%d timers still queued", n)
	}
	select {
	case tm := <-fired:
		t.Errorf("a replaced timer fired too: %q", tm.Payload)
	case <-time.After(300 * time.Millisecond):
	}
}

// A stream deleted under a running bus (what a single-replica stream's lost node looks
// like from a client) is made again by the upkeep, and the subscription attaches to it
// again; the loss is logged as an error.
func TestStreamLost_madeAgainAndSubscriptionReattached(t *testing.T) {
	t.Parallel()
	srv, err := StartEmbedded(t.TempDir(), ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(srv) })
	logs := &syncBuffer{}
	b := openExternal(t, Config{URL: srv.ClientURL(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	got := make(chan string, 8)
	if _, err := b.Subscribe(t.Context(), "points", "", func(_ context.Context, m orderpay.Message) error {
		got <- m.ID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(t.Context(), paymentSucceeded("before")); err != nil {
		t.Fatal(err)
	}
	if id := <-got; id != paymentSucceeded("before").ID {
		t.Fatalf("got %s", id)
	}
	js := adminJS(t, srv.ClientURL())
	deleting := time.Now()
	if err := js.DeleteStream(t.Context(), DefaultStream); err != nil {
		t.Fatal(err)
	}
	// The next publish finds no stream; the upkeep makes it again and the subscription
	// attaches to its new consumer.
	deadline := time.Now().Add(time.Minute) // a bound, not a figure: the race detector on a busy machine is slow
	for {
		err := b.Publish(t.Context(), paymentSucceeded("after"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publish to the stream made again within a minute; the last failed with: %v\nthe bus logged:\n%s", err, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Made again no sooner than lostStreamSettle after it went missing (which was after
	// the delete began): one made while the server still removes the old one's files
	// loses its own directory and never stores a message.
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if made := s.CachedInfo().Created; made.Sub(deleting) < lostStreamSettle {
		t.Errorf("the stream was made again %s after its delete began; want at least %s", made.Sub(deleting), lostStreamSettle)
	}
	select {
	case id := <-got:
		if id != paymentSucceeded("after").ID {
			t.Fatalf("got %s after the stream was made again", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the subscription never attached to the stream made again")
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"stream was made again") {
		t.Errorf("the lost stream was not logged as an error:\n%s", logs.String())
	}
}

// Two instances' relays publish the same outbox messages at the same moment, on a
// replicated stream: the one that finds the other storing the message waits for it and
// gets a duplicate ack, so both succeed, and the stream holds each message once.
func TestPublish_sameMessageFromTwoInstancesAtOnce_bothSucceed(t *testing.T) {
	t.Parallel()
	cl := natstest.StartCluster(t, 3)
	a := openExternal(t, Config{URL: cl.URL(0)})
	b := openExternal(t, Config{URL: cl.URL(1)})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		m := paymentSucceeded(fmt.Sprintf("P%d", i))
		for _, bus := range []*Bus{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- bus.Publish(t.Context(), m)
			}()
		}
		if i%20 == 19 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("publish: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d publishes failed", failed, 2*n)
	}
	if got := streamInfo(t, adminJS(t, cl.URL(2)), DefaultStream).State.Msgs; got != n {
		t.Errorf("the stream holds %d messages, want %d", got, n)
	}
}

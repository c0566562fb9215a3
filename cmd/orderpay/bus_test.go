package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"orderpay"
	"orderpay/httpapi"
	"orderpay/natsbus"
)

// The --nats-* flags default to natsbus's documented defaults (replicas detected), the
// ORDERPAY_NATS_* variables set them, the flags win, and "unlimited" lifts a limit.
func TestServeBusFlagsAndEnvironment(t *testing.T) {
	m := NewMain()
	var help bytes.Buffer
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	want := BusConfig{Replicas: 0, MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, TimerMaxAge: 24 * time.Hour, TimerMaxBytes: 1 << 30}
	if m.Config.Bus != want {
		t.Fatalf("defaults %+v, want %+v", m.Config.Bus, want)
	}
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, s := range []string{"-nats-replicas", "ORDERPAY_NATS_REPLICAS", "-nats-max-age", "(default 168h0m0s)", "-nats-max-bytes", "(default 1GiB)",
		"-nats-timers-max-age", "(default 24h0m0s)", "-nats-timers-max-bytes", "ORDERPAY_NATS_TIMERS_MAX_BYTES"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help does not mention %q", s)
		}
	}

	t.Setenv("ORDERPAY_NATS_REPLICAS", "3")
	t.Setenv("ORDERPAY_NATS_MAX_BYTES", "4GiB")
	t.Setenv("ORDERPAY_NATS_TIMERS_MAX_AGE", "48h")
	m = NewMain()
	if err := m.ParseFlags([]string{"--nats-max-age", "unlimited", "--nats-timers-max-bytes", "512MiB", "--nats-max-bytes", "2GiB"}); err != nil {
		t.Fatal(err)
	}
	want = BusConfig{Replicas: 3, MaxAge: -1, MaxBytes: 2 << 30, TimerMaxAge: 48 * time.Hour, TimerMaxBytes: 512 << 20}
	if m.Config.Bus != want {
		t.Fatalf("from the environment and flags %+v, want %+v", m.Config.Bus, want)
	}
	quiet := func() *Main { m := NewMain(); m.Stderr = io.Discard; return m }
	for _, bad := range [][]string{{"--nats-max-age", "0"}, {"--nats-max-bytes", "lots"}, {"--nats-replicas", "three"}} {
		if err := quiet().ParseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("ORDERPAY_NATS_REPLICAS", "three")
	if err := quiet().ParseFlags(nil); err == nil || !strings.Contains(err.Error(), "ORDERPAY_NATS_REPLICAS") {
		t.Errorf("a bad ORDERPAY_NATS_REPLICAS: %v", err)
	}
}

// readyz is the instance's /readyz: nil when ready, else its message.
func readyz(ctx context.Context, c *apiClient, url string) error {
	var out map[string]string
	return c.call(ctx, http.MethodGet, url+"/readyz", nil, nil, &out)
}

// The whole bus is down when the instance starts: it starts anyway, at once, and says on
// /readyz that the bus is not ready; orders and payments work (the payment center tells
// the order system directly), events wait in the outbox and the query timer in the timer
// queue. When the bus comes back: ready, the outbox is published, the consumers attach
// (points are awarded for the paid order), and the timer is set.
func TestServe_busDownAtStart_servesAndPublishesWhenBack(t *testing.T) {
	t.Parallel()
	natsDir := t.TempDir()
	srv, err := natsbus.StartEmbedded(natsDir, natsbus.ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	natsAddr, natsURL := srv.Addr().String(), srv.ClientURL()
	srv.Shutdown()
	srv.WaitForShutdown()

	start := time.Now()
	m, c := startMain(t, "", func(m *Main) { m.Config.NATS = natsURL })
	started := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = readyz(ctx, c, m.URL)
	if apiCode(err) != orderpay.EUNAVAILABLE || !strings.Contains(err.Error(), "bus: not ready (not connected to NATS)") {
		t.Fatalf("/readyz with the bus down: %v", err)
	}
	t.Logf("started in %s with the bus down; /readyz: %v", started, err)

	o, err := c.createOrder(ctx, "mia", "tea-longjing-250g", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	unpublished := func() int {
		var n int
		if err := m.Store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE published_at = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	held, queued := unpublished(), m.Bus.Timers().Len()
	if held < 3 || queued < 1 { // order.created, payment.succeeded, order.paid; the first query
		t.Fatalf("with the bus down: %d messages held in the outbox, %d timers queued", held, queued)
	}
	points := func() int {
		var n int
		if err := m.Store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM points_ledger WHERE order_no = ? AND kind = 'award'`, o.OrderNo).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := points(); n != 0 {
		t.Fatalf("%d points awards with the bus down", n)
	}

	srv, err = natsbus.StartEmbedded(natsDir, natsbus.ListenOn(natsAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	back := time.Now()
	waitFor(t, 30*time.Second, "/readyz once the bus is back", func() bool { return readyz(ctx, c, m.URL) == nil })
	ready := time.Since(back)
	waitFor(t, 30*time.Second, "the outbox published", func() bool { return unpublished() == 0 })
	published := time.Since(back)
	waitFor(t, 30*time.Second, "the points awarded", func() bool { return points() == 1 })
	waitFor(t, 30*time.Second, "the timer set", func() bool { return m.Bus.Timers().Len() == 0 })
	waitForSubjects(t, m, orderpay.SubjectOrderCreated, orderpay.SubjectPaymentSucceeded, orderpay.SubjectOrderPaid)
	t.Logf("bus back: ready after %s, %d held messages published after %s, points and timer after %s", ready, held, published, time.Since(back))
}

// The API port opens only once Run can serve: while Run builds every part (here waiting
// for a bus that cannot get ready, a NATS server without JetStream), nothing accepts
// connections on the API's address; once Run has returned, the API answers there.
func TestServe_apiPortOpensOnlyOnceRunCanServe(t *testing.T) {
	t.Parallel()
	noJS, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	noJS.Start()
	if !noJS.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(noJS.Shutdown)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	m := NewMain()
	m.Config.Addr, m.Config.SimAddr, m.Config.DataDir, m.Config.NATS = addr, "127.0.0.1:0", t.TempDir(), noJS.ClientURL()
	m.Config.AdminToken, m.Config.LogLevel, m.Config.RateLimits = "test-admin-token-of-24-chars", "error", httpapi.RateLimits{}
	m.Config.MetricsAddr = "127.0.0.1:0"
	m.Stdout, m.Stderr = io.Discard, io.Discard
	// Dial the API's address until Run is about to bind it.
	var stopDialing atomic.Bool
	accepted, dials := atomic.Int32{}, atomic.Int32{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stopDialing.Load() {
			dials.Add(1)
			if conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				accepted.Add(1)
				conn.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	m.beforeAPIListen = func() { stopDialing.Store(true); <-done }
	start := time.Now()
	err = m.Run(context.Background())
	t.Cleanup(func() { m.Close() })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Run took %s (waiting for a bus that cannot get ready); %d dials before it bound the port", time.Since(start), dials.Load())
	if n := accepted.Load(); n > 0 {
		t.Errorf("%d connections accepted on the API's address before Run bound it", n)
	}
	if dials.Load() < 10 {
		t.Errorf("only %d dials while Run ran: the test did not watch the port", dials.Load())
	}
	if err := readyz(context.Background(), newAPIClient(m.URL, "", ""), m.URL); err == nil || !strings.Contains(err.Error(), "bus: not ready") {
		t.Errorf("/readyz after Run: %v", err)
	}
}

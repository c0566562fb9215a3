package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos"
)

// freeAddr is a loopback address no one listens on now, for a server that must come back
// on the same address after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// paidOrder orders qty of sku and pays it by channel at the simulator's wallet, waiting
// until the order is PAID, and returns the order number.
func paidOrder(ctx context.Context, t *testing.T, c *apiClient, buyer, sku string, qty int64, channel string) string {
	t.Helper()
	o, err := c.createOrder(ctx, buyer, sku, qty)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, channel)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return o.OrderNo
}

// refundAll asks for a refund of the whole of each order (by order number, its buyer),
// approved at once before shipping, waits until each succeeded, and checks that none went
// to the operators' queue.
func refundAll(ctx context.Context, t *testing.T, c *apiClient, orders map[string]string) {
	t.Helper()
	for no, buyer := range orders {
		a, err := c.RequestAfterSale(ctx, no, buyer, "refund", "changed my mind", chaos.AfterSaleItem{Line: 1, Qty: 1})
		if err != nil {
			t.Fatalf("refund of %s: %v", no, err)
		}
		waitAfterSale(ctx, t, c.Client, no, a.AfterSaleNo, "SUCCESS")
	}
	if q, err := c.RefundQueue(ctx); err != nil || len(q) != 0 {
		t.Fatalf("the operators' queue after the refunds: %+v, %v", q, err)
	}
}

// A restart of serve keeps its built-in simulator's trades: orders paid by either
// channel before it are refunded after it, and nothing goes to the operators' queue.
func TestServeRestartKeepsTheSimulatorsTrades(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(m *Main) { m.Config.DataDir, m.Config.AutoApproveRefundMax = dir, 1_000_000 }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m1, c1 := startMain(t, "", cfg)
	paid := []string{paidOrder(ctx, t, c1, "erin", "tea-longjing-250g", 1, orderpay.ChannelAlipay), paidOrder(ctx, t, c1, "erin2", "tea-longjing-250g", 1, orderpay.ChannelWechat)}
	m1.Close()

	m2, c2 := startMain(t, "", cfg)
	refundAll(ctx, t, c2, map[string]string{paid[0]: "erin", paid[1]: "erin2"})
	for _, e := range m2.Sim.Ledger() {
		if e.Refunded != e.Amount {
			t.Fatalf("the simulator after the restart: %+v not refunded in full", e)
		}
	}
}

// A notification the built-in simulator still owes when serve stops is delivered by the
// next serve: the payment is delayed past the restart, and after it the order becomes
// PAID through the notification (its raw message is the notification's, with notify_id),
// not through an active query (which would not begin before 10 s).
func TestServeRestartDeliversTheSimulatorsNotificationsDue(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	// The notify_url is serve's: it must come back on the same address.
	cfg := func(m *Main) { m.Config.DataDir, m.Config.Addr = dir, addr }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m1, c1 := startMain(t, "", cfg)
	if err := m1.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDelay, Delay: sim.Duration(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	o, err := c1.createOrder(ctx, "frank", "tea-longjing-250g", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c1.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the delayed notification", func() bool {
		st := m1.Sim.NotifyStats()
		return len(st) == 1 && len(st[0].Attempts) == 0 && !st[0].Done()
	})
	m1.Close()

	m2, _ := startMain(t, "", cfg)
	outTradeNo := p.PaymentNo + "A01"
	waitFor(t, 9*time.Second, "the order paid", func() bool {
		h, _ := m2.Store.History(ctx, orderpay.EntityOrder, o.OrderNo)
		return len(h) > 0 && h[len(h)-1].To == "PAID"
	})
	h, _ := m2.Store.History(ctx, orderpay.EntityChannelOrder, outTradeNo)
	if len(h) == 0 || h[len(h)-1].To != "SUCCESS" || !strings.Contains(h[len(h)-1].Raw, "notify_id=") {
		t.Fatalf("the channel order's history after the restart: %+v; want SUCCESS from the notification", h)
	}
	// The simulator records the answer once serve has given it.
	waitFor(t, 5*time.Second, "the notification acknowledged", func() bool {
		st := m2.Sim.NotifyStats()
		return len(st) == 1 && st[0].Acked && len(st[0].Attempts) == 1
	}, func() string { return fmt.Sprintf("%+v", m2.Sim.NotifyStats()) })
}

// stopCommand stops an orderpay process as a shop stops it (SIGTERM) and waits for it.
func stopCommand(t *testing.T, c *command) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the process did not stop:\n%s", c.text())
	}
}

// startSimAt runs `orderpay sim` on addr with its keys in dir (and its state in their
// default place) and returns the process and the channels file it wrote.
func startSimAt(t *testing.T, dir, addr string, extra ...string) (*command, string) {
	t.Helper()
	c := startCommand(t, append([]string{"sim", "--addr", addr, "--keys", dir + "/keys", "--log-level", "warn"}, extra...)...)
	c.waitLine(t, simRunning, 60*time.Second)
	return c, dir + "/keys/channels.toml"
}

// A restart of `orderpay sim` keeps its trades: serve, up all along and pointed at it by its
// channels file, refunds after the restart the orders paid before it, by either channel,
// and nothing goes to the operators' queue.
func TestSimRestartKeepsItsTrades(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	proc, channels := startSimAt(t, dir, addr)
	m, c := startMain(t, "", func(m *Main) { m.Config.Channels, m.Config.AutoApproveRefundMax = channels, 1_000_000 })
	c = newAPIClient(m.URL, "http://"+addr, m.AdminToken)
	if err := c.createSKU(ctx, "tea-longjing-250g", 4800, 100, "normal"); err != nil {
		t.Fatal(err)
	}
	paid := []string{paidOrder(ctx, t, c, "gina", "tea-longjing-250g", 1, orderpay.ChannelAlipay), paidOrder(ctx, t, c, "gina2", "tea-longjing-250g", 1, orderpay.ChannelWechat)}
	stopCommand(t, proc)

	startSimAt(t, dir, addr)
	refundAll(ctx, t, c, map[string]string{paid[0]: "gina", paid[1]: "gina2"})
}

// A notification `orderpay sim` still owes when it stops is delivered by the next run: the
// payment's is delayed past the restart, and after it the order becomes PAID through the
// notification (its raw message has the notify_id), not through an active query.
func TestSimRestartDeliversItsNotificationsDue(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	proc, channels := startSimAt(t, dir, addr, "--faults", `{"rules":[{"method":"notify","kind":"delay","delay":"1h"}]}`)
	m, c := startMain(t, "", func(m *Main) { m.Config.Channels = channels })
	c = newAPIClient(m.URL, "http://"+addr, m.AdminToken)
	if err := c.createSKU(ctx, "tea-longjing-250g", 4800, 100, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "hana", "tea-longjing-250g", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	// The delay holds the first attempt; the simulator has fired the rule once.
	waitFor(t, 10*time.Second, "the delay fault fired", func() bool {
		var st sim.FaultStatus
		err := c.call(ctx, http.MethodGet, "http://"+addr+"/sim/faults", nil, nil, &st)
		return err == nil && len(st.Fired) == 1 && st.Fired[0] == 1
	})
	stopCommand(t, proc)
	if h, _ := m.Store.History(ctx, orderpay.EntityOrder, o.OrderNo); len(h) > 0 && h[len(h)-1].To == "PAID" {
		t.Fatal("the order was paid before the restart")
	}

	startSimAt(t, dir, addr)
	waitFor(t, 9*time.Second, "the order paid", func() bool {
		h, _ := m.Store.History(ctx, orderpay.EntityOrder, o.OrderNo)
		return len(h) > 0 && h[len(h)-1].To == "PAID"
	})
	h, _ := m.Store.History(ctx, orderpay.EntityChannelOrder, p.PaymentNo+"A01")
	if len(h) == 0 || h[len(h)-1].To != "SUCCESS" || !strings.Contains(h[len(h)-1].Raw, "notify_id=") {
		t.Fatalf("the channel order's history after the restart: %+v; want SUCCESS from the notification", h)
	}
}

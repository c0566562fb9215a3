package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos/audit"
	"orderpay/httpapi"
	"orderpay/natsbus"
	"orderpay/sqlstore/storetest"
)

// Two orderpay instances on one PostgreSQL and one NATS (docs/design.md §3, "several, sharing
// Postgres and NATS"): a hundred buyers create on one, pay on either, poll either; half the
// notifications are lost and some channel calls fail, so that query timers (one durable
// consumer, split between the instances), pending-query sweepers, timeout closes, refund
// sweepers and notifications race for the same steps on both. Afterwards: every invariant
// holds, no transition was applied twice, every refund went out once, nothing is left
// pending, and both instances really took timer steps.
func TestTwoInstancesNeverTakeTheSameStepTwice(t *testing.T) {
	dsn := storetest.PostgresDSN(t) // skips without ORDERPAY_TEST_PG
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const scale = 20 // business time runs 20× faster: a 10 s query is due after 0.5 s

	// The shared broker, outside both instances, as an external NATS in production.
	natsSrv, err := natsbus.StartEmbedded(t.TempDir(), natsbus.ListenOn("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsSrv.Shutdown(); natsSrv.WaitForShutdown() })

	// The shared channel: half the notification attempts lost (Alipay resends after 4
	// business minutes, so queries find most of those payments first), some duplicated, and
	// some queries, closes, precreates and refunds that fail or end unknown.
	keysDir := t.TempDir()
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	hang := sim.Duration(300 * time.Millisecond)
	channel, err := sim.New(sim.Config{Keys: keys, TimeScale: scale, RefundDelay: time.Minute / scale,
		Logger: slogDiscard(), Faults: sim.FaultPlan{Seed: 6, Rules: []sim.FaultRule{
			{Method: sim.MethodNotify, Kind: sim.FaultDrop, Probability: 0.5},
			{Method: sim.MethodNotify, Kind: sim.FaultDuplicate, Probability: 0.1},
			{Method: sim.MethodQuery, Kind: sim.FaultTimeout, Probability: 0.05, Delay: hang},
			{Method: sim.MethodQuery, Kind: sim.FaultSystemError, Probability: 0.05},
			{Method: sim.MethodPrecreate, Kind: sim.FaultSystemError, Probability: 0.05},
			{Method: sim.MethodClose, Kind: sim.FaultTimeout, Applied: true, Probability: 0.1, Delay: hang},
			{Method: sim.MethodRefund, Kind: sim.FaultUnknownError, Applied: true, Probability: 0.2},
			{Method: sim.MethodRefundQuery, Kind: sim.FaultSystemError, Probability: 0.1},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(channel.Close)
	simURL := serveSim(t, channel)
	channels := simChannelsFile(t, keysDir, keys, simURL)

	// Two instances. Both tell the channel to notify instance A.
	logs := &lockedBuffer{}
	start := func(publicURL string) *Main {
		m := NewMain()
		c := &m.Config
		c.Addr, c.DataDir, c.KeysDir, c.DB, c.MetricsAddr = "127.0.0.1:0", t.TempDir(), keysDir, dsn, "127.0.0.1:0"
		c.NATS, c.Channels, c.PublicURL = natsSrv.ClientURL(), channels, publicURL
		c.AdminToken, c.LogLevel, c.TimeScale = "two-instances-admin-token-0001", "warn", scale
		c.RateLimits = httpapi.RateLimits{} // a hundred buyers on one IP are the load under test
		// Business time: fast 3 m, special 4 m, grace 30 s; real time: 9 s, 12 s, 1.5 s.
		c.PayWindows = maps.Clone(orderpay.DefaultPayWindows)
		c.PayWindows[orderpay.ProductFast], c.PayWindows[orderpay.ProductSpecial] = 3*time.Minute, 4*time.Minute
		c.CloseGrace = 30 * time.Second
		m.Stdout, m.Stderr = io.Discard, logs
		if err := m.Run(ctx); err != nil {
			m.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a := start("")
	b := start(a.URL)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("instance logs (warn and above):\n%s", logs.tail(80))
		}
	})
	instances := []*Main{a, b}
	clients := []*apiClient{newAPIClient(a.URL, simURL, "two-instances-admin-token-0001"), newAPIClient(b.URL, simURL, "two-instances-admin-token-0001")}
	skus := []string{"two-fast", "two-special"}
	for i, pt := range []string{"fast", "special"} {
		if err := clients[i].createSKU(ctx, skus[i], 990+int64(i)*1600, 1000, pt); err != nil {
			t.Fatal(err)
		}
	}

	// A hundred buyers, twelve at a time.
	const buyers = 100
	var (
		mu       sync.Mutex
		orderNos []string
		scripts  = map[string]int{}
	)
	slots := make(chan struct{}, 12)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			bu := &twoInstanceBuyer{t: t, clients: clients, rng: rand.New(rand.NewPCG(6, uint64(i)))}
			no, script := bu.run(ctx, i, skus[i%2])
			mu.Lock()
			defer mu.Unlock()
			scripts[script]++
			if no != "" {
				orderNos = append(orderNos, no)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d orders created; scripts %v", len(orderNos), scripts)
	if len(orderNos) < buyers*9/10 {
		t.Fatalf("only %d of %d orders could be created", len(orderNos), buyers)
	}

	// Settled: every order paid or cancelled, nothing open at the channel or in our tables,
	// every outbox message published.
	db := a.Store.DB()
	var open map[string]int
	settled := false
	for deadline := time.Now().Add(75 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		open = openWork(t, ctx, db)
		if len(open) == 0 && unsettledTrades(ctx, db, channel.Ledger()) == 0 {
			settled = true
			break
		}
	}
	if !settled {
		t.Fatalf("not settled after 75 s: %v", open)
	}
	settledAt := time.Now()

	// (1) The auditor: I1–I8 on the shared database, the channel's ledger and the events.
	events, err := readStreamEvents(ctx, natsSrv.ClientURL(), natsbus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	res, err := audit.Audit(ctx, audit.Inputs{Store: a.Store, Ledger: channel.Ledger(), Notifications: channel.NotifyStats(),
		Events: events, Now: settledAt, Grace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("audit: %s", v)
	}
	if res.Orders != len(orderNos) {
		t.Errorf("audit saw %d orders, the buyers created %d", res.Orders, len(orderNos))
	}
	t.Logf("audit: %d orders %v; money %+v; %d events", res.Orders, res.FinalStates, res.Money, res.Events.Messages)

	// (2) No step twice. Every transition is a conditional update, so a transition taken
	// twice would show as two history rows with the same from, to and event; nothing is
	// created twice either.
	rows, err := db.QueryContext(ctx, `SELECT entity, entity_no, from_status, to_status, event, COUNT(*) FROM history
		GROUP BY entity, entity_no, from_status, to_status, event HAVING COUNT(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var entity, no, from, to, event string
		var n int
		if err := rows.Scan(&entity, &no, &from, &to, &event, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s %s: %q --%s--> %q recorded %d times", entity, no, from, event, to, n)
	}
	rows.Close()
	// Each refund went out once: one refund per attempt (its number derives from the
	// attempt), for the attempt's amount, and the channel refunded exactly that.
	refunds := map[string][]orderpay.ChannelRefund{}
	rrows, err := db.QueryContext(ctx, `SELECT out_refund_no, out_trade_no, amount, status FROM refunds`)
	if err != nil {
		t.Fatal(err)
	}
	for rrows.Next() {
		var r orderpay.ChannelRefund
		if err := rrows.Scan(&r.OutRefundNo, &r.OutTradeNo, &r.Amount, &r.Status); err != nil {
			t.Fatal(err)
		}
		refunds[r.OutTradeNo] = append(refunds[r.OutTradeNo], r)
	}
	rrows.Close()
	refundedTrades := 0
	for _, l := range channel.Ledger() {
		rs := refunds[l.OutTradeNo]
		var ours int64
		for _, r := range rs {
			if r.Status == orderpay.ChannelRefundSuccess {
				ours += r.Amount
			}
		}
		switch {
		case len(rs) > 1:
			t.Errorf("trade %s has %d refunds: %+v", l.OutTradeNo, len(rs), rs)
		case l.Refunded > l.Amount:
			t.Errorf("trade %s: the channel refunded %d of %d", l.OutTradeNo, l.Refunded, l.Amount)
		case l.Refunded != ours:
			t.Errorf("trade %s: the channel refunded %d, our refunds say %d", l.OutTradeNo, l.Refunded, ours)
		}
		if l.Refunded > 0 {
			refundedTrades++
		}
	}
	// (3) Both instances raced for the same timers: the query timers of both are one durable
	// consumer, whose messages are split between them, and each instance took scheduled
	// query steps.
	for i, m := range instances {
		triggers := queriesByTrigger(t, m)
		t.Logf("instance %c: channel queries by trigger %v", 'A'+i, triggers)
		if triggers["schedule"] == 0 {
			t.Errorf("instance %c took no query step from a timer: the timers were not shared", 'A'+i)
		}
	}
	if refundedTrades == 0 {
		t.Errorf("no trade was refunded: the duplicate and late payments did not happen")
	}
	t.Logf("%d trades at the channel, %d refunded", len(channel.Ledger()), refundedTrades)
}

// twoInstanceBuyer is one buyer of TestTwoInstancesNeverTakeTheSameStepTwice: it creates on
// the instance its number picks and does everything else on either.
type twoInstanceBuyer struct {
	t       *testing.T
	clients []*apiClient
	rng     *rand.Rand
}

func (b *twoInstanceBuyer) any() *apiClient { return b.clients[b.rng.IntN(len(b.clients))] }

// pay asks for a code on either instance until one answers; a channel that could not tell
// (503) or a precreate fault is retried, as a buyer taps again.
func (b *twoInstanceBuyer) pay(ctx context.Context, no, ch string) *payView {
	for range 5 {
		p, err := b.any().pay(ctx, no, ch)
		if err == nil {
			return p
		}
		if code := apiCode(err); code == orderpay.ECONFLICT || ctx.Err() != nil {
			return nil // paid or cancelled meanwhile
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// run plays buyer i's script and returns the order number ("" if it could not create one)
// and the script's name.
func (b *twoInstanceBuyer) run(ctx context.Context, i int, sku string) (string, string) {
	time.Sleep(time.Duration(b.rng.IntN(2000)) * time.Millisecond)
	o, err := b.clients[i%2].createOrder(ctx, fmt.Sprintf("buyer-%d", i), sku, 1)
	if err != nil {
		b.t.Logf("buyer %d: create: %v", i, err)
		return "", "create failed"
	}
	ch := []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[b.rng.IntN(2)]
	wallet := func(qr, action string) {
		if _, err := b.any().Wallet(ctx, qr, action); err != nil {
			b.t.Logf("buyer %d: wallet %s: %v", i, action, err)
		}
	}
	switch i % 10 {
	case 0, 1, 2, 3: // pays, and watches the order on either instance until it is paid
		if p := b.pay(ctx, o.OrderNo, ch); p != nil {
			wallet(p.QRCode, "pay")
			for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				if got, err := b.any().order(ctx, o.OrderNo); err == nil && got.Status == "PAID" {
					break
				}
			}
		}
		return o.OrderNo, "pay and watch"
	case 4: // pays and walks away: notifications or timers must find it
		if p := b.pay(ctx, o.OrderNo, ch); p != nil {
			wallet(p.QRCode, "pay")
		}
		return o.OrderNo, "pay and leave"
	case 5: // pays by Alipay through A and by WeChat Pay through B: one of them goes back
		pa, err := b.clients[0].pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
		if err != nil {
			return o.OrderNo, "pay twice (first code refused)"
		}
		pw, err := b.clients[1].pay(ctx, o.OrderNo, orderpay.ChannelWechat)
		wallet(pa.QRCode, "pay")
		if err == nil {
			wallet(pw.QRCode, "pay")
		}
		return o.OrderNo, "pay twice"
	case 6: // asks for a code and never scans it
		b.pay(ctx, o.OrderNo, ch)
		return o.OrderNo, "abandon code"
	case 7: // scans, never pays
		if p := b.pay(ctx, o.OrderNo, ch); p != nil {
			wallet(p.QRCode, "scan")
		}
		return o.OrderNo, "scan only"
	case 8: // never asks to pay
		return o.OrderNo, "abandon order"
	default: // cancels on the other instance, then pays the code anyway: a late payment
		p := b.pay(ctx, o.OrderNo, ch)
		if _, err := b.clients[(i+1)%2].Cancel(ctx, o.OrderNo); err != nil {
			b.t.Logf("buyer %d: cancel: %v", i, err)
		}
		if p != nil {
			wallet(p.QRCode, "pay")
		}
		return o.OrderNo, "cancel then pay"
	}
}

// unsettledTrades counts trades the channel has paid that the database does not yet know as
// paid, or whose refund the channel has not yet paid out: a payment still on its way (its
// notification lost, its query not yet run) would otherwise look settled.
func unsettledTrades(ctx context.Context, db *sql.DB, ledger []sim.LedgerEntry) int {
	n := 0
	for _, l := range ledger {
		if l.PaidAt.IsZero() {
			continue
		}
		var status string
		var refunds int
		if err := db.QueryRowContext(ctx, `SELECT co.status, (SELECT COUNT(*) FROM refunds r WHERE r.out_trade_no = co.out_trade_no)
			FROM channel_orders co WHERE co.out_trade_no = $1`, l.OutTradeNo).Scan(&status, &refunds); err != nil {
			n++
			continue
		}
		if status != string(orderpay.ChannelOrderSuccess) || (l.Refunded == 0 && refunds > 0) {
			n++
		}
	}
	return n
}

// queriesByTrigger sums an instance's orderpay_channel_queries_total by trigger.
func queriesByTrigger(t *testing.T, m *Main) map[string]float64 {
	t.Helper()
	families, err := m.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "orderpay_channel_queries_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "trigger" {
					out[l.GetValue()] += metric.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// readStreamEvents reads every message of the stream from the start, up to the last one
// stored when it began, as the chaos harness does for the auditor's I7.
//
// A read that fails (on a cluster, a node just restarted may not answer JetStream's API for
// a moment: "no responders") is made again from the start, for up to half a minute.
func readStreamEvents(ctx context.Context, url, stream string) ([]audit.Event, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		events, err := readStreamEventsOnce(ctx, url, stream)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return events, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func readStreamEventsOnce(ctx context.Context, url, stream string) ([]audit.Event, error) {
	nc, err := nats.Connect(url, nats.Name("orderpay-two-instances-audit"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	events := []audit.Event{}
	if info.State.Msgs == 0 {
		return events, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			events = append(events, audit.Event{Subject: m.Subject(), MsgID: m.Headers().Get(jetstream.MsgIDHeader), Payload: m.Data()})
			if meta.Sequence.Stream >= info.State.LastSeq {
				return events, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("stream %s stopped at %d of %d messages", stream, len(events), info.State.Msgs)
		}
	}
}

// lockedBuffer collects both instances' log lines, to show when the test fails.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n lines.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openWork counts what is still open in the shared database, by what it is: orders neither
// paid nor cancelled, open payments, attempts and refunds, pending queries, unpublished
// outbox messages. Nothing open is the settled state the several-instance tests wait for.
func openWork(t *testing.T, ctx context.Context, db *sql.DB) map[string]int {
	t.Helper()
	open := map[string]int{}
	for what, query := range map[string]string{
		"unfinished orders":    `SELECT COUNT(*) FROM orders WHERE status NOT IN ('PAID', 'CANCELLED')`,
		"open payments":        `SELECT COUNT(*) FROM payments WHERE status IN ('UNPAID', 'PAYING')`,
		"open attempts":        `SELECT COUNT(*) FROM channel_orders WHERE status IN ('CREATED', 'PAYING')`,
		"open refunds":         `SELECT COUNT(*) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')`,
		"pending queries":      `SELECT COUNT(*) FROM pending_queries`,
		"unpublished messages": `SELECT COUNT(*) FROM outbox WHERE published_at = 0`,
	} {
		var n int
		if err := db.QueryRowContext(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			open[what] = n
		}
	}
	return open
}

// serveSim serves the simulator on a loopback port until the test ends and returns its URL.
func serveSim(t *testing.T, channel *sim.Simulator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: channel.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

package chaos

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
)

// The flood benchmark: one server takes, all at once, forged notifications, order streams
// from many buyers, connections that trickle a request body, idle keep-alive connections,
// and honest buyers who order and pay while every channel notification is lost. It reports
// what the honest buyers saw (time from the wallet paying to PAID on their pay page's
// stream), how hard the channel was queried against how many attempts were open, the
// server's peak goroutines and memory, how much the database grew, and how many of the
// slow and idle connections the server still held once its timeouts had passed.

// Defaults of FloodConfig.
const (
	DefaultFloodForged       = 5000
	DefaultFloodStreams      = 2000
	DefaultFloodStreamBuyers = 200
	DefaultFloodSlowBodies   = 1000
	DefaultFloodIdleConns    = 200
	DefaultFloodHonest       = 100
	DefaultFloodHonestOver   = 10 * time.Second
)

// FloodConfig is one flood run. Zero fields take the defaults.
type FloodConfig struct {
	Forged       int           // forged notifications; 5000
	Streams      int           // order streams the attackers open; 2000
	StreamBuyers int           // attackers, each with an order of its own; 200
	SlowBodies   int           // connections trickling a request body; 1000
	IdleConns    int           // idle keep-alive connections; 200
	Honest       int           // honest buyers; 100
	HonestOver   time.Duration // the honest buyers arrive over this long; 10 s
	// AttackersPay makes every attacker ask for a QR code, so that the streams watch open
	// attempts the server queries the channel for (the worst case for the channel).
	AttackersPay bool
	// The other adversaries (flood_adversaries.go), each on unless its size is negative:
	// SlowWebhookPayments paid payments of an app whose receiver answers in
	// SlowWebhookDelay; AppWebhookPayments of another app, whose webhooks are timed; one
	// buyer holding QRHolderOrders open QR orders and polling them all; MetricsScrapers
	// concurrent /metrics scrapes of a store seeded with SeedOrders orders.
	SlowWebhookPayments int // 20
	AppWebhookPayments  int // 20
	QRHolderOrders      int // 20
	MetricsScrapers     int // 100
	SeedOrders          int // 200,000
	DB, Binary          string
	Logger              *slog.Logger
}

// FloodReport is what a flood run measured.
type FloodReport struct {
	Store string      `json:"store"`
	Cfg   FloodConfig `json:"config"`

	HonestPaid        int            `json:"honest_paid"`
	HonestP50MS       float64        `json:"honest_paid_p50_ms"` // wallet paid → the buyer's page shows PAID
	HonestP99MS       float64        `json:"honest_paid_p99_ms"`
	HonestMaxMS       float64        `json:"honest_paid_max_ms"`
	HonestStreamed    int            `json:"honest_streamed"` // watched by the event stream
	HonestPolled      int            `json:"honest_polled"`   // refused a stream, so polled
	HonestErrors      map[string]int `json:"honest_errors,omitempty"`
	StreamsOpened     int            `json:"streams_opened"`
	StreamsLimited    int            `json:"streams_429"` // over the per-buyer cap
	StreamsRefused    int            `json:"streams_503"` // over the server's cap
	ForgedSent        int            `json:"forged_sent"`
	ForgedAccepted    int            `json:"forged_accepted"` // acknowledged as genuine: must be 0
	QueriesPerSecMean float64        `json:"channel_queries_per_second_mean"`
	QueriesPerSecPeak float64        `json:"channel_queries_per_second_peak"`
	OpenAttemptsPeak  int            `json:"open_attempts_peak"`
	// QueryIntervalS is the server's least interval between two watch queries of one
	// payment: the bound is OpenAttemptsPeak / QueryIntervalS queries a second.
	QueryIntervalS     float64 `json:"query_interval_s"`
	PeakGoroutines     int     `json:"peak_goroutines"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	DBGrowthBytes      int64   `json:"db_growth_bytes"`
	DBFloodTableBytes  int64   `json:"db_growth_flood_tables_bytes"` // notification_log and query_log
	NotificationLogged int     `json:"notifications_logged"`
	SlowStillOpen      int     `json:"slow_bodies_still_open"`
	IdleStillOpen      int     `json:"idle_conns_still_open"`
	SlowCutP50S        float64 `json:"slow_bodies_cut_p50_s"`
	IdleCutP50S        float64 `json:"idle_conns_cut_p50_s"`
	Seconds            float64 `json:"seconds"`
	floodAdversaryReport
}

// floodTables are the tables the flood itself writes to (unverified notifications, and the
// queries of watched attempts); the rest hold the orders the buyers placed.
var floodTables = []string{"notification_log", "query_log"}

// Flood runs the flood.
func Flood(ctx context.Context, cfg FloodConfig) (*FloodReport, error) {
	cfg.Forged = cmp.Or(cfg.Forged, DefaultFloodForged)
	cfg.Streams = cmp.Or(cfg.Streams, DefaultFloodStreams)
	cfg.StreamBuyers = cmp.Or(cfg.StreamBuyers, DefaultFloodStreamBuyers)
	cfg.SlowBodies = cmp.Or(cfg.SlowBodies, DefaultFloodSlowBodies)
	cfg.IdleConns = cmp.Or(cfg.IdleConns, DefaultFloodIdleConns)
	cfg.Honest = cmp.Or(cfg.Honest, DefaultFloodHonest)
	cfg.HonestOver = cmp.Or(cfg.HonestOver, DefaultFloodHonestOver)
	cfg.SlowWebhookPayments = max(cmp.Or(cfg.SlowWebhookPayments, DefaultFloodSlowWebhookPayments), 0)
	cfg.AppWebhookPayments = max(cmp.Or(cfg.AppWebhookPayments, DefaultFloodAppWebhookPayments), 0)
	cfg.QRHolderOrders = max(cmp.Or(cfg.QRHolderOrders, DefaultFloodQRHolderOrders), 0)
	cfg.MetricsScrapers = max(cmp.Or(cfg.MetricsScrapers, DefaultFloodMetricsScrapers), 0)
	cfg.SeedOrders = max(cmp.Or(cfg.SeedOrders, DefaultFloodSeedOrders), 0)
	// The server runs with its default limits: they are part of what is measured.
	e, err := startEnv(ctx, envConfig{Binary: cfg.Binary, DB: cfg.DB, Prefix: "orderpay-flood-", TimeScale: 1, LogLevel: "warn", Logger: cfg.Logger,
		ServerArgs: []string{"--rate-limit-global", "1000/s,burst=2000", "--rate-limit-buyer", "5/s,burst=30", "--rate-limit-admin", "20/s,burst=40",
			// The apps' webhook receivers listen on this machine's loopback, which webhooks
			// reach only when allowed.
			"--webhook-allow-networks", "127.0.0.1"}})
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &FloodReport{Store: e.store.Dialect(), Cfg: cfg, HonestErrors: map[string]int{}, QueryIntervalS: payment.PollQueryIntervalDefault.Seconds()}
	rep.Cfg.Logger = nil
	if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop, Probability: 1}}}); err != nil {
		return nil, err
	}
	c := e.client
	sku := e.runID + "-flood"
	if err := c.CreateSKU(ctx, sku, 990, int64(10*(cfg.Honest+cfg.StreamBuyers)), "special"); err != nil {
		return nil, err
	}
	// The QR holder orders normal goods: the buyer caps let one buyer hold at most 5 unpaid
	// orders of special offers, and 20 of normal goods (operations.md, buyer caps).
	holderSKU := e.runID + "-flood-qr"
	if err := c.CreateSKU(ctx, holderSKU, 990, int64(max(cfg.QRHolderOrders, 1)), "normal"); err != nil {
		return nil, err
	}
	// The attackers' orders come first: each attacker streams its own.
	attackers := make([]string, cfg.StreamBuyers) // order numbers
	var trades []string                           // their open attempts, named in forgeries
	var mu sync.Mutex
	if err := forEach(ctx, cfg.StreamBuyers, 16, func(i int) error {
		b := c.As(fmt.Sprintf("attacker-%d", i))
		o, err := b.CreateOrder(ctx, "", "", Item{SKU: sku, Qty: 1})
		if err != nil {
			return err
		}
		attackers[i] = o.OrderNo
		if cfg.AttackersPay {
			p, err := b.Pay(ctx, o.OrderNo, []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[i%2])
			if err != nil {
				return err
			}
			mu.Lock()
			trades = append(trades, p.PaymentNo+"A01")
			mu.Unlock()
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("flood: the attackers' orders: %w", err)
	}
	// The scrapes' store: seeded before the flood, in one statement.
	if cfg.SeedOrders > 0 {
		seedStart := time.Now()
		if err := seedOrders(ctx, e, cfg.SeedOrders); err != nil {
			return nil, err
		}
		rep.SeededOrders, rep.SeedSeconds = cfg.SeedOrders, time.Since(seedStart).Seconds()
	}
	// The QR holder: one buyer's open QR orders, asked for before the flood.
	holder := c.As("qr-holder")
	holderOrders, err := openQROrders(ctx, holder, holderSKU, e.runID+"-qr-holder", cfg.QRHolderOrders)
	if err != nil {
		return nil, fmt.Errorf("flood: the QR holder's orders: %w", err)
	}
	rep.QRHolderOpen = len(holderOrders)
	// The apps: one whose webhook receiver answers in SlowWebhookDelay, one whose webhooks
	// are timed.
	slowHooks, err := startHookReceiver(SlowWebhookDelay)
	if err != nil {
		return nil, err
	}
	defer slowHooks.close()
	appHooks, err := startHookReceiver(0)
	if err != nil {
		return nil, err
	}
	defer appHooks.close()
	channels := []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}
	slowApp, err := c.CreateApp(ctx, e.runID+"-slow-receiver", []string{slowHooks.URL}, channels)
	if err != nil {
		return nil, fmt.Errorf("flood: the slow receiver's app: %w", err)
	}
	honestApp, err := c.CreateApp(ctx, e.runID+"-app", []string{appHooks.URL}, channels)
	if err != nil {
		return nil, fmt.Errorf("flood: the honest app: %w", err)
	}
	before, _, err := dbBytes(ctx, e.store.DB(), e.store.Dialect())
	if err != nil {
		return nil, err
	}
	beforeTables, err := floodTableBytes(ctx, e.store.DB(), e.store.Dialect())
	if err != nil {
		return nil, err
	}
	started := time.Now()
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	var wg sync.WaitGroup
	sample := startSampling(floodCtx, e)

	// Streams, held until the flood ends.
	var opened, limited, refused atomic.Int64
	streamClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Streams, DisableCompression: true}}
	for i := range cfg.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buyer := i % cfg.StreamBuyers
			status := holdStream(floodCtx, streamClient, c.API+"/v1/orders/"+attackers[buyer]+"/events", c.Tokens(fmt.Sprintf("attacker-%d", buyer)))
			switch status {
			case http.StatusOK:
				opened.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			case http.StatusServiceUnavailable:
				refused.Add(1)
			}
		}()
	}
	// Forged notifications, half naming the attackers' real trades.
	var forgedSent, forgedAccepted atomic.Int64
	forgeClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = forEach(floodCtx, cfg.Forged, 32, func(i int) error {
			channel, body, header := forgery(i, trades)
			req, err := http.NewRequestWithContext(floodCtx, http.MethodPost, c.API+"/notify/"+channel, strings.NewReader(body))
			if err != nil {
				return nil
			}
			req.Header = header
			resp, err := forgeClient.Do(req)
			if err != nil {
				return nil
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			forgedSent.Add(1)
			if resp.StatusCode/100 == 2 {
				forgedAccepted.Add(1)
			}
			return nil
		})
	}()
	// Slow bodies and idle keep-alives: when did the server cut each?
	addr := strings.TrimPrefix(c.API, "http://")
	slowCut := make([]time.Duration, cfg.SlowBodies)
	idleCut := make([]time.Duration, cfg.IdleConns)
	for i := range cfg.SlowBodies {
		wg.Add(1)
		go func() { defer wg.Done(); slowCut[i] = trickle(floodCtx, addr) }()
	}
	for i := range cfg.IdleConns {
		wg.Add(1)
		go func() { defer wg.Done(); idleCut[i] = idleKeepAlive(floodCtx, addr) }()
	}

	// The QR holder polls their orders, and the scrapers scrape, until the flood ends.
	var holderStatuses, scrapeStatuses statusCounts
	var scrapeMu sync.Mutex
	var scrapeTook []time.Duration
	holderWG := pollOrders(floodCtx, holder, holderOrders, &holderStatuses)
	scrapeWG := scrapeMetrics(floodCtx, e.server.MetricsURL(), cfg.MetricsScrapers, &scrapeStatuses, &scrapeMu, &scrapeTook)

	// The apps' payments, arriving over the honest buyers' time: the slow receiver's, and
	// the honest app's, whose webhooks are timed from the wallet paying.
	var appMu sync.Mutex
	var hookIn []time.Duration
	rep.AppHookErrors = map[string]int{}
	var appWG sync.WaitGroup
	for i := range cfg.SlowWebhookPayments + cfg.AppWebhookPayments {
		appWG.Add(1)
		go func() {
			defer appWG.Done()
			n := cfg.SlowWebhookPayments + cfg.AppWebhookPayments
			if !sleepCtx(floodCtx, time.Duration(i)*cfg.HonestOver/time.Duration(n)) {
				return
			}
			pctx, cancel := context.WithTimeout(floodCtx, time.Minute)
			defer cancel()
			if i < cfg.SlowWebhookPayments {
				if _, _, err := appPayer(pctx, c, slowApp.APIKey, fmt.Sprintf("SLOW-%d", i), i); err == nil {
					appMu.Lock()
					rep.SlowHookPaid++
					appMu.Unlock()
				}
				return
			}
			p, paid, err := appPayer(pctx, c, honestApp.APIKey, fmt.Sprintf("APP-%d", i), i)
			if err == nil {
				appMu.Lock()
				rep.AppHookPaid++
				appMu.Unlock()
				at, ok := appHooks.wait(pctx, p.PaymentNo)
				if ok {
					appMu.Lock()
					hookIn = append(hookIn, at.Sub(paid))
					appMu.Unlock()
					return
				}
				err = errNoWebhook
			}
			appMu.Lock()
			rep.AppHookErrors[floodErrorKey(err)]++
			appMu.Unlock()
		}()
	}

	// The honest buyers.
	var honestMu sync.Mutex
	var paidIn []time.Duration
	var honestWG sync.WaitGroup
	for i := range cfg.Honest {
		honestWG.Add(1)
		go func() {
			defer honestWG.Done()
			if !sleepCtx(floodCtx, time.Duration(i)*cfg.HonestOver/time.Duration(cfg.Honest)) {
				return
			}
			d, streamed, err := honestBuyer(floodCtx, c.As(fmt.Sprintf("honest-%d", i)), streamClient, sku, i)
			honestMu.Lock()
			defer honestMu.Unlock()
			if err != nil {
				rep.HonestErrors[ErrorKey(err)]++
				return
			}
			paidIn = append(paidIn, d)
			if streamed {
				rep.HonestStreamed++
			} else {
				rep.HonestPolled++
			}
		}()
	}
	honestWG.Wait()
	appWG.Wait()
	l := summarize(paidIn)
	rep.HonestPaid, rep.HonestP50MS, rep.HonestP99MS, rep.HonestMaxMS = len(paidIn), l.P50, l.P99, l.Max
	// Hold the flood until the server's idle timeout has surely passed for every idle
	// connection, then count what it still holds.
	sleepCtx(ctx, time.Until(started.Add(floodHold)))
	rep.SlowStillOpen, rep.SlowCutP50S = cutStats(slowCut)
	rep.IdleStillOpen, rep.IdleCutP50S = cutStats(idleCut)
	stopFlood()
	wg.Wait()
	holderWG.Wait()
	scrapeWG.Wait()
	rep.Seconds = time.Since(started).Seconds()
	rep.QRHolderStatuses, rep.QRHolderReads = holderStatuses.snapshot()
	rep.MetricsStatuses, rep.MetricsScrapes = scrapeStatuses.snapshot()
	m := summarize(scrapeTook)
	rep.MetricsP50MS, rep.MetricsP99MS, rep.MetricsMaxMS = m.P50, m.P99, m.Max
	h := summarize(hookIn)
	rep.AppHookReceived, rep.AppHookP50MS, rep.AppHookP99MS, rep.AppHookMaxMS = len(hookIn), h.P50, h.P99, h.Max
	rep.SlowHookReceived, rep.SlowHookAnswered, rep.SlowHookCut = int(slowHooks.received.Load()), int(slowHooks.answered.Load()), int(slowHooks.cut.Load())
	s := sample.stop()
	rep.QueriesPerSecMean, rep.QueriesPerSecPeak, rep.OpenAttemptsPeak, rep.PeakGoroutines = s.meanQPS, s.peakQPS, s.peakOpen, s.peakGoroutines
	rep.StreamsOpened, rep.StreamsLimited, rep.StreamsRefused = int(opened.Load()), int(limited.Load()), int(refused.Load())
	rep.ForgedSent, rep.ForgedAccepted = int(forgedSent.Load()), int(forgedAccepted.Load())
	if m, err := serverMemory(e.server.PID()); err == nil {
		rep.PeakRSSBytes = m.HWM
	}
	after, _, err := dbBytes(ctx, e.store.DB(), e.store.Dialect())
	if err != nil {
		return nil, err
	}
	afterTables, err := floodTableBytes(ctx, e.store.DB(), e.store.Dialect())
	if err != nil {
		return nil, err
	}
	rep.DBGrowthBytes, rep.DBFloodTableBytes = after-before, afterTables-beforeTables
	if err := e.store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM notification_log`).Scan(&rep.NotificationLogged); err != nil {
		return nil, err
	}
	return rep, nil
}

// floodHold is how long the flood lasts at least: past the server's default idle timeout
// (60 s) and read timeout (15 s), with a margin, so that every slow or idle connection the
// server still holds then is one it failed to cut.
const floodHold = 75 * time.Second

// forEach runs fn(0..n-1) with at most workers at once, stopping at the first error.
func forEach(ctx context.Context, n, workers int, fn func(i int) error) error {
	idx := make(chan int)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil || first != nil {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	return first
}

// holdStream opens an order's event stream with a buyer's token and reads it until ctx
// ends or the server ends it; it returns the status the server answered.
func holdStream(ctx context.Context, hc *http.Client, url, token string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		go func() { <-ctx.Done(); resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

// forgery is the i-th forged notification: alternately Alipay's form and WeChat's JSON,
// unsigned or signed by nobody, naming a real trade (of trades) every other time.
func forgery(i int, trades []string) (channel, body string, header http.Header) {
	trade := fmt.Sprintf("P%020dA01", i)
	if len(trades) > 0 && i%4 < 2 {
		trade = trades[(i/4)%len(trades)]
	}
	if i%2 == 0 {
		v := url.Values{"out_trade_no": {trade}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"9.90"}, "notify_id": {strconv.Itoa(i)},
			"app_id": {"2021000000000000"}, "sign_type": {"RSA2"}, "sign": {"Zm9yZ2Vk"}}
		return orderpay.ChannelAlipay, v.Encode(), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	}
	body = fmt.Sprintf(`{"id":"forged-%d","event_type":"TRANSACTION.SUCCESS","resource_type":"encrypt-resource","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"Zm9yZ2Vk","nonce":"abcdefabcdef","associated_data":"transaction","original_type":"transaction"},"out_trade_no":%q}`, i, trade)
	return orderpay.ChannelWechat, body, http.Header{"Content-Type": {"application/json"}, "Wechatpay-Serial": {"PUB_KEY_ID_0000"},
		"Wechatpay-Signature": {"Zm9yZ2Vk"}, "Wechatpay-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}, "Wechatpay-Nonce": {"forged"}}
}

// trickle sends a create's headers and then a byte of its body every 2 s, as a slow-body
// attacker does, and returns how long the server held the connection (0 if it never cut it
// before ctx ended).
func trickle(ctx context.Context, addr string) time.Duration {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/orders HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
	cut := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, conn); close(cut) }()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-cut:
			return time.Since(start)
		case <-ctx.Done():
			return 0
		case <-t.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				<-cut
				return time.Since(start)
			}
		}
	}
}

// idleKeepAlive makes one request on a keep-alive connection, then idles, and returns how
// long after the answer the server closed it (0 if it had not before ctx ended).
func idleKeepAlive(ctx context.Context, addr string) time.Duration {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	cut := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, br); close(cut) }()
	select {
	case <-cut:
		return time.Since(start)
	case <-ctx.Done():
		return 0
	}
}

func cutStats(cut []time.Duration) (stillOpen int, p50 float64) {
	var closed []time.Duration
	for _, d := range cut {
		if d == 0 {
			stillOpen++
		} else {
			closed = append(closed, d)
		}
	}
	return stillOpen, summarize(closed).P50 / 1000
}

// honestBuyer orders, asks for a QR code, watches the order's event stream as the pay page
// does (polling every 2 s if the server refuses the stream), pays at the wallet, and
// returns the time from the wallet paying to the page seeing PAID.
func honestBuyer(ctx context.Context, c *Client, streams *http.Client, sku string, i int) (time.Duration, bool, error) {
	o, err := c.CreateOrder(ctx, "", "", Item{SKU: sku, Qty: 1 + int64(i%3)})
	if err != nil {
		return 0, false, err
	}
	p, err := c.Pay(ctx, o.OrderNo, []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[i%2])
	if err != nil {
		return 0, false, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	paid := make(chan time.Time, 1)
	streamed := watchStream(wctx, streams, c, o.OrderNo, paid)
	if !streamed {
		go func() {
			if at, err := c.WaitStatus(wctx, o.OrderNo, string(orderpay.OrderPaid), 2*time.Second); err == nil {
				paid <- at
			}
		}()
	}
	from := time.Now()
	if err := c.WalletPay(wctx, p.QRCode); err != nil {
		return 0, streamed, err
	}
	select {
	case at := <-paid:
		return at.Sub(from), streamed, nil
	case <-wctx.Done():
		return 0, streamed, errors.New("not PAID within a minute")
	}
}

// watchStream opens the order's event stream and sends the moment it shows PAID; it reports
// whether the server took the stream.
func watchStream(ctx context.Context, hc *http.Client, c *Client, no string, paid chan<- time.Time) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.API+"/v1/orders/"+no+"/events", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+c.Tokens(c.buyer))
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return false
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data:") && strings.Contains(line, `"status":"PAID"`) {
				paid <- time.Now()
				return
			}
		}
	}()
	return true
}

// dbBytes is the space the database's tables and indexes take, and by table.
func dbBytes(ctx context.Context, db *sql.DB, dialect string) (int64, map[string]int64, error) {
	q := `SELECT name, SUM(pgsize) FROM dbstat GROUP BY name`
	if dialect == "postgres" {
		q = `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = current_schema() AND c.relkind = 'r'`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, nil, fmt.Errorf("flood: database size: %w", err)
	}
	defer rows.Close()
	var total int64
	by := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return 0, nil, err
		}
		by[name], total = n, total+n
	}
	return total, by, rows.Err()
}

func floodTableBytes(ctx context.Context, db *sql.DB, dialect string) (int64, error) {
	_, by, err := dbBytes(ctx, db, dialect)
	var n int64
	for name, b := range by {
		for _, t := range floodTables {
			// SQLite's dbstat names the indexes of a table apart; they start with its name
			// (sqlite_autoindex_<table>…, or the schema's own <table>_… indexes).
			if name == t || strings.HasPrefix(name, t+"_") || strings.Contains(name, "autoindex_"+t) {
				n += b
			}
		}
	}
	return n, err
}

// sampler reads the server's metrics and open attempts every second while the flood runs.
type sampler struct {
	stopped chan struct{}
	done    chan floodSamples
	stopOne sync.Once
}

type floodSamples struct {
	meanQPS, peakQPS float64
	peakOpen         int
	peakGoroutines   int
}

func startSampling(ctx context.Context, e *env) *sampler {
	s := &sampler{stopped: make(chan struct{}), done: make(chan floodSamples, 1)}
	go func() {
		var out floodSamples
		type point struct {
			at      time.Time
			queries float64
		}
		var points []point
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if queries, goroutines, err := scrapeServer(e.server.MetricsURL()); err == nil {
				points = append(points, point{time.Now(), queries})
				out.peakGoroutines = max(out.peakGoroutines, goroutines)
			}
			var open int
			if e.store.DB().QueryRow(`SELECT COUNT(*) FROM channel_orders WHERE status = 'PAYING'`).Scan(&open) == nil {
				out.peakOpen = max(out.peakOpen, open)
			}
			select {
			case <-t.C:
				continue
			case <-s.stopped:
			case <-ctx.Done():
			}
			// Rates over windows of at least queryWindow: a scrape of a busy server takes a
			// while, and two scrapes a moment apart would make up a rate.
			for i := range points {
				for j := i + 1; j < len(points); j++ {
					if d := points[j].at.Sub(points[i].at); d >= queryWindow {
						out.peakQPS = max(out.peakQPS, (points[j].queries-points[i].queries)/d.Seconds())
						break
					}
				}
			}
			if n := len(points); n > 1 {
				out.meanQPS = (points[n-1].queries - points[0].queries) / points[n-1].at.Sub(points[0].at).Seconds()
			}
			s.done <- out
			return
		}
	}()
	return s
}

// queryWindow is the shortest window a rate of channel queries is measured over.
const queryWindow = 5 * time.Second

func (s *sampler) stop() floodSamples {
	s.stopOne.Do(func() { close(s.stopped) })
	return <-s.done
}

// scrapeServer reads the total of channel queries and the goroutines off the server's
// metrics (at url: ServerProcess.MetricsURL).
func scrapeServer(url string) (queries float64, goroutines int, err error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, perr := strconv.ParseFloat(value, 64)
		if perr != nil {
			continue
		}
		switch {
		case strings.HasPrefix(series, "orderpay_channel_queries_total{"):
			queries += v
		case series == "go_goroutines":
			goroutines = int(v)
		}
	}
	return queries, goroutines, sc.Err()
}

// serverMemory reads the server process's resident set.
func serverMemory(pid int) (ProcMemory, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return ProcMemory{}, err
	}
	defer f.Close()
	return ParseProcStatus(f)
}

// PrintFlood writes the report as text.
func PrintFlood(w io.Writer, r *FloodReport) {
	pass := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	// However many streams and forgeries name an attempt, it is queried at most once per
	// interval for them; besides, its schedule (10 s, 30 s, 1 min … after it opened) may
	// query it once within any window of queryWindow.
	bound := float64(r.OpenAttemptsPeak) * (1/r.QueryIntervalS + 1/queryWindow.Seconds())
	fmt.Fprintf(w, "flood: %d forged notifications, %d order streams from %d buyers, %d slow bodies, %d idle keep-alives; %d honest buyers over %s, every notification lost; store %s; %.0f s\n",
		r.Cfg.Forged, r.Cfg.Streams, r.Cfg.StreamBuyers, r.Cfg.SlowBodies, r.Cfg.IdleConns, r.Cfg.Honest, r.Cfg.HonestOver, r.Store, r.Seconds)
	fmt.Fprintf(w, "  honest buyers:   %d paid; wallet → PAID p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d watched by stream, %d polled); errors %v   [p99 ≤ 1 s: %s]\n",
		r.HonestPaid, r.HonestP50MS, r.HonestP99MS, r.HonestMaxMS, r.HonestStreamed, r.HonestPolled, r.HonestErrors, pass(r.HonestPaid == r.Cfg.Honest && r.HonestP99MS <= 1000))
	fmt.Fprintf(w, "  streams:         %d opened, %d refused per buyer (429), %d refused by the server's cap (503)\n", r.StreamsOpened, r.StreamsLimited, r.StreamsRefused)
	fmt.Fprintf(w, "  forgeries:       %d sent, %d acknowledged; %d rows in the notification log\n", r.ForgedSent, r.ForgedAccepted, r.NotificationLogged)
	fmt.Fprintf(w, "  channel queries: %.1f/s mean, %.1f/s peak (over %s windows); open attempts at most %d, so at most %.0f/s (one watch query per attempt per %.1f s, and one scheduled step per window)   [bounded by attempts, not streams: %s]\n",
		r.QueriesPerSecMean, r.QueriesPerSecPeak, queryWindow, r.OpenAttemptsPeak, bound, r.QueryIntervalS, pass(r.QueriesPerSecPeak <= bound))
	fmt.Fprintf(w, "  server:          peak %d goroutines, peak RSS %.0f MiB\n", r.PeakGoroutines, float64(r.PeakRSSBytes)/(1<<20))
	fmt.Fprintf(w, "  database:        grew %.2f MB in all; %.3f MB in the tables the flood writes (notification and query logs)   [flood ≤ 1 MB: %s]\n",
		float64(r.DBGrowthBytes)/1e6, float64(r.DBFloodTableBytes)/1e6, pass(r.DBFloodTableBytes <= 1e6))
	if r.Cfg.SlowWebhookPayments > 0 {
		fmt.Fprintf(w, "  slow webhooks:   an app whose receiver answers in %s: %d of %d payments paid; %d deliveries reached it, %d answered 200 after %s, %d cut by the server first\n",
			SlowWebhookDelay, r.SlowHookPaid, r.Cfg.SlowWebhookPayments, r.SlowHookReceived, r.SlowHookAnswered, SlowWebhookDelay, r.SlowHookCut)
	}
	if r.Cfg.AppWebhookPayments > 0 {
		fmt.Fprintf(w, "  app webhooks:    another app: %d of %d payments paid, %d success webhooks; wallet → webhook p50 %.0f ms, p99 %.0f ms, max %.0f ms; errors %v\n",
			r.AppHookPaid, r.Cfg.AppWebhookPayments, r.AppHookReceived, r.AppHookP50MS, r.AppHookP99MS, r.AppHookMaxMS, r.AppHookErrors)
	}
	if r.Cfg.QRHolderOrders > 0 {
		fmt.Fprintf(w, "  QR holder:       one buyer with %d open QR orders read them %d times (each every %s): statuses %v\n",
			r.QRHolderOpen, r.QRHolderReads, qrHolderPollEvery, r.QRHolderStatuses)
	}
	if r.Cfg.MetricsScrapers > 0 {
		fmt.Fprintf(w, "  metrics scrapes: %d concurrent scrapers over %d seeded orders (seeded in %.1f s): %d scrapes, statuses %v; p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
			r.Cfg.MetricsScrapers, r.SeededOrders, r.SeedSeconds, r.MetricsScrapes, r.MetricsStatuses, r.MetricsP50MS, r.MetricsP99MS, r.MetricsMaxMS)
	}
	fmt.Fprintf(w, "  connections:     %d of %d slow bodies and %d of %d idle keep-alives still open after the timeouts (cut at p50 %.1f s and %.1f s)   [none left: %s]\n",
		r.SlowStillOpen, r.Cfg.SlowBodies, r.IdleStillOpen, r.Cfg.IdleConns, r.SlowCutP50S, r.IdleCutP50S, pass(r.SlowStillOpen == 0 && r.IdleStillOpen == 0))
}

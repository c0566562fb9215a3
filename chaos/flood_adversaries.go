package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
)

// Three more of the flood's adversaries, beside the streams, forgeries and slow
// connections: an app whose webhook receiver answers only after SlowWebhookDelay (while
// another app's webhooks are timed), one buyer holding many open QR orders and polling them
// all, and many concurrent /metrics scrapes of a store seeded with many orders.

// Defaults of the three adversaries' sizes (FloodConfig); a negative size turns one off.
const (
	DefaultFloodSlowWebhookPayments = 20
	DefaultFloodAppWebhookPayments  = 20
	DefaultFloodQRHolderOrders      = 20
	DefaultFloodMetricsScrapers     = 100
	DefaultFloodSeedOrders          = 200_000
)

// SlowWebhookDelay is how long the slow app's receiver takes to answer a webhook.
const SlowWebhookDelay = 30 * time.Second

// qrHolderPollEvery is how often the QR holder reads each of their orders.
const qrHolderPollEvery = 500 * time.Millisecond

// floodAdversaryReport is the part of FloodReport the three adversaries fill.
type floodAdversaryReport struct {
	// The slow receiver's app: payments paid, deliveries its receiver got, answered (200
	// after SlowWebhookDelay) and cut by the server before the answer.
	SlowHookPaid     int `json:"slow_webhook_payments_paid"`
	SlowHookReceived int `json:"slow_webhook_deliveries"`
	SlowHookAnswered int `json:"slow_webhook_answered"`
	SlowHookCut      int `json:"slow_webhook_cut_by_server"`
	// The honest app: payments paid, webhooks of their success received, and the time from
	// the wallet paying to the webhook arriving.
	AppHookPaid     int            `json:"app_webhook_payments_paid"`
	AppHookReceived int            `json:"app_webhooks_received"`
	AppHookP50MS    float64        `json:"app_webhook_p50_ms"`
	AppHookP99MS    float64        `json:"app_webhook_p99_ms"`
	AppHookMaxMS    float64        `json:"app_webhook_max_ms"`
	AppHookErrors   map[string]int `json:"app_webhook_errors,omitempty"`
	// The QR holder: open orders they hold, their reads and the answers' statuses.
	QRHolderOpen     int            `json:"qr_holder_open_orders"`
	QRHolderReads    int            `json:"qr_holder_reads"`
	QRHolderStatuses map[string]int `json:"qr_holder_statuses,omitempty"`
	// The scrapes: orders seeded first (and how long that took), scrapes made, their
	// statuses and durations.
	SeededOrders    int            `json:"seeded_orders"`
	SeedSeconds     float64        `json:"seed_seconds"`
	MetricsScrapes  int            `json:"metrics_scrapes"`
	MetricsStatuses map[string]int `json:"metrics_statuses,omitempty"`
	MetricsP50MS    float64        `json:"metrics_scrape_p50_ms"`
	MetricsP99MS    float64        `json:"metrics_scrape_p99_ms"`
	MetricsMaxMS    float64        `json:"metrics_scrape_max_ms"`
}

// statusCounts counts answers by status ("200", "429", "transport" for no answer).
type statusCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *statusCounts) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[key]++
}

func (s *statusCounts) snapshot() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, total := map[string]int{}, 0
	for k, v := range s.n {
		out[k], total = v, total+v
	}
	return out, total
}

// get reads url with the bearer token (if any), discards the body, and returns the status
// as a key of statusCounts.
func get(ctx context.Context, hc *http.Client, url, token string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "transport"
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "transport"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// seedOrders inserts n closed orders straight into the server's database, in one statement
// (a recursive row generator both engines run), so that the store /metrics counts is
// large without n API calls. They are CANCELLED orders of buyers of their own, created now
// (retention leaves them), which no sweeper or query ever touches.
func seedOrders(ctx context.Context, e *env, n int) error {
	now := time.Now().UnixMilli()
	_, err := e.store.DB().ExecContext(ctx, e.store.Rebind(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < CAST(? AS INTEGER))
		INSERT INTO orders (order_no, buyer_id, status, total, discount, payable, product_type, pay_deadline, created_at, updated_at, closed_at)
		SELECT CAST(? AS TEXT) || CAST(i AS TEXT), CAST(? AS TEXT) || CAST(i % 1000 AS TEXT), ?, 990, 0, 990, 'normal', ?, ?, ?, ? FROM seq`),
		n, "S"+e.runID+"-", e.runID+"-seeded-", string(orderpay.OrderCancelled), now, now, now, now)
	if err != nil {
		return fmt.Errorf("flood: seeding %d orders: %w", n, err)
	}
	return nil
}

// scrapeMetrics runs scrapers concurrent readers of the server's metrics, each scraping
// again as soon as it has its answer, until ctx ends.
func scrapeMetrics(ctx context.Context, url string, scrapers int, statuses *statusCounts, mu *sync.Mutex, took *[]time.Duration) *sync.WaitGroup {
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: scrapers}}
	var wg sync.WaitGroup
	for range scrapers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				status := get(ctx, hc, url, "")
				if ctx.Err() != nil {
					return // cut by the end of the flood: not the server's answer
				}
				statuses.add(status)
				mu.Lock()
				*took = append(*took, time.Since(start))
				mu.Unlock()
				if status == "transport" {
					sleepCtx(ctx, 100*time.Millisecond)
				}
			}
		}()
	}
	return &wg
}

// retryLimited calls fn until it is not refused 429 (the buyer's write limit), at most a
// minute.
func retryLimited(ctx context.Context, fn func() error) error {
	giveUp := time.Now().Add(time.Minute)
	for {
		err := fn()
		var e *APIError
		if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || time.Now().After(giveUp) {
			return err
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return err
		}
	}
}

// openQROrders has buyer order n units of sku, one an order (each under an idempotency key
// of its own, keyPrefix and its index: the server takes identical unkeyed creates for one),
// and ask a QR code for each; it returns the order numbers.
func openQROrders(ctx context.Context, b *Client, sku, keyPrefix string, n int) ([]string, error) {
	var nos []string
	for i := range n {
		var o *OrderView
		if err := retryLimited(ctx, func() (err error) {
			o, err = b.CreateOrder(ctx, "", fmt.Sprintf("%s-%d", keyPrefix, i), Item{SKU: sku, Qty: 1})
			return err
		}); err != nil {
			return nos, err
		}
		if err := retryLimited(ctx, func() error {
			_, err := b.Pay(ctx, o.OrderNo, []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[i%2])
			return err
		}); err != nil {
			return nos, err
		}
		nos = append(nos, o.OrderNo)
	}
	return nos, nil
}

// pollOrders reads each order every qrHolderPollEvery, as the buyer's open pay pages do,
// until ctx ends.
func pollOrders(ctx context.Context, b *Client, nos []string, statuses *statusCounts) *sync.WaitGroup {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: len(nos)}}
	var wg sync.WaitGroup
	for _, no := range nos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				status := get(ctx, hc, b.API+"/v1/orders/"+no, b.Tokens(b.buyer))
				if ctx.Err() != nil {
					return
				}
				statuses.add(status)
				sleepCtx(ctx, qrHolderPollEvery)
			}
		}()
	}
	return &wg
}

// hookReceiver is a webhook receiver on a loopback port: it notes when each payment's
// success arrived, and answers after delay (at once for 0).
type hookReceiver struct {
	srv   *http.Server
	URL   string
	delay time.Duration

	received, answered, cut atomic.Int64
	mu                      sync.Mutex
	arrived                 map[string]time.Time // payment_no → first success webhook
	waiters                 map[string]chan struct{}
}

func startHookReceiver(delay time.Duration) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{URL: "http://" + ln.Addr().String() + "/hook", delay: delay, arrived: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	return h, nil
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	h.received.Add(1)
	var body struct { // the webhook's envelope, around the app payment's event
		Data struct {
			PaymentNo string `json:"payment_no"`
			Status    string `json:"status"`
		} `json:"data"`
	}
	data, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(data, &body) == nil && body.Data.Status == string(orderpay.AppPaymentSuccess) {
		paymentNo := body.Data.PaymentNo
		h.mu.Lock()
		if _, seen := h.arrived[paymentNo]; !seen {
			h.arrived[paymentNo] = at
			if ch, ok := h.waiters[paymentNo]; ok {
				close(ch)
			}
		}
		h.mu.Unlock()
	}
	if h.delay > 0 {
		t := time.NewTimer(h.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			h.cut.Add(1) // the server gave up waiting (or the flood ended)
			return
		}
	}
	h.answered.Add(1)
	w.WriteHeader(http.StatusOK)
}

// wait returns when the payment's success webhook arrived, or false if ctx ended first.
func (h *hookReceiver) wait(ctx context.Context, paymentNo string) (time.Time, bool) {
	h.mu.Lock()
	at, ok := h.arrived[paymentNo]
	ch := h.waiters[paymentNo]
	if !ok && ch == nil {
		ch = make(chan struct{})
		h.waiters[paymentNo] = ch
	}
	h.mu.Unlock()
	if ok {
		return at, true
	}
	select {
	case <-ch:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.arrived[paymentNo], true
	case <-ctx.Done():
		return time.Time{}, false
	}
}

func (h *hookReceiver) close() { h.srv.Close() }

// appPayer creates an app payment, pays its code at the wallet, and reads the payment
// every second until it is SUCCESS (every notification is lost: the app's read is what
// queries the channel, besides the schedule); it returns when the wallet paid.
func appPayer(ctx context.Context, c *Client, key, merchantNo string, i int) (*AppPaymentView, time.Time, error) {
	p, err := c.CreateAppPayment(ctx, key, AppPaymentRequest{MerchantOrderNo: merchantNo, Amount: 100 + int64(i), Subject: "flood top-up",
		Channel: []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[i%2], ExpiresInSeconds: 600})
	if err != nil {
		return nil, time.Time{}, err
	}
	paid := time.Now()
	if err := c.WalletPay(ctx, p.QRCode); err != nil {
		return p, paid, err
	}
	for {
		v, err := c.AppPayment(ctx, key, p.PaymentNo)
		if err == nil && v.Status == string(orderpay.AppPaymentSuccess) {
			return v, paid, nil
		}
		if !sleepCtx(ctx, time.Second) {
			return p, paid, errNotSuccess
		}
	}
}

// The adversaries' own failures, as the report names them.
var (
	errNotSuccess = errors.New("not SUCCESS within a minute")
	errNoWebhook  = errors.New("no webhook within a minute")
)

// floodErrorKey names an error of the adversaries for the report: one of their own
// failures by itself, else as ErrorKey does (an API answer's status and code, or
// "transport").
func floodErrorKey(err error) string {
	if errors.Is(err, errNotSuccess) || errors.Is(err, errNoWebhook) {
		return err.Error()
	}
	return ErrorKey(err)
}

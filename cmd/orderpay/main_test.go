package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/httpapi"
	"orderpay/sqlstore/storetest"
)

// startMain runs a whole orderpay (API, simulator, bus, store) on loopback ports in a temp
// dir, as `orderpay serve` would, and stops it when the test ends.
func startMain(t testing.TB, db string, configure ...func(*Main)) (*Main, *apiClient) {
	t.Helper()
	m := NewMain()
	m.Config.Addr, m.Config.SimAddr, m.Config.DataDir, m.Config.DB = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), db
	m.Config.AdminToken, m.Config.LogLevel, m.Config.MetricsAddr = "test-admin-token-of-24-chars", "warn", "127.0.0.1:0"
	// Every request of a test comes from 127.0.0.1, most with no X-Buyer-Id, so the default
	// per-buyer limit would refuse a test's eleventh write in a second. A test of the
	// limits turns them on.
	m.Config.RateLimits = httpapi.RateLimits{}
	var out bytes.Buffer
	m.Stdout, m.Stderr = &out, io.Discard
	for _, f := range configure {
		f(m)
	}
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if !strings.Contains(out.String(), m.URL) || !strings.Contains(out.String(), m.SimURL) ||
		(m.MetricsURL != "" && !strings.Contains(out.String(), m.MetricsURL+"/metrics")) {
		t.Fatalf("serve did not print its URLs:\n%s", out.String())
	}
	return m, newAPIClient(m.URL, m.SimURL, m.AdminToken)
}

// channelFacts are what the end-to-end story checks that differs between channels.
var channelFacts = map[string]struct {
	qrPrefix   string
	paidStatus string // in the simulator's ledger
	rawPaid    string // in the raw channel message (notification or query) kept in the attempt's history
}{
	orderpay.ChannelAlipay: {"https://qr.alipay.com/", "TRADE_SUCCESS", "TRADE_SUCCESS"},
	orderpay.ChannelWechat: {"weixin://wxpay/bizpayurl?pr=", "SUCCESS", `"trade_state":"SUCCESS"`},
}

func TestEndToEndSQLite(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		t.Run(channel, func(t *testing.T) { endToEnd(t, m, c, channel) })
	}
}

func TestEndToEndPostgres(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, storetest.PostgresDSN(t))
	if m.Store.Dialect() != "postgres" {
		t.Fatalf("store is %s", m.Store.Dialect())
	}
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		t.Run(channel, func(t *testing.T) { endToEnd(t, m, c, channel) })
	}
}

// endToEnd is the walking skeleton's story, through real HTTP: a merchant lists a SKU, a
// buyer orders it, asks to pay (twice: same QR code), pays at the wallet, and sees the order
// PAID; stock, ledger, history and events all agree.
func endToEnd(t *testing.T, m *Main, c *apiClient, channel string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	facts := channelFacts[channel]
	sku := "e2e-tea-" + channel
	if err := c.createSKU(ctx, sku, 2599, 5, "special"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "alice", sku, 2)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "PENDING_PAYMENT" || o.Payable != 2*2599 || o.RemainingSeconds < 29*60 || o.RemainingSeconds > 30*60 {
		t.Fatalf("new order %+v", o)
	}
	// A special offer's 30 minutes, shown as the seed's under-a-day countdown.
	if !strings.HasPrefix(o.Remaining, "00:") || o.Remaining != orderpay.Countdown(o.RemainingSeconds) {
		t.Fatalf("countdown %q for %d s", o.Remaining, o.RemainingSeconds)
	}
	p1, err := c.pay(ctx, o.OrderNo, channel)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.pay(ctx, o.OrderNo, channel)
	if err != nil {
		t.Fatal(err)
	}
	if p1.QRCode == "" || p1.QRCode != p2.QRCode || p1.PaymentNo != p2.PaymentNo || p1.Channel != channel || !strings.HasPrefix(p1.QRCode, facts.qrPrefix) {
		t.Fatalf("repeated pay gave %+v then %+v; want the same QR code", p1, p2)
	}
	if err := c.walletPay(ctx, p1.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got, _ := c.order(ctx, o.OrderNo)
	if got.PaymentNo != p1.PaymentNo || got.RemainingSeconds != 0 {
		t.Fatalf("paid order %+v", got)
	}
	// Paying a paid order is refused.
	if _, err := c.pay(ctx, o.OrderNo, channel); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after PAID: %v", err)
	}
	st, _ := m.Store.Stock(ctx, sku)
	if st.Available != 3 || st.Locked != 0 || st.Sold != 2 {
		t.Fatalf("stock %+v", st)
	}
	// The channel's own ledger has the same trade, for the same money.
	var trade *sim.LedgerEntry
	for _, l := range m.Sim.Ledger() {
		if l.OutTradeNo == p1.PaymentNo+"A01" {
			trade = &l
		}
	}
	if trade == nil || trade.Channel != channel || trade.Amount != 2*2599 || trade.Status != facts.paidStatus {
		t.Fatalf("ledger entry %+v", trade)
	}
	// The attempt records the fee the built-in simulator's channels file contracts for its
	// account: 0.6 % of 51.98 yuan is 31.188 fen, 31 rounded half up.
	co, err := m.Store.ChannelOrder(ctx, p1.PaymentNo+"A01")
	if err != nil {
		t.Fatal(err)
	}
	if !co.FeeRecorded || co.Fee != 31 || co.FeeRate != 60000 {
		t.Fatalf("paid attempt's fee: recorded %v, %d fen at %s; want 31 fen at 0.60000%%", co.FeeRecorded, co.Fee, co.FeeRate)
	}
	// Every transition is in the history, with the raw channel message that proved the
	// payment (the notification, or the query the buyer's polling triggered) on the attempt.
	h, _ := m.Store.History(ctx, orderpay.EntityChannelOrder, p1.PaymentNo+"A01")
	if len(h) != 3 || h[2].To != "SUCCESS" || !strings.Contains(h[2].Raw, facts.rawPaid) {
		t.Fatalf("channel order history %+v", h)
	}
	// The events reached the broker: order.created, payment.succeeded, order.paid.
	waitForSubjects(t, m, orderpay.SubjectOrderCreated, orderpay.SubjectPaymentSucceeded, orderpay.SubjectOrderPaid)
}

// waitForSubjects waits until the stream holds at least one message on each subject.
func waitForSubjects(t *testing.T, m *Main, subjects ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		stream, err := m.Bus.JetStream().Stream(ctx, m.Bus.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		missing := ""
		for _, s := range subjects {
			if info.State.Subjects[s] == 0 {
				missing += " " + s
			}
		}
		if missing == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no message on%s; stream has %v", missing, info.State.Subjects)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func apiCode(err error) string {
	var e *apiError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// rowCounts counts the rows of every table a request could write.
func rowCounts(t *testing.T, m *Main) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"skus", "stock", "orders", "order_items", "payments", "channel_orders", "notifications", "history", "outbox", "app_payments", "till_payments"} {
		var n int
		if err := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	var locked int
	m.Store.DB().QueryRow(`SELECT COALESCE(SUM(locked), 0) FROM stock`).Scan(&locked)
	out["locked units"] = locked
	return out
}

// Every kind of bad input gets a JSON error with its code and status, and writes nothing.
func TestBadInputGetsJSONErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx := context.Background()
	if err := c.createSKU(ctx, "scarce", 100, 1, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "bob", "scarce", 1)
	if err != nil {
		t.Fatal(err)
	}
	before := rowCounts(t, m)
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	for _, tc := range []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		code               string
	}{
		{"malformed JSON", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[`, 400, orderpay.EINVALID},
		{"not an object", "POST", "/v1/orders", nil, `[1,2]`, 400, orderpay.EINVALID},
		{"empty body", "POST", "/v1/orders", nil, ``, 400, orderpay.EINVALID},
		{"unknown field", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[{"sku":"scarce","quantity":1}]}`, 400, orderpay.EINVALID},
		{"fractional qty", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[{"sku":"scarce","qty":0.5}]}`, 400, orderpay.EINVALID},
		{"zero qty", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[{"sku":"scarce","qty":0}]}`, 400, orderpay.EINVALID},
		{"negative qty", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[{"sku":"scarce","qty":-2}]}`, 400, orderpay.EINVALID},
		{"unknown sku", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[{"sku":"unicorn","qty":1}]}`, 400, orderpay.EINVALID},
		{"no items", "POST", "/v1/orders", nil, `{"buyer_id":"bob","items":[]}`, 400, orderpay.EINVALID},
		{"too little stock", "POST", "/v1/orders", nil, `{"buyer_id":"carol","items":[{"sku":"scarce","qty":1}]}`, 409, orderpay.EOUTOFSTOCK},
		{"unknown order", "GET", "/v1/orders/20990101000000000000", nil, ``, 404, orderpay.ENOTFOUND},
		{"pay unknown order", "POST", "/v1/orders/20990101000000000000/pay", nil, `{"channel":"alipay"}`, 404, orderpay.ENOTFOUND},
		{"pay by unknown channel", "POST", "/v1/orders/" + o.OrderNo + "/pay", nil, `{"channel":"paypal"}`, 400, orderpay.EINVALID},
		{"pay malformed", "POST", "/v1/orders/" + o.OrderNo + "/pay", nil, `{"channel":`, 400, orderpay.EINVALID},
		{"admin without token", "POST", "/admin/skus", nil, `{"sku":"x","merchant_id":"m","title":"t","price":1,"stock":1}`, 401, orderpay.EUNAUTHORIZED},
		{"admin wrong token", "POST", "/admin/skus", http.Header{"Authorization": {"Bearer nope"}}, `{"sku":"x","merchant_id":"m","title":"t","price":1,"stock":1}`, 401, orderpay.EUNAUTHORIZED},
		{"sku negative price", "POST", "/admin/skus", admin, `{"sku":"x","merchant_id":"m","title":"t","price":-1,"stock":1}`, 400, orderpay.EINVALID},
		{"sku taken", "POST", "/admin/skus", admin, `{"sku":"scarce","merchant_id":"m","title":"t","price":1,"stock":1}`, 409, orderpay.ECONFLICT},
		{"notification unsigned", "POST", "/notify/alipay", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			"out_trade_no=P" + o.OrderNo + "A01&trade_status=TRADE_SUCCESS&total_amount=1.00", 401, orderpay.EUNAUTHORIZED},
		{"notification garbage", "POST", "/notify/alipay", nil, "%%%", 400, orderpay.EINVALID},
		{"notification unknown channel", "POST", "/notify/paypal", nil, "a=b", 404, orderpay.ENOTFOUND},
		{"no such route", "GET", "/v2/nothing", nil, ``, 404, orderpay.ENOTFOUND},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, m.URL+tc.path, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d %s with a message", resp.StatusCode, body.Error, tc.status, tc.code)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("bad requests wrote rows: before %v, after %v", before, after)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A notification whose signature does not verify is refused and never applied, whichever
// field was touched; the genuine one, sent afterwards, is applied once, and its redelivery
// changes nothing.
func TestForgedNotificationIsRefusedGenuineIsAppliedOnce(t *testing.T) {
	t.Parallel()
	// Capture what the simulator sends, instead of letting it reach orderpay.
	captured := make(chan url.Values, 1)
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		select {
		case captured <- r.PostForm:
		default:
		}
		io.WriteString(w, "success")
	})}
	// notify-only: with active queries, the first forged notification would trigger a query
	// that finds the payment (TestUnverifiableNotificationTriggersAQuery); here the story is
	// what the notifications alone do.
	m, c := startMain(t, "", func(m *Main) {
		m.Config.PublicURL = "http://" + listen(t, sink)
		m.Config.Compensation = CompensationNotifyOnly
	})
	ctx := context.Background()
	if err := c.createSKU(ctx, "forge", 1000, 3, "normal"); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "mallory", "forge", 1)
	p, err := c.pay(ctx, o.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	var genuine url.Values
	select {
	case genuine = <-captured:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification captured")
	}
	post := func(form url.Values) (int, string) {
		resp, err := http.Post(m.URL+"/notify/alipay", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	before := rowCounts(t, m)
	for field, value := range map[string]string{"total_amount": "0.01", "trade_status": "TRADE_FINISHED", "out_trade_no": "P1A01",
		"app_id": "2021000000000000", "seller_id": "2088000000000000", "sign": "AAAA"} {
		forged := url.Values{}
		for k, v := range genuine {
			forged[k] = append([]string(nil), v...)
		}
		forged.Set(field, value)
		if status, body := post(forged); status != http.StatusUnauthorized || !strings.Contains(body, orderpay.EUNAUTHORIZED) {
			t.Fatalf("forged %s: %d %s", field, status, body)
		}
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("forged notifications wrote rows: %v -> %v", before, after)
	}
	if got, _ := c.order(ctx, o.OrderNo); got.Status != "PENDING_PAYMENT" {
		t.Fatalf("order is %s after forged notifications", got.Status)
	}
	for i := 0; i < 2; i++ {
		if status, body := post(genuine); status != http.StatusOK || body != "success" {
			t.Fatalf("genuine delivery %d: %d %q", i, status, body)
		}
	}
	if got, _ := c.order(ctx, o.OrderNo); got.Status != "PAID" {
		t.Fatalf("order is %s after the genuine notification", got.Status)
	}
	h, _ := m.Store.History(ctx, orderpay.EntityOrder, o.OrderNo)
	if len(h) != 2 {
		t.Fatalf("order history %+v: the redelivery must not apply twice", h)
	}
	var notifications int
	m.Store.DB().QueryRow(`SELECT COUNT(*) FROM notifications`).Scan(&notifications)
	if notifications != 1 {
		t.Fatalf("%d notifications recorded, want 1", notifications)
	}
}

// With the direct call from the payment center switched off, the payment.succeeded event
// alone, through the outbox, the relay and the durable consumer, marks the order paid.
func TestBusAloneDeliversThePaymentResult(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.noDirectResults = true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "bus", 500, 2, "fast"); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "carol", "bus", 1)
	payByAlipay(ctx, t, c, o.OrderNo)
	h, _ := m.Store.History(ctx, orderpay.EntityOrder, o.OrderNo)
	if len(h) != 2 || h[1].To != "PAID" {
		t.Fatalf("history %+v", h)
	}
}

// A restart on the same data dir keeps orders, stock and keys, and does not reset the
// catalogue.
func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(m *Main) { m.Config.DataDir = dir }
	m1, c1 := startMain(t, "", cfg)
	ctx := context.Background()
	o, err := c1.createOrder(ctx, "dave", "tea-longjing-250g", 3)
	if err != nil {
		t.Fatal(err)
	}
	appID := m1.Sim.Keys().AppID
	m1.Close()
	m2, c2 := startMain(t, "", cfg)
	got, err := c2.order(ctx, o.OrderNo)
	if err != nil || got.Status != "PENDING_PAYMENT" {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	st, _ := m2.Store.Stock(ctx, "tea-longjing-250g")
	if st.Locked != 3 || st.Total != 1000 {
		t.Fatalf("stock after restart %+v", st)
	}
	if m2.Sim.Keys().AppID != appID {
		t.Fatal("keys were regenerated on restart")
	}
}

func TestServeFlagsAndEnvironment(t *testing.T) {
	t.Setenv("ORDERPAY_ADDR", "127.0.0.1:9999")
	t.Setenv("ORDERPAY_DB", "postgres://from-env")
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--db", "postgres://from-flag", "--nats", "nats://x:4222"}); err != nil {
		t.Fatal(err)
	}
	if m.Config.Addr != "127.0.0.1:9999" || m.Config.DB != "postgres://from-flag" || m.Config.NATS != "nats://x:4222" || m.Config.DataDir != "data" {
		t.Fatalf("config %+v", m.Config)
	}
	if err := m.ParseFlags([]string{"--no-such-flag"}); err == nil {
		t.Fatal("an unknown flag must be an error")
	}
}

// The rate limits default to 1000/s (burst 2000) for all buyers, 5/s (burst 30) per buyer,
// 20/s (burst 40) per address on the admin routes, and 1/s (burst 20) per address for the
// payments API's wrong keys; ORDERPAY_RATE_LIMIT_* set them, the flags win, and "off" switches
// one off.
func TestServeRateLimitFlagsAndEnvironment(t *testing.T) {
	m := NewMain()
	var help bytes.Buffer
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	want := httpapi.RateLimits{Global: httpapi.Limit{Rate: 1000, Burst: 2000}, PerBuyer: httpapi.Limit{Rate: 5, Burst: 30},
		Admin: httpapi.Limit{Rate: 20, Burst: 40}, AppAuthFailures: httpapi.Limit{Rate: 1, Burst: 20}}
	if m.Config.RateLimits != want {
		t.Fatalf("default limits %+v, want %+v", m.Config.RateLimits, want)
	}
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, s := range []string{"-rate-limit-global", "default 1000/s,burst=2000", "ORDERPAY_RATE_LIMIT_GLOBAL",
		"-rate-limit-buyer", "default 5/s,burst=30", "ORDERPAY_RATE_LIMIT_BUYER", "-rate-limit-admin", "default 20/s,burst=40", "ORDERPAY_RATE_LIMIT_ADMIN",
		"-rate-limit-app-auth", "default 1/s,burst=20", "ORDERPAY_RATE_LIMIT_APP_AUTH"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help does not mention %q:\n%s", s, help.String())
		}
	}

	t.Setenv("ORDERPAY_RATE_LIMIT_GLOBAL", "off")
	t.Setenv("ORDERPAY_RATE_LIMIT_BUYER", "1/s,burst=3")
	t.Setenv("ORDERPAY_RATE_LIMIT_ADMIN", "off")
	t.Setenv("ORDERPAY_RATE_LIMIT_APP_AUTH", "off")
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--rate-limit-global", "50/s,burst=60"}); err != nil {
		t.Fatal(err)
	}
	want = httpapi.RateLimits{Global: httpapi.Limit{Rate: 50, Burst: 60}, PerBuyer: httpapi.Limit{Rate: 1, Burst: 3}}
	if m.Config.RateLimits != want {
		t.Fatalf("limits %+v, want %+v", m.Config.RateLimits, want)
	}
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--rate-limit-buyer", "off"}); err != nil {
		t.Fatal(err)
	}
	if !m.Config.RateLimits.Global.Off() || !m.Config.RateLimits.PerBuyer.Off() {
		t.Fatalf("limits %+v, want both off", m.Config.RateLimits)
	}
	if err := NewMain().ParseFlags([]string{"--rate-limit-global", "lots"}); err == nil {
		t.Fatal("a malformed --rate-limit-global must be an error")
	}
	t.Setenv("ORDERPAY_RATE_LIMIT_BUYER", "5")
	if err := NewMain().ParseFlags(nil); err == nil || !strings.Contains(err.Error(), "ORDERPAY_RATE_LIMIT_BUYER") {
		t.Fatalf("a malformed ORDERPAY_RATE_LIMIT_BUYER gave %v", err)
	}
}

// With the default limits a person typing requests is never refused: thirty writes at once
// from one address without X-Buyer-Id (a pasted block of curls) all pass; a script going on
// at full speed is soon 429, which says it counted this address.
func TestServeDefaultBuyerLimitLetsAPersonTypeOn(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "", func(m *Main) { m.Config.RateLimits = NewMain().Config.RateLimits })
	cancel := func() (int, string) {
		t.Helper()
		resp, err := http.Post(m.URL+"/v1/orders/20990101000000000000/cancel", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Message
	}
	for i := range 30 {
		if status, msg := cancel(); status != http.StatusNotFound {
			t.Fatalf("write %d of a person's 30: %d %s, want 404 (no such order), not the limit", i+1, status, msg)
		}
	}
	// The bucket refills at 5/s while these run: a script sending faster still runs dry.
	for range 100 {
		status, msg := cancel()
		if status == http.StatusTooManyRequests {
			if !strings.Contains(msg, "too many requests from this address") {
				t.Fatalf("429 %q, want it to say it counted this address", msg)
			}
			return
		}
	}
	t.Fatal("130 writes at once from one address were never limited")
}

// Serve wires the limits into the API: over real HTTP, a buyer's write beyond its burst is
// a 429 with Retry-After that writes nothing; another buyer and notifications pass.
func TestServeRateLimitsBuyersWrites(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "", func(m *Main) {
		m.Config.RateLimits.PerBuyer = httpapi.Limit{Rate: 1.0 / 3600, Burst: 2} // a token an hour
	})
	post := func(path, buyer, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("POST", m.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if buyer != "" {
			req.Header.Set("X-Buyer-Id", buyer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	create := func(buyer string, qty int) *http.Response {
		return post("/v1/orders", buyer, fmt.Sprintf(`{"buyer_id":%q,"items":[{"sku":"tea-longjing-250g","qty":%d}]}`, buyer, qty))
	}
	began := time.Now()
	for qty := 1; qty <= 2; qty++ {
		if resp := create("alice", qty); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %d: %s", qty, resp.Status)
		}
	}
	before := rowCounts(t, m)
	resp := create("alice", 3)
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	// The next token is an hour after the first was taken, less what has passed since
	// (a loaded machine takes seconds over the two creates): whole seconds, rounded up.
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if least := 3600 - int(time.Since(began).Seconds()) - 1; resp.StatusCode != http.StatusTooManyRequests || retry < least || retry > 3600 || e.Error.Code != httpapi.ERATELIMITED {
		t.Fatalf("third create: %s, Retry-After %q (want %d to 3600), %+v", resp.Status, resp.Header.Get("Retry-After"), least, e)
	}
	if resp := post("/v1/orders/20990101000000000000/pay", "alice", `{"channel":"alipay"}`); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("pay over the limit: %s", resp.Status)
	}
	if after := rowCounts(t, m); !maps.Equal(after, before) {
		t.Fatalf("refused writes changed the database: %v -> %v", before, after)
	}
	if resp := create("bob", 1); resp.StatusCode != http.StatusCreated {
		t.Fatalf("another buyer: %s", resp.Status)
	}
	for range 5 {
		if resp := post("/notify/alipay", "alice", "%%%"); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a notification: %s, want 400 from the channel, never 429", resp.Status)
		}
	}
}

// listen serves srv on a loopback port for the test's lifetime and returns its host:port.
func listen(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// payByAlipay pays an order in full at the Alipay wallet, waits until it is PAID, and
// returns the code it paid.
func payByAlipay(ctx context.Context, t *testing.T, c *apiClient, orderNo string) *payView {
	t.Helper()
	p, err := c.pay(ctx, orderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, orderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return p
}

// simChannelsFile writes the channels file of a simulator's merchant, as `orderpay sim`
// does, into keysDir, and returns its path: serve --channels with it is the production code
// path to the simulator.
func simChannelsFile(t *testing.T, keysDir string, keys *sim.Keys, simURL string) string {
	t.Helper()
	path := filepath.Join(keysDir, "channels.toml")
	if err := channelfile.ForSimulator(keysDir, keys, simURL, channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

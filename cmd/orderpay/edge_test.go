package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderpay"
	"orderpay/httpapi"
	"orderpay/sqlstore/storetest"
)

// rawCall sends body as it is (no JSON encoding) and returns the status, the headers and
// the decoded error code.
func rawCall(t *testing.T, method, url string, header http.Header, body []byte) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	code := ""
	if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
		rest := b[i+len(`"code":"`):]
		code = string(rest[:bytes.IndexByte(rest, '"')])
	}
	return resp.StatusCode, resp.Header, code
}

func TestTextTheStoreCannotHoldIsRefused(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); refusesUnstorableText(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); refusesUnstorableText(t, storetest.PostgresDSN(t)) })
}

// A NUL character or bytes that are not UTF-8, in a body, a path, a query or a header that
// is stored, are 400 EINVALID on both engines, and nothing is written (PostgreSQL refused
// them with a 500 before); a notification carrying them is still logged, escaped.
func refusesUnstorableText(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "tin", 500, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	for _, tc := range []struct {
		name, method, path string
		header             http.Header
		body               []byte
	}{
		{"a NUL in buyer_id", "POST", "/v1/orders", nil, []byte(`{"buyer_id":"al\u0000ice","items":[{"sku":"tin","qty":1}]}`)},
		{"bytes that are not UTF-8 in a sku", "POST", "/v1/orders", nil, []byte("{\"buyer_id\":\"alice\",\"items\":[{\"sku\":\"t\xffin\",\"qty\":1}]}")},
		{"a NUL in an address", "POST", "/v1/orders", nil, []byte(`{"buyer_id":"alice","items":[{"sku":"tin","qty":1}],"address":{"name":"A\u0000","phone":"13800138000","detail":"x"}}`)},
		{"a NUL in a SKU title", "POST", "/admin/skus", admin, []byte(`{"sku":"nul","merchant_id":"m","title":"Tea\u0000","price":100,"stock":1}`)},
		{"a NUL in a path", "GET", "/v1/orders/2026%00", nil, nil},
		{"bytes that are not UTF-8 in a path", "GET", "/v1/orders/2026%FF", nil, nil},
		{"a NUL in a query", "GET", "/v1/orders?buyer_id=al%00ice", nil, nil},
		{"an Idempotency-Key that is not UTF-8", "POST", "/v1/orders", http.Header{"Idempotency-Key": {"k\xff"}},
			[]byte(`{"buyer_id":"alice","items":[{"sku":"tin","qty":1}]}`)},
		{"an admin search with a NUL", "GET", "/admin/orders?q=%00", admin, nil},
	} {
		status, _, code := rawCall(t, tc.method, m.URL+tc.path, tc.header, tc.body)
		if status != http.StatusBadRequest || code != orderpay.EINVALID {
			t.Errorf("%s: %d %s, want 400 EINVALID", tc.name, status, code)
		}
	}
	var orders, skus int
	if err := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := m.Store.DB().QueryRow(m.Store.Rebind(`SELECT COUNT(*) FROM skus WHERE sku = ?`), "nul").Scan(&skus); err != nil {
		t.Fatal(err)
	}
	if orders != 0 || skus != 0 {
		t.Fatalf("refused requests wrote %d orders and %d SKUs", orders, skus)
	}
	// A NUL in the address of PATCH /v1/orders/{no}/address (its body embeds the address's
	// fields) is refused like the same address in POST /v1/orders, and the order keeps its
	// address (PostgreSQL answered 500 and SQLite stored the NUL before).
	o, err := c.createOrder(ctx, "alice", "tin", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"name", "phone", "detail"} {
		addr := map[string]string{"name": "Bo", "phone": "13800138000", "detail": "1 Road"}
		addr[field] = "x\x00y"
		body, _ := json.Marshal(map[string]string{"buyer_id": "alice", "name": addr["name"], "phone": addr["phone"], "detail": addr["detail"]})
		if status, h, code := rawCall(t, "PATCH", m.URL+"/v1/orders/"+o.OrderNo+"/address", nil, body); status != http.StatusBadRequest ||
			code != orderpay.EINVALID || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("a NUL in the changed address's %s: %d %s (%s), want 400 EINVALID as JSON", field, status, code, h.Get("Content-Type"))
		}
	}
	var name, phone, detail string
	if err := m.Store.DB().QueryRow(m.Store.Rebind(`SELECT address_name, address_phone, address_detail FROM orders WHERE order_no = ?`),
		o.OrderNo).Scan(&name, &phone, &detail); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(name+phone+detail, 0) || name+phone+detail != "" {
		t.Fatalf("refused address changes stored %q %q %q", name, phone, detail)
	}
	// A notification whose body holds a NUL and a bad byte is refused (it does not verify)
	// and logged, escaped.
	status, _, _ := rawCall(t, "POST", m.URL+"/notify/alipay", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		[]byte("out_trade_no=PX\x00\xffA01&sign=forged"))
	if status/100 == 2 {
		t.Fatalf("a forged notification was acknowledged: %d", status)
	}
	var raw string
	if err := m.Store.DB().QueryRow(`SELECT raw FROM notification_log ORDER BY id DESC LIMIT 1`).Scan(&raw); err != nil {
		t.Fatalf("the notification was not logged: %v", err)
	}
	if !strings.HasPrefix(raw, "escaped:") || !strings.Contains(raw, `\x00`) || !strings.Contains(raw, `\xff`) {
		t.Fatalf("logged raw %q, want the body escaped", raw)
	}
}

// A known route with another method is 405 with Allow, as JSON; an unknown one 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "")
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/healthz", "GET"},
		{"DELETE", "/v1/orders/20261122000000000001", "GET"},
		{"GET", "/v1/orders/20261122000000000001/pay", "POST"},
		{"PUT", "/v1/orders", "GET, POST"},
	} {
		status, h, code := rawCall(t, tc.method, m.URL+tc.path, nil, nil)
		if status != http.StatusMethodNotAllowed || code != httpapi.EMETHOD || h.Get("Allow") != tc.allow ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s, Allow %q, %s; want 405 EMETHOD, Allow %q, JSON", tc.method, tc.path, status, code, h.Get("Allow"),
				h.Get("Content-Type"), tc.allow)
		}
	}
	if status, _, code := rawCall(t, "GET", m.URL+"/no/such/route", nil, nil); status != http.StatusNotFound || code != orderpay.ENOTFOUND {
		t.Errorf("an unknown route: %d %s", status, code)
	}
}

// Order event streams are capped per buyer (429, Retry-After) and in all (503,
// Retry-After), and a stream ends at its maximum age; the page polls instead.
func TestOrderStreamsAreCapped(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) {
		m.Config.Streams = httpapi.StreamLimits{PerBuyer: 2, Max: 3, MaxAge: 1500 * time.Millisecond}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "lamp", 800, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	// Each watcher watches an order of its own: another buyer's order is 404.
	orders := map[string]string{}
	for _, buyer := range []string{"watcher-1", "watcher-2", "watcher-3"} {
		o, err := c.createOrder(ctx, buyer, "lamp", 1)
		if err != nil {
			t.Fatal(err)
		}
		orders[buyer] = o.OrderNo
	}
	open := func(buyer string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/v1/orders/"+orders[buyer]+"/events", nil)
		req.Header.Set("X-Buyer-Id", buyer) // with --buyer-auth none, the stream's buyer is this header
		return http.DefaultClient.Do(req)
	}
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for i := range 2 {
		r, err := open("watcher-1")
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of watcher-1: %v, %v", i, r, err)
		}
		held = append(held, r)
	}
	r, err := open("watcher-1")
	if err != nil || r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("watcher-1's third stream: %v, %v; want 429 with Retry-After", r, err)
	}
	r.Body.Close()
	r, err = open("watcher-2")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("watcher-2's first stream: %v, %v", r, err)
	}
	held = append(held, r)
	r, err = open("watcher-3")
	if err != nil || r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth stream in all: %v, %v; want 503 with Retry-After", r, err)
	}
	r.Body.Close()
	// The streams end at their maximum age; then their slots are free again.
	began := time.Now()
	for _, r := range held {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Fatalf("reading a stream to its end: %v", err)
		}
	}
	if age := time.Since(began); age > 10*time.Second {
		t.Fatalf("the streams lasted %s, past their maximum age", age)
	}
	r, err = open("watcher-3")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("a stream after the others ended: %v, %v", r, err)
	}
	r.Body.Close()
}

// Slow and idle clients are cut: a request body that trickles past the read timeout, and a
// keep-alive connection idle past the idle timeout, are closed by the server.
func TestSlowAndIdleConnectionsAreCut(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "", func(m *Main) {
		m.Config.HTTP.ReadTimeout, m.Config.HTTP.IdleTimeout = 500*time.Millisecond, 500*time.Millisecond
	})
	addr := strings.TrimPrefix(m.URL, "http://")
	var readErr error // what the last read ended with, for the failure message
	closedWithin := func(conn net.Conn, limit time.Duration) bool {
		conn.SetReadDeadline(time.Now().Add(limit))
		// nil at EOF: the server closed it. A reset is the server closing it too, with the
		// client's bytes still unread (the trickle keeps writing); only our deadline is not.
		_, readErr = io.Copy(io.Discard, conn)
		return readErr == nil || errors.Is(readErr, syscall.ECONNRESET)
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	go func() { // a byte every 100 ms, as a trickling client does
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if _, err := slow.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	if !closedWithin(slow, 5*time.Second) {
		t.Fatalf("a trickling request body held its connection past the read timeout: %v", readErr)
	}
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v, %v", resp, err)
	}
	resp.Body.Close()
	if !closedWithin(idle, 5*time.Second) {
		t.Fatalf("an idle keep-alive connection was held past the idle timeout: %v", readErr)
	}
}

// Notifications that fail verification are counted always, and logged only within a rate
// per source address: a flood of forgeries cannot fill the database. A genuine one is
// logged whatever the flood did.
func TestForgedNotificationFloodIsCountedNotStored(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	for i := range 200 {
		status, _, _ := rawCall(t, "POST", m.URL+"/notify/alipay", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			[]byte(fmt.Sprintf("out_trade_no=P%020dA01&trade_status=TRADE_SUCCESS&total_amount=1.00&sign=forged", i)))
		if status/100 == 2 {
			t.Fatalf("forgery %d acknowledged", i)
		}
	}
	var logged int
	if err := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM notification_log`).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	// A minute's worth (20) at once, and one more each 3 s the flood took (a loaded
	// machine can take more than 3 s over 200 requests).
	if most := 20 + int(time.Since(began)/(3*time.Second)); logged == 0 || logged > most {
		t.Fatalf("%d of 200 forgeries from one address were logged; want some, at most a minute's worth (20) and one a 3 s since (%d)", logged, most)
	}
	metric := scrape(t, m.MetricsURL)
	if got := metric("orderpay_notifications_received_total", "channel=alipay"); got != 200 {
		t.Fatalf("%v notifications received counted, want 200", got)
	}
	if got := metric("orderpay_notifications_unlogged_total", "channel=alipay"); got != float64(200-logged) {
		t.Fatalf("%v notifications counted as not logged, want %d", got, 200-logged)
	}
	// A genuine payment's notification is still applied and logged.
	if err := c.createSKU(ctx, "pen", 300, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "alice", "pen", 1)
	if err != nil {
		t.Fatal(err)
	}
	payByAlipay(ctx, t, c, o.OrderNo)
	var genuine int
	if err := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM notification_log WHERE verified = 1`).Scan(&genuine); err != nil || genuine != 1 {
		t.Fatalf("%d verified notifications logged (%v), want 1", genuine, err)
	}
}

// An admin token an operator sets must be long enough not to be guessed; and the admin
// routes are rate-limited per address, wrong tokens included.
func TestAdminTokenLengthAndRateLimit(t *testing.T) {
	t.Parallel()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	m.Config.Addr, m.Config.SimAddr, m.Config.DataDir, m.Config.AdminToken = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), "x"
	m.Config.MetricsAddr = "127.0.0.1:0"
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "at least 24 characters") {
		t.Fatalf("--admin-token x: %v", err)
	}
	m.Close()

	s, _ := startMain(t, "", func(m *Main) { m.Config.RateLimits.Admin = httpapi.Limit{Rate: 1, Burst: 5} })
	limited := 0
	for range 20 {
		status, h, code := rawCall(t, "GET", s.URL+"/admin/orders", http.Header{"Authorization": {"Bearer wrong-token-guess-0000000000"}}, nil)
		switch {
		case status == http.StatusTooManyRequests && h.Get("Retry-After") != "" && code == httpapi.ERATELIMITED:
			limited++
		case status != http.StatusUnauthorized:
			t.Fatalf("a wrong admin token: %d %s", status, code)
		}
	}
	if limited < 14 {
		t.Fatalf("%d of 20 rapid admin requests were limited, want all past the burst of 5", limited)
	}
}

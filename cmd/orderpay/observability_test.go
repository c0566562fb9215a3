package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

// hookReceiver is a business system: it verifies each webhook with webhook.Verify against
// its own clock and answers status.
type hookReceiver struct {
	URL    string
	mu     sync.Mutex
	status int
	hooks  []receivedWebhook
}

type receivedWebhook struct {
	Delivery, Event string
	Body            []byte
	VerifyErr       error
}

func newHookReceiver(t *testing.T, secret string, status int) *hookReceiver {
	r := &hookReceiver{status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		err := webhook.Verify([]byte(secret), req.Header, body, time.Now())
		r.mu.Lock()
		r.hooks = append(r.hooks, receivedWebhook{req.Header.Get(webhook.HeaderDelivery), req.Header.Get(webhook.HeaderEvent), body, err})
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/orderpay/hooks"
	return r
}

func (r *hookReceiver) received() []receivedWebhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedWebhook(nil), r.hooks...)
}

func waitUntil(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// scrape reads /metrics and sums the samples of name whose labels include every pair of
// labels (a "k=v" list).
func scrape(t *testing.T, url string) func(name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, text)
	}
	return func(name string, labels ...string) float64 {
		sum := 0.0
		for _, line := range strings.Split(string(text), "\n") {
			series, value, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			metric, labelText, _ := strings.Cut(series, "{")
			if metric != name {
				continue
			}
			match := true
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				match = match && strings.Contains(labelText, k+`="`+v+`"`)
			}
			if match {
				f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					t.Fatalf("metric line %q: %v", line, err)
				}
				sum += f
			}
		}
		return sum
	}
}

const testWebhookSecret = "whsec-e2e-9c1f0a77d2b84e3f"

// testLoopback is where the tests' webhook receivers (httptest servers) listen: allowed
// explicitly, as serve --webhook-allow-networks 127.0.0.0/8,::1 would.
var testLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// An order paid through the simulator moves the metrics a scrape shows (orders and
// payments by status, the convergence histogram, notifications, the pending-query table),
// and its payment.succeeded reaches the business system as a signed webhook, which an
// operator can list and resend through the admin API.
func TestPaidOrderMovesMetricsAndSendsASignedWebhook(t *testing.T) {
	t.Parallel()
	erp := newHookReceiver(t, testWebhookSecret, http.StatusNoContent)
	m, c := startMain(t, "", func(m *Main) {
		m.Config.Webhooks = WebhookConfig{URLs: []string{erp.URL}, Secret: testWebhookSecret, AllowNetworks: testLoopback}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before := scrape(t, m.MetricsURL)
	if before("orderpay_store_stats_up") != 1 || before("orderpay_orders", "status=PAID") != 0 || before("orderpay_payments", "status=SUCCESS") != 0 ||
		before("orderpay_payment_convergence_seconds_count") != 0 || before("orderpay_webhook_deliveries", "status=SUCCEEDED") != 0 {
		t.Fatal("a fresh instance's metrics are not at zero")
	}
	if err := c.createSKU(ctx, "metrics-tea", 1999, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "metrics-buyer", "metrics-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	// A scrape's page is gathered at most once a second (metrics.SnapshotEvery): what a
	// change moves shows within that.
	waitUntil(t, ctx, "the created order in the metrics", func() bool {
		return scrape(t, m.MetricsURL)("orderpay_orders", "status=PENDING_PAYMENT") == 1
	})
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the paying payment and its pending query in the metrics", func() bool {
		paying := scrape(t, m.MetricsURL)
		return paying("orderpay_payments", "status=PAYING") == 1 && paying("orderpay_pending_queries", "flagged=false") == 1
	})
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The simulator's notification arrives whether or not a query got there first. A
	// counter moves a moment after what it counts (received before verified, the delivery
	// row before the attempt's counter): wait for all of them.
	var after func(string, ...string) float64
	waitUntil(t, ctx, "the notification and the webhook in the metrics", func() bool {
		after = scrape(t, m.MetricsURL)
		return after("orderpay_notifications_received_total", "channel=alipay") >= 1 &&
			after("orderpay_notifications_verified_total", "channel=alipay") >= 1 &&
			after("orderpay_webhook_deliveries", "status=SUCCEEDED") == 1 &&
			after("orderpay_webhook_attempts_total", "result=delivered") >= 1
	})
	if after("orderpay_orders", "status=PAID") != 1 || after("orderpay_orders", "status=PENDING_PAYMENT") != 0 ||
		after("orderpay_payments", "status=SUCCESS") != 1 || after("orderpay_pending_queries") != 0 {
		t.Fatalf("after payment: paid orders %v, pending %v, successful payments %v, pending queries %v", after("orderpay_orders", "status=PAID"),
			after("orderpay_orders", "status=PENDING_PAYMENT"), after("orderpay_payments", "status=SUCCESS"), after("orderpay_pending_queries"))
	}
	if n := after("orderpay_payment_convergence_seconds_count", "channel=alipay"); n != 1 {
		t.Fatalf("convergence observations = %v, want 1", n)
	}
	if sum := after("orderpay_payment_convergence_seconds_sum", "channel=alipay"); sum <= 0 || sum > 30 {
		t.Fatalf("convergence latency sum = %v s", sum)
	}
	waitUntil(t, ctx, "the outbox to drain", func() bool { return scrape(t, m.MetricsURL)("orderpay_outbox_unpublished") == 0 })

	// The webhook: signed, the payment's event, its id the same as the admin API's.
	hooks := erp.received()
	if len(hooks) != 1 || hooks[0].VerifyErr != nil || hooks[0].Event != orderpay.SubjectPaymentSucceeded {
		t.Fatalf("received %+v", hooks)
	}
	var env struct {
		Type string                    `json:"type"`
		Data orderpay.PaymentSucceeded `json:"data"`
	}
	if err := json.Unmarshal(hooks[0].Body, &env); err != nil || env.Data.OrderNo != o.OrderNo || env.Data.PaymentNo != p.PaymentNo || env.Data.Amount != 1999 {
		t.Fatalf("webhook body %s", hooks[0].Body)
	}
	admin := http.Header{"Authorization": {"Bearer " + c.AdminToken}}
	var list struct {
		Deliveries []struct {
			ID        int64  `json:"id"`
			Status    string `json:"status"`
			PaymentNo string `json:"payment_no"`
		} `json:"deliveries"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/webhooks/deliveries?payment_no="+p.PaymentNo, admin, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Deliveries) != 1 || list.Deliveries[0].Status != "SUCCEEDED" || strconv.FormatInt(list.Deliveries[0].ID, 10) != hooks[0].Delivery {
		t.Fatalf("deliveries %+v, header id %s", list, hooks[0].Delivery)
	}
	// Resent by hand, though delivered: the receiver gets it again under the same id.
	var resent struct {
		Status  string `json:"status"`
		History []struct {
			Kind string `json:"kind"`
		} `json:"history"`
	}
	id := strconv.FormatInt(list.Deliveries[0].ID, 10)
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/webhooks/deliveries/"+id+"/resend", admin, nil, &resent); err != nil {
		t.Fatal(err)
	}
	if resent.Status != "SUCCEEDED" || len(resent.History) != 2 || resent.History[1].Kind != webhook.KindResend {
		t.Fatalf("after the resend: %+v", resent)
	}
	if hooks = erp.received(); len(hooks) != 2 || hooks[1].Delivery != hooks[0].Delivery || hooks[1].VerifyErr != nil {
		t.Fatalf("received after the resend: %+v", hooks)
	}
	waitUntil(t, ctx, "the resend counted in the metrics", func() bool {
		return scrape(t, m.MetricsURL)("orderpay_webhook_attempts_total", "kind=resend", "result=delivered") == 1
	})
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/webhooks/deliveries/"+id+"/resend", nil, nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("resend without the admin token: %v", err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/webhooks/deliveries/x/resend", admin, nil, nil); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("resend of a malformed id: %v", err)
	}
}

// Without --webhook-url there are no webhooks, and their admin endpoints answer 404. A URL
// without a secret of 16 bytes is refused at start; the secret can come from a file.
func TestWebhookFlags(t *testing.T) {
	t.Setenv("ORDERPAY_WEBHOOK_URL", "https://erp.example/hooks, https://wms.example/hooks")
	m := NewMain()
	if err := m.ParseFlags(nil); err == nil || strings.Contains(err.Error(), "whsec") {
		t.Fatalf("URLs without a secret: %v", err)
	}
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := writeFile(secretFile, testWebhookSecret+"\n"); err != nil {
		t.Fatal(err)
	}
	m = NewMain()
	if err := m.ParseFlags([]string{"--webhook-secret-file", secretFile, "--webhook-url", "https://crm.example/hooks"}); err != nil {
		t.Fatal(err)
	}
	if got := m.Config.Webhooks.URLs; len(got) != 3 || got[1] != "https://wms.example/hooks" || got[2] != "https://crm.example/hooks" {
		t.Fatalf("URLs %q", got)
	}
	if secret, err := m.Config.Webhooks.webhookSecret(); err != nil || string(secret) != testWebhookSecret {
		t.Fatalf("secret from the file: %v", err)
	}
	m = NewMain()
	if err := m.ParseFlags([]string{"--webhook-secret", "short"}); err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("a short secret: %v (the error must not quote it)", err)
	}
}

// syncBuffer collects log output written from many goroutines.
type syncBuffer = storetest.SyncBuffer

// A whole run with JSON logs at debug level (orders paid at both channels, forged
// notifications at both, a rejected admin call, webhooks delivered, failing and resent)
// logs no secret: no private key in PEM or base64, no APIv3 key, no admin token, no
// webhook secret, no order-number key. And every line the order, payment, notification
// and webhook paths log names the order, payment or attempt it is about.
func TestLogsCarryNoSecretsAndNameTheirOrder(t *testing.T) {
	t.Parallel()
	const adminToken, orderNoKey = "admin-token-5d1c3e9b77a04f21", "order-no-key-3b8e61f0c2a94d57"
	erp := newHookReceiver(t, testWebhookSecret, http.StatusOK)
	down := newHookReceiver(t, testWebhookSecret, http.StatusInternalServerError)
	logs := &syncBuffer{}
	m, c := startMain(t, "", func(m *Main) {
		m.Config.LogFormat, m.Config.LogLevel, m.Config.LogSource = "json", "debug", true
		m.Config.AdminToken, m.Config.OrderNoKey = adminToken, orderNoKey
		m.Config.Webhooks = WebhookConfig{URLs: []string{erp.URL, down.URL + "?token=" + testWebhookSecret[:12]}, Secret: testWebhookSecret, AllowNetworks: testLoopback}
		m.Stderr = logs
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "log-tea", 1500, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	var paid []*orderView
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		o, err := c.createOrder(ctx, "log-buyer-"+channel, "log-tea", 1)
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
		paid = append(paid, o)
	}
	cancelled, err := c.createOrder(ctx, "log-buyer-cancel", "log-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.pay(ctx, cancelled.OrderNo, orderpay.ChannelWechat); err != nil {
		t.Fatal(err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/v1/orders/"+cancelled.OrderNo+"/cancel", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Forged notifications at both channels, naming a real attempt.
	forged := []struct{ channel, contentType, body string }{
		{orderpay.ChannelAlipay, "application/x-www-form-urlencoded", "trade_status=TRADE_SUCCESS&out_trade_no=P" + paid[0].OrderNo + "A01&total_amount=0.01&sign_type=RSA2&sign=Zm9yZ2Vk"},
		{orderpay.ChannelWechat, "application/json", `{"id":"forged","event_type":"TRANSACTION.SUCCESS","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"Zm9yZ2Vk","nonce":"abcdefabcdef","associated_data":"transaction"}}`},
	}
	for _, f := range forged {
		resp, err := http.Post(m.URL+"/notify/"+f.channel, f.contentType, strings.NewReader(f.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("forged %s notification answered %d", f.channel, resp.StatusCode)
		}
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/pending-queries", http.Header{"Authorization": {"Bearer wrong-" + adminToken}}, nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a wrong admin token: %v", err)
	}
	// Webhooks: delivered to one subscriber, failing at the other; one resent by hand.
	waitUntil(t, ctx, "webhooks at both subscribers", func() bool { return len(erp.received()) >= 2 && len(down.received()) >= 2 })
	admin := http.Header{"Authorization": {"Bearer " + adminToken}}
	var list struct {
		Deliveries []struct {
			ID int64 `json:"id"`
		} `json:"deliveries"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/webhooks/deliveries?status=PENDING", admin, nil, &list); err != nil || len(list.Deliveries) == 0 {
		t.Fatalf("failing deliveries: %+v, %v", list, err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+fmt.Sprintf("/admin/webhooks/deliveries/%d/resend", list.Deliveries[0].ID), admin, nil, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the failing webhook's log line", func() bool { return strings.Contains(logs.String(), "webhook attempt failed") })
	m.Close()
	out := logs.String()

	// The secrets, as the process holds them.
	keys, err := sim.LoadOrCreateKeys(filepath.Join(m.Config.DataDir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"admin token": adminToken, "webhook secret": testWebhookSecret, "order-number key": orderNoKey,
		"APIv3 key": keys.Wechat.APIv3Key}
	for name, pemOf := range map[string]func() (string, error){"Alipay app private key": keys.AppPrivateKeyPEM, "Alipay private key": keys.AlipayPrivateKeyPEM,
		"Alipay in-app app private key": keys.InApp.AppPrivateKeyPEM, "Alipay in-app app's Alipay private key": keys.InApp.AlipayPrivateKeyPEM,
		"WeChat merchant private key": keys.Wechat.MerchantPrivateKeyPEM, "WeChat platform private key": keys.Wechat.PlatformPrivateKeyPEM} {
		text, err := pemOf()
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode([]byte(text))
		if block == nil {
			t.Fatalf("%s is not PEM", name)
		}
		// The key's DER as one base64 line, and each line of its PEM body: a logger
		// could print either, or a piece of one.
		secrets[name+" (base64)"] = base64.StdEncoding.EncodeToString(block.Bytes)[64:128]
		for i, line := range strings.Split(text, "\n") {
			if len(line) == 64 && i > 1 {
				secrets[fmt.Sprintf("%s (PEM line %d)", name, i)] = line
			}
		}
	}
	for name, secret := range secrets {
		if len(secret) < 16 {
			t.Fatalf("%s is too short to search for", name)
		}
		if strings.Contains(out, secret) {
			t.Errorf("the logs contain the %s", name)
		}
		// JSON escapes "+" and "/" nowhere, but a quoted string could carry "\u002b": look
		// for the escaped form too.
		if esc, _ := json.Marshal(secret); strings.Contains(out, strings.Trim(string(esc), `"`)) {
			t.Errorf("the logs contain the %s, JSON-escaped", name)
		}
	}
	for _, marker := range []string{"PRIVATE KEY", "BEGIN RSA", "Bearer "} {
		if strings.Contains(out, marker) {
			t.Errorf("the logs contain %q", marker)
		}
	}

	// Every line is JSON; the lines of the order, payment, notification and webhook code
	// name what they are about.
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines++
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		src, _ := line["source"].(map[string]any)
		file, _ := src["file"].(string)
		if !mustNameItsOrder(file) {
			continue
		}
		named := false
		for _, k := range []string{"order_no", "payment_no", "out_trade_no", "out_refund_no"} {
			named = named || line[k] != nil && line[k] != ""
		}
		// A forged notification whose body names no trade we can read (the WeChat one's
		// ciphertext is garbage) can name none; its line still has the field, empty.
		if _, has := line["out_trade_no"]; line["msg"] == "notification rejected" && has {
			named = true
		}
		// A line about a webhook subscriber as a whole (its start, a replay to it) names the
		// subscriber: it is about no one order.
		if fn, _ := src["function"].(string); strings.HasSuffix(fn, "webhook.(*Service).Start") || strings.HasSuffix(fn, "webhook.(*Service).Replay") {
			named = named || line["subscriber"] != nil
		}
		if !named {
			t.Errorf("log line names no order, payment or attempt: %s", sc.Text())
		}
	}
	if lines < 20 {
		t.Fatalf("only %d log lines captured: the capture is broken", lines)
	}
	for _, want := range []string{"notification rejected", "payment succeeded", "webhook delivered", "webhook resent by an operator", "order cancelled"} {
		if !strings.Contains(out, `"msg":"`+want+`"`) {
			t.Errorf("no %q line: the story did not run as told", want)
		}
	}
}

// mustNameItsOrder says which source files' log lines must carry an order, payment or
// attempt number: the order, payment, notification, HTTP and webhook paths. The admin's
// coupon templates and blocklist (order/coupons.go's templates, order/antiabuse.go) are
// about no order, and are exempt by name.
func mustNameItsOrder(file string) bool {
	file = filepath.ToSlash(file)
	if strings.HasSuffix(file, "/order/antiabuse.go") || strings.HasSuffix(file, "/order/coupons.go") {
		return false
	}
	for _, dir := range []string{"/payment/", "/order/", "/httpapi/", "/webhook/"} {
		if strings.Contains(file, dir) {
			return true
		}
	}
	return false
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

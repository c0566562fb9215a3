package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos"
	"orderpay/httpapi"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

// appHooks is a business system's webhook endpoint: it verifies every request with the
// app's secret (set once the app exists) and keeps what came.
type appHooks struct {
	URL    string
	mu     sync.Mutex
	secret []byte
	hooks  []appHook
}

type appHook struct {
	event    string
	delivery string
	header   http.Header
	raw      []byte
	body     appHookBody
	err      error
}

type appHookBody struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		AppID           string `json:"app_id"`
		PaymentNo       string `json:"payment_no"`
		MerchantOrderNo string `json:"merchant_order_no"`
		RefundNo        string `json:"refund_no"`
		Amount          int64  `json:"amount"`
		Status          string `json:"status"`
		Reason          string `json:"reason"`
	} `json:"data"`
}

func newAppHooks(t *testing.T) *appHooks {
	h := &appHooks{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		hook := appHook{event: r.Header.Get(webhook.HeaderEvent), delivery: r.Header.Get(webhook.HeaderDelivery),
			header: r.Header.Clone(), raw: raw, err: webhook.Verify(h.secret, r.Header, raw, time.Now())}
		if hook.err == nil && !verifyAsDocumented(h.secret, r.Header, raw, time.Now()) {
			hook.err = errors.New("webhook.Verify takes it, the payments API guide's verify does not")
		}
		if err := json.Unmarshal(raw, &hook.body); err != nil && hook.err == nil {
			hook.err = err
		}
		h.hooks = append(h.hooks, hook)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/pay/hooks"
	return h
}

func (h *appHooks) setSecret(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secret = []byte(s)
}

// of returns the hooks of an event type about a payment.
func (h *appHooks) of(event, paymentNo string) []appHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []appHook
	for _, x := range h.hooks {
		if x.event == event && x.body.Data.PaymentNo == paymentNo {
			out = append(out, x)
		}
	}
	return out
}

func (h *appHooks) all() []appHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]appHook(nil), h.hooks...)
}

// lagClock is a clock behind the real one: a channel whose clock disagrees with ours.
type lagClock struct{ by time.Duration }

func (c lagClock) Now() time.Time { return time.Now().Add(-c.by) }

func TestAppPaymentsSQLite(t *testing.T) {
	t.Parallel()
	appPayments(t, "")
}

func TestAppPaymentsPostgres(t *testing.T) {
	t.Parallel()
	appPayments(t, storetest.PostgresDSN(t))
}

// appPayments is the payments API's story, through real HTTP: an admin creates two apps;
// one creates a payment, the buyer pays it with every notification lost, and it turns
// SUCCESS with one signed webhook to that app alone; the other app's key reads 404 for it;
// no key or a revoked key is 401; a rotated key's overlap holds both keys; a partial refund
// succeeds and is told; a payment after the app closed it, and one after its deadline, are
// refunded and told.
func appPayments(t *testing.T, db string) {
	hooksA, hooksB := newAppHooks(t), newAppHooks(t)
	shop := newHookReceiver(t, testWebhookSecret, http.StatusOK) // the shop's own subscriber (--webhook-url)
	logs := &syncBuffer{}
	m, c := startMain(t, db, func(m *Main) {
		m.Config.LogLevel, m.Stderr = "debug", logs
		m.Config.Webhooks = WebhookConfig{URLs: []string{shop.URL}, Secret: testWebhookSecret, AllowNetworks: testLoopback}
		// A deadline of a few seconds is a minute's worth: the app payments' shortest
		// deadline, the close grace, the queries' schedule, the webhook retries.
		m.Config.TimeScale = 30
		// The channel's clock is two minutes behind ours: a code we closed at its deadline is
		// still payable there, so a payment after the deadline can be made.
		m.simClock = lagClock{2 * time.Minute}
		m.Config.RateLimits = httpapi.RateLimits{AppAuthFailures: httpapi.Limit{Rate: 1, Burst: 20}}
	})
	if m.Store.Dialect() != map[bool]string{true: "sqlite", false: "postgres"}[db == ""] {
		t.Fatalf("store is %s", m.Store.Dialect())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Apps: bad input is refused with nothing written; a good one shows its key once.
	for name, body := range map[string]any{
		"no name":         map[string]any{"webhook_urls": []string{hooksA.URL}, "channels": []string{"wechat"}},
		"unknown channel": map[string]any{"name": "x", "channels": []string{"paypal"}},
		"no channel":      map[string]any{"name": "x"},
		"bad URL":         map[string]any{"name": "x", "channels": []string{"wechat"}, "webhook_urls": []string{"ftp://x"}},
		"unknown field":   map[string]any{"name": "x", "channels": []string{"wechat"}, "secret": "mine"},
	} {
		err := c.call(ctx, http.MethodPost, c.API+"/admin/apps", http.Header{"Authorization": {"Bearer " + m.AdminToken}}, body, nil)
		if apiCode(err) != orderpay.EINVALID {
			t.Fatalf("create app, %s: %v", name, err)
		}
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/apps", nil, map[string]any{"name": "x", "channels": []string{"wechat"}}, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("create app without the admin token: %v", err)
	}
	appA, err := c.CreateApp(ctx, "membership top-ups", []string{hooksA.URL}, []string{"alipay", "wechat"})
	if err != nil {
		t.Fatal(err)
	}
	appB, err := c.CreateApp(ctx, "gift cards", []string{hooksB.URL}, []string{"wechat"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(appA.APIKey, "opk_"+appA.KeyID+"_") || !strings.HasPrefix(appA.WebhookSecret, "whsec_") || len(appA.WebhookSecret) < 16 ||
		appA.APIKey == appB.APIKey {
		t.Fatalf("created app %+v", appA)
	}
	// The key of the webhooks' HMAC is the whole secret, whsec_ and all (the payments API
	// guide says so).
	hooksA.setSecret(appA.WebhookSecret)
	hooksB.setSecret(appB.WebhookSecret)
	var listed struct {
		Apps []struct {
			AppID  string `json:"app_id"`
			APIKey string `json:"api_key"`
		} `json:"apps"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/apps", http.Header{"Authorization": {"Bearer " + m.AdminToken}}, nil, &listed); err != nil ||
		len(listed.Apps) != 2 || listed.Apps[0].APIKey != "" {
		t.Fatalf("apps listed %+v, %v (refused creates must write nothing; keys are never shown again)", listed, err)
	}
	var keyRow string
	if err := m.Store.DB().QueryRowContext(ctx, m.Store.Rebind(`SELECT hash FROM app_keys WHERE key_id = ?`), appA.KeyID).Scan(&keyRow); err != nil ||
		strings.Contains(keyRow, appA.APIKey) || len(keyRow) != 64 {
		t.Fatalf("the key is stored as %q, %v: want its SHA-256 only", keyRow, err)
	}

	// A payment, its notifications lost.
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	req := chaos.AppPaymentRequest{MerchantOrderNo: "TOPUP-0001", Amount: 1000, Subject: "Top-up ¥10", Channel: "wechat", ExpiresInSeconds: 600}
	p, err := c.CreateAppPayment(ctx, appA.APIKey, req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != "OPEN" || p.QRCode == "" || !strings.HasPrefix(p.PaymentNo, "PAP") || p.Amount != 1000 || p.MerchantOrderNo != "TOPUP-0001" {
		t.Fatalf("created payment %+v", p)
	}
	again, err := c.CreateAppPayment(ctx, appA.APIKey, req)
	if err != nil || again.PaymentNo != p.PaymentNo || again.QRCode != p.QRCode {
		t.Fatalf("the same create again: %+v, %v", again, err)
	}
	other := req
	other.Amount = 2000
	if _, err := c.CreateAppPayment(ctx, appA.APIKey, other); apiCode(err) != orderpay.EIDEMPOTENCY {
		t.Fatalf("the same merchant_order_no with another body: %v", err)
	}
	for name, bad := range map[string]chaos.AppPaymentRequest{
		"zero amount":   {MerchantOrderNo: "BAD-1", Amount: 0, Subject: "x", Channel: "wechat", ExpiresInSeconds: 600},
		"channel":       {MerchantOrderNo: "BAD-2", Amount: 1, Subject: "x", Channel: "paypal", ExpiresInSeconds: 600},
		"no deadline":   {MerchantOrderNo: "BAD-3", Amount: 1, Subject: "x", Channel: "wechat"},
		"number":        {MerchantOrderNo: "BAD 4/x", Amount: 1, Subject: "x", Channel: "wechat", ExpiresInSeconds: 600},
		"no subject":    {MerchantOrderNo: "BAD-5", Amount: 1, Channel: "wechat", ExpiresInSeconds: 600},
		"past deadline": {MerchantOrderNo: "BAD-6", Amount: 1, Subject: "x", Channel: "wechat", ExpiresAt: ptr(time.Now().Add(-time.Hour))},
	} {
		if _, err := c.CreateAppPayment(ctx, appA.APIKey, bad); apiCode(err) != orderpay.EINVALID {
			t.Fatalf("create payment, %s: %v", name, err)
		}
	}
	if _, err := c.CreateAppPayment(ctx, appB.APIKey, chaos.AppPaymentRequest{MerchantOrderNo: "X", Amount: 1, Subject: "x", Channel: "alipay",
		ExpiresInSeconds: 600}); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("a channel the app may not use: %v", err)
	}
	var n int
	if err := m.Store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM app_payments`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d app payments stored, %v: refused creates must write nothing", n, err)
	}

	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the payment to turn SUCCESS", func() bool {
		got, err := c.AppPayment(ctx, appA.APIKey, p.PaymentNo)
		return err == nil && got.Status == "SUCCESS"
	})
	waitFor(t, 30*time.Second, "the app's payment.succeeded webhook", func() bool { return len(hooksA.of("payment.succeeded", p.PaymentNo)) > 0 })
	time.Sleep(300 * time.Millisecond) // time for a second one, were there one
	succeeded := hooksA.of("payment.succeeded", p.PaymentNo)
	if len(succeeded) != 1 || succeeded[0].err != nil || succeeded[0].body.Data.MerchantOrderNo != "TOPUP-0001" ||
		succeeded[0].body.Data.Amount != 1000 || succeeded[0].body.Data.AppID != appA.AppID || succeeded[0].body.Type != "payment.succeeded" {
		t.Fatalf("webhooks of the payment: %+v", succeeded)
	}
	if got := hooksB.all(); len(got) != 0 {
		t.Fatalf("the other app was told of it: %+v", got)
	}
	// An operator resends it: the same delivery, signed with the app's secret again.
	var deliveries struct {
		Deliveries []struct {
			ID         int64  `json:"id"`
			Subscriber string `json:"subscriber"`
			Event      string `json:"event"`
			Status     string `json:"status"`
		} `json:"deliveries"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/webhooks/deliveries?payment_no="+p.PaymentNo, http.Header{"Authorization": {"Bearer " + m.AdminToken}},
		nil, &deliveries); err != nil || len(deliveries.Deliveries) != 1 || deliveries.Deliveries[0].Status != "SUCCEEDED" ||
		!strings.HasPrefix(deliveries.Deliveries[0].Subscriber, "app:"+appA.AppID+":") {
		t.Fatalf("the app's deliveries: %+v, %v", deliveries, err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+fmt.Sprintf("/admin/webhooks/deliveries/%d/resend", deliveries.Deliveries[0].ID),
		http.Header{"Authorization": {"Bearer " + m.AdminToken}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if again := hooksA.of("payment.succeeded", p.PaymentNo); len(again) != 2 || again[1].err != nil || again[1].delivery != succeeded[0].delivery {
		t.Fatalf("the resent webhook: %+v", again)
	}
	var byNo struct {
		Payments []chaos.AppPaymentView `json:"payments"`
	}
	if err := c.AppCall(ctx, appA.APIKey, http.MethodGet, "/v1/payments?merchant_order_no=TOPUP-0001", nil, &byNo); err != nil ||
		len(byNo.Payments) != 1 || byNo.Payments[0].PaymentNo != p.PaymentNo {
		t.Fatalf("by the app's order number: %+v, %v", byNo, err)
	}

	// Another app sees nothing of it; no key, a made-up key: 401.
	if _, err := c.AppPayment(ctx, appB.APIKey, p.PaymentNo); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("another app's read: %v", err)
	}
	if err := c.AppCall(ctx, appB.APIKey, http.MethodGet, "/v1/payments?merchant_order_no=TOPUP-0001", nil, nil); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("another app's read by number: %v", err)
	}
	if _, err := c.RefundAppPayment(ctx, appB.APIKey, p.PaymentNo, "B-R1", 100, ""); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("another app's refund: %v", err)
	}
	if _, err := c.CloseAppPayment(ctx, appB.APIKey, p.PaymentNo); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("another app's close: %v", err)
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/v1/payments/"+p.PaymentNo, nil, nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("no key: %v", err)
	}
	if _, err := c.AppPayment(ctx, "opk_"+appA.KeyID+"_not-the-secret", p.PaymentNo); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a made-up key: %v", err)
	}

	// A partial refund, with the app's reason.
	r1, err := c.RefundAppPayment(ctx, appA.APIKey, p.PaymentNo, "REFUND-1", 300, "size too small")
	// Taken: PROCESSING, or already SUCCESS when the refund worker got to it before the
	// answer was written.
	if err != nil || (r1.Status != "PROCESSING" && r1.Status != "SUCCESS") || r1.Amount != 300 {
		t.Fatalf("refund: %+v, %v", r1, err)
	}
	if again, err := c.RefundAppPayment(ctx, appA.APIKey, p.PaymentNo, "REFUND-1", 300, "size too small"); err != nil || again.OutRefundNo != r1.OutRefundNo {
		t.Fatalf("the same refund again: %+v, %v", again, err)
	}
	if _, err := c.RefundAppPayment(ctx, appA.APIKey, p.PaymentNo, "REFUND-1", 200, "size too small"); apiCode(err) != orderpay.EIDEMPOTENCY {
		t.Fatalf("the same refund number for another amount: %v", err)
	}
	if _, err := c.RefundAppPayment(ctx, appA.APIKey, p.PaymentNo, "REFUND-2", 701, ""); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("more than is left: %v", err)
	}
	if _, err := c.RefundAppPayment(ctx, appA.APIKey, p.PaymentNo, "REFUND-3", 0, ""); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("a refund of nothing: %v", err)
	}
	waitFor(t, 30*time.Second, "the refund to succeed", func() bool {
		got, err := c.AppRefund(ctx, appA.APIKey, "REFUND-1")
		return err == nil && got.Status == "SUCCESS"
	})
	if paid, err := c.AppPayment(ctx, appA.APIKey, p.PaymentNo); err != nil || paid.OutTradeNo != p.PaymentNo+"A01" || m.refundedAtChannel(paid.OutTradeNo) != 300 {
		t.Fatalf("the channel refunded %d fen of %+v, %v", m.refundedAtChannel(paid.OutTradeNo), paid, err)
	}
	waitFor(t, 30*time.Second, "the app's refund.succeeded webhook", func() bool { return len(hooksA.of("refund.succeeded", p.PaymentNo)) == 1 })
	h := hooksA.of("refund.succeeded", p.PaymentNo)[0]
	if h.err != nil || h.body.Data.RefundNo != "REFUND-1" || h.body.Data.Amount != 300 || h.body.Data.Reason != "size too small" {
		t.Fatalf("refund webhook %+v (%v), want REFUND-1 of 300 fen with the app's reason", h.body.Data, h.err)
	}
	// The guide's bash verification takes it with the whole secret as the key, and not
	// with the part after whsec_.
	if got := shellVerify(t, appA.WebhookSecret, h.header, h.raw); got != "genuine" && got != "" {
		t.Errorf("the guide's bash verification with the whole secret says %q", got)
	}
	if got := shellVerify(t, strings.TrimPrefix(appA.WebhookSecret, "whsec_"), h.header, h.raw); got != "forged" && got != "" {
		t.Errorf("the guide's bash verification with the secret after whsec_ says %q", got)
	}
	if verifyAsDocumented([]byte(strings.TrimPrefix(appA.WebhookSecret, "whsec_")), h.header, h.raw, time.Now()) {
		t.Error("the guide's Go verify takes the webhook with the secret after whsec_ as the key")
	}
	if got, err := c.AppPayment(ctx, appA.APIKey, p.PaymentNo); err != nil || got.Refunded != 300 || got.Refundable != 700 {
		t.Fatalf("after the refund: %+v, %v", got, err)
	}
	var refunds struct {
		Refunds []chaos.AppRefundView `json:"refunds"`
	}
	if err := c.AppCall(ctx, appA.APIKey, http.MethodGet, "/v1/payments/"+p.PaymentNo+"/refunds", nil, &refunds); err != nil || len(refunds.Refunds) != 1 {
		t.Fatalf("the payment's refunds: %+v, %v", refunds, err)
	}
	if err := c.AppCall(ctx, appB.APIKey, http.MethodGet, "/v1/refunds/REFUND-1", nil, nil); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("another app's refund read: %v", err)
	}

	// Rotation with an overlap: both keys until it ends, then the new one only.
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	var rotated struct {
		APIKey string `json:"api_key"`
		KeyID  string `json:"key_id"`
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/apps/"+appA.AppID+"/keys/rotate", admin, map[string]any{"overlap_seconds": 3}, &rotated); err != nil {
		t.Fatal(err)
	}
	overlapEnds := time.Now().Add(3 * time.Second)
	for _, key := range []string{appA.APIKey, rotated.APIKey} {
		if _, err := c.AppPayment(ctx, key, p.PaymentNo); err != nil && time.Now().Before(overlapEnds) {
			t.Fatalf("a key during the overlap: %v", err)
		}
	}
	time.Sleep(time.Until(overlapEnds) + 100*time.Millisecond)
	if _, err := c.AppPayment(ctx, appA.APIKey, p.PaymentNo); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("the old key after the overlap: %v", err)
	}
	if _, err := c.AppPayment(ctx, rotated.APIKey, p.PaymentNo); err != nil {
		t.Fatalf("the new key after the overlap: %v", err)
	}
	keyA := rotated.APIKey
	// Revoked: 401 at once.
	var third struct {
		APIKey string `json:"api_key"`
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/apps/"+appA.AppID+"/keys/rotate", admin, nil, &third); err != nil {
		t.Fatal(err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/apps/"+appA.AppID+"/keys/"+rotated.KeyID+"/revoke", admin, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppPayment(ctx, keyA, p.PaymentNo); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a revoked key: %v", err)
	}
	keyA = third.APIKey
	if _, err := c.AppPayment(ctx, keyA, p.PaymentNo); err != nil {
		t.Fatalf("the key after the revoked one: %v", err)
	}
	var audit struct {
		Actions []struct {
			Action string `json:"action"`
			Target string `json:"target"`
		} `json:"actions"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/audit", admin, nil, &audit); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range audit.Actions {
		seen[a.Action]++
	}
	if seen["POST /admin/apps"] < 2 || seen["POST /admin/apps/{app_id}/keys/rotate"] != 2 || seen["POST /admin/apps/{app_id}/keys/{key_id}/revoke"] != 1 {
		t.Fatalf("audit log %v", seen)
	}

	// Notifications arrive again from here on.
	if err := m.Sim.SetFaults(sim.FaultPlan{}); err != nil {
		t.Fatal(err)
	}
	// Closed by the app before anyone scanned its Alipay code, then paid anyway: refunded.
	closedReq := chaos.AppPaymentRequest{MerchantOrderNo: "TOPUP-0002", Amount: 800, Subject: "Top-up ¥8", Channel: "alipay", ExpiresInSeconds: 600}
	cp, err := c.CreateAppPayment(ctx, keyA, closedReq)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := c.CloseAppPayment(ctx, keyA, cp.PaymentNo)
	if err != nil || closed.Status != "CLOSED" || closed.CloseReason != "closed" {
		t.Fatalf("close: %+v, %v", closed, err)
	}
	if again, err := c.CloseAppPayment(ctx, keyA, cp.PaymentNo); err != nil || again.Status != "CLOSED" {
		t.Fatalf("close again: %+v, %v", again, err)
	}
	if err := c.walletPay(ctx, cp.QRCode); err != nil {
		t.Fatal(err) // an unscanned Alipay code stays payable until its deadline
	}
	waitFor(t, 30*time.Second, "the payment after the close to be refunded and told", func() bool {
		hs := hooksA.of("refund.succeeded", cp.PaymentNo)
		return len(hs) == 1 && hs[0].err == nil && hs[0].body.Data.Reason == orderpay.RefundReasonLate && hs[0].body.Data.Amount == 800
	})
	if got := m.refundedAtChannel(cp.PaymentNo + "A01"); got != 800 {
		t.Fatalf("the channel refunded %d fen of the payment after the close", got)
	}
	if got, err := c.AppPayment(ctx, keyA, cp.PaymentNo); err != nil || got.Status != "CLOSED" {
		t.Fatalf("after the payment after the close: %+v, %v", got, err)
	}
	if len(hooksA.of("payment.closed", cp.PaymentNo)) != 1 || len(hooksA.of("payment.succeeded", cp.PaymentNo)) != 0 {
		t.Fatalf("webhooks of the closed payment: %+v", hooksA.all())
	}

	// Past its deadline (3 s here) the payment is closed; the channel, whose clock is
	// behind, still takes the buyer's money: a late payment, refunded and told.
	lateReq := chaos.AppPaymentRequest{MerchantOrderNo: "TOPUP-0003", Amount: 500, Subject: "Top-up ¥5", Channel: "alipay", ExpiresInSeconds: 3}
	lp, err := c.CreateAppPayment(ctx, keyA, lateReq)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the payment to close at its deadline", func() bool {
		got, err := c.AppPayment(ctx, keyA, lp.PaymentNo)
		return err == nil && got.Status == "CLOSED" && got.CloseReason == "expired"
	})
	if err := c.walletPay(ctx, lp.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the late payment to be refunded and told", func() bool {
		hs := hooksA.of("refund.succeeded", lp.PaymentNo)
		return len(hs) == 1 && hs[0].err == nil && hs[0].body.Data.Reason == orderpay.RefundReasonLate && hs[0].body.Data.Amount == 500
	})
	if got := m.refundedAtChannel(lp.PaymentNo + "A01"); got != 500 {
		t.Fatalf("the channel refunded %d fen of the late payment", got)
	}
	// The console lists both late refunds, newest first, and a page of one holds the newer.
	for limit, want := range map[string][]string{"": {lp.PaymentNo, cp.PaymentNo}, "&limit=1": {lp.PaymentNo}} {
		status, _, body := get(t, m.URL+"/admin/refunds?reason="+orderpay.RefundReasonLate+limit, http.Header{"Authorization": {"Bearer " + m.AdminToken}})
		var page struct {
			Refunds []struct {
				PaymentNo string `json:"payment_no"`
			} `json:"refunds"`
		}
		var got []string
		if json.Unmarshal(body, &page); status == http.StatusOK {
			for _, r := range page.Refunds {
				got = append(got, r.PaymentNo)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("GET /admin/refunds?reason=%s%s: %d %s; want the refunds of %v", orderpay.RefundReasonLate, limit, status, body, want)
		}
	}
	for _, h := range hooksA.all() {
		if h.err != nil {
			t.Fatalf("a webhook that does not verify with the app's secret: %+v", h)
		}
	}
	// The shop's subscriber never hears of an app's payments.
	for _, h := range shop.received() {
		if strings.Contains(string(h.Body), "PAP") {
			t.Errorf("the shop's subscriber received an app's %s: %s", h.Event, h.Body)
		}
	}
	// No key, and no webhook secret, was ever logged (their ids are).
	for what, secret := range map[string]string{"app A's first key": appA.APIKey, "app A's rotated key": rotated.APIKey, "app A's third key": third.APIKey,
		"app B's key": appB.APIKey, "app A's webhook secret": appA.WebhookSecret, "app B's webhook secret": appB.WebhookSecret} {
		_, tail, _ := strings.Cut(secret, "_")
		if _, tail, ok := strings.Cut(tail, "_"); ok && strings.HasPrefix(secret, "opk_") {
			secret = tail // a key's secret part: its id, before it, is logged on purpose
		} else if strings.HasPrefix(secret, "whsec_") {
			secret = strings.TrimPrefix(secret, "whsec_")
		}
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %s", what)
		}
	}
	if !strings.Contains(logs.String(), appA.KeyID) {
		t.Error("the log never names app A's key id: the check above would prove nothing")
	}
}

func ptr[T any](v T) *T { return &v }

// Wrong API keys are rate-limited per address: past the burst a wrong key gets 429 with
// Retry-After and nothing is written, while a valid key from the same address still passes.
func TestAppKeyFailuresAreRateLimited(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) {
		m.Config.RateLimits = httpapi.RateLimits{AppAuthFailures: httpapi.Limit{Rate: 0.05, Burst: 3}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, err := c.CreateApp(ctx, "fees", nil, []string{"alipay"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppPayment(ctx, app.APIKey, "PAP0"); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a good key is not a failure: %v", err)
	}
	for i := range 3 {
		if _, err := c.AppPayment(ctx, "opk_0123456789abcdef_guess"+string(rune('a'+i)), "PAP0"); apiCode(err) != orderpay.EUNAUTHORIZED {
			t.Fatalf("wrong key %d: %v", i, err)
		}
	}
	resp, err := http.Post(m.URL+"/v1/payments", "application/json", strings.NewReader(`{"merchant_order_no":"X","amount":1,"subject":"x","channel":"alipay","expires_in_seconds":600}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the fourth failure: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var n int
	if err := m.Store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM app_payments`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d payments written, %v", n, err)
	}
	// The address's wrong keys are refused until its bucket refills; a valid key from the
	// same address is not: the failures were not its own.
	if _, err := c.AppPayment(ctx, "opk_0123456789abcdef_guessz", "PAP0"); chaos.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("a wrong key while refused: %v", err)
	}
	if _, err := c.AppPayment(ctx, app.APIKey, "PAP0"); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a good key while the address's wrong keys are refused: %v", err)
	}
}

func TestAppSubjectAlipayRefusesIsRefusedSQLite(t *testing.T) {
	t.Parallel()
	appSubjectRefused(t, "")
}

func TestAppSubjectAlipayRefusesIsRefusedPostgres(t *testing.T) {
	t.Parallel()
	appSubjectRefused(t, storetest.PostgresDSN(t))
}

// A payment whose subject holds / = or & (Alipay refuses a trade's subject with any of them)
// is refused 400 EINVALID before anything is written, on every channel of the app: no
// payment stays OPEN (it was a 502 ECHANNEL with an OPEN payment stored before).
func appSubjectRefused(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, err := c.CreateApp(ctx, "tickets", nil, []string{"alipay", "wechat"})
	if err != nil {
		t.Fatal(err)
	}
	for i, subject := range []string{"a=b", "tickets/adult", "tea & cake"} {
		for _, channel := range []string{"alipay", "wechat"} {
			req := chaos.AppPaymentRequest{MerchantOrderNo: fmt.Sprintf("SUBJ-%d-%s", i, channel), Amount: 100, Subject: subject,
				Channel: channel, ExpiresInSeconds: 600}
			_, err := c.CreateAppPayment(ctx, app.APIKey, req)
			var e *apiError
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != orderpay.EINVALID {
				t.Errorf("subject %q by %s: %v, want 400 EINVALID", subject, channel, err)
			}
		}
	}
	var n int
	if err := m.Store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM app_payments`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d app payments stored, %v: refused creates must write nothing", n, err)
	}
	// The same payment with a subject Alipay takes is made.
	p, err := c.CreateAppPayment(ctx, app.APIKey, chaos.AppPaymentRequest{MerchantOrderNo: "SUBJ-ok", Amount: 100,
		Subject: "tickets, adult", Channel: "alipay", ExpiresInSeconds: 600})
	if err != nil || p.Status != "OPEN" || p.QRCode == "" {
		t.Fatalf("a good subject: %+v, %v", p, err)
	}
}

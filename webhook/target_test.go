package webhook_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

// A URL whose host is written as an internal address (loopback, private, link-local,
// multicast, unspecified, carrier-grade NAT, IPv4-mapped IPv6 of any of them) is refused
// when it is configured, unless its network is allowed; a public address or a name is
// accepted (a name is checked when it is resolved).
func TestNewRefusesInternalTargets(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	for _, raw := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://LocalHost./hook", "http://[::1]/hook",
		"http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]/hook", "http://[::ffff:169.254.169.254]/hook",
		"http://0.0.0.0/hook", "http://[::]/hook", "https://10.1.2.3/hook", "https://172.16.0.9/hook", "https://192.168.1.1/hook",
		"https://100.64.0.1/hook", "https://224.0.0.1/hook", "https://[fe80::1]/hook", "https://[fc00::1]/hook", "https://[ff02::1]/hook",
		"https://[64:ff9b::a9fe:a9fe]/hook", "https://255.255.255.255/hook"} {
		_, err := webhook.New(webhook.Config{Store: store, Subscribers: []webhook.Subscriber{{URL: raw, Secret: []byte(secret)}}})
		if orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: New = %v, want EINVALID", raw, err)
		}
		if err := webhook.CheckURL(raw, nil); orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(orderpay.ErrorMessage(err), "may not reach") {
			t.Errorf("%s: CheckURL = %v, want EINVALID", raw, err)
		}
	}
	for _, raw := range []string{"https://93.184.216.34/hook", "https://erp.example/hook", "https://[2001:4860::8888]/hook"} {
		if err := webhook.CheckURL(raw, nil); err != nil {
			t.Errorf("%s: CheckURL = %v, want nil", raw, err)
		}
	}
	allow, err := orderpay.ParseNetworks("10.0.0.0/8, 127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.CheckURL("https://10.1.2.3/hook", allow); err != nil {
		t.Errorf("10.1.2.3 with 10.0.0.0/8 allowed: %v", err)
	}
	if err := webhook.CheckURL("http://[::ffff:127.0.0.1]/hook", allow); err != nil {
		t.Errorf("::ffff:127.0.0.1 with 127.0.0.1 allowed: %v", err)
	}
	if err := webhook.CheckURL("http://127.0.0.2/hook", allow); err == nil {
		t.Error("127.0.0.2 with only 127.0.0.1 allowed: accepted")
	}
	if _, err := orderpay.ParseNetworks("10.0.0.0/8,intranet"); err == nil {
		t.Error("ParseNetworks accepted a name")
	}
}

// A name checked only as it is resolved: a subscriber whose URL names a host that resolves
// to loopback (as a rebinding name would, after a public answer at registration) is never
// posted to; the attempt fails, saying why, and is retried like any failure. With the
// loopback network allowed, the same subscriber is posted to.
func TestInternalAddressRefusedAtConnect(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	// The router's subscribers are registered elsewhere (apppay checks them); only the
	// connection stands between them and the internal network here.
	for _, tc := range []struct {
		url   string
		allow []netip.Prefix
		want  int32
	}{
		{"http://localhost:" + port + "/hooks", nil, 0},
		{srv.URL + "/hooks", nil, 0},
		{"http://[::ffff:127.0.0.1]:" + port + "/hooks", nil, 0},
		{srv.URL + "/hooks", loopback, 1},
	} {
		hits.Store(0)
		clock := clocktest.New(t0)
		store := storetest.OpenSQLite(t)
		app := oneApp{webhook.Subscriber{URL: tc.url, Secret: []byte(secret), Key: "app:app_1:x"}}
		svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, Router: app, AllowNetworks: tc.allow})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := svc.Handle(ctx, orderpay.Message{ID: "app.payment.succeeded:PAP1", Subject: "app.payment.succeeded",
			Payload: []byte(`{"app_id":"app_1","payment_no":"PAP1"}`), CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		res, err := svc.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if hits.Load() != tc.want {
			t.Fatalf("%s allowed %v: the receiver got %d requests, want %d", tc.url, tc.allow, hits.Load(), tc.want)
		}
		list, _ := store.Deliveries(ctx, webhook.Filter{}, 10)
		if tc.want == 0 && (res.Retrying != 1 || len(list) != 1 || !strings.Contains(list[0].LastError, "loopback") || list[0].LastStatus != 0) {
			t.Fatalf("%s: run %+v, deliveries %+v; want a failed attempt saying loopback", tc.url, res, list)
		}
	}
}

// A receiver that redirects (302, 307) is not followed: the signed body never reaches the
// target, and the attempt fails with the status alone, to be retried.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var inner atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.Add(1)
		http.Error(w, "internal admin console", http.StatusOK)
	}))
	t.Cleanup(internal.Close)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+"/admin?token=x", code)
		}))
		t.Cleanup(outside.Close)
		clock := clocktest.New(t0)
		store := storetest.OpenSQLite(t)
		svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, AllowNetworks: loopback,
			Subscribers: []webhook.Subscriber{{URL: outside.URL + "/hooks", Secret: []byte(secret)}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := svc.Handle(ctx, paymentSucceeded("O1")); err != nil {
			t.Fatal(err)
		}
		if res, err := svc.RunOnce(ctx); err != nil || res.Retrying != 1 {
			t.Fatalf("%d: run %+v, %v; want a failed attempt", code, res, err)
		}
		list, _ := store.Deliveries(ctx, webhook.Filter{}, 10)
		if inner.Load() != 0 || len(list) != 1 || list[0].LastStatus != code || list[0].Status != webhook.StatusPending ||
			strings.Contains(list[0].LastError, "token") {
			t.Fatalf("%d: the redirect target got %d requests; delivery %+v", code, inner.Load(), list)
		}
	}
}

// What a receiver answers is kept, shown and logged only as its status and a short
// excerpt: at most 200 bytes, printable characters only.
func TestReceiverAnswerKeptAsAShortPrintableExcerpt(t *testing.T) {
	t.Parallel()
	answer := "Traceback (most recent call last):\r\n\x1b[31m  db password=hunter2\x00\n" + strings.Repeat("internal detail ", 30) + "SECRET-TAIL"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, answer, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	clock := clocktest.New(t0)
	store := storetest.OpenSQLite(t)
	svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, AllowNetworks: loopback, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Subscribers: []webhook.Subscriber{{URL: srv.URL + "/hooks", Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Handle(ctx, paymentSucceeded("O1")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	list, _ := store.Deliveries(ctx, webhook.Filter{}, 10)
	if len(list) != 1 || list[0].LastStatus != 500 {
		t.Fatalf("deliveries %+v", list)
	}
	e := list[0].LastError
	if len(e) > 200 || !strings.HasPrefix(e, "HTTP 500: Traceback") || strings.Contains(e, "SECRET-TAIL") || strings.IndexFunc(e, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Fatalf("last_error (%d bytes) = %q; want at most 200 printable bytes", len(e), e)
	}
	_, attempts, _ := store.Delivery(ctx, list[0].ID)
	if len(attempts) != 1 || attempts[0].Error != e {
		t.Fatalf("attempts %+v", attempts)
	}
	if strings.Contains(logs.String(), "SECRET-TAIL") || strings.Contains(logs.String(), "\\x1b") || !strings.Contains(logs.String(), "HTTP 500: Traceback") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// MaskURL hides what a URL carries for its receiver to check, and keeps where it goes.
func TestMaskURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://ops:hunter2@erp.example:8443/hooks?token=abc&v=2#frag": "https://***@erp.example:8443/hooks?token=***&v=***",
		"https://erp.example/hooks?s3cr3t":                              "https://erp.example/hooks?***",
		"https://erp.example/hooks":                                     "https://erp.example/hooks",
		"https://key@erp.example/":                                      "https://***@erp.example/",
		"http://[::1":                                                   "invalid-url",
	} {
		if got := webhook.MaskURL(raw); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// The TLS proxy in front of the API, and the clients behind it.
const (
	proxyPeer = "10.0.0.1:51000"
	attacker  = "203.0.113.9"
	honest    = "198.51.100.7"
)

// addrAPI is the API behind a proxy: the store, a clock the test moves, an app with a valid
// key, and the limits of serve's defaults.
type addrAPI struct {
	h       http.Handler
	clock   *clocktest.Clock
	store   *sqlstore.Store
	appKey  string
	adminOK string // the admin token
}

func newAddrAPI(t *testing.T, store *sqlstore.Store, trusted []netip.Prefix, logPerSource int) *addrAPI {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	clock := clocktest.New(t0)
	payments, err := payment.New(payment.Config{Store: store, Channels: map[string]orderpay.Channel{"stub": refusingChannel{}},
		NotifyURL: func(string) string { return "http://127.0.0.1/notify/stub" }, Clock: clock, Logger: log,
		UnverifiedLogPerSource: logPerSource})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := order.New(order.Config{Store: store, Payments: payments, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	apps, err := apppay.New(apppay.Config{Store: store, Payments: payments, Channels: []string{"stub"}, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := apps.CreateApp(ctx, apppay.CreateAppRequest{Name: "membership", Channels: []string{"stub"}}, "operator:admin")
	if err != nil {
		t.Fatal(err)
	}
	const adminToken = "the-real-admin-token-of-this-test"
	s := &Server{Orders: orders, Payments: payments, Apps: apps, AdminToken: adminToken, Audit: store, Clock: clock, Logger: log, TrustedProxies: trusted,
		// serve's defaults
		RateLimits: RateLimits{Admin: Limit{Rate: 20, Burst: 40}, AppAuthFailures: Limit{Rate: 1, Burst: 20}}}
	return &addrAPI{h: s.Handler(), clock: clock, store: store, appKey: key, adminOK: adminToken}
}

// do sends a request from peer with bearer token (if any), forwarded for client (if any).
func (a *addrAPI) do(method, path, token, peer, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = peer
	if client != "" {
		r.Header.Set("X-Forwarded-For", client)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

func onBothEngines(t *testing.T, test func(t *testing.T, store *sqlstore.Store)) {
	t.Run("sqlite", func(t *testing.T) { test(t, storetest.OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { test(t, storetest.OpenPostgres(t)) })
}

var trustedProxy = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}

// Through a trusted proxy, a client sends 25 wrong API keys and then 3 a second: past the
// burst it gets 429, and each second one 401 as its bucket refills; meanwhile a valid app's
// 20 requests from another client through the same proxy all pass. Every client used to be
// the proxy's address, and 9 of the 20 got 429.
func TestAppKeyFailuresOfOneClientDoNotLimitAnotherBehindTheProxy(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, trustedProxy, 0)
		wrong := func(i int) string { return fmt.Sprintf("opk_%016x_guess", i) }
		for i := range 25 {
			want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 20]
			if rec := a.do("GET", "/v1/payments", wrong(i), proxyPeer, attacker); rec.Code != want {
				t.Fatalf("wrong key %d: %d, want %d: %s", i, rec.Code, want, rec.Body)
			}
		}
		n := 25
		for second := range 20 {
			for i := range 3 {
				rec := a.do("GET", "/v1/payments", wrong(n), proxyPeer, attacker)
				n++
				want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i == 0 && second > 0]
				if rec.Code != want {
					t.Fatalf("second %d, wrong key %d: %d, want %d: %s", second, i, rec.Code, want, rec.Body)
				}
			}
			if rec := a.do("GET", "/v1/payments", a.appKey, proxyPeer, honest); rec.Code != http.StatusOK {
				t.Fatalf("second %d, the valid app: %d %s", second, rec.Code, rec.Body)
			}
			a.clock.Advance(time.Second)
		}
	})
}

// Without a trusted proxy every client is the proxy's address: wrong keys from it are
// refused past the burst, and a valid key from the same address still passes.
func TestAValidAPIKeyPassesWhereItsAddressIsOverTheFailureLimit(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, nil, 0)
		for i := range 25 {
			a.do("GET", "/v1/payments", fmt.Sprintf("opk_%016x_guess", i), proxyPeer, "")
		}
		if rec := a.do("GET", "/v1/payments", "opk_0123456789abcdef_x", proxyPeer, ""); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("a wrong key over the limit: %d %s", rec.Code, rec.Body)
		}
		for i := range 5 {
			if rec := a.do("GET", "/v1/payments", a.appKey, proxyPeer, ""); rec.Code != http.StatusOK {
				t.Fatalf("the valid key, request %d: %d %s", i, rec.Code, rec.Body)
			}
		}
		// Wrong secrets for the app's own key id, each from another address, are counted
		// against the key id: past its burst they are 429, and the real key still passes.
		id, _ := apppay.KeyID(a.appKey)
		for i := range 25 {
			rec := a.do("GET", "/v1/payments", fmt.Sprintf("opk_%s_guess%d", id, i), fmt.Sprintf("192.0.2.%d:4000", i+1), "")
			want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 20]
			if rec.Code != want {
				t.Fatalf("wrong secret %d for the key id: %d, want %d: %s", i, rec.Code, want, rec.Body)
			}
		}
		if rec := a.do("GET", "/v1/payments", a.appKey, "192.0.2.200:4000", ""); rec.Code != http.StatusOK {
			t.Fatalf("the valid key while its key id is over the limit: %d %s", rec.Code, rec.Body)
		}
	})
}

// 80 wrong admin tokens from one client: past the burst of 40 they are 429; the real admin,
// from another client behind the proxy and from the attacker's own address, is not locked
// out. Its own requests are still bounded by its own bucket.
func TestWrongAdminTokensDoNotLockOutTheAdmin(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, trustedProxy, 0)
		for i := range 80 {
			want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 40]
			if rec := a.do("GET", "/admin/session", fmt.Sprintf("guess-%d", i), proxyPeer, attacker); rec.Code != want {
				t.Fatalf("wrong token %d: %d, want %d: %s", i, rec.Code, want, rec.Body)
			}
		}
		if rec := a.do("GET", "/admin/session", a.adminOK, proxyPeer, honest); rec.Code != http.StatusOK {
			t.Fatalf("the real admin from another client: %d %s", rec.Code, rec.Body)
		}
		if rec := a.do("GET", "/admin/session", a.adminOK, proxyPeer, attacker); rec.Code != http.StatusOK {
			t.Fatalf("the real admin from the attacker's address: %d %s", rec.Code, rec.Body)
		}
		if rec := a.do("GET", "/admin/session", "guess-x", proxyPeer, attacker); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("the attacker after the admin's requests: %d %s", rec.Code, rec.Body)
		}
		for range 38 {
			a.do("GET", "/admin/session", a.adminOK, proxyPeer, honest)
		}
		if rec := a.do("GET", "/admin/session", a.adminOK, proxyPeer, honest); rec.Code != http.StatusTooManyRequests ||
			!strings.Contains(rec.Body.String(), "operator") {
			t.Fatalf("the admin's 41st request at once: %d %s", rec.Code, rec.Body)
		}
	})
}

// A peer that is not a trusted proxy cannot name itself another address: its
// X-Forwarded-For and X-Real-IP are ignored, and its wrong keys all count against it.
func TestForwardedForFromAnUntrustedPeerIsIgnored(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, trustedProxy, 0)
		for i := range 20 {
			r := httptest.NewRequest("GET", "/v1/payments", nil)
			r.RemoteAddr = "192.0.2.50:4000"
			r.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
			r.Header.Set("X-Real-IP", fmt.Sprintf("203.0.113.%d", i+1))
			r.Header.Set("Authorization", fmt.Sprintf("Bearer opk_%016x_guess", i))
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, r)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("wrong key %d: %d %s", i, rec.Code, rec.Body)
			}
		}
		if rec := a.do("GET", "/v1/payments", "opk_0123456789abcdef_x", "192.0.2.50:4000", "198.51.100.99"); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("the 21st wrong key with a fresh X-Forwarded-For: %d %s", rec.Code, rec.Body)
		}
	})
}

// The notification log's bound per source address takes the client behind the proxy: two
// senders of forged notifications through one proxy each get their own allowance.
func TestNotificationLogSourceIsTheClientBehindTheProxy(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, trustedProxy, 2)
		for _, client := range []string{attacker, attacker, attacker, honest, honest} {
			r := httptest.NewRequest("POST", "/notify/stub", strings.NewReader(`{"forged":true}`))
			r.RemoteAddr = proxyPeer
			r.Header.Set("X-Forwarded-For", client)
			a.h.ServeHTTP(httptest.NewRecorder(), r)
		}
		var n int
		if err := store.DB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM notification_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 4 {
			t.Fatalf("%d forged notifications logged, want 2 from each client", n)
		}
	})
}

// The audit log keeps the client address of an operator's write: behind a trusted proxy the
// one it forwarded, from any other peer the peer's own.
func TestAuditLogKeepsTheClientAddress(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newAddrAPI(t, store, trustedProxy, 0)
		block := func(value, peer, client string) {
			r := httptest.NewRequest("PUT", "/admin/blocklist/buyer/"+value, strings.NewReader(`{"reason":"spam"}`))
			r.RemoteAddr, r.Header["Content-Type"] = peer, []string{"application/json"}
			r.Header.Set("Authorization", "Bearer "+a.adminOK)
			r.Header.Set("X-Forwarded-For", client)
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("block %s: %d %s", value, rec.Code, rec.Body)
			}
		}
		block("mallory", proxyPeer, honest)
		block("trudy", "192.0.2.50:4000", attacker) // not a proxy: its header is ignored
		rec := a.do("GET", "/admin/audit", a.adminOK, proxyPeer, honest)
		var got struct {
			Actions []struct {
				Target string `json:"target"`
				Addr   string `json:"addr"`
			} `json:"actions"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got.Actions) != 2 {
			t.Fatalf("audit log %d %s: %v", rec.Code, rec.Body, err)
		}
		addr := map[string]string{}
		for _, x := range got.Actions {
			addr[x.Target] = x.Addr
		}
		if addr["kind=buyer value=mallory"] != honest || addr["kind=buyer value=trudy"] != "192.0.2.50" {
			t.Fatalf("addresses in the audit log: %v", addr)
		}
	})
}

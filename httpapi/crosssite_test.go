package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"orderpay"
	"orderpay/apppay"
	"orderpay/buyerauth"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/sqlstore"
)

// siteAPI is the API with --buyer-auth header: the shop's gateway (10.0.0.2) names the
// buyer, and may know the buyer by a cookie.
type siteAPI struct {
	h     http.Handler
	store *sqlstore.Store
}

const (
	siteGateway = "10.0.0.2:4000"
	siteAdmin   = "the-admin-token-of-the-site-test"
	evilOrigin  = "https://evil.example"
)

func newSiteAPI(t *testing.T, store *sqlstore.Store) *siteAPI {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	clock := clocktest.New(t0)
	payments, err := payment.New(payment.Config{Store: store, Channels: map[string]orderpay.Channel{"stub": refusingChannel{}},
		NotifyURL: func(string) string { return "http://127.0.0.1/notify/stub" }, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := order.New(order.Config{Store: store, Payments: payments, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := orders.CreateSKU(ctx, order.NewSKU{SKU: "tea", MerchantID: "m-tea", Title: "Tea", Price: 1000, Stock: 100,
		ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder}); err != nil {
		t.Fatal(err)
	}
	apps, err := apppay.New(apppay.Config{Store: store, Payments: payments, Channels: []string{"stub"}, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := buyerauth.ParseCIDRs("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeHeader, TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Orders: orders, Payments: payments, Apps: apps, Buyers: gw, AdminToken: siteAdmin, Clock: clock, Logger: log,
		TrustedProxies: proxies, PublicURL: "https://shop.example/"}
	return &siteAPI{h: s.Handler(), store: store}
}

// site is what a browser adds to a request: its Origin and Sec-Fetch-Site, and the host it
// asked for.
type site struct {
	origin, fetchSite, host string
}

// do sends a request through the gateway, as buyer carol, with body of contentType.
func (a *siteAPI) do(method, path, contentType, body string, from site, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = siteGateway
	r.Header.Set("X-Buyer-Id", "carol")
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if from.origin != "" {
		r.Header.Set("Origin", from.origin)
	}
	if from.fetchSite != "" {
		r.Header.Set("Sec-Fetch-Site", from.fetchSite)
	}
	if from.host != "" {
		r.Host = from.host
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

func (a *siteAPI) orders(t *testing.T) int {
	t.Helper()
	var n int
	if err := a.store.DB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantCode(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	var e errorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != status || e.Error.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", what, rec.Code, rec.Body, status, code)
	}
}

const createBody = `{"items":[{"sku":"tea","qty":1}]}`

var (
	sameOrigin = site{origin: "http://example.com", fetchSite: "same-origin"} // httptest's host is example.com
	crossSite  = site{origin: evilOrigin, fetchSite: "cross-site"}
	oldBrowser = site{origin: evilOrigin} // no Sec-Fetch-Site
)

// With --buyer-auth header, a text/plain create and a form-encoded cancel from another site
// are refused and change nothing; so is either kind of body from the shop's own pages, and a
// JSON write from another site; same-origin JSON, and a same-origin cancel without a body,
// are served.
func TestHeaderModeRefusesCrossSiteAndNonJSONWrites(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newSiteAPI(t, store)

		// The review's two requests.
		wantCode(t, "a text/plain create from evil.example", a.do("POST", "/v1/orders", "text/plain", createBody, oldBrowser), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "a text/plain create marked cross-site", a.do("POST", "/v1/orders", "text/plain", createBody, crossSite), http.StatusForbidden, ECROSSSITE)
		if n := a.orders(t); n != 0 {
			t.Fatalf("%d orders after the refused creates", n)
		}
		rec := a.do("POST", "/v1/orders", "application/json", createBody, sameOrigin, "Idempotency-Key", "carol-1")
		if rec.Code != http.StatusCreated {
			t.Fatalf("a same-origin JSON create: %d %s", rec.Code, rec.Body)
		}
		var o struct {
			OrderNo string `json:"order_no"`
			Status  string `json:"status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &o); err != nil || o.OrderNo == "" {
			t.Fatalf("created %s: %v", rec.Body, err)
		}
		cancel := "/v1/orders/" + o.OrderNo + "/cancel"
		wantCode(t, "a form-encoded cancel from evil.example", a.do("POST", cancel, "application/x-www-form-urlencoded", "x=1", oldBrowser), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "a form-encoded cancel marked cross-site", a.do("POST", cancel, "application/x-www-form-urlencoded", "x=1", crossSite), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "a cancel without a body from evil.example", a.do("POST", cancel, "", "", crossSite), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "a cross-site JSON create", a.do("POST", "/v1/orders", "application/json", createBody, crossSite), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "a same-site JSON create", a.do("POST", "/v1/orders", "application/json", createBody, site{origin: "https://pages.shop.example", fetchSite: "same-site"}), http.StatusForbidden, ECROSSSITE)

		// Not JSON, even from the shop's own pages, or from no browser at all.
		wantCode(t, "a same-origin text/plain create", a.do("POST", "/v1/orders", "text/plain", createBody, sameOrigin), http.StatusUnsupportedMediaType, EMEDIATYPE)
		wantCode(t, "a text/plain create from no browser", a.do("POST", "/v1/orders", "text/plain", createBody, site{}), http.StatusUnsupportedMediaType, EMEDIATYPE)
		wantCode(t, "a JSON body sent with no Content-Type", a.do("POST", "/v1/orders", "", createBody, site{}), http.StatusUnsupportedMediaType, EMEDIATYPE)
		wantCode(t, "a same-origin form-encoded cancel", a.do("POST", cancel, "application/x-www-form-urlencoded", "x=1", sameOrigin), http.StatusUnsupportedMediaType, EMEDIATYPE)
		wantCode(t, "a same-origin multipart address change", a.do("PATCH", "/v1/orders/"+o.OrderNo+"/address", "multipart/form-data; boundary=x", "--x--", sameOrigin), http.StatusUnsupportedMediaType, EMEDIATYPE)
		if n := a.orders(t); n != 1 {
			t.Fatalf("%d orders after the refused creates, want the one served", n)
		}
		rec = a.do("GET", "/v1/orders/"+o.OrderNo, "", "", sameOrigin)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"PENDING_PAYMENT"`) {
			t.Fatalf("the order after the refused cancels: %d %s", rec.Code, rec.Body)
		}

		// The shop's pages: JSON with a charset, from the public URL through a proxy that
		// rewrote Host; a cancel without a body, as the order page sends it.
		behindProxy := site{origin: "https://shop.example", host: "orderpay.internal:8080"}
		rec = a.do("POST", "/v1/orders", "application/json; charset=utf-8", createBody, behindProxy, "Idempotency-Key", "carol-2")
		if rec.Code != http.StatusCreated {
			t.Fatalf("a JSON create from the public URL's origin: %d %s", rec.Code, rec.Body)
		}
		if rec = a.do("POST", cancel, "", "", sameOrigin); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"CANCELLED"`) {
			t.Fatalf("a same-origin cancel without a body: %d %s", rec.Code, rec.Body)
		}
	})
}

// The operators' writes are guarded the same way; the channels' notifications and the
// payments API are not (a channel posts forms, an app is a server with its key).
func TestWriteGuardCoversOperatorsNotNotificationsNorApps(t *testing.T) {
	onBothEngines(t, func(t *testing.T, store *sqlstore.Store) {
		a := newSiteAPI(t, store)
		admin := []string{"Authorization", "Bearer " + siteAdmin}
		block := "/admin/blocklist/buyer/mallory"
		wantCode(t, "an operator's write from evil.example", a.do("PUT", block, "application/json", `{"reason":"x"}`, crossSite, admin...), http.StatusForbidden, ECROSSSITE)
		wantCode(t, "an operator's form write", a.do("PUT", block, "application/x-www-form-urlencoded", "reason=x", sameOrigin, admin...), http.StatusUnsupportedMediaType, EMEDIATYPE)
		if rec := a.do("PUT", block, "application/json", `{"reason":"spam"}`, sameOrigin, admin...); rec.Code != http.StatusOK {
			t.Fatalf("an operator's same-origin JSON write: %d %s", rec.Code, rec.Body)
		}
		if rec := a.do("DELETE", block, "", "", sameOrigin, admin...); rec.Code != http.StatusNoContent {
			t.Fatalf("an operator's same-origin DELETE without a body: %d %s", rec.Code, rec.Body)
		}

		// A form-encoded notification from another site reaches the channel, which refuses
		// its signature (401), not the guard.
		wantCode(t, "a form notification", a.do("POST", "/notify/stub", "application/x-www-form-urlencoded", "sign=x", crossSite), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
		// The payments API reads the key, not the site: no key is 401.
		wantCode(t, "a text/plain app payment from another site", a.do("POST", "/v1/payments", "text/plain", "{}", crossSite), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
		wantCode(t, "a text/plain till payment from another site", a.do("POST", "/v1/pos/payments", "text/plain", "{}", crossSite), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	})
}

// Outside header mode the cross-site check still holds (a scan session is a cookie, and a
// proxy may add an operator's token), but a body's type is the client's business: the
// demo's curl examples post JSON as a form.
func TestCrossSiteWritesRefusedInEveryMode(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{})
	r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"buyer_id":"alice","items":[{"sku":"tea","qty":1}]}`))
	r.Header.Set("Origin", evilOrigin)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	wantCode(t, "a cross-site create in mode none", rec, http.StatusForbidden, ECROSSSITE)
	r = httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"buyer_id":"alice","items":[{"sku":"tea","qty":1}]}`))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	if rec.Code != http.StatusCreated {
		t.Fatalf("curl's form-typed JSON create in mode none: %d %s", rec.Code, rec.Body)
	}
}

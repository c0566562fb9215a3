package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

var t0 = time.Date(2025, 11, 11, 0, 0, 0, 0, time.UTC)

func wantAllowed(t *testing.T, l *Limiter, key string, now time.Time) {
	t.Helper()
	if ok, wait := l.Allow(key, now); !ok {
		t.Fatalf("%s at +%v refused (retry after %v), want allowed", key, now.Sub(t0), wait)
	}
}

func wantRefused(t *testing.T, l *Limiter, key string, now time.Time, retryAfter time.Duration) {
	t.Helper()
	if ok, wait := l.Allow(key, now); ok || wait != retryAfter {
		t.Fatalf("%s at +%v: allowed %v, retry after %v; want refused, retry after %v", key, now.Sub(t0), ok, wait, retryAfter)
	}
}

// A full bucket lets its burst through at once, then refuses, saying when the next token
// comes; a refusal takes nothing, so asking again does not push that moment back.
func TestRateLimiterBurstThenRefusal(t *testing.T) {
	l := NewLimiter(Limit{Rate: 2, Burst: 3})
	for range 3 {
		wantAllowed(t, l, "alice", t0)
	}
	wantRefused(t, l, "alice", t0, 500*time.Millisecond)
	wantRefused(t, l, "alice", t0, 500*time.Millisecond)
	wantRefused(t, l, "alice", t0.Add(200*time.Millisecond), 300*time.Millisecond)
}

// Tokens come back at the rate, and never beyond the burst however long the key is idle.
func TestRateLimiterRefillsAtTheRate(t *testing.T) {
	l := NewLimiter(Limit{Rate: 2, Burst: 3})
	for range 3 {
		wantAllowed(t, l, "alice", t0)
	}
	wantRefused(t, l, "alice", t0.Add(499*time.Millisecond), time.Millisecond)
	wantAllowed(t, l, "alice", t0.Add(500*time.Millisecond))
	wantRefused(t, l, "alice", t0.Add(500*time.Millisecond), 500*time.Millisecond)
	wantAllowed(t, l, "alice", t0.Add(time.Second))

	later := t0.Add(time.Hour)
	for range 3 {
		wantAllowed(t, l, "alice", later)
	}
	wantRefused(t, l, "alice", later, 500*time.Millisecond)
}

// A clock that steps back makes a bucket look emptier, never fuller, and the time it
// missed is not counted twice when it catches up.
func TestRateLimiterClockGoingBackRefillsNothing(t *testing.T) {
	l := NewLimiter(Limit{Rate: 1, Burst: 1})
	wantAllowed(t, l, "alice", t0)
	wantRefused(t, l, "alice", t0.Add(-time.Minute), time.Minute+time.Second)
	wantRefused(t, l, "alice", t0.Add(999*time.Millisecond), time.Millisecond)
	wantAllowed(t, l, "alice", t0.Add(time.Second))
	wantRefused(t, l, "alice", t0.Add(time.Second), time.Second)
}

// One key's empty bucket is nobody else's business.
func TestRateLimiterKeysAreIsolated(t *testing.T) {
	l := NewLimiter(Limit{Rate: 1, Burst: 2})
	wantAllowed(t, l, "alice", t0)
	wantAllowed(t, l, "alice", t0)
	wantRefused(t, l, "alice", t0, time.Second)
	wantAllowed(t, l, "bob", t0)
	wantAllowed(t, l, "bob", t0)
	wantRefused(t, l, "bob", t0, time.Second)
}

// An off limit lets everything through and keeps no bucket.
func TestRateLimiterOffAllowsEverything(t *testing.T) {
	for _, lim := range []Limit{{}, {Rate: 5}, {Burst: 5}, {Rate: -1, Burst: 5}} {
		l := NewLimiter(lim)
		for i := range 1000 {
			wantAllowed(t, l, fmt.Sprint(i%3), t0)
		}
		if l.Len() != 0 {
			t.Fatalf("%+v kept %d buckets", lim, l.Len())
		}
	}
}

// A stream of keys each seen once (a client making up a buyer id per request) leaves the
// map bounded: full buckets are swept. A bucket still refilling is never swept, so a
// drained key stays refused however many keys pass.
func TestRateLimiterEvictionKeepsTheMapBounded(t *testing.T) {
	l := NewLimiter(Limit{Rate: 1, Burst: 5}) // a bucket used once is full again 1 s later
	for range 5 {
		wantAllowed(t, l, "hot", t0)
	}
	now, peak := t0, 0
	for i := range 50_000 {
		now = now.Add(time.Second / 10_000) // 10,000 new keys a second, for 5 s
		wantAllowed(t, l, fmt.Sprint("key-", i), now)
		peak = max(peak, l.Len())
		if now.Before(t0.Add(time.Second)) {
			if ok, _ := l.Allow("hot", now); ok {
				t.Fatalf("the drained key was refilled early at +%v (its bucket was swept)", now.Sub(t0))
			}
		}
	}
	// About 10,000 buckets are refilling at any moment; the map sweeps when it has doubled
	// since the last sweep, so it never holds much more than twice that.
	if peak > 2*10_000+minSweep {
		t.Fatalf("the map grew to %d buckets", peak)
	}
	// Once the keys are idle and full, the next sweep drops every one of them.
	for i := range 2 * peak {
		now = now.Add(time.Second)
		wantAllowed(t, l, fmt.Sprint("late-", i), now)
		if l.Len() == 1 {
			return
		}
	}
	t.Fatalf("idle full buckets were never swept: %d left", l.Len())
}

func TestParseRateLimit(t *testing.T) {
	for in, want := range map[string]Limit{
		"200/s,burst=400":     {Rate: 200, Burst: 400},
		"5/s,burst=10":        {Rate: 5, Burst: 10},
		" 5 / s , burst=10 ":  {Rate: 5, Burst: 10},
		"off":                 {},
		"OFF":                 {},
		"10/s":                {Rate: 10, Burst: 10},
		"0.5/s":               {Rate: 0.5, Burst: 1},
		"30/m":                {Rate: 0.5, Burst: 1},
		"120/m,burst=5":       {Rate: 2, Burst: 5},
		"3600/h,burst=1":      {Rate: 1, Burst: 1},
		"2.5/s,burst=1000000": {Rate: 2.5, Burst: 1_000_000},
	} {
		got, err := ParseRateLimit(in)
		if err != nil || got != want {
			t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		// String is what the flag help shows, and reads back to the same limit.
		again, err := ParseRateLimit(got.String())
		if err != nil || again != got {
			t.Errorf("%q printed as %q read back as %+v, %v", in, got.String(), again, err)
		}
	}
	for _, in := range []string{"", "5", "5/", "/s", "5/d", "5/sec", "0/s", "-1/s", "NaN/s", "Inf/s", "x/s",
		"5/s,", "5/s,burst=", "5/s,burst=0", "5/s,burst=-3", "5/s,burst=x", "5/s,10", "5/s,burst=10,burst=3", "on"} {
		if l, err := ParseRateLimit(in); err == nil {
			t.Errorf("ParseRateLimit(%q) = %+v, want an error", in, l)
		}
	}
	var l Limit
	if err := l.UnmarshalText([]byte("7/s,burst=9")); err != nil || l != (Limit{Rate: 7, Burst: 9}) {
		t.Fatalf("UnmarshalText: %+v, %v", l, err)
	}
}

func TestRateLimitRetryAfterRoundsUpToWholeSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Nanosecond: 1, time.Second: 1,
		time.Second + time.Millisecond: 2, 2500 * time.Millisecond: 3, time.Minute: 60} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// ---- through the real handler ----

// refusingChannel verifies no notification, as a channel would a forged one.
type refusingChannel struct{ orderpay.Channel }

func (refusingChannel) Name() string { return "stub" }
func (refusingChannel) VerifyNotification(context.Context, http.Header, []byte) (*orderpay.Notification, error) {
	return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "signature does not verify")
}
func (refusingChannel) NotificationTrade(http.Header, []byte) string { return "" }

type limitedAPI struct {
	h       http.Handler
	clock   *clocktest.Clock
	store   orderpay.Store
	creates int
}

// newLimitedAPI is the API on a fresh SQLite store with one SKU, a clock that moves only
// when the test moves it, and the given limits.
func newLimitedAPI(t *testing.T, limits RateLimits) *limitedAPI {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	store := storetest.OpenSQLite(t)
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
	s := &Server{Orders: orders, Payments: payments, AdminToken: "admin", Clock: clock, Logger: log, RateLimits: limits,
		Ready: func(context.Context) error { return nil }}
	return &limitedAPI{h: s.Handler(), clock: clock, store: store}
}

// do sends a request from remoteAddr, as buyer (the X-Buyer-Id header) unless it is "".
func (a *limitedAPI) do(method, path, body, buyer, remoteAddr string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = remoteAddr
	if buyer != "" {
		r.Header.Set("X-Buyer-Id", buyer)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

func (a *limitedAPI) create(buyer string) *httptest.ResponseRecorder {
	return a.createFrom(buyer, "192.0.2.1:40000")
}

// createFrom creates an order of one tea, for buyer (X-Buyer-Id) or, without one, for
// another buyer_id in its body each time. Each create has an Idempotency-Key of its own, so
// that none is the same request as an earlier one, which the duplicate-submit guard would
// answer with that order.
func (a *limitedAPI) createFrom(buyer, remoteAddr string) *httptest.ResponseRecorder {
	a.creates++
	body := `{"items":[{"sku":"tea","qty":1}]}`
	if buyer == "" {
		body = fmt.Sprintf(`{"buyer_id":"buyer-%d","items":[{"sku":"tea","qty":1}]}`, a.creates)
	}
	r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(body))
	r.RemoteAddr = remoteAddr
	r.Header.Set("Idempotency-Key", fmt.Sprintf("create-%d", a.creates))
	if buyer != "" {
		r.Header.Set("X-Buyer-Id", buyer)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

func (a *limitedAPI) lockedStock(t *testing.T) int64 {
	t.Helper()
	st, err := a.store.Stock(context.Background(), "tea")
	if err != nil {
		t.Fatal(err)
	}
	return st.Locked
}

func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
}

// wantLimited checks a 429 in the API's shape: Retry-After in whole seconds, JSON error
// ERATELIMITED whose message says who is over the limit.
func wantLimited(t *testing.T, rec *httptest.ResponseRecorder, retryAfter, who string) {
	t.Helper()
	wantStatus(t, rec, http.StatusTooManyRequests)
	if got := rec.Header().Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After %q, want %q", got, retryAfter)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("not JSON: %s", rec.Body)
	}
	if e.Error.Code != ERATELIMITED || !strings.Contains(e.Error.Message, who) {
		t.Fatalf("error %+v, want %s about %q", e.Error, ERATELIMITED, who)
	}
}

// The create after a buyer's burst is refused with 429, Retry-After and the JSON code, and
// writes nothing; another buyer is not affected; once the clock has moved on by the
// Retry-After, the buyer may create again.
func TestRateLimitCreateBeyondTheBurstGets429(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{PerBuyer: Limit{Rate: 0.4, Burst: 3}}) // a token every 2.5 s
	for range 3 {
		wantStatus(t, a.create("alice"), http.StatusCreated)
	}
	wantLimited(t, a.create("alice"), "3", "from this buyer") // 2.5 s, rounded up
	wantLimited(t, a.create("alice"), "3", "from this buyer")
	if locked := a.lockedStock(t); locked != 3 {
		t.Fatalf("refused creates changed the stock: %d locked, want 3", locked)
	}

	wantStatus(t, a.create("bob"), http.StatusCreated)

	a.clock.Advance(2 * time.Second)
	wantLimited(t, a.create("alice"), "1", "from this buyer") // 0.5 s left
	a.clock.Advance(500 * time.Millisecond)
	wantStatus(t, a.create("alice"), http.StatusCreated)
	wantLimited(t, a.create("alice"), "3", "from this buyer")
	if locked := a.lockedStock(t); locked != 5 {
		t.Fatalf("%d locked, want 5 (4 for alice, 1 for bob)", locked)
	}
}

// Pay and cancel spend the same buyer's tokens as create: the limit is on the buyer's
// writes, whatever they are.
func TestRateLimitPayAndCancelShareTheBuyersBucket(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{PerBuyer: Limit{Rate: 1, Burst: 3}})
	wantStatus(t, a.create("alice"), http.StatusCreated)
	// The harness's only channel is a stub no method pays through: a pay is refused as a
	// request (400) before any order is read, and still spends a token.
	wantStatus(t, a.do("POST", "/v1/orders/nope/pay", `{"channel":"alipay"}`, "alice", "192.0.2.1:1"), http.StatusBadRequest)
	wantStatus(t, a.do("POST", "/v1/orders/nope/cancel", "", "alice", "192.0.2.1:1"), http.StatusNotFound)
	wantLimited(t, a.do("POST", "/v1/orders/nope/pay", `{"channel":"alipay"}`, "alice", "192.0.2.1:1"), "1", "from this buyer")
	wantLimited(t, a.do("POST", "/v1/orders/nope/cancel", "", "alice", "192.0.2.1:1"), "1", "from this buyer")
	wantStatus(t, a.do("POST", "/v1/orders/nope/cancel", "", "bob", "192.0.2.1:1"), http.StatusNotFound)
}

// Without X-Buyer-Id the key is the client's IP, whatever its port, and the refusal says so
// ("from this address", not "from this buyer"); a header names its own bucket, apart from
// any IP's.
func TestRateLimitKeysOnTheClientIPWithoutAHeader(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{PerBuyer: Limit{Rate: 1, Burst: 2}})
	wantStatus(t, a.createFrom("", "192.0.2.7:1111"), http.StatusCreated)
	wantStatus(t, a.createFrom("", "192.0.2.7:2222"), http.StatusCreated)
	wantLimited(t, a.createFrom("", "192.0.2.7:3333"), "1", "from this address")
	wantStatus(t, a.createFrom("", "[2001:db8::7]:1111"), http.StatusCreated)
	wantStatus(t, a.createFrom("", "192.0.2.8:1111"), http.StatusCreated)
	wantStatus(t, a.createFrom("192.0.2.7", "192.0.2.7:4444"), http.StatusCreated)
}

// The global bucket counts every buyer's writes together; a buyer refused by its own
// bucket spends none of the shared tokens.
func TestRateLimitGlobalCoversEveryBuyersWrites(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{Global: Limit{Rate: 1, Burst: 3}, PerBuyer: Limit{Rate: 1, Burst: 1}})
	wantStatus(t, a.create("alice"), http.StatusCreated)
	for range 10 {
		wantLimited(t, a.create("alice"), "1", "from this buyer")
	}
	wantStatus(t, a.do("POST", "/v1/orders/nope/pay", `{"channel":"alipay"}`, "bob", "192.0.2.2:1"), http.StatusBadRequest) // a stub channel: 400

	wantStatus(t, a.do("POST", "/v1/orders/nope/cancel", "", "carol", "192.0.2.3:1"), http.StatusNotFound)
	wantLimited(t, a.create("dave"), "1", "to this service")
	if locked := a.lockedStock(t); locked != 1 {
		t.Fatalf("%d locked, want 1", locked)
	}
	a.clock.Advance(time.Second)
	wantStatus(t, a.create("dave"), http.StatusCreated)
}

// Channel notifications, reads, ops and admin endpoints are never limited, even with every
// bucket empty.
func TestRateLimitNeverAppliesToNotificationsReadsOpsOrAdmin(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{Global: Limit{Rate: 1, Burst: 1}, PerBuyer: Limit{Rate: 1, Burst: 1}})
	wantStatus(t, a.createFrom("", "192.0.2.1:1"), http.StatusCreated)
	wantLimited(t, a.createFrom("", "192.0.2.1:1"), "1", "from this address")
	wantLimited(t, a.create("bob"), "1", "to this service")
	for range 20 {
		for _, c := range []struct {
			method, path string
			status       int
		}{
			{"POST", "/notify/stub", http.StatusUnauthorized}, // the channel's refusal, not the limit's
			{"POST", "/notify/alipay", http.StatusNotFound},
			{"GET", "/healthz", http.StatusOK},
			{"GET", "/readyz", http.StatusOK},
			{"GET", "/v1/skus", http.StatusOK},
			{"GET", "/v1/orders/nope", http.StatusNotFound},
			{"GET", "/admin/pending-queries", http.StatusUnauthorized},
		} {
			wantStatus(t, a.do(c.method, c.path, "trade_status=TRADE_SUCCESS", "", "192.0.2.1:1"), c.status)
		}
	}
	wantLimited(t, a.createFrom("", "192.0.2.1:1"), "1", "from this address")
}

// A Server built without RateLimits limits nothing.
func TestRateLimitsOffByDefault(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{})
	for i := range 30 { // alice's 30 writes at once; her creates stay under the buyer caps
		if i%2 == 0 {
			wantStatus(t, a.create("alice"), http.StatusCreated)
		} else {
			wantStatus(t, a.do("POST", "/v1/orders/nope/cancel", "", "alice", "192.0.2.1:1"), http.StatusNotFound)
		}
	}
}

package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const secret = "whsec-test-0123456789abcdef"

// loopback is the network the tests' receivers (httptest servers) listen on: allowed
// explicitly, as an operator would with serve --webhook-allow-networks.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// receiver is a business system's endpoint: it verifies every request with webhook.Verify
// against the test's clock, records it, and answers with the status its test sets.
type receiver struct {
	t      *testing.T
	clock  *clocktest.Clock
	srv    *httptest.Server
	status atomic.Int32

	mu       sync.Mutex
	requests []receivedHook
}

type receivedHook struct {
	delivery, event string
	body            []byte
	at              time.Time
	verifyErr       error
}

func newReceiver(t *testing.T, clock *clocktest.Clock, status int) *receiver {
	r := &receiver{t: t, clock: clock}
	r.status.Store(int32(status))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		err := webhook.Verify([]byte(secret), req.Header, body, clock.Now())
		r.mu.Lock()
		r.requests = append(r.requests, receivedHook{req.Header.Get(webhook.HeaderDelivery), req.Header.Get(webhook.HeaderEvent), body, clock.Now(), err})
		r.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) received() []receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedHook(nil), r.requests...)
}

type countingObserver struct {
	mu       sync.Mutex
	attempts map[string]int // kind/result
	dead     int
}

func (o *countingObserver) WebhookAttempt(_, kind, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts[kind+"/"+result]++
}

func (o *countingObserver) WebhookDead(string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead++
}

type bundle struct {
	svc   *webhook.Service
	store webhook.Store
	clock *clocktest.Clock
	obs   *countingObserver
}

func setup(t *testing.T, subscribers ...*receiver) bundle {
	t.Helper()
	store := storetest.OpenSQLite(t)
	b := bundle{store: store, obs: &countingObserver{attempts: map[string]int{}}}
	if len(subscribers) > 0 {
		b.clock = subscribers[0].clock
	} else {
		b.clock = clocktest.New(t0)
	}
	cfg := webhook.Config{Store: store, Clock: b.clock, Observer: b.obs, AllowNetworks: loopback}
	for _, r := range subscribers {
		cfg.Subscribers = append(cfg.Subscribers, webhook.Subscriber{URL: r.srv.URL + "/hooks/orderpay", Secret: []byte(secret)})
	}
	svc, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.svc = svc
	return b
}

func paymentSucceeded(orderNo string) orderpay.Message {
	ev := orderpay.PaymentSucceeded{PaymentNo: "P" + orderNo, OrderNo: orderNo, Amount: 2599, Channel: orderpay.ChannelAlipay,
		OutTradeNo: "P" + orderNo + "A01", TradeNo: "2026112322001", PaidAt: t0}
	b, _ := json.Marshal(ev)
	return orderpay.Message{ID: orderpay.SubjectPaymentSucceeded + ":" + ev.PaymentNo, Subject: orderpay.SubjectPaymentSucceeded, Payload: b, CreatedAt: t0}
}

func (b bundle) handle(t *testing.T, m orderpay.Message) {
	t.Helper()
	if err := b.svc.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func (b bundle) run(t *testing.T) webhook.RunResult {
	t.Helper()
	res, err := b.svc.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (b bundle) only(t *testing.T) webhook.Delivery {
	t.Helper()
	all, err := b.store.Deliveries(context.Background(), webhook.Filter{}, 10)
	if err != nil || len(all) != 1 {
		t.Fatalf("deliveries %+v, %v; want one", all, err)
	}
	return all[0]
}

// A signature is genuine only for its secret, its body, its timestamp and its delivery id,
// and only within five minutes of the receiver's clock.
func TestVerifyChecksSignatureAndTolerance(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"payment.succeeded:P1","type":"payment.succeeded","data":{"amount":2599}}`)
	signed := func(ts time.Time, secret string, b []byte) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(webhook.HeaderDelivery, "41")
		h.Set(webhook.HeaderSignature, webhook.Sign([]byte(secret), ts, "41", b))
		return h
	}
	if err := webhook.Verify([]byte(secret), signed(t0, secret, body), body, t0.Add(4*time.Minute+59*time.Second)); err != nil {
		t.Fatalf("genuine, 4m59s old: %v", err)
	}
	if err := webhook.Verify([]byte(secret), signed(t0, secret, body), body, t0.Add(-4*time.Minute)); err != nil {
		t.Fatalf("genuine, sender's clock 4 min ahead: %v", err)
	}
	tampered := []byte(`{"id":"payment.succeeded:P1","type":"payment.succeeded","data":{"amount":1}}`)
	for name, tc := range map[string]struct {
		h    http.Header
		body []byte
		now  time.Time
	}{
		"tampered body":       {signed(t0, secret, body), tampered, t0},
		"other secret":        {signed(t0, "another-secret-0123456789", body), body, t0},
		"replayed 5m01s late": {signed(t0, secret, body), body, t0.Add(5*time.Minute + time.Second)},
		"from the future":     {signed(t0.Add(6*time.Minute), secret, body), body, t0},
		"no timestamp":        {http.Header{webhook.HeaderSignature: {webhook.Sign([]byte(secret), t0, "41", body)}, webhook.HeaderDelivery: {"41"}}, body, t0},
		"no signature":        {http.Header{webhook.HeaderTimestamp: {strconv.FormatInt(t0.Unix(), 10)}, webhook.HeaderDelivery: {"41"}}, body, t0},
	} {
		if err := webhook.Verify([]byte(secret), tc.h, tc.body, tc.now); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
			t.Errorf("%s: Verify = %v, want EUNAUTHORIZED", name, err)
		}
	}
	// The timestamp is signed: moving it forward to look fresh breaks the signature.
	h := signed(t0, secret, body)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(t0.Add(time.Hour).Unix(), 10))
	if err := webhook.Verify([]byte(secret), h, body, t0.Add(time.Hour)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Errorf("re-stamped request: %v", err)
	}
	// While a secret is rotated the sender signs with both; either secret verifies.
	h = signed(t0, secret, body)
	h.Set(webhook.HeaderSignature, webhook.Sign([]byte("old-secret-0123456789abc"), t0, "41", body)+","+h.Get(webhook.HeaderSignature))
	if err := webhook.Verify([]byte(secret), h, body, t0); err != nil {
		t.Errorf("two signatures, the second ours: %v", err)
	}
}

// A request captured and replayed within the five minutes under another delivery id, so
// that a receiver deduplicating on the id takes it for a new event, fails verification:
// the delivery id is signed. So does one with the id taken away, or with only a signature
// of the former scheme (timestamp and body alone).
func TestVerifyRefusesAReplayUnderAnotherDeliveryID(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"payment.succeeded:P1","type":"payment.succeeded","data":{"amount":2599}}`)
	h := http.Header{}
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(t0.Unix(), 10))
	h.Set(webhook.HeaderDelivery, "41")
	h.Set(webhook.HeaderSignature, webhook.Sign([]byte(secret), t0, "41", body))
	if err := webhook.Verify([]byte(secret), h, body, t0.Add(time.Minute)); err != nil {
		t.Fatalf("genuine: %v", err)
	}
	replay := h.Clone()
	replay.Set(webhook.HeaderDelivery, "42")
	if err := webhook.Verify([]byte(secret), replay, body, t0.Add(time.Minute)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("replayed with delivery 42 instead of 41: Verify = %v, want EUNAUTHORIZED", err)
	}
	replay.Del(webhook.HeaderDelivery)
	if err := webhook.Verify([]byte(secret), replay, body, t0.Add(time.Minute)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("replayed without a delivery id: Verify = %v, want EUNAUTHORIZED", err)
	}
	if !strings.HasPrefix(h.Get(webhook.HeaderSignature), "v2=") {
		t.Fatalf("signature %q is not tagged v2", h.Get(webhook.HeaderSignature))
	}
	// A v1 signature (timestamp + "." + body, which left the id out) is not accepted.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t0.Unix(), 10) + "." + string(body)))
	v1 := h.Clone()
	v1.Set(webhook.HeaderSignature, "v1="+hex.EncodeToString(m.Sum(nil)))
	if err := webhook.Verify([]byte(secret), v1, body, t0); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a v1 signature: Verify = %v, want EUNAUTHORIZED", err)
	}
}

// A payment result reaches the subscriber signed, once, with its event in the body; the
// message redelivered by the bus creates no second delivery; other subjects none at all.
func TestResultDeliveredSignedOnce(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	r := newReceiver(t, clock, http.StatusNoContent)
	b := setup(t, r)
	m := paymentSucceeded("O1")
	b.handle(t, m)
	b.handle(t, m) // redelivered
	b.handle(t, orderpay.Message{ID: "order.paid:O1", Subject: orderpay.SubjectOrderPaid, Payload: []byte(`{"order_no":"O1"}`)})
	if res := b.run(t); res.Due != 1 || res.Delivered != 1 {
		t.Fatalf("run = %+v", res)
	}
	got := r.received()
	if len(got) != 1 || got[0].verifyErr != nil || got[0].event != orderpay.SubjectPaymentSucceeded {
		t.Fatalf("received %+v", got)
	}
	var env struct {
		ID   string                    `json:"id"`
		Type string                    `json:"type"`
		Data orderpay.PaymentSucceeded `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &env); err != nil || env.ID != m.ID || env.Type != m.Subject || env.Data.OrderNo != "O1" || env.Data.Amount != 2599 {
		t.Fatalf("body %s: %+v, %v", got[0].body, env, err)
	}
	d := b.only(t)
	if d.Status != webhook.StatusSucceeded || d.Attempts != 1 || d.LastStatus != 204 || !d.DeliveredAt.Equal(t0) ||
		got[0].delivery != strconv.FormatInt(d.ID, 10) || d.OrderNo != "O1" || d.PaymentNo != "PO1" {
		t.Fatalf("delivery %+v, header id %s", d, got[0].delivery)
	}
	clock.Advance(24 * time.Hour)
	if res := b.run(t); res.Due != 0 || len(r.received()) != 1 {
		t.Fatalf("a delivered webhook was posted again: %+v", res)
	}
}

// A subscriber that answers 500 is retried at exactly 15s, 15s, 30s, 3m, 10m, 20m, 30m,
// 30m, 30m, 60m, 3h, 3h, 3h, 6h, 6h after each failure, never earlier; after the
// sixteenth attempt the delivery is dead, counted, and never posted again by the worker.
func TestRetriesFollowTheScheduleThenDie(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	r := newReceiver(t, clock, http.StatusInternalServerError)
	b := setup(t, r)
	b.handle(t, paymentSucceeded("O1"))
	want := []time.Time{t0}
	at := t0
	for _, d := range webhook.ScheduleDefault {
		at = at.Add(d)
		want = append(want, at)
	}
	if total := want[len(want)-1].Sub(t0); total != 24*time.Hour+4*time.Minute {
		t.Fatalf("the schedule spans %s, want 24h4m", total)
	}
	for i, due := range want {
		if i > 0 {
			// A second before it is due, nothing happens.
			clock.Set(due.Add(-time.Second))
			if res := b.run(t); res.Due != 0 {
				t.Fatalf("attempt %d made a second early: %+v", i+1, res)
			}
		}
		clock.Set(due)
		res := b.run(t)
		switch {
		case i < len(want)-1 && res.Retrying != 1:
			t.Fatalf("attempt %d: %+v, want a retry scheduled", i+1, res)
		case i == len(want)-1 && res.Dead != 1:
			t.Fatalf("last attempt: %+v, want dead", res)
		}
	}
	got := r.received()
	if len(got) != len(want) {
		t.Fatalf("%d attempts, want %d", len(got), len(want))
	}
	for i := range got {
		if !got[i].at.Equal(want[i]) || got[i].verifyErr != nil || got[i].delivery != got[0].delivery {
			t.Fatalf("attempt %d at %s (want %s), delivery %s, verify %v", i+1, got[i].at, want[i], got[i].delivery, got[i].verifyErr)
		}
	}
	d := b.only(t)
	if d.Status != webhook.StatusFailed || d.Attempts != 16 || d.LastStatus != 500 {
		t.Fatalf("after the schedule: %+v", d)
	}
	clock.Advance(30 * 24 * time.Hour)
	if res := b.run(t); res.Due != 0 || len(r.received()) != 16 {
		t.Fatalf("a dead delivery was posted again: %+v", res)
	}
	if b.obs.dead != 1 || b.obs.attempts["schedule/failed"] != 16 {
		t.Fatalf("observed %+v, dead %d", b.obs.attempts, b.obs.dead)
	}
}

// An operator's resend posts at once, whatever became of the delivery: one delivered
// already, one still being retried, one dead. Each resend carries the delivery's id, so the
// receiver can tell it is the same event.
func TestResendWorksWhateverHappenedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(t0)
	r := newReceiver(t, clock, http.StatusOK)
	b := setup(t, r)

	// Delivered, then resent: posted again, still SUCCEEDED.
	b.handle(t, paymentSucceeded("O1"))
	b.run(t)
	d1 := b.only(t)
	d, attempts, err := b.svc.Resend(ctx, d1.ID)
	if err != nil || d.Status != webhook.StatusSucceeded || len(attempts) != 2 || attempts[1].Kind != webhook.KindResend || attempts[1].HTTPStatus != 200 {
		t.Fatalf("resend of a delivered webhook: %+v, %+v, %v", d, attempts, err)
	}
	if got := r.received(); len(got) != 2 || got[1].delivery != got[0].delivery || string(got[1].body) != string(got[0].body) {
		t.Fatalf("received %+v", got)
	}

	// Failing and waiting for its retry: the resend delivers it, and the schedule stops.
	r.status.Store(http.StatusServiceUnavailable)
	m2 := paymentSucceeded("O2")
	b.handle(t, m2)
	b.run(t)
	all, _ := b.store.Deliveries(ctx, webhook.Filter{PaymentNo: "PO2"}, 10)
	if len(all) != 1 || all[0].Status != webhook.StatusPending || all[0].Attempts != 1 {
		t.Fatalf("O2 after one failure: %+v", all)
	}
	r.status.Store(http.StatusOK)
	clock.Advance(5 * time.Second) // before its retry is due
	d, _, err = b.svc.Resend(ctx, all[0].ID)
	if err != nil || d.Status != webhook.StatusSucceeded || !d.DeliveredAt.Equal(clock.Now()) {
		t.Fatalf("resend of a failing webhook: %+v, %v", d, err)
	}
	clock.Advance(time.Hour)
	before := len(r.received())
	if res := b.run(t); res.Due != 0 || len(r.received()) != before {
		t.Fatalf("the schedule went on after the resend delivered: %+v", res)
	}

	// Dead: every scheduled attempt failed; the resend delivers it.
	r.status.Store(http.StatusBadGateway)
	b.handle(t, paymentSucceeded("O3"))
	for range 16 {
		b.run(t)
		clock.Advance(7 * time.Hour)
	}
	all, _ = b.store.Deliveries(ctx, webhook.Filter{PaymentNo: "PO3"}, 10)
	if len(all) != 1 || all[0].Status != webhook.StatusFailed {
		t.Fatalf("O3 after the schedule: %+v", all)
	}
	// A failed resend leaves it dead.
	if d, _, err = b.svc.Resend(ctx, all[0].ID); err != nil || d.Status != webhook.StatusFailed || d.LastStatus != 502 {
		t.Fatalf("failed resend of a dead webhook: %+v, %v", d, err)
	}
	r.status.Store(http.StatusAccepted)
	if d, _, err = b.svc.Resend(ctx, all[0].ID); err != nil || d.Status != webhook.StatusSucceeded || d.LastStatus != 202 {
		t.Fatalf("resend of a dead webhook: %+v, %v", d, err)
	}
	if _, _, err := b.svc.Resend(ctx, 99999); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("resend of no delivery: %v", err)
	}
	for _, h := range r.received() {
		if h.verifyErr != nil {
			t.Fatalf("an unverifiable request was sent: %v", h.verifyErr)
		}
	}
}

// Each subscriber gets its own delivery: one that is down does not hold back another.
func TestSubscribersAreIndependent(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	up, down := newReceiver(t, clock, http.StatusOK), newReceiver(t, clock, http.StatusInternalServerError)
	b := setup(t, up, down)
	b.handle(t, paymentSucceeded("O1"))
	if res := b.run(t); res.Due != 2 || res.Delivered != 1 || res.Retrying != 1 {
		t.Fatalf("run = %+v", res)
	}
	if len(up.received()) != 1 || len(down.received()) != 1 {
		t.Fatalf("up got %d, down got %d", len(up.received()), len(down.received()))
	}
}

// Subscribers are checked at start: an http(s) URL and a secret of 16 bytes or more.
func TestNewRefusesBadSubscribers(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	for name, sub := range map[string]webhook.Subscriber{
		"short secret": {URL: "https://erp.example/hook", Secret: []byte("short")},
		"not http":     {URL: "ftp://erp.example/hook", Secret: []byte(secret)},
		"no host":      {URL: "https:///hook", Secret: []byte(secret)},
	} {
		if _, err := webhook.New(webhook.Config{Store: store, Subscribers: []webhook.Subscriber{sub}}); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The name hides credentials a URL may carry.
	s := webhook.Subscriber{URL: "https://user:pw@erp.example/hook?token=abc"}
	if s.Name() != "https://erp.example/hook" {
		t.Fatalf("Name = %s", s.Name())
	}
}

// A subscriber configured today receives the results written from today on, not the
// history the stream still holds; its start is kept across restarts. An operator's replay
// sends it the older results from the outbox, oldest first, once.
func TestNewSubscriberStartsFromNowAndReplaySendsTheHistory(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	r := newReceiver(t, clock, http.StatusNoContent)
	b := setup(t, r)
	ctx := context.Background()
	old := []orderpay.Message{paymentSucceeded("OLD1"), paymentSucceeded("OLD2")}
	old[1].CreatedAt = t0.Add(time.Minute)
	old = append(old, orderpay.Message{ID: "order.paid:OLD1", Subject: orderpay.SubjectOrderPaid, Payload: []byte(`{"order_no":"OLD1"}`), CreatedAt: t0})
	if err := b.store.(orderpay.Store).InTx(ctx, func(tx orderpay.Tx) error {
		for _, m := range old {
			if err := tx.Enqueue(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := b.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	b.handle(t, old[0]) // the stream redelivers history to the consumer
	fresh := paymentSucceeded("NEW1")
	fresh.CreatedAt = clock.Now()
	b.handle(t, fresh)
	if res := b.run(t); res.Delivered != 1 {
		t.Fatalf("run = %+v; want only the new result delivered", res)
	}
	if got := r.received(); len(got) != 1 || !strings.Contains(string(got[0].body), "NEW1") {
		t.Fatalf("received %d: want only NEW1", len(got))
	}

	// A restart keeps the subscriber's start.
	clock.Advance(time.Hour)
	svc, err := webhook.New(webhook.Config{Store: b.store, Clock: clock, AllowNetworks: loopback,
		Subscribers: []webhook.Subscriber{{URL: r.srv.URL + "/hooks/orderpay", Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	late := paymentSucceeded("NEW2")
	late.CreatedAt = t0.Add(90 * time.Minute) // after the first start, before this one
	if err := svc.Handle(ctx, late); err != nil {
		t.Fatal(err)
	}

	name := r.srv.URL + "/hooks/orderpay"
	if _, err := svc.Replay(ctx, "https://nobody.example/hooks", time.Time{}); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("replay to an unknown subscriber: %v", err)
	}
	n, err := svc.Replay(ctx, name, time.Time{})
	if err != nil || n != 2 {
		t.Fatalf("replay made %d deliveries, %v; want the two old payment results", n, err)
	}
	if n, err := svc.Replay(ctx, name, time.Time{}); err != nil || n != 0 {
		t.Fatalf("a second replay made %d, %v", n, err)
	}
	all, _ := b.store.Deliveries(ctx, webhook.Filter{}, 10)
	orders := map[string]bool{}
	for _, d := range all {
		orders[d.OrderNo] = true
	}
	if len(all) != 4 || !orders["OLD1"] || !orders["OLD2"] || !orders["NEW1"] || !orders["NEW2"] {
		t.Fatalf("deliveries %+v", all)
	}
}

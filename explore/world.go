package explore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
	"orderpay/chaos/audit"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/reconcile"
	"orderpay/sqlstore"
	"orderpay/webhook"
)

// Epoch is when every case starts: the virtual clock's first reading.
var Epoch = time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC)

// notifyBase is the address the channels are told to notify; nothing listens there: the
// simulator's notifications are caught (mailbox) and delivered by the notify operations.
const notifyBase = "https://orderpay.example"

// World is one case's system: a database, the simulated channels, and orderpay's services
// on them (one instance, or two on PostgreSQL), all on one virtual clock. Nothing in it
// runs on its own: no relay, no sweeper, no timer; the operations are the only movers.
type World struct {
	Engine  string
	DSN     string
	Profile Profile
	Clock   *clocktest.Clock
	Sim     *sim.Simulator
	// Channels are the real adapters, calling the simulator in-process through a transport
	// that marks each call and its answer as steps.
	Channels map[string]orderpay.Channel
	inst     [2]*Instance
	mail     *mailbox
	// Events are the messages the bus delivered (the auditor's I7 reads them).
	Events    []audit.Event
	orderSeq  int
	numberSeq int
	log       *slog.Logger
	// S is what the scene made: the order, its payment and attempt, and so on.
	S       *Subject
	fixture fixture
	dbName  string // PostgreSQL: the case's database
	// endSessions ends every connection to the case's database (PostgreSQL): a crash.
	endSessions func() error
	// lent are stores on DSN left open by the case before, whose connections the instances
	// opened take, in turn (sqlstore.Store.Renewed).
	lent []*sqlstore.Store
}

// Instance is one orderpay process: a store pool and the services on it.
type Instance struct {
	Store    *sqlstore.Store
	Payments *payment.Service
	Orders   *order.Service
	Apps     *apppay.Service
	Results  *apppay.Results
	Recon    *reconcile.Reconciler
	Webhooks *webhook.Service
}

// keys are made once per process: RSA keys take a while to generate.
var (
	keysOnce sync.Once
	keys     *sim.Keys
	keysErr  error
)

func simKeys() (*sim.Keys, error) {
	keysOnce.Do(func() { keys, keysErr = sim.GenerateKeys() })
	return keys, keysErr
}

// newWorld opens dsn (a database already migrated and stocked: fixture) and builds the
// system on it.
// lent are stores on dsn left open by a case before, whose connections the instances
// take in turn (sqlstore.Store.Renewed); each is closed if they cannot be.
func newWorld(ctx context.Context, engine, dsn string, p Profile, lent []*sqlstore.Store) (*World, error) {
	k, err := simKeys()
	if err != nil {
		closeAll(lent)
		return nil, err
	}
	w := &World{Engine: engine, DSN: dsn, Profile: p, Clock: clocktest.New(Epoch), mail: &mailbox{notes: map[string][]note{}},
		log: slog.New(slog.DiscardHandler), lent: lent}
	w.Sim, err = sim.New(sim.Config{Keys: k, Clock: w.Clock, TimeScale: 1e6, Logger: w.log,
		AlipayNotifySchedule: []time.Duration{}, WechatNotifySchedule: []time.Duration{},
		HTTPClient: &http.Client{Transport: w.mail}})
	if err != nil {
		w.Close()
		return nil, err
	}
	hc := &http.Client{Transport: stepTransport{next: handlerTransport{h: w.Sim.Handler()}}}
	acfg := alipay.Config{AppID: k.AppID, SellerID: k.SellerID, AppPrivateKeyPEM: must(k.AppPrivateKeyPEM()),
		AlipayPublicKeyPEM: must(k.AlipayPublicKeyPEM()), GatewayURL: "http://alipay.sim/gateway.do", HTTPClient: hc, Timeout: 10 * time.Second, Clock: w.Clock}
	if in := k.InApp; in != nil {
		acfg.InApp = &alipay.AppKeys{AppID: in.AppID, AppPrivateKeyPEM: must(in.AppPrivateKeyPEM()), AlipayPublicKeyPEM: must(in.AlipayPublicKeyPEM())}
	}
	ali, err := alipay.New(acfg)
	if err != nil {
		return nil, err
	}
	wk := &k.Wechat
	wx, err := wechat.New(wechat.Config{MchID: wk.MchID, AppID: wk.AppID, MerchantSerial: wk.MerchantSerial,
		MerchantPrivateKeyPEM: must(wk.MerchantPrivateKeyPEM()), PlatformPublicKeyPEM: must(wk.PlatformPublicKeyPEM()),
		PublicKeyID: wk.PublicKeyID, APIv3Key: wk.APIv3Key, BaseURL: "http://wechat.sim", HTTPClient: hc, Timeout: 10 * time.Second, Clock: w.Clock,
		JSAPIAppID: wk.JSAPIAppID, MiniAppID: wk.MiniAppID, AppAppID: wk.AppAppID, H5Domains: wk.H5Domains, JSAPIPaths: wk.JSAPIPaths})
	if err != nil {
		return nil, err
	}
	w.Channels = map[string]orderpay.Channel{orderpay.ChannelAlipay: ali, orderpay.ChannelWechat: wx}
	w.mail.channels = w.Channels
	if err := w.start(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// start opens the instances: one, and a second on PostgreSQL.
func (w *World) start(ctx context.Context) error {
	n := 1
	if w.Engine == "postgres" {
		n = 2
	}
	for i := range n {
		in, err := w.newInstance(ctx)
		if err != nil {
			return err
		}
		w.inst[i] = in
	}
	return nil
}

// Restart is a crash and a restart of every instance: what was in memory is gone (the
// services' and the stores' caches), what was committed stays.
func (w *World) Restart(ctx context.Context) error {
	if w.endSessions != nil {
		// The process is gone, and so are its connections: PostgreSQL rolls back what they
		// had open (a transaction begun on a context that cannot be cancelled, as the
		// recording of a refund's answer is, would otherwise hold its rows forever).
		if err := w.endSessions(); err != nil {
			return err
		}
	}
	w.closeInstances()
	return w.start(ctx)
}

func (w *World) closeInstances() {
	for i, in := range w.inst {
		if in != nil {
			if in.Store != nil {
				in.Store.Close()
			}
			w.inst[i] = nil
		}
	}
}

// Close ends the world.
func (w *World) Close() {
	closeAll(w.lent)
	w.lent = nil
	w.closeInstances()
	if w.Sim != nil {
		w.Sim.Close()
	}
}

// keep takes in's store out of in, for the next case (nil if in is nil): in's world
// closes without it.
func (in *Instance) keep() *sqlstore.Store {
	if in == nil {
		return nil
	}
	st := in.Store
	in.Store = nil
	return st
}

func closeAll(stores []*sqlstore.Store) {
	for _, st := range stores {
		st.Close()
	}
}

// In is instance i (0 or 1).
func (w *World) In(i int) *Instance { return w.inst[i] }

func (w *World) newInstance(ctx context.Context) (*Instance, error) {
	var st *sqlstore.Store
	var err error
	if len(w.lent) > 0 {
		lent := w.lent[0]
		w.lent = w.lent[1:]
		if st, err = lent.Renewed(ctx); err != nil {
			lent.Close()
		}
	}
	if st == nil {
		if st, err = sqlstore.Open(ctx, w.DSN); err != nil {
			return nil, err
		}
	}
	st.Alone() // no group commit, no background checkpoint: both run on the wall clock
	st.SetLogger(w.log)
	p := w.Profile
	in := &Instance{Store: st, Results: &apppay.Results{Logger: w.log}}
	in.Payments, err = payment.New(payment.Config{Store: st, Channels: w.Channels, Clock: w.Clock, Logger: w.log,
		NotifyURL: func(channel string) string { return notifyBase + "/notify/" + channel },
		ReturnURL: func(orderNo string) string { return notifyBase + "/pay/" + url.PathEscape(orderNo) },
		Results:   in.Results,
		RefundFinal: func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
			return in.Results.RefundFinal(ctx, tx, r, at, in.Orders.AfterSaleRefundFinal)
		},
		RefundRetryPlan: p.RefundRetry, CloseGrace: p.CloseGrace,
		BarcodeEnded: func(ctx context.Context, outTradeNo string) { in.Apps.SettleTill(ctx, outTradeNo) },
		Go:           func(fn func()) { fn() }})
	if err != nil {
		return nil, err
	}
	in.Orders, err = order.New(order.Config{Store: st, Payments: in.Payments, Clock: w.Clock, Logger: w.log, PayWindows: p.PayWindows,
		NewOrderNo: w.newOrderNo, AutoApproveRefundMax: p.AutoApproveMax})
	if err != nil {
		return nil, err
	}
	in.Apps, err = apppay.New(apppay.Config{Store: st, Payments: in.Payments, Orders: in.Orders, Clock: w.Clock, Logger: w.log,
		Channels: []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}, NewNumber: w.newNumber})
	if err != nil {
		return nil, err
	}
	in.Results.Orders, in.Results.Apps, in.Results.Refunds = in.Orders, in.Apps, in.Payments
	bills := map[string]orderpay.BillSource{}
	for name, ch := range w.Channels {
		if b, ok := ch.(orderpay.BillSource); ok {
			bills[name] = b
		}
	}
	in.Webhooks, err = webhook.New(webhook.Config{Store: st, Router: apppay.Router{S: in.Apps}, Workers: 1, Clock: w.Clock, Logger: w.log,
		Client:  &http.Client{Transport: stepTransport{next: handlerTransport{h: http.HandlerFunc(w.appEndpoint)}}},
		Confirm: func(ctx context.Context, msg orderpay.Message) error { return orderpay.ConfirmEvent(ctx, st, msg) }})
	if err != nil {
		return nil, err
	}
	if err := in.Webhooks.Start(ctx); err != nil {
		return nil, err
	}
	if in.Recon, err = reconcile.New(reconcile.Config{Store: st, Bills: bills, Payments: in.Payments, Clock: w.Clock, Logger: w.log}); err != nil {
		return nil, err
	}
	return in, nil
}

// newNumber numbers app payments and refunds in the order they are made: 20 characters
// after the prefix, as apppay's own.
func (w *World) newNumber(prefix string, now time.Time) string {
	w.numberSeq++
	return fmt.Sprintf("%s%s%06d", prefix, now.In(orderpay.ChinaTime).Format("20060102150405"), w.numberSeq)
}

// newOrderNo numbers orders in the order they are made: the same case, the same numbers.
func (w *World) newOrderNo(_ context.Context, now time.Time) (string, error) {
	w.orderSeq++
	return fmt.Sprintf("%s%012d", now.In(time.FixedZone("CST", 8*3600)).Format("20060102"), w.orderSeq), nil
}

// appEndpoint is the business app's webhook endpoint: it takes every delivery.
func (w *World) appEndpoint(rw http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	rw.WriteHeader(http.StatusNoContent)
}

// ---- the channels in-process ----

// handlerTransport answers a request with a handler, in-process: no socket, no goroutine.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	in := r.Clone(r.Context())
	in.RequestURI = r.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:9"
	if r.Body == nil {
		in.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	res := rec.Result()
	res.Request = r
	return res, nil
}

// stepTransport marks a channel call and its answer as steps.
type stepTransport struct{ next http.RoundTripper }

var longNumber = regexp.MustCompile(`[0-9]{6,}`)

func (t stepTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if orderpay.StepperOf(ctx) == nil {
		return t.next.RoundTrip(r)
	}
	label := callLabel(r)
	orderpay.Step(ctx, orderpay.StepCall, label)
	res, err := t.next.RoundTrip(r)
	orderpay.Step(ctx, orderpay.StepAnswer, label)
	if err != nil {
		orderpay.StepNote(ctx, "transport error")
	} else {
		orderpay.StepNote(ctx, fmt.Sprintf("HTTP %d", res.StatusCode))
	}
	return res, err
}

// callLabel names a call: Alipay's method, or WeChat's verb and path (numbers folded).
func callLabel(r *http.Request) string {
	if r.URL.Host == "app.example" {
		return "webhook POST " + r.URL.Path
	}
	if strings.Contains(r.URL.Host, "alipay") {
		m := r.URL.Query().Get("method")
		if m == "" && r.Body != nil && r.GetBody != nil {
			if b, err := r.GetBody(); err == nil {
				raw, _ := io.ReadAll(b)
				if q, err := url.ParseQuery(string(raw)); err == nil {
					m = q.Get("method")
				}
			}
		}
		return "alipay " + m
	}
	return "wechat " + r.Method + " " + longNumber.ReplaceAllString(r.URL.Path, "#")
}

// ---- notifications ----

// note is one notification the simulator sent.
type note struct {
	channel string
	header  http.Header
	body    []byte
}

// mailbox is the simulator's notification transport: it keeps each notification by the
// trade it names, answers 503 (the simulator gives up after one attempt), and the notify
// operations deliver them.
type mailbox struct {
	mu       sync.Mutex
	channels map[string]orderpay.Channel
	notes    map[string][]note // by out_trade_no
	order    []string          // trades in the order their first notification came
	taken    map[string]int    // notifications of a trade delivered so far
}

func (m *mailbox) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	channel := orderpay.ChannelAlipay
	if r.Header.Get("Wechatpay-Signature") != "" {
		channel = orderpay.ChannelWechat
	}
	m.mu.Lock()
	if !strings.Contains(r.URL.Path, "refund") {
		if trade := m.channels[channel].NotificationTrade(r.Header, body); trade != "" {
			if len(m.notes[trade]) == 0 {
				m.order = append(m.order, trade)
			}
			m.notes[trade] = append(m.notes[trade], note{channel: channel, header: r.Header.Clone(), body: body})
		}
	}
	m.mu.Unlock()
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(bytes.NewReader(nil)), Header: http.Header{}, Request: r}, nil
}

// wait returns the first notification of trade, waiting a while for the simulator's
// sender (it posts from a goroutine of its own).
func (m *mailbox) wait(trade string) (note, bool) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		m.mu.Lock()
		ns := m.notes[trade]
		m.mu.Unlock()
		if len(ns) > 0 {
			return ns[0], true
		}
		if time.Now().After(deadline) {
			return note{}, false
		}
		time.Sleep(time.Millisecond)
	}
}

// trades lists the trades notified so far, in the order they were first notified.
func (m *mailbox) trades() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.order...)
}

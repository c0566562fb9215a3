package wechat_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
	"orderpay/clocktest"
)

var cst = time.FixedZone("CST", 8*3600)

// env is the adapter talking to a real simulator over loopback. The simulated clock starts
// at the wall clock's time: the official SDK stamps and checks signatures with time.Now(),
// and the simulator signs with the wall clock too (Config.WechatWallClock's default), so
// moving the simulated clock never breaks the signatures.
type env struct {
	sim   *sim.Simulator
	srv   *httptest.Server
	keys  *sim.Keys
	clock *clocktest.Clock
	ch    *wechat.Channel
}

func setup(t *testing.T, mods ...func(*sim.Config)) *env {
	t.Helper()
	keys, _ := simtest.Keys(t)
	clock := clocktest.New(time.Now().Truncate(time.Second))
	cfg := sim.Config{
		Keys:      keys,
		Clock:     clock,
		TimeScale: 1e6,
		Logger:    slog.New(slog.DiscardHandler),
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &env{sim: s, srv: srv, keys: keys, clock: clock}
	e.ch = newChannel(t, keys, srv.URL, func(c *wechat.Config) { c.Clock = clock })
	return e
}

// certificateMode puts an adapter in platform certificate mode: no public key, the
// certificates are downloaded.
func certificateMode(c *wechat.Config) {
	c.Mode = wechat.ModePlatformCertificate
	c.PublicKeyID, c.PlatformPublicKeyPEM = "", ""
}

// simCertificateMode puts the simulated merchant in platform certificate mode.
func simCertificateMode(c *sim.Config) { c.WechatMode = sim.WechatModeCertificate }

// certSetup is setup with the simulator and the adapter (e.ch) in platform certificate mode;
// chMods configure the adapter further.
func certSetup(t *testing.T, simMod func(*sim.Config), chMods ...func(*wechat.Config)) *env {
	t.Helper()
	e := setup(t, func(c *sim.Config) {
		simCertificateMode(c)
		if simMod != nil {
			simMod(c)
		}
	})
	e.ch = newChannel(t, e.keys, e.srv.URL, append([]func(*wechat.Config){certificateMode, func(c *wechat.Config) { c.Clock = e.clock }}, chMods...)...)
	return e
}

func channelConfig(t *testing.T, keys *sim.Keys, baseURL string) wechat.Config {
	t.Helper()
	wk := &keys.Wechat
	return wechat.Config{
		MchID:                 wk.MchID,
		AppID:                 wk.AppID,
		MerchantSerial:        wk.MerchantSerial,
		MerchantPrivateKeyPEM: simtest.PEM(t, wk.MerchantPrivateKeyPEM),
		PlatformPublicKeyPEM:  simtest.PEM(t, wk.PlatformPublicKeyPEM),
		PublicKeyID:           wk.PublicKeyID,
		APIv3Key:              wk.APIv3Key,
		BaseURL:               baseURL,
		// Every method set up, as the channels file the simulator writes has it.
		JSAPIAppID:   wk.JSAPIAppID,
		MiniAppID:    wk.MiniAppID,
		AppAppID:     wk.AppAppID,
		H5Domains:    wk.H5Domains,
		JSAPIPaths:   wk.JSAPIPaths,
		OAuthSecret:  wk.OAuthSecret,
		OAuthBaseURL: baseURL,
	}
}

func newChannel(t *testing.T, keys *sim.Keys, baseURL string, mods ...func(*wechat.Config)) *wechat.Channel {
	t.Helper()
	cfg := channelConfig(t, keys, baseURL)
	for _, m := range mods {
		m(&cfg)
	}
	ch, err := wechat.New(cfg)
	if err != nil {
		t.Fatalf("wechat.New: %v", err)
	}
	return ch
}

var seq struct {
	sync.Mutex
	n int
}

// tradeNo returns a fresh out_trade_no.
func tradeNo(prefix string) string {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return prefix + "_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10) + "_" + strconv.Itoa(seq.n)
}

func (e *env) precreate(t *testing.T, outTradeNo string, amount int64, deadline time.Time, notifyURL string) orderpay.PrecreateResult {
	t.Helper()
	return e.ch.Precreate(context.Background(), orderpay.PrecreateRequest{
		OutTradeNo: outTradeNo,
		Amount:     amount,
		Subject:    "订单 " + outTradeNo,
		Deadline:   deadline,
		NotifyURL:  notifyURL,
	})
}

// accepted precreates and fails the test unless the answer is Accepted.
func (e *env) accepted(t *testing.T, outTradeNo string, amount int64, notifyURL string) orderpay.PrecreateResult {
	t.Helper()
	res := e.precreate(t, outTradeNo, amount, e.clock.Now().Add(time.Hour), notifyURL)
	if res.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("precreate %s: %+v", outTradeNo, res)
	}
	return res
}

// paid precreates and pays an order and returns its out_trade_no.
func (e *env) paid(t *testing.T, amount int64) string {
	t.Helper()
	no := tradeNo("P")
	res := e.accepted(t, no, amount, "")
	if _, err := e.sim.Pay(context.Background(), res.QRCode); err != nil {
		t.Fatal(err)
	}
	return no
}

func (e *env) ledger(t *testing.T, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, l := range e.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	t.Fatalf("%s is not in the ledger", outTradeNo)
	return sim.LedgerEntry{}
}

// delivery is one notification as the merchant received it.
type delivery struct {
	header http.Header
	body   []byte
}

// merchant is a notify endpoint: it verifies each notification with the adapter and
// answers with the adapter's Ack when it verifies, 400 otherwise.
type merchant struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []delivery
	verified []*orderpay.Notification
	errs     []error
}

func newMerchant(t *testing.T, ch *wechat.Channel) *merchant {
	t.Helper()
	m := &merchant{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := ch.VerifyNotification(r.Context(), r.Header, body)
		m.mu.Lock()
		m.got = append(m.got, delivery{r.Header.Clone(), body})
		m.verified = append(m.verified, n)
		m.errs = append(m.errs, err)
		m.mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":"FAIL","message":"失败"}`)
			return
		}
		ack := ch.Ack()
		if ack.ContentType != "" {
			w.Header().Set("Content-Type", ack.ContentType)
		}
		w.WriteHeader(ack.Status)
		_, _ = w.Write(ack.Body)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// wait returns the first n deliveries with their verification results.
func (m *merchant) wait(t *testing.T, n int) ([]delivery, []*orderpay.Notification, []error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		if len(m.got) >= n {
			defer m.mu.Unlock()
			return append([]delivery(nil), m.got[:n]...), append([]*orderpay.Notification(nil), m.verified[:n]...),
				append([]error(nil), m.errs[:n]...)
		}
		m.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no %d notifications arrived", n)
	return nil, nil, nil
}

package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/clocktest"
)

var cst = time.FixedZone("CST", 8*3600)

func testKeys(t *testing.T) *sim.Keys {
	keys, _ := simtest.Keys(t)
	return keys
}

func newManualClock() *clocktest.Clock {
	return clocktest.New(time.Date(2025, 3, 14, 10, 0, 0, 0, cst))
}

// bundle is a running simulator with an Alipay SDK client pointed at it.
type bundle struct {
	sim    *sim.Simulator
	srv    *httptest.Server
	clock  *clocktest.Clock
	keys   *sim.Keys
	client *alipay.Client
}

func (b *bundle) gatewayURL() string { return b.srv.URL + "/gateway.do" }

// setup starts a simulator with cfg (Keys, Clock and Logger filled in when empty) behind an
// httptest server, both closed when the test ends.
func setup(t *testing.T, cfg sim.Config) *bundle {
	t.Helper()
	keys := testKeys(t)
	clock := newManualClock()
	if cfg.Keys == nil {
		cfg.Keys = keys
	}
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	b := &bundle{sim: s, srv: srv, clock: clock, keys: keys}
	b.client = sdkClient(t, keys.AppID, simtest.PEM(t, keys.AppPrivateKeyPEM), simtest.PEM(t, keys.AlipayPublicKeyPEM), b.gatewayURL())
	return b
}

func sdkClient(t *testing.T, appID, appPrivPEM, alipayPubPEM, gateway string) *alipay.Client {
	t.Helper()
	c, err := alipay.New(appID, appPrivPEM, false, alipay.WithSandboxGateway(gateway), alipay.WithTimeLocation(cst))
	if err != nil {
		t.Fatalf("alipay.New: %v", err)
	}
	if err := c.LoadAliPayPublicKey(alipayPubPEM); err != nil {
		t.Fatalf("LoadAliPayPublicKey: %v", err)
	}
	return c
}

// precreate calls alipay.trade.precreate through the SDK and fails the test unless the
// answer is a verified 10000 with a QR code.
func (b *bundle) precreate(t *testing.T, outTradeNo, amount string, deadline time.Time, notifyURL string) string {
	t.Helper()
	rsp, err := b.client.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		NotifyURL:   notifyURL,
		Subject:     "order " + outTradeNo,
		OutTradeNo:  outTradeNo,
		TotalAmount: amount,
		ProductCode: "FACE_TO_FACE_PAYMENT",
		TimeExpire:  deadline.In(cst).Format("2006-01-02 15:04:05"),
	}})
	if err != nil {
		t.Fatalf("precreate %s: %v", outTradeNo, err)
	}
	if rsp.Code != alipay.CodeSuccess || !strings.HasPrefix(rsp.QRCode, "https://qr.alipay.com/bax") {
		t.Fatalf("precreate %s: got %+v", outTradeNo, rsp)
	}
	return rsp.QRCode
}

func (b *bundle) query(t *testing.T, outTradeNo string) *alipay.TradeQueryRsp {
	t.Helper()
	rsp, err := b.client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: outTradeNo})
	if err != nil {
		t.Fatalf("query %s: %v", outTradeNo, err)
	}
	return rsp
}

// rawCall posts params to the gateway exactly as given (the caller signs or not), checks
// that the answer's signature verifies over the raw text of its node, and returns the
// node name and the decoded node.
func rawCall(t *testing.T, b *bundle, params url.Values) (string, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(b.gatewayURL(), params)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gateway status %d: %s", resp.StatusCode, body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("gateway body %q: %v", body, err)
	}
	var sig string
	if err := json.Unmarshal(top["sign"], &sig); err != nil || sig == "" {
		t.Fatalf("gateway answer is not signed: %s", body)
	}
	for name, raw := range top {
		if name == "sign" || name == "alipay_cert_sn" {
			continue
		}
		if err := sim.VerifySHA256RSA(b.keys.AlipayPublicKey, raw, sig); err != nil {
			t.Fatalf("answer signature does not verify over the raw node %s: %v", name, err)
		}
		var node map[string]any
		if err := json.Unmarshal(raw, &node); err != nil {
			t.Fatal(err)
		}
		return name, node
	}
	t.Fatalf("gateway answer has no node: %s", body)
	return "", nil
}

// signedParams returns the common parameters of a gateway call for method and biz, signed
// with key per §A1.
func signedParams(t *testing.T, b *bundle, method, biz string, sign func(content string) string) url.Values {
	t.Helper()
	v := url.Values{
		"app_id":      {b.keys.AppID},
		"method":      {method},
		"format":      {"JSON"},
		"charset":     {"utf-8"},
		"sign_type":   {"RSA2"},
		"timestamp":   {b.clock.Now().In(cst).Format("2006-01-02 15:04:05")},
		"version":     {"1.0"},
		"biz_content": {biz},
	}
	content, err := sim.AlipaySignContent(v, "sign")
	if err != nil {
		t.Fatal(err)
	}
	v.Set("sign", sign(content))
	return v
}

func signWith(t *testing.T, b *bundle) func(string) string {
	return func(content string) string {
		sig, err := sim.SignSHA256RSA(b.keys.AppPrivateKey, []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
}

// notifyReceiver is a merchant notify endpoint that records every attempt and answers
// with the scripted replies in turn (the last one repeats).
type notifyReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []string
	replies []reply
}

type reply struct {
	status int
	body   string
}

func newNotifyReceiver(t *testing.T, replies ...reply) *notifyReceiver {
	t.Helper()
	r := &notifyReceiver{replies: replies}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.bodies)
		r.bodies = append(r.bodies, string(body))
		rep := r.replies[min(n, len(r.replies)-1)]
		r.mu.Unlock()
		w.WriteHeader(rep.status)
		_, _ = io.Copy(w, bytes.NewReader([]byte(rep.body)))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *notifyReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// waitNotify waits until the payment notification for outTradeNo is settled and returns
// its record.
func waitNotify(t *testing.T, s *sim.Simulator, outTradeNo string) sim.NotifyStats {
	t.Helper()
	return waitNotifyOf(t, s, outTradeNo, "")
}

// waitNotifyOf waits until the notification of refund outRefundNo of outTradeNo (of the
// payment if outRefundNo is "") is settled and returns its record.
func waitNotifyOf(t *testing.T, s *sim.Simulator, outTradeNo, outRefundNo string) sim.NotifyStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, st := range s.NotifyStats() {
			if st.OutTradeNo == outTradeNo && st.OutRefundNo == outRefundNo && st.Done() {
				return st
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("notification for %s %s not settled in time: %+v", outTradeNo, outRefundNo, s.NotifyStats())
	return sim.NotifyStats{}
}

package sim_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay/channel/sim"
	"orderpay/clocktest"
)

// wxBundle is a running simulator spoken to in raw WeChat Pay v3 HTTP: requests are signed
// here, at the time of wallClock, and answers verified here, so that tests control every
// byte and every timestamp. wallClock is the simulator's Config.WechatWallClock (WeChat's
// own clock, for signatures and bill URLs), moved by hand like the simulated clock.
type wxBundle struct {
	*bundle
	wk        *sim.WechatKeys
	wallClock *clocktest.Clock
}

// wxSetup starts a simulator (see setup) whose WeChat wall clock is a hand-moved clock of
// its own, starting at the simulated time.
func wxSetup(t *testing.T, cfg sim.Config) *wxBundle {
	t.Helper()
	wallClock := newManualClock()
	if cfg.WechatWallClock == nil {
		cfg.WechatWallClock = wallClock
	}
	b := setup(t, cfg)
	return &wxBundle{bundle: b, wk: &b.keys.Wechat, wallClock: wallClock}
}

// wxAnswer is one raw answer.
type wxAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a wxAnswer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d %q is not a JSON object: %v", a.status, a.body, err)
	}
	return m
}

// code is the error code of an error answer.
func (a wxAnswer) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(a.body, &e)
	return e.Code
}

func (a wxAnswer) String() string { return fmt.Sprintf("%d %s", a.status, a.body) }

// wxRequest describes one call; sign changes how it is signed.
type wxRequest struct {
	method, uri, body string
	// signKey, mchID, serial and at override the merchant's key, mchid, serial and the
	// wallClock's time; signedURI and signedBody sign something other than what is sent.
	signKey    *rsa.PrivateKey
	mchID      string
	serial     string
	at         time.Time
	signedURI  *string
	signedBody *string
	noAuth     bool
	header     http.Header
}

// authorization builds the WECHATPAY2-SHA256-RSA2048 header for r (§B3).
func (b *wxBundle) authorization(t *testing.T, r wxRequest) string {
	t.Helper()
	key, mchID, serial, at := b.wk.MerchantPrivateKey, b.wk.MchID, b.wk.MerchantSerial, b.wallClock.Now()
	if r.signKey != nil {
		key = r.signKey
	}
	if r.mchID != "" {
		mchID = r.mchID
	}
	if r.serial != "" {
		serial = r.serial
	}
	if !r.at.IsZero() {
		at = r.at
	}
	uri, body := r.uri, r.body
	if r.signedURI != nil {
		uri = *r.signedURI
	}
	if r.signedBody != nil {
		body = *r.signedBody
	}
	nonce := strings.Repeat("n", 16) + strconv.FormatInt(time.Now().UnixNano()%1e16, 10)
	ts := strconv.FormatInt(at.Unix(), 10)
	sig, err := sim.SignSHA256RSA(key, []byte(r.method+"\n"+uri+"\n"+ts+"\n"+nonce+"\n"+body+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`WECHATPAY2-SHA256-RSA2048 mchid="%s",nonce_str="%s",timestamp="%s",serial_no="%s",signature="%s"`,
		mchID, nonce, ts, serial, sig)
}

// do sends r and returns the answer as it came.
func (b *wxBundle) do(t *testing.T, r wxRequest) wxAnswer {
	t.Helper()
	return b.doURL(t, b.srv.URL+r.uri, r)
}

func (b *wxBundle) doURL(t *testing.T, url string, r wxRequest) wxAnswer {
	t.Helper()
	a, err := b.tryURL(t, url, r, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// try sends r with client and returns the transport error instead of failing the test.
func (b *wxBundle) try(t *testing.T, r wxRequest, client *http.Client) (wxAnswer, error) {
	t.Helper()
	return b.tryURL(t, b.srv.URL+r.uri, r, client)
}

func (b *wxBundle) tryURL(t *testing.T, url string, r wxRequest, client *http.Client) (wxAnswer, error) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if !r.noAuth {
		req.Header.Set("Authorization", b.authorization(t, r))
	}
	resp, err := client.Do(req)
	if err != nil {
		return wxAnswer{}, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return wxAnswer{}, err
	}
	return wxAnswer{status: resp.StatusCode, header: resp.Header, body: got}, nil
}

// call sends a correctly signed request and, for a 2xx, fails the test unless the answer
// is signed by the platform key over its exact body.
func (b *wxBundle) call(t *testing.T, method, uri, body string) wxAnswer {
	t.Helper()
	a := b.do(t, wxRequest{method: method, uri: uri, body: body})
	if a.status >= 200 && a.status <= 299 {
		if err := b.verifyAnswer(a); err != nil {
			t.Fatalf("%s %s answered %s, not correctly signed: %v", method, uri, a, err)
		}
	}
	return a
}

// verifyAnswer checks an answer's (or a notification's) signature headers as a merchant
// would: the platform public key over "timestamp\nnonce\nbody\n", the public key id as
// serial, and the timestamp within 5 minutes of WeChat's wall clock.
func (b *wxBundle) verifyAnswer(a wxAnswer) error {
	return verifyWechatSignature(b.wk, a.header, a.body, b.wallClock.Now())
}

func verifyWechatSignature(wk *sim.WechatKeys, h http.Header, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(h.Get("Wechatpay-Timestamp"), 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("no Wechatpay-Timestamp")
	case h.Get("Wechatpay-Serial") != wk.PublicKeyID:
		return fmt.Errorf("Wechatpay-Serial %q, want the public key id", h.Get("Wechatpay-Serial"))
	case h.Get("Wechatpay-Signature-Type") != "WECHATPAY2-SHA256-RSA2048":
		return fmt.Errorf("Wechatpay-Signature-Type %q", h.Get("Wechatpay-Signature-Type"))
	case h.Get("Wechatpay-Nonce") == "":
		return fmt.Errorf("no Wechatpay-Nonce")
	case now.Sub(time.Unix(ts, 0)).Abs() >= 5*time.Minute:
		return fmt.Errorf("stale timestamp %d", ts)
	}
	msg := h.Get("Wechatpay-Timestamp") + "\n" + h.Get("Wechatpay-Nonce") + "\n" + string(body) + "\n"
	return sim.VerifySHA256RSA(wk.PlatformPublicKey, []byte(msg), h.Get("Wechatpay-Signature"))
}

// prepayBody is a Native prepay body for this merchant.
func (b *wxBundle) prepayBody(outTradeNo string, total int64, expire time.Time, notifyURL string) string {
	m := map[string]any{
		"appid":        b.wk.AppID,
		"mchid":        b.wk.MchID,
		"description":  "订单 " + outTradeNo,
		"out_trade_no": outTradeNo,
		"notify_url":   notifyURL,
		"amount":       map[string]any{"total": total, "currency": "CNY"},
	}
	if !expire.IsZero() {
		m["time_expire"] = expire.In(cst).Format(time.RFC3339)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// prepay places an order and returns its code_url, failing the test unless it is a signed
// 200.
func (b *wxBundle) prepay(t *testing.T, outTradeNo string, total int64, expire time.Time, notifyURL string) string {
	t.Helper()
	a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody(outTradeNo, total, expire, notifyURL))
	if a.status != http.StatusOK {
		t.Fatalf("prepay %s: %s", outTradeNo, a)
	}
	code, _ := a.json(t)["code_url"].(string)
	if !strings.HasPrefix(code, "weixin://wxpay/bizpayurl?pr=") {
		t.Fatalf("prepay %s: code_url %q", outTradeNo, code)
	}
	return code
}

// paid prepays and pays an order of total fen, and returns its code.
func (b *wxBundle) paid(t *testing.T, outTradeNo string, total int64) string {
	t.Helper()
	code := b.prepay(t, outTradeNo, total, b.clock.Now().Add(time.Hour), "")
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatalf("pay %s: %v", outTradeNo, err)
	}
	return code
}

func (b *wxBundle) query(t *testing.T, outTradeNo string) wxAnswer {
	t.Helper()
	return b.call(t, http.MethodGet, "/v3/pay/transactions/out-trade-no/"+outTradeNo+"?mchid="+b.wk.MchID, "")
}

// tradeState queries an order and returns its trade_state, failing unless it is a 200.
func (b *wxBundle) tradeState(t *testing.T, outTradeNo string) string {
	t.Helper()
	a := b.query(t, outTradeNo)
	if a.status != http.StatusOK {
		t.Fatalf("query %s: %s", outTradeNo, a)
	}
	s, _ := a.json(t)["trade_state"].(string)
	return s
}

func (b *wxBundle) close(t *testing.T, outTradeNo string) wxAnswer {
	t.Helper()
	return b.call(t, http.MethodPost, "/v3/pay/transactions/out-trade-no/"+outTradeNo+"/close", `{"mchid":"`+b.wk.MchID+`"}`)
}

func wxRefundBody(outTradeNo, outRefundNo string, refund, total int64) string {
	return fmt.Sprintf(`{"out_trade_no":%q,"out_refund_no":%q,"reason":"退货","amount":{"refund":%d,"total":%d,"currency":"CNY"}}`,
		outTradeNo, outRefundNo, refund, total)
}

func (b *wxBundle) refund(t *testing.T, outTradeNo, outRefundNo string, refund, total int64) wxAnswer {
	t.Helper()
	return b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", wxRefundBody(outTradeNo, outRefundNo, refund, total))
}

func (b *wxBundle) refundQuery(t *testing.T, outRefundNo string) wxAnswer {
	t.Helper()
	return b.call(t, http.MethodGet, "/v3/refund/domestic/refunds/"+outRefundNo, "")
}

// wxEntry returns the ledger entry of a WeChat order.
func wxEntry(t *testing.T, s *sim.Simulator, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, e := range s.Ledger() {
		if e.Channel == "wechat" && e.OutTradeNo == outTradeNo {
			return e
		}
	}
	t.Fatalf("%s is not in the ledger", outTradeNo)
	return sim.LedgerEntry{}
}

func wantWxError(t *testing.T, what string, a wxAnswer, status int, code string) {
	t.Helper()
	// WeChat Pay signs its answer to every request it authenticated, refusals included;
	// a 401 (not authenticated), a frequency limit and a system error carry no signature.
	wantWxErrorSigned(t, what, a, status, code, status != http.StatusUnauthorized && status != http.StatusTooManyRequests && status < 500)
}

// wantWxErrorSigned is wantWxError for an endpoint that never signs its answers (the bill
// download) or always does.
func wantWxErrorSigned(t *testing.T, what string, a wxAnswer, status int, code string, want bool) {
	t.Helper()
	if a.status != status || a.code() != code {
		t.Fatalf("%s: %s, want %d %s", what, a, status, code)
	}
	if signed := a.header.Get("Wechatpay-Signature") != ""; signed != want {
		t.Errorf("%s: a %d answer signed %v, want %v", what, status, signed, want)
	}
	if a.header.Get("Request-Id") == "" {
		t.Errorf("%s: no Request-ID", what)
	}
}

// wxReceiver is a merchant notify endpoint answering the scripted statuses in turn (the
// last one repeats) and recording every delivery with its headers.
type wxReceiver struct {
	url     string
	mu      sync.Mutex
	got     []wxAnswer
	replies []reply
}

func newWxReceiver(t *testing.T, replies ...reply) *wxReceiver {
	t.Helper()
	r := &wxReceiver{replies: replies}
	srv := wxServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, wxAnswer{status: 0, header: req.Header.Clone(), body: body})
		rep := r.replies[min(n, len(r.replies)-1)]
		r.mu.Unlock()
		w.WriteHeader(rep.status)
		_, _ = io.Copy(w, bytes.NewReader([]byte(rep.body)))
	}))
	r.url = srv.URL + "/notify/wechat"
	return r
}

func (r *wxReceiver) received() []wxAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wxAnswer(nil), r.got...)
}

// wxServer starts an httptest server closed when the test ends.
func wxServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

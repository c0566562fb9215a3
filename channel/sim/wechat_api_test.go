package sim_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderpay/channel/sim"
)

func TestWechatAuth_RefusesEveryRequestThatIsNotTheMerchantsOwn(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	forger := b.keys.AlipayPrivateKey // a key WeChat does not know as the merchant's
	body := b.prepayBody("AUTH_001", 100, time.Time{}, "")
	otherURI := "/v3/pay/transactions/native?x=1"
	otherBody := b.prepayBody("AUTH_001", 1, time.Time{}, "")
	prepay := func(r wxRequest) wxRequest {
		r.method, r.uri, r.body = http.MethodPost, "/v3/pay/transactions/native", body
		return r
	}
	cases := []struct {
		name string
		req  wxRequest
	}{
		{"no Authorization header", prepay(wxRequest{noAuth: true})},
		{"other scheme", prepay(wxRequest{noAuth: true, header: http.Header{"Authorization": {`WECHATPAY2-SHA256-RSA4096 mchid="1"`}}})},
		{"malformed parameters", prepay(wxRequest{noAuth: true, header: http.Header{"Authorization": {`WECHATPAY2-SHA256-RSA2048 mchid=1,nonce_str`}}})},
		{"signed with another key", prepay(wxRequest{signKey: forger})},
		{"another merchant's mchid", prepay(wxRequest{mchID: "1900000109"})},
		{"another certificate serial", prepay(wxRequest{serial: strings.Repeat("A", 40)})},
		{"timestamp 6 minutes old", prepay(wxRequest{at: b.wallClock.Now().Add(-6 * time.Minute)})},
		{"timestamp 6 minutes ahead", prepay(wxRequest{at: b.wallClock.Now().Add(6 * time.Minute)})},
		{"body changed after signing", prepay(wxRequest{signedBody: &otherBody})},
		{"URL changed after signing", prepay(wxRequest{signedURI: &otherURI})},
		{"query string changed after signing", wxRequest{method: http.MethodGet,
			uri: "/v3/pay/transactions/out-trade-no/AUTH_001?mchid=" + b.wk.MchID, signedURI: wxPtr("/v3/pay/transactions/out-trade-no/AUTH_001?mchid=1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantWxError(t, tc.name, b.do(t, tc.req), http.StatusUnauthorized, "SIGN_ERROR")
		})
	}
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("refused requests left orders: %+v", l)
	}
	// Within 5 minutes either way, the same request is the merchant's.
	for _, skew := range []time.Duration{-4*time.Minute - 50*time.Second, 4*time.Minute + 50*time.Second} {
		if a := b.do(t, prepay(wxRequest{at: b.wallClock.Now().Add(skew)})); a.status != http.StatusOK {
			t.Fatalf("timestamp %v off: %s, want 200", skew, a)
		}
	}
}

func wxPtr[T any](v T) *T { return &v }

// The simulator checks Authorization timestamps, and stamps its answers, with WeChat's wall
// clock, not the simulated business clock: the official SDK cannot follow a simulated
// clock.
func TestWechatAuth_TimestampsFollowWechatsWallClockNotTheSimulatedTime(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.clock.Advance(3 * time.Hour) // simulated time moves on; WeChat's wall clock does not
	a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody("CLOCK_01", 100, time.Time{}, ""))
	if a.status != http.StatusOK {
		t.Fatalf("prepay after moving the simulated clock: %s", a)
	}
	if got := a.header.Get("Wechatpay-Timestamp"); got != strconv.FormatInt(b.wallClock.Now().Unix(), 10) {
		t.Fatalf("Wechatpay-Timestamp %s, want the wall clock's %d", got, b.wallClock.Now().Unix())
	}
	b.wallClock.Advance(6 * time.Minute) // now the merchant's clock (ours) lags 6 minutes
	wantWxError(t, "merchant clock 6 minutes behind", b.do(t, wxRequest{method: http.MethodGet,
		uri: "/v3/pay/transactions/out-trade-no/CLOCK_01?mchid=" + b.wk.MchID, at: b.wallClock.Now().Add(-6 * time.Minute)}),
		http.StatusUnauthorized, "SIGN_ERROR")
}

func TestWechatAnswers_SignedOverTheExactBodyIncludingEmpty204s(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody("SIGN_001", 100, time.Time{}, ""))
	for _, h := range []string{"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Signature", "Wechatpay-Serial",
		"Wechatpay-Signature-Type", "Request-Id"} {
		if a.header.Get(h) == "" {
			t.Errorf("200 answer lacks %s", h)
		}
	}
	if len(a.header.Get("Wechatpay-Nonce")) != 32 {
		t.Errorf("nonce %q is not 32 characters", a.header.Get("Wechatpay-Nonce"))
	}
	// One byte of the body changed: the signature no longer holds.
	tampered := a
	tampered.body = []byte(strings.Replace(string(a.body), "weixin", "weixim", 1))
	if b.verifyAnswer(tampered) == nil {
		t.Fatal("the signature verified over a changed body")
	}

	c := b.close(t, "SIGN_001") // call verified the signature over the empty body
	if c.status != http.StatusNoContent || len(c.body) != 0 || c.header.Get("Wechatpay-Signature") == "" {
		t.Fatalf("close: %s with headers %v, want a signed, empty 204", c, c.header)
	}

	// Errors carry {"code","message"}; a refusal of a request whose signature verified is
	// signed too, over its exact body (a 401 is not: wantWxError checks both).
	e := b.call(t, http.MethodGet, "/v3/pay/transactions/out-trade-no/NOSUCH_01?mchid="+b.wk.MchID, "")
	wantWxError(t, "unknown order", e, http.StatusNotFound, "ORDER_NOT_EXIST")
	if m := e.json(t); m["message"] == "" {
		t.Errorf("error without message: %s", e)
	}
	if err := b.verifyAnswer(e); err != nil {
		t.Fatalf("the refusal's signature: %v", err)
	}
}

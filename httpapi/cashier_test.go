package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

// cashierChannel hands out a complete instruction of any method, remembers whom each
// attempt pays for, and answers queries as paid once the test says the buyer paid.
type cashierChannel struct {
	orderpay.Channel
	name string
	mu   sync.Mutex
	// payers and amounts by out_trade_no; paid the trades the buyer paid.
	payers  map[string]string
	amounts map[string]int64
	paid    map[string]bool
}

func newCashierChannel(name string) *cashierChannel {
	return &cashierChannel{name: name, payers: map[string]string{}, amounts: map[string]int64{}, paid: map[string]bool{}}
}

func (c *cashierChannel) Name() string { return c.name }

func (c *cashierChannel) Precreate(_ context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	c.mu.Lock()
	c.payers[req.OutTradeNo], c.amounts[req.OutTradeNo] = req.Payer, req.Amount
	c.mu.Unlock()
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeAccepted, QRExpiresAt: req.Deadline}
	no := req.OutTradeNo
	switch req.Method {
	case orderpay.MethodQR:
		res.QRCode = "https://qr.example/" + no
	case orderpay.MethodPC:
		res.Pay = orderpay.NewInstruction(c.name, req.Method, "url", "https://cashier.example/pc#"+no, "html", "<form></form>")
	case orderpay.MethodWAP, orderpay.MethodH5:
		res.Pay = orderpay.NewInstruction(c.name, req.Method, "url", "https://cashier.example/"+string(req.Method)+"#"+no)
	case orderpay.MethodInApp:
		res.Pay = orderpay.NewInstruction(c.name, req.Method, "trade_no", "T#"+no)
	case orderpay.MethodJSAPI:
		res.Pay = orderpay.NewInstruction(c.name, req.Method, "appId", "wxmp01", "timeStamp", "1", "nonceStr", "n",
			"package", "prepay_id=wx#"+no, "signType", "RSA", "paySign", "s")
	default:
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not offered here"}
	}
	return res
}

func (c *cashierChannel) Query(_ context.Context, outTradeNo string) orderpay.QueryResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paid[outTradeNo] {
		return orderpay.QueryResult{Outcome: orderpay.OutcomePaid, TradeNo: "T" + outTradeNo, Amount: c.amounts[outTradeNo], PaidAt: t0}
	}
	return orderpay.QueryResult{Outcome: orderpay.OutcomeNotPaid}
}

func (c *cashierChannel) payerOf(outTradeNo string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.payers[outTradeNo]
}

func (c *cashierChannel) pay(outTradeNo string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paid[outTradeNo] = true
}

// cashierAPI is the API with the single code on, a gateway login (--buyer-auth header, the
// gateway at 10.0.0.2) and both wallets' OAuth, whose codes the test hands out.
type cashierAPI struct {
	h        http.Handler
	clock    *clocktest.Clock
	store    orderpay.Store
	channels map[string]*cashierChannel
	// codes are the OAuth codes each wallet takes, to the identity they give; exchanges
	// counts the exchanges asked for.
	mu        sync.Mutex
	codes     map[string]string
	exchanges int
	down      bool // the wallets' OAuth does not answer
	orders    int
}

const (
	shopURL    = "https://shop.example"
	gatewayIP  = "10.0.0.2:4000"
	scannerIP  = "198.51.100.20:5000"
	wechatUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 MicroMessenger/8.0.49"
	alipayUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 AlipayClient/10.5.90"
	safariUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1"
	scanOpenID = "oSCANNER_mp_openid_0000000001"
	scanUserID = "2088000000000042"
)

func newCashierAPI(t *testing.T, limits RateLimits, configure ...func(*Server)) *cashierAPI {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	store := storetest.OpenSQLite(t)
	clock := clocktest.New(t0)
	a := &cashierAPI{clock: clock, store: store, codes: map[string]string{},
		channels: map[string]*cashierChannel{orderpay.ChannelAlipay: newCashierChannel(orderpay.ChannelAlipay), orderpay.ChannelWechat: newCashierChannel(orderpay.ChannelWechat)}}
	payments, err := payment.New(payment.Config{Store: store,
		Channels:  map[string]orderpay.Channel{orderpay.ChannelAlipay: a.channels[orderpay.ChannelAlipay], orderpay.ChannelWechat: a.channels[orderpay.ChannelWechat]},
		NotifyURL: func(string) string { return "http://127.0.0.1/notify/x" }, Clock: clock, Logger: log, PollGrace: time.Millisecond})
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
	proxies, err := buyerauth.ParseCIDRs("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeHeader, TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	oauth := func(wallet string) WalletOAuth {
		return WalletOAuth{
			AuthorizeURL: func(redirectURI, state string) (string, error) {
				return "https://oauth." + wallet + ".example/authorize?" + url.Values{"redirect_uri": {redirectURI}, "state": {state}}.Encode(), nil
			},
			Identity: func(_ context.Context, code string) (string, error) {
				a.mu.Lock()
				defer a.mu.Unlock()
				a.exchanges++
				if a.down {
					return "", fmt.Errorf("%s: connection refused", wallet)
				}
				id, ok := a.codes[code]
				if !ok {
					return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "code refused")
				}
				delete(a.codes, code)
				return id, nil
			},
		}
	}
	s := &Server{Orders: orders, Payments: payments, Clock: clock, Logger: log, RateLimits: limits, Buyers: gw, TrustedProxies: proxies,
		WalletAppID: func(string, orderpay.PayMethod) string { return "wxmp01" },
		Cashier: Cashier{Key: []byte("a test key of the cashier, 32 bytes!"), PublicURL: shopURL,
			OAuth: map[string]WalletOAuth{orderpay.ChannelWechat: oauth(orderpay.ChannelWechat), orderpay.ChannelAlipay: oauth(orderpay.ChannelAlipay)}}}
	for _, f := range configure {
		f(s)
	}
	a.h = s.Handler()
	return a
}

// giveCode makes an OAuth code that gives identity, once.
func (a *cashierAPI) giveCode(code, identity string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.codes[code] = identity
}

// req is one request through the API.
type req struct {
	method, path, body string
	buyer              string // through the gateway, as this signed-in buyer
	ua                 string
	cookies            []*http.Cookie
}

func (a *cashierAPI) do(r req) *httptest.ResponseRecorder {
	hr := httptest.NewRequest(cmpOr(r.method, "GET"), r.path, strings.NewReader(r.body))
	hr.RemoteAddr = scannerIP
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.buyer != "" {
		hr.RemoteAddr = gatewayIP
		hr.Header.Set("X-Buyer-Id", r.buyer)
	}
	hr.Header.Set("User-Agent", r.ua)
	for _, c := range r.cookies {
		hr.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, hr)
	return rec
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newOrder is one pending order of alice's: the first of one tea, each next of one more
// (the same request again would be the first order, by the duplicate-submit guard).
func (a *cashierAPI) newOrder(t *testing.T) string {
	t.Helper()
	a.orders++
	body := fmt.Sprintf(`{"items":[{"sku":"tea","qty":%d}],"address":{"name":"Alice","phone":"13800138000","detail":"1 Secret Lane"}}`, a.orders)
	rec := a.do(req{method: "POST", path: "/v1/orders", body: body, buyer: "alice"})
	wantStatus(t, rec, http.StatusCreated)
	var o struct {
		OrderNo string `json:"order_no"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &o); err != nil {
		t.Fatal(err)
	}
	return o.OrderNo
}

// codeURL is the single code of alice's order no, as her pay page reads it.
func (a *cashierAPI) codeURL(t *testing.T, no string) *url.URL {
	t.Helper()
	rec := a.do(req{path: "/pay/" + no + "/code.png", buyer: "alice"})
	wantStatus(t, rec, http.StatusOK)
	if rec.Header().Get("Content-Type") != "image/png" || !strings.HasPrefix(rec.Body.String(), "\x89PNG") || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("code.png: %v, %d bytes", rec.Header(), rec.Body.Len())
	}
	u, err := url.Parse(rec.Header().Get("X-Orderpay-Code-URL"))
	if err != nil || u.Scheme+"://"+u.Host != shopURL || u.Path != "/pay/"+no+"/scan" || u.Query().Get("t") == "" {
		t.Fatalf("the code holds %q", rec.Header().Get("X-Orderpay-Code-URL"))
	}
	exp, err := time.Parse(time.RFC3339, rec.Header().Get("X-Orderpay-Code-Expires-At"))
	if err != nil || !exp.Equal(a.clock.Now().Add(CodeLifetime).Truncate(time.Second)) {
		t.Fatalf("the code expires at %q", rec.Header().Get("X-Orderpay-Code-Expires-At"))
	}
	return u
}

// wantError checks a JSON error answer, and that it set no cookie and sent nobody anywhere.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	var e errorBody
	if rec.Code != status || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != code {
		t.Fatalf("got %d %s; want %d %s", rec.Code, rec.Body, status, code)
	}
	if rec.Header().Get("Set-Cookie") != "" || rec.Header().Get("Location") != "" {
		t.Fatalf("a refused request stored or redirected: %v", rec.Header())
	}
}

// scan opens the code's URL in a browser of ua and follows the shop's own redirects: to
// the wallet's OAuth page (whose code the test gives back), then to the pay page. It
// returns the session cookie.
func (a *cashierAPI) scan(t *testing.T, code *url.URL, ua, oauthCode string) *http.Cookie {
	t.Helper()
	rec := a.do(req{path: code.RequestURI(), ua: ua})
	if rec.Code == http.StatusFound {
		to, _ := url.Parse(rec.Header().Get("Location"))
		back, err := url.Parse(to.Query().Get("redirect_uri"))
		if err != nil || !strings.HasPrefix(back.String(), shopURL+code.Path[:len(code.Path)-len("scan")]+"oauth/") {
			t.Fatalf("the OAuth page returns to %q", to.Query().Get("redirect_uri"))
		}
		q := url.Values{"state": {to.Query().Get("state")}}
		if oauthCode != "" {
			name := "code"
			if strings.HasSuffix(back.Path, "/alipay") {
				name = "auth_code"
			}
			q.Set(name, oauthCode)
		}
		rec = a.do(req{path: back.Path + "?" + q.Encode(), ua: ua})
	}
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != strings.TrimSuffix(code.Path, "/scan") {
		t.Fatalf("scanned: %d %v %s; want 303 to the pay page", rec.Code, rec.Header(), rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != scanCookie || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.MaxAge != int(ScanSessionLifetime/time.Second) ||
		c.Path != "/v1/orders/"+strings.TrimSuffix(strings.TrimPrefix(code.Path, "/pay/"), "/scan") {
		t.Fatalf("the session cookie %+v", c)
	}
	return c
}

// scanView is what the scanner's read answers.
type scanView struct {
	OrderNo     string `json:"order_no"`
	Status      string `json:"status"`
	Payable     int64  `json:"payable"`
	OpenAttempt *struct {
		Method string            `json:"method"`
		Pay    map[string]string `json:"pay"`
	} `json:"open_attempt"`
	Scan struct {
		Wallet     string `json:"wallet"`
		Identified bool   `json:"identified"`
	} `json:"scan"`
}

func (a *cashierAPI) read(t *testing.T, no string, c *http.Cookie) scanView {
	t.Helper()
	rec := a.do(req{path: "/v1/orders/" + no, cookies: []*http.Cookie{c}})
	wantStatus(t, rec, http.StatusOK)
	body := rec.Body.String()
	for _, private := range []string{"alice", "Secret Lane", "13800138000", "buyer_id", "address"} {
		if strings.Contains(body, private) {
			t.Fatalf("the scanner reads %q: %s", private, body)
		}
	}
	var v scanView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// payAs asks to pay order no with the session c; it returns the answer and the
// out_trade_no, which cashierChannel puts after a # in each instruction.
func (a *cashierAPI) payAs(no string, c *http.Cookie, body string) (*httptest.ResponseRecorder, string) {
	rec := a.do(req{method: "POST", path: "/v1/orders/" + no + "/pay", body: body, cookies: []*http.Cookie{c}, ua: safariUA})
	var p struct {
		Pay map[string]string `json:"pay"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	for _, f := range []string{"package", "trade_no", "url"} {
		if v := p.Pay[f]; v != "" {
			return rec, v[strings.LastIndex(v, "#")+1:]
		}
	}
	return rec, ""
}

// The pay page's single code is the order's own buyer's: a PNG of a URL on the shop's
// public address with a token for that order, valid CodeLifetime. Nobody else gets it,
// nor the buyer once the order is paid or cancelled, nor anyone when it is off.
func TestSingleCodeImage(t *testing.T) {
	a := newCashierAPI(t, RateLimits{})
	no := a.newOrder(t)
	a.codeURL(t, no)
	wantError(t, a.do(req{path: "/pay/" + no + "/code.png", buyer: "mallory"}), http.StatusNotFound, orderpay.ENOTFOUND)
	wantError(t, a.do(req{path: "/pay/" + no + "/code.png"}), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	wantStatus(t, a.do(req{method: "POST", path: "/v1/orders/" + no + "/cancel", buyer: "alice"}), http.StatusOK)
	wantError(t, a.do(req{path: "/pay/" + no + "/code.png", buyer: "alice"}), http.StatusConflict, orderpay.ECONFLICT)

	off := newCashierAPI(t, RateLimits{}, func(s *Server) { s.Cashier.Key = nil })
	no = off.newOrder(t)
	wantError(t, off.do(req{path: "/pay/" + no + "/code.png", buyer: "alice"}), http.StatusNotFound, orderpay.ENOTFOUND)
	wantError(t, off.do(req{path: "/pay/" + no + "/scan?t=x", ua: wechatUA}), http.StatusNotFound, orderpay.ENOTFOUND)
}

// A code whose token does not verify (altered, another order's, expired, none) opens
// nothing: 403, no cookie, no redirect, no call to a wallet. So does an OAuth return whose
// state does not verify for that order and wallet, or comes too late.
func TestScanRefusesWhatDoesNotVerify(t *testing.T) {
	a := newCashierAPI(t, RateLimits{})
	no, other := a.newOrder(t), a.newOrder(t)
	code := a.codeURL(t, no)
	tok := code.Query().Get("t")
	altered := tok[:len(tok)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(tok, "A")]
	for name, path := range map[string]string{
		"altered":         "/pay/" + no + "/scan?t=" + altered,
		"another order's": "/pay/" + other + "/scan?t=" + tok,
		"none":            "/pay/" + no + "/scan",
		"garbage":         "/pay/" + no + "/scan?t=zzzzzzzzzzzzzzzzzz.%00",
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.do(req{path: path, ua: wechatUA})
			if name == "garbage" {
				wantError(t, rec, http.StatusBadRequest, orderpay.EINVALID)
				return
			}
			wantError(t, rec, http.StatusForbidden, orderpay.EFORBIDDEN)
		})
	}
	rec := a.do(req{path: code.RequestURI(), ua: wechatUA})
	if rec.Code != http.StatusFound {
		t.Fatalf("a good code inside WeChat: %d", rec.Code)
	}
	to, _ := url.Parse(rec.Header().Get("Location"))
	back, _ := url.Parse(to.Query().Get("redirect_uri"))
	state := to.Query().Get("state")
	alteredState := state[:len(state)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(state, "A")]
	a.giveCode("good", scanOpenID)
	for name, path := range map[string]string{
		"altered state":      back.Path + "?code=good&state=" + url.QueryEscape(alteredState),
		"another order":      "/pay/" + other + "/oauth/wechat?code=good&state=" + url.QueryEscape(state),
		"another wallet":     "/pay/" + no + "/oauth/alipay?auth_code=good&state=" + url.QueryEscape(state),
		"no state":           back.Path + "?code=good",
		"an unknown channel": "/pay/" + no + "/oauth/unionpay?code=good&state=" + url.QueryEscape(state),
	} {
		t.Run(name, func(t *testing.T) {
			want, code := http.StatusForbidden, orderpay.EFORBIDDEN
			if name == "an unknown channel" {
				want, code = http.StatusNotFound, orderpay.ENOTFOUND
			}
			wantError(t, a.do(req{path: path, ua: wechatUA}), want, code)
		})
	}
	a.clock.Advance(OAuthStateLifetime)
	wantError(t, a.do(req{path: back.Path + "?code=good&state=" + url.QueryEscape(state), ua: wechatUA}), http.StatusForbidden, orderpay.EFORBIDDEN)
	wantError(t, a.do(req{path: code.RequestURI(), ua: wechatUA}), http.StatusForbidden, orderpay.EFORBIDDEN) // the code expired too
	if a.exchanges != 0 {
		t.Fatalf("%d codes were exchanged for refused returns", a.exchanges)
	}
}

// Scanned inside WeChat: WeChat's OAuth vouches for the scanner's openid, and the session
// reads the order (the cashier's view, never the buyer's id or address) and pays it by
// JSAPI for that openid, whatever the gateway's login says (the scanner has none). The
// request never names the payer; a method needing an identity WeChat did not vouch for is
// 403; the session is worth nothing for another order, nor after ScanSessionLifetime.
func TestScanInsideWechatPaysByJSAPIForTheScanner(t *testing.T) {
	a := newCashierAPI(t, RateLimits{})
	no, other := a.newOrder(t), a.newOrder(t)
	a.giveCode("wx-code-1", scanOpenID)
	c := a.scan(t, a.codeURL(t, no), wechatUA, "wx-code-1")
	v := a.read(t, no, c)
	if v.OrderNo != no || v.Status != "PENDING_PAYMENT" || v.Payable != 1000 || v.Scan.Wallet != "wechat" || !v.Scan.Identified || v.OpenAttempt != nil {
		t.Fatalf("the scanner reads %+v", v)
	}
	rec, trade := a.payAs(no, c, `{"channel":"wechat","method":"jsapi"}`)
	wantStatus(t, rec, http.StatusOK)
	if got := a.channels["wechat"].payerOf(trade); got != scanOpenID {
		t.Fatalf("the JSAPI attempt %q pays for %q; want the scanner's openid", trade, got)
	}
	if v := a.read(t, no, c); v.OpenAttempt == nil || v.OpenAttempt.Method != "jsapi" || v.OpenAttempt.Pay["package"] == "" {
		t.Fatalf("opened again, the scanner's page reads %+v", v.OpenAttempt)
	}
	rec, _ = a.payAs(no, c, `{"channel":"wechat","method":"jsapi","openid":"oSOMEONE_else_entirely_00001"}`)
	wantError(t, rec, http.StatusBadRequest, orderpay.EINVALID)
	rec, _ = a.payAs(no, c, `{"channel":"alipay","method":"inapp"}`)
	wantError(t, rec, http.StatusForbidden, orderpay.EFORBIDDEN)
	rec, _ = a.payAs(no, c, `{"channel":"wechat","method":"mini"}`)
	wantError(t, rec, http.StatusForbidden, orderpay.EFORBIDDEN)

	// Not another order's: there the request is nobody's.
	wantError(t, a.do(req{path: "/v1/orders/" + other, cookies: []*http.Cookie{c}}), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	moved := *c
	moved.Path = "/v1/orders/" + other
	wantError(t, a.do(req{method: "POST", path: "/v1/orders/" + other + "/pay", body: `{"channel":"wechat","method":"jsapi"}`, cookies: []*http.Cookie{&moved}}),
		http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	// Nor anything but reading and paying.
	wantError(t, a.do(req{method: "POST", path: "/v1/orders/" + no + "/cancel", cookies: []*http.Cookie{c}}), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	// A cookie altered is nobody's.
	forged := *c
	forged.Value = strings.Replace(c.Value, c.Value[:8], "b3RoZXI.", 1)
	wantError(t, a.do(req{path: "/v1/orders/" + no, cookies: []*http.Cookie{&forged}}), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	// The buyer's own login still reads the whole order.
	own := a.do(req{path: "/v1/orders/" + no, buyer: "alice"})
	if wantStatus(t, own, http.StatusOK); !strings.Contains(own.Body.String(), "Secret Lane") {
		t.Fatalf("the buyer's own read: %s", own.Body)
	}
	a.clock.Advance(ScanSessionLifetime)
	wantError(t, a.do(req{path: "/v1/orders/" + no, cookies: []*http.Cookie{c}}), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
}

// The scanner's page polls the order; its read asks the channel, as the buyer's own does,
// so the order turns PAID on the channel's word alone.
func TestScannerReadAsksTheChannel(t *testing.T) {
	a := newCashierAPI(t, RateLimits{})
	no := a.newOrder(t)
	a.giveCode("ali-code-1", scanUserID)
	c := a.scan(t, a.codeURL(t, no), alipayUA, "ali-code-1")
	if v := a.read(t, no, c); v.Scan.Wallet != "alipay" || !v.Scan.Identified {
		t.Fatalf("the scanner reads %+v", v)
	}
	rec, trade := a.payAs(no, c, `{"channel":"alipay","method":"inapp"}`)
	wantStatus(t, rec, http.StatusOK)
	if got := a.channels["alipay"].payerOf(trade); got != scanUserID {
		t.Fatalf("the in-app trade %q is for %q; want the scanner's user id", trade, got)
	}
	a.channels["alipay"].pay(trade)
	for i := 0; i < 5 && a.read(t, no, c).Status != "PAID"; i++ {
		a.clock.Advance(2 * time.Second)
	}
	if v := a.read(t, no, c); v.Status != "PAID" || v.OpenAttempt != nil {
		t.Fatalf("after the channel says paid, the scanner reads %+v", v)
	}
}

// Without a vouched identity (Alipay's OAuth came back without a code, the buyer said no;
// or another browser scanned), the session pays by the methods that need none: WAP, H5.
func TestScanWithoutAnIdentityPaysByTheOtherMethods(t *testing.T) {
	a := newCashierAPI(t, RateLimits{})
	for _, tc := range []struct {
		ua, wallet string
		good, bad  string
	}{
		{alipayUA, "alipay", `{"channel":"alipay","method":"wap"}`, `{"channel":"alipay","method":"inapp"}`},
		{safariUA, "", `{"channel":"wechat","method":"h5"}`, `{"channel":"wechat","method":"jsapi"}`},
	} {
		no := a.newOrder(t)
		c := a.scan(t, a.codeURL(t, no), tc.ua, "")
		if v := a.read(t, no, c); v.Scan.Wallet != tc.wallet || v.Scan.Identified {
			t.Fatalf("%s: the scanner reads %+v", tc.ua, v)
		}
		rec, _ := a.payAs(no, c, tc.good)
		wantStatus(t, rec, http.StatusOK)
		rec, _ = a.payAs(no, c, tc.bad)
		wantError(t, rec, http.StatusForbidden, orderpay.EFORBIDDEN)
	}
}

// A code the wallet refuses is 401, a wallet that does not answer 503: no session either
// way. The exchanges an OAuth return may cause are bounded by the buyers' write limits,
// per order: past them 429, and the wallet is not asked.
func TestOAuthReturnFailuresAndBounds(t *testing.T) {
	a := newCashierAPI(t, RateLimits{PerBuyer: Limit{Rate: 1, Burst: 2}})
	no := a.newOrder(t)
	code := a.codeURL(t, no)
	returnWith := func(oauthCode string) *httptest.ResponseRecorder {
		rec := a.do(req{path: code.RequestURI(), ua: wechatUA})
		to, _ := url.Parse(rec.Header().Get("Location"))
		back, _ := url.Parse(to.Query().Get("redirect_uri"))
		return a.do(req{path: back.Path + "?code=" + oauthCode + "&state=" + url.QueryEscape(to.Query().Get("state")), ua: wechatUA})
	}
	wantError(t, returnWith("never-given"), http.StatusUnauthorized, orderpay.EUNAUTHORIZED)
	a.mu.Lock()
	a.down = true
	a.mu.Unlock()
	a.giveCode("fine", scanOpenID)
	wantError(t, returnWith("fine"), http.StatusServiceUnavailable, orderpay.EUNAVAILABLE)
	rec := returnWith("fine")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Set-Cookie") != "" {
		t.Fatalf("the third exchange in a second: %d %v", rec.Code, rec.Header())
	}
	if a.exchanges != 2 {
		t.Fatalf("the wallet was asked %d times; want 2", a.exchanges)
	}
}

package wechat_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
)

// The device each method's instruction is paid on, as a real buyer's would be: a page of the
// shop inside WeChat (JSAPI), a mini program, a phone's browser outside WeChat (H5, from the
// address the prepay named), the shop's app.
const (
	buyer        = "alice"
	buyerIP      = "203.0.113.7"
	shopPage     = "http://127.0.0.1:8080/pay/"
	wechatUA     = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) MicroMessenger/8.0.47"
	mobileUA     = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Safari/604.1"
	returnPrefix = "http://127.0.0.1:8080/pay/"
)

// methodRequest is a prepay of method for a fresh trade, with what that method needs.
func (e *env) methodRequest(method orderpay.PayMethod, no string, amount int64, deadline time.Time, notifyURL string) orderpay.PrecreateRequest {
	req := orderpay.PrecreateRequest{OutTradeNo: no, Amount: amount, Subject: "订单 " + no, Deadline: deadline, NotifyURL: notifyURL, Method: method}
	wk := &e.keys.Wechat
	switch method {
	case orderpay.MethodJSAPI:
		req.Payer = e.sim.IdentityOf(buyer, wk.JSAPIAppID).OpenID
	case orderpay.MethodMini:
		req.Payer = e.sim.IdentityOf(buyer, wk.MiniAppID).OpenID
	case orderpay.MethodH5:
		req.ClientIP, req.ReturnURL = buyerIP, returnPrefix+no+"?from=wechat"
	}
	return req
}

// device is how the buyer's device pays instruction pay of method: the page, user agent and
// address each method is paid from.
func device(pay *orderpay.PayInstruction, no string) sim.PayAs {
	a := sim.PayAs{Pay: pay, Buyer: buyer}
	switch pay.Method {
	case orderpay.MethodJSAPI:
		a.Referer, a.UserAgent = shopPage+no, wechatUA
	case orderpay.MethodMini:
		a.UserAgent = wechatUA + " miniProgram"
	case orderpay.MethodH5:
		a.Referer, a.UserAgent, a.ClientIP = shopPage+no, mobileUA, buyerIP
	}
	return a
}

var methods = []orderpay.PayMethod{orderpay.MethodJSAPI, orderpay.MethodMini, orderpay.MethodH5, orderpay.MethodApp}

// Every method, for a merchant in each mode: the instruction is whole (Check), lives as long
// as its prepay (2 h, an H5 link 5 min, never past the deadline), asking again for the same
// out_trade_no gives a fresh one while the first still pays; paid at the simulated client,
// the query says Paid and the notification verifies and says Paid; a partial and then a full
// refund succeed; an unpaid order of the method closes.
func TestMethods_PrepayPayQueryNotifyRefundAndCloseInEveryMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		sim     func(*sim.Config)
		adapter func(*wechat.Config)
	}{
		{"public_key", func(*sim.Config) {}, func(*wechat.Config) {}},
		{"platform_certificate", simCertificateMode, certificateMode},
	} {
		for _, method := range methods {
			t.Run(mode.name+"/"+string(method), func(t *testing.T) {
				t.Parallel()
				e := setup(t, mode.sim)
				e.ch = newChannel(t, e.keys, e.srv.URL, mode.adapter, func(c *wechat.Config) { c.Clock = e.clock })
				testMethodStory(t, e, method)
			})
		}
	}
}

func testMethodStory(t *testing.T, e *env, method orderpay.PayMethod) {
	ctx := context.Background()
	m := newMerchant(t, e.ch)
	no := tradeNo(strings.ToUpper(string(method)))
	start := e.clock.Now()
	deadline := start.Add(3 * time.Hour)
	req := e.methodRequest(method, no, 2990, deadline, m.srv.URL+"/notify/wechat")

	first := e.ch.Precreate(ctx, req)
	if first.Outcome != orderpay.OutcomeAccepted || first.Pay == nil {
		t.Fatalf("prepay: %+v", first)
	}
	if err := first.Pay.Check(); err != nil || first.Pay.Method != method || first.QRCode != "" {
		t.Fatalf("instruction %+v: %v", first.Pay, err)
	}
	lifetime := orderpay.WechatPrepayLifetime
	if method == orderpay.MethodH5 {
		lifetime = orderpay.WechatH5Lifetime
	}
	if !first.QRExpiresAt.Equal(start.Add(lifetime)) {
		t.Fatalf("QRExpiresAt %v, want the prepay's lifetime %v from %v", first.QRExpiresAt, lifetime, start)
	}
	checkInstruction(t, e, first.Pay, req)

	// Asked again (its instruction expired, say): a fresh instruction for the same order.
	again := e.ch.Precreate(ctx, req)
	if again.Outcome != orderpay.OutcomeAccepted || again.Pay.Check() != nil || prepayIDOf(again.Pay) == prepayIDOf(first.Pay) {
		t.Fatalf("asked again: %+v, want a fresh instruction beside %+v", again, first.Pay)
	}
	if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
		t.Fatalf("query before paying: %+v", q)
	}

	// The buyer pays the first one, which still works.
	e.clock.Advance(time.Minute)
	paid, err := e.sim.PayInstruction(ctx, device(first.Pay, no))
	if err != nil {
		t.Fatalf("the WeChat client refused a genuine %s instruction: %v", method, err)
	}
	if method == orderpay.MethodH5 && paid.ReturnURL != req.ReturnURL {
		t.Fatalf("after the H5 cashier the browser goes to %q, want %q", paid.ReturnURL, req.ReturnURL)
	}
	q := e.ch.Query(ctx, no)
	if q.Outcome != orderpay.OutcomePaid || q.Amount != 2990 || q.TradeNo != paid.TradeNo {
		t.Fatalf("query after paying: %+v", q)
	}
	_, ns, errs := m.wait(t, 1)
	if errs[0] != nil || ns[0].Outcome != orderpay.OutcomePaid || ns[0].OutTradeNo != no || ns[0].Amount != 2990 {
		t.Fatalf("notification: %+v, %v", ns[0], errs[0])
	}
	if _, err := e.sim.PayInstruction(ctx, device(again.Pay, no)); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("the second instruction of a paid order: %v, want ECONFLICT", err)
	}

	// Refunds: part, then the rest.
	for i, amount := range []int64{1000, 1990} {
		r := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: no + "R" + string(rune('1'+i)), Amount: amount, Total: 2990})
		if r.Outcome != orderpay.OutcomeRefunded || r.Amount != amount {
			t.Fatalf("refund %d of %d: %+v", i+1, amount, r)
		}
	}
	if l := e.ledger(t, no); l.Refunded != 2990 || l.Status != sim.WechatRefund {
		t.Fatalf("ledger after refunding in full: %+v", l)
	}

	// An unpaid order of the method closes.
	unpaid := tradeNo("C" + strings.ToUpper(string(method)))
	if res := e.ch.Precreate(ctx, e.methodRequest(method, unpaid, 500, deadline, "")); res.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("prepay of the order to close: %+v", res)
	} else if c := e.ch.Close(ctx, unpaid); c.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("close: %+v", c)
	} else if _, err := e.sim.PayInstruction(ctx, device(res.Pay, unpaid)); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("paying a closed order: %v, want ECONFLICT", err)
	}
}

// checkInstruction checks what the device is handed, field by field.
func checkInstruction(t *testing.T, e *env, p *orderpay.PayInstruction, req orderpay.PrecreateRequest) {
	t.Helper()
	wk := &e.keys.Wechat
	switch req.Method {
	case orderpay.MethodJSAPI, orderpay.MethodMini:
		appid := wk.JSAPIAppID
		if req.Method == orderpay.MethodMini {
			appid = wk.MiniAppID
		}
		msg := p.Field("appId") + "\n" + p.Field("timeStamp") + "\n" + p.Field("nonceStr") + "\n" + p.Field("package") + "\n"
		if p.Field("appId") != appid || !strings.HasPrefix(p.Field("package"), "prepay_id=wx") || p.Field("signType") != "RSA" ||
			sim.VerifySHA256RSA(wk.MerchantPublicKey, []byte(msg), p.Field("paySign")) != nil {
			t.Fatalf("%s instruction %+v: not signed over its four lines with the merchant key", req.Method, p.Fields)
		}
	case orderpay.MethodH5:
		u, err := url.Parse(p.Field("url"))
		if err != nil || u.Scheme != "https" || u.Query().Get("prepay_id") == "" || u.Query().Get("redirect_url") != req.ReturnURL ||
			!strings.HasSuffix(p.Field("url"), "&redirect_url="+url.QueryEscape(req.ReturnURL)) {
			t.Fatalf("h5 instruction %q: want the h5_url with &redirect_url= and the return address encoded", p.Field("url"))
		}
	case orderpay.MethodApp:
		msg := p.Field("appid") + "\n" + p.Field("timestamp") + "\n" + p.Field("noncestr") + "\n" + p.Field("prepayid") + "\n"
		if p.Field("appid") != wk.AppAppID || p.Field("partnerid") != wk.MchID || p.Field("package") != "Sign=WXPay" ||
			sim.VerifySHA256RSA(wk.MerchantPublicKey, []byte(msg), p.Field("sign")) != nil {
			t.Fatalf("app instruction %+v: not signed over its four lines with the merchant key", p.Fields)
		}
	}
}

// prepayIDOf is the prepay_id an instruction carries.
func prepayIDOf(p *orderpay.PayInstruction) string {
	switch p.Method {
	case orderpay.MethodH5:
		u, _ := url.Parse(p.Field("url"))
		return u.Query().Get("prepay_id")
	case orderpay.MethodApp:
		return p.Field("prepayid")
	}
	return strings.TrimPrefix(p.Field("package"), "prepay_id=")
}

// An instruction never outlives the deadline passed with it.
func TestMethods_InstructionExpiresByTheDeadlineWhenItComesFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	deadline := e.clock.Now().Add(time.Hour + 300*time.Millisecond)
	for _, method := range []orderpay.PayMethod{orderpay.MethodJSAPI, orderpay.MethodApp} {
		res := e.ch.Precreate(context.Background(), e.methodRequest(method, tradeNo("D"), 100, deadline, ""))
		if res.Outcome != orderpay.OutcomeAccepted || !res.QRExpiresAt.Equal(deadline.Truncate(time.Second)) {
			t.Fatalf("%s: %+v, want it to expire at the deadline %v", method, res, deadline.Truncate(time.Second))
		}
	}
	h5 := e.ch.Precreate(context.Background(), e.methodRequest(orderpay.MethodH5, tradeNo("D"), 100, deadline, ""))
	if h5.Outcome != orderpay.OutcomeAccepted || !h5.QRExpiresAt.Equal(e.clock.Now().Add(5*time.Minute)) {
		t.Fatalf("h5: %+v, want 5 minutes", h5)
	}
}

// A method whose settings are missing, or a request without what its method needs, is
// Rejected before anything is sent, naming what to set.
func TestMethods_MissingSettingsAreRejectedUnsent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	bare := newChannel(t, e.keys, e.srv.URL, func(c *wechat.Config) {
		c.Clock = e.clock
		c.JSAPIAppID, c.MiniAppID, c.AppAppID, c.H5Domains, c.JSAPIPaths = "", "", "", nil, nil
	})
	before := e.sim.Calls()["wechat.precreate"]
	for method, key := range map[orderpay.PayMethod]string{
		orderpay.MethodJSAPI: "jsapi_appid", orderpay.MethodMini: "mini_appid", orderpay.MethodH5: "h5_domains", orderpay.MethodApp: "app_appid",
	} {
		res := bare.Precreate(ctx, e.methodRequest(method, tradeNo("M"), 100, e.clock.Now().Add(time.Hour), ""))
		if res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "not sent") || !strings.Contains(res.Detail, key) {
			t.Errorf("%s without its settings: %+v, want Rejected naming %s", method, res, key)
		}
	}
	ready := bare.PayMethods()
	if ready[orderpay.MethodQR] != "" || !strings.Contains(ready[orderpay.MethodJSAPI], "jsapi_paths") || !strings.Contains(ready[orderpay.MethodH5], "h5_domains") {
		t.Errorf("PayMethods of an adapter with Native only: %v", ready)
	}
	for method, hint := range ready {
		if strings.Contains(hint, "Config.") {
			t.Errorf("%s's hint names a Go field, not only the channels file's key: %q", method, hint)
		}
	}
	for name, req := range map[string]orderpay.PrecreateRequest{
		"jsapi without the payer's openid": {Method: orderpay.MethodJSAPI},
		"mini without the payer's openid":  {Method: orderpay.MethodMini},
		"h5 without the buyer's address":   {Method: orderpay.MethodH5},
		"h5 with a made-up address":        {Method: orderpay.MethodH5, ClientIP: "localhost"},
		"h5 with a relative return":        {Method: orderpay.MethodH5, ClientIP: buyerIP, ReturnURL: "/pay/1"},
		"an Alipay method":                 {Method: orderpay.MethodWAP},
	} {
		req.OutTradeNo, req.Amount, req.Subject, req.Deadline = tradeNo("M"), 100, "订单", e.clock.Now().Add(time.Hour)
		if res := e.ch.Precreate(ctx, req); res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "not sent") {
			t.Errorf("%s: %+v, want Rejected unsent", name, res)
		}
	}
	if after := e.sim.Calls()["wechat.precreate"]; after != before {
		t.Fatalf("%d prepays reached WeChat", after-before)
	}
	for m, needs := range e.ch.PayMethods() {
		if needs != "" {
			t.Errorf("a fully set up adapter: %s needs %s", m, needs)
		}
	}
}

// The traps: each is refused by WeChat's client, or at prepay, and nothing is paid.
func TestMethods_TheClientRefusesWhatWeChatRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	wk := &e.keys.Wechat
	deadline := e.clock.Now().Add(3 * time.Hour)
	prepay := func(method orderpay.PayMethod) (string, orderpay.PrecreateRequest, *orderpay.PayInstruction) {
		t.Helper()
		no := tradeNo("T")
		req := e.methodRequest(method, no, 800, deadline, "")
		res := e.ch.Precreate(ctx, req)
		if res.Outcome != orderpay.OutcomeAccepted {
			t.Fatalf("prepay %s: %+v", method, res)
		}
		return no, req, res.Pay
	}
	refused := func(name, no string, a sim.PayAs, code, words string) {
		t.Helper()
		_, err := e.sim.PayInstruction(ctx, a)
		if orderpay.ErrorCode(err) != code || !strings.Contains(orderpay.ErrorMessage(err), words) {
			t.Errorf("%s: %v, want %s saying %q", name, err, code, words)
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Errorf("%s: the order is %s, want it unpaid", name, q.Outcome)
		}
	}

	// JSAPI: another buyer, a page not under a pay directory, no page, a tampered paySign,
	// an instruction passed off as the mini program's.
	no, _, pay := prepay(orderpay.MethodJSAPI)
	a := device(pay, no)
	a.Buyer = "bob"
	refused("a JSAPI instruction paid by another buyer", no, a, orderpay.EINVALID, "当前用户与下单用户不一致")
	a = device(pay, no)
	a.Referer = "https://evil.example/pay/" + no
	refused("a JSAPI page on another host", no, a, orderpay.EINVALID, "当前页面的URL未注册")
	a.Referer = "http://127.0.0.1:8080/cart/" + no
	refused("a JSAPI page outside the pay directory", no, a, orderpay.EINVALID, "当前页面的URL未注册")
	a.Referer = ""
	refused("a JSAPI page with no Referer", no, a, orderpay.EINVALID, "当前页面的URL未注册")
	tampered := *pay
	tampered.Fields = map[string]string{}
	for k, v := range pay.Fields {
		tampered.Fields[k] = v
	}
	tampered.Fields["nonceStr"] += "x"
	refused("a JSAPI instruction with a tampered paySign", no, device(&tampered, no), orderpay.EINVALID, "支付验证签名失败")
	asMini := tampered
	asMini.Method, asMini.Fields = orderpay.MethodMini, pay.Fields
	refused("a JSAPI instruction passed off as the mini program's", no, device(&asMini, no), orderpay.EINVALID, "商户号与AppID不匹配")

	// An expired prepay_id (2 h), though the order itself could still be paid.
	no, req, pay := prepay(orderpay.MethodMini)
	e.clock.Advance(2 * time.Hour)
	refused("an expired prepay_id", no, device(pay, no), orderpay.ECONFLICT, "prepay_id已失效")
	fresh := e.ch.Precreate(ctx, req)
	if fresh.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("asked again after the prepay_id expired: %+v", fresh)
	}
	if _, err := e.sim.PayInstruction(ctx, device(fresh.Pay, no)); err != nil {
		t.Fatalf("the fresh instruction: %v", err)
	}
	deadline = e.clock.Now().Add(3 * time.Hour)

	// H5: inside WeChat, no Referer, another domain, a subdomain (allowed), another address,
	// an expired link.
	no, _, pay = prepay(orderpay.MethodH5)
	a = device(pay, no)
	a.UserAgent = wechatUA
	refused("an H5 link opened inside WeChat", no, a, orderpay.EINVALID, "请在微信外打开订单")
	a = device(pay, no)
	a.Referer = ""
	refused("an H5 link with an empty Referer", no, a, orderpay.EINVALID, "商家参数格式有误")
	a.Referer = "https://evil.example/pay/" + no
	refused("an H5 link from an unregistered domain", no, a, orderpay.EINVALID, "商家存在未配置的参数")
	a.Referer = "https://notlocalhost/pay/" + no
	refused("an H5 link from a domain that only ends like a registered one", no, a, orderpay.EINVALID, "商家存在未配置的参数")
	a = device(pay, no)
	a.ClientIP = "198.51.100.9"
	refused("an H5 link opened from another address", no, a, orderpay.EINVALID, "网络环境未能通过安全验证")
	e.clock.Advance(5 * time.Minute)
	refused("an expired H5 link", no, device(pay, no), orderpay.ECONFLICT, "支付链接已失效")
	no, _, pay = prepay(orderpay.MethodH5)
	a = device(pay, no)
	a.Referer = "http://m.localhost:8080/pay/" + no
	if _, err := e.sim.PayInstruction(ctx, a); err != nil {
		t.Fatalf("an H5 link from a subdomain of a registered domain: %v", err)
	}

	// App: a tampered sign, another app's appid.
	no, _, pay = prepay(orderpay.MethodApp)
	tampered = *pay
	tampered.Fields = map[string]string{}
	for k, v := range pay.Fields {
		tampered.Fields[k] = v
	}
	tampered.Fields["timestamp"] = "1"
	refused("an App instruction with a tampered sign", no, device(&tampered, no), orderpay.EINVALID, "支付验证签名失败")
	tampered.Fields["timestamp"], tampered.Fields["partnerid"] = pay.Fields["timestamp"], "1900000109"
	refused("an App instruction for another merchant", no, device(&tampered, no), orderpay.EINVALID, "商户号与AppID不匹配")

	// A wrong openid/appid pair at prepay: alice's openid for the official account, from its
	// web OAuth, sent with the mini program's appid.
	openid := oauthOpenID(t, e, buyer)
	if openid != e.sim.IdentityOf(buyer, wk.JSAPIAppID).OpenID {
		t.Fatalf("the OAuth openid %s is not alice's for the official account", openid)
	}
	req = e.methodRequest(orderpay.MethodMini, tradeNo("T"), 100, deadline, "")
	req.Payer = openid
	if res := e.ch.Precreate(ctx, req); res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "appid和openid不匹配") {
		t.Fatalf("the official account's openid with the mini program's appid: %+v, want Rejected", res)
	}
	req.Payer = "not-an-openid"
	if res := e.ch.Precreate(ctx, req); res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "PARAM_ERROR") {
		t.Fatalf("a malformed openid: %+v, want Rejected", res)
	}
}

// oauthOpenID runs the official account's web OAuth for the simulated buyer through the
// adapter: AuthorizeURL, the simulated authorize page (the buyer named, as WeChat knows
// who is signed in), and OpenID.
func oauthOpenID(t *testing.T, e *env, who string) string {
	t.Helper()
	authorize, err := e.ch.AuthorizeURL(shopPage+"oauth?next=1", "st")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(authorize)
	if err != nil || u.Fragment != "wechat_redirect" || u.Query().Get("scope") != "snsapi_base" {
		t.Fatalf("AuthorizeURL %q", authorize)
	}
	q := u.Query()
	q.Set("buyer", who)
	u.RawQuery, u.Fragment = q.Encode(), ""
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || back.Query().Get("state") != "st" || back.Query().Get("next") != "1" {
		t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	openid, err := e.ch.OpenID(context.Background(), back.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ch.OpenID(context.Background(), back.Query().Get("code")); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a code used twice: %v, want EUNAUTHORIZED", err)
	}
	return openid
}

// The OAuth code exchange needs the right AppSecret, as WeChat's does.
func TestOpenID_NeedsTheOfficialAccountsSecret(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wrong := newChannel(t, e.keys, e.srv.URL, func(c *wechat.Config) { c.OAuthSecret = strings.Repeat("0", 32) })
	if _, err := wrong.OpenID(context.Background(), "anycode"); orderpay.ErrorCode(err) != orderpay.EINVALID ||
		!strings.Contains(err.Error(), "40125") || strings.Contains(err.Error(), strings.Repeat("0", 32)) {
		t.Fatalf("a wrong AppSecret: %v, want EINVALID 40125 without the secret", err)
	}
	none := newChannel(t, e.keys, e.srv.URL, func(c *wechat.Config) { c.OAuthSecret = "" })
	if _, err := none.OpenID(context.Background(), "anycode"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("no AppSecret: %v", err)
	}
	if _, err := e.ch.OpenID(context.Background(), "made-up"); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a made-up code: %v, want EUNAUTHORIZED", err)
	}
}

// Asked again with other parameters, the JSAPI prepay is refused as WeChat does (400
// INVALID_REQUEST 商户订单号重复), which says an order exists under the number: Unknown, so
// that a query decides. Faults on the prepay are Unknown, as for Native.
func TestMethods_RepeatWithOtherParametersAndFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	req := e.methodRequest(orderpay.MethodJSAPI, tradeNo("R"), 100, e.clock.Now().Add(time.Hour), "")
	if res := e.ch.Precreate(ctx, req); res.Outcome != orderpay.OutcomeAccepted {
		t.Fatal(res)
	}
	req.Amount = 200
	if res := e.ch.Precreate(ctx, req); res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "INVALID_REQUEST") {
		t.Fatalf("same number, other amount: %+v, want Unknown INVALID_REQUEST", res)
	}
	impatient := newChannel(t, e.keys, e.srv.URL, func(c *wechat.Config) { c.Clock, c.Timeout = e.clock, 300*time.Millisecond })
	for _, kind := range []string{sim.FaultTimeout, sim.FaultSystemError, sim.FaultBadSignature, sim.FaultUnsigned} {
		for _, method := range methods {
			if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodPrecreate, Kind: kind, Limit: 1}}}); err != nil {
				t.Fatal(err)
			}
			res := impatient.Precreate(ctx, e.methodRequest(method, tradeNo("F"), 100, e.clock.Now().Add(time.Hour), ""))
			if res.Outcome != orderpay.OutcomeUnknown || res.Pay != nil {
				t.Errorf("%s under %s: %+v, want Unknown", method, kind, res)
			}
		}
	}
}

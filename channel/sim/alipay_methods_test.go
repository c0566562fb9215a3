package sim_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
)

// The Alipay pay methods beyond the QR code (docs/channels.md §A6), driven with the SDK's own
// calls the way a merchant makes them: TradePagePay and TradeWapPay sign a cashier URL,
// TradeAppPay an order string, TradeCreate opens an in-app trade; the simulated cashier shows
// what a browser opens, and the simulated wallet pays what the device was handed.

const (
	returnTo = "https://shop.example/return"
	quitTo   = "https://shop.example/quit"
)

// noRedirects is a browser that shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (b *bundle) timeExpire(d time.Duration) string {
	return b.clock.Now().Add(d).In(cst).Format("2006-01-02 15:04:05")
}

// pagePay signs a pc order with the SDK, as a merchant does.
func (b *bundle) pagePay(t *testing.T, no, amount, timeExpire, notifyURL string) *url.URL {
	t.Helper()
	u, err := b.client.TradePagePay(alipay.TradePagePay{Trade: alipay.Trade{
		NotifyURL: notifyURL, ReturnURL: returnTo, Subject: "order " + no, OutTradeNo: no, TotalAmount: amount,
		ProductCode: "FAST_INSTANT_TRADE_PAY", TimeExpire: timeExpire,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// wapPay signs a wap order with the SDK; timeExpire goes in TradeWapPay's own field.
func (b *bundle) wapPay(t *testing.T, no, amount, timeExpire, timeout string) *url.URL {
	t.Helper()
	u, err := b.client.TradeWapPay(alipay.TradeWapPay{Trade: alipay.Trade{
		ReturnURL: returnTo, Subject: "order " + no, OutTradeNo: no, TotalAmount: amount,
		ProductCode: "QUICK_WAP_WAY", TimeoutExpress: timeout,
	}, QuitURL: quitTo, TimeExpire: timeExpire})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// appPay signs an app order string with the SDK.
func (b *bundle) appPay(t *testing.T, no, amount, timeExpire string) string {
	t.Helper()
	s, err := b.client.TradeAppPay(alipay.TradeAppPay{Trade: alipay.Trade{
		Subject: "order " + no, OutTradeNo: no, TotalAmount: amount, ProductCode: "QUICK_MSECURITY_PAY", TimeExpire: timeExpire,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// merchantForm is the auto-submitting form a merchant writes for a pc URL, as Alipay's own
// SDKs do: every parameter a hidden input, posted to the gateway with ?charset=utf-8.
func merchantForm(u *url.URL, params url.Values) string {
	var b strings.Builder
	b.WriteString(`<form name="punchout_form" method="post" action="` + html.EscapeString(u.Scheme+"://"+u.Host+u.Path+"?charset=utf-8") + `">` + "\n")
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(`<input type="hidden" name="` + html.EscapeString(k) + `" value="` + html.EscapeString(params.Get(k)) + `">` + "\n")
	}
	b.WriteString(`<input type="submit" value="立即支付" style="display:none" ></form><script>document.forms[0].submit();</script>`)
	return b.String()
}

func pcInstruction(u *url.URL) *orderpay.PayInstruction {
	return orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodPC, "url", u.String(), "html", merchantForm(u, u.Query()))
}

func (b *bundle) payAs(p *orderpay.PayInstruction, who, action string) (*sim.PayResult, error) {
	return b.sim.PayInstruction(context.Background(), sim.PayAs{Pay: p, Buyer: who, Action: action})
}

// open is the buyer's browser opening a cashier URL: the status and the page.
func open(t *testing.T, rawURL string) (int, string) {
	t.Helper()
	resp, err := noRedirects.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// submit is the buyer's browser submitting a cashier form: params posted to action.
func submit(t *testing.T, action string, params url.Values) (int, string) {
	t.Helper()
	resp, err := noRedirects.PostForm(action, params)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// wantCashierError fails the test unless a cashier answer is Alipay's error page with
// status and code (as the page shows it).
func wantCashierError(t *testing.T, what string, status int, body string, wantStatus int, code string) {
	t.Helper()
	if status != wantStatus || !strings.Contains(body, "错误代码 "+code) || !strings.Contains(body, "错误原因") {
		t.Fatalf("%s: %d %s, want the error page %d with 错误代码 %s", what, status, body, wantStatus, code)
	}
}

// verifiedReturn checks a return_url as smartwalle's README says a merchant does (VerifySign
// over the redirect's parameters) and returns them.
func verifiedReturn(t *testing.T, client *alipay.Client, returnURL string) url.Values {
	t.Helper()
	u, err := url.Parse(returnURL)
	if err != nil || !strings.HasPrefix(returnURL, returnTo+"?") {
		t.Fatalf("return_url %q", returnURL)
	}
	q := u.Query()
	if err := client.VerifySign(context.Background(), q); err != nil {
		t.Fatalf("the return parameters do not verify with the Alipay key: %v (%s)", err, returnURL)
	}
	return q
}

func noTrades(t *testing.T, s *sim.Simulator) {
	t.Helper()
	if l := s.Ledger(); len(l) != 0 {
		t.Fatalf("the channel has trades: %+v", l)
	}
}

// A pc order signed by TradePagePay: the cashier shows it when the browser opens the URL or
// submits the form, and nothing exists at Alipay yet; the wallet pays it (url and form
// verified), which makes the trade: the cashier sends the browser to return_url with
// parameters that verify, the SDK's query says TRADE_SUCCESS for the buyer, the notification
// verifies, the trade refunds and appears in the next day's bill.
func TestMethods_PagePay(t *testing.T) {
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			b := setup(t, sim.Config{})
			if mode == sim.AlipayModeCert {
				b = setupCert(t, sim.Config{})
			}
			ctx := context.Background()
			rcv := newNotifyReceiver(t, reply{200, "success"})
			u := b.pagePay(t, "PC_1", "12.34", b.timeExpire(30*time.Minute), rcv.srv.URL)
			if u.Path != "/gateway.do" || u.Query().Get("method") != "alipay.trade.page.pay" {
				t.Fatalf("TradePagePay gave %s", u)
			}

			status, page := open(t, u.String())
			if status != http.StatusOK || !strings.Contains(page, "PC_1") || !strings.Contains(page, "¥12.34") ||
				!strings.Contains(page, "order PC_1") || !strings.Contains(page, b.keys.SellerID) {
				t.Fatalf("GET cashier: %d %s", status, page)
			}
			status, page = submit(t, u.Scheme+"://"+u.Host+u.Path+"?charset=utf-8", u.Query())
			if status != http.StatusOK || !strings.Contains(page, "¥12.34") {
				t.Fatalf("POST cashier: %d %s", status, page)
			}
			noTrades(t, b.sim)
			wantAlipayCode(t, "query before paying", b.query(t, "PC_1").Error, "40004", "ACQ.TRADE_NOT_EXIST")

			paid, err := b.payAs(pcInstruction(u), "alice", "")
			if err != nil {
				t.Fatalf("the wallet refused the SDK's pc order: %v", err)
			}
			if paid.Status != sim.AlipayTradeSuccess || paid.Amount != 1234 || paid.TradeNo == "" {
				t.Fatalf("pay: %+v", paid)
			}
			ret := verifiedReturn(t, b.client, paid.ReturnURL)
			if ret.Get("method") != "alipay.trade.page.pay.return" || ret.Get("out_trade_no") != "PC_1" || ret.Get("trade_no") != paid.TradeNo ||
				ret.Get("total_amount") != "12.34" || ret.Get("app_id") != b.keys.AppID || ret.Get("seller_id") != b.keys.SellerID ||
				ret.Get("sign_type") != "RSA2" || ret.Get("timestamp") == "" {
				t.Fatalf("return parameters %v", ret)
			}

			q := b.query(t, "PC_1")
			if q.Code != alipay.CodeSuccess || q.TradeStatus != alipay.TradeStatusSuccess || q.TotalAmount != "12.34" ||
				q.TradeNo != paid.TradeNo || q.BuyerUserId != b.sim.IdentityOf("alice", "").AlipayUserID {
				t.Fatalf("query after paying: %+v", q)
			}
			waitNotify(t, b.sim, "PC_1")
			body := rcv.received()[0]
			values, _ := url.ParseQuery(body)
			n, err := b.client.DecodeNotification(ctx, values)
			if err != nil || n.TradeStatus != alipay.TradeStatusSuccess || n.OutTradeNo != "PC_1" || n.TotalAmount != "12.34" {
				t.Fatalf("notification %+v: %v", n, err)
			}
			if r := b.alipayRefund(t, "PC_1", "PC_1R1", "2.34"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" {
				t.Fatalf("refund: %+v", r)
			}

			b.clock.Advance(24*time.Hour + time.Hour)
			bill := downloadAlipayBill(t, b.alipayBillURL(t, "2025-03-14").BillDownloadURL)
			var rows int
			for _, r := range bill.rows(t) {
				if len(r) > 1 && r[1] == "PC_1" {
					rows++
				}
			}
			if rows != 2 {
				t.Fatalf("the bill has %d rows for PC_1, want the payment and the refund: %v", rows, bill.lines)
			}
		})
	}
}

// A wap order signed by TradeWapPay with time_expire to the minute, as the SDK documents
// it: the cashier shows it; a buyer who gives up is sent to quit_url and nothing exists;
// paying sends the browser to return_url with a wap return that verifies. time_expire to the
// second is taken too, and so is timeout_express, counted from when Alipay first sees the
// order.
func TestMethods_WapPay(t *testing.T) {
	b := setup(t, sim.Config{})
	minute := b.clock.Now().Add(20 * time.Minute).In(cst).Format("2006-01-02 15:04")
	u := b.wapPay(t, "WAP_1", "8.00", minute, "")
	var biz map[string]any
	_ = json.Unmarshal([]byte(u.Query().Get("biz_content")), &biz)
	if biz["time_expire"] != minute || biz["quit_url"] != quitTo {
		t.Fatalf("TradeWapPay's biz_content %v", biz)
	}
	if status, page := open(t, u.String()); status != http.StatusOK || !strings.Contains(page, "WAP_1") || !strings.Contains(page, "手机网站支付") {
		t.Fatalf("GET cashier: %d %s", status, page)
	}
	p := orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", u.String())
	declined, err := b.payAs(p, "alice", sim.WalletDecline)
	if err != nil || declined.ReturnURL != quitTo || declined.TradeNo != "" {
		t.Fatalf("decline: %+v %v, want sent to %s, no trade", declined, err, quitTo)
	}
	noTrades(t, b.sim)
	paid, err := b.payAs(p, "alice", sim.WalletPay)
	if err != nil {
		t.Fatal(err)
	}
	if ret := verifiedReturn(t, b.client, paid.ReturnURL); ret.Get("method") != "alipay.trade.wap.pay.return" || ret.Get("trade_no") != paid.TradeNo {
		t.Fatalf("return %v", ret)
	}

	second := b.wapPay(t, "WAP_2", "1.00", b.timeExpire(20*time.Minute), "")
	if status, page := open(t, second.String()); status != http.StatusOK {
		t.Fatalf("time_expire to the second: %d %s", status, page)
	}

	relative := b.wapPay(t, "WAP_3", "1.00", "", "30m")
	if status, page := open(t, relative.String()); status != http.StatusOK {
		t.Fatalf("timeout_express: %d %s", status, page)
	}
	b.clock.Advance(29 * time.Minute)
	if status, page := open(t, relative.String()); status != http.StatusOK {
		t.Fatalf("timeout_express, 29 minutes after the cashier first opened: %d %s", status, page)
	}
	b.clock.Advance(time.Minute)
	status, page := open(t, relative.String())
	wantCashierError(t, "timeout_express, 30 minutes after", status, page, http.StatusConflict, "ACQ.TRADE_HAS_CLOSE")
	if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", relative.String()), "alice", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("paying past timeout_express: %v, want ECONFLICT", err)
	}
}

// An app order string from TradeAppPay is what the Alipay app sends to Alipay: the wallet
// verifies it and pays it, and the trade is then queried like any other.
func TestMethods_AppPay(t *testing.T) {
	b := setup(t, sim.Config{})
	s := b.appPay(t, "APP_1", "66.60", b.timeExpire(time.Hour))
	params, _ := url.ParseQuery(s)
	if params.Get("method") != "alipay.trade.app.pay" || params.Get("sign") == "" {
		t.Fatalf("TradeAppPay gave %s", s)
	}
	paid, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodApp, "order_string", s), "bob", "")
	if err != nil {
		t.Fatalf("the wallet refused the SDK's order string: %v", err)
	}
	if paid.Status != sim.AlipayTradeSuccess || paid.Amount != 6660 || paid.ReturnURL != "" {
		t.Fatalf("pay: %+v", paid)
	}
	if q := b.query(t, "APP_1"); q.TradeStatus != alipay.TradeStatusSuccess || q.TotalAmount != "66.60" {
		t.Fatalf("query: %+v", q)
	}
	// An order string is the app's to send: the gateway knows no such call.
	status, page := open(t, b.gatewayURL()+"?"+s)
	if status != http.StatusOK || !strings.Contains(page, `"error_response"`) || !strings.Contains(page, "isv.invalid-method") {
		t.Fatalf("an app order string sent to the gateway: %d %s, want isv.invalid-method", status, page)
	}
}

// In-app: the OAuth page hands the buyer's browser an auth_code, alipay.system.oauth.token
// (SystemOauthToken) exchanges it once for the buyer's user id, TradeCreate opens a trade for
// that buyer (it exists at once, WAIT_BUYER_PAY), and only that buyer can pay its trade_no.
func TestMethods_InAppWithOAuth(t *testing.T) {
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			b := setup(t, sim.Config{})
			if mode == sim.AlipayModeCert {
				b = setupCert(t, sim.Config{})
			}
			ctx := context.Background()
			resp, err := noRedirects.Get(b.srv.URL + "/sim/alipay/oauth?buyer=alice&state=s1&redirect_uri=" + url.QueryEscape("https://shop.example/cb?x=1"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc, _ := url.Parse(resp.Header.Get("Location"))
			back := loc.Query()
			if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), "https://shop.example/cb?") || back.Get("x") != "1" ||
				back.Get("state") != "s1" || back.Get("app_id") != b.keys.AppID || back.Get("auth_code") == "" {
				t.Fatalf("oauth page: %d %s", resp.StatusCode, loc)
			}
			tok, err := b.client.SystemOauthToken(ctx, alipay.SystemOauthToken{GrantType: "authorization_code", Code: back.Get("auth_code")})
			alice := b.sim.IdentityOf("alice", "").AlipayUserID
			if err != nil || tok.UserId != alice || tok.AccessToken == "" || tok.RefreshToken == "" {
				t.Fatalf("token: %+v %v, want user %s", tok, err, alice)
			}
			_, err = b.client.SystemOauthToken(ctx, alipay.SystemOauthToken{GrantType: "authorization_code", Code: back.Get("auth_code")})
			var refusal *alipay.Error
			if !asAlipayError(err, &refusal) || refusal.SubCode != "isv.code-invalid" {
				t.Fatalf("a code used twice: %v, want error_response isv.code-invalid", err)
			}
			if again, err := b.client.SystemOauthToken(ctx, alipay.SystemOauthToken{GrantType: "refresh_token", RefreshToken: tok.RefreshToken}); err != nil || again.UserId != alice {
				t.Fatalf("refresh: %+v %v", again, err)
			}

			create := alipay.TradeCreate{Trade: alipay.Trade{Subject: "order IN_1", OutTradeNo: "IN_1", TotalAmount: "5.20",
				ProductCode: "JSAPI_PAY", TimeExpire: b.timeExpire(time.Hour)}, BuyerId: tok.UserId}
			created, err := b.client.TradeCreate(ctx, create)
			if err != nil || created.Code != alipay.CodeSuccess || created.TradeNo == "" || created.OutTradeNo != "IN_1" {
				t.Fatalf("create: %+v %v", created, err)
			}
			q := b.query(t, "IN_1")
			if q.TradeStatus != alipay.TradeStatusWaitBuyerPay || q.BuyerUserId != alice || q.TradeNo != created.TradeNo {
				t.Fatalf("query after create: %+v", q)
			}
			if same, _ := b.client.TradeCreate(ctx, create); same.TradeNo != created.TradeNo {
				t.Fatalf("the same create again: %+v, want trade_no %s", same, created.TradeNo)
			}
			other := create
			other.TotalAmount = "5.21"
			if r, _ := b.client.TradeCreate(ctx, other); r.SubCode != "ACQ.CONTEXT_INCONSISTENT" {
				t.Fatalf("the same number for another amount: %+v", r)
			}

			p := orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodInApp, "trade_no", created.TradeNo)
			if _, err := b.payAs(p, "bob", ""); orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), "TRADE_BUYER_NOT_MATCH") {
				t.Fatalf("bob paying alice's trade: %v, want TRADE_BUYER_NOT_MATCH", err)
			}
			if _, err := b.payAs(p, "", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
				t.Fatalf("nobody signed in: %v, want EINVALID", err)
			}
			if d, err := b.payAs(p, "alice", sim.WalletDecline); err != nil || d.Status != sim.AlipayWaitBuyerPay {
				t.Fatalf("alice closing the pay sheet: %+v %v", d, err)
			}
			paid, err := b.payAs(p, "alice", "")
			if err != nil || paid.Status != sim.AlipayTradeSuccess || paid.TradeNo != created.TradeNo || paid.Amount != 520 {
				t.Fatalf("alice pays: %+v %v", paid, err)
			}
			if _, err := b.payAs(p, "alice", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT || !strings.Contains(err.Error(), "ACQ.TRADE_HAS_SUCCESS") {
				t.Fatalf("paying twice: %v, want ECONFLICT ACQ.TRADE_HAS_SUCCESS", err)
			}
			if q := b.query(t, "IN_1"); q.TradeStatus != alipay.TradeStatusSuccess {
				t.Fatalf("query after paying: %+v", q)
			}
			if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodInApp, "trade_no", "2025031400000000000000000000"), "alice", ""); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
				t.Fatalf("an unknown trade_no: %v, want ENOTFOUND", err)
			}
		})
	}
}

func asAlipayError(err error, target **alipay.Error) bool {
	e, ok := err.(*alipay.Error)
	if ok {
		*target = e
	}
	return ok
}

// alipay.trade.create checks its buyer (an Alipay user id, not the seller's), its product and
// its deadline, and meets the call faults precreate meets.
func TestTradeCreate_RefusalsAndFaults(t *testing.T) {
	b := setup(t, sim.Config{})
	ctx := context.Background()
	create := func(no, buyerID, product, timeExpire string) *alipay.TradeCreateRsp {
		rsp, err := b.client.TradeCreate(ctx, alipay.TradeCreate{Trade: alipay.Trade{Subject: "s", OutTradeNo: no, TotalAmount: "1.00",
			ProductCode: product, TimeExpire: timeExpire}, BuyerId: buyerID})
		if err != nil {
			t.Fatalf("create %s: %v", no, err)
		}
		return rsp
	}
	alice := b.sim.IdentityOf("alice", "").AlipayUserID
	wantAlipayCode(t, "no buyer", create("TC_1", "", "JSAPI_PAY", "").Error, "40004", "ACQ.INVALID_PARAMETER")
	wantAlipayCode(t, "a buyer that is not a user id", create("TC_2", "alice", "JSAPI_PAY", "").Error, "40004", "ACQ.INVALID_PARAMETER")
	wantAlipayCode(t, "the seller as buyer", create("TC_3", b.keys.SellerID, "JSAPI_PAY", "").Error, "40004", "ACQ.BUYER_SELLER_EQUAL")
	wantAlipayCode(t, "another product", create("TC_4", alice, "FAST_INSTANT_TRADE_PAY", "").Error, "40004", "ACQ.INVALID_PARAMETER")
	wantAlipayCode(t, "a past deadline", create("TC_5", alice, "JSAPI_PAY", b.timeExpire(-time.Minute)).Error, "40004", "ACQ.INVALID_PARAMETER")
	noTrades(t, b.sim)

	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{
		{Channel: orderpay.ChannelAlipay, Method: sim.MethodPrecreate, Kind: sim.FaultSystemError, Limit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	wantAlipayCode(t, "create under a system_error fault", create("TC_6", alice, "JSAPI_PAY", "").Error, "40004", "ACQ.SYSTEM_ERROR")
	noTrades(t, b.sim)
	if r := create("TC_6", alice, "JSAPI_PAY", ""); r.Code != alipay.CodeSuccess {
		t.Fatalf("create after the fault: %+v", r)
	}
	if got := b.sim.Calls()["alipay."+sim.MethodPrecreate]; got != 7 {
		t.Fatalf("%d creates counted as precreate calls, want 7", got)
	}
}

// alter returns a copy of params with one parameter, or one field of biz_content, changed:
// what someone between the merchant and the buyer's device might do.
func alter(params url.Values, field, value string) url.Values {
	out := url.Values{}
	for k, v := range params {
		out[k] = slices.Clone(v)
	}
	if field == "app_id" {
		out.Set("app_id", value)
		return out
	}
	var biz map[string]any
	_ = json.Unmarshal([]byte(params.Get("biz_content")), &biz)
	biz[field] = value
	text, _ := json.Marshal(biz)
	out.Set("biz_content", string(text))
	return out
}

func withQuery(u *url.URL, q url.Values) *url.URL {
	c := *u
	c.RawQuery = q.Encode()
	return &c
}

// Any signed parameter altered after the merchant signed it (the amount, the out_trade_no,
// the app id), in a pc URL, a pc form, a wap URL or an app order string: the cashier shows
// Alipay's error page, the wallet refuses it, and nothing is paid. The genuine order still
// pays afterwards.
func TestMethods_AlteredOrdersAreRefused(t *testing.T) {
	b := setup(t, sim.Config{})
	alterations := []struct{ field, value, code string }{
		{"total_amount", "0.01", "invalid-signature"},
		{"out_trade_no", "ALT_OTHER", "invalid-signature"},
		{"app_id", "2021000000000000", "invalid-app-id"},
	}
	pc := b.pagePay(t, "ALT_PC", "99.00", b.timeExpire(time.Hour), "")
	wap := b.wapPay(t, "ALT_WAP", "99.00", b.timeExpire(time.Hour), "")
	app := b.appPay(t, "ALT_APP", "99.00", b.timeExpire(time.Hour))
	appParams, _ := url.ParseQuery(app)
	for _, a := range alterations {
		what := func(s string) string { return s + " with " + a.field + " altered" }

		badPC := withQuery(pc, alter(pc.Query(), a.field, a.value))
		status, page := open(t, badPC.String())
		wantCashierError(t, what("GET pc"), status, page, http.StatusBadRequest, a.code)
		status, page = submit(t, pc.Scheme+"://"+pc.Host+pc.Path+"?charset=utf-8", alter(pc.Query(), a.field, a.value))
		wantCashierError(t, what("POST pc form"), status, page, http.StatusBadRequest, a.code)
		if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodPC, "url", badPC.String(),
			"html", merchantForm(pc, pc.Query())), "alice", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Fatalf("%s: %v, want EINVALID", what("the wallet paying a pc url"), err)
		}
		if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodPC, "url", pc.String(),
			"html", merchantForm(pc, alter(pc.Query(), a.field, a.value))), "alice", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Fatalf("%s: %v, want EINVALID", what("the wallet paying a pc form"), err)
		}

		badWap := withQuery(wap, alter(wap.Query(), a.field, a.value))
		status, page = open(t, badWap.String())
		wantCashierError(t, what("GET wap"), status, page, http.StatusBadRequest, a.code)
		if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", badWap.String()), "alice", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Fatalf("%s: %v, want EINVALID", what("the wallet paying a wap url"), err)
		}

		badApp := alter(appParams, a.field, a.value).Encode()
		_, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodApp, "order_string", badApp), "alice", "")
		if orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), a.code) {
			t.Fatalf("%s: %v, want EINVALID %s", what("the wallet paying an order string"), err, a.code)
		}
	}
	noTrades(t, b.sim)

	// A form that is genuine but another order than the url beside it is refused too.
	other := b.pagePay(t, "ALT_PC2", "1.00", b.timeExpire(time.Hour), "")
	if _, err := b.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodPC, "url", pc.String(),
		"html", merchantForm(other, other.Query())), "alice", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("a pc url and a form of two orders: %v, want EINVALID", err)
	}
	noTrades(t, b.sim)

	for _, p := range []*orderpay.PayInstruction{
		pcInstruction(pc),
		orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", wap.String()),
		orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodApp, "order_string", app),
	} {
		if res, err := b.payAs(p, "alice", ""); err != nil || res.Amount != 9900 {
			t.Fatalf("the genuine %s order: %+v %v", p.Method, res, err)
		}
	}
	if got := len(b.sim.Ledger()); got != 3 {
		t.Fatalf("%d trades, want 3", got)
	}
}

// An order past its time_expire is refused by the cashier and the wallet, in Alipay's words,
// and pays nothing; so is a second payment of a paid trade.
func TestMethods_ExpiredAndSecondPaymentRefused(t *testing.T) {
	b := setup(t, sim.Config{})
	pc := b.pagePay(t, "EXP_PC", "3.00", b.timeExpire(10*time.Minute), "")
	wap := b.wapPay(t, "EXP_WAP", "3.00", b.clock.Now().Add(10*time.Minute).In(cst).Format("2006-01-02 15:04"), "")
	app := b.appPay(t, "EXP_APP", "3.00", b.timeExpire(10*time.Minute))
	instructions := []*orderpay.PayInstruction{
		pcInstruction(pc),
		orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", wap.String()),
		orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodApp, "order_string", app),
	}
	b.clock.Advance(10 * time.Minute)
	for _, u := range []*url.URL{pc, wap} {
		status, page := open(t, u.String())
		wantCashierError(t, "an expired order", status, page, http.StatusConflict, "ACQ.TRADE_HAS_CLOSE")
	}
	for _, p := range instructions {
		if _, err := b.payAs(p, "alice", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT || !strings.Contains(err.Error(), "ACQ.TRADE_HAS_CLOSE") {
			t.Fatalf("paying an expired %s order: %v, want ECONFLICT ACQ.TRADE_HAS_CLOSE", p.Method, err)
		}
	}
	noTrades(t, b.sim)

	paid := b.pagePay(t, "TWICE", "3.00", b.timeExpire(10*time.Minute), "")
	if _, err := b.payAs(pcInstruction(paid), "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.payAs(pcInstruction(paid), "bob", ""); orderpay.ErrorCode(err) != orderpay.ECONFLICT || !strings.Contains(err.Error(), "ACQ.TRADE_HAS_SUCCESS") {
		t.Fatalf("a second payment: %v, want ECONFLICT ACQ.TRADE_HAS_SUCCESS", err)
	}
	status, page := open(t, paid.String())
	wantCashierError(t, "the cashier of a paid order", status, page, http.StatusConflict, "ACQ.TRADE_HAS_SUCCESS")
	if e := alipayEntry(t, b.sim, "TWICE"); e.Status != sim.AlipayTradeSuccess || e.Amount != 300 {
		t.Fatalf("ledger %+v", e)
	}
}

// The cashier page's own buttons: paying redirects the browser (303) to return_url with the
// signed return; giving up on a wap order redirects it to quit_url and pays nothing.
func TestCashierPage_Buttons(t *testing.T) {
	b := setup(t, sim.Config{})
	action := func(t *testing.T, u *url.URL) string {
		status, page := open(t, u.String())
		i := strings.Index(page, `action="/sim/alipay/cashier/`)
		if status != http.StatusOK || i < 0 {
			t.Fatalf("cashier: %d %s", status, page)
		}
		rest := page[i+len(`action="`):]
		return b.srv.URL + rest[:strings.Index(rest, `"`)]
	}
	wap := b.wapPay(t, "BTN_WAP", "2.00", b.timeExpire(time.Hour), "")
	status, _ := submit(t, action(t, wap), url.Values{"buyer": {"alice"}, "action": {"decline"}})
	if status != http.StatusSeeOther {
		t.Fatalf("decline: %d", status)
	}
	resp, _ := noRedirects.PostForm(action(t, wap), url.Values{"buyer": {"alice"}, "action": {"decline"}})
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != quitTo {
		t.Fatalf("decline sent the browser to %q, want %s", loc, quitTo)
	}
	noTrades(t, b.sim)

	pc := b.pagePay(t, "BTN_PC", "2.00", b.timeExpire(time.Hour), "")
	resp, err := noRedirects.PostForm(action(t, pc), url.Values{"buyer": {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ret := verifiedReturn(t, b.client, resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || ret.Get("out_trade_no") != "BTN_PC" || ret.Get("method") != "alipay.trade.page.pay.return" {
		t.Fatalf("pay: %d %v", resp.StatusCode, ret)
	}
	if q := b.query(t, "BTN_PC"); q.TradeStatus != alipay.TradeStatusSuccess || q.BuyerUserId != b.sim.IdentityOf("alice", "").AlipayUserID {
		t.Fatalf("query: %+v", q)
	}
	status, page := submit(t, b.srv.URL+"/sim/alipay/cashier/nosuchtoken", url.Values{"buyer": {"alice"}})
	wantCashierError(t, "an unknown cashier page", status, page, http.StatusNotFound, "ACQ.TRADE_NOT_EXIST")
}

// The cashier checks the signing mode as the gateway does: a certificate-mode app's orders
// carry its certificate SNs, and one signed in key mode is refused.
func TestCashier_CertificateMode(t *testing.T) {
	b := setupCert(t, sim.Config{})
	if status, page := open(t, b.pagePay(t, "CM_1", "1.00", b.timeExpire(time.Hour), "").String()); status != http.StatusOK {
		t.Fatalf("a certificate-mode order: %d %s", status, page)
	}
	keyMode := sdkClient(t, b.keys.AppID, testPEM(t, b.keys.AppPrivateKeyPEM), testPEM(t, b.keys.AlipayPublicKeyPEM), b.gatewayURL())
	u, err := keyMode.TradePagePay(alipay.TradePagePay{Trade: alipay.Trade{Subject: "s", OutTradeNo: "CM_2", TotalAmount: "1.00",
		ProductCode: "FAST_INSTANT_TRADE_PAY"}})
	if err != nil {
		t.Fatal(err)
	}
	status, page := open(t, u.String())
	wantCashierError(t, "a key-mode order to a certificate-mode app", status, page, http.StatusBadRequest, "missing-app-cert-sn")
}

func testPEM(t *testing.T, f func() (string, error)) string {
	t.Helper()
	s, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The OAuth page refuses what it cannot redirect, and answers at the path of Alipay's own
// page too.
func TestOauthPage(t *testing.T) {
	b := setup(t, sim.Config{})
	for name, q := range map[string]string{
		"no buyer":         "redirect_uri=https%3A%2F%2Fshop.example%2Fcb",
		"no redirect_uri":  "buyer=alice",
		"relative":         "buyer=alice&redirect_uri=%2Fcb",
		"another app":      "buyer=alice&redirect_uri=https%3A%2F%2Fshop.example%2Fcb&app_id=2021000000000000",
		"buyer too long":   "buyer=" + strings.Repeat("a", 65) + "&redirect_uri=https%3A%2F%2Fshop.example%2Fcb",
		"redirect not web": "buyer=alice&redirect_uri=javascript%3Aalert(1)",
	} {
		if status, _ := open(t, b.srv.URL+"/sim/alipay/oauth?"+q); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, status)
		}
	}
	resp, err := noRedirects.Get(b.srv.URL + "/oauth2/publicAppAuthorize.htm?buyer=bob&scope=auth_user&redirect_uri=https%3A%2F%2Fshop.example%2Fcb")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc.Query().Get("scope") != "auth_user" || loc.Query().Get("auth_code") == "" {
		t.Fatalf("publicAppAuthorize.htm: %d %s", resp.StatusCode, loc)
	}
	tok, err := b.client.SystemOauthToken(context.Background(), alipay.SystemOauthToken{GrantType: "authorization_code", Code: loc.Query().Get("auth_code")})
	if err != nil || tok.UserId != b.sim.IdentityOf("bob", "").AlipayUserID {
		t.Fatalf("token: %+v %v", tok, err)
	}
	b.clock.Advance(10 * time.Minute)
	_, err = b.client.SystemOauthToken(context.Background(), alipay.SystemOauthToken{GrantType: "authorization_code", Code: b.sim.NewAlipayAuthCode("carol")})
	if err != nil {
		t.Fatalf("a fresh code: %v", err)
	}
	stale := b.sim.NewAlipayAuthCode("carol")
	b.clock.Advance(6 * time.Minute)
	var refusal *alipay.Error
	if _, err := b.client.SystemOauthToken(context.Background(), alipay.SystemOauthToken{GrantType: "authorization_code", Code: stale}); !asAlipayError(err, &refusal) || refusal.SubCode != "isv.code-invalid" {
		t.Fatalf("an expired code: %v, want isv.code-invalid", err)
	}
}

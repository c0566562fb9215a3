package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"orderpay/buyerauth"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/chaos"
)

// The cashier in Chromium, as each device, against a whole orderpay and its built-in
// simulator, each way to pay through to PAID: the device is its User-Agent (and, for a
// phone, its screen); the wallets' apps are played by the test, which hands what the page
// gives them to the simulator (POST /sim/pay) as the real ones hand it to their channel,
// and the simulated WeChat and Alipay know the buyer signed in to them. Screenshots of the
// cashier go to docs/screenshots with ORDERPAY_UPDATE_SCREENSHOTS=1.

// The devices' User-Agents.
const (
	desktopUA = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
	phoneUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	wechatUA  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.49(0x18003137) NetType/WIFI Language/zh_CN"
	alipayUA  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 AlipayClient/10.6.18.6000 Language/zh-Hans"
)

// walletScripts are what WeChat's and Alipay's in-app browsers give a page, played by the
// test before the page's own scripts run: WeixinJSBridge.invoke("getBrandWCPayRequest")
// and my.tradePay hand the instruction to the wallet (orderpayWallet, the test), which pays
// it at the simulator, as the app would, with the page's own URL as the Referer.
const walletScripts = `
window.WeixinJSBridge = {
  invoke(name, fields, done) {
    if (name !== "getBrandWCPayRequest") { done({ err_msg: name + ":fail" }); return; }
    window.orderpayWallet({ pay: Object.assign({ kind: "jsapi", channel: "wechat", method: "jsapi" }, fields), referer: location.href, user_agent: navigator.userAgent })
      .then((r) => done({ err_msg: "get_brand_wcpay_request:" + r }), (e) => done({ err_msg: "get_brand_wcpay_request:fail " + e.message }));
  },
};
window.my = {
  tradePay(o) {
    window.orderpayWallet({ pay: { kind: "inapp", channel: "alipay", method: "inapp", trade_no: o.tradeNO }, referer: location.href, user_agent: navigator.userAgent })
      .then(() => o.success({ resultCode: "9000" }), (e) => o.fail({ resultCode: "4000", memo: e.message }));
  },
};`

// device is a tab playing one device, with the wallet app signed in as buyer.
type device struct {
	t     *testing.T
	tab   context.Context
	m     *Main
	buyer string
	// lie makes the wallet say "paid" without paying; paid counts the instructions it paid.
	lie  atomic.Bool
	paid atomic.Int32
	// problems are what the wallet or the interception could not do, for a failure message.
	mu       sync.Mutex
	problems []string
}

func (d *device) problem(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.problems = append(d.problems, fmt.Sprintf(format, args...))
}

// do is the package's do, with what the wallet met when it fails.
func (d *device) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.tab, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shot(d.t, d.tab, "failed-"+strings.ReplaceAll(what, " ", "-"))
		d.mu.Lock()
		defer d.mu.Unlock()
		d.t.Fatalf("%s: %v (the wallet met: %v; the page says: %q)", what, err, d.problems, text(d.t, d.tab, "#error"))
	}
}

// newDevice opens a tab with ua, width × height (a phone's screen is a touch one), the
// wallets' scripts, and the wallet apps and wallets' pages played by the test: WeChat's
// and Alipay's OAuth pages know buyer as signed in (the simulator's pages take it as
// ?buyer=), and WeChat's H5 cashier, on wx.tenpay.com, pays at the simulator and sends the
// browser to the link's redirect_url.
func newDevice(t *testing.T, browser context.Context, m *Main, ua string, width, height int64, buyer string) *device {
	t.Helper()
	d := &device{t: t, tab: newTab(t, browser), m: m, buyer: buyer}
	var opts []chromedp.EmulateViewportOption
	if width < 600 {
		opts = append(opts, chromedp.EmulateMobile)
	}
	paused := chromedp.Events(d.tab, fetch.RequestPaused)
	d.do("set up the device", 10*time.Second,
		chromedp.EmulateViewport(width, height, opts...),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: "en-US"})
			return err
		}),
		chromedp.ExposeFunc("orderpayWallet", d.wallet),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: walletScripts})
			return err
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
				{URLPattern: m.SimURL + "/connect/oauth2/authorize?*"},
				{URLPattern: m.SimURL + "/oauth2/publicAppAuthorize.htm?*"},
				{URLPattern: "https://wx.tenpay.com/*"},
			}})
			return err
		}))
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			go d.intercept(ev)
		}
	}()
	return d
}

// intercept plays the wallets' pages for a paused request.
func (d *device) intercept(ev fetch.EventRequestPaused) {
	u := ev.Request.URL
	if !strings.HasPrefix(u, "https://wx.tenpay.com/") {
		// The wallet's OAuth page: the browser carries who is signed in.
		if _, err := chromedp.Call(d.tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID, URL: u + "&buyer=" + url.QueryEscape(d.buyer)}); err != nil {
			d.problem("continue %s: %v", u, err)
		}
		return
	}
	// WeChat's H5 cashier: WeChat opens, the buyer pays, the browser goes to redirect_url.
	referer, _ := ev.Request.Headers["Referer"].(string)
	res, err := d.payAtSimulator(map[string]any{"kind": "redirect", "channel": "wechat", "method": "h5", "url": u}, referer, phoneUA)
	if err != nil || res.ReturnURL == "" {
		d.problem("WeChat's H5 cashier (Referer %q): %+v, %v", referer, res, err)
		_, _ = chromedp.Call(d.tab, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: http.StatusBadRequest,
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}}, Body: []byte(fmt.Sprint(err))})
		return
	}
	if _, err := chromedp.Call(d.tab, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: http.StatusFound,
		ResponseHeaders: []*fetch.HeaderEntry{{Name: "Location", Value: res.ReturnURL}}}); err != nil {
		d.problem("back to %s: %v", res.ReturnURL, err)
	}
}

// walletCall is what the wallets' scripts hand the app: the instruction, and the page.
type walletCall struct {
	Pay       map[string]any `json:"pay"`
	Referer   string         `json:"referer"`
	UserAgent string         `json:"user_agent"`
}

// wallet is the wallet app paying what the page handed it.
func (d *device) wallet(_ context.Context, c walletCall) (string, error) {
	if d.lie.Load() {
		return "ok", nil // says paid, pays nothing
	}
	if _, err := d.payAtSimulator(c.Pay, c.Referer, c.UserAgent); err != nil {
		d.problem("the wallet paid %v: %v", c.Pay, err)
		return "", err
	}
	return "ok", nil
}

type simPaid struct {
	Status    string `json:"status"`
	ReturnURL string `json:"return_url"`
}

// payAtSimulator is the wallet paying an instruction, as the buyer, from this machine.
func (d *device) payAtSimulator(pay map[string]any, referer, ua string) (*simPaid, error) {
	body, _ := json.Marshal(map[string]any{"pay": pay, "buyer": d.buyer, "referer": referer, "user_agent": ua, "client_ip": "127.0.0.1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.m.SimURL+"/sim/pay", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /sim/pay: %d %s", resp.StatusCode, raw)
	}
	var res simPaid
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	d.paid.Add(1)
	return &res, nil
}

// waitPaid waits for the page to say PAID, as the order's status, and checks the API.
func (d *device) waitPaid(c *apiClient, no string) {
	d.t.Helper()
	d.do("see the page turn to paid", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#banner`)))
	if got := text(d.t, d.tab, "#banner"); got != "Paid ✓" {
		d.t.Fatalf("banner %q", got)
	}
	if isVisible(d.t, d.tab, "#checking") {
		d.t.Fatal("the paid page still says it is checking")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o, err := c.order(ctx, no); err != nil || o.Status != "PAID" {
		d.t.Fatalf("the API has order %s as %+v, %v", no, o, err)
	}
}

// visibleMethods are the ids of the ways to pay the page offers.
func visibleMethods(t *testing.T, tab context.Context) []string {
	return eval[[]string](t, tab, `Array.from(document.querySelectorAll("#choose button")).filter((b) => b.getClientRects().length > 0).map((b) => b.id)`)
}

func wantMethods(t *testing.T, tab context.Context, want ...string) {
	t.Helper()
	if got := visibleMethods(t, tab); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the cashier offers %v; want %v", got, want)
	}
}

// TestCashierBrowser drives the cashier as each device through the simulator to PAID, and
// the single code as each wallet. One orderpay and one Chromium, one story after another.
func TestCashierBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "cashier-tea", 2990, 100, "normal"); err != nil {
		t.Fatal(err)
	}
	newOrder := func(t *testing.T, buyer string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o, err := c.createOrder(ctx, buyer, "cashier-tea", 1)
		if err != nil {
			t.Fatal(err)
		}
		// The shop's pages in this browser are the order's buyer's (X-Buyer-Id): another
		// buyer's order would be not found. Its tabs share localStorage.
		do(t, newTab(t, browser), "name the browser's buyer", 10*time.Second,
			chromedp.Navigate(m.URL+"/healthz"),
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`localStorage.setItem("orderpay.buyer", %q)`, buyer)))
		return o.OrderNo
	}
	t.Run("DesktopQRCodes", func(t *testing.T) { desktopQRCodes(t, browser, m, c, newOrder(t, "cashier-desk")) })
	t.Run("DesktopAlipayPC", func(t *testing.T) { desktopAlipayPC(t, browser, m, c, newOrder(t, "cashier-pc")) })
	t.Run("PhoneAlipayWAP", func(t *testing.T) { phoneAlipayWAP(t, browser, m, c, newOrder(t, "cashier-wap")) })
	t.Run("PhoneWechatH5", func(t *testing.T) { phoneWechatH5(t, browser, m, c, newOrder(t, "cashier-h5")) })
	t.Run("InsideWechatJSAPI", func(t *testing.T) { insideWechatJSAPI(t, browser, m, c, newOrder(t, "cashier-jsapi")) })
	t.Run("InsideAlipayInApp", func(t *testing.T) { insideAlipayInApp(t, browser, m, c, newOrder(t, "cashier-inapp")) })
	t.Run("OneCodeScannedInWechat", func(t *testing.T) { oneCodeScanned(t, browser, m, c, newOrder(t, "cashier-one-wx"), wechatUA) })
	t.Run("OneCodeScannedInAlipay", func(t *testing.T) { oneCodeScanned(t, browser, m, c, newOrder(t, "cashier-one-ali"), alipayUA) })
	t.Run("WalletPagePaysAnInstruction", func(t *testing.T) { walletPagePaysAnInstruction(t, browser, m, c, newOrder(t, "cashier-wallet-page")) })
	t.Run("OneCodeWithABuyerLogin", func(t *testing.T) { oneCodeWithABuyerLogin(t, browser) })
}

// With buyers signed in by the shop's login (--buyer-auth jwt), the single code is drawn
// for the signed-in buyer's page (fetched with the token), and whoever scans it inside
// WeChat, with no login at all, pays that order by JSAPI with their own WeChat; both pages
// turn to paid. The scanner reads nothing else: another order of the same buyer is 401.
func oneCodeWithABuyerLogin(t *testing.T, browser context.Context) {
	secret := []byte("cashier-shop-login-secret-0123456789")
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	m, c := startMain(t, "", func(m *Main) {
		m.Config.BuyerAuth = buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: secretFile}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "login-tea", 1990, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	token := buyerauthtest.HS256(secret, "signed-in-sue", "", "", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	sue := *c.Client
	sue.Tokens = func(string) string { return token }
	o, err := sue.As("signed-in-sue").CreateOrder(ctx, "", "", chaos.Item{SKU: "login-tea", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sue.As("signed-in-sue").CreateOrder(ctx, "", "", chaos.Item{SKU: "login-tea", Qty: 2})
	if err != nil {
		t.Fatal(err)
	}
	desk := newDevice(t, browser, m, desktopUA, 1280, 900, "")
	desk.do("show the signed-in buyer's single code", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+o.OrderNo+"#token="+token),
		chromedp.WaitVisible(chromedp.CSS(`#one-url`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#one-url").textContent !== ""`))
	phone := newDevice(t, browser, m, wechatUA, 390, 844, "login-scanner")
	phone.do("scan it inside WeChat and pay", 30*time.Second,
		chromedp.Navigate(text(t, desk.tab, "#one-url")),
		chromedp.WaitVisible(chromedp.CSS(`#pay-wechat-jsapi`)),
		chromedp.Click(chromedp.CSS(`#pay-wechat-jsapi`)))
	asSue := &apiClient{sue.As("signed-in-sue")}
	phone.waitPaid(asSue, o.OrderNo)
	desk.waitPaid(asSue, o.OrderNo)
	ectx, ecancel := context.WithTimeout(phone.tab, 10*time.Second)
	defer ecancel()
	got, err := chromedp.Run(ectx, chromedp.Evaluate[int](`fetch("/v1/orders/`+other.OrderNo+`").then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || got != http.StatusUnauthorized {
		t.Fatalf("the scanner read the buyer's other order: %d, %v", got, err)
	}
}

// On a desktop the cashier offers each wallet's QR code and Alipay's web cashier, and shows
// the single code at once; asked for both wallets' codes it shows the three side by side.
// The wallet pays the WeChat code; the page turns to paid.
func desktopQRCodes(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, desktopUA, 1280, 900, "desk-dan")
	d.do("open the pay page on a desktop", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay`)),
		chromedp.WaitVisible(chromedp.CSS(`#one-img`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#one-img").complete && document.querySelector("#one-img").naturalWidth >= 200`))
	wantMethods(t, d.tab, "pay-alipay", "pay-wechat", "pay-alipay-pc")
	// Every text of the page is in both languages.
	const untranslated = `[...new Set([...document.querySelectorAll("[data-i18n], [data-i18n-alt]")].map((e) => e.dataset.i18n || e.dataset.i18nAlt)
		.concat(Object.keys(CASHIER_STRINGS.en), Object.keys(CASHIER_STRINGS.zh)))].filter((k) => !(k in STRINGS.en) || !(k in STRINGS.zh))`
	if missing := eval[[]string](t, d.tab, untranslated); len(missing) > 0 {
		t.Fatalf("texts without both languages: %v", missing)
	}
	if one := text(t, d.tab, "#one-url"); !strings.HasPrefix(one, m.URL+"/pay/"+no+"/scan?t=") {
		t.Fatalf("the single code holds %q", one)
	}
	d.do("ask for both wallets' codes", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-alipay`)),
		chromedp.WaitVisible(chromedp.CSS(`#more-wechat`)),
		chromedp.Click(chromedp.CSS(`#more-wechat`)),
		chromedp.WaitVisible(chromedp.CSS(`#qr2-img`)),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll(".codes img")].every((i) => i.complete && i.naturalWidth >= 200)`))
	alipayCode, wechatCode := text(t, d.tab, "#qr-text"), text(t, d.tab, "#qr2-text")
	if !strings.HasPrefix(alipayCode, "https://qr.alipay.com/") || !strings.HasPrefix(wechatCode, "weixin://") {
		t.Fatalf("the codes shown: %q and %q", alipayCode, wechatCode)
	}
	if isVisible(t, d.tab, "#choose") || isVisible(t, d.tab, "#more-wechat") || isVisible(t, d.tab, "#more-alipay") || !isVisible(t, d.tab, "#more-alipay-pc") {
		t.Fatal("with both codes shown the cashier still offers a code, or no longer the web cashier")
	}
	fullPageShot(t, d.tab, 1280, 900, "desktop", "cashier-desktop.png")
	fullPageShot(t, d.tab, 390, 844, "desktop-390", "cashier-desktop-390.png")
	do(t, d.tab, "back to 1280 px", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.walletPay(ctx, wechatCode); err != nil {
		t.Fatal(err)
	}
	d.waitPaid(c, no)
	if isVisible(t, d.tab, "#one") || isVisible(t, d.tab, "#qr") {
		t.Fatal("the paid page still shows a code")
	}
}

// On a desktop, Alipay's web cashier: the page posts Alipay's form to the (simulated)
// gateway, whose cashier's pay button pays and sends the browser back with Alipay's signed
// return; the page checks, and turns to paid on the channel's word.
func desktopAlipayPC(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, desktopUA, 1280, 900, "desk-pat")
	d.do("open Alipay's web cashier", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay-pc`)),
		chromedp.Click(chromedp.CSS(`#pay-alipay-pc`)),
		chromedp.WaitVisible(chromedp.CSS(`#out_trade_no`)))
	if got := eval[string](t, d.tab, `location.href`); !strings.HasPrefix(got, m.SimURL+"/gateway.do") {
		t.Fatalf("the form went to %s", got)
	}
	if got := text(t, d.tab, "#amount"); got != "¥29.90" {
		t.Fatalf("Alipay's cashier shows %q", got)
	}
	d.payAtAlipaysCashier()
	d.do("come back to the pay page", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#status`)))
	if got := eval[string](t, d.tab, `location.pathname + location.search`); got != "/pay/"+no {
		t.Fatalf("back on %s; the return's parameters stay in the address bar", got)
	}
	d.waitPaid(c, no)
}

// payAtAlipaysCashier pays at the simulated Alipay cashier page, as the device's buyer.
func (d *device) payAtAlipaysCashier() {
	d.t.Helper()
	d.do("pay at Alipay's cashier", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`input[name="buyer"]`), d.buyer),
		chromedp.Click(chromedp.CSS(`button[value="pay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#order-no`)))
}

// In a phone's browser: Alipay's and WeChat Pay's mobile cashiers. Alipay WAP: the
// (simulated) cashier, its pay button, back to the pay page, which says it is checking and
// then shows PAID.
func phoneAlipayWAP(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, phoneUA, 390, 844, "phone-pia")
	d.do("open the pay page on a phone", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay-wap`)))
	wantMethods(t, d.tab, "pay-alipay-wap", "pay-wechat-h5")
	if isVisible(t, d.tab, "#one") {
		t.Fatal("a phone shows the single code")
	}
	fullPageShot(t, d.tab, 390, 844, "phone-390", "cashier-phone-390.png")
	d.do("switch to Chinese", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "zh-CN"`))
	for sel, want := range map[string]string{"#pay-alipay-wap": "支付宝", "#pay-wechat-h5": "微信支付", "#choose-hint": "将打开钱包应用付款，付款后回到本页。"} {
		if got := text(t, d.tab, sel); got != want {
			t.Errorf("%s reads %q in Chinese; want %q", sel, got, want)
		}
	}
	shot(t, d.tab, "phone-zh-390")
	d.do("switch back to English", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "en"`))
	d.do("go to Alipay's mobile cashier", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-alipay-wap`)),
		chromedp.WaitVisible(chromedp.CSS(`#out_trade_no`)))
	if got := eval[string](t, d.tab, `location.href`); !strings.Contains(got, "alipay.trade.wap.pay") {
		t.Fatalf("the phone went to %s", got)
	}
	// The buyer leaves the cashier without paying: back on the pay page, nothing is paid,
	// whatever the page was told, and the way back to the cashier is offered.
	d.do("give up at Alipay's cashier", 20*time.Second,
		chromedp.Click(chromedp.CSS(`button[value="decline"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#checking`)),
		chromedp.WaitVisible(chromedp.CSS(`#next-go`)),
		chromedp.Sleep(2500*time.Millisecond))
	if got := eval[string](t, d.tab, `document.querySelector("#status").dataset.status`); got != "PENDING_PAYMENT" {
		t.Fatalf("after giving up the order is %s", got)
	}
	fullPageShot(t, d.tab, 390, 844, "checking-390", "cashier-checking-390.png")
	d.do("go back to Alipay's cashier", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#next-go`)),
		chromedp.WaitVisible(chromedp.CSS(`#out_trade_no`)))
	d.payAtAlipaysCashier()
	d.waitPaid(c, no)
}

// WeChat Pay H5: WeChat's cashier (the test's, paying at the simulator, which checks the
// Referer's domain and the buyer's address), then its redirect_url, the pay page, PAID.
func phoneWechatH5(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, phoneUA, 390, 844, "phone-hal")
	d.do("pay by WeChat Pay H5", 30*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-wechat-h5`)),
		chromedp.Click(chromedp.CSS(`#pay-wechat-h5`)))
	d.waitPaid(c, no)
	if d.paid.Load() != 1 {
		t.Fatalf("WeChat's cashier paid %d times", d.paid.Load())
	}
}

// Inside WeChat: WeChat Pay by JSAPI. The page learns the buyer's openid through WeChat's
// OAuth (the single code's way, then back), asks for the JSAPI instruction and hands it to
// WeixinJSBridge. A wallet that says "ok" without paying leaves the order unpaid: the page
// checks and says so; paid for real, the page turns to paid.
func insideWechatJSAPI(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, wechatUA, 390, 844, "wx-wendy")
	d.do("open the pay page inside WeChat", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-wechat-jsapi`)))
	wantMethods(t, d.tab, "pay-wechat-jsapi")
	fullPageShot(t, d.tab, 390, 844, "wechat-390", "cashier-wechat-390.png")
	d.lie.Store(true)
	d.do("pay by WeChat Pay, and the wallet says ok without paying", 30*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-wechat-jsapi`)),
		chromedp.WaitVisible(chromedp.CSS(`#scan-note`)),
		chromedp.WaitVisible(chromedp.CSS(`#checking`)),
		chromedp.Sleep(3*time.Second))
	if got := eval[string](t, d.tab, `document.querySelector("#status").dataset.status`); got != "PENDING_PAYMENT" || d.paid.Load() != 0 {
		t.Fatalf("on the wallet's word alone the order is %s", got)
	}
	d.lie.Store(false)
	d.do("pay by WeChat Pay", 20*time.Second, chromedp.Click(chromedp.CSS(`#next-go`)))
	d.waitPaid(c, no)
}

// Inside Alipay: Alipay in the app. The page learns the buyer's user id through Alipay's
// OAuth, asks for the in-app trade and hands it to my.tradePay.
func insideAlipayInApp(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	d := newDevice(t, browser, m, alipayUA, 390, 844, "ali-amy")
	d.do("pay in the Alipay app", 30*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay-inapp`)))
	wantMethods(t, d.tab, "pay-alipay-wap", "pay-alipay-inapp")
	d.do("pay in the Alipay app", 30*time.Second, chromedp.Click(chromedp.CSS(`#pay-alipay-inapp`)))
	d.waitPaid(c, no)
	if d.paid.Load() != 1 {
		t.Fatalf("the Alipay app paid %d times", d.paid.Load())
	}
}

// The single code, read off a desktop's pay page, opened by a phone inside WeChat (or
// Alipay): the wallet's OAuth, then the cashier inside the wallet, for that order, paid
// with the scanner's own wallet (JSAPI, or in the app). The phone's page and the desktop's
// both turn to paid.
func oneCodeScanned(t *testing.T, browser context.Context, m *Main, c *apiClient, no, ua string) {
	desk := newDevice(t, browser, m, desktopUA, 1280, 900, "")
	desk.do("show the single code", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#one-url`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#one-url").textContent !== ""`))
	code := text(t, desk.tab, "#one-url")
	wallet, method := "wechat", "#pay-wechat-jsapi"
	if ua == alipayUA {
		wallet, method = "alipay", "#pay-alipay-inapp"
	}
	phone := newDevice(t, browser, m, ua, 390, 844, "scanner-"+wallet)
	phone.do("open the single code inside "+wallet, 30*time.Second,
		chromedp.Navigate(code),
		chromedp.WaitVisible(chromedp.CSS(`#scan-note`)),
		chromedp.WaitVisible(chromedp.CSS(method)))
	if got := eval[string](t, phone.tab, `location.pathname`); got != "/pay/"+no {
		t.Fatalf("the scan ended on %s", got)
	}
	if isVisible(t, phone.tab, "#cancel") || isVisible(t, phone.tab, "header nav") {
		t.Fatal("the scanner is offered the buyer's own links or a cancel")
	}
	if wallet == "wechat" {
		fullPageShot(t, phone.tab, 390, 844, "scanned-390", "cashier-scanned-wechat-390.png")
	}
	phone.do("pay inside "+wallet, 30*time.Second, chromedp.Click(chromedp.CSS(method)))
	phone.waitPaid(c, no)
	desk.waitPaid(c, no)
}

// The simulator's wallet page pays an instruction pasted by hand: the whole answer of a
// WeChat H5 pay request, on a phone's browser (the page's preset), the Referer left empty
// (the link's redirect_url, the shop's pay page); its link back to the shop opens the pay
// page, which shows PAID.
func walletPagePaysAnInstruction(t *testing.T, browser context.Context, m *Main, c *apiClient, no string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.PayBy(ctx, no, chaos.PayRequest{Channel: "wechat", Method: "h5"})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	d := newDevice(t, browser, m, desktopUA, 1280, 900, "")
	d.do("pay the instruction on the wallet page", 20*time.Second,
		chromedp.Navigate(m.SimURL+"/sim/wallet"),
		chromedp.WaitVisible(chromedp.CSS(`#pay-instruction`)),
		chromedp.SetValue(chromedp.CSS(`#pay-json`), string(answer)),
		chromedp.SetValue(chromedp.CSS(`#buyer`), "walt"),
		chromedp.Click(chromedp.CSS(`#pay-instruction`)),
		chromedp.WaitVisible(chromedp.CSS(`#instruction-status`)))
	if got := text(t, d.tab, "#instruction-status"); got != "SUCCESS" {
		t.Fatalf("the wallet page says %q (%s)", got, text(t, d.tab, "#instruction-error"))
	}
	if ua := eval[string](t, d.tab, `document.querySelector("#user-agent").value`); !strings.Contains(ua, "iPhone") || strings.Contains(ua, "MicroMessenger") {
		t.Fatalf("the phone preset's User-Agent is %q", ua)
	}
	shot(t, d.tab, "wallet-instruction", "wallet-instruction.png")
	d.do("go back to the shop", 20*time.Second, chromedp.Click(chromedp.CSS(`#return-link`)))
	d.waitPaid(c, no)
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The till page (/pos) in Chromium, against a whole orderpay served with the channels file
// of `orderpay sim` running as a process of its own (the production code path to the
// channels): a till set up with a fresh app's key takes walk-in sales by each channel's
// payment code, issued by the simulated wallet and typed into the scan field as a barcode
// scanner types it (the digits, then Enter). The page's requests are watched in the
// browser (the Network domain): what the page sent, and what it did not. Screenshots of
// the till go to docs/screenshots with ORDERPAY_UPDATE_SCREENSHOTS=1.

// tillPage is the till page in a tab, with what it sent.
type tillPage struct {
	t      *testing.T
	tab    context.Context
	m      *Main
	c      *apiClient
	simURL string
	key    string // the API key of the app the till is set up with

	mu        sync.Mutex
	urls      []string                          // every request of the tab, in order
	pos       []posRequest                      // its requests to /v1/pos/…, in order
	responses map[network.RequestID]http.Header // the answers to them
}

// posRequest is one request of the page to the counter's API.
type posRequest struct {
	id                           network.RequestID
	method, path, idempotencyKey string
	body                         string
}

func (p *tillPage) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	do(p.t, p.tab, what, timeout, steps...)
}

// watch records the tab's requests and the answers to those of the counter's API.
func (p *tillPage) watch() {
	sent := chromedp.Events(p.tab, network.RequestWillBeSent)
	answered := chromedp.Events(p.tab, network.ResponseReceived)
	go func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			u, _ := url.Parse(ev.Request.URL)
			p.mu.Lock()
			p.urls = append(p.urls, ev.Request.URL)
			if u != nil && strings.HasPrefix(u.Path, "/v1/pos/") {
				r := posRequest{id: ev.RequestID, method: ev.Request.Method, path: u.RequestURI()}
				for k, v := range ev.Request.Headers {
					if strings.EqualFold(k, "Idempotency-Key") {
						r.idempotencyKey = fmt.Sprint(v)
					}
				}
				for _, e := range ev.Request.PostDataEntries {
					r.body += string(e.Bytes)
				}
				p.pos = append(p.pos, r)
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range answered {
			if err != nil {
				return
			}
			h := http.Header{}
			for k, v := range ev.Response.Headers {
				h.Set(k, fmt.Sprint(v))
			}
			p.mu.Lock()
			p.responses[ev.RequestID] = h
			p.mu.Unlock()
		}
	}()
}

// posts are the page's POST /v1/pos/payments so far.
func (p *tillPage) posts() []posRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []posRequest
	for _, r := range p.pos {
		if r.method == http.MethodPost && r.path == "/v1/pos/payments" {
			out = append(out, r)
		}
	}
	return out
}

// settled makes the page read its list (the Refresh button) and waits until the browser
// reports that request: the browser reports a tab's requests in the order they are sent,
// so every request the page sent before it has been recorded by then. It is how the test
// knows that a request the page should not have sent was not sent.
func (p *tillPage) settled() {
	p.t.Helper()
	p.mu.Lock()
	n := len(p.pos)
	p.mu.Unlock()
	p.do("read the till's list again", 10*time.Second, chromedp.Click(chromedp.CSS(`#refresh`)))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		var listed bool
		for _, r := range p.pos[n:] {
			listed = listed || (r.method == http.MethodGet && strings.HasPrefix(r.path, "/v1/pos/payments?"))
		}
		p.mu.Unlock()
		if listed {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatal("the browser reported no request of the list after Refresh")
		}
	}
}

// code is a fresh payment code from the simulated wallet of channel, whose buyer behaves as
// behaviour says (after: when a password buyer confirms, in seconds).
func (p *tillPage) code(channel, behaviour string, after float64) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := map[string]any{"channel": channel, "buyer": "till-buyer-" + channel, "behaviour": behaviour}
	if after > 0 {
		body["after_seconds"] = after
	}
	var out struct {
		AuthCode string `json:"auth_code"`
	}
	if err := p.c.call(ctx, http.MethodPost, p.simURL+"/sim/wallet/codes", nil, body, &out); err != nil || out.AuthCode == "" {
		p.t.Fatalf("POST /sim/wallet/codes %v: %+v, %v", body, out, err)
	}
	return out.AuthCode
}

// simCode is the simulated wallet's view of a code: live, used or expired.
func (p *tillPage) simCode(code string) (state, outTradeNo string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out struct {
		State      string `json:"state"`
		OutTradeNo string `json:"out_trade_no"`
	}
	if err := p.c.call(ctx, http.MethodGet, p.simURL+"/sim/wallet/codes/"+code, nil, nil, &out); err != nil {
		p.t.Fatalf("GET /sim/wallet/codes/%s: %v", code, err)
	}
	return out.State, out.OutTradeNo
}

// enterAmount types the amount as a cashier does: into the amount field, then Enter, which
// hands the focus to the scan field.
func (p *tillPage) enterAmount(yuan string) {
	p.t.Helper()
	p.do("enter the amount "+yuan, 10*time.Second,
		clearField("#amount"),
		chromedp.Click(chromedp.CSS(`#amount`)),
		chromedp.KeyEvent(yuan+"\r"),
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.id === "code"`, chromedp.WithPollingTimeout(5*time.Second)))
}

// scan types code as a barcode scanner does: into whatever has the focus, which must be the
// scan field, digit after digit, then Enter.
func (p *tillPage) scan(code string) {
	p.t.Helper()
	p.do("scan "+code, 10*time.Second,
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.id === "code"`, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.KeyEvent(code+"\r"))
}

// waitResult waits for the result panel to show the sale of code as status, and returns
// its title and message. A sale that ends otherwise fails at once, with what the page says.
func (p *tillPage) waitResult(code, status string, within time.Duration) (title, message string) {
	p.t.Helper()
	tail := jsString("…" + code[len(code)-4:])
	p.do("see the till show "+status+" for "+code, within,
		chromedp.Poll[chromedp.Void](`(() => { const s = document.querySelector("#result").dataset.status;
			return document.querySelector("#result-detail").textContent.includes(`+tail+`) &&
				(s === `+jsString(status)+` || !["", "WAITING", "UNKNOWN"].includes(s)); })()`, chromedp.WithPollingTimeout(within)))
	title, message = text(p.t, p.tab, "#result-title"), text(p.t, p.tab, "#result-message")
	if got := eval[string](p.t, p.tab, `document.querySelector("#result").dataset.status`); got != status {
		shot(p.t, p.tab, "failed-"+status)
		p.t.Fatalf("the till shows %s for %s, not %s: %q, %q (%s)", got, code, status, title, message, text(p.t, p.tab, "#result-detail"))
	}
	return title, message
}

// posPayment is the counter's API's view of a till payment.
type posPayment struct {
	No          string    `json:"pos_payment_no"`
	Status      string    `json:"status"`
	Channel     string    `json:"channel"`
	Amount      int64     `json:"amount"`
	PaymentNo   string    `json:"payment_no"`
	StoreID     string    `json:"store_id"`
	TillID      string    `json:"till_id"`
	Description string    `json:"description"`
	CodeTail    string    `json:"code_tail"`
	Refusal     string    `json:"refusal"`
	CreatedAt   time.Time `json:"created_at"`
	PaidAt      time.Time `json:"paid_at"`
}

// latest is the till's payments as the API lists them, newest first.
func (p *tillPage) latest(key string) []posPayment {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out struct {
		Payments []posPayment `json:"payments"`
	}
	if err := p.c.AppCall(ctx, key, http.MethodGet, "/v1/pos/payments?till_id=t3&limit=20", nil, &out); err != nil {
		p.t.Fatal(err)
	}
	return out.Payments
}

// listRow is the first row of the page's list of the till's last payments.
type listRow struct {
	No     string `json:"no"`
	Status string `json:"status"`
	Amount string `json:"amount"`
	Tail   string `json:"tail"`
	Word   string `json:"word"`
	Rows   int    `json:"rows"`
}

// waitFirstRow waits until the page's list starts with the payment no, and returns the row.
func (p *tillPage) waitFirstRow(no string) listRow {
	p.t.Helper()
	p.do("see "+no+" first in the till's list", 10*time.Second,
		chromedp.Poll[chromedp.Void](`(document.querySelector("#payments tbody tr") || {dataset: {}}).dataset.no === "`+no+`"`, chromedp.WithPollingTimeout(10*time.Second)))
	return eval[listRow](p.t, p.tab, `(() => { const r = document.querySelector("#payments tbody tr");
		return { no: r.dataset.no, status: r.dataset.status, amount: r.querySelector(".amount").firstChild.textContent,
			tail: r.querySelector(".tail").textContent, word: r.querySelector(".status").textContent,
			rows: document.querySelectorAll("#payments tbody tr[data-no]").length }; })()`)
}

// TestPosBrowser drives the till page through a set-up and a day at the counter. One
// orderpay, one simulator process and one Chromium, one story after another.
func TestPosBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	simURL, channels := startSimProcess(t, t.TempDir(), "key", "pubkey")
	// The till's wait at its least (20 s rather than 35 s): the story of a payment still
	// unknown when the wait is over waits that long.
	m, _ := startMain(t, "", func(m *Main) { m.Config.Channels, m.Config.PosWait = channels, 20*time.Second })
	c := newAPIClient(m.URL, simURL, m.AdminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	app, err := c.CreateApp(ctx, "till sh-01 t3", nil, []string{"alipay", "wechat"})
	if err != nil {
		t.Fatal(err)
	}
	wechatOnly, err := c.CreateApp(ctx, "a till of WeChat Pay only", nil, []string{"wechat"})
	if err != nil {
		t.Fatal(err)
	}
	p := &tillPage{t: t, tab: newTab(t, browser), m: m, c: c, simURL: simURL, key: app.APIKey, responses: map[network.RequestID]http.Header{}}
	p.watch()
	p.do("size the till's screen", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	// Each story runs in the tab as the last one left it, with the till's *testing.T.
	story := func(name string, f func()) {
		t.Run(name, func(st *testing.T) {
			p.t = st
			defer func() { p.t = t }()
			f()
		})
	}
	story("SetUp", p.setUp)
	story("WalkInSaleAlipay", func() { p.walkIn("alipay", "19.99", 1999) })
	story("WalkInSaleWechat", func() { p.walkIn("wechat", "0.29", 29) })
	story("NotEnoughBalance", p.notEnoughBalance)
	story("MalformedCodeNeverSent", p.malformedCode)
	story("CodeOfAChannelTheTillDoesNotTake", func() { p.channelNotTaken(wechatOnly.APIKey) })
	story("PasswordThenPaid", p.passwordThenPaid)
	story("UnknownThenPolledUntilPaid", p.unknownThenPaid)
	story("RetryAfterALostAnswerChargesOnce", p.retryAfterALostAnswer)
	story("KeyNeverInAURL", p.keyNeverInAURL)
}

// The till is set up once: a page without a set-up asks for it; a wrong key is refused and
// nothing is kept; the till's key, store and till are kept in localStorage, and the header
// names the store, the till and the key's id, never the key. A reload keeps the set-up;
// the page is served with the other pages' Content-Security-Policy, and every text is in
// both languages.
func (p *tillPage) setUp() {
	t := p.t
	for _, path := range []string{"/pos", "/ops"} {
		status, h, _ := get(t, p.m.URL+path, nil)
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", path, status, h.Get("Content-Type"))
		}
	}
	_, pos, _ := get(t, p.m.URL+"/pos", nil)
	_, ops, _ := get(t, p.m.URL+"/ops", nil)
	if csp := pos.Get("Content-Security-Policy"); csp == "" || csp != ops.Get("Content-Security-Policy") {
		t.Fatalf("/pos is served with the CSP %q; the console with %q", csp, ops.Get("Content-Security-Policy"))
	}
	p.do("open the till page", 20*time.Second,
		chromedp.Navigate(p.m.URL+"/pos"),
		chromedp.WaitVisible(chromedp.CSS(`#set-key`)))
	if isVisible(t, p.tab, "#till") {
		t.Fatal("a till without a set-up shows the sale")
	}
	const untranslated = `[...new Set([...document.querySelectorAll("[data-i18n], [data-i18n-placeholder]")].map((e) => e.dataset.i18n || e.dataset.i18nPlaceholder)
		.concat(Object.keys(POS_STRINGS.en), Object.keys(POS_STRINGS.zh), ["alipay", "wechat"]))].filter((k) => !(k in STRINGS.en) || !(k in STRINGS.zh))`
	if missing := eval[[]string](t, p.tab, untranslated); len(missing) > 0 {
		t.Fatalf("texts without both languages: %v", missing)
	}
	p.do("set the till up with a wrong key", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#set-key`), "opk_nosuchkey_0123456789abcdef"),
		chromedp.SendKeys(chromedp.CSS(`#set-store`), "sh-01"),
		chromedp.SendKeys(chromedp.CSS(`#set-till`), "t3"),
		chromedp.Click(chromedp.CSS(`#set-save`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#setup-error").textContent.includes("refused")`, chromedp.WithPollingTimeout(10*time.Second)))
	if kept := eval[*string](t, p.tab, `localStorage.getItem("orderpay.pos")`); kept != nil || isVisible(t, p.tab, "#till") {
		t.Fatalf("a refused key was kept (%v) or the till opened", kept)
	}
	p.do("set the till up with its key", 20*time.Second,
		clearField("#set-key"),
		chromedp.SendKeys(chromedp.CSS(`#set-key`), p.key),
		chromedp.Click(chromedp.CSS(`#set-save`)),
		chromedp.WaitVisible(chromedp.CSS(`#code`)))
	p.checkSetUp("sh-01", "t3", p.key)
	p.do("reload the till", 20*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#code`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#payments tbody").textContent.includes("No payments")`, chromedp.WithPollingTimeout(10*time.Second)))
	p.checkSetUp("sh-01", "t3", p.key)
}

// checkSetUp checks the till is set up with store, till and key, shows which, never the
// key, and has its scan field focused.
func (p *tillPage) checkSetUp(store, till, key string) {
	t := p.t
	t.Helper()
	if got := eval[map[string]string](t, p.tab, `JSON.parse(localStorage.getItem("orderpay.pos"))`); got["key"] != key || got["store"] != store || got["till"] != till {
		t.Fatalf("the till keeps %v", got)
	}
	if got, want := strings.Join(strings.Fields(text(t, p.tab, "#till-who")), " "), "store "+store+" till "+till+" key "+strings.Join(strings.SplitN(key, "_", 3)[:2], "_")+"_…"; got != want {
		t.Fatalf("the header says %q; want %q", got, want)
	}
	if eval[bool](t, p.tab, `document.documentElement.outerHTML.includes(`+jsString(key)+`) || document.body.innerText.includes(`+jsString(key)+`) || document.querySelector("#set-key").value !== ""`) {
		t.Fatal("the page shows the key")
	}
	p.do("find the scan field focused", 5*time.Second,
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.id === "code"`, chromedp.WithPollingTimeout(5*time.Second)))
}

// A walk-in sale by channel's code: the cashier types the amount (yuan, converted to whole
// fen from its digits: 19.99 and 0.29 are where a float's × 100 goes wrong) and scans the
// buyer's code; the page shows PAID, and the list shows the payment; the API has it paid,
// for that many fen, at that store and till, under one new Idempotency-Key.
func (p *tillPage) walkIn(channel, yuan string, fen int64) {
	t := p.t
	code := p.code(channel, "confirm", 0)
	before := p.posts()
	p.enterAmount(yuan)
	p.scan(code)
	title, message := p.waitResult(code, "PAID", 40*time.Second)
	money := fmt.Sprintf("¥%d.%02d", fen/100, fen%100)
	if want := money + " · " + map[string]string{"alipay": "Alipay", "wechat": "WeChat Pay"}[channel]; title != "Paid ✓" || message != want {
		t.Fatalf("the paid result reads %q, %q; want %q", title, message, want)
	}
	got := p.latest(p.key)
	if len(got) == 0 {
		t.Fatal("the API lists no till payment")
	}
	pay := got[0]
	if pay.Status != "PAID" || pay.Channel != channel || pay.Amount != fen || pay.StoreID != "sh-01" || pay.TillID != "t3" || pay.CodeTail != code[len(code)-4:] {
		t.Fatalf("the API has the sale as %+v; want PAID %d fen by %s at sh-01/t3", pay, fen, channel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ap, err := p.c.AppPayment(ctx, p.key, pay.PaymentNo); err != nil || ap.Status != "SUCCESS" || ap.Amount != fen {
		t.Fatalf("the walk-in sale's app payment: %+v, %v", ap, err)
	}
	row := p.waitFirstRow(pay.No)
	if row.Status != "PAID" || row.Word != "Paid" || row.Amount != money || row.Tail != "…"+pay.CodeTail {
		t.Fatalf("the list's first row is %+v", row)
	}
	after := p.posts()
	if len(after) != len(before)+1 {
		t.Fatalf("the sale sent %d payments", len(after)-len(before))
	}
	sent := after[len(after)-1]
	var body struct {
		AuthCode string `json:"auth_code"`
		Amount   int64  `json:"amount"`
		StoreID  string `json:"store_id"`
		TillID   string `json:"till_id"`
	}
	if err := json.Unmarshal([]byte(sent.body), &body); err != nil || body.AuthCode != code || body.Amount != fen || body.StoreID != "sh-01" || body.TillID != "t3" ||
		sent.idempotencyKey == "" || len(sent.idempotencyKey) > 60 {
		t.Fatalf("the sale was sent as %+v (%v)", sent, err)
	}
	for _, r := range before {
		if r.idempotencyKey == sent.idempotencyKey {
			t.Fatalf("a new sale was sent under an earlier sale's key %s", sent.idempotencyKey)
		}
	}
	if eval[string](t, p.tab, `document.querySelector("#amount").value`) != "" {
		t.Fatal("after a paid sale the amount stays")
	}
}

// A buyer whose balance is short: the page shows REFUSED in the cashier's words, in both
// languages, keeps the amount for another way to pay, and the list shows the refusal.
func (p *tillPage) notEnoughBalance() {
	t := p.t
	code := p.code("alipay", "short", 0)
	p.enterAmount("88")
	p.scan(code)
	title, message := p.waitResult(code, "REFUSED", 40*time.Second)
	if title != "Refused: not paid" || !strings.HasPrefix(message, "Not enough balance") {
		t.Fatalf("the refusal reads %q, %q", title, message)
	}
	pay := p.latest(p.key)[0]
	if pay.Status != "REFUSED" || pay.Refusal != "BALANCE" || pay.Amount != 8800 || pay.CodeTail != code[len(code)-4:] {
		t.Fatalf("the API has the refused sale as %+v", pay)
	}
	if row := p.waitFirstRow(pay.No); row.Status != "REFUSED" || row.Word != "Refused" || row.Amount != "¥88.00" {
		t.Fatalf("the list's first row is %+v", row)
	}
	p.do("read the refusal in Chinese", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "zh-CN"`))
	if title, message := text(t, p.tab, "#result-title"), text(t, p.tab, "#result-message"); title != "支付被拒绝：未收款" || !strings.HasPrefix(message, "余额不足") {
		t.Errorf("in Chinese the refusal reads %q, %q", title, message)
	}
	if word := text(t, p.tab, "#payments tbody tr .status"); word != "被拒绝" {
		t.Errorf("in Chinese the list says %q", word)
	}
	shot(t, p.tab, "refused-zh")
	p.do("back to English", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "en"`))
	if got := eval[string](t, p.tab, `document.querySelector("#amount").value`); got != "88" {
		t.Fatalf("after a refusal the amount field holds %q", got)
	}
}

// A code of no channel's shape (too short; 18 digits starting 16; letters) is refused on
// the page: nothing is sent, and the scan field is ready for the next scan.
func (p *tillPage) malformedCode() {
	t := p.t
	before := len(p.posts())
	p.enterAmount("5")
	for _, code := range []string{"1234567890", "161234567890123456", "2812345678901234567890123"} {
		p.scan(code)
		p.do("see "+code+" refused on the page", 5*time.Second,
			chromedp.WaitVisible(chromedp.CSS(`#result[data-status="INVALID"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#result-detail").textContent.endsWith("…`+code[len(code)-4:]+`")`, chromedp.WithPollingTimeout(5*time.Second)))
		if title, message := text(t, p.tab, "#result-title"), text(t, p.tab, "#result-message"); title != "Not a payment code" || !strings.Contains(message, "Nothing was sent") {
			t.Fatalf("%s: the page says %q, %q", code, title, message)
		}
		if v := eval[string](t, p.tab, `document.querySelector("#code").value`); v != "" {
			t.Fatalf("after %s the scan field holds %q", code, v)
		}
	}
	shot(t, p.tab, "invalid")
	p.settled()
	if n := len(p.posts()); n != before {
		t.Fatalf("malformed codes sent %d payments", n-before)
	}
}

// A code of a channel the till's app does not take is refused by the server (400
// EINVALID), and the page shows its words: the till is set up again with the key of an app
// of WeChat Pay only (whose list of this till is empty), then back with its own.
func (p *tillPage) channelNotTaken(wechatOnlyKey string) {
	t := p.t
	p.do("set the till up with another app's key", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#settings`)),
		chromedp.WaitVisible(chromedp.CSS(`#set-key`)),
		chromedp.SendKeys(chromedp.CSS(`#set-key`), wechatOnlyKey),
		chromedp.Click(chromedp.CSS(`#set-save`)),
		chromedp.WaitVisible(chromedp.CSS(`#code`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#payments tbody").textContent.includes("No payments")`, chromedp.WithPollingTimeout(10*time.Second)))
	p.checkSetUp("sh-01", "t3", wechatOnlyKey)
	code := p.code("alipay", "confirm", 0)
	before := len(p.posts())
	p.enterAmount("5")
	p.scan(code)
	title, message := p.waitResult(code, "ERROR", 20*time.Second)
	if title != "Refused by orderpay" || !strings.HasPrefix(message, "EINVALID: auth_code:") || !strings.Contains(message, "alipay") {
		t.Fatalf("the server's refusal reads %q, %q", title, message)
	}
	if n := len(p.posts()); n != before+1 {
		t.Fatalf("the refused sale sent %d payments", n-before)
	}
	if state, _ := p.simCode(code); state != "live" {
		t.Fatalf("the refused code is %s at the wallet", state)
	}
	p.do("set the till up with its own key again", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#settings`)),
		chromedp.WaitVisible(chromedp.CSS(`#set-key`)),
		chromedp.SendKeys(chromedp.CSS(`#set-key`), p.key),
		chromedp.Click(chromedp.CSS(`#set-save`)),
		chromedp.WaitVisible(chromedp.CSS(`#code`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#payments tbody tr[data-no]").length === 3`, chromedp.WithPollingTimeout(10*time.Second)))
	p.checkSetUp("sh-01", "t3", p.key)
}

// A buyer asked for a password, who types it 6 s later: the page says it is waiting for
// the buyer, counting the seconds; a second scan meanwhile is refused on the page and
// never sent; then the page shows PAID.
func (p *tillPage) passwordThenPaid() {
	t := p.t
	code := p.code("wechat", "password", 6)
	before := len(p.posts())
	p.enterAmount("36.80")
	p.scan(code)
	p.waitResult(code, "WAITING", 10*time.Second)
	p.do("see the seconds counted while the buyer types the password", 10*time.Second,
		chromedp.Poll[chromedp.Void](`Number(document.querySelector("#elapsed").dataset.seconds) >= 3 && !document.querySelector("#elapsed").classList.contains("hidden")`,
			chromedp.WithPollingTimeout(10*time.Second)))
	if title, elapsed := text(t, p.tab, "#result-title"), text(t, p.tab, "#elapsed"); title != "Waiting for the buyer to confirm…" || !strings.HasSuffix(elapsed, " s") {
		t.Fatalf("waiting, the page says %q, %q", title, elapsed)
	}
	fullPageShot(t, p.tab, 390, 844, "waiting-390", "pos-waiting-390.png")
	p.do("back to 1280 px", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	p.scan(p.code("alipay", "confirm", 0))
	p.do("see the second scan refused", 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`#scan-refused`)))
	if got := text(t, p.tab, "#scan-refused"); !strings.Contains(got, "Do not scan again") {
		t.Fatalf("the second scan is refused with %q", got)
	}
	if s := eval[string](t, p.tab, `document.querySelector("#result").dataset.status`); s != "WAITING" {
		t.Fatalf("after a second scan the result is %s", s)
	}
	p.waitResult(code, "PAID", 40*time.Second)
	if isVisible(t, p.tab, "#scan-refused") || isVisible(t, p.tab, "#elapsed") {
		t.Fatal("the paid page still refuses scans or counts seconds")
	}
	p.settled()
	if n := len(p.posts()); n != before+1 {
		t.Fatalf("the sale and a second scan sent %d payments", n-before)
	}
	pay := p.latest(p.key)[0]
	if pay.Status != "PAID" || pay.Amount != 3680 || pay.CodeTail != code[len(code)-4:] || pay.PaidAt.Sub(pay.CreatedAt) < 5*time.Second {
		t.Fatalf("the API has the sale as %+v; want PAID 3680 fen, paid at least 5 s after it began", pay)
	}
	p.waitFirstRow(pay.No)
}

// A buyer who opens WeChat's password dialog and leaves it open: WeChat keeps the order
// USERPAYING and refuses to reverse it meanwhile, so the till's wait ends with UNKNOWN.
// The page says so, and not to scan again (a scan is refused), and asks the API about the
// payment every poll_after_seconds; when the buyer confirms at last, the page shows PAID.
func (p *tillPage) unknownThenPaid() {
	t := p.t
	code := p.code("wechat", "never", 0)
	before := len(p.posts())
	p.enterAmount("9.90")
	p.scan(code)
	title, message := p.waitResult(code, "UNKNOWN", 40*time.Second)
	if detail := text(t, p.tab, "#result-detail"); title != "No result yet" || !strings.Contains(message, "do not scan again") || !strings.Contains(detail, "asks again every 5 s") {
		t.Fatalf("with the result unknown the page says %q, %q, %q", title, message, detail)
	}
	if secs := eval[float64](t, p.tab, `Number(document.querySelector("#elapsed").dataset.seconds)`); secs < 19 || !isVisible(t, p.tab, "#elapsed") {
		t.Fatalf("with the result unknown the page shows %v s waited", secs)
	}
	shot(t, p.tab, "unknown")
	pay := p.latest(p.key)[0]
	if pay.Status != "UNKNOWN" || pay.CodeTail != code[len(code)-4:] {
		t.Fatalf("the API has the sale as %+v", pay)
	}
	if row := p.waitFirstRow(pay.No); row.Status != "UNKNOWN" || row.Word != "Waiting" {
		t.Fatalf("with the result unknown the list's first row is %+v", row)
	}
	p.scan(p.code("alipay", "confirm", 0))
	p.do("see a scan refused while the result is unknown", 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`#scan-refused`)))
	polled := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := 0
		for _, r := range p.pos {
			if r.method == http.MethodGet && r.path == "/v1/pos/payments/"+pay.No {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(15 * time.Second); polled() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not ask about %s while it was unknown", pay.No)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.c.call(ctx, http.MethodPost, p.simURL+"/sim/wallet/codes/"+code+"/confirm", nil, nil, nil); err != nil {
		t.Fatalf("the buyer confirms in WeChat: %v", err)
	}
	p.waitResult(code, "PAID", 30*time.Second)
	p.settled()
	if n := len(p.posts()); n != before+1 {
		t.Fatalf("the sale and a scan while unknown sent %d payments", n-before)
	}
	if pay := p.latest(p.key)[0]; pay.Status != "PAID" || pay.Amount != 990 {
		t.Fatalf("the API has the sale as %+v", pay)
	}
	if row := p.waitFirstRow(pay.No); row.Status != "PAID" {
		t.Fatalf("the list's first row is %+v", row)
	}
}

// The answer to a sale is lost on its way back (the browser sees the connection reset
// after the server answered): the page says there was no answer, refuses a new scan, and
// Retry sends the same sale under the same Idempotency-Key, which the server answers as
// the same payment: PAID, charged once.
func (p *tillPage) retryAfterALostAnswer() {
	t := p.t
	paused := chromedp.Events(p.tab, fetch.RequestPaused)
	p.do("lose the next sale's answer", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
			{URLPattern: p.m.URL + "/v1/pos/payments", RequestStage: fetch.RequestStageResponse},
		}})
		return err
	}))
	go func() {
		first := true
		for ev, err := range paused {
			if err != nil {
				return
			}
			if ev.Request.Method != http.MethodPost {
				_, _ = chromedp.Call(p.tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
				continue
			}
			if first {
				first = false
				_, _ = chromedp.Call(p.tab, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
				continue
			}
			_, _ = chromedp.Call(p.tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	defer p.do("stop losing answers", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, fetch.Disable, cdp.Empty{})
		return err
	}))
	code := p.code("alipay", "confirm", 0)
	before := len(p.posts())
	p.do("describe the sale", 5*time.Second, chromedp.Click(chromedp.CSS(`#description`)), chromedp.KeyEvent("Flat white"))
	p.enterAmount("12.50")
	p.scan(code)
	title, message := p.waitResult(code, "NETWORK", 40*time.Second)
	if title != "No answer from orderpay" || !strings.Contains(message, "never charges twice") || !isVisible(t, p.tab, "#retry") {
		t.Fatalf("with the answer lost the page says %q, %q", title, message)
	}
	if state, _ := p.simCode(code); state != "used" {
		t.Fatalf("the lost sale's code is %s at the wallet: the server never had it", state)
	}
	p.scan(p.code("wechat", "confirm", 0))
	p.do("see a new scan refused until Retry", 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`#scan-refused`)))
	if got := text(t, p.tab, "#scan-refused"); !strings.Contains(got, "press Retry") {
		t.Fatalf("a scan before Retry is refused with %q", got)
	}
	p.do("retry", 5*time.Second, chromedp.Click(chromedp.CSS(`#retry`)))
	p.waitResult(code, "PAID", 40*time.Second)
	p.settled()
	sent := p.posts()[before:]
	if len(sent) != 2 || sent[0].idempotencyKey == "" || sent[0].idempotencyKey != sent[1].idempotencyKey || sent[0].body != sent[1].body {
		t.Fatalf("the sale and its retry were sent as %+v; want the same key and body twice", sent)
	}
	p.mu.Lock()
	replayed := p.responses[sent[1].id].Get("Idempotent-Replayed")
	p.mu.Unlock()
	if replayed != "true" {
		t.Fatalf("the retry's answer says Idempotent-Replayed %q: it was not the same payment", replayed)
	}
	var charged []posPayment
	for _, pay := range p.latest(p.key) {
		if pay.CodeTail == code[len(code)-4:] && pay.Amount == 1250 {
			charged = append(charged, pay)
		}
	}
	if len(charged) != 1 || charged[0].Status != "PAID" || charged[0].Description != "Flat white" {
		t.Fatalf("the API has the sale as %+v; want one payment, PAID", charged)
	}
	// Two sales, a refusal, the password sale, the one unknown for a while and this one,
	// charged once; the code the server refused left no payment.
	if row := p.waitFirstRow(charged[0].No); row.Rows != 6 {
		t.Fatalf("the list has %d payments; want 6", row.Rows)
	}
	fullPageShot(t, p.tab, 1280, 900, "till-1280", "pos-1280.png")
	fullPageShot(t, p.tab, 390, 844, "till-390", "pos-390.png")
	// At 390 px nothing is wider than the screen, and every card stays inside the page's
	// margins (a table wider than its card would push the card out).
	const fits = `(() => { const m = document.querySelector("main"), edge = m.getBoundingClientRect().right - parseFloat(getComputedStyle(m).paddingRight);
		return document.documentElement.scrollWidth <= innerWidth && [...document.querySelectorAll("main .card, #payments")].every((c) => c.getBoundingClientRect().right <= edge + 0.5); })()`
	if !eval[bool](t, p.tab, fits) {
		t.Errorf("at 390 px the till is wider than the screen (%v px) or a card leaves the margins", eval[float64](t, p.tab, `document.documentElement.scrollWidth`))
	}
	p.do("back to 1280 px", 5*time.Second, chromedp.EmulateViewport(1280, 900))
}

// The key went out only as a header: no request of the page named it in its URL.
func (p *tillPage) keyNeverInAURL() {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The key is "opk_<key id>_<secret>", and the secret is base64url, which may hold "_"
	// itself: what follows the second "_" is the secret, whole.
	parts := strings.SplitN(p.key, "_", 3)
	if len(parts) != 3 || len(parts[2]) < 40 {
		p.t.Fatalf("the app's key %q... is not opk_<key id>_<secret>", p.key[:min(len(p.key), 8)])
	}
	secret := parts[2]
	for _, u := range p.urls {
		if strings.Contains(u, secret) {
			p.t.Fatalf("the page sent the key in a URL: %s", u)
		}
	}
	if len(p.urls) < 5 {
		p.t.Fatalf("only %d requests were watched", len(p.urls))
	}
}

// clearField empties the input sel (chromedp.SetValue cannot set "").
func clearField(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + jsString(sel) + `).value = ""`)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string { return fmt.Sprintf("%q", s) }

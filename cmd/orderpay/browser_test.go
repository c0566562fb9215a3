package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/channel/sim"
	"orderpay/chaos"
	"orderpay/internal/testmark"
)

// The pages in a real headless Chromium, driven by chromedp, against a whole orderpay.
// Without Chromium the tests skip, unless ORDERPAY_TEST_BROWSER_REQUIRED=1 (set by CI).
// Screenshots go to $ORDERPAY_ARTIFACTS (default testdata/artifacts); with
// ORDERPAY_UPDATE_SCREENSHOTS=1 the README's are refreshed in docs/screenshots.

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("ORDERPAY_TEST_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			testmark.Reached(t, testmark.Browser)
			return path
		}
	}
	if os.Getenv("ORDERPAY_TEST_BROWSER_REQUIRED") == "1" {
		t.Fatal("Chromium is not installed but ORDERPAY_TEST_BROWSER_REQUIRED=1")
	}
	t.Skip("Chromium is not installed (apt-get install chromium); set ORDERPAY_TEST_CHROMIUM to use another")
	return ""
}

// startBrowser starts a headless Chromium with a fresh profile and returns the context of
// its first tab; the browser is closed when the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 820),
		// On a closed network Chromium's own background connections fail and take the
		// page loads down with them; none of them is needed here.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("lang", "en-US"),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx)
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; it must not carry a timeout (chromedp.Run).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// newTab opens a tab in the browser of ctx, closed when the test ends.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// do runs steps in the tab within timeout, failing the test with what was being done.
func do(t *testing.T, tab context.Context, what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shot(t, tab, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// text is the rendered text of the element sel, waiting up to 10 s for it to exist. It is
// read in one step in the page: finding the node first and reading it in a second call
// loses a node that a page re-rendered in between (a countdown ticking, a status arriving).
func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	quoted, _ := json.Marshal(sel)
	expr := `(() => { const e = document.querySelector(` + string(quoted) + `); return e === null ? null : e.innerText; })()`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(tab, 10*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](expr))
		cancel()
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		if s != nil {
			return strings.TrimSpace(*s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("text of %s: no such element after 10 s", sel)
		}
	}
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("ORDERPAY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shot saves a screenshot of the tab's viewport as a test artifact; readme names one the
// README shows, refreshed with ORDERPAY_UPDATE_SCREENSHOTS=1.
func shot(t *testing.T, tab context.Context, name string, readme ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(artifactsDir(t), t.Name()[strings.LastIndex(t.Name(), "/")+1:]+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(readme) > 0 && os.Getenv("ORDERPAY_UPDATE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "screenshots", readme[0]), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowser runs the pages' stories on one orderpay and one Chromium, one after another:
// a browser is the expensive part, and two cores must run the rest of the suite beside it.
func TestBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	m, c := startMain(t, "")
	t.Run("BuyAndPayWithNotificationsDropped", func(t *testing.T) { buyAndPayWithNotificationsDropped(t, browser, m, c) })
	t.Run("BuyerCancels", func(t *testing.T) { buyerCancels(t, browser, m, c) })
	t.Run("OpsConsoleTimeline", func(t *testing.T) { opsConsoleTimeline(t, browser, m, c) })
	t.Run("OpsConsoleReconciliation", func(t *testing.T) { opsConsoleReconciliation(t, browser, m, c) })
	t.Run("PayPageWithABuyerToken", func(t *testing.T) { payPageWithABuyerToken(t, browser) })
}

// With buyers signed in by the shop's login (--buyer-auth jwt), the shop opens the pay page
// with the buyer's token in the fragment: the page shows the signed-in buyer, fetches the
// QR image and follows the event stream with the token (neither an <img> nor an EventSource
// can send one), and turns to paid in the same document; the token never reaches the
// server in a URL.
func payPageWithABuyerToken(t *testing.T, browser context.Context) {
	secret := []byte("browser-shop-login-secret-0123456789")
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	m, c := startMain(t, "", func(m *Main) {
		m.Config.BuyerAuth = buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: secretFile}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "white-tea", 3600, 5, "special"); err != nil {
		t.Fatal(err)
	}
	token := buyerauthtest.HS256(secret, "signed-in-sam", "", "", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	sam := *c.Client
	sam.Tokens = func(string) string { return token }
	o, err := sam.As("signed-in-sam").CreateOrder(ctx, "", "", chaos.Item{SKU: "white-tea", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	tab := newTab(t, browser)
	do(t, tab, "open the pay page with the buyer's token", 20*time.Second,
		chromedp.Navigate(m.URL+"/pay/"+o.OrderNo+"#token="+token),
		chromedp.WaitVisible(chromedp.CSS(`#pay-wechat`)))
	if got := text(t, tab, "#buyer-id"); got != "signed-in-sam" {
		t.Fatalf("the page's buyer is %q", got)
	}
	if eval[string](t, tab, `location.hash`) != "" {
		t.Fatal("the token stayed in the address bar")
	}
	do(t, tab, "ask for the WeChat QR code", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-wechat`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#qr-img").complete && document.querySelector("#qr-img").naturalWidth >= 200`))
	qr := text(t, tab, "#qr-text")
	if err := c.walletPay(ctx, qr); err != nil {
		t.Fatal(err)
	}
	do(t, tab, "see the page turn to paid", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`)))
	if got := eval[string](t, tab, `document.querySelector("#transport").dataset.transport`); got != "sse" {
		t.Fatalf("the status came by %q; want the event stream", got)
	}
	// Without the token the same page is refused: the order is signed-in-sam's only.
	if status, _ := getRaw(ctx, t, c.Client, m.URL+"/v1/orders/"+o.OrderNo); status != http.StatusUnauthorized {
		t.Fatalf("the order without a token: %d", status)
	}
}

// A buyer goes from the catalogue through the cart to the pay page; the wallet page, with
// every notification dropped, pays; the buyer's page turns to paid by itself, in the same
// document, through its event stream (the server's stream queries the channel).
func buyAndPayWithNotificationsDropped(t *testing.T, browser context.Context, m *Main, c *apiClient) {
	ctx := context.Background()
	if err := c.createSKU(ctx, "jasmine-tea", 2599, 20, "special"); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "oolong-tea", 4800, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	buyer := newTab(t, browser)
	do(t, buyer, "open the catalogue", 20*time.Second,
		chromedp.Navigate(m.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-add="jasmine-tea"]`)),
		chromedp.SetValue(chromedp.CSS(`input[data-qty-for="jasmine-tea"]`), "2"),
		chromedp.Click(chromedp.CSS(`button[data-add="jasmine-tea"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#place-order`)))
	if got := text(t, buyer, "#cart"); !strings.Contains(got, "× 2") || !strings.Contains(got, "¥51.98") {
		t.Fatalf("cart shows %q; want 2 × jasmine-tea, ¥51.98", got)
	}
	shot(t, buyer, "catalogue")
	do(t, buyer, "place the order", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#place-order`)),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay`)))
	loc := eval[string](t, buyer, `location.pathname`)
	orderNo := strings.TrimPrefix(loc, "/pay/")
	o, err := c.order(ctx, orderNo)
	if err != nil || o.Status != "PENDING_PAYMENT" || o.Payable != 2*2599 {
		t.Fatalf("the page went to %s: order %+v, %v", loc, o, err)
	}
	// The countdown runs by the server's clock: the page shows what the server says is left.
	secs := eval[int](t, buyer, `Number(document.querySelector("#countdown").dataset.seconds)`)
	if secs < 29*60 || secs > 30*60 {
		t.Fatalf("countdown shows %d s for a 30-minute special offer", secs)
	}
	do(t, buyer, "ask for the Alipay QR code", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-alipay`)),
		chromedp.WaitVisible(chromedp.CSS(`#qr-img`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#qr-img").complete && document.querySelector("#qr-img").naturalWidth >= 200`))
	qr := text(t, buyer, "#qr-text")
	if !strings.HasPrefix(qr, "https://qr.alipay.com/") {
		t.Fatalf("the pay page shows code %q", qr)
	}
	// Marks this document: a reload would lose it.
	eval[bool](t, buyer, `window.sameDocument = true`)
	shot(t, buyer, "pay")

	wallet := newTab(t, browser)
	do(t, wallet, "turn on dropped notifications in the wallet page", 20*time.Second,
		chromedp.Navigate(m.SimURL+"/sim/wallet"),
		chromedp.WaitVisible(chromedp.CSS(`#fault-drop`)),
		chromedp.Click(chromedp.CSS(`#fault-drop`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#fault-drop").checked && document.querySelector("#fault-drop").parentElement.textContent.includes("fired")`))
	if !slices.ContainsFunc(m.Sim.Faults().Rules, func(r sim.FaultRule) bool { return r.Method == sim.MethodNotify && r.Kind == sim.FaultDrop }) {
		t.Fatalf("the simulator's faults are %+v; want notifications dropped", m.Sim.Faults())
	}
	do(t, wallet, "pick the pending trade and pay it", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`button[data-pick]`)),
		chromedp.Click(chromedp.CSS(`button[data-pick]`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector("#qr-code").value === %q`, qr)),
		chromedp.Click(chromedp.CSS(`#pay`)),
		chromedp.WaitVisible(chromedp.CSS(`#wallet-status`)))
	if got := text(t, wallet, "#wallet-status"); got != "TRADE_SUCCESS" {
		t.Fatalf("the wallet says %q", got)
	}
	shot(t, wallet, "wallet", "wallet.png")

	do(t, buyer, "see the pay page turn to paid", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#banner`)))
	if got := text(t, buyer, "#banner"); !strings.Contains(got, "Paid") {
		t.Fatalf("banner %q", got)
	}
	if !eval[bool](t, buyer, `window.sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	if got := eval[string](t, buyer, `document.querySelector("#transport").dataset.transport`); got != "sse" {
		t.Fatalf("the status came by %q; want the event stream", got)
	}
	shot(t, buyer, "paid")
	// The notification was lost: the payment was found by a query, and no notification
	// reached the server.
	var dropped int
	for _, e := range m.Sim.FaultLog() {
		if e.Method == sim.MethodNotify && e.Kind == sim.FaultDrop {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("no notification was dropped")
	}
	var applied, paidQueries int
	row := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM notification_log WHERE out_trade_no IN (SELECT out_trade_no FROM channel_orders WHERE payment_no = (SELECT payment_no FROM payments WHERE order_no = ?))`, orderNo)
	if err := row.Scan(&applied); err != nil || applied != 0 {
		t.Fatalf("%d notifications reached the server (%v); every one should have been dropped", applied, err)
	}
	row = m.Store.DB().QueryRow(`SELECT COUNT(*) FROM query_log WHERE outcome = ? AND trigger_name = 'poll' AND out_trade_no IN (SELECT out_trade_no FROM channel_orders WHERE payment_no = (SELECT payment_no FROM payments WHERE order_no = ?))`, string(orderpay.OutcomePaid), orderNo)
	if err := row.Scan(&paidQueries); err != nil || paidQueries == 0 {
		t.Fatalf("no query found the payment (%v)", err)
	}
	if err := m.Sim.SetFaults(sim.FaultPlan{}); err != nil {
		t.Fatal(err)
	}
	shippedAndReturnRequested(t, buyer, m, c, orderNo)
}

// After payment, through the API: the buyer gives an address, the merchant ships the
// order's parcel, the buyer asks to return one of its two units. The order's page shows
// the parcel with its carrier and contents and the return with its amount.
func shippedAndReturnRequested(t *testing.T, buyer context.Context, m *Main, c *apiClient, orderNo string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := c.OrderDetail(ctx, orderNo)
	if err != nil || len(o.Shipments) != 1 || len(o.Refunds) != 0 {
		t.Fatalf("the paid order: %+v, %v; want one parcel and no after-sales", o, err)
	}
	if _, err := c.ChangeAddress(ctx, orderNo, o.BuyerID, chaos.Address{Name: "Wang Fang", Phone: "13900139000", Detail: "8 Nanjing Road, Shanghai"}); err != nil {
		t.Fatal(err)
	}
	parcel := o.Shipments[0].ShipmentNo
	if sh, err := c.Ship(ctx, parcel, "SF Express", "SF7001"); err != nil || sh.Status != "SHIPPED" {
		t.Fatalf("ship %s: %+v, %v", parcel, sh, err)
	}
	ret, err := c.RequestAfterSale(ctx, orderNo, o.BuyerID, "return", "one tin is enough", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil || ret.Amount != 2599 {
		t.Fatalf("return one unit: %+v, %v", ret, err)
	}
	shipmentSel := `#shipments [data-shipment="` + parcel + `"][data-status="SHIPPED"]`
	returnSel := `#aftersales [data-after-sale="` + ret.AfterSaleNo + `"][data-status="` + ret.Status + `"]`
	do(t, buyer, "open the order's page", 20*time.Second,
		chromedp.Navigate(m.URL+"/orders/"+orderNo),
		chromedp.WaitVisible(chromedp.CSS(shipmentSel)),
		chromedp.WaitVisible(chromedp.CSS(returnSel)))
	if got := text(t, buyer, shipmentSel); !strings.Contains(got, "SF Express SF7001") || !strings.Contains(got, "jasmine-tea × 2") {
		t.Fatalf("the parcel shows %q; want SF Express SF7001 and jasmine-tea × 2", got)
	}
	if got := text(t, buyer, returnSel); !strings.Contains(got, "Return") || !strings.Contains(got, "¥25.99") ||
		!strings.Contains(got, "jasmine-tea × 1") || !strings.Contains(got, "one tin is enough") {
		t.Fatalf("the return shows %q; want a return of jasmine-tea × 1 for ¥25.99", got)
	}
	if got, status := text(t, buyer, "#status"), eval[string](t, buyer, `document.querySelector("#status").dataset.status`); got != "Shipped" || status != "SHIPPED" {
		t.Fatalf("the order's status shows %q (data-status %q); want Shipped (SHIPPED)", got, status)
	}
	shot(t, buyer, "order-shipped")
}

// A buyer finds an unpaid order in their list, opens it (no shipments, no after-sales yet),
// goes to its pay page and cancels it there.
func buyerCancels(t *testing.T, browser context.Context, m *Main, c *apiClient) {
	ctx := context.Background()
	if err := c.createSKU(ctx, "pu-erh-cake", 12800, 3, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "browser-bob", "pu-erh-cake", 1)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTab(t, browser)
	do(t, tab, "open the order list as browser-bob", 20*time.Second,
		chromedp.Navigate(m.URL+"/orders"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("orderpay.buyer", "browser-bob")`),
		chromedp.Navigate(m.URL+"/orders"),
		chromedp.WaitVisible(chromedp.CSS(`#orders a[href="/orders/`+o.OrderNo+`"]`)),
		chromedp.Click(chromedp.CSS(`#orders a[href="/orders/`+o.OrderNo+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PENDING_PAYMENT"]`)))
	for _, sel := range []string{"#shipments", "#aftersales"} {
		if got := text(t, tab, sel); got != "none yet" {
			t.Fatalf("%s shows %q for a new order", sel, got)
		}
	}
	if got := text(t, tab, "#items"); !strings.Contains(got, "pu-erh-cake") || !strings.Contains(got, "¥128.00") {
		t.Fatalf("items %q", got)
	}
	do(t, tab, "cancel on the pay page", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#pay-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#cancel`)),
		chromedp.WaitEnabled(chromedp.CSS(`#cancel`)),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="CANCELLED"]`)))
	if got := text(t, tab, "#banner"); got != "Cancelled" {
		t.Fatalf("banner %q", got)
	}
	if got, err := c.order(ctx, o.OrderNo); err != nil || got.Status != "CANCELLED" {
		t.Fatalf("after cancel the order is %+v, %v", got, err)
	}
	shot(t, tab, "cancelled")
}

// An operator signs in with the admin token, finds an order and reads its timeline: the
// forged notification (unverified, rejected), the genuine one (verified, applied), the
// transitions; and the charts. The forged copy makes the server query the trade it claims,
// and that query may find the payment before the genuine copy arrives: the genuine one is
// then logged as a duplicate (verified, already applied), after the query's PAID.
func opsConsoleTimeline(t *testing.T, browser context.Context, m *Main, c *apiClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultForgeSignature, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "longjing-tin", 6600, 5, "fast"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "ops-carol", "longjing-tin", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	// The forged copy comes first (and its claimed trade is queried); wait for the genuine
	// one to be logged as applied, or as a duplicate if that query applied the payment first.
	var genuineResult string
	waitFor(t, 20*time.Second, "the genuine notification", func() bool {
		m.Store.DB().QueryRow(`SELECT result FROM notification_log WHERE result IN ('applied', 'duplicate') AND verified = 1 AND channel = 'wechat'`).Scan(&genuineResult)
		return genuineResult != ""
	})
	if genuineResult == orderpay.NotifyDuplicate {
		var found int
		row := m.Store.DB().QueryRow(`SELECT COUNT(*) FROM query_log WHERE outcome = ? AND out_trade_no IN (SELECT out_trade_no FROM channel_orders WHERE payment_no = ?)`,
			string(orderpay.OutcomePaid), p.PaymentNo)
		if err := row.Scan(&found); err != nil || found == 0 {
			t.Fatalf("the genuine notification was a duplicate, but no query found the payment (%v)", err)
		}
	}
	tab := newTab(t, browser)
	do(t, tab, "sign in", 20*time.Second,
		chromedp.Navigate(m.URL+"/ops"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), m.AdminToken),
		chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#q`)))
	if href := eval[string](t, tab, `location.href`); strings.Contains(href, m.AdminToken) {
		t.Fatal("the admin token is in the URL")
	}
	if got := eval[string](t, tab, `sessionStorage.getItem("orderpay.adminToken")`); got != m.AdminToken {
		t.Fatal("the token is not kept in sessionStorage")
	}
	do(t, tab, "search the order and open its timeline", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#q`), o.OrderNo),
		chromedp.Submit(chromedp.CSS(`#q`)),
		chromedp.WaitVisible(chromedp.CSS(`#order-results a[data-order="`+o.OrderNo+`"]`)),
		chromedp.Click(chromedp.CSS(`#order-results a[data-order="`+o.OrderNo+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)))
	var events []struct{ Kind, Text, Verified string }
	raw := eval[[]byte](t, tab, `Array.from(document.querySelectorAll("#events tr")).map((r) => ({kind: r.dataset.kind, text: r.textContent, verified: (r.querySelector("[data-verified]") || {dataset: {}}).dataset.verified || ""}))`)
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatal(err)
	}
	var forged, genuine, paidTransition bool
	for _, e := range events {
		forged = forged || (e.Kind == "notification" && e.Verified == "false" && strings.Contains(e.Text, "rejected"))
		genuine = genuine || (e.Kind == "notification" && e.Verified == "true" && strings.Contains(e.Text, ", "+genuineResult))
		paidTransition = paidTransition || (e.Kind == "transition" && strings.Contains(e.Text, "order "+o.OrderNo+": PENDING_PAYMENT → PAID"))
	}
	if !forged || !genuine || !paidTransition {
		t.Fatalf("timeline: forged %v, genuine %v, paid %v in %+v", forged, genuine, paidTransition, events)
	}
	do(t, tab, "open a raw notification", 10*time.Second, chromedp.Click(chromedp.CSS(`#events tr[data-kind="notification"] summary`)))
	shot(t, tab, "timeline", "ops-timeline.png")
	do(t, tab, "open the charts", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-charts`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-notify svg`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-latency svg`)))
	if got := text(t, tab, "#chart-notify"); !strings.Contains(got, "unverified, rejected") || !strings.Contains(got, "verified, "+genuineResult) {
		t.Fatalf("notification chart %q", got)
	}
	shot(t, tab, "charts")
	for _, tabName := range []string{"pending", "stuck", "refunds"} {
		do(t, tab, "open "+tabName, 10*time.Second, chromedp.Click(chromedp.CSS(`#tabbtn-`+tabName)), chromedp.WaitVisible(chromedp.CSS(`#tab-`+tabName+` h2`)))
	}
	if got := text(t, tab, "#error"); got != "" {
		t.Fatalf("the console shows an error: %s", got)
	}
	if err := m.Sim.SetFaults(sim.FaultPlan{}); err != nil {
		t.Fatal(err)
	}
}

// An operator opens the reconciliation view and runs reconciliations from it. Today's
// Alipay bill is not out (it is T+1): the view shows the channel's refusal and nothing is
// stored. serve's simulator runs on the wall clock, so the bill of two days ago is out at
// any hour: the run reconciles it for real, and the view shows the report, its trades
// layer's five class counts and that nothing is unexplained, in the list and in the report.
func opsConsoleReconciliation(t *testing.T, browser context.Context, m *Main, c *apiClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	today, date := orderpay.BillDay(time.Now()), orderpay.BillDay(time.Now().AddDate(0, 0, -2))
	tab := newTab(t, browser)
	do(t, tab, "sign in and open the reconciliation tab", 20*time.Second,
		chromedp.Navigate(m.URL+"/ops"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), m.AdminToken),
		chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.Click(chromedp.CSS(`#tabbtn-recon`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-run`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#recon-list").childElementCount > 0`))

	do(t, tab, "run today's Alipay bill", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#recon-channel`), "alipay"),
		chromedp.SetValue(chromedp.CSS(`#recon-date`), today),
		chromedp.Click(chromedp.CSS(`#recon-run`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#recon-error").textContent !== ""`))
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	// What the view shows is the API's own refusal: the bill is not out.
	shown := text(t, tab, "#recon-error")
	var refusal struct {
		Error struct{ Code, Message string }
	}
	err := c.call(ctx, http.MethodPost, m.URL+"/admin/reconciliations", admin, map[string]string{"channel": "alipay", "date": today}, nil)
	var apiErr *apiError
	if !errors.As(err, &apiErr) || json.Unmarshal([]byte(apiErr.Body), &refusal) != nil || refusal.Error.Code != orderpay.EUNAVAILABLE ||
		refusal.Error.Message != shown {
		t.Fatalf("the view shows %q; the API answers %v", shown, err)
	}
	var list struct{ Reconciliations []chaos.ReconciliationView }
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations?date="+today, admin, nil, &list); err != nil || len(list.Reconciliations) != 0 {
		t.Fatalf("a report of today was stored: %+v, %v", list, err)
	}

	do(t, tab, "run the WeChat Pay bill of two days ago", 30*time.Second,
		chromedp.SetValue(chromedp.CSS(`#recon-channel`), "wechat"),
		chromedp.SetValue(chromedp.CSS(`#recon-date`), date),
		chromedp.Click(chromedp.CSS(`#recon-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-title`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-reports`)))
	if got := text(t, tab, "#recon-error"); got != "" {
		t.Fatalf("the view shows an error after a good run: %s", got)
	}
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations?channel=wechat&date="+date, admin, nil, &list); err != nil || len(list.Reconciliations) != 1 {
		t.Fatalf("the run's report: %+v, %v", list, err)
	}
	rep := list.Reconciliations[0]
	id := fmt.Sprint(rep.ID)
	if got := eval[string](t, tab, `document.querySelector("#recon-title").dataset.recon`); got != id {
		t.Fatalf("the view shows report %s; the run stored %s", got, id)
	}
	if got := text(t, tab, "#recon-title"); got != "Report #"+id+": wechat bill of "+date {
		t.Fatalf("report title %q", got)
	}
	row := `#recon-reports tr[data-recon="` + id + `"]`
	if got := text(t, tab, row); !strings.Contains(got, "wechat") || !strings.Contains(got, date) {
		t.Fatalf("the list's row %q", got)
	}
	for _, class := range []orderpay.ReconClass{orderpay.ReconMatched, orderpay.ReconMissingLocal, orderpay.ReconMissingChannel,
		orderpay.ReconAmountMismatch, orderpay.ReconRefundMismatch} {
		want := fmt.Sprint(rep.Counts[string(class)])
		if got := text(t, tab, `#recon-report [data-count="`+string(class)+`"]`); got != want {
			t.Errorf("report's %s count shows %q, want %s", class, got, want)
		}
	}
	// The list counts the matched rows and says of each layer whether anything is unexplained.
	if got, want := text(t, tab, row+` td[data-class="MATCHED"]`), fmt.Sprint(rep.Counts[string(orderpay.ReconMatched)]); got != want {
		t.Errorf("list's MATCHED count shows %q, want %s", got, want)
	}
	for _, layer := range orderpay.ReconLayers {
		if !eval[bool](t, tab, `document.querySelector('`+row+` td[data-layer="`+string(layer)+`"]') !== null`) {
			t.Errorf("list's row has no %s cell", layer)
		}
	}
	if got := text(t, tab, "#recon-unexplained"); got != fmt.Sprint(rep.Unexplained) || rep.Unexplained != 0 {
		t.Fatalf("unexplained shows %q; the report has %d", got, rep.Unexplained)
	}
	shot(t, tab, "reconciliation", "ops-reconciliation.png")
}

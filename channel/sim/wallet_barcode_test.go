package sim_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/internal/testmark"
)

// The wallet page carries the simulator's payment-code script after its own, under the
// page's headers; the script is served as JavaScript.
func TestWalletPage_HasThePaymentCodeSection(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	resp, err := http.Get(b.srv.URL + "/sim/wallet")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	own := strings.Index(string(page), `/sim/assets/wallet.js`)
	added := strings.Index(string(page), `<script src="/sim/assets/wallet_barcode.js" defer></script>`)
	if resp.StatusCode != http.StatusOK || own < 0 || added < own || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /sim/wallet: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	resp, err = http.Get(b.srv.URL + "/sim/assets/wallet_barcode.js")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(string(js), "/sim/wallet/codes") {
		t.Fatalf("the script: %d %v", resp.StatusCode, resp.Header)
	}
	// The page's other assets are still the page's.
	if resp, err := http.Get(b.srv.URL + "/sim/assets/wallet.js"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("wallet.js: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A person on the wallet page, in a real Chromium: picks Alipay and a password buyer, gets
// a code drawn as a barcode with its digits; a till pays with those digits and the trade
// waits; the person confirms it on the page and the trade is paid. Skips without Chromium
// (as cmd/orderpay's browser tests do, unless ORDERPAY_TEST_BROWSER_REQUIRED=1).
func TestWalletPage_ShowsACodeAndConfirmsAWaitingPayment(t *testing.T) {
	b := setup(t, sim.Config{})
	browser := walletBrowser(t)
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	step("show a code",
		chromedp.Navigate(b.srv.URL+"/sim/wallet"),
		chromedp.WaitVisible(chromedp.CSS("#code-issue")),
		chromedp.SetValue(chromedp.CSS("#code-channel"), "alipay"),
		chromedp.SetValue(chromedp.CSS("#code-behaviour"), "password"),
		chromedp.SetValue(chromedp.CSS("#code-after"), "600"),
		chromedp.Click(chromedp.CSS("#code-issue")),
		chromedp.WaitVisible(chromedp.CSS("#code-barcode")),
		chromedp.Poll[chromedp.Void](`document.querySelector("#code-barcode").complete && document.querySelector("#code-barcode").naturalWidth > 0`),
	)
	digits := eval(`document.querySelector("#code-digits").textContent`)
	c, err := b.sim.Code(digits)
	if err != nil || c.Behaviour != sim.CodePassword || c.Channel != "alipay" || c.After != 10*time.Minute {
		t.Fatalf("the code on the page %q: %+v, %v", digits, c, err)
	}
	if rsp := barcodePay(t, b.client, barcodePayReq("WP_1", "7.70", digits)); rsp.Code != alipay.CodeOrderSuccessPayInProcess {
		t.Fatalf("the till's pay call: %+v", rsp)
	}
	step("confirm the waiting payment",
		chromedp.WaitVisible(chromedp.CSS("#code-confirm")),
		chromedp.Click(chromedp.CSS("#code-confirm")),
		chromedp.Poll[chromedp.Void](`(document.querySelector("#code-trade-status") || {}).textContent === "TRADE_SUCCESS"`),
	)
	if q := b.query(t, "WP_1"); q.TradeStatus != alipay.TradeStatusSuccess {
		t.Fatalf("after the page's Confirm: %+v", q)
	}
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS("#codes-title"))); err == nil {
		if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			dir := os.Getenv("ORDERPAY_ARTIFACTS")
			if dir == "" {
				dir = t.TempDir()
			}
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, "sim-wallet-payment-code.png"), shot, 0o644)
		}
	}
}

// walletBrowser starts a headless Chromium (closed when the test ends), or skips.
func walletBrowser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, p := range []string{os.Getenv("ORDERPAY_TEST_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if found, err := exec.LookPath(p); err == nil {
			path = found
			break
		}
	}
	if path == "" {
		if os.Getenv("ORDERPAY_TEST_BROWSER_REQUIRED") == "1" {
			t.Fatal("Chromium is not installed but ORDERPAY_TEST_BROWSER_REQUIRED=1")
		}
		t.Skip("Chromium is not installed")
	}
	testmark.Reached(t, testmark.Browser)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 1400),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true))
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx)
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

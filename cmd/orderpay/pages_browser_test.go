package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderpay"
	"orderpay/chaos"
)

// The one way each language writes a time on every page (formatTime, common.js).
var timeFormats = map[string]*regexp.Regexp{
	"en": regexp.MustCompile(`^\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}, \d{2}:\d{2}:\d{2}$`),
	"zh": regexp.MustCompile(`^\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2}:\d{2}$`),
}

// pageWidths are the screens every page is read on: a phone's and a laptop's.
var pageWidths = []struct{ w, h int64 }{{390, 844}, {1280, 800}}

// TestBrowserPagesReadWell reads the pages a newcomer meets first, at 390 px and 1280 px,
// in English and Chinese where the page has both: the catalogue names each product type in
// words; an order with a refund labels each of its rows differently (the refunded amount
// and the refund's time above all) and writes its times in its language's one format; the
// wallet is no wider than a phone and writes its times as the console does; the console's
// audit log uses the laptop's width with every column in view and a refused write on one
// compact row, its search field shows its whole hint, and no blank gap sits under its tabs.
// Each page is shot (docs/screenshots with ORDERPAY_UPDATE_SCREENSHOTS=1).
func TestBrowserPagesReadWell(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range []chaos.SKUSpec{
		{SKU: "pg-longjing", Title: "Longjing tea, 100 g", Price: 2400, Stock: 50, ProductType: "normal", StockPolicy: "order"},
		{SKU: "pg-mooncakes", Title: "Mooncakes, box of 4", Price: 8800, Stock: 50, ProductType: "special", StockPolicy: "order"},
		{SKU: "pg-lychee", Title: "Fresh lychee, 1 kg", Price: 3990, Stock: 50, ProductType: "fast", StockPolicy: "order"},
	} {
		if err := c.AddSKU(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Alice's two teas, paid; one refunded (24 yuan, within the rule: approved at once).
	no := paidOrder(ctx, t, c, "alice", "pg-longjing", 2, orderpay.ChannelAlipay)
	r, err := c.RequestAfterSale(ctx, no, "alice", "refund", "bought one too many",
		chaos.AfterSaleItem{Line: detail(ctx, t, c.Client, no).Items[0].Line, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitAfterSale(ctx, t, c.Client, no, r.AfterSaleNo, "SUCCESS")
	// A write the API refuses, for the audit log: the refunded request rejected.
	if _, err := c.ReviewAfterSale(ctx, r.AfterSaleNo, "reject", "the tin was opened"); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("rejecting a refunded request: %v", err)
	}
	// A trade the wallet lists: Bob asks to pay his lychee by WeChat Pay.
	o2, err := c.createOrder(ctx, "bob", "pg-lychee", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.pay(ctx, o2.OrderNo, orderpay.ChannelWechat); err != nil {
		t.Fatal(err)
	}

	tab := newTab(t, browser)
	do(t, tab, "name the buyer", 20*time.Second,
		chromedp.Navigate(m.URL+"/orders"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("orderpay.buyer", "alice")`))
	// open sizes the tab, sets the buyer pages' language and opens path until ready shows.
	open := func(t *testing.T, path, ready, lang string, w, h int64) {
		t.Helper()
		do(t, tab, fmt.Sprintf("open %s at %d px in %s", path, w, lang), 20*time.Second,
			chromedp.EmulateViewport(w, h),
			chromedp.Evaluate[chromedp.Void](`localStorage.setItem("orderpay.lang", "`+lang+`")`),
			chromedp.Navigate(path),
			chromedp.WaitVisible(chromedp.CSS(ready)))
	}
	noWiderThan := func(t *testing.T, what string, w int64) {
		t.Helper()
		if got := eval[int64](t, tab, `document.documentElement.scrollWidth`); got > w {
			t.Errorf("%s at %d px is %d px wide", what, w, got)
		}
	}
	checkTimes := func(t *testing.T, what, lang string, times []string) {
		t.Helper()
		if len(times) == 0 {
			t.Errorf("%s in %s shows no time", what, lang)
		}
		for _, s := range times {
			if !timeFormats[lang].MatchString(s) {
				t.Errorf("%s in %s writes a time %q; want the form of %s", what, lang, s, timeFormats[lang])
			}
		}
	}

	t.Run("Catalogue", func(t *testing.T) {
		for _, lang := range []string{"en", "zh"} {
			for _, sz := range pageWidths {
				open(t, m.URL+"/", `#catalogue button[data-add="pg-lychee"]`, lang, sz.w, sz.h)
				// Each product type in words, never its code (normal, special, fast).
				types := eval[[][2]string](t, tab, `Array.from(document.querySelectorAll("#catalogue tbody tr")).map((r) => [r.querySelector("[data-add]").dataset.add, r.children[1].textContent])`)
				if len(types) < 3 {
					t.Fatalf("the catalogue lists %v", types)
				}
				for _, ty := range types {
					if regexp.MustCompile(`^[a-z_]*$`).MatchString(strings.TrimSpace(ty[1])) {
						t.Errorf("the catalogue in %s shows %s's type as %q, a code", lang, ty[0], ty[1])
					}
				}
				noWiderThan(t, "the catalogue in "+lang, sz.w)
				shot(t, tab, fmt.Sprintf("catalogue-%s-%d", lang, sz.w), fmt.Sprintf("buyer-catalogue-%s-%d.png", lang, sz.w))
			}
		}
	})

	t.Run("OrderWithARefund", func(t *testing.T) {
		for _, lang := range []string{"en", "zh"} {
			for _, sz := range pageWidths {
				open(t, m.URL+"/orders/"+no, `#aftersales .aftersale[data-status="SUCCESS"]`, lang, sz.w, sz.h)
				// Every row's label names what its row holds: no two rows of the page share one.
				labels := eval[[]string](t, tab, `Array.from(document.querySelectorAll("main .kv > span.muted")).map((e) => e.textContent)`)
				seen := map[string]bool{}
				for _, l := range labels {
					if seen[l] {
						t.Errorf("the order's page in %s labels two rows %q: %q", lang, l, labels)
					}
					seen[l] = true
				}
				// The refunded amount and the refund's time, each under its own words.
				amount := eval[string](t, tab, `document.querySelector("#refunded").parentElement.previousElementSibling.textContent`)
				at := eval[[2]string](t, tab, `(() => { const v = Array.from(document.querySelectorAll("#aftersales .kv > span.muted")).find((e) => /refund|退款/i.test(e.textContent) && e.nextElementSibling.textContent.match(/\d{2}:\d{2}/)); return v ? [v.textContent, v.nextElementSibling.textContent] : ["", ""]; })()`)
				want := map[string][2]string{"en": {"Refunded amount", "Refunded at"}, "zh": {"退款金额", "退款时间"}}[lang]
				if amount != want[0] || at[0] != want[1] {
					t.Errorf("the order's page in %s labels the refunded amount %q and the refund's time %q; want %q and %q", lang, amount, at[0], want[0], want[1])
				}
				times := eval[[]string](t, tab, `Array.from(document.querySelectorAll("main .kv > span.muted")).filter((e) => /\d{2}:\d{2}:\d{2}/.test(e.nextElementSibling.textContent)).map((e) => e.nextElementSibling.textContent)`)
				if len(times) < 4 { // ordered, paid, requested, refunded
					t.Errorf("the order's page in %s shows the times %q; want at least four", lang, times)
				}
				checkTimes(t, "the order's page", lang, times)
				noWiderThan(t, "the order's page in "+lang, sz.w)
				fullPageShot(t, tab, sz.w, sz.h, fmt.Sprintf("order-refunded-%s-%d", lang, sz.w), fmt.Sprintf("buyer-order-refunded-%s-%d.png", lang, sz.w))
			}
		}
	})

	t.Run("Wallet", func(t *testing.T) {
		for _, sz := range pageWidths {
			open(t, m.SimURL+"/sim/wallet", `#pending button[data-pick]`, "en", sz.w, sz.h)
			noWiderThan(t, "the wallet", sz.w)
			checkTimes(t, "the wallet's pending trades", "en", eval[[]string](t, tab, `Array.from(document.querySelectorAll("#pending tbody tr")).map((r) => r.children[4].textContent)`))
			if got := eval[[]string](t, tab, `Array.from(document.querySelectorAll("#pending tbody tr")).map((r) => r.children[0].textContent)`); len(got) != 1 || got[0] != "WeChat Pay" {
				t.Errorf("the wallet names the pending trades' channels %q; want WeChat Pay", got)
			}
			do(t, tab, "scroll to the pending trades", 5*time.Second, chromedp.Evaluate[chromedp.Void](`document.querySelector("#pending").scrollIntoView({block: "center"})`))
			shot(t, tab, fmt.Sprintf("wallet-%d", sz.w), fmt.Sprintf("wallet-pending-%d.png", sz.w))
		}
	})

	t.Run("ConsoleAuditLog", func(t *testing.T) {
		for _, sz := range pageWidths {
			do(t, tab, fmt.Sprintf("sign in to the console at %d px", sz.w), 20*time.Second,
				chromedp.EmulateViewport(sz.w, sz.h),
				chromedp.Navigate(m.URL+"/ops"),
				chromedp.WaitVisible(chromedp.CSS(`#token`)),
				chromedp.SendKeys(chromedp.CSS(`#token`), m.AdminToken),
				chromedp.Click(chromedp.CSS(`#login-button`)),
				chromedp.WaitVisible(chromedp.CSS(`#order-results[data-q=""] a[data-order]`)))
			// The search field shows its whole hint.
			if cut := eval[float64](t, tab, `(() => { const q = document.querySelector("#q"), s = getComputedStyle(q);
				const ctx = document.createElement("canvas").getContext("2d"); ctx.font = s.font;
				return ctx.measureText(q.placeholder).width - (q.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)); })()`); cut > 0 {
				t.Errorf("at %d px the search field cuts %.0f px of its hint %q", sz.w, cut, eval[string](t, tab, `document.querySelector("#q").placeholder`))
			}
			// No blank gap between the tabs and the tab's first line.
			if gap := eval[float64](t, tab, `document.querySelector("#search-form").getBoundingClientRect().top - document.querySelector("#tabs").getBoundingClientRect().bottom`); gap > 12 {
				t.Errorf("at %d px a gap of %.0f px sits under the console's tabs", sz.w, gap)
			}
			checkTimes(t, "the console's orders", "en", eval[[]string](t, tab, `Array.from(document.querySelectorAll("#order-results tbody tr")).map((r) => r.children[4].textContent)`))

			do(t, tab, "open the audit log", 20*time.Second,
				chromedp.Click(chromedp.CSS(`#tabbtn-audit`)),
				chromedp.WaitVisible(chromedp.CSS(`#audit[data-shown] tr[data-audit]`)))
			noWiderThan(t, "the console's audit log", sz.w)
			checkTimes(t, "the audit log", "en", eval[[]string](t, tab, `Array.from(document.querySelectorAll("#audit tbody tr")).map((r) => r.children[0].textContent)`))
			if sz.w == 1280 {
				// The log takes the width there is; its every column, Result last, in view
				// without scrolling it.
				type box struct{ Table, Wrapper, Scroll, Client, Result, Window float64 }
				b := eval[box](t, tab, `(() => { const tb = document.querySelector("#audit table"), wr = tb.parentElement, th = Array.from(tb.querySelectorAll("th")).pop();
					return { table: tb.getBoundingClientRect().width, wrapper: wr.getBoundingClientRect().right, scroll: wr.scrollWidth, client: wr.clientWidth,
						result: th.getBoundingClientRect().right, window: window.innerWidth }; })()`)
				if last := eval[string](t, tab, `Array.from(document.querySelectorAll("#audit th")).pop().textContent`); last != "Result" {
					t.Fatalf("the audit log's last column is %q", last)
				}
				if b.Table < 1100 {
					t.Errorf("at 1280 px the audit log is %.0f px wide; want the window's width (over 1100 px)", b.Table)
				}
				if b.Scroll > b.Client || b.Result > b.Window || b.Result > b.Wrapper+1 {
					t.Errorf("at 1280 px the audit log's Result column ends at %.0f px (window %.0f, table %.0f of %.0f shown)", b.Result, b.Window, b.Scroll, b.Client)
				}
				// A refused write's result, its code and why, takes one line: it makes its
				// row no taller than a done write's with the same call.
				lines := eval[[]float64](t, tab, `Array.from(document.querySelectorAll("#audit tr[data-audit]")).filter((r) => r.querySelector(".no")).map((r) => {
					const parts = Array.from(r.lastElementChild.children).map((e) => e.getBoundingClientRect());
					return (Math.max(...parts.map((b) => b.bottom)) - Math.min(...parts.map((b) => b.top))) / parseFloat(getComputedStyle(r.lastElementChild).lineHeight); })`)
				if len(lines) == 0 {
					t.Fatal("the audit log shows no refused write")
				}
				for _, n := range lines {
					if n > 1.5 {
						t.Errorf("at 1280 px a refused write's result takes %.1f lines; want one", n)
					}
				}
			}
			shot(t, tab, fmt.Sprintf("audit-%d", sz.w), fmt.Sprintf("ops-audit-%d.png", sz.w))
			do(t, tab, "sign out", 20*time.Second, chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
		}
	})
}

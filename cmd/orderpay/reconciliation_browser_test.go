package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderpay"
	"orderpay/chaos"
)

// movableClock is the built-in simulator's clock: the wall clock, until the test moves the
// channel on to the next morning, when the day's bills are out.
type movableClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *movableClock) jumpTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(t)
}

// reconLayerView is a report's layers as the admin API gives them.
type reconLayerView struct {
	ID          int64                                         `json:"id"`
	Account     string                                        `json:"account"`
	Unexplained int                                           `json:"unexplained"`
	Counts      map[string]int                                `json:"counts"`
	Layers      map[orderpay.ReconLayer]orderpay.LayerSummary `json:"layers"`
	Figures     orderpay.ReconFigures                         `json:"figures"`
	Items       []struct {
		Layer      orderpay.ReconLayer `json:"layer"`
		Class      string              `json:"class"`
		Explained  bool                `json:"explained"`
		OutTradeNo string              `json:"out_trade_no"`
		OrderNo    string              `json:"order_no"`
		Detail     string              `json:"detail"`
	} `json:"items"`
}

// An admin reconciles a day from the console's reconciliation page. Two orders are paid by
// Alipay today and one bag of the second is refunded; the simulator's clock then moves to the
// next morning (10:30 China time), when the day's bills are out, as the chaos harness does.
// The admin picks Alipay and today and runs: the page shows the report the run stored, its
// three layers side by side each with the state, differences and unexplained money the
// report has, the day's figures, and every matched trade linked to its order's page. Show
// finds the same report again by channel and day; Export CSV fetches the report's CSV with
// the token in its header. At 390 px nothing is wider than the screen.
//
// All three layers must be MATCHED: both payments and the refund are in the bill as we hold
// them, each charged and given back the fee the simulator's contract says, and the account
// received exactly the day's money net of fees; the report's unexplained is 0.
func TestConsoleReconciliationPageShowsTheThreeLayers(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	clock := &movableClock{}
	m, c := startMain(t, "", func(m *Main) {
		m.Config.ReconcileAt = ReconcileOff
		m.Config.AutoApproveRefundMax = 10000 // the tin's 88.00 is refunded without a review
		m.simClock = clock
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	if err := c.call(ctx, http.MethodPost, m.URL+"/admin/skus", admin, map[string]any{"sku": "recon-tea", "merchant_id": "m-tea",
		"title": "Longjing tin", "price": 8800, "stock": 10}, nil); err != nil {
		t.Fatal(err)
	}
	day := orderpay.BillDay(time.Now())
	var orders []string
	for _, qty := range []int64{1, 2} {
		o, err := c.createOrder(ctx, "recon-buyer", "recon-tea", qty)
		if err != nil {
			t.Fatal(err)
		}
		payByAlipay(ctx, t, c, o.OrderNo)
		orders = append(orders, o.OrderNo)
	}
	r, err := c.RequestAfterSale(ctx, orders[1], "recon-buyer", "refund", "one tin is enough", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitAfterSale(ctx, t, c.Client, orders[1], r.AfterSaleNo, "SUCCESS")
	if orderpay.BillDay(time.Now()) != day {
		t.Skip("the day turned (China time) while the trades were made; run again")
	}
	from, _, _ := orderpay.BillDayRange(day)
	clock.jumpTo(from.AddDate(0, 0, 1).Add(10*time.Hour + 30*time.Minute))

	tab := newTab(t, browser)
	do(t, tab, "sign in and open the reconciliation page", 20*time.Second,
		chromedp.Navigate(m.URL+"/ops"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), m.AdminToken),
		chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.Click(chromedp.CSS(`#tabbtn-recon`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-empty`)))
	do(t, tab, "run the Alipay bill of today", 30*time.Second,
		chromedp.SetValue(chromedp.CSS(`#recon-channel`), "alipay"),
		chromedp.SetValue(chromedp.CSS(`#recon-date`), day),
		chromedp.Click(chromedp.CSS(`#recon-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-layers`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-reports`)))
	if got := text(t, tab, "#recon-error"); got != "" {
		t.Fatalf("the page shows an error after the run: %s", got)
	}
	var list struct{ Reconciliations []reconLayerView }
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations?channel=alipay&date="+day, admin, nil, &list); err != nil || len(list.Reconciliations) != 1 {
		t.Fatalf("the run's report: %+v, %v", list, err)
	}
	var rep reconLayerView
	if err := c.call(ctx, http.MethodGet, fmt.Sprintf("%s/admin/reconciliations/%d", m.URL, list.Reconciliations[0].ID), admin, nil, &rep); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, tab, `document.querySelector("#recon-title").dataset.recon`); got != fmt.Sprint(rep.ID) {
		t.Fatalf("the page shows report %s; the run stored %d", got, rep.ID)
	}
	// The bill has both payments and the refund, and the trades layer agrees with every one.
	if rep.Counts["MATCHED"] != 3 || rep.Layers[orderpay.LayerTrades] != (orderpay.LayerSummary{}) {
		t.Fatalf("the report's trades: counts %v, layer %+v", rep.Counts, rep.Layers[orderpay.LayerTrades])
	}
	states := map[orderpay.ReconLayer]string{orderpay.LayerTrades: "MATCHED", orderpay.LayerFees: "MATCHED", orderpay.LayerSettlement: "MATCHED"}
	if f := rep.Figures; !f.FeesChecked || !f.SettlementChecked || rep.Unexplained != 0 || f.Paid != 8800*3 || f.Refunded != 8800 ||
		f.FeeExpected != f.FeeSummary || f.NetExpected != f.NetBill {
		t.Fatalf("the report's figures %+v, unexplained %d: want all three layers checked and agreeing", f, rep.Unexplained)
	}
	for _, l := range orderpay.ReconLayers {
		card := `#recon-layers [data-layer="` + string(l) + `"]`
		if got := eval[string](t, tab, `document.querySelector('`+card+`').dataset.state`); got != states[l] {
			t.Errorf("the %s card is %s, want %s", l, got, states[l])
		}
		sum := rep.Layers[l]
		for key, want := range map[string]string{"differences": fmt.Sprint(sum.Differences), "unexplained": fmt.Sprint(sum.Unexplained),
			"unexplained_amount": money(sum.UnexplainedAmount)} {
			if got := text(t, tab, card+` [data-figure="`+key+`"]`); got != want {
				t.Errorf("the %s card's %s shows %q, want %q", l, key, got, want)
			}
		}
		if states[l] == "NOT_CHECKED" {
			for _, it := range rep.Items {
				if it.Layer == l && it.Class == "NOT_CHECKED" && !strings.Contains(text(t, tab, card), it.Detail) {
					t.Errorf("the %s card does not say why it was not checked (%q): %s", l, it.Detail, text(t, tab, card))
				}
			}
		}
	}
	if got := text(t, tab, `#recon-layers [data-layer="TRADES"] [data-count="MATCHED"]`); got != "3" {
		t.Errorf("the trades card's matched count %q", got)
	}
	if got := text(t, tab, `#recon-layers [data-layer="TRADES"] [data-figure="bill_rows"]`); got != "3" {
		t.Errorf("the trades card's bill rows %q", got)
	}
	if got := text(t, tab, "#recon-unexplained"); got != fmt.Sprint(rep.Unexplained) {
		t.Errorf("unexplained shows %q; the report has %d", got, rep.Unexplained)
	}
	// Every matched trade links to its order's page in the console.
	for _, it := range rep.Items {
		if it.Class != "MATCHED" {
			continue
		}
		if it.OrderNo != orders[0] && it.OrderNo != orders[1] {
			t.Errorf("matched trade %s names order %q, not one of %v", it.OutTradeNo, it.OrderNo, orders)
		}
		if !eval[bool](t, tab, fmt.Sprintf(`document.querySelector('#recon-report a.trade[data-trade=%q][data-order=%q]') !== null`, it.OutTradeNo, it.OrderNo)) {
			t.Errorf("no link from trade %s to order %s", it.OutTradeNo, it.OrderNo)
		}
	}
	do(t, tab, "frame the report", 10*time.Second, chromedp.EmulateViewport(1280, 900),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#recon-run-box").scrollIntoView()`))
	shot(t, tab, "reconciliation-layers", "ops-reconciliation-layers.png")

	// Export CSV: the page fetches the report's CSV with the token in the header and hands
	// it to the browser as a download; the file handed over is read here, its byte order mark
	// kept.
	do(t, tab, "export the CSV", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`window.exported = null; (() => { const make = URL.createObjectURL;
			URL.createObjectURL = (b) => { b.arrayBuffer().then((buf) => { window.exported = new TextDecoder("utf-8", { ignoreBOM: true }).decode(buf); }); return make(b); }; })()`),
		chromedp.Click(chromedp.CSS(`#recon-export`)),
		chromedp.Poll[chromedp.Void](`window.exported !== null`))
	csv := eval[string](t, tab, `window.exported`)
	if !strings.HasPrefix(csv, "\ufeffdate,channel,account,layer,class") || strings.Count(csv, day+",alipay,") != len(rep.Items) {
		t.Errorf("the export has not the report's %d items: %q", len(rep.Items), csv)
	}
	if got := text(t, tab, "#recon-error"); got != "" {
		t.Errorf("the export shows an error: %s", got)
	}

	// Show finds the same report by channel and day, after the page is emptied.
	do(t, tab, "show the report by channel and day", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#recon-report").replaceChildren()`),
		chromedp.Click(chromedp.CSS(`#recon-show`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-layers`)))
	if got := eval[string](t, tab, `document.querySelector("#recon-title").dataset.recon`); got != fmt.Sprint(rep.ID) {
		t.Fatalf("Show shows report %s, want %d", got, rep.ID)
	}

	do(t, tab, "a 390 px screen", 10*time.Second, chromedp.EmulateViewport(390, 1600),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#recon-run-box").scrollIntoView()`))
	if w := eval[int](t, tab, `document.documentElement.scrollWidth`); w > 390 {
		shot(t, tab, "too-wide")
		t.Errorf("at 390 px the reconciliation page is %d px wide", w)
	}
	if eval[bool](t, tab, `(() => { const [a, b] = document.querySelectorAll("#recon-layers .recon-layer"); return a.getBoundingClientRect().bottom > b.getBoundingClientRect().top; })()`) {
		t.Error("at 390 px the layers are not one under another")
	}
	shot(t, tab, "reconciliation-layers-390", "ops-reconciliation-layers-390.png")
}

// money is the console's way of writing fen (common.js).
func money(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s¥%d.%02d", sign, fen/100, fen%100)
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"orderpay"
)

// The pay page of a queue ticket (pay.html given a ticket id, queue.js), in Chromium at a
// phone's 390 px: it shows the place in the queue and moves on by itself, to the order's
// pay page when the ticket's turn makes its order, or to what ended it. Screenshots go to
// docs/screenshots with ORDERPAY_UPDATE_SCREENSHOTS=1: pay-queue-390.png (waiting) and
// pay-queue-soldout-390.png.
func TestBrowserQueuePage(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	m, c := startMain(t, "")
	q := &queuePages{m: m, c: c, browser: browser}
	t.Run("WaitsThenPays", q.waitsThenPays)
	t.Run("SoldOut", q.soldOut)
	t.Run("ExpiredAndRefused", q.expiredAndRefused)
}

type queuePages struct {
	m       *Main
	c       *apiClient
	browser context.Context
}

// queueView is what a queue page shows, read in one step: the path, the state and
// position the page holds, the words it says, how it follows the ticket, and its width.
type queueView struct {
	Path      string
	State     string
	Position  int64
	Text      string
	Transport string
	Width     int64
}

const queueViewJS = `(() => { const s = document.querySelector("#queue-state"), q = document.querySelector("#queue"), tr = document.querySelector("#queue-transport");
	const shown = !!q && !q.classList.contains("hidden");
	return { path: location.pathname, state: shown ? (s.dataset.state || "") : "", position: shown ? Number(s.dataset.position || 0) : 0,
		text: shown ? s.innerText.trim() : "", transport: shown ? (tr.dataset.transport || "") : "", width: document.documentElement.scrollWidth }; })()`

// readQueue reads the page's queueView; it fails while the page navigates.
func readQueue(tab context.Context) (queueView, error) {
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[queueView](queueViewJS))
}

// queuedSKU lists a queued SKU: pace orders a second, a ticket waiting at most wait
// seconds (0: the default).
func (q *queuePages) queuedSKU(ctx context.Context, t *testing.T, sku, title string, stock, pace, wait int64) {
	t.Helper()
	body := map[string]any{"sku": sku, "merchant_id": "m1", "title": title, "price": 1990, "stock": stock, "product_type": "special",
		"queued": true, "queue_pace": pace}
	if wait > 0 {
		body["queue_wait_seconds"] = wait
	}
	if err := q.c.call(ctx, http.MethodPost, q.m.URL+"/admin/skus", http.Header{"Authorization": {"Bearer " + q.c.AdminToken}}, body, nil); err != nil {
		t.Fatal(err)
	}
}

// takeTicket is buyer's order request for one unit of a queued SKU: a waiting ticket.
func (q *queuePages) takeTicket(ctx context.Context, t *testing.T, buyer, sku string) ticketView {
	t.Helper()
	var tk ticketView
	err := q.c.call(ctx, http.MethodPost, q.m.URL+"/v1/orders", http.Header{"X-Buyer-Id": {buyer}},
		map[string]any{"buyer_id": buyer, "items": []map[string]any{{"sku": sku, "qty": 1}}}, &tk)
	if err != nil || tk.State != string(orderpay.TicketWaiting) || !orderpay.ValidTicketID(tk.ID) {
		t.Fatalf("%s's ticket for %s: %+v, %v", buyer, sku, tk, err)
	}
	return tk
}

func (q *queuePages) ticket(ctx context.Context, t *testing.T, id string) ticketView {
	t.Helper()
	var tk ticketView
	if err := q.c.call(ctx, http.MethodGet, q.m.URL+"/v1/tickets/"+id, nil, nil, &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// phoneTab opens a tab at 390 × 844 px in English, as buyer.
func (q *queuePages) phoneTab(t *testing.T, buyer string) context.Context {
	t.Helper()
	tab := newTab(t, q.browser)
	q.signIn(t, tab, buyer)
	return tab
}

// signIn names buyer in the tab (the demo's mode none: this browser says who it is).
func (q *queuePages) signIn(t *testing.T, tab context.Context, buyer string) {
	t.Helper()
	do(t, tab, "name the buyer "+buyer, 20*time.Second,
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(q.m.URL+"/orders"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("orderpay.buyer", "`+buyer+`"); localStorage.setItem("orderpay.lang", "en")`))
}

// watch reads the queue page every 100 ms until done says so (or 60 s pass), and returns
// what it saw; reads that fail while the page navigates are skipped.
func watch(t *testing.T, tab context.Context, done func(v queueView) bool, each func(v queueView)) []queueView {
	t.Helper()
	var seen []queueView
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			shot(t, tab, "failed-watch")
			t.Fatalf("the queue page did not get there in 60 s; of %d reads the first was %+v and the last %+v", len(seen), firstView(seen), lastView(seen))
		}
		v, err := readQueue(tab)
		if err != nil {
			continue
		}
		seen = append(seen, v)
		if each != nil {
			each(v)
		}
		if done(v) {
			return seen
		}
	}
}

func firstView(vs []queueView) queueView {
	if len(vs) == 0 {
		return queueView{}
	}
	return vs[0]
}

func lastView(vs []queueView) queueView {
	if len(vs) == 0 {
		return queueView{}
	}
	return vs[len(vs)-1]
}

// A buyer orders a queued SKU from the shop, at one order a second with six buyers ahead:
// the shop goes to the ticket's page, which says "In the queue, position N" (N > 1), live
// from the ticket's event stream; the position falls as the queue drains; and the page
// replaces itself with the pay page of the order its turn made, which the buyer pays as any
// other.
func (q *queuePages) waitsThenPays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const buyer = "queue-wendy"
	q.queuedSKU(ctx, t, "qp-tea", "Flash-sale Longjing, 50 g", 20, 1, 0)
	// The shop is loaded and the cart filled before the six take their tickets: the queue
	// drains from then on, in about six seconds, and a page loaded on a busy machine could
	// take longer than that.
	tab := q.phoneTab(t, buyer)
	do(t, tab, "put the queued SKU in the cart", 20*time.Second,
		chromedp.Navigate(q.m.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-add="qp-tea"]`)),
		chromedp.Click(chromedp.CSS(`button[data-add="qp-tea"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#place-order`)))
	for i := range 6 {
		q.takeTicket(ctx, t, fmt.Sprintf("queue-ahead-%d", i), "qp-tea")
	}
	do(t, tab, "order the queued SKU from the shop", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#place-order`)),
		chromedp.WaitVisible(chromedp.CSS(`#queue-state[data-state="WAITING"]`)))
	id := strings.TrimPrefix(eval[string](t, tab, `location.pathname`), "/pay/")
	if !orderpay.ValidTicketID(id) {
		t.Fatalf("the shop went to /pay/%s; want the ticket's page", id)
	}
	if got := text(t, tab, "#ticket-id"); got != id {
		t.Errorf("the page names the ticket %q; want %s", got, id)
	}
	if got := eval[string](t, tab, `document.querySelector("#queue-state").getAttribute("aria-live")`); got != "polite" {
		t.Errorf("the position's aria-live is %q; want polite", got)
	}
	if sku, qty := text(t, tab, "#queue-sku"), text(t, tab, "#queue-qty"); sku != "qp-tea" || qty != "1" {
		t.Errorf("the page shows %q × %q; want qp-tea × 1", sku, qty)
	}
	if until := text(t, tab, "#queue-until"); !timeFormats["en"].MatchString(until) {
		t.Errorf("the page keeps the place until %q; want a time in %s", until, timeFormats["en"])
	}
	if got := eval[string](t, tab, `document.title`); got != "orderpay — in the queue" {
		t.Errorf("the page's title is %q", got)
	}

	var first queueView
	shotTaken := false
	seen := watch(t, tab, func(v queueView) bool { return v.Path != "/pay/"+id }, func(v queueView) {
		if v.State != "WAITING" || v.Transport != "sse" || shotTaken {
			return
		}
		first, shotTaken = v, true
		shot(t, tab, "waiting", "pay-queue-390.png")
	})
	if !shotTaken {
		t.Fatalf("the page never showed the ticket waiting, live: %+v", seen)
	}
	if first.Position < 2 || first.Text != fmt.Sprintf("In the queue, position %d", first.Position) {
		t.Fatalf("with six buyers ahead at one a second the page first said %q (position %d); want \"In the queue, position N\", N > 1", first.Text, first.Position)
	}
	var positions []int64
	for _, v := range seen {
		if v.Path != "/pay/"+id || v.State != "WAITING" {
			continue
		}
		if n := len(positions); n == 0 || positions[n-1] != v.Position {
			positions = append(positions, v.Position)
		}
		if v.Width > 390 {
			t.Errorf("at 390 px the queue page is %d px wide", v.Width)
		}
		if v.Text != fmt.Sprintf("In the queue, position %d", v.Position) {
			t.Errorf("at position %d the page says %q", v.Position, v.Text)
		}
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] > positions[i-1] {
			t.Errorf("the position rose: %v", positions)
		}
	}
	if last := positions[len(positions)-1]; last >= first.Position {
		t.Errorf("the position never fell from %d: %v", first.Position, positions)
	}

	// The page is the order's pay page now, by itself: the order the ticket's turn made.
	do(t, tab, "land on the order's pay page", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PENDING_PAYMENT"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay`)))
	tk := q.ticket(ctx, t, id)
	if tk.State != string(orderpay.TicketOrdered) || tk.OrderNo == "" || tk.Position != 0 {
		t.Fatalf("the ticket is %+v; want ORDERED with its order", tk)
	}
	if got := eval[string](t, tab, `location.pathname`); got != "/pay/"+tk.OrderNo {
		t.Fatalf("the page went to %s; want /pay/%s", got, tk.OrderNo)
	}
	if got := text(t, tab, "#order-no"); got != tk.OrderNo {
		t.Errorf("the pay page is of order %q; want %s", got, tk.OrderNo)
	}
	o, err := q.c.OrderDetail(ctx, tk.OrderNo)
	if err != nil || o.BuyerID != buyer || len(o.Items) != 1 || o.Items[0].SKU != "qp-tea" || o.Status != string(orderpay.OrderPendingPayment) {
		t.Fatalf("the ticket's order: %+v, %v; want %s's unpaid order of qp-tea", o, err, buyer)
	}
	// The queue page left the history: back goes to the shop, not to a queue that is over.
	do(t, tab, "go back", 20*time.Second, chromedp.Evaluate[chromedp.Void](`history.back()`))
	back := watch(t, tab, func(v queueView) bool { return v.Path != "/pay/"+tk.OrderNo }, nil)
	if got := back[len(back)-1].Path; got != "/" {
		t.Errorf("back from the order's pay page went to %s; want the shop", got)
	}
}

// A queued SKU of twelve units with fifteen buyers ahead sells out while the buyer waits:
// the ticket's page shows the ticket waiting behind them, then says by itself that it sold
// out, that nothing was charged, and offers the way back to
// the shop, in English and Chinese. A second tab of the same ticket, whose event stream the
// server refuses (503, as past its cap on streams), reads the ticket every 2 s instead and
// ends the same way.
func (q *queuePages) soldOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const buyer = "queue-sam"
	q.queuedSKU(ctx, t, "qp-mooncakes", "Mooncakes, flash sale", 12, 1, 0)
	// Signed in before the queue starts to drain (as in waitsThenPays).
	tab := q.phoneTab(t, buyer)
	for i := range 15 {
		q.takeTicket(ctx, t, fmt.Sprintf("queue-rush-%d", i), "qp-mooncakes")
	}
	tk := q.takeTicket(ctx, t, buyer, "qp-mooncakes")
	do(t, tab, "open the ticket's page", 20*time.Second,
		chromedp.Navigate(q.m.URL+"/pay/"+tk.ID),
		chromedp.WaitVisible(chromedp.CSS(`#queue-state[data-state]`)))
	// What the page shows first, read at once: the queue drains a ticket a second, and the
	// second tab below takes a few seconds more on a loaded machine.
	opened := watch(t, tab, func(v queueView) bool { return v.State != "" }, nil)
	if first := opened[len(opened)-1]; first.State != "WAITING" || first.Position < 2 {
		t.Errorf("the page first showed %+v; want the ticket waiting behind the others", first)
	}

	polling := q.phoneTab(t, buyer)
	var reads, refused atomic.Int64
	paused := chromedp.Events(polling, fetch.RequestPaused)
	do(t, polling, "refuse the ticket's event stream", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: q.m.URL + "/v1/tickets/*"}}})
		return err
	}))
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			if strings.HasSuffix(ev.Request.URL, "/events") {
				refused.Add(1)
				_, _ = chromedp.Call(polling, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: http.StatusServiceUnavailable,
					ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}, {Name: "Retry-After", Value: "5"}},
					Body:            []byte(`{"error":{"code":"EUNAVAILABLE","message":"too many event streams are open"}}`)})
				continue
			}
			reads.Add(1)
			_, _ = chromedp.Call(polling, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	do(t, polling, "open the ticket's page in a second tab", 20*time.Second,
		chromedp.Navigate(q.m.URL+"/pay/"+tk.ID),
		chromedp.WaitVisible(chromedp.CSS(`#queue-state[data-state]`)))

	seen := watch(t, tab, func(v queueView) bool { return v.State != "" && v.State != "WAITING" }, nil)
	end := seen[len(seen)-1]
	if end.State != string(orderpay.TicketSoldOut) || end.Text != "Sold out: every unit is taken. Nothing was charged." || end.Path != "/pay/"+tk.ID {
		t.Fatalf("the page ended with %+v; want the sold-out state", end)
	}
	if end.Width > 390 {
		t.Errorf("at 390 px the sold-out page is %d px wide", end.Width)
	}
	if !isVisible(t, tab, `#queue-back a[href="/"]`) || text(t, tab, "#queue-back") != "Back to the shop" {
		t.Error("the sold-out page offers no way back to the shop")
	}
	if isVisible(t, tab, "#queue-note") || isVisible(t, tab, "#queue-until") {
		t.Error("the sold-out page still says to wait")
	}
	shot(t, tab, "sold-out", "pay-queue-soldout-390.png")
	if got := q.ticket(ctx, t, tk.ID); got.State != string(orderpay.TicketSoldOut) || got.OrderNo != "" {
		t.Fatalf("the ticket is %+v; want SOLD_OUT without an order", got)
	}

	// The second tab: refused its stream, it read the ticket until it ended.
	seen = watch(t, polling, func(v queueView) bool { return v.State == string(orderpay.TicketSoldOut) }, nil)
	if end := seen[len(seen)-1]; end.Text != "Sold out: every unit is taken. Nothing was charged." || end.Transport != "" {
		t.Errorf("the polling tab ended with %+v", end)
	}
	if refused.Load() == 0 || reads.Load() < 2 {
		t.Errorf("the polling tab had %d streams refused and read the ticket %d times; want a refusal and reads after the first", refused.Load(), reads.Load())
	}

	// In Chinese, switched in the header.
	do(t, tab, "switch to Chinese", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "zh-CN"`))
	if got, back := text(t, tab, "#queue-state"), text(t, tab, "#queue-back"); got != "已售罄：所有商品都已售出。未扣任何款项。" || back != "返回商城" {
		t.Errorf("in Chinese the sold-out page says %q, %q", got, back)
	}
	if w := eval[int64](t, tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 px the sold-out page in Chinese is %d px wide", w)
	}
}

// A ticket that waits past the SKU's bound (3 s, with six buyers ahead at one a second)
// ends expired; one whose buyer is blocked while it waits ends refused when its turn
// comes, with the reason. Each page says that nothing was charged and offers the way back.
func (q *queuePages) expiredAndRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + q.c.AdminToken}}
	q.queuedSKU(ctx, t, "qp-lychee", "Lychee, flash sale", 50, 1, 3)
	q.queuedSKU(ctx, t, "qp-longan", "Longan, flash sale", 50, 1, 0)
	for i := range 6 {
		q.takeTicket(ctx, t, fmt.Sprintf("queue-early-%d", i), "qp-lychee")
	}
	for i := range 2 {
		q.takeTicket(ctx, t, fmt.Sprintf("queue-first-%d", i), "qp-longan")
	}
	late := q.takeTicket(ctx, t, "queue-late", "qp-lychee")
	blocked := q.takeTicket(ctx, t, "queue-blocked", "qp-longan")
	if err := q.c.call(ctx, http.MethodPut, q.m.URL+"/admin/blocklist/buyer/queue-blocked", admin, map[string]any{"reason": "test"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = q.c.call(context.Background(), http.MethodDelete, q.m.URL+"/admin/blocklist/buyer/queue-blocked", admin, nil, nil)
	})

	tab := q.phoneTab(t, "queue-late")
	do(t, tab, "open the late ticket's page", 20*time.Second, chromedp.Navigate(q.m.URL+"/pay/"+late.ID))
	seen := watch(t, tab, func(v queueView) bool { return v.State != "" && v.State != "WAITING" }, nil)
	if end := seen[len(seen)-1]; end.State != string(orderpay.TicketExpired) || end.Text != "Your turn did not come within the sale's time. Nothing was charged." {
		t.Fatalf("the late ticket's page ended with %+v; want the expired state", end)
	}
	if !isVisible(t, tab, `#queue-back a[href="/"]`) {
		t.Error("the expired page offers no way back to the shop")
	}
	shot(t, tab, "expired")

	q.signIn(t, tab, "queue-blocked")
	do(t, tab, "open the blocked buyer's ticket", 20*time.Second, chromedp.Navigate(q.m.URL+"/pay/"+blocked.ID))
	seen = watch(t, tab, func(v queueView) bool { return v.State != "" && v.State != "WAITING" }, nil)
	if end := seen[len(seen)-1]; end.State != string(orderpay.TicketRefused) || end.Text != "Your turn came, but the order could not be made. Nothing was charged." {
		t.Fatalf("the blocked buyer's page ended with %+v; want the refused state", end)
	}
	if reason := text(t, tab, "#queue-reason"); !regexp.MustCompile(`^Why: .*blocked`).MatchString(reason) {
		t.Errorf("the refused page gives the reason %q; want why (blocked)", reason)
	}
	if !isVisible(t, tab, `#queue-back a[href="/"]`) {
		t.Error("the refused page offers no way back to the shop")
	}
	shot(t, tab, "refused")
}

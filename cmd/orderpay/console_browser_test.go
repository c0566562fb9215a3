package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos"
)

// TestBrowserConsole drives every operator job through the console, in headless Chromium,
// on one orderpay with named operators (a viewer, an operator, an admin): what each job did
// is checked through the API, and in the order's timeline under the operator's name. The
// viewer sees no action at all, and the API refuses the viewer's writes. The server
// compensates lost notifications by no query of its own (notify-only), so that only the
// operator's "confirm by hand" finds a payment whose notifications were dropped; refunds
// the channel refuses for now are retried for two seconds only, so that one reaches the
// operators' queue at once; payment results go to a webhook receiver.
func TestBrowserConsole(t *testing.T) {
	t.Parallel()
	file, viewer, operator, admin := operatorsFile(t)
	erp := newHookReceiver(t, testWebhookSecret, http.StatusNoContent)
	m, c := startMain(t, "", func(m *Main) {
		m.Config.OperatorsFile, m.Config.AdminToken = file, ""
		m.Config.Compensation = CompensationNotifyOnly
		m.Config.RefundRetry = orderpay.RefundRetryPlan{Schedule: []time.Duration{time.Second}, Every: time.Second, For: 2 * time.Second}
		m.Config.Webhooks = WebhookConfig{URLs: []string{erp.URL}, Secret: testWebhookSecret, AllowNetworks: testLoopback}
	})
	c.Client.AdminToken = admin // the setup's admin calls are zhao's
	s := &consoleStory{m: m, c: c, erp: erp, browser: startBrowser(t), viewer: viewer, operator: operator, admin: admin}
	// The operator's tab lives as long as the whole test: the steps take turns in it.
	s.operatorTab = newTab(t, s.browser)
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ShipExtendApproveAndReceiveGoods", s.shipExtendApproveAndReceiveGoods},
		{"ViewerSeesNoActionAndIsRefused", s.viewerSeesNoActionAndIsRefused},
		{"RejectAndRetryARefund", s.rejectAndRetryARefund},
		{"ResolveARefund", s.resolveARefund},
		{"ConfirmAPaymentByHand", s.confirmAPaymentByHand},
		{"ResendAWebhook", s.resendAWebhook},
		{"AdminJobs", s.adminJobs},
	}
	for _, step := range steps {
		// Each step builds on the ones before: after a failure the rest would only fail too.
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
}

// consoleStory is the state the console's stories share: one server, one browser, the
// operator's tab, and order A, the one with a parcel, returns and a queued refund.
type consoleStory struct {
	m                         *Main
	c                         *apiClient
	erp                       *hookReceiver
	browser                   context.Context
	viewer, operator, admin   string
	operatorTab               context.Context
	orderA, parcelA, paymentA string
	returnA1, returnA2        string
}

const (
	liWei    = "operator:li.wei"    // the operator
	wangFang = "operator:wang.fang" // the viewer
	zhao     = "operator:zhao"      // the admin
)

// signIn opens the console in tab and signs in with token, checking that the header names
// the operator and their role.
func (s *consoleStory) signIn(t *testing.T, tab context.Context, token, actor, role string) {
	t.Helper()
	do(t, tab, "sign in as "+actor, 20*time.Second,
		chromedp.Navigate(s.m.URL+"/ops"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#logout`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.WaitVisible(chromedp.CSS(`#logout`)))
	if got, gotRole := text(t, tab, "#who-actor"), text(t, tab, "#who-role"); got != actor || gotRole != role {
		t.Fatalf("the header shows %q (%q); want %s (%s)", got, gotRole, actor, role)
	}
}

// openOrder finds an order in the console's search and opens its timeline.
func openOrder(t *testing.T, tab context.Context, no string) {
	t.Helper()
	link := `#order-results[data-q="` + no + `"] a[data-order="` + no + `"]`
	do(t, tab, "open the timeline of "+no, 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-orders`)),
		chromedp.SetValue(chromedp.CSS(`#q`), no),
		chromedp.Click(chromedp.CSS(`#search-form button`)),
		chromedp.WaitVisible(chromedp.CSS(link)),
		chromedp.Click(chromedp.CSS(link)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline[data-shown="`+no+`"] #events`)))
}

// reload reloads the open timeline and waits for sel.
func reload(t *testing.T, tab context.Context, what, sel string) {
	t.Helper()
	do(t, tab, what, 20*time.Second, chromedp.Click(chromedp.CSS(`#timeline-reload`)), chromedp.WaitVisible(chromedp.CSS(`#timeline[data-shown] `+sel)))
}

// clickAction fills the fields of the action form name inside scope and submits it.
func clickAction(t *testing.T, tab context.Context, what, scope, name string, fields map[string]string, then chromedp.Action[chromedp.Void]) {
	t.Helper()
	form := scope + ` form[data-action="` + name + `"]`
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(form))}
	for f, v := range fields {
		steps = append(steps, chromedp.SetValue(chromedp.CSS(form+` [name="`+f+`"]`), v))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(form+` button`)), then)
	do(t, tab, what, 30*time.Second, steps...)
}

// showsOperatorAction waits until the console's timeline shows actor's call ending in
// route, done.
func showsOperatorAction(t *testing.T, tab context.Context, actor, route string) {
	t.Helper()
	do(t, tab, "see "+actor+"'s "+route+" in the timeline", 20*time.Second, chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`Array.from(document.querySelectorAll('#events tr[data-kind="operator"]')).some((r) => r.querySelector(".actor").textContent === %q &&
			r.querySelector("code").textContent.endsWith(%q) && r.querySelector('[data-result="ok"]') !== null)`, actor, route)))
}

// evalPromise evaluates expr, a promise, and returns what it resolves to as JSON.
func evalPromise(t *testing.T, tab context.Context, expr string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// consoleTimeline is GET /admin/orders/{no}/timeline, as far as these tests read it.
type consoleTimeline struct {
	Order struct {
		OrderNo string `json:"order_no"`
		Status  string `json:"status"`
	} `json:"order"`
	Payment *struct {
		PaymentNo string `json:"payment_no"`
		Status    string `json:"status"`
	} `json:"payment"`
	Attempts []struct {
		OutTradeNo string `json:"out_trade_no"`
		Status     string `json:"status"`
	} `json:"attempts"`
	Refunds []consoleRefund `json:"refunds"`
	Events  []consoleEvent  `json:"events"`
}

type consoleEvent struct {
	Kind, Entity, To, Actor, Event, Result, Reason, Trigger, Outcome string
	EntityNo                                                         string `json:"entity_no"`
}

type consoleRefund struct {
	OutRefundNo string `json:"out_refund_no"`
	OutTradeNo  string `json:"out_trade_no"`
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Problem     string `json:"problem"`
	ResolvedBy  string `json:"resolved_by"`
	ResolvedRef string `json:"resolved_ref"`
	OrderNo     string `json:"order_no"`
}

func (s *consoleStory) timeline(t *testing.T, no string) consoleTimeline {
	t.Helper()
	status, body := as(t, s.viewer, http.MethodGet, s.m.URL+"/admin/orders/"+no+"/timeline", "")
	var tl consoleTimeline
	if err := json.Unmarshal(body, &tl); status != http.StatusOK || err != nil {
		t.Fatalf("timeline of %s: %d %s", no, status, body)
	}
	return tl
}

// operatorDid reports whether the timeline has actor's call ending in route, done.
func (tl consoleTimeline) operatorDid(actor, route string) bool {
	return slices.ContainsFunc(tl.Events, func(e consoleEvent) bool {
		return e.Kind == "operator" && e.Actor == actor && strings.HasSuffix(e.Event, route) && e.Result == "ok"
	})
}

// refund is GET /admin/refunds/{no}.
func (s *consoleStory) refund(t *testing.T, no string) consoleRefund {
	t.Helper()
	status, body := as(t, s.viewer, http.MethodGet, s.m.URL+"/admin/refunds/"+no, "")
	var out struct {
		Refund  consoleRefund `json:"refund"`
		OrderNo string        `json:"order_no"`
	}
	if err := json.Unmarshal(body, &out); status != http.StatusOK || err != nil {
		t.Fatalf("refund %s: %d %s", no, status, body)
	}
	out.Refund.OrderNo = out.OrderNo
	return out.Refund
}

func (s *consoleStory) waitRefund(t *testing.T, no, status string) consoleRefund {
	t.Helper()
	var r consoleRefund
	waitFor(t, 30*time.Second, "refund "+no+" "+status, func() bool { r = s.refund(t, no); return r.Status == status })
	return r
}

// lastMove is the last transition in an entity's history.
func (s *consoleStory) lastMove(t *testing.T, entity, no string) orderpay.HistoryEntry {
	t.Helper()
	h, err := s.m.Store.History(context.Background(), entity, no)
	if err != nil || len(h) == 0 {
		t.Fatalf("history of %s %s: %+v, %v", entity, no, h, err)
	}
	return h[len(h)-1]
}

func (s *consoleStory) ledger(t *testing.T, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, l := range s.m.Sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	t.Fatalf("no trade %s in the simulator's ledger", outTradeNo)
	return sim.LedgerEntry{}
}

// paidOrder is an order of qty units of console-tea, paid on channel with its notification.
func (s *consoleStory) paidOrder(t *testing.T, ctx context.Context, buyer, channel string, qty int64) *chaos.OrderDetail {
	t.Helper()
	o, err := s.c.createOrder(ctx, buyer, "console-tea", qty)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.c.pay(ctx, o.OrderNo, channel)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.waitStatus(ctx, o.OrderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d, err := s.c.OrderDetail(ctx, o.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The operator li.wei works on order A (three tins, paid by WeChat Pay) through its
// timeline: ships its parcel, extends its receipt by two days for the merchant, approves
// the buyer's first return, and, once the buyer has sent it back, receives the goods; the
// refund the goods' receipt sends is refused for balance and, its two seconds of retries
// run out, waits in the operators' queue. Each job is checked through the API and in the
// timeline under li.wei's name. The order's view is shot at 1280 and 390 px, with nothing
// wider than the screen at 390.
func (s *consoleStory) shipExtendApproveAndReceiveGoods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.c.createSKU(ctx, "console-tea", 3200, 50, "normal"); err != nil {
		t.Fatal(err)
	}
	a := s.paidOrder(t, ctx, "console-ann", orderpay.ChannelWechat, 3)
	s.orderA, s.paymentA = a.OrderNo, a.PaymentNo
	if len(a.Shipments) != 1 {
		t.Fatalf("order A's parcels: %+v", a.Shipments)
	}
	s.parcelA = a.Shipments[0].ShipmentNo
	if _, err := s.c.ChangeAddress(ctx, s.orderA, "console-ann", chaos.Address{Name: "Zhang Ann", Phone: "13700137000", Detail: "5 Huaihai Road, Shanghai"}); err != nil {
		t.Fatal(err)
	}

	tab := s.operatorTab
	s.signIn(t, tab, s.operator, liWei, "operator")
	// The operator has no catalogue and runs no reconciliation: those are an admin's.
	if eval[bool](t, tab, `document.querySelector("#tabbtn-catalogue") !== null || document.querySelector("#recon-form") !== null`) {
		t.Fatal("the operator is offered the catalogue or the reconciliation run")
	}
	openOrder(t, tab, s.orderA)

	// Ship.
	parcel := `#tl-shipments [data-shipment="` + s.parcelA + `"]`
	clickAction(t, tab, "ship the parcel", parcel+`[data-status="PENDING"]`, "ship", map[string]string{"carrier": "SF Express", "tracking_no": "SF8001"},
		chromedp.WaitVisible(chromedp.CSS(parcel+`[data-status="SHIPPED"] form[data-action="extend"]`)))
	d, err := s.c.OrderDetail(ctx, s.orderA)
	if err != nil || d.Status != "SHIPPED" || d.Shipments[0].Status != "SHIPPED" || d.Shipments[0].Carrier != "SF Express" || d.Shipments[0].TrackingNo != "SF8001" {
		t.Fatalf("after the console's ship: %+v, %v", d, err)
	}
	if mv := s.lastMove(t, orderpay.EntityShipment, s.parcelA); mv.To != "SHIPPED" || mv.Actor != liWei {
		t.Fatalf("the parcel's last move %+v", mv)
	}
	if got := text(t, tab, parcel+` .tracking`); !strings.Contains(got, "SF Express SF8001") {
		t.Fatalf("the parcel shows %q", got)
	}
	showsOperatorAction(t, tab, liWei, "/ship")

	// Extend by two days, for the merchant.
	receiveBy := *d.Shipments[0].ReceiveBy
	clickAction(t, tab, "extend the receipt", parcel, "extend", map[string]string{"by": "merchant", "days": "2"},
		chromedp.WaitVisible(chromedp.CSS(parcel+` .receipt[data-extensions="1"]`)))
	d, err = s.c.OrderDetail(ctx, s.orderA)
	if err != nil || d.Shipments[0].Extensions != 1 || !d.Shipments[0].ReceiveBy.Equal(receiveBy.Add(48*time.Hour)) {
		t.Fatalf("after the console's extension: %+v (receive by %s before), %v", d.Shipments[0], receiveBy, err)
	}
	showsOperatorAction(t, tab, liWei, "/extend")

	// The buyer asks to return two tins, one by one; the operator approves the first.
	r1, err := s.c.RequestAfterSale(ctx, s.orderA, "console-ann", "return", "too much tea", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil || r1.Status != "REQUESTED" {
		t.Fatalf("return 1: %+v, %v", r1, err)
	}
	r2, err := s.c.RequestAfterSale(ctx, s.orderA, "console-ann", "return", "changed my mind", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil || r2.Status != "REQUESTED" {
		t.Fatalf("return 2: %+v, %v", r2, err)
	}
	s.returnA1, s.returnA2 = r1.AfterSaleNo, r2.AfterSaleNo
	ret1 := `#tl-aftersales [data-after-sale="` + s.returnA1 + `"]`
	reload(t, tab, "see the returns", `#tl-aftersales [data-after-sale="`+s.returnA2+`"][data-status="REQUESTED"]`)
	if got := text(t, tab, ret1); !strings.Contains(got, "¥32.00") || !strings.Contains(got, "console-tea × 1") || !strings.Contains(got, "too much tea") {
		t.Fatalf("return 1 shows %q", got)
	}
	clickAction(t, tab, "approve return 1", ret1+`[data-status="REQUESTED"]`, "approve", nil,
		chromedp.WaitVisible(chromedp.CSS(ret1+`[data-status="AWAITING_GOODS"]`)))
	if mv := s.lastMove(t, orderpay.EntityAfterSale, s.returnA1); mv.To != "AWAITING_GOODS" || mv.Actor != liWei {
		t.Fatalf("return 1's last move %+v", mv)
	}
	showsOperatorAction(t, tab, liWei, "/approve")

	// The buyer sends it back; the merchant's account is short, so the refund its receipt
	// sends is refused.
	if _, err := s.c.ShipBack(ctx, s.orderA, s.returnA1, "console-ann", "YTO", "YT5001"); err != nil {
		t.Fatal(err)
	}
	if err := s.m.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	stock, err := s.m.Store.Stock(ctx, "console-tea")
	if err != nil {
		t.Fatal(err)
	}
	reload(t, tab, "see the return sent back", ret1+` .tracking`)
	if got := text(t, tab, ret1+` .tracking`); !strings.Contains(got, "YTO YT5001") {
		t.Fatalf("return 1 shows %q", got)
	}
	clickAction(t, tab, "receive the goods of return 1", ret1+`[data-status="AWAITING_GOODS"]`, "receive-goods", nil,
		chromedp.WaitNotPresent(chromedp.CSS(ret1+`[data-status="AWAITING_GOODS"]`)))
	h, err := s.m.Store.History(ctx, orderpay.EntityAfterSale, s.returnA1)
	if err != nil || !slices.ContainsFunc(h, func(e orderpay.HistoryEntry) bool { return e.To == "GOODS_RECEIVED" && e.Actor == liWei }) {
		t.Fatalf("return 1's history %+v, %v: no goods received by %s", h, err, liWei)
	}
	if after, err := s.m.Store.Stock(ctx, "console-tea"); err != nil || after.Available != stock.Available+1 {
		t.Fatalf("stock %+v after the goods came back, %+v before (%v)", after, stock, err)
	}
	showsOperatorAction(t, tab, liWei, "/receive-goods")
	queued := s.waitRefund(t, s.returnA1, "NEEDS_ACTION")
	if queued.Amount != 3200 || !strings.Contains(queued.Problem, "NOT_ENOUGH") {
		t.Fatalf("the queued refund %+v", queued)
	}
	refund := `#tl-refunds [data-refund="` + s.returnA1 + `"]`
	reload(t, tab, "see the refund needing action", refund+`[data-status="NEEDS_ACTION"] form[data-action="retry-refund"]`)
	if got := text(t, tab, refund+` .problem`); got != queued.Problem {
		t.Fatalf("the refund's problem shows %q; the API says %q", got, queued.Problem)
	}

	// The order's view as the operator sees it: a parcel on its way, a return refunding
	// with its refund waiting for an operator, another waiting for review.
	for _, v := range []struct {
		width, height int64
		name, readme  string
	}{{1280, 1440, "console-order-1280", "ops-console-order.png"}, {390, 2000, "console-order-390", "ops-console-order-390.png"}} {
		do(t, tab, fmt.Sprintf("view the order at %d px", v.width), 10*time.Second, chromedp.EmulateViewport(v.width, v.height))
		if w := eval[int](t, tab, `document.documentElement.scrollWidth`); w > int(v.width) {
			t.Fatalf("at %d px the page is %d px wide", v.width, w)
		}
		shot(t, tab, v.name, v.readme)
	}
	do(t, tab, "back to the usual window", 10*time.Second, chromedp.EmulateViewport(1100, 820))
}

// The viewer wang.fang reads order A, with its parcel, returns and queued refund, and every
// tab, and finds no action anywhere, where the operator's tab has them; the catalogue tab
// and the reconciliation run are not offered. A write sent from the page with the viewer's
// token is refused with 403 EFORBIDDEN, changes nothing, and is in the audit log.
func (s *consoleStory) viewerSeesNoActionAndIsRefused(t *testing.T) {
	const actions = `document.querySelectorAll("[data-action], form.action").length`
	if n := eval[int](t, s.operatorTab, actions); n < 3 {
		t.Fatalf("the operator's view of order A has %d actions", n)
	}
	tab := newTab(t, s.browser)
	s.signIn(t, tab, s.viewer, wangFang, "viewer")
	openOrder(t, tab, s.orderA)
	do(t, tab, "see order A's parcel, returns and refund", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#tl-shipments [data-shipment="`+s.parcelA+`"][data-status="SHIPPED"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tl-aftersales [data-after-sale="`+s.returnA2+`"][data-status="REQUESTED"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tl-refunds [data-refund="`+s.returnA1+`"][data-status="NEEDS_ACTION"]`)))
	if n := eval[int](t, tab, actions); n != 0 {
		t.Fatalf("the viewer's timeline has %d actions", n)
	}
	for _, tabName := range []string{"queue", "aftersales", "webhooks", "pending", "stuck", "refunds", "recon", "audit", "charts"} {
		do(t, tab, "open "+tabName, 10*time.Second, chromedp.Click(chromedp.CSS(`#tabbtn-`+tabName)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#tab-`+tabName+`").textContent.trim() !== "" && !document.querySelector("#tab-`+tabName+`").classList.contains("hidden")`))
	}
	do(t, tab, "see the queue and the review list", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-queue`)),
		chromedp.WaitVisible(chromedp.CSS(`#queue [data-refund="`+s.returnA1+`"]`)),
		chromedp.Click(chromedp.CSS(`#tabbtn-aftersales`)),
		chromedp.WaitVisible(chromedp.CSS(`#aftersales [data-after-sale="`+s.returnA2+`"]`)),
		chromedp.Click(chromedp.CSS(`#tabbtn-webhooks`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhooks tr[data-delivery]`)))
	if n := eval[int](t, tab, actions); n != 0 {
		t.Fatalf("the viewer's tabs have %d actions", n)
	}
	if eval[bool](t, tab, `document.querySelector("#tabbtn-catalogue") !== null || document.querySelector("#recon-form") !== null`) {
		t.Fatal("the viewer is offered the catalogue or the reconciliation run")
	}
	if got := text(t, tab, "#error"); got != "" {
		t.Fatalf("the viewer's console shows an error: %s", got)
	}

	// Writes sent anyway, with the viewer's token, from the page.
	var refused struct {
		Status int `json:"status"`
		Body   struct {
			Error struct{ Code, Message string } `json:"error"`
		} `json:"body"`
	}
	for _, call := range []struct{ path, body string }{
		{"/admin/after-sales/" + s.returnA2 + "/reject", `{"reason":"no"}`},
		{"/admin/refunds/" + s.returnA1 + "/retry", `{}`},
	} {
		raw := evalPromise(t, tab, fmt.Sprintf(`fetch(%q, {method: "POST", headers: {Authorization: "Bearer " + sessionStorage.getItem("orderpay.adminToken"),
			"Content-Type": "application/json"}, body: %q}).then(async (r) => ({status: r.status, body: await r.json()}))`, call.path, call.body))
		if err := json.Unmarshal(raw, &refused); err != nil || refused.Status != http.StatusForbidden || refused.Body.Error.Code != orderpay.EFORBIDDEN {
			t.Fatalf("the viewer's POST %s: %s (%v)", call.path, raw, err)
		}
	}
	if mv := s.lastMove(t, orderpay.EntityAfterSale, s.returnA2); mv.To != "REQUESTED" {
		t.Fatalf("return 2 moved on the viewer's refused write: %+v", mv)
	}
	if r := s.refund(t, s.returnA1); r.Status != "NEEDS_ACTION" {
		t.Fatalf("the refund moved on the viewer's refused write: %+v", r)
	}
	status, body := as(t, s.viewer, http.MethodGet, s.m.URL+"/admin/audit?actor="+wangFang, "")
	if status != http.StatusOK || strings.Count(string(body), `"code":"EFORBIDDEN"`) != 2 {
		t.Fatalf("the viewer's refused writes in the audit log: %d %s", status, body)
	}

	// Signing out forgets the token and shows the sign-in, without Sign out.
	do(t, tab, "sign out", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#logout`)),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#logout`)))
	if eval[bool](t, tab, `sessionStorage.getItem("orderpay.adminToken") !== null || document.querySelector("#timeline").childElementCount > 0`) {
		t.Fatal("the token or the order's view outlived the sign-out")
	}
}

// The operator rejects the second return with a reason, then, the merchant's account
// topped up, retries the queued refund from the queue tab: the channel refunds it once, the
// return succeeds, and the timeline shows the retry under li.wei's name.
func (s *consoleStory) rejectAndRetryARefund(t *testing.T) {
	tab := s.operatorTab
	ret2 := `#tl-aftersales [data-after-sale="` + s.returnA2 + `"]`
	clickAction(t, tab, "reject return 2", ret2+`[data-status="REQUESTED"]`, "reject", map[string]string{"reason": "the tin was opened"},
		chromedp.WaitVisible(chromedp.CSS(ret2+`[data-status="REJECTED"]`)))
	if mv := s.lastMove(t, orderpay.EntityAfterSale, s.returnA2); mv.To != "REJECTED" || mv.Actor != liWei || !strings.Contains(mv.Reason, "the tin was opened") {
		t.Fatalf("return 2's last move %+v", mv)
	}
	showsOperatorAction(t, tab, liWei, "/reject")

	if err := s.m.Sim.TopUp(orderpay.ChannelWechat); err != nil {
		t.Fatal(err)
	}
	queued := `#queue[data-shown] [data-refund="` + s.returnA1 + `"]`
	do(t, tab, "find the refund in the queue", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-queue`)),
		chromedp.WaitVisible(chromedp.CSS(queued+` form[data-action="retry-refund"]`)))
	if got := text(t, tab, queued); !strings.Contains(got, "¥32.00") || !strings.Contains(got, s.orderA) || !strings.Contains(got, "console-ann") ||
		!strings.Contains(got, "NOT_ENOUGH") || !strings.Contains(got, "waiting") {
		t.Fatalf("the queue shows %q", got)
	}
	clickAction(t, tab, "retry the refund", queued, "retry-refund", nil, chromedp.WaitNotPresent(chromedp.CSS(queued)))
	if r := s.waitRefund(t, s.returnA1, "SUCCESS"); r.Amount != 3200 {
		t.Fatalf("the retried refund %+v", r)
	}
	trade := s.ledger(t, s.paymentA+"A01")
	if trade.Refunded != 3200 || len(trade.Refunds) != 1 || trade.Refunds[0].OutRefundNo != s.returnA1 || trade.Refunds[0].Status != sim.LedgerRefundSuccess {
		t.Fatalf("the channel's ledger of order A's trade: %+v; want one refund of ¥32.00", trade)
	}
	h, err := s.m.Store.History(context.Background(), orderpay.EntityRefund, s.returnA1)
	if err != nil || !slices.ContainsFunc(h, func(e orderpay.HistoryEntry) bool {
		return e.Event == string(orderpay.ChannelRefundEventOperatorRetry) && e.Actor == liWei
	}) {
		t.Fatalf("the refund's history %+v, %v: no retry by %s", h, err, liWei)
	}
	waitFor(t, 20*time.Second, "return 1 to succeed", func() bool {
		return s.lastMove(t, orderpay.EntityAfterSale, s.returnA1).To == "SUCCESS"
	})
	if tl := s.timeline(t, s.orderA); !tl.operatorDid(liWei, "/retry") {
		t.Fatalf("the timeline has no retry by %s: %+v", liWei, tl.Events)
	}
	openOrder(t, tab, s.orderA)
	do(t, tab, "see the refund made", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#tl-refunds [data-refund="`+s.returnA1+`"][data-status="SUCCESS"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tl-aftersales [data-after-sale="`+s.returnA1+`"][data-status="SUCCESS"]`)))
	showsOperatorAction(t, tab, liWei, "/retry")
}

// A WeChat refund that ends ABNORMAL (the buyer's card was closed) waits in the queue; the
// operator paid it back by bank transfer and resolves it there with the reference: RESOLVED
// by li.wei, the channel having moved no money.
func (s *consoleStory) resolveARefund(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := s.paidOrder(t, ctx, "console-bo", orderpay.ChannelWechat, 1)
	if err := s.m.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultAbnormal, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	defer s.m.Sim.SetFaults(sim.FaultPlan{})
	// A refund before shipping, approved at once by the rule.
	rf, err := s.c.RequestAfterSale(ctx, b.OrderNo, "console-bo", "refund", "ordered by mistake", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	queued := s.waitRefund(t, rf.AfterSaleNo, "NEEDS_ACTION")
	if !strings.Contains(queued.Problem, "ABNORMAL") {
		t.Fatalf("the queued refund %+v", queued)
	}
	tab := s.operatorTab
	card := `#queue[data-shown] [data-refund="` + rf.AfterSaleNo + `"]`
	do(t, tab, "find the abnormal refund in the queue", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-orders`)),
		chromedp.Click(chromedp.CSS(`#tabbtn-queue`)),
		chromedp.WaitVisible(chromedp.CSS(card+` form[data-action="resolve-refund"]`)))
	// A resolution without a reference is the API's to refuse; the console says why, by the form.
	clickAction(t, tab, "resolve without a reference", card, "resolve-refund", map[string]string{"reference": " "},
		chromedp.Poll[chromedp.Void](`document.querySelector('`+card+` [data-error="resolve-refund"]').textContent !== ""`))
	if got := text(t, tab, card+` [data-error="resolve-refund"]`); !strings.Contains(strings.ToLower(got), "reference") {
		t.Fatalf("the form shows %q for a resolution without a reference", got)
	}
	clickAction(t, tab, "resolve the refund", card, "resolve-refund", map[string]string{"reference": "BANK-2026-0042", "note": "transferred to the buyer's new card"},
		chromedp.WaitNotPresent(chromedp.CSS(card)))
	r := s.refund(t, rf.AfterSaleNo)
	if r.Status != "RESOLVED" || r.ResolvedBy != liWei || r.ResolvedRef != "BANK-2026-0042" {
		t.Fatalf("after the console's resolution: %+v", r)
	}
	if trade := s.ledger(t, b.PaymentNo+"A01"); trade.Refunded != 0 {
		t.Fatalf("the channel moved money for an abnormal refund: %+v", trade)
	}
	if tl := s.timeline(t, b.OrderNo); !tl.operatorDid(liWei, "/resolve") {
		t.Fatalf("the timeline has no resolution by %s: %+v", liWei, tl.Events)
	}
	openOrder(t, tab, b.OrderNo)
	resolved := `#tl-refunds [data-refund="` + rf.AfterSaleNo + `"][data-status="RESOLVED"]`
	do(t, tab, "see the refund resolved", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(resolved)))
	if got := text(t, tab, resolved+` .resolution`); !strings.Contains(got, liWei) || !strings.Contains(got, "BANK-2026-0042") {
		t.Fatalf("the resolution shows %q", got)
	}
	showsOperatorAction(t, tab, liWei, "/resolve")
}

// Order C is paid at the simulator with every notification dropped, and this server makes
// no query of its own: the order stays unpaid until the operator confirms the payment by
// hand. The console shows what the channel said about the attempt (PAID, before PAYING,
// after SUCCESS), and the order is PAID through the success path, found by the admin query.
func (s *consoleStory) confirmAPaymentByHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.m.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}); err != nil {
		t.Fatal(err)
	}
	defer s.m.Sim.SetFaults(sim.FaultPlan{})
	o, err := s.c.createOrder(ctx, "console-cai", "console-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a dropped notification", func() bool {
		return slices.ContainsFunc(s.m.Sim.FaultLog(), func(e sim.FaultEvent) bool { return e.Method == sim.MethodNotify && e.Kind == sim.FaultDrop })
	})
	tl := s.timeline(t, o.OrderNo)
	if tl.Order.Status != "PENDING_PAYMENT" || tl.Payment == nil || tl.Payment.Status != "PAYING" || len(tl.Attempts) != 1 {
		t.Fatalf("before the confirmation: %+v", tl)
	}
	attempt := tl.Attempts[0].OutTradeNo

	tab := s.operatorTab
	openOrder(t, tab, o.OrderNo)
	clickAction(t, tab, "confirm the payment by hand", `#order-summary`, "confirm-payment", nil,
		chromedp.WaitVisible(chromedp.CSS(`#confirm-result[data-status="SUCCESS"]`)))
	row := `#confirm-result tr[data-attempt="` + attempt + `"]`
	if says, after := text(t, tab, row+` [data-channel-says]`), eval[string](t, tab, `document.querySelector('`+row+` [data-after]').dataset.after`); says != "PAID" || after != "SUCCESS" {
		t.Fatalf("the console shows the channel saying %q, the attempt after %q", says, after)
	}
	if got := text(t, tab, row); !strings.Contains(got, "PAYING") {
		t.Fatalf("the attempt's row %q does not show it PAYING before", got)
	}
	do(t, tab, "see the order paid", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#order-status[data-status="PAID"]`)))
	tl = s.timeline(t, o.OrderNo)
	if tl.Order.Status != "PAID" || tl.Payment.Status != "SUCCESS" || !tl.operatorDid(liWei, "/confirm") {
		t.Fatalf("after the confirmation: order %s, payment %s, events %+v", tl.Order.Status, tl.Payment.Status, tl.Events)
	}
	var byAdmin, notified bool
	for _, e := range tl.Events {
		byAdmin = byAdmin || (e.Kind == "query" && e.Trigger == "admin" && e.Outcome == string(orderpay.OutcomePaid) && e.EntityNo == attempt)
		notified = notified || e.Kind == "notification"
	}
	if !byAdmin || notified {
		t.Fatalf("the timeline's events %+v: the admin query found it %v, a notification came %v", tl.Events, byAdmin, notified)
	}
	showsOperatorAction(t, tab, liWei, "/confirm")
}

// The operator finds order A's payment.succeeded webhook in the Webhooks tab (filtered to
// the delivered ones) and resends it: the receiver gets it again under the same delivery
// id, the delivery's history ends with the resend, and order A's timeline shows it.
func (s *consoleStory) resendAWebhook(t *testing.T) {
	tab := s.operatorTab
	do(t, tab, "list the delivered webhooks", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-webhooks`)),
		chromedp.SetValue(chromedp.CSS(`#webhooks-status`), "SUCCEEDED"),
		chromedp.Click(chromedp.CSS(`#webhooks-filter button`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhooks[data-shown="SUCCEEDED"] tr[data-delivery]`)))
	if !eval[bool](t, tab, `Array.from(document.querySelectorAll("#webhooks tr[data-delivery]")).every((r) => r.dataset.status === "SUCCEEDED")`) {
		t.Fatalf("the delivered webhooks: %s", text(t, tab, "#webhooks"))
	}
	find := fmt.Sprintf(`(Array.from(document.querySelectorAll("#webhooks tr[data-delivery]")).find((r) =>
		r.querySelector('a[data-order=%q]') && r.textContent.includes(%q)) || {dataset: {}}).dataset.delivery || ""`, s.orderA, orderpay.SubjectPaymentSucceeded)
	id := eval[string](t, tab, find)
	if id == "" {
		t.Fatalf("no payment.succeeded delivery of order A in the tab: %s", text(t, tab, "#webhooks"))
	}
	before := 0
	for _, h := range s.erp.received() {
		if h.Delivery == id {
			before++
		}
	}
	row := `#webhooks[data-shown] tr[data-delivery="` + id + `"]`
	clickAction(t, tab, "resend the webhook", row, "resend", nil,
		chromedp.WaitVisible(chromedp.CSS(`#webhooks[data-shown] #webhook-resent[data-delivery="`+id+`"][data-status="SUCCEEDED"] tr[data-kind="resend"]`)))
	if got := text(t, tab, `#webhook-resent tr[data-kind="resend"]`); !strings.Contains(got, "HTTP 204") {
		t.Fatalf("the resend's attempt shows %q", got)
	}
	status, body := as(t, s.viewer, http.MethodGet, s.m.URL+"/admin/webhooks/deliveries/"+id, "")
	var d struct {
		Status  string `json:"status"`
		OrderNo string `json:"order_no"`
		History []struct {
			Kind string `json:"kind"`
		} `json:"history"`
	}
	if err := json.Unmarshal(body, &d); status != http.StatusOK || err != nil || d.Status != "SUCCEEDED" || d.OrderNo != s.orderA ||
		len(d.History) != 2 || d.History[1].Kind != "resend" {
		t.Fatalf("the delivery after the resend: %d %s", status, body)
	}
	after := 0
	for _, h := range s.erp.received() {
		if h.Delivery == id && h.VerifyErr == nil {
			after++
		}
	}
	if before != 1 || after != 2 {
		t.Fatalf("the receiver got delivery %s %d times before the resend, %d after", id, before, after)
	}
	if tl := s.timeline(t, s.orderA); !tl.operatorDid(liWei, "/resend") {
		t.Fatalf("order A's timeline has no resend by %s", liWei)
	}
}

// The admin zhao adds a SKU, creates a coupon template and issues a coupon, blocks a buyer
// and lifts the block, all from the Catalogue tab, and runs a reconciliation; each is
// checked through the API. The audit log tab, filtered to li.wei, lists the operator's
// jobs, and, filtered to order A, only order A's.
func (s *consoleStory) adminJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tab := newTab(t, s.browser)
	s.signIn(t, tab, s.admin, zhao, "admin")
	do(t, tab, "open the catalogue", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-catalogue`)),
		chromedp.WaitVisible(chromedp.CSS(`#catalogue tr[data-sku="console-tea"]`)))

	clickAction(t, tab, "add a SKU", `#catalogue`, "add-sku", map[string]string{"sku": "console-new-tea", "title": "Console Tea", "merchant_id": "m-console",
		"price": "4599", "stock": "7", "product_type": "special", "weight_g": "250"},
		chromedp.WaitVisible(chromedp.CSS(`#catalogue tr[data-sku="console-new-tea"]`)))
	type catalogueSKU struct {
		SKU         string `json:"sku"`
		Title       string `json:"title"`
		MerchantID  string `json:"merchant_id"`
		Price       int64  `json:"price"`
		ProductType string `json:"product_type"`
		WeightG     int64  `json:"weight_g"`
		Stock       struct {
			Available int64 `json:"available"`
		} `json:"stock"`
	}
	var cat struct {
		SKUs []catalogueSKU `json:"skus"`
	}
	if err := s.c.call(ctx, http.MethodGet, s.m.URL+"/v1/skus", nil, nil, &cat); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cat.SKUs, func(x catalogueSKU) bool { return x.SKU == "console-new-tea" })
	if i < 0 || cat.SKUs[i].Title != "Console Tea" || cat.SKUs[i].MerchantID != "m-console" || cat.SKUs[i].Price != 4599 ||
		cat.SKUs[i].ProductType != "special" || cat.SKUs[i].WeightG != 250 || cat.SKUs[i].Stock.Available != 7 {
		t.Fatalf("the catalogue after the console's add: %+v", cat.SKUs)
	}
	if got := text(t, tab, `#catalogue tr[data-sku="console-new-tea"]`); !strings.Contains(got, "¥45.99") {
		t.Fatalf("the new SKU's row %q", got)
	}

	clickAction(t, tab, "create a coupon template", `#catalogue`, "create-coupon", map[string]string{"code": "CONSOLE10", "title": "¥10 off ¥50",
		"amount_off": "1000", "threshold": "5000"},
		chromedp.Poll[chromedp.Void](`document.querySelector("#coupon-made").textContent !== ""`))
	if got := text(t, tab, "#coupon-made"); !strings.Contains(got, "CONSOLE10") || !strings.Contains(got, "¥10.00 off from ¥50.00") {
		t.Fatalf("the template shows %q", got)
	}
	clickAction(t, tab, "issue a coupon", `#catalogue`, "issue-coupon", map[string]string{"code": "CONSOLE10", "buyer_id": "console-dan"},
		chromedp.Poll[chromedp.Void](`document.querySelector("#coupon-issued").textContent !== ""`))
	var coupons struct {
		Coupons []struct {
			ID       string `json:"id"`
			Code     string `json:"code"`
			Status   string `json:"status"`
			Template struct {
				AmountOff int64 `json:"amount_off"`
				Threshold int64 `json:"threshold"`
			} `json:"template"`
		} `json:"coupons"`
	}
	if err := s.c.call(ctx, http.MethodGet, s.m.URL+"/v1/buyers/console-dan/coupons", nil, nil, &coupons); err != nil {
		t.Fatal(err)
	}
	if len(coupons.Coupons) != 1 || coupons.Coupons[0].Code != "CONSOLE10" || coupons.Coupons[0].Status != "AVAILABLE" ||
		coupons.Coupons[0].Template.AmountOff != 1000 || coupons.Coupons[0].Template.Threshold != 5000 {
		t.Fatalf("console-dan's coupons: %+v", coupons)
	}
	if got := text(t, tab, "#coupon-issued"); !strings.Contains(got, coupons.Coupons[0].ID) || !strings.Contains(got, "console-dan") {
		t.Fatalf("the issue shows %q", got)
	}

	blocked := `#catalogue tr[data-blocked="buyer:fraud-fred"]`
	clickAction(t, tab, "block a buyer", `#catalogue`, "block", map[string]string{"kind": "buyer", "value": "fraud-fred", "reason": "chargebacks"},
		chromedp.WaitVisible(chromedp.CSS(blocked)))
	var list struct {
		Blocklist []struct{ Kind, Value, Reason string } `json:"blocklist"`
	}
	if err := s.c.call(ctx, http.MethodGet, s.m.URL+"/admin/blocklist", http.Header{"Authorization": {"Bearer " + s.viewer}}, nil, &list); err != nil ||
		len(list.Blocklist) != 1 || list.Blocklist[0].Kind != "buyer" || list.Blocklist[0].Value != "fraud-fred" || list.Blocklist[0].Reason != "chargebacks" {
		t.Fatalf("the blocklist after the console's block: %+v, %v", list, err)
	}
	if _, err := s.c.createOrder(ctx, "fraud-fred", "console-tea", 1); apiCode(err) != orderpay.EFORBIDDEN {
		t.Fatalf("a blocked buyer's order: %v", err)
	}
	clickAction(t, tab, "lift the block", blocked, "unblock", nil, chromedp.WaitNotPresent(chromedp.CSS(blocked)))
	if err := s.c.call(ctx, http.MethodGet, s.m.URL+"/admin/blocklist", http.Header{"Authorization": {"Bearer " + s.viewer}}, nil, &list); err != nil ||
		len(list.Blocklist) != 0 {
		t.Fatalf("the blocklist after the console's removal: %+v, %v", list, err)
	}

	date := orderpay.BillDay(time.Now().AddDate(0, 0, -2))
	do(t, tab, "run a reconciliation", 30*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-recon`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-form[data-action="reconcile"]`)),
		chromedp.SetValue(chromedp.CSS(`#recon-channel`), "alipay"),
		chromedp.SetValue(chromedp.CSS(`#recon-date`), date),
		chromedp.Click(chromedp.CSS(`#recon-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#recon-title`)))
	var reports struct{ Reconciliations []chaos.ReconciliationView }
	if err := s.c.call(ctx, http.MethodGet, s.m.URL+"/admin/reconciliations?channel=alipay&date="+date, http.Header{"Authorization": {"Bearer " + s.viewer}}, nil, &reports); err != nil ||
		len(reports.Reconciliations) != 1 {
		t.Fatalf("the console's run: %+v, %v", reports, err)
	}
	if got := text(t, tab, "#recon-title"); got != fmt.Sprintf("Report #%d: alipay bill of %s", reports.Reconciliations[0].ID, date) {
		t.Fatalf("report title %q", got)
	}

	// The audit log: li.wei's jobs, then order A's.
	do(t, tab, "read li.wei's actions in the audit log", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#tabbtn-audit`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit[data-shown="/"] tr[data-audit]`)),
		chromedp.SetValue(chromedp.CSS(`#audit-actor`), liWei),
		chromedp.Click(chromedp.CSS(`#audit-filter button`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit[data-shown="`+liWei+`/"] tr[data-audit]`)))
	if !eval[bool](t, tab, fmt.Sprintf(`Array.from(document.querySelectorAll("#audit tr[data-audit]")).every((r) => r.dataset.actor === %q)`, liWei)) {
		t.Fatalf("the audit log filtered to %s: %s", liWei, text(t, tab, "#audit"))
	}
	got := text(t, tab, "#audit")
	for _, route := range []string{"/ship", "/extend", "/approve", "/reject", "/receive-goods", "/retry", "/resolve", "/confirm", "/resend"} {
		if !strings.Contains(got, route) {
			t.Errorf("the audit log of %s has no %s: %s", liWei, route, got)
		}
	}
	do(t, tab, "read order A's actions in the audit log", 20*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#audit-actor").value = ""`),
		chromedp.SetValue(chromedp.CSS(`#audit-order`), s.orderA),
		chromedp.Click(chromedp.CSS(`#audit-filter button`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit[data-shown="/`+s.orderA+`"] tr[data-audit]`)))
	if !eval[bool](t, tab, fmt.Sprintf(`Array.from(document.querySelectorAll("#audit tr[data-audit]")).every((r) => r.querySelector('a[data-order=%q]'))`, s.orderA)) {
		t.Fatalf("the audit log filtered to order A: %s", text(t, tab, "#audit"))
	}
	if got := text(t, tab, "#audit"); !strings.Contains(got, "/ship") || strings.Contains(got, "/confirm") || strings.Contains(got, "/resolve") {
		t.Fatalf("order A's audit log %q: want its ship, and not the other orders' confirm and resolve", got)
	}

	// On a 390 px screen no tab is wider than the screen (tables scroll in their wrapper).
	do(t, tab, "a 390 px screen", 10*time.Second, chromedp.EmulateViewport(390, 844))
	defer do(t, tab, "back to the usual window", 10*time.Second, chromedp.EmulateViewport(1100, 820))
	for _, v := range []struct{ tab, loaded string }{
		{"orders", `#order-results[data-q]`}, {"queue", `#queue[data-shown]`}, {"aftersales", `#aftersales[data-shown]`}, {"webhooks", `#webhooks[data-shown] tr`},
		{"pending", `#pending > *`}, {"stuck", `#stuck > *`}, {"refunds", `#refunds > *`}, {"recon", `#recon-list > *`}, {"audit", `#audit[data-shown] tr`},
		{"charts", `#chart-notify svg`}, {"catalogue", `#catalogue tr[data-sku]`},
	} {
		do(t, tab, "open "+v.tab+" at 390 px", 10*time.Second, chromedp.Click(chromedp.CSS(`#tabbtn-`+v.tab)), chromedp.WaitVisible(chromedp.CSS(v.loaded)))
		if w := eval[int](t, tab, `document.documentElement.scrollWidth`); w > 390 {
			shot(t, tab, "too-wide-"+v.tab)
			t.Errorf("at 390 px the %s tab is %d px wide", v.tab, w)
		}
	}
}

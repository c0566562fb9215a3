package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderpay"
	"orderpay/chaos"
)

// TestBuyerPages runs the buyer's jobs through the pages, on one orderpay and one Chromium
// (like TestBrowser), each checked afterwards through the API: the address given at
// checkout and changed after payment; a cancel; a refund before shipping by line and
// quantity, followed until the money is back; a parcel's receipt extended once and
// confirmed, then a return sent back and refunded; the pay page opened again showing the
// same code, then paid; the language switch; and every page on a 390 px screen.
func TestBuyerPages(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []chaos.SKUSpec{
		{SKU: "bp-green-tea", Title: "Green tea, 50 g", Price: 1200, Stock: 100, ProductType: "normal", StockPolicy: "order"},
		{SKU: "bp-teapot", Title: "Clay teapot", Price: 6800, Stock: 100, ProductType: "normal", StockPolicy: "order"},
		{SKU: "bp-cups", Title: "Tea cups, set of 4", Price: 3900, Stock: 100, ProductType: "special", StockPolicy: "order"},
	} {
		if err := c.AddSKU(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	bp := &buyerPages{browser: browser, m: m, c: c, buyer: "page-pat"}
	// Every tab of this browser shares its localStorage: the buyer, and the language.
	tab := bp.tab(t)
	do(t, tab, "name the buyer", 20*time.Second,
		chromedp.Navigate(m.URL+"/orders"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("orderpay.buyer", "page-pat"); localStorage.setItem("orderpay.lang", "en")`))

	t.Run("CheckoutAddressChangedAfterPayment", bp.checkoutAddress)
	t.Run("CancelOnTheOrderPage", bp.cancelOnOrderPage)
	t.Run("RefundBeforeShippingByLineAndQuantity", bp.refundBeforeShipping)
	t.Run("ReceiptExtendedOnceConfirmedThenReturned", bp.receiptAndReturn)
	t.Run("PayPageOpenedAgainShowsTheSameCodeThenPaid", bp.payPageAgainThenPaid)
	t.Run("AnotherBuyersOrderIsNotFound", bp.anotherBuyersOrder)
	t.Run("LanguageSwitch", bp.languageSwitch)
	t.Run("UsableAt390px", bp.narrowScreen)
}

type buyerPages struct {
	browser context.Context
	m       *Main
	c       *apiClient
	buyer   string
	// returned is the order with a return refunded (ReceiptExtendedOnceConfirmedThenReturned),
	// shown again on a narrow screen.
	returned string
}

// tab opens a tab the size of a laptop's window.
func (bp *buyerPages) tab(t *testing.T) context.Context {
	tab := newTab(t, bp.browser)
	do(t, tab, "size the window", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	return tab
}

// createOrder creates an order of the test's buyer through the API, with an address if
// given.
func (bp *buyerPages) createOrder(ctx context.Context, t *testing.T, address *chaos.Address, items ...chaos.Item) string {
	t.Helper()
	body := map[string]any{"buyer_id": bp.buyer, "items": items}
	if address != nil {
		body["address"] = address
	}
	var o chaos.OrderView
	if err := bp.c.call(ctx, http.MethodPost, bp.m.URL+"/v1/orders", nil, body, &o); err != nil {
		t.Fatal(err)
	}
	return o.OrderNo
}

// paidOrder is an order of the test's buyer, paid in the wallet.
func (bp *buyerPages) paidOrder(ctx context.Context, t *testing.T, address *chaos.Address, items ...chaos.Item) string {
	t.Helper()
	no := bp.createOrder(ctx, t, address, items...)
	p, err := bp.c.pay(ctx, no, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := bp.c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := bp.c.waitStatus(ctx, no, "PAID", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return no
}

func (bp *buyerPages) detail(ctx context.Context, t *testing.T, no string) *chaos.OrderDetail {
	t.Helper()
	o, err := bp.c.OrderDetail(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// apiMessage is the message of the API's refusal err.
func apiMessage(t *testing.T, err error) string {
	t.Helper()
	var apiErr *apiError
	var body struct {
		Error struct{ Code, Message string }
	}
	if !errors.As(err, &apiErr) || json.Unmarshal([]byte(apiErr.Body), &body) != nil || body.Error.Message == "" {
		t.Fatalf("want a refusal of the API, got %v", err)
	}
	return body.Error.Message
}

// isVisible reports whether sel is in the page and shown.
func isVisible(t *testing.T, tab context.Context, sel string) bool {
	t.Helper()
	return eval[bool](t, tab, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0; })()`, sel))
}

var testAddress = chaos.Address{Name: "Li Lei", Phone: "13800138000", Detail: "18 Wenyi Road, Hangzhou"}

// The buyer gives the address in the cart, with the order; pays; changes it on the order's
// page (a wrong phone first, refused with the API's own words); once the parcel ships the
// page no longer offers to change it.
func (bp *buyerPages) checkoutAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab := bp.tab(t)
	do(t, tab, "put tea in the cart and give the address", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-add="bp-green-tea"]`)),
		chromedp.Click(chromedp.CSS(`button[data-add="bp-green-tea"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#addr-name`)),
		chromedp.SetValue(chromedp.CSS(`#addr-name`), testAddress.Name),
		chromedp.SetValue(chromedp.CSS(`#addr-phone`), testAddress.Phone),
		chromedp.SetValue(chromedp.CSS(`#addr-detail`), testAddress.Detail),
		chromedp.Click(chromedp.CSS(`#place-order`)),
		chromedp.WaitVisible(chromedp.CSS(`#pay-alipay`)))
	no := strings.TrimPrefix(eval[string](t, tab, `location.pathname`), "/pay/")
	o := bp.detail(ctx, t, no)
	if o.Address == nil || *o.Address != testAddress || o.BuyerID != bp.buyer {
		t.Fatalf("the order placed from the cart: buyer %s, address %+v; want %+v", o.BuyerID, o.Address, testAddress)
	}
	p, err := bp.c.pay(ctx, no, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	if err := bp.c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := bp.c.waitStatus(ctx, no, "PAID", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	do(t, tab, "open the paid order", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#addr-save`)))
	if got := text(t, tab, "#address-current"); !strings.Contains(got, testAddress.Detail) {
		t.Fatalf("the order's page shows the address %q", got)
	}
	// A wrong phone: the page shows what the API says about it.
	_, err = bp.c.ChangeAddress(ctx, no, bp.buyer, chaos.Address{Name: "Han Meimei", Phone: "call me", Detail: "1 Nanshan Road"})
	want := apiMessage(t, err)
	do(t, tab, "give a wrong phone", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#addr-name`), "Han Meimei"),
		chromedp.SetValue(chromedp.CSS(`#addr-phone`), "call me"),
		chromedp.SetValue(chromedp.CSS(`#addr-detail`), "1 Nanshan Road"),
		chromedp.Click(chromedp.CSS(`#addr-save`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#address-error").textContent !== ""`))
	if got := text(t, tab, "#address-error"); got != want {
		t.Fatalf("the page says %q; the API says %q", got, want)
	}
	moved := chaos.Address{Name: "Han Meimei", Phone: "+86 139-0013-9000", Detail: "1 Nanshan Road, Hangzhou"}
	do(t, tab, "change the address", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#addr-phone`), moved.Phone),
		chromedp.SetValue(chromedp.CSS(`#addr-detail`), moved.Detail),
		chromedp.Click(chromedp.CSS(`#addr-save`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#address-current").textContent.includes("Nanshan Road, Hangzhou")`))
	o = bp.detail(ctx, t, no)
	if o.Address == nil || *o.Address != moved || len(o.Shipments) != 1 {
		t.Fatalf("after the change the API has address %+v, parcels %+v; want %+v and one parcel", o.Address, o.Shipments, moved)
	}
	if got := text(t, tab, "#address-error"); got != "" {
		t.Fatalf("an error stayed on the page: %q", got)
	}
	if sh, err := bp.c.Ship(ctx, o.Shipments[0].ShipmentNo, "SF Express", "SF1001"); err != nil || sh.Status != "SHIPPED" {
		t.Fatalf("ship: %+v, %v", sh, err)
	}
	do(t, tab, "reload the shipped order", 20*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="SHIPPED"]`)))
	if isVisible(t, tab, "#addr-save") || !strings.Contains(text(t, tab, "#address"), "can no longer change") {
		t.Fatalf("a shipped order's page still offers to change the address: %q", text(t, tab, "#address"))
	}
}

// The buyer cancels an unpaid order from its page.
func (bp *buyerPages) cancelOnOrderPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	no := bp.createOrder(ctx, t, nil, chaos.Item{SKU: "bp-teapot", Qty: 1})
	tab := bp.tab(t)
	do(t, tab, "open the unpaid order and cancel it", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PENDING_PAYMENT"]`)),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="CANCELLED"]`)))
	if got := text(t, tab, "#status"); got != "Cancelled" {
		t.Fatalf("the cancelled order's status reads %q", got)
	}
	if isVisible(t, tab, "#cancel") || isVisible(t, tab, "#pay-link") {
		t.Fatal("a cancelled order still offers to pay or cancel")
	}
	if o, err := bp.c.order(ctx, no); err != nil || o.Status != "CANCELLED" {
		t.Fatalf("after the cancel the API has %+v, %v", o, err)
	}
}

// Another buyer's paid order, opened in this buyer's browser, reads as the API answers it,
// not found: no address form, no refund form, no button, nothing of the order.
func (bp *buyerPages) anotherBuyersOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	other := *bp
	other.buyer = "page-quinn"
	no := other.paidOrder(ctx, t, &testAddress, chaos.Item{SKU: "bp-green-tea", Qty: 2})
	tab := bp.tab(t)
	do(t, tab, "open another buyer's order", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+no),
		chromedp.WaitVisible(chromedp.CSS(`main.not-found`)))
	if got := text(t, tab, "#error"); !strings.Contains(got, "not found") {
		t.Fatalf("another buyer's order reads %q, want not found", got)
	}
	for _, sel := range []string{"#summary", "#address", "#items", "#shipments", "#aftersales", "#ask", "main input", "main button", "main form", "main select"} {
		if isVisible(t, tab, sel) {
			t.Errorf("another buyer's order page shows %s", sel)
		}
	}
	if got := eval[string](t, tab, `document.querySelector("main").innerText`); strings.Contains(got, testAddress.Detail) {
		t.Fatalf("another buyer's order page shows its address: %q", got)
	}
}

// Before anything ships the buyer asks for 2 of 3 units of one line back, by line and
// quantity; the request is approved by the rule and the page follows it to the money being
// back. Then the form offers only what is left, and refunding all of it ends the order
// REFUNDED, which the page follows too.
func (bp *buyerPages) refundBeforeShipping(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	no := bp.paidOrder(ctx, t, &testAddress, chaos.Item{SKU: "bp-green-tea", Qty: 3}, chaos.Item{SKU: "bp-teapot", Qty: 1})
	o := bp.detail(ctx, t, no)
	lineOf := map[string]int{}
	for _, it := range o.Items {
		lineOf[it.SKU] = it.Line
	}
	tea, pot := lineOf["bp-green-tea"], lineOf["bp-teapot"]
	tab := bp.tab(t)
	do(t, tab, "open the paid order's refund form", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#ask-form`)))
	if got := eval[[]string](t, tab, `Array.from(document.querySelectorAll("#ask-kind option")).map((o) => o.value)`); len(got) != 1 || got[0] != "refund" {
		t.Fatalf("before shipping the form offers %v; want refund only", got)
	}
	upTo := func() map[int]string {
		raw := eval[map[string]string](t, tab, `Object.fromEntries(Array.from(document.querySelectorAll("#ask-lines tr")).map((r) => [r.dataset.line, r.children[1].textContent]))`)
		out := map[int]string{}
		for k, v := range raw {
			var line int
			fmt.Sscan(k, &line)
			out[line] = v
		}
		return out
	}
	if got := upTo(); got[tea] != "up to 3" || got[pot] != "up to 1" || len(got) != 2 {
		t.Fatalf("the form offers %v; want tea up to 3, teapot up to 1", got)
	}
	do(t, tab, "ask for two teas back", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#ask-qty-%d`, tea)), "2"),
		chromedp.SetValue(chromedp.CSS(`#ask-reason`), "bought too much"),
		chromedp.Click(chromedp.CSS(`#ask-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#aftersales .aftersale`)))
	o = bp.detail(ctx, t, no)
	if len(o.Refunds) != 1 || o.Refunds[0].Kind != "refund" || len(o.Refunds[0].Items) != 1 ||
		o.Refunds[0].Items[0].Line != tea || o.Refunds[0].Items[0].Qty != 2 || o.Refunds[0].Amount != 2*1200 {
		t.Fatalf("the API has the requests %+v; want a refund of 2 teas for 2400 fen", o.Refunds)
	}
	first := o.Refunds[0].AfterSaleNo
	sel := `#aftersales [data-after-sale="` + first + `"]`
	do(t, tab, "follow the refund until the money is back", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-status="SUCCESS"]`)))
	if got := text(t, tab, sel); !strings.Contains(got, "Refunded") || !strings.Contains(got, "¥24.00") || !strings.Contains(got, "bp-green-tea × 2") ||
		!strings.Contains(got, "bought too much") {
		t.Fatalf("the refund reads %q", got)
	}
	if o = bp.detail(ctx, t, no); o.Refunds[0].Status != "SUCCESS" || o.Refunded != 2400 {
		t.Fatalf("the API has %+v, refunded %d", o.Refunds, o.Refunded)
	}
	if got := upTo(); got[tea] != "up to 1" || got[pot] != "up to 1" {
		t.Fatalf("after the refund the form offers %v; want tea up to 1, teapot up to 1", got)
	}
	do(t, tab, "ask for everything left back", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#ask-qty-%d`, tea)), "1"),
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#ask-qty-%d`, pot)), "1"),
		chromedp.Click(chromedp.CSS(`#ask-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="REFUNDED"]`)))
	if got := text(t, tab, "#status"); got != "Refunded" {
		t.Fatalf("the refunded order's status reads %q", got)
	}
	if got := text(t, tab, "#refund-status"); got != "Fully refunded" {
		t.Fatalf("the refund status reads %q", got)
	}
	if isVisible(t, tab, "#ask") {
		t.Fatal("a refunded order still offers a request")
	}
	if o = bp.detail(ctx, t, no); o.Status != "REFUNDED" || o.Refunded != o.Payable || len(o.Refunds) != 2 {
		t.Fatalf("the API has the order %s, refunded %d of %d, requests %+v", o.Status, o.Refunded, o.Payable, o.Refunds)
	}
}

// The parcel ships. The buyer extends its receipt once (the button goes; the API would
// refuse a second time), confirms it, asks to return one unit; the merchant approves; the
// buyer sends it back from the page; the merchant receives it and the money goes back,
// which the page follows.
func (bp *buyerPages) receiptAndReturn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	no := bp.paidOrder(ctx, t, &testAddress, chaos.Item{SKU: "bp-cups", Qty: 2}, chaos.Item{SKU: "bp-teapot", Qty: 1})
	o := bp.detail(ctx, t, no)
	if len(o.Shipments) != 1 {
		t.Fatalf("want one parcel, got %+v", o.Shipments)
	}
	parcel := o.Shipments[0].ShipmentNo
	shipped, err := bp.c.Ship(ctx, parcel, "YTO Express", "YT2002")
	if err != nil {
		t.Fatal(err)
	}
	tab := bp.tab(t)
	ps := `#shipments [data-shipment="` + parcel + `"]`
	do(t, tab, "extend the parcel's receipt", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+no),
		chromedp.WaitVisible(chromedp.CSS(ps+`[data-status="SHIPPED"]`)),
		chromedp.Click(chromedp.CSS(`button[data-extend="`+parcel+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(ps+` .extended`)))
	if isVisible(t, tab, `button[data-extend="`+parcel+`"]`) {
		t.Fatal("the extend button is still there after the one extension")
	}
	o = bp.detail(ctx, t, no)
	sh := o.Shipments[0]
	if !sh.BuyerExtended || sh.ReceiveBy == nil || sh.ReceiveBy.Sub(*shipped.ReceiveBy) != 3*24*time.Hour {
		t.Fatalf("after the extension the API has %+v; want buyer_extended and receive_by 3 days later than %v", sh, shipped.ReceiveBy)
	}
	if _, err := bp.c.ExtendReceipt(ctx, no, parcel, bp.buyer); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("a second extension: %v; want 409 ECONFLICT", err)
	}
	// The receipt countdown reads days and hours: 10 + 3 days.
	if got := text(t, tab, ps+` .receipt-left`); !regexp.MustCompile(`^12d 23:\d\d$`).MatchString(got) {
		t.Fatalf("the receipt countdown reads %q; want 12d 23:mm", got)
	}
	do(t, tab, "confirm receipt", 20*time.Second,
		chromedp.Click(chromedp.CSS(`button[data-confirm="`+parcel+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(ps+`[data-status="RECEIVED"]`)))
	if isVisible(t, tab, `button[data-confirm="`+parcel+`"]`) {
		t.Fatal("a received parcel still offers to confirm it")
	}
	if o = bp.detail(ctx, t, no); o.Shipments[0].Status != "RECEIVED" || o.Shipments[0].ReceivedBy != "buyer" || o.Status != "COMPLETED" {
		t.Fatalf("after confirming the API has order %s, parcel %+v", o.Status, o.Shipments[0])
	}
	cups := 0
	for _, it := range o.Items {
		if it.SKU == "bp-cups" {
			cups = it.Line
		}
	}
	do(t, tab, "ask to return one set of cups", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#ask-form`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#ask-kind").value === "return"`),
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#ask-qty-%d`, cups)), "1"),
		chromedp.SetValue(chromedp.CSS(`#ask-reason`), "one set is chipped"),
		chromedp.Click(chromedp.CSS(`#ask-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#aftersales .aftersale[data-kind="return"][data-status="REQUESTED"]`)))
	o = bp.detail(ctx, t, no)
	if len(o.Refunds) != 1 || o.Refunds[0].Kind != "return" || o.Refunds[0].Items[0].Line != cups || o.Refunds[0].Items[0].Qty != 1 || o.Refunds[0].Amount != 3900 {
		t.Fatalf("the API has the requests %+v; want a return of one set of cups, 3900 fen", o.Refunds)
	}
	ret := o.Refunds[0].AfterSaleNo
	rs := `#aftersales [data-after-sale="` + ret + `"]`
	if got := text(t, tab, rs+` .status`); got != "Awaiting review" {
		t.Fatalf("the new return reads %q", got)
	}
	if a, err := bp.c.ReviewAfterSale(ctx, ret, "approve", ""); err != nil || a.Status != "AWAITING_GOODS" {
		t.Fatalf("approve: %+v, %v", a, err)
	}
	do(t, tab, "send it back", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#carrier-`+ret)),
		chromedp.SetValue(chromedp.CSS(`#carrier-`+ret), "ZTO Express"),
		chromedp.SetValue(chromedp.CSS(`#tracking-`+ret), "ZT3003"),
		chromedp.Click(chromedp.CSS(`button[data-ship-back="`+ret+`"]`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).textContent.includes("ZTO Express ZT3003")`, rs)))
	if got := text(t, tab, rs+` .status`); got != "Sent back, awaiting the merchant" {
		t.Fatalf("the return sent back reads %q", got)
	}
	if o = bp.detail(ctx, t, no); o.Refunds[0].ReturnTrackingNo != "ZT3003" {
		t.Fatalf("the API has the return %+v", o.Refunds[0])
	}
	if a, err := bp.c.ReviewAfterSale(ctx, ret, "receive-goods", ""); err != nil {
		t.Fatalf("receive goods: %+v, %v", a, err)
	}
	do(t, tab, "follow the return until the money is back", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(rs+`[data-status="SUCCESS"]`)))
	if got := text(t, tab, rs); !strings.Contains(got, "Refunded") || !strings.Contains(got, "¥39.00") {
		t.Fatalf("the refunded return reads %q", got)
	}
	if o = bp.detail(ctx, t, no); o.Refunds[0].Status != "SUCCESS" || o.Refunded != 3900 {
		t.Fatalf("the API has the return %+v, refunded %d", o.Refunds[0], o.Refunded)
	}
	if got := text(t, tab, "#refunded"); got != "¥39.00" {
		t.Fatalf("the order's refunded amount reads %q", got)
	}
	fullPageShot(t, tab, 1280, 900, "order-after-sales", "buyer-order.png")
	bp.returned = no
}

// The buyer asks for a WeChat code; after a reload, and opened again in another tab (nothing
// of the first one kept), the pay page shows the same code without asking for another. Paid, it
// stops counting and no longer offers to cancel.
func (bp *buyerPages) payPageAgainThenPaid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	no := bp.createOrder(ctx, t, &testAddress, chaos.Item{SKU: "bp-cups", Qty: 1})
	first := bp.tab(t)
	const imageData = `(() => { const i = document.querySelector("#qr-img"); const c = document.createElement("canvas");
		c.width = i.naturalWidth; c.height = i.naturalHeight; c.getContext("2d").drawImage(i, 0, 0); return c.toDataURL(); })()`
	const loaded = `document.querySelector("#qr-img").complete && document.querySelector("#qr-img").naturalWidth >= 200`
	do(t, first, "ask for the WeChat code", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#pay-wechat`)),
		chromedp.Click(chromedp.CSS(`#pay-wechat`)),
		chromedp.WaitVisible(chromedp.CSS(`#qr-img`)),
		chromedp.Poll[chromedp.Void](loaded))
	code, image := text(t, first, "#qr-text"), eval[string](t, first, imageData)
	if !strings.HasPrefix(code, "weixin://") {
		t.Fatalf("the pay page shows code %q", code)
	}

	do(t, first, "reload the pay page", 20*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#qr-img`)),
		chromedp.Poll[chromedp.Void](loaded))
	if got := text(t, first, "#qr-text"); got != code || eval[string](t, first, imageData) != image {
		t.Fatalf("after a reload the page shows code %q; before %q", got, code)
	}

	again := bp.tab(t)
	do(t, again, "open the pay page again", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/pay/"+no),
		chromedp.WaitVisible(chromedp.CSS(`#qr-img`)),
		chromedp.Poll[chromedp.Void](loaded))
	if got := text(t, again, "#qr-text"); got != code {
		t.Fatalf("opened again the page shows code %q; first %q", got, code)
	}
	if eval[string](t, again, imageData) != image {
		t.Fatal("opened again the page shows another QR image")
	}
	if isVisible(t, again, "#choose") {
		t.Fatal("opened again the page asks for a channel though a code is open")
	}
	if got := text(t, again, "#qr-channel"); got != "WeChat Pay" {
		t.Fatalf("the code's channel reads %q", got)
	}
	var attempts int
	if err := bp.m.Store.DB().QueryRow(`SELECT COUNT(*) FROM channel_orders WHERE payment_no = (SELECT payment_no FROM payments WHERE order_no = ?)`, no).Scan(&attempts); err != nil || attempts != 1 {
		t.Fatalf("%d attempts at the channel (%v); a reload or another tab must not ask for another", attempts, err)
	}
	if o := bp.detail(ctx, t, no); o.Status != "PENDING_PAYMENT" {
		t.Fatalf("the order is %s", o.Status)
	}
	fullPageShot(t, again, 1280, 900, "pay", "buyer-pay.png")

	if !isVisible(t, again, "#cancel") || eval[string](t, again, `document.querySelector("#countdown").dataset.seconds || ""`) == "" {
		t.Fatal("the unpaid order's page shows no cancel button or no countdown")
	}
	if err := bp.c.walletPay(ctx, code); err != nil {
		t.Fatal(err)
	}
	do(t, again, "see the page turn to paid", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PAID"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#banner`)))
	if got := text(t, again, "#banner"); got != "Paid ✓" {
		t.Fatalf("banner %q", got)
	}
	if isVisible(t, again, "#cancel") {
		t.Fatal("the paid order's page still offers to cancel it")
	}
	if isVisible(t, again, "#countdown") {
		t.Fatal("the paid order's page still shows the countdown")
	}
	before := text(t, again, "#countdown")
	time.Sleep(1500 * time.Millisecond)
	if after := text(t, again, "#countdown"); after != before || eval[string](t, again, `document.querySelector("#countdown").dataset.seconds || ""`) != "" {
		t.Fatalf("the countdown went on after payment: %q, then %q", before, after)
	}
	if o := bp.detail(ctx, t, no); o.Status != "PAID" {
		t.Fatalf("the API has the order %s", o.Status)
	}
}

// The switch in the header turns the page to Chinese: status words, labels and the
// countdown's format; the choice holds on the next page and after a reload, and switches
// back.
func (bp *buyerPages) languageSwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unpaid := bp.createOrder(ctx, t, nil, chaos.Item{SKU: "bp-cups", Qty: 1}) // special: 30 minutes to pay
	shippedNo := bp.paidOrder(ctx, t, &testAddress, chaos.Item{SKU: "bp-green-tea", Qty: 1})
	if _, err := bp.c.Ship(ctx, bp.detail(ctx, t, shippedNo).Shipments[0].ShipmentNo, "SF Express", "SF4004"); err != nil {
		t.Fatal(err)
	}
	tab := bp.tab(t)
	do(t, tab, "open the pay page", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/pay/"+unpaid),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PENDING_PAYMENT"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#countdown").dataset.seconds !== undefined`))
	if got := text(t, tab, "#status"); got != "Awaiting payment" {
		t.Fatalf("the status reads %q", got)
	}
	english, chinese := regexp.MustCompile(`^[0-5]\d:[0-5]\d$`), regexp.MustCompile(`^[0-5]\d分[0-5]\d秒$`)
	if got := text(t, tab, "#countdown"); !english.MatchString(got) {
		t.Fatalf("the English countdown reads %q; want mm:ss", got)
	}
	do(t, tab, "switch to Chinese", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "zh-CN"`))
	for sel, want := range map[string]string{"#status": "待付款", "#pay-alipay": "支付宝", "#pay-wechat": "微信支付", "#cancel": "取消订单", "#lang": "English"} {
		if got := text(t, tab, sel); got != want {
			t.Errorf("%s reads %q in Chinese; want %q", sel, got, want)
		}
	}
	if got := text(t, tab, "#countdown"); !chinese.MatchString(got) {
		t.Fatalf("the Chinese countdown reads %q; want mm分ss秒", got)
	}
	shot(t, tab, "pay-in-chinese")
	if got := eval[string](t, tab, `localStorage.getItem("orderpay.lang")`); got != "zh" {
		t.Fatalf("the choice is stored as %q", got)
	}
	if got := eval[string](t, tab, `document.querySelector("#status").dataset.status`); got != "PENDING_PAYMENT" {
		t.Fatalf("data-status is %q in Chinese", got)
	}

	do(t, tab, "reload the pay page", 20*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="PENDING_PAYMENT"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector("#countdown").dataset.seconds !== undefined`))
	if got, cd := text(t, tab, "#status"), text(t, tab, "#countdown"); got != "待付款" || !chinese.MatchString(cd) {
		t.Fatalf("after a reload the page reads %q, %q", got, cd)
	}
	do(t, tab, "open the list of orders", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders"),
		chromedp.WaitVisible(chromedp.CSS(`#orders tr[data-order="`+unpaid+`"] .status`)))
	if got := text(t, tab, `#orders tr[data-order="`+unpaid+`"] .status`); got != "待付款" {
		t.Fatalf("the list reads %q", got)
	}
	if got := text(t, tab, `#orders tr[data-order="`+shippedNo+`"] .status`); got != "已发货" {
		t.Fatalf("the shipped order reads %q in the list", got)
	}
	if got := text(t, tab, "header nav"); !strings.Contains(got, "我的订单") {
		t.Fatalf("the header reads %q", got)
	}
	do(t, tab, "open the shipped order", 20*time.Second,
		chromedp.Navigate(bp.m.URL+"/orders/"+shippedNo),
		chromedp.WaitVisible(chromedp.CSS(`#shipments .shipment[data-status="SHIPPED"] .receipt-left`)))
	if got := text(t, tab, `#shipments .shipment .status`); got != "运输中" {
		t.Fatalf("the parcel reads %q", got)
	}
	if got := text(t, tab, `#shipments .receipt-left`); !regexp.MustCompile(`^9天23:\d\d$`).MatchString(got) {
		t.Fatalf("the receipt countdown reads %q in Chinese; want 9天23:mm", got)
	}
	shot(t, tab, "order-in-chinese")
	do(t, tab, "switch back to English", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.Poll[chromedp.Void](`document.documentElement.lang === "en"`))
	if got := text(t, tab, `#shipments .receipt-left`); !regexp.MustCompile(`^9d 23:\d\d$`).MatchString(got) {
		t.Fatalf("the receipt countdown reads %q in English; want 9d 23:mm", got)
	}
	if got, st := text(t, tab, "#status"), text(t, tab, `#shipments .shipment .status`); got != "Shipped" || st != "On its way" {
		t.Fatalf("back in English the order reads %q, its parcel %q", got, st)
	}
	if got := eval[string](t, tab, `localStorage.getItem("orderpay.lang")`); got != "en" {
		t.Fatalf("the choice is stored as %q", got)
	}
}

// Every buyer's page on a 390 px wide screen: nothing wider than the screen, and the status
// badges whole and in view.
func (bp *buyerPages) narrowScreen(t *testing.T) {
	if bp.returned == "" {
		t.Skip("needs the order of ReceiptExtendedOnceConfirmedThenReturned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unpaid := bp.createOrder(ctx, t, nil, chaos.Item{SKU: "bp-teapot", Qty: 2}, chaos.Item{SKU: "bp-green-tea", Qty: 1})
	if _, err := bp.c.pay(ctx, unpaid, orderpay.ChannelAlipay); err != nil {
		t.Fatal(err)
	}
	tab := newTab(t, bp.browser)
	do(t, tab, "turn the screen to 390 px", 5*time.Second, chromedp.EmulateViewport(390, 844))
	// overflow lists what is wider than the screen or sticks out of it, outside the parts
	// that scroll by themselves, and every visible status badge that is cut or out of view.
	const overflow = `(() => {
		const W = 390, out = [];
		if (document.documentElement.scrollWidth > W) out.push("page scrollWidth " + document.documentElement.scrollWidth);
		for (const e of document.querySelectorAll("body *")) {
			if (e.closest(".scroll") || e.getClientRects().length === 0) continue;
			const r = e.getBoundingClientRect();
			if (r.right > W + 0.5 || r.left < -0.5) out.push((e.id || e.className || e.tagName) + " spans " + Math.round(r.left) + "–" + Math.round(r.right));
		}
		for (const b of document.querySelectorAll(".status")) {
			if (b.getClientRects().length === 0) continue;
			const r = b.getBoundingClientRect();
			if (r.left < 0 || r.right > W || b.scrollWidth > b.clientWidth + 1 || b.scrollHeight > b.clientHeight + 1) out.push("badge " + b.dataset.status + " cut at " + Math.round(r.left) + "–" + Math.round(r.right));
		}
		return out;
	})()`
	for _, page := range []struct{ name, path, ready string }{
		{"catalogue", "/", `#catalogue button[data-add="bp-teapot"]`},
		{"orders", "/orders", `#orders tr[data-order="` + unpaid + `"] .status`},
		{"order", "/orders/" + bp.returned, `#aftersales .aftersale[data-status="SUCCESS"]`},
		{"unpaid order", "/orders/" + unpaid, `#status[data-status="PENDING_PAYMENT"]`},
		{"pay", "/pay/" + unpaid, `#qr-img`},
	} {
		do(t, tab, "open "+page.name+" at 390 px", 20*time.Second,
			chromedp.Navigate(bp.m.URL+page.path),
			chromedp.WaitVisible(chromedp.CSS(page.ready)))
		if page.name == "catalogue" {
			// The cart and its address form too.
			do(t, tab, "fill the cart", 10*time.Second,
				chromedp.Click(chromedp.CSS(`button[data-add="bp-teapot"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#place-order`)))
		}
		if page.name == "pay" {
			do(t, tab, "wait for the QR image", 10*time.Second,
				chromedp.Poll[chromedp.Void](`document.querySelector("#qr-img").complete && document.querySelector("#qr-img").naturalWidth >= 200`))
		}
		shot(t, tab, "390-"+strings.ReplaceAll(page.name, " ", "-"))
		if got := eval[[]string](t, tab, overflow); len(got) > 0 {
			t.Errorf("%s at 390 px: %s", page.name, strings.Join(got, "; "))
		}
		if strings.HasPrefix(page.path, "/orders/") || strings.HasPrefix(page.path, "/pay/") {
			// The order's own badge is there, whole (checked above) and in view.
			if !isVisible(t, tab, "#status") {
				t.Errorf("%s at 390 px shows no status badge", page.name)
			}
		}
		switch page.name {
		case "order":
			fullPageShot(t, tab, 390, 844, "order-after-sales-390", "buyer-order-390.png")
		case "pay":
			// The columns stack: the status and countdown go under the QR code.
			if qr, status := eval[float64](t, tab, `document.querySelector("#qr-box").getBoundingClientRect().bottom`),
				eval[float64](t, tab, `document.querySelector("#status").getBoundingClientRect().top`); status < qr {
				t.Errorf("at 390 px the pay page's status (top %v) is beside the QR code (bottom %v), not under it", status, qr)
			}
			fullPageShot(t, tab, 390, 844, "pay-390", "buyer-pay-390.png")
		}
	}
	do(t, tab, "empty the cart", 5*time.Second, chromedp.Evaluate[chromedp.Void](`localStorage.removeItem("orderpay.cart")`))
}

// fullPageShot sizes the tab's viewport to the page's whole height (at most 2400 px) at
// width, takes shot's screenshot, and sizes the viewport back to width × height.
func fullPageShot(t *testing.T, tab context.Context, width, height int64, name string, readme ...string) {
	t.Helper()
	do(t, tab, "size the viewport for "+name, 5*time.Second, chromedp.EmulateViewport(width, 600))
	h := min(max(int64(eval[float64](t, tab, `document.documentElement.scrollHeight`)), 600), 2400)
	do(t, tab, "size the viewport for "+name, 5*time.Second, chromedp.EmulateViewport(width, h), chromedp.Sleep(200*time.Millisecond))
	shot(t, tab, name, readme...)
	do(t, tab, "size the viewport back", 5*time.Second, chromedp.EmulateViewport(width, height))
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/chaos"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

// methodCase is one way to pay, as a buyer's device would: the pay request, and how the
// device's wallet is told to pay the instruction (the page it runs in, the buyer).
type methodCase struct {
	channel string
	method  orderpay.PayMethod
	kind    orderpay.PayKind
	// lateAfterCancel: the channel still takes a payment after the buyer cancelled (an
	// Alipay order that comes into being when the buyer pays: a close cannot stop it),
	// so a late payment is possible and must go back.
	lateAfterCancel bool
}

var methodCases = []methodCase{
	{orderpay.ChannelAlipay, orderpay.MethodPC, orderpay.PayKindForm, true},
	{orderpay.ChannelAlipay, orderpay.MethodWAP, orderpay.PayKindRedirect, true},
	{orderpay.ChannelAlipay, orderpay.MethodApp, orderpay.PayKindApp, true},
	{orderpay.ChannelAlipay, orderpay.MethodInApp, orderpay.PayKindInApp, false},
	{orderpay.ChannelWechat, orderpay.MethodJSAPI, orderpay.PayKindJSAPI, false},
	{orderpay.ChannelWechat, orderpay.MethodMini, orderpay.PayKindJSAPI, false},
	{orderpay.ChannelWechat, orderpay.MethodH5, orderpay.PayKindRedirect, false},
	{orderpay.ChannelWechat, orderpay.MethodApp, orderpay.PayKindApp, false},
}

// Every way to pay beyond the QR code, through the shop's production code path: `orderpay
// sim` runs as a process of its own in each key mode of each channel, and `serve --channels`
// takes the buyers' payments by each method (Alipay in-app under the file's in-app app,
// inapp_app_id with [alipay.inapp], whose trades the simulator keeps from the main app):
//   - paid by the simulated wallet on the device the method is for, the order is PAID;
//     a refund of one unit and then of the other give the money back in part and in full
//     (the order REFUNDED, the channel's ledger refunded the whole amount);
//   - an instruction nobody pays is closed at the order's deadline (CANCELLED);
//   - a buyer who cancels and then pays anyway: where the channel still takes it (Alipay
//     PC, WAP and App), the late payment is refunded; where it does not, the wallet refuses
//     it and nothing is owed;
//   - an order paid by the method and by a QR code too keeps one payment and refunds the
//     other as a duplicate.
func TestEveryPayMethodThroughTheChannelsFile(t *testing.T) {
	t.Parallel()
	runs := []struct{ alipay, wechat, engine string }{{"key", "pubkey", "sqlite"}, {"cert", "certificate", "sqlite"}}
	if os.Getenv("ORDERPAY_TEST_PG") != "" {
		// On PostgreSQL each key mode again, paired the other way round.
		runs = append(runs, struct{ alipay, wechat, engine string }{"key", "certificate", "postgres"},
			struct{ alipay, wechat, engine string }{"cert", "pubkey", "postgres"})
	}
	for _, run := range runs {
		t.Run("alipay-"+run.alipay+"-wechat-"+run.wechat+"-"+run.engine, func(t *testing.T) {
			t.Parallel()
			db := ""
			if run.engine == "postgres" {
				db = storetest.PostgresDSN(t)
			}
			everyPayMethod(t, db, run.alipay, run.wechat)
		})
	}
}

func everyPayMethod(t *testing.T, db, alipayMode, wechatMode string) {
	dir := t.TempDir()
	simURL, channels := startSimProcess(t, dir, alipayMode, wechatMode, "--refund-delay", "1s")
	f, err := channelfile.Load(channels)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := startMain(t, db, func(m *Main) {
		m.Config.Channels = channels
		// A fast order's window is 6 s: deadlines pass within the test. A special offer's
		// is 72 s, for Alipay WAP, whose time_expire has whole minutes: a deadline under a
		// minute away cannot be sent at all.
		m.Config.TimeScale = 150
		m.Config.PayWindows[orderpay.ProductSpecial] = 3 * time.Hour
	})
	c := newAPIClient(m.URL, simURL, m.AdminToken)
	// The methods' subtests run in parallel after this returns: the context ends with
	// the test, not with this function.
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	t.Cleanup(cancel)
	if err := c.createSKU(ctx, "tea", 1500, 1000, "normal"); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "milk", 800, 1000, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "cake", 800, 1000, "special"); err != nil {
		t.Fatal(err)
	}
	// First an order for each method that nobody pays, so that their deadlines run while
	// the rest goes on; at the end each must have been closed at its deadline.
	unpaid := map[orderpay.PayMethod]map[string]string{}
	for _, mc := range methodCases {
		if unpaid[mc.method] == nil {
			unpaid[mc.method] = map[string]string{}
		}
		unpaid[mc.method][mc.channel] = openUnpaid(ctx, t, c, f, mc)
	}
	for _, mc := range methodCases {
		t.Run(mc.channel+"-"+string(mc.method), func(t *testing.T) {
			payByMethod(ctx, t, m, c, f, simURL, mc)
			if _, err := c.waitStatus(ctx, unpaid[mc.method][mc.channel], "CANCELLED", 100*time.Millisecond); err != nil {
				t.Fatalf("the order nobody paid, at its deadline: %v", err)
			}
		})
	}
}

// payRequest is the pay request of mc for the simulated buyer buyer: with the payer's
// wallet identity, in the demo's way, where the method needs one.
func payRequest(ctx context.Context, t *testing.T, c *apiClient, f *channelfile.File, mc methodCase, buyer string) chaos.PayRequest {
	req := chaos.PayRequest{Channel: mc.channel, Method: mc.method}
	switch orderpay.PayerNeeded(mc.channel, mc.method) {
	case "openid":
		req.OpenID, _ = identity(ctx, t, c, buyer, f.WalletAppID(mc.channel, mc.method))
	case "alipay_user_id":
		_, req.AlipayUserID = identity(ctx, t, c, buyer, "")
	}
	return req
}

// openUnpaid makes an order and asks for mc's instruction, which nobody pays. Alipay WAP's
// is a special offer's (72 s): its time_expire has whole minutes.
func openUnpaid(ctx context.Context, t *testing.T, c *apiClient, f *channelfile.File, mc methodCase) string {
	t.Helper()
	buyer := "buyer-" + mc.channel + "-" + string(mc.method)
	short := "milk"
	if mc.method == orderpay.MethodWAP {
		short = "cake"
	}
	o, err := c.createOrder(ctx, buyer+"-unpaid", short, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.PayBy(ctx, o.OrderNo, payRequest(ctx, t, c, f, mc, buyer)); err != nil || p.Pay == nil {
		t.Fatalf("%s %s: %+v, %v", mc.channel, mc.method, p, err)
	}
	return o.OrderNo
}

// identity is the simulated buyer's wallet identity (GET /sim/wallet/identity).
func identity(ctx context.Context, t *testing.T, c *apiClient, buyer, appid string) (openid, alipayUserID string) {
	t.Helper()
	var id struct {
		OpenID       string `json:"openid"`
		AlipayUserID string `json:"alipay_user_id"`
	}
	if err := c.call(ctx, http.MethodGet, c.Sim+"/sim/wallet/identity?buyer="+url.QueryEscape(buyer)+"&appid="+url.QueryEscape(appid), nil, nil, &id); err != nil {
		t.Fatal(err)
	}
	return id.OpenID, id.AlipayUserID
}

// deviceOf is the device mc's instruction is paid on, for buyer: the page it runs in and
// the buyer's address where the method checks them.
func deviceOf(mc methodCase, buyer string, pay *orderpay.PayInstruction, shopURL string) chaos.WalletDevice {
	d := chaos.WalletDevice{Pay: pay, Buyer: buyer, ClientIP: "127.0.0.1"}
	switch {
	case mc.method == orderpay.MethodJSAPI:
		// Inside WeChat, on the shop's page under its registered pay directory.
		d.UserAgent, d.Referer = "Mozilla/5.0 (iPhone) MicroMessenger/8.0.49", "http://127.0.0.1/pay/checkout"
	case mc.method == orderpay.MethodH5, mc.method == orderpay.MethodWAP:
		// A phone's browser on the shop's own pages.
		d.UserAgent, d.Referer = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Safari/604.1", shopURL+"/pay/checkout"
	case mc.method == orderpay.MethodPC:
		d.UserAgent, d.Referer = "Mozilla/5.0 (Macintosh) Chrome/126.0", shopURL+"/pay/checkout"
	}
	return d
}

func payByMethod(ctx context.Context, t *testing.T, m *Main, c *apiClient, f *channelfile.File, simURL string, mc methodCase) {
	buyer := "buyer-" + mc.channel + "-" + string(mc.method)
	req := payRequest(ctx, t, c, f, mc, buyer)
	pay := func(no string) *chaos.PayView {
		t.Helper()
		p, err := c.PayBy(ctx, no, req)
		if err != nil {
			t.Fatalf("pay %s by %s %s: %v", no, mc.channel, mc.method, err)
		}
		if p.Method != mc.method || p.Pay == nil || p.Pay.Kind != mc.kind || p.Pay.Check() != nil || p.QRCode != "" || !p.ExpiresAt.After(time.Now()) {
			t.Fatalf("the instruction of %s %s: %+v, pay %+v", mc.channel, mc.method, p, p.Pay)
		}
		return p
	}
	type ledgerRow struct {
		OutTradeNo string `json:"out_trade_no"`
		AppID      string `json:"app_id"`
		Refunded   int64  `json:"refunded"`
	}
	trade := func(outTradeNo string) *ledgerRow {
		t.Helper()
		var ledger []ledgerRow
		if err := c.call(ctx, http.MethodGet, simURL+"/sim/ledger", nil, nil, &ledger); err != nil {
			t.Fatal(err)
		}
		for _, l := range ledger {
			if l.OutTradeNo == outTradeNo {
				return &l
			}
		}
		return nil
	}
	refunded := func(outTradeNo string) int64 {
		t.Helper()
		if l := trade(outTradeNo); l != nil {
			return l.Refunded
		}
		return -1
	}

	// Paid, then refunded in part and in full.
	o, err := c.createOrder(ctx, buyer, "tea", 2)
	if err != nil {
		t.Fatal(err)
	}
	p := pay(o.OrderNo)
	if again := pay(o.OrderNo); again.Pay.Field(orderpay.FieldsOf(mc.channel, mc.method)[0]) != p.Pay.Field(orderpay.FieldsOf(mc.channel, mc.method)[0]) {
		t.Fatalf("asked again: another instruction %+v, was %+v", again.Pay, p.Pay)
	}
	paid, err := c.WalletPayAs(ctx, deviceOf(mc, buyer, p.Pay, m.URL))
	if err != nil {
		t.Fatalf("the wallet refused the %s %s instruction: %v", mc.channel, mc.method, err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if mc.channel == orderpay.ChannelAlipay {
		// An in-app trade is made under the file's in-app app, any other under app_id.
		want := f.Alipay.AppID
		if mc.method == orderpay.MethodInApp {
			want = f.Alipay.InAppAppID
		}
		if l := trade(p.PaymentNo + "A01"); want == "" || l == nil || l.AppID != want {
			t.Fatalf("the %s trade at the channel: %+v, want it made under app %q", mc.method, l, want)
		}
	}
	if mc.method == orderpay.MethodPC || mc.method == orderpay.MethodWAP {
		backFromCashier(ctx, t, c, buyer, o.OrderNo, paid.ReturnURL)
	}
	for i, want := range []string{"PAID", "REFUNDED"} {
		a, err := c.RequestAfterSale(ctx, o.OrderNo, buyer, "refund", fmt.Sprintf("unit %d", i+1), chaos.AfterSaleItem{Line: 1, Qty: 1})
		if err != nil {
			t.Fatal(err)
		}
		waitAfterSale(ctx, t, c.Client, o.OrderNo, a.AfterSaleNo, "SUCCESS")
		if got, err := c.order(ctx, o.OrderNo); err != nil || got.Status != want {
			t.Fatalf("after refund %d: %+v, %v; want %s", i+1, got, err, want)
		}
	}
	if got := refunded(p.PaymentNo + "A01"); got != 3000 {
		t.Fatalf("the channel refunded %d fen of %s, want 3000", got, p.PaymentNo+"A01")
	}

	// Cancelled, then paid anyway.
	late, err := c.createOrder(ctx, buyer+"-late", "tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	lp := pay(late.OrderNo)
	if got, err := c.Cancel(ctx, late.OrderNo); err != nil || got.Status != "CANCELLED" {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	_, err = c.WalletPayAs(ctx, deviceOf(mc, buyer, lp.Pay, m.URL))
	switch {
	case mc.lateAfterCancel && err != nil:
		t.Fatalf("the channel refused a payment it should still take: %v", err)
	case !mc.lateAfterCancel && err == nil:
		t.Fatalf("the channel took a payment of an order it confirmed closed")
	case mc.lateAfterCancel:
		waitFor(t, 30*time.Second, "the late payment to go back", func() bool { return refunded(lp.PaymentNo+"A01") == 1500 })
	}
	if got, _ := c.order(ctx, late.OrderNo); got.Status != "CANCELLED" {
		t.Fatalf("the cancelled order is %s", got.Status)
	}

	// Paid twice: by the method, and by a QR code of the same channel.
	twice, err := c.createOrder(ctx, buyer+"-twice", "tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	first := pay(twice.OrderNo)
	qr, err := c.PayBy(ctx, twice.OrderNo, chaos.PayRequest{Channel: mc.channel})
	if err != nil || qr.QRCode == "" {
		t.Fatalf("a QR code beside the method's instruction: %+v, %v", qr, err)
	}
	open, err := m.Store.ChannelOrders(ctx, first.PaymentNo)
	if err != nil || len(open) != 2 || open[0].Pay == nil || !strings.HasPrefix(open[0].Pay.Channel, mc.channel) {
		t.Fatalf("the open attempts %+v, %v: want the method's keeping its instruction", open, err)
	}
	if _, err := c.WalletPayAs(ctx, deviceOf(mc, buyer, first.Pay, m.URL)); err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, qr.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, twice.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the second payment to go back", func() bool {
		a, b := refunded(first.PaymentNo+"A01"), refunded(first.PaymentNo+"A02")
		return a+b == 1500 && (a == 0 || b == 0)
	})
	attempts, err := m.Store.ChannelOrders(ctx, first.PaymentNo)
	if err != nil || len(attempts) != 2 || attempts[0].Method != mc.method || attempts[1].Method != orderpay.MethodQR {
		t.Fatalf("the attempts %+v, %v: want the method's, then a QR code's", attempts, err)
	}
	for _, a := range attempts {
		if a.Pay != nil || a.QRCode != "" {
			t.Fatalf("the ended attempt %s still keeps its instruction %+v (code %q)", a.OutTradeNo, a.Pay, a.QRCode)
		}
	}
}

// returnAnswer is POST /v1/orders/{order_no}/return's.
type returnAnswer struct {
	Verified   bool   `json:"verified"`
	OutTradeNo string `json:"out_trade_no"`
	Reason     string `json:"reason"`
	Status     string `json:"status"`
}

// backFromCashier is the buyer's browser back on the pay page of the order paid from
// Alipay's cashier, handing its return's query to POST /v1/orders/{order_no}/return: the
// signed return verifies for that order; the same return replayed on another order of the
// buyer's, unpaid, and the return with its amount altered, do not, and the unpaid order
// stays unpaid.
func backFromCashier(ctx context.Context, t *testing.T, c *apiClient, buyer, paidNo, returnURL string) {
	t.Helper()
	u, err := url.Parse(returnURL)
	if err != nil || !u.Query().Has("sign") {
		t.Fatalf("the wallet sent the browser to %q: want the pay page with Alipay's signed return", returnURL)
	}
	back := func(no, query string) returnAnswer {
		t.Helper()
		var a returnAnswer
		if err := c.call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/return", nil, map[string]string{"query": "?" + query}, &a); err != nil {
			t.Fatalf("return to %s: %v", no, err)
		}
		return a
	}
	for name, body := range map[string]string{
		"not JSON":                  `{"query":`,
		"a query that is none":      `{"query":"?sign=%zz"}`,
		"a query longer than 4 KiB": `{"query":"?sign=` + strings.Repeat("a", 4100) + `"}`,
	} {
		if status, _, code := rawCall(t, "POST", c.API+"/v1/orders/"+paidNo+"/return", nil, []byte(body)); status != http.StatusBadRequest || code != orderpay.EINVALID {
			t.Errorf("a return with %s: %d %s, want 400 EINVALID", name, status, code)
		}
	}
	if a := back(paidNo, u.RawQuery); !a.Verified || a.Status != "PAID" || !strings.HasPrefix(a.OutTradeNo, payment.PaymentNo(paidNo)) {
		t.Fatalf("the signed return of the paid order: %+v", a)
	}
	other, err := c.createOrder(ctx, buyer+"-other", "tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PayBy(ctx, other.OrderNo, chaos.PayRequest{Channel: orderpay.ChannelAlipay, Method: orderpay.MethodWAP}); err != nil {
		t.Fatal(err)
	}
	if a := back(other.OrderNo, u.RawQuery); a.Verified || a.Status != "PENDING_PAYMENT" {
		t.Fatalf("another order's return replayed: %+v", a)
	}
	forged := u.Query()
	forged.Set("total_amount", "0.01")
	if a := back(paidNo, forged.Encode()); a.Verified || a.Reason == "" {
		t.Fatalf("a return with its amount altered: %+v", a)
	}
	if got, err := c.order(ctx, other.OrderNo); err != nil || got.Status != "PENDING_PAYMENT" {
		t.Fatalf("the unpaid order after returns: %+v, %v", got, err)
	}
	if _, err := c.Cancel(ctx, other.OrderNo); err != nil {
		t.Fatal(err)
	}
}

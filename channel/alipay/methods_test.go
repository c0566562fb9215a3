package alipay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// The pay methods beyond the QR code (docs/channels.md §A6), each told against the simulator
// in both signing modes: the adapter signs pc, wap and app orders itself and opens an inapp
// trade with alipay.trade.create; the simulated wallet pays what the adapter handed the
// device; queries, notifications, closes and refunds are the same as for a QR code.

var (
	signedMethods = []orderpay.PayMethod{orderpay.MethodPC, orderpay.MethodWAP, orderpay.MethodApp}
	allMethods    = append(signedMethods[:len(signedMethods):len(signedMethods)], orderpay.MethodInApp)
	modes         = []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert}
)

const (
	shopReturn = "https://shop.example/pay/R1?from=alipay" // the shop's own parameter stays, unsigned
	shopQuit   = "https://shop.example/pay/R1/quit"
)

// buyer is the simulated buyer who pays; an inapp trade is made for their user id.
const buyer = "alice"

// prepay asks the adapter for an instruction of method m for outTradeNo, the buyer's user id
// as the payer.
func (e *env) prepay(t *testing.T, m orderpay.PayMethod, outTradeNo string, amount int64, deadline time.Time, notifyURL string) orderpay.PrecreateResult {
	t.Helper()
	return e.ch.Precreate(context.Background(), orderpay.PrecreateRequest{
		OutTradeNo: outTradeNo,
		Amount:     amount,
		Subject:    "订单 " + outTradeNo,
		Deadline:   deadline,
		NotifyURL:  notifyURL,
		Method:     m,
		Payer:      e.sim.IdentityOf(buyer, "").AlipayUserID,
		ReturnURL:  shopReturn,
		QuitURL:    shopQuit,
	})
}

// instruction prepays outTradeNo by m and fails the test unless it is Accepted with a
// complete instruction of m expiring at deadline.
func (e *env) instruction(t *testing.T, m orderpay.PayMethod, outTradeNo string, amount int64, deadline time.Time, notifyURL string) *orderpay.PayInstruction {
	t.Helper()
	pre := e.prepay(t, m, outTradeNo, amount, deadline, notifyURL)
	if pre.Outcome != orderpay.OutcomeAccepted || pre.Pay == nil {
		t.Fatalf("prepay %s by %s: %+v", outTradeNo, m, pre)
	}
	if err := pre.Pay.Check(); err != nil || pre.Pay.Channel != orderpay.ChannelAlipay || pre.Pay.Method != m {
		t.Fatalf("prepay %s by %s: instruction %+v: %v", outTradeNo, m, pre.Pay, err)
	}
	if !pre.QRExpiresAt.Equal(deadline) {
		t.Errorf("prepay %s by %s: QRExpiresAt %v, want the deadline %v", outTradeNo, m, pre.QRExpiresAt, deadline)
	}
	return pre.Pay
}

// payAs is the simulated wallet acting on p as buyer.
func (e *env) payAs(p *orderpay.PayInstruction, who, action string) (*sim.PayResult, error) {
	return e.sim.PayInstruction(context.Background(), sim.PayAs{Pay: p, Buyer: who, Action: action})
}

func eachModeAndMethod(t *testing.T, methods []orderpay.PayMethod, f func(t *testing.T, mode sim.AlipayMode, m orderpay.PayMethod)) {
	for _, mode := range modes {
		for _, m := range methods {
			t.Run(fmt.Sprintf("%s/%s", mode, m), func(t *testing.T) {
				t.Parallel()
				f(t, mode, m)
			})
		}
	}
}

// A buyer pays each method's instruction at the wallet: the query answers Paid with the
// amount and the trade the wallet made, the notification verifies and says Paid, and the
// trade takes a partial and then a full refund, after which the query still says Paid
// (paid, then refunded in full).
func TestMethods_PaidQueriedNotifiedRefunded(t *testing.T) {
	t.Parallel()
	eachModeAndMethod(t, allMethods, func(t *testing.T, mode sim.AlipayMode, m orderpay.PayMethod) {
		e := setupMode(t, mode, sim.Config{})
		ctx := context.Background()
		mer := newMerchant(t, e.ch)
		no := "M_" + strings.ToUpper(string(m)) + "_1"
		p := e.instruction(t, m, no, 1234, e.clock.Now().Add(30*time.Minute), mer.srv.URL+"/notify/alipay")

		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query before the buyer paid: %+v, want NotPaid", q)
		}
		e.clock.Advance(time.Minute)
		paid, err := e.payAs(p, buyer, sim.WalletPay)
		if err != nil {
			t.Fatalf("the wallet refused %s's own %s instruction: %v", "the adapter", m, err)
		}
		if paid.Status != sim.AlipayTradeSuccess || paid.Amount != 1234 || paid.OutTradeNo != no || paid.TradeNo == "" {
			t.Fatalf("pay: %+v", paid)
		}
		q := e.ch.Query(ctx, no)
		if q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 || q.TradeNo != paid.TradeNo || !q.PaidAt.Equal(e.clock.Now()) {
			t.Fatalf("query after paying: %+v, want Paid 1234 %s at %v", q, paid.TradeNo, e.clock.Now())
		}

		_, n, err := mer.first(t)
		if err != nil {
			t.Fatalf("the notification does not verify: %v", err)
		}
		if n.Outcome != orderpay.OutcomePaid || n.Amount != 1234 || n.OutTradeNo != no || n.TradeNo != paid.TradeNo {
			t.Fatalf("notification %+v, want Paid 1234 for %s", n, no)
		}

		for _, r := range []struct {
			no     string
			amount int64
		}{{no + "R1", 234}, {no + "R2", 1000}} {
			res := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: r.no, Amount: r.amount, Total: 1234, Reason: "test"})
			if res.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("refund %s of %d: %+v, want Refunded", r.no, r.amount, res)
			}
			if qr := e.ch.QueryRefund(ctx, no, r.no); qr.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("refund query %s: %+v, want Refunded", r.no, qr)
			}
		}
		if got := e.refunded(t, no); got != 1234 {
			t.Fatalf("refunded at the channel: %d, want 1234", got)
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 {
			t.Fatalf("query after the full refund: %+v, want Paid (then refunded)", q)
		}
	})
}

// An instruction nobody acted on: a pc, wap or app order does not exist at Alipay, so the
// query is NotPaid and a close answers NotPaid as for a QR code nobody scanned; the order
// stays payable until its deadline, and not after it. An inapp trade exists from its
// create: the query is NotPaid (WAIT_BUYER_PAY), the close closes it, and the buyer can no
// longer pay it.
func TestMethods_NobodyActed(t *testing.T) {
	t.Parallel()
	eachModeAndMethod(t, allMethods, func(t *testing.T, mode sim.AlipayMode, m orderpay.PayMethod) {
		e := setupMode(t, mode, sim.Config{})
		ctx := context.Background()
		deadline := e.clock.Now().Add(15 * time.Minute)
		no := "U_" + strings.ToUpper(string(m)) + "_1"
		p := e.instruction(t, m, no, 500, deadline, "")

		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query: %+v, want NotPaid", q)
		}
		c := e.ch.Close(ctx, no)
		if m == orderpay.MethodInApp {
			if c.Outcome != orderpay.OutcomeClosed {
				t.Fatalf("close of the created trade: %+v, want Closed", c)
			}
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeClosed {
				t.Fatalf("query after the close: %+v, want Closed", q)
			}
			if _, err := e.payAs(p, buyer, sim.WalletPay); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("paying a closed trade: %v, want the wallet's ECONFLICT", err)
			}
			return
		}
		if c.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("close of an order nobody paid: %+v, want NotPaid (nothing to close yet)", c)
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query after the close: %+v, want NotPaid", q)
		}
		// Only the deadline signed into the order stops it.
		e.clock.Set(deadline)
		if _, err := e.payAs(p, buyer, sim.WalletPay); orderpay.ErrorCode(err) != orderpay.ECONFLICT ||
			!strings.Contains(err.Error(), "ACQ.TRADE_HAS_CLOSE") {
			t.Fatalf("paying at the deadline: %v, want ECONFLICT ACQ.TRADE_HAS_CLOSE", err)
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query after the deadline: %+v, want NotPaid", q)
		}
		if len(e.sim.Ledger()) != 0 {
			t.Fatalf("the channel has trades: %+v", e.sim.Ledger())
		}
	})
}

// The same order, closed by nobody, can still be paid before its deadline after the close
// answered NotPaid: the payment center must not take that close as final.
func TestMethods_CloseOfUnpaidOrderDoesNotStopIt(t *testing.T) {
	t.Parallel()
	for _, m := range signedMethods {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := context.Background()
			no := "C_" + strings.ToUpper(string(m))
			p := e.instruction(t, m, no, 800, e.clock.Now().Add(15*time.Minute), "")
			if c := e.ch.Close(ctx, no); c.Outcome != orderpay.OutcomeNotPaid {
				t.Fatalf("close: %+v, want NotPaid", c)
			}
			if _, err := e.payAs(p, buyer, sim.WalletPay); err != nil {
				t.Fatalf("paying before the deadline after a close: %v", err)
			}
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid || q.Amount != 800 {
				t.Fatalf("query: %+v, want Paid 800", q)
			}
		})
	}
}

// What each signed method hands the device: the product, the deadline truncated so that it
// is never later than ours (wap's to the minute, as the SDK documents it, the others' to the
// second), notify_url, return_url and quit_url where the method has them, and a pc form
// that posts exactly the URL's parameters, escaped.
func TestMethods_SignedOrderFields(t *testing.T) {
	t.Parallel()
	e := setup(t)
	deadline := e.clock.Now().Add(30*time.Minute + 45*time.Second + 600*time.Millisecond)
	want := map[orderpay.PayMethod]struct {
		product, timeExpire string
		expires             time.Time
		returnURL, quitURL  string
	}{
		orderpay.MethodPC:  {"FAST_INSTANT_TRADE_PAY", "2025-03-14 10:30:45", deadline.Truncate(time.Second), shopReturn, ""},
		orderpay.MethodWAP: {"QUICK_WAP_WAY", "2025-03-14 10:30", deadline.Truncate(time.Minute), shopReturn, shopQuit},
		orderpay.MethodApp: {"QUICK_MSECURITY_PAY", "2025-03-14 10:30:45", deadline.Truncate(time.Second), "", ""},
	}
	for _, m := range signedMethods {
		w := want[m]
		pre := e.prepay(t, m, "F_"+strings.ToUpper(string(m)), 1999, deadline, "https://shop.example/notify/alipay")
		if pre.Outcome != orderpay.OutcomeAccepted || pre.Pay.Check() != nil {
			t.Fatalf("%s: %+v", m, pre)
		}
		if !pre.QRExpiresAt.Equal(w.expires) || pre.QRExpiresAt.After(deadline) {
			t.Errorf("%s: QRExpiresAt %v, want %v (never after %v)", m, pre.QRExpiresAt, w.expires, deadline)
		}
		var params url.Values
		switch m {
		case orderpay.MethodApp:
			params, _ = url.ParseQuery(pre.Pay.Field("order_string"))
		default:
			u, err := url.Parse(pre.Pay.Field("url"))
			if err != nil || u.Path != "/gateway.do" {
				t.Fatalf("%s: url %q", m, pre.Pay.Field("url"))
			}
			params = u.Query()
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(params.Get("biz_content")), &biz); err != nil {
			t.Fatalf("%s: biz_content %q: %v", m, params.Get("biz_content"), err)
		}
		if biz["product_code"] != w.product || biz["time_expire"] != w.timeExpire || biz["total_amount"] != "19.99" {
			t.Errorf("%s: biz_content %v, want product %s, time_expire %s, 19.99", m, biz, w.product, w.timeExpire)
		}
		quit, _ := biz["quit_url"].(string)
		if params.Get("notify_url") != "https://shop.example/notify/alipay" || params.Get("return_url") != w.returnURL || quit != w.quitURL {
			t.Errorf("%s: notify_url %q return_url %q quit_url %q", m, params.Get("notify_url"), params.Get("return_url"), quit)
		}
	}

	// The pc form: posts to the gateway with charset in its action, every parameter of
	// the URL a hidden input, HTML-escaped (biz_content is JSON with quotes).
	pre := e.prepay(t, orderpay.MethodPC, "F_FORM", 100, deadline, "")
	form := pre.Pay.Field("html")
	if !strings.Contains(form, `method="post" action="`+e.srv.URL+`/gateway.do?charset=utf-8"`) ||
		!strings.Contains(form, `document.forms['alipaysubmit'].submit()`) || !strings.Contains(form, `&#34;out_trade_no&#34;:&#34;F_FORM&#34;`) {
		t.Errorf("pc form %s", form)
	}
	u, _ := url.Parse(pre.Pay.Field("url"))
	for k := range u.Query() {
		if !strings.Contains(form, `name="`+k+`"`) {
			t.Errorf("the pc form lacks %s: %s", k, form)
		}
	}
}

// Requests that break Alipay's rules are Rejected with nothing made or sent: an in-app
// payment without a payer, or with one that is not an Alipay user id, a deadline already
// past once truncated, a return_url that is not absolute. An in-app trade for the seller
// itself is refused by Alipay (ACQ.BUYER_SELLER_EQUAL): Rejected.
func TestMethods_Rejected(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	base := orderpay.PrecreateRequest{OutTradeNo: "REJ_1", Amount: 100, Subject: "s", Deadline: e.clock.Now().Add(time.Hour)}
	for name, mod := range map[string]func(r *orderpay.PrecreateRequest){
		"inapp without a payer": func(r *orderpay.PrecreateRequest) { r.Method = orderpay.MethodInApp },
		"inapp with an openid": func(r *orderpay.PrecreateRequest) {
			r.Method, r.Payer = orderpay.MethodInApp, "oAbcdefghijklmnopqrstuvwxyz1"
		},
		"wap deadline within a min": func(r *orderpay.PrecreateRequest) {
			r.Method, r.Deadline = orderpay.MethodWAP, e.clock.Now().Add(30*time.Second)
		},
		"pc deadline past": func(r *orderpay.PrecreateRequest) {
			r.Method, r.Deadline = orderpay.MethodPC, e.clock.Now().Add(-time.Second)
		},
		"qr deadline past": func(r *orderpay.PrecreateRequest) { r.Deadline = e.clock.Now().Add(-time.Second) },
		"qr deadline now, so past once truncated": func(r *orderpay.PrecreateRequest) {
			r.Method, r.Deadline = orderpay.MethodQR, e.clock.Now()
		},
		"inapp deadline past": func(r *orderpay.PrecreateRequest) {
			r.Method, r.Payer, r.Deadline = orderpay.MethodInApp, "2088000000000042", e.clock.Now().Add(-time.Second)
		},
		"pc relative return_url": func(r *orderpay.PrecreateRequest) { r.Method, r.ReturnURL = orderpay.MethodPC, "/pay/1" },
		"app bad subject":        func(r *orderpay.PrecreateRequest) { r.Method, r.Subject = orderpay.MethodApp, "a&b" },
		"no such method":         func(r *orderpay.PrecreateRequest) { r.Method = orderpay.MethodJSAPI },
	} {
		r := base
		mod(&r)
		if res := e.ch.Precreate(ctx, r); res.Outcome != orderpay.OutcomeRejected || res.Pay != nil || !strings.HasPrefix(res.Detail, "not sent") {
			t.Errorf("%s: %+v, want Rejected unsent", name, res)
		}
	}
	if calls := e.sim.Calls()["alipay."+sim.MethodPrecreate]; calls != 0 {
		t.Errorf("%d calls reached the gateway", calls)
	}
	r := base
	r.Method, r.Payer = orderpay.MethodInApp, e.keys.SellerID
	if res := e.ch.Precreate(ctx, r); res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "ACQ.BUYER_SELLER_EQUAL") {
		t.Errorf("inapp for the seller: %+v, want Rejected ACQ.BUYER_SELLER_EQUAL", res)
	}
}

// alipay.trade.create meets the call faults precreate meets, and maps them as precreate's:
// every fault is Unknown; with the fault applied the trade exists and waits (NotPaid), and
// the same request again gives the same trade_no; without, nothing exists (NotPaid) and the
// same request again creates it.
func TestMethods_InAppCallFaults(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := context.Background()
			no := "F_" + strings.ReplaceAll(faultName(f.kind, f.applied), " ", "_")
			req := orderpay.PrecreateRequest{OutTradeNo: no, Amount: 300, Subject: "s", Deadline: e.clock.Now().Add(time.Hour),
				Method: orderpay.MethodInApp, Payer: e.sim.IdentityOf(buyer, "").AlipayUserID}
			e.fault(t, sim.MethodPrecreate, f.kind, f.applied)
			if res := e.faulty(t, f.kind).Precreate(ctx, req); res.Outcome != orderpay.OutcomeUnknown || res.Pay != nil {
				t.Fatalf("create under %s: %+v, want Unknown", faultName(f.kind, f.applied), res)
			}
			e.noFaults()
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
				t.Fatalf("query: %+v, want NotPaid", q)
			}
			existed := len(e.sim.Ledger()) == 1
			if existed != f.applied {
				t.Fatalf("trade at the channel: %v, want %v", e.sim.Ledger(), f.applied)
			}
			res := e.ch.Precreate(ctx, req)
			if res.Outcome != orderpay.OutcomeAccepted {
				t.Fatalf("create again: %+v", res)
			}
			if existed && res.Pay.Field("trade_no") != e.sim.Ledger()[0].TradeNo {
				t.Fatalf("create again gave %s, the channel has %s", res.Pay.Field("trade_no"), e.sim.Ledger()[0].TradeNo)
			}
			if _, err := e.payAs(res.Pay, buyer, sim.WalletPay); err != nil {
				t.Fatal(err)
			}
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid {
				t.Fatalf("query after paying: %+v", q)
			}
		})
	}
}

// The return_url the cashier sends the browser to after paying pc or wap carries Alipay's
// signed parameters: they verify with the Alipay key (in both modes) and name the trade
// paid; the shop's own query parameter stays beside them. Altered, they do not verify. A
// wap buyer who gives up is sent to quit_url, and nothing is paid.
func TestMethods_ReturnURL(t *testing.T) {
	t.Parallel()
	eachModeAndMethod(t, []orderpay.PayMethod{orderpay.MethodPC, orderpay.MethodWAP}, func(t *testing.T, mode sim.AlipayMode, m orderpay.PayMethod) {
		e := setupMode(t, mode, sim.Config{})
		ctx := context.Background()
		no := "RET_" + strings.ToUpper(string(m))
		p := e.instruction(t, m, no, 4321, e.clock.Now().Add(time.Hour), "")

		declined, err := e.payAs(p, buyer, sim.WalletDecline)
		if err != nil {
			t.Fatal(err)
		}
		wantBack := map[orderpay.PayMethod]string{orderpay.MethodWAP: shopQuit}[m]
		if declined.ReturnURL != wantBack || declined.TradeNo != "" {
			t.Fatalf("decline: %+v, want return_url %q and no trade", declined, wantBack)
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query after the buyer gave up: %+v, want NotPaid", q)
		}

		paid, err := e.payAs(p, buyer, sim.WalletPay)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(paid.ReturnURL)
		if err != nil || !strings.HasPrefix(paid.ReturnURL, "https://shop.example/pay/R1?") {
			t.Fatalf("return_url %q", paid.ReturnURL)
		}
		q := u.Query()
		if q.Get("from") != "alipay" {
			t.Errorf("the shop's own parameter was lost: %q", paid.ReturnURL)
		}
		r, err := e.ch.VerifyReturn(ctx, q)
		if err != nil {
			t.Fatalf("the return does not verify: %v (%s)", err, paid.ReturnURL)
		}
		method := map[orderpay.PayMethod]string{orderpay.MethodPC: "alipay.trade.page.pay.return", orderpay.MethodWAP: "alipay.trade.wap.pay.return"}[m]
		if r.OutTradeNo != no || r.TradeNo != paid.TradeNo || r.Amount != 4321 || r.Method != method {
			t.Fatalf("return %+v, want %s %s 4321 %s", r, no, paid.TradeNo, method)
		}
		for field, value := range map[string]string{"total_amount": "0.01", "out_trade_no": "RET_OTHER", "trade_no": "2025031400000000000000000000"} {
			forged := url.Values{}
			for k, v := range q {
				forged[k] = v
			}
			forged.Set(field, value)
			if _, err := e.ch.VerifyReturn(ctx, forged); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
				t.Errorf("a return with %s altered: %v, want EUNAUTHORIZED", field, err)
			}
		}
	})
}

// Every notification fault of the plan acts on a payment of each method: the forged and the
// foreign copies are refused by the adapter, the tampered one (genuinely signed, for another
// amount) by the amount check the payment center makes after it, the dropped first attempt
// is sent again, and the genuine notification is acknowledged.
func TestMethods_NotificationFaults(t *testing.T) {
	t.Parallel()
	for _, m := range allMethods {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			plan := sim.FaultPlan{Seed: 3, Rules: []sim.FaultRule{
				{Method: sim.MethodNotify, Kind: sim.FaultForgeSignature, Limit: 1},
				{Method: sim.MethodNotify, Kind: sim.FaultTamperAmount, Limit: 1},
				{Method: sim.MethodNotify, Kind: sim.FaultWrongApp, Limit: 1},
				{Method: sim.MethodNotify, Kind: sim.FaultDrop, Limit: 1},
				{Method: sim.MethodNotify, Kind: sim.FaultDuplicate, Limit: 1},
			}}
			e := setupWith(t, sim.Config{Faults: plan})
			var (
				mu       sync.Mutex
				verified []*orderpay.Notification
			)
			shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				n, err := e.ch.VerifyNotification(r.Context(), r.Header, body)
				if err == nil && n.Amount != 999 {
					err = fmt.Errorf("amount %d is not the order's", n.Amount) // the payment center's check
				}
				if err != nil {
					http.Error(w, "fail", http.StatusBadRequest)
					return
				}
				mu.Lock()
				verified = append(verified, n)
				mu.Unlock()
				ack := e.ch.Ack()
				w.WriteHeader(ack.Status)
				_, _ = w.Write(ack.Body)
			}))
			t.Cleanup(shop.Close)
			no := "N_" + strings.ToUpper(string(m))
			p := e.instruction(t, m, no, 999, e.clock.Now().Add(time.Hour), shop.URL+"/notify/alipay")
			if _, err := e.payAs(p, buyer, sim.WalletPay); err != nil {
				t.Fatal(err)
			}
			var st sim.NotifyStats
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if all := e.sim.NotifyStats(); len(all) == 1 && all[0].Done() {
					st = all[0]
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if !st.Acked || st.OutTradeNo != no {
				t.Fatalf("delivery %+v, want acknowledged", st)
			}
			variants := map[string]bool{}
			for _, b := range st.Bad {
				variants[b.Variant] = true
				if b.Acked {
					t.Errorf("the shop acknowledged the %s copy", b.Variant)
				}
			}
			if !variants[sim.FaultForgeSignature] || !variants[sim.FaultTamperAmount] || !variants[sim.FaultWrongApp] {
				t.Fatalf("bad copies %+v, want forged, tampered and foreign", st.Bad)
			}
			if len(st.Attempts) < 2 || !st.Attempts[0].Dropped {
				t.Errorf("attempts %+v, want the first dropped and a resend", st.Attempts)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(verified) == 0 {
				t.Fatal("no genuine notification verified")
			}
			for _, n := range verified {
				if n.Outcome != orderpay.OutcomePaid || n.OutTradeNo != no {
					t.Errorf("verified notification %+v", n)
				}
			}
		})
	}
}

// The adapter's own instructions, altered on their way to the device (the amount, the
// out_trade_no or the app id in a pc url, a pc form, a wap url or an app order string), are
// refused by the wallet, and nothing is paid: the query stays NotPaid. An inapp trade_no
// paid by another buyer is refused the same way.
func TestMethods_AlteredInstructionsPayNothing(t *testing.T) {
	t.Parallel()
	eachModeAndMethod(t, allMethods, func(t *testing.T, mode sim.AlipayMode, m orderpay.PayMethod) {
		e := setupMode(t, mode, sim.Config{})
		ctx := context.Background()
		no := "ALT_" + strings.ToUpper(string(m))
		p := e.instruction(t, m, no, 2500, e.clock.Now().Add(time.Hour), "")
		var forged []*orderpay.PayInstruction
		switch m {
		case orderpay.MethodInApp:
			if _, err := e.payAs(p, "bob", sim.WalletPay); orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), "TRADE_BUYER_NOT_MATCH") {
				t.Fatalf("bob paying alice's trade: %v, want TRADE_BUYER_NOT_MATCH", err)
			}
		case orderpay.MethodApp:
			params, _ := url.ParseQuery(p.Field("order_string"))
			for _, f := range alterations(params) {
				forged = append(forged, orderpay.NewInstruction(orderpay.ChannelAlipay, m, "order_string", f.Encode()))
			}
		default:
			u, _ := url.Parse(p.Field("url"))
			for _, f := range alterations(u.Query()) {
				v := *u
				v.RawQuery = f.Encode()
				if m == orderpay.MethodWAP {
					forged = append(forged, orderpay.NewInstruction(orderpay.ChannelAlipay, m, "url", v.String()))
					continue
				}
				forged = append(forged,
					orderpay.NewInstruction(orderpay.ChannelAlipay, m, "url", v.String(), "html", p.Field("html")),
					orderpay.NewInstruction(orderpay.ChannelAlipay, m, "url", p.Field("url"), "html", alteredForm(p.Field("html"), f)))
			}
		}
		for i, f := range forged {
			if _, err := e.payAs(f, buyer, sim.WalletPay); orderpay.ErrorCode(err) != orderpay.EINVALID {
				t.Fatalf("altered instruction %d: %v, want EINVALID", i, err)
			}
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query after the refusals: %+v, want NotPaid", q)
		}
		if _, err := e.payAs(p, buyer, sim.WalletPay); err != nil {
			t.Fatalf("the genuine instruction: %v", err)
		}
	})
}

// alterations are params with, in turn, total_amount, out_trade_no (inside biz_content) and
// app_id changed, signatures left as they were.
func alterations(params url.Values) []url.Values {
	var out []url.Values
	for _, change := range []func(v url.Values){
		func(v url.Values) {
			v.Set("biz_content", strings.Replace(v.Get("biz_content"), `"total_amount":"25.00"`, `"total_amount":"0.01"`, 1))
		},
		func(v url.Values) {
			v.Set("biz_content", strings.Replace(v.Get("biz_content"), `"out_trade_no":"ALT_`, `"out_trade_no":"ALX_`, 1))
		},
		func(v url.Values) { v.Set("app_id", "2021000000000000") },
	} {
		v := url.Values{}
		for k, vs := range params {
			v[k] = append([]string(nil), vs...)
		}
		change(v)
		if v.Encode() == params.Encode() {
			panic("alteration changed nothing: " + params.Get("biz_content"))
		}
		out = append(out, v)
	}
	return out
}

// alteredForm is form with each input's value replaced by params'.
func alteredForm(form string, params url.Values) string {
	for k := range params {
		orig := regexp.MustCompile(`name="` + regexp.QuoteMeta(k) + `" value="[^"]*"`)
		form = orig.ReplaceAllLiteralString(form, `name="`+k+`" value="`+html.EscapeString(params.Get(k))+`"`)
	}
	return form
}

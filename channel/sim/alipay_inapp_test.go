package sim_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// inAppClient is the merchant's SDK client of its in-app app, in mode: the in-app app's id,
// private key, and its Alipay public key or its three certificates.
func inAppClient(t *testing.T, b *bundle, mode sim.AlipayMode) *alipay.Client {
	t.Helper()
	a := b.keys.InApp
	if a == nil {
		t.Fatal("the simulator's keys have no in-app app")
	}
	if mode == sim.AlipayModeKey {
		return sdkClient(t, a.AppID, simtest.PEM(t, a.AppPrivateKeyPEM), simtest.PEM(t, a.AlipayPublicKeyPEM), b.gatewayURL())
	}
	c, err := alipay.New(a.AppID, simtest.PEM(t, a.AppPrivateKeyPEM), false, alipay.WithSandboxGateway(b.gatewayURL()), alipay.WithTimeLocation(cst))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAppCertPublicKey(a.AlipayCerts.AppCertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayRootCert(a.AlipayCerts.RootPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAlipayCertPublicKey(a.AlipayCerts.AlipayCertPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

// The merchant's in-app app, in both signing modes: its calls verify with its own key (and
// certificates); a trade belongs to the app that made it, and to the merchant's other app it
// does not exist (query, close, cancel, refund and refund query answer ACQ.TRADE_NOT_EXIST,
// and change nothing); the trade's notifications and refunds carry its app's app_id and are
// signed with the Alipay key of that app, which the other app's key does not verify. The
// trade bill is the seller's: one bill, asked by either app, holds both apps' trades. A
// request naming the in-app app signed with the main app's key is refused; the main app can
// still make an in-app trade of its own (a merchant without an in-app app does).
func TestInAppApp_TradesBelongToTheAppThatMadeThem(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			var b *bundle
			if mode == sim.AlipayModeKey {
				b = setup(t, sim.Config{TimeScale: fastTime})
			} else {
				b = setupCert(t, sim.Config{TimeScale: fastTime})
			}
			ctx := context.Background()
			in, main := inAppClient(t, b, mode), b.client
			inApp := b.keys.InApp
			recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
			alice := b.sim.IdentityOf("alice", "").AlipayUserID

			created, err := in.TradeCreate(ctx, alipay.TradeCreate{Trade: alipay.Trade{NotifyURL: recv.srv.URL + "/notify/alipay",
				Subject: "order IA_1", OutTradeNo: "IA_1", TotalAmount: "8.00", ProductCode: "JSAPI_PAY", TimeExpire: b.timeExpire(time.Hour)},
				BuyerId: alice})
			if err != nil || created.Code != alipay.CodeSuccess || created.TradeNo == "" {
				t.Fatalf("create under the in-app app: %+v, %v", created, err)
			}
			if q, err := in.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "IA_1"}); err != nil || q.TradeStatus != alipay.TradeStatusWaitBuyerPay {
				t.Fatalf("the in-app app's query: %+v, %v", q, err)
			}
			notExist := func(what string, e alipay.Error, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				wantAlipayCode(t, what, e, "40004", "ACQ.TRADE_NOT_EXIST")
			}
			q, err := main.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "IA_1"})
			notExist("the main app's query of the in-app trade", q.Error, err)
			c, err := main.TradeClose(ctx, alipay.TradeClose{OutTradeNo: "IA_1"})
			notExist("the main app's close", c.Error, err)
			x, err := main.TradeCancel(ctx, alipay.TradeCancel{OutTradeNo: "IA_1"})
			notExist("the main app's cancel", x.Error, err)
			if e := alipayEntry(t, b.sim, "IA_1"); e.Status != sim.AlipayWaitBuyerPay || e.AppID != inApp.AppID {
				t.Fatalf("after the main app's close and cancel: %+v, want WAIT_BUYER_PAY of the in-app app", e)
			}

			p := orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodInApp, "trade_no", created.TradeNo)
			if _, err := b.payAs(p, "alice", ""); err != nil {
				t.Fatal(err)
			}
			st := waitNotify(t, b.sim, "IA_1")
			if !st.Acked {
				t.Fatalf("the payment notification was not acknowledged: %+v", st)
			}
			body := recv.received()[0]
			v, _ := url.ParseQuery(body)
			if v.Get("app_id") != inApp.AppID || v.Get("auth_app_id") != inApp.AppID || v.Get("seller_id") != b.keys.SellerID ||
				v.Get("trade_status") != "TRADE_SUCCESS" {
				t.Fatalf("the in-app trade's notification: %s", body)
			}
			if err := in.VerifySign(ctx, v); err != nil {
				t.Fatalf("the notification does not verify with the in-app app's Alipay key: %v", err)
			}
			if err := main.VerifySign(ctx, v); err == nil {
				t.Fatal("the in-app trade's notification verifies with the main app's Alipay key")
			}

			r, err := main.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: "IA_1", OutRequestNo: "IA_1R1", RefundAmount: "1.00"})
			notExist("the main app's refund", r.Error, err)
			r, err = in.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: "IA_1", OutRequestNo: "IA_1R1", RefundAmount: "1.00"})
			if err != nil || r.Code != alipay.CodeSuccess || r.FundChange != "Y" || r.RefundFee != "1.00" {
				t.Fatalf("the in-app app's refund: %+v, %v", r, err)
			}
			rq, err := main.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: "IA_1", OutRequestNo: "IA_1R1"})
			notExist("the main app's refund query", rq.Error, err)
			rq, err = in.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: "IA_1", OutRequestNo: "IA_1R1"})
			if err != nil || rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "1.00" {
				t.Fatalf("the in-app app's refund query: %+v, %v", rq, err)
			}
			refundNote := waitNotifyOf(t, b.sim, "IA_1", "IA_1R1")
			if len(refundNote.Attempts) == 0 {
				t.Fatal("no refund notification")
			}
			rv, _ := url.ParseQuery(recv.received()[1])
			if rv.Get("out_biz_no") != "IA_1R1" || rv.Get("app_id") != inApp.AppID || in.VerifySign(ctx, rv) != nil {
				t.Fatalf("the in-app trade's refund notification: %v", rv)
			}

			// A QR code of the main app is the main app's alone.
			b.alipayPaid(t, "IA_MAIN_QR", "3.00")
			q, err = in.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "IA_MAIN_QR"})
			notExist("the in-app app's query of a main app's trade", q.Error, err)
			if e := alipayEntry(t, b.sim, "IA_MAIN_QR"); e.AppID != b.keys.AppID {
				t.Fatalf("the main app's trade in the ledger: %+v", e)
			}
			// The main app makes an in-app trade of its own, which is its own.
			own, err := main.TradeCreate(ctx, alipay.TradeCreate{Trade: alipay.Trade{Subject: "order IA_2", OutTradeNo: "IA_2",
				TotalAmount: "2.00", ProductCode: "JSAPI_PAY", TimeExpire: b.timeExpire(time.Hour)}, BuyerId: alice})
			if err != nil || own.Code != alipay.CodeSuccess {
				t.Fatalf("create under the main app: %+v, %v", own, err)
			}
			if q := b.query(t, "IA_2"); q.TradeStatus != alipay.TradeStatusWaitBuyerPay {
				t.Fatalf("the main app's query of its in-app trade: %+v", q)
			}
			q, err = in.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "IA_2"})
			notExist("the in-app app's query of the main app's in-app trade", q.Error, err)

			// The in-app app's id with the main app's key is no request of the in-app app.
			forged := sdkClient(t, inApp.AppID, simtest.PEM(t, b.keys.AppPrivateKeyPEM), simtest.PEM(t, inApp.AlipayPublicKeyPEM), b.gatewayURL())
			if mode == sim.AlipayModeKey {
				fq, err := forged.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "IA_1"})
				if err != nil {
					t.Fatal(err)
				}
				wantAlipayCode(t, "the in-app app named, the main app's key", fq.Error, "40002", "isv.invalid-signature")
			}

			// One bill, the seller's, whichever app asks for it: both apps' trades.
			b.clock.Advance(25 * time.Hour)
			for name, client := range map[string]*alipay.Client{"main": main, "in-app": in} {
				u, err := client.BillDownloadURLQuery(ctx, alipay.BillDownloadURLQuery{BillType: "trade", BillDate: "2025-03-14"})
				if err != nil || u.BillDownloadURL == "" {
					t.Fatalf("the %s app's bill: %+v, %v", name, u, err)
				}
				text := strings.Join(downloadAlipayBill(t, u.BillDownloadURL).lines, "\n")
				for _, no := range []string{"IA_1", "IA_MAIN_QR", "IA_1R1"} {
					if !strings.Contains(text, no) {
						t.Errorf("the bill the %s app fetched has no %s:\n%s", name, no, text)
					}
				}
			}
		})
	}
}

// The OAuth page serves any of the merchant's apps, and names the one asked for; another
// merchant's app is refused.
func TestInAppApp_OauthPageNamesTheAppAsked(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	for appID, want := range map[string]int{b.keys.InApp.AppID: http.StatusFound, b.keys.AppID: http.StatusFound, "2021000000000000": http.StatusBadRequest} {
		resp, err := noRedirects.Get(b.srv.URL + "/sim/alipay/oauth?buyer=alice&app_id=" + appID + "&redirect_uri=" + url.QueryEscape("https://shop.example/cb"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("app %s: %d, want %d", appID, resp.StatusCode, want)
		}
		if loc, _ := url.Parse(resp.Header.Get("Location")); want == http.StatusFound && loc.Query().Get("app_id") != appID {
			t.Fatalf("app %s: sent back to %s", appID, loc)
		}
	}
}

// A merchant of keys without an in-app app (a keys directory written before it was
// simulated) has one app: the in-app app's id is not one of its apps, and in-app trades are
// made under the main app.
func TestInAppApp_KeysWithoutOne(t *testing.T) {
	t.Parallel()
	full := testKeys(t)
	one := *full
	one.InApp = nil
	b := setup(t, sim.Config{Keys: &one})
	ctx := context.Background()
	// The refusal of an app the gateway does not know is signed with the main app's key.
	asInApp := sdkClient(t, full.InApp.AppID, simtest.PEM(t, full.InApp.AppPrivateKeyPEM), simtest.PEM(t, one.AlipayPublicKeyPEM), b.gatewayURL())
	q, err := asInApp.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "X"})
	if err != nil {
		t.Fatal(err)
	}
	wantAlipayCode(t, "a call as the in-app app", q.Error, "40002", "isv.invalid-app-id")
	created, err := b.client.TradeCreate(ctx, alipay.TradeCreate{Trade: alipay.Trade{Subject: "s", OutTradeNo: "ONE_1", TotalAmount: "1.00",
		ProductCode: "JSAPI_PAY"}, BuyerId: b.sim.IdentityOf("alice", "").AlipayUserID})
	if err != nil || created.Code != alipay.CodeSuccess {
		t.Fatalf("an in-app trade under the main app: %+v, %v", created, err)
	}
	if e := alipayEntry(t, b.sim, "ONE_1"); e.AppID != one.AppID {
		t.Fatalf("ledger %+v", e)
	}
}

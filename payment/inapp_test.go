package payment_test

import (
	"context"
	"maps"
	"net/url"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/payment"
)

// withInAppApp is a payment center like b's whose Alipay adapter makes in-app payments under
// the simulated merchant's in-app app.
func (b *bundle) withInAppApp(t *testing.T) *payment.Service {
	t.Helper()
	k, _ := simtest.Keys(t)
	ali, err := alipay.New(alipay.Config{AppID: k.AppID, SellerID: k.SellerID, AppPrivateKeyPEM: simtest.PEM(t, k.AppPrivateKeyPEM),
		AlipayPublicKeyPEM: simtest.PEM(t, k.AlipayPublicKeyPEM), GatewayURL: b.gateway, Timeout: 2 * time.Second, Clock: b.clock,
		InApp: &alipay.AppKeys{AppID: k.InApp.AppID, AppPrivateKeyPEM: simtest.PEM(t, k.InApp.AppPrivateKeyPEM),
			AlipayPublicKeyPEM: simtest.PEM(t, k.InApp.AlipayPublicKeyPEM)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.Channels = maps.Clone(cfg.Channels)
	cfg.Channels[orderpay.ChannelAlipay] = ali
	svc, err := payment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Every call the payment center makes about an in-app attempt goes to the in-app app, the
// one that made the trade (the simulator answers ACQ.TRADE_NOT_EXIST to the main app): the
// prepay; the query that finds a payment whose notification never came; the notification,
// verified at the one Alipay endpoint; the refund and its query; the query and the close at
// the timeout close, which closes the unpaid trade before its deadline.
func TestInAppPaymentsGoToTheInAppApp(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) { c.RefundDelay = time.Minute })
	svc := b.withInAppApp(t)
	ctx := context.Background()
	k, _ := simtest.Keys(t)
	alice := b.sim.IdentityOf("alice", "").AlipayUserID
	pay := func(orderNo string) *orderpay.PayResult {
		t.Helper()
		req := b.request(orderNo)
		req.Method, req.Payer = orderpay.MethodInApp, alice
		res, err := svc.Pay(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if e := b.ledger(t, res.PaymentNo+"A01"); e.AppID != k.InApp.AppID {
			t.Fatalf("the in-app trade was made under app %s, want the in-app app %s", e.AppID, k.InApp.AppID)
		}
		return res
	}
	// deliver hands the channel's notifications to the payment center until that of
	// outTradeNo's payment (a refund's is delivered on the way), and says what became of it.
	deliver := func(outTradeNo string) error {
		t.Helper()
		for {
			n := b.nextNotification(t)
			v, _ := url.ParseQuery(string(n.body))
			if v.Get("app_id") != k.InApp.AppID {
				t.Fatalf("a notification of app %s, want the in-app app's: %s", v.Get("app_id"), n.body)
			}
			_, err := svc.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, n.body)
			if v.Get("out_trade_no") == outTradeNo && v.Get("out_biz_no") == "" {
				return err
			}
			if err != nil {
				t.Fatalf("the notification %s: %v", n.body, err)
			}
		}
	}

	// Paid; the notification held back: the query finds the payment.
	res := pay("IA1")
	if _, err := b.sim.PayInstruction(ctx, sim.PayAs{Pay: res.Pay, Buyer: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o, err := svc.QueryAttempt(ctx, "PIA1A01", "test"); err != nil || o != orderpay.OutcomePaid {
		t.Fatalf("query of the paid in-app attempt: %s, %v", o, err)
	}
	b.wantStatus(t, "PIA1", orderpay.PaymentSuccess)
	if err := deliver("PIA1A01"); err != nil {
		t.Fatalf("the in-app trade's notification, late: %v", err)
	}

	// Refunded: sent, then, not settled yet, queried until it is.
	ev, err := svc.Result(ctx, "IA1")
	if err != nil || ev == nil {
		t.Fatalf("result %+v, %v", ev, err)
	}
	if err := svc.RefundRejected(ctx, *ev, "the order was cancelled"); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.RefundDue(ctx, 10, 1); err != nil || r.Pending != 1 {
		t.Fatalf("the refund sent: %+v, %v; want pending", r, err)
	}
	b.clock.Advance(2 * time.Minute)
	if r, err := svc.RefundDue(ctx, 10, 1); err != nil || r.Succeeded != 1 {
		t.Fatalf("the refund queried: %+v, %v; want succeeded", r, err)
	}
	if rs := b.sim.AlipayRefunds("PIA1A01"); len(rs) != 1 || !rs[0].Settled || rs[0].Amount != 4990 {
		t.Fatalf("refunds at the channel: %+v", rs)
	}

	// Paid and notified: the notification names the in-app app and is applied.
	res = pay("IA2")
	if _, err := b.sim.PayInstruction(ctx, sim.PayAs{Pay: res.Pay, Buyer: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := deliver("PIA2A01"); err != nil {
		t.Fatalf("the in-app trade's notification: %v", err)
	}
	b.wantStatus(t, "PIA2", orderpay.PaymentSuccess)

	// Never paid: closed at the channel, before its deadline.
	pay("IA3")
	if o, err := svc.Close(ctx, "IA3"); err != nil || o != orderpay.CloseDone {
		t.Fatalf("close of the unpaid in-app payment: %s, %v", o, err)
	}
	b.wantStatus(t, "PIA3", orderpay.PaymentClosed)
	if e := b.ledger(t, "PIA3A01"); e.Status != sim.AlipayTradeClosed {
		t.Fatalf("the trade at the channel: %+v, want closed", e)
	}
}

package alipay_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// In-app payments under an app of their own (Config.InApp), told against the simulator, whose
// merchant has a second app and keeps each trade to the app that made it.

// withInApp configures the adapter's in-app app with the simulator's in-app app, in mode: its
// id, private key, and its Alipay public key or its three certificates.
func withInApp(t *testing.T, keys *sim.Keys, mode sim.AlipayMode) func(*alipay.Config) {
	t.Helper()
	a := keys.InApp
	if a == nil {
		t.Fatal("the simulator's keys have no in-app app")
	}
	k := &alipay.AppKeys{AppID: a.AppID, AppPrivateKeyPEM: simtest.PEM(t, a.AppPrivateKeyPEM)}
	if mode == sim.AlipayModeCert {
		k.AppCertPEM, k.AlipayCertPEM, k.AlipayRootCertPEM = a.AlipayCerts.AppCertPEM, a.AlipayCerts.AlipayCertPEM, a.AlipayCerts.RootPEM
	} else {
		k.AlipayPublicKeyPEM = simtest.PEM(t, a.AlipayPublicKeyPEM)
	}
	return func(c *alipay.Config) { c.InApp = k }
}

// setupInApp is setupMode with the adapter's in-app app configured in the same mode.
func setupInApp(t *testing.T, mode sim.AlipayMode) *env {
	t.Helper()
	keys, _ := simtest.Keys(t)
	return setupMode(t, mode, sim.Config{}, withInApp(t, keys, mode))
}

// inApp is the adapter in-app trades go to, failing the test unless it is the in-app app's.
func (e *env) inApp(t *testing.T) orderpay.Channel {
	t.Helper()
	in := orderpay.ChannelFor(e.ch, orderpay.MethodInApp)
	if in == orderpay.Channel(e.ch) {
		t.Fatal("in-app trades go to the main app's adapter")
	}
	return in
}

func eachMode(t *testing.T, f func(t *testing.T, mode sim.AlipayMode)) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}

// An in-app trade is made under the in-app app and is that app's: the buyer pays it at the
// wallet; its adapter (ForMethod) queries it Paid, while the main app's adapter, asking the
// main app, finds no such trade; its notification, which names the in-app app, verifies
// through the main adapter (the one notify endpoint); it is refunded in part, then in full,
// and its refunds are queried and notified; another one, unpaid, is closed.
func TestInApp_TradesUnderTheirOwnApp(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupInApp(t, mode)
		ctx := context.Background()
		in := e.inApp(t)
		mer := newMerchant(t, e.ch)
		p := e.instruction(t, orderpay.MethodInApp, "IA_1", 3000, e.clock.Now().Add(30*time.Minute), mer.srv.URL+"/notify/alipay")
		entry := e.entry(t, "IA_1")
		if entry.AppID != e.keys.InApp.AppID || entry.Status != sim.AlipayWaitBuyerPay {
			t.Fatalf("the trade at the channel: %+v, want the in-app app's, waiting", entry)
		}
		if q := in.Query(ctx, "IA_1"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "WAIT_BUYER_PAY") {
			t.Fatalf("the in-app adapter's query before paying: %+v, want NotPaid WAIT_BUYER_PAY", q)
		}

		e.clock.Advance(time.Minute)
		paid, err := e.payAs(p, buyer, sim.WalletPay)
		if err != nil {
			t.Fatal(err)
		}
		q := in.Query(ctx, "IA_1")
		if q.Outcome != orderpay.OutcomePaid || q.Amount != 3000 || q.TradeNo != paid.TradeNo || !q.PaidAt.Equal(e.clock.Now()) {
			t.Fatalf("the in-app adapter's query after paying: %+v", q)
		}
		if q := e.ch.Query(ctx, "IA_1"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "ACQ.TRADE_NOT_EXIST") {
			t.Fatalf("the main app's query of the in-app trade: %+v, want its ACQ.TRADE_NOT_EXIST", q)
		}

		body, n, err := mer.first(t)
		if err != nil {
			t.Fatalf("the in-app trade's notification does not verify: %v", err)
		}
		if v, _ := url.ParseQuery(body); v.Get("app_id") != e.keys.InApp.AppID {
			t.Fatalf("the notification names app %s, want the in-app app", v.Get("app_id"))
		}
		if n.Outcome != orderpay.OutcomePaid || n.Amount != 3000 || n.OutTradeNo != "IA_1" || n.TradeNo != paid.TradeNo {
			t.Fatalf("notification %+v", n)
		}

		for i, r := range []struct {
			no     string
			amount int64
		}{{"IA_1R1", 1000}, {"IA_1R2", 2000}} {
			res := in.Refund(ctx, orderpay.RefundRequest{OutTradeNo: "IA_1", OutRefundNo: r.no, Amount: r.amount, Total: 3000})
			if res.Outcome != orderpay.OutcomeRefunded || res.Amount != r.amount {
				t.Fatalf("refund %s: %+v", r.no, res)
			}
			if qr := in.QueryRefund(ctx, "IA_1", r.no); qr.Outcome != orderpay.OutcomeRefunded || qr.Amount != r.amount {
				t.Fatalf("refund query %s: %+v", r.no, qr)
			}
			d := mer.wait(t, i+2)[i+1]
			if d.err != nil || d.n.OutRefundNo != r.no || d.n.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("refund notification of %s: %+v %v", r.no, d.n, d.err)
			}
		}
		if got := e.refunded(t, "IA_1"); got != 3000 {
			t.Fatalf("refunded %d at the channel, want 3000", got)
		}
		if q := in.Query(ctx, "IA_1"); q.Outcome != orderpay.OutcomePaid || !strings.Contains(q.Detail, "fully refunded") {
			t.Fatalf("query after the full refund: %+v, want Paid, fully refunded", q)
		}

		e.instruction(t, orderpay.MethodInApp, "IA_2", 500, e.clock.Now().Add(30*time.Minute), "")
		if c := in.Close(ctx, "IA_2"); c.Outcome != orderpay.OutcomeClosed {
			t.Fatalf("close of the unpaid in-app trade: %+v", c)
		}
		if q := in.Query(ctx, "IA_2"); q.Outcome != orderpay.OutcomeClosed {
			t.Fatalf("query after the close: %+v", q)
		}
		if _, err := e.payAs(orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodInApp, "trade_no", e.entry(t, "IA_2").TradeNo),
			buyer, sim.WalletPay); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Fatalf("paying the closed trade: %v, want ECONFLICT", err)
		}
		// The methods of the main app stay the main app's.
		qr := e.precreate(t, "IA_QR", 100, e.clock.Now().Add(time.Hour), "")
		if _, err := e.sim.Pay(ctx, qr.QRCode); err != nil {
			t.Fatal(err)
		}
		if e.entry(t, "IA_QR").AppID != e.keys.AppID || e.ch.Query(ctx, "IA_QR").Outcome != orderpay.OutcomePaid {
			t.Fatalf("a QR code of the adapter with an in-app app: %+v", e.entry(t, "IA_QR"))
		}
	})
}

// The one notify endpoint verifies each notification with the key of the app it claims:
// the in-app app's genuine notification verifies; re-signed by anyone but the in-app app's
// Alipay key (a forger, or the main app's Alipay key) it does not; with its seller, or its
// auth_app_id, another's it does not either; one naming an app that is neither is refused.
// The main app's own notifications verify as before. An adapter without an in-app app
// refuses the in-app app's notification, as any other app's.
func TestInApp_NotificationsVerifiedByTheAppTheyClaim(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupInApp(t, mode)
		ctx := context.Background()
		_, forger := simtest.Keys(t)
		mer := newMerchant(t, e.ch)
		p := e.instruction(t, orderpay.MethodInApp, "IN_1", 1234, e.clock.Now().Add(time.Hour), mer.srv.URL+"/notify/alipay")
		if _, err := e.payAs(p, buyer, sim.WalletPay); err != nil {
			t.Fatal(err)
		}
		genuine, _, err := mer.first(t)
		if err != nil {
			t.Fatalf("the genuine in-app notification: %v", err)
		}
		resign := func(key *rsa.PrivateKey, change func(url.Values)) []byte {
			v, _ := url.ParseQuery(genuine)
			change(v)
			v.Del("sign")
			v.Del("sign_type")
			sig, err := sim.SignAlipayParams(key, v)
			if err != nil {
				t.Fatal(err)
			}
			v.Set("sign_type", "RSA2")
			v.Set("sign", sig)
			return []byte(v.Encode())
		}
		same := func(url.Values) {}
		inAppKey := e.keys.InApp.AlipayPrivateKey
		for name, body := range map[string][]byte{
			"re-signed by a forger":                    resign(forger, same),
			"signed with the main app's Alipay key":    resign(e.keys.AlipayPrivateKey, same),
			"another seller, the in-app app's key":     resign(inAppKey, func(v url.Values) { v.Set("seller_id", "2088000000000001") }),
			"another auth_app_id":                      resign(inAppKey, func(v url.Values) { v.Set("auth_app_id", e.keys.AppID) }),
			"an app that is neither, in-app app's key": resign(inAppKey, func(v url.Values) { v.Set("app_id", "2021000000000001"); v.Del("auth_app_id") }),
			"the main app's id, the in-app app's key":  resign(inAppKey, func(v url.Values) { v.Set("app_id", e.keys.AppID); v.Del("auth_app_id") }),
		} {
			if n, err := e.ch.VerifyNotification(ctx, nil, body); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED || n != nil {
				t.Errorf("%s: %+v %v, want EUNAUTHORIZED", name, n, err)
			}
		}
		for name, body := range map[string][]byte{"as sent": []byte(genuine), "re-signed by the in-app app's key": resign(inAppKey, same)} {
			if n, err := e.ch.VerifyNotification(ctx, nil, body); err != nil || n.Outcome != orderpay.OutcomePaid || n.Amount != 1234 {
				t.Errorf("the genuine in-app notification %s: %+v %v", name, n, err)
			}
		}
		if main := paidNotification(t, e); main == "" {
			t.Fatal("no main app notification")
		}

		plain := setupMode(t, mode, sim.Config{})
		if n, err := plain.ch.VerifyNotification(ctx, nil, []byte(genuine)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED || n != nil {
			t.Errorf("an adapter without the in-app app: %+v %v, want EUNAUTHORIZED", n, err)
		}
	})
}

// In-app trades made under the main app, before the in-app app was configured, stay
// reachable once it is: the in-app app does not know them, so its adapter asks the main app,
// whose answers decide (queried Paid, refunded, their refunds queried; an unpaid one closed);
// "no such trade" is NotPaid only when neither app has the trade.
func TestInApp_TradesMadeUnderTheMainAppStayReachable(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupMode(t, mode, sim.Config{})
		ctx := context.Background()
		p := e.instruction(t, orderpay.MethodInApp, "OLD_1", 900, e.clock.Now().Add(time.Hour), "")
		e.instruction(t, orderpay.MethodInApp, "OLD_2", 900, e.clock.Now().Add(time.Hour), "")
		if e.entry(t, "OLD_1").AppID != e.keys.AppID {
			t.Fatal("the in-app trade of an adapter without an in-app app is not the main app's")
		}
		if _, err := e.payAs(p, buyer, sim.WalletPay); err != nil {
			t.Fatal(err)
		}

		keys, _ := simtest.Keys(t)
		withBoth := newChannel(t, keys, e.srv.URL+"/gateway.do", func(c *alipay.Config) {
			c.Clock = e.clock
			if mode == sim.AlipayModeCert {
				certMode(t, keys)(c)
			}
			withInApp(t, keys, mode)(c)
		})
		in := orderpay.ChannelFor(withBoth, orderpay.MethodInApp)
		if q := in.Query(ctx, "OLD_1"); q.Outcome != orderpay.OutcomePaid || q.Amount != 900 || !strings.Contains(q.Detail, "main app") {
			t.Fatalf("query: %+v, want the main app's Paid", q)
		}
		if r := in.Refund(ctx, orderpay.RefundRequest{OutTradeNo: "OLD_1", OutRefundNo: "OLD_1R1", Amount: 400}); r.Outcome != orderpay.OutcomeRefunded {
			t.Fatalf("refund: %+v", r)
		}
		if r := in.QueryRefund(ctx, "OLD_1", "OLD_1R1"); r.Outcome != orderpay.OutcomeRefunded || r.Amount != 400 {
			t.Fatalf("refund query: %+v", r)
		}
		if got := e.refunded(t, "OLD_1"); got != 400 {
			t.Fatalf("refunded %d, want 400", got)
		}
		if c := in.Close(ctx, "OLD_2"); c.Outcome != orderpay.OutcomeClosed {
			t.Fatalf("close: %+v", c)
		}
		if q := in.Query(ctx, "NEVER"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "ACQ.TRADE_NOT_EXIST") {
			t.Fatalf("a trade neither app has: %+v, want NotPaid", q)
		}
		if c := in.Close(ctx, "NEVER"); c.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("close of a trade neither app has: %+v, want NotPaid", c)
		}
		if r := in.Refund(ctx, orderpay.RefundRequest{OutTradeNo: "NEVER", OutRefundNo: "NEVER_R1", Amount: 1}); r.Outcome != orderpay.OutcomeRejected {
			t.Fatalf("refund of a trade neither app has: %+v, want Rejected", r)
		}
	})
}

// ForMethod gives the in-app app's adapter for in-app trades alone, and the adapter itself
// without an in-app app; Describe shows the in-app app's id, mode and fingerprints beside the
// main app's; each app's credentials check is healthy and names its app; PayMethods has
// every method ready.
func TestInApp_ForMethodDescribeAndCheck(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupInApp(t, mode)
		ctx := context.Background()
		in := e.inApp(t)
		for _, m := range orderpay.ChannelMethods[orderpay.ChannelAlipay] {
			if got, want := e.ch.ForMethod(m), map[bool]orderpay.Channel{true: in, false: e.ch}[m == orderpay.MethodInApp]; got != want {
				t.Errorf("ForMethod(%s) is not the adapter of its app", m)
			}
			if e.ch.PayMethods()[m] != "" {
				t.Errorf("%s is not ready: %q", m, e.ch.PayMethods()[m])
			}
		}
		if plain := setupMode(t, mode, sim.Config{}); plain.ch.ForMethod(orderpay.MethodInApp) != orderpay.Channel(plain.ch) {
			t.Error("without an in-app app, in-app trades do not go to the adapter itself")
		}

		a := e.keys.InApp
		pubDER, _ := x509.MarshalPKIXPublicKey(a.AlipayPublicKey)
		d := e.ch.Describe()
		wantMode := map[sim.AlipayMode]string{sim.AlipayModeKey: alipay.ModePublicKey, sim.AlipayModeCert: alipay.ModeCertificate}[mode]
		if d.AppID != e.keys.AppID || d.InApp == nil || d.InApp.AppID != a.AppID || d.InApp.Mode != wantMode ||
			d.InApp.PublicKeySHA256 != sha256HexOf(pubDER) || d.InApp.InApp != nil {
			t.Fatalf("Describe: %+v, in-app %+v", d, d.InApp)
		}
		if mode == sim.AlipayModeCert {
			block, _ := pem.Decode([]byte(a.AlipayCerts.AppCertPEM))
			if d.InApp.AppCertSHA256 != sha256HexOf(block.Bytes) || d.InApp.AppCertSHA256 == d.AppCertSHA256 {
				t.Fatalf("the in-app app's certificate fingerprint: %+v", d.InApp)
			}
		}
		for app, ch := range map[string]orderpay.Channel{e.keys.AppID: e.ch, a.AppID: in} {
			c := ch.(orderpay.CredentialChecker).CheckCredentials(ctx)
			if !c.Healthy() || !c.AnswerVerified || c.App != app || c.Mode != wantMode {
				t.Errorf("the check of app %s: %+v", app, c)
			}
		}
	})
}

// An in-app app that cannot be what the operator meant is refused by New: without an id, the
// main app's id, in neither or both modes, or with certificates that are not its key's.
func TestInApp_BadConfigIsRefused(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	for name, tc := range map[string]struct {
		change func(*alipay.AppKeys)
		want   string
	}{
		"no app id":         {func(k *alipay.AppKeys) { k.AppID = "" }, "InApp.AppID is required"},
		"the main app's id": {func(k *alipay.AppKeys) { k.AppID = keys.AppID }, "InApp.AppID is AppID"},
		"no private key":    {func(k *alipay.AppKeys) { k.AppPrivateKeyPEM = "" }, "in-app app " + keys.InApp.AppID + ": InApp.AppPrivateKeyPEM is required"},
		"no Alipay key":     {func(k *alipay.AppKeys) { k.AlipayPublicKeyPEM = "" }, "in-app app " + keys.InApp.AppID + ":"},
		"both modes":        {func(k *alipay.AppKeys) { k.AppCertPEM = keys.InApp.AlipayCerts.AppCertPEM }, "not both"},
		"the main app's cert": {func(k *alipay.AppKeys) {
			k.AlipayPublicKeyPEM, k.AppCertPEM, k.AlipayCertPEM, k.AlipayRootCertPEM = "", keys.AlipayCerts.AppCertPEM, keys.InApp.AlipayCerts.AlipayCertPEM, keys.AlipayCerts.RootPEM
		}, "InApp.AppCertPEM does not match InApp.AppPrivateKeyPEM"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := alipay.Config{AppID: keys.AppID, SellerID: keys.SellerID, AppPrivateKeyPEM: simtest.PEM(t, keys.AppPrivateKeyPEM),
				AlipayPublicKeyPEM: simtest.PEM(t, keys.AlipayPublicKeyPEM), GatewayURL: "http://127.0.0.1:1/gateway.do"}
			withInApp(t, keys, sim.AlipayModeKey)(&cfg)
			tc.change(cfg.InApp)
			if _, err := alipay.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

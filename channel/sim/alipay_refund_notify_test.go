package sim_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// paidWithNotifications precreates outTradeNo for 10.00 with recv as notify_url, pays it, and
// waits until the payment notification is acknowledged.
func (b *bundle) paidWithNotifications(t *testing.T, outTradeNo string, recv *notifyReceiver) {
	t.Helper()
	qr := b.precreate(t, outTradeNo, "10.00", b.clock.Now().Add(time.Hour), recv.srv.URL+"/notify")
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	if st := waitNotify(t, b.sim, outTradeNo); !st.Acked {
		t.Fatalf("payment notification: %+v", st)
	}
}

// setupMode is setup or setupCert, for an app in mode.
func setupMode(t *testing.T, mode sim.AlipayMode, cfg sim.Config) *bundle {
	t.Helper()
	if mode == sim.AlipayModeCert {
		return setupCert(t, cfg)
	}
	return setup(t, cfg)
}

// notificationOf returns the last body recv got whose field key is value.
func notificationOf(t *testing.T, recv *notifyReceiver, key, value string) url.Values {
	t.Helper()
	var found url.Values
	for _, body := range recv.received() {
		v, err := url.ParseQuery(body)
		if err != nil {
			t.Fatal(err)
		}
		if v.Get(key) == value {
			found = v
		}
	}
	if found == nil {
		t.Fatalf("no notification with %s=%s", key, value)
	}
	return found
}

var gmtRefundPattern = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`)

// A partial refund notifies the payment's notify_url with the trade still TRADE_SUCCESS, a
// refund of the rest with TRADE_CLOSED; each names its refund by out_biz_no and carries the
// total refunded so far (docs/channels.md §E), in both signing modes.
func TestRefundNotification_AfterAPartialAndAFullRefund(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, mode, sim.Config{TimeScale: fastTime})
			recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
			b.paidWithNotifications(t, "RN_1", recv)
			payment := notificationOf(t, recv, "out_trade_no", "RN_1")

			if rsp := b.alipayRefund(t, "RN_1", "RN_1_r1", "3.00"); rsp.FundChange != "Y" {
				t.Fatalf("partial refund: %+v", rsp)
			}
			if st := waitNotifyOf(t, b.sim, "RN_1", "RN_1_r1"); !st.Acked || len(st.Attempts) != 1 {
				t.Fatalf("partial refund notification: %+v", st)
			}
			if rsp := b.alipayRefund(t, "RN_1", "RN_1_r2", "7.00"); rsp.FundChange != "Y" {
				t.Fatalf("refund of the rest: %+v", rsp)
			}
			if st := waitNotifyOf(t, b.sim, "RN_1", "RN_1_r2"); !st.Acked {
				t.Fatalf("full refund notification: %+v", st)
			}

			partial := notificationOf(t, recv, "out_biz_no", "RN_1_r1")
			full := notificationOf(t, recv, "out_biz_no", "RN_1_r2")
			for name, tc := range map[string]struct {
				v                 url.Values
				status, refundFee string
				closed            bool
			}{
				"partial": {partial, "TRADE_SUCCESS", "3.00", false},
				"full":    {full, "TRADE_CLOSED", "10.00", true},
			} {
				v := tc.v
				if err := b.client.VerifySign(context.Background(), v); err != nil {
					t.Errorf("%s: does not verify with the SDK: %v", name, err)
				}
				for key, want := range map[string]string{
					"notify_type": "trade_status_sync", "out_trade_no": "RN_1", "trade_no": payment.Get("trade_no"),
					"trade_status": tc.status, "refund_fee": tc.refundFee, "total_amount": "10.00",
					"app_id": b.keys.AppID, "auth_app_id": b.keys.AppID, "seller_id": b.keys.SellerID,
					"gmt_payment": payment.Get("gmt_payment"),
				} {
					if v.Get(key) != want {
						t.Errorf("%s: %s = %q, want %q", name, key, v.Get(key), want)
					}
				}
				if !gmtRefundPattern.MatchString(v.Get("gmt_refund")) {
					t.Errorf("%s: gmt_refund %q, want yyyy-MM-dd HH:mm:ss.SSS", name, v.Get("gmt_refund"))
				}
				if (v.Get("gmt_close") != "") != tc.closed {
					t.Errorf("%s: gmt_close %q", name, v.Get("gmt_close"))
				}
				if v.Get("notify_id") == "" || v.Get("notify_id") == payment.Get("notify_id") {
					t.Errorf("%s: notify_id %q must be its own", name, v.Get("notify_id"))
				}
			}
			if partial.Get("notify_id") == full.Get("notify_id") {
				t.Error("two refunds share a notify_id")
			}
			if len(recv.received()) != 3 {
				t.Fatalf("receiver saw %d notifications, want the payment and two refunds", len(recv.received()))
			}
		})
	}
}

// A refund that takes time to settle notifies once it has settled by the simulated clock,
// not when it is accepted.
func TestRefundNotification_SentOnceTheRefundSettles(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: fastTime, RefundDelay: time.Minute})
	recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
	b.paidWithNotifications(t, "RS_1", recv)
	accepted := b.clock.Now()
	if rsp := b.alipayRefund(t, "RS_1", "RS_1_r1", "10.00"); rsp.FundChange != "N" {
		t.Fatalf("refund before it settles: %+v", rsp)
	}
	// At this time scale a minute of retry schedule passes in 60 µs: if the notification
	// did not wait for the clock, it would be out long before this.
	time.Sleep(20 * time.Millisecond)
	for _, st := range b.sim.NotifyStats() {
		if st.OutRefundNo == "RS_1_r1" && (st.Done() || len(st.Attempts) > 0) {
			t.Fatalf("notified before the refund settled: %+v", st)
		}
	}
	if n := len(recv.received()); n != 1 {
		t.Fatalf("receiver saw %d notifications before the refund settled, want only the payment", n)
	}

	b.clock.Advance(time.Minute)
	if st := waitNotifyOf(t, b.sim, "RS_1", "RS_1_r1"); !st.Acked {
		t.Fatalf("refund notification: %+v", st)
	}
	v := notificationOf(t, recv, "out_biz_no", "RS_1_r1")
	if want := accepted.Add(time.Minute).In(cst).Format("2006-01-02 15:04:05.000"); v.Get("gmt_refund") != want || v.Get("trade_status") != "TRADE_CLOSED" {
		t.Fatalf("gmt_refund %q trade_status %q, want %q TRADE_CLOSED", v.Get("gmt_refund"), v.Get("trade_status"), want)
	}
	if rsp := b.alipayRefundQuery(t, "RS_1", "RS_1_r1"); rsp.RefundStatus != "REFUND_SUCCESS" {
		t.Fatalf("the notification said settled, the refund query says %+v", rsp)
	}
}

// Refund notifications meet the same notification faults as payment notifications.
func TestRefundNotification_Faults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind  string
		limit int
		check func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values)
	}{
		{sim.FaultDrop, 2, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values) {
			// Schedule 1m, 1m, 1m: the third attempt, the first not dropped, is acked.
			if !st.Acked || len(st.Attempts) != 3 || !st.Attempts[0].Dropped || !st.Attempts[1].Dropped || st.Attempts[2].Dropped || len(bodies) != 1 {
				t.Fatalf("stats %+v; receiver saw %d", st, len(bodies))
			}
		}},
		{sim.FaultDuplicate, 1, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values) {
			if len(bodies) != 2 || bodies[0].Get("notify_id") != bodies[1].Get("notify_id") {
				t.Fatalf("receiver saw %v", bodies)
			}
		}},
		{sim.FaultForgeSignature, 1, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values) {
			badThenGenuineRefund(t, b, st, bodies, func(bad url.Values) bool { return b.client.VerifySign(context.Background(), bad) != nil })
		}},
		{sim.FaultTamperAmount, 1, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values) {
			badThenGenuineRefund(t, b, st, bodies, func(bad url.Values) bool {
				return b.client.VerifySign(context.Background(), bad) == nil && bad.Get("total_amount") == "9.99"
			})
		}},
		{sim.FaultWrongApp, 1, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values) {
			badThenGenuineRefund(t, b, st, bodies, func(bad url.Values) bool {
				return b.client.VerifySign(context.Background(), bad) == nil && bad.Get("app_id") != b.keys.AppID &&
					bad.Get("auth_app_id") == bad.Get("app_id")
			})
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{TimeScale: fastTime, AlipayNotifySchedule: []time.Duration{time.Minute, time.Minute, time.Minute}})
			recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
			b.paidWithNotifications(t, "RF_1", recv)
			// Faults from now on meet only the refund's notification.
			if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "alipay", Method: sim.MethodNotify, Kind: tc.kind, Limit: tc.limit}}}); err != nil {
				t.Fatal(err)
			}
			b.alipayRefund(t, "RF_1", "RF_1_r1", "4.00")
			st := waitNotifyOf(t, b.sim, "RF_1", "RF_1_r1")
			var bodies []url.Values
			for _, body := range recv.received()[1:] {
				v, _ := url.ParseQuery(body)
				bodies = append(bodies, v)
			}
			tc.check(t, b, st, bodies)
		})
	}
}

// badThenGenuineRefund checks that the receiver got the bad copy of the refund notification
// first, then the genuine one, which verifies unchanged.
func badThenGenuineRefund(t *testing.T, b *bundle, st sim.NotifyStats, bodies []url.Values, isBad func(url.Values) bool) {
	t.Helper()
	if len(bodies) != 2 || len(st.Bad) != 1 || len(st.Attempts) != 1 || !st.Acked {
		t.Fatalf("receiver saw %d bodies; stats %+v", len(bodies), st)
	}
	if bad := bodies[0]; bad.Get("out_biz_no") != "RF_1_r1" || !isBad(bad) {
		t.Fatalf("the first copy is not the expected bad one: %v", bad)
	}
	genuine := bodies[1]
	if err := b.client.VerifySign(context.Background(), genuine); err != nil || genuine.Get("total_amount") != "10.00" ||
		genuine.Get("app_id") != b.keys.AppID || genuine.Get("out_biz_no") != "RF_1_r1" || genuine.Get("refund_fee") != "4.00" {
		t.Fatalf("the genuine copy does not verify or was changed: %v %v", err, genuine)
	}
}

// What a certificate-mode notification does with alipay_cert_sn follows
// Config.AlipayNotifyCertSN; key-mode notifications never carry it.
func TestNotification_AlipayCertSNVariants(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	_, _, alipaySN := certSNs(t, keys)
	for _, tc := range []struct {
		mode       sim.AlipayMode
		variant    sim.AlipayNotifyCertSN
		carried    bool
		inSigned   bool // the signature covers alipay_cert_sn
		sdkAccepts bool // smartwalle's VerifySign, which leaves alipay_cert_sn out
	}{
		{sim.AlipayModeCert, sim.AlipayNotifyCertSNAbsent, false, false, true},
		{sim.AlipayModeCert, sim.AlipayNotifyCertSNUnsigned, true, false, true},
		{sim.AlipayModeCert, sim.AlipayNotifyCertSNSigned, true, true, false},
		{sim.AlipayModeKey, sim.AlipayNotifyCertSNSigned, false, false, true},
	} {
		t.Run(string(tc.mode)+"/"+string(tc.variant), func(t *testing.T) {
			t.Parallel()
			cfg := sim.Config{TimeScale: fastTime, AlipayNotifyCertSN: tc.variant}
			b := setupMode(t, tc.mode, cfg)
			recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
			b.paidWithNotifications(t, "CV_1", recv)
			v := notificationOf(t, recv, "out_trade_no", "CV_1")
			if got := v.Get("alipay_cert_sn"); (got != "") != tc.carried || (tc.carried && got != alipaySN) {
				t.Fatalf("alipay_cert_sn %q, want carried=%v (%s)", got, tc.carried, alipaySN)
			}
			if err := b.client.VerifySign(context.Background(), v); (err == nil) != tc.sdkAccepts {
				t.Fatalf("the SDK's verification: %v, want accepted=%v", err, tc.sdkAccepts)
			}
			exclude := []string{"sign", "sign_type"}
			if !tc.inSigned {
				exclude = append(exclude, "alipay_cert_sn")
			}
			content, err := sim.AlipaySignContent(v, exclude...)
			if err != nil {
				t.Fatal(err)
			}
			if err := sim.VerifySHA256RSA(b.keys.AlipayPublicKey, []byte(content), v.Get("sign")); err != nil {
				t.Fatalf("not signed over %v: %v", exclude, err)
			}
		})
	}
}

// A merchant sets up the SDK in certificate mode from the three files the console hands out
// (here, the simulator's key directory) and trades: precreate, query, refund, refund query,
// and the payment's and the refund's notifications, verified by the SDK.
func TestSDKCertMode_MerchantSetupFromTheConsoleFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, sim.Config{Keys: keys, AlipayMode: sim.AlipayModeCert, TimeScale: fastTime})
	b.keys = keys
	files := filepath.Join(dir, "alipay")
	client, err := alipay.New(keys.AppID, simtest.PEM(t, keys.AppPrivateKeyPEM), false,
		alipay.WithSandboxGateway(b.gatewayURL()), alipay.WithTimeLocation(cst))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.LoadAppCertPublicKeyFromFile(filepath.Join(files, "appCertPublicKey_"+keys.AppID+".crt")); err != nil {
		t.Fatal(err)
	}
	if err := client.LoadAliPayRootCertFromFile(filepath.Join(files, "alipayRootCert.crt")); err != nil {
		t.Fatal(err)
	}
	if err := client.LoadAlipayCertPublicKeyFromFile(filepath.Join(files, "alipayCertPublicKey_RSA2.crt")); err != nil {
		t.Fatal(err)
	}
	b.client = client
	recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})

	b.paidWithNotifications(t, "SC_1", recv)
	if rsp := b.query(t, "SC_1"); rsp.Code != alipay.CodeSuccess || rsp.TradeStatus != alipay.TradeStatusSuccess || rsp.TotalAmount != "10.00" {
		t.Fatalf("query: %+v", rsp)
	}
	if rsp := b.alipayRefund(t, "SC_1", "SC_1_r1", "2.50"); rsp.Code != alipay.CodeSuccess || rsp.FundChange != "Y" || rsp.RefundFee != "2.50" {
		t.Fatalf("refund: %+v", rsp)
	}
	if rsp := b.alipayRefundQuery(t, "SC_1", "SC_1_r1"); rsp.RefundStatus != "REFUND_SUCCESS" || rsp.RefundAmount != "2.50" {
		t.Fatalf("refund query: %+v", rsp)
	}
	waitNotifyOf(t, b.sim, "SC_1", "SC_1_r1")

	paid, err := client.DecodeNotification(context.Background(), notificationOf(t, recv, "out_trade_no", "SC_1"))
	if err != nil || paid.TradeStatus != alipay.TradeStatusSuccess || paid.TotalAmount != "10.00" || paid.AuthAppId != keys.AppID {
		t.Fatalf("payment notification: %+v %v", paid, err)
	}
	refund, err := client.DecodeNotification(context.Background(), notificationOf(t, recv, "out_biz_no", "SC_1_r1"))
	if err != nil || refund.TradeStatus != alipay.TradeStatusSuccess || refund.RefundFee != "2.50" || refund.OutBizNo != "SC_1_r1" {
		t.Fatalf("refund notification: %+v %v", refund, err)
	}
}

package alipay_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// delivery is one notification the merchant received, with what the adapter made of it.
type delivery struct {
	body string
	n    *orderpay.Notification
	err  error
}

// wait returns the first n notifications the merchant received, failing the test if they do
// not arrive.
func (m *merchant) wait(t *testing.T, n int) []delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		if len(m.bodies) >= n {
			out := make([]delivery, n)
			for i := range out {
				out[i] = delivery{m.bodies[i], m.verified[i], m.errs[i]}
			}
			m.mu.Unlock()
			return out
		}
		m.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("received fewer than %d notifications", n)
	return nil
}

// settledNotification waits until the channel is done with the notification of refund
// outRefundNo and returns its delivery record.
func settledNotification(t *testing.T, s *sim.Simulator, outRefundNo string) sim.NotifyStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, st := range s.NotifyStats() {
			if st.OutRefundNo == outRefundNo && st.Done() {
				return st
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("notification of refund %s not settled in time", outRefundNo)
	return sim.NotifyStats{}
}

// paidWithMerchant precreates outTradeNo for amount fen with m as notify_url, pays it, and
// waits for the payment notification.
func (e *env) paidWithMerchant(t *testing.T, m *merchant, outTradeNo string, amount int64) {
	t.Helper()
	pre := e.precreate(t, outTradeNo, amount, e.clock.Now().Add(time.Hour), m.srv.URL+"/notify")
	if _, err := e.sim.Pay(context.Background(), pre.QRCode); err != nil {
		t.Fatal(err)
	}
	if d := m.wait(t, 1)[0]; d.err != nil || d.n.Outcome != orderpay.OutcomePaid {
		t.Fatalf("payment notification: %+v %v", d.n, d.err)
	}
}

func (e *env) refund(t *testing.T, outTradeNo, outRefundNo string, amount int64) {
	t.Helper()
	r := e.ch.Refund(context.Background(), orderpay.RefundRequest{OutTradeNo: outTradeNo, OutRefundNo: outRefundNo, Amount: amount})
	if r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("refund %s: %+v", outRefundNo, r)
	}
}

// The refund notifications after a partial and after a full refund verify, in both modes, as
// refunds of the trade: the first says TRADE_SUCCESS and the second TRADE_CLOSED, and neither
// is taken as a payment or as a trade closed unpaid.
func TestVerifyNotification_RefundsAfterAPartialAndAFullRefund(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := setupMode(t, mode, sim.Config{})
			m := newMerchant(t, e.ch)
			e.paidWithMerchant(t, m, "RN_1", 1000)
			e.refund(t, "RN_1", "RN_1_r1", 300)
			m.wait(t, 2)
			e.refund(t, "RN_1", "RN_1_r2", 700)
			got := m.wait(t, 3)
			tradeNo := got[0].n.TradeNo

			for i, want := range []struct {
				outRefundNo, status, refundFee string
			}{
				{"RN_1_r1", "TRADE_SUCCESS", "refund_fee=3.00 (300 fen"},
				{"RN_1_r2", "TRADE_CLOSED", "refund_fee=10.00 (1000 fen"},
			} {
				d := got[i+1]
				v, _ := url.ParseQuery(d.body)
				if v.Get("trade_status") != want.status {
					t.Fatalf("%s: trade_status %q, want %q", want.outRefundNo, v.Get("trade_status"), want.status)
				}
				if d.err != nil {
					t.Fatalf("%s: refused: %v", want.outRefundNo, d.err)
				}
				n := d.n
				if n.Outcome != orderpay.OutcomeRefunded || n.OutRefundNo != want.outRefundNo || n.OutTradeNo != "RN_1" ||
					n.TradeNo != tradeNo || n.Amount != 1000 || n.RefundAmount != 0 || n.NotifyID == "" || n.Raw != d.body ||
					!strings.HasPrefix(n.Detail, want.refundFee) {
					t.Errorf("%s: %+v", want.outRefundNo, n)
				}
			}
		})
	}
}

// A notification carrying any refund field is never read as a payment, nor as a trade
// closed unpaid, whatever its trade_status says; without out_biz_no it names no refund and
// is Unknown.
func TestVerifyNotification_RefundFieldsAreNeverAPaymentOrAClose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	genuine := paidNotification(t, e)
	resign := func(change func(url.Values)) []byte {
		v, _ := url.ParseQuery(genuine)
		change(v)
		sig, err := sim.SignAlipayParams(e.keys.AlipayPrivateKey, v)
		if err != nil {
			t.Fatal(err)
		}
		v.Set("sign", sig)
		return []byte(v.Encode())
	}
	for _, tc := range []struct {
		name   string
		change func(url.Values)
		want   orderpay.Outcome
	}{
		{"TRADE_SUCCESS with refund_fee only", func(v url.Values) { v.Set("refund_fee", "1.00") }, orderpay.OutcomeUnknown},
		{"TRADE_CLOSED with refund_fee only", func(v url.Values) {
			v.Set("trade_status", "TRADE_CLOSED")
			v.Set("refund_fee", "12.34")
		}, orderpay.OutcomeUnknown},
		{"TRADE_CLOSED with gmt_refund only", func(v url.Values) {
			v.Set("trade_status", "TRADE_CLOSED")
			v.Set("gmt_refund", "2025-03-14 10:00:00.123")
		}, orderpay.OutcomeUnknown},
		{"TRADE_SUCCESS with out_biz_no only", func(v url.Values) { v.Set("out_biz_no", "R_9") }, orderpay.OutcomeUnknown},
		{"TRADE_FINISHED refunded", func(v url.Values) {
			v.Set("trade_status", "TRADE_FINISHED")
			v.Set("out_biz_no", "R_9")
			v.Set("refund_fee", "1.00")
		}, orderpay.OutcomeRefunded},
		{"TRADE_CLOSED refunded in full", func(v url.Values) {
			v.Set("trade_status", "TRADE_CLOSED")
			v.Set("out_biz_no", "R_9")
			v.Set("refund_fee", "12.34")
		}, orderpay.OutcomeRefunded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := e.ch.VerifyNotification(context.Background(), nil, resign(tc.change))
			if err != nil || n.Outcome != tc.want {
				t.Fatalf("got %+v %v, want %s", n, err, tc.want)
			}
		})
	}
	n, err := e.ch.VerifyNotification(context.Background(), nil, resign(func(v url.Values) {
		v.Set("out_biz_no", "R_9")
		v.Set("refund_fee", "1.005")
	}))
	if orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("unreadable refund_fee: %+v %v, want EINVALID", n, err)
	}
}

// Bad copies of a refund notification: forged and foreign ones are refused; a genuinely
// signed copy for another amount passes with that amount, which the payment center's
// amount check refuses, as for payments; a changed byte breaks the signature. A dropped
// notification is resent on the schedule until the merchant has it.
func TestVerifyNotification_RefundNotificationFaults(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		for _, kind := range []string{sim.FaultForgeSignature, sim.FaultWrongApp, sim.FaultTamperAmount, sim.FaultDrop} {
			t.Run(string(mode)+"/"+kind, func(t *testing.T) {
				t.Parallel()
				e := setupMode(t, mode, sim.Config{AlipayNotifySchedule: []time.Duration{time.Minute, time.Minute}})
				m := newMerchant(t, e.ch)
				e.paidWithMerchant(t, m, "RB_1", 1000)
				limit := 1
				if kind == sim.FaultDrop {
					limit = 2
				}
				if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: kind, Limit: limit}}}); err != nil {
					t.Fatal(err)
				}
				e.refund(t, "RB_1", "RB_1_r1", 400)

				if kind == sim.FaultDrop {
					d := m.wait(t, 2)[1]
					if d.err != nil || d.n.Outcome != orderpay.OutcomeRefunded || d.n.OutRefundNo != "RB_1_r1" {
						t.Fatalf("the resent refund notification: %+v %v", d.n, d.err)
					}
					// The merchant has it before the channel has recorded the answer: wait
					// for the record.
					st := settledNotification(t, e.sim, "RB_1_r1")
					if !st.Acked || len(st.Attempts) != 3 || !st.Attempts[0].Dropped || !st.Attempts[1].Dropped {
						t.Fatalf("delivery %+v, want two dropped attempts, then the third on the schedule acknowledged", st)
					}
					return
				}
				got := m.wait(t, 3)
				bad, genuine := got[1], got[2]
				switch kind {
				case sim.FaultTamperAmount:
					if bad.err != nil || bad.n.Amount == 1000 || bad.n.Outcome != orderpay.OutcomeRefunded {
						t.Fatalf("tampered amount: %+v %v; want it to verify with the other amount", bad.n, bad.err)
					}
				default:
					if orderpay.ErrorCode(bad.err) != orderpay.EUNAUTHORIZED {
						t.Fatalf("%s: %+v %v; want EUNAUTHORIZED", kind, bad.n, bad.err)
					}
				}
				if genuine.err != nil || genuine.n.Outcome != orderpay.OutcomeRefunded || genuine.n.Amount != 1000 || genuine.n.OutRefundNo != "RB_1_r1" {
					t.Fatalf("the genuine refund notification: %+v %v", genuine.n, genuine.err)
				}
				v, _ := url.ParseQuery(genuine.body)
				v.Set("refund_fee", "0.01") // signature kept
				if _, err := e.ch.VerifyNotification(context.Background(), nil, []byte(v.Encode())); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
					t.Fatalf("refund_fee changed after signing: %v, want EUNAUTHORIZED", err)
				}
			})
		}
	}
}

// auth_app_id, when present, must be our app: a genuinely signed notification for another
// one is refused. Without it the notification is judged by app_id alone.
func TestVerifyNotification_AuthAppIDMustBeOurs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	genuine := paidNotification(t, e)
	v, _ := url.ParseQuery(genuine)
	if v.Get("auth_app_id") != e.keys.AppID {
		t.Fatalf("the simulator's notification has auth_app_id %q, want the app id", v.Get("auth_app_id"))
	}
	resign := func(change func(url.Values)) []byte {
		v, _ := url.ParseQuery(genuine)
		change(v)
		sig, err := sim.SignAlipayParams(e.keys.AlipayPrivateKey, v)
		if err != nil {
			t.Fatal(err)
		}
		v.Set("sign", sig)
		return []byte(v.Encode())
	}
	n, err := e.ch.VerifyNotification(context.Background(), nil, resign(func(v url.Values) { v.Set("auth_app_id", "2021000000000001") }))
	if orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED || n != nil {
		t.Fatalf("another auth_app_id: %+v %v, want EUNAUTHORIZED", n, err)
	}
	n, err = e.ch.VerifyNotification(context.Background(), nil, resign(func(v url.Values) { v.Del("auth_app_id") }))
	if err != nil || n.Outcome != orderpay.OutcomePaid {
		t.Fatalf("without auth_app_id: %+v %v, want Paid", n, err)
	}
}

// In certificate mode the adapter verifies a notification whatever it does with
// alipay_cert_sn (docs/channels.md §D: unverified), and still refuses a forged one.
func TestVerifyNotification_CertificateModeAlipayCertSNVariants(t *testing.T) {
	t.Parallel()
	_, forger := simtest.Keys(t)
	for _, variant := range []sim.AlipayNotifyCertSN{sim.AlipayNotifyCertSNAbsent, sim.AlipayNotifyCertSNUnsigned, sim.AlipayNotifyCertSNSigned} {
		t.Run(string(variant), func(t *testing.T) {
			t.Parallel()
			e := setupCert(t, sim.Config{AlipayNotifyCertSN: variant})
			body := paidNotification(t, e)
			v, _ := url.ParseQuery(body)
			if (v.Get("alipay_cert_sn") != "") != (variant != sim.AlipayNotifyCertSNAbsent) {
				t.Fatalf("alipay_cert_sn %q in variant %s", v.Get("alipay_cert_sn"), variant)
			}
			if n, err := e.ch.VerifyNotification(context.Background(), nil, []byte(body)); err != nil || n.Outcome != orderpay.OutcomePaid {
				t.Fatalf("genuine: %+v %v", n, err)
			}
			// Forged the same way, with a key that is not Alipay's.
			exclude := []string{"sign", "sign_type"}
			if variant == sim.AlipayNotifyCertSNUnsigned {
				exclude = append(exclude, "alipay_cert_sn")
			}
			v.Set("total_amount", "0.01")
			content, _ := sim.AlipaySignContent(v, exclude...)
			sig, err := sim.SignSHA256RSA(forger, []byte(content))
			if err != nil {
				t.Fatal(err)
			}
			v.Set("sign", sig)
			if _, err := e.ch.VerifyNotification(context.Background(), nil, []byte(v.Encode())); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
				t.Fatalf("forged: %v, want EUNAUTHORIZED", err)
			}
		})
	}
}

package wechat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
)

// refundEnv is an adapter whose refunds name a merchant endpoint as notify_url, in the
// given mode. The endpoint verifies with the same keys and mode.
func refundEnv(t *testing.T, certificates bool, simMods ...func(*sim.Config)) (*env, *merchant, *wechat.Channel) {
	t.Helper()
	var e *env
	var mode func(*wechat.Config)
	if certificates {
		e = certSetup(t, func(c *sim.Config) {
			for _, m := range simMods {
				m(c)
			}
		})
		mode = certificateMode
	} else {
		e = setup(t, simMods...)
		mode = func(*wechat.Config) {}
	}
	m := newMerchant(t, e.ch)
	refunding := newChannel(t, e.keys, e.srv.URL, mode, func(c *wechat.Config) {
		c.Clock = e.clock
		c.RefundNotifyURL = m.srv.URL + "/notify/wechat"
	})
	return e, m, refunding
}

// Each way a refund ends reaches the merchant as a verified refund notification:
// REFUND.SUCCESS as Refunded, REFUND.ABNORMAL and REFUND.CLOSED as RefundAbnormal saying which,
// with the refund's and the trade's numbers and amounts; the adapter's Ack stops the
// resending. In both verification modes.
func TestRefundNotifications_SuccessAbnormalAndClosedVerifiedAsRefunds(t *testing.T) {
	t.Parallel()
	for _, certificates := range []bool{false, true} {
		t.Run(map[bool]string{false: "public_key", true: "platform_certificate"}[certificates], func(t *testing.T) {
			t.Parallel()
			e, m, refunding := refundEnv(t, certificates)
			ctx := context.Background()
			no := e.paid(t, 1000)
			if err := e.sim.EndWechatRefund(no+"R2", sim.WechatRefundAbnormal); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.EndWechatRefund(no+"R3", sim.WechatRefundClosed); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				outRefundNo string
				amount      int64
				outcome     orderpay.Outcome
				detail      string
			}{
				{no + "R1", 300, orderpay.OutcomeRefunded, "REFUND.SUCCESS"},
				{no + "R2", 200, orderpay.OutcomeRefundAbnormal, "REFUND.ABNORMAL"},
				{no + "R3", 100, orderpay.OutcomeRefundAbnormal, "REFUND.CLOSED"},
			}
			for _, tc := range cases {
				r := refunding.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: tc.outRefundNo, Amount: tc.amount, Total: 1000, Reason: "退货"})
				if r.Outcome != tc.outcome {
					t.Fatalf("refund %s: %+v, want %s", tc.outRefundNo, r, tc.outcome)
				}
			}
			_, ns, errs := m.wait(t, 3)
			got := map[string]*orderpay.Notification{}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("refund notification %d refused: %v", i, err)
				}
				got[ns[i].OutRefundNo] = ns[i]
			}
			transactionID := e.ledger(t, no).TradeNo
			for _, tc := range cases {
				n := got[tc.outRefundNo]
				if n == nil || n.Outcome != tc.outcome || !strings.HasPrefix(n.Detail, tc.detail) || n.OutTradeNo != no || n.TradeNo != transactionID ||
					n.Amount != 1000 || n.RefundAmount != tc.amount || n.Channel != orderpay.ChannelWechat || n.NotifyID == "" ||
					!strings.Contains(n.Raw, `"out_refund_no":"`+tc.outRefundNo+`"`) || !n.PaidAt.IsZero() {
					t.Fatalf("notification of %s: %+v", tc.outRefundNo, n)
				}
			}
			waitUntil(t, func() bool {
				for _, st := range e.sim.NotifyStats() {
					if !st.Done() {
						return false
					}
				}
				return true
			})
			for _, st := range e.sim.NotifyStats() {
				if !st.Acked || len(st.Attempts) != 1 || st.Attempts[0].Status != http.StatusNoContent {
					t.Fatalf("delivery of %s: %+v, want acknowledged by the adapter's Ack at once", st.OutRefundNo, st)
				}
			}
			// A payment notification is still read as a payment.
			pm := newMerchant(t, e.ch)
			pre := e.accepted(t, tradeNo("PN"), 700, pm.srv.URL)
			if _, err := e.sim.Pay(ctx, pre.QRCode); err != nil {
				t.Fatal(err)
			}
			if _, ns, errs := pm.wait(t, 1); errs[0] != nil || ns[0].Outcome != orderpay.OutcomePaid || ns[0].OutRefundNo != "" || ns[0].Amount != 700 {
				t.Fatalf("payment notification: %+v %v", ns[0], errs[0])
			}
		})
	}
}

// The simulator's bad copies of a refund notification: a forged signature and another
// merchant's are refused; a correctly signed copy for another refund amount verifies with
// that amount, for the payment center's amount check (as for payments). A genuine one with
// a byte changed on the way is refused.
func TestRefundNotifications_ForgedForeignOrChangedAreRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{sim.FaultForgeSignature, sim.FaultWrongApp, sim.FaultTamperAmount} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e, m, refunding := refundEnv(t, kind == sim.FaultForgeSignature, func(c *sim.Config) {
				c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodNotify, Kind: kind, Limit: 1}}}
			})
			ctx := context.Background()
			no := e.paid(t, 1000) // paid without notify_url: the fault is left for the refund
			if r := refunding.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: no + "R1", Amount: 400, Total: 1000}); r.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("refund: %+v", r)
			}
			got, ns, errs := m.wait(t, 2)
			switch kind {
			case sim.FaultTamperAmount:
				if errs[0] != nil || ns[0].RefundAmount != 399 || ns[0].OutRefundNo != no+"R1" {
					t.Fatalf("tampered copy: %+v %v, want it verified with 399", ns[0], errs[0])
				}
			default:
				if orderpay.ErrorCode(errs[0]) != orderpay.EUNAUTHORIZED {
					t.Fatalf("%s copy: %+v %v, want EUNAUTHORIZED", kind, ns[0], errs[0])
				}
			}
			if errs[1] != nil || ns[1].RefundAmount != 400 || ns[1].Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("genuine copy: %+v %v", ns[1], errs[1])
			}
			changed := []byte(strings.Replace(string(got[1].body), `"summary":"退款成功"`, `"summary":"退款关闭"`, 1))
			if _, err := e.ch.VerifyNotification(ctx, got[1].header, changed); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
				t.Fatalf("a changed body: %v, want EUNAUTHORIZED", err)
			}
		})
	}
}

// Refund notifications that are genuinely signed but say something that cannot be a
// refund's end are refused: a status that is not final, an event that disagrees with the
// status, no amounts, another merchant.
func TestRefundNotifications_MalformedAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	wk := &e.keys.Wechat
	good := map[string]any{
		"mchid": wk.MchID, "out_trade_no": "RN_000001", "transaction_id": "4200000000202503140000000001",
		"out_refund_no": "RN_000001R1", "refund_id": "50000000000000000000000000001", "refund_status": "SUCCESS",
		"success_time": "2025-03-14T10:00:00+08:00", "user_received_account": "支付用户零钱",
		"amount": map[string]any{"total": 1000, "refund": 300, "payer_total": 1000, "payer_refund": 300},
	}
	build := func(event string, change func(map[string]any)) (http.Header, []byte) {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		change(m)
		plain, _ := json.Marshal(m)
		var env map[string]any
		_ = json.Unmarshal(notification(t, encryptResource(t, wk.APIv3Key, plain, "refund")), &env)
		env["event_type"] = event
		body, _ := json.Marshal(env)
		h := signHeaders(t, wk.PlatformPrivateKey, wk.PublicKeyID, time.Now(), body)
		return h, body
	}
	h, body := build("REFUND.SUCCESS", func(map[string]any) {})
	if n, err := e.ch.VerifyNotification(context.Background(), h, body); err != nil || n.Outcome != orderpay.OutcomeRefunded || n.RefundAmount != 300 {
		t.Fatalf("the well-formed one: %+v %v", n, err)
	}
	for name, tc := range map[string]struct {
		event  string
		change func(map[string]any)
		want   string
	}{
		"PROCESSING is no end":      {"REFUND.PROCESSING", func(m map[string]any) { m["refund_status"] = "PROCESSING" }, orderpay.EINVALID},
		"event and status disagree": {"REFUND.SUCCESS", func(m map[string]any) { m["refund_status"] = "CLOSED" }, orderpay.EINVALID},
		"no out_refund_no":          {"REFUND.SUCCESS", func(m map[string]any) { delete(m, "out_refund_no") }, orderpay.EINVALID},
		"no amount":                 {"REFUND.SUCCESS", func(m map[string]any) { delete(m, "amount") }, orderpay.EINVALID},
		"another merchant":          {"REFUND.SUCCESS", func(m map[string]any) { m["mchid"] = "1900000109" }, orderpay.EUNAUTHORIZED},
	} {
		h, body := build(tc.event, tc.change)
		if n, err := e.ch.VerifyNotification(context.Background(), h, body); orderpay.ErrorCode(err) != tc.want || n != nil {
			t.Errorf("%s: %+v %v, want %s", name, n, err, tc.want)
		}
	}
}

// A refund notification the merchant never acknowledged (dropped on the way) is sent again
// on WeChat's schedule until the adapter's Ack.
func TestRefundNotifications_DroppedAreRetried(t *testing.T) {
	t.Parallel()
	e, m, refunding := refundEnv(t, false, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodNotify, Kind: sim.FaultDrop, Limit: 2}}}
	})
	no := e.paid(t, 800)
	if r := refunding.Refund(context.Background(), orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: no + "R1", Amount: 800, Total: 800}); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("refund: %+v", r)
	}
	if _, ns, errs := m.wait(t, 1); errs[0] != nil || ns[0].OutRefundNo != no+"R1" {
		t.Fatalf("the retried notification: %+v %v", ns[0], errs[0])
	}
	waitUntil(t, func() bool { st := e.sim.NotifyStats(); return len(st) == 1 && st[0].Done() })
	st := e.sim.NotifyStats()[0]
	if !st.Acked || len(st.Attempts) != 3 || !st.Attempts[0].Dropped || !st.Attempts[1].Dropped || !st.Attempts[2].Acked || st.OutRefundNo != no+"R1" {
		t.Fatalf("delivery %+v, want two dropped attempts, then acknowledged", st)
	}
}

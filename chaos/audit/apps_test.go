package audit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"orderpay"
)

// withApps adds two business-app payments to the consistent world:
//
//	AP1  PAP1  3000 fen  SUCCESS: alipay TA1, 1000 fen refunded by its app
//	AP2  PAP2  1500 fen  CLOSED at its deadline: wechat TA2 closed unpaid
func withApps(w *world) {
	ctx := context.Background()
	deadline := t0.Add(30 * time.Minute)
	appTx := func(fn func(tx orderpay.AppTx) error) {
		w.t.Helper()
		if err := w.s.InAppTx(ctx, fn); err != nil {
			w.t.Fatal(err)
		}
	}
	appTx(func(tx orderpay.AppTx) error {
		if err := tx.CreateApp(ctx, &orderpay.App{ID: "app_1", Name: "top-ups", WebhookURLs: []string{}, WebhookSecret: "whsec_x",
			Channels: []string{"alipay", "wechat"}, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		for _, p := range []struct {
			key    string
			amount int64
		}{{"AP1", 3000}, {"AP2", 1500}} {
			if err := tx.CreateAppPayment(ctx, &orderpay.AppPayment{PaymentNo: "P" + p.key, OrderKey: p.key, AppID: "app_1", MerchantOrderNo: "M-" + p.key,
				Amount: p.amount, Subject: "top-up", Channel: "alipay", ExpiresAt: deadline, Status: orderpay.AppPaymentOpen, RequestHash: "h",
				CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	move := func(paymentNo string, to orderpay.AppPaymentStatus, event orderpay.AppPaymentEvent, subject, reason string) {
		appTx(func(tx orderpay.AppTx) error {
			if err := tx.TransitionAppPayment(ctx, orderpay.AppPaymentChange{PaymentNo: paymentNo, From: orderpay.AppPaymentOpen, To: to,
				Event: event, At: t0, Actor: "test"}, reason); err != nil {
				return err
			}
			return w.enqueue(ctx, tx, subject, paymentNo, orderpay.AppPaymentPayload{AppID: "app_1", PaymentNo: paymentNo, Status: to})
		})
	}

	w.startPayment("AP1", "PAP1", 3000, deadline, "TA1", orderpay.ChannelAlipay, 1)
	w.paid("PAP1", "TA1", true)
	move("PAP1", orderpay.AppPaymentSuccess, orderpay.AppPaymentEventSucceed, orderpay.SubjectAppPaymentSucceeded, "")
	appTx(func(tx orderpay.AppTx) error { return tx.ReserveAppRefund(ctx, "PAP1", 1000, t0) })
	w.refund("ARA1", "TA1", "PAP1", orderpay.ChannelAlipay, 1000, orderpay.RefundReasonApp, true)
	w.trade(orderpay.ChannelAlipay, "TA1", "TRADE_SUCCESS", 3000, 1000, true, "ARA1")

	w.startPayment("AP2", "PAP2", 1500, deadline, "TA2", orderpay.ChannelWechat, 1)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "TA2", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderClosed, Event: orderpay.ChannelOrderEventClose, At: t0, Actor: "payment-center"}); err != nil {
			return err
		}
		return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "PAP2", From: orderpay.PaymentPaying, To: orderpay.PaymentClosed,
			Event: orderpay.PaymentEventClose, At: t0, Actor: "payment-center"})
	})
	move("PAP2", orderpay.AppPaymentClosed, orderpay.AppPaymentEventClose, orderpay.SubjectAppPaymentClosed, "expired")
	w.trade(orderpay.ChannelWechat, "TA2", "CLOSED", 1500, 0, false)
}

// App payments are audited like orders: a consistent run with them passes, and a planted
// failure of one is named by the invariant it breaks, with the app payment's order key.
func TestAuditCoversAppPayments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(w *world)
		want  []string // invariants that must name AP1 or AP2
	}{
		{"consistent", func(*world) {}, nil},
		{"I1/I3: paid at the channel, the app payment left OPEN", func(w *world) {
			w.exec(`UPDATE app_payments SET status = 'OPEN' WHERE payment_no = ?`, "PAP1")
		}, []string{"I1", "I3", "I6", "I7"}},
		{"I2: SUCCESS with nothing captured", func(w *world) {
			w.exec(`UPDATE app_payments SET status = 'SUCCESS' WHERE payment_no = ?`, "PAP2")
		}, []string{"I2", "I3", "I7"}},
		{"I3: the app's refund not counted", func(w *world) {
			w.exec(`UPDATE payments SET refunded = 0 WHERE payment_no = ?`, "PAP1")
		}, []string{"I3"}},
		{"I6: an app payment open past its deadline", func(w *world) {
			w.exec(`UPDATE app_payments SET status = 'OPEN' WHERE payment_no = ?`, "PAP2")
		}, []string{"I6", "I7"}},
		{"I7: the app never told", func(w *world) {
			w.dropEvent(orderpay.SubjectAppPaymentSucceeded + ":PAP1")
		}, []string{"I7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, eng := range engines {
				w := newWorld(t, eng.open, withApps)
				c.plant(w)
				res := w.audit()
				got := map[string]bool{}
				for _, v := range res.Violations {
					if v.OrderNo == "AP1" || v.OrderNo == "AP2" {
						got[v.Invariant] = true
					} else {
						t.Errorf("%s: a violation of no app payment: %s", eng.name, v)
					}
				}
				for _, inv := range c.want {
					if !got[inv] {
						t.Errorf("%s: no %s naming the app payment; violations: %v", eng.name, inv, res.Violations)
					}
				}
				if len(c.want) == 0 && !res.Passed() {
					t.Errorf("%s: a consistent run with app payments: %v", eng.name, res.Violations)
				}
				for inv := range got {
					if !slices.Contains(c.want, inv) {
						t.Errorf("%s: unexpected %s: %v", eng.name, inv, res.Violations)
					}
				}
				if res.AppPayments != 2 {
					t.Errorf("%s: %d app payments", eng.name, res.AppPayments)
				}
			}
		})
	}
}

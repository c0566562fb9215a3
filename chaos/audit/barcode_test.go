package audit_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos/audit"
)

// withBarcode adds a till's barcode payments to the consistent world, each ended as the
// payment center ends them:
//
//	OB1  TEA×1  1000 fen  alipay TB1: the buyer confirmed, PAID; the till told PAID
//	OB2  TEA×1  1000 fen  wechat TB2: the balance short, FAILED (PAYERROR at WeChat); told REFUSED
//	OB3  CUP×1  2500 fen  alipay TB3: the buyer walked away, cancelled (TRADE_CLOSED); told CANCELLED
//	OB4  TEA×1  1000 fen  alipay TB4: paid as the cancel came, recorded paid and refunded by the
//	                      cancel (barcode_reversed); told CANCELLED
//	OB5  TEA×1  1000 fen  wechat TB5: told UNKNOWN, paid and applied by the safety net; never asked again
//	AB6  PAB6   1250 fen  walk-in sale, wechat TB6: PAID, its app payment SUCCESS; told PAID
//
// The orders the till did not get paid stay PENDING_PAYMENT (their deadline is ahead).
func withBarcode(w *world) {
	ctx := context.Background()
	appTx := func(fn func(tx orderpay.AppTx) error) {
		w.t.Helper()
		if err := w.s.InAppTx(ctx, fn); err != nil {
			w.t.Fatal(err)
		}
	}
	appTx(func(tx orderpay.AppTx) error {
		return tx.CreateApp(ctx, &orderpay.App{ID: "till_1", Name: "counter", WebhookURLs: []string{}, WebhookSecret: "whsec_t",
			Channels: []string{"alipay", "wechat"}, CreatedAt: t0, UpdatedAt: t0})
	})

	w.createOrder("OB1", longTime, "TEA", 1)
	w.barcodeSale("OB1", "PB1", "TB1", orderpay.ChannelAlipay, 1000, "")
	w.paid("PB1", "TB1", true)
	w.orderPaid("OB1", "PB1")
	w.answer("TB1", orderpay.BarcodePaid, "")
	w.trade(orderpay.ChannelAlipay, "TB1", "TRADE_SUCCESS", 1000, 0, true)

	w.createOrder("OB2", longTime, "TEA", 1)
	w.barcodeSale("OB2", "PB2", "TB2", orderpay.ChannelWechat, 1000, "")
	w.endAttempt("TB2", orderpay.ChannelOrderPaying, orderpay.ChannelOrderFailed, orderpay.ChannelOrderEventFail)
	w.answer("TB2", orderpay.BarcodeRefused, orderpay.RefusalBalance)
	w.trade(orderpay.ChannelWechat, "TB2", "PAYERROR", 1000, 0, false)

	w.createOrder("OB3", longTime, "CUP", 1)
	w.barcodeSale("OB3", "PB3", "TB3", orderpay.ChannelAlipay, 2500, "")
	w.endAttempt("TB3", orderpay.ChannelOrderPaying, orderpay.ChannelOrderClosed, orderpay.ChannelOrderEventClose)
	w.answer("TB3", orderpay.BarcodeCancelled, "")
	w.trade(orderpay.ChannelAlipay, "TB3", "TRADE_CLOSED", 2500, 0, false)

	w.createOrder("OB4", longTime, "TEA", 1)
	w.barcodeSale("OB4", "PB4", "TB4", orderpay.ChannelAlipay, 1000, "")
	w.endAttempt("TB4", orderpay.ChannelOrderPaying, orderpay.ChannelOrderClosed, orderpay.ChannelOrderEventClose)
	w.endAttempt("TB4", orderpay.ChannelOrderClosed, orderpay.ChannelOrderSuccess, orderpay.ChannelOrderEventSucceed)
	w.refund("RB4", "TB4", "PB4", orderpay.ChannelAlipay, 1000, orderpay.RefundReasonReversed, false)
	w.answer("TB4", orderpay.BarcodeCancelled, "")
	w.trade(orderpay.ChannelAlipay, "TB4", "TRADE_CLOSED", 1000, 1000, true, "RB4")

	w.createOrder("OB5", longTime, "TEA", 1)
	w.barcodeSale("OB5", "PB5", "TB5", orderpay.ChannelWechat, 1000, "")
	w.paid("PB5", "TB5", true)
	w.orderPaid("OB5", "PB5")
	w.trade(orderpay.ChannelWechat, "TB5", "SUCCESS", 1000, 0, true)

	appTx(func(tx orderpay.AppTx) error {
		return tx.CreateAppPayment(ctx, &orderpay.AppPayment{PaymentNo: "PAB6", OrderKey: "AB6", AppID: "till_1", MerchantOrderNo: "pos-k6",
			Amount: 1250, Subject: "Counter sale", Channel: "wechat", ExpiresAt: t0.Add(15 * time.Minute), Status: orderpay.AppPaymentOpen,
			RequestHash: "h", CreatedAt: t0, UpdatedAt: t0})
	})
	w.barcodeSale("AB6", "PAB6", "TB6", orderpay.ChannelWechat, 1250, "PAB6")
	w.paid("PAB6", "TB6", true)
	appTx(func(tx orderpay.AppTx) error {
		if err := tx.TransitionAppPayment(ctx, orderpay.AppPaymentChange{PaymentNo: "PAB6", From: orderpay.AppPaymentOpen,
			To: orderpay.AppPaymentSuccess, Event: orderpay.AppPaymentEventSucceed, At: t0, Actor: "test"}, ""); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectAppPaymentSucceeded, "PAB6", orderpay.AppPaymentPayload{AppID: "till_1", PaymentNo: "PAB6",
			Status: orderpay.AppPaymentSuccess})
	})
	w.answer("TB6", orderpay.BarcodePaid, "")
	w.trade(orderpay.ChannelWechat, "TB6", "SUCCESS", 1250, 0, true)
}

// barcodeSale is a till's barcode payment of an order (or of a walk-in sale's app payment,
// appPaymentNo): the payment, its barcode attempt submitted PAYING (unknown) and the till's
// row, as the payment center writes them before the channel hears of it.
func (w *world) barcodeSale(orderNo, paymentNo, outTradeNo, channel string, amount int64, appPaymentNo string) {
	w.t.Helper()
	ctx := context.Background()
	till := orderpay.TillPayment{OutTradeNo: outTradeNo, PaymentNo: paymentNo, AppID: "till_1", IdempotencyKey: "k-" + outTradeNo,
		RequestHash: "h", Channel: channel, Amount: amount, AppPaymentNo: appPaymentNo, StoreID: "s1", TillID: "t1", CodeTail: "1234", CreatedAt: t0}
	if appPaymentNo == "" {
		till.OrderNo = orderNo
	}
	err := w.s.InTillTx(ctx, func(tx orderpay.TillTx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: paymentNo, OrderNo: orderNo, Amount: amount, Status: orderpay.PaymentUnpaid,
			Subject: "goods", PayDeadline: longTime, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: outTradeNo, PaymentNo: paymentNo, Channel: channel, Seq: 1,
			Amount: amount, Status: orderpay.ChannelOrderCreated, Method: orderpay.MethodBarcode, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.CreateTillPayment(ctx, &till); err != nil {
			return err
		}
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: outTradeNo, From: orderpay.ChannelOrderCreated,
			To: orderpay.ChannelOrderPaying, Event: orderpay.ChannelOrderEventSubmit, At: t0, Actor: "payment-center", Unknown: true}); err != nil {
			return err
		}
		return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: paymentNo, From: orderpay.PaymentUnpaid, To: orderpay.PaymentPaying,
			Event: orderpay.PaymentEventStart, At: t0, Actor: "payment-center"})
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// endAttempt moves an attempt from one status to another (a refusal, a cancel, a payment
// the cancel found).
func (w *world) endAttempt(outTradeNo string, from, to orderpay.ChannelOrderStatus, event orderpay.ChannelOrderEvent) {
	at := t0.Add(time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		ch := orderpay.ChannelOrderChange{OutTradeNo: outTradeNo, From: from, To: to, Event: event, At: at, Actor: "payment-center"}
		if to == orderpay.ChannelOrderSuccess {
			ch.TradeNo, ch.PaidAt = "tn-"+outTradeNo, at
		}
		return tx.TransitionChannelOrder(ctx, ch)
	})
}

// answer records the till's first final answer.
func (w *world) answer(outTradeNo string, status orderpay.BarcodeStatus, refusal orderpay.BarcodeRefusal) {
	w.t.Helper()
	ctx := context.Background()
	if err := w.s.InTillTx(ctx, func(tx orderpay.TillTx) error {
		return tx.AnswerTillPayment(ctx, outTradeNo, status, refusal, "", t0.Add(time.Minute))
	}); err != nil {
		w.t.Fatal(err)
	}
}

// I9: a run with every way a barcode payment ends (paid, refused, cancelled, paid as it was
// cancelled and refunded by the cancel, ended by the safety net unanswered, a walk-in sale)
// passes; each planted contradiction between the till, orderpay and the channel is named by
// I9, with the order or walk-in sale it concerns, alongside whatever else it breaks.
func TestAuditBarcodeEndsBothSides(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(w *world)
		want  map[string][]string // invariant → orders (or walk-in sales) of its violations
	}{
		{"consistent", func(*world) {}, nil},
		{"an attempt left PAYING after settling", func(w *world) {
			w.exec(`UPDATE channel_orders SET status = 'PAYING' WHERE out_trade_no = ?`, "TB3")
		}, map[string][]string{"I9": {"OB3"}}},
		{"the till told PAID, nothing paid at the channel", func(w *world) {
			w.exec(`UPDATE till_payments SET answer = 'PAID' WHERE out_trade_no = ?`, "TB3")
		}, map[string][]string{"I9": {"OB3"}}},
		{"the till told PAID, the attempt paid at the channel but its order not paid by it", func(w *world) {
			w.exec(`UPDATE till_payments SET answer = 'PAID' WHERE out_trade_no = ?`, "TB4")
		}, map[string][]string{"I9": {"OB4"}}},
		{"the till told REFUSED, the buyer paid", func(w *world) {
			w.exec(`UPDATE till_payments SET answer = 'REFUSED', refusal = 'BALANCE' WHERE out_trade_no = ?`, "TB5")
		}, map[string][]string{"I9": {"OB5"}}},
		{"the till told CANCELLED, the money kept", func(w *world) {
			w.exec(`UPDATE till_payments SET answer = 'CANCELLED' WHERE out_trade_no = ?`, "TB6")
		}, map[string][]string{"I9": {"AB6"}}},
		{"refused, but the trade still waits for the buyer at the channel", func(w *world) {
			w.ledgerEntry("TB2").Status = "USERPAYING"
		}, map[string][]string{"I9": {"OB2"}}},
		{"unanswered, cancelled here, still payable at the channel", func(w *world) {
			w.exec(`UPDATE till_payments SET answer = '', answered_at = 0 WHERE out_trade_no = ?`, "TB3")
			w.ledgerEntry("TB3").Status = "WAIT_BUYER_PAY"
		}, map[string][]string{"I9": {"OB3"}}},
		{"paid at the channel after the cancel, never recorded", func(w *world) {
			e := w.ledgerEntry("TB3")
			e.Status, e.PaidAt = "TRADE_SUCCESS", t0.Add(2*time.Minute)
		}, map[string][]string{"I1": {"OB3"}, "I3": {"OB3"}, "I9": {"OB3"}}},
		{"paid as it was cancelled, the cancel's refund never made", func(w *world) {
			e := w.ledgerEntry("TB4")
			e.Refunded, e.Refunds = 0, nil
		}, map[string][]string{"I3": {"OB4"}, "I8": {"OB4"}, "I9": {"OB4"}}},
		{"the order paid by a trade the cancel then refunded", func(w *world) {
			w.refund("RB1", "TB1", "PB1", orderpay.ChannelAlipay, 1000, orderpay.RefundReasonReversed, false)
			if err := w.s.MarkPublished(context.Background(), []string{orderpay.SubjectRefundSucceeded + ":RB1"}, settled); err != nil {
				w.t.Fatal(err)
			}
			e := w.ledgerEntry("TB1")
			e.Status, e.Refunded = "TRADE_CLOSED", 1000
			e.Refunds = []sim.LedgerRefund{{OutRefundNo: "RB1", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: t0.Add(4 * time.Minute)}}
		}, map[string][]string{"I3": {"OB1"}, "I9": {"OB1"}}},
		{"the order paid by a trade WeChat's reverse then refunded, unknown here", func(w *world) {
			e := w.ledgerEntry("TB5")
			e.Status, e.Refunded = "REVOKED", 1000
			e.Refunds = []sim.LedgerRefund{{OutRefundNo: "TB5", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: t0.Add(4 * time.Minute)}}
		}, map[string][]string{"I3": {"OB5"}, "I8": {"OB5"}, "I9": {"OB5"}}},
		{"the till told PAID, the trade then refunded by a cancel whose answer was lost", func(w *world) {
			e := w.ledgerEntry("TB1")
			e.Status, e.Refunded = "TRADE_CLOSED", 1000
			e.Refunds = []sim.LedgerRefund{{OutRefundNo: "TB1", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: t0.Add(4 * time.Minute)}}
		}, map[string][]string{"I3": {"OB1"}, "I8": {"OB1"}, "I9": {"OB1"}}},
		{"a barcode attempt no till asked for", func(w *world) {
			w.exec(`DELETE FROM till_payments WHERE out_trade_no = ?`, "TB5")
		}, map[string][]string{"I9": {"OB5"}}},
		{"a till payment with no attempt", func(w *world) {
			ctx := context.Background()
			if err := w.s.InTillTx(ctx, func(tx orderpay.TillTx) error {
				return tx.CreateTillPayment(ctx, &orderpay.TillPayment{OutTradeNo: "TB9", PaymentNo: "PB9", AppID: "till_1", IdempotencyKey: "k9",
					RequestHash: "h", Channel: "alipay", Amount: 1000, OrderNo: "O7", CreatedAt: t0})
			}); err != nil {
				w.t.Fatal(err)
			}
		}, map[string][]string{"I9": {"O7"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, eng := range engines {
				w := newWorld(t, eng.open, withBarcode)
				c.plant(w)
				res := w.audit()
				got := map[string][]string{}
				for _, v := range res.Violations {
					got[v.Invariant] = append(got[v.Invariant], v.OrderNo)
					if v.Detail == "" {
						t.Errorf("%s: %s without detail", eng.name, v.Invariant)
					}
					if v.Invariant == audit.BarcodeEndsBothSides {
						t.Logf("%s: %s", eng.name, v)
					}
				}
				if len(c.want) == 0 && !res.Passed() {
					t.Errorf("%s: a consistent run with barcode payments: %v", eng.name, res.Violations)
				}
				for inv, orders := range c.want {
					if !slices.Equal(got[inv], orders) || res.Counts[inv] != len(orders) {
						t.Errorf("%s: %s names %q, want %q; violations: %v", eng.name, inv, got[inv], orders, res.Violations)
					}
				}
				for inv := range got {
					if _, ok := c.want[inv]; !ok {
						t.Errorf("%s: unexpected %s: %v", eng.name, inv, res.Violations)
					}
				}
				if res.BarcodeAttempts != 6 {
					t.Errorf("%s: %d barcode attempts, want 6", eng.name, res.BarcodeAttempts)
				}
				// A shop order's violation carries its history, the barcode attempt's too.
				for _, v := range res.Violations {
					if v.Invariant == audit.BarcodeEndsBothSides && strings.HasPrefix(v.OrderNo, "OB") {
						checkHistory(t, v, []string{"channel_order:" + v.OutTradeNo})
					}
				}
			}
		})
	}
}

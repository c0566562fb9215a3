package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"orderpay"
)

// testConfirmEvent: each event a consumer acts on is confirmed by the records as it was
// written, and any change of what it says (another amount, order, state, payment) or a
// subject no record confirms is Unconfirmed; a record missing is Unconfirmed too.
func testConfirmEvent(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "ctea", 10)
	mustTx(t, s, func(tx orderpay.Tx) error {
		paid := newOrder("CO1", "ctea", 1)
		paid.Status, paid.PaymentNo = orderpay.OrderPaid, "PCO1"
		if err := tx.CreateOrder(ctx, paid); err != nil {
			return err
		}
		cancelled := newOrder("CO2", "ctea", 1)
		cancelled.Status = orderpay.OrderCancelled
		if err := tx.CreateOrder(ctx, cancelled); err != nil {
			return err
		}
		return tx.CreatePayment(ctx, &orderpay.Payment{No: "PCO2", OrderNo: "CO2", Amount: 1999, Status: orderpay.PaymentClosed,
			Subject: "x", PayDeadline: t0, CreatedAt: t0, UpdatedAt: t0})
	})
	paidAttempt(t, s, "CO1", 1999)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: "PCO1A01R1", OutTradeNo: "PCO1A01", PaymentNo: "PCO1",
			Channel: "alipay", Amount: 1999, Reason: "x", Status: orderpay.ChannelRefundSuccess, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
	})
	ap := paidAppPayment(t, s, "capp", "AP00000000000000000009", 700)
	msg := func(subject string, payload any) orderpay.Message {
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		return orderpay.Message{ID: subject + ":x", Subject: subject, Payload: b}
	}
	succeeded := orderpay.PaymentSucceeded{PaymentNo: "PCO1", OrderNo: "CO1", Amount: 1999, Channel: "", OutTradeNo: "PCO1A01"}
	paidOrder := orderpay.OrderEventPayload{OrderNo: "CO1", BuyerID: "b1", Status: orderpay.OrderPaid, Payable: 1999, PaymentNo: "PCO1"}
	refund := orderpay.RefundEventPayload{OutRefundNo: "PCO1A01R1", OutTradeNo: "PCO1A01", PaymentNo: "PCO1", OrderNo: "CO1", Amount: 1999,
		Status: orderpay.ChannelRefundSuccess}
	appPaid := orderpay.AppPaymentPayload{AppID: "capp", PaymentNo: ap.PaymentNo, Amount: 700, Status: orderpay.AppPaymentSuccess}
	with := func(v any, change func(p map[string]any)) map[string]any {
		b, _ := json.Marshal(v)
		var p map[string]any
		json.Unmarshal(b, &p)
		change(p)
		return p
	}
	for _, tc := range []struct {
		name string
		m    orderpay.Message
		ok   bool
	}{
		{"payment.succeeded", msg(orderpay.SubjectPaymentSucceeded, succeeded), true},
		{"payment.succeeded, another amount", msg(orderpay.SubjectPaymentSucceeded, with(succeeded, func(p map[string]any) { p["amount"] = 1 })), false},
		{"payment.succeeded, another order", msg(orderpay.SubjectPaymentSucceeded, with(succeeded, func(p map[string]any) { p["order_no"] = "CO2" })), false},
		{"payment.succeeded, another attempt", msg(orderpay.SubjectPaymentSucceeded, with(succeeded, func(p map[string]any) { p["out_trade_no"] = "PCO1A02" })), false},
		{"payment.succeeded, no payment", msg(orderpay.SubjectPaymentSucceeded, with(succeeded, func(p map[string]any) { p["payment_no"] = "PNONE" })), false},
		{"payment.succeeded, a closed payment", msg(orderpay.SubjectPaymentSucceeded, orderpay.PaymentSucceeded{PaymentNo: "PCO2", OrderNo: "CO2", Amount: 1999}), false},
		{"payment.closed", msg(orderpay.SubjectPaymentClosed, orderpay.PaymentClosedPayload{PaymentNo: "PCO2", OrderNo: "CO2"}), true},
		{"payment.closed, a paid payment", msg(orderpay.SubjectPaymentClosed, orderpay.PaymentClosedPayload{PaymentNo: "PCO1", OrderNo: "CO1"}), false},
		{"order.paid", msg(orderpay.SubjectOrderPaid, paidOrder), true},
		{"order.paid, an unpaid order", msg(orderpay.SubjectOrderPaid, with(paidOrder, func(p map[string]any) { p["order_no"] = "CO2" })), false},
		{"order.paid, another payable", msg(orderpay.SubjectOrderPaid, with(paidOrder, func(p map[string]any) { p["payable"] = 1 })), false},
		{"order.paid, another buyer", msg(orderpay.SubjectOrderPaid, with(paidOrder, func(p map[string]any) { p["buyer_id"] = "b2" })), false},
		{"order.created", msg(orderpay.SubjectOrderCreated, paidOrder), true},
		{"order.cancelled", msg(orderpay.SubjectOrderCancelled, orderpay.OrderEventPayload{OrderNo: "CO2", BuyerID: "b1", Payable: 1999}), true},
		{"order.cancelled, a paid order", msg(orderpay.SubjectOrderCancelled, paidOrder), false},
		{"refund.succeeded", msg(orderpay.SubjectRefundSucceeded, refund), true},
		{"refund.succeeded, another amount", msg(orderpay.SubjectRefundSucceeded, with(refund, func(p map[string]any) { p["amount"] = 2 })), false},
		{"refund.succeeded, no refund", msg(orderpay.SubjectRefundSucceeded, with(refund, func(p map[string]any) { p["out_refund_no"] = "R9" })), false},
		{"refund.succeeded, resolved", msg(orderpay.SubjectRefundSucceeded, with(refund, func(p map[string]any) { p["status"] = "RESOLVED" })), false},
		{"app.payment.succeeded", msg(orderpay.SubjectAppPaymentSucceeded, appPaid), true},
		{"app.payment.succeeded, another app", msg(orderpay.SubjectAppPaymentSucceeded, with(appPaid, func(p map[string]any) { p["app_id"] = "x" })), false},
		{"app.payment.closed of a paid one", msg(orderpay.SubjectAppPaymentClosed, with(appPaid, func(p map[string]any) { p["status"] = "CLOSED" })), false},
		{"a subject no record confirms", msg(orderpay.SubjectRefundNeedsAction, refund), false},
		{"malformed", orderpay.Message{ID: "m", Subject: orderpay.SubjectPaymentSucceeded, Payload: []byte("{")}, false},
	} {
		err := orderpay.ConfirmEvent(ctx, s, tc.m)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want confirmed", tc.name, err)
		case !tc.ok && !orderpay.IsUnconfirmed(err):
			t.Errorf("%s: %v, want unconfirmed", tc.name, err)
		}
	}
}

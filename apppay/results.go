package apppay

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"orderpay"
)

// OrderResults is what the order system does with a payment's result (*order.Service is
// one).
type OrderResults interface {
	Applied(ctx context.Context, ev orderpay.PaymentSucceeded) bool
	PaymentSucceeded(ctx context.Context, ev orderpay.PaymentSucceeded) error
	PaymentSucceededTx(ctx context.Context, tx orderpay.Tx, ev orderpay.PaymentSucceeded) (func(), error)
}

// RejectedRefunder refunds a payment whose order refused its result (*payment.Service is
// one).
type RejectedRefunder interface {
	RefundRejected(ctx context.Context, ev orderpay.PaymentSucceeded, reason string) error
}

// Results hands a payment's result to whoever asked for the payment: the apps domain for
// an app payment (its order number is an app key), the order system otherwise. It is the
// payment center's direct line (orderpay.PaymentResults: the order system, on the same
// store, takes a payment in the transaction that records it; an app's payment is told
// after the commit), and Consume is the bus path of the same results. Its fields may be set
// after it is handed to the payment center, before any result arrives.
type Results struct {
	Orders  OrderResults
	Apps    *Service
	Refunds RejectedRefunder
	// Unconfirmed is told of a result on the bus the payment center's record does not
	// confirm (forged). Optional.
	Unconfirmed func(msg orderpay.Message)
	Logger      *slog.Logger
}

// PaymentSucceeded tells the result after its commit.
func (r *Results) PaymentSucceeded(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	if orderpay.IsAppOrderKey(ev.OrderNo) {
		return r.Apps.PaymentSucceeded(ctx, ev)
	}
	return r.Orders.PaymentSucceeded(ctx, ev)
}

// PaymentSucceededTx lets the order system take the result in the payment's transaction.
func (r *Results) PaymentSucceededTx(ctx context.Context, tx orderpay.Tx, ev orderpay.PaymentSucceeded) (func(), error) {
	if orderpay.IsAppOrderKey(ev.OrderNo) {
		return nil, nil
	}
	return r.Orders.PaymentSucceededTx(ctx, tx, ev)
}

// Consume is the bus path of payment results. The message is acked only after the order
// system has committed (it returns nil); an error retries it. A result the order refuses
// explicitly (cancelled, sold out) is refunded by the payment center and then acked; any
// other error, a conflict too, is delivered again, never taken as a refusal.
func (r *Results) Consume(ctx context.Context, msg orderpay.Message) error {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	var ev orderpay.PaymentSucceeded
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		log.Error("malformed payment.succeeded dropped", "msg_id", msg.ID, "err", err)
		return nil
	}
	if !orderpay.IsAppOrderKey(ev.OrderNo) && r.Orders.Applied(ctx, ev) {
		return nil // the direct call got there first, as it mostly does
	}
	err := r.PaymentSucceeded(ctx, ev)
	if orderpay.IsUnconfirmed(err) {
		// A message the payment center's record does not confirm: forged (anyone who can
		// publish on the bus could send it). Acknowledged; nothing changed.
		log.Error("forged payment result on the bus: not confirmed by the payment center's record, acknowledged and ignored",
			"msg_id", msg.ID, "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "amount", ev.Amount, "err", err)
		if r.Unconfirmed != nil {
			r.Unconfirmed(msg)
		}
		return nil
	}
	if reason, refused := orderpay.Refusal(err); refused {
		// The order cannot take it (cancelled meanwhile, or sold out): the money goes back.
		// Acked only once the refund is recorded.
		log.Error("payment result refused by the order; refunding", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "err", err)
		rerr := r.Refunds.RefundRejected(ctx, ev, reason)
		if orderpay.ErrorCode(rerr) == orderpay.ECONFLICT {
			log.Error("payment result neither applicable nor refundable: needs an operator", "order_no", ev.OrderNo, "err", rerr)
			return nil
		}
		return rerr
	}
	switch orderpay.ErrorCode(err) {
	case orderpay.ENOTFOUND:
		log.Error("payment result for an unknown order", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo)
		return nil
	}
	return err
}

// RefundFinal moves, in the transaction that brings a refund's money back, whoever asked
// for it: the order system's after-sales request, or the app payment's refund.
func (r *Results) RefundFinal(ctx context.Context, tx orderpay.Tx, rf *orderpay.ChannelRefund, at time.Time, afterSales func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error) error {
	if err := afterSales(ctx, tx, rf, at); err != nil {
		return err
	}
	return r.Apps.RefundFinal(ctx, tx, rf, at)
}

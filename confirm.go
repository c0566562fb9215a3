package orderpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Unconfirmed is the error of a message on the bus that the database does not confirm:
// what it says did not happen (a forged event), or not as it says. A consumer logs it,
// counts it, acknowledges the message and changes nothing (docs/design.md §5.5).
type Unconfirmed struct {
	Subject string
	Why     string
}

func (u *Unconfirmed) Error() string { return u.Subject + " not confirmed by the database: " + u.Why }

// unconfirmed is an *Unconfirmed of subject, its reason formatted.
func unconfirmed(subject, format string, args ...any) error {
	return &Unconfirmed{Subject: subject, Why: fmt.Sprintf(format, args...)}
}

// IsUnconfirmed reports whether err is, or wraps, an *Unconfirmed.
func IsUnconfirmed(err error) bool {
	var u *Unconfirmed
	return errors.As(err, &u)
}

// ConfirmPaymentSucceeded checks ev against the payment center's own record, as r reads it
// (the transaction that is to act on it): the payment exists, is SUCCESS, for ev's order
// and amount, paid through ev's attempt at ev's channel. Anything else is Unconfirmed.
func ConfirmPaymentSucceeded(ctx context.Context, r Reader, ev PaymentSucceeded) error {
	p, err := r.Payment(ctx, ev.PaymentNo)
	if ErrorCode(err) == ENOTFOUND {
		return unconfirmed(SubjectPaymentSucceeded, "no payment %q", ev.PaymentNo)
	}
	if err != nil {
		return err
	}
	switch {
	case p.Status != PaymentSuccess:
		return unconfirmed(SubjectPaymentSucceeded, "payment %s is %s", p.No, p.Status)
	case p.OrderNo != ev.OrderNo:
		return unconfirmed(SubjectPaymentSucceeded, "payment %s is of order %s, not %s", p.No, p.OrderNo, ev.OrderNo)
	case p.Amount != ev.Amount:
		return unconfirmed(SubjectPaymentSucceeded, "payment %s is of %d fen, not %d", p.No, p.Amount, ev.Amount)
	case p.PaidOutTradeNo != ev.OutTradeNo || p.PaidChannel != ev.Channel:
		return unconfirmed(SubjectPaymentSucceeded, "payment %s was paid through %s at %s, not %s at %s", p.No, p.PaidOutTradeNo,
			p.PaidChannel, ev.OutTradeNo, ev.Channel)
	}
	return nil
}

// ConfirmEvent checks an event that moves money or tells of it (payment.succeeded,
// payment.closed, refund.succeeded, app.payment.succeeded, app.payment.closed,
// app.refund.succeeded, order.created, order.paid, order.cancelled) against the records r
// reads, before anything acts on it: the entity exists, in the state the message says,
// for its amount. r must be an AppReader for the app.* ones. Any other subject is
// Unconfirmed: nothing is confirmed by default.
func ConfirmEvent(ctx context.Context, r Reader, m Message) error {
	switch m.Subject {
	case SubjectOrderCreated, SubjectOrderPaid, SubjectOrderCancelled:
		ev, err := decode[OrderEventPayload](m)
		if err != nil {
			return err
		}
		o, err := r.Order(ctx, ev.OrderNo)
		if err := found(m.Subject, err, "order", ev.OrderNo); err != nil {
			return err
		}
		paid := o.PaymentNo != "" && o.Status != OrderPendingPayment && o.Status != OrderCancelled
		switch {
		case o.BuyerID != ev.BuyerID || o.Payable != ev.Payable:
			return unconfirmed(m.Subject, "order %s is buyer %s's for %d fen", o.No, o.BuyerID, o.Payable)
		case m.Subject == SubjectOrderPaid && (!paid || o.PaymentNo != ev.PaymentNo):
			return unconfirmed(m.Subject, "order %s is %s, paid by %q", o.No, o.Status, o.PaymentNo)
		case m.Subject == SubjectOrderCancelled && o.Status != OrderCancelled:
			return unconfirmed(m.Subject, "order %s is %s", o.No, o.Status)
		}
		return nil
	case SubjectPaymentSucceeded:
		ev, err := decode[PaymentSucceeded](m)
		if err != nil {
			return err
		}
		return ConfirmPaymentSucceeded(ctx, r, ev)
	case SubjectPaymentClosed:
		ev, err := decode[PaymentClosedPayload](m)
		if err != nil {
			return err
		}
		p, err := r.Payment(ctx, ev.PaymentNo)
		if err := found(m.Subject, err, "payment", ev.PaymentNo); err != nil {
			return err
		}
		if p.Status != PaymentClosed || p.OrderNo != ev.OrderNo {
			return unconfirmed(m.Subject, "payment %s of order %s is %s", p.No, p.OrderNo, p.Status)
		}
		return nil
	case SubjectRefundSucceeded, SubjectAppRefundSucceeded:
		ev, err := decode[RefundEventPayload](m) // app.refund.succeeded's has the same fields
		if err != nil {
			return err
		}
		rf, err := r.ChannelRefund(ctx, ev.OutRefundNo)
		if err := found(m.Subject, err, "refund", ev.OutRefundNo); err != nil {
			return err
		}
		if rf.Status.Owed() || rf.Status != ev.Status || rf.Amount != ev.Amount || rf.OutTradeNo != ev.OutTradeNo {
			return unconfirmed(m.Subject, "refund %s of %s is %s for %d fen", rf.OutRefundNo, rf.OutTradeNo, rf.Status, rf.Amount)
		}
		return nil
	case SubjectAppPaymentSucceeded, SubjectAppPaymentClosed:
		ar, ok := r.(AppReader)
		if !ok {
			return unconfirmed(m.Subject, "no app payments to confirm it against")
		}
		ev, err := decode[AppPaymentPayload](m)
		if err != nil {
			return err
		}
		ap, err := ar.AppPayment(ctx, ev.PaymentNo)
		if err := found(m.Subject, err, "app payment", ev.PaymentNo); err != nil {
			return err
		}
		if ap.Status != ev.Status || ap.AppID != ev.AppID || ap.Amount != ev.Amount {
			return unconfirmed(m.Subject, "app payment %s of app %s is %s for %d fen", ap.PaymentNo, ap.AppID, ap.Status, ap.Amount)
		}
		return nil
	}
	return unconfirmed(m.Subject, "no record confirms this subject")
}

// decode reads m's payload as a T; a payload that does not read is Unconfirmed.
func decode[T any](m Message) (T, error) {
	var v T
	if err := json.Unmarshal(m.Payload, &v); err != nil {
		return v, unconfirmed(m.Subject, "malformed: %v", err)
	}
	return v, nil
}

// found is nil for err nil, Unconfirmed for a missing what, and err otherwise.
func found(subject string, err error, what, key string) error {
	if ErrorCode(err) == ENOTFOUND {
		return unconfirmed(subject, "no %s %q", what, key)
	}
	return err
}

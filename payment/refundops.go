package payment

import (
	"context"
	"strings"

	"orderpay"
)

// Bounds of what an operator writes on a refund they settled outside the channel.
const (
	MaxResolveReference = 128  // bytes
	MaxResolveNote      = 1024 // bytes
)

// RefundView is a refund with whom it is owed to.
type RefundView struct {
	orderpay.ChannelRefund
	OrderNo string
	BuyerID string
}

// Refund returns one refund with its order and buyer.
func (s *Service) Refund(ctx context.Context, outRefundNo string) (*RefundView, error) {
	r, err := s.cfg.Store.ChannelRefund(ctx, outRefundNo)
	if err != nil {
		return nil, err
	}
	v, err := s.view(ctx, *r)
	return &v, err
}

// view adds a refund's order and buyer.
func (s *Service) view(ctx context.Context, r orderpay.ChannelRefund) (RefundView, error) {
	v := RefundView{ChannelRefund: r}
	p, err := s.cfg.Store.Payment(ctx, r.PaymentNo)
	if err != nil {
		return v, err
	}
	v.OrderNo = p.OrderNo
	if o, err := s.cfg.Store.Order(ctx, p.OrderNo); err == nil {
		v.BuyerID = o.BuyerID
	} else if orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		return v, err
	}
	return v, nil
}

// RefundsNeedingAction is the operators' queue: refunds the channel will not make by itself
// (refused for good, ended abnormally, retries ran out), oldest first, each with its
// problem, its order and its buyer.
func (s *Service) RefundsNeedingAction(ctx context.Context, limit int) ([]RefundView, error) {
	rs, err := s.cfg.Store.RefundsNeedingAction(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]RefundView, 0, len(rs))
	for _, r := range rs {
		v, err := s.view(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// RetryRefund is an operator's "retry now" (actor names them, "operator:<name>"). A refund in
// the operators' queue is sent again, under its own number, with a fresh retry plan (after
// the merchant topped up the balance, say); one on its way is sent or queried now rather
// than at its next try. Either way the refund worker does it, at once. A refund whose money
// is back is left as it is. Idempotent: asking twice is asking once, and a resend under the
// same number can never refund twice. It returns the refund as it now stands.
func (s *Service) RetryRefund(ctx context.Context, outRefundNo, actor string) (*RefundView, error) {
	if strings.TrimSpace(actor) == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "an operator action names its operator")
	}
	var moved bool
	err := s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		moved = false
		r, err := tx.ChannelRefund(ctx, outRefundNo)
		if err != nil {
			return err
		}
		now := orderpay.Now(s.cfg.Clock)
		change := orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, To: r.Status, At: now, Actor: actor, NextAt: now}
		switch r.Status {
		case orderpay.ChannelRefundNeedsAction:
			change.To, change.Event = orderpay.ChannelRefundPending, orderpay.ChannelRefundEventOperatorRetry
			change.Reason = "sent again by an operator, under the same number (was: " + r.Problem + ")"
		case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
			if !r.NextAt.After(now) {
				return nil // due already
			}
			change.Event, change.Reason = orderpay.ChannelRefundEventRetryNow, "an operator asked for it now, not at "+r.NextAt.UTC().Format("2006-01-02 15:04:05Z")
		default:
			return nil // the money is back
		}
		moved = true
		return tx.TransitionChannelRefund(ctx, change)
	})
	if err != nil {
		return nil, err
	}
	if moved {
		s.log.Info("refund retried by an operator", "out_refund_no", outRefundNo, "actor", actor)
		s.cfg.RefundCreated()
	}
	return s.Refund(ctx, outRefundNo)
}

// ResolveRefund records that an operator (actor, "operator:<name>") paid a refund of the
// operators' queue back outside the channel (a bank transfer, the merchant platform), with
// the payment's reference and a note: the refund is RESOLVED, the payment counts the money
// as returned, whoever asked for the refund is told it ended, and refund.succeeded says it
// went back outside the channel, all in one transaction. Only a refund in the queue can be
// resolved: one still on its way may yet be made by the channel, and resolving it too would
// pay the buyer twice. Idempotent: the same reference again returns the refund as it is;
// another reference is ECONFLICT.
func (s *Service) ResolveRefund(ctx context.Context, outRefundNo, actor, reference, note string) (*RefundView, error) {
	reference, note = strings.TrimSpace(reference), strings.TrimSpace(note)
	switch {
	case strings.TrimSpace(actor) == "":
		return nil, orderpay.Errorf(orderpay.EINVALID, "an operator action names its operator")
	case reference == "" || len(reference) > MaxResolveReference:
		return nil, orderpay.Errorf(orderpay.EINVALID, "reference: the outside payment's reference is required (at most %d bytes)", MaxResolveReference)
	case len(note) > MaxResolveNote:
		return nil, orderpay.Errorf(orderpay.EINVALID, "note: at most %d bytes", MaxResolveNote)
	}
	var resolved bool
	err := s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		resolved = false
		r, err := tx.ChannelRefund(ctx, outRefundNo)
		if err != nil {
			return err
		}
		switch r.Status {
		case orderpay.ChannelRefundResolved:
			if r.ResolvedRef == reference {
				return nil // asked again
			}
			return orderpay.Errorf(orderpay.ECONFLICT, "refund %s was already resolved by %s with reference %q", r.OutRefundNo, r.ResolvedBy, r.ResolvedRef)
		case orderpay.ChannelRefundSuccess:
			return orderpay.Errorf(orderpay.ECONFLICT, "refund %s was made by the channel: nothing is owed", r.OutRefundNo)
		case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
			return orderpay.Errorf(orderpay.ECONFLICT, "refund %s is %s: the channel may still make it, so it cannot be settled outside the channel; only a refund needing action can", r.OutRefundNo, r.Status)
		}
		now := orderpay.Now(s.cfg.Clock)
		change := orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, To: orderpay.ChannelRefundResolved,
			Event: orderpay.ChannelRefundEventResolve, At: now, Actor: actor, NextAt: now,
			Reason:     "paid back outside the channel, reference " + reference + noteSuffix(note),
			ResolvedBy: actor, ResolvedRef: reference, ResolvedNote: note}
		if err := tx.TransitionChannelRefund(ctx, change); err != nil {
			return err
		}
		resolved = true
		return s.moneyBack(ctx, tx, r, change)
	})
	if err != nil {
		return nil, err
	}
	if resolved {
		s.log.Warn("refund settled outside the channel by an operator", "out_refund_no", outRefundNo, "actor", actor, "reference", reference)
		s.cfg.OutboxWritten()
	}
	return s.Refund(ctx, outRefundNo)
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

package payment

import (
	"context"
	"fmt"
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
	// Warning, on a refund that waits for an operator or was settled by one, says that the
	// channel was asked to make it: before paying it outside the channel, check in the
	// merchant platform that it did not.
	Warning string
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

// view adds a refund's order and buyer, and the warning an operator who would settle it
// outside the channel needs.
func (s *Service) view(ctx context.Context, r orderpay.ChannelRefund) (RefundView, error) {
	v := RefundView{ChannelRefund: r, Warning: RefundWarning(&r)}
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

// RefundWarning is what an operator who would settle r outside the channel must be told
// first, or "": that the channel was asked to make it (it may have, whatever it answered),
// on a refund in the operators' queue or settled from it.
func RefundWarning(r *orderpay.ChannelRefund) string {
	if (r.Status != orderpay.ChannelRefundNeedsAction && r.Status != orderpay.ChannelRefundResolved) || r.Sends == 0 {
		return ""
	}
	return fmt.Sprintf("the channel was asked %d time(s) to make this refund (%s): check in the merchant platform that it did not "+
		"before paying it back outside the channel, or the buyer is paid twice", r.Sends, r.OutRefundNo)
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
			if !r.NextAt.After(now) || r.ClaimedUntil.After(now) {
				return nil // due already, or being sent or queried right now
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
// resolved, and only while no send of it is on its way and its last answer was not
// unknown: the channel may yet make such a one, and resolving it too would pay the buyer
// twice. A refund the channel was ever asked to make is resolved with a warning
// (RefundWarning), in the answer and the log. Idempotent: the same reference again returns
// the refund as it is; another reference is ECONFLICT.
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
		switch {
		case r.ClaimedUntil.After(now):
			return orderpay.Errorf(orderpay.ECONFLICT, "refund %s is being sent to the channel right now: the channel may still make it; try again in a minute", r.OutRefundNo)
		case r.Unknown:
			return orderpay.Errorf(orderpay.ECONFLICT, "refund %s: the channel's last answer was unknown, so it may have made it; retry it first to hear what the channel says", r.OutRefundNo)
		}
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
	v, err := s.Refund(ctx, outRefundNo)
	if resolved {
		s.log.Warn("refund settled outside the channel by an operator", "out_refund_no", outRefundNo, "actor", actor, "reference", reference,
			"channel_asked", v != nil && v.Sends > 0)
		s.cfg.OutboxWritten()
	}
	return v, err
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

package payment

import (
	"context"

	"orderpay"
)

// SettleRefund works one refund now, whatever its next due time: it is resent under its own
// number if PENDING, queried if PROCESSING, and recorded exactly as the refund worker does
// (it is the same code). A refund in the operators' queue is queried, and moves to SUCCESS
// only if the channel says it refunded after all. A refund whose money is back is left
// alone. Reconciliation uses it for a refund the bill shows settled while we still hold it
// as owed. It reports the refund's status afterwards.
func (s *Service) SettleRefund(ctx context.Context, outRefundNo string) (orderpay.ChannelRefundStatus, error) {
	r, err := s.cfg.Store.ChannelRefund(ctx, outRefundNo)
	if err != nil {
		return "", err
	}
	switch r.Status {
	case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
		// Claimed like the worker's: a send of another worker on its way is left to end.
		claim, err := s.claimRefund(ctx, r, orderpay.Now(s.cfg.Clock))
		if err == nil {
			callCtx, cancel := context.WithTimeout(ctx, s.cfg.RefundClaim/refundCallShare)
			_, err = s.workRefund(callCtx, r, claim)
			cancel()
		}
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return r.Status, err
		}
	case orderpay.ChannelRefundNeedsAction:
		if err := s.settleQueued(ctx, r); err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return r.Status, err
		}
	}
	if r, err = s.cfg.Store.ChannelRefund(ctx, outRefundNo); err != nil {
		return "", err
	}
	return r.Status, nil
}

// settleQueued asks the channel about a refund of the operators' queue and records it
// SUCCESS if the channel says it refunded; any other answer leaves it in the queue.
func (s *Service) settleQueued(ctx context.Context, r *orderpay.ChannelRefund) error {
	ch, ok := s.cfg.Channels[r.Channel]
	if !ok {
		return orderpay.Errorf(orderpay.EINTERNAL, "refund %s: no channel %q", r.OutRefundNo, r.Channel)
	}
	// Asked under the account the refunded attempt's method is made under; without the
	// attempt, not asked at all: another account's answer says nothing of this refund.
	co, err := s.cfg.Store.ChannelOrder(ctx, r.OutTradeNo)
	if err != nil {
		return err
	}
	res := orderpay.ChannelFor(ch, co.Method).QueryRefund(ctx, r.OutTradeNo, r.OutRefundNo)
	s.cfg.Observer.RefundAnswer(r.Channel, res.Outcome)
	if res.Outcome != orderpay.OutcomeRefunded {
		return nil
	}
	now := orderpay.Now(s.cfg.Clock)
	applied, twice, err := s.recordRefunded(ctx, r.OutRefundNo, orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, At: now,
		Actor: "channel:" + r.Channel, Reason: "the channel refunded it after all: " + res.Detail, Raw: res.Raw, NextAt: now})
	switch {
	case err != nil:
	case twice:
		s.log.Error("the channel refunded a refund an operator had already settled outside it: the buyer got the money twice",
			"out_refund_no", r.OutRefundNo, "amount", r.Amount)
	case applied:
		s.log.Warn("a refund of the operators' queue was made by the channel after all", "out_refund_no", r.OutRefundNo, "amount", r.Amount)
		s.cfg.OutboxWritten()
	}
	return err
}

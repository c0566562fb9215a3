package payment

import (
	"context"

	"orderpay"
)

// SettleRefund works one refund now, whatever its next due time: it is resent under its own
// number if PENDING, queried if PROCESSING, and moved to SUCCESS or FAILED only on the
// channel's verified word, exactly as the refund worker does (it is the same code). A final
// refund is left alone. Reconciliation uses it for a refund the bill shows settled while we
// still hold it in flight. It reports the refund's status afterwards.
func (s *Service) SettleRefund(ctx context.Context, outRefundNo string) (orderpay.ChannelRefundStatus, error) {
	r, err := s.cfg.Store.ChannelRefund(ctx, outRefundNo)
	if err != nil {
		return "", err
	}
	if r.Status == orderpay.ChannelRefundPending || r.Status == orderpay.ChannelRefundProcessing {
		if _, err := s.workRefund(ctx, r); err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return r.Status, err
		}
	}
	if r, err = s.cfg.Store.ChannelRefund(ctx, outRefundNo); err != nil {
		return "", err
	}
	return r.Status, nil
}

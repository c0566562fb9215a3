package payment

import (
	"context"
	"sync"
	"time"

	"orderpay"
)

// SweepResult counts what one sweep of due payments found.
type SweepResult struct {
	Closed, Paid, Open int
}

// CloseDue closes the payments whose deadline passed more than grace ago: the safety net
// under the order system's timeout close, for payments whose order is gone already (a
// buyer cancelled while an unscanned code was still payable). Each is closed with Close,
// which queries before it closes.
func (s *Service) CloseDue(ctx context.Context, grace time.Duration, limit, workers int) (SweepResult, error) {
	var res SweepResult
	var mu sync.Mutex
	count := func(outcome orderpay.CloseOutcome, err error) error {
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch outcome {
		case orderpay.CloseDone:
			res.Closed++
		case orderpay.ClosePaid:
			res.Paid++
		default:
			res.Open++
		}
		return nil
	}
	due, err := s.cfg.Store.DuePayments(ctx, orderpay.Now(s.cfg.Clock).Add(-grace), limit)
	if err != nil {
		return res, err
	}
	if err := orderpay.ForEach(ctx, due, workers, func(ctx context.Context, p orderpay.Payment) error {
		return count(s.Close(ctx, p.OrderNo))
	}); err != nil {
		return res, err
	}
	// An attempt can stay open after its payment is final: the buyer paid by both
	// channels and the second channel's notification was lost, so nothing else will look
	// at it. Past the deadline it is queried (a payment there is a duplicate, refunded) or
	// closed.
	stale, err := s.cfg.Store.OpenAttemptsPastDeadline(ctx, orderpay.Now(s.cfg.Clock).Add(-grace), limit)
	if err != nil {
		return res, err
	}
	err = orderpay.ForEach(ctx, stale, workers, func(ctx context.Context, co orderpay.ChannelOrder) error {
		p, err := s.cfg.Store.Payment(ctx, co.PaymentNo)
		if err != nil {
			return err
		}
		if p.Status == orderpay.PaymentUnpaid || p.Status == orderpay.PaymentPaying {
			return nil // Close above owns it
		}
		return count(s.closeAttempt(ctx, p, &co))
	})
	return res, err
}

// ScanOnce is the "scan" compensation common in existing gateways: query every attempt
// still PAYING that was created more than age ago, and apply the payments found. It is
// one of the strategies the chaos harness compares; the design's own is the delayed-query
// schedule.
func (s *Service) ScanOnce(ctx context.Context, age time.Duration, limit int) (int, error) {
	attempts, err := s.cfg.Store.PayingChannelOrders(ctx, orderpay.Now(s.cfg.Clock).Add(-age), limit)
	if err != nil {
		return 0, err
	}
	paid := 0
	for _, co := range attempts {
		if err := ctx.Err(); err != nil {
			return paid, err
		}
		outcome, err := s.QueryAttempt(ctx, co.OutTradeNo, "scan")
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return paid, err
		}
		if outcome == orderpay.OutcomePaid {
			paid++
		}
	}
	return paid, nil
}

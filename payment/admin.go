package payment

import (
	"context"

	"orderpay"
)

// AttemptCheck is what a confirmation found about one attempt.
type AttemptCheck struct {
	OutTradeNo string
	Channel    string
	Before     orderpay.ChannelOrderStatus
	Outcome    orderpay.Outcome // the channel's answer
	After      orderpay.ChannelOrderStatus
	Detail     string
}

// Confirm is "confirm payment by hand" for an operator: it queries the channel about every
// attempt of the payment that is not already SUCCESS, and a verified payment goes through
// the full success path (the order is paid, or the money refunded if the order cannot take
// it). It never sets a status on the operator's word alone.
func (s *Service) Confirm(ctx context.Context, paymentNo string) (*orderpay.Payment, []AttemptCheck, error) {
	if _, err := s.cfg.Store.Payment(ctx, paymentNo); err != nil {
		return nil, nil, err
	}
	attempts, err := s.cfg.Store.ChannelOrders(ctx, paymentNo)
	if err != nil {
		return nil, nil, err
	}
	var checks []AttemptCheck
	for i := range attempts {
		co := &attempts[i]
		c := AttemptCheck{OutTradeNo: co.OutTradeNo, Channel: co.Channel, Before: co.Status, After: co.Status}
		if co.Status != orderpay.ChannelOrderSuccess && co.Status != orderpay.ChannelOrderCreated {
			q := s.query(ctx, co, "admin")
			c.Outcome, c.Detail = q.Outcome, q.Detail
			if _, err := s.applyQuery(ctx, co, q); err != nil {
				c.Detail += "; not applied: " + orderpay.ErrorMessage(err)
			}
			if cur, err := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo); err == nil {
				c.After = cur.Status
			}
		}
		checks = append(checks, c)
	}
	p, err := s.cfg.Store.Payment(ctx, paymentNo)
	return p, checks, err
}

// Stuck lists what an operator should look at: payments still open a grace past their
// deadline, and attempts whose queries ran out (flagged for reconciliation).
func (s *Service) Stuck(ctx context.Context, limit int) ([]orderpay.Payment, []orderpay.PendingQuery, error) {
	payments, err := s.cfg.Store.DuePayments(ctx, orderpay.Now(s.cfg.Clock).Add(-s.cfg.CloseGrace), limit)
	if err != nil {
		return nil, nil, err
	}
	flagged, err := s.cfg.Store.PendingQueries(ctx, true, limit)
	return payments, flagged, err
}

// PendingQueries lists the safety net's rows, oldest first.
func (s *Service) PendingQueries(ctx context.Context, flaggedOnly bool, limit int) ([]orderpay.PendingQuery, error) {
	return s.cfg.Store.PendingQueries(ctx, flaggedOnly, limit)
}

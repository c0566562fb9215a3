package order

import (
	"context"
	"fmt"
	"sync"
	"time"

	"orderpay"
)

// Cancel is a buyer cancelling an unpaid order. If a payment is in flight, the payment
// center asks the channel first (docs/design.md §5): a paid order is not cancelled (ECONFLICT); an
// answer that is not definite is EUNAVAILABLE, to be retried. Otherwise the order is
// cancelled, its stock released, and order.cancelled written. Cancelling a cancelled order
// is a no-op.
func (s *Service) Cancel(ctx context.Context, orderNo string) (*orderpay.Order, error) {
	o, err := s.cfg.Store.Order(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	switch o.Status {
	case orderpay.OrderCancelled:
		return o, nil
	case orderpay.OrderPendingPayment:
	default:
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s; only an unpaid order can be cancelled", o.No, o.Status)
	}
	outcome, err := s.cfg.Payments.Close(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	switch outcome {
	case orderpay.ClosePaid:
		if err := s.pullResult(ctx, orderNo); err != nil {
			s.log.Warn("pulling the payment result failed", "order_no", orderNo, "err", err)
		}
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is already paid", o.No)
	case orderpay.CloseUnknown:
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "the channel could not confirm that nothing was paid; try again")
	}
	// CloseDone, or CloseNotPaidYet: the channel confirms nothing is paid. An unscanned code
	// may stay payable until its deadline; the payment center closes it then and refunds a
	// payment that still comes.
	if err := s.cancel(ctx, o, "buyer:"+o.BuyerID, fmt.Sprintf("cancelled by the buyer (payment: %s)", outcome)); err != nil {
		return nil, err
	}
	return s.cfg.Store.Order(ctx, orderNo)
}

// ExpireResult counts what one timeout sweep did.
type ExpireResult struct {
	Cancelled, Paid, Open int
}

// ExpireDue is the timeout close: every PENDING_PAYMENT order whose deadline passed more
// than grace ago has its payment closed by the payment center (which queries first) and,
// once the channel confirms nothing was paid, is cancelled and its stock released. An order
// found paid is left to the payment result (it arrives by direct call and by the bus); an
// unknown answer is tried again on the next sweep. Up to workers orders are closed at once:
// a close waits on the channel, for seconds when a call times out.
func (s *Service) ExpireDue(ctx context.Context, grace time.Duration, limit, workers int) (ExpireResult, error) {
	var res ExpireResult
	due, err := s.cfg.Store.DueOrders(ctx, orderpay.Now(s.cfg.Clock).Add(-grace), limit)
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	err = orderpay.ForEach(ctx, due, workers, func(ctx context.Context, no string) error {
		counter, err := s.expire(ctx, no)
		mu.Lock()
		defer mu.Unlock()
		switch counter {
		case expireCancelled:
			res.Cancelled++
		case expirePaid:
			res.Paid++
		case expireOpen:
			res.Open++
		}
		return err
	})
	return res, err
}

type expireCount int

const (
	expireNone expireCount = iota
	expireCancelled
	expirePaid
	expireOpen
)

// expire closes one order past its deadline; see ExpireDue.
func (s *Service) expire(ctx context.Context, no string) (expireCount, error) {
	outcome, err := s.cfg.Payments.Close(ctx, no)
	if err != nil {
		s.log.Error("timeout close failed", "order_no", no, "err", err)
		return expireOpen, nil
	}
	switch outcome {
	case orderpay.ClosePaid:
		// Its result may have been lost in a crash: pull it rather than wait for the
		// broker to redeliver it.
		if err := s.pullResult(ctx, no); err != nil {
			s.log.Warn("pulling the payment result failed", "order_no", no, "err", err)
		}
		return expirePaid, nil
	case orderpay.CloseUnknown, orderpay.CloseNotPaidYet:
		return expireOpen, nil
	}
	o, err := s.cfg.Store.Order(ctx, no)
	if err != nil {
		return expireNone, err
	}
	err = s.cancel(ctx, o, "system", "unpaid at the deadline "+o.PayDeadline.UTC().Format(time.RFC3339))
	switch orderpay.ErrorCode(err) {
	case "":
		return expireCancelled, nil
	case orderpay.ECONFLICT: // paid or cancelled meanwhile
		return expireNone, nil
	default:
		return expireNone, err
	}
}

// cancel moves a PENDING_PAYMENT order to CANCELLED, releases the stock it holds, gives its
// coupon back and writes order.cancelled, in one transaction.
func (s *Service) cancel(ctx context.Context, o *orderpay.Order, actor, reason string) error {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		now := orderpay.Now(s.cfg.Clock)
		to, err := orderpay.OrderMachine.Next(o.Status, orderpay.OrderEventCancel)
		if err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: o.No, From: o.Status, To: to, Event: orderpay.OrderEventCancel,
			At: now, Actor: actor, Reason: reason}); err != nil {
			return err
		}
		for _, it := range inLockOrder(o.Items) {
			if err := s.releaseAtCancel(ctx, tx, o, it, now); err != nil {
				return err
			}
			if err := uncountPurchase(ctx, tx, o.BuyerID, it); err != nil {
				return err
			}
		}
		if err := restoreCoupon(ctx, tx, o, now); err != nil {
			return err
		}
		c := *o
		c.Status = to
		return tx.Enqueue(ctx, orderMessage(orderpay.SubjectOrderCancelled, &c, now))
	})
	if err == nil {
		s.cfg.OutboxWritten()
		s.log.Info("order cancelled", "order_no", o.No, "actor", actor, "reason", reason)
	}
	return err
}

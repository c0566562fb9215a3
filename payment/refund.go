package payment

import (
	"context"
	"sync"
	"time"

	"orderpay"
)

// AutoRefundNo is the refund number of the automatic full refund of one paid attempt:
// derived from the attempt, so that every path that decides to refund it (a late
// notification, a duplicate, the order system refusing it, a retry after a crash) names the
// same refund, and the channel refunds it once.
func AutoRefundNo(outTradeNo string) string { return outTradeNo + "R1" }

// createRefund records the full refund of a paid attempt in tx, due at once. If it exists
// already, that one is returned: a refund is decided once.
func (s *Service) createRefund(ctx context.Context, tx orderpay.Tx, co *orderpay.ChannelOrder, reason string, now time.Time) (*orderpay.ChannelRefund, error) {
	r := &orderpay.ChannelRefund{OutRefundNo: AutoRefundNo(co.OutTradeNo), OutTradeNo: co.OutTradeNo, PaymentNo: co.PaymentNo,
		Channel: co.Channel, Amount: co.Amount, Reason: reason, Status: orderpay.ChannelRefundPending, NextAt: now,
		CreatedAt: now, UpdatedAt: now}
	err := tx.CreateChannelRefund(ctx, r)
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		return tx.ChannelRefund(ctx, r.OutRefundNo)
	}
	return r, err
}

// RefundRejected sends back a payment the order system refused (its order was cancelled
// before the payment arrived). It is idempotent: both the direct call and the bus consumer
// may ask.
func (s *Service) RefundRejected(ctx context.Context, ev orderpay.PaymentSucceeded, reason string) error {
	var created bool
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		created = false
		co, err := tx.ChannelOrder(ctx, ev.OutTradeNo)
		if err != nil {
			return err
		}
		if co.Status != orderpay.ChannelOrderSuccess || co.PaymentNo != ev.PaymentNo {
			return orderpay.Errorf(orderpay.ECONFLICT, "attempt %s is %s, not a paid attempt of %s", co.OutTradeNo, co.Status, ev.PaymentNo)
		}
		if _, err := tx.ChannelRefund(ctx, AutoRefundNo(co.OutTradeNo)); err == nil {
			return nil
		}
		created = true
		_, err = s.createRefund(ctx, tx, co, reason, orderpay.Now(s.cfg.Clock))
		return err
	})
	if err == nil && created {
		s.cfg.Observer.AutoRefund(ev.Channel, reason)
		s.log.Error("payment refused by the order system: refunding it", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo,
			"out_trade_no", ev.OutTradeNo, "amount", ev.Amount, "reason", reason)
		s.cfg.RefundCreated()
	}
	return err
}

// RefundResult counts what one run of the refund worker did.
type RefundResult struct {
	Succeeded, Pending, Failed, Unknown int
}

// RefundDue works on every refund that is due: it sends a PENDING one (again, under the same
// number, if an earlier answer was unknown) and queries a PROCESSING one, until it is final.
// A refund is never assumed: only the channel's verified word moves it to SUCCESS or FAILED
// (DESIGN §5).
func (s *Service) RefundDue(ctx context.Context, limit, workers int) (RefundResult, error) {
	var res RefundResult
	due, err := s.cfg.Store.DueChannelRefunds(ctx, orderpay.Now(s.cfg.Clock), limit)
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	err = orderpay.ForEach(ctx, due, workers, func(ctx context.Context, r orderpay.ChannelRefund) error {
		outcome, err := s.workRefund(ctx, &r)
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch outcome {
		case orderpay.OutcomeRefunded:
			res.Succeeded++
		case orderpay.OutcomeRefundPending:
			res.Pending++
		case orderpay.OutcomeRejected:
			res.Failed++
		default:
			res.Unknown++
		}
		return nil
	})
	return res, err
}

func (s *Service) workRefund(ctx context.Context, r *orderpay.ChannelRefund) (orderpay.Outcome, error) {
	ch, ok := s.cfg.Channels[r.Channel]
	if !ok {
		return "", orderpay.Errorf(orderpay.EINTERNAL, "refund %s: no channel %q", r.OutRefundNo, r.Channel)
	}
	var res orderpay.RefundResult
	if r.Status == orderpay.ChannelRefundPending {
		co, err := s.cfg.Store.ChannelOrder(ctx, r.OutTradeNo)
		if err != nil {
			return "", err
		}
		res = ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: r.OutTradeNo, OutRefundNo: r.OutRefundNo, Amount: r.Amount,
			Total: co.Amount, Reason: r.Reason})
	} else {
		res = ch.QueryRefund(ctx, r.OutTradeNo, r.OutRefundNo)
	}
	log := s.log.With("out_refund_no", r.OutRefundNo, "out_trade_no", r.OutTradeNo, "payment_no", r.PaymentNo, "channel", r.Channel)
	now := orderpay.Now(s.cfg.Clock)
	change := orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, At: now, Actor: "channel:" + r.Channel,
		Reason: res.Detail, Raw: res.Raw, NextAt: now}
	switch res.Outcome {
	case orderpay.OutcomeRefunded:
		err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return s.refundSucceeded(ctx, tx, r, change) })
		if err == nil {
			log.Info("refund succeeded", "amount", r.Amount, "reason", r.Reason)
			s.cfg.OutboxWritten()
		}
		return res.Outcome, err
	case orderpay.OutcomeRejected:
		change.To, change.Event = orderpay.ChannelRefundFailed, orderpay.ChannelRefundEventFail
		log.Error("refund refused by the channel: an operator must act", "amount", r.Amount, "detail", res.Detail)
		err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			if err := tx.TransitionChannelRefund(ctx, change); err != nil {
				return err
			}
			p, err := tx.Payment(ctx, r.PaymentNo)
			if err != nil {
				return err
			}
			return s.refundFinal(ctx, tx, r, p, false, now)
		})
		if err == nil {
			s.cfg.OutboxWritten()
		}
		return res.Outcome, err
	case orderpay.OutcomeRefundPending:
		next := now.Add(s.refundBackoff(r.Attempts))
		if r.Status == orderpay.ChannelRefundPending {
			change.To, change.Event, change.NextAt = orderpay.ChannelRefundProcessing, orderpay.ChannelRefundEventAccept, next
			return res.Outcome, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, change) })
		}
		return res.Outcome, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, false, next, now)
		})
	default:
		// Unknown: resend (PENDING) or query (PROCESSING) later, under the same number.
		log.Warn("refund result unknown; will retry", "attempts", r.Attempts+1, "detail", res.Detail)
		return orderpay.OutcomeUnknown, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, true, now.Add(s.refundBackoff(r.Attempts)), now)
		})
	}
}

// refundSucceeded records, in tx, that the channel refunded r (change moves it from its
// status to SUCCESS): the payment counts the money, and whoever asked is told.
func (s *Service) refundSucceeded(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, change orderpay.ChannelRefundChange) error {
	change.To, change.Event = orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventSucceed
	if err := tx.TransitionChannelRefund(ctx, change); err != nil {
		return err
	}
	p, err := tx.Payment(ctx, r.PaymentNo)
	if err != nil {
		return err
	}
	// The payment's own refunded total counts refunds of the attempt that paid it; a
	// duplicate attempt's refund returns money the payment never counted.
	if p.PaidOutTradeNo == r.OutTradeNo {
		if err := tx.AddPaymentRefunded(ctx, p.No, r.Amount, change.At); err != nil {
			return err
		}
	}
	return s.refundFinal(ctx, tx, r, p, true, change.At)
}

// applyRefundNotification takes a verified refund notification as evidence of the refund's
// final state, once. A refund the channel says it made is recorded SUCCESS with the
// notification, in one transaction; a second delivery finds it so and changes nothing.
// One the channel says did not happen (closed, abnormal) is queried at once rather than
// taken from the notification: the refund worker's query decides, as for any refund.
// A notification for a refund orderpay did not make (one made in the merchant console) is
// recorded and acknowledged: reconciliation reports it.
func (s *Service) applyRefundNotification(ctx context.Context, co *orderpay.ChannelOrder, n *orderpay.Notification, rec orderpay.NotificationRecord) error {
	log := s.log.With("channel", n.Channel, "out_trade_no", n.OutTradeNo, "out_refund_no", n.OutRefundNo, "notify_id", n.NotifyID)
	record := func(tx orderpay.Tx) error { _, err := tx.RecordNotification(ctx, rec); return err }
	var applied, queryNow bool
	err := s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		applied, queryNow = false, false
		r, err := tx.ChannelRefund(ctx, n.OutRefundNo)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			log.Warn("refund notification for a refund orderpay did not make: recorded for reconciliation")
			return record(tx)
		}
		if err != nil {
			return err
		}
		if r.OutTradeNo != co.OutTradeNo {
			return orderpay.Errorf(orderpay.EINVALID, "refund %s is of trade %s, not %s", r.OutRefundNo, r.OutTradeNo, co.OutTradeNo)
		}
		if n.RefundAmount != 0 && n.RefundAmount != r.Amount {
			log.Error("refund notification of another amount: not applied", "notified", n.RefundAmount, "amount", r.Amount)
			return orderpay.Errorf(orderpay.EINVALID, "refund %s notified for %d fen, it is for %d", r.OutRefundNo, n.RefundAmount, r.Amount)
		}
		if err := record(tx); err != nil {
			return err
		}
		switch {
		case r.Status != orderpay.ChannelRefundPending && r.Status != orderpay.ChannelRefundProcessing:
			if (r.Status == orderpay.ChannelRefundSuccess) != (n.Outcome == orderpay.OutcomeRefunded) {
				log.Error("refund notification disagrees with the refund's final state", "status", r.Status, "notified", n.Outcome, "detail", n.Detail)
			}
			return nil // final already: a repeated or late notification
		case n.Outcome == orderpay.OutcomeRefunded:
			applied = true
			now := orderpay.Now(s.cfg.Clock)
			return s.refundSucceeded(ctx, tx, r, orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, At: now,
				Actor: "channel:" + n.Channel, Reason: "refund notification " + n.NotifyID, Raw: n.Raw, NextAt: now})
		default:
			queryNow = true
			now := orderpay.Now(s.cfg.Clock)
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, r.Unknown, now, now)
		}
	})
	switch {
	case err != nil:
	case applied:
		log.Info("refund succeeded (notification)")
		s.cfg.OutboxWritten()
	case queryNow:
		log.Warn("refund notification says it did not happen: querying it now", "outcome", n.Outcome, "detail", n.Detail)
		s.cfg.RefundCreated()
	}
	return err
}

// refundFinal tells whoever asked for a refund that it is final (RefundFinal) and writes
// refund.succeeded or refund.failed, in the transaction that made it so.
func (s *Service) refundFinal(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, p *orderpay.Payment, succeeded bool, now time.Time) error {
	if err := s.cfg.RefundFinal(ctx, tx, r, succeeded, now); err != nil {
		return err
	}
	subject := orderpay.SubjectRefundSucceeded
	if !succeeded {
		subject = orderpay.SubjectRefundFailed
	}
	return enqueueJSON(ctx, tx, subject, r.OutRefundNo, orderpay.RefundEventPayload{
		OutRefundNo: r.OutRefundNo, OutTradeNo: r.OutTradeNo, PaymentNo: r.PaymentNo, OrderNo: p.OrderNo,
		Channel: r.Channel, Amount: r.Amount, Reason: r.Reason, At: now}, now)
}

// refundBackoff is RefundRetry doubled per earlier attempt, at most RefundRetryMax.
func (s *Service) refundBackoff(attempts int) time.Duration {
	d := s.cfg.RefundRetry
	for i := 0; i < attempts && d < s.cfg.RefundRetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RefundRetryMax)
}

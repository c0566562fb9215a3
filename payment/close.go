package payment

import (
	"context"
	"errors"

	"orderpay"
)

// Close stops an order's payment (timeout close, or a buyer cancelling) and says what it
// found. For each attempt still open it asks the channel first, then closes (docs/design.md §5):
//
//  1. query: paid → the payment is applied (not closed) and the answer is ClosePaid;
//  2. not paid → close at the channel; closed → the attempt is CLOSED;
//  3. a close that cannot close an unscanned Alipay code ("not paid", nothing to close) is
//     final only once the deadline passed at precreate is behind us (plus DeadlineMargin):
//     before that the attempt stays open and the answer is CloseNotPaidYet;
//  4. any answer that is not definite leaves the attempt open: CloseUnknown, try later.
//
// When no attempt is left open, the payment is CLOSED and payment.closed is written. A
// payment that arrives afterwards anyway is a late payment, refunded by applyPaid.
func (s *Service) Close(ctx context.Context, orderNo string) (orderpay.CloseOutcome, error) {
	p, err := s.cfg.Store.PaymentByOrder(ctx, orderNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return orderpay.CloseDone, nil // never asked to pay: nothing was, or can be, paid
	}
	if err != nil {
		return "", err
	}
	switch p.Status {
	case orderpay.PaymentSuccess:
		return orderpay.ClosePaid, nil
	case orderpay.PaymentClosed, orderpay.PaymentFailed:
		return orderpay.CloseDone, nil
	}
	attempts, err := s.cfg.Store.ChannelOrders(ctx, p.No)
	if err != nil {
		return "", err
	}
	outcome := orderpay.CloseDone
	for i := range attempts {
		switch o, err := s.closeAttempt(ctx, p, &attempts[i]); {
		case err != nil:
			return "", err
		case o == orderpay.ClosePaid:
			return o, nil
		case o == orderpay.CloseUnknown:
			outcome = orderpay.CloseUnknown
		case o == orderpay.CloseNotPaidYet && outcome == orderpay.CloseDone:
			outcome = orderpay.CloseNotPaidYet
		}
	}
	if outcome != orderpay.CloseDone {
		return outcome, nil
	}
	err = s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		cur, err := tx.Payment(ctx, p.No)
		if err != nil {
			return err
		}
		if cur.Status != orderpay.PaymentUnpaid && cur.Status != orderpay.PaymentPaying {
			return nil
		}
		// Every attempt must still be final: one opened meanwhile (a pay request racing the
		// close) keeps the payment open for the next round.
		all, err := tx.ChannelOrders(ctx, p.No)
		if err != nil {
			return err
		}
		for _, a := range all {
			if a.Status == orderpay.ChannelOrderCreated || a.Status == orderpay.ChannelOrderPaying {
				outcome = orderpay.CloseUnknown
				return nil
			}
		}
		now := orderpay.Now(s.cfg.Clock)
		if err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: p.No, From: cur.Status, To: orderpay.PaymentClosed,
			Event: orderpay.PaymentEventClose, At: now, Actor: "payment-center", Reason: "every attempt closed, nothing paid"}); err != nil {
			return err
		}
		return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectPaymentClosed, p.No, orderpay.PaymentClosedPayload{PaymentNo: p.No, OrderNo: p.OrderNo, At: now}, now)
	})
	if err != nil {
		return "", err
	}
	if outcome == orderpay.CloseDone {
		s.cfg.OutboxWritten()
		// A payment that succeeded between the attempts' closes and this check was applied
		// by its own path; report what the payment is now.
		if cur, err := s.cfg.Store.Payment(ctx, p.No); err == nil && cur.Status == orderpay.PaymentSuccess {
			return orderpay.ClosePaid, nil
		}
	}
	return outcome, nil
}

// closeAttempt queries, then closes, one attempt of p.
func (s *Service) closeAttempt(ctx context.Context, p *orderpay.Payment, co *orderpay.ChannelOrder) (orderpay.CloseOutcome, error) {
	log := s.log.With("order_no", p.OrderNo, "payment_no", p.No, "out_trade_no", co.OutTradeNo, "channel", co.Channel)
	switch co.Status {
	case orderpay.ChannelOrderSuccess:
		if co.Method == orderpay.MethodBarcode && p.PaidOutTradeNo != co.OutTradeNo {
			// Paid, and refunded by the reverse that ended it (recordReversedPayment): it
			// holds nothing for the payment, which it never paid.
			if r, err := s.cfg.Store.ChannelRefund(ctx, ReverseRefundNo(co.OutTradeNo)); err == nil && r.Reason == orderpay.RefundReasonReversed {
				return orderpay.CloseDone, nil
			}
		}
		return orderpay.ClosePaid, nil
	case orderpay.ChannelOrderClosed, orderpay.ChannelOrderFailed:
		return orderpay.CloseDone, nil
	case orderpay.ChannelOrderCreated:
		// Never shown to the buyer (the code is returned only after it is stored as PAYING),
		// so nobody can pay it: close it without asking the channel.
		return s.markClosed(ctx, co, "never submitted", "")
	}
	ch, ok := s.cfg.Channels[co.Channel]
	if !ok {
		return "", orderpay.Errorf(orderpay.EINTERNAL, "attempt %s: no channel %q", co.OutTradeNo, co.Channel)
	}
	if co.Method == orderpay.MethodBarcode {
		// A barcode trade is ended by its reverse, which the channel accepts in any state.
		return s.reverseAttempt(ctx, co, "close")
	}
	q := s.query(ctx, co, "close")
	if done, err := s.applyQuery(ctx, co, q); done || err != nil {
		return orderpay.ClosePaid, err
	}
	if q.Outcome == orderpay.OutcomeUnknown {
		log.Warn("close: query result unknown", "detail", q.Detail)
		return orderpay.CloseUnknown, nil
	}
	// Closed under the account the trade was made under, as it was queried: another
	// account's "no such trade" would read as "nobody paid".
	c := orderpay.ChannelFor(ch, co.Method).Close(ctx, co.OutTradeNo)
	pastDeadline := !orderpay.Now(s.cfg.Clock).Before(p.PayDeadline.Add(s.cfg.DeadlineMargin))
	switch {
	case c.Outcome == orderpay.OutcomeClosed:
		return s.markClosed(ctx, co, "closed at the channel: "+c.Detail, c.Raw)
	case c.Outcome == orderpay.OutcomeNotPaid && pastDeadline:
		// Nothing to close (an Alipay code nobody scanned) and the deadline we passed at
		// precreate is behind us: nobody can pay it any more.
		return s.markClosed(ctx, co, "not paid, and past the deadline passed to the channel: "+c.Detail, c.Raw)
	case c.Outcome == orderpay.OutcomeNotPaid:
		return orderpay.CloseNotPaidYet, nil
	}
	// The close failed or its answer is unknown: the trade may have been paid meanwhile.
	// Ask again and decide (docs/design.md §5).
	log.Warn("close not confirmed; querying again", "detail", c.Detail)
	q = s.query(ctx, co, "close")
	if done, err := s.applyQuery(ctx, co, q); done || err != nil {
		return orderpay.ClosePaid, err
	}
	switch {
	case q.Outcome == orderpay.OutcomeClosed:
		return s.markClosed(ctx, co, "closed at the channel (query after close): "+q.Detail, q.Raw)
	case q.Outcome == orderpay.OutcomeNotPaid && pastDeadline:
		// Still not paid, and the deadline passed at precreate is behind us: a trade that
		// never came into existence (a precreate that did not take effect), or one the
		// channel keeps open a little longer than asked (WeChat's one-minute floor). A
		// payment that still arrives is a late payment, and is refunded.
		return s.markClosed(ctx, co, "not paid, past the deadline, and the close did not confirm: "+q.Detail, q.Raw)
	}
	return orderpay.CloseUnknown, nil
}

// applyQuery applies a query that says paid, and reports whether it did.
func (s *Service) applyQuery(ctx context.Context, co *orderpay.ChannelOrder, q orderpay.QueryResult) (bool, error) {
	if q.Outcome != orderpay.OutcomePaid {
		return false, nil
	}
	if q.Amount != co.Amount {
		// A verified answer for another amount: never applied as a payment of this one.
		s.log.Error("query says paid for another amount: not applied", "out_trade_no", co.OutTradeNo, "payment_no", co.PaymentNo, "channel_amount", q.Amount, "amount", co.Amount)
		return false, orderpay.Errorf(orderpay.ECONFLICT, "trade %s paid %d fen, expected %d", co.OutTradeNo, q.Amount, co.Amount)
	}
	if co.Method == orderpay.MethodBarcode {
		// After a reverse that may have refunded it, the payment a query shows may be
		// gone: only the reverse, sent again, says (reverseAttempt).
		if reversed, err := s.reverseMayHaveTakenEffect(ctx, co); err != nil || reversed {
			if reversed {
				s.log.Warn("barcode query says paid after a reverse that may have refunded it: not applied; the reverse is sent again",
					"out_trade_no", co.OutTradeNo, "payment_no", co.PaymentNo)
			}
			return false, err
		}
	}
	err := s.applyPaid(ctx, co, paidEvidence{tradeNo: q.TradeNo, paidAt: q.PaidAt, source: "query", raw: q.Raw})
	if errors.Is(err, errReverseOnItsWay) {
		s.log.Warn("barcode query says paid while a reverse is on its way: not applied; the reverse decides",
			"out_trade_no", co.OutTradeNo, "payment_no", co.PaymentNo)
		return false, nil
	}
	return true, err
}

// markClosed moves an open attempt to CLOSED. If it moved on meanwhile (a notification
// applied a payment), that is what is reported.
func (s *Service) markClosed(ctx context.Context, co *orderpay.ChannelOrder, reason, raw string) (orderpay.CloseOutcome, error) {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: co.OutTradeNo, From: co.Status,
			To: orderpay.ChannelOrderClosed, Event: orderpay.ChannelOrderEventClose, At: orderpay.Now(s.cfg.Clock),
			Actor: "payment-center", Reason: reason, Raw: raw})
	})
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		cur, rerr := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
		if rerr != nil {
			return "", rerr
		}
		if cur.Status == orderpay.ChannelOrderSuccess {
			return orderpay.ClosePaid, nil
		}
		return orderpay.CloseUnknown, nil
	}
	if err != nil {
		return "", err
	}
	return orderpay.CloseDone, nil
}

// QueryAttempt asks the channel about one attempt and applies a payment it reports (trigger
// names who asked, for the observer). It reports the channel's outcome. The scan
// compensation and the admin use it.
func (s *Service) QueryAttempt(ctx context.Context, outTradeNo, trigger string) (orderpay.Outcome, error) {
	co, err := s.cfg.Store.ChannelOrder(ctx, outTradeNo)
	if err != nil {
		return "", err
	}
	q := s.query(ctx, co, trigger)
	_, err = s.applyQuery(ctx, co, q)
	return q.Outcome, err
}

// Result is the order's payment success if it succeeded, else nil: what payment.succeeded
// said, read back from the payment and its paid attempt.
func (s *Service) Result(ctx context.Context, orderNo string) (*orderpay.PaymentSucceeded, error) {
	ev, _, err := s.resultByOrder(ctx, orderNo)
	return ev, err
}

// resultByOrder is Result, with the payment's attempts as read (none when the order has
// no payment yet): one read.
func (s *Service) resultByOrder(ctx context.Context, orderNo string) (*orderpay.PaymentSucceeded, []orderpay.ChannelOrder, error) {
	p, attempts, err := s.cfg.Store.PaymentWithAttempts(ctx, orderNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return paidResult(p, attempts), attempts, nil
}

// paidResult is Result of the payment p and its attempts, as read together.
func paidResult(p *orderpay.Payment, attempts []orderpay.ChannelOrder) *orderpay.PaymentSucceeded {
	if p.Status != orderpay.PaymentSuccess {
		return nil
	}
	for _, co := range attempts {
		if co.OutTradeNo == p.PaidOutTradeNo {
			return &orderpay.PaymentSucceeded{PaymentNo: p.No, OrderNo: p.OrderNo, Amount: p.Amount, Channel: p.PaidChannel,
				OutTradeNo: p.PaidOutTradeNo, TradeNo: co.TradeNo, PaidAt: co.PaidAt}
		}
	}
	return nil // cannot be: a payment is SUCCESS only with its paid attempt, in one transaction
}

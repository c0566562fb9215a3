package payment

import (
	"context"
	"fmt"
	"log/slog"
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
	// Succeeded: the money went back. Pending: accepted, not final yet. Retrying: refused
	// for now, sent again later. NeedsAction: put before an operator. Unknown: no definite
	// answer, sent again or queried later. Skipped: another worker (or instance) claimed
	// it first, or it moved on.
	Succeeded, Pending, Retrying, NeedsAction, Unknown, Skipped int
}

// RefundClaimDefault is how long a worker's claim of a refund holds (ClaimChannelRefund):
// its channel call is cut off well before (refundCallShare of it), so that no answer can
// come after the claim lapsed and another worker may have sent the refund again.
const RefundClaimDefault = 2 * time.Minute

// refundCallShare is the share of a claim a refund's channel call may take.
const refundCallShare = 2

// RefundDue works on every refund that is due: it sends a PENDING one (again, under the same
// number, after an unknown answer or a refusal for now) and queries a PROCESSING one, until
// it is final. A refund is never assumed: only the channel's verified word moves it to
// SUCCESS, and only an operator settles one the channel will not make (docs/design.md §5).
func (s *Service) RefundDue(ctx context.Context, limit, workers int) (RefundResult, error) {
	var res RefundResult
	due, err := s.cfg.Store.DueChannelRefunds(ctx, orderpay.Now(s.cfg.Clock), limit)
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	err = orderpay.ForEach(ctx, due, workers, func(ctx context.Context, r orderpay.ChannelRefund) error {
		// Claimed first: of two workers, on one instance or two, that read it due, one
		// sends it and the other leaves it. Two sends at once could be answered apart (one
		// refused for now, one made), and the refusal recorded over the refund.
		now := orderpay.Now(s.cfg.Clock)
		claim, err := s.claimRefund(ctx, &r, now)
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			mu.Lock()
			res.Skipped++
			mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.RefundClaim/refundCallShare)
		outcome, err := s.workRefund(callCtx, &r, claim)
		cancel()
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
		case orderpay.OutcomeRefundRetry:
			res.Retrying++
		case orderpay.OutcomeRejected, orderpay.OutcomeRefundAbnormal:
			res.NeedsAction++
		default:
			res.Unknown++
		}
		return nil
	})
	return res, err
}

// claimRefund claims r, read due, for this worker until now plus the claim's length.
func (s *Service) claimRefund(ctx context.Context, r *orderpay.ChannelRefund, now time.Time) (int, error) {
	var claim int
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
		claim, err = tx.ClaimChannelRefund(ctx, r.OutRefundNo, r.Status, r.Attempts, now.Add(s.cfg.RefundClaim), now)
		return err
	})
	return claim, err
}

// workRefund sends r (PENDING) or queries it (PROCESSING) once, under the worker's claim,
// and records what the channel said, by its class (orderpay.RefundResult):
//   - refunded: SUCCESS, the payment counts the money, whoever asked is told;
//   - pending: PROCESSING, queried again later;
//   - refused for now: sent again under the same number on the retry plan, each refusal in
//     the refund's history; when the plan runs out, before an operator;
//   - refused for good, or ended abnormally: before an operator at once;
//   - unknown: sent again (PENDING) or queried (PROCESSING) later, never taken as failed.
//
// It reports the class it acted on (a refusal for now whose retries ran out reports
// Rejected, like any refund put before an operator).
//
// Every answer but "refunded" is recorded only while the claim is still the worker's; the
// channel's word that the money went back is recorded whatever became of the refund
// meanwhile (recordRefunded).
func (s *Service) workRefund(ctx context.Context, r *orderpay.ChannelRefund, claim int) (orderpay.Outcome, error) {
	ch, ok := s.cfg.Channels[r.Channel]
	if !ok {
		return "", orderpay.Errorf(orderpay.EINTERNAL, "refund %s: no channel %q", r.OutRefundNo, r.Channel)
	}
	// The refunded attempt says the trade's total, and the account its method's trades are
	// made under, which both the refund and its queries go to (orderpay.ChannelFor).
	co, err := s.cfg.Store.ChannelOrder(ctx, r.OutTradeNo)
	if err != nil {
		return "", err
	}
	ch = orderpay.ChannelFor(ch, co.Method)
	var res orderpay.RefundResult
	// A refund the channel accepted is queried; every third look sends it again instead,
	// under its own number: Alipay's query cannot tell a refund not settled yet from one it
	// lost or that failed after acceptance (no refund_status either way), and a resend of a
	// refund it has never refunds twice (docs/channels.md §A3).
	resend := r.Status == orderpay.ChannelRefundProcessing && r.Attempts%3 == 2
	if r.Status == orderpay.ChannelRefundPending || resend {
		res = ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: r.OutTradeNo, OutRefundNo: r.OutRefundNo, Amount: r.Amount,
			Total: co.Amount, Reason: r.Reason})
	} else {
		res = ch.QueryRefund(ctx, r.OutTradeNo, r.OutRefundNo)
	}
	if r.Status != orderpay.ChannelRefundPending && (res.Outcome == orderpay.OutcomeRefundRetry || (resend && res.Outcome == orderpay.OutcomeRejected)) {
		// A refusal of a resend of an accepted refund, or a query that says "refused for
		// now", says nothing about the refund the channel holds: it is followed as before.
		res.Outcome = orderpay.OutcomeUnknown
	}
	s.cfg.Observer.RefundAnswer(r.Channel, res.Outcome)
	log := s.log.With("out_refund_no", r.OutRefundNo, "out_trade_no", r.OutTradeNo, "payment_no", r.PaymentNo, "channel", r.Channel)
	now := orderpay.Now(s.cfg.Clock)
	change := orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, At: now, Actor: "channel:" + r.Channel,
		Reason: res.Detail, Raw: res.Raw, NextAt: now, Claim: claim}
	switch res.Outcome {
	case orderpay.OutcomeRefunded:
		change.Claim = 0
		applied, twice, err := s.recordRefunded(context.WithoutCancel(ctx), r.OutRefundNo, change)
		switch {
		case err != nil:
		case twice:
			log.Error("the channel refunded a refund an operator had already settled outside it: the buyer got the money twice")
		case applied:
			log.Info("refund succeeded", "amount", r.Amount, "reason", r.Reason, "retried", r.Retried)
			s.cfg.OutboxWritten()
		}
		return res.Outcome, err
	}
	// The call is over: what it said is recorded even if its time ran out just now.
	ctx = context.WithoutCancel(ctx)
	switch res.Outcome {
	case orderpay.OutcomeRejected:
		return res.Outcome, s.escalate(ctx, r, change, "refused for good by the channel (a wrong amount or trade is a bug): "+res.Detail)
	case orderpay.OutcomeRefundAbnormal:
		return res.Outcome, s.escalate(ctx, r, change, "ended at the channel without reaching the buyer: "+res.Detail)
	case orderpay.OutcomeRefundRetry:
		return s.retryLater(ctx, r, change, res.Detail, log)
	case orderpay.OutcomeRefundPending:
		next := now.Add(s.refundBackoff(r.Attempts))
		if r.Status == orderpay.ChannelRefundPending {
			change.To, change.Event, change.NextAt = orderpay.ChannelRefundProcessing, orderpay.ChannelRefundEventAccept, next
			return res.Outcome, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, change) })
		}
		return res.Outcome, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, claim, false, next, now)
		})
	default:
		// Unknown: resend (PENDING) or query (PROCESSING) later, under the same number.
		log.Warn("refund result unknown; will retry", "attempts", r.Attempts+1, "detail", res.Detail)
		return orderpay.OutcomeUnknown, s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, claim, true, now.Add(s.refundBackoff(r.Attempts)), now)
		})
	}
}

// retryLater records the channel's refusal for now of a refund it was sent (change is from
// PENDING) and when it is sent again, under the same number, on the retry plan; the refusal
// after which no try fits the plan's window puts it before an operator instead.
func (s *Service) retryLater(ctx context.Context, r *orderpay.ChannelRefund, change orderpay.ChannelRefundChange, detail string, log *slog.Logger) (orderpay.Outcome, error) {
	tries, since := r.Tries+1, r.RetryingSince
	if r.Tries == 0 || since.IsZero() {
		since = change.At
	}
	next, ok := s.cfg.RefundRetryPlan.Next(tries, since, change.At)
	if !ok {
		return orderpay.OutcomeRejected, s.escalate(ctx, r, change, fmt.Sprintf("the channel refused it %d times over %s, the last: %s",
			tries, change.At.Sub(since).Round(time.Second), detail))
	}
	change.To, change.Event, change.NextAt = orderpay.ChannelRefundPending, orderpay.ChannelRefundEventRetry, next
	change.Tries, change.RetryingSince, change.Problem = tries, since, detail
	change.Reason = fmt.Sprintf("refused for now (%s); try %d at %s", detail, tries+1, next.UTC().Format(time.RFC3339))
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, change) })
	if err == nil {
		log.Warn("refund refused for now: it is sent again under the same number", "amount", r.Amount, "detail", detail,
			"refusals", tries, "next_try", next)
	}
	return orderpay.OutcomeRefundRetry, err
}

// escalate puts a refund that cannot end by itself before an operator (change is from its
// status): NEEDS_ACTION with the problem, refund.needs_action in the same transaction, and
// one error line in the log. The money stays owed; whoever asked for it is not told it
// ended, because it has not.
func (s *Service) escalate(ctx context.Context, r *orderpay.ChannelRefund, change orderpay.ChannelRefundChange, problem string) error {
	change.To, change.Event, change.Problem = orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventEscalate, problem
	if change.Reason == "" {
		change.Reason = problem
	}
	var orderNo string
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.TransitionChannelRefund(ctx, change); err != nil {
			return err
		}
		p, err := tx.Payment(ctx, r.PaymentNo)
		if err != nil {
			return err
		}
		orderNo = p.OrderNo
		return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectRefundNeedsAction, fmt.Sprintf("%s:%d", r.OutRefundNo, r.Attempts+1), orderpay.RefundEventPayload{
			OutRefundNo: r.OutRefundNo, OutTradeNo: r.OutTradeNo, PaymentNo: r.PaymentNo, OrderNo: p.OrderNo, Channel: r.Channel,
			Amount: r.Amount, Reason: r.Reason, Status: orderpay.ChannelRefundNeedsAction, Problem: problem, At: change.At}, change.At)
	})
	if err == nil {
		s.log.Error("refund needs an operator: the money is owed and will not go back by itself", "out_refund_no", r.OutRefundNo,
			"order_no", orderNo, "out_trade_no", r.OutTradeNo, "channel", r.Channel, "amount", r.Amount, "reason", r.Reason, "problem", problem)
		s.cfg.OutboxWritten()
	}
	return err
}

// recordRefunded records the channel's verified word that it made the refund no, from
// whatever state the refund is in when it commits (change.From is ignored): one that still
// owes the money (on its way, or in the operators' queue) becomes SUCCESS, the payment
// counts the money, and whoever asked is told; one already SUCCESS is left (applied
// false); one an operator settled outside the channel is left RESOLVED and reported
// (twice): the buyer was paid twice.
func (s *Service) recordRefunded(ctx context.Context, no string, change orderpay.ChannelRefundChange) (applied, twice bool, err error) {
	err = s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		applied, twice = false, false
		r, err := tx.ChannelRefund(ctx, no)
		if err != nil {
			return err
		}
		switch r.Status {
		case orderpay.ChannelRefundSuccess:
			return nil
		case orderpay.ChannelRefundResolved:
			twice = true
			return nil
		}
		applied = true
		c := change
		c.From = r.Status
		return s.refundSucceeded(ctx, tx, r, c)
	})
	return applied, twice, err
}

// refundSucceeded records, in tx, that the channel refunded r (change moves it from its
// status to SUCCESS): the payment counts the money, and whoever asked is told.
func (s *Service) refundSucceeded(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, change orderpay.ChannelRefundChange) error {
	change.To, change.Event = orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventSucceed
	if err := tx.TransitionChannelRefund(ctx, change); err != nil {
		return err
	}
	return s.moneyBack(ctx, tx, r, change)
}

// moneyBack records, in tx, that r's money is back (change made it SUCCESS or RESOLVED): the
// payment's refunded total counts it if it refunds the attempt that paid (a duplicate
// attempt's refund returns money the payment never counted), whoever asked for it moves
// (RefundFinal), and refund.succeeded says how it went back.
func (s *Service) moneyBack(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, change orderpay.ChannelRefundChange) error {
	p, err := tx.Payment(ctx, r.PaymentNo)
	if err != nil {
		return err
	}
	if change.To == orderpay.ChannelRefundSuccess {
		if err := s.channelRefunded(ctx, tx, r); err != nil {
			return err
		}
	}
	if p.PaidOutTradeNo == r.OutTradeNo {
		if err := tx.AddPaymentRefunded(ctx, p.No, r.Amount, change.At); err != nil {
			return err
		}
	}
	done := *r
	done.Status, done.RefundedAt = change.To, change.At
	done.ResolvedBy, done.ResolvedRef, done.ResolvedNote = change.ResolvedBy, change.ResolvedRef, change.ResolvedNote
	if err := s.cfg.RefundFinal(ctx, tx, &done, change.At); err != nil {
		return err
	}
	return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectRefundSucceeded, r.OutRefundNo, orderpay.RefundEventPayload{
		OutRefundNo: r.OutRefundNo, OutTradeNo: r.OutTradeNo, PaymentNo: r.PaymentNo, OrderNo: p.OrderNo,
		Channel: r.Channel, Amount: r.Amount, Reason: r.Reason, Status: change.To, ResolvedBy: change.ResolvedBy,
		ResolvedRef: change.ResolvedRef, At: change.At}, change.At)
}

// channelRefunded records, in tx, that the channel itself made r (not an operator outside
// it): the attempt counts the amount (ChannelRefunded), and when the attempt recorded its fee
// and its channel has a contract, r records the share of the fee it expects back
// (RefundFeeShare, or 0 when the contract says refunds return none). What the channel
// refunded of the attempt before, and the shares given back with it, are read after the
// attempt's row is locked, so that two refunds of one attempt settling at once are reckoned
// one after the other and their shares never give back more than the fee.
func (s *Service) channelRefunded(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund) error {
	before, sharesBefore, err := tx.AddChannelRefunded(ctx, r.OutTradeNo, r.OutRefundNo, r.Amount)
	if err != nil {
		return err
	}
	co, err := tx.ChannelOrder(ctx, r.OutTradeNo)
	if err != nil {
		return err
	}
	rule, ok := s.cfg.Fees.Rule(co.Channel)
	if !co.FeeRecorded || !ok {
		return nil // reconciliation reckons the share from the contract, if there is one
	}
	var share int64
	if rule.RefundReturnsFee {
		share = orderpay.RefundFeeShare(co.Fee, co.Amount, r.Amount, before, sharesBefore, rule.RoundingRule())
	}
	return tx.SetChannelRefundFeeBack(ctx, r.OutRefundNo, share)
}

// applyRefundNotification takes a verified refund notification as evidence of the refund's
// state, once, and reports whether it changed anything (false: a repeat, or news already
// known). A refund the channel says it made is recorded SUCCESS with the notification, in one
// transaction, from any state that still owes the money (the operators' queue included: the
// merchant platform may have settled an abnormal refund); a second delivery finds it so and
// changes nothing. One the channel says did not happen (closed, abnormal) is queried at once
// rather than taken from the notification: the refund worker's query decides, as for any
// refund. A notification for a refund orderpay did not make (one made in the merchant
// console) is recorded and acknowledged: reconciliation reports it.
func (s *Service) applyRefundNotification(ctx context.Context, co *orderpay.ChannelOrder, n *orderpay.Notification, rec orderpay.NotificationRecord) (bool, error) {
	log := s.log.With("channel", n.Channel, "out_trade_no", n.OutTradeNo, "out_refund_no", n.OutRefundNo, "notify_id", n.NotifyID)
	record := func(tx orderpay.Tx) error { return tx.RecordNotification(ctx, rec) }
	var applied, queryNow, twice bool
	err := s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		applied, queryNow, twice = false, false, false
		r, err := tx.ChannelRefund(ctx, n.OutRefundNo)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			log.Warn("refund notification for a refund orderpay did not make: recorded for reconciliation")
			applied = true
			kept := rec
			kept.Raw = n.Raw // no transition keeps its body: the record does
			return tx.RecordNotification(ctx, kept)
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
		refunded := n.Outcome == orderpay.OutcomeRefunded
		switch {
		case r.Status == orderpay.ChannelRefundSuccess:
			if !refunded {
				log.Error("refund notification disagrees with the refund's final state", "status", r.Status, "notified", n.Outcome, "detail", n.Detail)
			}
			return nil // a repeated or late notification
		case r.Status == orderpay.ChannelRefundResolved:
			twice = refunded
			return nil
		case refunded:
			applied = true
			now := orderpay.Now(s.cfg.Clock)
			return s.refundSucceeded(ctx, tx, r, orderpay.ChannelRefundChange{OutRefundNo: r.OutRefundNo, From: r.Status, At: now,
				Actor: "channel:" + n.Channel, Reason: "refund notification " + n.NotifyID, Raw: n.Raw, NextAt: now})
		case r.Status == orderpay.ChannelRefundNeedsAction:
			return nil // the operators' queue knows already
		default:
			applied, queryNow = true, true
			now := orderpay.Now(s.cfg.Clock)
			return tx.RescheduleChannelRefund(ctx, r.OutRefundNo, r.Status, 0, r.Unknown, now, now)
		}
	})
	switch {
	case err != nil:
	case twice:
		log.Error("the channel refunded a refund an operator had already settled outside it: the buyer got the money twice")
	case queryNow:
		log.Warn("refund notification says it did not happen: querying it now", "outcome", n.Outcome, "detail", n.Detail)
		s.cfg.RefundCreated()
	case applied:
		log.Info("refund succeeded (notification)")
		s.cfg.OutboxWritten()
	}
	return applied, err
}

// refundBackoff is RefundRetry doubled per earlier attempt, at most RefundRetryMax.
func (s *Service) refundBackoff(attempts int) time.Duration {
	d := s.cfg.RefundRetry
	for i := 0; i < attempts && d < s.cfg.RefundRetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RefundRetryMax)
}

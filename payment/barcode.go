package payment

import (
	"context"
	"errors"
	"time"

	"orderpay"
)

// Barcode payments (docs/barcode.md): a till scans the buyer's payment code, and the
// channel's answer to the payment call is often "the buyer is still confirming" or nothing
// at all. Every barcode payment is an attempt of the one flow (one payment, its attempts,
// the PAYING lock, the pending query that is its safety net, applyPaid, refunds); what is
// its own is the loop that ends it:
//
//  1. the attempt is written PAYING, with its pending query and the till's row, before
//     the channel hears of it: a process that dies at any later step leaves a row the
//     safety net ends;
//  2. the payment call: a refusal ends it (REFUSED); "paid" is confirmed by a query before
//     it is believed; anything else is unknown;
//  3. a query every BarcodeQueryEvery until the buyer has had the till's wait less
//     BarcodeQueryEvery (30 s of 35 s by default);
//  4. then the trade is ended at the channel, right after a last query: Alipay's cancel,
//     WeChat's reverse (reverseAttempt). A channel that says "not now" (WeChat while the
//     buyer is paying, or within 15 s; Alipay retry_flag=Y) or does not answer is asked
//     again until the wait is over;
//  5. what is not ended by then is UNKNOWN to the till, and the safety net goes on with it
//     (RunQuery: query, and reverse once past the wait) until it ends.
//
// A reverse of a trade the buyer paid meanwhile refunds it; Alipay says so (action=refund)
// and the attempt is recorded paid and refunded, in one transaction (recordReversedPayment).

// barcodeWait is the till's wait, within its bounds.
func (s *Service) barcodeWait(w time.Duration) time.Duration {
	if w == 0 {
		w = s.cfg.BarcodeWait
	}
	return min(max(w, orderpay.BarcodeBoundMin), orderpay.BarcodeBoundMax)
}

// barcodeGiveUp is when the buyer has had their time, for an attempt submitted at start:
// the wait less one query interval, so that the reverse and its retries fit in the wait.
func barcodeGiveUp(start time.Time, wait time.Duration) time.Time {
	return start.Add(wait - orderpay.BarcodeQueryEvery)
}

// barcodeAdapter is the adapter that takes and ends channel's barcode trades (the account
// they are made under, orderpay.ChannelFor), or nil if channel is not configured or takes
// none.
func (s *Service) barcodeAdapter(channel string) (orderpay.Channel, orderpay.Reverser) {
	ch, ok := s.cfg.Channels[channel]
	if !ok {
		return nil, nil
	}
	sub := orderpay.ChannelFor(ch, orderpay.MethodBarcode)
	if rv, ok := sub.(orderpay.Reverser); ok {
		return sub, rv
	}
	return nil, nil
}

// PayBarcode takes a barcode payment for req.OrderNo and waits for its end, at most the
// till's wait (then it is UNKNOWN, and the payment center ends it in the background). A
// request whose Idempotency-Key (req.Till) made a payment before gets that payment as it
// now stands, after waiting for its end as long; the same key with another request is
// EIDEMPOTENCY. Nothing is written for a code that is no channel's, or for a channel that
// is not configured or takes no barcode payments.
func (s *Service) PayBarcode(ctx context.Context, req orderpay.BarcodeRequest) (*orderpay.BarcodeResult, error) {
	channel, err := orderpay.BarcodeChannel(req.AuthCode)
	if err != nil {
		return nil, err
	}
	if _, ok := s.cfg.Channels[channel]; !ok {
		return nil, orderpay.Errorf(orderpay.EINVALID, "auth_code: a %s code, and %s is not configured here", channel, channel)
	}
	sub, _ := s.barcodeAdapter(channel)
	if sub == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "auth_code: %s here takes no barcode payments", channel)
	}
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the store keeps no till payments")
	}
	wait := s.barcodeWait(req.Wait)
	started := orderpay.Now(s.cfg.Clock)
	// The loop goes on if the till hangs up: it ends the trade either way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+5*time.Second)
	defer cancel()
	for range 3 {
		prior, err := ts.TillPaymentByKey(ctx, req.Till.AppID, req.Till.IdempotencyKey)
		switch {
		case err == nil:
			if prior.RequestHash != req.Till.RequestHash {
				return nil, orderpay.Errorf(orderpay.EIDEMPOTENCY, "Idempotency-Key %q was used for another payment", req.Till.IdempotencyKey)
			}
			res, err := s.awaitBarcode(ctx, prior, started.Add(wait))
			if res != nil {
				res.Replayed = true
			}
			return res, err
		case orderpay.ErrorCode(err) != orderpay.ENOTFOUND:
			return nil, err
		}
		co, err := s.openBarcode(ctx, ts, req, channel)
		if errors.Is(err, errTillKeyTaken) {
			continue // a concurrent request with the same key: its payment is read next
		}
		if c := orderpay.ErrorCode(err); c == orderpay.ECONFLICT || c == orderpay.EUNAVAILABLE {
			// The payment's lock, or its one open barcode attempt, may be a concurrent
			// request's with the same key, committed since: if so, that is this payment.
			if _, kerr := ts.TillPaymentByKey(ctx, req.Till.AppID, req.Till.IdempotencyKey); kerr == nil {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		return s.runBarcode(ctx, sub, co, req, started, wait)
	}
	return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "the payment could not be stored; retry the same request")
}

var errTillKeyTaken = errors.New("the till's Idempotency-Key is taken")

// errReverseOnItsWay: a barcode payment is not applied while a reverse of its trade may
// have taken effect; the reverse, sent again, says whether the payment went back.
var errReverseOnItsWay = errors.New("a reverse of the trade may have taken effect")

// checkNoReverse is errReverseOnItsWay if a reverse of the barcode attempt outTradeNo is
// marked on its way, as tx reads it.
func checkNoReverse(ctx context.Context, tx orderpay.Tx, outTradeNo string) error {
	tt, ok := tx.(orderpay.TillTx)
	if !ok {
		return nil
	}
	t, err := tt.TillPayment(ctx, outTradeNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if !t.ReverseSentAt.IsZero() {
		return errReverseOnItsWay
	}
	return nil
}

// openBarcode writes, in one transaction, the payment (if the order has none), its barcode
// attempt made PAYING with the unknown flag, its pending query (due once the wait is over:
// the loop itself queries until then, and the safety net takes what a dead loop left), and
// the till's row; the payment's PAYING lock is taken for the payment call and let go after
// its answer is recorded.
func (s *Service) openBarcode(ctx context.Context, ts orderpay.TillStore, req orderpay.BarcodeRequest, channel string) (*orderpay.ChannelOrder, error) {
	var co *orderpay.ChannelOrder
	var keyTaken bool
	wait := s.barcodeWait(req.Wait)
	err := ts.InTillTx(ctx, func(tx orderpay.TillTx) error {
		co, keyTaken = nil, false
		now := orderpay.Now(s.cfg.Clock)
		p := &orderpay.Payment{No: PaymentNo(req.OrderNo), OrderNo: req.OrderNo, Amount: req.Amount, Status: orderpay.PaymentUnpaid,
			Subject: req.Subject, PayDeadline: req.Deadline, CreatedAt: now, UpdatedAt: now}
		err := tx.CreateLockedPayment(ctx, p, now.Add(prepayLease))
		newPayment := err == nil
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			if p, err = tx.PaymentByOrder(ctx, req.OrderNo); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		switch {
		case p.Amount != req.Amount:
			return orderpay.Errorf(orderpay.ECONFLICT, "payment %s is for %d fen, not %d", p.No, p.Amount, req.Amount)
		case p.Status != orderpay.PaymentUnpaid && p.Status != orderpay.PaymentPaying:
			return orderpay.Errorf(orderpay.ECONFLICT, "payment %s is %s", p.No, p.Status)
		}
		var attempts []orderpay.ChannelOrder
		if !newPayment {
			locked, err := tx.LockPrepay(ctx, p.No, now.Add(prepayLease), now)
			if err != nil {
				return err
			}
			if !locked {
				return orderpay.Errorf(orderpay.EUNAVAILABLE, "another request is asking the channel for payment %s; retry the same request", p.No)
			}
			if attempts, err = tx.ChannelOrders(ctx, p.No); err != nil {
				return err
			}
		}
		for _, a := range attempts {
			if a.Method == orderpay.MethodBarcode && (a.Status == orderpay.ChannelOrderCreated || a.Status == orderpay.ChannelOrderPaying) {
				return orderpay.Errorf(orderpay.ECONFLICT, "payment %s has a barcode payment still open (%s): wait for its end", p.No, a.OutTradeNo)
			}
		}
		seq := len(attempts) + 1
		co = &orderpay.ChannelOrder{OutTradeNo: OutTradeNo(p.No, seq), PaymentNo: p.No, Channel: channel, Seq: seq, Amount: p.Amount,
			Status: orderpay.ChannelOrderCreated, Method: orderpay.MethodBarcode, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateChannelOrder(ctx, co); err != nil {
			return err
		}
		t := req.Till
		t.OutTradeNo, t.PaymentNo, t.Channel, t.Amount, t.CreatedAt = co.OutTradeNo, p.No, channel, p.Amount, now
		t.Answer, t.Refusal, t.Detail, t.AnsweredAt = "", "", "", time.Time{}
		if len(req.AuthCode) >= 4 {
			t.CodeTail = req.AuthCode[len(req.AuthCode)-4:]
		}
		if err := tx.CreateTillPayment(ctx, &t); err != nil {
			keyTaken = orderpay.ErrorCode(err) == orderpay.ECONFLICT
			return err
		}
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: co.OutTradeNo, From: orderpay.ChannelOrderCreated,
			To: orderpay.ChannelOrderPaying, Event: orderpay.ChannelOrderEventSubmit, At: now, Actor: "payment-center",
			Reason: "barcode payment at till " + t.TillID + ": asking the channel", Unknown: true}); err != nil {
			return err
		}
		if err := tx.CreatePendingQuery(ctx, &orderpay.PendingQuery{OutTradeNo: co.OutTradeNo, PaymentNo: p.No, Channel: channel,
			NextAt: now.Add(wait), CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		if p.Status == orderpay.PaymentUnpaid {
			if err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: p.No, From: p.Status, To: orderpay.PaymentPaying,
				Event: orderpay.PaymentEventStart, At: now, Actor: "payment-center", Reason: "attempt " + co.OutTradeNo}); err != nil {
				return err
			}
		}
		co.Status, co.Unknown = orderpay.ChannelOrderPaying, true
		return nil
	})
	if keyTaken {
		return nil, errTillKeyTaken
	}
	return co, err
}

// runBarcode makes the payment call of co and runs the loop until the trade ends or the
// wait is over.
func (s *Service) runBarcode(ctx context.Context, ch orderpay.Channel, co *orderpay.ChannelOrder, req orderpay.BarcodeRequest, started time.Time, wait time.Duration) (*orderpay.BarcodeResult, error) {
	log := s.log.With("payment_no", co.PaymentNo, "out_trade_no", co.OutTradeNo, "channel", co.Channel, "method", orderpay.MethodBarcode,
		"till_id", req.Till.TillID)
	res := ch.Precreate(ctx, orderpay.PrecreateRequest{OutTradeNo: co.OutTradeNo, Amount: co.Amount, Subject: req.Subject,
		Deadline: req.Deadline, Method: orderpay.MethodBarcode, AuthCode: req.AuthCode, StoreID: req.Till.StoreID,
		TillID: req.Till.TillID, ClientIP: req.ClientIP})
	s.unlockPrepay(co.PaymentNo)
	log.Info("barcode payment asked", "outcome", res.Outcome, "detail", res.Detail)
	if res.Outcome == orderpay.OutcomeRejected {
		err := s.retryConflicts(ctx, func(tx orderpay.Tx) error {
			return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: co.OutTradeNo, From: orderpay.ChannelOrderPaying,
				To: orderpay.ChannelOrderFailed, Event: orderpay.ChannelOrderEventFail, At: orderpay.Now(s.cfg.Clock),
				Actor: "channel:" + co.Channel, Reason: "refused: " + res.Detail, Raw: res.Raw})
		})
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return nil, err
		}
		refusal := res.Refusal
		if refusal == "" {
			refusal = orderpay.RefusalOther
		}
		return s.answer(ctx, co.OutTradeNo, orderpay.BarcodeRefused, refusal, res.Detail)
	}
	// Paid or unknown: the loop asks. A "paid" is believed once a query confirms it.
	giveUp, end := barcodeGiveUp(started, wait), started.Add(wait)
	next := orderpay.Now(s.cfg.Clock)
	if res.Outcome != orderpay.OutcomePaid {
		next = next.Add(orderpay.BarcodeQueryEvery)
	}
	for {
		if !s.sleepUntil(ctx, earlier(next, giveUp)) || orderpay.Now(s.cfg.Clock).After(giveUp) {
			break
		}
		q := s.query(ctx, co, "barcode")
		if paid, err := s.applyQuery(ctx, co, q); paid || err != nil {
			if err != nil {
				log.Error("barcode query said paid but it could not be applied", "err", err)
				break
			}
			return s.statusOf(ctx, co.OutTradeNo)
		}
		if q.Outcome == orderpay.OutcomeClosed {
			if _, err := s.markClosed(ctx, co, "ended at the channel unpaid: "+q.Detail, q.Raw); err != nil {
				return nil, err
			}
			return s.statusOf(ctx, co.OutTradeNo)
		}
		next = orderpay.Now(s.cfg.Clock).Add(orderpay.BarcodeQueryEvery)
	}
	// The buyer has had their time: end the trade, asking again while the channel says
	// "not now" or nothing, until the wait is over.
	for {
		o, err := s.reverseAttempt(ctx, co, "barcode")
		if err != nil {
			log.Warn("barcode reverse", "err", err)
		}
		if o == orderpay.ClosePaid || o == orderpay.CloseDone {
			return s.statusOf(ctx, co.OutTradeNo)
		}
		retry := orderpay.Now(s.cfg.Clock).Add(2 * time.Second)
		if !s.sleepUntil(ctx, earlier(retry, end)) || !orderpay.Now(s.cfg.Clock).Before(end) {
			break
		}
	}
	log.Warn("barcode payment not ended within the till's wait: the safety net goes on with it")
	return s.statusOf(ctx, co.OutTradeNo)
}

// sleepUntil waits until the service's clock shows t, or until ctx ends; it reports
// whether ctx is still alive. On the system clock it sleeps; on any other (a test's, moved
// by hand) it looks at the clock every few milliseconds.
func (s *Service) sleepUntil(ctx context.Context, t time.Time) bool {
	for {
		d := t.Sub(orderpay.Now(s.cfg.Clock))
		if d <= 0 {
			return ctx.Err() == nil
		}
		if _, real := s.cfg.Clock.(orderpay.SystemClock); !real {
			d = min(d, 2*time.Millisecond)
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// awaitBarcode waits until the till payment t ends or until, then says where it stands.
func (s *Service) awaitBarcode(ctx context.Context, t *orderpay.TillPayment, until time.Time) (*orderpay.BarcodeResult, error) {
	for {
		res, err := s.statusOf(ctx, t.OutTradeNo)
		if err != nil || res.Status != orderpay.BarcodeUnknown {
			return res, err
		}
		again := orderpay.Now(s.cfg.Clock).Add(500 * time.Millisecond)
		if !s.sleepUntil(ctx, earlier(again, until)) || !orderpay.Now(s.cfg.Clock).Before(until) {
			return res, nil
		}
	}
}

// BarcodeStatus is the till payment of the attempt outTradeNo as it now stands. Its first
// final status is recorded as the till's answer.
func (s *Service) BarcodeStatus(ctx context.Context, outTradeNo string) (*orderpay.BarcodeResult, error) {
	return s.statusOf(ctx, outTradeNo)
}

// statusOf reads the till payment, its attempt and its payment, says what the till is to be
// told, and records it as the answer if it is final and the first.
// refusedByOrder reports whether the order a barcode attempt paid refused the payment: it
// was cancelled before the payment arrived (a till and the buyer's cancel met), so the
// payment is refunded (RefundRejected) rather than kept. A walk-in sale's order is the apps
// domain's, which settles it itself (SettleTill).
func (s *Service) refusedByOrder(ctx context.Context, p *orderpay.Payment, co *orderpay.ChannelOrder) (bool, error) {
	if _, err := s.cfg.Store.ChannelRefund(ctx, AutoRefundNo(co.OutTradeNo)); err == nil {
		return true, nil
	} else if orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		return false, err
	}
	if orderpay.IsAppOrderKey(p.OrderNo) {
		return false, nil
	}
	o, err := s.cfg.Store.Order(ctx, p.OrderNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return o.Status == orderpay.OrderCancelled, nil
}

func (s *Service) statusOf(ctx context.Context, outTradeNo string) (*orderpay.BarcodeResult, error) {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the store keeps no till payments")
	}
	t, err := ts.TillPayment(ctx, outTradeNo)
	if err != nil {
		return nil, err
	}
	co, err := s.cfg.Store.ChannelOrder(ctx, outTradeNo)
	if err != nil {
		return nil, err
	}
	res := &orderpay.BarcodeResult{Till: *t, Status: orderpay.BarcodeUnknown, TradeNo: co.TradeNo}
	switch co.Status {
	case orderpay.ChannelOrderSuccess:
		p, err := s.cfg.Store.Payment(ctx, co.PaymentNo)
		if err != nil {
			return nil, err
		}
		refused, err := s.refusedByOrder(ctx, p, co)
		if err != nil {
			return nil, err
		}
		if p.Status == orderpay.PaymentSuccess && p.PaidOutTradeNo == co.OutTradeNo && !refused {
			res.Status, res.PaidAt = orderpay.BarcodePaid, co.PaidAt
		} else if refused {
			// It paid the payment, but the order could not take it (the buyer cancelled
			// it meanwhile): the till must not hand the goods over.
			res.Status, res.Detail = orderpay.BarcodeCancelled, "paid, but the order was cancelled meanwhile: the money goes back to the buyer"
		} else {
			// Paid, but not what paid the order (it was paid otherwise, closed, or the
			// trade was reversed after the buyer paid): the money goes back.
			res.Status, res.Detail = orderpay.BarcodeCancelled, "paid, and the money goes back to the buyer"
		}
	case orderpay.ChannelOrderClosed:
		res.Status, res.Detail = orderpay.BarcodeCancelled, "not paid: the trade is ended at the channel"
	case orderpay.ChannelOrderFailed:
		res.Status, res.Refusal = orderpay.BarcodeRefused, cmpRefusal(t.Refusal)
		res.Detail = t.Detail
	}
	if t.Answer != "" {
		// What the till was told stays what it was told; the auditor compares it with
		// the channel.
		if t.Answer == orderpay.BarcodeRefused && res.Status == orderpay.BarcodeRefused {
			res.Refusal, res.Detail = t.Refusal, t.Detail
		}
		return res, nil
	}
	if res.Status != orderpay.BarcodeUnknown {
		err := ts.InTillTx(ctx, func(tx orderpay.TillTx) error {
			return tx.AnswerTillPayment(ctx, outTradeNo, res.Status, res.Refusal, res.Detail, orderpay.Now(s.cfg.Clock))
		})
		if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return nil, err
		}
		if cur, err := ts.TillPayment(ctx, outTradeNo); err == nil {
			res.Till = *cur
		}
	}
	return res, nil
}

func cmpRefusal(r orderpay.BarcodeRefusal) orderpay.BarcodeRefusal {
	if r == "" {
		return orderpay.RefusalOther
	}
	return r
}

// answer records a refusal's answer with its reason (the attempt is FAILED) and returns
// the till payment as it stands.
func (s *Service) answer(ctx context.Context, outTradeNo string, status orderpay.BarcodeStatus, refusal orderpay.BarcodeRefusal, detail string) (*orderpay.BarcodeResult, error) {
	ts := s.cfg.Store.(orderpay.TillStore)
	err := ts.InTillTx(ctx, func(tx orderpay.TillTx) error {
		return tx.AnswerTillPayment(ctx, outTradeNo, status, refusal, detail, orderpay.Now(s.cfg.Clock))
	})
	if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		return nil, err
	}
	return s.statusOf(ctx, outTradeNo)
}

// reverseAttempt ends a barcode attempt at the channel: a query first (a payment found is
// applied; a trade the channel ended unpaid is closed), then the reverse (Alipay's cancel,
// WeChat's reverse) whatever the query said, since a reverse ends a trade in any state.
// It reports ClosePaid (paid, and applied), CloseDone (ended: nothing held), or
// CloseUnknown (not ended yet: ask again later).
func (s *Service) reverseAttempt(ctx context.Context, co *orderpay.ChannelOrder, trigger string) (orderpay.CloseOutcome, error) {
	log := s.log.With("payment_no", co.PaymentNo, "out_trade_no", co.OutTradeNo, "channel", co.Channel, "trigger", trigger)
	q := s.query(ctx, co, trigger)
	// A "paid" after a reverse that may have taken effect is not believed (applyQuery
	// does not apply it): the reverse is sent again, and its answer says which it was.
	queryPaid := q.Outcome == orderpay.OutcomePaid && q.Amount == co.Amount
	if paid, err := s.applyQuery(ctx, co, q); paid || err != nil {
		if err != nil {
			return orderpay.CloseUnknown, err
		}
		return orderpay.ClosePaid, nil
	}
	if q.Outcome == orderpay.OutcomeClosed {
		return s.markClosed(ctx, co, "ended at the channel unpaid: "+q.Detail, q.Raw)
	}
	if q.Outcome != orderpay.OutcomeNotPaid && !queryPaid {
		// Reversed right after a query that said nothing definite, a trade the buyer had
		// paid would be refunded, and WeChat's answer would not say so: the reverse waits
		// for a query that tells (paid, or not paid).
		log.Info("barcode trade not reversed: the query before it had no definite answer", "outcome", q.Outcome, "detail", q.Detail)
		return orderpay.CloseUnknown, nil
	}
	_, rv := s.barcodeAdapter(co.Channel)
	if rv == nil {
		return orderpay.CloseUnknown, orderpay.Errorf(orderpay.EINTERNAL, "%s cannot end a barcode trade", co.Channel)
	}
	// Recorded before the call: a reverse whose answer is lost, or whose process dies
	// during it, may have refunded a payment.
	if err := s.markReverse(ctx, co.OutTradeNo, true); orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		// A payment was applied meanwhile (or the attempt ended otherwise): no reverse.
		cur, rerr := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
		if rerr == nil && cur.Status == orderpay.ChannelOrderSuccess {
			return orderpay.ClosePaid, nil
		}
		return orderpay.CloseDone, rerr
	} else if err != nil {
		return orderpay.CloseUnknown, err
	}
	r := rv.Reverse(ctx, orderpay.ReverseRequest{OutTradeNo: co.OutTradeNo, OrderedAt: co.CreatedAt})
	switch {
	case r.Outcome == orderpay.OutcomeClosed && (r.Refunded || queryPaid):
		// The channel refunded a payment (it says so, or the query before it found one).
		log.Warn("barcode trade ended after the buyer paid: the channel refunded it", "detail", r.Detail)
		if err := s.recordReversedPayment(ctx, co, r); err != nil {
			return orderpay.CloseUnknown, err
		}
		return orderpay.CloseDone, nil
	case r.Outcome == orderpay.OutcomeClosed:
		log.Info("barcode trade ended at the channel", "detail", r.Detail)
		o, err := s.markClosed(ctx, co, "reversed at the channel: "+r.Detail, r.Raw)
		if o == orderpay.CloseUnknown && err == nil {
			// It moved on meanwhile, and is not paid: read again next time.
			return orderpay.CloseUnknown, nil
		}
		return o, err
	case r.Outcome == orderpay.OutcomeRejected, r.Outcome == orderpay.OutcomeRefundRetry:
		// A definite refusal: this reverse did nothing.
		if err := s.markReverse(ctx, co.OutTradeNo, false); err != nil {
			return orderpay.CloseUnknown, err
		}
		if r.Outcome == orderpay.OutcomeRejected {
			log.Error("the channel refused to end a barcode trade: it stays open and is asked again", "detail", r.Detail)
		} else {
			log.Info("barcode trade not ended yet: the channel says not now", "detail", r.Detail)
		}
	default:
		log.Info("barcode trade not ended yet", "outcome", r.Outcome, "detail", r.Detail)
	}
	return orderpay.CloseUnknown, nil
}

// markReverse records that a reverse of the trade is on its way, or that the channel
// refused it definitely (orderpay.TillTx.MarkTillReverse).
func (s *Service) markReverse(ctx context.Context, outTradeNo string, sent bool) error {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return orderpay.Errorf(orderpay.EINTERNAL, "the store keeps no till payments")
	}
	return ts.InTillTx(ctx, func(tx orderpay.TillTx) error {
		return tx.MarkTillReverse(ctx, outTradeNo, sent, orderpay.Now(s.cfg.Clock))
	})
}

// reverseMayHaveTakenEffect says whether a reverse of the barcode attempt co was sent
// with no definite refusal since: Alipay's query of a trade its cancel refunded still
// shows the payment, so a query's "paid" then proves nothing.
func (s *Service) reverseMayHaveTakenEffect(ctx context.Context, co *orderpay.ChannelOrder) (bool, error) {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return false, nil
	}
	t, err := ts.TillPayment(ctx, co.OutTradeNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !t.ReverseSentAt.IsZero(), nil
}

// recordReversedPayment records, in one transaction, a barcode trade the buyer paid and the
// channel's reverse refunded (Alipay's cancel with action=refund): the attempt is closed,
// then recorded paid, as a late payment, with its full refund made by the reverse. The
// payment itself was never paid by it.
func (s *Service) recordReversedPayment(ctx context.Context, co *orderpay.ChannelOrder, r orderpay.ReverseResult) error {
	return s.retryConflicts(ctx, func(tx orderpay.Tx) error {
		now := orderpay.Now(s.cfg.Clock)
		cur, err := tx.ChannelOrder(ctx, co.OutTradeNo)
		if err != nil {
			return err
		}
		if cur.Status == orderpay.ChannelOrderCreated || cur.Status == orderpay.ChannelOrderPaying {
			if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: cur.OutTradeNo, From: cur.Status,
				To: orderpay.ChannelOrderClosed, Event: orderpay.ChannelOrderEventClose, At: now, Actor: "payment-center",
				Reason: "reversed at the channel: " + r.Detail, Raw: r.Raw}); err != nil {
				return err
			}
			cur.Status = orderpay.ChannelOrderClosed
		}
		if cur.Status != orderpay.ChannelOrderSuccess {
			if err := tx.TransitionChannelOrder(ctx, s.withFee(cur, orderpay.ChannelOrderChange{OutTradeNo: cur.OutTradeNo, From: cur.Status,
				To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: now, Actor: "channel:" + cur.Channel,
				Reason: "the reverse says it was paid: " + r.Detail, Raw: r.Raw, PaidAt: now})); err != nil {
				return err
			}
		}
		// The channel numbers the refund its reverse made by the trade's own number (Alipay's
		// cancel, WeChat's reverse): so is it recorded, and reconciled against the bill.
		ref := &orderpay.ChannelRefund{OutRefundNo: ReverseRefundNo(cur.OutTradeNo), OutTradeNo: cur.OutTradeNo, PaymentNo: cur.PaymentNo,
			Channel: cur.Channel, Amount: cur.Amount, Reason: orderpay.RefundReasonReversed, Status: orderpay.ChannelRefundPending,
			NextAt: now, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateChannelRefund(ctx, ref); orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			if ref, err = tx.ChannelRefund(ctx, ref.OutRefundNo); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if !ref.Status.Owed() {
			return nil
		}
		return s.refundSucceeded(ctx, tx, ref, orderpay.ChannelRefundChange{OutRefundNo: ref.OutRefundNo, From: ref.Status, At: now,
			Actor: "channel:" + cur.Channel, Reason: "refunded by the reverse: " + r.Detail, Raw: r.Raw})
	})
}

// ReverseRefundNo is the number of the refund a reverse made of a paid barcode trade: the
// channels number it by the trade's own out_trade_no.
func ReverseRefundNo(outTradeNo string) string { return outTradeNo }

// runBarcodeStep is the safety net's step of a barcode attempt: before the buyer's time is
// over, a query; after it, the reverse (reverseAttempt). Not ended: the next step in
// BarcodeQueryEvery.
func (s *Service) runBarcodeStep(ctx context.Context, co *orderpay.ChannelOrder, attempts int, trigger string) (orderpay.Outcome, error) {
	now := orderpay.Now(s.cfg.Clock)
	outcome := orderpay.OutcomeUnknown
	if now.Before(barcodeGiveUp(co.CreatedAt, s.barcodeWait(0))) {
		q := s.query(ctx, co, trigger)
		outcome = q.Outcome
		if paid, err := s.applyQuery(ctx, co, q); paid || err != nil {
			if paid && err == nil {
				s.cfg.BarcodeEnded(ctx, co.OutTradeNo)
			}
			return q.Outcome, err
		}
		if q.Outcome == orderpay.OutcomeClosed {
			_, err := s.markClosed(ctx, co, "ended at the channel unpaid: "+q.Detail, q.Raw)
			if err == nil {
				s.cfg.BarcodeEnded(ctx, co.OutTradeNo)
			}
			return q.Outcome, err
		}
	} else {
		switch o, err := s.reverseAttempt(ctx, co, trigger); {
		case err != nil:
			s.log.Warn("barcode reverse", "out_trade_no", co.OutTradeNo, "err", err)
		case o == orderpay.ClosePaid:
			s.cfg.BarcodeEnded(ctx, co.OutTradeNo)
			return orderpay.OutcomePaid, nil
		case o == orderpay.CloseDone:
			s.cfg.BarcodeEnded(ctx, co.OutTradeNo)
			return orderpay.OutcomeClosed, nil
		}
	}
	next := orderpay.Now(s.cfg.Clock).Add(orderpay.BarcodeQueryEvery)
	flag := attempts+1 >= s.cfg.MaxQueryAttempts
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.AdvancePendingQuery(ctx, co.OutTradeNo, attempts, string(outcome), next, flag, now)
	})
	switch {
	case orderpay.ErrorCode(err) == orderpay.ECONFLICT:
		return outcome, nil
	case err != nil:
		return outcome, err
	case flag:
		s.log.Error("barcode trade still not ended after every try: flagged for reconciliation", "out_trade_no", co.OutTradeNo,
			"payment_no", co.PaymentNo, "channel", co.Channel, "attempts", attempts+1)
		s.cfg.Observer.QueriesExhausted(co.Channel)
	default:
		s.setQueryTimer(ctx, co.OutTradeNo, attempts+1, next)
	}
	return outcome, nil
}

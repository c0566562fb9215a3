package apppay

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"orderpay"
)

// CreatePaymentRequest is an app's payment: its own order number (unique per app), the
// amount in fen, the subject, the channel, and a deadline: ExpiresIn or ExpiresAt, one of
// them. IdempotencyKey is the request's Idempotency-Key header, if any.
type CreatePaymentRequest struct {
	MerchantOrderNo string
	Amount          int64
	Subject         string
	Channel         string
	ExpiresIn       time.Duration
	ExpiresAt       time.Time
	IdempotencyKey  string
}

// PaymentView is an app payment as the app sees it.
type PaymentView struct {
	orderpay.AppPayment
	Refunded    int64 // money back to the buyer from the payment that paid it
	QRCode      string
	QRExpiresAt time.Time
	PaidAt      time.Time
	OutTradeNo  string // the paid attempt's, once paid
}

// Refundable is what the app may still refund.
func (v *PaymentView) Refundable() int64 {
	if v.Status != orderpay.AppPaymentSuccess {
		return 0
	}
	return v.Amount - v.RefundReserved
}

func (s *Service) checkPayment(app *orderpay.App, req *CreatePaymentRequest) (time.Time, error) {
	now := orderpay.Now(s.cfg.Clock)
	req.Subject = strings.TrimSpace(req.Subject)
	switch {
	case !orderpay.ValidID(req.MerchantOrderNo):
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "merchant_order_no: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	case req.Amount <= 0 || req.Amount > MaxAmount:
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "amount: a whole number of fen, 1 to %d", int64(MaxAmount))
	case req.Subject == "" || len(req.Subject) > MaxSubjectLen:
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "subject is required (at most %d bytes)", MaxSubjectLen)
	case strings.ContainsAny(req.Subject, SubjectForbidden):
		// Alipay refuses them in a trade's subject (escaping does not help: it is the
		// characters it refuses); refused here, before the payment is stored, and for every
		// channel, so that a subject good for one of an app's channels is good for all.
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "subject must not contain any of %s", strings.Join(strings.Split(SubjectForbidden, ""), " "))
	case !slices.Contains(app.Channels, req.Channel):
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "channel: one of %s", strings.Join(app.Channels, ", "))
	case req.IdempotencyKey != "" && !orderpay.ValidID(req.IdempotencyKey):
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "Idempotency-Key: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	case (req.ExpiresIn == 0) == req.ExpiresAt.IsZero():
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "give expires_in_seconds or expires_at, one of them")
	}
	deadline := req.ExpiresAt
	if req.ExpiresIn != 0 {
		deadline = now.Add(req.ExpiresIn)
	}
	deadline = deadline.Truncate(time.Second)
	if d := deadline.Sub(now); d < s.cfg.MinExpiry || d > MaxExpiry {
		return time.Time{}, orderpay.Errorf(orderpay.EINVALID, "the deadline must be %s to %s from now", s.cfg.MinExpiry, MaxExpiry)
	}
	return deadline, nil
}

// CreatePayment creates an app payment and asks the channel for its QR code. A repeated
// request with the same merchant order number (or Idempotency-Key) and the same body
// returns the same payment (replayed true), with another body EIDEMPOTENCY. The payment is
// stored before the channel is asked, so a request that ended EUNAVAILABLE is retried as
// is: the retry finds it and asks again under the same number.
func (s *Service) CreatePayment(ctx context.Context, app *orderpay.App, req CreatePaymentRequest) (*PaymentView, bool, error) {
	hashIn := []any{req.MerchantOrderNo, req.Amount, strings.TrimSpace(req.Subject), req.Channel, int64(req.ExpiresIn / time.Second)}
	if !req.ExpiresAt.IsZero() {
		hashIn = append(hashIn, req.ExpiresAt.UTC().Format(time.RFC3339))
	}
	deadline, err := s.checkPayment(app, &req)
	if err != nil {
		return nil, false, err
	}
	ap, replayed, err := s.storePayment(ctx, app, req, deadline, requestHash(hashIn...))
	if err != nil {
		return nil, false, err
	}
	// A replay past the deadline asks nothing: the channel would refuse a code that
	// expired, and the deadline's close is on its way.
	if ap.Status == orderpay.AppPaymentOpen && orderpay.Now(s.cfg.Clock).Before(ap.ExpiresAt) {
		_, err := s.cfg.Payments.Pay(ctx, orderpay.PayRequest{OrderNo: ap.OrderKey, Amount: ap.Amount, Subject: ap.Subject,
			Deadline: ap.ExpiresAt, Channel: ap.Channel})
		if err != nil && !(replayed && orderpay.ErrorCode(err) == orderpay.ECONFLICT) {
			return nil, false, err
		}
	}
	v, err := s.view(ctx, ap.PaymentNo)
	return v, replayed, err
}

// storePayment finds the payment an identical earlier request made (replayed), or stores a
// new one, OPEN, asking the channel nothing.
func (s *Service) storePayment(ctx context.Context, app *orderpay.App, req CreatePaymentRequest, deadline time.Time, hash string) (*orderpay.AppPayment, bool, error) {
	var ap *orderpay.AppPayment
	replayed := false
	for attempt := 0; attempt < 3 && ap == nil; attempt++ {
		existing, err := s.findRequest(ctx, app.ID, req.MerchantOrderNo, req.IdempotencyKey, hash)
		if err != nil {
			return nil, false, err
		}
		if existing != nil {
			ap, replayed = existing, true
			break
		}
		now := orderpay.Now(s.cfg.Clock)
		key := s.cfg.NewNumber(orderpay.AppOrderKeyPrefix, now)
		p := &orderpay.AppPayment{PaymentNo: "P" + key, OrderKey: key, AppID: app.ID, MerchantOrderNo: req.MerchantOrderNo,
			Amount: req.Amount, Subject: req.Subject, Channel: req.Channel, ExpiresAt: deadline, Status: orderpay.AppPaymentOpen,
			RequestHash: hash, IdempotencyKey: req.IdempotencyKey, CreatedAt: now, UpdatedAt: now}
		err = s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error { return tx.CreateAppPayment(ctx, p) })
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			continue // a concurrent identical request, or a number taken: look again
		}
		if err != nil {
			return nil, false, err
		}
		ap = p
		s.log.Info("app payment created", "app_id", app.ID, "payment_no", p.PaymentNo, "merchant_order_no", p.MerchantOrderNo,
			"amount", p.Amount, "channel", p.Channel, "expires_at", p.ExpiresAt)
	}
	if ap == nil {
		return nil, false, orderpay.Errorf(orderpay.EUNAVAILABLE, "the payment could not be stored; retry the same request")
	}
	return ap, replayed, nil
}

// findRequest finds the payment an earlier identical request made, or nil if there is none;
// EIDEMPOTENCY if the number or the key was used for another request.
func (s *Service) findRequest(ctx context.Context, appID, merchantOrderNo, idemKey, hash string) (*orderpay.AppPayment, error) {
	if idemKey != "" {
		p, err := s.cfg.Store.AppPaymentByIdempotencyKey(ctx, appID, idemKey)
		switch {
		case err == nil && (p.MerchantOrderNo != merchantOrderNo || p.RequestHash != hash):
			return nil, orderpay.Errorf(orderpay.EIDEMPOTENCY, "Idempotency-Key %q was used for another request", idemKey)
		case err == nil:
			return p, nil
		case orderpay.ErrorCode(err) != orderpay.ENOTFOUND:
			return nil, err
		}
	}
	p, err := s.cfg.Store.AppPaymentByMerchantNo(ctx, appID, merchantOrderNo)
	switch {
	case orderpay.ErrorCode(err) == orderpay.ENOTFOUND:
		return nil, nil
	case err != nil:
		return nil, err
	case p.RequestHash != hash:
		return nil, orderpay.Errorf(orderpay.EIDEMPOTENCY, "merchant_order_no %q was used for another request", merchantOrderNo)
	}
	return p, nil
}

// view reads an app payment with what the payment center knows of it.
func (s *Service) view(ctx context.Context, paymentNo string) (*PaymentView, error) {
	ap, err := s.cfg.Store.AppPayment(ctx, paymentNo)
	if err != nil {
		return nil, err
	}
	v := &PaymentView{AppPayment: *ap}
	p, err := s.cfg.Store.Payment(ctx, paymentNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return v, nil // the channel was not asked yet
	}
	if err != nil {
		return nil, err
	}
	v.Refunded = p.Refunded
	attempts, err := s.cfg.Store.ChannelOrders(ctx, paymentNo)
	if err != nil {
		return nil, err
	}
	now := orderpay.Now(s.cfg.Clock)
	for i := len(attempts) - 1; i >= 0; i-- {
		a := &attempts[i]
		if a.OutTradeNo == p.PaidOutTradeNo && ap.Status == orderpay.AppPaymentSuccess {
			v.PaidAt, v.OutTradeNo = a.PaidAt, a.OutTradeNo
		}
		if v.QRCode == "" && ap.Status == orderpay.AppPaymentOpen && a.QRCode != "" && now.Before(a.QRExpiresAt) &&
			(a.Status == orderpay.ChannelOrderPaying || a.Status == orderpay.ChannelOrderCreated) {
			v.QRCode, v.QRExpiresAt = a.QRCode, a.QRExpiresAt
		}
	}
	return v, nil
}

// own returns the app's payment; another app's reads as not found.
func (s *Service) own(ctx context.Context, app *orderpay.App, paymentNo string) (*orderpay.AppPayment, error) {
	ap, err := s.cfg.Store.AppPayment(ctx, paymentNo)
	if err == nil && ap.AppID != app.ID {
		err = orderpay.NotFound("payment", paymentNo)
	}
	return ap, err
}

// Payment is GET: the app's payment. While it is open, the read also queries the channel
// (rate-limited, as a buyer watching an order does), so that a payment whose notification
// was lost is seen within seconds.
func (s *Service) Payment(ctx context.Context, app *orderpay.App, paymentNo string) (*PaymentView, error) {
	ap, err := s.own(ctx, app, paymentNo)
	if err != nil {
		return nil, err
	}
	if ap.Status == orderpay.AppPaymentOpen {
		pollCtx, cancel := context.WithTimeout(ctx, s.cfg.PollWait)
		ev, _, err := s.cfg.Payments.Poll(pollCtx, ap.OrderKey)
		cancel()
		if err == nil && ev != nil {
			err = s.apply(ctx, *ev)
		}
		if err != nil {
			s.log.Warn("pulling the payment result failed", "payment_no", ap.PaymentNo, "err", err)
		}
	}
	return s.view(ctx, ap.PaymentNo)
}

// PaymentByMerchantNo is Payment by the app's own order number.
func (s *Service) PaymentByMerchantNo(ctx context.Context, app *orderpay.App, merchantOrderNo string) (*PaymentView, error) {
	ap, err := s.cfg.Store.AppPaymentByMerchantNo(ctx, app.ID, merchantOrderNo)
	if err != nil {
		return nil, err
	}
	return s.Payment(ctx, app, ap.PaymentNo)
}

// Payments lists the app's payments, newest first, before the payment number before.
func (s *Service) Payments(ctx context.Context, app *orderpay.App, before string, n int) ([]PaymentView, error) {
	list, err := s.cfg.Store.AppPayments(ctx, app.ID, orderpay.AppFilter{Before: before}, limit(n))
	if err != nil {
		return nil, err
	}
	out := make([]PaymentView, 0, len(list))
	for _, ap := range list {
		v, err := s.view(ctx, ap.PaymentNo)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// pull applies the payment's success if the payment center has one: the pull side, for
// when the push (direct call and event) has not arrived yet.
func (s *Service) pull(ctx context.Context, ap *orderpay.AppPayment) error {
	ev, err := s.cfg.Payments.Result(ctx, ap.OrderKey)
	if err != nil || ev == nil {
		return err
	}
	return s.apply(ctx, *ev)
}

// apply applies a payment success pulled from the payment center; one the app's payment
// cannot take is refunded.
func (s *Service) apply(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	err := s.PaymentSucceeded(ctx, ev)
	if reason, refused := orderpay.Refusal(err); refused {
		return s.cfg.Payments.RefundRejected(ctx, ev, reason)
	}
	return err
}

// ClosePayment is the app's close before the deadline: the channel is asked first, as at
// the timeout close; a payment found is kept (409 EPAID, the payment is paid), a channel
// that cannot tell is EUNAVAILABLE (retry), and otherwise the payment is CLOSED. A payment
// that still arrives afterwards (an Alipay code nobody scanned stays payable until its
// deadline) is refunded. Idempotent.
func (s *Service) ClosePayment(ctx context.Context, app *orderpay.App, paymentNo string) (*PaymentView, error) {
	ap, err := s.own(ctx, app, paymentNo)
	if err != nil {
		return nil, err
	}
	if err := s.close(ctx, ap, "closed", "app:"+app.ID); err != nil {
		return nil, err
	}
	return s.view(ctx, paymentNo)
}

// close closes ap at the payment center, then marks it CLOSED with app.payment.closed.
func (s *Service) close(ctx context.Context, ap *orderpay.AppPayment, reason, actor string) error {
	switch ap.Status {
	case orderpay.AppPaymentClosed:
		return nil
	case orderpay.AppPaymentSuccess:
		return paidError(ap.PaymentNo)
	}
	outcome, err := s.cfg.Payments.Close(ctx, ap.OrderKey)
	if err != nil {
		return err
	}
	switch outcome {
	case orderpay.ClosePaid:
		if err := s.pull(ctx, ap); err != nil {
			return err
		}
		return paidError(ap.PaymentNo)
	case orderpay.CloseUnknown:
		return orderpay.Errorf(orderpay.EUNAVAILABLE, "the channel could not tell whether payment %s was paid; retry", ap.PaymentNo)
	}
	err = s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
		cur, err := tx.AppPayment(ctx, ap.PaymentNo)
		if err != nil {
			return err
		}
		switch cur.Status {
		case orderpay.AppPaymentClosed:
			return nil
		case orderpay.AppPaymentSuccess:
			// The buyer paid between the payment center's answer and now (an unscanned
			// Alipay code stays payable): the payment stands, and the app is told so.
			return paidError(cur.PaymentNo)
		}
		now := orderpay.Now(s.cfg.Clock)
		why := "closed by the app; the channel confirmed nothing was paid"
		if reason == "expired" {
			why = "its deadline passed; the channel confirmed nothing was paid"
		}
		if err := tx.TransitionAppPayment(ctx, orderpay.AppPaymentChange{PaymentNo: cur.PaymentNo, From: cur.Status, To: orderpay.AppPaymentClosed,
			Event: orderpay.AppPaymentEventClose, At: now, Actor: actor, Reason: why}, reason); err != nil {
			return err
		}
		return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectAppPaymentClosed, cur.PaymentNo, orderpay.AppPaymentPayload{AppID: cur.AppID,
			PaymentNo: cur.PaymentNo, MerchantOrderNo: cur.MerchantOrderNo, Amount: cur.Amount, Channel: cur.Channel,
			Status: orderpay.AppPaymentClosed, Reason: reason, At: now}, now)
	})
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		if cur, rerr := s.cfg.Store.AppPayment(ctx, ap.PaymentNo); rerr == nil && cur.Status == orderpay.AppPaymentSuccess {
			return paidError(ap.PaymentNo)
		}
	}
	if err == nil {
		s.log.Info("app payment closed", "app_id", ap.AppID, "payment_no", ap.PaymentNo, "reason", reason, "outcome", string(outcome))
		s.cfg.OutboxWritten()
	}
	return err
}

// paidError is the answer to a close of a payment that was paid: it stays SUCCESS.
func paidError(paymentNo string) error {
	return orderpay.Errorf(orderpay.EPAID, "payment %s was paid: it stays SUCCESS and cannot be closed (refund it instead)", paymentNo)
}

// PaymentSucceeded is the payment center's result for an app payment (the fast path and
// the bus both call it; idempotent). An open payment takes it: SUCCESS and
// app.payment.succeeded in one conditional transaction. A payment closed before the money
// arrived refuses it (orderpay.RefusePayment), which makes the payment center refund it.
func (s *Service) PaymentSucceeded(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	if !orderpay.IsAppOrderKey(ev.OrderNo) {
		return orderpay.NotFound("app payment", ev.OrderNo)
	}
	// refuse, if set, is why the payment cannot take the money, and reason the refund's.
	var refuse, reason string
	var applied bool
	err := s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
		refuse, reason, applied = "", "", false
		// Confirmed against the payment center's record in this transaction: a result on
		// the bus is not taken on its word (orderpay.Unconfirmed).
		if err := orderpay.ConfirmPaymentSucceeded(ctx, tx, ev); err != nil {
			return err
		}
		ap, err := tx.AppPayment(ctx, ev.PaymentNo)
		if err != nil {
			return err
		}
		switch {
		case ap.OrderKey != ev.OrderNo:
			return orderpay.Errorf(orderpay.EINTERNAL, "payment %s is not of %s", ev.PaymentNo, ev.OrderNo)
		case ap.Status == orderpay.AppPaymentSuccess:
			return nil // told before
		case ap.Status == orderpay.AppPaymentClosed:
			refuse, reason = "payment "+ap.PaymentNo+" was "+ap.CloseReason+" before the money arrived", orderpay.RefundReasonLate
			return nil
		case ev.Amount != ap.Amount:
			refuse, reason = "payment "+ap.PaymentNo+" was paid another amount", orderpay.RefundReasonAmountMismatch
			return nil
		}
		now := orderpay.Now(s.cfg.Clock)
		if err := tx.TransitionAppPayment(ctx, orderpay.AppPaymentChange{PaymentNo: ap.PaymentNo, From: ap.Status, To: orderpay.AppPaymentSuccess,
			Event: orderpay.AppPaymentEventSucceed, At: now, Actor: "payment-center", Reason: "paid through " + ev.OutTradeNo}, ""); err != nil {
			return err
		}
		applied = true
		paidAt := ev.PaidAt.UTC()
		return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectAppPaymentSucceeded, ap.PaymentNo, orderpay.AppPaymentPayload{AppID: ap.AppID,
			PaymentNo: ap.PaymentNo, MerchantOrderNo: ap.MerchantOrderNo, Amount: ap.Amount, Channel: ev.Channel,
			Status: orderpay.AppPaymentSuccess, OutTradeNo: ev.OutTradeNo, TradeNo: ev.TradeNo, PaidAt: &paidAt, At: now}, now)
	})
	if err != nil {
		return err
	}
	if refuse != "" {
		return orderpay.RefusePayment(reason, "%s", refuse)
	}
	if applied {
		s.log.Info("app payment succeeded", "payment_no", ev.PaymentNo, "out_trade_no", ev.OutTradeNo, "amount", ev.Amount)
		s.cfg.OutboxWritten()
	}
	return nil
}

// RefundFinal is called by the payment center in the transaction that brings a refund's
// money back: a refund of an app payment (the app's own, or an automatic one of a late or
// duplicate payment) is announced to the app by app.refund.succeeded in the same commit.
func (s *Service) RefundFinal(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
	atx, ok := tx.(orderpay.AppTx)
	if !ok {
		return nil
	}
	ap, err := atx.AppPayment(ctx, r.PaymentNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil // a shop order's
	}
	if err != nil {
		return err
	}
	// An automatic refund says why in the payment center's words (late_payment, …); the
	// app's own refund carries the reason the app sent with it (maybe empty), not the
	// channel refund's app_refund.
	refundNo, reason := "", r.Reason
	if ar, err := atx.AppRefund(ctx, r.OutRefundNo); err == nil {
		refundNo, reason = ar.RefundNo, ar.Reason
	} else if orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		return err
	}
	return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectAppRefundSucceeded, r.OutRefundNo, orderpay.AppRefundPayload{AppID: ap.AppID,
		PaymentNo: ap.PaymentNo, MerchantOrderNo: ap.MerchantOrderNo, RefundNo: refundNo, OutRefundNo: r.OutRefundNo,
		OutTradeNo: r.OutTradeNo, Amount: r.Amount, Reason: reason, Status: r.Status, At: at}, at)
}

// SweepResult counts what one sweep of expired app payments did.
type SweepResult struct{ Closed, Paid, Open int }

// CloseDue closes the open app payments whose deadline passed more than grace ago, each
// with the payment center's Close, which queries before it closes: a payment found is
// taken, anything else is CLOSED (and a payment after it refunded).
func (s *Service) CloseDue(ctx context.Context, grace time.Duration, n, workers int) (SweepResult, error) {
	var res SweepResult
	due, err := s.cfg.Store.DueAppPayments(ctx, orderpay.Now(s.cfg.Clock).Add(-grace), n)
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	err = orderpay.ForEach(ctx, due, workers, func(ctx context.Context, ap orderpay.AppPayment) error {
		err := s.close(ctx, &ap, "expired", "system")
		mu.Lock()
		defer mu.Unlock()
		switch orderpay.ErrorCode(err) {
		case "":
			res.Closed++
		case orderpay.EPAID, orderpay.ECONFLICT:
			res.Paid++
		case orderpay.EUNAVAILABLE:
			res.Open++
		default:
			return err
		}
		return nil
	})
	return res, err
}

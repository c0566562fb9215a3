package apppay

import (
	"context"
	"strings"
	"time"

	"orderpay"
)

// CreateRefundRequest is an app's refund of one of its payments, under its own refund
// number (unique per app), for an amount in fen.
type CreateRefundRequest struct {
	RefundNo string
	Amount   int64
	Reason   string
}

// RefundView is an app refund as the app sees it: SUCCESS once the money is back (the
// channel made it, or an operator paid it outside the channel), PROCESSING until then,
// however long the channel's retries or an operator take.
type RefundView struct {
	orderpay.AppRefund
	MerchantOrderNo string
	Status          string // PROCESSING or SUCCESS
	RefundedAt      time.Time
}

// Refund statuses as apps see them.
const (
	RefundProcessing = "PROCESSING"
	RefundSuccess    = "SUCCESS"
)

// CreateRefund records a refund of a paid payment: in one transaction, the app's refund
// row, the payment's refunded total reserved by a conditional update (the sum of an app's
// refunds of a payment never exceeds its amount, however many race), and the channel
// refund, which the payment center's refund worker sends and follows until the money is
// back. The same refund number with the same request returns the same refund (replayed
// true); with another request it is EIDEMPOTENCY.
func (s *Service) CreateRefund(ctx context.Context, app *orderpay.App, paymentNo string, req CreateRefundRequest) (*RefundView, bool, error) {
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case !orderpay.ValidID(req.RefundNo):
		return nil, false, orderpay.Errorf(orderpay.EINVALID, "refund_no: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	case req.Amount <= 0 || req.Amount > MaxAmount:
		return nil, false, orderpay.Errorf(orderpay.EINVALID, "amount: a whole number of fen, 1 to %d", int64(MaxAmount))
	case len(req.Reason) > MaxReasonLen:
		return nil, false, orderpay.Errorf(orderpay.EINVALID, "reason: at most %d bytes", MaxReasonLen)
	}
	hash := requestHash(paymentNo, req.RefundNo, req.Amount, req.Reason)
	for attempt := 0; attempt < 3; attempt++ {
		if r, err := s.cfg.Store.AppRefundByNo(ctx, app.ID, req.RefundNo); err == nil {
			if r.RequestHash != hash {
				return nil, false, orderpay.Errorf(orderpay.EIDEMPOTENCY, "refund_no %q was used for another request", req.RefundNo)
			}
			v, err := s.refundView(ctx, r)
			return v, true, err
		} else if orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
			return nil, false, err
		}
		var r *orderpay.AppRefund
		var taken bool
		err := s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
			r, taken = nil, false
			ap, err := tx.AppPayment(ctx, paymentNo)
			if err == nil && ap.AppID != app.ID {
				err = orderpay.NotFound("payment", paymentNo)
			}
			if err != nil {
				return err
			}
			if ap.Status != orderpay.AppPaymentSuccess {
				return orderpay.Errorf(orderpay.ECONFLICT, "payment %s is %s: only a paid payment can be refunded", paymentNo, ap.Status)
			}
			p, err := tx.Payment(ctx, paymentNo)
			if err != nil {
				return err
			}
			if p.PaidOutTradeNo == "" {
				return orderpay.Errorf(orderpay.EINTERNAL, "payment %s has no paid attempt to refund", paymentNo)
			}
			now := orderpay.Now(s.cfg.Clock)
			if err := tx.ReserveAppRefund(ctx, paymentNo, req.Amount, now); err != nil {
				if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
					return orderpay.Errorf(orderpay.ECONFLICT, "payment %s has %d fen left to refund, not %d", paymentNo, ap.Amount-ap.RefundReserved, req.Amount)
				}
				return err
			}
			r = &orderpay.AppRefund{OutRefundNo: s.cfg.NewNumber("AR", now), AppID: app.ID, RefundNo: req.RefundNo, PaymentNo: paymentNo,
				Amount: req.Amount, Reason: req.Reason, RequestHash: hash, CreatedAt: now}
			if err := tx.CreateAppRefund(ctx, r); err != nil {
				taken = orderpay.ErrorCode(err) == orderpay.ECONFLICT
				return err
			}
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: r.OutRefundNo, OutTradeNo: p.PaidOutTradeNo,
				PaymentNo: paymentNo, Channel: p.PaidChannel, Amount: r.Amount, Reason: orderpay.RefundReasonApp,
				Status: orderpay.ChannelRefundPending, NextAt: now, CreatedAt: now, UpdatedAt: now})
		})
		if taken {
			continue // the same refund number, asked at the same time: look again
		}
		if err != nil {
			return nil, false, err
		}
		s.log.Info("app refund created", "app_id", app.ID, "payment_no", paymentNo, "out_refund_no", r.OutRefundNo, "refund_no", r.RefundNo,
			"amount", r.Amount)
		s.cfg.RefundCreated()
		v, err := s.refundView(ctx, r)
		return v, false, err
	}
	return nil, false, orderpay.Errorf(orderpay.EUNAVAILABLE, "the refund could not be stored; retry the same request")
}

func (s *Service) refundView(ctx context.Context, r *orderpay.AppRefund) (*RefundView, error) {
	v := &RefundView{AppRefund: *r, Status: RefundProcessing}
	cr, err := s.cfg.Store.ChannelRefund(ctx, r.OutRefundNo)
	if err != nil {
		return nil, err
	}
	if !cr.Status.Owed() {
		v.Status, v.RefundedAt = RefundSuccess, cr.RefundedAt
	}
	ap, err := s.cfg.Store.AppPayment(ctx, r.PaymentNo)
	if err != nil {
		return nil, err
	}
	v.MerchantOrderNo = ap.MerchantOrderNo
	return v, nil
}

// Refund is one of the app's refunds, by its refund number; another app's is not found.
func (s *Service) Refund(ctx context.Context, app *orderpay.App, refundNo string) (*RefundView, error) {
	r, err := s.cfg.Store.AppRefundByNo(ctx, app.ID, refundNo)
	if err != nil {
		return nil, err
	}
	return s.refundView(ctx, r)
}

// Refunds lists the app's refunds, newest first, of one payment if paymentNo is set.
func (s *Service) Refunds(ctx context.Context, app *orderpay.App, paymentNo, before string, n int) ([]RefundView, error) {
	if paymentNo != "" {
		if _, err := s.own(ctx, app, paymentNo); err != nil {
			return nil, err
		}
	}
	list, err := s.cfg.Store.AppRefunds(ctx, app.ID, orderpay.AppFilter{PaymentNo: paymentNo, Before: before}, limit(n))
	if err != nil {
		return nil, err
	}
	out := make([]RefundView, 0, len(list))
	for i := range list {
		v, err := s.refundView(ctx, &list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

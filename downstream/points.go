package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"orderpay"
)

// Points awards one point per yuan paid (floor(payable/100)) once per order, on order.paid,
// and takes back floor(amount/100) per refund on refund.succeeded, never more than the
// order's award has left.
//
// Idempotency is per business key, not per message: the ledger's key is (order_no, kind,
// ref), ref "" for the award and the out_refund_no for a revoke. So a redelivery, a
// re-publish after the duplicate window, or a second message about the same order all
// change nothing.
type Points struct {
	Store  Store
	Clock  orderpay.Clock
	Logger *slog.Logger
	// Confirm, if set, checks a message against the records before points move (Examples).
	Confirm func(ctx context.Context, m orderpay.Message) error
}

// Handle is the natsbus handler: nil once the effect is committed (or the message is none
// of its business), an error to have it redelivered.
func (p *Points) Handle(ctx context.Context, m orderpay.Message) error {
	log := logger(p.Logger, "downstream-points").With("subject", m.Subject, "msg_id", m.ID)
	switch m.Subject {
	case orderpay.SubjectOrderPaid:
		var ev orderpay.OrderEventPayload
		if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.OrderNo == "" || ev.BuyerID == "" {
			log.Error("malformed order.paid dropped", "err", err)
			return nil
		}
		if ok, err := acts(ctx, p.Confirm, log, m); !ok {
			return err
		}
		points := max(ev.Payable, 0) / 100
		// The award is recorded even at 0 points: a refund then knows the order was paid.
		applied, err := p.Store.AwardPoints(ctx, PointsEntry{OrderNo: ev.OrderNo, Kind: PointsAward, Points: points,
			BuyerID: ev.BuyerID, MsgID: messageKey(m), CreatedAt: now(p.Clock)})
		if err != nil {
			return err
		}
		if applied {
			log.Info("points awarded", "order_no", ev.OrderNo, "buyer_id", ev.BuyerID, "points", points)
		} else {
			log.Debug("points already awarded", "order_no", ev.OrderNo)
		}
		return nil
	case orderpay.SubjectRefundSucceeded:
		var ev orderpay.RefundEventPayload
		if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.OrderNo == "" || ev.OutRefundNo == "" {
			log.Error("malformed refund.succeeded dropped", "err", err)
			return nil
		}
		if orderpay.IsAppOrderKey(ev.OrderNo) {
			return nil // a business app's payment: no order of the shop, no points
		}
		if !RevokesPoints(ev.Reason) {
			log.Debug("refund of money the order never kept: points unchanged", "order_no", ev.OrderNo, "reason", ev.Reason)
			return nil
		}
		if ok, err := acts(ctx, p.Confirm, log, m); !ok {
			return err
		}
		points, applied, err := p.Store.RevokePoints(ctx, PointsEntry{OrderNo: ev.OrderNo, Kind: PointsRevoke, Ref: ev.OutRefundNo,
			Points: max(ev.Amount, 0) / 100, MsgID: messageKey(m), CreatedAt: now(p.Clock)})
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			// The refund overtook order.paid (which failed once and waits for its retry):
			// retry it after the award, or its points would never be taken back.
			return fmt.Errorf("%w: refund %s of order %s before its award", errRetry, ev.OutRefundNo, ev.OrderNo)
		}
		if err != nil {
			return err
		}
		if applied {
			log.Info("points revoked", "order_no", ev.OrderNo, "out_refund_no", ev.OutRefundNo, "points", points)
		}
		return nil
	}
	return nil
}

// RevokesPoints reports whether a refund for this reason takes points back. The payment
// center's own refunds return money the order never kept: a second paid attempt
// (duplicate_payment, the order stays paid by the first), an attempt paid after it was
// closed (late_payment), a payment for an order cancelled meanwhile (order_cancelled) or
// for an order whose units sold out before it came (sold_out), or for another amount than the
// order's (amount_mismatch); those were never paid, so never awarded. Any other refund (after-sales) returns money the order was
// paid with.
func RevokesPoints(reason string) bool {
	switch reason {
	case orderpay.RefundReasonDuplicate, orderpay.RefundReasonLate, orderpay.RefundReasonCancelled, orderpay.RefundReasonSoldOut,
		orderpay.RefundReasonAmountMismatch:
		return false
	}
	return true
}

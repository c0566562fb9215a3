package order

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"orderpay"
)

// After-sales ("售后"): a refund of units that have not shipped, reviewed by the
// merchant or approved by a rule; a return of shipped units, reviewed, sent back, received
// and restocked before the money goes back. Both may be partial, by line and quantity; the
// money for k units of a line is orderpay.RefundShare of the line's payable, so coupons are
// taken back in proportion and the parts of a line never sum past what was paid for it.
// The money goes back through a channel refund the payment center sends and queries until it
// is final; its number is the request's, so it can never be paid twice.

// AfterSaleRequest is a buyer's request.
type AfterSaleRequest struct {
	BuyerID string
	Kind    orderpay.AfterSaleKind
	Reason  string
	Items   []AfterSaleItemRequest
}

// AfterSaleItemRequest is some units of one order line.
type AfterSaleItemRequest struct {
	Line int
	Qty  int64
}

// lineUnits is what the order's parcels and earlier requests say about one line.
type lineUnits struct {
	unshipped int64 // in PENDING parcels, not refunded there
	shipped   int64 // in SHIPPED or RECEIVED parcels within the return window
	requested int64 // in requests that count (not rejected)
	money     int64 // what those requests give back for this line
	returns   int64 // of those, units in return requests
	// promised: units in refund requests not yet approved; they are still in their
	// unshipped parcels (approval takes them out), but spoken for.
	promised int64
}

// RequestAfterSale records a buyer's refund or return request. A refund before shipping
// whose amount is within AutoApproveRefundMax is approved at once by the rule, in the same
// transaction; everything else waits for the merchant's review.
func (s *Service) RequestAfterSale(ctx context.Context, orderNo string, req AfterSaleRequest) (*orderpay.AfterSale, error) {
	if req.Kind != orderpay.AfterSaleRefund && req.Kind != orderpay.AfterSaleReturn {
		return nil, orderpay.Errorf(orderpay.EINVALID, "kind must be refund (before shipping) or return (after shipping), not %q", req.Kind)
	}
	if len(req.Reason) > 256 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "reason must be at most 256 bytes")
	}
	if len(req.Items) == 0 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "items: at least one line")
	}
	if _, err := s.buyersOrder(ctx, orderNo, req.BuyerID); err != nil {
		return nil, err
	}
	var out *orderpay.AfterSale
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		now := orderpay.Now(s.cfg.Clock)
		a, err := s.newAfterSale(ctx, tx, orderNo, req, now)
		if err != nil {
			return err
		}
		if err := tx.CreateAfterSale(ctx, a); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, afterSaleMessage(orderpay.SubjectRefundRequested, a, now)); err != nil {
			return err
		}
		if a.Kind == orderpay.AfterSaleRefund && a.Amount <= s.cfg.AutoApproveRefundMax {
			if err := s.approve(ctx, tx, a, "rule:auto-approve", fmt.Sprintf("refund before shipping of %d fen, within the %d fen rule", a.Amount, s.cfg.AutoApproveRefundMax), true, now); err != nil {
				return err
			}
		}
		out = a
		return nil
	})
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT && strings.Contains(orderpay.ErrorMessage(err), "exists") {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "another after-sales request for order %s was made at the same moment; try again", orderNo)
	}
	if err != nil {
		return nil, err
	}
	s.cfg.OutboxWritten()
	s.cfg.RefundCreated()
	s.log.Info("after-sales request", "order_no", orderNo, "after_sale_no", out.No, "kind", out.Kind, "amount", out.Amount, "status", out.Status)
	return s.cfg.Store.AfterSale(ctx, out.No)
}

// newAfterSale validates a request against the order, its parcels and its earlier requests,
// and prices it, in tx.
func (s *Service) newAfterSale(ctx context.Context, tx orderpay.Tx, orderNo string, req AfterSaleRequest, now time.Time) (*orderpay.AfterSale, error) {
	o, err := tx.Order(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	if o.PaymentNo == "" || (o.Status != orderpay.OrderPaid && o.Status != orderpay.OrderShipped &&
		o.Status != orderpay.OrderReceived && o.Status != orderpay.OrderCompleted) {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s: after-sales need a paid order", o.No, o.Status)
	}
	parcels, err := tx.Shipments(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	earlier, err := tx.AfterSales(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	units := map[int]*lineUnits{}
	for _, it := range o.Items {
		units[it.Line] = &lineUnits{}
	}
	for _, p := range parcels {
		for _, it := range p.Items {
			u := units[it.Line]
			switch {
			case p.Status == orderpay.ShipmentPending:
				u.unshipped += it.Qty - it.Refunded
			case p.Status == orderpay.ShipmentShipped,
				p.Status == orderpay.ShipmentReceived && now.Before(p.ReceivedAt.Add(s.cfg.ReturnWindow)):
				u.shipped += it.Qty
			}
		}
	}
	for _, a := range earlier {
		if !a.Counts() {
			continue
		}
		for _, it := range a.Items {
			u := units[it.Line]
			u.requested += it.Qty
			u.money += it.Amount
			switch {
			case a.Kind == orderpay.AfterSaleReturn:
				u.returns += it.Qty
			case a.Status == orderpay.AfterSaleRequested:
				u.promised += it.Qty
			}
		}
	}
	a := &orderpay.AfterSale{No: orderpay.AfterSaleNo(o.No, len(earlier)+1), OrderNo: o.No, Seq: len(earlier) + 1,
		PaymentNo: o.PaymentNo, BuyerID: o.BuyerID, Kind: req.Kind, Status: orderpay.AfterSaleRequested,
		Reason: strings.TrimSpace(req.Reason), CreatedAt: now, UpdatedAt: now}
	seen := map[int]bool{}
	for _, r := range req.Items {
		i := slices.IndexFunc(o.Items, func(it orderpay.OrderItem) bool { return it.Line == r.Line })
		if i < 0 || seen[r.Line] {
			return nil, orderpay.Errorf(orderpay.EINVALID, "line %d: not a line of order %s, or named twice", r.Line, o.No)
		}
		seen[r.Line] = true
		line, u := o.Items[i], units[r.Line]
		if r.Qty <= 0 || r.Qty > line.Qty {
			return nil, orderpay.Errorf(orderpay.EINVALID, "line %d: qty must be 1 to %d", r.Line, line.Qty)
		}
		// Units already asked for, of either kind, cannot be asked for again; a refund
		// takes units still in unshipped parcels, a return takes units that shipped.
		if u.requested+r.Qty > line.Qty {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "line %d: %d of %d units are already in after-sales requests", r.Line, u.requested, line.Qty)
		}
		if req.Kind == orderpay.AfterSaleRefund && r.Qty > u.unshipped-u.promised {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "line %d: only %d units have not shipped; shipped units are returned, not refunded",
				r.Line, max(u.unshipped-u.promised, 0))
		}
		if req.Kind == orderpay.AfterSaleReturn && r.Qty > u.shipped-u.returns {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "line %d: only %d shipped units can be returned (within %s of receipt)",
				r.Line, max(u.shipped-u.returns, 0), s.cfg.ReturnWindow)
		}
		// Priced from what the requests that still count leave of the line, so that a
		// rejected request's units and money are free again and the line never gives back
		// more than it cost.
		amount := orderpay.RefundShare(line.Payable, line.Qty, u.requested, u.money, r.Qty)
		a.Items = append(a.Items, orderpay.AfterSaleItem{Line: r.Line, SKU: line.SKU, Qty: r.Qty, Amount: amount})
		a.Amount += amount
	}
	slices.SortFunc(a.Items, func(x, y orderpay.AfterSaleItem) int { return x.Line - y.Line })
	return a, nil
}

// Approve is the merchant's approval of a request.
func (s *Service) Approve(ctx context.Context, afterSaleNo, actor string) (*orderpay.AfterSale, error) {
	return s.review(ctx, afterSaleNo, func(tx orderpay.Tx, a *orderpay.AfterSale, now time.Time) error {
		return s.approve(ctx, tx, a, actor, "approved", false, now)
	})
}

// Reject is the merchant's refusal of a request; its units and money are free again.
func (s *Service) Reject(ctx context.Context, afterSaleNo, actor, reason string) (*orderpay.AfterSale, error) {
	if strings.TrimSpace(reason) == "" || len(reason) > 256 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "a rejection needs a reason (at most 256 bytes)")
	}
	return s.review(ctx, afterSaleNo, func(tx orderpay.Tx, a *orderpay.AfterSale, now time.Time) error {
		if err := s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventReject, actor, reason, now); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, afterSaleMessage(orderpay.SubjectRefundRejected, a, now)); err != nil {
			return err
		}
		return s.settleOrder(ctx, tx, a.OrderNo, now)
	})
}

// ShipBack records how the buyer sent a return back.
func (s *Service) ShipBack(ctx context.Context, orderNo, afterSaleNo, buyerID, carrier, trackingNo string) (*orderpay.AfterSale, error) {
	carrier, trackingNo = strings.TrimSpace(carrier), strings.TrimSpace(trackingNo)
	if carrier == "" || trackingNo == "" || len(carrier) > 64 || len(trackingNo) > 64 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "carrier and tracking_no are required (at most 64 bytes each)")
	}
	if _, err := s.buyersOrder(ctx, orderNo, buyerID); err != nil {
		return nil, err
	}
	return s.review(ctx, afterSaleNo, func(tx orderpay.Tx, a *orderpay.AfterSale, now time.Time) error {
		if a.OrderNo != orderNo {
			return orderpay.Errorf(orderpay.ENOTFOUND, "order %s has no after-sales request %s", orderNo, a.No)
		}
		to, err := orderpay.AfterSaleMachine.Next(a.Status, orderpay.AfterSaleEventShipBack)
		if err != nil {
			return err
		}
		return tx.TransitionAfterSale(ctx, orderpay.AfterSaleChange{No: a.No, From: a.Status, To: to, Event: orderpay.AfterSaleEventShipBack,
			At: now, Actor: "buyer:" + buyerID, Reason: carrier + " " + trackingNo, ReturnCarrier: carrier, ReturnTrackingNo: trackingNo})
	})
}

// ReceiveGoods is the merchant receiving a return: the units go back to stock and the money
// goes back to the buyer, in one transaction.
func (s *Service) ReceiveGoods(ctx context.Context, afterSaleNo, actor string) (*orderpay.AfterSale, error) {
	return s.review(ctx, afterSaleNo, func(tx orderpay.Tx, a *orderpay.AfterSale, now time.Time) error {
		if a.Status == orderpay.AfterSaleAwaitingGoods && a.ReturnTrackingNo == "" {
			return orderpay.Errorf(orderpay.ECONFLICT, "return %s has not been sent back yet", a.No)
		}
		if err := s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventReceiveGoods, actor, "goods back in the warehouse", now); err != nil {
			return err
		}
		for _, it := range a.Items {
			if err := tx.RestockSold(ctx, it.SKU, it.Qty); err != nil {
				return err
			}
		}
		if err := tx.Enqueue(ctx, afterSaleMessage(orderpay.SubjectRefundGoodsReceived, a, now)); err != nil {
			return err
		}
		return s.sendRefund(ctx, tx, a, actor, now)
	})
}

// review runs one step on an after-sales request in a transaction and returns it afterwards.
func (s *Service) review(ctx context.Context, afterSaleNo string, step func(tx orderpay.Tx, a *orderpay.AfterSale, now time.Time) error) (*orderpay.AfterSale, error) {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		a, err := tx.AfterSale(ctx, afterSaleNo)
		if err != nil {
			return err
		}
		return step(tx, a, orderpay.Now(s.cfg.Clock))
	})
	if err != nil {
		return nil, err
	}
	s.cfg.OutboxWritten()
	s.cfg.RefundCreated()
	a, err := s.cfg.Store.AfterSale(ctx, afterSaleNo)
	if err == nil {
		s.log.Info("after-sales request moved", "order_no", a.OrderNo, "after_sale_no", a.No, "status", a.Status)
	}
	return a, err
}

// moveAfterSale applies one transition of a request, in tx, and updates a.
func (s *Service) moveAfterSale(ctx context.Context, tx orderpay.Tx, a *orderpay.AfterSale, ev orderpay.AfterSaleEvent, actor, reason string, now time.Time) error {
	to, err := orderpay.AfterSaleMachine.Next(a.Status, ev)
	if err != nil {
		return err
	}
	if err := tx.TransitionAfterSale(ctx, orderpay.AfterSaleChange{No: a.No, From: a.Status, To: to, Event: ev, At: now, Actor: actor,
		Reason: reason, AutoReview: strings.HasPrefix(actor, "rule:")}); err != nil {
		return err
	}
	a.Status, a.UpdatedAt = to, now
	return nil
}

// approve moves a REQUESTED request on, in tx: a refund before shipping takes its units out
// of their unshipped parcels (a parcel left empty is cancelled) and back to stock, and its
// money is sent; a return waits for the goods.
func (s *Service) approve(ctx context.Context, tx orderpay.Tx, a *orderpay.AfterSale, actor, reason string, auto bool, now time.Time) error {
	if err := s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventApprove, actor, reason, now); err != nil {
		return err
	}
	a.AutoReview = auto
	if err := tx.Enqueue(ctx, afterSaleMessage(orderpay.SubjectRefundApproved, a, now)); err != nil {
		return err
	}
	if a.Kind == orderpay.AfterSaleReturn {
		return s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventAwaitGoods, actor, "waiting for the goods to come back", now)
	}
	parcels, err := tx.Shipments(ctx, a.OrderNo)
	if err != nil {
		return err
	}
	for _, it := range a.Items {
		left := it.Qty
		for _, p := range parcels {
			if p.Status != orderpay.ShipmentPending || left == 0 {
				continue
			}
			for i := range p.Items {
				pi := &p.Items[i]
				if pi.Line != it.Line || pi.Qty == pi.Refunded {
					continue
				}
				n := min(left, pi.Qty-pi.Refunded)
				// Conditional on the parcel still being unshipped: a parcel that ships at
				// the same moment makes this ECONFLICT, and the buyer asks for a return.
				if err := tx.RefundShipmentUnits(ctx, p.No, pi.Line, n, now); err != nil {
					return err
				}
				pi.Refunded += n // as stored, so that the emptied parcels are known below
				left -= n
			}
		}
		if left > 0 {
			return orderpay.Errorf(orderpay.ECONFLICT, "line %d: %d units have shipped meanwhile; ask for a return", it.Line, left)
		}
		if err := tx.RestockSold(ctx, it.SKU, it.Qty); err != nil {
			return err
		}
	}
	// Parcels with nothing left to send are cancelled.
	for _, p := range parcels {
		if p.Status == orderpay.ShipmentPending && p.Units() == 0 {
			if err := tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: p.No, From: p.Status, To: orderpay.ShipmentCancelled,
				Event: orderpay.ShipmentEventCancel, At: now, Actor: actor, Reason: "every unit refunded before shipping (" + a.No + ")"}); err != nil {
				return err
			}
		}
	}
	if err := s.sendRefund(ctx, tx, a, actor, now); err != nil {
		return err
	}
	return s.settleOrder(ctx, tx, a.OrderNo, now)
}

// sendRefund records the channel refund of an approved request, in tx: the payment center's
// refund worker sends it and queries it until it is final, then calls AfterSaleRefundFinal.
func (s *Service) sendRefund(ctx context.Context, tx orderpay.Tx, a *orderpay.AfterSale, actor string, now time.Time) error {
	if err := s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventRefund, actor, fmt.Sprintf("refund of %d fen sent", a.Amount), now); err != nil {
		return err
	}
	if a.Amount == 0 {
		// Units bought for nothing (a coupon covered the whole line): no money to send.
		return s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventSucceed, "system", "nothing to refund", now)
	}
	p, err := tx.Payment(ctx, a.PaymentNo)
	if err != nil {
		return err
	}
	if p.PaidOutTradeNo == "" {
		return orderpay.Errorf(orderpay.EINTERNAL, "payment %s has no paid attempt to refund", p.No)
	}
	return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: a.No, OutTradeNo: p.PaidOutTradeNo, PaymentNo: p.No,
		Channel: p.PaidChannel, Amount: a.Amount, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundPending,
		NextAt: now, CreatedAt: now, UpdatedAt: now})
}

// AfterSaleRefundFinal is called by the payment center in the transaction that brings a
// channel refund's money back (the channel made it, or an operator paid it outside the
// channel): an after-sales request's refund moves it to SUCCESS, and its order may end. A
// refund the channel refuses never calls it: the request stays REFUNDING, its money owed,
// while the refund is retried or waits for an operator. Refunds of other reasons are not the
// order system's.
func (s *Service) AfterSaleRefundFinal(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
	if r.Reason != orderpay.RefundReasonAfterSales {
		return nil
	}
	a, err := tx.AfterSale(ctx, r.OutRefundNo)
	if err != nil {
		return err
	}
	reason := "the channel refunded it"
	if r.Status == orderpay.ChannelRefundResolved {
		reason = fmt.Sprintf("paid back outside the channel by %s, reference %s", r.ResolvedBy, r.ResolvedRef)
	}
	if err := s.moveAfterSale(ctx, tx, a, orderpay.AfterSaleEventSucceed, "payment-center", reason, at); err != nil {
		return err
	}
	return s.settleOrder(ctx, tx, a.OrderNo, at)
}

// AfterSales returns an order's after-sales requests.
func (s *Service) AfterSales(ctx context.Context, orderNo string) ([]orderpay.AfterSale, error) {
	if _, err := s.cfg.Store.Order(ctx, orderNo); err != nil {
		return nil, err
	}
	return s.cfg.Store.AfterSales(ctx, orderNo)
}

func afterSaleMessage(subject string, a *orderpay.AfterSale, at time.Time) orderpay.Message {
	payload, _ := json.Marshal(orderpay.AfterSalePayload{AfterSaleNo: a.No, OrderNo: a.OrderNo, BuyerID: a.BuyerID, Kind: a.Kind,
		Status: a.Status, Amount: a.Amount, At: at})
	return orderpay.Message{ID: subject + ":" + a.No, Subject: subject, Payload: payload, CreatedAt: at}
}

// AfterSalesInStatus lists requests in a status, oldest first: the merchant's review queue
// (REQUESTED), returns on their way back (AWAITING_GOODS), or refunds on their way
// (REFUNDING; those an operator must settle are the payment center's queue).
func (s *Service) AfterSalesInStatus(ctx context.Context, status orderpay.AfterSaleStatus, limit int) ([]orderpay.AfterSale, error) {
	return s.cfg.Store.AfterSalesInStatus(ctx, status, limit)
}

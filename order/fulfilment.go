package order

import (
	"context"
	"fmt"
	"strings"
	"time"

	"orderpay"
)

// Fulfilment ("拆单", "发货", "确认收货"): a paid order is split into parcels in the
// transaction that marks it paid; each parcel is shipped, then received by the buyer or
// automatically at its deadline; the order follows its parcels.

// packShipments writes the parcels of an order that has just been paid, in tx; skus has
// every SKU of its lines.
func (s *Service) packShipments(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, skus map[string]*orderpay.SKU, now time.Time) error {
	parcels, err := orderpay.PlanShipments(o.Items, skus, s.cfg.PackageLimits)
	if err != nil {
		return err
	}
	for i, p := range parcels {
		sh := &orderpay.Shipment{No: orderpay.ShipmentNo(o.No, i+1), OrderNo: o.No, Seq: i + 1, MerchantID: p.MerchantID,
			Warehouse: p.Warehouse, Status: orderpay.ShipmentPending, WeightG: p.WeightG, VolumeCm3: p.VolumeCm3,
			CreatedAt: now, UpdatedAt: now, Items: p.Items}
		if err := tx.CreateShipment(ctx, sh); err != nil {
			return err
		}
	}
	return nil
}

// Shipments returns an order's parcels.
func (s *Service) Shipments(ctx context.Context, orderNo string) ([]orderpay.Shipment, error) {
	if _, err := s.cfg.Store.Order(ctx, orderNo); err != nil {
		return nil, err
	}
	return s.cfg.Store.Shipments(ctx, orderNo)
}

// ChangeAddress sets where an order's goods go. The buyer may change it until the first
// parcel ships (the store's update is conditional on the order not having shipped, so a
// change racing the shipment either lands before it or is refused).
func (s *Service) ChangeAddress(ctx context.Context, orderNo, buyerID string, a orderpay.Address) (*orderpay.Order, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	o, err := s.buyersOrder(ctx, orderNo, buyerID)
	if err != nil {
		return nil, err
	}
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.ChangeOrderAddress(ctx, o.No, a, "buyer:"+buyerID, orderpay.Now(s.cfg.Clock))
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("delivery address changed", "order_no", o.No)
	return s.cfg.Store.Order(ctx, o.No)
}

// buyersOrder returns the order if buyerID is its buyer. Another buyer's order reads as one
// that does not exist (ENOTFOUND), so that order numbers cannot be probed.
func (s *Service) buyersOrder(ctx context.Context, orderNo, buyerID string) (*orderpay.Order, error) {
	if buyerID == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "buyer_id is required")
	}
	o, err := s.cfg.Store.Order(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	if o.BuyerID != buyerID {
		return nil, orderpay.NotFound("order", orderNo)
	}
	return o, nil
}

// buyersShipment returns a parcel of the buyer's order.
func (s *Service) buyersShipment(ctx context.Context, orderNo, shipmentNo, buyerID string) (*orderpay.Shipment, error) {
	if _, err := s.buyersOrder(ctx, orderNo, buyerID); err != nil {
		return nil, err
	}
	sh, err := s.cfg.Store.Shipment(ctx, shipmentNo)
	if err != nil {
		return nil, err
	}
	if sh.OrderNo != orderNo {
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "order %s has no shipment %s", orderNo, shipmentNo)
	}
	return sh, nil
}

// Ship hands a parcel to the carrier: its receipt countdown starts (ten days), and the order
// becomes SHIPPED with its first parcel (order.shipped), in one transaction.
func (s *Service) Ship(ctx context.Context, shipmentNo, carrier, trackingNo, actor string) (*orderpay.Shipment, error) {
	carrier, trackingNo = strings.TrimSpace(carrier), strings.TrimSpace(trackingNo)
	if carrier == "" || trackingNo == "" || len(carrier) > 64 || len(trackingNo) > 64 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "carrier and tracking_no are required (at most 64 bytes each)")
	}
	var shipped bool
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		shipped = false
		sh, err := tx.Shipment(ctx, shipmentNo)
		if err != nil {
			return err
		}
		if sh.Status == orderpay.ShipmentShipped && sh.Carrier == carrier && sh.TrackingNo == trackingNo {
			return nil // the same request again
		}
		to, err := orderpay.ShipmentMachine.Next(sh.Status, orderpay.ShipmentEventShip)
		if err != nil {
			return err
		}
		o, err := tx.Order(ctx, sh.OrderNo)
		if err != nil {
			return err
		}
		if o.Address.Empty() {
			return orderpay.Errorf(orderpay.EINVALID, "order %s has no delivery address: the buyer must set one first", o.No)
		}
		now := orderpay.Now(s.cfg.Clock)
		if err := tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: sh.No, From: sh.Status, To: to, Event: orderpay.ShipmentEventShip,
			At: now, Actor: actor, Reason: carrier + " " + trackingNo, Carrier: carrier, TrackingNo: trackingNo,
			ReceiveBy: now.Add(orderpay.ReceiptWindow)}); err != nil {
			return err
		}
		shipped = true
		if o.Status != orderpay.OrderPaid {
			return nil // an earlier parcel already moved the order
		}
		return s.moveOrder(ctx, tx, o, orderpay.OrderEventShip, actor, "first parcel "+sh.No+" shipped", orderpay.SubjectOrderShipped, now)
	})
	if err != nil {
		return nil, err
	}
	if shipped {
		s.cfg.OutboxWritten()
		s.log.Info("shipment shipped", "shipment_no", shipmentNo, "carrier", carrier)
	}
	return s.cfg.Store.Shipment(ctx, shipmentNo)
}

// moveOrder applies one transition of the order and writes its event, in tx.
func (s *Service) moveOrder(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, ev orderpay.OrderEvent, actor, reason, subject string, now time.Time) error {
	to, err := orderpay.OrderMachine.Next(o.Status, ev)
	if err != nil {
		return err
	}
	if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: o.No, From: o.Status, To: to, Event: ev, At: now, Actor: actor, Reason: reason}); err != nil {
		return err
	}
	o.Status = to
	return tx.Enqueue(ctx, orderMessage(subject, o, now))
}

// ConfirmReceipt is the buyer confirming a parcel arrived. Confirming it again is a no-op.
func (s *Service) ConfirmReceipt(ctx context.Context, orderNo, shipmentNo, buyerID string) (*orderpay.Shipment, error) {
	sh, err := s.buyersShipment(ctx, orderNo, shipmentNo, buyerID)
	if err != nil {
		return nil, err
	}
	if sh.Status == orderpay.ShipmentReceived {
		return sh, nil
	}
	if err := s.receive(ctx, sh.No, "buyer:"+buyerID, "buyer"); err != nil {
		return nil, err
	}
	return s.cfg.Store.Shipment(ctx, sh.No)
}

// receive moves a SHIPPED parcel to RECEIVED and lets the order follow, in one transaction.
func (s *Service) receive(ctx context.Context, shipmentNo, actor, by string) error {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		sh, err := tx.Shipment(ctx, shipmentNo)
		if err != nil {
			return err
		}
		to, err := orderpay.ShipmentMachine.Next(sh.Status, orderpay.ShipmentEventReceive)
		if err != nil {
			return err
		}
		now := orderpay.Now(s.cfg.Clock)
		c := orderpay.ShipmentChange{No: sh.No, From: sh.Status, To: to, Event: orderpay.ShipmentEventReceive,
			At: now, Actor: actor, Reason: "confirmed by the buyer", ReceivedBy: by}
		if by == "auto" {
			if now.Before(sh.ReceiveBy) {
				return orderpay.Errorf(orderpay.ECONFLICT, "shipment %s was extended to %s", sh.No, sh.ReceiveBy)
			}
			c.Reason, c.PrevReceiveBy = "receipt deadline "+sh.ReceiveBy.UTC().Format(time.RFC3339)+" passed", sh.ReceiveBy
		}
		if err := tx.TransitionShipment(ctx, c); err != nil {
			return err
		}
		return s.settleOrder(ctx, tx, sh.OrderNo, now)
	})
	if err == nil {
		s.cfg.OutboxWritten()
		s.log.Info("shipment received", "shipment_no", shipmentNo, "by", by)
	}
	return err
}

// settleOrder moves an order on once its parcels and after-sales allow, in tx: a shipped one
// to RECEIVED when every parcel is received (or was cancelled by refunds before it left), and
// then to COMPLETED when no after-sales request is open; a paid one whose every parcel was
// cancelled by refunds before shipping to REFUNDED, once the money of every request is back.
// Each step writes its event.
func (s *Service) settleOrder(ctx context.Context, tx orderpay.Tx, orderNo string, now time.Time) error {
	o, err := tx.Order(ctx, orderNo)
	if err != nil {
		return err
	}
	if o.Status == orderpay.OrderPaid {
		return s.settleRefundedOrder(ctx, tx, o, now)
	}
	if o.Status == orderpay.OrderShipped {
		parcels, err := tx.Shipments(ctx, orderNo)
		if err != nil {
			return err
		}
		for _, p := range parcels {
			if p.Status != orderpay.ShipmentReceived && p.Status != orderpay.ShipmentCancelled {
				return nil
			}
		}
		if err := s.moveOrder(ctx, tx, o, orderpay.OrderEventReceive, "system", "every parcel received", orderpay.SubjectOrderReceived, now); err != nil {
			return err
		}
	}
	if o.Status != orderpay.OrderReceived {
		return nil
	}
	if open, err := openAfterSale(ctx, tx, orderNo); err != nil || open {
		return err // completion waits for the open request
	}
	return s.moveOrder(ctx, tx, o, orderpay.OrderEventComplete, "system", "received, no after-sales request open", orderpay.SubjectOrderCompleted, now)
}

// settleRefundedOrder ends a paid order whose every unit was refunded before shipping (every
// parcel cancelled) in REFUNDED, once no after-sales request is open: each refund's money is
// back, through the channel or outside it.
func (s *Service) settleRefundedOrder(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, now time.Time) error {
	parcels, err := tx.Shipments(ctx, o.No)
	if err != nil || len(parcels) == 0 {
		return err
	}
	for _, p := range parcels {
		if p.Status != orderpay.ShipmentCancelled {
			return nil
		}
	}
	if open, err := openAfterSale(ctx, tx, o.No); err != nil || open {
		return err
	}
	return s.moveOrder(ctx, tx, o, orderpay.OrderEventRefund, "system", "every unit refunded before shipping, the money back",
		orderpay.SubjectOrderRefunded, now)
}

// openAfterSale reports whether one of the order's after-sales requests is still open: not
// rejected, and its money not back yet.
func openAfterSale(ctx context.Context, tx orderpay.Tx, orderNo string) (bool, error) {
	sales, err := tx.AfterSales(ctx, orderNo)
	if err != nil {
		return false, err
	}
	for _, a := range sales {
		if a.Status != orderpay.AfterSaleSucceeded && a.Status != orderpay.AfterSaleRejected {
			return true, nil
		}
	}
	return false, nil
}

// ExtendReceipt moves a shipped parcel's receipt deadline later: by the buyer once, by
// BuyerReceiptExtension; by the merchant or the platform as often as they need, by d (at most
// MaxReceiptExtension each time).
func (s *Service) ExtendReceipt(ctx context.Context, shipmentNo, by, actor string, d time.Duration) (*orderpay.Shipment, error) {
	switch by {
	case orderpay.ExtendByBuyer:
		d = orderpay.BuyerReceiptExtension
	case orderpay.ExtendByMerchant, orderpay.ExtendByPlatform:
		if d <= 0 || d > orderpay.MaxReceiptExtension {
			return nil, orderpay.Errorf(orderpay.EINVALID, "an extension is 1 to %d days", int(orderpay.MaxReceiptExtension/(24*time.Hour)))
		}
	default:
		return nil, orderpay.Errorf(orderpay.EINVALID, "extend by buyer, merchant or platform, not %q", by)
	}
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		sh, err := tx.Shipment(ctx, shipmentNo)
		if err != nil {
			return err
		}
		if _, err := orderpay.ShipmentMachine.Next(sh.Status, orderpay.ShipmentEventExtend); err != nil {
			return err
		}
		if by == orderpay.ExtendByBuyer && sh.BuyerExtended {
			return orderpay.Errorf(orderpay.ECONFLICT, "the buyer has already extended shipment %s once", sh.No)
		}
		return tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: sh.No, From: sh.Status, To: sh.Status, Event: orderpay.ShipmentEventExtend,
			At: orderpay.Now(s.cfg.Clock), Actor: actor, Reason: fmt.Sprintf("extended by the %s by %s", by, d),
			ReceiveBy: sh.ReceiveBy.Add(d), PrevReceiveBy: sh.ReceiveBy, BuyerExtended: by == orderpay.ExtendByBuyer})
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("receipt deadline extended", "shipment_no", shipmentNo, "by", by, "extension", d)
	return s.cfg.Store.Shipment(ctx, shipmentNo)
}

// BuyerExtendReceipt is the buyer's one extension of a parcel of their order.
func (s *Service) BuyerExtendReceipt(ctx context.Context, orderNo, shipmentNo, buyerID string) (*orderpay.Shipment, error) {
	if _, err := s.buyersShipment(ctx, orderNo, shipmentNo, buyerID); err != nil {
		return nil, err
	}
	return s.ExtendReceipt(ctx, shipmentNo, orderpay.ExtendByBuyer, "buyer:"+buyerID, 0)
}

// AutoConfirmResult counts what one auto-confirm sweep did.
type AutoConfirmResult struct {
	Received, Failed int
}

// AutoConfirmDue confirms receipt of every shipped parcel whose deadline has passed
// ("超时自动确认收货"). A parcel the buyer confirmed, or whose deadline was extended,
// meanwhile is left alone by the conditional update.
func (s *Service) AutoConfirmDue(ctx context.Context, limit int) (AutoConfirmResult, error) {
	var res AutoConfirmResult
	due, err := s.cfg.Store.DueShipments(ctx, orderpay.Now(s.cfg.Clock), limit)
	if err != nil {
		return res, err
	}
	for _, no := range due {
		switch err := s.receive(ctx, no, "system", "auto"); {
		case err == nil:
			res.Received++
		case orderpay.ErrorCode(err) == orderpay.ECONFLICT:
			// confirmed or extended meanwhile
		default:
			res.Failed++
			s.log.Error("auto-confirming receipt failed; the next sweep retries", "shipment_no", no, "err", err)
		}
	}
	return res, nil
}

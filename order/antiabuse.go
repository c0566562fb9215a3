package order

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"orderpay"
)

// Anti-abuse: blocked buyers and devices create no order, and a SKU may cap the
// units one buyer holds in orders that are not cancelled.

// refuseBlocked refuses a blocked buyer or device, whose blocklist entries are entries,
// with EFORBIDDEN.
func refuseBlocked(entries []orderpay.BlockEntry) error {
	if len(entries) > 0 {
		return orderpay.Errorf(orderpay.EFORBIDDEN, "this %s is blocked from ordering", entries[0].Kind)
	}
	return nil
}

// countPurchase counts an order line against its SKU's per-buyer limit, in the order's
// transaction (ELIMIT if it would pass it); a SKU without a limit counts nothing.
func countPurchase(ctx context.Context, tx orderpay.Tx, buyerID string, sku *orderpay.SKU, qty int64) error {
	if sku.LimitPerBuyer <= 0 {
		return nil
	}
	return tx.AddBuyerPurchase(ctx, buyerID, sku.SKU, qty, sku.LimitPerBuyer)
}

// uncountPurchase gives a cancelled order line's units back to the buyer's limit.
func uncountPurchase(ctx context.Context, tx orderpay.Tx, buyerID string, it orderpay.OrderItem) error {
	sku, err := tx.SKU(ctx, it.SKU)
	if err != nil || sku.LimitPerBuyer <= 0 {
		return err
	}
	return tx.ReleaseBuyerPurchase(ctx, buyerID, it.SKU, it.Qty)
}

// Block adds a buyer or device to the blocklist, or updates its reason.
func (s *Service) Block(ctx context.Context, kind, value, reason string) (*orderpay.BlockEntry, error) {
	if kind != orderpay.BlockBuyer && kind != orderpay.BlockDevice {
		return nil, orderpay.Errorf(orderpay.EINVALID, "kind must be buyer or device")
	}
	if !orderpay.ValidID(value) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "the %s id must be 1-64 letters, digits, '-', '_' or '.'", kind)
	}
	if len(reason) > 256 {
		return nil, orderpay.Errorf(orderpay.EINVALID, "reason must be at most 256 bytes")
	}
	e := orderpay.BlockEntry{Kind: kind, Value: value, Reason: reason, CreatedAt: orderpay.Now(s.cfg.Clock)}
	if err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.Block(ctx, e) }); err != nil {
		return nil, err
	}
	s.log.Info("blocked", "kind", kind, "value", value, "reason", reason)
	return &e, nil
}

// Unblock removes a buyer or device from the blocklist (ENOTFOUND if it is not there).
func (s *Service) Unblock(ctx context.Context, kind, value string) error {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.Unblock(ctx, kind, value) })
	if err == nil {
		s.log.Info("unblocked", "kind", kind, "value", value)
	}
	return err
}

// Blocklist lists every blocked buyer and device.
func (s *Service) Blocklist(ctx context.Context) ([]orderpay.BlockEntry, error) {
	return s.cfg.Store.Blocklist(ctx)
}

// capOf is the cap of sku's product type, with the SKU's own caps in place of the shop's
// where it sets them.
func (s *Service) capOf(sku *orderpay.SKU) orderpay.BuyerCap {
	c := s.cfg.BuyerCaps[sku.ProductType]
	c.PerOrder = cmp.Or(sku.MaxPerOrder, c.PerOrder)
	c.UnpaidUnits = cmp.Or(sku.MaxUnpaidPerBuyer, c.UnpaidUnits)
	return c
}

// checkBuyerCaps refuses the order o, not yet written, if it would pass one of the buyer
// caps (orderpay.BuyerCaps): EQUANTITYCAP, more units of a SKU than one order may hold;
// EUNPAIDORDERS, more unpaid orders of its kind than one buyer may hold; EUNPAIDCAP, more
// units of a SKU than one buyer may hold unpaid. The last two are counted in the order's
// transaction under a lock on the buyer (Tx.LockBuyerUnpaid), so that two orders of one
// buyer created at once are counted one after the other.
func (s *Service) checkBuyerCaps(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, skus map[string]*orderpay.SKU) error {
	qty := map[string]int64{} // units per SKU: an order may name a SKU on several lines
	for _, it := range o.Items {
		qty[it.SKU] += it.Qty
	}
	var counted []string // the SKUs with a cap on unpaid units
	for _, code := range slices.Sorted(maps.Keys(qty)) {
		c := s.capOf(skus[code])
		if c.PerOrder > 0 && qty[code] > c.PerOrder {
			return orderpay.Errorf(orderpay.EQUANTITYCAP, "sku %s: at most %d units in one order", code, c.PerOrder)
		}
		if c.UnpaidUnits > 0 {
			counted = append(counted, code)
		}
	}
	orders := s.cfg.BuyerCaps[o.ProductType].UnpaidOrders
	if orders <= 0 && len(counted) == 0 {
		return nil
	}
	held, err := tx.LockBuyerUnpaid(ctx, o.BuyerID, counted)
	if err != nil {
		return err
	}
	if orders > 0 && held.Orders[o.ProductType]+1 > orders {
		return orderpay.Errorf(orderpay.EUNPAIDORDERS, "at most %d unpaid %s orders per buyer: pay or cancel one first", orders, o.ProductType)
	}
	for _, code := range counted {
		if c := s.capOf(skus[code]); held.Units[code]+qty[code] > c.UnpaidUnits {
			return orderpay.Errorf(orderpay.EUNPAIDCAP, "sku %s: at most %d units per buyer in unpaid orders, and %d are held already", code, c.UnpaidUnits, held.Units[code])
		}
	}
	return nil
}

// capped says whether err is a buyer cap's refusal.
func capped(err error) bool {
	switch orderpay.ErrorCode(err) {
	case orderpay.EQUANTITYCAP, orderpay.EUNPAIDCAP, orderpay.EUNPAIDORDERS:
		return true
	}
	return false
}

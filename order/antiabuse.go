package order

import (
	"context"

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

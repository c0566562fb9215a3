package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"orderpay"
)

// The "payment" and "reserve" stock policies (docs/design.md §6, "扣减库存"): what each
// policy does at create, at payment and at cancel, and the sweeper that ends expired holds.

// Defaults.
const (
	// ReserveMinutesDefault is a "reserve" SKU's hold when its reserve_minutes is left out.
	ReserveMinutesDefault = 10
	// ReserveMinutesMax bounds a hold to a week; the order's pay deadline bounds it anyway.
	ReserveMinutesMax = 7 * 24 * 60
	// BackupUnitsMax bounds a SKU's backup stock.
	BackupUnitsMax = 10_000_000
)

// SoldOutReason is the reason in the history of an order cancelled because its payment
// arrived after the last unit was sold.
const SoldOutReason = "sold out after payment"

// errSoldOut is a stock move at payment that found too few units. It makes the payment's
// transaction roll back (a split SKU may have moved part of the units), before the order is
// cancelled in a transaction of its own.
var errSoldOut = errors.New("sold out at payment")

// validateReserve checks and defaults a new SKU's hold: reserve_minutes belongs to the
// "reserve" policy only, where 0 (left out) takes ReserveMinutesDefault.
func (n *NewSKU) validateReserve() error {
	if n.StockPolicy != orderpay.StockReserve {
		if n.ReserveMinutes != 0 {
			return orderpay.Errorf(orderpay.EINVALID, "reserve_minutes applies only to stock_policy reserve")
		}
		return nil
	}
	if n.ReserveMinutes == 0 {
		n.ReserveMinutes = ReserveMinutesDefault
	}
	if n.ReserveMinutes < 0 || n.ReserveMinutes > ReserveMinutesMax {
		return orderpay.Errorf(orderpay.EINVALID, "reserve_minutes must be between 1 and %d", ReserveMinutesMax)
	}
	return nil
}

// deductAtCreate applies the SKU's stock policy at order creation. checked counts the
// units of "payment" SKUs this order has checked so far, so that two lines of one SKU are
// checked together.
func (s *Service) deductAtCreate(ctx context.Context, tx orderpay.Tx, sku *orderpay.SKU, qty int64, checked map[string]int64) error {
	switch sku.StockPolicy {
	case orderpay.StockAtOrder, orderpay.StockReserve:
		// A reserve SKU's hold row is written once the order exists (createHolds).
		return tx.LockStock(ctx, sku.SKU, qty)
	case orderpay.StockAtPayment:
		// Check only: nothing is deducted until the payment, which may then find the units
		// gone (and refund).
		st, err := tx.Stock(ctx, sku.SKU)
		if err != nil {
			return err
		}
		checked[sku.SKU] += qty
		if st.Available < checked[sku.SKU] {
			return orderpay.Errorf(orderpay.EOUTOFSTOCK, "not enough stock for sku %q", sku.SKU)
		}
		return nil
	default:
		return orderpay.Errorf(orderpay.EINTERNAL, "sku %s has unknown stock policy %q", sku.SKU, sku.StockPolicy)
	}
}

// createHolds writes the hold of every line of a "reserve" SKU, in the order's transaction
// (after the order row, which the holds reference). A hold ends at the SKU's reserve
// minutes, or at the pay deadline if that comes first: past the deadline the timeout close
// cancels the order and gives the units back anyway, so a longer hold would only keep them
// from other buyers.
func (s *Service) createHolds(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, skus map[string]*orderpay.SKU, now time.Time) error {
	for _, it := range o.Items {
		sku := skus[it.SKU]
		if sku.StockPolicy != orderpay.StockReserve {
			continue
		}
		until := now.Add(time.Duration(sku.ReserveMinutes) * s.cfg.ReserveMinute)
		if o.PayDeadline.Before(until) {
			until = o.PayDeadline
		}
		if err := tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: o.No, Line: it.Line, SKU: it.SKU, Qty: it.Qty,
			HoldUntil: until, CreatedAt: now}); err != nil {
			return err
		}
	}
	return nil
}

// sellAtPayment applies the SKU's stock policy to one line of an order being paid (sku is
// the line's SKU). A deduction that finds too few units, in available and then in the
// SKU's backup, is errSoldOut.
func (s *Service) sellAtPayment(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem, sku *orderpay.SKU, now time.Time) error {
	switch sku.StockPolicy {
	case orderpay.StockAtOrder:
		return tx.SellLockedStock(ctx, it.SKU, it.Qty)
	case orderpay.StockAtPayment:
		return sellAvailableOrBackup(ctx, tx, o, it, now)
	case orderpay.StockReserve:
		// Taking the hold is conditional, so a payment and the hold sweeper cannot both
		// move its units: whichever ends the hold first moves them.
		err := tx.EndStockHold(ctx, o.No, it.Line, orderpay.HoldSold, now)
		switch orderpay.ErrorCode(err) {
		case "":
			return tx.SellLockedStock(ctx, it.SKU, it.Qty)
		case orderpay.ECONFLICT, orderpay.ENOTFOUND:
			// The hold was released (expired): deduct again, if any units are left. A hold
			// that is gone was released too: every line of a reserve SKU gets one at create,
			// a hold that sold belongs to a paid order (which is never paid again), and
			// retention deletes only ended ones.
			return sellAvailableOrBackup(ctx, tx, o, it, now)
		}
		return err
	default:
		return orderpay.Errorf(orderpay.EINTERNAL, "sku %s has unknown stock policy %q", sku.SKU, sku.StockPolicy)
	}
}

// sellAvailableOrBackup deducts a line at payment: from the sellable units, or, when they
// cannot cover it any more, the whole line from the SKU's backup (docs/design.md §6.2), so
// that a buyer who paid late gets the goods while the backup lasts. A failed deduction from
// available moved nothing, so the backup's units are the only ones this line takes. With
// neither enough, the line is errSoldOut: the order is cancelled and the payment refunded.
func sellAvailableOrBackup(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem, now time.Time) error {
	err := tx.SellAvailableStock(ctx, it.SKU, it.Qty)
	if orderpay.ErrorCode(err) == orderpay.EOUTOFSTOCK {
		err = tx.SellBackupStock(ctx, o.No, it.Line, it.SKU, it.Qty, now)
	}
	return soldOut(err)
}

func soldOut(err error) error {
	if orderpay.ErrorCode(err) == orderpay.EOUTOFSTOCK {
		return fmt.Errorf("%w: %w", errSoldOut, err)
	}
	return err
}

// releaseAtCancel undoes what deductAtCreate did, by the SKU's stock policy (docs/design.md §6).
func (s *Service) releaseAtCancel(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem, now time.Time) error {
	sku, err := tx.SKU(ctx, it.SKU)
	if err != nil {
		return err
	}
	switch sku.StockPolicy {
	case orderpay.StockAtOrder:
		return tx.ReleaseLockedStock(ctx, it.SKU, it.Qty)
	case orderpay.StockAtPayment:
		return nil // nothing was deducted
	case orderpay.StockReserve:
		err := tx.EndStockHold(ctx, o.No, it.Line, orderpay.HoldReleased, now)
		switch orderpay.ErrorCode(err) {
		case "":
			return tx.ReleaseLockedStock(ctx, it.SKU, it.Qty)
		case orderpay.ECONFLICT, orderpay.ENOTFOUND:
			return nil // the sweeper released it already (and retention may have deleted it since)
		}
		return err
	default:
		return orderpay.Errorf(orderpay.EINTERNAL, "sku %s has unknown stock policy %q", sku.SKU, sku.StockPolicy)
	}
}

// refusedSoldOut is the order system's answer to a payment it cancelled for: a refusal, so
// that the payment center refunds it, for the reason sold_out.
func refusedSoldOut(orderNo, paymentNo string) error {
	return orderpay.RefusePayment(orderpay.RefundReasonSoldOut,
		"order %s sold out before payment %s arrived; it is cancelled and the payment refunded", orderNo, paymentNo)
}

// cancelSoldOut is the end of a payment that found its units gone: the order cannot be
// PAID, so it is cancelled as a cancel would (anything it holds released, coupon and
// purchase counts given back, order.cancelled written, in one transaction), and the
// payment refused so that the payment center refunds it. A second delivery of the same
// payment finds the order cancelled and is refused the same way, and the refund number is
// derived from the attempt, so nothing happens twice.
func (s *Service) cancelSoldOut(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	o, err := s.cfg.Store.Order(ctx, ev.OrderNo)
	if err != nil {
		return err
	}
	if o.Status == orderpay.OrderPendingPayment {
		err = s.cancel(ctx, o, "system", SoldOutReason)
		if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			if err != nil {
				return err
			}
			s.log.Warn("order sold out after payment: cancelled, the payment goes back", "order_no", o.No, "payment_no", ev.PaymentNo)
			return refusedSoldOut(o.No, ev.PaymentNo)
		}
		// Moved on meanwhile (another delivery of this payment, or a cancel): read again.
		if o, err = s.cfg.Store.Order(ctx, ev.OrderNo); err != nil {
			return err
		}
	}
	if o.PaymentNo == ev.PaymentNo && o.Status != orderpay.OrderCancelled {
		return nil // another delivery found units and paid it
	}
	return s.refusal(ctx, s.cfg.Store, o, ev)
}

// refusal is why a payment for an order that is no longer PENDING_PAYMENT is refused:
// sold out if the order was cancelled for that, plainly cancelled (or paid otherwise)
// otherwise.
func (s *Service) refusal(ctx context.Context, r orderpay.Reader, o *orderpay.Order, ev orderpay.PaymentSucceeded) error {
	if o.Status == orderpay.OrderCancelled {
		h, err := r.History(ctx, orderpay.EntityOrder, o.No)
		if err != nil {
			return err
		}
		if n := len(h); n > 0 && h[n-1].To == string(orderpay.OrderCancelled) && h[n-1].Reason == SoldOutReason {
			return refusedSoldOut(o.No, ev.PaymentNo)
		}
	}
	return orderpay.RefusePayment(orderpay.RefundReasonCancelled, "order %s is %s; payment %s cannot be applied", o.No, o.Status, ev.PaymentNo)
}

// HoldReleaseResult counts what one run of the hold sweeper did.
type HoldReleaseResult struct {
	// Released holds gave their units back; Skipped ones were ended first by a payment, a
	// cancel or another instance.
	Released, Skipped int
}

// ReleaseExpiredHolds is the hold sweeper of the "reserve" policy: every hold whose end has
// come gives its units back (locked → available). Each hold is ended conditionally in the
// transaction that moves its units, so a payment racing the sweeper either takes the hold
// (and sells the locked units) or finds it released (and deducts from available again),
// never both.
func (s *Service) ReleaseExpiredHolds(ctx context.Context, limit int) (HoldReleaseResult, error) {
	var res HoldReleaseResult
	due, err := s.cfg.Store.DueStockHolds(ctx, orderpay.Now(s.cfg.Clock), limit)
	if err != nil {
		return res, err
	}
	for _, h := range due {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
			if err := tx.EndStockHold(ctx, h.OrderNo, h.Line, orderpay.HoldReleased, orderpay.Now(s.cfg.Clock)); err != nil {
				return err
			}
			return tx.ReleaseLockedStock(ctx, h.SKU, h.Qty)
		})
		switch orderpay.ErrorCode(err) {
		case "":
			res.Released++
			s.log.Info("stock hold released", "order_no", h.OrderNo, "line", h.Line, "sku", h.SKU, "qty", h.Qty)
		case orderpay.ECONFLICT:
			res.Skipped++
		default:
			return res, err
		}
	}
	return res, nil
}

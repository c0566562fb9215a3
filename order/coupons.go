package order

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"orderpay"
)

// Promotions (促销): an admin defines coupon templates ("amount_off fen
// off an order of at least threshold fen") and issues coupons of them to buyers; a buyer
// names one coupon when ordering. The order's transaction uses the coupon (a conditional
// update: one order only) and apportions the discount to the items by the largest remainder
// (orderpay.Apportion); a cancel, in its own transaction, gives the coupon back. A refund
// of some units of a line takes back their part of the line's payable, discount included
// (orderpay.RefundShare).

// NewCouponTemplate is a coupon template to create.
type NewCouponTemplate struct {
	Code      string
	Title     string
	AmountOff int64
	Threshold int64
	// ValidFrom and ValidUntil bound when its coupons can be used: [from, until); zero is
	// unbounded.
	ValidFrom, ValidUntil time.Time
}

func (n *NewCouponTemplate) validate() error {
	switch {
	case !orderpay.ValidID(n.Code):
		return orderpay.Errorf(orderpay.EINVALID, "code must be 1-64 letters, digits, '-', '_' or '.'")
	case strings.TrimSpace(n.Title) == "" || utf8.RuneCountInString(n.Title) > 128:
		return orderpay.Errorf(orderpay.EINVALID, "title must be 1-128 characters")
	case n.AmountOff <= 0 || n.AmountOff > orderpay.MaxChannelAmount:
		return orderpay.Errorf(orderpay.EINVALID, "amount_off must be between 1 and %d fen", orderpay.MaxChannelAmount)
	case n.Threshold < 0 || n.Threshold > orderpay.MaxChannelAmount:
		return orderpay.Errorf(orderpay.EINVALID, "threshold must be between 0 and %d fen", orderpay.MaxChannelAmount)
	case !n.ValidFrom.IsZero() && !n.ValidUntil.IsZero() && !n.ValidUntil.After(n.ValidFrom):
		return orderpay.Errorf(orderpay.EINVALID, "valid_until must be after valid_from")
	}
	return nil
}

// CreateCouponTemplate adds a coupon template. A taken code is ECONFLICT.
func (s *Service) CreateCouponTemplate(ctx context.Context, n NewCouponTemplate) (*orderpay.CouponTemplate, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	// Stored to the millisecond, like every time: what is returned is what is read back.
	t := &orderpay.CouponTemplate{Code: n.Code, Title: n.Title, AmountOff: n.AmountOff, Threshold: n.Threshold,
		ValidFrom: toMillis(n.ValidFrom), ValidUntil: toMillis(n.ValidUntil), CreatedAt: orderpay.Now(s.cfg.Clock)}
	if err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateCouponTemplate(ctx, t) }); err != nil {
		return nil, err
	}
	s.log.Info("coupon template created", "code", t.Code, "amount_off", t.AmountOff, "threshold", t.Threshold)
	return t, nil
}

func toMillis(t time.Time) time.Time {
	return orderpay.FromMillis(orderpay.Millis(t))
}

// IssueCoupon gives a buyer a new coupon of a template (ENOTFOUND if there is no such
// template). Its id is random, so that nobody can guess another buyer's coupons.
func (s *Service) IssueCoupon(ctx context.Context, code, buyerID string) (*orderpay.Coupon, error) {
	if !orderpay.ValidID(buyerID) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "buyer_id must be 1-64 letters, digits, '-', '_' or '.'")
	}
	now := orderpay.Now(s.cfg.Clock)
	c := &orderpay.Coupon{ID: newCouponID(), Code: code, BuyerID: buyerID, Status: orderpay.CouponAvailable, IssuedAt: now, UpdatedAt: now}
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		if _, err := tx.CouponTemplate(ctx, code); err != nil {
			return err
		}
		return tx.IssueCoupon(ctx, c)
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("coupon issued", "coupon_id", c.ID, "code", code, "buyer_id", buyerID)
	return c, nil
}

func newCouponID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return "CP" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// BuyerCoupon is a buyer's coupon with its template.
type BuyerCoupon struct {
	orderpay.Coupon
	Template orderpay.CouponTemplate
}

// ListCoupons lists a buyer's coupons, used or not, oldest first.
func (s *Service) ListCoupons(ctx context.Context, buyerID string) ([]BuyerCoupon, error) {
	if !orderpay.ValidID(buyerID) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "buyer_id must be 1-64 letters, digits, '-', '_' or '.'")
	}
	coupons, err := s.cfg.Store.BuyerCoupons(ctx, buyerID)
	if err != nil {
		return nil, err
	}
	templates := map[string]*orderpay.CouponTemplate{}
	out := make([]BuyerCoupon, 0, len(coupons))
	for _, c := range coupons {
		t, ok := templates[c.Code]
		if !ok {
			if t, err = s.cfg.Store.CouponTemplate(ctx, c.Code); err != nil {
				return nil, err
			}
			templates[c.Code] = t
		}
		out = append(out, BuyerCoupon{Coupon: c, Template: *t})
	}
	return out, nil
}

// applyCoupon uses the order's coupon, in the order's transaction, once its items are priced:
// it checks the coupon is the buyer's, usable now and the total reaches its threshold, marks
// it USED by the order (a conditional update, so two orders can never both use it), and
// apportions the discount to the items. Every refusal rolls the whole order back.
func applyCoupon(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, couponID string, now time.Time) error {
	if couponID == "" {
		return nil
	}
	c, err := tx.Coupon(ctx, couponID)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return orderpay.Errorf(orderpay.EINVALID, "unknown coupon %q", couponID)
	}
	if err != nil {
		return err
	}
	if c.BuyerID != o.BuyerID {
		return orderpay.Errorf(orderpay.EINVALID, "coupon %s is not buyer %s's", couponID, o.BuyerID)
	}
	t, err := tx.CouponTemplate(ctx, c.Code)
	if err != nil {
		return err
	}
	switch {
	case !t.ValidFrom.IsZero() && now.Before(t.ValidFrom):
		return orderpay.Errorf(orderpay.EINVALID, "coupon %s can be used from %s", couponID, t.ValidFrom.UTC().Format(time.RFC3339))
	case !t.ValidAt(now):
		return orderpay.Errorf(orderpay.EINVALID, "coupon %s expired at %s", couponID, t.ValidUntil.UTC().Format(time.RFC3339))
	case o.Total < t.Threshold:
		return orderpay.Errorf(orderpay.EINVALID, "coupon %s needs an order of at least %s yuan; this one is %s yuan",
			couponID, orderpay.FormatYuan(t.Threshold), orderpay.FormatYuan(o.Total))
	}
	// An order must still cost at least 1 fen: the channels refuse a trade of 0 (and the
	// orders table checks payable > 0). A coupon worth the whole total, or more, takes all
	// but that fen; an order of 1 fen cannot use one.
	discount := min(t.AmountOff, o.Total-1)
	if discount <= 0 {
		return orderpay.Errorf(orderpay.EINVALID, "an order of %s yuan is too small for coupon %s", orderpay.FormatYuan(o.Total), couponID)
	}
	if err := tx.UseCoupon(ctx, couponID, o.BuyerID, o.No, now); err != nil {
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			return orderpay.Errorf(orderpay.ECONFLICT, "coupon %s already used", couponID)
		}
		return err
	}
	o.Discount, o.CouponID = discount, couponID
	amounts := make([]int64, len(o.Items))
	for i, it := range o.Items {
		amounts[i] = it.Amount
	}
	for i, share := range orderpay.Apportion(o.Discount, amounts) {
		o.Items[i].Discount, o.Items[i].Payable = share, o.Items[i].Amount-share
	}
	return nil
}

// restoreCoupon gives a cancelled order's coupon back, in the cancel's transaction.
func restoreCoupon(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, now time.Time) error {
	if o.CouponID == "" {
		return nil
	}
	return tx.RestoreCoupon(ctx, o.CouponID, o.No, now)
}

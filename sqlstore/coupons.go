package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

func (q *queries) CreateCouponTemplate(ctx context.Context, t *orderpay.CouponTemplate) error {
	return q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "coupon template %q already exists", t.Code) },
		`INSERT INTO coupon_templates (code, title, amount_off, threshold, valid_from, valid_until, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, t.Code, t.Title, t.AmountOff, t.Threshold, ms(t.ValidFrom), ms(t.ValidUntil), ms(t.CreatedAt))
}

func (q *queries) CouponTemplate(ctx context.Context, code string) (*orderpay.CouponTemplate, error) {
	t := orderpay.CouponTemplate{Code: code}
	var from, until, created int64
	err := q.row(ctx, `SELECT title, amount_off, threshold, valid_from, valid_until, created_at FROM coupon_templates WHERE code = ?`, code).
		Scan(&t.Title, &t.AmountOff, &t.Threshold, &from, &until, &created)
	if err != nil {
		return nil, notFound(err, "coupon template", code)
	}
	t.ValidFrom, t.ValidUntil, t.CreatedAt = orderpay.FromMillis(from), orderpay.FromMillis(until), orderpay.FromMillis(created)
	return &t, nil
}

func (q *queries) IssueCoupon(ctx context.Context, c *orderpay.Coupon) error {
	return q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "coupon %q already exists", c.ID) },
		`INSERT INTO coupons (id, code, buyer_id, status, order_no, issued_at, used_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.ID, c.Code, c.BuyerID, string(c.Status), c.OrderNo, ms(c.IssuedAt), ms(c.UsedAt), ms(c.UpdatedAt))
}

const couponColumns = `id, code, buyer_id, status, order_no, issued_at, used_at, updated_at`

func scanCoupon(r scanner) (*orderpay.Coupon, error) {
	var c orderpay.Coupon
	var issued, used, updated int64
	if err := r.Scan(&c.ID, &c.Code, &c.BuyerID, &c.Status, &c.OrderNo, &issued, &used, &updated); err != nil {
		return nil, err
	}
	c.IssuedAt, c.UsedAt, c.UpdatedAt = orderpay.FromMillis(issued), orderpay.FromMillis(used), orderpay.FromMillis(updated)
	return &c, nil
}

func (q *queries) Coupon(ctx context.Context, id string) (*orderpay.Coupon, error) {
	c, err := scanCoupon(q.row(ctx, `SELECT `+couponColumns+` FROM coupons WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "coupon", id)
	}
	return c, nil
}

func (q *queries) BuyerCoupons(ctx context.Context, buyerID string) ([]orderpay.Coupon, error) {
	var out []orderpay.Coupon
	err := q.snapshotEach(ctx, `SELECT `+couponColumns+` FROM coupons WHERE buyer_id = ? ORDER BY issued_at, id`, func(r scanner) error {
		c, err := scanCoupon(r)
		if err == nil {
			out = append(out, *c)
		}
		return err
	}, buyerID)
	return out, err
}

// UseCoupon is one conditional statement: of two orders racing for the same coupon, the
// second finds it USED (PostgreSQL re-checks the WHERE once the first commits) and changes
// nothing.
func (q *queries) UseCoupon(ctx context.Context, id, buyerID, orderNo string, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE coupons SET status = 'USED', order_no = ?, used_at = ?, updated_at = ?
		WHERE id = ? AND buyer_id = ? AND status = 'AVAILABLE'`, orderNo, ms(at), ms(at), id, buyerID)
	if err != nil || n == 1 {
		return err
	}
	c, err := q.Coupon(ctx, id)
	if err != nil {
		return err
	}
	if c.BuyerID != buyerID {
		return orderpay.Errorf(orderpay.ECONFLICT, "coupon %s is not buyer %s's", id, buyerID)
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "coupon %s is %s (order %s)", id, c.Status, c.OrderNo)
}

func (q *queries) RestoreCoupon(ctx context.Context, id, orderNo string, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE coupons SET status = 'AVAILABLE', order_no = '', used_at = 0, updated_at = ?
		WHERE id = ? AND status = 'USED' AND order_no = ?`, ms(at), id, orderNo)
	if err != nil || n == 1 {
		return err
	}
	c, err := q.Coupon(ctx, id)
	if err != nil {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "coupon %s is %s (order %q), not used by order %s", id, c.Status, c.OrderNo, orderNo)
}

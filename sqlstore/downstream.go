package sqlstore

import (
	"context"

	"orderpay"
	"orderpay/downstream"
)

// The example downstream consumers' own tables (migration 0009). These are methods of the
// Store, not of orderpay.Store or orderpay.Tx: package downstream declares the interface
// it needs, and nothing of orderpay's core touches these tables.

var _ downstream.Store = (*Store)(nil)

// AwardPoints is one conditional insert: an award already recorded for the order (under
// any message) makes it change nothing.
func (s *Store) AwardPoints(ctx context.Context, e downstream.PointsEntry) (bool, error) {
	var n int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		n, err = tx.(*queries).exec(ctx, `INSERT INTO points_ledger (order_no, kind, ref, points, buyer_id, msg_id, created_at)
			VALUES (?, ?, '', ?, ?, ?, ?) ON CONFLICT (order_no, kind, ref) DO NOTHING`,
			e.OrderNo, downstream.PointsAward, e.Points, e.BuyerID, e.MsgID, ms(e.CreatedAt))
		return err
	})
	return n == 1, err
}

// RevokePoints first locks the order's award row (a no-op update), so that two refunds of
// one order revoke one after the other; then one insert takes back the points asked,
// capped at the award less the revokes before it, unless this refund's row is there.
func (s *Store) RevokePoints(ctx context.Context, e downstream.PointsEntry) (int64, bool, error) {
	var points int64
	var applied bool
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		q := tx.(*queries)
		points, applied = 0, false
		n, err := q.exec(ctx, `UPDATE points_ledger SET points = points WHERE order_no = ? AND kind = ? AND ref = ''`,
			e.OrderNo, downstream.PointsAward)
		if err != nil {
			return err
		}
		if n == 0 {
			return orderpay.Errorf(orderpay.ENOTFOUND, "no points award for order %q", e.OrderNo)
		}
		n, err = q.exec(ctx, `INSERT INTO points_ledger (order_no, kind, ref, points, buyer_id, msg_id, created_at)
			SELECT a.order_no, CAST(? AS TEXT), CAST(? AS TEXT),
				CASE WHEN CAST(? AS BIGINT) < a.points - r.revoked THEN CAST(? AS BIGINT) ELSE a.points - r.revoked END,
				a.buyer_id, CAST(? AS TEXT), CAST(? AS BIGINT)
			FROM points_ledger a,
				(SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) AS revoked FROM points_ledger WHERE order_no = ? AND kind = ?) r
			WHERE a.order_no = ? AND a.kind = ? AND a.ref = ''
			ON CONFLICT (order_no, kind, ref) DO NOTHING`,
			downstream.PointsRevoke, e.Ref, e.Points, e.Points, e.MsgID, ms(e.CreatedAt),
			e.OrderNo, downstream.PointsRevoke, e.OrderNo, downstream.PointsAward)
		if err != nil || n == 0 {
			return err
		}
		applied = true
		return q.row(ctx, `SELECT points FROM points_ledger WHERE order_no = ? AND kind = ? AND ref = ?`,
			e.OrderNo, downstream.PointsRevoke, e.Ref).Scan(&points)
	})
	return points, applied, err
}

// PointsBalance sums a buyer's ledger: awards less revokes.
func (s *Store) PointsBalance(ctx context.Context, buyerID string) (int64, error) {
	var balance int64
	err := s.row(ctx, `SELECT CAST(COALESCE(SUM(CASE WHEN kind = ? THEN points ELSE -points END), 0) AS BIGINT) FROM points_ledger WHERE buyer_id = ?`,
		downstream.PointsAward, buyerID).Scan(&balance)
	return balance, err
}

// PointsLedger lists a buyer's ledger, newest first.
func (s *Store) PointsLedger(ctx context.Context, buyerID string, limit int) ([]downstream.PointsEntry, error) {
	rows, err := s.rows(ctx, `SELECT order_no, kind, ref, points, buyer_id, msg_id, created_at FROM points_ledger
		WHERE buyer_id = ? ORDER BY created_at DESC, order_no DESC, kind DESC, ref DESC LIMIT ?`, buyerID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []downstream.PointsEntry{}
	for rows.Next() {
		var e downstream.PointsEntry
		var created int64
		if err := rows.Scan(&e.OrderNo, &e.Kind, &e.Ref, &e.Points, &e.BuyerID, &e.MsgID, &created); err != nil {
			return nil, err
		}
		e.CreatedAt = orderpay.FromMillis(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LogSMS is one insert that a row already there for (msg_id, template) turns into nothing.
func (s *Store) LogSMS(ctx context.Context, e downstream.SMSEntry) (bool, error) {
	var n int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		n, err = tx.(*queries).exec(ctx, `INSERT INTO sms_log (msg_id, template, buyer_id, order_no, text, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (msg_id, template) DO NOTHING`,
			e.MsgID, e.Template, e.BuyerID, e.OrderNo, e.Text, ms(e.CreatedAt))
		return err
	})
	return n == 1, err
}

// SMSLog lists one order's texts ("" for every order's), newest first.
func (s *Store) SMSLog(ctx context.Context, orderNo string, limit int) ([]downstream.SMSEntry, error) {
	rows, err := s.rows(ctx, `SELECT msg_id, template, buyer_id, order_no, text, created_at FROM sms_log
		WHERE (? = '' OR order_no = ?) ORDER BY created_at DESC, msg_id DESC LIMIT ?`, orderNo, orderNo, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []downstream.SMSEntry{}
	for rows.Next() {
		var e downstream.SMSEntry
		var created int64
		if err := rows.Scan(&e.MsgID, &e.Template, &e.BuyerID, &e.OrderNo, &e.Text, &created); err != nil {
			return nil, err
		}
		e.CreatedAt = orderpay.FromMillis(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

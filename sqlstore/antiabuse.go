package sqlstore

import (
	"context"

	"orderpay"
)

// AddBuyerPurchase is one statement: a new row if the buyer holds none of the SKU yet, or
// an increment that applies only within the limit. The new row's own size cannot pass the
// limit: qty > limit is refused before the statement.
func (q *queries) AddBuyerPurchase(ctx context.Context, buyerID, sku string, qty, limit int64) error {
	if qty > limit {
		return orderpay.Errorf(orderpay.ELIMIT, "sku %s: at most %d per buyer", sku, limit)
	}
	n, err := q.exec(ctx, `INSERT INTO buyer_purchases (buyer_id, sku, qty) VALUES (?, ?, ?)
		ON CONFLICT (buyer_id, sku) DO UPDATE SET qty = buyer_purchases.qty + excluded.qty
		WHERE buyer_purchases.qty + excluded.qty <= ?`, buyerID, sku, qty, limit)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ELIMIT, "sku %s: at most %d per buyer, and this buyer's orders hold too many already", sku, limit)
	}
	return nil
}

func (q *queries) ReleaseBuyerPurchase(ctx context.Context, buyerID, sku string, qty int64) error {
	n, err := q.exec(ctx, `UPDATE buyer_purchases SET qty = qty - ? WHERE buyer_id = ? AND sku = ? AND qty >= ?`, qty, buyerID, sku, qty)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "buyer %s holds fewer than %d of sku %s", buyerID, qty, sku)
	}
	return nil
}

func (q *queries) BuyerPurchases(ctx context.Context, buyerID, sku string) (int64, error) {
	var n int64
	err := q.row(ctx, `SELECT COALESCE(SUM(qty), 0) FROM buyer_purchases WHERE buyer_id = ? AND sku = ?`, buyerID, sku).Scan(&n)
	return n, err
}

func (q *queries) Block(ctx context.Context, e orderpay.BlockEntry) error {
	_, err := q.exec(ctx, `INSERT INTO blocklist (kind, value, reason, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (kind, value) DO UPDATE SET reason = excluded.reason`, e.Kind, e.Value, e.Reason, ms(e.CreatedAt))
	return err
}

func (q *queries) Unblock(ctx context.Context, kind, value string) error {
	n, err := q.exec(ctx, `DELETE FROM blocklist WHERE kind = ? AND value = ?`, kind, value)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ENOTFOUND, "%s %q is not blocked", kind, value)
	}
	return nil
}

func (q *queries) Blocklist(ctx context.Context) ([]orderpay.BlockEntry, error) {
	return q.blockEntries(ctx, `SELECT kind, value, reason, created_at FROM blocklist ORDER BY kind, value`)
}

func (q *queries) blockEntries(ctx context.Context, query string, args ...any) ([]orderpay.BlockEntry, error) {
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.BlockEntry
	for rows.Next() {
		var e orderpay.BlockEntry
		var created int64
		if err := rows.Scan(&e.Kind, &e.Value, &e.Reason, &created); err != nil {
			return nil, err
		}
		e.CreatedAt = orderpay.FromMillis(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// CreateChecks reads a buyer's and a device's blocklist entries and the buyer's request
// key in one statement: the entries' rows, then the key's, told apart by the first column.
func (q *queries) CreateChecks(ctx context.Context, buyerID, deviceID, key string) ([]orderpay.BlockEntry, *orderpay.RequestKey, error) {
	rows, err := q.rows(ctx, `SELECT 'block', kind, value, reason, created_at, 0 FROM blocklist
		WHERE (kind = 'buyer' AND value = ?) OR (kind = 'device' AND value = ? AND value <> '')
		UNION ALL SELECT 'key', '', request_hash, order_no, created_at, expires_at FROM request_keys
		WHERE buyer_id = ? AND request_key = ? AND request_key <> ''
		ORDER BY 1, 2`, buyerID, deviceID, buyerID, key)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var blocked []orderpay.BlockEntry
	var found *orderpay.RequestKey
	for rows.Next() {
		var what, kind, value, reason string
		var created, expires int64
		if err := rows.Scan(&what, &kind, &value, &reason, &created, &expires); err != nil {
			return nil, nil, err
		}
		if what == "key" {
			found = &orderpay.RequestKey{BuyerID: buyerID, Key: key, RequestHash: value, OrderNo: reason,
				CreatedAt: orderpay.FromMillis(created), ExpiresAt: orderpay.FromMillis(expires)}
			continue
		}
		blocked = append(blocked, orderpay.BlockEntry{Kind: kind, Value: value, Reason: reason, CreatedAt: orderpay.FromMillis(created)})
	}
	return blocked, found, rows.Err()
}

package sqlstore

import (
	"context"

	"orderpay"
)

func (q *queries) RequestKey(ctx context.Context, buyerID, key string) (*orderpay.RequestKey, error) {
	k := orderpay.RequestKey{BuyerID: buyerID, Key: key}
	var created, expires int64
	err := q.row(ctx, `SELECT request_hash, order_no, created_at, expires_at FROM request_keys WHERE buyer_id = ? AND request_key = ?`,
		buyerID, key).Scan(&k.RequestHash, &k.OrderNo, &created, &expires)
	if err != nil {
		return nil, notFound(err, "request key", key)
	}
	k.CreatedAt, k.ExpiresAt = orderpay.FromMillis(created), orderpay.FromMillis(expires)
	return &k, nil
}

// ClaimRequestKey is one statement: an insert that, on a key already there, takes the row
// over only if it has expired. A live row makes it change nothing.
func (q *queries) ClaimRequestKey(ctx context.Context, k *orderpay.RequestKey) (bool, error) {
	n, err := q.exec(ctx, `INSERT INTO request_keys (buyer_id, request_key, request_hash, order_no, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (buyer_id, request_key) DO UPDATE SET request_hash = excluded.request_hash, order_no = excluded.order_no,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE request_keys.expires_at <= excluded.created_at`,
		k.BuyerID, k.Key, k.RequestHash, k.OrderNo, ms(k.CreatedAt), ms(k.ExpiresAt))
	return n == 1, err
}

package sqlstore

import (
	"context"
	"hash/fnv"
	"strings"

	"orderpay"
)

// buyerLockClass is the first key of a buyer's advisory lock on PostgreSQL (the second is
// the buyer's hash), apart from the migration lock's one-key space.
const buyerLockClass = 7284532

// LockBuyerUnpaid locks the buyer, then reads what they hold unpaid, in two statements:
// under READ COMMITTED each statement reads what was committed when it started, so the
// read that follows the lock sees every order of a transaction that held the lock before.
// Two buyers whose hashes agree share a lock: one waits a moment for the other, no more.
func (q *queries) LockBuyerUnpaid(ctx context.Context, buyerID string, skus []string) (*orderpay.UnpaidHoldings, error) {
	if q.d.lockBuyer != "" {
		h := fnv.New32a()
		h.Write([]byte(buyerID))
		var n int
		if err := q.row(ctx, q.d.lockBuyer, buyerLockClass, int32(h.Sum32())).Scan(&n); err != nil {
			return nil, translate(err)
		}
	}
	query := `SELECT 'o', product_type, CAST(COUNT(*) AS BIGINT) FROM orders
		WHERE buyer_id = ? AND status = 'PENDING_PAYMENT' GROUP BY product_type`
	args := []any{buyerID}
	if len(skus) > 0 {
		query += ` UNION ALL SELECT 'u', i.sku, CAST(SUM(i.qty) AS BIGINT) FROM orders o JOIN order_items i ON i.order_no = o.order_no
		WHERE o.buyer_id = ? AND o.status = 'PENDING_PAYMENT' AND i.sku IN (?` + strings.Repeat(", ?", len(skus)-1) + `) GROUP BY i.sku`
		args = append(args, buyerID)
		for _, s := range skus {
			args = append(args, s)
		}
	}
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &orderpay.UnpaidHoldings{Orders: map[orderpay.ProductType]int64{}, Units: map[string]int64{}}
	for rows.Next() {
		var what, key string
		var n int64
		if err := rows.Scan(&what, &key, &n); err != nil {
			return nil, err
		}
		if what == "o" {
			out.Orders[orderpay.ProductType(key)] = n
		} else {
			out.Units[key] = n
		}
	}
	return out, rows.Err()
}

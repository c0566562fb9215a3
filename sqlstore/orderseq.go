package sqlstore

import (
	"context"
	"fmt"

	"orderpay"
)

// NextOrderSeq reserves n consecutive numbers of day's order sequence and returns the first:
// the caller owns [first, first+n). One atomic upsert does it on both engines (SQLite ≥ 3.35
// and PostgreSQL both have INSERT … ON CONFLICT DO UPDATE … RETURNING): the row's update is
// serialized by the database, so concurrent callers, in this process or in other instances
// on the same database, never get overlapping blocks. A day's sequence starts at 0.
//
// It runs in a transaction of its own (through InTx, so that on SQLite it queues behind
// the single writer like every other write): never call it inside InTx.
func (s *Store) NextOrderSeq(ctx context.Context, day string, n int64) (int64, error) {
	if day == "" || n <= 0 {
		return 0, fmt.Errorf("sqlstore: NextOrderSeq(%q, %d): need a day and n > 0", day, n)
	}
	var end int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.(*queries).row(ctx, `INSERT INTO order_sequences (day, next) VALUES (?, ?)
			ON CONFLICT (day) DO UPDATE SET next = order_sequences.next + excluded.next
			RETURNING next`, day, n).Scan(&end)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlstore: reserve order sequence of %s: %w", day, err)
	}
	return end - n, nil
}

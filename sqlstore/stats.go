package sqlstore

import (
	"context"

	"orderpay"
)

var _ orderpay.StatsReader = (*Store)(nil)

// Stats counts rows for the gauges. It reads outside any transaction, so the counts may be
// from slightly different moments; a gauge needs no more.
func (s *Store) Stats(ctx context.Context) (*orderpay.Stats, error) {
	st := &orderpay.Stats{Orders: map[orderpay.OrderStatus]int64{}, Payments: map[orderpay.PaymentStatus]int64{}, WebhookDeliveries: map[string]int64{}}
	orders, err := s.countBy(ctx, `SELECT status, COUNT(*) FROM orders GROUP BY status`)
	if err != nil {
		return nil, err
	}
	for k, v := range orders {
		st.Orders[orderpay.OrderStatus(k)] = v
	}
	payments, err := s.countBy(ctx, `SELECT status, COUNT(*) FROM payments GROUP BY status`)
	if err != nil {
		return nil, err
	}
	for k, v := range payments {
		st.Payments[orderpay.PaymentStatus(k)] = v
	}
	if st.WebhookDeliveries, err = s.countBy(ctx, `SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status`); err != nil {
		return nil, err
	}
	if err := s.row(ctx, `SELECT COUNT(*), CAST(COALESCE(SUM(flagged), 0) AS BIGINT) FROM pending_queries`).
		Scan(&st.PendingQueries, &st.FlaggedPendingQueries); err != nil {
		return nil, err
	}
	// Both on the partial index of unpublished rows.
	var oldest int64
	if err := s.row(ctx, `SELECT COUNT(*), CAST(COALESCE(MIN(created_at), 0) AS BIGINT) FROM outbox WHERE published_at = 0`).
		Scan(&st.OutboxUnpublished, &oldest); err != nil {
		return nil, err
	}
	st.OldestUnpublished = orderpay.FromMillis(oldest)
	// On the partial indexes of refunds due and of the operators' queue.
	if err := s.row(ctx, `SELECT COUNT(*), CAST(COALESCE(MIN(created_at), 0) AS BIGINT) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')`).
		Scan(&st.RefundsInFlight, &oldest); err != nil {
		return nil, err
	}
	st.OldestRefundInFlight = orderpay.FromMillis(oldest)
	if err := s.row(ctx, `SELECT COUNT(*), CAST(COALESCE(MIN(needs_action_at), 0) AS BIGINT) FROM refunds WHERE status = 'NEEDS_ACTION'`).
		Scan(&st.RefundsNeedingAction, &oldest); err != nil {
		return nil, err
	}
	st.OldestNeedingAction = orderpay.FromMillis(oldest)
	return st, nil
}

func (s *Store) countBy(ctx context.Context, query string) (map[string]int64, error) {
	rows, err := s.rows(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

package sqlstore

import (
	"context"

	"orderpay"
)

var _ orderpay.StatsReader = (*Store)(nil)

// Stats counts rows for the gauges. It reads outside any transaction, so the counts may be
// from slightly different moments; a gauge needs no more.
// The scrape's reads besides the status counts, each bounded by the open rows it counts:
// the attempts' safety net (a row per attempt still paying), and the partial indexes of
// unpublished messages, refunds due and the operators' queue.
const (
	scrapePendingQuery              = `SELECT COUNT(*), CAST(COALESCE(SUM(flagged), 0) AS BIGINT) FROM pending_queries`
	scrapeOutboxQuery               = `SELECT COUNT(*), CAST(COALESCE(MIN(created_at), 0) AS BIGINT) FROM outbox WHERE published_at = 0`
	scrapeRefundsInFlightQuery      = `SELECT COUNT(*), CAST(COALESCE(MIN(created_at), 0) AS BIGINT) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')`
	scrapeRefundsNeedingActionQuery = `SELECT COUNT(*), CAST(COALESCE(MIN(needs_action_at), 0) AS BIGINT) FROM refunds WHERE status = 'NEEDS_ACTION'`
)

func (s *Store) Stats(ctx context.Context) (*orderpay.Stats, error) {
	st := &orderpay.Stats{Orders: map[orderpay.OrderStatus]int64{}, Payments: map[orderpay.PaymentStatus]int64{}, WebhookDeliveries: map[string]int64{}}
	// Orders, payments and deliveries by status from the counts kept as they change
	// (statuscounts.go): never a count of those tables, which grow with the history.
	counts, err := s.statusCounts(ctx)
	if err != nil {
		return nil, err
	}
	for k, v := range counts["orders"] {
		st.Orders[orderpay.OrderStatus(k)] = v
	}
	for k, v := range counts["payments"] {
		st.Payments[orderpay.PaymentStatus(k)] = v
	}
	st.WebhookDeliveries = counts["webhook_deliveries"]
	if err := s.row(ctx, scrapePendingQuery).
		Scan(&st.PendingQueries, &st.FlaggedPendingQueries); err != nil {
		return nil, err
	}
	// Both on the partial index of unpublished rows.
	var oldest int64
	if err := s.row(ctx, scrapeOutboxQuery).
		Scan(&st.OutboxUnpublished, &oldest); err != nil {
		return nil, err
	}
	st.OldestUnpublished = orderpay.FromMillis(oldest)
	// On the partial indexes of refunds due and of the operators' queue.
	if err := s.row(ctx, scrapeRefundsInFlightQuery).
		Scan(&st.RefundsInFlight, &oldest); err != nil {
		return nil, err
	}
	st.OldestRefundInFlight = orderpay.FromMillis(oldest)
	if err := s.row(ctx, scrapeRefundsNeedingActionQuery).
		Scan(&st.RefundsNeedingAction, &oldest); err != nil {
		return nil, err
	}
	st.OldestNeedingAction = orderpay.FromMillis(oldest)
	return st, nil
}

package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

var _ orderpay.Retainer = (*Store)(nil)

// retentionBatch is how many rows one statement of a retention pass removes or clears, so
// that no pass holds a long write lock (SQLite has one writer) or a long transaction.
const retentionBatch = 1000

// Retention's batched statements, each reading its batch on an index of its rows' time.
const (
	retainNotificationLog = `DELETE FROM notification_log WHERE id IN (SELECT id FROM notification_log WHERE received_at < ? LIMIT ?)`
	retainQueryLog        = `DELETE FROM query_log WHERE id IN (SELECT id FROM query_log WHERE at < ? LIMIT ?)`
	retainWebhookAttempts = `DELETE FROM webhook_attempts WHERE seq IN (SELECT a.seq FROM webhook_attempts a
			JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE a.at < ? AND d.status = 'SUCCEEDED' LIMIT ?)`
	retainWebhookBodies = `UPDATE webhook_deliveries SET payload = '' WHERE id IN (SELECT id FROM webhook_deliveries
			WHERE status = 'SUCCEEDED' AND delivered_at < ? AND payload <> '' LIMIT ?)`
	retainOutbox     = `DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE published_at > 0 AND published_at < ? LIMIT ?)`
	retainStockHolds = `DELETE FROM stock_holds WHERE (order_no, line) IN (SELECT order_no, line FROM stock_holds
			WHERE state <> 'HELD' AND updated_at < ? LIMIT ?)`
	retainRequestKeys = `DELETE FROM request_keys WHERE (buyer_id, request_key) IN (SELECT buyer_id, request_key FROM request_keys
			WHERE expires_at <= ? LIMIT ?)`
	retainTickets = `DELETE FROM tickets WHERE seq IN (SELECT seq FROM tickets
			WHERE state <> 'WAITING' AND updated_at < ? LIMIT ?)`
	retainRawBodies = `DELETE FROM history_raw WHERE seq IN (SELECT seq FROM history_raw WHERE at < ? LIMIT ?)`
)

// Retain removes, as of now, what p no longer keeps: log rows, published outbox rows,
// delivered webhooks' attempts and bodies, expired idempotency keys, ended stock holds and
// tickets,
// and the raw channel bodies in old transitions (the transitions themselves stay). Each
// kind goes in batches until none is left.
func (s *Store) Retain(ctx context.Context, now time.Time, p orderpay.RetentionPolicy) (orderpay.RetentionResult, error) {
	var res orderpay.RetentionResult
	if err := p.Validate(); err != nil {
		return res, err
	}
	logs, published, raw := ms(now.Add(-p.Logs)), ms(now.Add(-p.Published)), ms(now.Add(-p.RawBodies))
	for _, step := range []struct {
		n    *int64
		stmt string
		arg  int64
	}{
		{&res.NotificationLog, retainNotificationLog, logs},
		{&res.QueryLog, retainQueryLog, logs},
		{&res.WebhookAttempts, retainWebhookAttempts, logs},
		{&res.WebhookBodies, retainWebhookBodies, logs},
		{&res.Outbox, retainOutbox, published},
		{&res.StockHolds, retainStockHolds, published},
		{&res.RequestKeys, retainRequestKeys, ms(now)},
		// An ended ticket goes with the published messages, but never before its
		// Idempotency-Key would have (a retry within the day gets its ticket back).
		{&res.Tickets, retainTickets, min(published, ms(now.Add(-orderpay.IdempotencyKeyTTL)))},
		{&res.RawBodies, retainRawBodies, raw},
	} {
		for {
			n, err := s.retainOnce(ctx, step.stmt, step.arg)
			if err != nil {
				return res, err
			}
			*step.n += n
			if n < retentionBatch {
				break
			}
		}
	}
	return res, nil
}

func (s *Store) retainOnce(ctx context.Context, stmt string, arg int64) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		n, err = tx.(*queries).exec(ctx, stmt, arg, retentionBatch)
		return err
	})
	return n, err
}

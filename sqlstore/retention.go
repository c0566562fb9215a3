package sqlstore

import (
	"context"
	"strings"
	"time"

	"orderpay"
)

var _ orderpay.Retainer = (*Store)(nil)

// retentionBatch is how many rows one statement of a retention pass removes or clears, so
// that no pass holds a long write lock (SQLite has one writer) or a long transaction.
const retentionBatch = 1000

// retentionStatements are retention's batched statements on d, by what they remove or
// clear. Each takes its cut-off time and the batch's size (retentionBatch), and finds its
// batch on an index of its rows' time (the webhook attempts oldest first: PostgreSQL would
// rather walk them in the order of their deliveries otherwise, past every attempt of a
// delivery that failed).
func retentionStatements(d *dialect) map[string]string {
	return map[string]string{
		"notification log": d.batched(`DELETE FROM notification_log`, `notification_log`, `notification_log WHERE received_at < ?`),
		"query log":        d.batched(`DELETE FROM query_log`, `query_log`, `query_log WHERE at < ?`),
		"webhook attempts": d.batched(`DELETE FROM webhook_attempts`, `a`,
			`webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE a.at < ? AND d.status = 'SUCCEEDED' ORDER BY a.at`),
		"webhook bodies": d.batched(`UPDATE webhook_deliveries SET payload = ''`, `webhook_deliveries`,
			`webhook_deliveries WHERE status = 'SUCCEEDED' AND delivered_at < ? AND payload <> ''`),
		"published outbox": d.batched(`DELETE FROM outbox`, `outbox`, `outbox WHERE published_at > 0 AND published_at < ?`),
		"stock holds":      d.batched(`DELETE FROM stock_holds`, `stock_holds`, `stock_holds WHERE state <> 'HELD' AND updated_at < ?`),
		"request keys":     d.batched(`DELETE FROM request_keys`, `request_keys`, `request_keys WHERE expires_at <= ?`),
		"tickets":          d.batched(`DELETE FROM tickets`, `tickets`, `tickets WHERE state <> 'WAITING' AND updated_at < ?`),
		"raw bodies":       d.batched(`DELETE FROM history_raw`, `history_raw`, `history_raw WHERE at < ?`),
		"chart counts": d.batched(`DELETE FROM chart_totals`, `c`,
			`chart_totals c WHERE c.kind IN ('`+chartNotification+`', '`+chartPaidLatency+`') AND c.hour < ?
				AND c.hour < (SELECT MAX(b.hour) FROM chart_totals b WHERE b.kind = c.kind AND b.hour < ?)`),
	}
}

// batched is stmt (a DELETE or an UPDATE of one table) applied to the rows that "SELECT …
// FROM from" finds first, up to a LIMIT (the last placeholder), by their physical address:
// SQLite's rowid, PostgreSQL's ctid. A key IN (SELECT … LIMIT ?) is not enough on
// PostgreSQL: planned for a limit it does not know, it joins the batch to the whole table,
// read end to end (a Seq Scan every batch); ctid = ANY (ARRAY(…)) finds each row directly.
// alias is the updated table's name in from.
func (d *dialect) batched(stmt, alias, from string) string {
	if d == postgresDialect {
		return stmt + ` WHERE ctid = ANY (ARRAY(SELECT ` + alias + `.ctid FROM ` + from + ` LIMIT ?))`
	}
	return stmt + ` WHERE rowid IN (SELECT ` + alias + `.rowid FROM ` + from + ` LIMIT ?)`
}

// Retain removes, as of now, what p no longer keeps: log rows, published outbox rows,
// delivered webhooks' attempts and bodies, expired idempotency keys, ended stock holds and
// tickets,
// the raw channel bodies in old transitions (the transitions themselves stay), and the
// charts' counts of the hours before the longest window (orderpay.ChartWindowMax). Each
// kind goes in batches until none is left.
func (s *Store) Retain(ctx context.Context, now time.Time, p orderpay.RetentionPolicy) (orderpay.RetentionResult, error) {
	var res orderpay.RetentionResult
	if err := p.Validate(); err != nil {
		return res, err
	}
	logs, published, raw := ms(now.Add(-p.Logs)), ms(now.Add(-p.Published)), ms(now.Add(-p.RawBodies))
	stmts := retentionStatements(s.d)
	for _, step := range []struct {
		n    *int64
		stmt string
		arg  int64
	}{
		{&res.NotificationLog, stmts["notification log"], logs},
		{&res.QueryLog, stmts["query log"], logs},
		{&res.WebhookAttempts, stmts["webhook attempts"], logs},
		{&res.WebhookBodies, stmts["webhook bodies"], logs},
		{&res.Outbox, stmts["published outbox"], published},
		{&res.StockHolds, stmts["stock holds"], published},
		{&res.RequestKeys, stmts["request keys"], ms(now)},
		// An ended ticket goes with the published messages, but never before its
		// Idempotency-Key would have (a retry within the day gets its ticket back).
		{&res.Tickets, stmts["tickets"], min(published, ms(now.Add(-orderpay.IdempotencyKeyTTL)))},
		{&res.RawBodies, stmts["raw bodies"], raw},
		// The charts' running totals before the longest window's first hour, but the last
		// of each kind: the longest window's baseline.
		{&res.ChartCounts, stmts["chart counts"], orderpay.ChartHour(now.Add(-orderpay.ChartWindowMax)).UnixMilli() / msPerHour},
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
		// The statement's every placeholder but its LIMIT is the time.
		args := make([]any, 0, 4)
		for range strings.Count(stmt, "?") - 1 {
			args = append(args, arg)
		}
		n, err = tx.(*queries).exec(ctx, stmt, append(args, retentionBatch)...)
		return err
	})
	return n, err
}

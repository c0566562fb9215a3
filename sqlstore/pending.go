package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

const pendingQueryColumns = `out_trade_no, payment_no, channel, attempts, next_at, flagged, last_outcome, created_at, updated_at`

func scanPendingQuery(row scanner) (*orderpay.PendingQuery, error) {
	var q orderpay.PendingQuery
	var flagged int
	var next, created, updated int64
	if err := row.Scan(&q.OutTradeNo, &q.PaymentNo, &q.Channel, &q.Attempts, &next, &flagged, &q.LastOutcome, &created, &updated); err != nil {
		return nil, err
	}
	q.Flagged = flagged != 0
	q.NextAt, q.CreatedAt, q.UpdatedAt = orderpay.FromMillis(next), orderpay.FromMillis(created), orderpay.FromMillis(updated)
	return &q, nil
}

func (q *queries) CreatePendingQuery(ctx context.Context, p *orderpay.PendingQuery) error {
	return q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "attempt %s already has a pending query", p.OutTradeNo)
	},
		`INSERT INTO pending_queries (`+pendingQueryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.OutTradeNo, p.PaymentNo, p.Channel, p.Attempts, ms(p.NextAt), boolInt(p.Flagged), p.LastOutcome, ms(p.CreatedAt), ms(p.UpdatedAt))
}

func (q *queries) AdvancePendingQuery(ctx context.Context, outTradeNo string, attempts int, outcome string, nextAt time.Time, flag bool, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE pending_queries SET attempts = attempts + 1, last_outcome = ?, next_at = ?, flagged = ?, updated_at = ?
		WHERE out_trade_no = ? AND attempts = ?`, outcome, ms(nextAt), boolInt(flag), ms(at), outTradeNo, attempts)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "pending query %s moved past attempt %d, or is gone", outTradeNo, attempts)
	}
	return nil
}

// deletePendingQuery ends an attempt's safety net; TransitionChannelOrder calls it whenever
// the attempt leaves PAYING, in the same transaction.
func (q *queries) deletePendingQuery(ctx context.Context, outTradeNo string) error {
	_, err := q.exec(ctx, `DELETE FROM pending_queries WHERE out_trade_no = ?`, outTradeNo)
	return err
}

func (q *queries) PendingQuery(ctx context.Context, outTradeNo string) (*orderpay.PendingQuery, error) {
	p, err := scanPendingQuery(q.row(ctx, `SELECT `+pendingQueryColumns+` FROM pending_queries WHERE out_trade_no = ?`, outTradeNo))
	if err != nil {
		return nil, notFound(err, "pending query", outTradeNo)
	}
	return p, nil
}

// duePendingQueriesQuery is the pending queries' sweeper's read, on pending_queries_due.
const duePendingQueriesQuery = `SELECT ` + pendingQueryColumns + ` FROM pending_queries WHERE flagged = 0 AND next_at <= ?
		ORDER BY next_at LIMIT ?`

func (q *queries) DuePendingQueries(ctx context.Context, at time.Time, limit int) ([]orderpay.PendingQuery, error) {
	return q.pendingQueries(ctx, duePendingQueriesQuery, ms(at), limit)
}

func (q *queries) PendingQueries(ctx context.Context, flagged bool, limit int) ([]orderpay.PendingQuery, error) {
	if flagged {
		return q.pendingQueries(ctx, `SELECT `+pendingQueryColumns+` FROM pending_queries WHERE flagged = 1 ORDER BY created_at LIMIT ?`, limit)
	}
	return q.pendingQueries(ctx, `SELECT `+pendingQueryColumns+` FROM pending_queries ORDER BY created_at LIMIT ?`, limit)
}

func (q *queries) pendingQueries(ctx context.Context, query string, args ...any) ([]orderpay.PendingQuery, error) {
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.PendingQuery
	for rows.Next() {
		p, err := scanPendingQuery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, rows.Err()
}

func (q *queries) LockPrepay(ctx context.Context, paymentNo string, until, now time.Time) (bool, error) {
	n, err := q.exec(ctx, `UPDATE payments SET prepay_lock_until = ? WHERE payment_no = ? AND prepay_lock_until <= ?`,
		ms(until), paymentNo, ms(now))
	return n == 1, err
}

func (q *queries) UnlockPrepay(ctx context.Context, paymentNo string) error {
	_, err := q.exec(ctx, `UPDATE payments SET prepay_lock_until = 0 WHERE payment_no = ?`, paymentNo)
	return err
}

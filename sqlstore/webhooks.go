package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"orderpay"
	"orderpay/webhook"
)

// The webhook deliveries (migration 0012). Like the example consumers' tables these are
// methods of the Store only: package webhook declares the interface it needs.

var _ webhook.Store = (*Store)(nil)

const deliveryColumns = `id, msg_id, subscriber, subject, payload, order_no, payment_no, status, attempts, next_at,
	last_status, last_error, created_at, updated_at, delivered_at`

func scanDelivery(row scanner) (*webhook.Delivery, error) {
	var d webhook.Delivery
	var payload, status string
	var next, created, updated, delivered int64
	if err := row.Scan(&d.ID, &d.MsgID, &d.Subscriber, &d.Subject, &payload, &d.OrderNo, &d.PaymentNo, &status, &d.Attempts, &next,
		&d.LastStatus, &d.LastError, &created, &updated, &delivered); err != nil {
		return nil, err
	}
	d.Payload, d.Status = []byte(payload), webhook.Status(status)
	d.NextAt, d.CreatedAt, d.UpdatedAt, d.DeliveredAt = orderpay.FromMillis(next), orderpay.FromMillis(created), orderpay.FromMillis(updated), orderpay.FromMillis(delivered)
	return &d, nil
}

// CreateDelivery is one insert that an existing (msg_id, subscriber) turns into nothing.
func (s *Store) CreateDelivery(ctx context.Context, d *webhook.Delivery) (bool, error) {
	var id int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		id = 0
		err := tx.(*queries).row(ctx, `INSERT INTO webhook_deliveries (msg_id, subscriber, subject, payload, order_no, payment_no, status,
				attempts, next_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) ON CONFLICT (msg_id, subscriber) DO NOTHING RETURNING id`,
			d.MsgID, d.Subscriber, d.Subject, string(d.Payload), d.OrderNo, d.PaymentNo, string(webhook.StatusPending),
			ms(d.NextAt), ms(d.CreatedAt), ms(d.UpdatedAt)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil || id == 0 {
		return false, err
	}
	d.ID, d.Status, d.Attempts = id, webhook.StatusPending, 0
	return true, nil
}

// Delivery reads one delivery and its attempts.
func (s *Store) Delivery(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error) {
	d, err := scanDelivery(s.row(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id))
	if err != nil {
		return nil, nil, notFound(err, "webhook delivery", strconv.FormatInt(id, 10))
	}
	rows, err := s.rows(ctx, `SELECT seq, delivery_id, kind, http_status, error, at FROM webhook_attempts WHERE delivery_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	attempts := []webhook.Attempt{}
	for rows.Next() {
		var a webhook.Attempt
		var at int64
		if err := rows.Scan(&a.Seq, &a.DeliveryID, &a.Kind, &a.HTTPStatus, &a.Error, &at); err != nil {
			return nil, nil, err
		}
		a.At = orderpay.FromMillis(at)
		attempts = append(attempts, a)
	}
	return d, attempts, rows.Err()
}

// Deliveries lists deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, f webhook.Filter, limit int) ([]webhook.Delivery, error) {
	return s.deliveries(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE (? = '' OR status = ?) AND (? = '' OR payment_no = ?) AND (? = '' OR order_no = ?)
		ORDER BY id DESC LIMIT ?`, string(f.Status), string(f.Status), f.PaymentNo, f.PaymentNo, f.OrderNo, f.OrderNo, limit)
}

// DueDeliveries takes the PENDING rows due by at, on the partial index, but those of the
// subscribers in skip.
func (s *Store) DueDeliveries(ctx context.Context, at time.Time, limit int, skip []string) ([]webhook.Delivery, error) {
	args := []any{ms(at)}
	for _, name := range skip {
		args = append(args, name)
	}
	return s.deliveries(ctx, dueDeliveriesQuery(len(skip)), append(args, limit)...)
}

// dueDeliveriesQuery is DueDeliveries' read, on webhook_deliveries_due, skipping skip
// subscribers.
func dueDeliveriesQuery(skip int) string {
	notIn := ""
	if skip > 0 {
		notIn = " AND subscriber NOT IN (?" + strings.Repeat(", ?", skip-1) + ")"
	}
	return `SELECT ` + deliveryColumns + ` FROM webhook_deliveries
		WHERE status = 'PENDING' AND next_at <= ?` + notIn + ` ORDER BY next_at, id LIMIT ?`
}

func (s *Store) deliveries(ctx context.Context, query string, args ...any) ([]webhook.Delivery, error) {
	rows, err := s.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []webhook.Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

// ClaimDelivery is one conditional update: of two workers that read the same due row, one
// moves next_at and the other finds attempts or next_at changed.
func (s *Store) ClaimDelivery(ctx context.Context, id int64, attempts int, until, at time.Time) (bool, error) {
	var n int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		n, err = tx.(*queries).exec(ctx, `UPDATE webhook_deliveries SET next_at = ?, updated_at = ?
			WHERE id = ? AND status = 'PENDING' AND attempts = ? AND next_at <= ?`, ms(until), ms(at), id, attempts, ms(at))
		return err
	})
	return n == 1, err
}

// RecordAttempt stores the attempt and updates its delivery in one transaction: a
// scheduled attempt only if the delivery is still PENDING at r.Before attempts; a resend
// always (its 2xx makes any delivery SUCCEEDED; its failure changes only last_*).
func (s *Store) RecordAttempt(ctx context.Context, r webhook.AttemptRecord) (bool, error) {
	if r.Kind != webhook.KindResend {
		if err := s.checked(webhook.DeliveryMachine, orderpay.EntityWebhookDelivery, strconv.FormatInt(r.DeliveryID, 10),
			string(webhook.StatusPending), string(webhook.ScheduledEvent(r.Status)), string(r.Status)); err != nil {
			return false, err
		}
	}
	var n int64
	err := s.InTx(ctx, func(tx orderpay.Tx) error {
		q := tx.(*queries)
		if _, err := q.exec(ctx, `INSERT INTO webhook_attempts (delivery_id, kind, http_status, error, at) VALUES (?, ?, ?, ?, ?)`,
			r.DeliveryID, r.Kind, r.HTTPStatus, r.Error, ms(r.At)); err != nil {
			return err
		}
		delivered := int64(0)
		if r.Status == webhook.StatusSucceeded {
			delivered = ms(r.At)
		}
		var err error
		if r.Kind == webhook.KindResend {
			n, err = q.exec(ctx, `UPDATE webhook_deliveries SET status = CASE WHEN ? THEN 'SUCCEEDED' ELSE status END,
				last_status = ?, last_error = ?, updated_at = ?,
				delivered_at = CASE WHEN delivered_at = 0 THEN ? ELSE delivered_at END
				WHERE id = ?`, r.Status == webhook.StatusSucceeded, r.HTTPStatus, r.Error, ms(r.At), delivered, r.DeliveryID)
		} else {
			n, err = q.exec(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_at = ?,
				last_status = ?, last_error = ?, updated_at = ?, delivered_at = ?
				WHERE id = ? AND status = 'PENDING' AND attempts = ?`,
				string(r.Status), ms(r.NextAt), r.HTTPStatus, r.Error, ms(r.At), delivered, r.DeliveryID, r.Before)
		}
		return err
	})
	return n == 1, err
}

// EnsureSubscriber records that subscriber receives events from since, unless it is
// recorded already, and returns the time it is recorded with.
func (s *Store) EnsureSubscriber(ctx context.Context, subscriber string, since time.Time) (time.Time, error) {
	if _, err := s.exec(ctx, `INSERT INTO webhook_subscribers (name, since) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
		subscriber, ms(since)); err != nil {
		return time.Time{}, err
	}
	var at int64
	if err := s.row(ctx, `SELECT since FROM webhook_subscribers WHERE name = ?`, subscriber).Scan(&at); err != nil {
		return time.Time{}, err
	}
	return orderpay.FromMillis(at), nil
}

// OutboxMessages lists the outbox's messages of the subjects written at or after since,
// oldest first, at most limit, after the message with sequence number after (0: from the
// first): a replay reads them page by page.
func (s *Store) OutboxMessages(ctx context.Context, subjects []string, since time.Time, after int64, limit int) ([]webhook.OutboxMessage, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	rows, err := s.rows(ctx, `SELECT seq, msg_id, subject, payload, created_at FROM outbox
		WHERE subject IN (`+inList(len(subjects))+`) AND created_at >= ? AND seq > ? ORDER BY seq LIMIT ?`,
		append(stringArgs(subjects), ms(since), after, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []webhook.OutboxMessage
	for rows.Next() {
		var m webhook.OutboxMessage
		var payload string
		var created int64
		if err := rows.Scan(&m.Seq, &m.ID, &m.Subject, &payload, &created); err != nil {
			return nil, err
		}
		m.Payload, m.CreatedAt = []byte(payload), orderpay.FromMillis(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

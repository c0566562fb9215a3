package sqlstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"orderpay"
)

// The business apps' tables (migration 0019): apps, their API keys, their payments and their
// refunds. Every change is a conditional update in the caller's transaction.

var (
	_ orderpay.AppStore = (*Store)(nil)
	_ orderpay.AppTx    = (*queries)(nil)
)

// InAppTx is InTx with the apps' tables in reach.
func (s *Store) InAppTx(ctx context.Context, fn func(tx orderpay.AppTx) error) error {
	return s.InTx(ctx, func(tx orderpay.Tx) error { return fn(tx.(*queries)) })
}

const appColumns = `app_id, name, webhook_urls, webhook_secret, channels, created_at, updated_at`

func scanApp(row scanner) (*orderpay.App, error) {
	var a orderpay.App
	var urls, channels string
	var created, updated int64
	if err := row.Scan(&a.ID, &a.Name, &urls, &a.WebhookSecret, &channels, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(urls), &a.WebhookURLs); err != nil {
		return nil, err
	}
	if channels != "" {
		a.Channels = strings.Split(channels, ",")
	}
	a.CreatedAt, a.UpdatedAt = orderpay.FromMillis(created), orderpay.FromMillis(updated)
	return &a, nil
}

func (q *queries) CreateApp(ctx context.Context, a *orderpay.App) error {
	urls, err := json.Marshal(a.WebhookURLs)
	if err != nil {
		return err
	}
	return q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "app %q exists", a.ID) },
		`INSERT INTO apps (`+appColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Name, string(urls), a.WebhookSecret, strings.Join(a.Channels, ","), ms(a.CreatedAt), ms(a.UpdatedAt))
}

func (q *queries) App(ctx context.Context, id string) (*orderpay.App, error) {
	a, err := scanApp(q.row(ctx, `SELECT `+appColumns+` FROM apps WHERE app_id = ?`, id))
	if err != nil {
		return nil, notFound(err, "app", id)
	}
	return a, nil
}

func (q *queries) Apps(ctx context.Context) ([]orderpay.App, error) {
	return list(ctx, q, scanApp, `SELECT `+appColumns+` FROM apps ORDER BY created_at, app_id`)
}

const appKeyColumns = `key_id, app_id, hash, created_at, expires_at, revoked_at`

func scanAppKey(row scanner) (*orderpay.AppKey, error) {
	var k orderpay.AppKey
	var created, expires, revoked int64
	if err := row.Scan(&k.ID, &k.AppID, &k.Hash, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt = orderpay.FromMillis(created), orderpay.FromMillis(expires), orderpay.FromMillis(revoked)
	return &k, nil
}

func (q *queries) CreateAppKey(ctx context.Context, k *orderpay.AppKey) error {
	return q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "key %q exists", k.ID) },
		`INSERT INTO app_keys (`+appKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.AppID, k.Hash, ms(k.CreatedAt), ms(k.ExpiresAt), ms(k.RevokedAt))
}

func (q *queries) AppKey(ctx context.Context, id string) (*orderpay.AppKey, error) {
	k, err := scanAppKey(q.row(ctx, `SELECT `+appKeyColumns+` FROM app_keys WHERE key_id = ?`, id))
	if err != nil {
		return nil, notFound(err, "key", id)
	}
	return k, nil
}

func (q *queries) AppKeys(ctx context.Context, appID string) ([]orderpay.AppKey, error) {
	return list(ctx, q, scanAppKey, `SELECT `+appKeyColumns+` FROM app_keys WHERE app_id = ? ORDER BY created_at, key_id`, appID)
}

func (q *queries) ExpireAppKeys(ctx context.Context, appID, except string, until, at time.Time) (int64, error) {
	return q.exec(ctx, `UPDATE app_keys SET expires_at = ? WHERE app_id = ? AND key_id <> ? AND expires_at = 0 AND revoked_at = 0`,
		ms(until), appID, except)
}

func (q *queries) RevokeAppKey(ctx context.Context, appID, keyID string, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE app_keys SET revoked_at = ? WHERE app_id = ? AND key_id = ? AND revoked_at = 0`, ms(at), appID, keyID)
	if err != nil || n == 1 {
		return err
	}
	k, err := q.AppKey(ctx, keyID)
	if err != nil || k.AppID != appID {
		return orderpay.NotFound("key", keyID)
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "key %s was revoked already", keyID)
}

const appPaymentColumns = `payment_no, order_key, app_id, merchant_order_no, amount, subject, channel, expires_at, status,
	request_hash, idempotency_key, refund_reserved, close_reason, created_at, updated_at`

func scanAppPayment(row scanner) (*orderpay.AppPayment, error) {
	var p orderpay.AppPayment
	var expires, created, updated int64
	if err := row.Scan(&p.PaymentNo, &p.OrderKey, &p.AppID, &p.MerchantOrderNo, &p.Amount, &p.Subject, &p.Channel, &expires, &p.Status,
		&p.RequestHash, &p.IdempotencyKey, &p.RefundReserved, &p.CloseReason, &created, &updated); err != nil {
		return nil, err
	}
	p.ExpiresAt, p.CreatedAt, p.UpdatedAt = orderpay.FromMillis(expires), orderpay.FromMillis(created), orderpay.FromMillis(updated)
	return &p, nil
}

func (q *queries) CreateAppPayment(ctx context.Context, p *orderpay.AppPayment) error {
	err := q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "app payment %q of app %s exists", p.MerchantOrderNo, p.AppID)
	}, `INSERT INTO app_payments (`+appPaymentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.PaymentNo, p.OrderKey, p.AppID, p.MerchantOrderNo, p.Amount, p.Subject, p.Channel, ms(p.ExpiresAt), string(p.Status),
		p.RequestHash, p.IdempotencyKey, p.RefundReserved, p.CloseReason, ms(p.CreatedAt), ms(p.UpdatedAt))
	if err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityAppPayment, EntityNo: p.PaymentNo, To: string(p.Status),
		Event: "create", Actor: "app:" + p.AppID, Reason: p.MerchantOrderNo + ": " + orderpay.FormatYuan(p.Amount) + " via " + p.Channel, At: p.CreatedAt})
}

func (q *queries) AppPayment(ctx context.Context, paymentNo string) (*orderpay.AppPayment, error) {
	p, err := scanAppPayment(q.row(ctx, `SELECT `+appPaymentColumns+` FROM app_payments WHERE payment_no = ?`, paymentNo))
	if err != nil {
		return nil, notFound(err, "payment", paymentNo)
	}
	return p, nil
}

func (q *queries) AppPaymentByMerchantNo(ctx context.Context, appID, merchantOrderNo string) (*orderpay.AppPayment, error) {
	p, err := scanAppPayment(q.row(ctx, `SELECT `+appPaymentColumns+` FROM app_payments WHERE app_id = ? AND merchant_order_no = ?`,
		appID, merchantOrderNo))
	if err != nil {
		return nil, notFound(err, "payment", merchantOrderNo)
	}
	return p, nil
}

func (q *queries) AppPaymentByIdempotencyKey(ctx context.Context, appID, key string) (*orderpay.AppPayment, error) {
	p, err := scanAppPayment(q.row(ctx, `SELECT `+appPaymentColumns+` FROM app_payments WHERE app_id = ? AND idempotency_key = ? AND idempotency_key <> ''`,
		appID, key))
	if err != nil {
		return nil, notFound(err, "payment with Idempotency-Key", key)
	}
	return p, nil
}

func (q *queries) AppPayments(ctx context.Context, appID string, f orderpay.AppFilter, limit int) ([]orderpay.AppPayment, error) {
	query, args := `SELECT `+appPaymentColumns+` FROM app_payments WHERE app_id = ?`, []any{appID}
	if f.Before != "" {
		query, args = query+` AND payment_no < ?`, append(args, f.Before)
	}
	return q.appPayments(ctx, query+` ORDER BY payment_no DESC LIMIT ?`, append(args, limit)...)
}

// dueAppPaymentsQuery is the app payments' expiry sweeper's read, on app_payments_due.
const dueAppPaymentsQuery = `SELECT ` + appPaymentColumns + ` FROM app_payments WHERE status = 'OPEN' AND expires_at < ?
		ORDER BY expires_at LIMIT ?`

func (q *queries) DueAppPayments(ctx context.Context, before time.Time, limit int) ([]orderpay.AppPayment, error) {
	return q.appPayments(ctx, dueAppPaymentsQuery, ms(before), limit)
}

func (q *queries) appPayments(ctx context.Context, query string, args ...any) ([]orderpay.AppPayment, error) {
	return list(ctx, q, scanAppPayment, query, args...)
}

func (q *queries) TransitionAppPayment(ctx context.Context, c orderpay.AppPaymentChange, closeReason string) error {
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	if closeReason != "" {
		sets, args = append(sets, "close_reason = ?"), append(args, closeReason)
	}
	return q.transition(ctx, orderpay.AppPaymentMachine, "app_payments", "payment_no", c.PaymentNo, string(c.From), string(c.To), sets, args,
		orderpay.HistoryEntry{Entity: orderpay.EntityAppPayment, EntityNo: c.PaymentNo, Event: string(c.Event), Actor: c.Actor, Reason: c.Reason, At: c.At})
}

func (q *queries) ReserveAppRefund(ctx context.Context, paymentNo string, amount int64, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE app_payments SET refund_reserved = refund_reserved + ?, updated_at = ?
		WHERE payment_no = ? AND status = 'SUCCESS' AND refund_reserved + ? <= amount`, amount, ms(at), paymentNo, amount)
	if err != nil || n == 1 {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "payment %s cannot refund %s more", paymentNo, orderpay.FormatYuan(amount))
}

const appRefundColumns = `out_refund_no, app_id, refund_no, payment_no, amount, reason, request_hash, created_at`

func scanAppRefund(row scanner) (*orderpay.AppRefund, error) {
	var r orderpay.AppRefund
	var created int64
	if err := row.Scan(&r.OutRefundNo, &r.AppID, &r.RefundNo, &r.PaymentNo, &r.Amount, &r.Reason, &r.RequestHash, &created); err != nil {
		return nil, err
	}
	r.CreatedAt = orderpay.FromMillis(created)
	return &r, nil
}

func (q *queries) CreateAppRefund(ctx context.Context, r *orderpay.AppRefund) error {
	return q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "refund %q of app %s exists", r.RefundNo, r.AppID)
	},
		`INSERT INTO app_refunds (`+appRefundColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.OutRefundNo, r.AppID, r.RefundNo, r.PaymentNo, r.Amount, r.Reason, r.RequestHash, ms(r.CreatedAt))
}

func (q *queries) AppRefund(ctx context.Context, outRefundNo string) (*orderpay.AppRefund, error) {
	r, err := scanAppRefund(q.row(ctx, `SELECT `+appRefundColumns+` FROM app_refunds WHERE out_refund_no = ?`, outRefundNo))
	if err != nil {
		return nil, notFound(err, "refund", outRefundNo)
	}
	return r, nil
}

func (q *queries) AppRefundByNo(ctx context.Context, appID, refundNo string) (*orderpay.AppRefund, error) {
	r, err := scanAppRefund(q.row(ctx, `SELECT `+appRefundColumns+` FROM app_refunds WHERE app_id = ? AND refund_no = ?`, appID, refundNo))
	if err != nil {
		return nil, notFound(err, "refund", refundNo)
	}
	return r, nil
}

func (q *queries) AppRefunds(ctx context.Context, appID string, f orderpay.AppFilter, limit int) ([]orderpay.AppRefund, error) {
	query, args := `SELECT `+appRefundColumns+` FROM app_refunds WHERE app_id = ?`, []any{appID}
	if f.PaymentNo != "" {
		query, args = query+` AND payment_no = ?`, append(args, f.PaymentNo)
	}
	if f.Before != "" {
		query, args = query+` AND out_refund_no < ?`, append(args, f.Before)
	}
	return list(ctx, q, scanAppRefund, query+` ORDER BY out_refund_no DESC LIMIT ?`, append(args, limit)...)
}

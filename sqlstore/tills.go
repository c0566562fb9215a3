package sqlstore

import (
	"context"
	"time"

	"orderpay"
)

// The till payments (migration 0023): barcode payments a till asked for.

var (
	_ orderpay.TillStore = (*Store)(nil)
	_ orderpay.TillTx    = (*queries)(nil)
)

// InTillTx is InTx with the till payments in reach.
func (s *Store) InTillTx(ctx context.Context, fn func(tx orderpay.TillTx) error) error {
	return s.InTx(ctx, func(tx orderpay.Tx) error { return fn(tx.(*queries)) })
}

const tillColumns = `out_trade_no, payment_no, app_id, idempotency_key, request_hash, channel, amount, order_no, app_payment_no,
	store_id, till_id, description, code_tail, answer, refusal, detail, created_at, answered_at, reverse_sent_at`

func scanTill(row scanner) (*orderpay.TillPayment, error) {
	var t orderpay.TillPayment
	var created, answered, reversed int64
	if err := row.Scan(&t.OutTradeNo, &t.PaymentNo, &t.AppID, &t.IdempotencyKey, &t.RequestHash, &t.Channel, &t.Amount, &t.OrderNo,
		&t.AppPaymentNo, &t.StoreID, &t.TillID, &t.Description, &t.CodeTail, &t.Answer, &t.Refusal, &t.Detail, &created, &answered, &reversed); err != nil {
		return nil, err
	}
	if reversed != 0 {
		t.ReverseSentAt = orderpay.FromMillis(reversed)
	}
	t.CreatedAt = orderpay.FromMillis(created)
	if answered != 0 {
		t.AnsweredAt = orderpay.FromMillis(answered)
	}
	return &t, nil
}

func (q *queries) CreateTillPayment(ctx context.Context, t *orderpay.TillPayment) error {
	return q.insert(ctx, func() error {
		return orderpay.Errorf(orderpay.ECONFLICT, "till payment %s, or Idempotency-Key %q of app %s, exists", t.OutTradeNo, t.IdempotencyKey, t.AppID)
	}, `INSERT INTO till_payments (`+tillColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.OutTradeNo, t.PaymentNo, t.AppID, t.IdempotencyKey, t.RequestHash, t.Channel, t.Amount, t.OrderNo, t.AppPaymentNo,
		t.StoreID, t.TillID, t.Description, t.CodeTail, string(t.Answer), string(t.Refusal), t.Detail, ms(t.CreatedAt), 0, 0)
}

func (q *queries) AnswerTillPayment(ctx context.Context, outTradeNo string, answer orderpay.BarcodeStatus, refusal orderpay.BarcodeRefusal, detail string, at time.Time) error {
	if answer != orderpay.BarcodePaid && answer != orderpay.BarcodeRefused && answer != orderpay.BarcodeCancelled {
		return orderpay.Errorf(orderpay.EINTERNAL, "a till payment's answer is PAID, REFUSED or CANCELLED, not %q", answer)
	}
	n, err := q.exec(ctx, `UPDATE till_payments SET answer = ?, refusal = ?, detail = ?, answered_at = ?
		WHERE out_trade_no = ? AND answer = ''`, string(answer), string(refusal), detail, ms(at), outTradeNo)
	if err != nil || n == 1 {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "till payment %s was answered already, or does not exist", outTradeNo)
}

func (q *queries) MarkTillReverse(ctx context.Context, outTradeNo string, sent bool, at time.Time) error {
	v := int64(0)
	if sent {
		v = ms(at)
		// The attempt's row is taken first, and only while it is PAYING: a payment applied
		// meanwhile has taken it (and commits before this goes on), and one applied after
		// this commits finds the mark in its own transaction (payment.applyPaid).
		n, err := q.exec(ctx, `UPDATE channel_orders SET updated_at = updated_at WHERE out_trade_no = ? AND status = 'PAYING'`, outTradeNo)
		if err != nil {
			return err
		}
		if n != 1 {
			return orderpay.Errorf(orderpay.ECONFLICT, "attempt %s is no longer PAYING", outTradeNo)
		}
	}
	n, err := q.exec(ctx, `UPDATE till_payments SET reverse_sent_at = ? WHERE out_trade_no = ?`, v, outTradeNo)
	if err != nil || n == 1 {
		return err
	}
	return orderpay.NotFound("till payment", outTradeNo)
}

func (q *queries) TillPayment(ctx context.Context, outTradeNo string) (*orderpay.TillPayment, error) {
	t, err := scanTill(q.row(ctx, `SELECT `+tillColumns+` FROM till_payments WHERE out_trade_no = ?`, outTradeNo))
	if err != nil {
		return nil, notFound(err, "till payment", outTradeNo)
	}
	return t, nil
}

func (q *queries) TillPaymentByKey(ctx context.Context, appID, key string) (*orderpay.TillPayment, error) {
	t, err := scanTill(q.row(ctx, `SELECT `+tillColumns+` FROM till_payments WHERE app_id = ? AND idempotency_key = ?`, appID, key))
	if err != nil {
		return nil, notFound(err, "till payment with Idempotency-Key", key)
	}
	return t, nil
}

func (q *queries) TillPayments(ctx context.Context, appID, tillID string, n int) ([]orderpay.TillPayment, error) {
	query, args := `SELECT `+tillColumns+` FROM till_payments WHERE app_id = ?`, []any{appID}
	if tillID != "" {
		query, args = query+` AND till_id = ?`, append(args, tillID)
	}
	return list(ctx, q, scanTill, query+` ORDER BY created_at DESC, out_trade_no DESC LIMIT ?`, append(args, n)...)
}

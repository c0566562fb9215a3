package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"orderpay"
)

const channelRefundColumns = `out_refund_no, out_trade_no, payment_no, channel, amount, reason, status, unknown,
	attempts, next_at, created_at, updated_at, refunded_at, tries, retrying_since, retried, problem, needs_action_at,
	resolved_by, resolved_ref, resolved_note, sends, claimed_until, fee_back_recorded, fee_back`

func scanChannelRefund(row scanner) (*orderpay.ChannelRefund, error) {
	var r orderpay.ChannelRefund
	var unknown, feeBackRecorded int
	var next, created, updated, refunded, since, needsAction, claimed int64
	if err := row.Scan(&r.OutRefundNo, &r.OutTradeNo, &r.PaymentNo, &r.Channel, &r.Amount, &r.Reason, &r.Status, &unknown,
		&r.Attempts, &next, &created, &updated, &refunded, &r.Tries, &since, &r.Retried, &r.Problem, &needsAction,
		&r.ResolvedBy, &r.ResolvedRef, &r.ResolvedNote, &r.Sends, &claimed, &feeBackRecorded, &r.FeeBack); err != nil {
		return nil, err
	}
	r.FeeBackRecorded = feeBackRecorded != 0
	r.ClaimedUntil = orderpay.FromMillis(claimed)
	r.Unknown = unknown != 0
	r.NextAt, r.CreatedAt = orderpay.FromMillis(next), orderpay.FromMillis(created)
	r.UpdatedAt, r.RefundedAt = orderpay.FromMillis(updated), orderpay.FromMillis(refunded)
	r.RetryingSince, r.NeedsActionAt = orderpay.FromMillis(since), orderpay.FromMillis(needsAction)
	return &r, nil
}

func (q *queries) CreateChannelRefund(ctx context.Context, r *orderpay.ChannelRefund) error {
	// A refund decided twice at once (two instances refusing one payment) is one refund:
	// the second insert does nothing, and its transaction goes on to read the first.
	err := q.insert(ctx, func() error { return orderpay.Errorf(orderpay.ECONFLICT, "refund %q exists", r.OutRefundNo) },
		`INSERT INTO refunds (`+channelRefundColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.OutRefundNo, r.OutTradeNo, r.PaymentNo, r.Channel, r.Amount, r.Reason, string(r.Status), boolInt(r.Unknown),
		r.Attempts, ms(r.NextAt), ms(r.CreatedAt), ms(r.UpdatedAt), ms(r.RefundedAt), r.Tries, ms(r.RetryingSince), r.Retried,
		r.Problem, ms(r.NeedsActionAt), r.ResolvedBy, r.ResolvedRef, r.ResolvedNote, r.Sends, ms(r.ClaimedUntil),
		boolInt(r.FeeBackRecorded), r.FeeBack)
	if err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityRefund, EntityNo: r.OutRefundNo, To: string(r.Status),
		Event: "create", Actor: "payment-center", Reason: r.Reason + ": " + orderpay.FormatYuan(r.Amount) + " of " + r.OutTradeNo, At: r.CreatedAt})
}

func (q *queries) ChannelRefund(ctx context.Context, outRefundNo string) (*orderpay.ChannelRefund, error) {
	r, err := scanChannelRefund(q.row(ctx, `SELECT `+channelRefundColumns+` FROM refunds WHERE out_refund_no = ?`, outRefundNo))
	if err != nil {
		return nil, notFound(err, "refund", outRefundNo)
	}
	return r, nil
}

func (q *queries) ChannelRefunds(ctx context.Context, outTradeNo string) ([]orderpay.ChannelRefund, error) {
	return q.channelRefunds(ctx, `SELECT `+channelRefundColumns+` FROM refunds WHERE out_trade_no = ? ORDER BY created_at, out_refund_no`, outTradeNo)
}

// dueChannelRefundsQuery is the refund sweeper's read, on refunds_due.
const dueChannelRefundsQuery = `SELECT ` + channelRefundColumns + ` FROM refunds
		WHERE status IN ('PENDING', 'PROCESSING') AND next_at <= ? AND claimed_until <= ? ORDER BY next_at LIMIT ?`

func (q *queries) DueChannelRefunds(ctx context.Context, at time.Time, limit int) ([]orderpay.ChannelRefund, error) {
	return q.channelRefunds(ctx, dueChannelRefundsQuery, ms(at), ms(at), limit)
}

func (q *queries) channelRefunds(ctx context.Context, query string, args ...any) ([]orderpay.ChannelRefund, error) {
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.ChannelRefund
	for rows.Next() {
		r, err := scanChannelRefund(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// ClaimChannelRefund is a worker's claim of a refund on its way (PENDING or PROCESSING) it
// read (status from, attempts recorded answers, each of which moves attempts on), before
// it sends or queries it: one
// conditional update, so that of two workers (or instances) that read it, one claims it and
// the other finds it claimed or moved (ECONFLICT). The claim lapses at until; it returns the claim (the refund's sends),
// which the worker's answer is recorded under (ChannelRefundChange.Claim).
func (q *queries) ClaimChannelRefund(ctx context.Context, outRefundNo string, from orderpay.ChannelRefundStatus, attempts int, until, now time.Time) (int, error) {
	var claim int
	err := q.row(ctx, `UPDATE refunds SET sends = sends + 1, claimed_until = ?, updated_at = ?
		WHERE out_refund_no = ? AND status = ? AND status IN ('PENDING', 'PROCESSING') AND attempts = ? AND claimed_until <= ? RETURNING sends`,
		ms(until), ms(now), outRefundNo, string(from), attempts, ms(now)).Scan(&claim)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, orderpay.Errorf(orderpay.ECONFLICT, "refund %s is claimed by another worker, or moved on", outRefundNo)
	}
	if err != nil {
		return 0, translate(err)
	}
	if q.counts != nil {
		q.counts.RowsWritten.Add(1)
	}
	return claim, nil
}

// claimCondition is what a change of a refund also requires of its row, beside its status:
// a worker's answer, that its claim is still the last one (no worker claimed the refund
// since); anything else but the channel's word that the money went back, that no claim is
// standing (a send on its way decides the refund first).
func claimCondition(claim int, event orderpay.ChannelRefundEvent, at time.Time) (string, []any) {
	switch {
	case claim > 0:
		return "sends = ?", []any{claim}
	case event == orderpay.ChannelRefundEventSucceed:
		return "", nil
	}
	return "claimed_until <= ?", []any{ms(at)}
}

func (q *queries) TransitionChannelRefund(ctx context.Context, c orderpay.ChannelRefundChange) error {
	sets, args := []string{"updated_at = ?", "unknown = 0", "attempts = attempts + 1", "next_at = ?", "claimed_until = 0"}, []any{ms(c.At), ms(c.NextAt)}
	switch c.Event {
	case orderpay.ChannelRefundEventRetry:
		sets = append(sets, "tries = ?", "retrying_since = ?", "retried = retried + 1", "problem = ?")
		args = append(args, c.Tries, ms(c.RetryingSince), c.Problem)
	case orderpay.ChannelRefundEventEscalate:
		sets, args = append(sets, "problem = ?", "needs_action_at = ?"), append(args, c.Problem, ms(c.At))
	case orderpay.ChannelRefundEventOperatorRetry:
		sets = append(sets, "tries = 0", "retrying_since = 0")
	case orderpay.ChannelRefundEventResolve:
		sets = append(sets, "resolved_by = ?", "resolved_ref = ?", "resolved_note = ?")
		args = append(args, c.ResolvedBy, c.ResolvedRef, c.ResolvedNote)
	}
	if !c.To.Owed() {
		sets, args = append(sets, "refunded_at = ?"), append(args, ms(c.At))
	}
	h := orderpay.HistoryEntry{Entity: orderpay.EntityRefund, EntityNo: c.OutRefundNo, Event: string(c.Event), Actor: c.Actor,
		Reason: c.Reason, Raw: c.Raw, At: c.At}
	cond, condArgs := claimCondition(c.Claim, c.Event, c.At)
	if c.Event == orderpay.ChannelRefundEventRetry {
		// PENDING to PENDING: two workers that met the same refusal count it once.
		cond, condArgs = strings.TrimPrefix(cond+" AND tries = ?", " AND "), append(condArgs, c.Tries-1)
	}
	return q.transitionIf(ctx, orderpay.ChannelRefundMachine, "refunds", "out_refund_no", c.OutRefundNo, string(c.From), string(c.To), sets, args, h,
		cond, condArgs...)
}

// refundsNeedingActionQuery is the operators' refund queue, on refunds_needing_action.
const refundsNeedingActionQuery = `SELECT ` + channelRefundColumns + ` FROM refunds WHERE status = 'NEEDS_ACTION'
		ORDER BY needs_action_at, out_refund_no LIMIT ?`

// RefundsNeedingAction is the operators' queue: refunds waiting for a person, oldest first.
func (q *queries) RefundsNeedingAction(ctx context.Context, limit int) ([]orderpay.ChannelRefund, error) {
	return q.channelRefunds(ctx, refundsNeedingActionQuery, limit)
}

func (q *queries) RescheduleChannelRefund(ctx context.Context, outRefundNo string, from orderpay.ChannelRefundStatus, claim int, unknown bool, nextAt, at time.Time) error {
	cond, condArgs := claimCondition(claim, "", at)
	n, err := q.exec(ctx, `UPDATE refunds SET unknown = ?, attempts = attempts + 1, next_at = ?, updated_at = ?, claimed_until = 0
		WHERE out_refund_no = ? AND status = ? AND status IN ('PENDING', 'PROCESSING') AND `+cond, append([]any{boolInt(unknown), ms(nextAt), ms(at), outRefundNo, string(from)}, condArgs...)...)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "refund %s is not %s on its way any more, or another worker claimed it", outRefundNo, from)
	}
	return nil
}

func (q *queries) AddPaymentRefunded(ctx context.Context, paymentNo string, amount int64, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE payments SET refunded = refunded + ?, updated_at = ?
		WHERE payment_no = ? AND refunded + ? <= amount`, amount, ms(at), paymentNo, amount)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "payment %s cannot take a refund of %d fen", paymentNo, amount)
	}
	return nil
}

// ---- the sweepers' queries: each uses a small partial index ----

// dueOrdersQuery is the timeout sweeper's read, on orders_pending_by_deadline.
const dueOrdersQuery = `SELECT order_no FROM orders WHERE status = 'PENDING_PAYMENT' AND pay_deadline < ?
		ORDER BY pay_deadline LIMIT ?`

func (q *queries) DueOrders(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := q.rows(ctx, dueOrdersQuery, ms(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var no string
		if err := rows.Scan(&no); err != nil {
			return nil, err
		}
		out = append(out, no)
	}
	return out, rows.Err()
}

// duePaymentsQuery is the payment-close sweeper's read, on payments_open_by_deadline.
const duePaymentsQuery = `SELECT ` + paymentColumns + ` FROM payments WHERE status IN ('UNPAID', 'PAYING') AND pay_deadline < ?
		ORDER BY pay_deadline LIMIT ?`

func (q *queries) DuePayments(ctx context.Context, before time.Time, limit int) ([]orderpay.Payment, error) {
	rows, err := q.rows(ctx, duePaymentsQuery, ms(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.Payment
	for rows.Next() {
		p, err := scanPaymentRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, rows.Err()
}

// payingChannelOrdersQuery is the paying attempts' sweeper's read, on channel_orders_paying_by_age.
const payingChannelOrdersQuery = `SELECT ` + channelOrderColumns + ` FROM channel_orders WHERE status = 'PAYING' AND created_at < ?
		ORDER BY created_at LIMIT ?`

func (q *queries) PayingChannelOrders(ctx context.Context, createdBefore time.Time, limit int) ([]orderpay.ChannelOrder, error) {
	return q.channelOrders(ctx, payingChannelOrdersQuery, ms(createdBefore), limit)
}

func (q *queries) OpenAttemptsPastDeadline(ctx context.Context, before time.Time, limit int) ([]orderpay.ChannelOrder, error) {
	return q.channelOrders(ctx, `SELECT `+prefixed("c.", channelOrderColumns)+` FROM channel_orders c JOIN payments p ON p.payment_no = c.payment_no
		WHERE c.status IN ('CREATED', 'PAYING') AND p.pay_deadline < ? ORDER BY p.pay_deadline LIMIT ?`, ms(before), limit)
}

// prefixed qualifies every column of a column list with a table alias.
func prefixed(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// AddChannelRefunded is one conditional update of the attempt's row, which takes its lock
// for the rest of the transaction and, on PostgreSQL under READ COMMITTED, waits for any
// other transaction that holds it and then reads the row as that one committed it; RETURNING
// gives the total after this refund. The other refunds' fee shares are read by a statement
// after it, so they are what the transaction that held the lock committed: two refunds of
// one attempt settling at once are reckoned one after the other, never both from the same
// state. The amount never takes the total past the attempt's amount (ECONFLICT).
func (q *queries) AddChannelRefunded(ctx context.Context, outTradeNo, outRefundNo string, amount int64) (refundedBefore, sharesBefore int64, err error) {
	if amount <= 0 {
		return 0, 0, orderpay.Errorf(orderpay.EINVALID, "refund %s of attempt %s: amount %d fen is not positive", outRefundNo, outTradeNo, amount)
	}
	var after int64
	err = q.row(ctx, `UPDATE channel_orders SET channel_refunded = channel_refunded + ?
		WHERE out_trade_no = ? AND channel_refunded + ? <= amount RETURNING channel_refunded`, amount, outTradeNo, amount).Scan(&after)
	if errors.Is(err, sql.ErrNoRows) {
		var refunded, paid int64
		if err := q.row(ctx, `SELECT channel_refunded, amount FROM channel_orders WHERE out_trade_no = ?`, outTradeNo).Scan(&refunded, &paid); err != nil {
			return 0, 0, notFound(err, "channel order", outTradeNo)
		}
		return 0, 0, orderpay.Errorf(orderpay.ECONFLICT, "attempt %s cannot take a channel refund of %d fen: %d of its %d fen refunded already",
			outTradeNo, amount, refunded, paid)
	}
	if err != nil {
		return 0, 0, translate(err)
	}
	if q.counts != nil {
		q.counts.RowsWritten.Add(1)
	}
	if err := q.row(ctx, `SELECT CAST(COALESCE(SUM(fee_back), 0) AS BIGINT) FROM refunds
		WHERE out_trade_no = ? AND out_refund_no <> ? AND status = 'SUCCESS'`, outTradeNo, outRefundNo).Scan(&sharesBefore); err != nil {
		return 0, 0, translate(err)
	}
	return after - amount, sharesBefore, nil
}

func (q *queries) SetChannelRefundFeeBack(ctx context.Context, outRefundNo string, feeBack int64) error {
	if feeBack < 0 {
		return orderpay.Errorf(orderpay.EINVALID, "refund %s: a fee share of %d fen is negative", outRefundNo, feeBack)
	}
	n, err := q.exec(ctx, `UPDATE refunds SET fee_back_recorded = 1, fee_back = ? WHERE out_refund_no = ?`, feeBack, outRefundNo)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.NotFound("refund", outRefundNo)
	}
	return nil
}

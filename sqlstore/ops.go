package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"orderpay"
)

// The operations console's reads and logs (orderpay.OpsReader).

var _ orderpay.OpsReader = (*Store)(nil)

func (q *queries) LogNotification(ctx context.Context, e *orderpay.NotificationLogEntry) error {
	raw := e.Raw
	if len(raw) > orderpay.NotificationLogRawMax {
		raw = raw[:orderpay.NotificationLogRawMax]
	}
	return q.insertLater(ctx, `INSERT INTO notification_log (received_at, channel, out_trade_no, verified, result, detail, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, ms(e.ReceivedAt), e.Channel, e.OutTradeNo, boolInt(e.Verified), e.Result, e.Detail, strings.ToValidUTF8(raw, "\uFFFD"))
}

func (q *queries) LogQuery(ctx context.Context, e *orderpay.QueryLogEntry) error {
	_, err := q.exec(ctx, `INSERT INTO query_log (at, channel, out_trade_no, trigger_name, outcome, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		ms(e.At), e.Channel, e.OutTradeNo, e.Trigger, string(e.Outcome), strings.ToValidUTF8(e.Detail, "\uFFFD"))
	return err
}

func (q *queries) Orders(ctx context.Context, f orderpay.OrderFilter, limit int) ([]orderpay.Order, error) {
	query, args, ok := q.d.ordersQuery(f, limit)
	if !ok {
		return nil, nil
	}
	rows, err := q.rows(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.Order
	for rows.Next() {
		var o orderpay.Order
		var deadline, created, updated, paid, closed int64
		if err := rows.Scan(&o.No, &o.BuyerID, &o.Status, &o.Total, &o.Discount, &o.Payable, &o.ProductType, &deadline,
			&o.PaymentNo, &created, &updated, &paid, &closed, &o.CouponID); err != nil {
			return nil, err
		}
		o.PayDeadline, o.CreatedAt, o.UpdatedAt = orderpay.FromMillis(deadline), orderpay.FromMillis(created), orderpay.FromMillis(updated)
		o.PaidAt, o.ClosedAt = orderpay.FromMillis(paid), orderpay.FromMillis(closed)
		out = append(out, o)
	}
	return out, rows.Err()
}

// inList returns "?, ?, …" for n values.
func inList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func stringArgs(ss []string) []any {
	out := make([]any, 0, len(ss)+1)
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

func (q *queries) NotificationLog(ctx context.Context, outTradeNos []string, limit int) ([]orderpay.NotificationLogEntry, error) {
	if len(outTradeNos) == 0 {
		return nil, nil
	}
	rows, err := q.rows(ctx, `SELECT id, received_at, channel, out_trade_no, verified, result, detail, raw FROM notification_log
		WHERE out_trade_no IN (`+inList(len(outTradeNos))+`) ORDER BY id LIMIT ?`, append(stringArgs(outTradeNos), limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.NotificationLogEntry
	for rows.Next() {
		var e orderpay.NotificationLogEntry
		var at int64
		var verified int
		if err := rows.Scan(&e.ID, &at, &e.Channel, &e.OutTradeNo, &verified, &e.Result, &e.Detail, &e.Raw); err != nil {
			return nil, err
		}
		e.ReceivedAt, e.Verified = orderpay.FromMillis(at), verified != 0
		out = append(out, e)
	}
	return out, rows.Err()
}

func (q *queries) QueryLog(ctx context.Context, outTradeNos []string, limit int) ([]orderpay.QueryLogEntry, error) {
	if len(outTradeNos) == 0 {
		return nil, nil
	}
	rows, err := q.rows(ctx, `SELECT id, at, channel, out_trade_no, trigger_name, outcome, detail FROM query_log
		WHERE out_trade_no IN (`+inList(len(outTradeNos))+`) ORDER BY id LIMIT ?`, append(stringArgs(outTradeNos), limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.QueryLogEntry
	for rows.Next() {
		var e orderpay.QueryLogEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Channel, &e.OutTradeNo, &e.Trigger, &e.Outcome, &e.Detail); err != nil {
			return nil, err
		}
		e.At = orderpay.FromMillis(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (q *queries) RefundsByReason(ctx context.Context, reasons []string, limit int) ([]orderpay.ChannelRefund, error) {
	if len(reasons) == 0 {
		return nil, nil
	}
	// The newest limit of each reason, each on refunds_by_reason (reason, created_at), and
	// the newest limit of those: bounded by the page, however many refunds a reason has had.
	var out []orderpay.ChannelRefund
	err := q.snapshotEach(ctx, refundsByReasonQuery(len(reasons), limit), func(r scanner) error {
		rf, err := scanChannelRefund(r)
		if err == nil {
			out = append(out, *rf)
		}
		return err
	}, stringArgs(reasons)...)
	return out, err
}

// refundsByReasonQuery is RefundsByReason's statement for n reasons (bound) and a page of
// limit (written in). With the page bound, PostgreSQL's generic plan expects a tenth of a
// reason's refunds, costs more than a plan for 20 on a big table, and is never kept: each
// read was planned again, where a young shop's was not (as the order search was, design.md).
func refundsByReasonQuery(n, limit int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `SELECT * FROM (SELECT ` + channelRefundColumns + ` FROM refunds WHERE reason = ? ORDER BY created_at DESC LIMIT ` +
			strconv.Itoa(limit) + `) r` + strconv.Itoa(i)
	}
	return `SELECT ` + channelRefundColumns + ` FROM (` + strings.Join(parts, ` UNION ALL `) + `) r ORDER BY created_at DESC LIMIT ` + strconv.Itoa(limit)
}

// chartsReadsMigration is the migration that lets the charts read their two indexes alone.
const chartsReadsMigration = 35

// chartsVacuumRows is how many rows inserted, or updated and deleted, bring autovacuum to
// the charts' tables on PostgreSQL (chartsReadsSteps).
const chartsVacuumRows = 1000

// chartsReadsSteps are migration 0035's statements for one engine. PostgreSQL vacuums a
// table once a fifth of it has changed (autovacuum's scale factors): for a table that grows
// with the history that is a fifth of a year, and until then the pages of the day's rows
// are not marked all-visible, so that the charts' index-only reads look each row up in the
// table as well (1,347 lookups for a day's 2,892 payments at a million past orders). The
// charts' two tables are vacuumed after a fixed number of rows instead: a vacuum reads
// only the pages not marked yet (the visibility map), so its cost is the day's, not the
// history's.
func chartsReadsSteps(d *dialect) []string {
	if d != postgresDialect {
		return nil
	}
	var out []string
	for _, table := range []string{"payments", "notification_log"} {
		out = append(out, fmt.Sprintf(`ALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = %[2]d,
			autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = %[2]d)`, table, chartsVacuumRows))
	}
	return out
}

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"orderpay"
)

// Reconciliation's reads and its reports (migration 0011). Methods of the Store, not of
// orderpay.Store: orderpay.ReconciliationStore is the interface, and only reconciliation
// and the admin API use it.

var _ orderpay.ReconciliationStore = (*Store)(nil)

// PaidChannelOrders uses the partial index channel_orders_paid_by_day.
func (s *Store) PaidChannelOrders(ctx context.Context, channel string, from, to time.Time) ([]orderpay.ChannelOrder, error) {
	return s.channelOrders(ctx, `SELECT `+channelOrderColumns+` FROM channel_orders
		WHERE status = 'SUCCESS' AND channel = ? AND paid_at >= ? AND paid_at < ? ORDER BY paid_at, out_trade_no`,
		channel, ms(from), ms(to))
}

// SettledChannelRefunds uses the partial index refunds_settled_by_day.
func (s *Store) SettledChannelRefunds(ctx context.Context, channel string, from, to time.Time) ([]orderpay.ChannelRefund, error) {
	return s.channelRefunds(ctx, `SELECT `+channelRefundColumns+` FROM refunds
		WHERE status = 'SUCCESS' AND channel = ? AND refunded_at >= ? AND refunded_at < ? ORDER BY refunded_at, out_refund_no`,
		channel, ms(from), ms(to))
}

// SaveReconciliation writes the report and its items in one transaction.
func (s *Store) SaveReconciliation(ctx context.Context, r *orderpay.Reconciliation) error {
	counts, err := json.Marshal(r.Counts)
	if err != nil {
		return err
	}
	layers, err := json.Marshal(r.Layers)
	if err != nil {
		return err
	}
	if r.Layers == nil {
		layers = []byte("{}")
	}
	figures, err := json.Marshal(r.Figures)
	if err != nil {
		return err
	}
	return s.InTx(ctx, func(tx orderpay.Tx) error {
		q := tx.(*queries)
		var id int64
		if err := q.row(ctx, `INSERT INTO reconciliations (channel, bill_date, started_at, finished_at, bill_rows, unexplained, counts,
			account, layers, figures, balance_known, closing_balance)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, r.Channel, r.Date, ms(r.StartedAt), ms(r.FinishedAt), r.BillRows,
			r.Unexplained, string(counts), r.Account, string(layers), string(figures), boolInt(r.Figures.BalanceKnown),
			r.Figures.Closing).Scan(&id); err != nil {
			return err
		}
		for i, it := range r.Items {
			if _, err := q.exec(ctx, `INSERT INTO reconciliation_items (reconciliation_id, seq, class, resolution, kind,
				out_trade_no, out_refund_no, bill_amount, local_amount, in_bill, detail, layer, difference)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				id, i, string(it.Class), string(it.Resolution), string(it.Kind), it.OutTradeNo, it.OutRefundNo, it.BillAmount,
				it.LocalAmount, boolInt(it.InBill), it.Detail, string(it.Layer), it.Difference); err != nil {
				return err
			}
		}
		r.ID = id
		return nil
	})
}

const reconciliationColumns = `id, channel, bill_date, started_at, finished_at, bill_rows, unexplained, counts,
	account, layers, figures`

// scanReconciliation reads a report without its items. A report made before layers were
// stored has none (an empty map) and zero figures.
func scanReconciliation(row scanner) (*orderpay.Reconciliation, error) {
	var r orderpay.Reconciliation
	var started, finished int64
	var counts, layers, figures string
	if err := row.Scan(&r.ID, &r.Channel, &r.Date, &started, &finished, &r.BillRows, &r.Unexplained, &counts,
		&r.Account, &layers, &figures); err != nil {
		return nil, err
	}
	r.StartedAt, r.FinishedAt = orderpay.FromMillis(started), orderpay.FromMillis(finished)
	if err := json.Unmarshal([]byte(counts), &r.Counts); err != nil {
		return nil, err
	}
	r.Layers = map[orderpay.ReconLayer]orderpay.LayerSummary{}
	if err := json.Unmarshal([]byte(layers), &r.Layers); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(figures), &r.Figures); err != nil {
		return nil, err
	}
	return &r, nil
}

// Reconciliation reads one report with its items, in the order they were stored.
func (s *Store) Reconciliation(ctx context.Context, id int64) (*orderpay.Reconciliation, error) {
	r, err := scanReconciliation(s.row(ctx, `SELECT `+reconciliationColumns+` FROM reconciliations WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "reconciliation", strconv.FormatInt(id, 10))
	}
	rows, err := s.rows(ctx, `SELECT class, resolution, kind, out_trade_no, out_refund_no, bill_amount, local_amount, in_bill, detail,
		layer, difference FROM reconciliation_items WHERE reconciliation_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r.Items = []orderpay.ReconItem{}
	for rows.Next() {
		var it orderpay.ReconItem
		var inBill int
		if err := rows.Scan(&it.Class, &it.Resolution, &it.Kind, &it.OutTradeNo, &it.OutRefundNo, &it.BillAmount,
			&it.LocalAmount, &inBill, &it.Detail, &it.Layer, &it.Difference); err != nil {
			return nil, err
		}
		it.InBill = inBill != 0
		r.Items = append(r.Items, it)
	}
	return r, rows.Err()
}

// Reconciliations lists reports newest first, without items.
func (s *Store) Reconciliations(ctx context.Context, channel, date string, limit int) ([]orderpay.Reconciliation, error) {
	rows, err := s.rows(ctx, `SELECT `+reconciliationColumns+` FROM reconciliations
		WHERE (? = '' OR channel = ?) AND (? = '' OR bill_date = ?) ORDER BY id DESC LIMIT ?`, channel, channel, date, date, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []orderpay.Reconciliation{}
	for rows.Next() {
		r, err := scanReconciliation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// LastClosingBalance uses the partial index reconciliations_closing: of the reports of
// channel for days before date whose closing balance is known, the one of the latest day,
// and of that day the latest report.
func (s *Store) LastClosingBalance(ctx context.Context, channel, date string) (day string, balance int64, ok bool, err error) {
	err = s.row(ctx, `SELECT bill_date, closing_balance FROM reconciliations
		WHERE channel = ? AND bill_date < ? AND balance_known = 1 ORDER BY bill_date DESC, id DESC LIMIT 1`, channel, date).Scan(&day, &balance)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, translate(err)
	}
	return day, balance, true, nil
}

package sqlstore

import (
	"context"
	"strings"

	"orderpay"
)

var _ orderpay.AuditLog = (*Store)(nil)

func (q *queries) LogOperatorAction(ctx context.Context, a *orderpay.OperatorAction) error {
	clean := func(s string) string { return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD") }
	_, err := q.exec(ctx, `INSERT INTO operator_actions (at, actor, role, action, target, order_no, status, code, detail, addr)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ms(a.At), clean(a.Actor), string(a.Role), clean(a.Action), clean(a.Target),
		clean(a.OrderNo), a.Status, a.Code, clean(a.Detail), clean(a.Addr))
	return err
}

func (q *queries) OperatorActions(ctx context.Context, f orderpay.AuditFilter, limit int) ([]orderpay.OperatorAction, error) {
	var where []string
	var args []any
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	if f.OrderNo != "" {
		where, args = append(where, "order_no = ?"), append(args, f.OrderNo)
	}
	query := `SELECT id, at, actor, role, action, target, order_no, status, code, detail, addr FROM operator_actions`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := q.rows(ctx, query+" ORDER BY at DESC, id DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.OperatorAction
	for rows.Next() {
		var a orderpay.OperatorAction
		var at int64
		if err := rows.Scan(&a.ID, &at, &a.Actor, &a.Role, &a.Action, &a.Target, &a.OrderNo, &a.Status, &a.Code, &a.Detail, &a.Addr); err != nil {
			return nil, err
		}
		a.At = orderpay.FromMillis(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

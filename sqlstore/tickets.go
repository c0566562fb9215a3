package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"orderpay"
)

// ---- queued admission: tickets (migration 0029) ----

const ticketColumns = `seq, ticket_id, sku, buyer_id, qty, state, order_no, reason, request, request_key, request_hash,
	created_at, expires_at, updated_at`

func scanTicket(r scanner) (*orderpay.Ticket, error) {
	var t orderpay.Ticket
	var created, expires, updated int64
	if err := r.Scan(&t.Seq, &t.ID, &t.SKU, &t.BuyerID, &t.Qty, &t.State, &t.OrderNo, &t.Reason, &t.Request, &t.Key, &t.RequestHash,
		&created, &expires, &updated); err != nil {
		return nil, err
	}
	t.CreatedAt, t.ExpiresAt, t.UpdatedAt = orderpay.FromMillis(created), orderpay.FromMillis(expires), orderpay.FromMillis(updated)
	return &t, nil
}

// ticket reads one ticket by where (its Position is the order system's to fill in).
func (q *queries) ticket(ctx context.Context, what, key, where string, args ...any) (*orderpay.Ticket, error) {
	t, err := scanTicket(q.row(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE `+where, args...))
	if err != nil {
		return nil, notFound(err, what, key)
	}
	return t, nil
}

func (q *queries) CountWaiting(ctx context.Context, sku string, after, upTo int64) (int64, error) {
	var n int64
	err := q.row(ctx, `SELECT COUNT(*) FROM tickets WHERE sku = ? AND state = 'WAITING' AND seq > ? AND seq <= ?`, sku, after, upTo).Scan(&n)
	return n, translate(err)
}

func (q *queries) WaitingSeqs(ctx context.Context, sku string) ([]int64, error) {
	var out []int64
	err := q.snapshotEach(ctx, `SELECT seq FROM tickets WHERE sku = ? AND state = 'WAITING' ORDER BY seq`, func(r scanner) error {
		var seq int64
		err := r.Scan(&seq)
		out = append(out, seq)
		return err
	}, sku)
	return out, translate(err)
}

func (q *queries) Ticket(ctx context.Context, id string) (*orderpay.Ticket, error) {
	return q.ticket(ctx, "ticket", id, `ticket_id = ?`, id)
}

// The lookups of a buyer's ticket before it takes another, each on its partial unique
// index. A condition repeats its index's own (the key not empty, the ticket waiting):
// neither engine uses a partial index for a bound parameter otherwise (PostgreSQL's generic
// plan of a prepared statement included), and every admission would read the whole table.
const (
	ticketByKeyWhere = `buyer_id = ? AND request_key = ? AND request_key <> ''`
	liveTicketWhere  = `buyer_id = ? AND sku = ? AND state = 'WAITING'`
)

func (q *queries) TicketByKey(ctx context.Context, buyerID, key string) (*orderpay.Ticket, error) {
	if key == "" {
		return nil, orderpay.NotFound("ticket of key", key)
	}
	return q.ticket(ctx, "ticket of key", key, ticketByKeyWhere, buyerID, key)
}

func (q *queries) LiveTicket(ctx context.Context, buyerID, sku string) (*orderpay.Ticket, error) {
	return q.ticket(ctx, "live ticket of sku", sku, liveTicketWhere, buyerID, sku)
}

// waitingTicketsQuery is the queue's serving read, on tickets_waiting.
const waitingTicketsQuery = `SELECT ` + ticketColumns + ` FROM tickets WHERE sku = ? AND state = 'WAITING' AND seq < ? ORDER BY seq LIMIT ?`

func (q *queries) WaitingTickets(ctx context.Context, sku string, before int64, limit int) ([]orderpay.Ticket, error) {
	if before <= 0 {
		before = 1 << 62
	}
	var out []orderpay.Ticket
	err := q.snapshotEach(ctx, waitingTicketsQuery,
		func(r scanner) error {
			t, err := scanTicket(r)
			if err == nil {
				out = append(out, *t)
			}
			return err
		}, sku, before, limit)
	return out, translate(err)
}

// queuedSKUsQuery is the queue's expiry pass, on tickets_waiting.
const queuedSKUsQuery = `SELECT sku, MIN(expires_at) FROM tickets WHERE state = 'WAITING' GROUP BY sku`

func (q *queries) QueuedSKUs(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := q.snapshotEach(ctx, queuedSKUsQuery, func(r scanner) error {
		var sku string
		var at int64
		if err := r.Scan(&sku, &at); err != nil {
			return err
		}
		out[sku] = orderpay.FromMillis(at)
		return nil
	})
	return out, translate(err)
}

func (q *queries) CreateTicket(ctx context.Context, t *orderpay.Ticket) error {
	err := q.row(ctx, `INSERT INTO tickets (ticket_id, sku, buyer_id, qty, state, request, request_key, request_hash, created_at, expires_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		t.ID, t.SKU, t.BuyerID, t.Qty, string(orderpay.TicketWaiting), t.Request, t.Key, t.RequestHash,
		ms(t.CreatedAt), ms(t.ExpiresAt), ms(t.CreatedAt)).Scan(&t.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return orderpay.Errorf(orderpay.ECONFLICT, "buyer %s holds a ticket of sku %q already, or used its key for another", t.BuyerID, t.SKU)
	}
	if err != nil {
		return translate(err)
	}
	t.State, t.UpdatedAt = orderpay.TicketWaiting, t.CreatedAt
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityTicket, EntityNo: t.ID,
		To: string(orderpay.TicketWaiting), Event: "create", Actor: "buyer:" + t.BuyerID, At: t.CreatedAt})
}

func (q *queries) EndTicket(ctx context.Context, id string, to orderpay.TicketState, orderNo, reason string, at time.Time) error {
	event := orderpay.TicketEventTo(to)
	if err := q.checked(orderpay.TicketMachine, orderpay.EntityTicket, id, string(orderpay.TicketWaiting), string(event), string(to)); err != nil {
		return err
	}
	n, err := q.exec(ctx, `UPDATE tickets SET state = ?, order_no = ?, reason = ?, updated_at = ? WHERE ticket_id = ? AND state = 'WAITING'`,
		string(to), orderNo, reason, ms(at), id)
	if err != nil {
		return err
	}
	if n == 0 {
		var state string
		if err := q.row(ctx, `SELECT state FROM tickets WHERE ticket_id = ?`, id).Scan(&state); err != nil {
			return notFound(err, "ticket", id)
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "ticket %s is %s, not WAITING", id, state)
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityTicket, EntityNo: id, From: string(orderpay.TicketWaiting),
		To: string(to), Event: string(event), Actor: "system", Reason: reason, At: at})
}

func (q *queries) EndWaitingTickets(ctx context.Context, sku string, upTo int64, to orderpay.TicketState, at time.Time) (int, error) {
	if to != orderpay.TicketSoldOut && to != orderpay.TicketExpired {
		return 0, orderpay.Errorf(orderpay.EINVALID, "tickets end together only sold out or expired, not %s", to)
	}
	if upTo <= 0 {
		upTo = 1 << 62
	}
	cond, args := `sku = ? AND state = 'WAITING' AND seq <= ?`, []any{sku, upTo}
	if to == orderpay.TicketExpired {
		cond += ` AND expires_at <= ?`
		args = append(args, ms(at))
	}
	if err := q.checked(orderpay.TicketMachine, orderpay.EntityTicket, sku, string(orderpay.TicketWaiting), string(orderpay.TicketEventTo(to)), string(to)); err != nil {
		return 0, err
	}
	// One conditional update, which returns the tickets it ended: a ticket another
	// instance ended meanwhile fails its condition (on PostgreSQL the row is checked again
	// once that instance commits) and is neither ended here nor given a history row.
	var ids []string
	if err := q.snapshotEach(ctx, `UPDATE tickets SET state = ?, updated_at = ? WHERE `+cond+` RETURNING ticket_id`, func(r scanner) error {
		var id string
		err := r.Scan(&id)
		ids = append(ids, id)
		return err
	}, append([]any{string(to), ms(at)}, args...)...); err != nil {
		return 0, translate(err)
	}
	for _, id := range ids {
		if err := q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityTicket, EntityNo: id, From: string(orderpay.TicketWaiting),
			To: string(to), Event: string(orderpay.TicketEventTo(to)), Actor: "system", At: at}); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

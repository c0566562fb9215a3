package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"orderpay"
	"orderpay/sqlstore"
)

// GivenTicket is a ticket a buyer was given: the answer to its order of a queued SKU (202,
// or 200 for one it held), and the final state its reads of the ticket showed it ("" if
// none did).
type GivenTicket struct {
	ID      string
	BuyerID string
	SKU     string
	Seen    orderpay.TicketState
}

// ticketEnd is one line of a ticket's history that moved it out of WAITING.
type ticketEnd struct {
	from, to, event string
}

// readTickets reads every ticket (nil if the store has no tickets table) and the ends in
// each one's history, by ticket id.
func readTickets(ctx context.Context, store *sqlstore.Store) ([]orderpay.Ticket, map[string][]ticketEnd, error) {
	rows, err := store.DB().QueryContext(ctx, `SELECT ticket_id, sku, buyer_id, qty, seq, state, order_no, reason, created_at, expires_at, updated_at
		FROM tickets ORDER BY seq`)
	if err != nil {
		if strings.Contains(err.Error(), "tickets") {
			return nil, nil, nil // a server version without queued admission
		}
		return nil, nil, err
	}
	defer rows.Close()
	var out []orderpay.Ticket
	for rows.Next() {
		var t orderpay.Ticket
		var state string
		var created, expires, updated sql.NullInt64
		if err := rows.Scan(&t.ID, &t.SKU, &t.BuyerID, &t.Qty, &t.Seq, &state, &t.OrderNo, &t.Reason, &created, &expires, &updated); err != nil {
			return nil, nil, err
		}
		t.State = orderpay.TicketState(state)
		t.CreatedAt, t.ExpiresAt, t.UpdatedAt = orderpay.FromMillis(created.Int64), orderpay.FromMillis(expires.Int64), orderpay.FromMillis(updated.Int64)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	ends := map[string][]ticketEnd{}
	hist, err := store.DB().QueryContext(ctx, store.Rebind(`SELECT entity_no, from_status, to_status, event FROM history WHERE entity = ? ORDER BY seq`), orderpay.EntityTicket)
	if err != nil {
		return nil, nil, err
	}
	defer hist.Close()
	for hist.Next() {
		var no string
		var e ticketEnd
		if err := hist.Scan(&no, &e.from, &e.to, &e.event); err != nil {
			return nil, nil, err
		}
		if orderpay.TicketState(e.to).Final() {
			ends[no] = append(ends[no], e)
		}
	}
	return out, ends, hist.Err()
}

// queuedSKUs are the SKUs that take their orders through the queue: those marked so, and
// any that has tickets.
func (w *world) queuedSKUs() map[string]bool {
	out := map[string]bool{}
	for _, s := range w.snap.SKUs {
		if s.Queued {
			out[s.SKU] = true
		}
	}
	for _, t := range w.tickets {
		out[t.SKU] = true
	}
	return out
}

// checkTicketsEndOnce is I10: every ticket ends once, in one final state, and only an
// ORDERED one has an order, its own.
//
//   - Every ticket a buyer was given is in the database, the buyer's, of the SKU it asked for;
//     the final state its reads showed is the database's.
//   - No ticket is WAITING once the run has settled; each is ORDERED, SOLD_OUT, EXPIRED or
//     REFUSED, and its history moved it out of WAITING exactly once, to that state.
//   - An ORDERED ticket names an order that exists, of its buyer, with one line: its SKU
//     and quantity. Any other state names none. No two tickets name one order.
//   - Every order with a line of a queued SKU is a ticket's: an order made for a ticket
//     twice, or past the queue, has no ticket of its own.
//   - The orders of a SKU's ORDERED tickets hold no more units than its stock's total: a
//     pending order its units, a paid one those not put back by after-sales, a cancelled
//     one none (its units went back, and a later ticket may have had them). I4 checks the
//     SKU's stock against its orders, as for every SKU.
//   - Each ticket went onto the bus once (ticket.queued, one message id), and no message
//     names a ticket the database does not have. A message still in the outbox is I7's.
func (w *world) checkTicketsEndOnce() {
	byID := map[string]*orderpay.Ticket{}
	byOrder := map[string][]string{}
	units := map[string]int64{}
	for i := range w.tickets {
		t := &w.tickets[i]
		byID[t.ID] = t
		if t.OrderNo != "" {
			byOrder[t.OrderNo] = append(byOrder[t.OrderNo], t.ID)
		}
	}
	add := func(t *orderpay.Ticket, orderNo, detail string) {
		v := Violation{Invariant: TicketsEndOnce, OrderNo: orderNo, Detail: detail}
		if t != nil {
			v.Ticket, v.SKU = t.ID, t.SKU
		}
		w.add(v)
	}
	for _, g := range w.given {
		t := byID[g.ID]
		switch {
		case t == nil:
			add(nil, "", fmt.Sprintf("buyer %s was given ticket %s of %s, which the database does not have", g.BuyerID, g.ID, g.SKU))
		case t.BuyerID != g.BuyerID || t.SKU != g.SKU:
			add(t, "", fmt.Sprintf("buyer %s was given ticket %s of %s, which is buyer %s's of %s", g.BuyerID, g.ID, g.SKU, t.BuyerID, t.SKU))
		case g.Seen != "" && g.Seen != t.State:
			add(t, t.OrderNo, fmt.Sprintf("buyer %s was told its ticket ended %s, the database says %s", g.BuyerID, g.Seen, t.State))
		}
	}
	for i := range w.tickets {
		t := &w.tickets[i]
		switch t.State {
		case orderpay.TicketWaiting:
			add(t, "", fmt.Sprintf("ticket is still WAITING at settle (created %s, expires %s)", t.CreatedAt.UTC().Format(time.RFC3339), t.ExpiresAt.UTC().Format(time.RFC3339)))
			continue
		case orderpay.TicketOrdered, orderpay.TicketSoldOut, orderpay.TicketExpired, orderpay.TicketRefused:
		default:
			add(t, t.OrderNo, fmt.Sprintf("ticket is in state %q, which no ticket reaches", t.State))
		}
		switch ends := w.ticketEnds[t.ID]; {
		case len(ends) != 1:
			var seen []string
			for _, e := range ends {
				seen = append(seen, e.from+" → "+e.to)
			}
			add(t, t.OrderNo, fmt.Sprintf("ticket is %s, and its history ends it %d times (%s), not once", t.State, len(ends), strings.Join(seen, ", ")))
		case ends[0].to != string(t.State) || ends[0].from != string(orderpay.TicketWaiting):
			add(t, t.OrderNo, fmt.Sprintf("ticket is %s, but its history ended it %s → %s", t.State, ends[0].from, ends[0].to))
		}
		if t.State != orderpay.TicketOrdered {
			if t.OrderNo != "" {
				add(t, t.OrderNo, fmt.Sprintf("ticket is %s but names order %s", t.State, t.OrderNo))
			}
			continue
		}
		o := w.orders[t.OrderNo]
		if o != nil {
			units[t.SKU] += w.unitsHeld(o)
		}
		switch {
		case t.OrderNo == "":
			add(t, "", "ticket is ORDERED but names no order")
		case o == nil:
			add(t, t.OrderNo, fmt.Sprintf("ticket is ORDERED, but its order %s does not exist", t.OrderNo))
		case o.BuyerID != t.BuyerID:
			add(t, t.OrderNo, fmt.Sprintf("ticket of buyer %s names order %s of buyer %s", t.BuyerID, o.No, o.BuyerID))
		case len(o.Items) != 1 || o.Items[0].SKU != t.SKU || o.Items[0].Qty != t.Qty:
			var lines []string
			for _, it := range o.Items {
				lines = append(lines, fmt.Sprintf("%d × %s", it.Qty, it.SKU))
			}
			add(t, t.OrderNo, fmt.Sprintf("ticket of %d × %s names order %s of %s", t.Qty, t.SKU, o.No, strings.Join(lines, ", ")))
		}
	}
	for _, orderNo := range slices.Sorted(maps.Keys(byOrder)) {
		if ids := byOrder[orderNo]; len(ids) > 1 {
			add(byID[ids[0]], orderNo, fmt.Sprintf("%d tickets name order %s: %s", len(ids), orderNo, strings.Join(ids, ", ")))
		}
	}
	queued := w.queuedSKUs()
	for _, o := range w.snap.Orders {
		if len(byOrder[o.No]) > 0 {
			continue
		}
		for _, it := range o.Items {
			if queued[it.SKU] {
				w.add(Violation{Invariant: TicketsEndOnce, OrderNo: o.No, SKU: it.SKU, Detail: fmt.Sprintf(
					"order %s (%s, buyer %s) has %d × queued %s but no ticket names it: made past the queue, or a second time for one ticket",
					o.No, o.Status, o.BuyerID, it.Qty, it.SKU)})
				break
			}
		}
	}
	total := map[string]int64{}
	for _, st := range w.snap.Stock {
		total[st.SKU] = st.Total
	}
	for _, sku := range slices.Sorted(maps.Keys(units)) {
		if units[sku] > total[sku] {
			w.add(Violation{Invariant: TicketsEndOnce, SKU: sku, Detail: fmt.Sprintf(
				"the orders of the ORDERED tickets of %s still hold %d units, beyond its %d", sku, units[sku], total[sku])})
		}
	}
	w.checkTicketsQueuedOnce(byID)
}

// checkTicketsQueuedOnce is I10's side on the bus: one ticket.queued (by message id) per
// ticket, none for a ticket the database does not have.
func (w *world) checkTicketsQueuedOnce(byID map[string]*orderpay.Ticket) {
	ids := map[string][]string{}
	for i, ev := range w.events {
		if ev.Subject != orderpay.SubjectTicketQueued {
			continue
		}
		var p orderpay.TicketPayload
		_ = json.Unmarshal(ev.Payload, &p) // one that does not parse names no ticket
		id := ev.MsgID
		if id == "" {
			id = fmt.Sprintf("(no id, event #%d)", i)
		}
		if !slices.Contains(ids[p.TicketID], id) {
			ids[p.TicketID] = append(ids[p.TicketID], id)
		}
	}
	unpublished := map[string]bool{}
	for _, m := range w.snap.UnpublishedMessages {
		if m.Subject == orderpay.SubjectTicketQueued {
			var p orderpay.TicketPayload
			_ = json.Unmarshal(m.Payload, &p)
			unpublished[p.TicketID] = true
		}
	}
	for i := range w.tickets {
		t := &w.tickets[i]
		got := ids[t.ID]
		delete(ids, t.ID)
		if len(got) == 1 || (len(got) == 0 && unpublished[t.ID]) {
			continue
		}
		w.add(Violation{Invariant: TicketsEndOnce, Ticket: t.ID, SKU: t.SKU, OrderNo: t.OrderNo,
			Detail: fmt.Sprintf("%s went onto the bus %d times for ticket %s, want once (message ids %s)", orderpay.SubjectTicketQueued, len(got), t.ID, strings.Join(got, ", "))})
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		w.add(Violation{Invariant: TicketsEndOnce, Ticket: id,
			Detail: fmt.Sprintf("%s names ticket %q, which the database does not have (message ids %s)", orderpay.SubjectTicketQueued, id, strings.Join(ids[id], ", "))})
	}
}

// unitsHeld is how many units order o still holds: a pending order's lines, a paid order's
// less what after-sales put back, none for a cancelled one.
func (w *world) unitsHeld(o *orderpay.Order) int64 {
	var n int64
	for _, it := range o.Items {
		switch {
		case paidStatus(o.Status):
			n += it.Qty - w.restockedUnits(o, it)
		case o.Status == orderpay.OrderPendingPayment:
			n += it.Qty
		}
	}
	return n
}

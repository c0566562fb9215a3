package explore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"orderpay"
	"orderpay/order"
)

// Queued admission (docs/design.md §6.1) in the explorer: a queued SKU of one unit and two
// buyers' tickets waiting for their turn, their ticket.queued messages in the outbox. The
// order system's consumer serves a ticket's message (the first's, or the second's, which
// serves the first before itself), on one instance or two, and the ticket sweeper fires at
// the tickets' expiry; a crash meets each of their steps. The check (checkTickets): every
// ticket ends once, each ORDERED ticket has its own order of its buyer and SKU, no order of
// a queued SKU is without a ticket, the orders follow the arrivals, and the SKU's stock is
// the tickets' orders'.

// SceneTicketWaiting: a queued SKU of one unit, two buyers' tickets waiting, their messages
// not yet delivered.
const SceneTicketWaiting = "ticket-waiting"

// QueueSubject is what the ticket-waiting scene made: the queued SKU, its tickets in arrival
// order, their ticket.queued messages (as the outbox holds them), and when they expire.
type QueueSubject struct {
	SKU       string
	Tickets   []string
	Messages  []orderpay.Message
	ExpiresAt time.Time
}

func init() {
	Scenes = append(Scenes, SceneTicketWaiting)
	crashOp.Scenes = Scenes
	sceneSetups[SceneTicketWaiting] = setupTicketWaiting
	machines[orderpay.EntityTicket] = orderpay.TicketMachine
	Catalogue = append(Catalogue,
		&Op{Name: "ticket.serve", Scenes: []string{SceneTicketWaiting}, Run: serveTicket(0, 0)},
		&Op{Name: "ticket.serve.later", Scenes: []string{SceneTicketWaiting}, Run: serveTicket(0, 1)},
		&Op{Name: "ticket.sweep", Scenes: []string{SceneTicketWaiting}, Run: sweepTickets},
		&Op{Name: "i2.ticket.serve", Second: true, Scenes: []string{SceneTicketWaiting}, Run: serveTicket(1, 0)},
	)
	checks = append(checks, checkTickets)
}

// setupTicketWaiting: a queued SKU of its own with one unit (the profile's goods, price and
// stock policy; the default wait), and buyer-1's then buyer-2's order of one unit, each a
// ticket waiting; their messages stay in the outbox. The subject's buyer is buyer-1.
func setupTicketWaiting(ctx context.Context, w *World, in *Instance, s *Subject) error {
	p := w.Profile
	q := &QueueSubject{SKU: w.fixture.SKU + "-queued"}
	if _, _, err := in.Orders.CreateSKU(ctx, order.NewSKU{SKU: q.SKU, MerchantID: "shop", Title: "explorer queued", Price: p.Price, Stock: 1,
		ProductType: p.ProductType, StockPolicy: p.Policy, ReserveMinutes: p.ReserveMinutes, Queued: true}); err != nil {
		return err
	}
	for _, buyer := range []string{s.BuyerID, "buyer-2"} {
		placed, err := in.Orders.Place(ctx, order.CreateOrderRequest{BuyerID: buyer, Items: []order.ItemRequest{{SKU: q.SKU, Qty: 1}}, Address: address})
		if err != nil {
			return err
		}
		if placed.Ticket == nil || placed.Ticket.State != orderpay.TicketWaiting {
			return fmt.Errorf("%s's order of the queued sku is %+v, not a waiting ticket", buyer, placed)
		}
		q.Tickets = append(q.Tickets, placed.Ticket.ID)
		q.ExpiresAt = placed.Ticket.ExpiresAt
	}
	msgs, err := in.Store.UnpublishedMessages(ctx, 100)
	if err != nil {
		return err
	}
	for _, id := range q.Tickets {
		i := -1
		for j, m := range msgs {
			if m.Subject == orderpay.SubjectTicketQueued && m.ID == orderpay.SubjectTicketQueued+":"+id {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("ticket %s has no %s message in the outbox", id, orderpay.SubjectTicketQueued)
		}
		q.Messages = append(q.Messages, msgs[i])
	}
	s.Queue = q
	return nil
}

// serveTicket: the order system's consumer on instance i handles the ticket.queued message
// of the scene's n-th ticket (0: the first arrival), as the bus delivers it. The message
// stays in the outbox: the settle's bus delivers it again, which must do nothing.
func serveTicket(i, n int) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		return w.In(i).Orders.HandleTicket(ctx, w.S.Queue.Messages[n])
	}
}

// sweepTickets: the ticket sweeper fires at the tickets' expiry (the first moment they are
// past their bound), which also ends a SKU's waiting tickets once no unit is left.
func sweepTickets(ctx context.Context, w *World, label string) error {
	w.fire(ctx, "ticket sweeper", w.S.Queue.ExpiresAt)
	_, err := w.In(0).Orders.SweepTickets(ctx)
	return err
}

// ---- the check ----

type storedTicket struct {
	seq                       int64
	id, sku, buyer, state, no string
	qty                       int64
	arrival                   int // 1-based among its SKU's tickets
}

func (t *storedTicket) String() string {
	return fmt.Sprintf("ticket %s (%s's, arrival %d of sku %s)", t.id, t.buyer, t.arrival, t.sku)
}

// checkTickets audits the settled queues:
//   - every ticket is final, and ended once (one end in its history);
//   - an ORDERED ticket's order exists, of its buyer, one line of its SKU and quantity, and
//     no other ticket names it; a ticket in another state names no order;
//   - every order of a queued SKU is an ORDERED ticket's;
//   - the orders follow the arrivals: a ticket is ORDERED only after every ticket of its SKU
//     that arrived before it ended, and none of those ended SOLD_OUT;
//   - each queued SKU's stock adds up (available + locked + sold = total), and its locked
//     and sold units are those its tickets' orders hold under its stock policy.
func checkTickets(ctx context.Context, w *World) ([]string, error) {
	st := w.In(0).Store
	var tickets []*storedTicket
	err := w.eachRow(ctx, `SELECT seq, ticket_id, sku, buyer_id, qty, state, order_no FROM tickets ORDER BY seq`, func(r *sql.Rows) error {
		t := &storedTicket{}
		tickets = append(tickets, t)
		return r.Scan(&t.seq, &t.id, &t.sku, &t.buyer, &t.qty, &t.state, &t.no)
	})
	if err != nil {
		return nil, err
	}
	var queued []string
	if err := w.eachRow(ctx, `SELECT sku FROM skus WHERE queued <> 0 ORDER BY sku`, func(r *sql.Rows) error {
		var sku string
		queued = append(queued, sku)
		return r.Scan(&queued[len(queued)-1])
	}); err != nil {
		return nil, err
	}
	if len(tickets) == 0 && len(queued) == 0 {
		return nil, nil
	}
	ends := map[string][]int64{} // a ticket's ends, by history seq
	if err := w.eachRow(ctx, `SELECT seq, entity_no FROM history WHERE entity = ? AND from_status <> '' ORDER BY seq`, func(r *sql.Rows) error {
		var seq int64
		var id string
		if err := r.Scan(&seq, &id); err != nil {
			return err
		}
		ends[id] = append(ends[id], seq)
		return nil
	}, orderpay.EntityTicket); err != nil {
		return nil, err
	}

	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, "tickets: "+fmt.Sprintf(format, args...)) }
	bySKU := map[string][]*storedTicket{}
	byOrder := map[string]*storedTicket{}
	for _, t := range tickets {
		bySKU[t.sku] = append(bySKU[t.sku], t)
		t.arrival = len(bySKU[t.sku])
		if t.state == string(orderpay.TicketWaiting) {
			fail("%s is still WAITING after the settle", t)
			continue
		}
		if n := len(ends[t.id]); n != 1 {
			fail("%s (%s) ended %d times in its history: a ticket ends once", t, t.state, n)
		}
		if t.state != string(orderpay.TicketOrdered) {
			if t.no != "" {
				fail("%s is %s but names order %s", t, t.state, t.no)
			}
			continue
		}
		if t.no == "" {
			fail("%s is ORDERED without an order", t)
			continue
		}
		if other := byOrder[t.no]; other != nil {
			fail("%s and %s share order %s", other, t, t.no)
			continue
		}
		byOrder[t.no] = t
		o, err := st.Order(ctx, t.no)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			fail("%s is ORDERED as %s, which does not exist", t, t.no)
			continue
		}
		if err != nil {
			return nil, err
		}
		if o.BuyerID != t.buyer || len(o.Items) != 1 || o.Items[0].SKU != t.sku || o.Items[0].Qty != t.qty {
			var lines []string
			for _, it := range o.Items {
				lines = append(lines, fmt.Sprintf("%d of %s", it.Qty, it.SKU))
			}
			fail("%s of %d units is ORDERED as %s, which is %s's order of %s", t, t.qty, t.no, o.BuyerID, strings.Join(lines, ", "))
		}
	}
	// Arrival order: an ORDERED ticket's turn came after each earlier ticket of its SKU
	// had ended, and the unit went to none of those only because it was gone.
	for _, ts := range bySKU {
		for j, t := range ts {
			if t.state != string(orderpay.TicketOrdered) || len(ends[t.id]) == 0 {
				continue
			}
			at := ends[t.id][0]
			for _, e := range ts[:j] {
				switch {
				case e.state == string(orderpay.TicketSoldOut):
					fail("%s got an order though %s, which arrived before it, ended SOLD_OUT", t, e)
				case len(ends[e.id]) == 0 || ends[e.id][0] > at:
					fail("%s was ORDERED before %s, which arrived before it, had its turn", t, e)
				}
			}
		}
	}
	for _, sku := range queued {
		var nos []string
		if err := w.eachRow(ctx, `SELECT DISTINCT order_no FROM order_items WHERE sku = ? ORDER BY order_no`, func(r *sql.Rows) error {
			nos = append(nos, "")
			return r.Scan(&nos[len(nos)-1])
		}, sku); err != nil {
			return nil, err
		}
		for _, no := range nos {
			if byOrder[no] == nil {
				fail("order %s of queued sku %s is no ticket's", no, sku)
			}
		}
		more, err := ticketStock(ctx, w, sku, bySKU[sku])
		if err != nil {
			return nil, err
		}
		bad = append(bad, more...)
	}
	return bad, nil
}

// ticketStock checks a queued SKU's stock against its tickets' orders: the equation, and the
// units locked and sold are those the orders hold under the SKU's stock policy (a paid order
// its units; a pending one its units under "order", its standing hold's under "reserve",
// none under "payment"). The scene refunds nothing, so no unit comes back from a paid order.
func ticketStock(ctx context.Context, w *World, sku string, tickets []*storedTicket) ([]string, error) {
	st := w.In(0).Store
	k, err := st.SKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	s, err := st.Stock(ctx, sku)
	if err != nil {
		return nil, err
	}
	var bad []string
	if s.Available+s.Locked+s.Sold != s.Total {
		bad = append(bad, fmt.Sprintf("tickets: sku %s: available %d + locked %d + sold %d is not its total %d", sku, s.Available, s.Locked, s.Sold, s.Total))
	}
	var held int64
	var holders []string
	for _, t := range tickets {
		if t.state != string(orderpay.TicketOrdered) || t.no == "" {
			continue
		}
		o, err := st.Order(ctx, t.no)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			continue // named above
		}
		if err != nil {
			return nil, err
		}
		units := int64(0)
		switch {
		case o.Status == orderpay.OrderPaid || o.Status == orderpay.OrderShipped || o.Status == orderpay.OrderReceived || o.Status == orderpay.OrderCompleted:
			units = t.qty
		case o.Status == orderpay.OrderPendingPayment && (k.StockPolicy == orderpay.StockAtOrder || k.StockPolicy == ""):
			units = t.qty
		case o.Status == orderpay.OrderPendingPayment && k.StockPolicy == orderpay.StockReserve:
			hs, err := st.StockHolds(ctx, o.No)
			if err != nil {
				return nil, err
			}
			for _, h := range hs {
				if h.State == orderpay.HoldStanding {
					units += h.Qty
				}
			}
		}
		if units > 0 {
			held += units
			holders = append(holders, fmt.Sprintf("%s's order %s (%s): %d", t.id, o.No, o.Status, units))
		}
	}
	if s.Locked+s.Sold != held {
		bad = append(bad, fmt.Sprintf("tickets: sku %s (stock policy %q): locked %d + sold %d, but its tickets' orders hold %d units (%s)",
			sku, k.StockPolicy, s.Locked, s.Sold, held, strings.Join(holders, "; ")))
	}
	return bad, nil
}

// eachRow runs query on w's database (its ? placeholders numbered for PostgreSQL) and calls
// fn on each row.
func (w *World) eachRow(ctx context.Context, query string, fn func(*sql.Rows) error, args ...any) error {
	if w.Engine == "postgres" {
		var b strings.Builder
		n := 0
		for _, c := range query {
			if c == '?' {
				n++
				fmt.Fprintf(&b, "$%d", n)
				continue
			}
			b.WriteRune(c)
		}
		query = b.String()
	}
	rows, err := w.In(0).Store.DB().QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/chaos/audit"
)

// The queued SKU of the ticket cases: FLASH, 2 units, sold through its queue. Three
// buyers took tickets, all on the bus:
//
//	TK1 b-OQ1  ORDERED  → OQ1 FLASH×1, pending
//	TK2 b-TK2  SOLD_OUT
//	TK3 b-TK3  EXPIRED
//
// and each buyer saw its ticket's end.
const (
	tk1 = "T000000000000000000000001"
	tk2 = "T000000000000000000000002"
	tk3 = "T000000000000000000000003"
	tk4 = "T000000000000000000000004"
)

func withQueue(w *world) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "FLASH", MerchantID: "m1", Title: "FLASH", Price: 990, ProductType: orderpay.ProductNormal,
			StockPolicy: orderpay.StockAtOrder, Queued: true, QueueWait: time.Minute, CreatedAt: t0}, 2)
	})
	w.ticket(tk1, "b-OQ1", "FLASH")
	w.ticket(tk2, "b-TK2", "FLASH")
	w.ticket(tk3, "b-TK3", "FLASH")
	w.createOrder("OQ1", longTime, "FLASH", 1)
	w.endTicket(tk1, orderpay.TicketOrdered, "OQ1")
	w.endTicket(tk2, orderpay.TicketSoldOut, "")
	w.endTicket(tk3, orderpay.TicketExpired, "")
	w.in.Tickets = []audit.GivenTicket{
		{ID: tk1, BuyerID: "b-OQ1", SKU: "FLASH", Seen: orderpay.TicketOrdered},
		{ID: tk2, BuyerID: "b-TK2", SKU: "FLASH", Seen: orderpay.TicketSoldOut},
		{ID: tk3, BuyerID: "b-TK3", SKU: "FLASH", Seen: orderpay.TicketExpired},
	}
}

// exec0 runs a statement that changes no row (DDL).
func (w *world) exec0(query string) {
	w.t.Helper()
	if _, err := w.s.DB().Exec(query); err != nil {
		w.t.Fatalf("%s: %v", query, err)
	}
}

// ticket takes a WAITING ticket of one unit, with its message, as the order system does.
func (w *world) ticket(id, buyer, sku string) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		t := &orderpay.Ticket{ID: id, SKU: sku, BuyerID: buyer, Qty: 1, Request: "{}", RequestHash: "h-" + id, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}
		if err := tx.CreateTicket(ctx, t); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectTicketQueued, id, orderpay.TicketPayload{TicketID: id, SKU: sku, Seq: t.Seq, At: t0})
	})
}

func (w *world) endTicket(id string, to orderpay.TicketState, orderNo string) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		return tx.EndTicket(ctx, id, to, orderNo, "", t0.Add(time.Minute))
	})
}

// A run with a queued SKU whose tickets each ended once passes every invariant, and the
// result counts its tickets by state.
func TestTicketsThatEndOncePass(t *testing.T) {
	t.Parallel()
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			res := newWorld(t, eng.open, withQueue).audit()
			for _, v := range res.Violations {
				t.Errorf("unexpected violation: %s", v)
			}
			want := map[string]int{"ORDERED": 1, "SOLD_OUT": 1, "EXPIRED": 1}
			if fmt.Sprint(res.Tickets) != fmt.Sprint(want) {
				t.Errorf("Tickets %v, want %v", res.Tickets, want)
			}
			if res.Counts[audit.TicketsEndOnce] != 0 || !slices.Contains(audit.Invariants, audit.TicketsEndOnce) {
				t.Errorf("Counts %v, invariants %v", res.Counts, audit.Invariants)
			}
		})
	}
}

// Each case breaks one ticket's story in the queued world; I10 names it (and only I10 fails),
// with the order it concerns where there is one, and the ticket's history comes with it.
func TestAuditCatchesATicketThatDoesNotEndOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		plant  func(w *world)
		after  func(w *world) // once the bus holds the messages
		orders []string       // the orders the I10 violations name ("" for none), sorted
		detail string         // in one of them
	}{{
		name:   "a ticket still waiting at settle",
		plant:  func(w *world) { w.ticket(tk4, "b-TK4", "FLASH") },
		orders: []string{""},
		detail: "still WAITING at settle",
	}, {
		// The consumer served TK1 twice: a second order of the queued SKU that no ticket names.
		name:   "a ticket made two orders",
		plant:  func(w *world) { w.createOrder("OQ2", longTime, "FLASH", 1) },
		orders: []string{"OQ2"},
		detail: "no ticket names it",
	}, {
		// TK2 was ended twice: WAITING again, then ended once more.
		name: "a ticket ended twice",
		plant: func(w *world) {
			w.exec(`UPDATE tickets SET state = 'WAITING' WHERE ticket_id = ?`, tk2)
			w.endTicket(tk2, orderpay.TicketExpired, "")
		},
		orders: []string{"", ""},
		detail: "its history ends it 2 times",
	}, {
		name:   "the buyer was told another end than the database's",
		plant:  func(w *world) { w.in.Tickets[1].Seen = orderpay.TicketOrdered },
		orders: []string{""},
		detail: "told its ticket ended ORDERED, the database says SOLD_OUT",
	}, {
		name: "a buyer's ticket the database does not have",
		plant: func(w *world) {
			w.in.Tickets = append(w.in.Tickets, audit.GivenTicket{ID: tk4, BuyerID: "b-TK4", SKU: "FLASH"})
		},
		orders: []string{""},
		detail: "which the database does not have",
	}, {
		// TK3 made OQ3 of another buyer and the wrong SKU, and its history says EXPIRED.
		name: "an ORDERED ticket naming another buyer's order of another SKU",
		plant: func(w *world) {
			w.createOrder("OQ3", longTime, "TEA", 1)
			w.exec(`UPDATE tickets SET state = 'ORDERED', order_no = 'OQ3' WHERE ticket_id = ?`, tk3)
			w.in.Tickets[2].Seen = orderpay.TicketOrdered
		},
		orders: []string{"OQ3", "OQ3"},
		detail: "its history ended it WAITING → EXPIRED",
	}, {
		// Two tickets name one order: the store's unique index refuses it, so drop it here.
		name: "two tickets share an order",
		plant: func(w *world) {
			w.exec0(`DROP INDEX tickets_order`)
			w.exec(`UPDATE tickets SET order_no = 'OQ1' WHERE ticket_id = ?`, tk2)
		},
		orders: []string{"OQ1", "OQ1"},
		detail: "2 tickets name order OQ1",
	}, {
		name: "a ticket that went onto the bus twice",
		plant: func(w *world) {
			w.in.Events = append(w.in.Events, audit.Event{Subject: orderpay.SubjectTicketQueued, MsgID: "ticket.queued:again",
				Payload: []byte(`{"ticket_id":"` + tk2 + `"}`)})
		},
		orders: []string{""},
		detail: "went onto the bus 2 times",
	}, {
		name:   "a ticket that never went onto the bus",
		plant:  func(w *world) {},
		after:  func(w *world) { w.dropEvent("ticket.queued:" + tk3) },
		orders: []string{""},
		detail: "went onto the bus 0 times",
	}, {
		// More ORDERED tickets holding units than the SKU has: OQ4's ticket made an order
		// beyond the units (the stock row taken past its total, which I4 names too).
		name: "tickets' orders holding more units than the SKU has",
		plant: func(w *world) {
			w.ticket(tk4, "b-OQ4", "FLASH")
			w.createOrder("OQ4", longTime, "FLASH", 1)
			w.endTicket(tk4, orderpay.TicketOrdered, "OQ4")
			w.exec(`UPDATE order_items SET qty = 2, amount = 1980, payable = 1980 WHERE order_no = ?`, "OQ4")
		},
		orders: []string{"", "OQ4"},
		detail: "still hold 3 units, beyond its 2",
	}}
	for _, c := range cases {
		for _, eng := range engines {
			t.Run(eng.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, eng.open, withQueue, c.plant)
				if c.after != nil {
					c.after(w)
				}
				res := w.audit()
				var orders, details []string
				for _, v := range res.Violations {
					if v.Invariant != audit.TicketsEndOnce {
						if c.name != "tickets' orders holding more units than the SKU has" || v.Invariant != audit.StockConserved {
							t.Errorf("unexpected violation: %s", v)
						}
						continue
					}
					orders, details = append(orders, v.OrderNo), append(details, v.String())
					if v.Ticket != "" && !slices.ContainsFunc(v.History, func(h orderpay.HistoryEntry) bool { return h.Entity == orderpay.EntityTicket }) {
						t.Errorf("%s: no ticket history", v)
					}
				}
				slices.Sort(orders)
				if !slices.Equal(orders, c.orders) {
					t.Errorf("I10 names orders %q, want %q:\n%s", orders, c.orders, strings.Join(details, "\n"))
				}
				if !slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, c.detail) }) {
					t.Errorf("no I10 violation says %q:\n%s", c.detail, strings.Join(details, "\n"))
				}
			})
		}
	}
}

package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"orderpay"
)

// A queued SKU's order request answers 202 and a ticket (order/tickets.go); the buyer
// follows it here until it ends: with an order, sold out, expired or refused.

func (s *Server) ticketRoutes(mux *routeMux) {
	mux.HandleFunc("GET /v1/tickets/{ticket_id}", s.buyerRoute(false, s.getTicket))
	mux.HandleFunc("GET /v1/tickets/{ticket_id}/events", s.buyerRoute(false, s.ticketEvents))
}

type ticketJSON struct {
	TicketID string               `json:"ticket_id"`
	SKU      string               `json:"sku"`
	Qty      int64                `json:"qty"`
	State    orderpay.TicketState `json:"state"`
	// Position is 1 for the next ticket served; 0 once the ticket ended.
	Position  int64     `json:"position"`
	OrderNo   string    `json:"order_no,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func toTicketJSON(t *orderpay.Ticket) ticketJSON {
	return ticketJSON{TicketID: t.ID, SKU: t.SKU, Qty: t.Qty, State: t.State, Position: t.Position, OrderNo: t.OrderNo,
		Reason: t.Reason, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, UpdatedAt: t.UpdatedAt}
}

// ownTicket reads the ticket of the path for its buyer: another buyer's ticket is not
// found, as if it did not exist.
func (s *Server) ownTicket(r *http.Request, c caller) (*orderpay.Ticket, error) {
	id := r.PathValue("ticket_id")
	t, err := s.Orders.Ticket(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if c.buyer != "" && t.BuyerID != c.buyer {
		return nil, orderpay.NotFound("ticket", id)
	}
	return t, nil
}

func (s *Server) getTicket(w http.ResponseWriter, r *http.Request, c caller) {
	t, err := s.ownTicket(r, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTicketJSON(t))
}

// ticketEvents is GET /v1/tickets/{id}/events: the ticket as JSON (event "ticket") at once,
// then whenever its state or position changes, until it ends.
func (s *Server) ticketEvents(w http.ResponseWriter, r *http.Request, c caller) {
	t, err := s.ownTicket(r, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limits := s.StreamLimits.withDefaults()
	send, done, ok := s.openStream(w, r, c, limits, "GET /v1/tickets/"+t.ID)
	if !ok {
		return
	}
	defer done()
	type at struct {
		state    orderpay.TicketState
		position int64
	}
	s.follow(r.Context(), limits, send, "ticket", func(ctx context.Context, first bool) (any, any, bool, error) {
		if !first {
			cur, err := s.Orders.Ticket(ctx, t.ID)
			if err != nil {
				return nil, nil, false, fmt.Errorf("ticket event stream: reading ticket %s: %w", t.ID, err)
			}
			t = cur
		}
		return at{t.State, t.Position}, toTicketJSON(t), t.State.Final(), nil
	})
}

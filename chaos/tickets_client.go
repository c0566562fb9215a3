package chaos

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// TicketView is a queued SKU's ticket as the API shows it (POST /v1/orders on a queued SKU,
// GET /v1/tickets/{id}).
type TicketView struct {
	TicketID  string    `json:"ticket_id"`
	SKU       string    `json:"sku"`
	Qty       int64     `json:"qty"`
	State     string    `json:"state"`
	Position  int64     `json:"position"`
	OrderNo   string    `json:"order_no"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Ticket states, as the API names them (orderpay.TicketState).
const (
	TicketWaiting = "WAITING"
	TicketOrdered = "ORDERED"
	TicketSoldOut = "SOLD_OUT"
	TicketExpired = "EXPIRED"
	TicketRefused = "REFUSED"
)

// ticketFinal reports whether a ticket in state s has ended.
func ticketFinal(s string) bool { return s != "" && s != TicketWaiting }

// QueueAnswer is the answer to an order of a queued SKU: the ticket, and whether it came
// at once (202) or was one the buyer already held (200, a replay of the same
// Idempotency-Key or the buyer's live ticket of the SKU).
type QueueAnswer struct {
	Ticket   TicketView
	Status   int
	Replayed bool
}

// QueueOrder is the buyer ordering qty of a queued SKU: the server answers with a ticket.
// A non-empty idempotencyKey is sent as the Idempotency-Key header.
func (c *Client) QueueOrder(ctx context.Context, buyer, idempotencyKey string, item Item) (*QueueAnswer, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var a QueueAnswer
	status, err := c.CallStatus(ctx, http.MethodPost, c.API+"/v1/orders", h, map[string]any{"buyer_id": buyer, "items": []Item{item}}, &a.Ticket)
	a.Status, a.Replayed = status, status == http.StatusOK
	return &a, err
}

// Ticket reads a ticket of the client's buyer.
func (c *Client) Ticket(ctx context.Context, id string) (*TicketView, error) {
	var t TicketView
	err := c.Call(ctx, http.MethodGet, c.API+"/v1/tickets/"+url.PathEscape(id), nil, nil, &t)
	return &t, err
}

// Catalogue reads the shop's SKUs (GET /v1/skus), and returns how many it listed.
func (c *Client) Catalogue(ctx context.Context) (int, error) {
	var out struct {
		SKUs []struct {
			SKU string `json:"sku"`
		} `json:"skus"`
	}
	err := c.Call(ctx, http.MethodGet, c.API+"/v1/skus", nil, nil, &out)
	return len(out.SKUs), err
}

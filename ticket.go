package orderpay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Queued admission (削峰填谷, docs/design.md §6.1): a SKU marked queued does not create its
// orders on the buyer's request. The request takes a ticket, at once; the ticket goes onto
// the bus (ticket.queued, written by the outbox with the ticket), and the order system's
// consumer turns the tickets of each SKU into orders in the order they arrived, at the SKU's
// pace. A ticket ends once: as an order, sold out, or expired.

// TicketState is where a ticket stands.
type TicketState string

const (
	// TicketWaiting: in the queue.
	TicketWaiting TicketState = "WAITING"
	// TicketOrdered: its order was created (OrderNo), in the transaction that ended it.
	TicketOrdered TicketState = "ORDERED"
	// TicketSoldOut: the SKU's stock was gone when its turn came, or while it waited.
	TicketSoldOut TicketState = "SOLD_OUT"
	// TicketExpired: it waited longer than the SKU's bound (SKU.QueueWait).
	TicketExpired TicketState = "EXPIRED"
	// TicketRefused: its turn came and the order could not be made for a reason of the
	// buyer's (a buyer cap, the blocklist, a coupon): Reason says which.
	TicketRefused TicketState = "REFUSED"
)

// Final reports whether s is an end state.
func (s TicketState) Final() bool { return s != TicketWaiting }

// TicketEvent is what ends a ticket.
type TicketEvent string

const (
	TicketEventOrder   TicketEvent = "order"
	TicketEventSoldOut TicketEvent = "sold_out"
	TicketEventExpire  TicketEvent = "expire"
	TicketEventRefuse  TicketEvent = "refuse"
)

// TicketMachine is the ticket's transition table: a ticket ends once.
var TicketMachine = NewMachine("ticket", []Transition[TicketState, TicketEvent]{
	{TicketWaiting, TicketEventOrder, TicketOrdered},
	{TicketWaiting, TicketEventSoldOut, TicketSoldOut},
	{TicketWaiting, TicketEventExpire, TicketExpired},
	{TicketWaiting, TicketEventRefuse, TicketRefused},
})

// TicketEventTo is the event that ends a ticket in state to ("" for a state no event reaches).
func TicketEventTo(to TicketState) TicketEvent { return TicketMachine.EventTo(to) }

// EntityTicket names tickets in the history.
const EntityTicket = "ticket"

// SubjectTicketQueued is the message a ticket puts on the bus: the order system's queue.
const SubjectTicketQueued = "ticket.queued"

// Ticket is a buyer's place in a queued SKU's queue: the order they asked for (one line),
// waiting for its turn.
type Ticket struct {
	ID      string // "T" and 24 hex digits
	SKU     string
	BuyerID string
	Qty     int64
	// Seq is the ticket's arrival: increasing across the store, so a SKU's tickets are
	// served by Seq.
	Seq   int64
	State TicketState
	// OrderNo is the order the ticket became (ORDERED).
	OrderNo string
	// Reason is why it was refused (REFUSED): the error the order's creation gave.
	Reason string
	// Request is the order's request as the buyer made it (coupon, address, device), JSON:
	// the consumer creates the order from it.
	Request string
	// Key is the buyer's Idempotency-Key ("" for none), RequestHash the request's hash:
	// the same key with another request is EIDEMPOTENCY.
	Key         string
	RequestHash string
	// Position is 1 for the next ticket of its SKU to be served (0 once ended): the order
	// system counts it from its view of the queue, at most a quarter second old.
	Position  int64
	CreatedAt time.Time
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// TicketPayload is the body of ticket.queued.
type TicketPayload struct {
	TicketID string    `json:"ticket_id"`
	SKU      string    `json:"sku"`
	Seq      int64     `json:"seq"`
	At       time.Time `json:"at"`
}

// NewTicketID draws a ticket id: "T" and 96 random bits in hex, never an order number (all
// digits) nor guessable.
func NewTicketID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "T" + hex.EncodeToString(b[:])
}

// ValidTicketID reports whether id has a ticket id's shape.
func ValidTicketID(id string) bool {
	if len(id) != 25 || id[0] != 'T' {
		return false
	}
	for _, c := range id[1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Queue bounds.
const (
	// QueueWaitDefault is how long a ticket may wait when the SKU does not say.
	QueueWaitDefault = 10 * time.Minute
	// QueueWaitMax bounds what an operator may set.
	QueueWaitMax = 24 * time.Hour
	// QueuePaceMax bounds a SKU's orders per second.
	QueuePaceMax = 100_000
)

// TicketReader reads tickets.
type TicketReader interface {
	// Ticket reads a ticket (ENOTFOUND if there is none). The store leaves Position 0:
	// the order system fills it in (order.Service.Ticket).
	Ticket(ctx context.Context, id string) (*Ticket, error)
	// WaitingSeqs are the Seqs of sku's WAITING tickets, in order: its queue.
	WaitingSeqs(ctx context.Context, sku string) ([]int64, error)
	// CountWaiting counts sku's WAITING tickets with after < Seq <= upTo.
	CountWaiting(ctx context.Context, sku string, after, upTo int64) (int64, error)
	// TicketByKey is the buyer's ticket made with Idempotency-Key key ("" is never found).
	TicketByKey(ctx context.Context, buyerID, key string) (*Ticket, error)
	// LiveTicket is the buyer's WAITING ticket of sku (ENOTFOUND if none).
	LiveTicket(ctx context.Context, buyerID, sku string) (*Ticket, error)
	// WaitingTickets are sku's WAITING tickets with Seq below before (0: any), by Seq, at
	// most limit.
	WaitingTickets(ctx context.Context, sku string, before int64, limit int) ([]Ticket, error)
	// QueuedSKUs are the SKUs with WAITING tickets, and for each the earliest expiry.
	QueuedSKUs(ctx context.Context) (map[string]time.Time, error)
}

// TicketWriter changes tickets, each change conditional.
type TicketWriter interface {
	// CreateTicket inserts a WAITING ticket and sets its Seq. ECONFLICT if the buyer holds a
	// WAITING ticket of the SKU already, or used the key for another ticket.
	CreateTicket(ctx context.Context, t *Ticket) error
	// EndTicket moves a WAITING ticket to to (with orderNo for ORDERED, reason for
	// REFUSED); ECONFLICT if it is not WAITING any more.
	EndTicket(ctx context.Context, id string, to TicketState, orderNo, reason string, at time.Time) error
	// EndWaitingTickets ends every WAITING ticket of sku with Seq at most upTo (0: all) as
	// to (SOLD_OUT or EXPIRED, and then only those expired at at), and returns how many.
	EndWaitingTickets(ctx context.Context, sku string, upTo int64, to TicketState, at time.Time) (int, error)
}

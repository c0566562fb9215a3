// Package audit is the chaos harness's consistency auditor. After a run (many buyers,
// injected channel faults, kill -9 crashes of the server) and once the system has settled,
// it compares three sources and reports every breach of the invariants I1–I7 of docs/design.md §8,
// of I8, the refunds' side of the promise, of I9, the barcode payments' (docs/barcode.md), and
// of I10, the queued SKUs' tickets' (docs/design.md §6.1):
//
//   - the simulator's ledger: every trade the channels know, the truth about the money;
//   - orderpay's database, read in one consistent snapshot;
//   - the downstream events on the bus.
//
// Each violation names the order it concerns (or the SKU, for stock) and carries that
// order's full history, so that an operator can explain it without opening the database.
package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"
)

// The invariants of docs/design.md §8, by the names violations carry.
const (
	NoLostPayment    = "I1" // every trade the channel reports paid is a paid order's payment, or goes back
	NoPhantomPayment = "I2" // no order is paid without money the channel captured
	MoneyConserved   = "I3" // captured − refunded at the channel − paid back outside it = Σ paid orders (payable − refunded)
	StockConserved   = "I4" // the stock equation holds and matches the orders
	NothingForged    = "I5" // no forged or tampered notification was accepted
	NothingStuck     = "I6" // nothing is still open past its deadline plus grace
	EffectsOnce      = "I7" // every downstream event took effect exactly once
	// NoMoneyOwedSilently: every refund orderpay decided on is back (the channel's ledger
	// agrees, or an operator paid it outside the channel and said how), or visibly owed (a
	// next try, or the operators' queue with its problem); the channel made no refund
	// orderpay does not know.
	NoMoneyOwedSilently = "I8"
	// BarcodeEndsBothSides: every barcode trade a till asked for ends at the channel paid and
	// recorded, or closed or reversed with no money held, and the till's answer never
	// contradicts the channel (barcode.go).
	BarcodeEndsBothSides = "I9"
	// TicketsEndOnce: every ticket of a queued SKU ends once, in one final state, and only an
	// ORDERED one has an order, its own; no order of a queued SKU is made past the queue
	// (tickets.go).
	TicketsEndOnce = "I10"
)

// Invariants lists every invariant name, in order.
var Invariants = []string{NoLostPayment, NoPhantomPayment, MoneyConserved, StockConserved, NothingForged, NothingStuck, EffectsOnce, NoMoneyOwedSilently,
	BarcodeEndsBothSides, TicketsEndOnce}

// Inputs is everything the auditor compares.
type Inputs struct {
	// Store is orderpay's database, opened on the same DSN as the server. Required.
	Store *sqlstore.Store
	// Ledger is the simulator's ledger (sim.Simulator.Ledger): every trade the channels know.
	Ledger []sim.LedgerEntry
	// Notifications is every notification the simulator sent (sim.Simulator.NotifyStats),
	// with the forged and tampered copies in Bad.
	Notifications []sim.NotifyStats
	// Events is every message on the bus's stream after the run.
	Events []Event
	// Now is when the system was declared settled. Defaults to the wall clock.
	Now time.Time
	// Grace is how long past its pay deadline an order or payment may still be open (I6):
	// the time the timeout close needs to query, close and cancel. Defaults to zero.
	Grace time.Duration
	// Tills are the tills' barcode payments (I9). Nil reads them from Store (till_payments).
	Tills []orderpay.TillPayment
	// Tickets are the tickets the buyers were given, with what they saw of their ends (I10).
	// The database's tickets are checked whether or not any is here.
	Tickets []GivenTicket
}

// Event is one message on the bus.
type Event struct {
	Subject string
	MsgID   string // the outbox message id, e.g. "order.paid:<order_no>"
	Payload []byte // JSON with "order_no" and, for payment.*, "payment_no"
}

// Violation is one breach of one invariant.
type Violation struct {
	Invariant  string // "I1".."I10"
	OrderNo    string // empty when no order can be named (an unknown trade, a SKU, a global sum)
	PaymentNo  string
	OutTradeNo string
	SKU        string // I4: the SKU whose stock does not add up; I10: the ticket's
	Ticket     string // I10: the ticket
	Detail     string
	// History is the order's full history: the order, its payment, every channel order of
	// the payment and every refund of those channel orders, oldest first (by history seq).
	History []orderpay.HistoryEntry
}

// String is one line for logs and test failures.
func (v Violation) String() string {
	s := v.Invariant
	for _, f := range []struct{ name, val string }{{"order", v.OrderNo}, {"payment", v.PaymentNo}, {"out_trade_no", v.OutTradeNo}, {"sku", v.SKU}, {"ticket", v.Ticket}} {
		if f.val != "" {
			s += " " + f.name + "=" + f.val
		}
	}
	return s + ": " + v.Detail
}

// Result is what the auditor found.
type Result struct {
	Orders      int            // orders in the database
	FinalStates map[string]int // order status → count
	AppPayments int            // the business apps' payments in the database
	AppStates   map[string]int // app payment status → count
	Counts      map[string]int // "I1".."I10" → violations; every key present
	Violations  []Violation    // by invariant, then order number
	Money       Money
	Events      EventStats
	// Refunds counts the refunds orderpay decided on by how they went.
	Refunds RefundOutcomes
	// BarcodeAttempts counts the barcode attempts; TillAnswers the tills' payments by the
	// first final answer given ("none" for a till never given one).
	BarcodeAttempts int
	TillAnswers     map[string]int
	// Tickets counts the queued SKUs' tickets by state.
	Tickets map[string]int
}

// Money is I3's global sums, in fen.
type Money struct {
	Captured int64 // Σ amounts of the ledger's trades paid at the channel
	Refunded int64 // Σ the ledger's settled refunds
	// Resolved is Σ the refunds operators paid back outside the channel (RESOLVED): money
	// the channel still holds but the buyer has back.
	Resolved int64
	Owed     int64 // Σ over orders in a paid status of payable − the payment's refunded
}

// EventStats describes the events the auditor read, for debugging a run.
type EventStats struct {
	Messages int // events read
	// Redelivered counts copies of a message id already seen: the broker's deduplication
	// missed them, but consumers deduplicate by id, so they are not violations.
	Redelivered int
	// Ignored counts events by subject that I7 does not judge (refund.*, payment.closed …).
	Ignored map[string]int
}

// Passed reports whether no invariant was broken.
func (r *Result) Passed() bool { return len(r.Violations) == 0 }

// Failing returns the names of the invariants with violations, sorted.
func (r *Result) Failing() []string {
	var out []string
	for _, name := range Invariants {
		if r.Counts[name] > 0 {
			out = append(out, name)
		}
	}
	return out
}

// Audit reads the database and checks every invariant against the ledger, the
// notifications and the events. It returns an error only if the database cannot be read;
// broken invariants are in the result.
func Audit(ctx context.Context, in Inputs) (*Result, error) {
	if in.Store == nil {
		return nil, errors.New("audit: no store")
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	snap, err := in.Store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: snapshot: %w", err)
	}
	if in.Tills == nil {
		if in.Tills, err = readTills(ctx, in.Store); err != nil {
			return nil, fmt.Errorf("audit: till payments: %w", err)
		}
	}
	w := newWorld(snap, in)
	if w.tickets, w.ticketEnds, err = readTickets(ctx, in.Store); err != nil {
		return nil, fmt.Errorf("audit: tickets: %w", err)
	}
	if err := w.loadQueuedHistory(ctx, in.Store); err != nil {
		return nil, fmt.Errorf("audit: history of the queued refunds: %w", err)
	}
	res := w.check()
	loaded := map[[2]string][]orderpay.HistoryEntry{} // entity and number → its history
	for i := range res.Violations {
		v := &res.Violations[i]
		if v.OrderNo == "" && v.PaymentNo == "" && v.OutTradeNo == "" && v.Ticket == "" {
			continue // a SKU or a global sum: no one order's story
		}
		if v.History, err = w.history(ctx, in.Store, *v, loaded); err != nil {
			return nil, fmt.Errorf("audit: history of %s: %w", v, err)
		}
	}
	return res, nil
}

// history loads the history of everything that belongs to the violation's order: the
// order, its payment, each attempt of the payment and each refund of those attempts.
// Without an order it loads what it can name (a payment, or just an attempt).
func (w *world) history(ctx context.Context, store *sqlstore.Store, v Violation, loaded map[[2]string][]orderpay.HistoryEntry) ([]orderpay.HistoryEntry, error) {
	type entity = [2]string // kind, number
	var ents []entity
	if v.Ticket != "" {
		ents = append(ents, entity{orderpay.EntityTicket, v.Ticket})
	}
	paymentNo := v.PaymentNo
	if v.OrderNo != "" {
		ents = append(ents, entity{orderpay.EntityOrder, v.OrderNo})
		if p := w.paymentByOrder[v.OrderNo]; p != nil {
			paymentNo = p.No
		}
		if ap := w.apps[v.OrderNo]; ap != nil {
			ents[len(ents)-1] = entity{orderpay.EntityAppPayment, ap.PaymentNo}
		}
	}
	if paymentNo != "" {
		ents = append(ents, entity{orderpay.EntityPayment, paymentNo})
	}
	var trades []string
	for _, co := range w.attempts[paymentNo] {
		trades = append(trades, co.OutTradeNo)
	}
	if v.OutTradeNo != "" && !slices.Contains(trades, v.OutTradeNo) {
		trades = append(trades, v.OutTradeNo)
	}
	for _, t := range trades {
		ents = append(ents, entity{orderpay.EntityChannelOrder, t})
		for _, rf := range w.refundsByTrade[t] {
			ents = append(ents, entity{orderpay.EntityRefund, rf.OutRefundNo})
		}
	}
	var out []orderpay.HistoryEntry
	for _, e := range ents {
		h, ok := loaded[e]
		if !ok {
			var err error
			if h, err = store.History(ctx, e[0], e[1]); err != nil {
				return nil, err
			}
			loaded[e] = h
		}
		out = append(out, h...)
	}
	// The history table's seq is one identity for every entity, so it orders the lines of
	// different entities as they were written, whatever clock wrote their times.
	slices.SortFunc(out, func(a, b orderpay.HistoryEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

package orderpay

import (
	"time"
)

// HoldState is the state of a stock hold (docs/design.md §6, policy "reserve").
type HoldState string

const (
	// HoldStanding: the units are locked for the order until HoldUntil.
	HoldStanding HoldState = "HELD"
	// HoldSold: the order was paid while the hold stood; the units went locked→sold.
	HoldSold HoldState = "SOLD"
	// HoldReleased: the hold expired or its order was cancelled; the units went
	// locked→available, and a payment that still comes must deduct them again.
	HoldReleased HoldState = "RELEASED"
)

// HoldEvent is what ends a stock hold.
type HoldEvent string

const (
	HoldEventSell    HoldEvent = "sell"    // its order was paid while it stood
	HoldEventRelease HoldEvent = "release" // it expired, or its order was cancelled
)

// HoldMachine is the stock hold's transition table: a hold ends once.
var HoldMachine = NewMachine("stock hold", []Transition[HoldState, HoldEvent]{
	{HoldStanding, HoldEventSell, HoldSold},
	{HoldStanding, HoldEventRelease, HoldReleased},
})

// HoldEventTo is the event that ends a hold in state to ("" for a state no event reaches).
func HoldEventTo(to HoldState) HoldEvent { return HoldMachine.EventTo(to) }

// StockHold is the units one line of an order under the "reserve" policy keeps locked. The
// hold sweeper and the payment both end it with a conditional update (HELD → RELEASED or
// HELD → SOLD) in the transaction that moves the units, so only one of them ever moves
// them.
type StockHold struct {
	OrderNo   string
	Line      int
	SKU       string
	Qty       int64
	HoldUntil time.Time
	State     HoldState
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RefundReasonSoldOut: a SKU deducted at payment ("payment", or "reserve" after its hold
// was released) had no units left when the payment arrived; the order was cancelled and the
// payment goes back. Never paid, so no points were awarded.
const RefundReasonSoldOut = "sold_out"

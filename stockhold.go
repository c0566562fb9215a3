package orderpay

import (
	"errors"
	"time"
)

// HoldState is the state of a stock hold (DESIGN §6, policy "reserve").
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

// ErrSoldOutAfterPayment marks the order system's refusal of a payment because the stock
// ran out before it arrived. It travels inside an ECONFLICT error (errors.Is finds it), so
// that every caller that refunds a refused payment can name the reason.
var ErrSoldOutAfterPayment = errors.New("sold out after payment")

// RefusalReason is the refund reason for a payment the order system refused with err
// (ECONFLICT): sold out, or the order was cancelled before the payment arrived.
func RefusalReason(err error) string {
	if errors.Is(err, ErrSoldOutAfterPayment) {
		return RefundReasonSoldOut
	}
	return RefundReasonCancelled
}

package orderpay

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Promotions (促销, docs/design.md §5): a coupon takes an amount off an order whose total
// reaches a threshold ("满 50 减 10"). The discount is apportioned to the order's lines by
// the largest remainder (Apportion), so that the lines' shares sum to the order's discount
// to the fen; a refund of some of a line's units takes back their part of the line's
// payable (RefundShare); a cancel gives the coupon back.

// CouponStatus is the state of one issued coupon.
type CouponStatus string

const (
	CouponAvailable CouponStatus = "AVAILABLE"
	CouponUsed      CouponStatus = "USED" // by Coupon.OrderNo
)

// CouponTemplate is a kind of coupon: AmountOff fen off an order whose total is at least
// Threshold fen, usable from ValidFrom (zero: always) until ValidUntil (zero: forever).
type CouponTemplate struct {
	Code       string
	Title      string
	AmountOff  int64
	Threshold  int64
	ValidFrom  time.Time
	ValidUntil time.Time
	CreatedAt  time.Time
}

// ValidAt reports whether the template's coupons can be used at t: ValidFrom ≤ t < ValidUntil.
func (t *CouponTemplate) ValidAt(at time.Time) bool {
	return (t.ValidFrom.IsZero() || !at.Before(t.ValidFrom)) && (t.ValidUntil.IsZero() || at.Before(t.ValidUntil))
}

// Coupon is one coupon of a template issued to a buyer. It is used by at most one order at
// a time: AVAILABLE → USED by an order, and back to AVAILABLE if that order is cancelled.
type Coupon struct {
	ID        string
	Code      string // its template
	BuyerID   string
	Status    CouponStatus
	OrderNo   string // the order that used it; "" while AVAILABLE
	IssuedAt  time.Time
	UsedAt    time.Time // zero while AVAILABLE
	UpdatedAt time.Time
}

// Apportion splits discount over lines of the given amounts in proportion to them, by the
// largest remainder method: each line first gets floor(discount × amount / total); the fen
// left over (fewer than the lines) then go one each to the lines with the largest
// remainders of that division, ties to the earlier line. The shares sum to discount exactly,
// and no share exceeds its line's amount.
//
// It needs 0 ≤ discount ≤ Σ amounts, every amount ≥ 0, and the sum within int64, and
// panics otherwise (a caller's bug: an order's discount is capped at its total first). The
// products are computed in 128 bits, so they cannot overflow whatever the amounts.
func Apportion(discount int64, amounts []int64) []int64 {
	var total int64
	for i, a := range amounts {
		if a < 0 {
			panic(fmt.Sprintf("orderpay.Apportion: amounts[%d] = %d is negative", i, a))
		}
		if a > math.MaxInt64-total {
			panic("orderpay.Apportion: the amounts' sum overflows int64")
		}
		total += a
	}
	if discount < 0 || discount > total {
		panic(fmt.Sprintf("orderpay.Apportion: discount %d is not between 0 and the total %d", discount, total))
	}
	shares := make([]int64, len(amounts))
	if discount == 0 {
		return shares
	}
	remainders := make([]uint64, len(amounts))
	left := discount
	for i, a := range amounts {
		q, r := mulDiv(discount, a, total)
		shares[i], remainders[i] = q, r
		left -= q
	}
	// left < len(amounts): Σ remainders = left × total and each remainder < total, so more
	// than left lines have a remainder > 0, and each of those has share < its amount.
	order := make([]int, len(amounts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case remainders[a] > remainders[b]:
			return -1
		case remainders[a] < remainders[b]:
			return 1
		}
		return 0 // stable: the earlier line first
	})
	for _, i := range order[:left] {
		shares[i]++
	}
	return shares
}

// mulDiv returns floor(a × b / c) and its remainder for 0 ≤ a ≤ c, 0 ≤ b, c > 0, using a
// 128-bit product: the quotient is at most b, so it fits.
func mulDiv(a, b, c int64) (q int64, r uint64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	qu, ru := bits.Div64(hi, lo, uint64(c)) // hi < c because a ≤ c and b < 2^63
	return int64(qu), ru
}

// RefundShare is how much of an order line's payable goes back for qty more of its lineQty
// units, when the requests that still count (not rejected) already take countedQty units
// and countedAmount fen of it.
//
// The money left on the line is spread over the units left: qty units take
// floor(qty × (linePayable − countedAmount) / (lineQty − countedQty)), and the last units
// take exactly what is left. So, whatever the order of requests, rejections and approvals,
// the counted refunds of a line never pass its payable, and reach it exactly when every
// unit is refunded. (Pricing the k-th unit by its position, floor(linePayable × k / lineQty)
// less the units before it, is exact only while units are refunded in one run of positions:
// a rejected request leaves a gap, and a later request is priced at a position a surviving
// one already took, which can give back more than the line cost.) The line's payable is
// its amount less its share of the coupon, so a refund takes back the apportioned discount
// with it.
//
// It needs lineQty > 0, 0 ≤ countedAmount ≤ linePayable, 0 ≤ countedQty, 0 ≤ qty and
// countedQty + qty ≤ lineQty, and panics otherwise (the caller validates a request first).
func RefundShare(linePayable, lineQty, countedQty, countedAmount, qty int64) int64 {
	if lineQty <= 0 || linePayable < 0 || countedAmount < 0 || countedAmount > linePayable || countedQty < 0 || qty < 0 || qty > lineQty-countedQty {
		panic(fmt.Sprintf("orderpay.RefundShare(%d, %d, %d, %d, %d): need line qty > 0, 0 ≤ counted amount ≤ payable, 0 ≤ counted qty, 0 ≤ counted qty + qty ≤ line qty",
			linePayable, lineQty, countedQty, countedAmount, qty))
	}
	left, unitsLeft := linePayable-countedAmount, lineQty-countedQty
	if qty == unitsLeft {
		return left
	}
	share, _ := mulDiv(qty, left, unitsLeft)
	return share
}

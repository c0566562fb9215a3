package orderpay

import (
	"fmt"
	"time"
)

// AfterSaleKind says what the buyer asks for ("售后").
type AfterSaleKind string

const (
	// AfterSaleRefund is a refund of units that have not shipped (仅退款, before shipping):
	// the goods never left, so they go back to stock when it is approved.
	AfterSaleRefund AfterSaleKind = "refund"
	// AfterSaleReturn is a return of shipped units (退货退款): the buyer sends them back, the
	// merchant receives them, they go back to stock, and then the money goes back.
	AfterSaleReturn AfterSaleKind = "return"
)

// AfterSaleStatus is the state of one after-sales request (docs/design.md §4).
type AfterSaleStatus string

const (
	AfterSaleRequested     AfterSaleStatus = "REQUESTED"
	AfterSaleApproved      AfterSaleStatus = "APPROVED"
	AfterSaleRejected      AfterSaleStatus = "REJECTED"
	AfterSaleAwaitingGoods AfterSaleStatus = "AWAITING_GOODS" // a return: the buyer is to send the goods back
	AfterSaleGoodsReceived AfterSaleStatus = "GOODS_RECEIVED" // a return: back in the warehouse and restocked
	// AfterSaleRefunding: the refund is on its way, retried if the channel refuses it for
	// now, or waiting for an operator if it cannot end by itself: the money is still owed.
	AfterSaleRefunding AfterSaleStatus = "REFUNDING"
	// AfterSaleSucceeded: the money is back, through the channel or, recorded by an
	// operator, outside it.
	AfterSaleSucceeded AfterSaleStatus = "SUCCESS"
)

// AfterSaleEvent is something that happens to an after-sales request.
type AfterSaleEvent string

const (
	AfterSaleEventApprove      AfterSaleEvent = "approve"       // by the merchant, or by the automatic rule
	AfterSaleEventReject       AfterSaleEvent = "reject"        // by the merchant
	AfterSaleEventAwaitGoods   AfterSaleEvent = "await_goods"   // a return, once approved
	AfterSaleEventShipBack     AfterSaleEvent = "ship_back"     // the buyer sent the goods (tracking number)
	AfterSaleEventReceiveGoods AfterSaleEvent = "receive_goods" // the merchant has them back
	AfterSaleEventRefund       AfterSaleEvent = "refund"        // the channel refund is recorded
	AfterSaleEventSucceed      AfterSaleEvent = "succeed"
)

// AfterSaleMachine is the after-sales request's transition table. A refund before shipping
// runs REQUESTED → APPROVED → REFUNDING → SUCCESS; a return adds AWAITING_GOODS →
// GOODS_RECEIVED (restock) before REFUNDING.
var AfterSaleMachine = NewMachine("after-sale", []Transition[AfterSaleStatus, AfterSaleEvent]{
	{AfterSaleRequested, AfterSaleEventApprove, AfterSaleApproved},
	{AfterSaleRequested, AfterSaleEventReject, AfterSaleRejected},
	{AfterSaleApproved, AfterSaleEventRefund, AfterSaleRefunding},
	{AfterSaleApproved, AfterSaleEventAwaitGoods, AfterSaleAwaitingGoods},
	{AfterSaleAwaitingGoods, AfterSaleEventShipBack, AfterSaleAwaitingGoods},
	{AfterSaleAwaitingGoods, AfterSaleEventReceiveGoods, AfterSaleGoodsReceived},
	{AfterSaleGoodsReceived, AfterSaleEventRefund, AfterSaleRefunding},
	{AfterSaleRefunding, AfterSaleEventSucceed, AfterSaleSucceeded},
})

// AfterSale is one after-sales request of an order: some units of some lines, and the money
// that goes back for them (their share of what the buyer paid, coupon included).
type AfterSale struct {
	No         string // "AS" + order number + two digits: also the channel refund's number
	OrderNo    string
	Seq        int
	PaymentNo  string
	BuyerID    string
	Kind       AfterSaleKind
	Status     AfterSaleStatus
	Reason     string
	Amount     int64 // fen: the sum of the items' RefundShare
	AutoReview bool  // approved by the rule, not by a person
	// ReturnCarrier and ReturnTrackingNo: how the buyer sent a return back.
	ReturnCarrier    string
	ReturnTrackingNo string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	RefundedAt       time.Time
	Items            []AfterSaleItem
}

// AfterSaleItem is some units of one order line.
type AfterSaleItem struct {
	Line   int
	SKU    string
	Qty    int64
	Amount int64 // this line's refund share
}

// Counts reports whether the request takes its units and money off the order: every state
// but REJECTED does (REFUNDING too, however long its refund takes: its units stay restocked
// and its money stays owed, never to be asked for twice).
func (a *AfterSale) Counts() bool { return a.Status != AfterSaleRejected }

// Restocked reports whether the request's units are back in stock: a refund before shipping
// from approval on, a return once the goods are received.
func (a *AfterSale) Restocked() bool {
	switch a.Status {
	case AfterSaleRequested, AfterSaleRejected:
		return false
	case AfterSaleApproved, AfterSaleAwaitingGoods:
		return a.Kind == AfterSaleRefund
	}
	return true
}

// AfterSaleNo is the number of an order's seq-th after-sales request (from 1). It is also the
// channel refund's out_refund_no / out_request_no, so one request can never refund twice.
func AfterSaleNo(orderNo string, seq int) string { return fmt.Sprintf("AS%s%02d", orderNo, seq) }

// AfterSaleChange is one conditional transition of an after-sales request.
type AfterSaleChange struct {
	No     string
	From   AfterSaleStatus
	To     AfterSaleStatus
	Event  AfterSaleEvent
	At     time.Time
	Actor  string
	Reason string
	// AutoReview is set with an approval by the rule.
	AutoReview bool
	// ReturnCarrier and ReturnTrackingNo are set by ship_back.
	ReturnCarrier    string
	ReturnTrackingNo string
}

// RefundReasonAfterSales is the channel refund reason of an after-sales request.
const RefundReasonAfterSales = "after_sales"

// OrderRefundStatus is the refund status the order shows, derived from its after-sales
// requests (docs/design.md §4: after-sales live on refund records).
func OrderRefundStatus(o *Order, sales []AfterSale) string {
	var refunded int64
	open := false
	for _, a := range sales {
		switch a.Status {
		case AfterSaleSucceeded:
			refunded += a.Amount
		case AfterSaleRejected:
		default: // in progress, its refund included, however long it takes
			open = true
		}
	}
	switch {
	case open:
		return "IN_PROGRESS"
	case refunded == 0:
		return "NONE"
	case refunded >= o.Payable:
		return "FULL"
	}
	return "PARTIAL"
}

package orderpay

import "time"

// Subjects of the events published on the bus. order.* come from the order system,
// payment.* and refund.* from the payment center.
const (
	SubjectOrderCreated     = "order.created"
	SubjectOrderPaid        = "order.paid"
	SubjectOrderCancelled   = "order.cancelled"
	SubjectOrderShipped     = "order.shipped"   // the first parcel left
	SubjectOrderReceived    = "order.received"  // every parcel was received
	SubjectOrderCompleted   = "order.completed" // received, no after-sales request open
	SubjectOrderRefunded    = "order.refunded"  // every unit refunded before shipping, the money back
	SubjectPaymentSucceeded = "payment.succeeded"
	SubjectPaymentClosed    = "payment.closed"
	// refund.succeeded and refund.needs_action are the payment center's. refund.succeeded:
	// the money is back (status SUCCESS: through the channel; RESOLVED: outside it, recorded
	// by an operator). refund.needs_action: the refund cannot end by itself and waits for an
	// operator (problem says why); it is sent each time a refund goes into that queue.
	SubjectRefundSucceeded   = "refund.succeeded"
	SubjectRefundNeedsAction = "refund.needs_action"
	// The after-sales steps, from the order system (AfterSalePayload).
	SubjectRefundRequested     = "refund.requested"
	SubjectRefundApproved      = "refund.approved"
	SubjectRefundRejected      = "refund.rejected"
	SubjectRefundGoodsReceived = "refund.goods_received"
)

// AfterSalePayload is the body of the order system's refund.* events.
type AfterSalePayload struct {
	AfterSaleNo string          `json:"after_sale_no"`
	OrderNo     string          `json:"order_no"`
	BuyerID     string          `json:"buyer_id"`
	Kind        AfterSaleKind   `json:"kind"`
	Status      AfterSaleStatus `json:"status"`
	Amount      int64           `json:"amount"`
	At          time.Time       `json:"at"`
}

// PaymentSucceeded is the payment center's announcement that a payment order was paid. The
// order system consumes it (and also receives it by direct call), idempotently.
type PaymentSucceeded struct {
	PaymentNo  string    `json:"payment_no"`
	OrderNo    string    `json:"order_no"`
	Amount     int64     `json:"amount"`
	Channel    string    `json:"channel"`
	OutTradeNo string    `json:"out_trade_no"`
	TradeNo    string    `json:"trade_no"`
	PaidAt     time.Time `json:"paid_at"`
}

// OrderEventPayload is the body of order.* events.
type OrderEventPayload struct {
	OrderNo   string      `json:"order_no"`
	BuyerID   string      `json:"buyer_id"`
	Status    OrderStatus `json:"status"`
	Payable   int64       `json:"payable"`
	PaymentNo string      `json:"payment_no,omitempty"`
	At        time.Time   `json:"at"`
}

// RefundEventPayload is the body of the payment center's refund.* events.
type RefundEventPayload struct {
	OutRefundNo string              `json:"out_refund_no"`
	OutTradeNo  string              `json:"out_trade_no"`
	PaymentNo   string              `json:"payment_no"`
	OrderNo     string              `json:"order_no"`
	Channel     string              `json:"channel"`
	Amount      int64               `json:"amount"`
	Reason      string              `json:"reason"`
	Status      ChannelRefundStatus `json:"status"`
	Problem     string              `json:"problem,omitempty"`      // refund.needs_action: why
	ResolvedBy  string              `json:"resolved_by,omitempty"`  // RESOLVED: the operator
	ResolvedRef string              `json:"resolved_ref,omitempty"` // RESOLVED: the outside payment's reference
	At          time.Time           `json:"at"`
}

// PaymentClosedPayload is the body of payment.closed.
type PaymentClosedPayload struct {
	PaymentNo string    `json:"payment_no"`
	OrderNo   string    `json:"order_no"`
	At        time.Time `json:"at"`
}

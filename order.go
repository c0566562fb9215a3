package orderpay

import (
	"strings"
	"time"
)

// OrderStatus is the state of an order (docs/design.md §4).
type OrderStatus string

const (
	OrderPendingPayment OrderStatus = "PENDING_PAYMENT"
	OrderPaid           OrderStatus = "PAID"
	OrderShipped        OrderStatus = "SHIPPED"
	OrderReceived       OrderStatus = "RECEIVED"
	OrderCompleted      OrderStatus = "COMPLETED"
	OrderCancelled      OrderStatus = "CANCELLED"
	// OrderRefunded: paid, then every unit was refunded before any shipped, and the money
	// is back. Final, like COMPLETED and CANCELLED.
	OrderRefunded OrderStatus = "REFUNDED"
)

// OrderNoDigits is how long an order number is: its day (yyyyMMdd, UTC+8) and twelve more
// digits, in both numbering schemes (order/orderno.go).
const OrderNoDigits = 20

// WholeOrderNo reports whether s has an order number's form: OrderNoDigits decimal digits.
// The console's search looks such a string up as the number it is, not as a prefix.
func WholeOrderNo(s string) bool {
	return len(s) == OrderNoDigits && strings.Trim(s, "0123456789") == ""
}

// OrderEvent is something that happens to an order.
type OrderEvent string

const (
	OrderEventPay      OrderEvent = "pay"      // the payment center reported the payment succeeded
	OrderEventCancel   OrderEvent = "cancel"   // by the buyer, or by timeout once the channel confirmed nothing was paid
	OrderEventShip     OrderEvent = "ship"     // the first parcel left the warehouse
	OrderEventReceive  OrderEvent = "receive"  // every parcel was received (or auto-confirmed)
	OrderEventComplete OrderEvent = "complete" // received, and no after-sales request is open
	OrderEventRefund   OrderEvent = "refund"   // every unit refunded before shipping, the money back
)

// OrderMachine is the order's transition table.
var OrderMachine = NewMachine("order", []Transition[OrderStatus, OrderEvent]{
	{OrderPendingPayment, OrderEventPay, OrderPaid},
	{OrderPendingPayment, OrderEventCancel, OrderCancelled},
	{OrderPaid, OrderEventShip, OrderShipped},
	{OrderShipped, OrderEventReceive, OrderReceived},
	{OrderReceived, OrderEventComplete, OrderCompleted},
	{OrderPaid, OrderEventRefund, OrderRefunded},
})

// ProductType decides how long an order may stay unpaid ("倒计时").
type ProductType string

const (
	ProductNormal  ProductType = "normal"  // 3 days
	ProductSpecial ProductType = "special" // special offer: 30 minutes
	ProductFast    ProductType = "fast"    // fast-moving goods: 15 minutes
)

// PayWindows holds the unpaid timeout of each product type.
type PayWindows map[ProductType]time.Duration

// DefaultPayWindows are the usual pay windows of Chinese e-commerce by kind of goods.
var DefaultPayWindows = PayWindows{
	ProductNormal:  72 * time.Hour,
	ProductSpecial: 30 * time.Minute,
	ProductFast:    15 * time.Minute,
}

// Valid reports whether t is a known product type.
func (t ProductType) Valid() bool { _, ok := DefaultPayWindows[t]; return ok }

// StockPolicy says when a SKU's stock is deducted (docs/design.md §6).
type StockPolicy string

const (
	StockAtOrder   StockPolicy = "order"   // available→locked at create, locked→sold at payment
	StockAtPayment StockPolicy = "payment" // checked at create, deducted at payment
	StockReserve   StockPolicy = "reserve" // locked for a hold period, then re-deducted at payment
)

// Valid reports whether p is a known stock policy.
func (p StockPolicy) Valid() bool {
	return p == StockAtOrder || p == StockAtPayment || p == StockReserve
}

// SKU is a sellable item with its price in fen.
type SKU struct {
	SKU         string
	MerchantID  string
	Title       string
	Price       int64
	ProductType ProductType
	StockPolicy StockPolicy
	// LimitPerBuyer caps the units one buyer may hold in orders that are not cancelled;
	// 0 is no limit.
	LimitPerBuyer int64
	// MaxPerOrder and MaxUnpaidPerBuyer are the SKU's own buyer caps (BuyerCap.PerOrder and
	// BuyerCap.UnpaidUnits), set by an operator; 0 takes the shop's cap for its product type.
	MaxPerOrder       int64
	MaxUnpaidPerBuyer int64
	// StockBuckets is how many rows the SKU's stock is split over (at least 1): a flash-sale
	// SKU takes several, so that buyers do not all wait on one row.
	StockBuckets int
	// Warehouse ships the SKU ("" is DefaultWarehouse); WeightG and VolumeCm3 are one
	// unit's, for splitting orders into parcels (PlanShipments).
	Warehouse string
	WeightG   int64
	VolumeCm3 int64
	// ReserveMinutes is how long a "reserve" SKU's units stay locked for an unpaid order
	// (never past the order's pay deadline); 0 for the other policies.
	ReserveMinutes int64
	// Queued SKUs take their orders through the queue (ticket.go): a buyer's request gets
	// a ticket at once, and the order comes at its turn. QueueWait is how long a ticket may
	// wait; QueuePace bounds the orders per second one instance makes of them (0: as fast as
	// the store commits).
	Queued    bool
	QueueWait time.Duration
	QueuePace int64
	CreatedAt time.Time
}

// Stock is a SKU's counts. Available+Locked+Sold always equals Total: the initial stock
// plus the units its backup has served. Returns put sold units back into Available.
type Stock struct {
	SKU       string
	Available int64
	Locked    int64
	Sold      int64
	Total     int64
	// The backup (备用库存, docs/design.md §6.2) of a "payment" or "reserve" SKU: units
	// kept aside for payments that arrive after Available ran out, not sold at creation.
	// BackupUsed of them served such payments (they are in Sold and Total since);
	// BackupLeft remain. BackupUsed+BackupLeft = BackupUnits; all 0 without a backup. So
	// Available+Locked+Sold+BackupLeft = Total+BackupLeft = initial stock + BackupUnits.
	BackupUnits int64
	BackupUsed  int64
	BackupLeft  int64
}

// Order is what a buyer bought and owes. Amounts are fen.
type Order struct {
	No          string
	BuyerID     string
	Status      OrderStatus
	Total       int64  // sum of item amounts before discounts
	Discount    int64  // the coupon's amount off, apportioned to the items
	Payable     int64  // Total - Discount: what the buyer pays
	CouponID    string // the coupon the order used; "" for none
	ProductType ProductType
	PayDeadline time.Time
	PaymentNo   string // set when the order is paid
	CreatedAt   time.Time
	UpdatedAt   time.Time
	PaidAt      time.Time
	ClosedAt    time.Time // cancelled
	Address     Address   // where the goods go; changeable until the first parcel ships
	Items       []OrderItem
}

// OrderItem is one line of an order.
type OrderItem struct {
	Line       int
	SKU        string
	MerchantID string
	Title      string
	UnitPrice  int64
	Qty        int64
	Amount     int64 // UnitPrice*Qty
	Discount   int64 // this line's share of the order discount
	Payable    int64 // Amount - Discount
}

// RemainingSeconds is how long the buyer still has to pay, never negative.
func (o *Order) RemainingSeconds(now time.Time) int64 {
	if o.Status != OrderPendingPayment || !now.Before(o.PayDeadline) {
		return 0
	}
	return int64(o.PayDeadline.Sub(now) / time.Second)
}

// OrderChange is one conditional transition of an order. The store applies it only if the
// order is still in From, and appends it to the order's history in the same transaction.
type OrderChange struct {
	No     string
	From   OrderStatus
	To     OrderStatus
	Event  OrderEvent
	At     time.Time
	Actor  string // "buyer", "system", "payment-center", "admin:<name>"
	Reason string
	// Set on pay.
	PaymentNo string
}

package orderpay

import (
	"context"
	"encoding/json"
	"time"
)

// Message is one outbox row: an event written in the same transaction as the state change
// that caused it, and published to the broker later by the relay.
type Message struct {
	// ID is unique and deterministic (e.g. "payment.succeeded:P…"), so that a transition
	// retried after a crash cannot emit a second copy, and the broker can drop re-publishes.
	ID        string
	Subject   string
	Payload   []byte // JSON
	CreatedAt time.Time
}

// EnqueueJSON writes one outbox message in tx: payload as JSON, with the id subject:key, so
// that a transition retried after a crash cannot emit it twice.
func EnqueueJSON(ctx context.Context, tx Tx, subject, key string, payload any, at time.Time) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	return tx.Enqueue(ctx, Message{ID: subject + ":" + key, Subject: subject, Payload: b, CreatedAt: at})
}

// HistoryEntry is one line of an entity's append-only history (docs/design.md §2).
type HistoryEntry struct {
	Seq      int64
	Entity   string // "order", "payment", "channel_order"
	EntityNo string
	From     string
	To       string
	Event    string
	Actor    string
	Reason   string
	Raw      string
	At       time.Time
}

// Entity names used in history.
const (
	EntityOrder        = "order"
	EntityPayment      = "payment"
	EntityChannelOrder = "channel_order"
	EntityRefund       = "refund"
	EntityShipment     = "shipment"
	EntityAfterSale    = "after_sale"
	// Entities whose transitions are checked against a machine but keep no history.
	EntityStockHold       = "stock_hold"
	EntityWebhookDelivery = "webhook_delivery"
)

// NotificationRecord is a verified channel notification as it was received.
type NotificationRecord struct {
	Channel    string
	NotifyID   string
	OutTradeNo string
	Outcome    Outcome
	Amount     int64
	Raw        string
	ReceivedAt time.Time
}

// Reader reads current state. Every method returns ENOTFOUND for a missing entity.
type Reader interface {
	SKU(ctx context.Context, sku string) (*SKU, error)
	SKUs(ctx context.Context) ([]SKU, error) // the catalogue, by SKU
	Stock(ctx context.Context, sku string) (*Stock, error)
	Order(ctx context.Context, no string) (*Order, error) // with its items
	Payment(ctx context.Context, no string) (*Payment, error)
	PaymentByOrder(ctx context.Context, orderNo string) (*Payment, error)
	// PaymentWithAttempts is PaymentByOrder with the payment's attempts, by Seq, in one
	// read: what a buyer's poll of an unpaid order needs.
	PaymentWithAttempts(ctx context.Context, orderNo string) (*Payment, []ChannelOrder, error)
	ChannelOrder(ctx context.Context, outTradeNo string) (*ChannelOrder, error)
	ChannelOrders(ctx context.Context, paymentNo string) ([]ChannelOrder, error) // by Seq
	History(ctx context.Context, entity, no string) ([]HistoryEntry, error)      // oldest first
	ChannelRefund(ctx context.Context, outRefundNo string) (*ChannelRefund, error)
	ChannelRefunds(ctx context.Context, outTradeNo string) ([]ChannelRefund, error) // oldest first

	// The sweepers' small indexed queries, each returning at most limit rows.
	// DueOrders: PENDING_PAYMENT orders whose deadline is before t.
	DueOrders(ctx context.Context, before time.Time, limit int) ([]string, error)
	// DuePayments: UNPAID or PAYING payments whose deadline is before t.
	DuePayments(ctx context.Context, before time.Time, limit int) ([]Payment, error)
	// DueChannelRefunds: PENDING or PROCESSING refunds whose NextAt is not after t.
	DueChannelRefunds(ctx context.Context, at time.Time, limit int) ([]ChannelRefund, error)
	// RefundsNeedingAction: the operators' queue of NEEDS_ACTION refunds, oldest first.
	RefundsNeedingAction(ctx context.Context, limit int) ([]ChannelRefund, error)
	// OpenAttemptsPastDeadline: CREATED or PAYING attempts whose payment's deadline is
	// before t, whatever the payment's own status.
	OpenAttemptsPastDeadline(ctx context.Context, before time.Time, limit int) ([]ChannelOrder, error)
	// DuePendingQueries: unflagged pending queries due at t or before, oldest first.
	DuePendingQueries(ctx context.Context, at time.Time, limit int) ([]PendingQuery, error)
	PendingQuery(ctx context.Context, outTradeNo string) (*PendingQuery, error)
	// PendingQueries lists pending queries, the flagged ones only if flagged, oldest first.
	PendingQueries(ctx context.Context, flagged bool, limit int) ([]PendingQuery, error)
	// PayingChannelOrders: PAYING attempts created before t, oldest first.
	PayingChannelOrders(ctx context.Context, createdBefore time.Time, limit int) ([]ChannelOrder, error)
	// RequestKey returns a buyer's request key, expired or not.
	RequestKey(ctx context.Context, buyerID, key string) (*RequestKey, error)
	Blocklist(ctx context.Context) ([]BlockEntry, error)
	// CreateChecks reads, in one statement, what an order's creation is checked against
	// before its transaction: the blocklist entries among a buyer and a device ("" matches
	// none), by kind, and the buyer's request key (nil if there is none, or key is "").
	CreateChecks(ctx context.Context, buyerID, deviceID, key string) ([]BlockEntry, *RequestKey, error)
	// BuyerPurchases is the units a buyer holds of a SKU in orders not cancelled.
	BuyerPurchases(ctx context.Context, buyerID, sku string) (int64, error)
	// StockHolds lists an order's stock holds, whatever their state, by line.
	StockHolds(ctx context.Context, orderNo string) ([]StockHold, error)
	// DueStockHolds: HELD holds whose HoldUntil is not after t, oldest first.
	DueStockHolds(ctx context.Context, at time.Time, limit int) ([]StockHold, error)
	CouponTemplate(ctx context.Context, code string) (*CouponTemplate, error)
	Coupon(ctx context.Context, id string) (*Coupon, error)
	// BuyerCoupons lists a buyer's coupons, used or not, oldest first.
	BuyerCoupons(ctx context.Context, buyerID string) ([]Coupon, error)

	FulfilmentReader
	TicketReader
}

// Tx is one database transaction. Every state change is a conditional update: it applies
// only if the row is still in the expected state, and otherwise fails with ECONFLICT, so that
// two racing handlers can never both apply. Transitions append their history row, and
// Enqueue writes outbox messages, in the same transaction.
type Tx interface {
	Reader

	CreateSKU(ctx context.Context, sku *SKU, stock int64) error // ECONFLICT if the SKU exists
	// LockStock moves qty from available to locked only if enough is available
	// (EOUTOFSTOCK otherwise): the atomic "WHERE available >= qty" that prevents 超卖 (overselling).
	LockStock(ctx context.Context, sku string, qty int64) error
	// SellLockedStock moves qty from locked to sold; ECONFLICT if less is locked.
	SellLockedStock(ctx context.Context, sku string, qty int64) error
	// ReleaseLockedStock moves qty from locked back to available; ECONFLICT if less is locked.
	ReleaseLockedStock(ctx context.Context, sku string, qty int64) error
	// SellAvailableStock moves qty from available straight to sold only if enough is
	// available (EOUTOFSTOCK otherwise, having moved nothing: the transaction may go on,
	// to the backup say): the deduction at payment.
	SellAvailableStock(ctx context.Context, sku string, qty int64) error
	// CreateStockBackup keeps units (at least 1) of a new SKU aside as its backup, in the
	// transaction that creates the SKU; ECONFLICT if it has one.
	CreateStockBackup(ctx context.Context, sku string, units int64) error
	// SellBackupStock sells qty of the SKU's backup to line of order orderNo, only if that
	// many remain (EOUTOFSTOCK otherwise, a SKU without backup included; ENOTFOUND for no
	// such SKU): the backup's remaining -qty and used +qty, the line recorded as served by
	// it (ECONFLICT if it was), and bucket 0's sold and total +qty, in that order.
	SellBackupStock(ctx context.Context, orderNo string, line int, sku string, qty int64, at time.Time) error
	// CreateStockHold inserts a HELD hold; ECONFLICT if the order's line has one. The caller
	// locks its units in the same transaction.
	CreateStockHold(ctx context.Context, h *StockHold) error
	// EndStockHold moves a hold from HELD to to (SOLD or RELEASED), only if it is still HELD
	// (ECONFLICT otherwise, ENOTFOUND if there is none). The caller moves its units in the
	// same transaction.
	EndStockHold(ctx context.Context, orderNo string, line int, to HoldState, at time.Time) error

	CreateOrder(ctx context.Context, o *Order) error // ECONFLICT if the number is taken
	TransitionOrder(ctx context.Context, c OrderChange) error

	// CreatePayment inserts p; ECONFLICT if the order already has a payment, and the
	// transaction may go on (to read that payment).
	CreatePayment(ctx context.Context, p *Payment) error
	// CreateLockedPayment is CreatePayment of a payment that holds its PAYING lock
	// (LockPrepay) until until from the start: its first request for a code takes it in the
	// same statement.
	CreateLockedPayment(ctx context.Context, p *Payment, until time.Time) error
	TransitionPayment(ctx context.Context, c PaymentChange) error

	// CreateChannelOrder inserts co; ECONFLICT if the number is taken, or if the payment
	// already has an open (CREATED or PAYING) attempt at the same channel.
	CreateChannelOrder(ctx context.Context, co *ChannelOrder) error
	TransitionChannelOrder(ctx context.Context, c ChannelOrderChange) error
	// AttachInstruction stores the instruction (qrCode for a qr one) of a PAYING channel
	// order that has none yet (its prepay answer was unknown before), or whose instruction
	// expired by at (a fresh one for the same trade); ECONFLICT otherwise.
	AttachInstruction(ctx context.Context, outTradeNo, qrCode string, pay *PayInstruction, expiresAt, at time.Time) error

	// CreateChannelRefund inserts r; ECONFLICT if its number exists.
	CreateChannelRefund(ctx context.Context, r *ChannelRefund) error
	// TransitionChannelRefund applies c if the refund is still c.From (a retry event, which
	// does not move the status, only if its Tries is still c.Tries-1); ECONFLICT otherwise.
	TransitionChannelRefund(ctx context.Context, c ChannelRefundChange) error
	// ClaimChannelRefund claims a refund read in status from, with attempts answers
	// recorded, for one worker to send or query until until, only if no claim stands and
	// nothing was recorded since (ECONFLICT otherwise); it returns the claim to record the
	// answer under (ChannelRefundChange.Claim).
	ClaimChannelRefund(ctx context.Context, outRefundNo string, from ChannelRefundStatus, attempts int, until, now time.Time) (claim int, err error)
	// RescheduleChannelRefund records one more attempt of a refund on its way (PENDING or
	// PROCESSING) without changing the status (it is still From): the unknown flag and when
	// to look again, under the worker's claim (0: no worker's, and only while no claim
	// stands). ECONFLICT if it moved on or was claimed.
	RescheduleChannelRefund(ctx context.Context, outRefundNo string, from ChannelRefundStatus, claim int, unknown bool, nextAt, at time.Time) error
	// CreatePendingQuery starts the safety net of a PAYING attempt. The row is deleted by the
	// transition that takes the attempt out of PAYING.
	CreatePendingQuery(ctx context.Context, q *PendingQuery) error
	// AdvancePendingQuery records one query of an attempt: only if it has had exactly
	// attempts queries so far (ECONFLICT otherwise: another worker, or another instance,
	// took this step), it counts one more, notes the outcome, sets when the next is due, and
	// flags the row if flag.
	AdvancePendingQuery(ctx context.Context, outTradeNo string, attempts int, outcome string, nextAt time.Time, flag bool, at time.Time) error
	// LockPrepay takes the PAYING lock of a payment until until, if nobody holds it at now;
	// it reports whether it did.
	LockPrepay(ctx context.Context, paymentNo string, until, now time.Time) (bool, error)
	UnlockPrepay(ctx context.Context, paymentNo string) error

	// AddChannelRefunded adds amount, a refund the channel made of attempt outTradeNo, to the
	// attempt's ChannelRefunded, locking the attempt's row for the rest of the transaction;
	// it returns what the channel had refunded of it before, and the fee shares given back
	// with the other SUCCESS refunds of the attempt (except outRefundNo), both read after the
	// lock: two refunds of one attempt settling at once are reckoned one after the other.
	AddChannelRefunded(ctx context.Context, outTradeNo, outRefundNo string, amount int64) (refundedBefore, sharesBefore int64, err error)
	// SetChannelRefundFeeBack records the fee share a refund expects back (FeeBackRecorded).
	SetChannelRefundFeeBack(ctx context.Context, outRefundNo string, feeBack int64) error

	// AddPaymentRefunded adds amount to a payment's refunded total, never past its amount.
	AddPaymentRefunded(ctx context.Context, paymentNo string, amount int64, at time.Time) error

	// RecordNotification stores a verified notification, once: a redelivery (the same
	// channel and notify id) stores nothing more. It is written with the transaction's
	// history, when it commits.
	RecordNotification(ctx context.Context, n NotificationRecord) error

	// ClaimRequestKey stores k, replacing a row of the same buyer and key that expired by
	// k.CreatedAt; it reports false, and stores nothing, if a live row holds the key.
	ClaimRequestKey(ctx context.Context, k *RequestKey) (bool, error)

	// AddBuyerPurchase counts qty more units of sku for a buyer, only if the total stays
	// within limit (ELIMIT otherwise); ReleaseBuyerPurchase takes qty back (ECONFLICT if
	// fewer are counted).
	AddBuyerPurchase(ctx context.Context, buyerID, sku string, qty, limit int64) error
	ReleaseBuyerPurchase(ctx context.Context, buyerID, sku string, qty int64) error
	// LockBuyerUnpaid takes a lock on the buyer that the transaction holds until it ends (a
	// second transaction locking the same buyer waits for it), then reads what the buyer
	// holds unpaid, the units of the SKUs skus only: the buyer caps are checked on it, and
	// two orders of one buyer created at once cannot both pass a cap only one fits in.
	LockBuyerUnpaid(ctx context.Context, buyerID string, skus []string) (*UnpaidHoldings, error)
	// Block adds or updates an entry; Unblock removes one (ENOTFOUND if absent).
	Block(ctx context.Context, e BlockEntry) error
	Unblock(ctx context.Context, kind, value string) error

	// CreateCouponTemplate inserts t; ECONFLICT if its code exists. IssueCoupon inserts c;
	// ECONFLICT if its id exists.
	CreateCouponTemplate(ctx context.Context, t *CouponTemplate) error
	IssueCoupon(ctx context.Context, c *Coupon) error
	// UseCoupon marks a coupon USED by an order, only if it is AVAILABLE and the buyer's
	// (ENOTFOUND if there is no such coupon, ECONFLICT otherwise). RestoreCoupon makes it
	// AVAILABLE again, only if that order used it (ENOTFOUND / ECONFLICT likewise).
	UseCoupon(ctx context.Context, id, buyerID, orderNo string, at time.Time) error
	RestoreCoupon(ctx context.Context, id, orderNo string, at time.Time) error

	FulfilmentWriter
	TicketWriter

	// Savepoint runs fn in a savepoint of the transaction: when fn fails, all it wrote is
	// undone and the transaction goes on without it; fn's error is returned.
	Savepoint(ctx context.Context, fn func() error) error

	Enqueue(ctx context.Context, msgs ...Message) error
}

// Outbox is what the relay needs: the messages not yet published, oldest first, and a way
// to mark them published once the broker has acknowledged them.
type Outbox interface {
	UnpublishedMessages(ctx context.Context, limit int) ([]Message, error)
	MarkPublished(ctx context.Context, ids []string, at time.Time) error
}

// OrderPage is one order as its buyer's page shows it, every part read on one snapshot.
type OrderPage struct {
	Order *Order // with its items
	// Payment and its Attempts (by Seq) are read while the order is PENDING_PAYMENT: what
	// a buyer's poll needs. Payment is nil when the order has none yet, or is not pending.
	Payment  *Payment
	Attempts []ChannelOrder
	// Parcels and Sales are read once the order has a payment number (it was paid): its
	// shipments and after-sales requests, in their order.
	Parcels []Shipment
	Sales   []AfterSale
}

// Store is the database: reads, transactions, and the outbox.
type Store interface {
	Reader
	Outbox
	// InTx runs fn in one transaction, committing if fn returns nil and rolling back
	// otherwise. fn may run more than once if the database asks for a retry, so it must not
	// have effects outside the transaction.
	InTx(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn in one read-only transaction: every read in it sees the same committed
	// state, so that rows read together (an order, its parcels and its requests) agree. It
	// takes no write lock.
	View(ctx context.Context, fn func(r Reader) error) error
	// OrderPage reads the order no as its buyer's page shows it, on one snapshot like
	// View. ENOTFOUND if there is no such order.
	OrderPage(ctx context.Context, no string) (*OrderPage, error)
	// NextOrderSeq reserves n consecutive numbers of day's order sequence (day is
	// yyyyMMdd in UTC+8) and returns the first; the caller owns [first, first+n). A day
	// starts at 0, and no two calls, from any instance, ever get overlapping blocks. It
	// runs its own transaction: never call it inside InTx.
	NextOrderSeq(ctx context.Context, day string, n int64) (first int64, err error)
	Close() error
}

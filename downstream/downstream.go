// Package downstream holds two example consumers of orderpay's events, written as a
// downstream team would write them (docs/design.md §5 "Downstream events", §7 I7): points, awarded
// once per paid order and taken back on refund, and an SMS log. Each keeps its own tables
// behind its own small Store, subscribes with its own durable consumer, and is idempotent
// per message and per business key, so that a redelivered, re-published or duplicated
// event takes effect once.
//
// A handler returns nil only once its transaction has committed: natsbus.Subscribe acks
// the message after that, and redelivers it otherwise.
package downstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"orderpay"
	"orderpay/natsbus"
)

// Durable consumer names of the examples.
const (
	DurablePoints = "downstream-points"
	DurableSMS    = "downstream-sms"
)

// Kinds of points ledger rows.
const (
	PointsAward  = "award"
	PointsRevoke = "revoke"
)

// PointsEntry is one row of the points ledger: the award for an order (Ref "") or the
// revoke for one of its refunds (Ref is the out_refund_no). Its key is (OrderNo, Kind, Ref).
type PointsEntry struct {
	OrderNo   string    `json:"order_no"`
	Kind      string    `json:"kind"`
	Ref       string    `json:"ref"`
	Points    int64     `json:"points"`
	BuyerID   string    `json:"buyer_id"`
	MsgID     string    `json:"msg_id"`
	CreatedAt time.Time `json:"created_at"`
}

// PointsAccount is a buyer's balance (awards minus revokes) and ledger, newest first.
type PointsAccount struct {
	BuyerID string        `json:"buyer_id"`
	Balance int64         `json:"balance"`
	Ledger  []PointsEntry `json:"ledger"`
}

// SMSEntry is one logged (never sent) text message; its key is (MsgID, Template).
type SMSEntry struct {
	MsgID     string    `json:"msg_id"`
	Template  string    `json:"template"`
	BuyerID   string    `json:"buyer_id"`
	OrderNo   string    `json:"order_no"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
}

// Store is the examples' own storage (sqlstore.Store implements it, on the tables of
// migration 0009). Every write is one transaction.
type Store interface {
	// AwardPoints records e as the order's award unless the order has one already, and
	// reports whether it did.
	AwardPoints(ctx context.Context, e PointsEntry) (bool, error)
	// RevokePoints records the revoke e (its key: e.OrderNo, e.Ref) unless recorded
	// already, taking back e.Points capped at what the order's award has left, and
	// returns the points taken back and whether it recorded the row. An order with no
	// award is ENOTFOUND. BuyerID is the award's.
	RevokePoints(ctx context.Context, e PointsEntry) (points int64, applied bool, err error)
	// PointsBalance is the sum of a buyer's awards minus revokes.
	PointsBalance(ctx context.Context, buyerID string) (int64, error)
	// PointsLedger lists a buyer's rows, newest first, at most limit.
	PointsLedger(ctx context.Context, buyerID string, limit int) ([]PointsEntry, error)
	// LogSMS records e unless (e.MsgID, e.Template) is there already, and reports whether
	// it did.
	LogSMS(ctx context.Context, e SMSEntry) (bool, error)
	// SMSLog lists the rows of one order ("" for every order), newest first, at most limit.
	SMSLog(ctx context.Context, orderNo string, limit int) ([]SMSEntry, error)
}

// OrderReader reads an order; the SMS example uses it to find the buyer of a refund, which
// refund.succeeded (from the payment center, which knows no buyers) does not carry.
// *order.Service and orderpay.Store are OrderReaders.
type OrderReader interface {
	Order(ctx context.Context, no string) (*orderpay.Order, error)
}

// Examples are both example consumers over one Store.
type Examples struct {
	Store  Store
	Orders OrderReader // for the buyer of a refund's SMS
	// Confirm checks a message against the records before a consumer acts on it
	// (orderpay.ConfirmEvent): one it finds orderpay.Unconfirmed (a forged event) is logged,
	// counted by Forged, acknowledged and changes nothing. Optional.
	Confirm func(ctx context.Context, m orderpay.Message) error
	Forged  func(consumer string, m orderpay.Message)
	Clock   orderpay.Clock // defaults to the system clock
	Logger  *slog.Logger   // defaults to discarding
}

// listLimit bounds the rows the read methods return.
const listLimit = 500

// Start subscribes both consumers to every subject of the bus's stream, each under its
// own durable name; stop ends both and waits for a running handler.
func (x *Examples) Start(ctx context.Context, bus *natsbus.Bus) (stop func(), err error) {
	if x.Store == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "downstream: examples need a Store")
	}
	stopPoints, err := bus.Subscribe(ctx, DurablePoints, "", x.Points().Handle)
	if err != nil {
		return nil, err
	}
	stopSMS, err := bus.Subscribe(ctx, DurableSMS, "", x.SMS().Handle)
	if err != nil {
		stopPoints()
		return nil, err
	}
	return func() { stopSMS(); stopPoints() }, nil
}

// Points returns the points consumer.
func (x *Examples) Points() *Points {
	return &Points{Store: x.Store, Clock: x.Clock, Logger: x.Logger, Confirm: x.confirm(DurablePoints)}
}

// confirm is the check of a consumer named consumer (Examples.Confirm, with what Forged
// counts), or nil.
func (x *Examples) confirm(consumer string) func(ctx context.Context, m orderpay.Message) error {
	if x.Confirm == nil {
		return nil
	}
	return func(ctx context.Context, m orderpay.Message) error {
		err := x.Confirm(ctx, m)
		if orderpay.IsUnconfirmed(err) && x.Forged != nil {
			x.Forged(consumer, m)
		}
		return err
	}
}

// acts reports whether a consumer may act on m: confirm (if any) confirms it. A message
// it does not confirm is logged as a forgery and acknowledged (false, nil); an error
// reading the records is returned, to have it delivered again.
func acts(ctx context.Context, confirm func(context.Context, orderpay.Message) error, log *slog.Logger, m orderpay.Message) (bool, error) {
	if confirm == nil {
		return true, nil
	}
	err := confirm(ctx, m)
	if orderpay.IsUnconfirmed(err) {
		log.Error("forged event on the bus: not confirmed by the records, acknowledged and ignored", "err", err)
		return false, nil
	}
	return err == nil, err
}

// SMS returns the SMS-log consumer.
func (x *Examples) SMS() *SMS {
	return &SMS{Store: x.Store, Orders: x.Orders, Clock: x.Clock, Logger: x.Logger, Confirm: x.confirm(DurableSMS)}
}

// PointsAccount is a buyer's balance and ledger.
func (x *Examples) PointsAccount(ctx context.Context, buyerID string) (*PointsAccount, error) {
	if buyerID == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "buyer_id is required")
	}
	balance, err := x.Store.PointsBalance(ctx, buyerID)
	if err != nil {
		return nil, err
	}
	ledger, err := x.Store.PointsLedger(ctx, buyerID, listLimit)
	if err != nil {
		return nil, err
	}
	return &PointsAccount{BuyerID: buyerID, Balance: balance, Ledger: ledger}, nil
}

// SMSLog lists the logged texts of one order ("" for the latest of every order).
func (x *Examples) SMSLog(ctx context.Context, orderNo string) ([]SMSEntry, error) {
	return x.Store.SMSLog(ctx, orderNo, listLimit)
}

// messageKey is the message's id, which the relay sets from the outbox (deterministic, e.g.
// "order.paid:<order_no>"). A message published without one is keyed by its content.
func messageKey(m orderpay.Message) string {
	if m.ID != "" {
		return m.ID
	}
	sum := sha256.Sum256(m.Payload)
	return m.Subject + ":sha256:" + hex.EncodeToString(sum[:12])
}

func logger(l *slog.Logger, name string) *slog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return l.With("component", name)
}

func now(c orderpay.Clock) time.Time {
	if c == nil {
		c = orderpay.SystemClock{}
	}
	return orderpay.Now(c)
}

// errRetry marks a message that cannot take effect yet: the handler fails, and the bus
// redelivers it later.
var errRetry = errors.New("downstream: not yet applicable")

package orderpay

import (
	"context"
	"time"
)

// NotificationLogEntry is one channel notification as it arrived, whether or not it
// verified: the operator's record of what the channel (or someone pretending to be it) sent.
type NotificationLogEntry struct {
	ID         int64
	ReceivedAt time.Time
	Channel    string
	// OutTradeNo is the attempt the notification is about: verified, or as claimed by an
	// unverified one; "" if none could be read.
	OutTradeNo string
	// Verified says its signature and merchant identity checked out.
	Verified bool
	Result   string // NotifyApplied, NotifyDuplicate, NotifyIgnored, NotifyRejected or NotifyFailed
	Detail   string // why, for every result but applied
	// Raw is the body as received, cut to NotificationLogRawMax bytes. Headers are never
	// kept. WeChat bodies are encrypted resources and are stored encrypted.
	Raw string
}

// Settle sets the result of a verified notification that was applied, or that changed
// nothing (a duplicate). An applied one's body is in the history of the transition it made,
// so it is not kept twice.
func (e *NotificationLogEntry) Settle(applied bool) {
	if applied {
		e.Result, e.Raw, e.Detail = NotifyApplied, "", "the body is in the history of the transition it made"
		return
	}
	e.Result, e.Detail = NotifyDuplicate, "already applied: acknowledged, nothing changed"
}

// Results of a notification in the log.
const (
	NotifyApplied   = "applied"   // verified and applied
	NotifyDuplicate = "duplicate" // verified, already applied (a redelivery, or a query got there first): nothing changed
	NotifyIgnored   = "ignored"   // verified, but not a payment: states other than paid come from queries
	NotifyRejected  = "rejected"  // refused: signature, identity, unknown trade, wrong channel or amount
	NotifyFailed    = "failed"    // verified, but applying it failed; the channel will resend
)

// NotificationLogRawMax bounds the raw body kept per notification.
const NotificationLogRawMax = 8 << 10

// QueryLogEntry is one query of a channel about an attempt.
type QueryLogEntry struct {
	ID         int64
	At         time.Time
	Channel    string
	OutTradeNo string
	Trigger    string // what asked: "schedule", "sweep", "poll", "notify", "admin", …
	Outcome    Outcome
	Detail     string
}

// OpsLog stores the operator's records. Nothing depends on them, so they are written
// outside the state-changing transactions and a failed write loses only a log line.
type OpsLog interface {
	// LogNotification may be called on a Tx, to log a notification in the transaction
	// that applies it.
	LogNotification(ctx context.Context, e *NotificationLogEntry) error
	LogQuery(ctx context.Context, e *QueryLogEntry) error
}

// OrderFilter selects orders for the operations console and the buyer's order list. Empty
// fields match everything. Orders come newest first: by created_at (then order number),
// or, with NoPrefix, by order number alone, descending (numbers begin with their day), so
// that a prefix matching most of the history still reads one page.
type OrderFilter struct {
	NoPrefix string // order_no starts with it, byte for byte: no wildcards, case counts
	BuyerID  string
	Status   OrderStatus
}

// OpsReader answers the operations console and the buyer's order list.
type OpsReader interface {
	Reader
	OpsLog
	// Orders lists orders, newest first, without their items.
	Orders(ctx context.Context, f OrderFilter, limit int) ([]Order, error)
	OpsLogReader
	// ViewOps runs fn in one read-only transaction, as Store.View does: an order's
	// timeline, read from many tables, agrees with itself.
	ViewOps(ctx context.Context, fn func(r OpsSnapshot) error) error
	// RefundsByReason lists refunds with one of the reasons, newest first.
	RefundsByReason(ctx context.Context, reasons []string, limit int) ([]ChannelRefund, error)
	// PaidLatencyCounts counts the payments recorded paid from the hour of since
	// (ChartHour) by how long after its paid attempt was opened each was recorded paid
	// (both times orderpay's own), in the buckets of PaidLatencyBounds, fastest first;
	// empty buckets are left out.
	PaidLatencyCounts(ctx context.Context, since time.Time) ([]LatencyCount, error)
	// NotificationOutcomes counts the notifications logged from the hour of since
	// (ChartHour) by verified and result.
	NotificationOutcomes(ctx context.Context, since time.Time) ([]NotificationOutcomeCount, error)
}

// The console's charts read counts kept hour by hour as payments become paid and
// notifications are logged, not the rows themselves: what a chart costs is its hours,
// whatever the shop's volume or age.

// ChartWindowMax is the longest window a chart reads, and how long its hourly counts are
// kept (past the logs' retention: a count holds no buyer's data).
const ChartWindowMax = 90 * 24 * time.Hour

// ChartHour is the start of the clock hour t is in: a chart's window begins there.
func ChartHour(t time.Time) time.Time { return t.Truncate(time.Hour) }

// PaidLatencyBounds are the upper bounds of the buckets paid latencies are counted in:
// ten a decade (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8), from 10 ms to 8,000 s, each at most a
// third above the one before; a latency over the last is counted beyond it.
var PaidLatencyBounds = func() []time.Duration {
	var out []time.Duration
	for decade := 10 * time.Millisecond; decade <= 1000*time.Second; decade *= 10 {
		for _, tenths := range []time.Duration{10, 12, 15, 20, 25, 30, 40, 50, 60, 80} {
			out = append(out, decade*tenths/10)
		}
	}
	return out
}()

// LatencyCount is how many paid latencies fell in one bucket of PaidLatencyBounds: at
// most UpTo and more than the bound before it; UpTo 0 is the bucket beyond the last bound.
type LatencyCount struct {
	UpTo  time.Duration
	Count int64
}

// OpsLogReader lists the operations log's entries about the given attempts, oldest first.
type OpsLogReader interface {
	NotificationLog(ctx context.Context, outTradeNos []string, limit int) ([]NotificationLogEntry, error)
	QueryLog(ctx context.Context, outTradeNos []string, limit int) ([]QueryLogEntry, error)
}

// OpsSnapshot is what one read-only transaction of the console reads (OpsReader.ViewOps):
// the state, the operations log and the operators' actions.
type OpsSnapshot interface {
	Reader
	OpsLogReader
	OperatorActions(ctx context.Context, f AuditFilter, limit int) ([]OperatorAction, error)
}

// NotificationOutcomeCount is one bar of the notification outcomes chart.
type NotificationOutcomeCount struct {
	Verified bool
	Result   string
	Count    int
}

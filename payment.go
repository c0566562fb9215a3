package orderpay

import (
	"context"
	"errors"
	"time"
)

// PaymentStatus is the state of a payment order (docs/design.md §4). One order has one payment.
type PaymentStatus string

const (
	PaymentUnpaid  PaymentStatus = "UNPAID"
	PaymentPaying  PaymentStatus = "PAYING"
	PaymentSuccess PaymentStatus = "SUCCESS"
	PaymentFailed  PaymentStatus = "FAILED"
	PaymentClosed  PaymentStatus = "CLOSED"
)

// PaymentEvent is something that happens to a payment order.
type PaymentEvent string

const (
	PaymentEventStart   PaymentEvent = "start"   // the first channel attempt was sent
	PaymentEventSucceed PaymentEvent = "succeed" // a channel attempt was verified paid
	PaymentEventFail    PaymentEvent = "fail"    // every attempt failed definitively
	PaymentEventClose   PaymentEvent = "close"   // closed: the channel confirmed nothing was paid
)

// PaymentMachine is the payment order's transition table.
var PaymentMachine = NewMachine("payment", []Transition[PaymentStatus, PaymentEvent]{
	{PaymentUnpaid, PaymentEventStart, PaymentPaying},
	{PaymentUnpaid, PaymentEventClose, PaymentClosed},
	{PaymentPaying, PaymentEventSucceed, PaymentSuccess},
	{PaymentPaying, PaymentEventFail, PaymentFailed},
	{PaymentPaying, PaymentEventClose, PaymentClosed},
})

// Payment is the payment center's record of what one order owes and what was paid.
type Payment struct {
	No          string
	OrderNo     string
	Amount      int64
	Refunded    int64
	Status      PaymentStatus
	Subject     string
	PayDeadline time.Time
	// Set on success: the attempt that was paid.
	PaidChannel    string
	PaidOutTradeNo string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	PaidAt         time.Time
}

// PaymentChange is one conditional transition of a payment order.
type PaymentChange struct {
	No     string
	From   PaymentStatus
	To     PaymentStatus
	Event  PaymentEvent
	At     time.Time
	Actor  string
	Reason string
	// Set on succeed.
	PaidChannel    string
	PaidOutTradeNo string
	// ReleasePrepay lets go of the payment's PAYING lock in the same update.
	ReleasePrepay bool
}

// ChannelOrderStatus is the state of one attempt at one channel (docs/design.md §4).
type ChannelOrderStatus string

const (
	ChannelOrderCreated ChannelOrderStatus = "CREATED"
	ChannelOrderPaying  ChannelOrderStatus = "PAYING"
	ChannelOrderSuccess ChannelOrderStatus = "SUCCESS"
	ChannelOrderFailed  ChannelOrderStatus = "FAILED"
	ChannelOrderClosed  ChannelOrderStatus = "CLOSED"
)

// ChannelOrderEvent is something that happens to a channel order.
type ChannelOrderEvent string

const (
	// submit: precreate/prepay answered with a QR code, or gave no definite answer.
	// Either way the trade may exist at the channel, so it must be queried from now on.
	ChannelOrderEventSubmit  ChannelOrderEvent = "submit"
	ChannelOrderEventReject  ChannelOrderEvent = "reject"  // the channel definitively refused precreate/prepay
	ChannelOrderEventSucceed ChannelOrderEvent = "succeed" // a verified notification or query said paid
	ChannelOrderEventFail    ChannelOrderEvent = "fail"    // the channel reported the trade failed
	ChannelOrderEventClose   ChannelOrderEvent = "close"   // closed at the channel, nothing paid
)

// ChannelOrderMachine is the channel order's transition table. A CREATED order was never
// shown to the buyer (the QR code is returned only after it is stored), so it can be closed
// without asking the channel.
//
// A verified payment moves a CLOSED or FAILED attempt to SUCCESS too: the money is the
// truth, and such a late payment is then refunded, never ignored.
var ChannelOrderMachine = NewMachine("channel order", []Transition[ChannelOrderStatus, ChannelOrderEvent]{
	{ChannelOrderCreated, ChannelOrderEventSubmit, ChannelOrderPaying},
	{ChannelOrderCreated, ChannelOrderEventReject, ChannelOrderFailed},
	{ChannelOrderCreated, ChannelOrderEventClose, ChannelOrderClosed},
	{ChannelOrderPaying, ChannelOrderEventSucceed, ChannelOrderSuccess},
	{ChannelOrderPaying, ChannelOrderEventFail, ChannelOrderFailed},
	{ChannelOrderPaying, ChannelOrderEventClose, ChannelOrderClosed},
	{ChannelOrderClosed, ChannelOrderEventSucceed, ChannelOrderSuccess},
	{ChannelOrderFailed, ChannelOrderEventSucceed, ChannelOrderSuccess},
})

// ChannelOrder is one attempt to collect a payment through one channel. Its OutTradeNo is
// what the channel knows it by, and is unique.
type ChannelOrder struct {
	OutTradeNo string
	PaymentNo  string
	Channel    string
	Seq        int // 1 for the first attempt of the payment, then 2, 3, …
	Amount     int64
	Status     ChannelOrderStatus
	// Unknown marks that the last call about this attempt ended without a definite answer
	// (timeout, 5xx, 20000/ACQ.SYSTEM_ERROR, unsigned reply): it must be queried.
	Unknown bool
	// Method is how the buyer pays this attempt, and Payer whom it is for (the openid or
	// Alipay user id of a method that names the payer, PayerNeeded).
	Method PayMethod
	Payer  string
	// QRCode is a qr attempt's code; Pay the instruction the buyer's device was handed, of
	// any method (nil until there is one, and for a qr attempt stored before methods).
	// QRExpiresAt is when the instruction stops working, whatever its method.
	QRCode      string
	Pay         *PayInstruction
	QRExpiresAt time.Time
	TradeNo     string // the channel's own number, once known
	CreatedAt   time.Time
	UpdatedAt   time.Time
	PaidAt      time.Time
	// FeeRecorded says Fee and FeeRate hold the service fee the attempt expects to be
	// charged, recorded when it succeeded from its account's contract (FeeSchedule); an
	// attempt paid before fees were recorded, or at a channel without a contract, has none.
	FeeRecorded bool
	Fee         int64
	FeeRate     FeeRate
	// ChannelRefunded is the amount the channel itself refunded of this attempt (SUCCESS
	// refunds, not those paid back outside it): what a refund's share of the fee is
	// reckoned from.
	ChannelRefunded int64
}

// ChannelOrderChange is one conditional transition of a channel order.
type ChannelOrderChange struct {
	OutTradeNo string
	From       ChannelOrderStatus
	To         ChannelOrderStatus
	Event      ChannelOrderEvent
	At         time.Time
	Actor      string
	Reason     string
	Raw        string // the channel message that caused it, kept for the operator
	// Optional fields written with the transition when set.
	QRCode      string
	Pay         *PayInstruction
	QRExpiresAt time.Time
	TradeNo     string
	PaidAt      time.Time
	Unknown     bool
	// FeeRecorded writes Fee and FeeRate with the transition (a move to SUCCESS).
	FeeRecorded bool
	Fee         int64
	FeeRate     FeeRate
}

// PayRequest is what the order system asks of the payment center: collect Amount for
// OrderNo through Channel's Method before Deadline.
type PayRequest struct {
	OrderNo  string
	Amount   int64
	Subject  string
	Deadline time.Time
	Channel  string
	// Method is how the buyer's device pays ("" is MethodQR); Payer and ClientIP are what
	// some methods need of the buyer (PrecreateRequest), taken from the buyer's identity
	// and connection, never from another buyer.
	Method   PayMethod
	Payer    string
	ClientIP string
}

// PayResult is what the buyer's device pays with. A repeated request for the same order,
// channel and method returns the same instruction while it is valid.
type PayResult struct {
	PaymentNo string
	Channel   string
	Method    PayMethod
	QRCode    string // a qr instruction's code
	Pay       *PayInstruction
	ExpiresAt time.Time
}

// CloseOutcome is what closing an order's payment found.
type CloseOutcome string

const (
	// ClosePaid: the payment succeeded (now or before): the order must not be cancelled.
	ClosePaid CloseOutcome = "PAID"
	// CloseDone: nothing was paid and nothing can be paid any more: every attempt is closed
	// at the channel, or never existed.
	CloseDone CloseOutcome = "CLOSED"
	// CloseNotPaidYet: the channels confirm nothing is paid, but an attempt stays payable
	// until its deadline (an Alipay code nobody scanned cannot be closed). The payment center
	// closes it after the deadline and refunds any payment that still arrives.
	CloseNotPaidYet CloseOutcome = "NOT_PAID_YET"
	// CloseUnknown: a channel gave no definite answer; try again later.
	CloseUnknown CloseOutcome = "UNKNOWN"
)

// PaymentCenter is the narrow interface the order system uses to take payment.
type PaymentCenter interface {
	Pay(ctx context.Context, req PayRequest) (*PayResult, error)
	// Close stops the order's payment: it queries every open attempt first, closes them at
	// the channel, and reports what it found. Idempotent.
	Close(ctx context.Context, orderNo string) (CloseOutcome, error)
	// RefundRejected sends back a payment the order system could not take (its order was
	// cancelled meanwhile). Idempotent: the refund number is derived from the attempt.
	RefundRejected(ctx context.Context, ev PaymentSucceeded, reason string) error
	// Poll tells the payment center a buyer is watching the unpaid order: it queries the
	// payment's open attempts (rate-limited), waits for that until done or until ctx ends,
	// and returns what Result does, with the payment's attempts as it last read them (none
	// when the order has no payment).
	Poll(ctx context.Context, orderNo string) (*PaymentSucceeded, []ChannelOrder, error)
	// PollRead is Poll of the order's payment p and its attempts as the caller just read
	// them (an OrderPage's): nil p for an order with no payment yet. watcher is who is
	// looking (the order's buyer): the queries one watcher's reads trigger are bounded
	// across all the payments they watch, beside each payment's own bound.
	PollRead(ctx context.Context, orderNo, watcher string, p *Payment, attempts []ChannelOrder) (*PaymentSucceeded, []ChannelOrder, error)
	// Result is the pull side of the payment result ("同步+异步"): the order's
	// payment success if it succeeded, else nil. The order system asks when it finds an
	// order unpaid whose payment may have succeeded (the push was lost in a crash).
	Result(ctx context.Context, orderNo string) (*PaymentSucceeded, error)
}

// ChannelRefundStatus is the state of one refund at a channel.
type ChannelRefundStatus string

const (
	// ChannelRefundPending: to be sent, under its own number, at NextAt: new, or its last
	// answer was unknown, or the channel refused it for now (Tries counts those refusals).
	ChannelRefundPending ChannelRefundStatus = "PENDING"
	// ChannelRefundProcessing: the channel accepted it; query until it is final.
	ChannelRefundProcessing ChannelRefundStatus = "PROCESSING"
	// ChannelRefundSuccess: the channel says the money went back.
	ChannelRefundSuccess ChannelRefundStatus = "SUCCESS"
	// ChannelRefundNeedsAction: it cannot end by itself (refused for good, ended abnormally,
	// or its retries ran out): it waits in the operators' queue, Problem saying why, until
	// an operator retries it or settles it outside the channel. The money is still owed.
	ChannelRefundNeedsAction ChannelRefundStatus = "NEEDS_ACTION"
	// ChannelRefundResolved: an operator paid it back outside the channel (a bank transfer,
	// the merchant platform) and recorded who, with what reference.
	ChannelRefundResolved ChannelRefundStatus = "RESOLVED"
)

// Owed reports whether the refund's money has not gone back yet: every status but SUCCESS
// and RESOLVED.
func (s ChannelRefundStatus) Owed() bool {
	return s != ChannelRefundSuccess && s != ChannelRefundResolved
}

// ChannelRefundEvent is something that happens to a channel refund.
type ChannelRefundEvent string

const (
	ChannelRefundEventAccept  ChannelRefundEvent = "accept"  // the channel took it; not final yet
	ChannelRefundEventSucceed ChannelRefundEvent = "succeed" // the channel's verified word that the money went back
	// ChannelRefundEventRetry: the channel refused it for now; it is sent again, under the
	// same number, on the retry schedule. Recorded in the history at every refusal.
	ChannelRefundEventRetry ChannelRefundEvent = "retry"
	// ChannelRefundEventEscalate: it cannot end by itself; it goes before an operator.
	ChannelRefundEventEscalate ChannelRefundEvent = "escalate"
	// ChannelRefundEventOperatorRetry: an operator sends it again (after a top-up, say),
	// under the same number, with a fresh retry schedule.
	ChannelRefundEventOperatorRetry ChannelRefundEvent = "operator_retry"
	// ChannelRefundEventResolve: an operator records that the money went back outside the
	// channel.
	ChannelRefundEventResolve ChannelRefundEvent = "resolve"
	// ChannelRefundEventRetryNow: an operator asks for a refund on its way to be sent or
	// queried now rather than at its next try.
	ChannelRefundEventRetryNow ChannelRefundEvent = "retry_now"
)

// ChannelRefundMachine is the channel refund's transition table. A refund in the operators'
// queue that the channel later says it made (the merchant platform handled an abnormal
// refund) moves to SUCCESS on that verified word; one an operator resolved stays RESOLVED.
var ChannelRefundMachine = NewMachine("channel refund", []Transition[ChannelRefundStatus, ChannelRefundEvent]{
	{ChannelRefundPending, ChannelRefundEventAccept, ChannelRefundProcessing},
	{ChannelRefundPending, ChannelRefundEventSucceed, ChannelRefundSuccess},
	{ChannelRefundPending, ChannelRefundEventRetry, ChannelRefundPending},
	{ChannelRefundPending, ChannelRefundEventEscalate, ChannelRefundNeedsAction},
	{ChannelRefundPending, ChannelRefundEventRetryNow, ChannelRefundPending},
	{ChannelRefundProcessing, ChannelRefundEventSucceed, ChannelRefundSuccess},
	{ChannelRefundProcessing, ChannelRefundEventEscalate, ChannelRefundNeedsAction},
	{ChannelRefundProcessing, ChannelRefundEventRetryNow, ChannelRefundProcessing},
	{ChannelRefundNeedsAction, ChannelRefundEventOperatorRetry, ChannelRefundPending},
	{ChannelRefundNeedsAction, ChannelRefundEventResolve, ChannelRefundResolved},
	{ChannelRefundNeedsAction, ChannelRefundEventSucceed, ChannelRefundSuccess},
})

// Why the payment center sends money back.
const (
	RefundReasonDuplicate = "duplicate_payment" // a second attempt of a paid payment was paid too
	RefundReasonLate      = "late_payment"      // an attempt was paid after we closed it
	RefundReasonCancelled = "order_cancelled"   // the order was cancelled before the payment arrived
	// RefundReasonAmountMismatch: the payment is for another amount than the order's
	// payable; the order can never take it, so it goes back whole.
	RefundReasonAmountMismatch = "amount_mismatch"
	// RefundReasonReversed: a barcode trade the buyer paid after the till gave up on
	// them; the channel's reverse (Alipay's cancel) refunded it.
	RefundReasonReversed = "barcode_reversed"
)

// ChannelRefund is money sent back through a channel for one paid attempt.
type ChannelRefund struct {
	OutRefundNo string // the channel's refund number: derived, so a resend cannot refund twice
	OutTradeNo  string
	PaymentNo   string
	Channel     string
	Amount      int64
	Reason      string
	Status      ChannelRefundStatus
	Unknown     bool // the last call about it had no definite answer
	Attempts    int
	NextAt      time.Time // when the refund worker looks at it next
	CreatedAt   time.Time
	UpdatedAt   time.Time
	RefundedAt  time.Time // when it became SUCCESS or RESOLVED
	// Tries counts the channel's refusals-for-now since RetryingSince, the first of them
	// (zero when none): the position on the retry schedule. Retried counts the times it was
	// set to be sent again after such a refusal, over its whole life.
	Tries         int
	RetryingSince time.Time
	Retried       int
	// Problem is the channel's last refusal, or why the refund needs an operator; and
	// NeedsActionAt when it last went before one (zero if never).
	Problem       string
	NeedsActionAt time.Time
	// ResolvedBy, ResolvedRef and ResolvedNote: who settled it outside the channel, the
	// reference of that payment (a bank transfer number, say), and their note.
	ResolvedBy   string
	ResolvedRef  string
	ResolvedNote string
	// Sends counts the times a worker claimed the refund to send it or query it: more than
	// none, and the channel was asked (it may have made the refund). ClaimedUntil is when
	// the last claim lapses; before then its call may still be on its way.
	Sends        int
	ClaimedUntil time.Time
	// FeeBackRecorded says FeeBack holds the part of its payment's fee the refund expects
	// back (RefundFeeShare; 0 when the contract says refunds return no fee), recorded when the
	// channel made it. A refund paid back outside the channel gets none.
	FeeBackRecorded bool
	FeeBack         int64
}

// ChannelRefundChange is one conditional transition of a channel refund. Besides the
// status it sets the fields the event is about: a retry (Tries and RetryingSince, Retried
// one up, Problem), an escalation (Problem, NeedsActionAt = At), an operator's retry (a fresh
// schedule), a resolution (ResolvedBy, ResolvedRef, ResolvedNote, RefundedAt = At).
type ChannelRefundChange struct {
	OutRefundNo string
	From        ChannelRefundStatus
	To          ChannelRefundStatus
	Event       ChannelRefundEvent
	At          time.Time
	Actor       string
	Reason      string
	Raw         string
	NextAt      time.Time
	// Tries and RetryingSince are the retry schedule's position after a retry event.
	Tries         int
	RetryingSince time.Time
	Problem       string
	ResolvedBy    string
	ResolvedRef   string
	ResolvedNote  string
	// Claim is the worker's claim its answer is recorded under (ClaimChannelRefund): the
	// change applies only if no worker claimed the refund since. 0 for a change that is no
	// worker's answer (an operator's, a notification's), which applies only while no claim
	// stands, but for the channel's word that the money went back, which always does.
	Claim int
}

// PaymentResults is the narrow interface the payment center uses to tell the order system
// about results. It is the fast path; the same event also travels through the outbox and
// the bus, so the receiver must be idempotent.
type PaymentResults interface {
	PaymentSucceeded(ctx context.Context, ev PaymentSucceeded) error
}

// PaymentResultsInTx is a PaymentResults that shares the payment center's store, and so can
// take a payment in the transaction that records it: the payment and its order commit
// together, one transaction instead of two.
type PaymentResultsInTx interface {
	PaymentResults
	// PaymentSucceededTx applies ev in tx and returns what to do once tx has committed. A
	// nil func and no error means "not here": tell me after the commit, by
	// PaymentSucceeded. On an error the payment center rolls tx back, commits the payment
	// without it, and then calls PaymentSucceeded, which answers as it always does (a
	// refusal refunds).
	PaymentSucceededTx(ctx context.Context, tx Tx, ev PaymentSucceeded) (func(), error)
}

// PaymentRefusal is the order system's explicit refusal of a payment: its order can never
// take it (cancelled before the payment arrived, sold out under the "payment" or "reserve"
// policy, or priced at another amount). It is an ECONFLICT, and the only error the payment
// center answers by refunding the payment. Any other error from PaymentSucceeded, ECONFLICT
// included (a conditional update that lost a race, a stock move that found its row
// changed), means "not now": the result is delivered again, never refunded.
type PaymentRefusal struct {
	Reason string // why the money goes back: a RefundReason…
	Err    error  // the ECONFLICT *Error that says so
}

// RefusePayment returns the order system's refusal of a payment, for a refund reason.
func RefusePayment(reason, format string, args ...any) error {
	return &PaymentRefusal{Reason: reason, Err: Errorf(ECONFLICT, format, args...)}
}

func (r *PaymentRefusal) Error() string { return r.Err.Error() }
func (r *PaymentRefusal) Unwrap() error { return r.Err }

// Refusal reports whether err is the order system's explicit refusal of a payment, and the
// refund reason it gives.
func Refusal(err error) (reason string, refused bool) {
	var r *PaymentRefusal
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// PaymentResultsFunc adapts a function to PaymentResults.
type PaymentResultsFunc func(ctx context.Context, ev PaymentSucceeded) error

// PaymentSucceeded calls f.
func (f PaymentResultsFunc) PaymentSucceeded(ctx context.Context, ev PaymentSucceeded) error {
	return f(ctx, ev)
}

// PendingQuery is the safety net's row for one PAYING attempt: when it is next due to be
// queried, and how many queries it has had. It lives exactly as long as the attempt is
// PAYING; when attempts run out it is Flagged for reconciliation instead.
type PendingQuery struct {
	OutTradeNo  string
	PaymentNo   string
	Channel     string
	Attempts    int
	NextAt      time.Time
	Flagged     bool
	LastOutcome string // what the last query said
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Timers set one-shot timers on the broker: the fast path of active queries (docs/design.md §5).
// Setting a timer again replaces it. A timer may be lost; the safety net catches that.
type Timers interface {
	SetTimer(ctx context.Context, name string, at time.Time, payload []byte) error
}

// Observer hears what the payment center does, for metrics and alerts. Every method must be
// cheap and must not fail. NopObserver is the default.
type Observer interface {
	// Notification: a channel notification arrived and was "applied", "duplicate",
	// "ignored" (not a payment) or "rejected".
	Notification(channel, result string)
	// Query: an active query of trigger ("schedule", "sweep", "poll", "notification",
	// "close", "scan", "admin", "reconcile") got outcome.
	Query(channel, trigger string, outcome Outcome)
	// AutoRefund: money the order could not take is being sent back.
	AutoRefund(channel, reason string)
	// RefundAnswer: a refund call or refund query got an answer of this class (Refunded,
	// RefundPending, RefundRetry, Rejected, RefundAbnormal or Unknown).
	RefundAnswer(channel string, outcome Outcome)
	// QueriesExhausted: an attempt ran out of queries and was flagged for reconciliation.
	QueriesExhausted(channel string)
	// NotificationReceived: a notification arrived at channel's endpoint; verified says
	// whether its signature and identity checked out (before any other check).
	NotificationReceived(channel string, verified bool)
	// NotificationUnlogged: a notification that failed verification was counted but not
	// stored in the notification log, its channel or source being over the log's rate.
	NotificationUnlogged(channel string)
	// PaymentConverged: a payment became SUCCESS, latency after its paid attempt was
	// opened (the channel order's created_at), learnt from source ("notification" or
	// "query").
	PaymentConverged(channel, source string, latency time.Duration)
	// ReconciliationDifferences: a reconciliation of channel's bill found n rows of class
	// (missing locally, missing at the channel, amount mismatch, refund mismatch, …).
	ReconciliationDifferences(channel, class string, n int)
	// ReconciliationStored: a report of channel's bill of date (yyyy-MM-dd, China time) was
	// stored, with its layers' summaries (every layer, zeros included).
	ReconciliationStored(channel, date string, layers map[ReconLayer]LayerSummary)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) Notification(string, string)   {}
func (NopObserver) Query(string, string, Outcome) {}
func (NopObserver) AutoRefund(string, string)     {}
func (NopObserver) RefundAnswer(string, Outcome)  {}
func (NopObserver) QueriesExhausted(string)       {}

func (NopObserver) NotificationReceived(string, bool)                                {}
func (NopObserver) NotificationUnlogged(string)                                      {}
func (NopObserver) PaymentConverged(string, string, time.Duration)                   {}
func (NopObserver) ReconciliationDifferences(string, string, int)                    {}
func (NopObserver) ReconciliationStored(string, string, map[ReconLayer]LayerSummary) {}

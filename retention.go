package orderpay

import (
	"context"
	"time"
)

// RetentionPolicy is how long orderpay keeps what only operators read. What proves money
// moved is never removed by it: transitions (their reasons and actors), orders, payments,
// channel orders, refunds, after-sales, parcels, reconciliation reports and the audit log.
type RetentionPolicy struct {
	// Logs: the notification and query logs, and the attempts and bodies of webhook
	// deliveries that were delivered.
	Logs time.Duration
	// Published: outbox messages once published (a webhook replay reaches back this far),
	// and stock holds once ended.
	Published time.Duration
	// RawBodies: the channels' raw answers and notifications kept in transitions' history.
	RawBodies time.Duration
}

// DefaultRetention keeps logs 30 days, published messages 7 days, raw bodies 90 days.
var DefaultRetention = RetentionPolicy{Logs: 30 * 24 * time.Hour, Published: 7 * 24 * time.Hour, RawBodies: 90 * 24 * time.Hour}

// Validate checks that every period is positive.
func (p RetentionPolicy) Validate() error {
	if p.Logs <= 0 || p.Published <= 0 || p.RawBodies <= 0 {
		return Errorf(EINVALID, "retention periods must be positive")
	}
	return nil
}

// RetentionResult counts what one retention pass removed.
type RetentionResult struct {
	NotificationLog int64 `json:"notification_log"` // rows deleted
	QueryLog        int64 `json:"query_log"`
	Outbox          int64 `json:"outbox"`
	WebhookAttempts int64 `json:"webhook_attempts"`
	WebhookBodies   int64 `json:"webhook_bodies"` // delivered deliveries whose body was cleared
	RequestKeys     int64 `json:"request_keys"`   // expired idempotency keys
	StockHolds      int64 `json:"stock_holds"`
	RawBodies       int64 `json:"raw_bodies"` // raw bodies of transitions deleted (the transitions stay)
}

// Retainer removes, as of now, what the policy no longer keeps, in small batches.
type Retainer interface {
	Retain(ctx context.Context, now time.Time, p RetentionPolicy) (RetentionResult, error)
}

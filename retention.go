package orderpay

import (
	"context"
	"fmt"
	"strings"
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
	// and stock holds and tickets once ended (tickets at least a day, their
	// Idempotency-Key's life).
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

// RetentionNeeds is what, in a configuration, says how long something live can still need
// what retention removes (docs/design.md §6, "What retention deletes").
type RetentionNeeds struct {
	// PayWindows: an order stays payable for its type's window; the longest counts.
	PayWindows PayWindows
	// CloseGrace: the timeout close starts this long after the deadline; the active queries
	// of an attempt run until then (the query schedule's horizon).
	CloseGrace time.Duration
	// RefundRetryFor: how long a refund refused for now is retried by itself before it
	// goes before an operator (RefundRetryPlan.For).
	RefundRetryFor time.Duration
}

// Live is how long after an order is created it may still be paid, queried and closed:
// its longest pay window plus the close grace.
func (n RetentionNeeds) Live() time.Duration {
	var longest time.Duration
	for _, w := range n.PayWindows {
		longest = max(longest, w)
	}
	return longest + n.CloseGrace
}

// Floors are the shortest retention periods that keep everything something live needs:
//   - Published (ended stock holds, published outbox rows): Live. A hold ends no earlier
//     than its order's creation, and the order stays payable, its payment looking for the
//     hold (and its cancel too), at most Live after that.
//   - Logs (the notification and query logs): Live, or the refund retry window if longer.
//     They are what an operator reads to confirm a payment by hand while it may still be
//     paid, and to settle a refund when its retries run out.
//   - RawBodies (the channels' raw answers in the histories): the same, for the same
//     reasons.
func (n RetentionNeeds) Floors() RetentionPolicy {
	live := n.Live()
	return RetentionPolicy{Logs: max(live, n.RefundRetryFor), Published: live, RawBodies: max(live, n.RefundRetryFor)}
}

// CheckFloors refuses a policy any of whose periods is below its floor (Floors), naming
// the period's flag, its value and the floor, and what the floor comes from.
func (p RetentionPolicy) CheckFloors(n RetentionNeeds) error {
	f := n.Floors()
	var problems []string
	for _, c := range []struct {
		flag      string
		got, want time.Duration
		why       string
	}{
		{"--retain-published", p.Published, f.Published, "the longest pay window plus the close grace: a released stock hold of an order that can still be paid"},
		{"--retain-logs", p.Logs, f.Logs, "the longest pay window plus the close grace, or the refund retry window: the logs of a payment or refund still on its way"},
		{"--retain-raw", p.RawBodies, f.RawBodies, "the longest pay window plus the close grace, or the refund retry window: the channel's answers of a payment or refund still on its way"},
	} {
		if c.got < c.want {
			problems = append(problems, fmt.Sprintf("%s %s is below its floor %s (%s)", c.flag, c.got, c.want, c.why))
		}
	}
	if len(problems) > 0 {
		return Errorf(EINVALID, "%s", strings.Join(problems, "; "))
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
	Tickets         int64 `json:"tickets"`      // ended tickets of queued SKUs
	RawBodies       int64 `json:"raw_bodies"`   // raw bodies of transitions deleted (the transitions stay)
	ChartCounts     int64 `json:"chart_counts"` // the charts' hourly rows (one an hour and kind) before the longest window
}

// Retainer removes, as of now, what the policy no longer keeps, in small batches.
type Retainer interface {
	Retain(ctx context.Context, now time.Time, p RetentionPolicy) (RetentionResult, error)
}

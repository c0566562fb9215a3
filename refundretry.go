package orderpay

import (
	"fmt"
	"strings"
	"time"
)

// RefundRetryPlan is when a refund the channel refused for now (the merchant's balance
// cannot cover it, too many requests) is sent again, always under its own number: after
// the first refusal wait Schedule[0], after the second Schedule[1], and so on, then Every
// after each later one, for as long as the next try still falls within For of the first
// refusal. The refusal after which no try fits goes before an operator.
type RefundRetryPlan struct {
	Schedule []time.Duration
	Every    time.Duration
	For      time.Duration
}

// DefaultRefundRetryPlan: 1 min, 5 min, 30 min, 2 h, 6 h, then every 12 h for 7 days. A
// shop that tops up its balance within the day sees the refund go through at the next try;
// one that does not is told within a minute (the metric and the log), and the queue holds
// the refund after a week.
var DefaultRefundRetryPlan = RefundRetryPlan{
	Schedule: []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour},
	Every:    12 * time.Hour,
	For:      7 * 24 * time.Hour,
}

// Validate checks that every wait is positive and the window holds the first try.
func (p RefundRetryPlan) Validate() error {
	for _, d := range p.Schedule {
		if d <= 0 {
			return Errorf(EINVALID, "refund retry schedule: every wait must be positive, not %s", d)
		}
	}
	switch {
	case p.Every <= 0:
		return Errorf(EINVALID, "refund retries: the wait after the schedule must be positive, not %s", p.Every)
	case p.For < p.wait(1):
		return Errorf(EINVALID, "refund retries: the window (%s) must hold the first try (%s)", p.For, p.wait(1))
	}
	return nil
}

// wait is how long after the tries-th refusal (from 1) the next try comes.
func (p RefundRetryPlan) wait(tries int) time.Duration {
	if tries >= 1 && tries <= len(p.Schedule) {
		return p.Schedule[tries-1]
	}
	return p.Every
}

// Next is when to send the refund again after its tries-th refusal (from 1) at now, the
// first of them at since; ok is false when that try would fall past since+For: the
// retries ran out.
func (p RefundRetryPlan) Next(tries int, since, now time.Time) (next time.Time, ok bool) {
	next = now.Add(p.wait(tries))
	return next, !next.After(since.Add(p.For))
}

// Scaled returns the plan with every duration passed through f (the time scale of a demo).
func (p RefundRetryPlan) Scaled(f func(time.Duration) time.Duration) RefundRetryPlan {
	out := RefundRetryPlan{Schedule: make([]time.Duration, len(p.Schedule)), Every: f(p.Every), For: f(p.For)}
	for i, d := range p.Schedule {
		out.Schedule[i] = f(d)
	}
	return out
}

// String writes the schedule as ParseDurations reads it.
func (p RefundRetryPlan) String() string { return FormatDurations(p.Schedule) }

// ParseDurations reads a comma-separated list of Go durations ("1m,5m,30m").
func ParseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a list of durations like 1m,5m,30m: %w", s, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatDurations writes durations as ParseDurations reads them.
func FormatDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"orderpay"
)

// Defaults of the daily schedule.
const (
	// DailyAtDefault is when the day's reconciliation runs, China time: after both bills
	// are out (WeChat from 09:00, Alipay after 10:00, docs/channels.md §A3/§B1), with a margin.
	DailyAtDefault = "10:30"
	// RetryDefault is how soon a channel whose bill could not be had (not out yet, no
	// answer) is tried again, until the next day's run.
	RetryDefault = 30 * time.Minute
)

// ParseDailyAt reads "HH:MM" (24 h, China time) as the offset into the day.
func ParseDailyAt(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != len("15:04") {
		return 0, orderpay.Errorf(orderpay.EINVALID, "reconcile time %q is not HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// NextDailyRun is the first moment strictly after now that is at into a day in China
// time, and the bill date that run reconciles: the day before it.
func NextDailyRun(now time.Time, at time.Duration) (time.Time, string) {
	local := now.In(orderpay.ChinaTime)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, orderpay.ChinaTime)
	next := day.Add(at)
	if !next.After(now) {
		next = day.AddDate(0, 0, 1).Add(at)
	}
	return next, orderpay.BillDay(next.AddDate(0, 0, -1))
}

// Schedule runs the reconciliation of the previous day for every channel, daily at a time
// of day in China time. A channel whose run fails (its bill is not out yet, the channel
// did not answer) is retried every Retry until it succeeds or the next day's run comes.
// It is a start/stop worker; several instances each run it (each run repairs through
// conditional updates, and each stores its own report).
type Schedule struct {
	Reconciler *Reconciler // required
	// At is the time of day, "HH:MM" China time. Defaults to DailyAtDefault (10:30).
	At string
	// Retry defaults to RetryDefault (30 minutes).
	Retry time.Duration
	// Clock decides when runs are due. Defaults to the system clock.
	Clock orderpay.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start validates the schedule and starts its goroutine; Stop ends it.
func (s *Schedule) Start(ctx context.Context) error {
	at, err := ParseDailyAt(cmp.Or(s.At, DailyAtDefault))
	if err != nil {
		return err
	}
	if s.Reconciler == nil {
		return fmt.Errorf("reconcile: Schedule.Reconciler is required")
	}
	s.Retry = cmp.Or(s.Retry, RetryDefault)
	s.Clock = cmp.Or[orderpay.Clock](s.Clock, orderpay.SystemClock{})
	s.Logger = cmp.Or(s.Logger, slog.Default())
	ctx, s.cancel = context.WithCancel(ctx)
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		s.loop(ctx, at)
	}()
	return nil
}

// Stop ends the schedule and waits for a run in progress to finish.
func (s *Schedule) Stop() {
	if s.cancel != nil {
		s.cancel()
		s.done.Wait()
	}
}

func (s *Schedule) loop(ctx context.Context, at time.Duration) {
	for {
		next, date := NextDailyRun(s.Clock.Now(), at)
		if !sleep(ctx, next.Sub(s.Clock.Now())) {
			return
		}
		pending := s.Reconciler.Channels()
		for len(pending) > 0 {
			pending = s.RunDay(ctx, date, pending)
			following, _ := NextDailyRun(s.Clock.Now(), at)
			if len(pending) == 0 || !s.Clock.Now().Add(s.Retry).Before(following) {
				break
			}
			if !sleep(ctx, s.Retry) {
				return
			}
		}
	}
}

// RunDay reconciles date for each of channels and returns those whose run failed.
func (s *Schedule) RunDay(ctx context.Context, date string, channels []string) []string {
	var failed []string
	for _, ch := range channels {
		if _, err := s.Reconciler.Run(ctx, ch, date); err != nil {
			if ctx.Err() != nil {
				return channels
			}
			s.Logger.Warn("daily reconciliation failed; will retry", "channel", ch, "date", date, "err", err)
			failed = append(failed, ch)
		}
	}
	return failed
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

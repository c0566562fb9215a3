package payment

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"orderpay"
)

// Active queries (docs/design.md §5): a PAYING attempt is queried on a decreasing
// schedule counted from its submission, until it is final or its deadline plus grace has
// passed (from then on the timeout close owns it). Two mechanisms carry the schedule:
//
//   - push: a broker timer per attempt ("query.<out_trade_no>"), set again after each
//     query, which replaces the previous one;
//   - pull: the pending-query table, one row per PAYING attempt with its next due time,
//     swept for rows whose timer never came (the broker lost it, or a crash came between
//     the commit and the timer).
//
// Both go through RunQuery, which takes a step only if the row still has the number of
// attempts the step was planned for: two instances, or a timer and the sweeper, never
// query the same step twice.

// QueryScheduleDefault is when an attempt is queried, counted from its submission: at 10 s,
// 30 s, 1 m, 1 m 30 s, 2 m, 5 m and 7 m; then every QueryEveryDefault.
var QueryScheduleDefault = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 90 * time.Second,
	2 * time.Minute, 5 * time.Minute, 7 * time.Minute}

// Defaults of the query machinery.
const (
	QueryEveryDefault        = 10 * time.Minute
	UnknownRetryDefault      = 5 * time.Second
	MaxQueryAttemptsDefault  = 60
	SweepLagDefault          = 2 * time.Second
	PollQueryIntervalDefault = time.Second
	PollGraceDefault         = 300 * time.Millisecond
	CloseGraceDefault        = 30 * time.Second
	// A buyer's reads trigger at most WatchQueriesPerBuyerDefault channel queries per
	// WatchQueryWindowDefault, across all their orders: an honest buyer watches one or
	// two payments, queried once a PollQueryInterval each after the grace.
	WatchQueriesPerBuyerDefault = 10
	WatchQueryWindowDefault     = 10 * time.Second
	// watchersTracked bounds how many watchers' windows are kept in memory.
	watchersTracked = 100_000
)

// timerPayload is what an attempt's query timer carries: the step it was set for.
type timerPayload struct {
	Attempts int `json:"attempts"`
}

// QueryTimerName is the broker timer of an attempt's next query.
func QueryTimerName(outTradeNo string) string { return "query." + outTradeNo }

// nextQueryAt is when the step after attempts queries is due: the schedule from the
// attempt's submission, then every QueryEvery; never past deadline + grace, after which the
// timeout close owns the attempt and only the safety net looks at it, every QueryEvery.
func (s *Service) nextQueryAt(submitted, deadline time.Time, attempts int, now time.Time) time.Time {
	sched := s.cfg.QuerySchedule
	var at time.Time
	if attempts < len(sched) {
		at = submitted.Add(sched[attempts])
	} else {
		at = submitted.Add(sched[len(sched)-1] + time.Duration(attempts-len(sched)+1)*s.cfg.QueryEvery)
	}
	if end := deadline.Add(s.cfg.CloseGrace); at.After(end) {
		at = end
	}
	if !at.After(now) {
		at = now.Add(min(s.cfg.QueryEvery, s.cfg.UnknownRetry))
	}
	return at
}

// startQueries arms the first query of an attempt that just became PAYING (its pending row
// was written with the transition). An unknown precreate answer gets an early query of its
// own.
func (s *Service) startQueries(ctx context.Context, outTradeNo string, nextAt time.Time) {
	s.setQueryTimer(ctx, outTradeNo, 0, nextAt)
}

func (s *Service) setQueryTimer(ctx context.Context, outTradeNo string, attempts int, at time.Time) {
	if s.cfg.Timers == nil {
		return
	}
	payload, _ := json.Marshal(timerPayload{Attempts: attempts})
	if err := s.cfg.Timers.SetTimer(context.WithoutCancel(ctx), QueryTimerName(outTradeNo), at, payload); err != nil {
		// The pending-query row is the safety net: the sweeper takes it when it is due.
		s.log.Warn("query timer not set; the sweeper will take it", "out_trade_no", outTradeNo, "err", err)
	}
}

// OnQueryTimer handles an attempt's query timer (the broker calls it when it fires).
func (s *Service) OnQueryTimer(ctx context.Context, name string, payload []byte) error {
	outTradeNo, ok := strings.CutPrefix(name, "query.")
	if !ok {
		return nil
	}
	var p timerPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		s.log.Warn("malformed query timer dropped", "out_trade_no", outTradeNo, "err", err)
		return nil
	}
	_, err := s.RunQuery(ctx, outTradeNo, p.Attempts, "schedule")
	return err
}

// RunQuery takes one scheduled step of an attempt's active queries: if its pending row still
// has exactly attempts queries (else another worker took this step: nothing to do), it
// queries the channel, applies a payment, and otherwise records the step and arms the next.
// It reports the channel's outcome, or "" if it did nothing.
func (s *Service) RunQuery(ctx context.Context, outTradeNo string, attempts int, trigger string) (orderpay.Outcome, error) {
	pq, err := s.cfg.Store.PendingQuery(ctx, outTradeNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return "", nil // the attempt is no longer PAYING
	}
	if err != nil {
		return "", err
	}
	if pq.Flagged || pq.Attempts != attempts {
		return "", nil
	}
	co, err := s.cfg.Store.ChannelOrder(ctx, outTradeNo)
	if err != nil {
		return "", err
	}
	if co.Method == orderpay.MethodBarcode {
		return s.runBarcodeStep(ctx, co, attempts, trigger)
	}
	p, err := s.cfg.Store.Payment(ctx, co.PaymentNo)
	if err != nil {
		return "", err
	}
	q := s.query(ctx, co, trigger)
	if paid, err := s.applyQuery(ctx, co, q); paid || err != nil {
		return q.Outcome, err
	}
	now := orderpay.Now(s.cfg.Clock)
	next := s.nextQueryAt(co.CreatedAt, p.PayDeadline, attempts+1, now)
	if q.Outcome == orderpay.OutcomeUnknown {
		next = earlier(next, now.Add(s.cfg.UnknownRetry))
	}
	flag := attempts+1 >= s.cfg.MaxQueryAttempts
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.AdvancePendingQuery(ctx, outTradeNo, attempts, string(q.Outcome), next, flag, now)
	})
	switch {
	case orderpay.ErrorCode(err) == orderpay.ECONFLICT:
		return q.Outcome, nil // taken meanwhile, or the attempt became final
	case err != nil:
		return q.Outcome, err
	case flag:
		s.log.Error("attempt still open after every query: flagged for reconciliation", "out_trade_no", outTradeNo,
			"payment_no", co.PaymentNo, "channel", co.Channel, "attempts", attempts+1, "last_outcome", q.Outcome)
		s.cfg.Observer.QueriesExhausted(co.Channel)
	default:
		s.setQueryTimer(ctx, outTradeNo, attempts+1, next)
	}
	return q.Outcome, nil
}

// query asks the channel about an attempt, under the account its method's trades are made
// under (orderpay.ChannelFor), and tells the observer.
func (s *Service) query(ctx context.Context, co *orderpay.ChannelOrder, trigger string) orderpay.QueryResult {
	ch, ok := s.cfg.Channels[co.Channel]
	if !ok {
		return orderpay.QueryResult{Outcome: orderpay.OutcomeUnknown, Detail: "no channel " + co.Channel}
	}
	q := orderpay.ChannelFor(ch, co.Method).Query(ctx, co.OutTradeNo)
	s.cfg.Observer.Query(co.Channel, trigger, q.Outcome)
	s.logQuery(ctx, co, trigger, q)
	return q
}

// QueryDue is the safety net: it takes every pending query that is due (and has been for
// SweepLag, so that its timer, if it still exists, normally wins) and runs it, on up to
// workers goroutines. It reports how many it ran.
func (s *Service) QueryDue(ctx context.Context, limit, workers int) (int, error) {
	due, err := s.cfg.Store.DuePendingQueries(ctx, orderpay.Now(s.cfg.Clock).Add(-s.cfg.SweepLag), limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	return len(due), orderpay.ForEach(ctx, due, workers, func(ctx context.Context, pq orderpay.PendingQuery) error {
		if _, err := s.RunQuery(ctx, pq.OutTradeNo, pq.Attempts, "sweep"); err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return err
		}
		return nil
	})
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// pollLimiter lets one query per key through per interval: queries triggered by buyers
// polling or by unverifiable notifications must not become a way to flood a channel.
type pollLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time // when a key last got a query
	seen map[string]time.Time // when a key was first watched
}

// first returns when key was first watched: now, for a key never seen (or forgotten,
// keep after it was first seen, when the map grew large).
func (l *pollLimiter) first(key string, now time.Time, keep time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]time.Time{}
	}
	if t, ok := l.seen[key]; ok {
		return t
	}
	if len(l.seen) > 100_000 {
		for k, t := range l.seen {
			if now.Sub(t) >= keep {
				delete(l.seen, k)
			}
		}
	}
	l.seen[key] = now
	return now
}

func (l *pollLimiter) allow(key string, now time.Time, every time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if t, ok := l.last[key]; ok && now.Sub(t) < every {
		return false
	}
	if len(l.last) > 100_000 { // forget old keys; a forgotten one just gets its next query
		for k, t := range l.last {
			if now.Sub(t) >= every {
				delete(l.last, k)
			}
		}
	}
	l.last[key] = now
	return true
}

// watcherBudget counts each watcher's watch queries in a fixed window: at most max per
// window. It keeps at most watchersTracked watchers: when full, the windows that ended are
// swept, and if every one is still running a new watcher gets no query until some end
// (their reads answer from the database; notifications and the query timers still find
// their payments).
type watcherBudget struct {
	mu      sync.Mutex
	windows map[string]watchWindow
}

type watchWindow struct {
	start time.Time
	used  int
}

// window returns the watcher's current window (a fresh one if theirs ended), and whether
// there is room to track it; the caller holds mu.
func (b *watcherBudget) window(watcher string, now time.Time, every time.Duration) (watchWindow, bool) {
	if b.windows == nil {
		b.windows = map[string]watchWindow{}
	}
	w, ok := b.windows[watcher]
	if ok && now.Sub(w.start) < every {
		return w, true
	}
	if !ok && len(b.windows) >= watchersTracked {
		for k, w := range b.windows {
			if now.Sub(w.start) >= every {
				delete(b.windows, k)
			}
		}
		if len(b.windows) >= watchersTracked {
			return watchWindow{}, false
		}
	}
	return watchWindow{start: now}, true
}

// left reports whether the watcher has a query left in their window.
func (b *watcherBudget) left(watcher string, now time.Time, max int, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.window(watcher, now, every)
	return ok && w.used < max
}

// take uses one of the watcher's queries, if they have one left.
func (b *watcherBudget) take(watcher string, now time.Time, max int, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.window(watcher, now, every)
	if !ok || w.used >= max {
		return false
	}
	w.used++
	b.windows[watcher] = w
	return true
}

// Poll is a buyer watching an unpaid order: every PAYING attempt of its payment is queried
// (each at most once per PollQueryInterval), so that a watching buyer sees PAID within seconds
// even when the notification is lost (docs/design.md §5). Not at once, though: the payment is
// first queried PollGrace after a watcher first found it open, by when a notification that
// was not lost has arrived (it takes milliseconds); so the buyer's looks right after paying
// cost the channel nothing, and the database one read each. However many streams and polls
// watch one payment, one round of queries is in flight for it at a time, and every watcher
// waiting shares it; so the channel sees at most one query per open attempt per interval,
// never one per watcher. Poll waits for the round, but no longer than ctx allows; the round
// itself does not end with one watcher leaving.
//
// Poll then returns what Result would: the payment's success, if it has one, for the order
// system to apply if the push has not reached it; and the payment's attempts as it last read
// them (for the buyer's page to show the code of the open one), none if there is no payment.
func (s *Service) Poll(ctx context.Context, orderNo string) (*orderpay.PaymentSucceeded, []orderpay.ChannelOrder, error) {
	p, read, err := s.cfg.Store.PaymentWithAttempts(ctx, orderNo)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return s.PollRead(ctx, orderNo, "", p, read)
}

// PollRead is Poll of the order's payment p and its attempts read, as the caller just
// read them (with the order's page: Store.OrderPage); p is nil when the order has no
// payment yet. watcher is who looks (the order's buyer; "" for none): once the watcher's
// reads have triggered WatchQueriesPerBuyer queries in the current WatchQueryWindow,
// whichever payments they were of, PollRead answers from what was read, querying nothing,
// until the window ends.
func (s *Service) PollRead(ctx context.Context, orderNo, watcher string, p *orderpay.Payment, read []orderpay.ChannelOrder) (*orderpay.PaymentSucceeded, []orderpay.ChannelOrder, error) {
	if p == nil {
		return nil, nil, nil
	}
	now := orderpay.Now(s.cfg.Clock)
	if s.cfg.PassiveOnly || p.Status != orderpay.PaymentPaying ||
		now.Sub(s.limiter.first("seen:"+p.No, now, time.Hour)) < s.cfg.PollGrace ||
		(watcher != "" && !s.watchers.left(watcher, now, s.cfg.WatchQueriesPerBuyer, s.cfg.WatchQueryWindow)) {
		return paidResult(p, read), read, nil
	}
	round := s.polls.DoChan(p.No, func() (any, error) {
		qctx := context.WithoutCancel(ctx)
		// Read again: this round may be another watcher's, started on an older read.
		attempts, err := s.cfg.Store.ChannelOrders(qctx, p.No)
		if err != nil {
			return nil, err
		}
		now := orderpay.Now(s.cfg.Clock)
		for i := range attempts {
			// Per attempt, the interval is shared with the queries forged or unverifiable
			// notifications trigger (queryClaimed): one query per attempt per interval,
			// whoever asks.
			if attempts[i].Status != orderpay.ChannelOrderPaying || !s.limiter.allow("trade:"+attempts[i].OutTradeNo, now, s.cfg.PollQueryInterval) {
				continue
			}
			// Then the watcher's own bound: the round's watcher is the payment's buyer
			// (whoever shares the round watches the same order).
			if watcher != "" && !s.watchers.take(watcher, now, s.cfg.WatchQueriesPerBuyer, s.cfg.WatchQueryWindow) {
				break
			}
			q := s.query(qctx, &attempts[i], "poll")
			if _, err := s.applyQuery(qctx, &attempts[i], q); err != nil {
				s.log.Warn("poll query could not be applied", "out_trade_no", attempts[i].OutTradeNo, "err", err)
			}
		}
		return nil, nil
	})
	select {
	case <-round:
	case <-ctx.Done():
	}
	// The round may have found it paid: look again, even if ctx ended meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultReadTimeout)
	defer cancel()
	return s.resultByOrder(rctx, orderNo)
}

// resultReadTimeout bounds Poll's last read, which runs even if the watcher left.
const resultReadTimeout = 5 * time.Second

// queryClaimed queries the attempt an unverifiable notification claims to be about, if it
// is ours and PAYING, at most once per PollQueryInterval: the notification itself is never
// applied (docs/design.md §2), but it may be the only sign that a payment happened.
func (s *Service) queryClaimed(ctx context.Context, outTradeNo string) {
	if s.cfg.PassiveOnly || outTradeNo == "" || !s.limiter.allow("trade:"+outTradeNo, orderpay.Now(s.cfg.Clock), s.cfg.PollQueryInterval) {
		return
	}
	select {
	case s.claimSlots <- struct{}{}:
	default:
		return // enough of these in flight already
	}
	s.cfg.Go(func() {
		defer func() { <-s.claimSlots }()
		// The notification's request may end at once: the query outlives it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		co, err := s.cfg.Store.ChannelOrder(ctx, outTradeNo)
		if err != nil || co.Status != orderpay.ChannelOrderPaying {
			return
		}
		q := s.query(ctx, co, "notification")
		if _, err := s.applyQuery(ctx, co, q); err != nil {
			s.log.Warn("query after an unverifiable notification could not be applied", "out_trade_no", outTradeNo, "err", err)
		}
	})
}

package chaos

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"orderpay"
	"orderpay/chaos/audit"
	"orderpay/natsbus"
)

// A queued flash sale in a chaos run (Config.QueuedFlash): a queued SKU of few units, and,
// at the start of the load, a rush of buyers for it, all at once. Each rusher orders one
// unit and is answered with a ticket, follows the ticket until it ends, and pays the order
// it became (three in four) or leaves it to its deadline. The kills and the broker's
// restarts meet the queue while it drains: the first kill and the first NATS restart
// wait until some tickets have become orders and others still wait. The auditor's I10
// holds every ticket to one end.

// The queued SKU's settings in a run.
const (
	// queuedFlashWait is how long a ticket may wait (the SKU's queue_wait_seconds, which
	// the server does not compress: its tickets expire half an hour after they are given),
	// longer than any drain a kill and a broker restart stall.
	queuedFlashWait = 30 * time.Minute
	// queueStall is how long, in wall time, a follower lets its ticket neither move up the
	// queue nor end before it gives up: longer than a kill's downtime and the bus's
	// redelivery after it (a message the killed server held comes back after the bus's
	// AckWait), a broker restart's, and an unpaid order's deadline giving a unit back, with
	// room for a loaded machine; far shorter than the tickets' wait.
	queueStall = natsbus.DefaultAckWait + 30*time.Second
	// queuedFlashDrain is how long the drain of the units should take at the SKU's pace, in
	// wall time, so that a kill and a broker restart can land in it.
	queuedFlashDrain = 10 * time.Second
	// NATSDowntime is how long the broker stays down at each restart, in wall time.
	NATSDowntime = 2 * time.Second
	// drainAimWait bounds how long an aimed kill or restart waits for the queue to drain.
	drainAimWait = time.Minute
)

// queuedFlashPace is the queued SKU's orders per second: its units in queuedFlashDrain.
func queuedFlashPace(units int) int64 {
	return max(1, int64(math.Ceil(float64(units)/queuedFlashDrain.Seconds())))
}

// QueueReport is what the rush for the queued SKU saw.
type QueueReport struct {
	SKU          string `json:"sku"`
	Units        int    `json:"units"`
	Pace         int64  `json:"queue_pace"`
	WaitSeconds  int64  `json:"queue_wait_seconds"`
	Rushers      int    `json:"rushers"`
	Tickets      int    `json:"tickets"`  // tickets the rushers were given
	Replayed     int    `json:"replayed"` // of them, a ticket the buyer held already (200)
	SoldOutAtOrd int    `json:"sold_out_at_order"`
	// Seen counts the final states the rushers' reads of their tickets showed; Unanswered
	// the rushers who never saw their ticket end (or got none).
	Seen       map[string]int `json:"seen"`
	Unanswered int            `json:"unanswered"`
	// GaveUp counts, of the rushers who never saw their ticket end, why they stopped
	// following it: "stalled" (the queue neither moved nor ended it for queueStall), "past
	// its expiry", "stopped" (the run's load ended).
	GaveUp map[string]int `json:"gave_up,omitempty"`
	// LongestPauseMS is the longest time between two of the queue's tickets ending (or the
	// rush's start and the first), from the database, and PauseAtMS when, from the rush's
	// start, that pause began: where a drain stood still.
	LongestPauseMS int64 `json:"longest_pause_ms"`
	PauseAtMS      int64 `json:"pause_at_ms"`
	// InDB counts the tickets in the database by state, at the audit.
	InDB map[string]int `json:"in_db"`
	// Paid and Left count the ORDERED rushers who paid their order and who left it;
	// PayFailed those whose payment did not go through (the order could not be read, the
	// code not had, the wallet refused it: a fault, or the order's deadline came first).
	Paid      int `json:"paid"`
	Left      int `json:"left"`
	PayFailed int `json:"pay_failed"`
	// LastAnswerMS is from the rush's start to the last rusher told its ticket's end.
	LastAnswerMS int64 `json:"last_answer_ms"`
	// KillMidDrain says the aimed kill met the queue draining (tickets ORDERED and
	// WAITING at that moment), with the counts then.
	KillMidDrain *DrainMoment `json:"kill_mid_drain,omitempty"`
}

// DrainMoment is the queue's state at a kill or a broker restart.
type DrainMoment struct {
	AtMS     int64 `json:"at_ms"`
	Ordered  int   `json:"ordered"`
	Waiting  int   `json:"waiting"`
	MidDrain bool  `json:"mid_drain"`
}

// NATSRestart is one stop and start of the broker.
type NATSRestart struct {
	DrainMoment
	DowntimeMS int64 `json:"downtime_ms"`
	Aimed      bool  `json:"aimed"` // waited for the queue to drain
}

// queue is the run's queued SKU and what its rushers saw.
type queue struct {
	sku   string
	units int
	pace  int64

	mu         sync.Mutex
	given      []audit.GivenTicket
	rep        QueueReport
	start      time.Time
	lastAnswer time.Time
	killMoment *DrainMoment
}

// setUpQueue creates the run's queued SKU.
func (r *runner) setUpQueue(ctx context.Context) error {
	if r.cfg.QueuedFlash == 0 {
		return nil
	}
	q := &queue{sku: r.runID + "-queued-flash", units: r.cfg.QueuedFlash, pace: queuedFlashPace(r.cfg.QueuedFlash)}
	if err := r.client.AddSKU(ctx, SKUSpec{SKU: q.sku, Price: 990, Stock: int64(q.units), ProductType: "fast", StockPolicy: "order",
		StockBuckets: min(16, q.units), Queued: true, QueueWaitSeconds: int64(queuedFlashWait / time.Second), QueuePace: q.pace}, nil); err != nil {
		return fmt.Errorf("chaos: create the queued SKU %s: %w", q.sku, err)
	}
	q.rep = QueueReport{SKU: q.sku, Units: q.units, Pace: q.pace, WaitSeconds: int64(queuedFlashWait / time.Second),
		Rushers: r.cfg.QueuedFlashBuyers, Seen: map[string]int{}, InDB: map[string]int{}, GaveUp: map[string]int{}}
	r.queue = q
	return nil
}

// rusherIndex is the buyer the k-th of n rushers is, spread over the run's buyers.
func rusherIndex(k, n, orders int) int { return k * orders / n }

// rush sends the rushers at the queued SKU all at once (Concurrency of them in flight),
// and returns when every one is done: its ticket ended and its order paid or left, or ctx
// ended.
func (r *runner) rush(ctx context.Context) {
	q := r.queue
	q.mu.Lock()
	q.start = time.Now()
	q.mu.Unlock()
	slots := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	for k := range r.cfg.QueuedFlashBuyers {
		i := rusherIndex(k, r.cfg.QueuedFlashBuyers, r.cfg.Orders)
		b := &buyer{r: r, plan: r.population.Plan(r.cfg.Seed, i)}
		b.client = r.client.As(b.id())
		wg.Go(func() { r.rusher(ctx, b, slots) })
	}
	wg.Wait()
}

// rusher is one buyer's rush: order a unit of the queued SKU, follow the ticket, pay or
// leave the order.
func (r *runner) rusher(ctx context.Context, b *buyer, slots chan struct{}) {
	q := r.queue
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	var a *QueueAnswer
	err := b.retry(ctx, "queue", func() (err error) {
		a, err = b.client.QueueOrder(ctx, b.id(), fmt.Sprintf("%s-rush-%d", r.runID, b.plan.Index), Item{SKU: q.sku, Qty: 1})
		return err
	})
	<-slots
	switch {
	case CodeOf(err) == "EOUTOFSTOCK":
		q.answered(TicketSoldOut, true)
		return
	case err != nil:
		return
	case a.Ticket.TicketID == "":
		r.stats.outcome(fmt.Sprintf("queued order answered %d without a ticket", a.Status))
		return
	}
	q.mu.Lock()
	q.rep.Tickets++
	if a.Replayed {
		q.rep.Replayed++
	}
	g := audit.GivenTicket{ID: a.Ticket.TicketID, BuyerID: b.id(), SKU: q.sku}
	q.given = append(q.given, g)
	at := len(q.given) - 1
	q.mu.Unlock()

	t, gaveUp := r.followTicket(ctx, b, a.Ticket)
	if t == nil {
		r.stats.outcome("queued: the buyer never saw its ticket end (" + gaveUp + ")")
		q.mu.Lock()
		q.rep.GaveUp[gaveUp]++
		q.mu.Unlock()
		return
	}
	q.mu.Lock()
	q.given[at].Seen = orderpay.TicketState(t.State)
	q.mu.Unlock()
	q.answered(t.State, false)
	if t.State != TicketOrdered {
		return
	}
	r.stats.created(time.Now())
	b.orderNo = t.OrderNo
	o, err := b.client.Order(ctx, t.OrderNo)
	if err != nil {
		r.stats.apiError("queue_order", err)
		q.mu.Lock()
		q.rep.PayFailed++
		q.mu.Unlock()
		return
	}
	b.deadline = r.windowEnd(o, time.Now())
	// Three in four pay at once by their channel's QR code; the others leave the order,
	// which ends CANCELLED at its deadline with its unit back.
	if b.plan.Index%4 == 3 {
		q.mu.Lock()
		q.rep.Left++
		q.mu.Unlock()
		return
	}
	paid := false
	if p := b.ask(ctx, "queue_pay", PayWay{b.plan.Channel, orderpay.MethodQR}); p != nil {
		paid = b.payInstruction(ctx, "queue_wallet", p) != nil
	}
	q.mu.Lock()
	if paid {
		q.rep.Paid++
	} else {
		q.rep.PayFailed++
	}
	q.mu.Unlock()
}

// followTicket reads the ticket until it ends, after 100 ms and then half as long again
// each time, at most a second apart, through kills (the client retries a read that finds
// the server down) and broker restarts. It gives up, returning nil, when ctx ends, when the
// ticket is still waiting past its expiry and the settle time, or when the queue stood still
// for queueStall: the ticket neither moved up nor ended; it then says why. A wall-clock bound from the rush's
// start would blame the server for the drain a kill, a broker restart and a loaded machine
// stretch (the server keeps its own promise: the ticket ends by its expiry); the stall
// bound still fails a queue that stops draining, well before that expiry.
func (r *runner) followTicket(ctx context.Context, b *buyer, t TicketView) (*TicketView, string) {
	until := time.Now().Add(r.cfg.scaled(queuedFlashWait + r.cfg.SettleTimeout))
	if !t.ExpiresAt.IsZero() {
		until = t.ExpiresAt.Add(r.cfg.scaled(r.cfg.SettleTimeout))
	}
	pause := 100 * time.Millisecond
	moved, pos := time.Now(), t.Position
	for cur := &t; ; {
		if ticketFinal(cur.State) {
			return cur, ""
		}
		switch now := time.Now(); {
		case now.After(until):
			return nil, "past its expiry"
		case now.Sub(moved) > queueStall:
			return nil, "stalled"
		case !sleepCtx(ctx, pause):
			return nil, "stopped"
		}
		pause = min(pause*3/2, time.Second)
		got, err := b.client.Ticket(ctx, t.TicketID)
		if err != nil {
			r.stats.apiError("ticket", err)
			continue
		}
		if got.State != cur.State || got.Position < pos {
			moved, pos = time.Now(), got.Position
		}
		cur = got
	}
}

// answered records a rusher told its ticket's end (or sold out at its order).
func (q *queue) answered(state string, atOrder bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rep.Seen[state]++
	if atOrder {
		q.rep.SoldOutAtOrd++
	}
	q.lastAnswer = time.Now()
}

// drainState counts the queued SKU's tickets ORDERED and WAITING now.
func (r *runner) drainState(ctx context.Context) (ordered, waiting int, err error) {
	err = r.store.DB().QueryRowContext(ctx, r.store.Rebind(`SELECT
		COALESCE(SUM(CASE WHEN state = 'ORDERED' THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN state = 'WAITING' THEN 1 ELSE 0 END), 0)
		FROM tickets WHERE sku = ?`), r.queue.sku).Scan(&ordered, &waiting)
	return ordered, waiting, err
}

// awaitDrain waits until at least a share of the queued SKU's units are ORDERED while
// tickets still wait, for at most drainAimWait, and returns the queue's state when it
// stopped waiting.
func (r *runner) awaitDrain(ctx context.Context, share float64) DrainMoment {
	want := max(1, int(share*float64(r.queue.units)))
	giveUp := time.Now().Add(drainAimWait)
	for {
		ordered, waiting, err := r.drainState(ctx)
		if err == nil && ordered >= want && waiting > 0 {
			return DrainMoment{AtMS: time.Since(r.start).Milliseconds(), Ordered: ordered, Waiting: waiting, MidDrain: true}
		}
		if time.Now().After(giveUp) || !sleepCtx(ctx, 20*time.Millisecond) {
			return DrainMoment{AtMS: time.Since(r.start).Milliseconds(), Ordered: ordered, Waiting: waiting,
				MidDrain: err == nil && ordered > 0 && waiting > 0}
		}
	}
}

// natsRestartMoments are when, from the start of the load, the broker is restarted: n
// seeded moments over the middle of span, like the kills', from a stream of their own.
func natsRestartMoments(seed uint64, n int, span time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 0x6e617473))
	moments := make([]time.Duration, n)
	for i := range moments {
		moments[i] = time.Duration((0.05 + 0.9*rng.Float64()) * float64(span))
	}
	slices.Sort(moments)
	return moments
}

// restartNATSDuringLoad restarts the broker cfg.NATSRestarts times: the first, with a
// queued SKU, once the queue is half drained, the others at their moments. It returns an
// error if the broker would not start again.
func (r *runner) restartNATSDuringLoad(ctx context.Context, loadStart time.Time) error {
	moments := natsRestartMoments(r.cfg.Seed, r.cfg.NATSRestarts, r.cfg.scaled(r.settings.loadWindow()))
	for k, at := range moments {
		var m DrainMoment
		aimed := k == 0 && r.queue != nil
		if aimed {
			m = r.awaitDrain(ctx, 0.5)
			if !m.MidDrain && ctx.Err() == nil {
				r.note("the NATS restart aimed at the queue's drain found none (%d ORDERED, %d WAITING after %s): it restarted the broker all the same", m.Ordered, m.Waiting, drainAimWait)
			}
		} else {
			if !sleepCtx(ctx, time.Until(loadStart.Add(at))) {
				return nil
			}
			m.AtMS = time.Since(r.start).Milliseconds()
			if r.queue != nil {
				var err error
				if m.Ordered, m.Waiting, err = r.drainState(ctx); err == nil {
					m.MidDrain = m.Ordered > 0 && m.Waiting > 0
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		down, err := r.restartNATS(ctx, NATSDowntime)
		r.queueMu.Lock()
		r.natsRestarts = append(r.natsRestarts, NATSRestart{DrainMoment: m, DowntimeMS: down.Milliseconds(), Aimed: aimed})
		r.queueMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// queueReport is the rush's report, with the database's tickets by state and the longest
// pause between their ends.
func (r *runner) queueReport(ctx context.Context, tickets map[string]int) *QueueReport {
	q := r.queue
	if q == nil {
		return nil
	}
	ends, err := r.ticketEnds(ctx)
	if err != nil {
		r.note("the queue's ticket ends could not be read: %v", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	rep := q.rep
	rep.Seen = countsCopy(q.rep.Seen)
	rep.GaveUp = countsCopy(q.rep.GaveUp)
	rep.InDB = countsCopy(tickets)
	answered := 0
	for _, n := range rep.Seen {
		answered += n
	}
	rep.Unanswered = rep.Rushers - answered
	if !q.lastAnswer.IsZero() {
		rep.LastAnswerMS = q.lastAnswer.Sub(q.start).Milliseconds()
	}
	rep.KillMidDrain = q.killMoment
	rep.LongestPauseMS, rep.PauseAtMS = longestPause(q.start, ends)
	return &rep
}

// ticketEnds are when the queued SKU's ended tickets ended, in order.
func (r *runner) ticketEnds(ctx context.Context) ([]time.Time, error) {
	rows, err := r.store.DB().QueryContext(ctx, r.store.Rebind(`SELECT updated_at FROM tickets WHERE sku = ? AND state <> 'WAITING' ORDER BY updated_at`), r.queue.sku)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var ms int64
		if err := rows.Scan(&ms); err != nil {
			return nil, err
		}
		out = append(out, orderpay.FromMillis(ms))
	}
	return out, rows.Err()
}

// longestPause is the longest time between two ends (sorted), or from start to the first,
// and when, from start, it began.
func longestPause(start time.Time, ends []time.Time) (pause, at int64) {
	prev := start
	for _, e := range ends {
		if d := e.Sub(prev).Milliseconds(); d > pause {
			pause, at = d, prev.Sub(start).Milliseconds()
		}
		if e.After(prev) {
			prev = e
		}
	}
	return pause, at
}

// givenTickets are the tickets the rushers were given, for the auditor.
func (r *runner) givenTickets() []audit.GivenTicket {
	if r.queue == nil {
		return nil
	}
	r.queue.mu.Lock()
	defer r.queue.mu.Unlock()
	return slices.Clone(r.queue.given)
}

// countsCopy copies a count map, never nil.
func countsCopy(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

package sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"orderpay"
)

// NotifyAttempt is one delivery attempt of a notification.
type NotifyAttempt struct {
	At     time.Time // simulated time (Config.Clock) when the attempt was sent
	Status int       // the receiver's HTTP status, 0 if no response arrived
	Body   string    // the start of the receiver's reply body (at most 256 bytes)
	Err    string    // the transport error, if no response arrived
	Acked  bool      // whether this reply acknowledged the notification
	// Dropped marks an attempt lost by a FaultDrop: nothing was sent.
	Dropped bool
	// Variant is "" for the genuine notification, or the fault kind of a bad copy
	// (forge_signature, tamper_amount, wrong_app).
	Variant string
}

// NotifyStats is the delivery record of one notification (one paid trade, or one refund).
type NotifyStats struct {
	Channel    string
	OutTradeNo string
	// OutRefundNo names the refund a refund notification is about; "" for a payment.
	OutRefundNo string
	NotifyID    string // the same on every attempt
	URL         string
	Attempts    []NotifyAttempt
	// Bad are the forged or tampered copies sent by faults. A merchant that acknowledged
	// one (Acked) accepted a notification it should have refused.
	Bad     []NotifyAttempt
	Acked   bool // a reply acknowledged it; no more attempts
	GaveUp  bool // the schedule ran out without an acknowledgement
	Stopped bool // the simulator closed before the notification was settled
}

// Done reports whether no further attempt will be made.
func (s NotifyStats) Done() bool { return s.Acked || s.GaveUp || s.Stopped }

// outgoingNotification is what a channel hands the notifier. The notifier knows nothing of
// a channel's format: the channel builds each attempt and judges each reply.
type outgoingNotification struct {
	Channel     string
	OutTradeNo  string
	OutRefundNo string // "" for a payment notification
	NotifyID    string
	URL         string
	// NotBefore holds the first attempt until the simulated clock (Config.Clock) reaches
	// it, e.g. until the refund a notification reports has settled. Zero sends at once.
	NotBefore time.Time
	// Schedule is the delay before each retry after the first, immediate attempt.
	Schedule []time.Duration
	// Resume is how many attempts an earlier run of the simulator made (state.go): the
	// first attempt now is number Resume, sent at NotBefore, and the schedule goes on from
	// there.
	Resume int
	// Build returns the request body and headers for an attempt sent at now. Channels
	// re-sign each attempt because the notification carries its own send time. variant is
	// "" for the genuine notification, or FaultForgeSignature, FaultTamperAmount or
	// FaultWrongApp for a bad copy.
	Build func(now time.Time, variant string) (body []byte, header http.Header, err error)
	// Acked reports whether a reply acknowledges the notification.
	Acked func(status int, body []byte) bool
}

// notifier delivers notifications in the background, retrying on each channel's schedule
// divided by the time scale. It is shared by all channels.
type notifier struct {
	faults *faultSet
	client *http.Client
	clock  orderpay.Clock
	scale  float64
	log    *slog.Logger

	ctx    context.Context // canceled by close: stops waits and in-flight attempts
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// journal, when set, records how far each delivery got (Simulator.journalNotify):
	// attempts made and when the next is due, or done once none is.
	journal func(n *outgoingNotification, attempts int, next time.Time, done bool)

	mu     sync.Mutex
	closed bool
	stats  []*NotifyStats // in enqueue order
}

func newNotifier(faults *faultSet, client *http.Client, clock orderpay.Clock, scale float64, log *slog.Logger) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{faults: faults, client: client, clock: clock, scale: scale, log: log, ctx: ctx, cancel: cancel}
}

// enqueue starts delivering n and returns at once: real channels notify asynchronously,
// and a payment must never wait on the merchant's notify endpoint.
func (nf *notifier) enqueue(n outgoingNotification) {
	st := &NotifyStats{Channel: n.Channel, OutTradeNo: n.OutTradeNo, OutRefundNo: n.OutRefundNo, NotifyID: n.NotifyID, URL: n.URL}
	if nf.journal != nil {
		nf.journal(&n, n.Resume, cmpOrNow(n.NotBefore, nf.clock), false)
	}
	nf.mu.Lock()
	defer nf.mu.Unlock()
	nf.stats = append(nf.stats, st)
	if nf.closed {
		st.Stopped = true
		nf.log.Warn("sim: notification not sent, simulator closed",
			"channel", n.Channel, "out_trade_no", n.OutTradeNo)
		return
	}
	// Add under the lock that close takes first, so Wait never races with Add.
	nf.wg.Add(1)
	go nf.deliver(n, st)
}

// run starts f in the background for the notifier's lifetime: close cancels f's context
// and waits for f to return. Once the notifier is closed it starts nothing and reports
// false.
func (nf *notifier) run(f func(ctx context.Context)) bool {
	nf.mu.Lock()
	defer nf.mu.Unlock()
	if nf.closed {
		return false
	}
	// Add under the lock that close takes first, as enqueue does.
	nf.wg.Add(1)
	go func() {
		defer nf.wg.Done()
		f(nf.ctx)
	}()
	return true
}

func (nf *notifier) deliver(n outgoingNotification, st *NotifyStats) {
	defer nf.wg.Done()
	if !nf.waitUntil(n.NotBefore) {
		nf.settle(st, func() { st.Stopped = true })
		return
	}
	for attempt := min(n.Resume, len(n.Schedule)); ; attempt++ {
		if attempt > n.Resume {
			if !nf.sleep(n.Schedule[attempt-1]) {
				nf.settle(st, func() { st.Stopped = true })
				return
			}
		}
		if nf.send(n, st) {
			nf.settle(st, func() { st.Acked = true })
			nf.record(&n, attempt+1, time.Time{}, true)
			return
		}
		if nf.ctx.Err() != nil {
			nf.settle(st, func() { st.Stopped = true })
			return
		}
		if attempt >= len(n.Schedule) {
			nf.settle(st, func() { st.GaveUp = true })
			nf.record(&n, attempt+1, time.Time{}, true)
			nf.log.Warn("sim: notification never acknowledged, giving up",
				"channel", n.Channel, "out_trade_no", n.OutTradeNo, "notify_id", n.NotifyID,
				"attempts", attempt+1)
			return
		}
		nf.record(&n, attempt+1, nf.clock.Now().Add(n.Schedule[attempt]), false)
	}
}

// record tells the journal, if any, how far the delivery of n got.
func (nf *notifier) record(n *outgoingNotification, attempts int, next time.Time, done bool) {
	if nf.journal != nil {
		nf.journal(n, attempts, next, done)
	}
}

// cmpOrNow is t, or the clock's now if t is zero.
func cmpOrNow(t time.Time, clock orderpay.Clock) time.Time {
	if t.IsZero() {
		return clock.Now()
	}
	return t
}

// send makes one scheduled attempt, with whatever notification faults fire on it, and
// reports whether the genuine notification was acknowledged.
func (nf *notifier) send(n outgoingNotification, st *NotifyStats) bool {
	fired := nf.faults.fire(n.Channel, MethodNotify, n.NotifyID, notifyKinds)
	drop, copies := false, 1
	for _, r := range fired {
		switch r.Kind {
		case FaultDelay:
			if !nf.sleep(time.Duration(r.Delay)) {
				return false
			}
		case FaultDrop:
			drop = true
		case FaultDuplicate:
			copies = 2
		case FaultForgeSignature, FaultTamperAmount, FaultWrongApp:
			rec := nf.attempt(n, r.Kind)
			nf.settle(st, func() { st.Bad = append(st.Bad, rec) })
		}
	}
	if drop {
		rec := NotifyAttempt{At: nf.clock.Now(), Dropped: true}
		nf.settle(st, func() { st.Attempts = append(st.Attempts, rec) })
		return false
	}
	acked := false
	for range copies {
		rec := nf.attempt(n, "")
		nf.settle(st, func() { st.Attempts = append(st.Attempts, rec) })
		acked = acked || rec.Acked
	}
	return acked
}

// sleep waits d of simulated time (d divided by the time scale) and reports false if the
// notifier closed meanwhile.
func (nf *notifier) sleep(d time.Duration) bool {
	wait := time.Duration(float64(d) / nf.scale)
	if wait <= 0 {
		return nf.ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-nf.ctx.Done():
		return false
	}
}

// clockPoll is the shortest real wait between two looks at the simulated clock in
// waitUntil, so that a clock nobody moves costs next to nothing.
const clockPoll = 5 * time.Millisecond

// waitUntil waits until the simulated clock reaches t and reports false if the notifier
// closed meanwhile. It sleeps the simulated time left (divided by the time scale, like the
// schedule), then looks again: a hand-moved clock, or a wall clock that TimeScale does not
// speed up, need not have got there.
func (nf *notifier) waitUntil(t time.Time) bool {
	for {
		left := t.Sub(nf.clock.Now())
		if left <= 0 {
			return nf.ctx.Err() == nil
		}
		if !nf.sleep(max(left, time.Duration(float64(clockPoll)*nf.scale))) {
			return false
		}
	}
}

// attempt sends one copy of the notification (the genuine one, or a bad variant) and
// returns what happened.
func (nf *notifier) attempt(n outgoingNotification, variant string) NotifyAttempt {
	now := nf.clock.Now()
	rec := NotifyAttempt{At: now, Variant: variant}
	body, header, err := n.Build(now, variant)
	if err != nil {
		rec.Err = "build: " + err.Error()
		return rec
	}
	req, err := http.NewRequestWithContext(nf.ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	for k, vs := range header {
		req.Header[k] = slices.Clone(vs)
	}
	resp, err := nf.client.Do(req)
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	defer resp.Body.Close()
	// The ack is a handful of bytes; read a little more than any valid ack so that a
	// longer reply is seen as different, and never read an unbounded body.
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	rec.Status = resp.StatusCode
	rec.Body = string(reply[:min(len(reply), 256)])
	if err != nil {
		rec.Err = fmt.Sprintf("read reply: %v", err)
		return rec
	}
	rec.Acked = n.Acked(resp.StatusCode, reply)
	return rec
}

func (nf *notifier) settle(st *NotifyStats, change func()) {
	nf.mu.Lock()
	defer nf.mu.Unlock()
	change()
}

// snapshot returns deep copies of all delivery records in enqueue order.
func (nf *notifier) snapshot() []NotifyStats {
	nf.mu.Lock()
	defer nf.mu.Unlock()
	out := make([]NotifyStats, len(nf.stats))
	for i, st := range nf.stats {
		out[i] = *st
		out[i].Attempts = slices.Clone(st.Attempts)
		out[i].Bad = slices.Clone(st.Bad)
	}
	return out
}

// close stops every delivery, waits for their goroutines to end and refuses new ones.
func (nf *notifier) close() {
	nf.mu.Lock()
	nf.closed = true
	nf.mu.Unlock()
	nf.cancel()
	nf.wg.Wait()
}

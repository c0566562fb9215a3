package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"orderpay"
)

// Publisher stores one message on the broker, returning nil only once the broker has
// acknowledged it. A re-publish of an ID the broker has already stored must also return
// nil. *Bus is a Publisher.
type Publisher interface {
	Publish(ctx context.Context, m orderpay.Message) error
}

// BatchPublisher is a Publisher that can store several messages for about the cost of one
// round trip (PublishBatch). The relay uses it when its Publisher has it.
type BatchPublisher interface {
	Publisher
	// PublishBatch returns how many of msgs, counted from the first, the broker has
	// acknowledged, and the error that stopped it short of all of them.
	PublishBatch(ctx context.Context, msgs []orderpay.Message) (int, error)
}

var _ BatchPublisher = (*Bus)(nil)

// Defaults of Relay.
const (
	DefaultRelayInterval = 200 * time.Millisecond
	// DefaultRelayLinger is how long a poked relay waits for more commits before it reads
	// the outbox: at a few hundred orders a second, one run (and one transaction marking
	// messages published) carries the messages of several orders, not one or two. An event
	// leaves at most this much later than it would at once; nothing a buyer waits for
	// waits for it (the order takes its payment in the payment's own transaction).
	DefaultRelayLinger = 20 * time.Millisecond
	DefaultRelayBatch  = 100
)

// markTimeout bounds MarkPublished after the broker has acked: it runs even if ctx was
// cancelled meanwhile, because every message left unmarked is published again.
const markTimeout = 5 * time.Second

// maxRelayErrorWait caps the growing wait between failed runs (unless Interval is longer).
const maxRelayErrorWait = 5 * time.Second

// Relay moves committed outbox messages to the broker (the outbox pattern's forwarder): it
// reads the oldest unpublished messages, publishes them in order (in one batch when the
// Publisher is a BatchPublisher), and marks published those the broker acknowledged, from
// the first up to the first it did not.
//
// Delivery is at least once. A crash (or a failed MarkPublished) between a publish and its
// mark leaves the message unpublished in the outbox, and the next run publishes the same
// ID again. JetStream drops that re-publish because the ID is still in the stream's
// duplicate window (Config.DuplicateWindow); a re-publish later than the window is stored
// twice, and consumers' idempotency (docs/design.md §2) absorbs it. The same holds if two
// instances run a relay over the same outbox, though their messages may then interleave.
//
// Set the fields before calling Run or RunOnce and do not change them afterwards.
type Relay struct {
	// Outbox holds the committed messages. Required.
	Outbox orderpay.Outbox
	// Publisher is the broker, usually a *Bus. Required.
	Publisher Publisher
	// Interval between runs when nothing pokes the relay. Defaults to 200ms.
	Interval time.Duration
	// Linger is how long after a poke the run starts, so that commits close together share
	// it. Defaults to DefaultRelayLinger; negative: none.
	Linger time.Duration
	// Batch is the most messages one run reads and publishes. Defaults to 100.
	Batch int
	// Logger receives failed runs. Defaults to discarding them.
	Logger *slog.Logger
	// Clock gives the published-at time stored by MarkPublished. Defaults to time.Now.
	Clock func() time.Time

	mu       sync.Mutex // one run at a time, so messages leave in outbox order
	pokeOnce sync.Once
	poke     chan struct{}
}

// RelayResult is what one run did.
type RelayResult struct {
	// Published counts the messages the broker acknowledged and the outbox marked.
	Published int
}

// relaySettings are a Relay's fields with the defaults applied.
type relaySettings struct {
	interval time.Duration
	linger   time.Duration
	batch    int
	log      *slog.Logger
	clock    func() time.Time
}

func (r *Relay) withDefaults() (relaySettings, error) {
	s := relaySettings{
		interval: cmp.Or(r.Interval, DefaultRelayInterval),
		linger:   max(cmp.Or(r.Linger, DefaultRelayLinger), 0),
		batch:    cmp.Or(r.Batch, DefaultRelayBatch),
		log:      r.Logger,
		clock:    r.Clock,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "outbox-relay")
	if s.clock == nil {
		s.clock = time.Now
	}
	switch {
	case r.Outbox == nil:
		return s, orderpay.Errorf(orderpay.EINVALID, "natsbus: relay needs an Outbox")
	case r.Publisher == nil:
		return s, orderpay.Errorf(orderpay.EINVALID, "natsbus: relay needs a Publisher")
	case s.interval < 0:
		return s, orderpay.Errorf(orderpay.EINVALID, "natsbus: relay interval %s is negative", s.interval)
	case s.batch < 0:
		return s, orderpay.Errorf(orderpay.EINVALID, "natsbus: relay batch %d is negative", s.batch)
	}
	return s, nil
}

// RunOnce publishes up to Batch unpublished messages, oldest first, and marks published
// those the broker acknowledged. It stops at the first failed publish, so that messages
// leave in order and nothing is marked that the broker has not stored; the error says
// which message failed, and Published counts the ones before it.
func (r *Relay) RunOnce(ctx context.Context) (RelayResult, error) {
	s, err := r.withDefaults()
	if err != nil {
		return RelayResult{}, err
	}
	return r.runOnce(ctx, s)
}

func (r *Relay) runOnce(ctx context.Context, s relaySettings) (RelayResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	msgs, err := r.Outbox.UnpublishedMessages(ctx, s.batch)
	if err != nil {
		return RelayResult{}, fmt.Errorf("natsbus: relay: read outbox: %w", err)
	}
	n, err := r.publish(ctx, msgs)
	var pubErr error
	if err != nil {
		pubErr = fmt.Errorf("natsbus: relay: publish %s: %w", msgs[n].ID, err)
	}
	acked := make([]string, 0, n)
	for _, m := range msgs[:n] {
		acked = append(acked, m.ID)
	}
	if len(acked) == 0 {
		return RelayResult{}, pubErr
	}
	// Mark even if ctx ended during the publishes: an unmarked message would be
	// published again, and only the duplicate window stands between that and a
	// second delivery.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := r.Outbox.MarkPublished(mctx, acked, s.clock()); err != nil {
		// The broker has them; the next run re-publishes them and the broker drops
		// the copies.
		return RelayResult{}, errors.Join(pubErr, fmt.Errorf("natsbus: relay: mark %d published: %w", len(acked), err))
	}
	return RelayResult{Published: len(acked)}, pubErr
}

// publish stores msgs on the broker, in one batch if the Publisher can, and returns how
// many of them, from the first, it acknowledged.
func (r *Relay) publish(ctx context.Context, msgs []orderpay.Message) (int, error) {
	if bp, ok := r.Publisher.(BatchPublisher); ok && len(msgs) > 0 {
		return bp.PublishBatch(ctx, msgs)
	}
	for i, m := range msgs {
		if err := r.Publisher.Publish(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// Run relays until ctx is done: every Interval, Linger after a poke, and again without
// waiting while a run fills a whole batch (a backlog). A failed run is logged and retried
// after a wait that grows with consecutive failures. Run returns nil when ctx is done, and
// an error only if the Relay is misconfigured.
func (r *Relay) Run(ctx context.Context) error {
	s, err := r.withDefaults()
	if err != nil {
		return err
	}
	poke := r.pokeChan()
	timer := time.NewTimer(s.interval)
	defer timer.Stop()
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		res, err := r.runOnce(ctx, s)
		wait := s.interval
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			wait = relayErrorWait(s.interval, failures)
			s.log.Error("outbox relay run failed", "published", res.Published, "failures", failures, "retry_in", wait, "err", err)
		case res.Published == s.batch && s.batch > 0:
			failures = 0
			continue // more are waiting
		default:
			failures = 0
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
			if s.linger > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(s.linger):
				}
			}
		case <-timer.C:
		}
	}
}

// relayErrorWait doubles the interval per consecutive failure, up to maxRelayErrorWait
// (or the interval itself if that is longer), so a broker outage does not flood the log.
func relayErrorWait(interval time.Duration, failures int) time.Duration {
	ceiling := max(interval, maxRelayErrorWait)
	d := interval
	for i := 1; i < failures && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// Poke wakes Run for an immediate run, so that a message committed now is published within
// milliseconds rather than at the next interval. It never blocks: pokes that arrive while
// one is pending are merged into it. Call it after committing a transaction that enqueued
// messages.
func (r *Relay) Poke() {
	select {
	case r.pokeChan() <- struct{}{}:
	default:
	}
}

func (r *Relay) pokeChan() chan struct{} {
	r.pokeOnce.Do(func() { r.poke = make(chan struct{}, 1) })
	return r.poke
}

package natsbus

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
)

// Timers are one-shot delayed messages on JetStream's message scheduling: the fast path of
// every timer in orderpay (active queries, deadlines). A timer has a name; setting it again
// replaces the previous one (the server keeps one schedule per subject). When it is due, the
// server publishes its payload on timer.fire.<name>, and HandleTimers hands it to a handler.
//
// Timers may be lost with the broker. Everything they drive also has a safety net: a
// sweeper over a small indexed table (docs/design.md §2).

// TimerStream is the stream that holds the timers, apart from the events so that fired
// timers can be deleted once handled (work-queue retention).
const TimerStream = "ORDERPAY_TIMERS"

const (
	timerSetPrefix  = "timer.set."
	timerFirePrefix = "timer.fire."
)

// timerStreamConfig is the timer stream as orderpay wants it.
func (b *Bus) timerStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      TimerStream,
		Subjects:  []string{"timer.>"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy,
		Replicas:  replicas,
		// Bounded like the events; a timer lost to a limit is the sweepers' (docs/design.md §2).
		Discard:           jetstream.DiscardOld,
		MaxAge:            serverAge(b.cfg.TimerMaxAge),
		MaxBytes:          serverBytes(b.cfg.TimerMaxBytes),
		Duplicates:        b.cfg.DuplicateWindow,
		AllowMsgSchedules: true,
		AllowRollup:       true,
		Metadata:          limitsMetadata(replicas, serverAge(b.cfg.TimerMaxAge), serverBytes(b.cfg.TimerMaxBytes), b.cfg.DuplicateWindow),
	}
}

// SetTimer schedules payload to fire as timer name at exactly at, replacing an earlier
// timer of the same name. The schedule header carries nanoseconds (WithScheduleAt would
// truncate to whole seconds), and the due time travels with the payload so that
// the handler can check it.
func (b *Bus) SetTimer(ctx context.Context, name string, at time.Time, payload []byte) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n*>") {
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: timer name %q is not a subject token", name)
	}
	body := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint64(body, uint64(at.UnixNano()))
	copy(body[8:], payload)
	msg := &nats.Msg{Subject: timerSetPrefix + name, Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(jetstream.ScheduleTargetHeader, timerFirePrefix+name)
	if !b.nc.IsConnected() {
		return fmt.Errorf("natsbus: set timer %s: %w", name, errNotConnected)
	}
	if _, err := b.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(TimerStream)); err != nil {
		return fmt.Errorf("natsbus: set timer %s: %w", name, err)
	}
	return nil
}

// Timer is a timer that fired.
type Timer struct {
	Name      string
	Due       time.Time
	Payload   []byte
	Delivered int // 1 the first time; more after a handler failed or a crash
}

// TimerHandler handles one fired timer. It must be idempotent: a timer can be delivered
// again after a failure or a crash.
type TimerHandler func(ctx context.Context, t Timer) error

// HandleTimers runs handler, on up to workers goroutines, for every timer whose name
// matches pattern (a subject pattern such as "query.>"), through the durable consumer
// durable, which attaches like Subscribe's (in the background on an external bus). A timer
// is deleted once its handler returned nil; one that fails comes back after a growing
// delay. A timer delivered before its due time (it cannot be, but a clock may disagree) is
// put back until then. stop ends the handling and waits for running handlers.
func (b *Bus) HandleTimers(ctx context.Context, durable, pattern string, workers int, handler TimerHandler) (stop func(), err error) {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, workers)
	deliver := func(ctx context.Context, log *slog.Logger, jm jetstream.Msg) {
		if ctx.Err() != nil { // stopping: a free slot must not win the select below
			_ = jm.Nak()
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			_ = jm.Nak()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			b.handleTimer(ctx, log, jm, handler)
		}()
	}
	a, err := b.attach(ctx, TimerStream, jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: timerFirePrefix + pattern,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Room for the prefetched timers, the running ones and acks the server has not
		// processed yet: at 4 per worker, a server busy firing a batch stopped delivering
		// while its acks waited (a million-timer benchmark showed ack-pending at the cap).
		MaxAckPending: workers * 16,
	}, workers*4, deliver)
	if err != nil {
		return nil, fmt.Errorf("natsbus: timer consumer %s: %w", durable, err)
	}
	return func() {
		a.stop()
		wg.Wait()
	}, nil
}

func (b *Bus) handleTimer(ctx context.Context, log *slog.Logger, jm jetstream.Msg, handler TimerHandler) {
	data := jm.Data()
	if len(data) < 8 {
		log.Warn("malformed timer dropped", "subject", jm.Subject())
		_ = jm.Term()
		return
	}
	t := Timer{Name: strings.TrimPrefix(jm.Subject(), timerFirePrefix), Due: time.Unix(0, int64(binary.BigEndian.Uint64(data))), Payload: data[8:], Delivered: 1}
	if md, err := jm.Metadata(); err == nil {
		t.Delivered = int(md.NumDelivered)
	}
	if early := time.Until(t.Due); early > 0 {
		_ = jm.NakWithDelay(early)
		return
	}
	if err := handler(ctx, t); err != nil {
		if ctx.Err() != nil {
			_ = jm.Nak()
			return
		}
		delay := retryDelay(uint64(t.Delivered), b.cfg.RetryDelay, b.cfg.MaxRetryDelay)
		log.Warn("timer handler failed; retrying", "timer", t.Name, "retry_in", delay, "err", err)
		_ = jm.NakWithDelay(delay)
		return
	}
	_ = jm.Ack()
}

// PurgeTimers deletes every timer, set or fired: what a broker that lost its state looks
// like, for tests of the safety nets.
func (b *Bus) PurgeTimers(ctx context.Context) error {
	s, err := b.js.Stream(ctx, TimerStream)
	if err != nil {
		return err
	}
	return s.Purge(ctx)
}

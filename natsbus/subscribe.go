package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
)

// Handler processes one message. It returns nil only once its effects are committed: the
// message is acknowledged after that, and redelivered otherwise. It must be idempotent,
// because a message can arrive more than once (a lost ack, a re-publish after the duplicate
// window, a redelivery after AckWait).
type Handler func(ctx context.Context, m orderpay.Message) error

// ackTimeout bounds the wait for the server to confirm an ack or a nak.
const ackTimeout = 5 * time.Second

// subscribePrefetch is how many messages a subscription holds at once. Handlers run one
// at a time, so a larger buffer would only let buffered messages age towards AckWait (and
// be redelivered while still waiting) and would delay their redelivery when the process
// dies. One keeps "held by this process" close to "being handled".
const subscribePrefetch = 1

// pullOptions bound how long a consumer can sit idle with work in the stream. A pull
// request the server no longer holds (seen under load: the consumer shows no waiting
// request while messages pile up) is noticed only when two heartbeats are missed; with the
// client's defaults (30 s requests, 15 s heartbeats) that stalled a million-timer benchmark
// for 30 s. Short requests with 1 s heartbeats make it 2 s, for one pull request every 5 s.
var pullOptions = []jetstream.PullMessagesOpt{jetstream.PullExpiry(5 * time.Second), jetstream.PullHeartbeat(time.Second)}

// Subscribe attaches handler to the durable pull consumer named durable on the bus's
// stream, filtered to filterSubject ("" for every subject), and calls it for each message,
// one at a time, in stream order.
//
// The consumer is created if it is missing (ensureConsumer says what is updated when it
// exists). On the embedded bus that happens before Subscribe returns, and its failure is
// Subscribe's. On an external bus Subscribe returns at once and the subscription attaches
// in the background, as soon as the bus is ready; Ready reports it until then. It attaches
// again whenever its consumer is lost (deleted, or its stream made again).
//
// A message is acked only after handler returned nil. When handler fails, the message is
// nakked with a delay of RetryDelay doubled per delivery, capped at MaxRetryDelay: it is
// retried, never dropped (there is no delivery limit), and a failing message does not spin.
// Other messages keep flowing while it waits, so after a failure the order of delivery is
// no longer the stream order.
//
// The subscription ends when stop is called or ctx is done. Either cancels the context
// passed to a running handler and waits for it to return; a message whose handler did not
// finish is nakked for immediate redelivery (to another instance, or to the next start).
// stop must not be called from inside the handler.
func (b *Bus) Subscribe(ctx context.Context, durable, filterSubject string, handler Handler) (stop func(), err error) {
	if durable == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "natsbus: subscribe needs a durable name")
	}
	if handler == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "natsbus: subscribe %s needs a handler", durable)
	}
	s := &subscription{bus: b, handler: handler}
	a, err := b.attach(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: filterSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		// No limit: a message that keeps failing is retried until someone fixes the
		// cause, never dropped. An event like payment.succeeded must not be lost.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}, subscribePrefetch, s.handle)
	if err != nil {
		return nil, err
	}
	return a.stop, nil
}

// attachment is one durable consumer that this process reads: it creates the consumer
// when the bus is ready, pulls from it, hands each message to deliver, and starts over
// when the consumer is lost. It ends when stop is called or its context is done.
type attachment struct {
	bus     *Bus
	stream  string
	cfg     jetstream.ConsumerConfig
	batch   int
	deliver func(ctx context.Context, log *slog.Logger, jm jetstream.Msg)
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	attached bool
	lastErr  error

	stopOnce sync.Once
}

// attach registers an attachment of cfg on stream and starts it. On the embedded bus the
// consumer is made first, and its error returned.
func (b *Bus) attach(ctx context.Context, stream string, cfg jetstream.ConsumerConfig, batch int,
	deliver func(ctx context.Context, log *slog.Logger, jm jetstream.Msg)) (*attachment, error) {
	var first jetstream.Consumer
	if b.srv != nil {
		c, err := b.ensureConsumer(ctx, stream, cfg)
		if err != nil {
			return nil, fmt.Errorf("natsbus: %w", err)
		}
		first = c
	}
	actx, cancel := context.WithCancel(ctx)
	a := &attachment{
		bus: b, stream: stream, cfg: cfg, batch: batch, deliver: deliver,
		log: b.log.With("durable", cfg.Durable, "filter", cfg.FilterSubject),
		ctx: actx, cancel: cancel, done: make(chan struct{}),
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		cancel()
		return nil, orderpay.Errorf(orderpay.EINVALID, "natsbus: subscribe %s on a closed bus", cfg.Durable)
	}
	b.subs[a] = struct{}{}
	b.mu.Unlock()
	go a.run(first)
	return a, nil
}

// stop ends the attachment and waits for its loop, and so for a running handler.
func (a *attachment) stop() {
	a.stopOnce.Do(a.cancel)
	<-a.done
}

// notAttached is nil while the attachment reads its consumer, else why not.
func (a *attachment) notAttached() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attached {
		return nil
	}
	if a.lastErr != nil {
		return fmt.Errorf("consumer %s not attached: %w", a.cfg.Durable, a.lastErr)
	}
	return fmt.Errorf("consumer %s attaching", a.cfg.Durable)
}

func (a *attachment) setAttached(on bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.attached, a.lastErr = on, err
}

// Attachment timing: a failed attach is retried after a wait that doubles up to
// upkeepRetryMax.
const attachRetryMin = 100 * time.Millisecond

func (a *attachment) run(cons jetstream.Consumer) {
	defer func() {
		a.bus.mu.Lock()
		delete(a.bus.subs, a)
		a.bus.mu.Unlock()
		close(a.done)
	}()
	defer a.cancel() // release the context however the loop ended
	failures := 0
	for a.ctx.Err() == nil {
		if cons == nil {
			if err := a.bus.WaitReady(a.ctx); err != nil {
				return // ctx done
			}
			c, err := a.bus.ensureConsumer(a.ctx, a.stream, a.cfg)
			if err != nil {
				if a.ctx.Err() != nil {
					return
				}
				failures++
				a.setAttached(false, err)
				wait := min(attachRetryMin<<min(failures-1, 10), upkeepRetryMax)
				a.log.Warn("consumer not attached; retrying", "failures", failures, "retry_in", wait, "err", err)
				sleep(a.ctx, wait)
				continue
			}
			cons = c
		}
		it, err := cons.Messages(append(pullOptions, jetstream.PullMaxMessages(a.batch), jetstream.WithMessagesErrOnMissingHeartbeat(true))...)
		if err != nil {
			a.setAttached(false, err)
			a.log.Warn("consume failed; attaching again", "err", err)
			cons = nil
			sleep(a.ctx, attachRetryMin)
			continue
		}
		failures = 0
		a.setAttached(true, nil)
		a.log.Debug("consumer attached")
		// Stopping drains the iterator: it asks for no more, and Next returns what the
		// client holds already, which consume hands back. Without it those messages would
		// wait out AckWait before another instance got them (30 s, at every restart).
		unhook := context.AfterFunc(a.ctx, it.Drain)
		err = a.consume(cons, it)
		unhook()
		it.Stop()
		a.setAttached(false, err)
		cons = nil
		if a.ctx.Err() == nil {
			a.log.Warn("consumer lost; attaching again", "err", err)
			a.bus.poke() // its stream may be gone too
			sleep(a.ctx, attachRetryMin)
		}
	}
}

// consume hands each message of it to deliver until the consumer is lost, which it
// returns as the error, or until ctx ends and it has handed back (nakked) the messages
// the drained iterator still held.
func (a *attachment) consume(cons jetstream.Consumer, it jetstream.MessagesContext) error {
	stopping := false
	for {
		var jm jetstream.Msg
		var err error
		if !stopping {
			jm, err = it.Next(jetstream.NextContext(a.ctx))
		} else {
			// A drain the server cannot confirm (the connection is down) would block
			// Next for good: hand back what arrives soon, and let AckWait have the rest.
			jm, err = it.Next(jetstream.NextMaxWait(drainWait))
		}
		if err != nil {
			switch {
			case a.ctx.Err() != nil && !stopping:
				stopping = true
				continue
			case a.ctx.Err() != nil:
				return nil
			case errors.Is(err, jetstream.ErrMsgIteratorClosed), errors.Is(err, jetstream.ErrConsumerDeleted):
				// Deleted, or the connection closed under us. The messages stay in the
				// stream; the next attach picks them up.
				return err
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				// Silence: a leader election, a reconnect, or a consumer that is gone
				// (its pull requests then go unanswered forever). Ask.
				ctx, cancel := context.WithTimeout(a.ctx, apiTimeout)
				_, ierr := cons.Info(ctx)
				cancel()
				if errors.Is(ierr, jetstream.ErrConsumerNotFound) || errors.Is(ierr, jetstream.ErrStreamNotFound) {
					return ierr
				}
				continue // the iterator pulls again by itself
			}
			a.log.Warn("subscription interrupted", "err", err)
			sleep(a.ctx, 100*time.Millisecond)
			continue
		}
		if a.ctx.Err() != nil {
			// Held as we stopped: hand it back for immediate redelivery, and go on
			// until the drained iterator ends.
			_ = jm.Nak()
			continue
		}
		a.deliver(a.ctx, a.log, jm)
	}
}

// drainWait bounds how long a stopping attachment waits for each message its client still
// holds.
const drainWait = 200 * time.Millisecond

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// subscription is Subscribe's delivery: one message at a time, acked after its handler.
type subscription struct {
	bus     *Bus
	handler Handler
}

func (s *subscription) handle(ctx context.Context, log *slog.Logger, jm jetstream.Msg) {
	m := orderpay.Message{
		ID:      jm.Headers().Get(jetstream.MsgIDHeader),
		Subject: jm.Subject(),
		Payload: jm.Data(),
	}
	delivered := uint64(1)
	if md, err := jm.Metadata(); err == nil {
		m.CreatedAt = md.Timestamp
		delivered = md.NumDelivered
	}

	herr := s.handler(ctx, m)

	// Acks outlive a stopping subscription: a committed message must still be acked.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if herr == nil {
		// DoubleAck waits for the server, so "handled" means "will not come back"
		// unless the ack itself is lost, in which case the idempotent handler sees a
		// redelivery after AckWait.
		if err := jm.DoubleAck(actx); err != nil {
			log.Warn("ack failed; the message will be redelivered", "subject", m.Subject, "id", m.ID, "err", err)
		}
		return
	}
	if ctx.Err() != nil {
		// Interrupted by stop, not failed: let another instance have it at once.
		log.Info("handler interrupted by stop; message returned", "subject", m.Subject, "id", m.ID, "err", herr)
		if err := jm.Nak(); err != nil {
			log.Warn("nak failed; the message will be redelivered after AckWait", "id", m.ID, "err", err)
		}
		return
	}
	delay := retryDelay(delivered, s.bus.cfg.RetryDelay, s.bus.cfg.MaxRetryDelay)
	log.Warn("handler failed; message will be retried",
		"subject", m.Subject, "id", m.ID, "delivered", delivered, "retry_in", delay, "err", herr)
	// A plain Nak would redeliver at once and ignore any BackOff.
	if err := jm.NakWithDelay(delay); err != nil {
		log.Warn("nak failed; the message will be redelivered after AckWait", "id", m.ID, "err", err)
	}
}

// retryDelay is the delay before the next delivery of a message that has failed
// delivered times: base, 2·base, 4·base, … capped at ceiling.
func retryDelay(delivered uint64, base, ceiling time.Duration) time.Duration {
	d := base
	for i := uint64(1); i < delivered && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

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
// stops. One keeps "held by this process" equal to "being handled".
const subscribePrefetch = 1

// pullOptions bound how long a consumer can sit idle with work in the stream. A pull
// request the server no longer holds (seen under load: the consumer shows no waiting
// request while messages pile up) is noticed only when two heartbeats are missed; with the
// client's defaults (30 s requests, 15 s heartbeats) that stalled a million-timer benchmark
// for 30 s. Short requests with 1 s heartbeats make it 2 s, for one pull request every 5 s.
var pullOptions = []jetstream.PullMessagesOpt{jetstream.PullExpiry(5 * time.Second), jetstream.PullHeartbeat(time.Second)}

// Subscribe creates (or updates) the durable pull consumer named durable on the bus's
// stream, filtered to filterSubject ("" for every subject), and calls handler for each
// message, one at a time, in stream order.
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
	cons, err := b.js.CreateOrUpdateConsumer(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: filterSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		// No limit: a message that keeps failing is retried until someone fixes the
		// cause, never dropped. An event like payment.succeeded must not be lost.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("natsbus: create consumer %s: %w", durable, err)
	}
	it, err := cons.Messages(append(pullOptions, jetstream.PullMaxMessages(subscribePrefetch))...)
	if err != nil {
		return nil, fmt.Errorf("natsbus: consume %s: %w", durable, err)
	}

	subCtx, cancel := context.WithCancel(ctx)
	s := &subscription{
		bus:     b,
		log:     b.log.With("durable", durable, "filter", filterSubject),
		handler: handler,
		it:      it,
		ctx:     subCtx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		cancel()
		it.Stop()
		return nil, orderpay.Errorf(orderpay.EINVALID, "natsbus: subscribe %s on a closed bus", durable)
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()

	// Stopping the iterator makes a blocked Next return, however the context ended.
	context.AfterFunc(subCtx, it.Stop)
	go s.run()
	return s.stop, nil
}

type subscription struct {
	bus     *Bus
	log     *slog.Logger
	handler Handler
	it      jetstream.MessagesContext
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	stopOnce sync.Once
}

// stop ends the subscription and waits for its loop, and so for a running handler.
func (s *subscription) stop() {
	s.stopOnce.Do(s.cancel)
	<-s.done
}

func (s *subscription) run() {
	defer func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.done)
	}()
	defer s.cancel() // release the context however the loop ended
	for {
		// Ask for no more once stopping: a pull request sent now would be answered
		// with a message that nobody handles, held until AckWait expires.
		if s.ctx.Err() != nil {
			return
		}
		jm, err := s.it.Next()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				// The consumer was deleted or the connection closed under us. The
				// messages stay in the stream; the next Subscribe picks them up.
				s.log.Error("subscription ended unexpectedly", "err", err)
				return
			}
			// Missed heartbeats and the like: the iterator keeps going by itself.
			s.log.Warn("subscription interrupted", "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if s.ctx.Err() != nil {
			// Arrived as we stopped: hand it back for immediate redelivery.
			_ = jm.Nak()
			return
		}
		s.handle(jm)
	}
}

func (s *subscription) handle(jm jetstream.Msg) {
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

	herr := s.handler(s.ctx, m)

	// Acks outlive a stopping subscription: a committed message must still be acked.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), ackTimeout)
	defer cancel()
	if herr == nil {
		// DoubleAck waits for the server, so "handled" means "will not come back"
		// unless the ack itself is lost, in which case the idempotent handler sees a
		// redelivery after AckWait.
		if err := jm.DoubleAck(ctx); err != nil {
			s.log.Warn("ack failed; the message will be redelivered", "subject", m.Subject, "id", m.ID, "err", err)
		}
		return
	}
	if s.ctx.Err() != nil {
		// Interrupted by stop, not failed: let another instance have it at once.
		s.log.Info("handler interrupted by stop; message returned", "subject", m.Subject, "id", m.ID, "err", herr)
		if err := jm.Nak(); err != nil {
			s.log.Warn("nak failed; the message will be redelivered after AckWait", "id", m.ID, "err", err)
		}
		return
	}
	delay := retryDelay(delivered, s.bus.cfg.RetryDelay, s.bus.cfg.MaxRetryDelay)
	s.log.Warn("handler failed; message will be retried",
		"subject", m.Subject, "id", m.ID, "delivered", delivered, "retry_in", delay, "err", herr)
	// A plain Nak would redeliver at once and ignore any BackOff (DESIGN §10).
	if err := jm.NakWithDelay(delay); err != nil {
		s.log.Warn("nak failed; the message will be redelivered after AckWait", "id", m.ID, "err", err)
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

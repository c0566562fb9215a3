package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay/chaos/audit"
)

// readEvents reads every message of the stream from the start, with an ordered (ephemeral)
// consumer, up to the last message stored when it began: the downstream effects the
// auditor counts (I7). A stream that does not exist (the server never opened the bus)
// has no events.
func readEvents(ctx context.Context, url, stream string) ([]audit.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(url, nats.Name("orderpay-chaos-audit"))
	if err != nil {
		return nil, fmt.Errorf("chaos: read events: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("chaos: read events: %w", err)
	}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return []audit.Event{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: read events: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: read events: %w", err)
	}
	last := info.State.LastSeq
	events := make([]audit.Event, 0, info.State.Msgs)
	if info.State.Msgs == 0 {
		return events, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("chaos: read events: %w", err)
	}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("chaos: read events: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("chaos: read events: %w", err)
			}
			events = append(events, audit.Event{Subject: m.Subject(), MsgID: m.Headers().Get(jetstream.MsgIDHeader), Payload: m.Data()})
			if meta.Sequence.Stream >= last {
				return events, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("chaos: read events: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("chaos: read events: stream %s stopped at %d of %d messages", stream, len(events), info.State.Msgs)
		}
	}
}

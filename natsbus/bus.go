// Package natsbus is orderpay's bus on NATS JetStream: an embedded server for the default
// one-binary setup, the stream that carries order.*, payment.* and refund.* events, durable
// consumers that ack only after the handler has committed, and the outbox relay that moves
// committed messages from the database to the stream (DESIGN §1.1, §2).
//
// Delivery is at least once, end to end. The relay may publish a message twice and a
// consumer may see it twice; JetStream drops re-publishes of the same message ID within the
// duplicate window, and every handler is idempotent (DESIGN §1.3) for the rest.
package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
)

// Defaults of Config.
const (
	DefaultStream          = "ORDERPAY"
	DefaultReplicas        = 1
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultAckWait         = 30 * time.Second
	DefaultRetryDelay      = time.Second
	DefaultMaxRetryDelay   = 30 * time.Second
)

// DefaultSubjects are the subjects of the default stream: the events of both bounded
// contexts (DESIGN §5, "Downstream events").
func DefaultSubjects() []string { return []string{"order.>", "payment.>", "refund.>"} }

// closeTimeout bounds how long Close waits for the connection to drain.
const closeTimeout = 10 * time.Second

// Config says where the bus lives and how its stream is shaped. The zero value is not
// usable: an embedded bus needs StoreDir.
type Config struct {
	// URL of an external NATS server or cluster ("nats://a:4222,nats://b:4222"). Empty
	// starts an embedded server with its file store in StoreDir. Defaults to "".
	URL string
	// StoreDir is the embedded server's JetStream directory. Required when URL is empty,
	// ignored otherwise.
	StoreDir string
	// ListenAddr makes the embedded server also accept TCP clients on host:port (port 0
	// picks a free one). Defaults to "": in-process connections only.
	ListenAddr string
	// SyncAlways makes the embedded file store fsync every write (see WithSyncAlways).
	// Defaults to false.
	SyncAlways bool

	// Stream is the JetStream stream name. Defaults to "ORDERPAY".
	Stream string
	// Subjects the stream captures. Defaults to "order.>", "payment.>", "refund.>".
	Subjects []string
	// Replicas of the stream. Defaults to 1; an embedded server allows only 1, a
	// production cluster should use 3.
	Replicas int
	// DuplicateWindow is how long JetStream remembers message IDs to drop re-publishes.
	// It must cover the relay's worst delay between publishing and marking a message
	// published. Defaults to 2 minutes.
	DuplicateWindow time.Duration

	// AckWait is how long a consumer waits for a handler before it redelivers the
	// message. Defaults to 30 seconds.
	AckWait time.Duration
	// RetryDelay is the delay before a message whose handler failed is delivered again;
	// it doubles with each delivery up to MaxRetryDelay. Defaults to 1 second.
	RetryDelay time.Duration
	// MaxRetryDelay caps the retry delay. Defaults to 30 seconds.
	MaxRetryDelay time.Duration

	// Logger receives the bus's log lines, and the embedded server's. Defaults to
	// discarding them.
	Logger *slog.Logger
}

// withDefaults returns cfg with every unset field set to its documented default.
func (cfg Config) withDefaults() Config {
	cfg.Stream = cmp.Or(cfg.Stream, DefaultStream)
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = DefaultSubjects()
	}
	cfg.Replicas = cmp.Or(cfg.Replicas, DefaultReplicas)
	cfg.DuplicateWindow = cmp.Or(cfg.DuplicateWindow, DefaultDuplicateWindow)
	cfg.AckWait = cmp.Or(cfg.AckWait, DefaultAckWait)
	cfg.RetryDelay = cmp.Or(cfg.RetryDelay, DefaultRetryDelay)
	cfg.MaxRetryDelay = cmp.Or(cfg.MaxRetryDelay, DefaultMaxRetryDelay)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// validate checks a Config that already has its defaults.
func (cfg Config) validate() error {
	switch {
	case cfg.URL == "" && cfg.StoreDir == "":
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: an embedded bus needs a StoreDir")
	case cfg.URL != "" && cfg.ListenAddr != "":
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: ListenAddr applies only to the embedded server")
	case cfg.URL == "" && cfg.Replicas != 1:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: the embedded server is a single node; Replicas must be 1, not %d", cfg.Replicas)
	case cfg.Replicas < 1 || cfg.Replicas > 5:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: Replicas must be between 1 and 5, not %d", cfg.Replicas)
	case cfg.DuplicateWindow < 0, cfg.AckWait < 0, cfg.RetryDelay < 0, cfg.MaxRetryDelay < 0:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: durations must not be negative")
	case cfg.RetryDelay > cfg.MaxRetryDelay:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: RetryDelay %s exceeds MaxRetryDelay %s", cfg.RetryDelay, cfg.MaxRetryDelay)
	}
	for _, s := range cfg.Subjects {
		if strings.TrimSpace(s) == "" {
			return orderpay.Errorf(orderpay.EINVALID, "natsbus: empty stream subject")
		}
	}
	return nil
}

// Bus is an open connection to JetStream, and the embedded server when there is one.
// Its methods are safe for concurrent use.
type Bus struct {
	cfg    Config
	log    *slog.Logger
	srv    *server.Server // nil when connected to an external server
	nc     *nats.Conn
	js     jetstream.JetStream
	closed chan struct{} // closed by the connection's ClosedHandler

	mu      sync.Mutex
	subs    map[*subscription]struct{}
	closing bool

	closeOnce sync.Once
	closeErr  error
}

// Open starts the embedded server (or connects to cfg.URL), and creates the stream or
// updates it to cfg.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bus{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "natsbus"),
		closed: make(chan struct{}),
		subs:   make(map[*subscription]struct{}),
	}

	natsOpts := []nats.Option{
		nats.Name("orderpay"),
		nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				b.log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
	}
	url := cfg.URL
	if url == "" {
		eopts := []EmbeddedOption{WithServerLogger(cfg.Logger)}
		if cfg.ListenAddr != "" {
			eopts = append(eopts, ListenOn(cfg.ListenAddr))
		}
		if cfg.SyncAlways {
			eopts = append(eopts, WithSyncAlways())
		}
		srv, err := StartEmbedded(cfg.StoreDir, eopts...)
		if err != nil {
			return nil, err
		}
		b.srv = srv
		natsOpts = append(natsOpts, nats.InProcessServer(srv))
	} else {
		// A broker restart must not end the process's only connection: keep trying.
		natsOpts = append(natsOpts, nats.MaxReconnects(-1))
	}

	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		b.stopServer()
		return nil, fmt.Errorf("natsbus: connect: %w", err)
	}
	b.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		b.abort()
		return nil, fmt.Errorf("natsbus: jetstream: %w", err)
	}
	b.js = js

	if _, err := js.CreateOrUpdateStream(ctx, b.streamConfig()); err != nil {
		b.abort()
		return nil, fmt.Errorf("natsbus: create or update stream %s: %w", cfg.Stream, err)
	}
	if err := b.ensureTimerStream(ctx); err != nil {
		b.abort()
		return nil, err
	}
	b.log.Info("bus open", "stream", cfg.Stream, "embedded", b.srv != nil)
	return b, nil
}

func (b *Bus) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:     b.cfg.Stream,
		Subjects: b.cfg.Subjects,
		// Events are the record of what happened; they must survive a restart.
		Storage:  jetstream.FileStorage,
		Replicas: b.cfg.Replicas,
		// Limits retention: several consumers (order system, points, SMS) read the
		// same events independently, and an operator can replay them.
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardOld,
		Duplicates: b.cfg.DuplicateWindow,
		// Later issues drive active queries and deadlines with scheduled messages
		// (DESIGN §5, §10). Schedules need roll-ups; the server would turn them on by
		// itself, so say it here to keep the config we send equal to the one stored.
		AllowMsgSchedules: true,
		AllowRollup:       true,
	}
}

// Publish stores m.Payload on m.Subject, with m.ID as the JetStream message ID: a second
// publish of the same ID within the duplicate window is acknowledged but not stored again,
// and counts as success. It returns only after the stream has stored the message.
func (b *Bus) Publish(ctx context.Context, m orderpay.Message) error {
	if m.ID == "" {
		// Without an ID the broker cannot drop the relay's re-publish after a crash.
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: message on %q has no ID", m.Subject)
	}
	if m.Subject == "" {
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: message %q has no subject", m.ID)
	}
	ack, err := b.js.Publish(ctx, m.Subject, m.Payload,
		jetstream.WithMsgID(m.ID),
		// Fail rather than succeed if another stream captured the subject.
		jetstream.WithExpectStream(b.cfg.Stream),
	)
	if err != nil {
		return fmt.Errorf("natsbus: publish %s %s: %w", m.Subject, m.ID, err)
	}
	if ack.Duplicate {
		b.log.Debug("duplicate publish dropped by the broker", "subject", m.Subject, "id", m.ID, "seq", ack.Sequence)
	}
	return nil
}

// JetStream returns the JetStream API of the bus, for later features (scheduled
// messages, stream inspection).
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Conn returns the bus's NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// Server returns the embedded server, or nil when the bus is connected to an external one.
func (b *Bus) Server() *server.Server { return b.srv }

// StreamName returns the name of the bus's stream.
func (b *Bus) StreamName() string { return b.cfg.Stream }

// Close stops every subscription (waiting for running handlers), drains the connection so
// that in-flight acks reach the server, and shuts the embedded server down so that its
// file store is flushed and unlocked. It is safe to call more than once.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Bus) close() error {
	b.mu.Lock()
	b.closing = true
	subs := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}

	var errs []error
	if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("natsbus: drain: %w", err))
		b.nc.Close()
	}
	select {
	case <-b.closed:
	case <-time.After(closeTimeout):
		errs = append(errs, fmt.Errorf("natsbus: connection did not drain within %s", closeTimeout))
		b.nc.Close()
	}
	b.stopServer()
	b.log.Info("bus closed", "stream", b.cfg.Stream)
	return errors.Join(errs...)
}

// abort undoes a half-finished Open.
func (b *Bus) abort() {
	b.nc.Close()
	b.stopServer()
}

func (b *Bus) stopServer() {
	if b.srv != nil {
		stopServer(b.srv)
	}
}

// Package natsbus is orderpay's bus on NATS JetStream: an embedded server for the default
// one-binary setup, the stream that carries order.*, payment.* and refund.* events, durable
// consumers that ack only after the handler has committed, and the outbox relay that moves
// committed messages from the database to the stream (docs/design.md §2, §2).
//
// Delivery is at least once, end to end. The relay may publish a message twice and a
// consumer may see it twice; JetStream drops re-publishes of the same message ID within the
// duplicate window, and every handler is idempotent (docs/design.md §2) for the rest.
//
// On an external server or cluster nothing depends on the bus being up: the streams are
// kept in shape and the consumers attached in the background (streams.go, subscribe.go),
// publishing fails fast while the bus is down (the outbox keeps the messages), and timers
// go through an in-memory queue (timerqueue.go). Ready says what is missing.
package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderpay"
)

// Defaults of Config.
const (
	DefaultStream          = "ORDERPAY"
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultTimerHorizon: a minute of timers on the broker, the rest in the process.
	DefaultTimerHorizon  = time.Minute
	DefaultAckWait       = 30 * time.Second
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second

	// DefaultClusterReplicas is the replica count on a cluster of three or more nodes
	// (Replicas 0): a stream survives one node lost, disk and all, and keeps a quorum.
	DefaultClusterReplicas = 3

	// DefaultMaxAge and DefaultMaxBytes bound the event stream: a week of events, for
	// consumers that were down over a long weekend and for replays, and at most 1 GiB per
	// replica. The oldest events go first (DiscardOld); the database keeps every one.
	DefaultMaxAge   = 7 * 24 * time.Hour
	DefaultMaxBytes = 1 << 30
	// DefaultTimerMaxAge and DefaultTimerMaxBytes bound the timer stream. A timer waits at
	// most the longest step of the query schedule (10 minutes), so a day only drops
	// timers nobody handled for a day, which the sweepers took long before. A million
	// pending timers take some 270 MiB.
	DefaultTimerMaxAge   = 24 * time.Hour
	DefaultTimerMaxBytes = 1 << 30
)

// DefaultSubjects are the subjects of the default stream: the events of both bounded
// contexts (docs/design.md §5, "Downstream events"), the business apps' (app.>, package
// apppay), and the queued SKUs' tickets (ticket.>, the order system's queue).
func DefaultSubjects() []string {
	return []string{"order.>", "payment.>", "refund.>", "app.>", "ticket.>"}
}

// publishAckTimeout bounds the wait for the broker's acknowledgement of an asynchronous
// publish, as the client's default API timeout bounds a synchronous one.
const publishAckTimeout = 5 * time.Second

// closeTimeout bounds how long Close waits for the connection to drain.
const closeTimeout = 10 * time.Second

// openReadyWait is how long Open waits for an external bus's streams once connected, so
// that an instance on a healthy cluster is ready when Open returns. Past it, Open returns anyway and the
// streams and consumers are made ready in the background: a node or the whole cluster
// down must not hold up the start (an instance keeps its events in the outbox meanwhile).
const openReadyWait = 2 * time.Second

// Config says where the bus lives and how its streams are shaped. The zero value is not
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

	// The credentials for an external server, at most one kind: CredsFile, a .creds file
	// (a user JWT and its nkey seed); NkeyFile, an nkey seed file; User and Password; or
	// Token. Credentials in URL are a kind too. Default to none. The embedded server takes
	// none.
	CredsFile string
	NkeyFile  string
	User      string
	Password  string
	Token     string
	// CAFile is the PEM file of the CA the external server's certificate must chain to. It
	// turns TLS on, as a tls:// URL does (which verifies against the system's CAs).
	// Defaults to "".
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM), for a server that
	// asks for one (mutual TLS). They go together and turn TLS on. Default to "".
	CertFile string
	KeyFile  string

	// Stream is the JetStream stream name. Defaults to "ORDERPAY".
	Stream string
	// Subjects the stream captures. Defaults to DefaultSubjects.
	Subjects []string
	// Replicas of every stream and consumer. 0, the default, is detected at the first
	// connect: 1 on the embedded server or a single server, the cluster's size on a
	// cluster of one or two nodes, 3 (DefaultClusterReplicas) on three or more. The size
	// is the number of distinct servers the client knows: those in URL and those the
	// cluster announces.
	Replicas int
	// MaxAge and MaxBytes bound the event stream (per replica). Default to 7 days and
	// 1 GiB; negative means unlimited.
	MaxAge   time.Duration
	MaxBytes int64
	// TimerMaxAge and TimerMaxBytes bound the timer stream. Default to 24 hours and
	// 1 GiB; negative means unlimited. TimerMaxAge must exceed the longest timer.
	TimerMaxAge   time.Duration
	TimerMaxBytes int64
	// TimerHorizon is how far ahead of its due time a timer set through Timers() goes onto
	// the broker; until then it waits in this process, compactly (TimerQueue). Defaults to
	// DefaultTimerHorizon; negative puts every timer on the broker at once.
	TimerHorizon time.Duration
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

// withDefaults returns cfg with every unset field set to its documented default. Replicas
// stays 0 when unset: it is detected at connect (Bus.replicasFor).
func (cfg Config) withDefaults() Config {
	cfg.Stream = cmp.Or(cfg.Stream, DefaultStream)
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = DefaultSubjects()
	}
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.TimerMaxAge = cmp.Or(cfg.TimerMaxAge, DefaultTimerMaxAge)
	cfg.TimerMaxBytes = cmp.Or(cfg.TimerMaxBytes, DefaultTimerMaxBytes)
	cfg.DuplicateWindow = cmp.Or(cfg.DuplicateWindow, DefaultDuplicateWindow)
	cfg.TimerHorizon = cmp.Or(cfg.TimerHorizon, DefaultTimerHorizon)
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
	case cfg.URL == "" && cfg.Replicas > 1:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: the embedded server is a single node; Replicas must be 1, not %d", cfg.Replicas)
	case cfg.URL == "" && cfg.secured():
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: credentials and TLS apply only to an external server")
	case cfg.credentialKinds() > 1:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: give one kind of credentials (CredsFile, NkeyFile, User and Password, Token, or in URL), not several")
	case (cfg.User == "") != (cfg.Password == ""):
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: User and Password go together")
	case (cfg.CertFile == "") != (cfg.KeyFile == ""):
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: CertFile and KeyFile go together")
	case cfg.Replicas < 0 || cfg.Replicas > 5:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: Replicas must be between 1 and 5 (0 to detect), not %d", cfg.Replicas)
	case cfg.DuplicateWindow < 0, cfg.AckWait < 0, cfg.RetryDelay < 0, cfg.MaxRetryDelay < 0:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: durations must not be negative")
	case cfg.RetryDelay > cfg.MaxRetryDelay:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: RetryDelay %s exceeds MaxRetryDelay %s", cfg.RetryDelay, cfg.MaxRetryDelay)
	case cfg.MaxAge > 0 && cfg.MaxAge < cfg.DuplicateWindow:
		// The server refuses a duplicate window longer than the stream keeps messages.
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: MaxAge %s is shorter than DuplicateWindow %s", cfg.MaxAge, cfg.DuplicateWindow)
	case cfg.TimerMaxAge > 0 && cfg.TimerMaxAge < time.Minute:
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: TimerMaxAge %s would drop timers before they fire", cfg.TimerMaxAge)
	}
	for _, s := range cfg.Subjects {
		if strings.TrimSpace(s) == "" {
			return orderpay.Errorf(orderpay.EINVALID, "natsbus: empty stream subject")
		}
	}
	return nil
}

// secured reports whether any credential or TLS setting is given.
func (cfg Config) secured() bool {
	return cfg.credentialKinds() > 0 || cfg.User != "" || cfg.Password != "" || cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != ""
}

// credentialKinds counts the kinds of credentials given, those in URL included.
func (cfg Config) credentialKinds() int {
	n := 0
	for _, given := range []bool{cfg.CredsFile != "", cfg.NkeyFile != "", cfg.User != "" || cfg.Password != "", cfg.Token != "", urlHasCredentials(cfg.URL)} {
		if given {
			n++
		}
	}
	return n
}

// urlHasCredentials reports whether any server of a NATS URL list carries a user, a
// password or a token.
func urlHasCredentials(urls string) bool {
	for _, s := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// securityOptions are the client options of the credentials and TLS of an external bus.
// A file the client reads only when it connects is opened now: a path that is wrong is a
// configuration error, not a bus that never gets ready.
func (cfg Config) securityOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case cfg.CredsFile != "":
		f, err := os.Open(cfg.CredsFile)
		if err != nil {
			return nil, fmt.Errorf("natsbus: creds file: %w", err)
		}
		f.Close()
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NkeyFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("natsbus: nkey seed file: %w", err)
		}
		opts = append(opts, o)
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	}
	// Both load their files when applied (nats.Connect fails if they cannot) and again
	// at every TLS handshake.
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	return opts, nil
}

// Bus is an open connection to JetStream, and the embedded server when there is one.
// Its methods are safe for concurrent use.
//
// On an external server or cluster the connection, the streams and the consumers are
// kept up in the background: Open does not fail because the bus is unreachable, and Ready
// says what is missing. Publishing fails fast while the bus is down (the outbox keeps the
// messages), and subscriptions attach once it is back.
type Bus struct {
	cfg    Config
	log    *slog.Logger
	srv    *server.Server // nil when connected to an external server
	nc     *nats.Conn
	js     jetstream.JetStream
	closed chan struct{} // closed by the connection's ClosedHandler

	bg       context.Context // the background work: stream upkeep, attachments, timer queue
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	kick     chan struct{} // asks the upkeep for a pass now

	state     sync.Mutex
	ready     bool          // every stream exists, as last checked
	notReady  error         // why not, when not
	readyCh   chan struct{} // closed when ready becomes true; replaced when it turns false
	replicas  int           // resolved at the first connected pass
	onReady   []func()
	created   map[string]time.Time // when each stream was created, as first seen
	missing   map[string]time.Time // when a stream seen before was first found missing
	seen      map[string]bool      // warnings given once (firstTime)
	timerQ    *TimerQueue
	timerOnce sync.Once
	passes    atomic.Int64 // upkeep passes done, updates included (for tests)

	mu      sync.Mutex
	subs    map[*attachment]struct{}
	closing bool

	closeOnce sync.Once
	closeErr  error
}

// Open starts the embedded server (or connects to cfg.URL) and makes sure the streams
// exist. The embedded bus is ready when Open returns, or Open fails. An external bus is
// given a short while (openReadyWait) to get ready; after that Open returns a bus that
// keeps connecting, creating the streams and attaching subscriptions in the background.
// Open fails for an external bus only when cfg is invalid.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bus{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "natsbus"),
		closed:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
		readyCh: make(chan struct{}),
		subs:    make(map[*attachment]struct{}),
	}
	b.notReady = errors.New("connecting")
	b.bg, b.bgCancel = context.WithCancel(context.Background())

	natsOpts := []nats.Option{
		nats.Name("orderpay"),
		nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.setNotReady(errors.New("disconnected from NATS"))
			if err != nil {
				b.log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			if b.srv == nil { // the embedded server's in-process connection has no URL to show
				b.log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted(), "cluster", nc.ConnectedClusterName())
			}
			b.poke()
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
			b.poke()
		}),
		// The client's default writes these to stderr, around the process's logs.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				b.log.Warn("NATS error", "subject", sub.Subject, "err", err)
				return
			}
			b.log.Warn("NATS error", "err", err)
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
		// A broker restart must not end the process's only connection, and a broker down
		// at start must not stop the process: keep trying, in the background.
		// A second between rounds (the client's default is 2) shortens how long the outbox
		// holds events once the bus is back, for one cheap dial per server per second.
		natsOpts = append(natsOpts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(time.Second))
		secOpts, err := cfg.securityOptions()
		if err != nil {
			return nil, err
		}
		natsOpts = append(natsOpts, secOpts...)
		natsOpts = append(natsOpts,
			// The client gives up for good after the same authorization error twice. The
			// server's users may be fixed after this instance started: keep trying, as
			// for a server that is down.
			nats.IgnoreAuthErrorAbort(),
			// The only word of why the first connect failed when the server refused the
			// credentials or the TLS handshake. Dials to a server that is down are not
			// logged: they fail once a second, and Ready says so.
			nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
				var netErr *net.OpError
				if err != nil && !(errors.As(err, &netErr) && netErr.Op == "dial") && !errors.Is(err, nats.ErrNoServers) {
					b.log.Warn("could not connect to NATS; retrying", "err", err)
				}
			}),
		)
	}

	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		b.stopServer()
		return nil, fmt.Errorf("natsbus: connect: %w", err)
	}
	b.nc = nc
	// An asynchronous publish (PublishBatch) the broker never answers fails after this
	// long, as a synchronous one does.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		b.abort()
		return nil, fmt.Errorf("natsbus: jetstream: %w", err)
	}
	b.js = js

	if b.srv != nil {
		// The embedded server is part of this process: a stream it refuses is a
		// configuration error, reported now.
		if err := b.ensureStreams(ctx); err != nil {
			b.abort()
			return nil, err
		}
	}
	b.bgWG.Add(1)
	go b.upkeep()
	// Not connected after trying every server once: nothing to wait for.
	if b.srv == nil && nc.IsConnected() {
		wctx, cancel := context.WithTimeout(ctx, openReadyWait)
		if err := b.WaitReady(wctx); err != nil {
			b.log.Warn("bus not ready yet; starting anyway, events wait in the outbox", "why", b.Ready())
		}
		cancel()
	}
	b.log.Info("bus open", "stream", cfg.Stream, "embedded", b.srv != nil)
	return b, nil
}

// errCodeDuplicateInProcess is the server's JSStreamDuplicateMessageConflict: a message
// with this ID is being stored by another publish. Publish tries duplicateInProcessTries
// times before it reports it.
const (
	errCodeDuplicateInProcess jetstream.ErrorCode = 10158
	duplicateInProcessTries                       = 5
)

func isAPIError(err error, code jetstream.ErrorCode) bool {
	var je jetstream.JetStreamError
	return errors.As(err, &je) && je.APIError() != nil && je.APIError().ErrorCode == code
}

// errNotConnected is what Publish and SetTimer return at once while the connection is
// down, instead of waiting out a timeout: the caller (the relay, the timer queue) keeps
// the message and tries again once the bus is back.
var errNotConnected = errors.New("natsbus: not connected to NATS")

// Publish stores m.Payload on m.Subject, with m.ID as the JetStream message ID: a second
// publish of the same ID within the duplicate window is acknowledged but not stored again,
// and counts as success. It returns only after the stream has stored the message, and
// fails at once while the connection is down.
func (b *Bus) Publish(ctx context.Context, m orderpay.Message) error {
	if m.ID == "" {
		// Without an ID the broker cannot drop the relay's re-publish after a crash.
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: message on %q has no ID", m.Subject)
	}
	if m.Subject == "" {
		return orderpay.Errorf(orderpay.EINVALID, "natsbus: message %q has no subject", m.ID)
	}
	if !b.nc.IsConnected() {
		return fmt.Errorf("natsbus: publish %s %s: %w", m.Subject, m.ID, errNotConnected)
	}
	var ack *jetstream.PubAck
	var err error
	for try := 1; ; try++ {
		ack, err = b.js.Publish(ctx, m.Subject, m.Payload,
			jetstream.WithMsgID(m.ID),
			// Fail rather than succeed if another stream captured the subject.
			jetstream.WithExpectStream(b.cfg.Stream),
		)
		// Another instance's relay is storing the same message right now (both read it
		// from the shared outbox); on a replicated stream that takes a round of the
		// cluster. Once it is stored, the same publish is a duplicate, and a success.
		if try == duplicateInProcessTries || !isAPIError(err, errCodeDuplicateInProcess) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrNoResponders) {
			// The stream may be gone (deleted, or lost with a single-replica node): the
			// upkeep checks, and creates it again if so.
			b.poke()
		}
		return fmt.Errorf("natsbus: publish %s %s: %w", m.Subject, m.ID, err)
	}
	if ack.Duplicate {
		b.log.Debug("duplicate publish dropped by the broker", "subject", m.Subject, "id", m.ID, "seq", ack.Sequence)
	}
	return nil
}

// PublishBatch stores msgs on the broker and returns how many of them, counted from the
// first, the broker has acknowledged. It sends them all before it waits for the first
// acknowledgement, so a batch costs about one round trip, not one per message. A message
// the broker did not acknowledge is sent again alone (Publish, which also waits out another
// instance storing it at the same moment), and the first that still fails ends the batch:
// the caller marks only the acknowledged prefix, and sends the rest again later, which the
// broker drops as duplicates if they were stored meanwhile.
func (b *Bus) PublishBatch(ctx context.Context, msgs []orderpay.Message) (int, error) {
	// One message, or no connection: each is sent alone below.
	async := len(msgs) > 1 && b.nc.IsConnected()
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		if !async || m.ID == "" || m.Subject == "" {
			break // Publish says why
		}
		f, err := b.js.PublishAsync(m.Subject, m.Payload, jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(b.cfg.Stream))
		if err != nil {
			break
		}
		futures = append(futures, f)
	}
	for i, m := range msgs {
		if i < len(futures) {
			select {
			case <-futures[i].Ok():
				continue
			case <-futures[i].Err():
			case <-ctx.Done():
				return i, ctx.Err()
			}
		}
		if err := b.Publish(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
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

// Close stops the timer queue and every subscription (waiting for running handlers),
// drains the connection so that in-flight acks reach the server, and shuts the embedded
// server down so that its file store is flushed and unlocked. It is safe to call more than
// once.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Bus) close() error {
	b.mu.Lock()
	b.closing = true
	subs := make([]*attachment, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	b.bgCancel()
	b.bgWG.Wait()

	var errs []error
	switch err := b.nc.Drain(); {
	case err == nil, errors.Is(err, nats.ErrConnectionClosed):
	case errors.Is(err, nats.ErrConnectionReconnecting):
		// Not connected: nothing to drain, and Drain closed the connection.
	default:
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
	b.bgCancel()
	b.nc.Close()
	b.stopServer()
}

func (b *Bus) stopServer() {
	if b.srv != nil {
		stopServer(b.srv)
	}
}

package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedReadyTimeout bounds how long StartEmbedded waits for the server to accept
// connections. Recovering a large file store can take a while, so it is generous.
const embeddedReadyTimeout = 30 * time.Second

// EmbeddedOption changes how StartEmbedded runs the server.
type EmbeddedOption func(*embeddedOptions)

type embeddedOptions struct {
	listenAddr string
	logger     *slog.Logger
	syncAlways bool
}

// ListenOn makes the embedded server also accept TCP clients on hostPort ("127.0.0.1:4222").
// Port 0 picks a free port; read it back with (*server.Server).ClientURL. Without this
// option the server only takes in-process connections (nats.InProcessServer).
func ListenOn(hostPort string) EmbeddedOption {
	return func(o *embeddedOptions) { o.listenAddr = hostPort }
}

// WithServerLogger sends the server's log lines to l. Without it the server logs nothing.
func WithServerLogger(l *slog.Logger) EmbeddedOption {
	return func(o *embeddedOptions) { o.logger = l }
}

// WithSyncAlways makes the file store fsync every write. By default it syncs every two
// minutes: a killed process loses nothing (the writes are in the OS page cache), but a
// power loss or kernel crash could lose the last acknowledged messages.
func WithSyncAlways() EmbeddedOption {
	return func(o *embeddedOptions) { o.syncAlways = true }
}

// StartEmbedded runs a NATS server with JetStream inside this process, with its file store
// under storeDir. It returns once the server accepts connections. By default it listens on
// no TCP port and logs nothing. Stop it with Shutdown and WaitForShutdown.
func StartEmbedded(storeDir string, opts ...EmbeddedOption) (*server.Server, error) {
	if storeDir == "" {
		// nats-server would fall back to a directory under os.TempDir(): messages would
		// silently live somewhere nobody backs up.
		return nil, errors.New("natsbus: embedded server needs a store directory")
	}
	var eo embeddedOptions
	for _, o := range opts {
		o(&eo)
	}

	sopts := &server.Options{
		ServerName: "orderpay",
		JetStream:  true,
		StoreDir:   storeDir,
		SyncAlways: eo.syncAlways,
		DontListen: true,
		NoLog:      true, // we install our own logger below, or none
		NoSigs:     true, // signals belong to the host program, not to the broker
	}
	if eo.listenAddr != "" {
		host, portStr, err := net.SplitHostPort(eo.listenAddr)
		if err != nil {
			return nil, fmt.Errorf("natsbus: listen address %q: %w", eo.listenAddr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("natsbus: listen address %q: bad port", eo.listenAddr)
		}
		if port == 0 {
			port = server.RANDOM_PORT // for nats-server, 0 would mean 4222
		}
		sopts.DontListen = false
		sopts.Host = host
		sopts.Port = port
	}

	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsbus: new embedded server: %w", err)
	}
	// The server reports start-up failures (store directory locked or unwritable, port
	// taken) only through Fatalf. The logger records them so that we can return them as
	// errors instead of waiting out the ready timeout.
	logger := &serverLogger{log: eo.logger}
	debug := eo.logger != nil && eo.logger.Enabled(context.Background(), slog.LevelDebug)
	srv.SetLoggerV2(logger, debug, false, false)

	srv.Start()
	if err := logger.fatal(); err != nil {
		stopServer(srv)
		return nil, fmt.Errorf("natsbus: start embedded server: %w", err)
	}
	if !srv.ReadyForConnections(embeddedReadyTimeout) {
		err := logger.fatal()
		stopServer(srv)
		if err == nil {
			err = fmt.Errorf("not ready after %s", embeddedReadyTimeout)
		}
		return nil, fmt.Errorf("natsbus: start embedded server: %w", err)
	}
	if !srv.JetStreamEnabled() {
		stopServer(srv)
		return nil, errors.New("natsbus: start embedded server: JetStream is not enabled")
	}
	return srv, nil
}

func stopServer(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

// serverLogger adapts nats-server's printf-style Logger to slog, and remembers the first
// fatal error. A nil log discards everything but the fatal error.
type serverLogger struct {
	log *slog.Logger

	mu       sync.Mutex
	firstErr error
}

var _ server.Logger = (*serverLogger)(nil)

func (l *serverLogger) fatal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstErr
}

func (l *serverLogger) emit(level slog.Level, format string, v []any) {
	if l.log == nil {
		return
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, v...), "component", "nats-server")
}

// Notices (the start-up banner, limits, store paths) are debug detail for an embedded broker.
func (l *serverLogger) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.emit(slog.LevelDebug-4, format, v) }

// Fatalf never exits the process: the embedding program decides what a broken broker means.
func (l *serverLogger) Fatalf(format string, v ...any) {
	l.mu.Lock()
	if l.firstErr == nil {
		l.firstErr = fmt.Errorf(format, v...)
	}
	l.mu.Unlock()
	l.emit(slog.LevelError, format, v)
}

package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
	"orderpay/httpapi"
	"orderpay/natsbus"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/sqlstore"
)

// Config is everything `orderpay serve` can be told, by flag or ORDERPAY_* variable.
type Config struct {
	Addr       string // API listen address. Defaults to 127.0.0.1:8080.
	SimAddr    string // channel simulator listen address. Defaults to 127.0.0.1:8090.
	DataDir    string // SQLite file, NATS store and simulator keys. Defaults to ./data.
	DB         string // a postgres:// DSN switches to PostgreSQL. Defaults to DataDir/orderpay.db.
	NATS       string // a nats:// URL switches to an external server. Defaults to embedded.
	AdminToken string // bearer token for /admin. Defaults to a random one, printed (dev mode).
	PublicURL  string // the base URL channels post notifications to. Defaults to the API's URL.
	LogFormat  string // text or json. Defaults to text.
	LogLevel   string // debug, info, warn or error. Defaults to info.
}

// Main is a running `orderpay serve`: the wiring of every part, and nothing else.
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	// Set by Run.
	URL        string // the API, e.g. http://127.0.0.1:8080
	SimURL     string // the channel simulator
	AdminToken string
	Store      *sqlstore.Store
	Bus        *natsbus.Bus
	Sim        *sim.Simulator
	Orders     *order.Service
	Payments   *payment.Service

	// noDirectResults switches off the payment center's direct call to the order system,
	// so that a test can show the bus path alone delivers results.
	noDirectResults bool

	log        *slog.Logger
	cancel     context.CancelFunc
	done       chan struct{}
	unsub      func()
	servers    []*http.Server
	closeFuncs []func()
}

// NewMain returns a Main with the defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{Addr: "127.0.0.1:8080", SimAddr: "127.0.0.1:8090", DataDir: "data", LogFormat: "text", LogLevel: "info"},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads the ORDERPAY_* environment, then the flags, which win.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("orderpay serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	c := &m.Config
	for _, f := range []struct {
		dst        *string
		name, help string
	}{
		{&c.Addr, "addr", "API listen address"},
		{&c.SimAddr, "sim-addr", "channel simulator listen address"},
		{&c.DataDir, "data", "data directory (SQLite, NATS store, simulator keys)"},
		{&c.DB, "db", "postgres:// DSN (default: SQLite under the data directory)"},
		{&c.NATS, "nats", "nats:// URL of an external server (default: embedded)"},
		{&c.AdminToken, "admin-token", "bearer token for /admin (default: generated and printed)"},
		{&c.PublicURL, "public-url", "base URL channels post notifications to (default: the API's URL)"},
		{&c.LogFormat, "log-format", "text or json"},
		{&c.LogLevel, "log-level", "debug, info, warn or error"},
	} {
		env := "ORDERPAY_" + strings.ToUpper(strings.ReplaceAll(f.name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			*f.dst = v
		}
		fs.StringVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return nil
}

func (m *Main) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(m.Config.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch m.Config.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(m.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(m.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format must be text or json, not %q", m.Config.LogFormat)
	}
}

// Run starts every part and returns once the API is listening. Close stops them, also
// after Run failed half-way.
func (m *Main) Run(ctx context.Context) error {
	log, err := m.logger()
	if err != nil {
		return err
	}
	m.log = log
	cfg := m.Config
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}

	m.Store, err = sqlstore.Open(ctx, cmp.Or(cfg.DB, filepath.Join(cfg.DataDir, "orderpay.db")))
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, func() { m.Store.Close() })

	// The channel simulator, with keys made on first start and kept in the data dir.
	keys, err := sim.LoadOrCreateKeys(filepath.Join(cfg.DataDir, "keys"))
	if err != nil {
		return err
	}
	m.Sim, err = sim.New(sim.Config{Keys: keys, Logger: log.With("component", "sim")})
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, m.Sim.Close)
	if m.SimURL, err = m.serve(cfg.SimAddr, m.Sim.Handler()); err != nil {
		return fmt.Errorf("simulator: %w", err)
	}

	// The API listens before the channel is wired, so the notify URL is known.
	apiLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	m.closeFuncs = append(m.closeFuncs, func() { apiLn.Close() })
	m.URL = "http://" + apiLn.Addr().String()
	publicURL := strings.TrimSuffix(cmp.Or(cfg.PublicURL, m.URL), "/")

	channels, err := simulatedChannels(keys, m.SimURL)
	if err != nil {
		return err
	}

	m.Bus, err = natsbus.Open(ctx, natsbus.Config{URL: cfg.NATS, StoreDir: filepath.Join(cfg.DataDir, "nats"), Logger: log.With("component", "bus")})
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, func() { m.Bus.Close() })

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	relay := &natsbus.Relay{Outbox: m.Store, Publisher: m.Bus, Logger: log}
	m.done = make(chan struct{})
	go func() { defer close(m.done); relay.Run(runCtx) }()

	// The two contexts: the payment center tells the order system directly (fast path) and
	// through payment.succeeded on the bus; the order system asks the payment center to pay.
	var results orderpay.PaymentResults = orderpay.PaymentResultsFunc(func(ctx context.Context, ev orderpay.PaymentSucceeded) error {
		return m.Orders.PaymentSucceeded(ctx, ev)
	})
	if m.noDirectResults {
		results = nil
	}
	m.Payments, err = payment.New(payment.Config{Store: m.Store, Channels: channels,
		NotifyURL: func(channel string) string { return publicURL + "/notify/" + channel },
		Results:   results, OutboxWritten: relay.Poke, Logger: log})
	if err != nil {
		return err
	}
	m.Orders, err = order.New(order.Config{Store: m.Store, Payments: m.Payments, OutboxWritten: relay.Poke, Logger: log})
	if err != nil {
		return err
	}
	m.unsub, err = m.Bus.Subscribe(runCtx, "order-system-payment-results", orderpay.SubjectPaymentSucceeded, m.consumePaymentSucceeded)
	if err != nil {
		return err
	}
	if _, err := m.Orders.EnsureCatalogue(ctx, order.DemoCatalogue); err != nil {
		return err
	}

	m.AdminToken = cfg.AdminToken
	generated := m.AdminToken == ""
	if generated {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		m.AdminToken = hex.EncodeToString(b[:])
	}
	api := &httpapi.Server{Orders: m.Orders, Payments: m.Payments, AdminToken: m.AdminToken, Logger: log,
		Ready: func(ctx context.Context) error {
			if err := m.Store.DB().PingContext(ctx); err != nil {
				return errors.New("database unreachable")
			}
			if !m.Bus.Conn().IsConnected() {
				return errors.New("broker unreachable")
			}
			return nil
		}}
	m.serveListener(apiLn, api.Handler())

	fmt.Fprintf(m.Stdout, "orderpay is running (store: %s, broker: %s)\n", m.Store.Dialect(), cmp.Or(cfg.NATS, "embedded NATS JetStream"))
	fmt.Fprintf(m.Stdout, "  API:                 %s\n", m.URL)
	fmt.Fprintf(m.Stdout, "  catalogue:           %s/v1/skus\n", m.URL)
	fmt.Fprintf(m.Stdout, "  channel simulator:   %s  (pay: POST /sim/pay, ledger: GET /sim/ledger)\n", m.SimURL)
	fmt.Fprintf(m.Stdout, "  channel notify URLs: %s/notify/alipay, %s/notify/wechat\n", publicURL, publicURL)
	if generated {
		fmt.Fprintf(m.Stdout, "  admin token (dev mode, generated for this run): %s\n", m.AdminToken)
	}
	return nil
}

// simulatedChannels are the Alipay and WeChat Pay adapters, pointed at the simulator with
// the keys it made.
func simulatedChannels(keys *sim.Keys, simURL string) (map[string]orderpay.Channel, error) {
	appKey, err := keys.AppPrivateKeyPEM()
	if err != nil {
		return nil, err
	}
	alipayKey, err := keys.AlipayPublicKeyPEM()
	if err != nil {
		return nil, err
	}
	ali, err := alipay.New(alipay.Config{AppID: keys.AppID, SellerID: keys.SellerID, AppPrivateKeyPEM: appKey,
		AlipayPublicKeyPEM: alipayKey, GatewayURL: simURL + "/gateway.do"})
	if err != nil {
		return nil, err
	}
	wk := &keys.Wechat
	merchantKey, err := wk.MerchantPrivateKeyPEM()
	if err != nil {
		return nil, err
	}
	platformKey, err := wk.PlatformPublicKeyPEM()
	if err != nil {
		return nil, err
	}
	wx, err := wechat.New(wechat.Config{MchID: wk.MchID, AppID: wk.AppID, MerchantSerial: wk.MerchantSerial,
		MerchantPrivateKeyPEM: merchantKey, PlatformPublicKeyPEM: platformKey, PublicKeyID: wk.PublicKeyID,
		APIv3Key: wk.APIv3Key, BaseURL: simURL})
	if err != nil {
		return nil, err
	}
	return map[string]orderpay.Channel{orderpay.ChannelAlipay: ali, orderpay.ChannelWechat: wx}, nil
}

// consumePaymentSucceeded is the bus path of payment results. The message is acked only
// after the order system has committed (the handler returns nil); an error retries it. A
// result the order can never take (it was cancelled) is acked and alerted: retrying cannot
// help, and the payment center refunds it.
func (m *Main) consumePaymentSucceeded(ctx context.Context, msg orderpay.Message) error {
	var ev orderpay.PaymentSucceeded
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		m.log.Error("malformed payment.succeeded dropped", "msg_id", msg.ID, "err", err)
		return nil
	}
	err := m.Orders.PaymentSucceeded(ctx, ev)
	if code := orderpay.ErrorCode(err); code == orderpay.ECONFLICT || code == orderpay.ENOTFOUND {
		m.log.Error("payment result cannot be applied", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "err", err)
		return nil
	}
	return err
}

func (m *Main) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	m.serveListener(ln, h)
	return "http://" + ln.Addr().String(), nil
}

func (m *Main) serveListener(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	m.servers = append(m.servers, srv)
	go srv.Serve(ln)
}

// Close stops everything Run started, in reverse order.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := len(m.servers) - 1; i >= 0; i-- {
		m.servers[i].Shutdown(ctx)
	}
	if m.unsub != nil {
		m.unsub()
	}
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	for i := len(m.closeFuncs) - 1; i >= 0; i-- {
		m.closeFuncs[i]()
	}
	m.servers, m.closeFuncs, m.cancel, m.unsub = nil, nil, nil, nil
	return nil
}

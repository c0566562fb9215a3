package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/buyerauth"
	"orderpay/channel/alipay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
	"orderpay/downstream"
	"orderpay/httpapi"
	"orderpay/metrics"
	"orderpay/natsbus"
	"orderpay/operators"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/reconcile"
	"orderpay/sqlstore"
	"orderpay/webhook"
)

// Config is everything `orderpay serve` can be told, by flag or ORDERPAY_* variable.
type Config struct {
	Addr       string // API listen address. Defaults to 127.0.0.1:8080.
	SimAddr    string // channel simulator listen address. Defaults to 127.0.0.1:8090.
	DataDir    string // SQLite file, NATS store and simulator keys. Defaults to ./data.
	DB         string // a postgres:// DSN switches to PostgreSQL. Defaults to DataDir/orderpay.db.
	NATS       string // a nats:// URL switches to an external server. Defaults to embedded.
	AdminToken string // bearer token for /admin. Defaults to a random one, printed (dev mode).
	// AdminTokenFile holds the admin token instead of AdminToken, so that it is in no
	// process listing or environment.
	AdminTokenFile string
	// SecretsOnCommandLine are the secret-holding flags (--admin-token, --webhook-secret,
	// --order-no-key) that ParseFlags found given as command-line arguments (not from
	// their ORDERPAY_ variables), where the process listing shows them: refused with real
	// channels.
	SecretsOnCommandLine []string
	// PprofAddr, if set, serves Go's profiler (net/http/pprof) on its own listener there,
	// never on the API's. Off by default: a profile shows the program's internals.
	PprofAddr string
	// MetricsAddr is where the Prometheus metrics (/metrics) are served, on their own
	// listener, never the API's: they show orders and payments by status, which the keyed
	// order numbers keep from the buyers. "off" serves none. Defaults to 127.0.0.1:8081.
	MetricsAddr string
	// MetricsAllowRemote lets MetricsAddr be other than a loopback address when real
	// channels are configured (checkPosture): say so once a firewall or a private network
	// keeps the address from the public.
	MetricsAllowRemote bool
	// GCFloor is the Go heap, in bytes, below which the collector does not run (setGCFloor);
	// 0: Go's own minimum (4 MiB). Defaults to 32 MiB.
	GCFloor int64
	// OperatorsFile names the operators of the console and the admin API, each with a role
	// and the SHA-256 of their token (package operators). With it no admin token is
	// generated; --admin-token may still add the single admin of development.
	OperatorsFile string
	PublicURL     string // the base URL channels post notifications to. Defaults to the API's URL.
	LogFormat     string // text or json. Defaults to text.
	LogLevel      string // debug, info, warn or error. Defaults to info.
	LogSource     bool   // adds the source file and line to every log line. Defaults to false.
	// Channels is the channels file: the merchant accounts, their keys and certificates
	// (package channelfile, docs/going-live.md). With it no simulator is started: the
	// channels are the ones it names (real gateways, or an `orderpay sim` through the file
	// it writes). Without it, the built-in simulator is started: the demo.
	Channels string
	// KeysDir holds the built-in simulator's keys and ids, and the order-number key.
	// Defaults to DataDir/keys.
	KeysDir string

	// PayWindows is the unpaid timeout per product type. Defaults to 3 days (normal),
	// 30 minutes (special), 15 minutes (fast).
	PayWindows orderpay.PayWindows
	// BuyerCaps bound what one buyer may hold unpaid, per product type
	// (orderpay.DefaultBuyerCaps; --order-qty-cap, --unpaid-qty-cap, --unpaid-orders-cap).
	BuyerCaps orderpay.BuyerCaps
	// Retention is how long what only operators read is kept (logs, published messages, raw
	// channel bodies; orderpay.DefaultRetention), removed every RetentionInterval (1 h). Both
	// scaled by TimeScale.
	Retention         orderpay.RetentionPolicy
	RetentionInterval time.Duration
	// RefundRetry is when a refund the channel refused for now (balance, frequency) is sent
	// again, and when it goes before an operator instead (orderpay.DefaultRefundRetryPlan:
	// 1m, 5m, 30m, 2h, 6h, then every 12h for 7 days). Scaled by TimeScale.
	RefundRetry orderpay.RefundRetryPlan
	// CloseGrace is how long after an order's deadline the timeout close starts, a margin
	// for clocks that disagree with the channel's. Defaults to 30 s.
	CloseGrace time.Duration
	// PosWait is how long a till's barcode payment waits for the buyer before its trade is
	// ended at the channel and the till is answered (docs/barcode.md). Wall time, never
	// scaled: the channels count it so. Defaults to orderpay.BarcodeBoundDefault.
	PosWait time.Duration
	// SweepInterval is how often the timeout and refund sweepers look for due work.
	// Defaults to 1 s.
	SweepInterval time.Duration
	// HoldReleaseInterval is how often the hold sweeper gives back the units of expired
	// holds of "reserve" SKUs. Defaults to 1 s.
	HoldReleaseInterval time.Duration
	// Compensation is how lost payment results are found before the deadline: "delayed"
	// (the design's delayed-query schedule), "scan" (every ScanInterval, query the
	// attempts older than ScanAge, as common gateways do) or "notify-only". Defaults to
	// delayed.
	Compensation string
	ScanInterval time.Duration // Defaults to 1 minute.
	ScanAge      time.Duration // Defaults to 10 minutes.
	// OrderNo is the order-number scheme: "sequence", the date and the day's
	// sequence under a keyed permutation, which never collides; or "timestamp", the time
	// and 6 random digits, retried on collision. Defaults to sequence.
	OrderNo string
	// OrderNoKey is the sequence scheme's secret. Defaults to the one in
	// KeysDir/order-no.key, made on first start. Instances on one database must share it.
	OrderNoKey string
	// TimeScale divides every duration above (deadlines, grace, sweeps, scans), to run a
	// day of orders in minutes under the chaos harness. Defaults to 1.
	TimeScale float64
	// RateLimits bound the buyers' writes (create, pay, cancel, return, address, receipt,
	// after-sales), all buyers together and each buyer, and the admin requests per address,
	// in real time (TimeScale does not touch them). Default to 1000/s with a burst of 2000
	// (some five times what one instance sustains, so it guards against floods without
	// capping normal load), 5/s with a burst of 30 (a person typing requests never reaches
	// it, a script flooding one buyer does at once), and 20/s with a burst of 40; a zero
	// Limit is off.
	RateLimits httpapi.RateLimits
	// ExampleConsumers starts the example downstream consumers (package downstream: points
	// and an SMS log) and their admin reads. Defaults to true.
	ExampleConsumers bool
	// AutoApproveRefundMax is the after-sales rule: a refund before shipping of at most this
	// many fen is approved at once; larger ones wait for the merchant. Defaults to 20000
	// (200 yuan); negative sends every one to review.
	AutoApproveRefundMax int64
	// Webhooks send payment results to business systems (webhooks.go).
	Webhooks WebhookConfig
	// BuyerAuth says who the buyers are (package buyerauth): mode none (the demo: a request
	// names its buyer; refused with remote channels), jwt (a bearer JWT from the shop's
	// login) or header (the shop's gateway names the buyer, trusted from TrustedProxies).
	// Defaults to none.
	BuyerAuth buyerauth.Config
	// TrustedProxies is --trusted-proxies as written (CIDRs), parsed into BuyerAuth: the
	// proxies in front of the API, whose forwarded client address is believed (and, with
	// --buyer-auth header, the gateways the buyer header is accepted from).
	TrustedProxies string
	// WalletClaims is --buyer-jwt-wallet-claims as written: key=claim pairs, parsed into
	// BuyerAuth.WalletClaims.
	WalletClaims string
	// HTTP bounds what one connection may hold of the API server, so that slow or idle
	// clients cannot pile up: defaults in NewMain (10 s for the headers, 15 s for the
	// whole request, 60 s to write the answer, 60 s idle between requests, 32 KiB of
	// headers). Order event streams are exempt from the read and write timeouts and end
	// after Streams.MaxAge instead.
	HTTP HTTPLimits
	// Streams bound the order event streams: per buyer, in all, and their age. Default to
	// httpapi's StreamsPerBuyerDefault (4), StreamsMaxDefault (1000), StreamMaxAgeDefault
	// (10 minutes).
	Streams httpapi.StreamLimits
	// Bus shapes the streams on NATS: replicas and retention (bus.go).
	Bus BusConfig
	// ReconcileAt is when the daily reconciliation of the previous day's bills runs, HH:MM
	// China time, or "off". Defaults to 10:30 (after both channels' bills are out).
	ReconcileAt string
}

// HTTPLimits are the API server's timeouts and header size.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// adminTokenMin is the shortest admin token one may set (the generated one has 64 hex
// characters).
const adminTokenMin = 24

// Compensation strategies.
const (
	CompensationDelayed    = "delayed"
	CompensationScan       = "scan"
	CompensationNotifyOnly = "notify-only"
)

// scaled is d compressed by TimeScale.
func (c *Config) scaled(d time.Duration) time.Duration {
	if c.TimeScale <= 0 {
		return d
	}
	return time.Duration(float64(d) / c.TimeScale)
}

// Main is a running `orderpay serve`: the wiring of every part, and nothing else.
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	// Set by Run.
	URL        string // the API, e.g. http://127.0.0.1:8080
	SimURL     string // the channel simulator
	PprofURL   string // Go's profiler, with --pprof
	MetricsURL string // the Prometheus metrics' listener (its page: MetricsURL + "/metrics"); "" with --metrics-addr off
	AdminToken string
	Store      *sqlstore.Store
	Bus        *natsbus.Bus
	Sim        *sim.Simulator
	Orders     *order.Service
	Payments   *payment.Service
	Apps       *apppay.Service // the business apps' payments API
	Metrics    *metrics.Metrics
	Webhooks   *webhook.Service // nil without --webhook-url

	// noDirectResults switches off the payment center's direct call to the order system,
	// so that a test can show the bus path alone delivers results.
	noDirectResults bool
	// results hands payment results to the order system or the apps, directly and from the bus.
	results *apppay.Results
	// beforeAPIListen, if set, runs just before Run binds the API's port (for a test of
	// that order).
	beforeAPIListen func()
	// simClock, if set, is the built-in simulator's clock (a test's channel whose clock
	// disagrees with ours).
	simClock orderpay.Clock
	// fees is the channels file's fee contracts, by channel.
	fees orderpay.FeeSchedule

	log        *slog.Logger
	cancel     context.CancelFunc
	wg         sync.WaitGroup // the background workers
	unsub      func()
	servers    []*http.Server
	closeFuncs []func()
}

// NewMain returns a Main with the defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{Addr: "127.0.0.1:8080", SimAddr: "127.0.0.1:8090", MetricsAddr: MetricsAddrDefault, DataDir: "data", LogFormat: "text", LogLevel: "info",
			RefundRetry: orderpay.DefaultRefundRetryPlan, Retention: orderpay.DefaultRetention, RetentionInterval: time.Hour,
			PayWindows: maps.Clone(orderpay.DefaultPayWindows), BuyerCaps: maps.Clone(orderpay.DefaultBuyerCaps), CloseGrace: 30 * time.Second, PosWait: orderpay.BarcodeBoundDefault, SweepInterval: time.Second, HoldReleaseInterval: time.Second,
			Compensation: CompensationDelayed, ScanInterval: time.Minute, ScanAge: 10 * time.Minute, TimeScale: 1, OrderNo: OrderNoSequence,
			RateLimits: httpapi.RateLimits{Global: httpapi.Limit{Rate: 1000, Burst: 2000}, PerBuyer: httpapi.Limit{Rate: 5, Burst: 30},
				Admin: httpapi.Limit{Rate: 20, Burst: 40}, AppAuthFailures: httpapi.Limit{Rate: 1, Burst: 20}}, ExampleConsumers: true, GCFloor: defaultGCFloor,
			AutoApproveRefundMax: order.AutoApproveRefundMaxDefault, ReconcileAt: reconcile.DailyAtDefault, Bus: defaultBusConfig(),
			BuyerAuth: buyerauth.Config{Mode: buyerauth.ModeNone, Header: buyerauth.HeaderDefault, JWKSRefresh: buyerauth.JWKSRefreshDefault},
			HTTP: HTTPLimits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 60 * time.Second,
				IdleTimeout: 60 * time.Second, MaxHeaderBytes: 32 << 10},
			Streams: httpapi.StreamLimits{PerBuyer: httpapi.StreamsPerBuyerDefault, Max: httpapi.StreamsMaxDefault, MaxAge: httpapi.StreamMaxAgeDefault}},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads the ORDERPAY_* environment, then the flags, which win. -h prints the
// usage on m.Stdout (flag.ErrHelp); a flag or variable whose value cannot be used is a
// usage error (errUsage, exit 2).
func (m *Main) ParseFlags(args []string) error {
	return usageError(m.parseFlags(args))
}

func (m *Main) parseFlags(args []string) error {
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
		{&c.NATS, "nats", "nats:// or tls:// URL of an external server or cluster, comma-separated (default: embedded); with real channels it needs credentials (--nats-creds, --nats-nkey, --nats-user, --nats-token-file) and, off this machine, TLS"},
		{&c.AdminToken, "admin-token", "bearer token for /admin, 24+ characters (default: generated and printed; refused with real channels); with real channels never on the command line, where ps shows it: use --admin-token-file or the variable"},
		{&c.AdminTokenFile, "admin-token-file", "a file holding the admin token (instead of --admin-token)"},
		{&c.PprofAddr, "pprof", "serve Go's profiler (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; off by default, never on the API's port; with real channels loopback only"},
		{&c.MetricsAddr, "metrics-addr", "serve the Prometheus metrics (/metrics) on this address, never on the API's port, or off; with real channels an address other than loopback needs --metrics-allow-remote"},
		{&c.OperatorsFile, "operators-file", "the operators of the console and admin API, with roles and token hashes (TOML; orderpay operators add prints an entry)"},
		{&c.PublicURL, "public-url", "base URL channels post notifications to (default: the API's URL)"},
		{&c.LogFormat, "log-format", "text or json"},
		{&c.LogLevel, "log-level", "debug, info, warn or error"},
		{&c.Channels, "channels", "channels file of the merchant accounts (TOML; see docs/going-live.md); without it the built-in simulator is started"},
		{&c.KeysDir, "keys", "the built-in simulator's keys and ids, and the order-number key (default: <data>/keys)"},
		{&c.Compensation, "compensation", "how lost results are found before the deadline: delayed, scan or notify-only"},
		{&c.OrderNo, "order-no", "order-number scheme: sequence (date + keyed permutation of the day's sequence) or timestamp (time + 6 random digits)"},
		{&c.ReconcileAt, "reconcile-at", "daily reconciliation of the previous day's bills at HH:MM China time, or off"},
		{&c.OrderNoKey, "order-no-key", "secret key of the sequence scheme, 16+ bytes, shared by instances on one database (default: <keys>/order-no.key, made on first start)"},
		{&c.BuyerAuth.Mode, "buyer-auth", "who the buyers are: none (the demo; refused with real channels), jwt (a bearer JWT; the buyer is its sub) or header (set by the shop's gateway)"},
		{&c.BuyerAuth.SecretFile, "buyer-jwt-secret-file", "with --buyer-auth jwt: a file holding the HS256 secret (32+ bytes)"},
		{&c.BuyerAuth.JWKSURL, "buyer-jwks-url", "with --buyer-auth jwt: the JWKS URL of the RS256/ES256 keys (cached, fetched again on an unknown kid); https:// with real channels"},
		{&c.BuyerAuth.Issuer, "buyer-jwt-issuer", "with --buyer-auth jwt: the iss every token must have (checked when set; required with real channels)"},
		{&c.BuyerAuth.Audience, "buyer-jwt-audience", "with --buyer-auth jwt: the aud every token must have (checked when set; required with real channels)"},
		{&c.BuyerAuth.Header, "buyer-header", "with --buyer-auth header: the header the gateway names the buyer in"},
		{&c.TrustedProxies, "trusted-proxies", "the proxies in front of the API, comma-separated CIDRs: from them alone the client's address is read from X-Forwarded-For or X-Real-IP (per-address limits, logs, the buyer's pay); with --buyer-auth header also the gateway's, the buyer header is refused from anywhere else; with real channels none wider than a public /8 (IPv4) or /32 (IPv6)"},
		{&c.WalletClaims, "buyer-jwt-wallet-claims", "with --buyer-auth jwt: the claims of the buyer's wallet identities, e.g. openid:<appid>=wx_openid,alipay_user_id=alipay_uid (default: openid_<appid> and alipay_user_id)"},
	} {
		env, def := envName(f.name), *f.dst
		if v, ok := os.LookupEnv(env); ok {
			*f.dst = v
		}
		fs.StringVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
		showBuiltInDefault(fs, f.name, def)
	}
	durations := []struct {
		dst        *time.Duration
		name, help string
	}{
		{&c.CloseGrace, "close-grace", "wait this long after an order's deadline before closing it"},
		{&c.PosWait, "pos-wait", "how long a till's barcode payment waits for the buyer before it is cancelled or reversed at the channel and the till answered (20s to 120s, below --http-write-timeout)"},
		{&c.SweepInterval, "sweep-interval", "how often the timeout and refund sweepers run"},
		{&c.HoldReleaseInterval, "hold-release-interval", "how often expired stock holds of reserve SKUs are released"},
		{&c.ScanInterval, "scan-interval", "with --compensation scan: how often to scan"},
		{&c.ScanAge, "scan-age", "with --compensation scan: query attempts older than this"},
		{&c.HTTP.ReadHeaderTimeout, "http-read-header-timeout", "the API server's time to read a request's headers"},
		{&c.HTTP.ReadTimeout, "http-read-timeout", "the API server's time to read a whole request (headers and body)"},
		{&c.HTTP.WriteTimeout, "http-write-timeout", "the API server's time to write an answer (order event streams are exempt)"},
		{&c.HTTP.IdleTimeout, "http-idle-timeout", "how long a keep-alive connection may wait for its next request"},
		{&c.Streams.MaxAge, "stream-max-age", "how long one order event stream lasts (the page reconnects)"},
		{&c.RefundRetry.Every, "refund-retry-every", "after --refund-retry-schedule, how often a refund the channel refuses for now is sent again"},
		{&c.RefundRetry.For, "refund-retry-for", "how long after its first refusal a refund is sent again before it goes to the operators' queue"},
		{&c.Retention.Logs, "retain-logs", "how long the notification and query logs, and delivered webhooks' attempts and bodies, are kept"},
		{&c.Retention.Published, "retain-published", "how long outbox messages are kept once published (the reach of a webhook replay), and ended stock holds"},
		{&c.Retention.RawBodies, "retain-raw", "how long the channels' raw answers and notifications are kept in the histories (the transitions stay)"},
		{&c.RetentionInterval, "retention-interval", "how often the retention pass runs"},
		{&c.BuyerAuth.JWKSRefresh, "buyer-jwks-refresh", "with --buyer-jwks-url: how often the JWKS is fetched again, so that a key taken out of it is no longer trusted (30s to 1h)"},
	}
	for _, f := range durations {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
			*f.dst = d
		}
		fs.DurationVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
	}
	windows := func(v string) error {
		w, err := parsePayWindows(v)
		if err == nil {
			c.PayWindows = w
		}
		return err
	}
	if v, ok := os.LookupEnv(envName("pay-windows")); ok {
		if err := windows(v); err != nil {
			return err
		}
	}
	fs.Func("pay-windows", "unpaid timeout per product type; a type left out keeps its default (default "+
		payWindowsString(orderpay.DefaultPayWindows)+") ["+envName("pay-windows")+"]", windows)
	if err := c.buyerCapsFlags(fs); err != nil {
		return err
	}
	retrySchedule := func(v string) error {
		ds, err := orderpay.ParseDurations(v)
		if err == nil {
			c.RefundRetry.Schedule = ds
		}
		return err
	}
	if v, ok := os.LookupEnv(envName("refund-retry-schedule")); ok {
		if err := retrySchedule(v); err != nil {
			return fmt.Errorf("%s: %w", envName("refund-retry-schedule"), err)
		}
	}
	fs.Func("refund-retry-schedule", "how long after its 1st, 2nd… refusal a refund the channel refused for now (balance, frequency) is sent again, under the same number (default "+
		orderpay.DefaultRefundRetryPlan.String()+") ["+envName("refund-retry-schedule")+"]", retrySchedule)
	if v, ok := os.LookupEnv(envName("time-scale")); ok {
		if _, err := fmt.Sscan(v, &c.TimeScale); err != nil {
			return fmt.Errorf("%s: %w", envName("time-scale"), err)
		}
	}
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "divide every duration (deadlines, grace, sweeps, scans) by this ["+envName("time-scale")+"]")
	if v, ok := os.LookupEnv(envName("example-consumers")); ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", envName("example-consumers"), err)
		}
		c.ExampleConsumers = on
	}
	fs.BoolVar(&c.ExampleConsumers, "example-consumers", c.ExampleConsumers, "run the example downstream consumers (points, SMS log) and their /admin reads ["+envName("example-consumers")+"]")
	for _, f := range []struct {
		dst        *int
		name, help string
	}{
		{&c.HTTP.MaxHeaderBytes, "http-max-header-bytes", "the largest request headers the API server reads"},
		{&c.Streams.PerBuyer, "streams-per-buyer", "order event streams one buyer may hold at once (more: 429, the page polls)"},
		{&c.Streams.Max, "streams-max", "order event streams the server holds at once (more: 503, the page polls)"},
	} {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			if _, err := fmt.Sscan(v, f.dst); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
		fs.IntVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
	}
	if v, ok := os.LookupEnv(envName("auto-approve-refund-max")); ok {
		if _, err := fmt.Sscan(v, &c.AutoApproveRefundMax); err != nil {
			return fmt.Errorf("%s: %w", envName("auto-approve-refund-max"), err)
		}
	}
	fs.Int64Var(&c.AutoApproveRefundMax, "auto-approve-refund-max", c.AutoApproveRefundMax,
		"refunds before shipping of at most this many fen are approved by the rule; larger ones wait for review; negative: all wait ["+envName("auto-approve-refund-max")+"]")
	limits := []struct {
		dst        *httpapi.Limit
		name, help string
	}{
		{&c.RateLimits.Global, "rate-limit-global", "buyers' writes (create, pay, cancel, return, address, receipt, after-sales), all buyers together: <n>/s[,burst=<n>] or off"},
		{&c.RateLimits.PerBuyer, "rate-limit-buyer", "buyers' writes, per buyer (the authenticated buyer; with --buyer-auth none the X-Buyer-Id header, else the client address): <n>/s[,burst=<n>] or off"},
		{&c.RateLimits.Admin, "rate-limit-admin", "admin requests per operator, and wrong tokens per client address apart from them; a valid token is never refused for others' failures: <n>/s[,burst=<n>] or off"},
		{&c.RateLimits.AppAuthFailures, "rate-limit-app-auth", "payments API requests with a missing or wrong API key, per client address and per key id; past it a wrong key gets 429, a valid key is never refused: <n>/s[,burst=<n>] or off"},
	}
	for _, f := range limits {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.dst.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
		fs.TextVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
	}
	gcFloorFlag := func(v string) error {
		n, err := parseGCFloor(v)
		c.GCFloor = n
		return err
	}
	if v, ok := os.LookupEnv(envName("gc-floor")); ok {
		if err := gcFloorFlag(v); err != nil {
			return fmt.Errorf("%s: %w", envName("gc-floor"), err)
		}
	}
	fs.Func("gc-floor", fmt.Sprintf("the Go heap below which the collector does not run, as 32MiB; 0: Go's own (4 MiB). A floor the program never touches: it costs no resident memory, and spares the collector (default %dMiB) [%s]",
		defaultGCFloor>>20, envName("gc-floor")), gcFloorFlag)
	if v, ok := os.LookupEnv(envName("log-source")); ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", envName("log-source"), err)
		}
		c.LogSource = on
	}
	fs.BoolVar(&c.LogSource, "log-source", c.LogSource, "add the source file and line to every log line ["+envName("log-source")+"]")
	if v, ok := os.LookupEnv(envName("metrics-allow-remote")); ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", envName("metrics-allow-remote"), err)
		}
		c.MetricsAllowRemote = on
	}
	fs.BoolVar(&c.MetricsAllowRemote, "metrics-allow-remote", c.MetricsAllowRemote,
		"with real channels, let --metrics-addr be other than a loopback address (once a firewall or private network fences it) ["+envName("metrics-allow-remote")+"]")
	webhookFlags(fs, &c.Webhooks)
	if err := busFlags(fs, &c.Bus); err != nil {
		return err
	}
	if err := parseFlags(fs, args, m.Stdout, m.Stderr); err != nil {
		return err
	}
	if err := noArgs(fs, m.Stderr); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "admin-token", "webhook-secret", "order-no-key":
			if f.Value.String() != "" {
				c.SecretsOnCommandLine = append(c.SecretsOnCommandLine, f.Name)
			}
		}
	})
	return c.validate()
}

func envName(flag string) string {
	return "ORDERPAY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// payWindowsString is w as --pay-windows takes it: "normal=72h,special=30m,fast=15m".
func payWindowsString(w orderpay.PayWindows) string {
	var parts []string
	for _, t := range []orderpay.ProductType{orderpay.ProductNormal, orderpay.ProductSpecial, orderpay.ProductFast} {
		d := w[t].String()
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		parts = append(parts, string(t)+"="+d)
	}
	return strings.Join(parts, ",")
}

// parsePayWindows reads "normal=72h,special=30m,fast=15m"; types left out keep their default.
func parsePayWindows(v string) (orderpay.PayWindows, error) {
	w := maps.Clone(orderpay.DefaultPayWindows)
	for _, part := range strings.Split(v, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		d, err := time.ParseDuration(value)
		if !ok || err != nil || d <= 0 || !orderpay.ProductType(name).Valid() {
			return nil, fmt.Errorf("pay windows: %q is not <normal|special|fast>=<positive duration>", part)
		}
		w[orderpay.ProductType(name)] = d
	}
	return w, nil
}

func (c *Config) validate() error {
	if c.TrustedProxies != "" {
		proxies, err := buyerauth.ParseCIDRs(c.TrustedProxies)
		if err != nil {
			return fmt.Errorf("--trusted-proxies: %w", err)
		}
		c.BuyerAuth.TrustedProxies = proxies
	}
	if c.WalletClaims != "" {
		c.BuyerAuth.WalletClaims = map[string]string{}
		for part := range strings.SplitSeq(c.WalletClaims, ",") {
			key, claim, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || claim == "" || (key != buyerauth.WalletAlipayUserID && !strings.HasPrefix(key, buyerauth.WalletOpenIDPrefix)) {
				return fmt.Errorf("--buyer-jwt-wallet-claims: %q is not openid:<appid>=<claim> or alipay_user_id=<claim>", part)
			}
			c.BuyerAuth.WalletClaims[key] = claim
		}
	}
	// Often enough that a key the login takes out of the JWKS stops being trusted soon;
	// not so often that orderpay's instances hammer the login.
	if r := c.BuyerAuth.JWKSRefresh; r < buyerauth.JWKSRefreshMin || r > buyerauth.JWKSRefreshMax {
		return fmt.Errorf("--buyer-jwks-refresh %s must be %s to %s", r, buyerauth.JWKSRefreshMin, buyerauth.JWKSRefreshMax)
	}
	if c.MetricsAddr != MetricsOff {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr must be host:port or off, not %q", c.MetricsAddr)
		}
	}
	switch c.Compensation {
	case CompensationDelayed, CompensationScan, CompensationNotifyOnly:
	default:
		return fmt.Errorf("--compensation must be delayed, scan or notify-only, not %q", c.Compensation)
	}
	if err := c.validateOrderNo(); err != nil {
		return err
	}
	if _, err := c.Webhooks.webhookSecret(); err != nil {
		return err
	}
	if c.ReconcileAt != ReconcileOff {
		if _, err := reconcile.ParseDailyAt(c.ReconcileAt); err != nil {
			return fmt.Errorf("--reconcile-at: %s", orderpay.ErrorMessage(err))
		}
	}
	if c.TimeScale <= 0 {
		return fmt.Errorf("--time-scale must be positive")
	}
	if err := c.Retention.Validate(); err != nil || c.RetentionInterval <= 0 {
		return fmt.Errorf("--retain-logs, --retain-published, --retain-raw and --retention-interval must be positive")
	}
	if err := c.RefundRetry.Validate(); err != nil {
		return fmt.Errorf("--refund-retry-schedule, --refund-retry-every, --refund-retry-for: %s", orderpay.ErrorMessage(err))
	}
	// Every retention period keeps at least what a live order, payment or refund can still
	// need (orderpay.RetentionNeeds.Floors): a released stock hold, say, of an order that
	// can still be paid.
	if err := c.Retention.CheckFloors(c.retentionNeeds()); err != nil {
		return fmt.Errorf("refusing a retention period below its floor: %s", orderpay.ErrorMessage(err))
	}
	if c.PosWait < orderpay.BarcodeBoundMin || c.PosWait > orderpay.BarcodeBoundMax {
		return fmt.Errorf("--pos-wait %s must be %s to %s: the channels' own loop queries every 5 s and gives up after 30 s", c.PosWait, orderpay.BarcodeBoundMin, orderpay.BarcodeBoundMax)
	}
	if c.PosWait+10*time.Second > c.HTTP.WriteTimeout {
		return fmt.Errorf("--pos-wait %s leaves no room in --http-write-timeout %s: a till's answer must be written in time (keep 10 s between them)", c.PosWait, c.HTTP.WriteTimeout)
	}
	if c.HTTP.MaxHeaderBytes < 4<<10 || c.Streams.PerBuyer < 1 || c.Streams.Max < 1 {
		return fmt.Errorf("--http-max-header-bytes must be at least 4096, --streams-per-buyer and --streams-max at least 1")
	}
	for name, d := range map[string]time.Duration{"--close-grace": c.CloseGrace, "--sweep-interval": c.SweepInterval,
		"--hold-release-interval": c.HoldReleaseInterval, "--scan-interval": c.ScanInterval, "--scan-age": c.ScanAge,
		"--http-read-header-timeout": c.HTTP.ReadHeaderTimeout, "--http-read-timeout": c.HTTP.ReadTimeout,
		"--http-write-timeout": c.HTTP.WriteTimeout, "--http-idle-timeout": c.HTTP.IdleTimeout, "--stream-max-age": c.Streams.MaxAge} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	return nil
}

// retentionNeeds is what in c decides the retention periods' floors.
func (c *Config) retentionNeeds() orderpay.RetentionNeeds {
	return orderpay.RetentionNeeds{PayWindows: c.PayWindows, CloseGrace: c.CloseGrace, RefundRetryFor: c.RefundRetry.For}
}

func (m *Main) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(m.Config.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level, AddSource: m.Config.LogSource}
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
	// First, while the heap is still small: the floor then comes from memory never used.
	setGCFloor(cfg.GCFloor)
	if cfg.AdminTokenFile != "" {
		if cfg.AdminToken != "" {
			return errors.New("give --admin-token or --admin-token-file, not both")
		}
		b, err := os.ReadFile(cfg.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		cfg.AdminToken = strings.TrimSpace(string(b))
	}
	if cfg.AdminToken != "" && len(cfg.AdminToken) < adminTokenMin {
		return fmt.Errorf("--admin-token must be at least %d characters: a short token can be guessed", adminTokenMin)
	}
	// The data directory is its owner's only (filemodes.go); one that exists is left as it
	// is, and warned about below if others can enter it.
	if err := os.MkdirAll(cfg.DataDir, privateDirMode); err != nil {
		return err
	}

	// The channels: the merchant accounts of the channels file, or the built-in simulator
	// with keys made on first start and kept in the data dir. First, so that a deployment
	// that would take real money unsafely stops before anything starts.
	channelsFile, err := m.channelsFile()
	if err != nil {
		return err
	}

	m.Store, err = openStore(ctx, cmp.Or(cfg.DB, filepath.Join(cfg.DataDir, "orderpay.db")))
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, func() { m.Store.Close() })
	m.Store.SetLogger(log.With("component", "store"))

	// The API port opens last, when nothing else can fail: a port bound early queues the
	// connections of buyers (the kernel accepts them before we call Accept), and a start
	// that then fails closes it and resets them all, even if it never served. The notify
	// URL is --public-url, or the API's own address; only a port chosen by the system
	// (--addr with port 0, which nobody can be dialling yet) is bound here, to know it.
	var apiLn net.Listener
	apiAddr := cfg.Addr
	if _, port, err := net.SplitHostPort(cfg.Addr); err == nil && port == "0" {
		if apiLn, err = listenTCP(cfg.Addr); err != nil {
			return fmt.Errorf("api (--addr): %w", err)
		}
		m.closeFuncs = append(m.closeFuncs, func() { apiLn.Close() })
		apiAddr = apiLn.Addr().String()
	}
	m.URL = "http://" + dialable(apiAddr)
	publicURL := strings.TrimSuffix(cmp.Or(cfg.PublicURL, m.URL), "/")

	channels, err := channelsFile.Channels(publicURL)
	if err != nil {
		return err
	}
	if m.Sim == nil {
		if err := m.checkCredentials(ctx, channels); err != nil {
			return err
		}
	}
	// Each account's fee contract: what a payment records it expects to be charged, and what
	// reconciliation checks each day's fees and settlement against.
	m.fees = channelsFile.Fees()
	for _, ch := range channelsFile.MissingFees() {
		log.Warn("the channels file states no fee contract for "+ch+": its fees and each day's settlement cannot be reconciled, "+
			"and every reconciliation of it will say NOT_CHECKED; add a ["+ch+".fees] table (docs/going-live.md)", "channel", ch)
	}

	// On an external bus Open does not wait for it: the instance serves with the bus down,
	// events wait in the outbox, and consumers attach once it is back (/readyz says so).
	m.Bus, err = cfg.Bus.openBus(ctx, cfg.NATS, filepath.Join(cfg.DataDir, "nats"), log.With("component", "bus"))
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, func() { m.Bus.Close() })

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	relay := &natsbus.Relay{Outbox: m.Store, Publisher: m.Bus, Logger: log}
	m.Bus.OnReady(relay.Poke) // what the outbox kept while the bus was down goes at once
	m.wg.Add(1)
	go func() { defer m.wg.Done(); relay.Run(runCtx) }()
	refundsDue := make(chan struct{}, 1)

	// The two contexts: the payment center tells the order system directly (fast path) and
	// through payment.succeeded on the bus; the order system asks the payment center to pay.
	// An app payment's results go to the apps domain instead, which plays the order
	// system's part for it (package apppay).
	m.Metrics = metrics.New()
	m.results = &apppay.Results{Logger: log, Unconfirmed: func(msg orderpay.Message) { m.Metrics.Unconfirmed("order-system-payment-results", msg.Subject) }}
	var results orderpay.PaymentResults = m.results
	if m.noDirectResults {
		results = nil
	}
	m.Metrics.CollectStats(m.Store, nil, 0, log)
	m.Metrics.CollectStoreCounters(m.Store.Counters)
	m.Metrics.CollectRefusedTransitions(m.Store.RefusedTransitions)
	// Active queries (the delayed strategy) run on broker timers with the pending-query
	// table as their safety net; the other strategies are what the chaos harness compares
	// it with, and make no queries but at the close (and the scan's). The timers are set
	// through the bus's queue, so a pay call never waits on NATS.
	active := cfg.Compensation == CompensationDelayed
	var timers orderpay.Timers
	if active {
		timers = m.Bus.Timers()
	}
	schedule := make([]time.Duration, len(payment.QueryScheduleDefault))
	for i, d := range payment.QueryScheduleDefault {
		schedule[i] = cfg.scaled(d)
	}
	grace := cfg.scaled(cfg.CloseGrace)
	m.Payments, err = payment.New(payment.Config{Store: m.Store, Channels: channels, Fees: m.fees,
		NotifyURL: func(channel string) string { return publicURL + "/notify/" + channel },
		// The wallet sends the buyer back to the order's pay page, which polls the order:
		// nothing there marks an order paid.
		ReturnURL: func(orderNo string) string { return publicURL + "/pay/" + url.PathEscape(orderNo) },
		Results:   results, OutboxWritten: relay.Poke, RefundCreated: func() { poke(refundsDue) },
		// After-sales refunds move their request in the transaction that makes them final;
		// refunds of app payments are announced to their app in it.
		RefundFinal: func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
			return m.results.RefundFinal(ctx, tx, r, at, m.Orders.AfterSaleRefundFinal)
		},
		RefundRetryPlan: cfg.RefundRetry.Scaled(cfg.scaled),
		// A crashed instance's claim of a refund lapses on the compressed clock too (the
		// call it made is cut off at half of it), but never in less than 2 s.
		RefundClaim:    max(cfg.scaled(payment.RefundClaimDefault), 2*time.Second),
		DeadlineMargin: cfg.scaled(payment.DeadlineMarginDefault), RefundRetry: cfg.scaled(payment.RefundRetryDefault),
		RefundRetryMax: cfg.scaled(payment.RefundRetryMaxDefault), Timers: timers, QuerySchedule: schedule,
		QueryEvery: cfg.scaled(payment.QueryEveryDefault), CloseGrace: grace, UnknownRetry: cfg.scaled(payment.UnknownRetryDefault),
		SweepLag: cfg.scaled(payment.SweepLagDefault), PollQueryInterval: cfg.scaled(payment.PollQueryIntervalDefault), PollGrace: cfg.scaled(payment.PollGraceDefault),
		BarcodeWait: cfg.PosWait, BarcodeEnded: func(ctx context.Context, outTradeNo string) {
			if m.Apps != nil { // set just below, before any worker runs
				m.Apps.SettleTill(ctx, outTradeNo)
			}
		},
		PassiveOnly: !active, Observer: m.Metrics, Logger: log})
	if err != nil {
		return err
	}
	windows := orderpay.PayWindows{}
	for t, d := range cfg.PayWindows {
		windows[t] = cfg.scaled(d)
	}
	newOrderNo, err := m.orderNoScheme(cfg)
	if err != nil {
		return err
	}
	m.Orders, err = order.New(order.Config{Store: m.Store, Payments: m.Payments, PayWindows: windows, BuyerCaps: cfg.BuyerCaps, NewOrderNo: newOrderNo,
		ReserveMinute: cfg.scaled(time.Minute), OutboxWritten: relay.Poke, RefundCreated: func() { poke(refundsDue) },
		AutoApproveRefundMax: cfg.AutoApproveRefundMax, Logger: log})
	if err != nil {
		return err
	}
	var channelNames []string
	for _, name := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if _, ok := channels[name]; ok {
			channelNames = append(channelNames, name)
		}
	}
	m.Apps, err = apppay.New(apppay.Config{Store: m.Store, Payments: m.Payments, Orders: m.Orders, Channels: channelNames, OutboxWritten: relay.Poke,
		RefundCreated: func() { poke(refundsDue) }, MinExpiry: cfg.scaled(apppay.MinExpiryDefault), Logger: log,
		WebhookAllowNetworks: cfg.Webhooks.AllowNetworks})
	if err != nil {
		return err
	}
	m.results.Orders, m.results.Apps, m.results.Refunds = m.Orders, m.Apps, m.Payments
	m.unsub, err = m.Bus.Subscribe(runCtx, "order-system-payment-results", orderpay.SubjectPaymentSucceeded, m.results.Consume)
	if err != nil {
		return err
	}
	// The queued SKUs' tickets, turned into orders in arrival order (order/tickets.go).
	stopTickets, err := m.Bus.Subscribe(runCtx, "order-system-tickets", orderpay.SubjectTicketQueued, m.Orders.HandleTicket)
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, stopTickets)
	// The example downstream consumers, each on its own durable consumer and tables.
	var examples *downstream.Examples
	if cfg.ExampleConsumers {
		examples = &downstream.Examples{Store: m.Store, Orders: m.Orders, Logger: log,
			Confirm: func(ctx context.Context, msg orderpay.Message) error { return orderpay.ConfirmEvent(ctx, m.Store, msg) },
			Forged:  func(consumer string, msg orderpay.Message) { m.Metrics.Unconfirmed(consumer, msg.Subject) }}
		stopExamples, err := examples.Start(runCtx, m.Bus)
		if err != nil {
			return err
		}
		m.closeFuncs = append(m.closeFuncs, stopExamples)
	}

	// The sweepers: timeout close (the order system first, the payment center's net under
	// it a grace later), refunds until final, and the compensation chosen: active queries
	// (their timers, and the pending-query sweeper as the net), or the scan.
	sweep := max(cfg.scaled(cfg.SweepInterval), 20*time.Millisecond)
	m.every(runCtx, "timeout close", sweep, nil, func(ctx context.Context) error {
		_, err := m.Orders.ExpireDue(ctx, grace, sweepBatch, sweepWorkers)
		return err
	})
	m.every(runCtx, "app payment close", sweep, nil, func(ctx context.Context) error {
		_, err := m.Apps.CloseDue(ctx, grace, sweepBatch, sweepWorkers)
		return err
	})
	m.every(runCtx, "payment close", sweep, nil, func(ctx context.Context) error {
		_, err := m.Payments.CloseDue(ctx, 2*grace, sweepBatch, sweepWorkers)
		return err
	})
	m.every(runCtx, "receipt auto-confirm", sweep, nil, func(ctx context.Context) error {
		_, err := m.Orders.AutoConfirmDue(ctx, sweepBatch)
		return err
	})
	// Tickets that wait in vain end within a pass: expired, or sold out with their SKU.
	m.every(runCtx, "tickets", min(sweep, 250*time.Millisecond), nil, func(ctx context.Context) error {
		_, err := m.Orders.SweepTickets(ctx)
		return err
	})
	m.every(runCtx, "stock holds", max(cfg.scaled(cfg.HoldReleaseInterval), 20*time.Millisecond), nil, func(ctx context.Context) error {
		_, err := m.Orders.ReleaseExpiredHolds(ctx, sweepBatch)
		return err
	})
	// The orders, payments and webhook deliveries by status that /metrics shows, and the
	// console charts' hourly counts, are counted as they change; their changes are folded
	// into the totals every second (sqlstore's FoldCounts), so that a scrape or a chart
	// reads a few rows whatever the history.
	m.every(runCtx, "counts", time.Second, nil, func(ctx context.Context) error {
		for range foldRounds {
			moved, err := m.Store.FoldCounts(ctx)
			if err != nil || moved < sqlstore.FoldCountsBatch {
				return err
			}
		}
		return nil
	})
	m.every(runCtx, "retention", cfg.scaled(cfg.RetentionInterval), nil, func(ctx context.Context) error {
		_, err := m.retain(ctx)
		return err
	})
	m.every(runCtx, "refunds", sweep, refundsDue, func(ctx context.Context) error {
		_, err := m.Payments.RefundDue(ctx, sweepBatch, sweepWorkers)
		return err
	})
	if active {
		stopTimers, err := m.Bus.HandleTimers(runCtx, "payment-queries", "query.>", queryWorkers, func(ctx context.Context, t natsbus.Timer) error {
			return m.Payments.OnQueryTimer(ctx, t.Name, t.Payload)
		})
		if err != nil {
			return err
		}
		m.closeFuncs = append(m.closeFuncs, stopTimers)
		m.every(runCtx, "pending queries", sweep, nil, func(ctx context.Context) error {
			_, err := m.Payments.QueryDue(ctx, sweepBatch, sweepWorkers)
			return err
		})
	}
	if cfg.Compensation == CompensationScan {
		age := cfg.scaled(cfg.ScanAge)
		m.every(runCtx, "scan", cfg.scaled(cfg.ScanInterval), nil, func(ctx context.Context) error {
			_, err := m.Payments.ScanOnce(ctx, age, 1000)
			return err
		})
	}
	if m.Webhooks, err = m.startWebhooks(runCtx, sweep); err != nil {
		return err
	}
	if m.Sim != nil {
		// The demo's shelf; a shop with a channels file stocks its own.
		if _, err := m.Orders.EnsureCatalogue(ctx, order.DemoCatalogue); err != nil {
			return err
		}
	}

	rec, err := m.startReconciliation(runCtx, channels)
	if err != nil {
		return err
	}

	m.AdminToken = cfg.AdminToken
	var ops *operators.Set
	if cfg.OperatorsFile != "" {
		if ops, err = operators.Load(cfg.OperatorsFile); err != nil {
			return err
		}
	}
	generated := m.AdminToken == "" && ops == nil
	if generated {
		if m.AdminToken, err = devAdminToken(cfg.DataDir); err != nil {
			return err
		}
	}
	buyerCfg := cfg.BuyerAuth
	buyerCfg.Mode, buyerCfg.Logger = cmp.Or(buyerCfg.Mode, buyerauth.ModeNone), log
	buyers, err := buyerauth.New(ctx, buyerCfg)
	if err != nil {
		return err
	}
	m.closeFuncs = append(m.closeFuncs, buyers.Close)
	api := &httpapi.Server{Orders: m.Orders, Payments: m.Payments, AdminToken: m.AdminToken, Audit: m.Store, Logger: log, Buyers: buyers,
		Ops: m.Store, RateLimits: cfg.RateLimits, StreamLimits: cfg.Streams, Ready: func(ctx context.Context) error {
			if err := m.Store.DB().PingContext(ctx); err != nil {
				return errors.New("database unreachable")
			}
			if err := m.Bus.Ready(); err != nil {
				return fmt.Errorf("bus: not ready (%v)", err)
			}
			return nil
		}}
	if ops != nil {
		api.Operators = ops
	}
	// The client's own address (every per-address limit, the notification log, and the
	// buyer's for WeChat H5) comes through the proxies named in --trusted-proxies, if any;
	// the openid a WeChat method pays for is the buyer's for
	// that method's app.
	api.TrustedProxies = cfg.BuyerAuth.TrustedProxies
	// A browser's write from the public URL's origin is the service's own (behind a proxy
	// that rewrites Host).
	api.PublicURL = publicURL
	api.WalletAppID = channelsFile.WalletAppID
	api.Retention = m.retain
	if examples != nil {
		api.Downstream = examples
	}
	api.Channels = func() map[string]orderpay.ChannelDescription {
		out := map[string]orderpay.ChannelDescription{}
		for name, ch := range channels {
			out[name] = channelfile.Describe(ch)
		}
		return out
	}
	if m.Webhooks != nil {
		api.Webhooks = m.Webhooks
	}
	api.Reconcile = rec
	api.Apps = m.Apps
	if api.Cashier, err = m.cashierConfig(cfg, publicURL, channels); err != nil {
		return err
	}
	if ch, ok := channels[orderpay.ChannelAlipay].(*alipay.Channel); ok {
		// Alipay signs what its cashier adds to return_url (PC and WAP): the pay page's
		// words while it checks may say so; the order waits for the channel's own word.
		api.Returns = map[string]httpapi.ReturnCheck{orderpay.ChannelAlipay: func(ctx context.Context, q url.Values) (string, int64, error) {
			r, err := ch.VerifyReturn(ctx, q)
			if err != nil {
				return "", 0, err
			}
			return r.OutTradeNo, r.Amount, nil
		}}
	}
	if cfg.PprofAddr != "" {
		if m.PprofURL, err = m.serve(cfg.PprofAddr, profiler()); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
	}
	// Once everything serve writes in the data directory is there.
	warnLooseModes(log, cfg.privatePaths())
	if cfg.MetricsAddr != MetricsOff {
		if m.MetricsURL, err = m.serve(cfg.MetricsAddr, metricsHandler(m.Metrics.Handler())); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	if m.beforeAPIListen != nil {
		m.beforeAPIListen()
	}
	if apiLn == nil {
		if apiLn, err = listenTCP(cfg.Addr); err != nil {
			return fmt.Errorf("api (--addr): %w", err)
		}
	}
	m.serveAPI(apiLn, api.Handler())
	if m.Sim != nil {
		// The notifications its last run still owed go now that the API takes them.
		m.Sim.SendDue()
	}
	m.servers[len(m.servers)-1].RegisterOnShutdown(api.StopStreams) // open event streams would hold Close up

	fmt.Fprintf(m.Stdout, "orderpay is running (store: %s, broker: %s)\n", m.Store.Dialect(), cmp.Or(cfg.NATS, "embedded NATS JetStream"))
	// With go run, the PID a process list shows first is the go tool's, which does not
	// pass a kill on; this one is the server's.
	fmt.Fprintf(m.Stdout, "  PID:                 %d  (stop: Ctrl-C here, or kill %d)\n", os.Getpid(), os.Getpid())
	fmt.Fprintf(m.Stdout, "  API:                 %s\n", m.URL)
	fmt.Fprintf(m.Stdout, "  catalogue:           %s/v1/skus\n", m.URL)
	fmt.Fprintf(m.Stdout, "  pages:               %s/ (shop), %s/ops (operations), %s/docs (API reference)\n", m.URL, m.URL, m.URL)
	if m.MetricsURL != "" {
		fmt.Fprintf(m.Stdout, "  metrics:             %s/metrics\n", m.MetricsURL)
	}
	if m.PprofURL != "" {
		fmt.Fprintf(m.Stdout, "  profiler:            %s/debug/pprof/\n", m.PprofURL)
	}
	if m.Sim != nil {
		fmt.Fprintf(m.Stdout, "  channel simulator:   %s  (wallet page: /sim/wallet, pay: POST /sim/pay, ledger: GET /sim/ledger)\n", m.SimURL)
	} else {
		for name, endpoint := range channelsFile.Endpoints() {
			fmt.Fprintf(m.Stdout, "  channel %-12s %s\n", name+":", endpoint)
		}
	}
	fmt.Fprintf(m.Stdout, "  channel notify URLs: %s/notify/alipay, %s/notify/wechat\n", publicURL, publicURL)
	if generated {
		fmt.Fprintf(m.Stdout, "  admin token (dev mode, kept in %s): %s\n", filepath.Join(cfg.DataDir, devAdminTokenFile), m.AdminToken)
	}
	return nil
}

// cashierConfig is the pay page's single code (httpapi.Cashier): its key derived from the
// order-number key (--order-no-key, or the sequence scheme's, kept beside the keys), so that
// the instances of one shop sign alike and no other secret is needed; with the timestamp
// scheme and no key, from the admin token; with neither, the single code is off. Its URLs
// are on the public address, and the wallets whose adapters run a web OAuth (WeChat's
// official account, Alipay's app) learn the scanning buyer's identity.
func (m *Main) cashierConfig(cfg Config, publicURL string, channels map[string]orderpay.Channel) (httpapi.Cashier, error) {
	key := []byte(cfg.OrderNoKey)
	switch {
	case len(key) > 0:
	case cfg.OrderNo == OrderNoSequence:
		var err error
		if key, err = order.LoadOrCreateOrderNoKey(cfg.orderNoKeyPath()); err != nil {
			return httpapi.Cashier{}, err
		}
	case m.AdminToken != "":
		key = []byte(m.AdminToken)
	default:
		m.log.Warn("the pay page's single code is off: it needs --order-no-key (or the sequence scheme, or --admin-token)")
		return httpapi.Cashier{}, nil
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("orderpay: the pay page's single code"))
	c := httpapi.Cashier{Key: mac.Sum(nil), PublicURL: publicURL, OAuth: map[string]httpapi.WalletOAuth{}}
	if ch, ok := channels[orderpay.ChannelWechat].(*wechat.Channel); ok {
		c.OAuth[orderpay.ChannelWechat] = httpapi.WalletOAuth{AuthorizeURL: ch.AuthorizeURL, Identity: ch.OpenID}
	}
	if ch, ok := channels[orderpay.ChannelAlipay].(*alipay.Channel); ok {
		c.OAuth[orderpay.ChannelAlipay] = httpapi.WalletOAuth{AuthorizeURL: ch.AuthorizeURL, Identity: ch.UserID}
	}
	return c, nil
}

// sweepBatch bounds the rows one sweep takes, so that a backlog is worked in slices.
const sweepBatch = 200

// queryWorkers is how many active queries from timers run at once; sweepWorkers how many
// items each sweeper works at once (a channel call that times out holds one for seconds).
const (
	queryWorkers = 16
	sweepWorkers = 16
)

// every runs fn every interval, and at once when poke fires, until ctx ends. A failed run
// is logged; the next one tries again. Each pass's duration goes to
// orderpay_worker_pass_seconds under name.
func (m *Main) every(ctx context.Context, name string, interval time.Duration, poke <-chan struct{}, fn func(ctx context.Context) error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-poke:
			}
			start := time.Now()
			err := fn(ctx)
			if m.Metrics != nil {
				m.Metrics.WorkerPass(name, time.Since(start))
			}
			if err != nil && ctx.Err() == nil {
				m.log.Error("worker run failed", "worker", name, "err", err)
			}
		}
	}()
}

// poke wakes a worker without blocking; pokes that arrive while one is pending merge.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (m *Main) serve(addr string, h http.Handler) (string, error) {
	ln, err := listenTCP(addr)
	if err != nil {
		return "", err
	}
	m.serveListener(ln, h)
	return "http://" + ln.Addr().String(), nil
}

// retain runs one retention pass now, with the configured policy, and logs what it removed.
func (m *Main) retain(ctx context.Context) (orderpay.RetentionResult, error) {
	p := m.Config.Retention
	p = orderpay.RetentionPolicy{Logs: m.Config.scaled(p.Logs), Published: m.Config.scaled(p.Published), RawBodies: m.Config.scaled(p.RawBodies)}
	res, err := m.Store.Retain(ctx, orderpay.Now(orderpay.SystemClock{}), p)
	if err == nil && res != (orderpay.RetentionResult{}) {
		m.log.Info("retention pass", "notification_log", res.NotificationLog, "query_log", res.QueryLog, "outbox", res.Outbox,
			"webhook_attempts", res.WebhookAttempts, "webhook_bodies", res.WebhookBodies, "request_keys", res.RequestKeys,
			"stock_holds", res.StockHolds, "raw_bodies", res.RawBodies)
	}
	return res, err
}

// MetricsAddrDefault is where the metrics are served unless --metrics-addr says otherwise:
// loopback, for a Prometheus (or an agent) on the same machine.
const MetricsAddrDefault = "127.0.0.1:8081"

// MetricsOff is the --metrics-addr that serves no metrics.
const MetricsOff = "off"

// foldRounds bounds the batches of status-count changes one fold run takes, so that a
// backlog is worked off over a few seconds rather than in one long transaction.
const foldRounds = 10

// metricsHandler serves the metrics at GET /metrics, and nothing else.
func metricsHandler(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return mux
}

// profiler is Go's profiler, for --pprof.
func profiler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// devAdminTokenFile is where a development instance keeps the admin token it generated, in
// its data directory, so that a restart keeps it (an open console tab keeps working).
const devAdminTokenFile = "admin-token"

// devAdminToken returns the development admin token kept in dataDir, made (32 random bytes,
// hex) and kept there, readable by the owner only, on the first start.
func devAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, devAdminTokenFile)
	if b, err := os.ReadFile(path); err == nil {
		if token := strings.TrimSpace(string(b)); len(token) >= adminTokenMin {
			return token, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the development admin token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(token+"\n"), privateFileMode); err != nil {
		return "", fmt.Errorf("the development admin token: %w", err)
	}
	return token, nil
}

// dialable is a listen address as a client dials it: a host left out or unspecified
// ("", 0.0.0.0, ::) is the loopback address.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func (m *Main) serveListener(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	m.servers = append(m.servers, srv)
	go srv.Serve(ln)
}

// serveAPI serves the API on ln within the HTTP limits, so that a flood of slow, idle or
// header-heavy connections is cut rather than held.
func (m *Main) serveAPI(ln net.Listener, h http.Handler) {
	l := m.Config.HTTP
	srv := &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
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
		m.wg.Wait()
	}
	for i := len(m.closeFuncs) - 1; i >= 0; i-- {
		m.closeFuncs[i]()
	}
	m.servers, m.closeFuncs, m.cancel, m.unsub = nil, nil, nil, nil
	return nil
}

// listenTCP listens on addr. When the port is in use it says by whom, as far as it can
// tell: another orderpay (one of its listeners answers as orderpay's do), or another
// program.
func listenTCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	if who := probeOrderpay(dialable(addr)); who != "" {
		return nil, fmt.Errorf("%s is in use: another orderpay seems to be running there (%s); stop it (Ctrl-C in its terminal, or kill the PID it printed at start), or give this one other addresses (--addr, --sim-addr, --metrics-addr)", addr, who)
	}
	return nil, fmt.Errorf("%s is taken by another program: stop it, or give orderpay another address (%w)", addr, err)
}

// probeOrderpay asks whatever listens on addr whether it is orderpay, and says what of it
// answered; "" if it is not, or did not answer. The answers read are bounded, and the
// whole probe takes at most a few seconds.
func probeOrderpay(addr string) string {
	client := &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, limit int64) (*http.Response, []byte) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return nil, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
		return resp, body
	}
	if resp, body := get("/healthz", 4<<10); resp != nil && resp.StatusCode == http.StatusOK {
		var h struct{ Status, Version string }
		if json.Unmarshal(body, &h) == nil && h.Status == "ok" && h.Version != "" {
			return "its API answers, version " + h.Version
		}
		if resp.Header.Get("Server") == sim.ServerName {
			return "its channel simulator answers"
		}
	}
	if resp, body := get("/metrics", 4<<20); resp != nil && resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte("\norderpay_build_info")) {
		return "its metrics answer"
	}
	return ""
}

// openStore opens serve's store. The tests start a new SQLite store from a migrated copy
// (TestMain): under the race detector migrating one is most of a short test's time.
var openStore = sqlstore.Open

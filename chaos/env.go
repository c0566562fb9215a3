package chaos

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"orderpay"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/natsbus"
	"orderpay/sqlstore"
)

// env is what a chaos or bench run hosts: the broker and the channel, which outlive the
// server as an external NATS and Alipay / WeChat Pay do in production, and the server,
// an `orderpay serve` child process that can be killed.
type env struct {
	dir     string
	cleanup func()
	runID   string // makes SKU codes and idempotency keys unique to the run

	keys *sim.Keys
	// nats is the broker; natsMu guards it while restartNATS replaces it.
	natsMu  sync.Mutex
	nats    *server.Server
	natsLog *slog.Logger
	sim     *sim.Simulator
	simHTTP *http.Server
	simURL  string
	server  *ServerProcess
	dsn     string
	store   *sqlstore.Store
	client  *Client
	// channels is the channels file the server reads: the merchant's apps, whose appids
	// name the buyers' openids (channelfile.File.WalletAppID).
	channels *channelfile.File

	// simClock is the channel's clock: the wall clock until the end-of-run reconciliation
	// moves it on to the next morning, when the run's bills are out.
	simClock *shiftClock
}

// envConfig says how to start an env.
type envConfig struct {
	Binary   string
	DataDir  string // "" makes a temp dir, removed by close unless KeepData
	KeepData bool
	Prefix   string // of the temp dir's name
	DB       string // "" is SQLite under the data dir
	// TimeScale is given to the simulator (notification retries, refund delay) and to the
	// server (--time-scale).
	TimeScale  float64
	Faults     sim.FaultPlan
	ServerArgs []string // more flags for `orderpay serve`
	// AlipayMode and WechatMode are the simulated merchants' modes (channelfile's: key or
	// cert, pubkey or certificate). Default to key and pubkey.
	AlipayMode, WechatMode string
	LogLevel               string // the server's
	Logger                 *slog.Logger
	// WechatUserPayingFor is how long the simulated WeChat Pay keeps a barcode order
	// USERPAYING while its buyer does not confirm (sim.Config.WechatUserPayingFor, wall
	// time); zero is the simulator's default, a minute.
	WechatUserPayingFor time.Duration
	// BillFaults and BillFaultSeed plant fee and settlement faults in the simulator's bills;
	// RateChange, when set, is when both channels start charging RateChangeTo. Both
	// accounts start with OpeningBalance, put in the day before the run.
	BillFaults     []sim.BillFault
	BillFaultSeed  uint64
	RateChange     time.Time
	RateChangeTo   orderpay.FeeRate
	OpeningBalance int64
}

// chaosIssuer is the iss of the harness's buyer tokens.
const chaosIssuer = "orderpay-chaos"

// startEnv starts the broker, the simulator and the server, and opens the server's
// database. On an error it stops what it started.
func startEnv(ctx context.Context, ec envConfig) (e *env, err error) {
	if ec.Logger == nil {
		ec.Logger = slog.New(slog.DiscardHandler)
	}
	if ec.Binary == "" {
		if ec.Binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	started := &env{}
	e = started
	defer func() {
		if err != nil { // e is nil by now: every error return says so
			started.close()
		}
	}()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	e.runID = "c" + hex.EncodeToString(b[:])
	e.dir = ec.DataDir
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", ec.Prefix); err != nil {
			return nil, err
		}
		if !ec.KeepData {
			dir := e.dir
			e.cleanup = func() { os.RemoveAll(dir) }
		}
	} else if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}

	keysDir := filepath.Join(e.dir, "keys")
	if e.keys, err = sim.LoadOrCreateKeys(keysDir); err != nil {
		return nil, err
	}
	// The broker outlives the server: the server's outbox relay publishes to it and its
	// durable consumers live in it, as with an external NATS in production.
	e.natsLog = ec.Logger.With("component", "nats")
	if e.nats, err = natsbus.StartEmbedded(filepath.Join(e.dir, "nats"), natsbus.ListenOn("127.0.0.1:0"),
		natsbus.WithServerLogger(e.natsLog)); err != nil {
		return nil, err
	}
	// The channel outlives the server too: it keeps the ledger, and keeps resending
	// notifications to a server that is down. Refunds take a (business) minute to settle.
	scale := ec.TimeScale
	e.simClock = &shiftClock{}
	simCfg := sim.Config{Keys: e.keys, Clock: e.simClock, TimeScale: scale, Faults: ec.Faults,
		RefundDelay: time.Duration(float64(time.Minute) / scale), Logger: ec.Logger.With("component", "sim"),
		WechatUserPayingFor: ec.WechatUserPayingFor}
	if err := channelfile.SimulatorModes(&simCfg, ec.AlipayMode, ec.WechatMode); err != nil {
		return nil, err
	}
	simCfg.BillFaults, simCfg.BillFaultSeed = ec.BillFaults, ec.BillFaultSeed
	// The server reaches the channel through the channels file a merchant would write: the
	// production code path, with the simulator's address, bound here for the file to name
	// it. The simulator charges the fee contracts the file states, and the harness's rate
	// change and opening balance on top.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.simURL = "http://" + ln.Addr().String()
	e.channels = channelfile.ForSimulator(keysDir, e.keys, e.simURL, cmp.Or(ec.AlipayMode, channelfile.AlipayKeyMode),
		cmp.Or(ec.WechatMode, channelfile.WechatPubKeyMode))
	channelfile.SimulatorFees(&simCfg, e.channels)
	for _, fees := range []*sim.FeeConfig{&simCfg.AlipayFees, &simCfg.WechatFees} {
		if !ec.RateChange.IsZero() {
			fees.RateChanges = append(fees.RateChanges, sim.RateChange{At: ec.RateChange, Rate: ec.RateChangeTo})
		}
		if ec.OpeningBalance > 0 {
			fees.OpeningBalance, fees.OpeningAt = ec.OpeningBalance, time.Now().AddDate(0, 0, -1)
		}
	}
	if e.sim, err = sim.New(simCfg); err != nil {
		ln.Close()
		return nil, err
	}
	e.simHTTP = &http.Server{Handler: e.sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go e.simHTTP.Serve(ln)
	channels := filepath.Join(keysDir, "channels.toml")
	if err := e.channels.WriteFile(channels); err != nil {
		return nil, err
	}

	// The API's address is picked once, so that a restarted server listens where buyers
	// and the channel's notifications already go.
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var tb [16]byte
	if _, err := rand.Read(tb[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tb[:])
	e.dsn = ec.DB
	if e.dsn == "" {
		e.dsn = filepath.Join(e.dir, "server", "orderpay.db")
	} else {
		// Every run gets a schema of its own, so that the audit sees only this run's
		// orders, and --compare's three runs can share one database.
		schema := fmt.Sprintf("orderpay_run_%d_%s", time.Now().Unix(), hex.EncodeToString(b[:4]))
		dsn, drop, err := sqlstore.NewSchema(ctx, e.dsn, schema)
		if err != nil {
			return nil, err
		}
		e.dsn = dsn
		if !ec.KeepData {
			prev := e.cleanup
			e.cleanup = func() {
				drop()
				if prev != nil {
					prev()
				}
			}
		}
	}
	// The buyers are authenticated as a shop's would be: each request carries a JWT of its
	// buyer, signed with a secret the server reads from a file.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	secretFile := filepath.Join(e.dir, "buyer-jwt.secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(secret)), 0o600); err != nil {
		return nil, err
	}
	// The rate limits are off: every buyer of a run (and of a benchmark) comes from this
	// one IP, thousands of orders a second, which is the load under test, not abuse.
	// The metrics have a listener of their own, picked once like the API's.
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	e.server = &ServerProcess{Binary: ec.Binary, Addr: addr, MetricsAddr: metricsAddr, Log: filepath.Join(e.dir, "serve.log"), Args: append([]string{
		"--addr", addr, "--metrics-addr", metricsAddr, "--data", filepath.Join(e.dir, "server"), "--db", e.dsn, "--keys", keysDir,
		"--channels", channels, "--nats", e.nats.ClientURL(), "--admin-token", token,
		"--time-scale", fmt.Sprint(scale), "--log-format", "json", "--log-level", ec.LogLevel,
		"--rate-limit-global", "off", "--rate-limit-buyer", "off", "--rate-limit-admin", "off",
		"--buyer-auth", "jwt", "--buyer-jwt-secret-file", secretFile, "--buyer-jwt-issuer", chaosIssuer,
		// The example downstream consumers are not what runs and benchmarks measure.
		"--example-consumers=false",
		// The harness reconciles at the end of a run; the daily schedule would only add
		// reports of its own if a run crossed its time.
		"--reconcile-at", "off",
	}, ec.ServerArgs...)}
	if err := e.server.Start(ctx); err != nil {
		return nil, err
	}
	// The server has migrated the database by now, so opening it here changes nothing.
	if e.store, err = sqlstore.Open(ctx, e.dsn); err != nil {
		return nil, err
	}
	e.client = NewClient(e.server.URL(), e.simURL, token)
	key := []byte(hex.EncodeToString(secret))
	e.client.Tokens = func(buyer string) string {
		now := time.Now()
		return buyerauthtest.HS256(key, buyer, chaosIssuer, "", now.Add(-time.Minute), now.Add(time.Hour))
	}
	// A buyer who pays by a method for one wallet user (WeChat JSAPI and mini program,
	// Alipay in-app) carries that identity in the same token, under the claims the server
	// reads by default (openid_<appid>, alipay_user_id).
	e.client.TokensWith = func(buyer string, claims map[string]any) string {
		now := time.Now()
		all := map[string]any{"iss": chaosIssuer, "nbf": now.Add(-time.Minute).Unix()}
		for k, v := range claims {
			all[k] = v
		}
		return buyerauthtest.HS256With(key, buyer, now.Add(time.Hour), all)
	}
	return e, nil
}

// natsURL is the broker's client URL: the same across restarts.
func (e *env) natsURL() string {
	e.natsMu.Lock()
	defer e.natsMu.Unlock()
	return e.nats.ClientURL()
}

// restartNATS stops the broker, as a NATS node lost would, waits down, and starts it again
// on the same address and store: the streams, their messages and the durable consumers
// come back from the files. The server's connection reconnects by itself; what it
// published meanwhile waited in its outbox. It returns how long the broker was gone.
func (e *env) restartNATS(ctx context.Context, down time.Duration) (time.Duration, error) {
	e.natsMu.Lock()
	defer e.natsMu.Unlock()
	u, err := url.Parse(e.nats.ClientURL())
	if err != nil {
		return 0, err
	}
	began := time.Now()
	e.nats.Shutdown()
	e.nats.WaitForShutdown()
	sleepCtx(ctx, down)
	// The port was the broker's a moment ago; another process may not have taken it in the
	// meantime, but a listener in TIME_WAIT can hold it for a moment: try for a few seconds.
	for {
		ns, err := natsbus.StartEmbedded(filepath.Join(e.dir, "nats"), natsbus.ListenOn(u.Host), natsbus.WithServerLogger(e.natsLog))
		if err == nil {
			e.nats = ns
			return time.Since(began), nil
		}
		if time.Since(began) > down+10*time.Second || ctx.Err() != nil {
			return time.Since(began), fmt.Errorf("chaos: start NATS again on %s: %w", u.Host, err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// close stops everything startEnv started.
func (e *env) close() {
	if e.server != nil {
		e.server.Stop()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.simHTTP != nil {
		e.simHTTP.Close()
	}
	if e.sim != nil {
		e.sim.Close()
	}
	e.natsMu.Lock()
	if e.nats != nil {
		e.nats.Shutdown()
		e.nats.WaitForShutdown()
	}
	e.natsMu.Unlock()
	if e.client != nil {
		e.client.HTTP.CloseIdleConnections()
	}
	if e.cleanup != nil {
		e.cleanup()
	}
}

// shopDevice is where a buyer's device pays the order from (deviceFor): the shop's pay
// page of the order on the server's address, the same page under the official account's
// registered JSAPI pay directory, and the address the server sees the buyers come from
// (the harness's, on the server's loopback host).
func (e *env) shopDevice(orderNo string) shopDevice {
	d := shopDevice{Page: e.server.URL() + "/pay/" + url.PathEscape(orderNo), ClientIP: "127.0.0.1"}
	if host, _, err := net.SplitHostPort(e.server.Addr); err == nil {
		d.ClientIP = host
	}
	if e.channels != nil && e.channels.Wechat != nil && len(e.channels.Wechat.JSAPIPaths) > 0 {
		d.JSAPIPage = e.channels.Wechat.JSAPIPaths[0] + url.PathEscape(orderNo)
	}
	return d
}

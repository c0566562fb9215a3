// Package chaos is the harness that proves orderpay's promise: when a buyer has paid, the
// order becomes paid or the money goes back. It drives a real `orderpay serve` child
// process through its real HTTP API with many simulated buyers, while the channel
// simulator misbehaves and the server is killed with SIGKILL at random moments; then it
// lets the system settle and has the auditor (package chaos/audit) check invariants I1–I8
// (docs/design.md §8) and I9 (docs/barcode.md) against the channel's ledger, orderpay's
// database and the events on the bus.
//
// Everything that must outlive a server crash lives in the harness process: the NATS
// JetStream server (the server connects to it with --nats) and the channel simulator (the
// server reaches it through the channels file the harness writes for it, --channels, the
// production code path). Only orderpay itself is killed.
//
// Time is compressed: the server's --time-scale and the simulator's TimeScale divide every
// deadline, grace, sweep and notification retry delay by Config.TimeScale, so a 15-minute
// pay window passes in 15 s at the default of 60.
//
// The server's settings are part of the chaos: each seed draws its pay windows, close grace,
// refund retry plan, SKUs' stock policies and retention periods at their floors
// (settings.go), and the harness runs retention passes while the load goes on
// (retention.go).
package chaos

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// Defaults of Config, applied in one place (withDefaults).
const (
	DefaultOrders       = 300
	DefaultConcurrency  = 32
	DefaultSeed         = 1
	DefaultFaults       = "all"
	DefaultCompensation = CompensationDelayed
	DefaultTimeScale    = 60
	// DefaultCloseGrace is the server's --close-grace, in business time: how long after an
	// order's deadline its timeout close starts (30 s → 0.5 s at the default time scale).
	DefaultCloseGrace = 30 * time.Second
	// DefaultSettleTimeout bounds the settle phase, in business time, counted from the last
	// order's deadline plus the close grace (10 minutes → 10 s at the default time scale).
	DefaultSettleTimeout = 10 * time.Minute
	// DefaultWatchInterval is how often a watching buyer polls its order, in business time
	// (2 s → 33 ms at the default time scale).
	DefaultWatchInterval = 2 * time.Second
	// DefaultWAPWait is how long a WAP buyer may wait for its minute (Config.WAPWait), in
	// wall time: a minute, so that every one can pay by WAP.
	DefaultWAPWait = time.Minute
)

// Compensation strategies: how the server finds lost payment results before the deadline
// (serve's --compensation).
const (
	CompensationDelayed    = "delayed"
	CompensationScan       = "scan"
	CompensationNotifyOnly = "notify-only"
)

// Strategies are the compensation strategies Compare runs, in table order.
var Strategies = []string{CompensationDelayed, CompensationScan, CompensationNotifyOnly}

// Config is one chaos run. Zero fields take the documented defaults.
type Config struct {
	// Orders is how many buyers come, each with one order. Defaults to 300.
	Orders int
	// Concurrency is how many buyers act at once (create, ask for a code, pay, cancel,
	// poll); a buyer who waits (to pay later, or between polls) gives its place up.
	// Defaults to 32.
	Concurrency int
	// Seed fixes the fault plan, every buyer's behaviour and the crash moments. 0 means
	// DefaultSeed (1).
	Seed uint64
	// Faults is "none", "all" or a comma-separated list of fault classes (FaultClasses).
	// Defaults to "all".
	Faults string
	// FeeFaults is "none" (the default), "all" or a comma-separated list of fee and
	// settlement fault classes (FeeFaultClasses), planted in the simulator's bills for the
	// end-of-run reconciliation to find, each optionally =probability.
	FeeFaults string
	// Buyers is the buyer mix: "" for the default (Behaviours), or a comma list of
	// behaviour[=weight], e.g. "pay_now" (see ParsePopulation).
	Buyers string
	// Methods is the mix of ways to pay: "" or "all" for DefaultWays (a QR code of either
	// channel for half of the buyers, every other method of both channels an equal share of
	// the rest), "qr" for QR codes alone, or a comma list of channel:method[=weight] (see
	// ParseWays).
	Methods string
	// AlipayMode and WechatMode are the simulated merchants' signing modes, as a channels
	// file names them: "key" or "cert", "pubkey" or "certificate". Default to key and
	// pubkey.
	AlipayMode, WechatMode string
	// Watch is the share of buyers who poll their order: "half" (the default), "all",
	// "none", or a number in [0, 1].
	Watch string
	// AppShare is the share of buyers who pay a business app through the payments API
	// instead of the shop: "" for DefaultAppShare (10%), "none", or a number in [0, 1].
	AppShare string
	// BarcodeShare is the share of buyers who pay at a till with their wallet's payment code
	// (barcode.go): "" for DefaultBarcodeShare (20%), "none", or a number in [0, 1].
	BarcodeShare string
	// Crashes is how many times the server is killed with SIGKILL during the load and
	// restarted at once. Defaults to 0. With QueuedFlash, the first kill waits for the
	// queue to be draining (queue.go).
	Crashes int
	// QueuedFlash, above 0, adds a queued SKU of that many units (a flash sale that queues,
	// docs/design.md §6.1): at the start of the load QueuedFlashBuyers of the buyers rush for
	// it all at once, each taking a ticket and following it to its end, and pay the order a
	// ticket became (most of them) or leave it, as well as placing their normal orders. The
	// auditor's I10 holds every ticket to one end. Defaults to 0: no queued SKU.
	QueuedFlash int
	// QueuedFlashBuyers is how many buyers rush for the queued SKU. Defaults to twice its
	// units, at most Orders.
	QueuedFlashBuyers int
	// NATSRestarts is how many times the harness stops its NATS server during the load and
	// starts it again on the same port and store, NATSDowntime later; with QueuedFlash the
	// first waits for the queue to be draining. Defaults to 0.
	NATSRestarts int
	// DB is a postgres:// DSN for the server's store. Each run creates a schema of its own
	// in that database (dropped at the end unless KeepData), so that the audit reads only
	// this run's orders. Defaults to "": SQLite in DataDir.
	DB string
	// Compensation is passed to the server's --compensation. Defaults to "delayed".
	Compensation string
	// Compare runs every strategy in Strategies on the same plan (see Compare); Run
	// ignores it.
	Compare bool
	// Settings is where the server's settings come from: SettingsDrawn (the default) draws
	// the pay windows, the close grace, the refund retry plan, the SKUs' stock policies and
	// the retention periods at their floors from Seed (DrawSettings); SettingsFixed gives
	// every seed the same (FixedSettings).
	Settings string
	// NoAfterSales skips the after-sales phase (refunds before shipping, returns,
	// completions on the paid orders) that runs between the settle and the audit.
	NoAfterSales bool
	// TimeScale divides every business duration: the server's deadlines, grace, sweeps and
	// scans, and the simulator's notification retries. Defaults to 60.
	TimeScale float64
	// Binary is the orderpay executable run as `<Binary> serve`. Defaults to the running
	// executable (os.Executable), which is orderpay itself under `orderpay chaos`.
	Binary string
	// DataDir holds the run's files: keys, the JetStream store, the server's data and its
	// log (serve.log). Defaults to a temp dir, removed at the end unless KeepData.
	DataDir string
	// KeepData keeps a default DataDir after the run. A DataDir that was given is always kept.
	KeepData bool
	// JSON asks the command for a JSON report instead of a table; Run ignores it.
	JSON bool
	// Progress receives a progress line while the run goes on (redrawn in place on a
	// terminal). Defaults to none.
	Progress io.Writer
	// Logger receives the harness's own log (simulator, NATS). Defaults to discarding it.
	Logger *slog.Logger

	// CloseGrace is the server's --close-grace under SettingsFixed, in business time.
	// Defaults to DefaultCloseGrace (30 s). Drawn settings draw their own.
	CloseGrace time.Duration
	// SettleTimeout bounds the wait for the system to settle, in business time after the
	// last deadline plus CloseGrace. Defaults to DefaultSettleTimeout (10 minutes).
	SettleTimeout time.Duration
	// WatchInterval is how often watching buyers poll, in business time. Defaults to
	// DefaultWatchInterval (2 s).
	WatchInterval time.Duration
	// WAPWait is the longest an Alipay WAP buyer waits, before it orders, for a whole
	// minute of the clock to fall within its order's window, in wall time: a WAP order's
	// time_expire has whole minutes, which a compressed window of seconds mostly misses
	// (awaitMinute). Defaults to DefaultWAPWait (a minute: every WAP buyer can pay by WAP,
	// and a run may last up to a minute longer). A negative value waits only as long as the
	// load lasts anyway, which keeps a run as short as without WAP, at the price of the WAP
	// buyers whose minute is further off: they are refused and pay by QR code.
	WAPWait time.Duration
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() (Config, error) {
	c.Orders = cmp.Or(c.Orders, DefaultOrders)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	c.Faults = cmp.Or(c.Faults, DefaultFaults)
	c.Compensation = cmp.Or(c.Compensation, DefaultCompensation)
	c.Settings = cmp.Or(c.Settings, SettingsDrawn)
	c.TimeScale = cmp.Or(c.TimeScale, DefaultTimeScale)
	c.CloseGrace = cmp.Or(c.CloseGrace, DefaultCloseGrace)
	c.SettleTimeout = cmp.Or(c.SettleTimeout, DefaultSettleTimeout)
	c.WatchInterval = cmp.Or(c.WatchInterval, DefaultWatchInterval)
	c.WAPWait = cmp.Or(c.WAPWait, DefaultWAPWait)
	if c.QueuedFlash > 0 && c.QueuedFlashBuyers == 0 {
		c.QueuedFlashBuyers = min(2*c.QueuedFlash, c.Orders)
	}
	c.QueuedFlashBuyers = min(c.QueuedFlashBuyers, c.Orders)
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("chaos: no server binary: %w", err)
		}
		c.Binary = exe
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func (c Config) validate() error {
	switch {
	case c.Orders < 0 || c.Concurrency < 0:
		return fmt.Errorf("chaos: --orders and --concurrency must be positive")
	case c.Crashes < 0:
		return fmt.Errorf("chaos: --crashes must not be negative")
	case c.QueuedFlash < 0 || c.QueuedFlashBuyers < 0 || c.NATSRestarts < 0:
		return fmt.Errorf("chaos: --queued-flash, --queued-flash-buyers and --nats-restarts must not be negative")
	case c.QueuedFlashBuyers > 0 && c.QueuedFlash == 0:
		return fmt.Errorf("chaos: --queued-flash-buyers needs --queued-flash")
	case c.TimeScale < 1:
		return fmt.Errorf("chaos: --time-scale must be at least 1")
	case c.CloseGrace < 0 || c.SettleTimeout < 0 || c.WatchInterval < 0:
		return fmt.Errorf("chaos: durations must not be negative")
	}
	switch c.Compensation {
	case CompensationDelayed, CompensationScan, CompensationNotifyOnly:
	default:
		return fmt.Errorf("chaos: --compensation must be delayed, scan or notify-only, not %q", c.Compensation)
	}
	switch c.Settings {
	case SettingsDrawn, SettingsFixed:
	default:
		return fmt.Errorf("chaos: --settings must be drawn or fixed, not %q", c.Settings)
	}
	if _, err := ParsePopulation(c.Buyers, c.Watch); err != nil {
		return err
	}
	if _, err := ParseWays(c.Methods); err != nil {
		return err
	}
	if _, err := ParseAppShare(c.AppShare); err != nil {
		return err
	}
	if _, err := ParseBarcodeShare(c.BarcodeShare); err != nil {
		return err
	}
	if _, err := ParseFaults(c.Faults); err != nil {
		return err
	}
	if _, _, err := ParseFeeFaults(c.FeeFaults); err != nil {
		return err
	}
	if _, err := os.Stat(c.Binary); err != nil {
		return fmt.Errorf("chaos: server binary: %w", err)
	}
	return nil
}

// scaled is a business duration d compressed to wall time.
func (c Config) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.TimeScale)
}

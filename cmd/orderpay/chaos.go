package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"orderpay/chaos"
)

// runChaos is `orderpay chaos`: many simulated buyers against a real `orderpay serve`
// child process, with channel faults and kill -9 crashes, then an audit of I1–I10. It
// prints the report and fails (exit status 1) if any invariant failed. The work is in
// package chaos.
func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.Config
	fs := flag.NewFlagSet("orderpay chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Orders, "orders", chaos.DefaultOrders, "buyers, one order each")
	fs.IntVar(&cfg.Concurrency, "concurrency", chaos.DefaultConcurrency, "buyers acting at once")
	fs.Uint64Var(&cfg.Seed, "seed", chaos.DefaultSeed, "seed of the fault plan, the buyers' behaviour and the crash moments")
	fs.StringVar(&cfg.Faults, "faults", chaos.DefaultFaults, "none, all, or a comma list of "+strings.Join(chaos.FaultClasses, ", ")+
		", each optionally =probability (notify_drop=1 loses every notification)")
	fs.StringVar(&cfg.FeeFaults, "fee-faults", "none", "fee and settlement faults planted in the simulator's bills for the end-of-run reconciliation to find: none, all, or a comma list of "+
		strings.Join(chaos.FeeFaultClasses, ", ")+", each optionally =probability (per payment or refund)")
	fs.StringVar(&cfg.Buyers, "buyers", "", "buyer mix: a comma list of behaviour[=weight] (default: the standard mix)")
	fs.StringVar(&cfg.Methods, "methods", "all", "ways to pay: all (a QR code of either channel for half of the buyers, every other method an equal share of the rest), qr, or a comma list of channel:method[=weight] (alipay:wap=2,wechat:h5)")
	fs.StringVar(&cfg.AlipayMode, "alipay-mode", "key", "the simulated Alipay app's signing mode: key or cert")
	fs.StringVar(&cfg.WechatMode, "wechat-mode", "pubkey", "the simulated WeChat Pay merchant's mode: pubkey or certificate")
	fs.StringVar(&cfg.Watch, "watch", "half", "share of buyers who poll their order: half, all, none or a number in [0, 1]")
	fs.StringVar(&cfg.AppShare, "app-share", "0.1", "share of buyers who pay a business app through the payments API instead of the shop: none or a number in [0, 1]")
	fs.StringVar(&cfg.BarcodeShare, "barcode-share", "0.2", "share of buyers who pay at a till with their wallet's payment code (walk-in sales and shop orders, every buyer behaviour, both channels): none or a number in [0, 1]")
	fs.DurationVar(&cfg.WAPWait, "wap-wait", chaos.DefaultWAPWait, "the longest an Alipay WAP buyer waits (wall time) for a minute boundary within its compressed window, WAP's time_expire having whole minutes; negative: only as long as the load lasts anyway")
	fs.DurationVar(&cfg.WatchInterval, "watch-interval", chaos.DefaultWatchInterval, "how often watching buyers poll (business time)")
	fs.IntVar(&cfg.Crashes, "crashes", 0, "kill -9 the server this many times during the load (restarted at once); with --queued-flash the first while the queue drains")
	fs.IntVar(&cfg.QueuedFlash, "queued-flash", 0, "add a queued SKU of this many units that a share of the buyers rush for at the start, each taking a ticket and following it to its end (0: none)")
	fs.IntVar(&cfg.QueuedFlashBuyers, "queued-flash-buyers", 0, "buyers who rush for the queued SKU (default: twice its units, at most --orders)")
	fs.IntVar(&cfg.NATSRestarts, "nats-restarts", 0, "stop the harness's NATS server this many times during the load and start it again on the same port and store; with --queued-flash the first while the queue drains")
	fs.StringVar(&cfg.DB, "db", "", "postgres:// DSN of an empty database or schema for the server (default: SQLite in the data dir)")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.Compensation, "compensation", chaos.DefaultCompensation, "the server's --compensation: delayed, scan or notify-only")
	fs.BoolVar(&cfg.Compare, "compare", false, "run the same plan under every compensation strategy and print one table")
	fs.StringVar(&cfg.Settings, "settings", chaos.SettingsDrawn, "the server's settings: drawn (pay windows, close grace, refund retry plan, stock policies, drawn from --seed across their ranges, retention at its floors) or fixed (the same for every seed)")
	fs.Float64Var(&cfg.TimeScale, "time-scale", chaos.DefaultTimeScale, "compress time: divide deadlines, grace, sweeps and notification retries by this")
	fs.BoolVar(&cfg.NoAfterSales, "no-after-sales", false, "skip the after-sales phase (refunds before shipping, returns and completions on the paid orders) before the audit")
	fs.BoolVar(&cfg.KeepData, "keep-data", false, "keep the run's data dir (database, JetStream store, serve.log)")
	fs.StringVar(&cfg.DataDir, "data", "", "data dir of the run (default: a temp dir, removed unless --keep-data)")
	fs.StringVar(&cfg.Binary, "binary", "", "the orderpay binary to run as the server (default: this one)")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	cfg.Progress = stderr

	var reports []*chaos.Report
	var err error
	if cfg.Compare {
		reports, err = chaos.Compare(ctx, cfg)
	} else {
		var rep *chaos.Report
		if rep, err = chaos.Run(ctx, cfg); rep != nil {
			reports = append(reports, rep)
		}
	}
	if len(reports) > 0 {
		if perr := printChaos(stdout, cfg, reports); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range reports {
		if !r.Passed {
			failed = append(failed, fmt.Sprintf("%s: %s", r.Compensation, strings.Join(r.Failing, ", ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("chaos: invariants failed (%s)", strings.Join(failed, "; "))
	}
	return nil
}

func printChaos(w io.Writer, cfg chaos.Config, reports []*chaos.Report) error {
	switch {
	case cfg.JSON && cfg.Compare:
		return json.NewEncoder(w).Encode(reports)
	case cfg.JSON:
		return json.NewEncoder(w).Encode(reports[0])
	case cfg.Compare:
		chaos.PrintCompare(w, reports)
		for _, r := range reports {
			fmt.Fprintf(w, "\n==== %s ====\n", r.Compensation)
			r.PrintTable(w)
		}
	default:
		reports[0].PrintTable(w)
	}
	return nil
}

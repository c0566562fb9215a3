package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"orderpay/chaos"
)

// runBench is `orderpay bench`: a fault-free run against a real `orderpay serve` child
// process, reporting latency, paid orders per second, the server's CPU per paid order and
// how that compares to the RSA work no server can avoid. The work is in chaos.Bench.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "timers" {
		return runBenchTimers(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "flash" {
		return runBenchFlash(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "flood" {
		return runBenchFlood(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "pos" {
		return runBenchPos(ctx, args[1:], stdout, stderr)
	}
	var cfg chaos.BenchConfig
	var asJSON bool
	fs := flag.NewFlagSet("orderpay bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: orderpay bench [flags]       create + pay + notify end to end, fault-free\n"+
			"       orderpay bench flash [flags] a flash sale: many buyers, little stock, exactly the stock sold\n"+
			"       orderpay bench timers [flags] the query and deadline timers on the bus against the sweepers\n"+
			"       orderpay bench flood [flags]  forged notifications, streams and slow clients against one server\n"+
			"       orderpay bench pos [flags]    barcode payments at the counter: scan -> PAID, CPU per paid payment\n\nflags of bench:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Orders, "orders", chaos.DefaultBenchOrders, "orders per phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", chaos.DefaultBenchConcurrency, "concurrent buyers in the throughput phase")
	fs.StringVar(&cfg.Method, "method", chaos.DefaultBenchMethod, "pay every order by this channel:method (alipay:qr, alipay:pc, alipay:wap, alipay:app, alipay:inapp, wechat:qr, wechat:jsapi, wechat:mini, wechat:h5, wechat:app); the RSA floor counts its own signatures")
	fs.StringVar(&cfg.DB, "db", os.Getenv("ORDERPAY_DB"), "postgres:// DSN (default: SQLite in a temp dir) [ORDERPAY_DB]")
	showBuiltInDefault(fs, "db", "")
	fs.DurationVar(&cfg.Poll, "poll", chaos.DefaultBenchPoll, "how often the latency phase polls the order")
	fs.DurationVar(&cfg.ThroughputPoll, "throughput-poll", chaos.DefaultBenchThroughputPoll, "how often throughput buyers poll the order")
	fs.StringVar(&cfg.Binary, "binary", "", "the orderpay binary to run as the server (default: this one)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the server's CPU profile of the throughput phase to this file (go tool pprof reads it)")
	fs.IntVar(&cfg.History, "history", 0, "measure everything on the empty database, then again with this many past orders prefilled (a year of final states, retention applied), and print the ratios")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the servers' databases after the run (printed on stderr), to look into")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	if cfg.History < 0 {
		return usageErrorf("--history must be 0 or more, not %d", cfg.History)
	}
	if cfg.History > 0 || cfg.Keep {
		cfg.Progress = func(s string) { fmt.Fprintln(stderr, s) }
	}
	rep, err := chaos.Bench(ctx, cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, asJSON, rep, chaos.PrintBench)
}

// runBenchPos is `orderpay bench pos`: tills scanning the codes of buyers who confirm at
// once, against a real `orderpay serve` child process: scan -> PAID latency, payments per
// second, the server's CPU per paid payment against its RSA floor. The work is in
// chaos.PosBench; a sale not answered PAID fails the run.
func runBenchPos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.PosBenchConfig
	var asJSON bool
	fs := flag.NewFlagSet("orderpay bench pos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Payments, "payments", chaos.DefaultPosBenchPayments, "walk-in sales, one payment code each")
	fs.IntVar(&cfg.Payments, "orders", chaos.DefaultPosBenchPayments, "the same as --payments")
	fs.IntVar(&cfg.Concurrency, "concurrency", chaos.DefaultPosBenchConcurrency, "tills scanning at once")
	fs.StringVar(&cfg.Channel, "channel", chaos.DefaultPosBenchChannel, "the buyers' wallet: alipay or wechat")
	fs.StringVar(&cfg.DB, "db", os.Getenv("ORDERPAY_DB"), "postgres:// DSN (default: SQLite in a temp dir) [ORDERPAY_DB]")
	showBuiltInDefault(fs, "db", "")
	fs.StringVar(&cfg.Binary, "binary", "", "the orderpay binary to run as the server (default: this one)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	rep, err := chaos.PosBench(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, asJSON, rep, chaos.PrintPosBench); err != nil {
		return err
	}
	if !rep.Pass() {
		return fmt.Errorf("bench pos: %d of %d sales answered PAID, %d of %d trades paid at the channel", rep.Paid, rep.Payments,
			rep.LedgerPaid, rep.Payments+rep.Warmup)
	}
	return nil
}

// writeReport writes a bench report as one JSON object, or as text through print: the
// one output of every `orderpay bench` command.
func writeReport[R any](w io.Writer, asJSON bool, rep R, print func(io.Writer, R)) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	print(w, rep)
	return nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"orderpay/chaos"
)

// runBenchFlash is `orderpay bench flash`: one SKU, a thousand units, five thousand buyers
// at once through a real server's HTTP API, and the naive read-then-write baseline beside
// it. With --queued, the SKU takes its orders through the queue: fifty thousand buyers in
// a burst, each given a ticket it follows to its end, the rest of the shop measured
// meanwhile, and the same burst unqueued beside it. The work is in chaos.FlashBench and
// chaos.QueuedFlashBench.
func runBenchFlash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.FlashConfig
	var asJSON, queued, compare bool
	var queuePace int64
	var queueWait, concurrency int
	fs := flag.NewFlagSet("orderpay bench flash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Buyers, "buyers", chaos.DefaultFlashBuyers, fmt.Sprintf("buyers at once, one unit each (with --queued: %d)", chaos.DefaultQueuedFlashBuyers))
	fs.IntVar(&cfg.Units, "units", chaos.DefaultFlashUnits, "the SKU's stock")
	fs.IntVar(&cfg.Buckets, "buckets", chaos.DefaultFlashBuckets, "rows the SKU's stock is split over")
	fs.IntVar(&cfg.SKUs, "skus", 1, "above 1: run the same units and buyers again spread over this many SKUs, and report hot ÷ spread orders/s")
	fs.StringVar(&cfg.DB, "db", os.Getenv("ORDERPAY_DB"), "postgres:// DSN (default: SQLite in a temp dir) [ORDERPAY_DB]")
	showBuiltInDefault(fs, "db", "")
	fs.StringVar(&cfg.Binary, "binary", "", "the orderpay binary to run as the server (default: this one)")
	fs.DurationVar(&cfg.NaiveThink, "naive-think", chaos.DefaultNaiveThink, "the naive baseline's pause between reading the count and writing it back")
	fs.BoolVar(&queued, "queued", false, "the SKU takes its orders through the queue: each buyer gets a ticket and follows it to its end")
	fs.Int64Var(&queuePace, "queue-pace", 0, "with --queued: the SKU's orders per second per instance (0: as fast as the store commits)")
	fs.IntVar(&queueWait, "queue-wait-seconds", int(chaos.DefaultQueueWait/time.Second), "with --queued: how long a ticket may wait")
	fs.IntVar(&concurrency, "concurrency", chaos.DefaultQueuedFlashConcurrency, "with --queued: the buyers' orders in flight at once, on keep-alive connections (their ticket reads a quarter as many)")
	fs.BoolVar(&compare, "compare", true, "with --queued: run the same burst unqueued too, and print both side by side")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !queued {
		var only []string
		for _, name := range []string{"queue-pace", "queue-wait-seconds", "concurrency", "compare"} {
			if set[name] {
				only = append(only, "--"+name)
			}
		}
		if len(only) > 0 {
			return usageErrorf("bench flash: %s only with --queued", strings.Join(only, ", "))
		}
		return benchFlash(ctx, cfg, asJSON, stdout)
	}
	if set["skus"] || set["naive-think"] {
		return usageErrorf("bench flash: --skus and --naive-think are not for --queued")
	}
	qc := chaos.QueuedFlashConfig{Buyers: cfg.Buyers, Units: cfg.Units, Buckets: cfg.Buckets, QueuePace: queuePace,
		QueueWait: time.Duration(queueWait) * time.Second, Concurrency: concurrency, Compare: compare, DB: cfg.DB, Binary: cfg.Binary}
	if !set["buyers"] {
		qc.Buyers = chaos.DefaultQueuedFlashBuyers
	}
	if queuePace < 0 || queueWait < 1 || concurrency < 1 || qc.Buyers < 1 {
		return usageErrorf("bench flash: --buyers, --queue-wait-seconds and --concurrency must be positive, --queue-pace not negative")
	}
	rep, err := chaos.QueuedFlashBench(ctx, qc)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, asJSON, rep, chaos.PrintQueuedFlash); err != nil {
		return err
	}
	if !rep.Pass() {
		return fmt.Errorf("bench flash --queued: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}

// benchFlash is the unqueued flash sale and its naive baseline.
func benchFlash(ctx context.Context, cfg chaos.FlashConfig, asJSON bool, stdout io.Writer) error {
	rep, err := chaos.FlashBench(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, asJSON, rep, chaos.PrintFlash); err != nil {
		return err
	}
	if !rep.Pass() {
		return fmt.Errorf("bench flash: %d orders for %d units (locked %d, available %d)", rep.Created, rep.Units, rep.Locked, rep.Available)
	}
	return nil
}

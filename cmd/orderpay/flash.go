package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"orderpay/chaos"
)

// runBenchFlash is `orderpay bench flash`: one SKU, a thousand units, five thousand buyers
// at once through a real server's HTTP API, and the naive read-then-write baseline beside
// it. The work is in chaos.FlashBench.
func runBenchFlash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.FlashConfig
	var asJSON bool
	fs := flag.NewFlagSet("orderpay bench flash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Buyers, "buyers", chaos.DefaultFlashBuyers, "buyers at once, one unit each")
	fs.IntVar(&cfg.Units, "units", chaos.DefaultFlashUnits, "the SKU's stock")
	fs.IntVar(&cfg.Buckets, "buckets", chaos.DefaultFlashBuckets, "rows the SKU's stock is split over")
	fs.IntVar(&cfg.SKUs, "skus", 1, "above 1: run the same units and buyers again spread over this many SKUs, and report hot ÷ spread orders/s")
	fs.StringVar(&cfg.DB, "db", os.Getenv("ORDERPAY_DB"), "postgres:// DSN (default: SQLite in a temp dir) [ORDERPAY_DB]")
	showBuiltInDefault(fs, "db", "")
	fs.StringVar(&cfg.Binary, "binary", "", "the orderpay binary to run as the server (default: this one)")
	fs.DurationVar(&cfg.NaiveThink, "naive-think", chaos.DefaultNaiveThink, "the naive baseline's pause between reading the count and writing it back")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
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

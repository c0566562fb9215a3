package main

import (
	"context"
	"flag"
	"io"
	"os"

	"orderpay/chaos"
)

// runBenchFlood is `orderpay bench flood`: forged notifications, order streams, slow bodies,
// idle keep-alives, an app's webhook receiver that answers in 30 s, a buyer polling 20 open
// QR orders and 100 concurrent /metrics scrapes of a store of 200,000 orders against one
// server at once, while honest buyers order and pay with every notification lost
// (chaos.Flood).
func runBenchFlood(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg chaos.FloodConfig
	var asJSON bool
	fs := flag.NewFlagSet("orderpay bench flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Forged, "forged", chaos.DefaultFloodForged, "forged notifications")
	fs.IntVar(&cfg.Streams, "streams", chaos.DefaultFloodStreams, "order event streams the attackers open")
	fs.IntVar(&cfg.StreamBuyers, "stream-buyers", chaos.DefaultFloodStreamBuyers, "attackers, each streaming an order of its own")
	fs.IntVar(&cfg.SlowBodies, "slow-bodies", chaos.DefaultFloodSlowBodies, "connections trickling a request body")
	fs.IntVar(&cfg.IdleConns, "idle-conns", chaos.DefaultFloodIdleConns, "idle keep-alive connections")
	fs.IntVar(&cfg.Honest, "honest", chaos.DefaultFloodHonest, "honest buyers, ordering and paying with every notification lost")
	fs.DurationVar(&cfg.HonestOver, "honest-over", chaos.DefaultFloodHonestOver, "the honest buyers arrive over this long")
	fs.IntVar(&cfg.SlowWebhookPayments, "slow-webhook-payments", chaos.DefaultFloodSlowWebhookPayments,
		"payments of an app whose webhook receiver answers in 30 s (0: none)")
	fs.IntVar(&cfg.AppWebhookPayments, "app-webhook-payments", chaos.DefaultFloodAppWebhookPayments,
		"payments of another app, whose webhooks are timed (0: none)")
	fs.IntVar(&cfg.QRHolderOrders, "qr-holder-orders", chaos.DefaultFloodQRHolderOrders,
		"open QR orders one buyer holds and polls continually (0: none)")
	fs.IntVar(&cfg.MetricsScrapers, "metrics-scrapers", chaos.DefaultFloodMetricsScrapers, "concurrent /metrics scrapes, repeated (0: none)")
	fs.IntVar(&cfg.SeedOrders, "seed-orders", chaos.DefaultFloodSeedOrders, "orders inserted into the store before the flood (0: none)")
	fs.BoolVar(&cfg.AttackersPay, "attackers-pay", true, "the attackers ask for QR codes, so that their streams watch attempts the server queries")
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
	for _, n := range []*int{&cfg.SlowWebhookPayments, &cfg.AppWebhookPayments, &cfg.QRHolderOrders, &cfg.MetricsScrapers, &cfg.SeedOrders} {
		if *n == 0 {
			*n = -1 // chaos.FloodConfig's "none": its zero is the default
		}
	}
	rep, err := chaos.Flood(ctx, cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, asJSON, rep, chaos.PrintFlood)
}

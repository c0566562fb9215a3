package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// benchConfig is `orderpay bench`'s flags.
type benchConfig struct {
	Orders      int
	Concurrency int
	DB          string
	Poll        time.Duration
	JSON        bool
	CPUProfile  string
}

// benchReport is what a bench run measured.
type benchReport struct {
	Store             string  `json:"store"`
	Orders            int     `json:"orders"`
	Concurrency       int     `json:"concurrency"`
	PaidLatencyP50MS  float64 `json:"paid_latency_p50_ms"`
	PaidLatencyP99MS  float64 `json:"paid_latency_p99_ms"`
	PaidLatencyMaxMS  float64 `json:"paid_latency_max_ms"`
	OrdersPerSecond   float64 `json:"orders_per_second"`
	ThroughputSeconds float64 `json:"throughput_seconds"`
}

// runBench starts orderpay in-process (its own temp data dir, loopback ports, the
// simulator) and measures two things through the real HTTP APIs, fault-free:
//
//  1. latency: one order at a time, the time from the wallet's POST /sim/pay to the first
//     GET /v1/orders/{no} that shows PAID (polled every --poll);
//  2. throughput: --concurrency buyers each creating, paying (QR), paying at the wallet and
//     waiting for PAID, --orders in all; completed orders per second.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := benchConfig{}
	fs := flag.NewFlagSet("orderpay bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Orders, "orders", 200, "orders per phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent buyers in the throughput phase")
	fs.StringVar(&cfg.DB, "db", os.Getenv("ORDERPAY_DB"), "postgres:// DSN (default: SQLite in a temp dir) [ORDERPAY_DB]")
	fs.DurationVar(&cfg.Poll, "poll", time.Millisecond, "how often a waiting buyer polls the order")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run (server and buyers) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Orders <= 0 || cfg.Concurrency <= 0 {
		return fmt.Errorf("--orders and --concurrency must be positive")
	}
	dir, err := os.MkdirTemp("", "orderpay-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	m := NewMain()
	m.Config.Addr, m.Config.SimAddr, m.Config.DataDir, m.Config.DB = "127.0.0.1:0", "127.0.0.1:0", dir, cfg.DB
	m.Config.LogLevel = "warn"
	m.Stdout, m.Stderr = io.Discard, stderr
	if err := m.Run(ctx); err != nil {
		m.Close()
		return err
	}
	defer m.Close()

	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := benchRun(ctx, newAPIClient(m.URL, m.SimURL, m.AdminToken), cfg)
	if err != nil {
		return err
	}
	rep.Store = m.Store.Dialect()
	if cfg.JSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "store %s, %d orders per phase, %d concurrent buyers in the throughput phase\n", rep.Store, rep.Orders, rep.Concurrency)
	fmt.Fprintf(stdout, "  /sim/pay -> order PAID:  p50 %.1f ms   p99 %.1f ms   max %.1f ms   (sequential, polled every %s)\n",
		rep.PaidLatencyP50MS, rep.PaidLatencyP99MS, rep.PaidLatencyMaxMS, cfg.Poll)
	fmt.Fprintf(stdout, "  create + pay + notify:   %.1f orders/s   (%d orders in %.2f s)\n", rep.OrdersPerSecond, rep.Orders, rep.ThroughputSeconds)
	return nil
}

func benchRun(ctx context.Context, c *apiClient, cfg benchConfig) (*benchReport, error) {
	rep := &benchReport{Orders: cfg.Orders, Concurrency: cfg.Concurrency}
	sku := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := c.createSKU(ctx, sku, 100, int64(2*cfg.Orders), "normal"); err != nil {
		return nil, err
	}
	// buy runs one buyer's whole journey; paidWaitFrom is when the wallet call started.
	buy := func(buyer string) (paidWaitFrom, sawPaid time.Time, err error) {
		o, err := c.createOrder(ctx, buyer, sku, 1)
		if err != nil {
			return
		}
		p, err := c.pay(ctx, o.OrderNo, "alipay")
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		paidWaitFrom = time.Now()
		if err = c.walletPay(wctx, p.QRCode); err != nil {
			return
		}
		sawPaid, err = c.waitStatus(wctx, o.OrderNo, "PAID", cfg.Poll)
		return
	}

	latencies := make([]time.Duration, 0, cfg.Orders)
	for i := 0; i < cfg.Orders; i++ {
		from, to, err := buy(fmt.Sprint("latency-buyer-", i))
		if err != nil {
			return nil, fmt.Errorf("latency phase, order %d: %w", i, err)
		}
		latencies = append(latencies, to.Sub(from))
	}
	slices.Sort(latencies)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep.PaidLatencyP50MS = ms(percentile(latencies, 50))
	rep.PaidLatencyP99MS = ms(percentile(latencies, 99))
	rep.PaidLatencyMaxMS = ms(latencies[len(latencies)-1])

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Concurrency)
	start := time.Now()
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(cfg.Orders) {
					return
				}
				if _, _, err := buy(fmt.Sprint("throughput-buyer-", i)); err != nil {
					errs <- fmt.Errorf("throughput phase, order %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	rep.ThroughputSeconds = elapsed.Seconds()
	rep.OrdersPerSecond = float64(cfg.Orders) / elapsed.Seconds()
	return rep, nil
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

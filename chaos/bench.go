package chaos

import (
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"

	"github.com/google/pprof/profile"
)

// Defaults of BenchConfig.
const (
	DefaultBenchOrders      = 200
	DefaultBenchConcurrency = 16
	DefaultBenchPoll        = time.Millisecond
	// DefaultBenchThroughputPoll is how often throughput buyers poll for PAID: often
	// enough not to slow them, rarely enough that polling is not what the server's CPU
	// is measured on.
	DefaultBenchThroughputPoll = 10 * time.Millisecond
	// DefaultRSAMeasure is the least CPU time spent measuring the RSA work.
	DefaultRSAMeasure = time.Second
	// DefaultBenchMethod is the way the bench pays by default: Alipay's QR code.
	DefaultBenchMethod = "alipay:qr"
)

// BenchConfig is one bench run. Zero fields take the documented defaults.
type BenchConfig struct {
	Orders      int           // orders per phase. Defaults to 200.
	Concurrency int           // buyers in the throughput phase. Defaults to 16.
	DB          string        // postgres:// DSN; "" is SQLite in a temp dir.
	Poll        time.Duration // how often the latency phase polls. Defaults to 1 ms.
	// ThroughputPoll is how often throughput buyers poll. Defaults to 10 ms.
	ThroughputPoll time.Duration
	// RSAMeasure is the least CPU time spent timing RSA. Defaults to 1 s.
	RSAMeasure time.Duration
	Binary     string // the orderpay executable. Defaults to os.Executable().
	// Method is the way every order is paid, "channel:method" (ParsePayWay). Defaults to
	// alipay:qr, the QR code path.
	Method string
	// Profile, if set, is where the server's CPU profile of the throughput phase is written
	// (the server runs with --pprof on a loopback port for it).
	Profile string
	// History, if above 0, measures everything twice: on the empty database, and again
	// after prefilling History past orders (prefillHistory), with the ratios in
	// BenchReport.History.
	History int
	// Keep leaves the servers' data (SQLite files, PostgreSQL schemas) in place after the
	// run, to look into; Progress hears where.
	Keep bool
	// Progress, if set, hears what a long run is doing.
	Progress func(string)
	Logger   *slog.Logger

	pprofAddr string // the server's --pprof, with Profile
}

// BenchReport is what a bench run measured.
type BenchReport struct {
	Store string `json:"store"`
	// Method is the way every order was paid ("alipay:qr").
	Method      string `json:"method"`
	Orders      int    `json:"orders"`
	Concurrency int    `json:"concurrency"`
	// Latency phase: one order at a time, POST /sim/pay → the first GET showing PAID.
	PaidLatencyP50MS float64 `json:"paid_latency_p50_ms"`
	PaidLatencyP99MS float64 `json:"paid_latency_p99_ms"`
	PaidLatencyMaxMS float64 `json:"paid_latency_max_ms"`
	// Throughput phase: paid orders per second.
	OrdersPerSecond   float64 `json:"orders_per_second"`
	ThroughputSeconds float64 `json:"throughput_seconds"`
	// ServerCPUSeconds is the server process's user + system CPU over the throughput phase
	// (/proc/<pid>/stat, in clock ticks of 1/ClockTicks s).
	ServerCPUSeconds        float64 `json:"server_cpu_seconds"`
	ServerCPUPerPaidOrderMS float64 `json:"server_cpu_ms_per_paid_order"`
	ClockTicks              int64   `json:"clock_ticks_per_second"`
	// RSAPerPaidOrderMS is the floor: the mean of RSABeforeMS and RSAAfterMS, the RSA work
	// timed just before the throughput phase and just after it, so that a machine that
	// speeds up or slows down over the run moves both sides of the ratio alike. The work is
	// the method's own (RSAOps): RSASigns signatures and RSAVerifies verifications.
	RSAPerPaidOrderMS       float64 `json:"rsa_cpu_ms_per_paid_order"`
	RSASigns                int     `json:"rsa_signs_per_paid_order"`
	RSAVerifies             int     `json:"rsa_verifies_per_paid_order"`
	RSABeforeMS             float64 `json:"rsa_cpu_ms_before_throughput"`
	RSAAfterMS              float64 `json:"rsa_cpu_ms_after_throughput"`
	RSAIterations           int     `json:"rsa_iterations"`
	ServerCPUOverRSA        float64 `json:"server_cpu_over_rsa"`
	ThroughputPollMS        float64 `json:"throughput_poll_ms"`
	LatencyPollMS           float64 `json:"latency_poll_ms"`
	BrokerAndChannelInBench bool    `json:"broker_and_channel_in_bench_process"`
	// Per paid order of the throughput phase: the server's transactions (its writes, each
	// in one transaction) and rows written, and signed calls the channel received (by
	// channel.method). On PostgreSQL, PGCommitsPerPaidOrder is every transaction the
	// database counted, each read statement run alone included: those grow with how often
	// the buyers poll.
	TransactionsPerPaidOrder float64 `json:"transactions_per_paid_order"`
	// CommitsPerPaidOrder is the server's own commits: fewer than its transactions on
	// SQLite, where the transactions queued together commit as one group.
	CommitsPerPaidOrder      float64            `json:"commits_per_paid_order"`
	PGCommitsPerPaidOrder    float64            `json:"pg_commits_per_paid_order,omitempty"`
	RowsWrittenPerPaidOrder  float64            `json:"rows_written_per_paid_order"`
	ChannelCallsPerPaidOrder float64            `json:"channel_calls_per_paid_order"`
	ChannelCallsByMethod     map[string]float64 `json:"channel_calls_by_method_per_paid_order"`
	// BuyerReadsPerPaidOrder is how many times, per paid order, the buyers read their
	// orders waiting for PAID (every ThroughputPoll): those reads are server CPU too.
	BuyerReadsPerPaidOrder float64 `json:"buyer_reads_per_paid_order"`
	// DBBytesPerPaidOrder is what the orders added to the database's size in use (SQLite:
	// pages in use × page size; PostgreSQL: the database's size) over every order paid in
	// the run, both phases: the size at the end less DBEmptyBytes, the size before the
	// first order (the schema, its empty tables and indexes, the catalogue).
	DBBytesPerPaidOrder float64 `json:"db_bytes_per_paid_order"`
	DBEmptyBytes        int64   `json:"db_empty_bytes"`
	// DBBytesAfterRetention is the same after a retention pass with the default policy run
	// as if its longest period had passed (the clock moved on; nothing else changes).
	DBBytesAfterRetention float64 `json:"db_bytes_per_paid_order_after_retention"`

	// History is the run's second half with --history: the figures on the empty database
	// and with the past orders, and their ratios. The fields above are the empty one's.
	History *HistoryReport `json:"history,omitempty"`
}

// Bench measures, fault-free, a real `orderpay serve` child process through its HTTP API:
//
//  1. latency: one order at a time, from the wallet's POST /sim/pay to the first
//     GET /v1/orders/{no} that shows PAID (polled every Poll);
//  2. throughput: Concurrency buyers each creating, asking for a code, paying at the
//     wallet and waiting for PAID, Orders in all: paid orders per second, and the server
//     process's CPU time per paid order;
//  3. the RSA work no server can avoid per paid order by the way it pays (RSAOps: for a
//     QR code one RSA-2048 signature, the precreate request, and two verifications, its
//     answer and the notification), timed in this process just before the throughput
//     phase and just after it, and the ratio of the server's CPU per order to their mean.
//
// Every order is paid by cfg.Method (alipay:qr by default): asked for with what the method
// needs (the payer's identity in the buyer's login), paid by the simulated wallet on the
// device the method is for.
//
// The broker and the channel simulator run in the bench process, as in production they
// run elsewhere: the server's CPU is orderpay's alone.
func Bench(ctx context.Context, cfg BenchConfig) (*BenchReport, error) {
	cfg.Orders = cmp.Or(cfg.Orders, DefaultBenchOrders)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultBenchConcurrency)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultBenchPoll)
	cfg.ThroughputPoll = cmp.Or(cfg.ThroughputPoll, DefaultBenchThroughputPoll)
	cfg.RSAMeasure = cmp.Or(cfg.RSAMeasure, DefaultRSAMeasure)
	cfg.Method = cmp.Or(cfg.Method, DefaultBenchMethod)
	if cfg.Orders < 0 || cfg.Concurrency < 0 {
		return nil, fmt.Errorf("bench: --orders and --concurrency must be positive")
	}
	way, err := ParsePayWay(cfg.Method)
	if err != nil {
		return nil, fmt.Errorf("bench: --method: %w", err)
	}
	signs, verifies := RSAOps(way)
	var serverArgs []string
	if cfg.Profile != "" {
		var err error
		if cfg.pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		serverArgs = append(serverArgs, "--pprof", cfg.pprofAddr)
	}
	rep := &BenchReport{Method: way.String(), RSASigns: signs, RSAVerifies: verifies, Orders: cfg.Orders, Concurrency: cfg.Concurrency, ClockTicks: ClockTicks(),
		LatencyPollMS: ms(cfg.Poll), ThroughputPollMS: ms(cfg.ThroughputPoll), BrokerAndChannelInBench: true}
	if cfg.History > 0 {
		return rep, benchHistory(ctx, cfg, way, rep, serverArgs)
	}
	b, err := startBenchEnv(ctx, cfg, way, serverArgs)
	if err != nil {
		return nil, err
	}
	defer b.e.close()
	rep.Store = b.e.store.Dialect()
	if size, err := dbBytesInUse(ctx, b.e.store); err == nil {
		rep.DBEmptyBytes = size
	}
	if err := benchPhases(ctx, b.e, cfg, rep, b.buy, &b.reads, ""); err != nil {
		return nil, err
	}
	return rep, nil
}

// benchEnv is a server the bench measures, with its SKU and buyers' journey.
type benchEnv struct {
	e     *env
	buy   benchBuy
	reads atomic.Int64 // the buyers' reads of their orders while they wait for PAID
	pprof string       // the server's --pprof address, with --profile and --history
}

// startBenchEnv starts a server and makes the bench's SKU in it.
func startBenchEnv(ctx context.Context, cfg BenchConfig, way PayWay, serverArgs []string) (*benchEnv, error) {
	e, err := startEnv(ctx, envConfig{Binary: cfg.Binary, DB: cfg.DB, Prefix: "orderpay-bench-", TimeScale: 1,
		LogLevel: "warn", Logger: cfg.Logger, ServerArgs: serverArgs, KeepData: cfg.Keep})
	if err != nil {
		return nil, err
	}
	if cfg.Keep && cfg.Progress != nil {
		cfg.Progress("bench: keeping the server's data: " + e.dsn)
	}
	c := e.client
	sku := e.runID + "-bench"
	// Two phases of Orders a round; --history runs historyRounds rounds in each of its two
	// blocks. And some to spare.
	if err := c.CreateSKU(ctx, sku, 100, int64((4*historyRounds+4)*cfg.Orders), "normal"); err != nil {
		e.close()
		return nil, err
	}
	b := &benchEnv{e: e}
	// buy runs one buyer's whole journey, paying by way on its device; paidWaitFrom is
	// when the wallet call started.
	b.buy = func(buyer string, poll time.Duration) (paidWaitFrom, sawPaid time.Time, err error) {
		c := c.As(buyer)
		o, err := c.CreateOrder(ctx, buyer, "", Item{SKU: sku, Qty: 1})
		if err != nil {
			return
		}
		// A method that pays for one wallet user has the buyer's identity in their login,
		// from the simulator's wallet (what its OAuth gives a shop).
		if claims, cerr := benchPayer(ctx, e, way, buyer); cerr != nil {
			return paidWaitFrom, sawPaid, cerr
		} else if claims != nil {
			c = e.client.AsWith(buyer, claims)
		}
		p, err := c.PayBy(ctx, o.OrderNo, PayRequest{Channel: way.Channel, Method: way.Method})
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		paidWaitFrom = time.Now()
		if _, err = c.WalletPayAs(wctx, deviceFor(p.Pay, buyer, e.shopDevice(o.OrderNo))); err != nil {
			return
		}
		var n int
		sawPaid, n, err = c.waitStatus(wctx, o.OrderNo, string(orderpay.OrderPaid), poll)
		b.reads.Add(int64(n))
		return
	}
	return b, nil
}

// benchBuy is one buyer's journey in the bench (Bench's buy).
type benchBuy func(buyer string, poll time.Duration) (paidWaitFrom, sawPaid time.Time, err error)

// benchPhases runs the latency and throughput phases and the RSA floor into rep, with
// buyers named after round.
func benchPhases(ctx context.Context, e *env, cfg BenchConfig, rep *BenchReport, buy benchBuy, reads *atomic.Int64, round string) error {
	signs, verifies := rep.RSASigns, rep.RSAVerifies
	latencies := make([]time.Duration, 0, cfg.Orders)
	for i := range cfg.Orders {
		from, to, err := buy(fmt.Sprint(round, "latency-buyer-", i), cfg.Poll)
		if err != nil {
			return fmt.Errorf("bench: latency phase, order %d: %w", i, err)
		}
		latencies = append(latencies, to.Sub(from))
	}
	l := summarize(latencies)
	rep.PaidLatencyP50MS, rep.PaidLatencyP99MS, rep.PaidLatencyMaxMS = l.P50, l.P99, l.Max

	rsaBefore, nBefore, err := MeasureRSAOps(e.keys, signs, verifies, cfg.RSAMeasure)
	if err != nil {
		return err
	}
	pid := e.server.PID()
	before, err := storeCounters(ctx, e.server.MetricsURL())
	if err != nil {
		return err
	}
	pgTxBefore, pgErr := pgCommits(ctx, e.store)
	callsBefore := e.sim.Calls()
	reads.Store(0)
	cpuBefore, err := ProcessCPU(pid)
	if err != nil {
		return fmt.Errorf("bench: server CPU: %w", err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Concurrency)
	profiled := make(chan error, 1)
	profileCtx, stopProfile := context.WithCancel(ctx)
	defer stopProfile()
	if cfg.Profile != "" {
		go func() { profiled <- cpuProfile(profileCtx, cfg.pprofAddr, cfg.Profile) }()
	} else {
		profiled <- nil
	}
	start := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(cfg.Orders) {
					return
				}
				if _, _, err := buy(fmt.Sprint(round, "throughput-buyer-", i), cfg.ThroughputPoll); err != nil {
					errs <- fmt.Errorf("bench: throughput phase, order %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProfile()
	if err := <-profiled; err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	cpuAfter, err := ProcessCPU(pid)
	if err != nil {
		return fmt.Errorf("bench: server CPU: %w", err)
	}
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	after, err := storeCounters(ctx, e.server.MetricsURL())
	if err != nil {
		return err
	}
	orders := float64(cfg.Orders)
	rep.TransactionsPerPaidOrder = round1((after.transactions - before.transactions) / orders)
	rep.CommitsPerPaidOrder = round1((after.commits - before.commits) / orders)
	rep.RowsWrittenPerPaidOrder = round1((after.rows - before.rows) / orders)
	if pgErr == nil {
		// PostgreSQL counts every transaction, a statement run alone included.
		if pgTxAfter, err := pgCommits(ctx, e.store); err == nil {
			rep.PGCommitsPerPaidOrder = round1(float64(pgTxAfter-pgTxBefore) / orders)
		}
	}
	rep.ChannelCallsByMethod = map[string]float64{}
	var calls int
	for k, n := range e.sim.Calls() {
		if d := n - callsBefore[k]; d > 0 {
			calls += d
			rep.ChannelCallsByMethod[k] = round3(float64(d) / orders)
		}
	}
	rep.ChannelCallsPerPaidOrder = round3(float64(calls) / orders)
	rep.BuyerReadsPerPaidOrder = round1(float64(reads.Load()) / orders)
	// The size the orders took, and what a retention pass as if its longest period had
	// passed leaves of it; with --history the past orders' own size is measured instead,
	// and nothing is removed before the reads.
	if cfg.History == 0 {
		if size, err := dbBytesInUse(ctx, e.store); err == nil {
			rep.DBBytesPerPaidOrder = round1(float64(size-rep.DBEmptyBytes) / float64(2*cfg.Orders))
		}
		p := orderpay.DefaultRetention
		later := time.Now().Add(max(p.Logs, p.Published, p.RawBodies) + time.Hour)
		if _, err := e.store.Retain(ctx, later, p); err != nil {
			return fmt.Errorf("bench: retention pass: %w", err)
		}
		if size, err := dbBytesInUse(ctx, e.store); err == nil {
			rep.DBBytesAfterRetention = round1(float64(size-rep.DBEmptyBytes) / float64(2*cfg.Orders))
		}
	}
	rep.ThroughputSeconds = round3(elapsed.Seconds())
	rep.OrdersPerSecond = round1(float64(cfg.Orders) / elapsed.Seconds())
	cpu := cpuAfter - cpuBefore
	rep.ServerCPUSeconds = round3(cpu.Seconds())
	rep.ServerCPUPerPaidOrderMS = round3(float64(cpu.Microseconds()) / 1000 / float64(cfg.Orders))

	rsaAfter, nAfter, err := MeasureRSAOps(e.keys, signs, verifies, cfg.RSAMeasure)
	if err != nil {
		return err
	}
	perOrder := (rsaBefore + rsaAfter) / 2
	rep.RSAIterations = nBefore + nAfter
	rep.RSAPerPaidOrderMS = round3(float64(perOrder.Nanoseconds()) / 1e6)
	rep.RSABeforeMS, rep.RSAAfterMS = round3(float64(rsaBefore.Nanoseconds())/1e6), round3(float64(rsaAfter.Nanoseconds())/1e6)
	if perOrder > 0 {
		rep.ServerCPUOverRSA = round1(float64(cpu) / float64(cfg.Orders) / float64(perOrder))
	}
	return nil
}

// MeasureRSA times, in CPU time of one thread, what a server must do in RSA per paid order
// by QR code at the least: sign a request with RSA-2048 (PKCS #1 v1.5, SHA-256, as
// Alipay's RSA2 and WeChat Pay's SHA256-RSA2048 are) and verify two signatures (the answer
// and the notification). It repeats until at least minCPU is spent and returns the cost of
// one such set and how many were timed.
func MeasureRSA(keys *sim.Keys, minCPU time.Duration) (time.Duration, int, error) {
	return MeasureRSAOps(keys, 1, 2, minCPU)
}

// MeasureRSAOps is MeasureRSA for a set of signs signatures and verifies verifications: a
// way to pay's own RSA work (RSAOps).
func MeasureRSAOps(keys *sim.Keys, signs, verifies int, minCPU time.Duration) (time.Duration, int, error) {
	msg := []byte("app_id=2021000000000000&biz_content={\"out_trade_no\":\"P20261123000000000000A01\",\"total_amount\":\"55.90\"}&charset=utf-8&method=alipay.trade.precreate&sign_type=RSA2&timestamp=2026-11-23 00:00:00&version=1.0")
	sum := sha256.Sum256(msg)
	answer, err := rsa.SignPKCS1v15(rand.Reader, keys.AlipayPrivateKey, crypto.SHA256, sum[:])
	if err != nil {
		return 0, 0, err
	}
	one := func() error {
		for range signs {
			h := sha256.Sum256(msg)
			if _, err := rsa.SignPKCS1v15(rand.Reader, keys.AppPrivateKey, crypto.SHA256, h[:]); err != nil {
				return err
			}
		}
		for range verifies {
			h := sha256.Sum256(msg)
			if err := rsa.VerifyPKCS1v15(keys.AlipayPublicKey, crypto.SHA256, h[:], answer); err != nil {
				return err
			}
		}
		return nil
	}
	if err := one(); err != nil { // warm up
		return 0, 0, err
	}
	// One OS thread, so that its CPU clock counts this work and nothing else.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := threadCPU
	if _, ok := clock(); !ok {
		clock = wallClock // no thread CPU clock here: wall time on an idle process is close
	}
	start, _ := clock()
	n := 0
	for {
		for range 10 {
			if err := one(); err != nil {
				return 0, 0, err
			}
		}
		n += 10
		now, _ := clock()
		if spent := now - start; spent >= minCPU {
			return spent / time.Duration(n), n, nil
		}
	}
}

var wallStart = time.Now()

func wallClock() (time.Duration, bool) { return time.Since(wallStart), true }

func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// PrintBench writes a bench report as text.
func PrintBench(w io.Writer, r *BenchReport) {
	fmt.Fprintf(w, "store %s, paid by %s, %d orders per phase, %d concurrent buyers in the throughput phase; "+
		"server: a child process, broker and channel in the bench process\n", r.Store, r.Method, r.Orders, r.Concurrency)
	fmt.Fprintf(w, "  /sim/pay -> order PAID:    p50 %.1f ms   p99 %.1f ms   max %.1f ms   (sequential, polled every %g ms)\n",
		r.PaidLatencyP50MS, r.PaidLatencyP99MS, r.PaidLatencyMaxMS, r.LatencyPollMS)
	fmt.Fprintf(w, "  create + pay + notify:     %.1f paid orders/s   (%d orders in %.2f s, polled every %g ms)\n",
		r.OrdersPerSecond, r.Orders, r.ThroughputSeconds, r.ThroughputPollMS)
	fmt.Fprintf(w, "  server CPU per paid order: %.2f ms   (%.2f CPU-s in the throughput phase, /proc stat at %d ticks/s)\n",
		r.ServerCPUPerPaidOrderMS, r.ServerCPUSeconds, r.ClockTicks)
	fmt.Fprintf(w, "  RSA floor per paid order:  %.2f ms   (%d RSA-2048 %s + %d %s, %s's own; %d timed in this process: %.2f ms before the phase, %.2f after)\n",
		r.RSAPerPaidOrderMS, r.RSASigns, plural(r.RSASigns, "sign", "signs"), r.RSAVerifies, plural(r.RSAVerifies, "verify", "verifies"), r.Method,
		r.RSAIterations, r.RSABeforeMS, r.RSAAfterMS)
	fmt.Fprintf(w, "  server CPU / RSA floor:    %.1f×\n", r.ServerCPUOverRSA)
	fmt.Fprintf(w, "  per paid order:            %.1f transactions in %.1f commits, %.1f rows written, %.2f channel calls (%s)\n",
		r.TransactionsPerPaidOrder, r.CommitsPerPaidOrder, r.RowsWrittenPerPaidOrder, r.ChannelCallsPerPaidOrder, callsByMethod(r.ChannelCallsByMethod))
	fmt.Fprintf(w, "                             %.1f reads of the order by its buyer, waiting for PAID (every %g ms)\n",
		r.BuyerReadsPerPaidOrder, r.ThroughputPollMS)
	if r.PGCommitsPerPaidOrder > 0 {
		fmt.Fprintf(w, "                             PostgreSQL counted %.1f commits, each read run alone included (the buyers poll every %g ms)\n",
			r.PGCommitsPerPaidOrder, r.ThroughputPollMS)
	}
	if r.DBBytesPerPaidOrder > 0 {
		fmt.Fprintf(w, "  database per paid order:   %.0f bytes in use, %.0f after a retention pass past its periods (beyond the empty database's %.0f KiB)\n",
			r.DBBytesPerPaidOrder, r.DBBytesAfterRetention, float64(r.DBEmptyBytes)/1024)
	}
	if r.History != nil {
		printHistory(w, r.History)
	}
}

// plural is one if n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// benchPayer is the claims a bench buyer's login carries to pay by way: the wallet identity
// the method pays for (orderpay.PayerNeeded), from the simulator's wallet; nil for a method
// that needs none.
func benchPayer(ctx context.Context, e *env, way PayWay, buyer string) (map[string]any, error) {
	switch orderpay.PayerNeeded(way.Channel, way.Method) {
	case "openid":
		appid := e.channels.WalletAppID(way.Channel, way.Method)
		id, err := e.client.Identity(ctx, buyer, appid)
		if err != nil {
			return nil, err
		}
		return map[string]any{"openid_" + appid: id.OpenID}, nil
	case "alipay_user_id":
		id, err := e.client.Identity(ctx, buyer, "")
		if err != nil {
			return nil, err
		}
		return map[string]any{"alipay_user_id": id.AlipayUserID}, nil
	}
	return nil, nil
}

// cpuProfile records the server's CPU profile from now until ctx ends, into path.
func cpuProfile(ctx context.Context, addr, path string) error {
	// The profiler answers only when its sampling time is over, and a request cut short
	// gets nothing; so the phase is sampled a second at a time, back to back, until it
	// ends, and the pieces are merged into one profile.
	var parts []*profile.Profile
	for {
		resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=1")
		if err != nil {
			return err
		}
		p, err := profile.Parse(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("a CPU profile from the server: %w", err)
		}
		parts = append(parts, p)
		if ctx.Err() != nil {
			break
		}
	}
	merged, err := profile.Merge(parts)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// storeCounts are the server's database counters so far: transactions, commits and rows
// written.
type storeCounts struct{ transactions, commits, rows float64 }

// storeCounters scrapes the server's /metrics, on its metrics listener, for its storeCounts.
func storeCounters(ctx context.Context, metricsURL string) (c storeCounts, err error) {
	m, err := metricSamples(ctx, metricsURL)
	if err != nil {
		return c, fmt.Errorf("bench: metrics: %w", err)
	}
	return storeCounts{transactions: m["orderpay_db_transactions_total"], commits: m["orderpay_db_commits_total"],
		rows: m["orderpay_db_rows_written_total"]}, nil
}

// pgCommits is PostgreSQL's count of the transactions committed in the database, every
// statement run outside a transaction included; an error on SQLite.
func pgCommits(ctx context.Context, store *sqlstore.Store) (int64, error) {
	if store.Dialect() != "postgres" {
		return 0, errors.New("not PostgreSQL")
	}
	// Each backend flushes its statistics within a second of a transaction (PostgreSQL 15);
	// wait for that, then ask for a fresh snapshot.
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	_, _ = store.DB().ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`)
	var n int64
	err := store.DB().QueryRowContext(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// dbBytesInUse is the database's size in use: SQLite's pages in use times its page size,
// PostgreSQL's database size.
func dbBytesInUse(ctx context.Context, store *sqlstore.Store) (int64, error) {
	db := store.DB()
	if store.Dialect() == "postgres" {
		var n int64
		err := db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
		return n, err
	}
	var pages, free, size int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// callsByMethod lists channel calls per paid unit by method, sorted ("none" for none).
func callsByMethod(calls map[string]float64) string {
	var methods []string
	for k, v := range calls {
		methods = append(methods, fmt.Sprintf("%s %.2f", k, v))
	}
	slices.Sort(methods)
	if len(methods) == 0 {
		return "none"
	}
	return strings.Join(methods, ", ")
}

package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// The barcode (付款码) benchmark, `orderpay bench pos`: a till scans the codes of buyers who
// confirm at once, and the server answers each POST /v1/pos/payments with PAID
// (docs/barcode.md). It measures, fault-free, against a real `orderpay serve` child process
// as Bench does: scan → PAID latency, paid payments per second, and the server's CPU per
// paid payment against the RSA work no server can avoid for one.

// Defaults of PosBenchConfig.
const (
	DefaultPosBenchPayments    = 200
	DefaultPosBenchConcurrency = DefaultBenchConcurrency
	DefaultPosBenchChannel     = orderpay.ChannelAlipay
	// posBenchAmount is every walk-in sale's amount, fen.
	posBenchAmount = 1290
)

// PosRSAOps is the RSA-2048 work the server does per paid barcode payment, for either
// channel, at the least: the payment call (Alipay alipay.trade.pay, WeChat Pay codepay)
// signed and its answer verified, and the query that confirms a "paid" before it is
// believed signed and its answer verified. No notification ever comes, and the rest (the
// attempt's transaction, applyPaid, the walk-in sale's app payment pulled from the
// payment, which reads the database and calls no channel) signs nothing.
func PosRSAOps() (signs, verifies int) { return 2, 2 }

// PosBenchConfig is one `bench pos` run. Zero fields take the defaults.
type PosBenchConfig struct {
	Payments    int    // walk-in sales, one code each. Defaults to 200.
	Concurrency int    // tills scanning at once. Defaults to 16.
	Channel     string // the buyers' wallet: alipay or wechat. Defaults to alipay.
	DB          string // postgres:// DSN; "" is SQLite in a temp dir.
	// RSAMeasure is the least CPU time spent timing RSA. Defaults to 1 s.
	RSAMeasure time.Duration
	Binary     string // the orderpay executable. Defaults to os.Executable().
	Logger     *slog.Logger
}

// PosBenchReport is what a `bench pos` run measured.
type PosBenchReport struct {
	Store       string `json:"store"`
	Channel     string `json:"channel"`
	Payments    int    `json:"payments"`
	Concurrency int    `json:"concurrency"`
	// Warmup is the sales made before the measured phase, one per till, not counted.
	Warmup int `json:"warmup"`
	// Paid is the measured sales answered PAID; Outcomes counts every answer by status
	// (PAID, REFUSED, CANCELLED, UNKNOWN) or, for a request that got none, by error.
	Paid      int            `json:"paid"`
	Outcomes  map[string]int `json:"outcomes"`
	FirstFail string         `json:"first_failure,omitempty"`
	// Scan → PAID: from the till's POST /v1/pos/payments to its answer, under Concurrency.
	ScanToPaidP50MS float64 `json:"scan_to_paid_p50_ms"`
	ScanToPaidP99MS float64 `json:"scan_to_paid_p99_ms"`
	ScanToPaidMaxMS float64 `json:"scan_to_paid_max_ms"`
	// PaymentsPerSecond is Paid over the phase's wall time.
	PaymentsPerSecond float64 `json:"payments_per_second"`
	Seconds           float64 `json:"seconds"`
	// ServerCPUSeconds is the server process's user + system CPU over the phase
	// (/proc/<pid>/stat, in ticks of 1/ClockTicks s), as Bench measures it.
	ServerCPUSeconds          float64 `json:"server_cpu_seconds"`
	ServerCPUPerPaidPaymentMS float64 `json:"server_cpu_ms_per_paid_payment"`
	ClockTicks                int64   `json:"clock_ticks_per_second"`
	// The floor (PosRSAOps), timed as Bench times it: just before the phase and just after
	// it, in CPU time of one thread of this process; RSAPerPaidPaymentMS is their mean.
	RSAPerPaidPaymentMS float64 `json:"rsa_cpu_ms_per_paid_payment"`
	RSASigns            int     `json:"rsa_signs_per_paid_payment"`
	RSAVerifies         int     `json:"rsa_verifies_per_paid_payment"`
	RSABeforeMS         float64 `json:"rsa_cpu_ms_before"`
	RSAAfterMS          float64 `json:"rsa_cpu_ms_after"`
	RSAIterations       int     `json:"rsa_iterations"`
	ServerCPUOverRSA    float64 `json:"server_cpu_over_rsa"`
	// The server's CPU while the floor was timed, with nothing sent to it: before the
	// phase (IdleCPUMS over IdleSeconds: the warm-up's tail and idle work) and right after
	// it (TailCPUMS over TailSeconds: the phase's own tail, the outbox relay and the event
	// consumers catching up, which the CPU per paid payment does not count, as Bench's
	// does not).
	IdleCPUMS   float64 `json:"server_cpu_ms_idle_before"`
	IdleSeconds float64 `json:"idle_before_seconds"`
	TailCPUMS   float64 `json:"server_cpu_ms_tail_after"`
	TailSeconds float64 `json:"tail_after_seconds"`
	// Per paid payment of the phase: the server's write transactions, commits and rows
	// written (its /metrics), and the signed calls the channel received, by method.
	TransactionsPerPaidPayment float64            `json:"transactions_per_paid_payment"`
	CommitsPerPaidPayment      float64            `json:"commits_per_paid_payment"`
	RowsWrittenPerPaidPayment  float64            `json:"rows_written_per_paid_payment"`
	ChannelCallsPerPaidPayment float64            `json:"channel_calls_per_paid_payment"`
	ChannelCallsByMethod       map[string]float64 `json:"channel_calls_by_method_per_paid_payment"`
	// LedgerPaid is the channel's barcode trades of the run (warm-up included) paid for
	// the sale's amount and not refunded; LedgerTrades is all of them. Both must be
	// Payments + Warmup.
	LedgerPaid              int  `json:"ledger_paid"`
	LedgerTrades            int  `json:"ledger_trades"`
	BrokerAndChannelInBench bool `json:"broker_and_channel_in_bench_process"`
}

// Pass says whether every sale was answered PAID and the channel holds exactly one paid
// trade for each.
func (r *PosBenchReport) Pass() bool {
	want := r.Payments + r.Warmup
	return r.Paid == r.Payments && r.LedgerPaid == want && r.LedgerTrades == want
}

// PosBench measures barcode payments at the counter, fault-free, through a real
// `orderpay serve` child process (the broker and the channel simulator in this process, as
// Bench runs them):
//
//  1. one app of the payments API is the till (POST /admin/apps, taking cfg.Channel);
//  2. the buyers' wallets show Payments + Concurrency payment codes of cfg.Channel, each
//     of a buyer who confirms at once (POST /sim/wallet/codes, behaviour confirm);
//  3. a warm-up, not measured: each of Concurrency tills makes one sale, which opens its
//     connection and the server's first-time work;
//  4. the phase: Concurrency tills POST Payments walk-in sales (an Idempotency-Key each)
//     and each answer's time is its scan → PAID latency; the server process's CPU over the
//     phase, divided by the paid payments, is compared with the RSA floor (PosRSAOps),
//     timed just before the phase and just after it.
//
// A sale not answered PAID does not stop the run: it is counted, and Pass is false. The
// simulator keeps at most sim.DefaultMaxPayCodes codes alive (2 minutes each), which
// bounds Payments + Concurrency.
func PosBench(ctx context.Context, cfg PosBenchConfig) (*PosBenchReport, error) {
	cfg.Payments = cmp.Or(cfg.Payments, DefaultPosBenchPayments)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultPosBenchConcurrency)
	cfg.Channel = cmp.Or(cfg.Channel, DefaultPosBenchChannel)
	cfg.RSAMeasure = cmp.Or(cfg.RSAMeasure, DefaultRSAMeasure)
	switch {
	case cfg.Payments < 0 || cfg.Concurrency < 0:
		return nil, fmt.Errorf("bench pos: --payments and --concurrency must be positive")
	case cfg.Channel != orderpay.ChannelAlipay && cfg.Channel != orderpay.ChannelWechat:
		return nil, fmt.Errorf("bench pos: --channel must be alipay or wechat, not %q", cfg.Channel)
	case cfg.Payments+cfg.Concurrency > sim.DefaultMaxPayCodes:
		return nil, fmt.Errorf("bench pos: --payments + --concurrency is at most %d: the simulator keeps that many payment codes alive at once",
			sim.DefaultMaxPayCodes)
	}
	cfg.Concurrency = min(cfg.Concurrency, cfg.Payments)
	signs, verifies := PosRSAOps()
	e, err := startEnv(ctx, envConfig{Binary: cfg.Binary, DB: cfg.DB, Prefix: "orderpay-bench-pos-", TimeScale: 1,
		LogLevel: "warn", Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer e.close()
	c := e.client
	rep := &PosBenchReport{Store: e.store.Dialect(), Channel: cfg.Channel, Payments: cfg.Payments, Concurrency: cfg.Concurrency,
		Warmup: cfg.Concurrency, Outcomes: map[string]int{}, RSASigns: signs, RSAVerifies: verifies, ClockTicks: ClockTicks(),
		BrokerAndChannelInBench: true}

	till, err := c.CreateApp(ctx, "bench-till", nil, []string{cfg.Channel})
	if err != nil {
		return nil, fmt.Errorf("bench pos: the till's app: %w", err)
	}
	codes := make([]string, rep.Warmup+cfg.Payments)
	for i := range codes {
		code, err := c.IssueCode(ctx, cfg.Channel, fmt.Sprint("walk-in-", i), sim.CodeConfirm, 0)
		if err != nil {
			return nil, fmt.Errorf("bench pos: payment code %d: %w", i, err)
		}
		codes[i] = code.AuthCode
	}
	// sale is till k's sale i: its answer (or error) and how long it took.
	sale := func(k, i int) (*PosView, time.Duration, error) {
		req := PosRequest{AuthCode: codes[i], Amount: posBenchAmount, StoreID: "bench-store", TillID: fmt.Sprint("till-", k),
			Description: "Bench sale"}
		start := time.Now()
		v, err := c.PosPay(ctx, till.APIKey, fmt.Sprintf("%s-%d", e.runID, i), req)
		return v, time.Since(start), err
	}
	var wg sync.WaitGroup
	warmErrs := make(chan error, rep.Warmup)
	for k := range rep.Warmup {
		wg.Go(func() {
			if v, _, err := sale(k, k); err != nil || v.Status != string(orderpay.BarcodePaid) {
				warmErrs <- fmt.Errorf("bench pos: warm-up sale %d: %+v, %v", k, v, err)
			}
		})
	}
	wg.Wait()
	close(warmErrs)
	if err := <-warmErrs; err != nil {
		return nil, err
	}

	pid := e.server.PID()
	idleFrom := time.Now()
	idleCPU, err := ProcessCPU(pid)
	if err != nil {
		return nil, fmt.Errorf("bench pos: server CPU: %w", err)
	}
	rsaBefore, nBefore, err := MeasureRSAOps(e.keys, signs, verifies, cfg.RSAMeasure)
	if err != nil {
		return nil, err
	}
	before, err := storeCounters(ctx, e.server.MetricsURL())
	if err != nil {
		return nil, err
	}
	callsBefore := e.sim.Calls()
	cpuBefore, err := ProcessCPU(pid)
	if err != nil {
		return nil, fmt.Errorf("bench pos: server CPU: %w", err)
	}
	rep.IdleCPUMS, rep.IdleSeconds = ms(cpuBefore-idleCPU), round3(time.Since(idleFrom).Seconds())
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, cfg.Payments)
		next      atomic.Int64
	)
	start := time.Now()
	for k := range cfg.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Payments {
					return
				}
				v, took, err := sale(k, rep.Warmup+i)
				mu.Lock()
				switch {
				case err != nil:
					rep.Outcomes["error "+ErrorKey(err)]++
					if rep.FirstFail == "" {
						rep.FirstFail = fmt.Sprintf("sale %d: %v", i, err)
					}
				case v.Status == string(orderpay.BarcodePaid):
					rep.Paid++
					latencies = append(latencies, took)
					rep.Outcomes[v.Status]++
				default:
					rep.Outcomes[v.Status]++
					if rep.FirstFail == "" {
						rep.FirstFail = fmt.Sprintf("sale %d: %s %s %s", i, v.Status, v.Refusal, v.Detail)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuAfter, err := ProcessCPU(pid)
	if err != nil {
		return nil, fmt.Errorf("bench pos: server CPU: %w", err)
	}
	after, err := storeCounters(ctx, e.server.MetricsURL())
	if err != nil {
		return nil, err
	}
	tailFrom := time.Now()
	rsaAfter, nAfter, err := MeasureRSAOps(e.keys, signs, verifies, cfg.RSAMeasure)
	if err != nil {
		return nil, err
	}
	if tailCPU, err := ProcessCPU(pid); err == nil {
		rep.TailCPUMS, rep.TailSeconds = ms(tailCPU-cpuAfter), round3(time.Since(tailFrom).Seconds())
	}

	l := summarize(latencies)
	rep.ScanToPaidP50MS, rep.ScanToPaidP99MS, rep.ScanToPaidMaxMS = l.P50, l.P99, l.Max
	rep.Seconds = round3(elapsed.Seconds())
	rep.PaymentsPerSecond = round1(float64(rep.Paid) / elapsed.Seconds())
	cpu := cpuAfter - cpuBefore
	rep.ServerCPUSeconds = round3(cpu.Seconds())
	perFloor := (rsaBefore + rsaAfter) / 2
	rep.RSAIterations = nBefore + nAfter
	rep.RSAPerPaidPaymentMS = round3(float64(perFloor.Nanoseconds()) / 1e6)
	rep.RSABeforeMS, rep.RSAAfterMS = round3(float64(rsaBefore.Nanoseconds())/1e6), round3(float64(rsaAfter.Nanoseconds())/1e6)
	rep.ChannelCallsByMethod = map[string]float64{}
	if rep.Paid > 0 {
		paid := float64(rep.Paid)
		rep.ServerCPUPerPaidPaymentMS = round3(float64(cpu.Microseconds()) / 1000 / paid)
		if perFloor > 0 {
			rep.ServerCPUOverRSA = round1(float64(cpu) / paid / float64(perFloor))
		}
		rep.TransactionsPerPaidPayment = round1((after.transactions - before.transactions) / paid)
		rep.CommitsPerPaidPayment = round1((after.commits - before.commits) / paid)
		rep.RowsWrittenPerPaidPayment = round1((after.rows - before.rows) / paid)
		var calls int
		for k, n := range e.sim.Calls() {
			if d := n - callsBefore[k]; d > 0 {
				calls += d
				rep.ChannelCallsByMethod[k] = round3(float64(d) / paid)
			}
		}
		rep.ChannelCallsPerPaidPayment = round3(float64(calls) / paid)
	}
	for _, t := range e.sim.Ledger() {
		if t.Channel != cfg.Channel || t.Method != orderpay.MethodBarcode {
			continue
		}
		rep.LedgerTrades++
		if !t.PaidAt.IsZero() && t.Amount == posBenchAmount && t.Refunded == 0 {
			rep.LedgerPaid++
		}
	}
	return rep, nil
}

// PrintPosBench writes a `bench pos` report as text.
func PrintPosBench(w io.Writer, r *PosBenchReport) {
	fmt.Fprintf(w, "store %s, %s payment codes, %d walk-in sales by %d tills at once (after %d warm-up sales); "+
		"server: a child process, broker and channel in the bench process\n", r.Store, r.Channel, r.Payments, r.Concurrency, r.Warmup)
	var outcomes []string
	for k, n := range r.Outcomes {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(outcomes)
	fmt.Fprintf(w, "  answers:                     %d of %d PAID (%s); the channel: %d barcode trades, %d paid once and kept\n",
		r.Paid, r.Payments, strings.Join(outcomes, ", "), r.LedgerTrades, r.LedgerPaid)
	if r.FirstFail != "" {
		fmt.Fprintf(w, "  first failure:               %s\n", r.FirstFail)
	}
	fmt.Fprintf(w, "  scan -> PAID answer:         p50 %.1f ms   p99 %.1f ms   max %.1f ms   (%d tills at once)\n",
		r.ScanToPaidP50MS, r.ScanToPaidP99MS, r.ScanToPaidMaxMS, r.Concurrency)
	fmt.Fprintf(w, "  paid barcode payments:       %.1f/s   (%d in %.2f s)\n", r.PaymentsPerSecond, r.Paid, r.Seconds)
	fmt.Fprintf(w, "  server CPU per paid payment: %.2f ms   (%.2f CPU-s in the phase, /proc stat at %d ticks/s)\n",
		r.ServerCPUPerPaidPaymentMS, r.ServerCPUSeconds, r.ClockTicks)
	fmt.Fprintf(w, "  RSA floor per paid payment:  %.2f ms   (%d RSA-2048 signs + %d verifies: the pay call and the confirming query; "+
		"%d timed in this process: %.2f ms before the phase, %.2f after)\n",
		r.RSAPerPaidPaymentMS, r.RSASigns, r.RSAVerifies, r.RSAIterations, r.RSABeforeMS, r.RSAAfterMS)
	fmt.Fprintf(w, "  server CPU / RSA floor:      %.1f×\n", r.ServerCPUOverRSA)
	fmt.Fprintf(w, "  server CPU with no requests: %.0f ms in the %.1f s before the phase, %.0f ms in the %.1f s after it (not counted above)\n",
		r.IdleCPUMS, r.IdleSeconds, r.TailCPUMS, r.TailSeconds)
	fmt.Fprintf(w, "  per paid payment:            %.1f transactions in %.1f commits, %.1f rows written, %.2f channel calls (%s)\n",
		r.TransactionsPerPaidPayment, r.CommitsPerPaidPayment, r.RowsWrittenPerPaidPayment, r.ChannelCallsPerPaidPayment,
		callsByMethod(r.ChannelCallsByMethod))
}

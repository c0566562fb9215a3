package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos/audit"
	"orderpay/natsbus"
)

// Run plays one scenario and returns its report. Invariants that fail are in the report
// (Report.Passed, Report.Failing), not an error: an error means the run itself could not be
// done (the server would not start, the audit could not read the database).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, stats: newLoadStats(), start: time.Now(), posInFlight: map[int]time.Time{}, killedMidLoop: map[int]bool{}}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// Compare runs the same plan (seed, faults, crashes, buyers) under every compensation
// strategy, one after the other, and returns their reports in Strategies order.
func Compare(ctx context.Context, cfg Config) ([]*Report, error) {
	var reports []*Report
	for _, s := range Strategies {
		c := cfg
		c.Compensation = s
		if cfg.DataDir != "" {
			c.DataDir = filepath.Join(cfg.DataDir, s)
		}
		if c.Progress != nil {
			c.Progress = &labelled{label: s, w: c.Progress}
		}
		rep, err := Run(ctx, c)
		if err != nil {
			return reports, fmt.Errorf("%s: %w", s, err)
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// labelled marks Compare's progress lines with the strategy.
type labelled struct {
	label string
	w     io.Writer
}

func (l *labelled) Write(b []byte) (int, error) { return l.w.Write(b) }

// runner is one run: the parts the harness hosts, the server it drives, and what it saw.
type runner struct {
	cfg        Config
	classes    []string
	feeClasses []string           // the fee and settlement fault classes in force (--fee-faults)
	feeProbs   map[string]float64 // those given their own probability
	probs      map[string]float64
	plan       sim.FaultPlan
	population Population
	settings   Settings // the server's settings in this run (settings.go)
	start      time.Time
	*env
	skus    []string // catalogue index → SKU code
	appKey  string   // the run's business app's API key (apps.go)
	tillKey string   // the run's till's API key (barcode.go)

	// posInFlight are the tills' requests in flight, by buyer, since when; killedMidLoop
	// the buyers whose request a kill met (barcode.go).
	posMu         sync.Mutex
	posInFlight   map[int]time.Time
	killedMidLoop map[int]bool
	// barcodes are what the barcode buyers' tills saw.
	barcodeMu sync.Mutex
	barcodes  []barcodeRecord

	slots chan struct{}
	stats *loadStats
	phase atomic.Value // string
	paid  atomic.Int64 // orders PAID in the database, for the progress line
	// loadStart is when the load began (a time.Time): WAP buyers pace themselves by it.
	loadStart atomic.Value

	serverMu        sync.Mutex // one of crash, restart-after-exit and stop at a time
	crashes         []CrashRecord
	crashWindows    []crashWindow
	unexpectedExits []string

	notesMu sync.Mutex
	notes   []string

	// queue is the run's queued SKU and its rushers (queue.go), nil without one;
	// natsRestarts the broker's restarts so far, under queueMu.
	queue        *queue
	queueMu      sync.Mutex
	natsRestarts []NATSRestart
}

// note adds a line to the report's notes, once per kind: notes that agree up to the first
// " (" (where the details of one instance begin) are the same note.
func (r *runner) note(format string, a ...any) {
	text := fmt.Sprintf(format, a...)
	kind, _, _ := strings.Cut(text, " (")
	r.notesMu.Lock()
	defer r.notesMu.Unlock()
	for _, n := range r.notes {
		if strings.HasPrefix(n, kind) {
			return
		}
	}
	r.notes = append(r.notes, text)
}

// setUp starts the run's environment and lists the catalogue.
func (r *runner) setUp(ctx context.Context) error {
	cfg := r.cfg
	r.phase.Store("setup")
	r.classes, r.probs, _ = ParseFaultSpec(cfg.Faults)
	r.feeClasses, r.feeProbs, _ = ParseFeeFaults(cfg.FeeFaults)
	billFaults, rateChange := billFaults(r.feeClasses, r.feeProbs, time.Now())
	r.population, _ = ParsePopulation(cfg.Buyers, cfg.Watch)
	r.population.App, _ = ParseAppShare(cfg.AppShare)
	r.population.Barcode, _ = ParseBarcodeShare(cfg.BarcodeShare)
	r.population.Ways, _ = ParseWays(cfg.Methods)
	r.plan = FaultPlanAt(r.classes, r.probs, cfg.Seed, cfg.TimeScale)
	r.settings = SettingsFor(cfg)
	var err error
	r.env, err = startEnv(ctx, envConfig{Binary: cfg.Binary, DataDir: cfg.DataDir, KeepData: cfg.KeepData, DB: cfg.DB,
		AlipayMode: cfg.AlipayMode, WechatMode: cfg.WechatMode,
		Prefix: "orderpay-chaos-", TimeScale: cfg.TimeScale, Faults: r.plan, Logger: cfg.Logger, LogLevel: "info",
		BillFaults: billFaults, BillFaultSeed: cfg.Seed, RateChange: rateChange, RateChangeTo: feeFaultChangedRate,
		OpeningBalance: openingBalance,
		// A walked-away WeChat buyer's barcode order ends PAYERROR just past the till's
		// wait, not a minute later (barcode.go).
		WechatUserPayingFor: r.wechatUserPayingFor(),
		// Refunds of a unit of the cheaper goods are approved by the rule, of the dearer ones
		// reviewed, so that the after-sales phase meets both.
		// The settings (pay windows, close grace, a refund retry plan short enough that a
		// refund refused until its retries run out reaches the operators' queue within the
		// run, retention at its floors) follow.
		ServerArgs: append([]string{"--auto-approve-refund-max", strconv.Itoa(autoApproveRefundMax),
			"--compensation", cfg.Compensation}, r.settings.ServerArgs()...)})
	if err != nil {
		return err
	}
	// A buyer whose request meets a restarting server tries again for this long.
	r.client.RetryFor = 15 * time.Second
	for _, item := range r.settings.SKUs {
		sku := r.runID + "-" + item.Name
		if err := r.client.AddSKU(ctx, SKUSpec{SKU: sku, Price: item.Price, Stock: int64(6*cfg.Orders + 10), ProductType: item.ProductType,
			StockPolicy: item.StockPolicy, ReserveMinutes: item.ReserveMinutes}, nil); err != nil {
			return fmt.Errorf("chaos: create SKU %s: %w", sku, err)
		}
		r.skus = append(r.skus, sku)
	}
	if err := r.setUpQueue(ctx); err != nil {
		return err
	}
	if err := r.client.CreateCouponTemplate(ctx, r.couponCode(), couponFen, 0); err != nil {
		return fmt.Errorf("chaos: create coupon template: %w", err)
	}
	if err := r.setUpApp(ctx); err != nil {
		return err
	}
	return r.setUpTill(ctx)
}

// autoApproveRefundMax is the server's after-sales rule in a run: a unit of lychees (39.90)
// or milk (12.50) is refunded at once, of tea (258.00) or mooncakes (88.00) reviewed.
const autoApproveRefundMax = 5000

// couponFen is what the buyers' coupons take off an order: a few fen, which the lines
// share by the largest remainder, so that a line's payable seldom divides by its units.
const couponFen = 7

// couponCode is the run's coupon template.
func (r *runner) couponCode() string { return r.runID + "-fen" }

// close stops the environment, also after a failure half-way.
func (r *runner) close() {
	if r.env != nil {
		r.env.close()
	}
}

func (r *runner) acquire() { r.slots <- struct{}{} }
func (r *runner) release() { <-r.slots }

// windowEnd is the order's deadline as the buyers plan with it: the server's, unless the
// server did not compress it (it ignores --time-scale), in which case the compressed
// window, so that the run still ends in minutes (and a note says so).
func (r *runner) windowEnd(o *OrderView, created time.Time) time.Time {
	w := r.settings.window(o.ProductType)
	expected := created.Add(r.cfg.scaled(w))
	if o.PayDeadline.IsZero() {
		return expected
	}
	if o.PayDeadline.After(expected.Add(2 * time.Second)) {
		r.note("the server's pay deadlines are not compressed (order %s: %s left, expected %s): "+
			"buyers and the settle phase use the compressed windows; late payments are then not late",
			o.OrderNo, time.Until(o.PayDeadline).Round(time.Second), r.cfg.scaled(w))
		return expected
	}
	return o.PayDeadline
}

// CrashMoments are when, counted from the start of the load, the server is killed: n
// seeded moments spread over the middle 90% of span. The harness uses the longest pay
// window of the load (the run's settings') for span, so that crashes land among creates
// and payments, delayed and late payments, deadlines, timeout closes and refunds alike.
func CrashMoments(seed uint64, n int, span time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, math.MaxUint64))
	moments := make([]time.Duration, n)
	for i := range moments {
		moments[i] = time.Duration((0.05 + 0.9*rng.Float64()) * float64(span))
	}
	slices.Sort(moments)
	return moments
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	rep := &Report{Compensation: cfg.Compensation, Store: r.store.Dialect(), Seed: cfg.Seed, Methods: waysLabel(r.population.ways()), Faults: r.classes, FaultProbabilities: r.probs, FeeFaults: r.feeClasses, FeeFaultProbabilities: r.feeProbs,
		FaultPlan: r.plan, Settings: r.settings.View(), OrdersRequested: cfg.Orders, Buyers: map[string]int{}}
	rep.BuyersByMethod = map[string]int{}
	for i := range cfg.Orders {
		plan := r.population.Plan(cfg.Seed, i)
		if plan.Barcode != nil {
			rep.Buyers["barcode"]++
			rep.BuyersByMethod[PayWay{plan.Barcode.Channel, orderpay.MethodBarcode}.String()]++
			continue
		}
		rep.Buyers[string(plan.Behaviour)]++
		rep.BuyersByMethod[plan.Way().String()]++
		if plan.App {
			rep.AppBuyers++
		}
	}
	setupDone := time.Now()
	rep.Phases.SetupMS = setupDone.Sub(r.start).Milliseconds()

	prog := startProgress(cfg.Progress, func() progressState {
		label := ""
		if l, ok := cfg.Progress.(*labelled); ok {
			label = l.label
		}
		r.serverMu.Lock()
		crashes := len(r.crashes)
		r.serverMu.Unlock()
		return progressState{Label: label, Phase: r.phase.Load().(string), Done: r.stats.done.Load(), Total: cfg.Orders,
			Paid: r.paid.Load(), Errors: r.stats.errors.Load(), Crashes: crashes, CrashesOf: cfg.Crashes, Elapsed: time.Since(r.start)}
	})
	defer prog.Stop()
	stopCounting := r.countPaid(ctx)
	defer stopCounting()

	// The monitor restarts a server that died by itself, and says so in the report.
	monitorCtx, stopMonitor := context.WithCancel(ctx)
	monitorDone := make(chan error, 1)
	go func() { monitorDone <- r.monitor(monitorCtx) }()

	// The operator on duty deals with the refund queue until the last settle is over.
	stopOperator := r.startOperator(ctx)
	operatorStopped := false
	defer func() {
		if !operatorStopped {
			stopOperator()
		}
	}()

	// Retention passes run until the last settle is over too.
	stopRetention := r.startRetention(ctx)
	retentionStopped := false
	defer func() {
		if !retentionStopped {
			stopRetention()
		}
	}()

	// Watching buyers poll until the settle phase is over.
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	var watchers sync.WaitGroup
	loadErr := r.load(ctx, watchCtx, &watchers)
	loadDone := time.Now()
	rep.Phases.LoadMS = loadDone.Sub(setupDone).Milliseconds()
	if loadErr != nil {
		stopMonitor()
		return nil, loadErr
	}

	r.phase.Store("settle")
	settled, unsettled, auditGrace, err := r.settle(ctx)
	stopWatching()
	watchers.Wait()
	stopMonitor()
	if merr := <-monitorDone; err == nil {
		err = merr
	}
	if err != nil {
		return nil, err
	}
	// After-sales on the paid orders, under the same channel faults, then settle again: the
	// refunds they send must reach a final state before the audit.
	if settled && !cfg.NoAfterSales {
		r.phase.Store("after-sales")
		began := time.Now()
		if rep.AfterSales, err = r.afterSales(ctx); err != nil {
			return nil, err
		}
		rep.Phases.AfterSalesMS = time.Since(began).Milliseconds()
		r.phase.Store("settle")
		if settled, unsettled, err = r.settleOpen(ctx); err != nil {
			return nil, err
		}
	}
	settleDone := time.Now()
	rep.Phases.SettleMS = settleDone.Sub(loadDone).Milliseconds() - rep.Phases.AfterSalesMS
	rep.Settled, rep.Unsettled = settled, unsettled
	ops := stopOperator()
	operatorStopped = true
	rep.Operator = &ops
	retained := stopRetention()
	retentionStopped = true

	// Freeze the system: stop the server cleanly, then read the three sources of truth.
	r.phase.Store("audit")
	r.serverMu.Lock()
	r.server.Stop()
	r.serverMu.Unlock()
	// Every pass the server logged until now, its own and the harness's.
	var lerr error
	if retained.LoggedPasses, retained.LoggedRemoved, lerr = loggedRetention(r.server.Log); lerr != nil {
		r.note("the server's log could not be read for its retention passes (%v)", lerr)
	}
	rep.Retention = &retained
	ledger := r.sim.Ledger()
	notifications := r.sim.NotifyStats()
	faultLog := r.sim.FaultLog()
	events, err := readEvents(ctx, r.natsURL(), natsbus.DefaultStream)
	if err != nil {
		return nil, err
	}
	res, err := audit.Audit(ctx, audit.Inputs{Store: r.store, Ledger: ledger, Notifications: notifications, Events: events,
		Now: settleDone, Grace: auditGrace, Tickets: r.givenTickets()})
	if err != nil {
		return nil, fmt.Errorf("chaos: audit: %w", err)
	}
	trades, err := r.tradeRows(ctx)
	if err != nil {
		return nil, err
	}
	r.stats.mu.Lock()
	walletPaidAt := maps.Clone(r.stats.walletPaidAt)
	r.stats.mu.Unlock()
	rep.ConvergenceMS, rep.MethodConvergenceMS = convergence(trades, ledger, walletPaidAt, faultLog, notifications, r.crashWindows)
	statuses, err := r.orderStatuses(ctx)
	if err != nil {
		return nil, err
	}
	r.stats.mu.Lock()
	unpaid := maps.Clone(r.stats.unpaid)
	r.stats.mu.Unlock()
	rep.Unpaid = unpaidCheck(unpaid, trades, ledger, statuses)
	if rep.Barcode, err = r.barcodeReport(ctx, res.TillAnswers); err != nil {
		return nil, err
	}
	auditDone := time.Now()
	rep.Phases.AuditMS = auditDone.Sub(settleDone).Milliseconds()
	rep.Phases.TotalMS = auditDone.Sub(r.start).Milliseconds()

	rep.Audit = res
	rep.Refunds = refundOutcomesView(res.Refunds)
	rep.OrdersTotal = res.Orders + res.AppPayments
	rep.AppStates = maps.Clone(res.AppStates)
	rep.FinalStates = maps.Clone(res.FinalStates)
	if rep.FinalStates == nil {
		rep.FinalStates = map[string]int{}
	}
	rep.Violations = map[string]int{}
	for _, inv := range Invariants {
		rep.Violations[inv.ID] = res.Counts[inv.ID]
	}
	rep.Failing = res.Failing()
	if rep.Failing == nil {
		rep.Failing = []string{}
	}
	// Beyond the invariants: every order nobody paid ended CANCELLED with nothing paid,
	// and the server never said a forged return verified.
	for _, b := range unpaidBehaviours {
		if u, ok := rep.Unpaid[string(b)]; ok && !u.OK() {
			rep.Failing = append(rep.Failing, string(b)+" not cancelled or paid")
		}
	}
	rep.ForgedReturnsVerified = int(r.stats.forgedVerified.Load())
	if rep.ForgedReturnsVerified > 0 {
		rep.Failing = append(rep.Failing, "forged return verified")
	}
	rep.Passed = res.Passed() && len(rep.Failing) == len(res.Failing())
	rep.ViolationList = violationViews(res.Violations)
	rep.FaultsFired = map[string]int{}
	for _, ev := range faultLog {
		rep.FaultsFired[faultClassOf(ev)]++
	}
	rep.Queue = r.queueReport(ctx, res.Tickets)
	r.queueMu.Lock()
	rep.NATSRestarts = slices.Clone(r.natsRestarts)
	r.queueMu.Unlock()
	if rep.NATSRestarts == nil {
		rep.NATSRestarts = []NATSRestart{}
	}
	rep.Crashes = len(r.crashes)
	rep.CrashLog = slices.Clone(r.crashes)
	if rep.CrashLog == nil {
		rep.CrashLog = []CrashRecord{}
	}
	rep.UnexpectedExits = r.unexpectedExits

	s := r.stats
	s.mu.Lock()
	rep.APIErrors = maps.Clone(s.apiErrors)
	rep.Outcomes = maps.Clone(s.outcomes)
	rep.SeenPaidMS = summarize(slices.Clone(s.seenPaidLat))
	if span := s.lastCreate.Sub(setupDone); span > 0 {
		rep.OrdersPerSecond = math.Round(float64(s.orders.Load())/span.Seconds()*10) / 10
	}
	s.mu.Unlock()

	windows := map[string]string{}
	for _, t := range []string{"fast", "special"} {
		w := r.settings.window(t)
		windows[t] = fmt.Sprintf("%s→%s", w, cfg.scaled(w))
	}
	rep.Compression = Compression{TimeScale: cfg.TimeScale, PayWindows: windows,
		CloseGrace:    fmt.Sprintf("%s→%s", r.settings.CloseGrace, cfg.scaled(r.settings.CloseGrace)),
		AuditGrace:    auditGrace.String(),
		SettleTimeout: fmt.Sprintf("%s→%s", cfg.SettleTimeout, cfg.scaled(cfg.SettleTimeout))}
	r.notesMu.Lock()
	rep.Notes = slices.Clone(r.notes)
	r.notesMu.Unlock()
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	if cfg.DataDir != "" || cfg.KeepData {
		rep.DataDir = r.dir
	}
	r.phase.Store("reconcile")
	rep.Reconciliation = r.reconcile(ctx)
	return rep, nil
}

// load runs every buyer, at most Concurrency acting at once, and kills the server at the
// crash moments. It returns when every buyer's script is over; watching buyers go on
// polling (watchers) until watchCtx ends.
func (r *runner) load(ctx, watchCtx context.Context, watchers *sync.WaitGroup) error {
	cfg := r.cfg
	r.phase.Store("load")
	r.slots = make(chan struct{}, cfg.Concurrency)
	loadCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)

	// The crasher kills the server at its moments, whatever the buyers are doing; the load
	// is over when both are done.
	loadStart := time.Now()
	r.loadStart.Store(loadStart)
	moments := CrashMoments(cfg.Seed, cfg.Crashes, cfg.scaled(r.settings.loadWindow()))
	// With barcode buyers, the middle kill waits for a till's request to be well into the
	// payment center's loop, so that at least one kill lands there (barcode.go); the others
	// meet the tills' requests as they come.
	aimed := -1
	if r.population.Barcode > 0 && len(moments) > 0 {
		aimed = len(moments) / 2
	}
	// With a queued SKU, the first kill comes once a quarter of its units are ORDERED while
	// tickets still wait (queue.go), whatever its moment; with a single kill, that one.
	queueAimed := -1
	if r.queue != nil && len(moments) > 0 {
		queueAimed = 0
		if aimed == 0 {
			aimed = -1
		}
	}
	crasherDone := make(chan struct{})
	go func() {
		defer close(crasherDone)
		for k, at := range moments {
			if k == queueAimed {
				m := r.awaitDrain(loadCtx, 0.25)
				if !m.MidDrain && loadCtx.Err() == nil {
					r.note("the kill aimed at the queue's drain found none (%d ORDERED, %d WAITING after %s): it killed the server all the same", m.Ordered, m.Waiting, drainAimWait)
				}
				r.queue.mu.Lock()
				r.queue.killMoment = &m
				r.queue.mu.Unlock()
			} else if !sleepCtx(loadCtx, time.Until(loadStart.Add(at))) {
				return
			}
			if loadCtx.Err() != nil {
				return
			}
			if k == aimed && !r.awaitPosInFlight(loadCtx) && loadCtx.Err() == nil {
				r.note("the kill aimed at the barcode loop found no till's request in flight for %s (waited %s): it killed the server all the same", aimedCrashAge, aimedCrashWait)
			}
			r.serverMu.Lock()
			from := time.Now()
			inFlight := r.markKilled()
			down, err := r.server.Crash(loadCtx)
			r.crashes = append(r.crashes, CrashRecord{AtMS: from.Sub(r.start).Milliseconds(),
				AfterBuyer: int(r.stats.launched.Load()), DowntimeMS: down.Milliseconds(), BarcodeInFlight: inFlight})
			r.crashWindows = append(r.crashWindows, crashWindow{From: from, To: from.Add(down)})
			r.serverMu.Unlock()
			if err != nil {
				abort(fmt.Errorf("chaos: restart after crash %d: %w", len(r.crashes), err))
				return
			}
		}
	}()

	// The broker's restarts, meanwhile.
	restarterDone := make(chan struct{})
	go func() {
		defer close(restarterDone)
		if err := r.restartNATSDuringLoad(loadCtx, loadStart); err != nil {
			abort(err)
		}
	}()

	var scripts sync.WaitGroup
	// The rush for the queued SKU, all at once at the start, beside the buyers' scripts.
	if r.queue != nil {
		scripts.Go(func() { r.rush(loadCtx) })
	}
	for i := 0; i < cfg.Orders && loadCtx.Err() == nil; i++ {
		r.acquire()
		r.stats.launched.Add(1)
		scripts.Add(1)
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			b := &buyer{r: r, plan: r.population.Plan(cfg.Seed, i)}
			b.client = r.client.As(b.id())
			watch := b.script(loadCtx)
			r.stats.done.Add(1)
			scripts.Done()
			if watch {
				b.watch(watchCtx)
			}
			r.release()
		}()
	}
	scripts.Wait()
	<-crasherDone
	<-restarterDone
	return context.Cause(loadCtx)
}

// monitor restarts the server if it exits without being asked to, until ctx ends.
func (r *runner) monitor(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r.serverMu.Lock()
		exited, unexpected := r.server.Exited()
		r.unexpectedExits = append(r.unexpectedExits, unexpected...)
		var err error
		if exited && ctx.Err() == nil {
			err = r.server.Start(ctx)
		}
		r.serverMu.Unlock()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("chaos: restart after the server exited by itself: %w", err)
		}
	}
}

// countPaid keeps the progress line's paid count fresh from the database.
func (r *runner) countPaid(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(ctx, 500*time.Millisecond) {
			var n int64
			if err := r.store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM orders WHERE status = 'PAID'`).Scan(&n); err == nil {
				r.paid.Store(n)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// settle waits until every order's deadline plus the close grace has passed, then until
// nothing is open any more (no PENDING_PAYMENT order, no UNPAID or PAYING payment, no
// CREATED or PAYING channel order, no refund in flight or in the operators' queue, no
// unpublished outbox message), or the settle time runs out (later, by refundAllowance, if
// only refunds are open under refund faults). It returns whether everything settled, what
// was still open if not, and the grace the auditor should allow past a deadline.
func (r *runner) settle(ctx context.Context) (bool, map[string]int, time.Duration, error) {
	cfg := r.cfg
	grace := cfg.scaled(r.settings.CloseGrace)
	slack := cfg.scaled(cfg.SettleTimeout)
	// A timeout close may meet channel faults: a query, a close and a query again, each
	// held up to TimeoutHang. Half the settle time covers that; the audit allows it.
	auditGrace := grace + slack/2

	// The last deadline of an order, or of a payment (an app payment's is its payment's).
	var maxDeadline, maxPayment int64
	if err := r.store.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(pay_deadline), 0) FROM orders`).Scan(&maxDeadline); err != nil {
		return false, nil, 0, fmt.Errorf("chaos: settle: %w", err)
	}
	if err := r.store.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(pay_deadline), 0) FROM payments`).Scan(&maxPayment); err != nil {
		return false, nil, 0, fmt.Errorf("chaos: settle: %w", err)
	}
	maxDeadline = max(maxDeadline, maxPayment)
	// A ticket still waiting ends by its expiry at the latest.
	if r.queue != nil {
		var maxExpiry int64
		if err := r.store.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(expires_at), 0) FROM tickets WHERE state = 'WAITING'`).Scan(&maxExpiry); err != nil {
			return false, nil, 0, fmt.Errorf("chaos: settle: %w", err)
		}
		maxDeadline = max(maxDeadline, maxExpiry)
	}
	last := orderpay.FromMillis(maxDeadline)
	// If the server did not compress deadlines, do not wait for them (windowEnd noted it).
	r.stats.mu.Lock()
	capAt := r.stats.lastCreate.Add(cfg.scaled(r.settings.loadWindow()))
	r.stats.mu.Unlock()
	if last.After(capAt.Add(2 * time.Second)) {
		last = capAt
	}
	// Everything is checked from now on: once nothing is open, nothing can change any more
	// (the buyers are done), whether or not the last deadlines have passed.
	until := last.Add(grace).Add(slack)
	// A till's sale that nobody asked about again is ended by the safety net, on wall time:
	// after the till's wait, a walked-away WeChat buyer's order once WeChat ends it, then a
	// query or reverse every 5 s.
	r.stats.mu.Lock()
	lastPos := r.stats.lastPosScan
	r.stats.mu.Unlock()
	if !lastPos.IsZero() {
		until = later(until, lastPos.Add(r.wechatUserPayingFor()+4*orderpay.BarcodeQueryEvery+slack))
	}
	for {
		open, err := r.openWork(ctx)
		if err != nil {
			return false, nil, 0, err
		}
		if len(open) == 0 {
			return true, nil, auditGrace, nil
		}
		if time.Now().After(until) && !(onlyRefunds(open) && time.Now().Before(until.Add(r.refundAllowance()))) {
			return false, open, auditGrace, nil
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false, nil, 0, ctx.Err()
		}
	}
}

// settleOpen waits until nothing is open, up to three settle times: a refund whose calls
// meet a streak of faults waits up to the refund worker's longest backoff (5 minutes,
// compressed) between tries, and a few such tries must fit. Under refund faults it waits
// longer still (refundAllowance): a refund the channel keeps refusing runs through the retry
// plan to the operators' queue, and a slow one takes its time to settle.
func (r *runner) settleOpen(ctx context.Context) (bool, map[string]int, error) {
	until := time.Now().Add(3*r.cfg.scaled(r.cfg.SettleTimeout) + r.refundAllowance())
	for {
		open, err := r.openWork(ctx)
		if err != nil || len(open) == 0 {
			return err == nil, nil, err
		}
		if time.Now().After(until) {
			return false, open, nil
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false, nil, ctx.Err()
		}
	}
}

// refundAllowance is how much longer the settle phases wait for refunds under refund
// faults: a refund refused until its retry plan runs out (the run's plan's window and its
// longest wait), the operator's next look and retry, and a slow refund's settling, all
// compressed. Zero without refund faults.
func (r *runner) refundAllowance() time.Duration {
	if !r.refundFaults() {
		return 0
	}
	return r.cfg.scaled(r.settings.RefundRetry.For+r.settings.longestRetryWait()+refundSlowDelay) + 3*operatorEvery
}

// refundFaults reports whether a refund fault class is in force.
func (r *runner) refundFaults() bool {
	for _, c := range r.classes {
		if slices.Contains(refundClasses, c) {
			return true
		}
	}
	return false
}

// refundWork are the kinds of open work (openWork's keys) that refunds alone explain.
var refundWork = []string{"refunds in flight", "refunds needing action", "after-sales not final", "outbox unpublished"}

// onlyRefunds reports whether everything still open is refunds' work.
func onlyRefunds(open map[string]int) bool {
	for k := range open {
		if !slices.Contains(refundWork, k) {
			return false
		}
	}
	return true
}

// openWork counts what is not final yet. Tables a server version does not have yet are
// skipped. A walk-in sale left OPEN with its trade ended unpaid (walkInsWaitingQuery) is
// not open work: the server should have closed it with its trade, and nothing but its
// deadline, minutes of wall time away, will now; the report counts those sales.
func (r *runner) openWork(ctx context.Context) (map[string]int, error) {
	open := map[string]int{}
	var waiting int
	if r.population.Barcode > 0 {
		if err := r.store.DB().QueryRowContext(ctx, walkInsWaitingQuery).Scan(&waiting); err != nil {
			return nil, fmt.Errorf("chaos: settle: walk-in sales: %w", err)
		}
	}
	// The outbox last: work that ends writes its message in the transaction that ends it,
	// so a count of the work that finds it ended is followed by a count of the outbox that
	// finds its message (unless published). In another order (a map's, as before), a
	// refund that succeeded between the two counts left neither counted, and the audit
	// found its message unpublished.
	for _, c := range []struct{ name, q string }{
		{"orders PENDING_PAYMENT", `SELECT COUNT(*) FROM orders WHERE status = 'PENDING_PAYMENT'`},
		{"payments UNPAID or PAYING", `SELECT COUNT(*) FROM payments WHERE status IN ('UNPAID', 'PAYING')`},
		{"channel orders CREATED or PAYING", `SELECT COUNT(*) FROM channel_orders WHERE status IN ('CREATED', 'PAYING')`},
		{"refunds in flight", `SELECT COUNT(*) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')`},
		{"refunds needing action", `SELECT COUNT(*) FROM refunds WHERE status = 'NEEDS_ACTION'`},
		{"after-sales not final", `SELECT COUNT(*) FROM after_sales WHERE status NOT IN ('SUCCESS', 'REJECTED')`},
		{"app payments OPEN", `SELECT COUNT(*) FROM app_payments WHERE status = 'OPEN'`},
		{"tickets WAITING", `SELECT COUNT(*) FROM tickets WHERE state = 'WAITING'`},
		{"outbox unpublished", `SELECT COUNT(*) FROM outbox WHERE published_at = 0`},
	} {
		name, q := c.name, c.q
		var n int
		err := r.store.DB().QueryRowContext(ctx, q).Scan(&n)
		switch {
		case err != nil && (strings.Contains(err.Error(), "refunds") || strings.Contains(err.Error(), "after_sales") || strings.Contains(err.Error(), "app_payments") ||
			strings.Contains(err.Error(), "tickets")):
			continue // a server version without the table
		case err != nil:
			return nil, fmt.Errorf("chaos: settle: %s: %w", name, err)
		}
		if name == "payments UNPAID or PAYING" || name == "app payments OPEN" {
			n -= waiting
		}
		if n > 0 {
			open[name] = n
		}
	}
	return open, nil
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tradeRows are every channel order with its order and when that order was paid.
func (r *runner) tradeRows(ctx context.Context) ([]tradeRow, error) {
	rows, err := r.store.DB().QueryContext(ctx, `SELECT co.out_trade_no, p.order_no, o.paid_at, co.channel, co.method
		FROM channel_orders co JOIN payments p ON p.payment_no = co.payment_no JOIN orders o ON o.order_no = p.order_no`)
	if err != nil {
		return nil, fmt.Errorf("chaos: read trades: %w", err)
	}
	defer rows.Close()
	var out []tradeRow
	for rows.Next() {
		var t tradeRow
		var paidAt sql.NullInt64
		var method string
		if err := rows.Scan(&t.OutTradeNo, &t.OrderNo, &paidAt, &t.Way.Channel, &method); err != nil {
			return nil, err
		}
		t.PaidAt = orderpay.FromMillis(paidAt.Int64)
		t.Way.Method = orderpay.PayMethod(method)
		out = append(out, t)
	}
	return out, rows.Err()
}

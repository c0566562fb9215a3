package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/sqlstore/storetest"
)

// The scenarios drive a real `orderpay serve`, so they need the binary. It is built once
// per test binary, with the same go that runs the tests (go test puts its GOROOT/bin
// first on PATH), and only by the tests that need it.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orderpay-chaos-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// The harness makes the servers' keys (the servers, built apart, load them).
	simtest.UseKeyPool()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func serverBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "orderpay")
		out, err := exec.Command("go", "build", "-o", binPath, "orderpay/cmd/orderpay").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build orderpay: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// scenario runs cfg against a freshly built server and logs the report's table.
func scenario(t *testing.T, cfg Config) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a chaos scenario takes most of a minute")
	}
	cfg.Binary = serverBinary(t)
	cfg.DataDir = t.TempDir()
	// WAP buyers wait for their minute only as long as the load lasts anyway, so that the
	// CI's runs take no longer than they did (checkMethods asks nothing of WAP's orders).
	if cfg.WAPWait == 0 {
		cfg.WAPWait = -1
	}
	// A test fails on the report after this returns: the cleanup, which runs before the
	// directory is removed, quotes the server's errors and keeps the directory (serve.log,
	// the database, the broker's files) for a look.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("the server's errors (serve.log):\n%s", serverErrors(filepath.Join(cfg.DataDir, "serve.log")))
		kept, err := os.MkdirTemp("", "chaos-failed-")
		if err == nil {
			err = os.CopyFS(kept, os.DirFS(cfg.DataDir))
		}
		t.Logf("the run's data kept in %s (copy: %v)", kept, err)
	})
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	var table strings.Builder
	rep.PrintTable(&table)
	t.Logf("report:\n%s", table.String())
	// Every field the JSON report promises is there, whatever the outcome.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	json.Unmarshal(b, &obj)
	for _, k := range []string{"orders_total", "final_states", "violations", "crashes", "convergence_ms", "orders_per_second", "refunds", "operator",
		"settings", "retention"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON report has no %q", k)
		}
	}
	if v, _ := obj["violations"].(map[string]any); len(v) != len(Invariants) {
		t.Errorf("JSON violations %v: want a count for each of I1…I10", v)
	}
	// The run's settings are what the seed draws, every one of them passed to the server, and
	// the harness's retention passes answered.
	if want := DrawSettings(rep.Seed).View(); cfg.Settings == "" && !slices.Equal(rep.Settings.ServerArgs, want.ServerArgs) {
		t.Errorf("the run's settings %v, the seed draws %v", rep.Settings.ServerArgs, want.ServerArgs)
	}
	if rt := rep.Retention; rt == nil || rt.Passes == 0 {
		t.Errorf("retention passes: %+v", rt)
	}
	if rep.Crashes != cfg.Crashes {
		t.Errorf("%d crashes, want %d", rep.Crashes, cfg.Crashes)
	}
	if len(rep.UnexpectedExits) > 0 {
		t.Errorf("the server exited by itself: %v", rep.UnexpectedExits)
	}
	// Reconciliation against the bills of every day of the run explains every difference.
	if rc := rep.Reconciliation; rc == nil || rc.Error != "" || rc.Unexplained != 0 || len(rc.Reports) == 0 {
		t.Errorf("reconciliation after the run: %+v", rc)
	} else if paid := rep.FinalStates["PAID"]; rc.Counts["MATCHED"] < paid {
		t.Errorf("reconciliation matched %d items, fewer than the %d paid orders", rc.Counts["MATCHED"], paid)
	}
	if rep.OrdersTotal < cfg.Orders {
		var failed []string
		for k, n := range rep.APIErrors {
			if strings.HasPrefix(k, "create ") {
				failed = append(failed, fmt.Sprintf("%s ×%d", k, n))
			}
		}
		slices.Sort(failed)
		t.Errorf("%d orders in the database, want at least %d: buyers could not create theirs (%s); see the server's errors below",
			rep.OrdersTotal, cfg.Orders, strings.Join(failed, ", "))
	}
	return rep
}

// checkMethods checks what every run must show of the ways to pay: buyers of every way, an
// order paid by each of them but Alipay WAP (whose minute-long time_expire a compressed
// window can miss), the orders nobody paid CANCELLED with nothing paid at the channel, and
// the new behaviours' buyers.
func checkMethods(t *testing.T, rep *Report) {
	t.Helper()
	for _, w := range AllPayWays() {
		if rep.BuyersByMethod[w.String()] == 0 {
			t.Errorf("no buyer paid by %s: %v", w, rep.BuyersByMethod)
		}
		if cv := rep.MethodConvergenceMS[w.String()]; w != wapWay && cv.Count == 0 {
			t.Errorf("no order paid by %s became PAID: %+v", w, cv)
		}
	}
	for _, b := range unpaidBehaviours {
		if u := rep.Unpaid[string(b)]; !u.OK() {
			t.Errorf("%s: %+v, want every order CANCELLED and nothing paid at the channel", b, u)
		}
	}
	for _, b := range []Behaviour{ReturnEarly, ReturnUnpaid, PayExpired, FalseOK} {
		if rep.Buyers[string(b)] == 0 {
			t.Errorf("no %s buyer: %v", b, rep.Buyers)
		}
	}
	// The barcode buyers: every behaviour of both wallets came to the till (I9, among the
	// invariants, holds their trades against the tills' answers and the channel).
	if b := rep.Barcode; b == nil || b.Buyers == 0 {
		t.Errorf("no barcode buyer: %+v", b)
	} else {
		for _, row := range barcodeRows() {
			if b.Rows[row].Buyers == 0 {
				t.Errorf("no barcode buyer %s: %+v", row, b.Rows)
			}
		}
	}
}

// serverErrors summarises the server's ERROR log lines: each distinct message and error,
// with how often it came.
func serverErrors(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	counts := map[string]int{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e struct{ Level, Msg, Err string }
		if json.Unmarshal(line, &e) == nil && e.Level == "ERROR" {
			counts[e.Msg+": "+e.Err]++
		}
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%6d  %s", n, k))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// With no faults and no crashes, every buyer's story ends consistent: every invariant holds.
func TestFaultFreeRunKeepsEveryInvariant(t *testing.T) {
	t.Parallel()
	faultFree(t, "")
}

// The same on PostgreSQL, in a fresh schema (skipped without ORDERPAY_TEST_PG).
func TestFaultFreeRunKeepsEveryInvariantPostgres(t *testing.T) {
	t.Parallel()
	faultFree(t, storetest.PostgresDSN(t))
}

func faultFree(t *testing.T, db string) {
	rep := scenario(t, Config{Orders: 200, Seed: 7, Faults: "none", DB: db})
	if !rep.Passed {
		t.Errorf("fault-free run broke %v", rep.Failing)
	}
	if !rep.Settled {
		t.Errorf("fault-free run did not settle: %v", rep.Unsettled)
	}
	if n := rep.FaultsFired; len(n) > 0 {
		t.Errorf("faults fired in a fault-free run: %v", n)
	}
	// Without fee faults the three layers are all matched: no difference at all in fees or
	// settlement, and the money that should have reached each account did.
	if rc := rep.Reconciliation; rc != nil {
		for _, l := range []orderpay.ReconLayer{orderpay.LayerFees, orderpay.LayerSettlement} {
			if ls := rc.Layers[string(l)]; ls.Differences != 0 {
				t.Errorf("layer %s: %+v", l, ls)
			}
		}
		for _, r := range rc.Reports {
			if f := r.Figures; !f.FeesChecked || !f.SettlementChecked || f.NetExpected != f.NetBill || f.FeeExpected != f.FeeSummary {
				t.Errorf("report %d (%s %s) figures %+v", r.ID, r.Channel, r.Date, f)
			}
		}
	}
	// PAID or CANCELLED by the buyers; COMPLETED by the after-sales phase, which ships and
	// receives some paid orders, and REFUNDED by it too: an order whose every unit was
	// refunded before shipping ends so (the auditor checks its money and stock).
	for state := range rep.FinalStates {
		if state != "PAID" && state != "CANCELLED" && state != "COMPLETED" && state != "REFUNDED" {
			t.Errorf("%d orders ended %s", rep.FinalStates[state], state)
		}
	}
	checkMethods(t, rep)
	// Without faults every refund is made at the first try and nothing reaches the
	// operators' queue.
	if f := rep.Refunds; f.Total == 0 || f.SucceededFirstTry != f.Total {
		t.Errorf("refunds %+v: want every one made at the first try", f)
	}
	if o := rep.Operator; o == nil || o.Queued != 0 || o.TopUps+o.Retries+o.Resolutions != 0 {
		t.Errorf("the operator on duty %+v: want nothing to do", o)
	}
	// Lines refunded unit by unit around a rejected request, priced so that the line gives
	// back exactly its payable (I3 checks it).
	if a := rep.AfterSales; a == nil || a.RefundsRequested == 0 || a.ReturnsRequested == 0 || a.SplitRefunds == 0 || a.Rejected == 0 || len(a.Failed) > 0 {
		t.Errorf("after-sales phase: %+v", a)
	}
}

// With every fault class and two kill -9 crashes, every invariant holds. (The harness found
// three holes on its way here: a PostgreSQL deadlock on orders listing the same SKUs in
// opposite orders; a WeChat attempt unknown to WeChat that could never be closed; a
// duplicate payment on the other channel, its notifications lost, that was never refunded.)
func TestAllFaultsAndCrashesKeepEveryInvariant(t *testing.T) {
	t.Parallel()
	allFaults(t, "")
}

// The same on PostgreSQL (skipped without ORDERPAY_TEST_PG).
func TestAllFaultsAndCrashesKeepEveryInvariantPostgres(t *testing.T) {
	t.Parallel()
	allFaults(t, storetest.PostgresDSN(t))
}

func allFaults(t *testing.T, db string) {
	// Every class at its plan's probability, but refusals for now three times as likely, and
	// abnormal and slow refunds twice (below):
	// a 300-order run sends some 150 refunds, and at the plan's rate (a 1,000-order run's)
	// a run without a single retried refund is too likely for a test that asserts one. The
	// draws follow the calls as the machine schedules them, so the seed alone does not fix
	// them.
	var classes []string
	for _, c := range FaultClasses {
		switch c {
		case FaultRefundRefused:
			c += "=0.15"
		case FaultRefundAbnormal, FaultRefundSlow:
			// Likewise: at the plan's rates a run with no abnormal WeChat refund, or no slow
			// refund, came once in some dozens (CI met one without an abnormal refund).
			c += "=0.1"
		}
		classes = append(classes, c)
	}
	// The fee faults likewise: at a 1,000-order run's rates (2–3 % of payments or refunds),
	// a 300-order run plants no fault of some kind once in a dozen runs or so (CI met a run
	// without a refund that kept its fee); at 10–15 % every kind is planted.
	feeFaults := "fee_rate=0.1,rate_change,refund_fee=0.15,settlement_missing=0.1,settlement_short=0.1,balance_break"
	rep := scenario(t, Config{Orders: 300, Seed: 3, Faults: strings.Join(classes, ","), FeeFaults: feeFaults, Crashes: 2, DB: db})
	if len(rep.FaultsFired) < len(FaultClasses) {
		t.Errorf("faults fired %v: want every class", rep.FaultsFired)
	}
	// Every fee and settlement fault planted in the bills is found, in its class and with its
	// exact amount, and every kind was planted (scenario checks that nothing else is
	// unexplained).
	if rc := rep.Reconciliation; rc == nil || rc.Missed != 0 || len(rc.Planted) < len(FeeFaultClasses) {
		t.Errorf("planted fee and settlement faults: %+v", rc)
	} else if rc.Layers[string(orderpay.LayerFees)].Unexplained == 0 || rc.Layers[string(orderpay.LayerSettlement)].Unexplained == 0 {
		t.Errorf("layers %+v: want the planted faults unexplained in the fees and settlement layers", rc.Layers)
	}
	// A refusal for now (refund_refused fired) is retried; an abnormal end (refund_abnormal
	// fired) goes to the operators' queue, where the operator on duty ends it; nothing is
	// left owed. A refund the channel had made after all (its first answer lost) can be
	// queued and then leave the queue on the channel's late word before the operator's next
	// look: the operator need not have seen those.
	f, o := rep.Refunds, rep.Operator
	if f.RetriedThenSucceeded+f.OperatorRetriedThenSucceeded == 0 || f.QueuedForOperator == 0 || f.ResolvedByOperator == 0 {
		t.Errorf("refunds %+v: want some retried, some queued and resolved", f)
	}
	if f.StillQueued+f.StillInFlight != 0 || f.QueuedForOperator != f.ResolvedByOperator+f.OperatorRetriedThenSucceeded+f.SettledByChannel {
		t.Errorf("refunds %+v: want every queued refund resolved or retried by the operator or settled by the channel, none left", f)
	}
	if o == nil || o.Resolutions < f.ResolvedByOperator || o.Retries < f.OperatorRetriedThenSucceeded || o.Queued < f.QueuedForOperator-f.SettledByChannel {
		t.Errorf("the operator on duty %+v did not do what the refunds %+v say", o, f)
	}
	checkMethods(t, rep)
	// The call faults hit the prepays of every method that makes one (Alipay trade.create,
	// WeChat JSAPI, H5 and App are precreate to the fault plan) and the queries and closes
	// of all: orders of other ways than the QR codes met them.
	faulted := 0
	for w, cv := range rep.MethodConvergenceMS {
		if !strings.HasSuffix(w, ":qr") {
			faulted += cv.Faulted
		}
	}
	if faulted == 0 {
		t.Errorf("no fault hit an order paid by a method other than a QR code: %+v", rep.MethodConvergenceMS)
	}
	for _, inv := range Invariants {
		if n := rep.Violations[inv.ID]; n > 0 {
			var vs []string
			for _, v := range rep.ViolationList {
				if v.Invariant == inv.ID {
					vs = append(vs, fmt.Sprintf("%s order %s trade %s: %s", v.Invariant, v.OrderNo, v.OutTradeNo, v.Detail))
				}
			}
			t.Errorf("%s (%s) failed %d times:\n%s", inv.ID, inv.Name, n, strings.Join(vs, "\n"))
		}
	}
}

// ---- pure parts ----

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"none", []string{}, false},
		{"all", FaultClasses, false},
		{"call_error, notify_drop,notify_drop", []string{FaultNotifyDrop, FaultCallError}, false},
		{"notify_drop,bogus", nil, true},
	} {
		got, err := ParseFaults(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseFaults(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// The same classes and seed give the same plan; the plan is one the simulator accepts, and
// each class adds only its own kinds.
func TestFaultPlanIsAPureFunctionOfClassesAndSeed(t *testing.T) {
	a, b := FaultPlan(FaultClasses, 42), FaultPlan(slices.Clone(FaultClasses), 42)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) || a.Seed != 42 {
		t.Fatalf("plans differ:\n%s\n%s", ja, jb)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if c := FaultPlan(FaultClasses, 43); c.Seed != 43 {
		t.Fatalf("seed %d", c.Seed)
	}
	if p := FaultPlan(nil, 1); len(p.Rules) != 0 {
		t.Fatalf("no classes gave %d rules", len(p.Rules))
	}
	for _, class := range FaultClasses {
		p := FaultPlan([]string{class}, 1)
		if len(p.Rules) == 0 {
			t.Errorf("%s: no rules", class)
		}
		for _, r := range p.Rules {
			channels := []string{r.Channel}
			if r.Channel == "" {
				channels = []string{"alipay", "wechat"}
			}
			for _, ch := range channels {
				ev := simEvent(r.Method, r.Kind)
				ev.Channel = ch
				if got := faultClassOf(ev); got != class {
					t.Errorf("%s has a rule %s %s/%s of class %s", class, ch, r.Method, r.Kind, got)
				}
			}
		}
	}
}

// The behaviour mix follows Behaviours' shares, and a buyer's script depends only on the
// seed and its index.
func TestBuyerMixFollowsTheShares(t *testing.T) {
	const n = 20000
	got := map[Behaviour]int{}
	watching := 0
	for i := range n {
		p := PlanBuyer(9, i)
		got[p.Behaviour]++
		if p.Watch {
			watching++
		}
		if p.Behaviour == Abandon && p.Watch {
			t.Fatalf("buyer %d abandons but watches", i)
		}
		if len(p.Lines) == 0 || len(p.Lines) > 2 || (len(p.Lines) == 2 && p.Lines[0].Catalogue == p.Lines[1].Catalogue) {
			t.Fatalf("buyer %d lines %+v", i, p.Lines)
		}
	}
	for _, b := range Behaviours {
		share := 100 * float64(got[b.Behaviour]) / n
		if share < float64(b.Percent)-1.5 || share > float64(b.Percent)+1.5 {
			t.Errorf("%s: %.1f%% of buyers, want about %d%%", b.Behaviour, share, b.Percent)
		}
	}
	if w := 100 * float64(watching) / n; w < 40 || w > 50 {
		t.Errorf("%.1f%% watch; want about half of those who do not abandon", w)
	}
	// The ways to pay: a QR code for half of the buyers, each other method a sixteenth; an
	// app buyer pays a QR code; a buyer who pays after the instruction expired pays by
	// WeChat H5.
	ways := map[PayWay]int{}
	for i := range n {
		p := DefaultPopulation().Plan(9, i)
		ways[p.Way()]++
		switch {
		case p.App && p.Method != orderpay.MethodQR:
			t.Fatalf("app buyer %d pays by %s", i, p.Way())
		case p.Behaviour == PayExpired && p.Way() != expiringWay:
			t.Fatalf("buyer %d pays after expiry by %s", i, p.Way())
		case orderpay.CheckMethod(p.Channel, p.Method) != nil:
			t.Fatalf("buyer %d: %s", i, p.Way())
		}
	}
	qr := 0
	for w, k := range ways {
		share := 100 * float64(k) / n
		if w.Method == orderpay.MethodQR {
			qr += k
			continue
		}
		want := 100.0 / 16
		if w == expiringWay {
			want += 3 * (1 - want/100) // the pay_expired buyers'
		}
		if share < want-1.2 || share > want+1.2 {
			t.Errorf("%s: %.1f%% of buyers, want about %.1f%%", w, share, want)
		}
	}
	if share := 100 * float64(qr) / n; share < 46 || share > 52 {
		t.Errorf("QR codes: %.1f%% of buyers, want about half", share)
	}
	if len(ways) != len(AllPayWays()) {
		t.Errorf("ways %v: want all %d", ways, len(AllPayWays()))
	}
	a, b := PlanBuyer(9, 123), PlanBuyer(9, 123)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed and index, different scripts: %+v %+v", a, b)
	}
	if fmt.Sprint(PlanBuyer(9, 123)) == fmt.Sprint(PlanBuyer(10, 123)) && fmt.Sprint(PlanBuyer(9, 124)) == fmt.Sprint(PlanBuyer(10, 124)) {
		t.Fatal("the seed changes nothing")
	}
}

func TestCrashMomentsAreSeededAndSpread(t *testing.T) {
	span := 30 * time.Second
	a, b := CrashMoments(5, 5, span), CrashMoments(5, 5, span)
	if !slices.Equal(a, b) || len(a) != 5 || !slices.IsSorted(a) {
		t.Fatalf("%v %v", a, b)
	}
	for _, m := range a {
		if m < span/20 || m > span*19/20 {
			t.Fatalf("moment %s outside the middle of %s", m, span)
		}
	}
	if slices.Equal(a, CrashMoments(6, 5, span)) {
		t.Fatal("the seed changes nothing")
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := Percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%g = %s, want %s", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 || Percentile(ds[:1], 99) != time.Millisecond {
		t.Error("edge cases")
	}
	l := summarize([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if l != (Latency{Count: 3, P50: 2, P99: 3, Max: 3}) {
		t.Errorf("summary %+v", l)
	}
}

func TestProgressLine(t *testing.T) {
	got := formatProgress(progressState{Phase: "load", Done: 812, Total: 2000, Paid: 530, Errors: 41, Crashes: 2, CrashesOf: 5,
		Elapsed: 12300 * time.Millisecond})
	want := "[#########...............]  812/2000 buyers  paid 530  errors 41  crashes 2/5  12.3s  load"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	full := formatProgress(progressState{Label: "scan", Phase: "audit", Done: 3, Total: 3})
	if !strings.HasPrefix(full, "scan [########################] 3/3 buyers") {
		t.Errorf("full bar %q", full)
	}
}

func TestProcessCPUAndRSAFloor(t *testing.T) {
	cpu, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if cpu < 0 || ClockTicks() <= 0 {
		t.Fatalf("cpu %s, ticks %d", cpu, ClockTicks())
	}
	keys := testKeys(t)
	per, n, err := MeasureRSA(keys, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if per <= 0 || n < 10 {
		t.Fatalf("RSA floor %s over %d", per, n)
	}
}

func TestParseFaultSpecTakesProbabilities(t *testing.T) {
	classes, probs, err := ParseFaultSpec("notify_drop=1, call_error=0.2,notify_delay")
	if err != nil || len(classes) != 3 || probs[FaultNotifyDrop] != 1 || probs[FaultCallError] != 0.2 || len(probs) != 2 {
		t.Fatalf("got %v %v %v", classes, probs, err)
	}
	plan := FaultPlanWith(classes, probs, 1)
	for _, r := range plan.Rules {
		if r.Kind == "drop" && r.Probability != 1 {
			t.Fatalf("drop rule at %v, want 1", r.Probability)
		}
	}
	for _, bad := range []string{"notify_drop=0", "notify_drop=1.5", "notify_drop=x", "nope=0.5"} {
		if _, _, err := ParseFaultSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFeeFaultProbabilitiesReachTheBills(t *testing.T) {
	classes, probs, err := ParseFeeFaults("refund_fee=0.15, settlement_short,balance_break")
	if err != nil || len(classes) != 3 || probs[FeeFaultRefundFee] != 0.15 || len(probs) != 1 {
		t.Fatalf("got %v %v %v", classes, probs, err)
	}
	faults, change := billFaults(classes, probs, time.Now())
	if !change.IsZero() {
		t.Errorf("rate change at %v without rate_change", change)
	}
	got := map[sim.BillFaultKind]float64{}
	for _, f := range faults {
		got[f.Kind] = f.Probability
	}
	want := map[sim.BillFaultKind]float64{sim.BillFaultRefundFeeKept: 0.15, sim.BillFaultSettlementShort: probSettlementShort, sim.BillFaultBalanceBreak: 1}
	if !maps.Equal(got, want) {
		t.Errorf("bill faults %v, want %v", got, want)
	}
	for _, bad := range []string{"refund_fee=0", "refund_fee=2", "fee_rate=x", "notify_drop"} {
		if _, _, err := ParseFeeFaults(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseWays(t *testing.T) {
	if w, err := ParseWays(""); err != nil || !slices.Equal(w, DefaultWays()) {
		t.Fatalf("default: %v, %v", w, err)
	}
	w, err := ParseWays("alipay:wap=2, wechat:h5")
	if err != nil || len(w) != 2 || w[0] != (WayShare{PayWay{"alipay", "wap"}, 2}) || w[1] != (WayShare{PayWay{"wechat", "h5"}, 1}) {
		t.Fatalf("got %v, %v", w, err)
	}
	qr, err := ParseWays("qr")
	if err != nil || len(qr) != 2 || qr[0].Way.Method != orderpay.MethodQR || qr[1].Way.Method != orderpay.MethodQR {
		t.Fatalf("qr: %v, %v", qr, err)
	}
	pop := DefaultPopulation()
	pop.Ways = qr
	for i := range 100 {
		if p := pop.Plan(1, i); p.Method != orderpay.MethodQR {
			t.Fatalf("buyer %d pays by %s in a QR-only mix", i, p.Way())
		}
	}
	for _, bad := range []string{"alipay:h5", "wap", "wechat:jsapi=0", "alipay:qr,alipay:qr", "paypal:qr"} {
		if _, err := ParseWays(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Each way is paid on its own device, as the real wallets check it: the cashiers and H5 on
// the shop's page, JSAPI under the registered pay directory, the buyer signed in; and the
// RSA floor counts each way's own signatures.
func TestDevicesAndRSAOps(t *testing.T) {
	d := shopDevice{Page: "http://127.0.0.1:8080/pay/1", JSAPIPage: "http://127.0.0.1/pay/1", ClientIP: "127.0.0.1"}
	for _, tc := range []struct {
		way              PayWay
		referer          string
		signs, verifies  int
		inWechat, mobile bool
	}{
		{PayWay{"alipay", "qr"}, "", 1, 2, false, false},
		{PayWay{"alipay", "pc"}, d.Page, 1, 1, false, false},
		{PayWay{"alipay", "wap"}, d.Page, 1, 1, false, true},
		{PayWay{"alipay", "app"}, "", 1, 1, false, true},
		{PayWay{"alipay", "inapp"}, "", 1, 2, false, true},
		{PayWay{"wechat", "qr"}, "", 1, 2, false, false},
		{PayWay{"wechat", "jsapi"}, d.JSAPIPage, 2, 2, true, true},
		{PayWay{"wechat", "mini"}, "", 2, 2, true, true},
		{PayWay{"wechat", "h5"}, d.Page, 1, 2, false, true},
		{PayWay{"wechat", "app"}, "", 2, 2, false, true},
	} {
		dev := deviceFor(orderpay.NewInstruction(tc.way.Channel, tc.way.Method), "buyer-1", d)
		if dev.Referer != tc.referer || dev.Buyer != "buyer-1" || dev.ClientIP != d.ClientIP ||
			strings.Contains(dev.UserAgent, "MicroMessenger") != tc.inWechat || strings.Contains(dev.UserAgent, "iPhone") != tc.mobile {
			t.Errorf("%s: device %+v", tc.way, dev)
		}
		if s, v := RSAOps(tc.way); s != tc.signs || v != tc.verifies {
			t.Errorf("%s: %d signs and %d verifies, want %d and %d", tc.way, s, v, tc.signs, tc.verifies)
		}
	}
}

func TestParsePopulation(t *testing.T) {
	p, err := ParsePopulation("pay_now", "none")
	if err != nil || len(p.Mix) != 1 || p.Watch != 0 {
		t.Fatalf("got %+v, %v", p, err)
	}
	for i := range 200 {
		if b := p.Plan(1, i); b.Behaviour != PayNow || b.Watch {
			t.Fatalf("buyer %d: %+v", i, b)
		}
	}
	p, err = ParsePopulation("pay_now=3,abandon=1", "all")
	if err != nil || p.Watch != 1 {
		t.Fatalf("got %+v, %v", p, err)
	}
	abandon := 0
	for i := range 4000 {
		if p.Plan(1, i).Behaviour == Abandon {
			abandon++
		}
	}
	if abandon < 850 || abandon > 1150 { // 1000 expected
		t.Fatalf("%d of 4000 abandoned at weight 1 in 4", abandon)
	}
	for _, bad := range [][2]string{{"teleport", ""}, {"pay_now=0", ""}, {"", "sometimes"}, {"", "1.5"}} {
		if _, err := ParsePopulation(bad[0], bad[1]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The harness reaches the channels through the channels file it writes (serve --channels),
// in each of the four combinations of the merchants' modes; a small run with every fault
// keeps every invariant in each.
func TestEveryKeyModeThroughTheChannelsFile(t *testing.T) {
	t.Parallel()
	for _, modes := range [][2]string{{"key", "certificate"}, {"cert", "pubkey"}, {"cert", "certificate"}} {
		// (key and pubkey are the other tests' own.)
		t.Run("alipay-"+modes[0]+"-wechat-"+modes[1], func(t *testing.T) {
			t.Parallel()
			rep := scenario(t, Config{Orders: 60, Seed: 5, Faults: "all", AlipayMode: modes[0], WechatMode: modes[1]})
			if !rep.Passed {
				t.Errorf("broke %v", rep.Failing)
			}
		})
	}
}

package chaos

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"orderpay/channel/sim"
	"orderpay/chaos/audit"
)

// Invariants are docs/design.md §8's invariants, the refunds' I8, the barcode payments' I9 and
// the queued SKUs' tickets' I10, in order, with their short names.
var Invariants = []struct{ ID, Name string }{
	{"I1", "no lost payment"},
	{"I2", "no phantom payment"},
	{"I3", "money conserved"},
	{"I4", "stock conserved"},
	{"I5", "nothing forged"},
	{"I6", "nothing stuck"},
	{"I7", "effects once"},
	{"I8", "no money owed silently"},
	{"I9", "barcode ends both sides"},
	{"I10", "every ticket ends once"},
}

// Report is what a run found. Its JSON form is `orderpay chaos --json`.
type Report struct {
	Compensation string `json:"compensation"`
	Store        string `json:"store"` // sqlite or postgres
	Seed         uint64 `json:"seed"`
	// Methods is the mix of ways to pay, as --methods names it ("all" for the default).
	Methods string   `json:"methods"`
	Faults  []string `json:"faults"` // the fault classes in force
	// FaultProbabilities are the classes given their own probability (--faults class=p).
	FaultProbabilities map[string]float64 `json:"fault_probabilities,omitempty"`
	// FeeFaults are the fee and settlement fault classes planted in the bills (--fee-faults).
	FeeFaults []string `json:"fee_faults"`
	// FeeFaultProbabilities are the fee fault classes given their own probability
	// (--fee-faults class=p).
	FeeFaultProbabilities map[string]float64 `json:"fee_fault_probabilities,omitempty"`
	// FaultPlan is the simulator's plan, a pure function of Faults and Seed.
	FaultPlan   sim.FaultPlan  `json:"fault_plan"`
	FaultsFired map[string]int `json:"faults_fired"` // by class
	Compression Compression    `json:"time_compression"`
	// Settings are the server's settings in the run, drawn from the seed or fixed: every
	// value passed to `orderpay serve` and each SKU's stock policy.
	Settings SettingsView `json:"settings"`
	// Retention is what the retention passes removed while the run went on, at the
	// retention periods' floors.
	Retention *RetentionStats `json:"retention"`

	OrdersRequested int `json:"orders_requested"` // buyers
	OrdersTotal     int `json:"orders_total"`     // orders and app payments in the database
	// AppBuyers paid a business app through the payments API; AppStates counts their
	// payments by status.
	AppBuyers   int            `json:"app_buyers"`
	AppStates   map[string]int `json:"app_states,omitempty"`
	FinalStates map[string]int `json:"final_states"`
	// Violations counts the violations of each invariant, I1 … I10.
	Violations map[string]int `json:"violations"`
	Passed     bool           `json:"passed"`
	Failing    []string       `json:"failing"`

	Crashes int `json:"crashes"`
	// CrashLog is every kill: when (since the load started), after how many buyers, and how
	// long the API was down.
	CrashLog []CrashRecord `json:"crash_log"`
	// UnexpectedExits are server exits nobody asked for (it died by itself), restarted.
	UnexpectedExits []string `json:"unexpected_exits,omitempty"`
	// NATSRestarts are the broker's stops and starts (--nats-restarts), with the queue's
	// state at each.
	NATSRestarts []NATSRestart `json:"nats_restarts"`
	// Queue is what the rush for the queued SKU saw (nil without --queued-flash).
	Queue *QueueReport `json:"queue,omitempty"`

	// ConvergenceMS is, per class (fault classes, "crash", "none" and "all"), the time from
	// the buyer paying at the channel to the order being PAID in the database.
	ConvergenceMS map[string]ClassConvergence `json:"convergence_ms"`
	// MethodConvergenceMS is the same per way to pay ("alipay:wap"): the orders whose first
	// paid trade was of that channel and method, and how many of them a fault hit.
	MethodConvergenceMS map[string]MethodConvergence `json:"method_convergence_ms"`
	// SeenPaidMS is, for watching buyers, the time from the wallet accepting their payment
	// to their poll showing PAID.
	SeenPaidMS Latency `json:"seen_paid_ms"`
	// OrdersPerSecond is orders created per second, from the start of the load to the
	// last order created.
	OrdersPerSecond float64 `json:"orders_per_second"`

	Buyers map[string]int `json:"buyers"` // by behaviour
	// BuyersByMethod counts the buyers by their way to pay ("alipay:qr"; an app buyer's is
	// its channel's QR code).
	BuyersByMethod map[string]int `json:"buyers_by_method"`
	// Barcode is what the barcode buyers' tills saw, per channel and behaviour, and how
	// their trades ended (nil without barcode buyers).
	Barcode *BarcodeReport `json:"barcode,omitempty"`
	// Unpaid is, per behaviour whose buyers never pay (return_unpaid, false_ok), what became
	// of their orders: each must be CANCELLED with nothing paid at the channel.
	Unpaid map[string]UnpaidCheck `json:"unpaid"`
	// ForgedReturnsVerified counts the forged returns (false_ok's made-up Alipay return)
	// that POST /v1/orders/{no}/return said verified: any fails the run.
	ForgedReturnsVerified int            `json:"forged_returns_verified"`
	Outcomes              map[string]int `json:"outcomes"`   // what buyers saw worth counting
	APIErrors             map[string]int `json:"api_errors"` // "<call> <status> <code>": every failed attempt

	// AfterSales is what the after-sales phase did (nil if it did not run).
	AfterSales *AfterSalesStats `json:"after_sales,omitempty"`
	// Refunds counts every refund orderpay decided on (late, duplicate and refused payments,
	// after-sales) by how it went, from the database at the audit.
	Refunds RefundOutcomes `json:"refunds"`
	// Operator is what the operator on duty did with the refund queue.
	Operator *OperatorStats `json:"operator,omitempty"`

	Phases    Phases         `json:"phases_ms"`
	Settled   bool           `json:"settled"`
	Unsettled map[string]int `json:"unsettled,omitempty"` // what was still open when the settle time ran out
	Notes     []string       `json:"notes"`

	// ViolationList is every violation with its order's full history.
	ViolationList []ViolationView `json:"violation_list"`
	// Reconciliation is what reconciling every day of the run against both channels'
	// bills found, after the audit.
	Reconciliation *ReconciliationSummary `json:"reconciliation"`
	// Audit is the auditor's result as it came.
	Audit   *audit.Result `json:"-"`
	DataDir string        `json:"data_dir,omitempty"`
}

// Compression says how time was compressed.
type Compression struct {
	TimeScale float64 `json:"time_scale"`
	// PayWindows are the SKUs' windows in business time, and the wall time they took.
	PayWindows map[string]string `json:"pay_windows"`
	CloseGrace string            `json:"close_grace"`
	// AuditGrace is the grace the auditor allows past a deadline before an open order or
	// payment counts as stuck (I6): the compressed close grace plus half the settle time,
	// which covers a timeout close that meets channel timeouts (TimeoutHang each).
	AuditGrace    string `json:"audit_grace"`
	SettleTimeout string `json:"settle_timeout"`
}

// RefundOutcomes counts refunds by how they went. The first three are disjoint, and with
// StillInFlight less those queued before, they add up to Total.
type RefundOutcomes struct {
	Total     int   `json:"total"`
	AmountFen int64 `json:"amount_fen"`
	// SucceededFirstTry: made by the channel without a refusal (a resend after an unknown
	// answer is the same try) and never queued.
	SucceededFirstTry int `json:"succeeded_first_try"`
	// RetriedThenSucceeded: refused for now (balance, frequency) one or more times, sent
	// again on the retry plan and made, never queued.
	RetriedThenSucceeded int `json:"retried_then_succeeded"`
	// QueuedForOperator: went to the operators' queue at some time. Of those:
	// ResolvedByOperator were paid back outside the channel; OperatorRetriedThenSucceeded
	// were sent again by the operator and made by the channel; SettledByChannel left the
	// queue on the channel's own word that it had refunded (a late notification or a query),
	// perhaps before an operator looked; StillQueued wait there.
	QueuedForOperator            int `json:"queued_for_operator"`
	ResolvedByOperator           int `json:"resolved_by_operator"`
	OperatorRetriedThenSucceeded int `json:"operator_retried_then_succeeded"`
	SettledByChannel             int `json:"settled_by_channel"`
	StillQueued                  int `json:"still_queued"`
	// StillInFlight: PENDING or PROCESSING at the audit, queued before or not.
	StillInFlight int `json:"still_in_flight"`
}

func refundOutcomesView(o audit.RefundOutcomes) RefundOutcomes {
	return RefundOutcomes{Total: o.Total, AmountFen: o.Amount, SucceededFirstTry: o.FirstTry, RetriedThenSucceeded: o.Retried,
		QueuedForOperator: o.Queued, ResolvedByOperator: o.Resolved, OperatorRetriedThenSucceeded: o.OperatorRetried,
		SettledByChannel: o.SettledByChannel, StillQueued: o.StillQueued, StillInFlight: o.InFlight}
}

// CrashRecord is one kill -9 of the server.
type CrashRecord struct {
	AtMS       int64 `json:"at_ms"`
	AfterBuyer int   `json:"after_buyer"`
	DowntimeMS int64 `json:"downtime_ms"`
	// BarcodeInFlight counts the tills' requests in flight at the kill: barcode payments
	// whose loop it killed.
	BarcodeInFlight int `json:"barcode_in_flight"`
}

// Phases are how long each part of the run took, in milliseconds.
type Phases struct {
	SetupMS  int64 `json:"setup"`
	LoadMS   int64 `json:"load"`
	SettleMS int64 `json:"settle"`
	// AfterSalesMS is the after-sales phase, between the two settles.
	AfterSalesMS int64 `json:"after_sales"`
	AuditMS      int64 `json:"audit"`
	TotalMS      int64 `json:"total"`
}

// ViolationView is a violation with snake_case JSON.
type ViolationView struct {
	Invariant  string        `json:"invariant"`
	OrderNo    string        `json:"order_no,omitempty"`
	PaymentNo  string        `json:"payment_no,omitempty"`
	OutTradeNo string        `json:"out_trade_no,omitempty"`
	SKU        string        `json:"sku,omitempty"`
	Detail     string        `json:"detail"`
	History    []HistoryView `json:"history"`
}

// HistoryView is one history line with snake_case JSON.
type HistoryView struct {
	At     time.Time `json:"at"`
	Entity string    `json:"entity"`
	No     string    `json:"no"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Event  string    `json:"event"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason,omitempty"`
	Raw    string    `json:"raw,omitempty"`
}

func violationViews(vs []audit.Violation) []ViolationView {
	out := make([]ViolationView, 0, len(vs))
	for _, v := range vs {
		vv := ViolationView{Invariant: v.Invariant, OrderNo: v.OrderNo, PaymentNo: v.PaymentNo, OutTradeNo: v.OutTradeNo,
			SKU: v.SKU, Detail: v.Detail, History: []HistoryView{}}
		for _, h := range v.History {
			vv.History = append(vv.History, HistoryView{At: h.At, Entity: h.Entity, No: h.EntityNo, From: h.From, To: h.To,
				Event: h.Event, Actor: h.Actor, Reason: h.Reason, Raw: h.Raw})
		}
		out = append(out, vv)
	}
	return out
}

// shownViolations is how many violations the table prints with their histories.
const shownViolations = 5

// PrintTable writes the report as a human-readable table.
func (r *Report) PrintTable(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	faults := faultsLabel(r.Faults)
	extra := ""
	if r.Queue != nil {
		extra += fmt.Sprintf(", a queued flash SKU of %d units", r.Queue.Units)
	}
	if n := len(r.NATSRestarts); n > 0 {
		extra += fmt.Sprintf(", %d NATS restarts", n)
	}
	p("orderpay chaos: %d buyers, seed %d, methods %s, faults %s, %d crashes%s, compensation %s, store %s\n",
		r.OrdersRequested, r.Seed, r.Methods, faults, r.Crashes, extra, r.Compensation, r.Store)
	for _, n := range r.Notes {
		p("  note: %s\n", n)
	}
	if len(r.Faults) > 0 {
		p("fault plan (seed %d, %d rules; all of them with --json):\n", r.FaultPlan.Seed, len(r.FaultPlan.Rules))
		for _, line := range describePlan(r.Faults, r.FaultProbabilities) {
			p("  %s\n", line)
		}
	}
	if len(r.FeeFaults) > 0 {
		var classes []string
		for _, c := range r.FeeFaults {
			if f, ok := r.FeeFaultProbabilities[c]; ok {
				c = fmt.Sprintf("%s=%g", c, f)
			}
			classes = append(classes, c)
		}
		p("fee and settlement faults in the bills: %s\n", strings.Join(classes, ", "))
	}
	p("settings (%s, business time):\n", settingsLabel(r.Settings.Source, r.Seed))
	for _, line := range r.Settings.lines() {
		p("  %s\n", line)
	}
	c := r.Compression
	p("time compressed ×%g: pay windows %s; close grace %s; audit grace %s; settle time %s\n",
		c.TimeScale, joinMap(c.PayWindows, ", "), c.CloseGrace, c.AuditGrace, c.SettleTimeout)
	settle := "settled"
	if !r.Settled {
		settle = "NOT settled: " + joinCounts(r.Unsettled, ", ")
	}
	p("phases: setup %s, load %s, settle %s (%s), after-sales %s, audit %s, total %s\n", msStr(r.Phases.SetupMS), msStr(r.Phases.LoadMS),
		msStr(r.Phases.SettleMS), settle, msStr(r.Phases.AfterSalesMS), msStr(r.Phases.AuditMS), msStr(r.Phases.TotalMS))
	if a := r.AfterSales; a != nil {
		p("after-sales on %d paid orders: %d refunds before shipping (%d rejected), %d lines refunded unit by unit around a rejection, %d returns, %d completed; %d fen refunded; failed steps: %s\n",
			a.Orders, a.RefundsRequested, a.Rejected, a.SplitRefunds, a.ReturnsRequested, a.Completed, a.RefundedFen, joinCounts(a.Failed, ", "))
	}
	f := r.Refunds
	p("refunds: %d (%d fen): %d succeeded at the first try, %d retried then succeeded, %d queued for an operator (%d resolved outside the channel, %d retried by the operator then succeeded, %d settled by the channel's late word, %d still queued), %d still in flight\n",
		f.Total, f.AmountFen, f.SucceededFirstTry, f.RetriedThenSucceeded, f.QueuedForOperator, f.ResolvedByOperator,
		f.OperatorRetriedThenSucceeded, f.SettledByChannel, f.StillQueued, f.StillInFlight)
	if o := r.Operator; o != nil {
		p("operator on duty: %d looks at the queue, %d refunds seen there: %d top-ups, %d retries, %d resolutions; %d failed calls, tried again\n",
			o.Looks, o.Queued, o.TopUps, o.Retries, o.Resolutions, o.Errors)
	}
	if rt := r.Retention; rt != nil {
		p("retention: the harness's %d passes (%d failed, tried again) removed %s\n", rt.Passes, rt.Errors, describeRetention(rt.Removed))
		p("  every pass the server logged, its own and the harness's (%d): %s\n", rt.LoggedPasses, describeRetention(rt.LoggedRemoved))
	}
	p("\norders: %d in the database, %.1f created per second\n", r.OrdersTotal, r.OrdersPerSecond)
	if r.AppBuyers > 0 {
		p("app payments (payments API): %d buyers; %s\n", r.AppBuyers, joinCounts(r.AppStates, "  "))
	}
	p("final states: %s\n", joinCounts(r.FinalStates, "  "))
	p("buyers: %s\n", joinCounts(r.Buyers, "  "))
	p("buyers by method: %s\n", joinWays(r.BuyersByMethod, "  "))
	for _, b := range unpaidBehaviours {
		u, ok := r.Unpaid[string(b)]
		if !ok || u.Orders == 0 {
			continue
		}
		res := "pass"
		if !u.OK() {
			res = "FAIL"
		}
		p("%s (never paid, must end CANCELLED with nothing paid): %d orders, %s; %d paid at the channel: %s\n",
			b, u.Orders, joinCounts(u.FinalStates, " "), u.PaidAtChannel, res)
	}

	printQueue(w, r.Queue)

	p("\n%-4s %-24s %-6s %s\n", "", "invariant", "result", "violations")
	for _, inv := range Invariants {
		n := r.Violations[inv.ID]
		res := "pass"
		if n > 0 {
			res = "FAIL"
		}
		p("%-4s %-24s %-6s %d\n", inv.ID, inv.Name, res, n)
	}

	p("\nconvergence, channel paid → order PAID (ms):\n")
	p("  %-17s %7s %9s %9s %9s %9s\n", "class", "orders", "p50", "p99", "max", "not paid")
	for _, class := range ConvergenceClasses() {
		cv, ok := r.ConvergenceMS[class]
		if !ok {
			continue
		}
		p("  %-17s %7d %9.1f %9.1f %9.1f %9d\n", class, cv.Count, cv.P50, cv.P99, cv.Max, cv.NotPaid)
	}
	if len(r.MethodConvergenceMS) > 0 {
		p("\nconvergence by way to pay, channel paid → order PAID (ms; faulted: a fault hit the order before PAID):\n")
		p("  %-17s %7s %7s %9s %9s %9s %9s %8s\n", "method", "buyers", "paid", "p50", "p99", "max", "not paid", "faulted")
		for _, w := range AllPayWays() {
			cv, ok := r.MethodConvergenceMS[w.String()]
			if !ok && r.BuyersByMethod[w.String()] == 0 {
				continue
			}
			p("  %-17s %7d %7d %9.1f %9.1f %9.1f %9d %8d\n", w, r.BuyersByMethod[w.String()], cv.Count, cv.P50, cv.P99, cv.Max, cv.NotPaid, cv.Faulted)
		}
	}
	printBarcode(w, r.Barcode)
	if r.SeenPaidMS.Count > 0 {
		p("watching buyers, wallet paid → poll shows PAID: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d buyers)\n",
			r.SeenPaidMS.P50, r.SeenPaidMS.P99, r.SeenPaidMS.Max, r.SeenPaidMS.Count)
	}

	p("\ncrashes: %d", r.Crashes)
	for i, c := range r.CrashLog {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		p("%sat %s with %d buyers started%s, down %s", sep, msStr(c.AtMS), c.AfterBuyer, barcodeCrashNote(c.BarcodeInFlight), msStr(c.DowntimeMS))
		if i == len(r.CrashLog)-1 {
			p(")")
		}
	}
	p("\n")
	if len(r.NATSRestarts) > 0 {
		p("NATS restarts: %d", len(r.NATSRestarts))
		for i, n := range r.NATSRestarts {
			sep := ", "
			if i == 0 {
				sep = " ("
			}
			p("%sat %s, down %s", sep, msStr(n.AtMS), msStr(n.DowntimeMS))
			if r.Queue != nil {
				p(" with %d tickets ORDERED and %d WAITING%s", n.Ordered, n.Waiting, midDrain(n.MidDrain))
			}
		}
		p(")\n")
	}
	for _, e := range r.UnexpectedExits {
		p("  the server EXITED BY ITSELF (restarted): %s\n", e)
	}
	if len(r.FaultsFired) > 0 {
		p("faults fired: %s\n", joinCounts(r.FaultsFired, "  "))
	}
	printReconciliation(w, r.Reconciliation)
	if len(r.Outcomes) > 0 {
		p("\nbuyer outcomes:\n")
		for _, k := range sortedKeys(r.Outcomes) {
			p("  %6d  %s\n", r.Outcomes[k], k)
		}
	}
	if len(r.APIErrors) > 0 {
		p("\nAPI errors (call, status, code; every attempt):\n")
		for _, k := range sortedKeys(r.APIErrors) {
			p("  %6d  %s\n", r.APIErrors[k], k)
		}
	}
	if len(r.ViolationList) > 0 {
		p("\nviolations (first %d of %d; all with --json):\n", min(shownViolations, len(r.ViolationList)), len(r.ViolationList))
		for _, v := range r.ViolationList[:min(shownViolations, len(r.ViolationList))] {
			if v.SKU != "" {
				p("  %s sku %s: %s\n", v.Invariant, v.SKU, v.Detail)
			} else {
				p("  %s order %s payment %s trade %s: %s\n", v.Invariant, dash(v.OrderNo), dash(v.PaymentNo), dash(v.OutTradeNo), v.Detail)
			}
			for _, h := range v.History {
				p("      %s  %-13s %-24s %s → %s  %s by %s", h.At.Format("15:04:05.000"), h.Entity, h.No, dash(h.From), h.To, h.Event, h.Actor)
				if h.Reason != "" {
					p(": %s", h.Reason)
				}
				p("\n")
			}
		}
	}
	if r.DataDir != "" {
		p("\ndata kept in %s (server log: serve.log)\n", r.DataDir)
	}
	if r.Passed {
		p("\nPASS: every invariant holds\n")
	} else {
		p("\nFAIL: %s\n", strings.Join(r.Failing, ", "))
	}
}

// PrintCompare writes the reports of the same plan under different strategies side by side.
func PrintCompare(w io.Writer, reports []*Report) {
	if len(reports) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	r0 := reports[0]
	faults := faultsLabel(r0.Faults)
	p("orderpay chaos --compare: %d buyers, seed %d, faults %s, %d crashes, store %s, time ×%g\n",
		r0.OrdersRequested, r0.Seed, faults, r0.Crashes, r0.Store, r0.Compression.TimeScale)
	p("settings (%s, business time, the same in every run):\n", settingsLabel(r0.Settings.Source, r0.Seed))
	for _, line := range r0.Settings.lines() {
		p("  %s\n", line)
	}
	notes := map[string]bool{}
	for _, r := range reports {
		for _, n := range r.Notes {
			if !notes[n] {
				notes[n] = true
				p("  note: %s\n", n)
			}
		}
	}
	row := func(label string, cell func(r *Report) string) {
		p("%-30s", label)
		for _, r := range reports {
			p(" %18s", cell(r))
		}
		p("\n")
	}
	row("", func(r *Report) string { return r.Compensation })
	row("orders", func(r *Report) string { return fmt.Sprint(r.OrdersTotal) })
	states := map[string]bool{}
	for _, r := range reports {
		for s := range r.FinalStates {
			states[s] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(states)) {
		row("  "+s, func(r *Report) string { return fmt.Sprint(r.FinalStates[s]) })
	}
	for _, inv := range Invariants {
		row(inv.ID+" "+inv.Name, func(r *Report) string {
			if n := r.Violations[inv.ID]; n > 0 {
				return fmt.Sprintf("FAIL %d", n)
			}
			return "pass"
		})
	}
	for _, class := range ConvergenceClasses() {
		present := false
		for _, r := range reports {
			_, ok := r.ConvergenceMS[class]
			present = present || ok
		}
		if !present {
			continue
		}
		row("p50/p99 ms "+class, func(r *Report) string {
			cv, ok := r.ConvergenceMS[class]
			if !ok || cv.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f/%.0f", cv.P50, cv.P99)
		})
	}
	row("paid at channel, not PAID", func(r *Report) string { return fmt.Sprint(r.ConvergenceMS[ClassAll].NotPaid) })
	row("refunds first/retried/queued", func(r *Report) string {
		return fmt.Sprintf("%d/%d/%d", r.Refunds.SucceededFirstTry, r.Refunds.RetriedThenSucceeded, r.Refunds.QueuedForOperator)
	})
	row("crashes", func(r *Report) string { return fmt.Sprint(r.Crashes) })
	row("retention removed (logged)", func(r *Report) string {
		if r.Retention == nil {
			return "-"
		}
		return fmt.Sprint(retentionTotal(r.Retention.LoggedRemoved))
	})
	row("orders/s", func(r *Report) string { return fmt.Sprintf("%.1f", r.OrdersPerSecond) })
	row("settled", func(r *Report) string { return fmt.Sprint(r.Settled) })
	row("total time", func(r *Report) string { return msStr(r.Phases.TotalMS) })
	row("result", func(r *Report) string {
		if r.Passed {
			return "PASS"
		}
		return "FAIL " + strings.Join(r.Failing, ",")
	})
}

// settingsLabel says where a run's settings came from.
func settingsLabel(source string, seed uint64) string {
	if source == SettingsFixed {
		return "fixed"
	}
	return fmt.Sprintf("drawn from seed %d", seed)
}

// faultsLabel names the fault classes as --faults would.
func faultsLabel(classes []string) string {
	switch {
	case len(classes) == 0:
		return "none"
	case slices.Equal(classes, FaultClasses):
		return "all"
	}
	return strings.Join(classes, ",")
}

func sortedKeys(m map[string]int) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
}

func joinCounts(m map[string]int, sep string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, sep)
}

// joinWays is counts by way to pay, in AllPayWays' order, then any other key.
func joinWays(m map[string]int, sep string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	seen := map[string]bool{}
	for _, w := range AllPayWays() {
		if n, ok := m[w.String()]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", w, n))
			seen[w.String()] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !seen[k] {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, sep)
}

func joinMap(m map[string]string, sep string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+m[k])
	}
	return strings.Join(parts, sep)
}

func msStr(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(10 * time.Millisecond).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printQueue writes what the rush for the queued SKU saw.
func printQueue(w io.Writer, q *QueueReport) {
	if q == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("queued flash sale: %s, %d units, pace %d orders/s, wait %d s: %d buyers rushed at once; %d tickets given (%d a ticket they held), %d sold out at the order\n",
		q.SKU, q.Units, q.Pace, q.WaitSeconds, q.Rushers, q.Tickets, q.Replayed, q.SoldOutAtOrd)
	p("  the ends the buyers saw: %s; %d never saw one; the last %s after the rush began\n", joinCounts(q.Seen, "  "), q.Unanswered, msStr(q.LastAnswerMS))
	if len(q.GaveUp) > 0 {
		p("  why the buyers who never saw an end stopped following their tickets: %s\n", joinCounts(q.GaveUp, "  "))
	}
	p("  the longest pause between two tickets ending: %s, from %s after the rush began\n", msStr(q.LongestPauseMS), msStr(q.PauseAtMS))
	p("  tickets in the database: %s; of the orders the buyers saw, %d paid, %d left to their deadline, %d not paid (a fault or the deadline came first)\n",
		joinCounts(q.InDB, "  "), q.Paid, q.Left, q.PayFailed)
	if m := q.KillMidDrain; m != nil {
		p("  the first kill at %s met %d tickets ORDERED and %d WAITING%s\n", msStr(m.AtMS), m.Ordered, m.Waiting, midDrain(m.MidDrain))
	}
}

func midDrain(b bool) string {
	if b {
		return " (mid-drain)"
	}
	return " (not mid-drain)"
}

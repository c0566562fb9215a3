package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// Reconciliation at the end of a run: after the audit, the channel's clock moves
// on to the next morning (10:30 China time, when both bills of the run's days are out),
// the server is started again, and every day of the run is reconciled for both channels
// through the admin API, as an operator or the daily schedule would. With the system
// healthy, every difference is explained (see package reconcile): Unexplained is 0.

// shiftClock is the simulator's clock: the wall clock, plus an offset the harness sets to
// move the channel on to the next day once the run is over.
type shiftClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *shiftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// jumpTo moves the clock's now to t.
func (c *shiftClock) jumpTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(t)
}

// ReconciliationView is one report as the admin API shows it.
type ReconciliationView struct {
	ID          int64                            `json:"id"`
	Channel     string                           `json:"channel"`
	Date        string                           `json:"date"`
	BillRows    int                              `json:"bill_rows"`
	Counts      map[string]int                   `json:"counts"`
	Unexplained int                              `json:"unexplained"`
	Account     string                           `json:"account"`
	Layers      map[string]orderpay.LayerSummary `json:"layers"`
	Figures     orderpay.ReconFigures            `json:"figures"`
	Items       []struct {
		Layer       string `json:"layer"`
		Difference  int64  `json:"difference"`
		Class       string `json:"class"`
		Resolution  string `json:"resolution"`
		Explained   bool   `json:"explained"`
		Kind        string `json:"kind"`
		OutTradeNo  string `json:"out_trade_no"`
		OutRefundNo string `json:"out_refund_no"`
		BillAmount  int64  `json:"bill_amount"`
		LocalAmount int64  `json:"local_amount"`
		Detail      string `json:"detail"`
	} `json:"items"`
}

// Reconcile asks the server to reconcile one channel's bill of one day.
func (c *Client) Reconcile(ctx context.Context, channel, date string) (*ReconciliationView, error) {
	var v ReconciliationView
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/reconciliations", http.Header{"Authorization": {"Bearer " + c.AdminToken}},
		map[string]string{"channel": channel, "date": date}, &v)
	return &v, err
}

// ReconciliationSummary is what the end-of-run reconciliation found, over every report.
type ReconciliationSummary struct {
	Reports  []ReconciliationReport `json:"reports"`
	BillRows int                    `json:"bill_rows"`
	// Counts is the items per class; Resolutions the differences per resolution.
	Counts      map[string]int `json:"counts"`
	Resolutions map[string]int `json:"resolutions"`
	// Layers sums each layer over the reports: its differences, unexplained items and their
	// amount.
	Layers map[string]orderpay.LayerSummary `json:"layers"`
	// Planted is every fee and settlement fault the simulator planted, by kind, and what
	// reconciliation found of them; Missed the planted faults it did not find in their class
	// with their exact amount (the chaos test wants none).
	Planted []PlantedCount `json:"planted,omitempty"`
	Missed  int            `json:"missed"`
	// Unexplained is the unexplained differences that are no planted fault (the chaos test
	// wants 0), each listed in UnexplainedItems.
	Unexplained      int      `json:"unexplained"`
	UnexplainedItems []string `json:"unexplained_items,omitempty"`
	Error            string   `json:"error,omitempty"` // why it could not run, if it could not
	DurationMS       int64    `json:"duration_ms"`
}

// ReconciliationReport is one channel's bill of one day.
type ReconciliationReport struct {
	ID          int64                            `json:"id"`
	Channel     string                           `json:"channel"`
	Date        string                           `json:"date"`
	BillRows    int                              `json:"bill_rows"`
	Counts      map[string]int                   `json:"counts"`
	Unexplained int                              `json:"unexplained"`
	Layers      map[string]orderpay.LayerSummary `json:"layers"`
	Figures     orderpay.ReconFigures            `json:"figures"`
}

// runDays are the bill dates (China time) the run traded on.
func runDays(start, end time.Time) []string {
	var days []string
	for d := start; ; d = d.AddDate(0, 0, 1) {
		days = append(days, orderpay.BillDay(d))
		if orderpay.BillDay(d) == orderpay.BillDay(end) {
			return days
		}
	}
}

// reconcile runs the end-of-run reconciliation. It needs the server stopped (the audit
// stopped it) and leaves it stopped.
func (r *runner) reconcile(ctx context.Context) *ReconciliationSummary {
	began := time.Now()
	sum := &ReconciliationSummary{Counts: map[string]int{}, Resolutions: map[string]int{}, Layers: map[string]orderpay.LayerSummary{}}
	defer func() { sum.DurationMS = time.Since(began).Milliseconds() }()
	days := runDays(r.start, time.Now())
	last, _, _ := orderpay.BillDayRange(days[len(days)-1])
	r.simClock.jumpTo(last.AddDate(0, 0, 1).Add(10*time.Hour + 30*time.Minute))
	r.serverMu.Lock()
	defer r.serverMu.Unlock()
	if err := r.server.Start(ctx); err != nil {
		sum.Error = "server: " + err.Error()
		return sum
	}
	defer r.server.Stop()
	// Every fault the simulator planted in the bills of the run's days, by key; each found
	// is struck off.
	planted := map[string]sim.PlantedFault{}
	counts := map[sim.BillFaultKind]*PlantedCount{}
	for _, day := range days {
		for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
			for _, p := range r.env.sim.PlantedFaults(ch, day) {
				planted[plantKey(ch, day, p)] = p
				c := counts[p.Kind]
				if c == nil {
					c = &PlantedCount{Kind: string(p.Kind), Class: string(plantedClass[p.Kind])}
					counts[p.Kind] = c
				}
				c.Planted++
				c.PlantedFen += p.Amount
			}
		}
	}
	for _, day := range days {
		for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
			v, err := r.client.Reconcile(ctx, ch, day)
			if err != nil {
				sum.Error = fmt.Sprintf("%s %s: %v", ch, day, err)
				return sum
			}
			// The list leaves the items out; the report read back has them.
			full := &ReconciliationView{}
			if err := r.client.Call(ctx, http.MethodGet, fmt.Sprintf("%s/admin/reconciliations/%d", r.client.API, v.ID),
				http.Header{"Authorization": {"Bearer " + r.client.AdminToken}}, nil, full); err != nil {
				sum.Error = fmt.Sprintf("read report %d: %v", v.ID, err)
				return sum
			}
			sum.Reports = append(sum.Reports, ReconciliationReport{ID: v.ID, Channel: ch, Date: day, BillRows: v.BillRows,
				Counts: v.Counts, Unexplained: v.Unexplained, Layers: full.Layers, Figures: full.Figures})
			sum.BillRows += v.BillRows
			for l, ls := range full.Layers {
				acc := sum.Layers[l]
				acc.Differences += ls.Differences
				acc.Unexplained += ls.Unexplained
				acc.UnexplainedAmount += ls.UnexplainedAmount
				sum.Layers[l] = acc
			}
			for _, it := range full.Items {
				sum.Counts[it.Class]++
				if it.Resolution != "" {
					sum.Resolutions[it.Resolution]++
				}
				if it.Explained {
					continue
				}
				key := itemKey(ch, day, it.Class, it.OutTradeNo, it.OutRefundNo, it.Difference)
				if p, ok := planted[key]; ok {
					delete(planted, key)
					counts[p.Kind].Found++
					counts[p.Kind].FoundFen += p.Amount
					continue
				}
				sum.Unexplained++
				sum.UnexplainedItems = append(sum.UnexplainedItems, fmt.Sprintf("%s %s %s %s %s: bill %d, ours %d, difference %d: %s",
					ch, day, it.Class, it.OutTradeNo, it.OutRefundNo, it.BillAmount, it.LocalAmount, it.Difference, it.Detail))
			}
		}
	}
	for key, p := range planted {
		counts[p.Kind].MissedFaults = append(counts[p.Kind].MissedFaults, key)
		sum.Missed++
	}
	for _, k := range append(slices.Clone(sim.BillFaultKinds), sim.BillFaultRateChange) {
		if c := counts[k]; c != nil {
			slices.Sort(c.MissedFaults)
			sum.Planted = append(sum.Planted, *c)
		}
	}
	return sum
}

// printReconciliation writes the summary's lines of the report table.
func printReconciliation(w io.Writer, s *ReconciliationSummary) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\nreconciliation against the bills (%d reports, %d bill rows, %s):\n", len(s.Reports), s.BillRows, msStr(s.DurationMS))
	if s.Error != "" {
		fmt.Fprintf(w, "  could not run: %s\n", s.Error)
	}
	fmt.Fprintf(w, "  classes: %s\n", joinCounts(s.Counts, "  "))
	if len(s.Resolutions) > 0 {
		fmt.Fprintf(w, "  resolutions: %s\n", joinCounts(s.Resolutions, "  "))
	}
	for _, l := range orderpay.ReconLayers {
		ls := s.Layers[string(l)]
		fmt.Fprintf(w, "  layer %-10s differences %d, unexplained %d (%s yuan)\n", l, ls.Differences, ls.Unexplained,
			orderpay.FormatYuan(ls.UnexplainedAmount))
	}
	if len(s.Planted) > 0 {
		fmt.Fprintf(w, "  planted fee and settlement faults (found in their class with their exact amount):\n")
		fmt.Fprintf(w, "    %-20s %-26s %8s %8s %14s %14s\n", "kind", "class", "planted", "found", "planted yuan", "found yuan")
		for _, c := range s.Planted {
			fmt.Fprintf(w, "    %-20s %-26s %8d %8d %14s %14s\n", c.Kind, c.Class, c.Planted, c.Found, orderpay.FormatYuan(c.PlantedFen),
				orderpay.FormatYuan(c.FoundFen))
			for _, m := range c.MissedFaults {
				fmt.Fprintf(w, "      missed: %s\n", m)
			}
		}
	}
	fmt.Fprintf(w, "  unexplained differences (no planted fault): %d\n", s.Unexplained)
	for _, it := range s.UnexplainedItems {
		fmt.Fprintf(w, "    %s\n", it)
	}
}

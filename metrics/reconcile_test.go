package metrics_test

import (
	"testing"

	"orderpay"
	"orderpay/metrics"
)

// gauge is the value of the gauge name with labels channel and layer, and whether it is there.
func gauge(t *testing.T, m *metrics.Metrics, name, channel, layer string) (float64, bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["channel"] == channel && labels["layer"] == layer {
				return s.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// Each layer's unexplained money and items of the latest day's report, per channel: a
// stored report sets all three layers; the same day run again replaces them; an earlier
// day run late leaves the later day's; another channel has its own.
func TestReconciliationGaugesShowTheLatestDaysLayers(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	const fen, items = "orderpay_reconciliation_unexplained_fen", "orderpay_reconciliation_unexplained"
	check := func(when, channel string, want map[orderpay.ReconLayer][2]float64) {
		t.Helper()
		for _, l := range orderpay.ReconLayers {
			gotFen, ok1 := gauge(t, m, fen, channel, string(l))
			gotItems, ok2 := gauge(t, m, items, channel, string(l))
			if !ok1 || !ok2 || gotFen != want[l][0] || gotItems != want[l][1] {
				t.Errorf("%s: %s %s: %v fen (%v), %v items (%v); want %v", when, channel, l, gotFen, ok1, gotItems, ok2, want[l])
			}
		}
	}
	m.ReconciliationStored("wechat", "2026-11-26", map[orderpay.ReconLayer]orderpay.LayerSummary{
		orderpay.LayerTrades:     {},
		orderpay.LayerFees:       {Differences: 3, Unexplained: 2, UnexplainedAmount: 12},
		orderpay.LayerSettlement: {Differences: 1, Unexplained: 1, UnexplainedAmount: 994},
	})
	check("the first report", "wechat", map[orderpay.ReconLayer][2]float64{orderpay.LayerFees: {12, 2}, orderpay.LayerSettlement: {994, 1}})

	m.ReconciliationStored("wechat", "2026-11-25", map[orderpay.ReconLayer]orderpay.LayerSummary{
		orderpay.LayerTrades: {Differences: 1, Unexplained: 1, UnexplainedAmount: 500},
	})
	check("an earlier day run late", "wechat", map[orderpay.ReconLayer][2]float64{orderpay.LayerFees: {12, 2}, orderpay.LayerSettlement: {994, 1}})

	m.ReconciliationStored("alipay", "2026-11-24", map[orderpay.ReconLayer]orderpay.LayerSummary{
		orderpay.LayerTrades: {Differences: 1, Unexplained: 1, UnexplainedAmount: 500},
	})
	check("another channel", "alipay", map[orderpay.ReconLayer][2]float64{orderpay.LayerTrades: {500, 1}})

	m.ReconciliationStored("wechat", "2026-11-26", map[orderpay.ReconLayer]orderpay.LayerSummary{
		orderpay.LayerFees: {Differences: 3},
	})
	check("the day run again, explained", "wechat", nil)
	check("the other channel after it", "alipay", map[orderpay.ReconLayer][2]float64{orderpay.LayerTrades: {500, 1}})
}

package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"orderpay"
	"orderpay/metrics"
	"orderpay/reconcile"
)

// The differences of each run reach Prometheus by channel and class: two Alipay orders
// paid, one of them with its attempt's amount then changed in the database (SIMULATED
// CORRUPTION, as in the amount-mismatch test). Each run adds its one AMOUNT_MISMATCH to
// orderpay_reconciliation_differences_total; the matched row is no difference and shows
// under no class.
func TestMetrics_EachRunCountsItsDifferencesByClass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := metrics.New()
	rec, err := reconcile.New(reconcile.Config{Store: b.store, Payments: b.payments, Clock: b.clock, Observer: m, Logger: slog.New(slog.DiscardHandler), Fees: b.fees,
		Bills: map[string]orderpay.BillSource{orderpay.ChannelAlipay: b.ali, orderpay.ChannelWechat: b.wx}})
	if err != nil {
		t.Fatal(err)
	}
	fine, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	b.waitOrder(t, fine, orderpay.OrderPaid)
	bad, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	b.waitOrder(t, bad, orderpay.OrderPaid)
	if _, err := b.store.DB().ExecContext(ctx, `UPDATE channel_orders SET amount = amount - 100 WHERE out_trade_no = ?`, outTradeNo(bad)); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(morning)

	const mismatch = `orderpay_reconciliation_differences_total{channel="alipay",class="AMOUNT_MISMATCH"} `
	for run, want := range []string{"1", "2"} {
		rep, err := rec.Run(ctx, orderpay.ChannelAlipay, day)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Counts[orderpay.ReconAmountMismatch] != 1 || rep.Counts[orderpay.ReconMatched] != 1 {
			t.Fatalf("run %d: report %+v", run+1, rep)
		}
		page := scrape(t, m)
		if got := sample(page, mismatch); got != want {
			t.Fatalf("run %d: %s= %q, want %s\n%s", run+1, mismatch, got, want, page)
		}
		for _, line := range strings.Split(page, "\n") {
			if strings.HasPrefix(line, "orderpay_reconciliation_differences_total{") && !strings.HasPrefix(line, mismatch) {
				t.Fatalf("run %d: a difference counted that the report does not have: %s", run+1, line)
			}
		}
	}
}

// scrape reads the metrics page as Prometheus would.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rr.Body)
	return string(body)
}

// sample is the value of the series whose line starts with prefix, or "" if none.
func sample(page, prefix string) string {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return ""
}

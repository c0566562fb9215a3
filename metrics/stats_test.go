package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"orderpay"
	"orderpay/clocktest"
)

type statsFunc func(ctx context.Context) (*orderpay.Stats, error)

func (f statsFunc) Stats(ctx context.Context) (*orderpay.Stats, error) { return f(ctx) }

func gauge(t *testing.T, m *Metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return value(metric), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

// The gauges show the store's counts at scrape time; the outbox lag is the age of the
// oldest unpublished message on the clock; statuses with no rows show 0.
func TestStatsGaugesReadTheStoreAtScrape(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := clocktest.New(t0)
	st := &orderpay.Stats{Orders: map[orderpay.OrderStatus]int64{orderpay.OrderPaid: 7}, Payments: map[orderpay.PaymentStatus]int64{},
		PendingQueries: 5, FlaggedPendingQueries: 2, OutboxUnpublished: 3, OldestUnpublished: t0.Add(-90 * time.Second),
		WebhookDeliveries: map[string]int64{"FAILED": 1}}
	m := New()
	m.CollectStats(statsFunc(func(context.Context) (*orderpay.Stats, error) { return st, nil }), clock, 0, nil)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"orderpay_store_stats_up", nil, 1},
		{"orderpay_orders", map[string]string{"status": "PAID"}, 7},
		{"orderpay_orders", map[string]string{"status": "CANCELLED"}, 0},
		{"orderpay_payments", map[string]string{"status": "SUCCESS"}, 0},
		{"orderpay_pending_queries", map[string]string{"flagged": "false"}, 3},
		{"orderpay_pending_queries", map[string]string{"flagged": "true"}, 2},
		{"orderpay_outbox_unpublished", nil, 3},
		{"orderpay_outbox_lag_seconds", nil, 90},
		{"orderpay_webhook_deliveries", map[string]string{"status": "FAILED"}, 1},
	} {
		if got, ok := gauge(t, m, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	st.OutboxUnpublished, st.OldestUnpublished = 0, time.Time{}
	if got, _ := gauge(t, m, "orderpay_outbox_lag_seconds", nil); got != 0 {
		t.Errorf("lag with nothing unpublished = %v", got)
	}
}

// A store that cannot answer within the timeout leaves the gauges out and says so, and the
// scrape still serves every other metric.
func TestStatsGaugesGoMissingWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	m := New()
	m.CollectStats(statsFunc(func(ctx context.Context) (*orderpay.Stats, error) {
		<-ctx.Done()
		return nil, errors.New("database unreachable")
	}), nil, 10*time.Millisecond, nil)
	m.Notification("alipay", "applied")
	if up, ok := gauge(t, m, "orderpay_store_stats_up", nil); !ok || up != 0 {
		t.Fatalf("stats_up = %v (found %v), want 0", up, ok)
	}
	if _, ok := gauge(t, m, "orderpay_orders", nil); ok {
		t.Fatal("order gauges shown without a reading")
	}
	if n, ok := gauge(t, m, "orderpay_notifications_total", map[string]string{"result": "applied"}); !ok || n != 1 {
		t.Fatalf("the counters went missing too: %v %v", n, ok)
	}
}

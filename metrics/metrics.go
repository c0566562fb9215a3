// Package metrics exposes orderpay's counters to Prometheus at /metrics.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"orderpay"
)

// Metrics is one registry with orderpay's metrics. It implements orderpay.Observer.
type Metrics struct {
	reg              *prometheus.Registry
	notifications    *prometheus.CounterVec
	queries          *prometheus.CounterVec
	autoRefunds      *prometheus.CounterVec
	queriesExhausted *prometheus.CounterVec
}

var _ orderpay.Observer = (*Metrics)(nil)

// New returns a registry with orderpay's metrics and the Go runtime's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_notifications_total",
			Help: "Channel notifications received, by channel and result (applied, duplicate, ignored, rejected).",
		}, []string{"channel", "result"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_channel_queries_total",
			Help: "Trade queries, by channel, trigger (schedule, sweep, poll, notification, close, scan, admin, reconcile) and outcome.",
		}, []string{"channel", "trigger", "outcome"}),
		autoRefunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_auto_refunds_total",
			Help: "Payments refunded automatically because the order could not take them, by channel and reason.",
		}, []string{"channel", "reason"}),
		queriesExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_queries_exhausted_total",
			Help: "Attempts still open after every scheduled query, flagged for reconciliation (an alert).",
		}, []string{"channel"}),
	}
	m.reg.MustRegister(m.notifications, m.queries, m.autoRefunds, m.queriesExhausted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where more metrics can be registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

func (m *Metrics) Notification(channel, result string) {
	m.notifications.WithLabelValues(channel, result).Inc()
}

func (m *Metrics) Query(channel, trigger string, outcome orderpay.Outcome) {
	m.queries.WithLabelValues(channel, trigger, string(outcome)).Inc()
}

func (m *Metrics) AutoRefund(channel, reason string) {
	m.autoRefunds.WithLabelValues(channel, reason).Inc()
}

func (m *Metrics) QueriesExhausted(channel string) { m.queriesExhausted.WithLabelValues(channel).Inc() }

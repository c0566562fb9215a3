// Package metrics exposes orderpay's counters to Prometheus at /metrics. Counters and the
// convergence histogram count what this process saw since it started; the gauges of
// orders, payments, pending queries, the outbox and webhook deliveries are read from the
// database at scrape time (stats.go), so they are true for every instance and survive a
// restart.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"orderpay"
	"orderpay/webhook"
)

// Metrics is one registry with orderpay's metrics. It implements orderpay.Observer.
type Metrics struct {
	reg                   *prometheus.Registry
	notificationsReceived *prometheus.CounterVec
	notificationsVerified *prometheus.CounterVec
	notificationsUnlogged *prometheus.CounterVec
	convergence           *prometheus.HistogramVec
	reconDifferences      *prometheus.CounterVec
	reconUnexplainedFen   *prometheus.GaugeVec
	reconUnexplained      *prometheus.GaugeVec
	// reconDay is, per channel, the bill date of the report the reconciliation gauges
	// show: the latest day stored, so that a run of an older day does not hide it.
	reconMu          sync.Mutex
	reconDay         map[string]string
	webhookAttempts  *prometheus.CounterVec
	webhookDead      *prometheus.CounterVec
	notifications    *prometheus.CounterVec
	queries          *prometheus.CounterVec
	autoRefunds      *prometheus.CounterVec
	refundAnswers    *prometheus.CounterVec
	queriesExhausted *prometheus.CounterVec
	unconfirmed      *prometheus.CounterVec
	workerPasses     *prometheus.HistogramVec
}

var (
	_ orderpay.Observer = (*Metrics)(nil)
	_ webhook.Observer  = (*Metrics)(nil)
)

// New returns a registry with orderpay's metrics and the Go runtime's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		notificationsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_notifications_received_total",
			Help: "Channel notifications received at /notify, by channel, before any check.",
		}, []string{"channel"}),
		notificationsVerified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_notifications_verified_total",
			Help: "Channel notifications whose signature and identity verified, by channel (the rest were forged, tampered or malformed).",
		}, []string{"channel"}),
		notificationsUnlogged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_notifications_unlogged_total",
			Help: "Notifications that failed verification and were counted, not stored: their channel or source address was over the notification log's rate (a flood of forgeries).",
		}, []string{"channel"}),
		convergence: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderpay_payment_convergence_seconds",
			Help: "From the paid attempt's creation (the buyer asked to pay) to the payment's SUCCESS, by channel and source (notification or query).",
			// The buyer's scan takes seconds; a lost notification costs the query
			// schedule's 10 s … 10 min steps; the tail reaches the pay deadline.
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 90, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
		}, []string{"channel", "source"}),
		reconDifferences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_reconciliation_differences_total",
			Help: "Rows of the channels' bills that reconciliation did not match, by channel and class.",
		}, []string{"channel", "class"}),
		reconUnexplainedFen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderpay_reconciliation_unexplained_fen",
			Help: "Money (fen) the unexplained differences of the latest day's reconciliation report are about, by channel and layer (TRADES, FEES, SETTLEMENT); above 0 an operator must look. Set by the instance that stored the report.",
		}, []string{"channel", "layer"}),
		reconUnexplained: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderpay_reconciliation_unexplained",
			Help: "Unexplained differences (items) of the latest day's reconciliation report, by channel and layer; a layer that could not be checked counts one.",
		}, []string{"channel", "layer"}),
		reconDay: map[string]string{},
		unconfirmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_bus_unconfirmed_total",
			Help: "Messages on the bus a consumer did not act on because the database does not confirm them (a forged event), by consumer and subject.",
		}, []string{"consumer", "subject"}),
		webhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_webhook_attempts_total",
			Help: "Webhook POSTs to business systems, by subscriber, kind (schedule or resend) and result (delivered or failed).",
		}, []string{"subscriber", "kind", "result"}),
		webhookDead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_webhook_dead_total",
			Help: "Webhook deliveries whose every scheduled attempt failed (an alert: resend by hand).",
		}, []string{"subscriber"}),
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
		refundAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_refund_answers_total",
			Help: "Answers to refund calls and refund queries, by channel and class: REFUNDED, REFUND_PENDING, REFUND_RETRY (refused for now: sent again later), REJECTED (refused for good), REFUND_ABNORMAL (ended without reaching the buyer), UNKNOWN.",
		}, []string{"channel", "outcome"}),
		workerPasses: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderpay_worker_pass_seconds",
			Help: "How long one pass of a background worker took (timeout close, refunds, stock holds, status counts, retention, webhooks…), by worker: a pass that grows with the history shows here first.",
			// A sweeper's pass that finds nothing to do takes tens of microseconds, one with
			// work a few milliseconds; a retention pass or a slow database takes seconds.
			// Fine at the low end, so that a pass's median is known to a few microseconds.
			Buckets: []float64{0.00001, 0.000015, 0.00002, 0.000025, 0.00003, 0.000035, 0.00004, 0.00005, 0.00006, 0.00007,
				0.00008, 0.0001, 0.000125, 0.00015, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
				0.1, 0.2, 0.5, 1, 2, 5, 10, 30},
		}, []string{"worker"}),
		queriesExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderpay_queries_exhausted_total",
			Help: "Attempts still open after every scheduled query, flagged for reconciliation (an alert).",
		}, []string{"channel"}),
	}
	build := orderpay.Build()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderpay_build_info",
		Help:        "Always 1; its labels say which orderpay this is: the release, the VCS revision it was built from, and the Go version.",
		ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "goversion": build.GoVersion}})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo)
	m.reg.MustRegister(m.notifications, m.queries, m.autoRefunds, m.refundAnswers, m.queriesExhausted, m.notificationsReceived, m.notificationsVerified, m.notificationsUnlogged,
		m.convergence, m.workerPasses, m.reconDifferences, m.reconUnexplainedFen, m.reconUnexplained, m.webhookAttempts, m.webhookDead, m.unconfirmed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CollectStoreCounters registers the store's own counts, read at each scrape: transactions
// committed, the commits they took, and rows its writes changed, since the process started.
func (m *Metrics) CollectStoreCounters(read func() (transactions, commits, rowsWritten int64)) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderpay_db_transactions_total",
			Help: "Database transactions committed by this process."}, func() float64 { tx, _, _ := read(); return float64(tx) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderpay_db_commits_total",
			Help: "Database commits by this process: on SQLite, transactions queued together commit as one group."},
			func() float64 { _, c, _ := read(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderpay_db_rows_written_total",
			Help: "Rows inserted, updated or deleted by this process's writes."}, func() float64 { _, _, rows := read(); return float64(rows) }))
}

// CollectRefusedTransitions registers the transitions the store refused because their
// machine does not have them, by entity, read at each scrape (docs/design.md §4). Any
// is a bug: a caller asked for a move its state machine forbids.
func (m *Metrics) CollectRefusedTransitions(read func() map[string]int64) {
	m.reg.MustRegister(mapCounter{read: read, desc: prometheus.NewDesc("orderpay_store_transitions_refused_total",
		"Transitions the store refused, writing nothing, because the entity's state machine does not have them, by entity.",
		[]string{"entity"}, nil)})
}

// mapCounter is a counter by one label, read from a map at each scrape.
type mapCounter struct {
	desc *prometheus.Desc
	read func() map[string]int64
}

func (c mapCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c mapCounter) Collect(ch chan<- prometheus.Metric) {
	for k, v := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v), k)
	}
}

// Unconfirmed counts a message on the bus that consumer did not act on because the
// database does not confirm it: a forgery.
func (m *Metrics) Unconfirmed(consumer, subject string) {
	m.unconfirmed.WithLabelValues(consumer, subject).Inc()
}

// Registry is where more metrics can be registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format, gathered at most once per
// SnapshotEvery (snapshots).
func (m *Metrics) Handler() http.Handler {
	return &snapshots{g: m.reg, every: SnapshotEvery, now: time.Now}
}

func (m *Metrics) Notification(channel, result string) {
	m.notifications.WithLabelValues(channel, result).Inc()
}

func (m *Metrics) Query(channel, trigger string, outcome orderpay.Outcome) {
	m.queries.WithLabelValues(channel, trigger, string(outcome)).Inc()
}

func (m *Metrics) AutoRefund(channel, reason string) {
	m.autoRefunds.WithLabelValues(channel, reason).Inc()
}

func (m *Metrics) RefundAnswer(channel string, outcome orderpay.Outcome) {
	m.refundAnswers.WithLabelValues(channel, string(outcome)).Inc()
}

func (m *Metrics) QueriesExhausted(channel string) { m.queriesExhausted.WithLabelValues(channel).Inc() }

func (m *Metrics) NotificationReceived(channel string, verified bool) {
	m.notificationsReceived.WithLabelValues(channel).Inc()
	if verified {
		m.notificationsVerified.WithLabelValues(channel).Inc()
	}
}

func (m *Metrics) NotificationUnlogged(channel string) {
	m.notificationsUnlogged.WithLabelValues(channel).Inc()
}

// WorkerPass records one pass of a background worker and how long it took.
func (m *Metrics) WorkerPass(worker string, took time.Duration) {
	m.workerPasses.WithLabelValues(worker).Observe(took.Seconds())
}

func (m *Metrics) PaymentConverged(channel, source string, latency time.Duration) {
	m.convergence.WithLabelValues(channel, source).Observe(latency.Seconds())
}

// ReconciliationDifferences counts n differences of one class; reconciliation calls it
// once per class and bill.
func (m *Metrics) ReconciliationDifferences(channel, class string, n int) {
	if n > 0 {
		m.reconDifferences.WithLabelValues(channel, class).Add(float64(n))
	}
}

// ReconciliationStored sets the unexplained gauges from a stored report's layers, unless
// the gauges already show a later day of the channel: a day reconciled again replaces its
// figures, an earlier day run late does not.
func (m *Metrics) ReconciliationStored(channel, date string, layers map[orderpay.ReconLayer]orderpay.LayerSummary) {
	m.reconMu.Lock()
	defer m.reconMu.Unlock()
	if date < m.reconDay[channel] {
		return
	}
	m.reconDay[channel] = date
	for _, l := range orderpay.ReconLayers {
		sum := layers[l]
		m.reconUnexplainedFen.WithLabelValues(channel, string(l)).Set(float64(sum.UnexplainedAmount))
		m.reconUnexplained.WithLabelValues(channel, string(l)).Set(float64(sum.Unexplained))
	}
}

func (m *Metrics) WebhookAttempt(subscriber, kind, result string) {
	m.webhookAttempts.WithLabelValues(subscriber, kind, result).Inc()
}

func (m *Metrics) WebhookDead(subscriber string) { m.webhookDead.WithLabelValues(subscriber).Inc() }

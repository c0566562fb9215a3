package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderpay"
)

// StatsTimeoutDefault bounds the store's counting queries at each scrape, so that a slow
// database makes the gauges go missing (orderpay_store_stats_up 0) rather than hanging the
// scrape.
const StatsTimeoutDefault = 2 * time.Second

// Statuses shown even at zero, so that a series does not vanish when its last row moves on.
var (
	orderStatuses = []orderpay.OrderStatus{orderpay.OrderPendingPayment, orderpay.OrderPaid, orderpay.OrderShipped,
		orderpay.OrderReceived, orderpay.OrderCompleted, orderpay.OrderCancelled, orderpay.OrderRefunded}
	paymentStatuses = []orderpay.PaymentStatus{orderpay.PaymentUnpaid, orderpay.PaymentPaying, orderpay.PaymentSuccess,
		orderpay.PaymentFailed, orderpay.PaymentClosed}
	deliveryStatuses = []string{"PENDING", "SUCCEEDED", "FAILED"}
)

var (
	descUp        = prometheus.NewDesc("orderpay_store_stats_up", "1 if the gauges below were read from the database at this scrape, 0 if the read failed or timed out.", nil, nil)
	descOrders    = prometheus.NewDesc("orderpay_orders", "Orders by status.", []string{"status"}, nil)
	descPayments  = prometheus.NewDesc("orderpay_payments", "Payment orders by status.", []string{"status"}, nil)
	descPending   = prometheus.NewDesc("orderpay_pending_queries", "Rows of the pending-query table (one per PAYING attempt), by whether their queries ran out (flagged).", []string{"flagged"}, nil)
	descOutbox    = prometheus.NewDesc("orderpay_outbox_unpublished", "Outbox messages not yet published to the broker.", nil, nil)
	descOutboxLag = prometheus.NewDesc("orderpay_outbox_lag_seconds", "Age of the oldest unpublished outbox message; 0 when every message is published.", nil, nil)
	descWebhooks  = prometheus.NewDesc("orderpay_webhook_deliveries", "Webhook deliveries by status (FAILED: dead, waiting for a resend).", []string{"status"}, nil)

	descRefundsInFlight      = prometheus.NewDesc("orderpay_refunds_in_flight", "Refunds on their way: to be sent (again, after a refusal for now or an unknown answer) or accepted and settling.", nil, nil)
	descRefundsInFlightAge   = prometheus.NewDesc("orderpay_refunds_in_flight_oldest_seconds", "Age of the oldest refund on its way; 0 when there is none.", nil, nil)
	descRefundsNeedAction    = prometheus.NewDesc("orderpay_refunds_needing_action", "Refunds in the operators' queue: money owed that will not go back by itself (refused for good, ended abnormally, retries ran out).", nil, nil)
	descRefundsNeedActionAge = prometheus.NewDesc("orderpay_refunds_needing_action_oldest_seconds", "How long the oldest refund of the operators' queue has waited; 0 when the queue is empty. Alert on any value above 0.", nil, nil)
)

// statsCollector reads the store at scrape time.
type statsCollector struct {
	src     orderpay.StatsReader
	clock   orderpay.Clock
	timeout time.Duration
	log     *slog.Logger
}

// CollectStats registers the gauges read from src at every scrape, each read bounded by
// timeout (StatsTimeoutDefault if 0).
func (m *Metrics) CollectStats(src orderpay.StatsReader, clock orderpay.Clock, timeout time.Duration, log *slog.Logger) {
	if clock == nil {
		clock = orderpay.SystemClock{}
	}
	if timeout <= 0 {
		timeout = StatsTimeoutDefault
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.reg.MustRegister(&statsCollector{src: src, clock: clock, timeout: timeout, log: log})
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descOrders, descPayments, descPending, descOutbox, descOutboxLag, descWebhooks,
		descRefundsInFlight, descRefundsInFlightAge, descRefundsNeedAction, descRefundsNeedActionAge} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.src.Stats(ctx)
	if err != nil {
		c.log.Warn("metrics: reading the store's counts failed", "err", err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, s := range statusesOf(orderStatuses, st.Orders) {
		gauge(descOrders, st.Orders[s], string(s))
	}
	for _, s := range statusesOf(paymentStatuses, st.Payments) {
		gauge(descPayments, st.Payments[s], string(s))
	}
	for _, s := range statusesOf(deliveryStatuses, st.WebhookDeliveries) {
		gauge(descWebhooks, st.WebhookDeliveries[s], s)
	}
	gauge(descPending, st.PendingQueries-st.FlaggedPendingQueries, "false")
	gauge(descPending, st.FlaggedPendingQueries, "true")
	gauge(descOutbox, st.OutboxUnpublished)
	gauge(descRefundsInFlight, st.RefundsInFlight)
	gauge(descRefundsNeedAction, st.RefundsNeedingAction)
	now := c.clock.Now()
	for d, since := range map[*prometheus.Desc]time.Time{descOutboxLag: st.OldestUnpublished,
		descRefundsInFlightAge: st.OldestRefundInFlight, descRefundsNeedActionAge: st.OldestNeedingAction} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, ageSeconds(now, since))
	}
}

// ageSeconds is how long ago since was, 0 for a zero time.
func ageSeconds(now, since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return max(now.Sub(since).Seconds(), 0)
}

// statusesOf is the known statuses and any other the store returned.
func statusesOf[S ~string](known []S, got map[S]int64) []S {
	out := append([]S(nil), known...)
	for s := range got {
		found := false
		for _, k := range known {
			found = found || k == s
		}
		if !found {
			out = append(out, s)
		}
	}
	return out
}

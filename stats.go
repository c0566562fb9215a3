package orderpay

import (
	"context"
	"time"
)

// Stats are counts read from the store at one moment, for the gauges at /metrics: what a
// counter kept in memory cannot know after a restart, or across instances.
type Stats struct {
	Orders   map[OrderStatus]int64   // orders by status
	Payments map[PaymentStatus]int64 // payment orders by status
	// PendingQueries is the size of the pending-query table (the safety net of active
	// queries); FlaggedPendingQueries those of its rows whose queries ran out.
	PendingQueries        int64
	FlaggedPendingQueries int64
	// OutboxUnpublished counts the outbox rows the relay has not published yet, and
	// OldestUnpublished is when the oldest of them was written (zero when there are none):
	// the outbox lag.
	OutboxUnpublished int64
	OldestUnpublished time.Time
	// WebhookDeliveries counts the webhook deliveries by status (PENDING, SUCCEEDED, FAILED).
	WebhookDeliveries map[string]int64
	// RefundsInFlight counts the refunds on their way (PENDING or PROCESSING: sent, to be
	// sent again, or accepted and settling), the oldest made at OldestRefundInFlight; and
	// RefundsNeedingAction those in the operators' queue, the oldest queued at
	// OldestNeedingAction. Zero times when there are none.
	RefundsInFlight      int64
	OldestRefundInFlight time.Time
	RefundsNeedingAction int64
	OldestNeedingAction  time.Time
}

// StatsReader reads Stats. Each call runs a handful of counting queries over indexed or
// small tables; callers bound it with a short timeout.
type StatsReader interface {
	Stats(ctx context.Context) (*Stats, error)
}

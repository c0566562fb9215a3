package chaos

import (
	"context"
	"testing"

	"orderpay/sqlstore/storetest"
)

// A small queued flash sale through a real server, and the same burst unqueued beside it:
// every buyer is answered (an order, or sold out), exactly the units are ordered and held,
// none oversold, every ticket ended once with its order, and the probes measured the rest
// of the shop during the burst.
func TestQueuedFlashSaleAnswersEveryBuyerAndOversellsNothing(t *testing.T) {
	t.Parallel()
	queuedFlashSale(t, "")
}

// The same on PostgreSQL (skipped without ORDERPAY_TEST_PG).
func TestQueuedFlashSaleAnswersEveryBuyerAndOversellsNothingPostgres(t *testing.T) {
	t.Parallel()
	queuedFlashSale(t, storetest.PostgresDSN(t))
}

func queuedFlashSale(t *testing.T, db string) {
	if testing.Short() {
		t.Skip("two servers and two bursts of 2,000 buyers")
	}
	const buyers, units = 2000, 100
	rep, err := QueuedFlashBench(context.Background(), QueuedFlashConfig{Buyers: buyers, Units: units, Buckets: 4, Concurrency: 64,
		Compare: true, DB: db, Binary: serverBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass() {
		t.Errorf("failures: %v", rep.Failures)
	}
	q, u := rep.Queued, rep.Unqueued
	if q == nil || u == nil {
		t.Fatalf("runs: queued %v, unqueued %v", q, u)
	}
	for _, run := range []*FlashSaleRun{q, u} {
		answered := run.Ordered + run.SoldOut + run.Expired + run.Refused
		switch {
		case run.Ordered != units || run.Orders != units || run.OrderUnits != units:
			t.Errorf("%s: %d buyers told they have an order, %d orders of %d units; want %d", run.Mode, run.Ordered, run.Orders, run.OrderUnits, units)
		case run.Oversold != 0 || run.Available != 0 || run.Locked+run.Sold != units || run.Total != units:
			t.Errorf("%s: stock %d/%d/%d of %d, oversold %d", run.Mode, run.Available, run.Locked, run.Sold, run.Total, run.Oversold)
		case answered != buyers || run.Unanswered != 0 || len(run.Errors) != 0 || run.SoldOut != buyers-units:
			t.Errorf("%s: %d of %d buyers answered (%d sold out), %d unanswered, errors %v", run.Mode, answered, buyers, run.SoldOut, run.Unanswered, run.Errors)
		case run.SKUsMS.Count == 0 || run.PayMS.Count == 0 || run.SKUsMS.P99 <= 0 || run.PayMS.P99 <= 0:
			t.Errorf("%s: the probes measured nothing: catalogue %+v (errors %v), pay %+v (errors %v)", run.Mode, run.SKUsMS, run.SKUsErrors, run.PayMS, run.PayErrors)
		case run.LastAnswerSeconds <= 0 || run.DrainOrdersPerSecond <= 0:
			t.Errorf("%s: last answer %.3f s, drain %.1f orders/s", run.Mode, run.LastAnswerSeconds, run.DrainOrdersPerSecond)
		}
	}
	// Queued: every buyer got a ticket or was told sold out at its order, and every ticket
	// ended, ORDERED ones with an order of their own.
	if q.Tickets+q.SoldOutAtOrder != buyers || q.Expired != 0 || q.Refused != 0 {
		t.Errorf("queued: %d tickets and %d sold out at the order for %d buyers; %d expired, %d refused", q.Tickets, q.SoldOutAtOrder, buyers, q.Expired, q.Refused)
	}
	if n := sumMap(q.TicketsDB); n != q.Tickets || q.TicketsDB[TicketOrdered] != units || q.Unended != 0 || q.SharedNo != 0 || q.Orphans != 0 {
		t.Errorf("queued: tickets in the database %v (given %d), %d waiting, %d sharing an order, %d orders without one", q.TicketsDB, q.Tickets, q.Unended, q.SharedNo, q.Orphans)
	}
	// Unqueued: no tickets, every answer at the order.
	if u.Tickets != 0 || u.SoldOutAtOrder != buyers-units {
		t.Errorf("unqueued: %d tickets, %d sold out at the order", u.Tickets, u.SoldOutAtOrder)
	}
}

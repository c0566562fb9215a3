package chaos

import (
	"testing"

	"orderpay/sqlstore/storetest"
)

// A chaos run with a queued flash SKU: a rush of buyers at it while the others order and
// pay, under every channel fault, two kills (the first while the queue drains) and a NATS
// restart while it drains. Every invariant holds, I10 included: every ticket the buyers got
// ended once, as its buyer was told, and only the ORDERED ones have an order, their own.
func TestQueuedFlashWithCrashesAndANATSRestartKeepsEveryInvariant(t *testing.T) {
	t.Parallel()
	queuedChaos(t, "")
}

// The same on PostgreSQL (skipped without ORDERPAY_TEST_PG).
func TestQueuedFlashWithCrashesAndANATSRestartKeepsEveryInvariantPostgres(t *testing.T) {
	t.Parallel()
	queuedChaos(t, storetest.PostgresDSN(t))
}

func queuedChaos(t *testing.T, db string) {
	const units = 30
	rep := scenario(t, Config{Orders: 150, Seed: 5, Crashes: 2, NATSRestarts: 1, QueuedFlash: units, DB: db})
	for _, inv := range Invariants {
		if n := rep.Violations[inv.ID]; n > 0 {
			for _, v := range rep.ViolationList {
				if v.Invariant == inv.ID {
					t.Errorf("%s order %s sku %s: %s", v.Invariant, v.OrderNo, v.SKU, v.Detail)
				}
			}
		}
	}
	if !rep.Passed || !rep.Settled {
		t.Errorf("passed %v (failing %v), settled %v (open %v)", rep.Passed, rep.Failing, rep.Settled, rep.Unsettled)
	}
	q := rep.Queue
	if q == nil {
		t.Fatal("no queue report")
	}
	// Every rusher was told its ticket's end; the queue sold its units (some twice over, when
	// an order left to its deadline gave its unit back), and the rest were told so.
	seen := q.Seen[TicketOrdered] + q.Seen[TicketSoldOut] + q.Seen[TicketExpired] + q.Seen[TicketRefused]
	if q.Rushers != 2*units || q.Unanswered != 0 || seen != q.Rushers || q.Tickets+q.SoldOutAtOrd != q.Rushers {
		t.Errorf("queue: %d rushers, %d tickets, %d sold out at the order, ends seen %v, %d unanswered (why they stopped following: %v; the longest pause between two ends %d ms, from %d ms after the rush began)",
			q.Rushers, q.Tickets, q.SoldOutAtOrd, q.Seen, q.Unanswered, q.GaveUp, q.LongestPauseMS, q.PauseAtMS)
	}
	// A unit sells again only when an unpaid order gives it back at its deadline, so there
	// are at most as many ORDERED tickets as units and orders left or not paid. How many
	// come back while tickets still wait is the run's timing (a slow machine, many payments
	// a fault stopped): when every rusher got one, nobody was sold out (that every rusher
	// was told an end is checked above, and by I10 that it is the ticket's).
	ordered := q.InDB[TicketOrdered]
	if q.InDB[TicketWaiting] != 0 || ordered < units || ordered > units+q.Left+q.PayFailed || q.Paid == 0 {
		t.Errorf("queue: tickets in the database %v, ends seen %v, %d paid, %d left, %d not paid", q.InDB, q.Seen, q.Paid, q.Left, q.PayFailed)
	}
	// The first kill and the broker's restart met the queue draining.
	if m := q.KillMidDrain; m == nil || !m.MidDrain {
		t.Errorf("the first kill: %+v, want it mid-drain", m)
	}
	if len(rep.NATSRestarts) != 1 || !rep.NATSRestarts[0].MidDrain || rep.NATSRestarts[0].DowntimeMS < NATSDowntime.Milliseconds() {
		t.Errorf("NATS restarts %+v: want one, mid-drain, down at least %s", rep.NATSRestarts, NATSDowntime)
	}
}

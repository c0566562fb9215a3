package explore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"orderpay"
	"orderpay/chaos/audit"
)

// openAdmin connects to the PostgreSQL server the explorer makes its databases on.
func (e *Explorer) openAdmin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.admin != nil {
		return nil
	}
	db, err := sql.Open("pgx", e.PG)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(8)
	if err := db.Ping(); err != nil {
		db.Close()
		return fmt.Errorf("explore: PostgreSQL at --db: %w", err)
	}
	e.admin = db
	return nil
}

func eventOf(m orderpay.Message) audit.Event {
	return audit.Event{Subject: m.Subject, MsgID: m.ID, Payload: m.Payload}
}

// settle lets the system come to rest, as time would: every notification the channel sent
// is delivered (it resends until acknowledged), and the clock moves on in steps past every
// deadline, close grace, refund retry and ticket expiry, with the relay (whose bus serves
// the tickets' messages) and every sweeper run at each.
// Errors are traced: a sweeper that fails now runs again at the next step.
func (w *World) settle(ctx context.Context, t *Trace) {
	in := w.In(0)
	grace := w.Profile.CloseGrace
	for i, d := range []time.Duration{0, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 4 * 24 * time.Hour, 16 * 24 * time.Hour} {
		w.Clock.Advance(d)
		if i == 0 {
			w.deliverAll(ctx, t)
		}
		for range 5 {
			before, _, _ := in.Store.Counters()
			for _, s := range []struct {
				name string
				fn   func() error
			}{
				{"bus", func() error { return w.drain(ctx, in) }},
				{"pending queries", func() error { _, err := in.Payments.QueryDue(ctx, 100, 1); return err }},
				{"timeout close", func() error { _, err := in.Orders.ExpireDue(ctx, grace, 100, 1); return err }},
				{"app payment close", func() error { _, err := in.Apps.CloseDue(ctx, grace, 100, 1); return err }},
				{"payment close", func() error { _, err := in.Payments.CloseDue(ctx, 2*grace, 100, 1); return err }},
				{"refunds", func() error { _, err := in.Payments.RefundDue(ctx, 100, 1); return err }},
				{"operator on duty", func() error { return w.operatorOnDuty(ctx, in) }},
				{"webhooks", func() error { _, err := in.Webhooks.RunOnce(ctx); return err }},
				{"stock holds", func() error { _, err := in.Orders.ReleaseExpiredHolds(ctx, 100); return err }},
				{"tickets", func() error { _, err := in.Orders.SweepTickets(ctx); return err }},
				{"bus", func() error { return w.drain(ctx, in) }},
			} {
				if err := s.fn(); err != nil {
					t.add("  settle: %s: %s", s.name, errText(err))
				}
			}
			if after, _, _ := in.Store.Counters(); after == before {
				break // nothing left to do at this time
			}
		}
	}
}

// operatorOnDuty sends each refund of the operators' queue again, as the operator on duty
// does once the channel can take it.
func (w *World) operatorOnDuty(ctx context.Context, in *Instance) error {
	queued, err := in.Payments.RefundsNeedingAction(ctx, 100)
	if err != nil {
		return err
	}
	for _, r := range queued {
		if _, err := in.Payments.RetryRefund(ctx, r.OutRefundNo, operator); err != nil {
			return err
		}
	}
	return nil
}

// deliverAll delivers every payment notification the channel sent, once more.
func (w *World) deliverAll(ctx context.Context, t *Trace) {
	// The simulator posts from goroutines of its own: wait until it has tried each.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		pending := false
		for _, n := range w.Sim.NotifyStats() {
			if n.OutRefundNo == "" && len(n.Attempts) == 0 {
				pending = true
			}
		}
		if !pending {
			break
		}
	}
	for _, trade := range w.mail.trades() {
		if err := w.deliver(ctx, w.In(0), trade, false); err != nil {
			t.add("  settle: notification of %s: %s", trade, errText(err))
		}
	}
}

// check audits the settled world: I1–I9 against the channel's ledger, and the machines.
func (w *World) check(ctx context.Context, t *Trace) []string {
	in := w.In(0)
	var fails []string
	res, err := audit.Audit(ctx, audit.Inputs{Store: in.Store, Ledger: w.Sim.Ledger(), Notifications: w.Sim.NotifyStats(), Events: w.Events, Now: w.Clock.Now()})
	if err != nil {
		return []string{"audit: " + err.Error()}
	}
	for _, name := range audit.Invariants {
		if n := res.Counts[name]; n > 0 {
			t.add("%s: %d violations", name, n)
		} else {
			t.add("%s: ok", name)
		}
	}
	for _, v := range res.Violations {
		t.add("  %s", v)
		fails = append(fails, v.String())
	}
	bad, err := w.checkMachines(ctx)
	if err != nil {
		return append(fails, "machines: "+err.Error())
	}
	for _, c := range checks {
		more, err := c(ctx, w)
		if err != nil {
			return append(fails, "checks: "+err.Error())
		}
		bad = append(bad, more...)
	}
	for _, b := range bad {
		t.add("  %s", b)
	}
	if len(bad) == 0 {
		t.add("machines: ok")
	}
	return append(fails, bad...)
}

// checks are the explorer's checks beside I1–I9 and the machines (ops_defects.go adds
// them); each returns what it found broken.
var checks []func(ctx context.Context, w *World) ([]string, error)

// machines are the entities whose history rows are checked against their machine.
var machines = map[string]orderpay.TransitionChecker{
	orderpay.EntityOrder:        orderpay.OrderMachine,
	orderpay.EntityPayment:      orderpay.PaymentMachine,
	orderpay.EntityChannelOrder: orderpay.ChannelOrderMachine,
	orderpay.EntityRefund:       orderpay.ChannelRefundMachine,
	orderpay.EntityShipment:     orderpay.ShipmentMachine,
	orderpay.EntityAfterSale:    orderpay.AfterSaleMachine,
	orderpay.EntityAppPayment:   orderpay.AppPaymentMachine,
}

// checkMachines finds every stored transition its machine does not allow, every one that
// does not start where the entity's last one ended, and every transition an instance's
// store refused (the code asked for one off its machine's table).
func (w *World) checkMachines(ctx context.Context) ([]string, error) {
	var bad []string
	for i, in := range w.inst {
		if in == nil {
			continue
		}
		for entity, n := range in.Store.RefusedTransitions() {
			if n > 0 {
				bad = append(bad, fmt.Sprintf("machine: instance %d asked for %d %s transitions off its machine", i+1, n, entity))
			}
		}
	}
	st := w.In(0).Store
	rows, err := st.DB().QueryContext(ctx, `SELECT entity, entity_no, from_status, event, to_status FROM history ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	last := map[string]string{}
	for rows.Next() {
		var entity, no, from, event, to string
		if err := rows.Scan(&entity, &no, &from, &event, &to); err != nil {
			return nil, err
		}
		m, ok := machines[entity]
		if !ok || from == "" || from == to && event == "" {
			last[entity+"/"+no] = to
			continue
		}
		if prev, seen := last[entity+"/"+no]; seen && prev != from {
			bad = append(bad, fmt.Sprintf("machine: %s %s moved from %s, but its last transition left it %s", entity, no, from, prev))
		}
		if !m.PermitsNames(from, event, to) {
			bad = append(bad, fmt.Sprintf("machine: %s %s %s --%s--> %s is not on its machine", entity, no, from, event, to))
		}
		last[entity+"/"+no] = to
	}
	return bad, rows.Err()
}

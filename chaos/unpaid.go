package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"orderpay"
	"orderpay/channel/sim"
)

// UnpaidCheck is what became of the orders of one behaviour whose buyer never pays
// (ReturnUnpaid, FalseOK): every one must end CANCELLED with nothing paid at the channel,
// so nothing is owed either way. It is the harness's own check beside the auditor's
// invariants, which hold for these orders as for every other.
type UnpaidCheck struct {
	Orders int `json:"orders"`
	// FinalStates counts the orders by their status at the audit.
	FinalStates map[string]int `json:"final_states"`
	// PaidAtChannel counts the orders with a trade the channel's ledger reports paid.
	PaidAtChannel int `json:"paid_at_channel"`
}

// OK reports whether every order ended CANCELLED with nothing paid at the channel.
func (u UnpaidCheck) OK() bool {
	return u.PaidAtChannel == 0 && u.FinalStates[string(orderpay.OrderCancelled)] == u.Orders
}

// unpaidCheck checks the orders nobody paid (by order number, their buyer's behaviour)
// against their statuses and the ledger.
func unpaidCheck(unpaid map[string]Behaviour, trades []tradeRow, ledger []sim.LedgerEntry, status map[string]string) map[string]UnpaidCheck {
	paid := map[string]bool{}
	for _, l := range ledger {
		if !l.PaidAt.IsZero() {
			paid[l.OutTradeNo] = true
		}
	}
	paidOrders := map[string]bool{}
	for _, t := range trades {
		if paid[t.OutTradeNo] {
			paidOrders[t.OrderNo] = true
		}
	}
	out := map[string]UnpaidCheck{}
	for _, b := range unpaidBehaviours {
		out[string(b)] = UnpaidCheck{FinalStates: map[string]int{}}
	}
	for _, no := range slices.Sorted(maps.Keys(unpaid)) {
		c := out[string(unpaid[no])]
		c.Orders++
		st := status[no]
		if st == "" {
			st = "missing"
		}
		c.FinalStates[st]++
		if paidOrders[no] {
			c.PaidAtChannel++
		}
		out[string(unpaid[no])] = c
	}
	return out
}

// orderStatuses is every order's status in the database, by order number.
func (r *runner) orderStatuses(ctx context.Context) (map[string]string, error) {
	rows, err := r.store.DB().QueryContext(ctx, `SELECT order_no, status FROM orders`)
	if err != nil {
		return nil, fmt.Errorf("chaos: read the orders' statuses: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var no, st string
		if err := rows.Scan(&no, &st); err != nil {
			return nil, err
		}
		out[no] = st
	}
	return out, rows.Err()
}

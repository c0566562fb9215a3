package chaos

import (
	"slices"
	"time"

	"orderpay/channel/sim"
)

// Convergence classes besides the fault classes.
const (
	ClassAll   = "all"   // every order paid at the channel
	ClassNone  = "none"  // no fault hit the order's trades and no crash happened in between
	ClassCrash = "crash" // the server was killed between the payment and the order being PAID
)

// ClassConvergence is how fast orders of one class went from paid at the channel to PAID.
type ClassConvergence struct {
	Latency
	// NotPaid counts the orders of the class that were paid at the channel but are not
	// PAID: refunded (late, cancelled) or lost.
	NotPaid int `json:"not_paid"`
}

// MethodConvergence is how fast orders paid by one way (channel and method) went from paid
// at the channel to PAID.
type MethodConvergence struct {
	Latency
	// NotPaid counts the orders paid at the channel by this way that are not PAID.
	NotPaid int `json:"not_paid"`
	// Faulted counts the orders of the way (PAID or not) that a channel fault hit before
	// they were PAID: a call of their trades or a notification.
	Faulted int `json:"faulted"`
}

// tradeRow is one channel order as orderpay's database knows it, with its order.
type tradeRow struct {
	OutTradeNo string
	OrderNo    string
	PaidAt     time.Time // the order's paid_at; zero if the order was never paid
	Way        PayWay    // the attempt's channel and method
}

// crashWindow is when the server was down: from the kill to /healthz answering again.
type crashWindow struct{ From, To time.Time }

// convergence measures, per class, the time from the buyer paying at the channel to the
// order being PAID (the order's paid_at in the database). The buyer paid at the ledger's
// PaidAt of the order's first paid trade, or when the harness's wallet call for it began
// if that is later: WeChat's ledger time is whole seconds, as its success_time shows it,
// and would add up to a second. An order's classes are the fault classes of the faults that
// hit any of its trades before it was PAID (call faults are keyed on out_trade_no;
// notification faults on the notify id, which NotifyStats maps to its out_trade_no), plus
// "crash" if the server was killed between the payment and PAID; "none" if there are none.
// An order counts in each of its classes and in "all".
//
// byMethod is the same per way to pay ("alipay:wap"), an order counting under the way of
// its first paid trade, with how many of each way's orders a fault hit.
func convergence(trades []tradeRow, ledger []sim.LedgerEntry, walletPaidAt map[string]time.Time,
	faults []sim.FaultEvent, notify []sim.NotifyStats, crashes []crashWindow) (byClass map[string]ClassConvergence, byMethod map[string]MethodConvergence) {
	orderOf := map[string]string{}
	wayOf := map[string]PayWay{}
	paidAt := map[string]time.Time{}
	for _, t := range trades {
		orderOf[t.OutTradeNo] = t.OrderNo
		wayOf[t.OutTradeNo] = t.Way
		if !t.PaidAt.IsZero() {
			paidAt[t.OrderNo] = t.PaidAt
		}
	}
	firstPaid := map[string]time.Time{}
	orderWay := map[string]PayWay{}
	for _, l := range ledger {
		o, ok := orderOf[l.OutTradeNo]
		if l.PaidAt.IsZero() || !ok {
			continue
		}
		at := l.PaidAt
		if w := walletPaidAt[l.OutTradeNo]; w.After(at) {
			at = w
		}
		if f, seen := firstPaid[o]; !seen || at.Before(f) {
			firstPaid[o] = at
			orderWay[o] = wayOf[l.OutTradeNo]
		}
	}
	tradeOfNotify := map[string]string{}
	for _, n := range notify {
		tradeOfNotify[n.NotifyID] = n.OutTradeNo
	}
	classes := map[string]map[string]bool{}
	for _, ev := range faults {
		trade := ev.Key
		if ev.Method == sim.MethodNotify {
			trade = tradeOfNotify[ev.Key]
		}
		o, ok := orderOf[trade]
		if !ok {
			continue
		}
		if p, paid := paidAt[o]; paid && ev.At.After(p) {
			continue // after PAID: it did not slow the order down
		}
		if classes[o] == nil {
			classes[o] = map[string]bool{}
		}
		classes[o][faultClassOf(ev)] = true
	}

	lat := map[string][]time.Duration{}
	notPaid := map[string]int{}
	wayLat := map[string][]time.Duration{}
	wayNotPaid, wayFaulted := map[string]int{}, map[string]int{}
	for o, from := range firstPaid {
		to, paid := paidAt[o]
		way := orderWay[o].String()
		if len(classes[o]) > 0 {
			wayFaulted[way]++
		}
		if paid {
			wayLat[way] = append(wayLat[way], max(to.Sub(from), 0))
		} else {
			wayNotPaid[way]++
			if _, ok := wayLat[way]; !ok {
				wayLat[way] = nil
			}
		}
		cs := classes[o]
		for _, c := range crashes {
			if !c.From.Before(from) && (!paid || c.From.Before(to)) {
				if cs == nil {
					cs = map[string]bool{}
				}
				cs[ClassCrash] = true
			}
		}
		names := []string{ClassAll}
		if len(cs) == 0 {
			names = append(names, ClassNone)
		}
		for c := range cs {
			names = append(names, c)
		}
		for _, c := range names {
			if !paid {
				notPaid[c]++
				if _, ok := lat[c]; !ok {
					lat[c] = nil // the class shows even if none of its orders converged
				}
				continue
			}
			lat[c] = append(lat[c], max(to.Sub(from), 0))
		}
	}
	byClass = map[string]ClassConvergence{}
	for c, ds := range lat {
		byClass[c] = ClassConvergence{Latency: summarize(ds), NotPaid: notPaid[c]}
	}
	byMethod = map[string]MethodConvergence{}
	for w, ds := range wayLat {
		byMethod[w] = MethodConvergence{Latency: summarize(ds), NotPaid: wayNotPaid[w], Faulted: wayFaulted[w]}
	}
	return byClass, byMethod
}

// ConvergenceClasses are the classes in report order.
func ConvergenceClasses() []string {
	return slices.Concat([]string{ClassAll, ClassNone}, FaultClasses, []string{ClassCrash})
}

package audit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"
)

// paidStatus reports whether an order in status s has been paid: PAID and every status
// that only a paid order reaches.
func paidStatus(s orderpay.OrderStatus) bool {
	switch s {
	case orderpay.OrderPaid, orderpay.OrderShipped, orderpay.OrderReceived, orderpay.OrderCompleted, orderpay.OrderRefunded:
		return true
	}
	return false
}

// lockedWhilePending reports whether a pending order's line holds its units as locked
// stock merely by being pending, under its SKU's policy (docs/design.md §6): only "order" does. A
// "payment" SKU is only checked at create, so its pending orders hold nothing; a "reserve"
// SKU's units are locked while the line's hold stands, which I4 counts from the holds.
func lockedWhilePending(sku *orderpay.SKU) bool {
	return sku == nil || sku.StockPolicy == orderpay.StockAtOrder || sku.StockPolicy == ""
}

type ledgerKey struct{ channel, outTradeNo string }

// world is the snapshot and the inputs, indexed.
type world struct {
	snap          *sqlstore.Snapshot
	ledger        []sim.LedgerEntry
	notifications []sim.NotifyStats
	events        []Event
	now           time.Time
	grace         time.Duration

	orders         map[string]*orderpay.Order
	payments       map[string]*orderpay.Payment
	paymentByOrder map[string]*orderpay.Payment
	channelOrders  map[string]*orderpay.ChannelOrder
	attempts       map[string][]*orderpay.ChannelOrder // by payment number, by seq
	refundsByTrade map[string][]*sqlstore.SnapshotRefund
	refundsByPay   map[string][]*sqlstore.SnapshotRefund
	trades         map[ledgerKey]*sim.LedgerEntry // the first entry per channel and out_trade_no
	tradesByNo     map[string][]*sim.LedgerEntry
	ledgerRefunds  map[refundKey]*sim.LedgerRefund
	refundHistory  map[string][]orderpay.HistoryEntry // out_refund_no → its history, for the refunds ever queued
	skus           map[string]*orderpay.SKU
	ful            fulfilment
	// appOrders are the business apps' payments seen as orders (appOrder), by their order
	// key; they are in orders too, but not in snap.Orders: no stock, no order.* events.
	appOrders map[string]*orderpay.Order
	apps      map[string]*orderpay.AppPayment // by order key
	// appByPayment are the app payments by payment number.
	appByPayment map[string]*orderpay.AppPayment
	// tills are the tills' barcode payments (I9).
	tills []orderpay.TillPayment
	// tickets are the queued SKUs' tickets, by seq, ticketEnds the lines of each one's
	// history that ended it, and given the tickets the buyers were given (I10).
	tickets    []orderpay.Ticket
	ticketEnds map[string][]ticketEnd
	given      []GivenTicket

	violations []Violation
}

func newWorld(snap *sqlstore.Snapshot, in Inputs) *world {
	w := &world{snap: snap, ledger: in.Ledger, notifications: in.Notifications, events: in.Events, now: in.Now, grace: in.Grace,
		orders: map[string]*orderpay.Order{}, payments: map[string]*orderpay.Payment{}, paymentByOrder: map[string]*orderpay.Payment{},
		channelOrders: map[string]*orderpay.ChannelOrder{}, attempts: map[string][]*orderpay.ChannelOrder{},
		refundsByTrade: map[string][]*sqlstore.SnapshotRefund{}, refundsByPay: map[string][]*sqlstore.SnapshotRefund{},
		trades: map[ledgerKey]*sim.LedgerEntry{}, tradesByNo: map[string][]*sim.LedgerEntry{}, skus: map[string]*orderpay.SKU{},
		refundHistory: map[string][]orderpay.HistoryEntry{}, tills: in.Tills, appByPayment: map[string]*orderpay.AppPayment{},
		given: in.Tickets}
	for i := range snap.Orders {
		w.orders[snap.Orders[i].No] = &snap.Orders[i]
	}
	for i := range snap.Payments {
		p := &snap.Payments[i]
		w.payments[p.No], w.paymentByOrder[p.OrderNo] = p, p
	}
	for i := range snap.ChannelOrders {
		co := &snap.ChannelOrders[i]
		w.channelOrders[co.OutTradeNo] = co
		w.attempts[co.PaymentNo] = append(w.attempts[co.PaymentNo], co)
	}
	for i := range snap.Refunds {
		rf := &snap.Refunds[i]
		w.refundsByTrade[rf.OutTradeNo] = append(w.refundsByTrade[rf.OutTradeNo], rf)
		w.refundsByPay[rf.PaymentNo] = append(w.refundsByPay[rf.PaymentNo], rf)
	}
	for i := range in.Ledger {
		e := &in.Ledger[i]
		k := ledgerKey{e.Channel, e.OutTradeNo}
		if _, dup := w.trades[k]; !dup {
			w.trades[k] = e
		}
		w.tradesByNo[e.OutTradeNo] = append(w.tradesByNo[e.OutTradeNo], e)
	}
	for i := range snap.SKUs {
		w.skus[snap.SKUs[i].SKU] = &snap.SKUs[i]
	}
	w.appOrders, w.apps = map[string]*orderpay.Order{}, map[string]*orderpay.AppPayment{}
	for i := range snap.AppPayments {
		ap := &snap.AppPayments[i]
		o := appOrder(ap)
		w.apps[ap.OrderKey], w.appOrders[ap.OrderKey], w.orders[ap.OrderKey] = ap, o, o
		w.appByPayment[ap.PaymentNo] = ap
	}
	w.indexFulfilment()
	w.indexLedgerRefunds()
	return w
}

// appOrder is an app payment as the invariants see an order: paid (SUCCESS), pending
// (OPEN) or cancelled (CLOSED), its payable the amount, its deadline the payment's. What it
// keeps is its amount less the payment's refunded total, as for an order.
func appOrder(ap *orderpay.AppPayment) *orderpay.Order {
	status := orderpay.OrderPendingPayment
	switch ap.Status {
	case orderpay.AppPaymentSuccess:
		status = orderpay.OrderPaid
	case orderpay.AppPaymentClosed:
		status = orderpay.OrderCancelled
	}
	return &orderpay.Order{No: ap.OrderKey, BuyerID: "app:" + ap.AppID, Status: status, Payable: ap.Amount, PaymentNo: ap.PaymentNo,
		PayDeadline: ap.ExpiresAt, CreatedAt: ap.CreatedAt}
}

// allOrders is the shop's orders, then the app payments seen as orders (appOrder), by key.
func (w *world) allOrders() []orderpay.Order {
	orders := slices.Clone(w.snap.Orders)
	for _, key := range slices.Sorted(maps.Keys(w.appOrders)) {
		orders = append(orders, *w.appOrders[key])
	}
	return orders
}

// trade is the ledger's entry for an attempt: same channel, same out_trade_no.
func (w *world) trade(co *orderpay.ChannelOrder) *sim.LedgerEntry {
	return w.trades[ledgerKey{co.Channel, co.OutTradeNo}]
}

// owner names the payment and order an out_trade_no belongs to, as far as they exist.
func (w *world) owner(outTradeNo string) (orderNo, paymentNo string) {
	co := w.channelOrders[outTradeNo]
	if co == nil {
		return "", ""
	}
	if p := w.payments[co.PaymentNo]; p != nil {
		return p.OrderNo, p.No
	}
	return "", co.PaymentNo
}

func (w *world) add(v Violation) { w.violations = append(w.violations, v) }

// check runs every invariant and returns the result, without history.
func (w *world) check() *Result {
	res := &Result{Orders: len(w.snap.Orders), FinalStates: map[string]int{}, Counts: map[string]int{},
		Events: EventStats{Ignored: map[string]int{}}}
	for _, o := range w.snap.Orders {
		res.FinalStates[string(o.Status)]++
	}
	res.AppPayments, res.AppStates = len(w.snap.AppPayments), map[string]int{}
	for _, ap := range w.snap.AppPayments {
		res.AppStates[string(ap.Status)]++
	}
	w.checkNoLostPayment()
	w.checkNoPhantomPayment()
	res.Money = w.checkMoneyConserved()
	w.checkStockConserved()
	w.checkAfterSales()
	w.checkNothingForged()
	w.checkNothingStuck()
	res.Events = w.checkEffectsOnce()
	w.checkNoMoneyOwedSilently()
	res.Refunds = w.refundOutcomes()
	w.checkBarcodeEndsBothSides()
	res.BarcodeAttempts, res.TillAnswers = w.barcodeAttempts(), map[string]int{}
	for _, t := range w.tills {
		res.TillAnswers[cmp.Or(string(t.Answer), "none")]++
	}
	w.checkTicketsEndOnce()
	res.Tickets = map[string]int{}
	for _, t := range w.tickets {
		res.Tickets[string(t.State)]++
	}

	for _, name := range Invariants {
		res.Counts[name] = 0
	}
	for _, v := range w.violations {
		res.Counts[v.Invariant]++
	}
	res.Violations = w.violations
	slices.SortStableFunc(res.Violations, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(slices.Index(Invariants, a.Invariant), slices.Index(Invariants, b.Invariant)), cmp.Compare(a.OrderNo, b.OrderNo),
			cmp.Compare(a.PaymentNo, b.PaymentNo), cmp.Compare(a.OutTradeNo, b.OutTradeNo), cmp.Compare(a.SKU, b.SKU), cmp.Compare(a.Ticket, b.Ticket))
	})
	return res
}

// goingBack sums the refunds of an attempt whose money went back, through the channel
// (SUCCESS) or outside it (RESOLVED), or is owed and known to be: on its way (PENDING,
// PROCESSING) or in the operators' queue (NEEDS_ACTION). A payment with such refunds is not
// lost: orderpay knows it and has decided to send it back. Whether an owed refund is owed
// visibly is I8's to judge, and that the books balance only once it is back, I3's.
func (w *world) goingBack(outTradeNo string) (sum int64) {
	for _, rf := range w.refundsByTrade[outTradeNo] {
		switch rf.Status {
		case orderpay.ChannelRefundSuccess, orderpay.ChannelRefundResolved:
			sum += rf.Amount
		default:
			if owedStatus(rf.Status) {
				sum += rf.Amount
			}
		}
	}
	return sum
}

// checkNoLostPayment is I1. Every ledger trade paid at the channel must be a channel order
// (same out_trade_no, same channel) in SUCCESS, and either be its payment's paid attempt
// (payments.paid_out_trade_no) with the order in a paid status, or have refunds adding up to
// exactly the amount the channel captured whose money went back (through the channel, or
// outside it by an operator) or is owed and known (see goingBack). A paid trade orderpay
// does not know at all is lost too.
//
// An attempt paid at the channel but left CLOSED, FAILED, CREATED or PAYING is reported even
// if it was refunded: the payment center moves a verified late payment to SUCCESS (the
// channel order machine allows CLOSED and FAILED → SUCCESS) before refunding it, so any
// other status means orderpay never recorded the payment: the lost payment (掉单) itself.
func (w *world) checkNoLostPayment() {
	for i := range w.ledger {
		e := &w.ledger[i]
		if e.PaidAt.IsZero() {
			continue
		}
		co := w.channelOrders[e.OutTradeNo]
		if co == nil {
			w.add(Violation{Invariant: NoLostPayment, OutTradeNo: e.OutTradeNo,
				Detail: fmt.Sprintf("%s captured %d fen (trade %s, %s) but orderpay has no channel order %s", e.Channel, e.Amount, e.TradeNo, e.Status, e.OutTradeNo)})
			continue
		}
		orderNo, paymentNo := w.owner(co.OutTradeNo)
		v := Violation{Invariant: NoLostPayment, OrderNo: orderNo, PaymentNo: paymentNo, OutTradeNo: co.OutTradeNo}
		back := w.goingBack(co.OutTradeNo)
		switch {
		case co.Channel != e.Channel:
			v.Detail = fmt.Sprintf("%s captured %d fen for %s, but orderpay's attempt %s is at %s", e.Channel, e.Amount, e.OutTradeNo, co.OutTradeNo, co.Channel)
		case co.Status != orderpay.ChannelOrderSuccess:
			v.Detail = fmt.Sprintf("%s captured %d fen but the channel order is %s (refunds back or owed: %d fen)", e.Channel, e.Amount, co.Status, back)
		default:
			p := w.payments[co.PaymentNo]
			var o *orderpay.Order
			if p != nil {
				o = w.orders[p.OrderNo]
			}
			if p != nil && p.PaidOutTradeNo == co.OutTradeNo && o != nil && paidStatus(o.Status) {
				continue // the payment of a paid order
			}
			if back == e.Amount {
				continue // the money goes or went back
			}
			why := "its order is missing"
			switch {
			case p == nil:
				why = "its payment is missing"
			case p.PaidOutTradeNo != co.OutTradeNo:
				why = fmt.Sprintf("it is not the paid attempt of payment %s (%s, paid attempt %q)", p.No, p.Status, p.PaidOutTradeNo)
			case o != nil:
				why = fmt.Sprintf("order %s is %s", o.No, o.Status)
			}
			v.Detail = fmt.Sprintf("%s captured %d fen; %s, and refunds back or owed add up to %d fen, not %d", e.Channel, e.Amount, why, back, e.Amount)
		}
		w.add(v)
	}
}

// checkNoPhantomPayment is I2. Every order in a paid status has a SUCCESS payment whose paid
// attempt (paid_out_trade_no) is a SUCCESS channel order of that payment, at the payment's
// paid channel, that the ledger reports paid at that channel for exactly the order's payable.
func (w *world) checkNoPhantomPayment() {
	for _, o := range w.allOrders() {
		if !paidStatus(o.Status) {
			continue
		}
		v := Violation{Invariant: NoPhantomPayment, OrderNo: o.No}
		var problems []string
		p := w.paymentByOrder[o.No]
		if p == nil {
			problems = append(problems, "it has no payment at all")
		} else {
			v.PaymentNo, v.OutTradeNo = p.No, p.PaidOutTradeNo
			problems = w.phantomProblems(&o, p)
		}
		if len(problems) > 0 {
			v.Detail = fmt.Sprintf("order is %s, but ", o.Status) + strings.Join(problems, "; ")
			w.add(v)
		}
	}
}

func (w *world) phantomProblems(o *orderpay.Order, p *orderpay.Payment) []string {
	var problems []string
	if o.PaymentNo != p.No {
		problems = append(problems, fmt.Sprintf("it names payment %q while its payment is %s", o.PaymentNo, p.No))
	}
	if p.Status != orderpay.PaymentSuccess {
		problems = append(problems, fmt.Sprintf("payment %s is %s", p.No, p.Status))
	}
	co := w.channelOrders[p.PaidOutTradeNo]
	if co == nil {
		return append(problems, fmt.Sprintf("payment %s's paid attempt %q does not exist", p.No, p.PaidOutTradeNo))
	}
	if co.PaymentNo != p.No {
		problems = append(problems, fmt.Sprintf("paid attempt %s belongs to payment %s", co.OutTradeNo, co.PaymentNo))
	}
	if co.Status != orderpay.ChannelOrderSuccess {
		problems = append(problems, fmt.Sprintf("paid attempt %s is %s", co.OutTradeNo, co.Status))
	}
	if co.Channel != p.PaidChannel {
		problems = append(problems, fmt.Sprintf("payment %s says paid via %q while attempt %s is at %s", p.No, p.PaidChannel, co.OutTradeNo, co.Channel))
	}
	e := w.trade(co)
	switch {
	case e == nil:
		problems = append(problems, fmt.Sprintf("%s has no trade %s", co.Channel, co.OutTradeNo))
	case e.PaidAt.IsZero():
		problems = append(problems, fmt.Sprintf("%s reports trade %s %s, not paid", e.Channel, e.OutTradeNo, e.Status))
	case e.Amount != o.Payable:
		problems = append(problems, fmt.Sprintf("%s captured %d fen for %s while the payable is %d fen", e.Channel, e.Amount, e.OutTradeNo, o.Payable))
	}
	return problems
}

// refusedPayment reports whether a refund reason is the order system refusing a payment.
func refusedPayment(reason string) bool {
	switch reason {
	case orderpay.RefundReasonCancelled, orderpay.RefundReasonSoldOut, orderpay.RefundReasonAmountMismatch:
		return true
	}
	return false
}

// checkMoneyConserved is I3, per payment and globally. For each payment:
//
//	Σ over its attempts of (the ledger's amount if paid at the channel) − Σ the ledger's refunded
//	  − Σ its refunds paid back outside the channel (RESOLVED)
//	  == payable − payments.refunded  if its order is in a paid status, else 0
//
// Money an operator paid back outside the channel (a bank transfer) stays with the channel,
// but the buyer has it back: it counts as returned, and payments.refunded counts it when it
// refunds the attempt that paid, as it counts the channel's refunds.
//
// A paid order with no payment owes its payable with nothing captured. A paid order whose
// paying attempt was refunded as refused by the order is named as such. The auditor runs once
// the system has settled, so a refund still owed is a violation too, whatever the sums say:
// one PENDING or PROCESSING has not reached the ledger yet, and one waiting for an operator
// (NEEDS_ACTION) may never; the books balance only once every refund decided on is back. (I8
// judges whether such a refund is owed visibly; here it is only money not back yet.)
//
// Globally, captured − refunded over the whole ledger − Σ RESOLVED refunds must equal Σ over
// paid orders of (payable − refunded). The per-payment differences explain part of any gap;
// what is left comes from ledger trades that are no attempt of any payment, and is reported
// on its own (with no order).
func (w *world) checkMoneyConserved() Money {
	var explained, resolvedAll int64
	for _, p := range w.snap.Payments {
		var captured, refunded, resolved int64
		for _, co := range w.attempts[p.No] {
			if e := w.trade(co); e != nil {
				if !e.PaidAt.IsZero() {
					captured += e.Amount
				}
				refunded += e.Refunded
			}
		}
		var owedBack []string
		for _, rf := range w.refundsByPay[p.No] {
			switch {
			case rf.Status == orderpay.ChannelRefundResolved:
				resolved += rf.Amount
			case owedStatus(rf.Status):
				owedBack = append(owedBack, fmt.Sprintf("%s %d fen %s", rf.OutRefundNo, rf.Amount, rf.Status))
			}
		}
		resolvedAll += resolved
		var owed int64
		o := w.orders[p.OrderNo]
		if o != nil && paidStatus(o.Status) {
			owed = o.Payable - p.Refunded
		}
		net := captured - refunded - resolved
		explained += net - owed
		if o != nil && paidStatus(o.Status) {
			for _, rf := range w.refundsByPay[p.No] {
				// The money of the attempt that paid the order went back as refused by the
				// order: goods would ship for money the buyer has back. Named on its own,
				// whatever the sums say.
				if refusedPayment(rf.Reason) && rf.OutTradeNo == p.PaidOutTradeNo {
					w.add(Violation{Invariant: MoneyConserved, OrderNo: p.OrderNo, PaymentNo: p.No, Detail: fmt.Sprintf(
						"order is %s but the attempt that paid it (%s) was refunded as refused by the order (%s, %s %d fen %s)",
						o.Status, p.PaidOutTradeNo, rf.Reason, rf.OutRefundNo, rf.Amount, rf.Status)})
				}
			}
		}
		if ap := w.apps[p.OrderNo]; ap != nil && ap.Status == orderpay.AppPaymentSuccess {
			for _, rf := range w.refundsByPay[p.No] {
				// An app keeps a paid payment less its own refunds: money of the attempt that
				// paid it going back for any other reason is taken from the app unawares.
				if rf.OutTradeNo == p.PaidOutTradeNo && rf.Reason != orderpay.RefundReasonApp {
					w.add(Violation{Invariant: MoneyConserved, OrderNo: p.OrderNo, PaymentNo: p.No, Detail: fmt.Sprintf(
						"app payment is SUCCESS but the attempt that paid it (%s) was refunded as %s (%s %d fen %s), not by its app",
						p.PaidOutTradeNo, rf.Reason, rf.OutRefundNo, rf.Amount, rf.Status)})
				}
			}
		}
		if net == owed && len(owedBack) == 0 {
			continue
		}
		status := "no order"
		if o != nil {
			status = string(o.Status)
		}
		detail := fmt.Sprintf("channel captured %d − refunded %d", captured, refunded)
		if resolved != 0 {
			detail += fmt.Sprintf(" − paid back outside the channel %d", resolved)
		}
		detail += fmt.Sprintf(" = %d fen, but the order (%s) keeps %d fen (payable − refunded %d)", net, status, owed, p.Refunded)
		if len(owedBack) > 0 {
			detail += "; refunds still owed at settle: " + strings.Join(owedBack, ", ")
		}
		w.add(Violation{Invariant: MoneyConserved, OrderNo: p.OrderNo, PaymentNo: p.No, Detail: detail})
	}

	m := Money{Resolved: resolvedAll}
	for _, o := range w.allOrders() {
		if !paidStatus(o.Status) {
			continue
		}
		p := w.paymentByOrder[o.No]
		if p == nil {
			m.Owed += o.Payable
			explained -= o.Payable
			w.add(Violation{Invariant: MoneyConserved, OrderNo: o.No,
				Detail: fmt.Sprintf("order is %s and keeps %d fen but has no payment: nothing was captured", o.Status, o.Payable)})
			continue
		}
		m.Owed += o.Payable - p.Refunded
	}
	var strangers []string
	for i := range w.ledger {
		e := &w.ledger[i]
		if !e.PaidAt.IsZero() {
			m.Captured += e.Amount
		}
		m.Refunded += e.Refunded
		if co := w.channelOrders[e.OutTradeNo]; (co == nil || co.Channel != e.Channel) && (!e.PaidAt.IsZero() || e.Refunded != 0) {
			strangers = append(strangers, fmt.Sprintf("%s %s %d fen refunded %d", e.Channel, e.OutTradeNo, e.Amount, e.Refunded))
		}
	}
	if residual := (m.Captured - m.Refunded - m.Resolved - m.Owed) - explained; residual != 0 {
		w.add(Violation{Invariant: MoneyConserved, Detail: fmt.Sprintf(
			"globally the channels captured %d − refunded %d − paid back outside the channel %d = %d fen and paid orders keep %d fen; %d fen of the gap is in no payment (ledger trades that are no attempt: %s)",
			m.Captured, m.Refunded, m.Resolved, m.Captured-m.Refunded-m.Resolved, m.Owed, residual, strings.Join(strangers, ", "))})
	}
	return m
}

// checkStockConserved is I4. Every stock bucket satisfies available + locked + sold = total
// with no count below zero (the buckets' sums then do too). Per SKU, sold equals the units
// of the items of orders in a paid status (less the units after-sales put back, see
// restockedUnits), and locked equals the units of PENDING_PAYMENT orders of "order" SKUs plus
// the units of standing holds of "reserve" SKUs: a cancelled order's units, and an expired
// hold's, must have gone back to available. A hold still standing for an order that is no
// longer pending is named too: its end was lost. A SKU's backup (docs/design.md §6.2) is
// checked with it (backupProblems).
func (w *world) checkStockConserved() {
	for _, r := range w.snap.StockRows {
		var problems []string
		if r.Available+r.Locked+r.Sold != r.Total {
			problems = append(problems, fmt.Sprintf("available %d + locked %d + sold %d = %d, not total %d", r.Available, r.Locked, r.Sold, r.Available+r.Locked+r.Sold, r.Total))
		}
		for _, c := range []struct {
			name string
			n    int64
		}{{"available", r.Available}, {"locked", r.Locked}, {"sold", r.Sold}, {"total", r.Total}} {
			if c.n < 0 {
				problems = append(problems, fmt.Sprintf("%s is %d", c.name, c.n))
			}
		}
		if len(problems) > 0 {
			w.add(Violation{Invariant: StockConserved, SKU: r.SKU,
				Detail: fmt.Sprintf("sku %s bucket %d: %s", r.SKU, r.Bucket, strings.Join(problems, "; "))})
		}
	}

	type expect struct {
		sold, locked             int64
		held                     int64    // of locked: the standing holds' units
		paid, pending, cancelled []string // order numbers, for attributing a difference
		strayHolds               []string // standing holds of orders no longer pending
	}
	want := map[string]*expect{}
	get := func(sku string) *expect {
		if want[sku] == nil {
			want[sku] = &expect{}
		}
		return want[sku]
	}
	for i := range w.snap.Orders {
		o := &w.snap.Orders[i]
		for _, it := range o.Items {
			ex := get(it.SKU)
			switch {
			case paidStatus(o.Status):
				ex.sold += it.Qty - w.restockedUnits(o, it)
				ex.paid = append(ex.paid, o.No)
			case o.Status == orderpay.OrderPendingPayment:
				if lockedWhilePending(w.skus[it.SKU]) {
					ex.locked += it.Qty
				}
				ex.pending = append(ex.pending, o.No)
			case o.Status == orderpay.OrderCancelled:
				ex.cancelled = append(ex.cancelled, o.No)
			}
		}
	}
	for _, h := range w.snap.StockHolds {
		if h.State != orderpay.HoldStanding {
			continue
		}
		ex := get(h.SKU)
		ex.locked += h.Qty
		ex.held += h.Qty
		if o := w.orders[h.OrderNo]; o == nil || o.Status != orderpay.OrderPendingPayment {
			ex.strayHolds = append(ex.strayHolds, fmt.Sprintf("%s line %d", h.OrderNo, h.Line))
		}
	}
	have := map[string]orderpay.Stock{}
	for _, st := range w.snap.Stock {
		have[st.SKU] = st
		get(st.SKU)
	}
	backups := w.backupSales()
	for sku := range backups {
		get(sku)
	}
	for _, sku := range slices.Sorted(maps.Keys(want)) {
		ex, st := want[sku], have[sku]
		var problems []string
		if _, ok := have[sku]; !ok {
			problems = append(problems, "has no stock row")
		}
		if st.Sold != ex.sold {
			problems = append(problems, fmt.Sprintf("sold %d but paid orders hold %d units (paid orders: %s)", st.Sold, ex.sold, list(ex.paid)))
		}
		if st.Locked != ex.locked {
			problems = append(problems, fmt.Sprintf("locked %d but pending orders hold %d units, %d of them by standing holds (pending orders: %s; cancelled orders, whose units must have been released: %s)",
				st.Locked, ex.locked, ex.held, list(ex.pending), list(ex.cancelled)))
		}
		if len(ex.strayHolds) > 0 {
			problems = append(problems, fmt.Sprintf("holds still standing for orders no longer pending: %s", list(ex.strayHolds)))
		}
		problems = append(problems, w.backupProblems(sku, st, backups[sku])...)
		if len(problems) > 0 {
			w.add(Violation{Invariant: StockConserved, SKU: sku, Detail: "sku " + sku + " " + strings.Join(problems, "; ")})
		}
	}
}

// backupServed is what the order lines a SKU's backup served add up to.
type backupServed struct {
	units int64
	// stray are the lines that cannot have taken a backup unit: their order is not in a
	// paid status, or has no such line of the SKU for that many units.
	stray []string
}

// backupSales sums, per SKU, the order lines its backup served.
func (w *world) backupSales() map[string]*backupServed {
	out := map[string]*backupServed{}
	for _, b := range w.snap.BackupSales {
		bs := out[b.SKU]
		if bs == nil {
			bs = &backupServed{}
			out[b.SKU] = bs
		}
		bs.units += b.Qty
		o := w.orders[b.OrderNo]
		var line *orderpay.OrderItem
		if o != nil {
			for i := range o.Items {
				if o.Items[i].Line == b.Line {
					line = &o.Items[i]
				}
			}
		}
		switch {
		case o == nil || line == nil:
			bs.stray = append(bs.stray, fmt.Sprintf("%s line %d (no such order line)", b.OrderNo, b.Line))
		case !paidStatus(o.Status):
			bs.stray = append(bs.stray, fmt.Sprintf("%s line %d (the order is %s)", b.OrderNo, b.Line, o.Status))
		case line.SKU != b.SKU || line.Qty != b.Qty:
			bs.stray = append(bs.stray, fmt.Sprintf("%s line %d (%d of %s, the line is %d of %s)", b.OrderNo, b.Line, b.Qty, b.SKU, line.Qty, line.SKU))
		}
	}
	return out
}

// backupProblems is I4 of a SKU's backup. Its counts add up (used + left = units) and none
// is negative. The units it served are sold units of paid orders: each served line belongs
// to an order in a paid status (whose units sold counts, checked above), and the lines add
// up to the backup's used units. A unit served moved onto bucket 0's sold and total, so
// bucket 0's total less the backup's used units, what it was created with, is not
// negative: per SKU, available + locked + sold + backup left = the stock it was created
// with + backup units, every unit counted once. Only a "payment" or "reserve" SKU keeps one.
func (w *world) backupProblems(sku string, st orderpay.Stock, served *backupServed) []string {
	if served == nil {
		served = &backupServed{}
	}
	if st.BackupUnits == 0 && st.BackupUsed == 0 && st.BackupLeft == 0 && served.units == 0 && len(served.stray) == 0 {
		return nil
	}
	var problems []string
	if st.BackupUsed < 0 || st.BackupLeft < 0 || st.BackupUsed+st.BackupLeft != st.BackupUnits {
		problems = append(problems, fmt.Sprintf("backup used %d + left %d is not its %d units", st.BackupUsed, st.BackupLeft, st.BackupUnits))
	}
	if st.BackupUsed != served.units {
		problems = append(problems, fmt.Sprintf("backup used %d but the order lines it served hold %d units", st.BackupUsed, served.units))
	}
	if len(served.stray) > 0 {
		problems = append(problems, fmt.Sprintf("backup units went to lines no paid order holds: %s", list(served.stray)))
	}
	for _, r := range w.snap.StockRows {
		if r.SKU == sku && r.Bucket == 0 && r.Total < st.BackupUsed {
			problems = append(problems, fmt.Sprintf("bucket 0's total %d is less than the %d units the backup served, which it must count", r.Total, st.BackupUsed))
		}
	}
	if s := w.skus[sku]; s != nil && s.StockPolicy != orderpay.StockAtPayment && s.StockPolicy != orderpay.StockReserve {
		problems = append(problems, fmt.Sprintf("keeps a backup under stock policy %q, which never deducts at payment", s.StockPolicy))
	}
	return problems
}

// list names at most ten orders.
func list(nos []string) string {
	nos = slices.Compact(slices.Sorted(slices.Values(nos)))
	if len(nos) == 0 {
		return "none"
	}
	if len(nos) > 10 {
		return strings.Join(nos[:10], ", ") + fmt.Sprintf(" and %d more", len(nos)-10)
	}
	return strings.Join(nos, ", ")
}

// checkNothingForged is I5. Every forged or tampered notification copy (NotifyStats.Bad) that
// the merchant acknowledged is a violation: the ack means it was accepted. And every SUCCESS
// channel order must match the ledger: the same channel has the trade, reports it paid, for
// the channel order's amount; otherwise something other than the channel's word made it
// SUCCESS.
func (w *world) checkNothingForged() {
	for _, ns := range w.notifications {
		for _, bad := range ns.Bad {
			if !bad.Acked {
				continue
			}
			orderNo, paymentNo := w.owner(ns.OutTradeNo)
			w.add(Violation{Invariant: NothingForged, OrderNo: orderNo, PaymentNo: paymentNo, OutTradeNo: ns.OutTradeNo,
				Detail: fmt.Sprintf("orderpay acknowledged a %s copy of %s notification %s (HTTP %d %q at %s)",
					bad.Variant, ns.Channel, ns.NotifyID, bad.Status, bad.Body, bad.At.UTC().Format(time.RFC3339))})
		}
	}
	for _, co := range w.snap.ChannelOrders {
		if co.Status != orderpay.ChannelOrderSuccess {
			continue
		}
		var problem string
		e := w.trade(&co)
		switch {
		case e == nil && len(w.tradesByNo[co.OutTradeNo]) > 0:
			other := w.tradesByNo[co.OutTradeNo][0]
			problem = fmt.Sprintf("is SUCCESS at %s but only %s has the trade (%s)", co.Channel, other.Channel, other.Status)
		case e == nil:
			problem = fmt.Sprintf("is SUCCESS but %s has no such trade", co.Channel)
		case e.PaidAt.IsZero():
			problem = fmt.Sprintf("is SUCCESS but %s reports the trade %s, never paid", co.Channel, e.Status)
		case e.Amount != co.Amount:
			problem = fmt.Sprintf("is SUCCESS for %d fen but %s captured %d fen", co.Amount, co.Channel, e.Amount)
		default:
			continue
		}
		orderNo, paymentNo := w.owner(co.OutTradeNo)
		w.add(Violation{Invariant: NothingForged, OrderNo: orderNo, PaymentNo: paymentNo, OutTradeNo: co.OutTradeNo,
			Detail: "channel order " + co.OutTradeNo + " " + problem})
	}
}

// checkNothingStuck is I6: at Now, nothing may still be open past its pay deadline plus
// Grace: no PENDING_PAYMENT order, no UNPAID or PAYING payment, and no CREATED or PAYING
// channel order of such a payment. One violation per order lists everything stuck in it.
func (w *world) checkNothingStuck() {
	past := func(deadline time.Time) bool { return deadline.Add(w.grace).Before(w.now) }
	stuck := map[string][]string{}
	paymentOf := map[string]string{}
	note := func(orderNo, paymentNo, what string) {
		stuck[orderNo] = append(stuck[orderNo], what)
		if paymentNo != "" {
			paymentOf[orderNo] = paymentNo
		}
	}
	for _, o := range w.snap.Orders {
		if o.Status == orderpay.OrderPendingPayment && past(o.PayDeadline) {
			note(o.No, "", fmt.Sprintf("order is PENDING_PAYMENT, deadline %s", o.PayDeadline.UTC().Format(time.RFC3339)))
		}
	}
	for _, ap := range w.snap.AppPayments {
		if ap.Status == orderpay.AppPaymentOpen && past(ap.ExpiresAt) {
			note(ap.OrderKey, ap.PaymentNo, fmt.Sprintf("app payment %s of %s is OPEN, deadline %s", ap.PaymentNo, ap.AppID, ap.ExpiresAt.UTC().Format(time.RFC3339)))
		}
	}
	for _, p := range w.snap.Payments {
		if (p.Status == orderpay.PaymentUnpaid || p.Status == orderpay.PaymentPaying) && past(p.PayDeadline) {
			note(p.OrderNo, p.No, fmt.Sprintf("payment %s is %s, deadline %s", p.No, p.Status, p.PayDeadline.UTC().Format(time.RFC3339)))
		}
	}
	for _, co := range w.snap.ChannelOrders {
		if co.Status != orderpay.ChannelOrderCreated && co.Status != orderpay.ChannelOrderPaying {
			continue
		}
		if p := w.payments[co.PaymentNo]; p != nil && past(p.PayDeadline) {
			note(p.OrderNo, p.No, fmt.Sprintf("channel order %s (%s) is %s", co.OutTradeNo, co.Channel, co.Status))
		}
	}
	// A hold past its end plus grace still keeps units from other buyers: the hold
	// sweeper should have released it.
	for _, h := range w.snap.StockHolds {
		if h.State == orderpay.HoldStanding && past(h.HoldUntil) {
			note(h.OrderNo, "", fmt.Sprintf("stock hold of line %d (%d × %s) still HELD, ended %s", h.Line, h.Qty, h.SKU, h.HoldUntil.UTC().Format(time.RFC3339)))
		}
	}
	for _, orderNo := range slices.Sorted(maps.Keys(stuck)) {
		paymentNo := paymentOf[orderNo]
		if p := w.paymentByOrder[orderNo]; p != nil {
			paymentNo = p.No
		}
		w.add(Violation{Invariant: NothingStuck, OrderNo: orderNo, PaymentNo: paymentNo,
			Detail: fmt.Sprintf("still open %s after the deadline plus grace %s: %s", w.now.UTC().Format(time.RFC3339), w.grace, strings.Join(stuck[orderNo], "; "))})
	}
}

// effectKey is one effect I7 counts: a subject for one order or payment.
type effectKey struct{ subject, no string }

// isOrderSubject reports whether subject is an order.* event I7 judges (keyed by order
// number), and isPaymentSubject one keyed by payment number.
func isOrderSubject(s string) bool {
	return s == orderpay.SubjectOrderCreated || s == orderpay.SubjectOrderPaid || s == orderpay.SubjectOrderCancelled
}
func isPaymentSubject(s string) bool {
	return s == orderpay.SubjectPaymentSucceeded || s == orderpay.SubjectAppPaymentSucceeded || s == orderpay.SubjectAppPaymentClosed
}

// effectNumber is the order number (order.*) or payment number (payment.*) an event is about:
// from the payload's "order_no" / "payment_no", else from the message id's suffix after the
// last ':'.
func effectNumber(subject, msgID string, payload []byte) string {
	var body struct {
		OrderNo   string `json:"order_no"`
		PaymentNo string `json:"payment_no"`
	}
	_ = json.Unmarshal(payload, &body) // a payload that does not parse falls back to the id
	no := body.OrderNo
	if isPaymentSubject(subject) {
		no = body.PaymentNo
	}
	if no == "" {
		if i := strings.LastIndexByte(msgID, ':'); i >= 0 {
			no = msgID[i+1:]
		}
	}
	return no
}

// checkEffectsOnce is I7. Counting distinct message ids per subject and order (or payment) on
// the bus: every order has exactly one order.created; exactly one order.paid if it is in a
// paid status, else none; exactly one order.cancelled if CANCELLED, else none; every payment
// exactly one payment.succeeded if SUCCESS, else none. An event for an order or payment the
// database does not have is an effect without a cause. A message still unpublished in the
// outbox at settle never took effect: one violation each (and its missing event is not
// reported again). Other subjects are counted in EventStats.Ignored.
func (w *world) checkEffectsOnce() EventStats {
	stats := EventStats{Messages: len(w.events), Ignored: map[string]int{}}
	ids := map[effectKey][]string{}
	for i, ev := range w.events {
		if !isOrderSubject(ev.Subject) && !isPaymentSubject(ev.Subject) {
			stats.Ignored[ev.Subject]++
			continue
		}
		id := ev.MsgID
		if id == "" {
			id = fmt.Sprintf("(no id, event #%d)", i) // unidentifiable: cannot be deduplicated
		}
		k := effectKey{ev.Subject, effectNumber(ev.Subject, ev.MsgID, ev.Payload)}
		if slices.Contains(ids[k], id) {
			stats.Redelivered++
			continue
		}
		ids[k] = append(ids[k], id)
	}

	unpublished := map[effectKey]bool{}
	for _, m := range w.snap.UnpublishedMessages {
		no := effectNumber(m.Subject, m.ID, m.Payload)
		unpublished[effectKey{m.Subject, no}] = true
		var orderNo, paymentNo string
		switch {
		case strings.HasPrefix(m.Subject, "order."):
			orderNo = no
		case strings.HasPrefix(m.Subject, "payment."):
			paymentNo = no
			if p := w.payments[no]; p != nil {
				orderNo = p.OrderNo
			}
		default: // refund.* and the like: name the order if the payload does
			if _, ok := w.orders[no]; ok {
				orderNo = no
			}
		}
		w.add(Violation{Invariant: EffectsOnce, OrderNo: orderNo, PaymentNo: paymentNo,
			Detail: fmt.Sprintf("outbox message %s (%s) was never published", m.ID, m.Subject)})
	}

	expect := func(subject, no, orderNo, paymentNo string, want int) {
		k := effectKey{subject, no}
		got := ids[k]
		delete(ids, k)
		if len(got) == want || (len(got) == 0 && unpublished[k]) {
			return
		}
		detail := fmt.Sprintf("%s took effect %d times, want %d", subject, len(got), want)
		if len(got) > 0 {
			detail += " (message ids " + strings.Join(got, ", ") + ")"
		}
		w.add(Violation{Invariant: EffectsOnce, OrderNo: orderNo, PaymentNo: paymentNo, Detail: detail})
	}
	one := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	for _, o := range w.snap.Orders {
		paymentNo := ""
		if p := w.paymentByOrder[o.No]; p != nil {
			paymentNo = p.No
		}
		expect(orderpay.SubjectOrderCreated, o.No, o.No, paymentNo, 1)
		expect(orderpay.SubjectOrderPaid, o.No, o.No, paymentNo, one(paidStatus(o.Status)))
		expect(orderpay.SubjectOrderCancelled, o.No, o.No, paymentNo, one(o.Status == orderpay.OrderCancelled))
	}
	for _, p := range w.snap.Payments {
		expect(orderpay.SubjectPaymentSucceeded, p.No, p.OrderNo, p.No, one(p.Status == orderpay.PaymentSuccess))
	}
	// Each app payment is told to its app once: succeeded if SUCCESS, closed if CLOSED.
	for _, ap := range w.snap.AppPayments {
		expect(orderpay.SubjectAppPaymentSucceeded, ap.PaymentNo, ap.OrderKey, ap.PaymentNo, one(ap.Status == orderpay.AppPaymentSuccess))
		expect(orderpay.SubjectAppPaymentClosed, ap.PaymentNo, ap.OrderKey, ap.PaymentNo, one(ap.Status == orderpay.AppPaymentClosed))
	}
	// What is left is about orders or payments the database does not have.
	keys := slices.SortedFunc(maps.Keys(ids), func(a, b effectKey) int { return cmp.Or(cmp.Compare(a.no, b.no), cmp.Compare(a.subject, b.subject)) })
	for _, k := range keys {
		v := Violation{Invariant: EffectsOnce, Detail: fmt.Sprintf("%s took effect %d times for %q, which orderpay does not have (message ids %s)",
			k.subject, len(ids[k]), k.no, strings.Join(ids[k], ", "))}
		if isOrderSubject(k.subject) {
			v.OrderNo = k.no
		} else {
			v.PaymentNo = k.no
		}
		w.add(v)
	}
	return stats
}

package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"
)

// The refunds' side of the promise (I8): money orderpay decided to send back is either back
// (by the channel, or by an operator outside it), or still visibly owed: on its way with a
// next try, or in the operators' queue with its problem. Nothing in between, and nothing the
// channel did that orderpay does not know.

// refundKey names one refund at a channel: the trade it refunds and its number there
// (WeChat out_refund_no, Alipay out_request_no; orderpay sends its out_refund_no as either).
type refundKey struct{ channel, outTradeNo, outRefundNo string }

// indexLedgerRefunds maps every refund the ledger holds to its entry in the ledger.
func (w *world) indexLedgerRefunds() {
	w.ledgerRefunds = map[refundKey]*sim.LedgerRefund{}
	for i := range w.ledger {
		e := &w.ledger[i]
		for j := range e.Refunds {
			lr := &e.Refunds[j]
			k := refundKey{e.Channel, e.OutTradeNo, lr.OutRefundNo}
			if _, dup := w.ledgerRefunds[k]; !dup {
				w.ledgerRefunds[k] = lr
			}
		}
	}
}

// ledgerRefund is the channel's record of rf, or nil if the channel never accepted it.
func (w *world) ledgerRefund(rf *orderpay.ChannelRefund) *sim.LedgerRefund {
	return w.ledgerRefunds[refundKey{rf.Channel, rf.OutTradeNo, rf.OutRefundNo}]
}

// checkNoMoneyOwedSilently is I8. Every refund orderpay decided on (every row of refunds,
// whatever the reason: a late, duplicate or refused payment, an amount mismatch, an
// after-sales request) must be in exactly one of these states:
//
//   - SUCCESS, and the channel's ledger has that refund (same channel, trade and number)
//     SUCCESS for exactly its amount;
//   - RESOLVED, naming who paid it back outside the channel and the reference of that
//     payment, while the channel has settled no refund under that number (else the buyer got
//     the money twice);
//   - PENDING or PROCESSING with a next try (next_at): the refund worker will send or query it;
//   - NEEDS_ACTION with its problem: an operator has been told why it cannot end by itself.
//
// And from the channel's side: every refund the ledger shows SUCCESS is a refund orderpay
// knows (a row of the same channel, trade and number explains it). A refund the ledger shows
// ABNORMAL or CLOSED, or PROCESSING, is not SUCCESS here (the first rule catches it).
//
// A refund still owed at the audit (on its way, or queued) passes I8, which asks only that
// it be owed visibly; I3 reports that the books do not balance yet.
func (w *world) checkNoMoneyOwedSilently() {
	known := map[refundKey]bool{}
	for i := range w.snap.Refunds {
		rf := &w.snap.Refunds[i]
		known[refundKey{rf.Channel, rf.OutTradeNo, rf.OutRefundNo}] = true
		lr := w.ledgerRefund(rf)
		var problem string
		switch rf.Status {
		case orderpay.ChannelRefundSuccess:
			switch {
			case lr == nil:
				problem = fmt.Sprintf("is SUCCESS but %s has no refund %s of trade %s", rf.Channel, rf.OutRefundNo, rf.OutTradeNo)
			case lr.Status != sim.LedgerRefundSuccess:
				problem = fmt.Sprintf("is SUCCESS but %s's refund is %s: the money did not go back", rf.Channel, lr.Status)
			case lr.Amount != rf.Amount:
				problem = fmt.Sprintf("is SUCCESS for %d fen but %s refunded %d fen", rf.Amount, rf.Channel, lr.Amount)
			}
		case orderpay.ChannelRefundResolved:
			switch {
			case rf.ResolvedBy == "" || rf.ResolvedRef == "":
				problem = fmt.Sprintf("is RESOLVED outside the channel but names no one or no reference (by %q, reference %q)", rf.ResolvedBy, rf.ResolvedRef)
			case lr != nil && lr.Status == sim.LedgerRefundSuccess:
				problem = fmt.Sprintf("was paid back outside the channel by %s (reference %s) and %s refunded it too, %d fen at %s: the buyer got it twice",
					rf.ResolvedBy, rf.ResolvedRef, rf.Channel, lr.Amount, lr.SettledAt.UTC().Format(time.RFC3339))
			}
		case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
			if rf.NextAt.IsZero() {
				problem = fmt.Sprintf("is %s with no next try: nothing will send or query it again", rf.Status)
			}
		case orderpay.ChannelRefundNeedsAction:
			if rf.Problem == "" {
				problem = "waits for an operator without saying why"
			}
		default:
			problem = fmt.Sprintf("is %q, a state in which nothing sends it, nobody is asked to act and the money is not back", rf.Status)
		}
		if problem == "" {
			continue
		}
		orderNo, paymentNo := w.owner(rf.OutTradeNo)
		w.add(Violation{Invariant: NoMoneyOwedSilently, OrderNo: orderNo, PaymentNo: paymentNo, OutTradeNo: rf.OutTradeNo,
			Detail: fmt.Sprintf("refund %s (%s, %d fen, %s) %s", rf.OutRefundNo, rf.Reason, rf.Amount, rf.Channel, problem)})
	}
	for i := range w.ledger {
		e := &w.ledger[i]
		for _, lr := range e.Refunds {
			if lr.Status != sim.LedgerRefundSuccess || known[refundKey{e.Channel, e.OutTradeNo, lr.OutRefundNo}] {
				continue
			}
			orderNo, paymentNo := w.owner(e.OutTradeNo)
			w.add(Violation{Invariant: NoMoneyOwedSilently, OrderNo: orderNo, PaymentNo: paymentNo, OutTradeNo: e.OutTradeNo,
				Detail: fmt.Sprintf("%s refunded %d fen of trade %s under %s, a refund orderpay does not know", e.Channel, lr.Amount, e.OutTradeNo, lr.OutRefundNo)})
		}
	}
}

// owedStatus reports whether a refund in status s still owes its money: decided, not back
// yet (on its way, or waiting for an operator).
func owedStatus(s orderpay.ChannelRefundStatus) bool {
	switch s {
	case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing, orderpay.ChannelRefundNeedsAction:
		return true
	}
	return false
}

// RefundOutcomes counts every refund orderpay decided on by how it went, from the refunds
// table at the audit.
type RefundOutcomes struct {
	Total int
	// FirstTry: SUCCESS, never refused for now and never queued (a resend after an unknown
	// answer is the same try). Retried: SUCCESS after one or more refusals for now, never
	// queued.
	FirstTry, Retried int
	// Queued: went before an operator at some time (needs_action_at set), whatever came of
	// it. Of those: Resolved (paid back outside the channel), OperatorRetried (an operator
	// sent it again and the channel made it), SettledByChannel (the channel's own word, a
	// notification or a query, took it out of the queue as refunded: NEEDS_ACTION → SUCCESS
	// in its history), StillQueued (NEEDS_ACTION now).
	Queued, Resolved, OperatorRetried, SettledByChannel, StillQueued int
	// InFlight: PENDING or PROCESSING now, queued before or not.
	InFlight int
	// Amount is the sum of every refund's amount, in fen.
	Amount int64
}

// settledInQueue reports whether the refund's history has it move from the operators'
// queue straight to SUCCESS: the channel said it refunded while it waited there (a refund
// the channel had made after all, whose word came late), with no operator's retry between.
func (w *world) settledInQueue(outRefundNo string) bool {
	return slices.ContainsFunc(w.refundHistory[outRefundNo], func(h orderpay.HistoryEntry) bool {
		return h.From == string(orderpay.ChannelRefundNeedsAction) && h.To == string(orderpay.ChannelRefundSuccess)
	})
}

// loadQueuedHistory reads the history of every refund that went before an operator, for
// refundOutcomes to tell how each left the queue.
func (w *world) loadQueuedHistory(ctx context.Context, store *sqlstore.Store) error {
	for _, rf := range w.snap.Refunds {
		if rf.NeedsActionAt.IsZero() {
			continue
		}
		h, err := store.History(ctx, orderpay.EntityRefund, rf.OutRefundNo)
		if err != nil {
			return err
		}
		w.refundHistory[rf.OutRefundNo] = h
	}
	return nil
}

// refundOutcomes counts the snapshot's refunds.
func (w *world) refundOutcomes() RefundOutcomes {
	var out RefundOutcomes
	for _, rf := range w.snap.Refunds {
		out.Total++
		out.Amount += rf.Amount
		queued := !rf.NeedsActionAt.IsZero()
		if queued {
			out.Queued++
		}
		switch rf.Status {
		case orderpay.ChannelRefundSuccess:
			switch {
			case queued && w.settledInQueue(rf.OutRefundNo):
				out.SettledByChannel++
			case queued:
				out.OperatorRetried++
			case rf.Retried > 0:
				out.Retried++
			default:
				out.FirstTry++
			}
		case orderpay.ChannelRefundResolved:
			out.Resolved++
		case orderpay.ChannelRefundNeedsAction:
			out.StillQueued++
		case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
			out.InFlight++
		}
	}
	return out
}

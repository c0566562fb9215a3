package audit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"
)

// Barcode payments at the counter (I9, docs/barcode.md): the place where payment centers
// most often leave a payment one-sided (单边账). A till is told PAID, REFUSED, CANCELLED or,
// when the buyer's time ran out first, UNKNOWN; whatever it was told, and whether or not it
// asked again, every barcode trade must end at both sides, and the first final answer the
// till was given (till_payments.answer) must never contradict the channel.

// openAtChannel reports whether a ledger status is a barcode trade still waiting for its
// buyer at the channel: Alipay's WAIT_BUYER_PAY, WeChat Pay's USERPAYING (and NOTPAY, which
// a codepay order never shows, but a trade that did would still be payable). A trade left so
// can still be paid after orderpay gave up on it.
func openAtChannel(status string) bool {
	switch status {
	case sim.AlipayWaitBuyerPay, sim.WechatUserPaying, sim.WechatNotPay:
		return true
	}
	return false
}

// readTills reads every till payment (migration 0023), by out_trade_no. A database without
// the table (a server version before barcode payments) has none. The auditor runs once the
// system has settled and the server is stopped, so this read outside the snapshot's
// transaction sees the same state.
func readTills(ctx context.Context, store *sqlstore.Store) ([]orderpay.TillPayment, error) {
	rows, err := store.DB().QueryContext(ctx, `SELECT out_trade_no, payment_no, app_id, idempotency_key, channel, amount, order_no,
		app_payment_no, store_id, till_id, answer, refusal, detail, created_at, answered_at FROM till_payments ORDER BY out_trade_no`)
	if err != nil {
		if strings.Contains(err.Error(), "till_payments") {
			return nil, nil // no such table
		}
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.TillPayment
	for rows.Next() {
		var t orderpay.TillPayment
		var answer, refusal string
		var created, answered sql.NullInt64
		if err := rows.Scan(&t.OutTradeNo, &t.PaymentNo, &t.AppID, &t.IdempotencyKey, &t.Channel, &t.Amount, &t.OrderNo,
			&t.AppPaymentNo, &t.StoreID, &t.TillID, &answer, &refusal, &t.Detail, &created, &answered); err != nil {
			return nil, err
		}
		t.Answer, t.Refusal = orderpay.BarcodeStatus(answer), orderpay.BarcodeRefusal(refusal)
		t.CreatedAt = orderpay.FromMillis(created.Int64)
		if answered.Int64 != 0 {
			t.AnsweredAt = orderpay.FromMillis(answered.Int64)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// reversedBy names how a barcode trade was reversed after its buyer paid, or "" if it was
// not: a refund orderpay recorded as the reverse's (barcode_reversed), or WeChat Pay's
// REVOKED state with a payment (its reverse refunds a paid order, and says nothing of it).
func (w *world) reversedBy(co *orderpay.ChannelOrder, e *sim.LedgerEntry) string {
	for _, rf := range w.refundsByTrade[co.OutTradeNo] {
		if rf.Reason == orderpay.RefundReasonReversed {
			return fmt.Sprintf("refund %s (%s, %d fen, %s)", rf.OutRefundNo, rf.Reason, rf.Amount, rf.Status)
		}
	}
	if e != nil && !e.PaidAt.IsZero() && e.Status == sim.WechatRevoked {
		return fmt.Sprintf("%s %s after the payment, %d fen refunded", e.Channel, e.Status, e.Refunded)
	}
	return ""
}

// unknownRefunds sums the refunds the channel settled for a trade under numbers orderpay has
// no refund of (a reverse's refund it never learnt of), and names them.
func (w *world) unknownRefunds(co *orderpay.ChannelOrder, e *sim.LedgerEntry) (sum int64, nos []string) {
	if e == nil {
		return 0, nil
	}
	known := map[string]bool{}
	for _, rf := range w.refundsByTrade[co.OutTradeNo] {
		known[rf.OutRefundNo] = true
	}
	for _, lr := range e.Refunds {
		if lr.Status == sim.LedgerRefundSuccess && !known[lr.OutRefundNo] {
			sum += lr.Amount
			nos = append(nos, lr.OutRefundNo)
		}
	}
	return sum, nos
}

// resolvedOf sums the refunds of an attempt an operator paid back outside the channel
// (RESOLVED): money the channel still holds, but the buyer has back, as I3 counts it.
func (w *world) resolvedOf(outTradeNo string) (sum int64) {
	for _, rf := range w.refundsByTrade[outTradeNo] {
		if rf.Status == orderpay.ChannelRefundResolved {
			sum += rf.Amount
		}
	}
	return sum
}

// checkBarcodeEndsBothSides is I9. For every barcode attempt (method barcode) and the
// channel's trade under its out_trade_no:
//
//   - it is not CREATED or PAYING at the audit: the loop or the safety net ended it;
//   - the trade ended at the channel either paid, and recorded as such: the attempt SUCCESS,
//     and it paid its payment (payments.paid_out_trade_no) with its order, or its walk-in
//     sale's app payment, in a paid status, and the trade was not reversed after the buyer
//     paid (no refund barcode_reversed of it, not REVOKED at WeChat Pay, no refund at the
//     channel that orderpay has no refund of); or, if it is not
//     what paid a paid order, no money held at the channel (captured − refunded at the
//     channel − paid back outside it = 0);
//   - or it ended unpaid: nothing paid, and the trade is not still waiting for its buyer at
//     the channel (WAIT_BUYER_PAY, USERPAYING, NOTPAY), or the channel has no trade at all;
//   - a till asked for it (its till_payments row exists), and the till's first final answer
//     never contradicts the channel: PAID ⇒ paid at the channel, not reversed, and the
//     payment paid by this attempt, its order or app payment paid; REFUSED ⇒ nothing paid
//     at the channel;
//     CANCELLED ⇒ no money held at the channel for it (never paid, or refunded in full). An
//     unanswered one (the till was told UNKNOWN, or nothing, and did not ask again) is held
//     to the rules above all the same.
//
// A till payment whose attempt does not exist is a violation too: the row and the attempt are
// written in one transaction. One violation per attempt lists everything wrong with it.
func (w *world) checkBarcodeEndsBothSides() {
	tills := map[string]*orderpay.TillPayment{}
	for i := range w.tills {
		t := &w.tills[i]
		tills[t.OutTradeNo] = t
		if co := w.channelOrders[t.OutTradeNo]; co == nil || co.Method != orderpay.MethodBarcode {
			orderNo := t.OrderNo
			if ap := w.appByPayment[t.AppPaymentNo]; ap != nil {
				orderNo = ap.OrderKey
			}
			w.add(Violation{Invariant: BarcodeEndsBothSides, OrderNo: orderNo, PaymentNo: t.PaymentNo, OutTradeNo: t.OutTradeNo,
				Detail: fmt.Sprintf("till %s of app %s asked for barcode payment %s (answered %s), which is no barcode attempt", dash(t.TillID), t.AppID, t.OutTradeNo, answerOf(t))})
		}
	}
	for i := range w.snap.ChannelOrders {
		co := &w.snap.ChannelOrders[i]
		if co.Method != orderpay.MethodBarcode {
			continue
		}
		t := tills[co.OutTradeNo]
		e := w.trade(co)
		paid := e != nil && !e.PaidAt.IsZero()
		var held int64
		if paid {
			held = e.Amount - e.Refunded - w.resolvedOf(co.OutTradeNo)
		}
		p := w.payments[co.PaymentNo]
		var o *orderpay.Order
		if p != nil {
			o = w.orders[p.OrderNo]
		}
		paying := p != nil && p.Status == orderpay.PaymentSuccess && p.PaidOutTradeNo == co.OutTradeNo && o != nil && paidStatus(o.Status)
		notPaying := func() string {
			switch {
			case p == nil:
				return "its payment is missing"
			case p.PaidOutTradeNo != co.OutTradeNo:
				return fmt.Sprintf("payment %s is %s, paid by %q", p.No, p.Status, p.PaidOutTradeNo)
			case p.Status != orderpay.PaymentSuccess:
				return fmt.Sprintf("payment %s is %s", p.No, p.Status)
			case o == nil:
				return "its order is missing"
			}
			return fmt.Sprintf("its order %s is %s", o.No, o.Status)
		}
		var problems []string
		if co.Status == orderpay.ChannelOrderCreated || co.Status == orderpay.ChannelOrderPaying {
			problems = append(problems, fmt.Sprintf("the attempt is still %s: neither the loop nor the safety net ended it", co.Status))
		}
		reversed := w.reversedBy(co, e)
		if unknown, nos := w.unknownRefunds(co, e); unknown > 0 && reversed == "" {
			reversed = fmt.Sprintf("%s refunded %d fen under %s, which orderpay has no refund of", e.Channel, unknown, strings.Join(nos, ", "))
		}
		switch {
		case paid && co.Status != orderpay.ChannelOrderSuccess:
			problems = append(problems, fmt.Sprintf("%s captured %d fen (%s) but the attempt is %s", e.Channel, e.Amount, e.Status, co.Status))
		case paid && paying && reversed != "":
			problems = append(problems, fmt.Sprintf("it paid %s, yet the trade was reversed at %s after the buyer paid (%s): the order is paid with money that went back",
				o.No, e.Channel, reversed))
		case paid && !paying && held != 0:
			problems = append(problems, fmt.Sprintf("paid at %s, not what paid a paid order (%s), and %d fen still held there (captured %d − refunded %d − paid back outside the channel %d)",
				e.Channel, notPaying(), held, e.Amount, e.Refunded, w.resolvedOf(co.OutTradeNo)))
		case !paid && e != nil && openAtChannel(e.Status):
			problems = append(problems, fmt.Sprintf("not paid, and %s still waits for the buyer (%s): it can still be paid", e.Channel, e.Status))
		case !paid && co.Status == orderpay.ChannelOrderSuccess:
			problems = append(problems, "the attempt is SUCCESS but nothing was paid at the channel")
		}
		if t == nil {
			problems = append(problems, "no till asked for it (no till payment)")
		} else {
			switch t.Answer {
			case orderpay.BarcodePaid:
				switch {
				case !paid:
					problems = append(problems, "the till was told PAID, but nothing was paid at the channel")
				case !paying:
					problems = append(problems, "the till was told PAID, but the attempt did not pay a paid order: "+notPaying())
				case reversed != "":
					problems = append(problems, "the till was told PAID, but the trade was reversed after the buyer paid: "+reversed)
				}
			case orderpay.BarcodeRefused:
				if paid {
					problems = append(problems, fmt.Sprintf("the till was told REFUSED (%s), but the buyer paid %d fen at the channel", dash(string(t.Refusal)), e.Amount))
				}
			case orderpay.BarcodeCancelled:
				if held != 0 {
					problems = append(problems, fmt.Sprintf("the till was told CANCELLED, but the channel holds %d fen of it", held))
				}
			}
		}
		if len(problems) == 0 {
			continue
		}
		v := Violation{Invariant: BarcodeEndsBothSides, PaymentNo: co.PaymentNo, OutTradeNo: co.OutTradeNo}
		if p != nil {
			v.OrderNo = p.OrderNo
		}
		status := "no trade at " + co.Channel
		if e != nil {
			status = e.Channel + " " + e.Status
		}
		v.Detail = fmt.Sprintf("barcode trade %s (%s, attempt %s, the till answered %s): %s", co.OutTradeNo, status, co.Status,
			answerOf(t), strings.Join(problems, "; "))
		w.add(v)
	}
}

// answerOf is the till's first final answer as the report says it.
func answerOf(t *orderpay.TillPayment) string {
	switch {
	case t == nil:
		return "nothing (no till payment)"
	case t.Answer == "":
		return "nothing final"
	}
	return string(t.Answer)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// barcodeAttempts counts the barcode attempts, for the result.
func (w *world) barcodeAttempts() int {
	return len(slices.DeleteFunc(slices.Clone(w.snap.ChannelOrders), func(co orderpay.ChannelOrder) bool {
		return co.Method != orderpay.MethodBarcode
	}))
}

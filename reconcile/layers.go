package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"
	"time"

	"orderpay"
)

// The fees and settlement layers (docs/reconciliation.md). Trades come first: once a bill's
// rows are matched (and lost payments repaired, which records their fees), every payment row's
// fee is compared with the fee its attempt recorded from the contract, every refund row's
// share with the share its refund recorded, and the row sums with the bill's own totals.
// Then the account: every movement is matched to the trade-bill row it settles, by number,
// against that row's amount net of the fee the bill says it charged (a fee difference is the
// fees layer's, not counted again here), and its balance chained from the row before and from
// the previous day's close.

// minRateChangeRows is how many payments in a row, to the end of the day, must be charged at
// one other rate for the day to read as a rate change rather than single mischarges.
const minRateChangeRows = 3

// feeRow is one payment row's fee comparison, kept to look for a rate change.
type feeRow struct {
	item     *orderpay.ReconItem
	at       time.Time
	amount   int64
	fee      int64
	rate     orderpay.FeeRate
	hasRate  bool
	mismatch bool
}

// feeLayer compares each row's fee with the recorded one and the totals with the bill's
// summary, filling fig.
func (r *Reconciler) feeLayer(ctx context.Context, bill *orderpay.Bill, rule orderpay.FeeRule, fig *orderpay.ReconFigures) ([]orderpay.ReconItem, error) {
	var items []orderpay.ReconItem
	var payRows []feeRow
	// chargedDiff is each payment's fee difference in this bill, so that a refund of a
	// mischarged payment that gives back a share of the difference is not counted twice.
	chargedDiff := map[string]int64{}
	chargedFee := map[string]int64{} // what the channel charged, where it is not what we expected
	var refundRows []orderpay.BillRow
	for _, row := range bill.Rows {
		if row.Kind == orderpay.BillRefund {
			refundRows = append(refundRows, row)
			continue
		}
		fig.Paid += row.Amount
		fig.FeeBill += row.Fee
		co, err := r.cfg.Store.ChannelOrder(ctx, row.OutTradeNo)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			continue // the trades layer has it
		} else if err != nil {
			return nil, err
		}
		expected, rate, note := co.Fee, co.FeeRate, ""
		if !co.FeeRecorded {
			expected, rate = rule.FeeFor(row.Amount, co.Method)
			note = "; no fee was recorded (paid before fees were), reckoned now from the contract"
		}
		fig.FeeExpected += expected
		fr := feeRow{at: row.At, amount: row.Amount, fee: row.Fee, rate: row.Rate, hasRate: row.RateKnown}
		if row.Fee != expected {
			chargedDiff[row.OutTradeNo] = row.Fee - expected
			chargedFee[row.OutTradeNo] = row.Fee
			charged := "a fee of " + orderpay.FormatYuan(row.Fee)
			if row.RateKnown {
				charged += " at " + row.Rate.String()
			}
			it := orderpay.ReconItem{Layer: orderpay.LayerFees, Class: orderpay.ReconFeeMismatch, Resolution: orderpay.ResolutionUnexplained,
				Kind: orderpay.BillPayment, OutTradeNo: row.OutTradeNo, BillAmount: row.Fee, LocalAmount: expected, InBill: true,
				Difference: row.Fee - expected,
				Detail: fmt.Sprintf("charged %s on %s yuan; the contract's %s makes it %s%s", charged, orderpay.FormatYuan(row.Amount),
					rate, orderpay.FormatYuan(expected), note)}
			items = append(items, it)
			fr.mismatch = true
		}
		payRows = append(payRows, fr)
	}
	// Pointers into items only once it stops growing.
	for i, j := 0, 0; i < len(payRows); i++ {
		if payRows[i].mismatch {
			payRows[i].item = &items[j]
			j++
		}
	}
	markRateChange(payRows, rule.RoundingRule())

	shares, chargedShares, err := r.channelOrderShares(ctx, bill, rule, chargedFee)
	if err != nil {
		return nil, err
	}
	for _, row := range refundRows {
		fig.Refunded += row.Amount
		fig.FeeBill -= row.Fee
		ref, err := r.cfg.Store.ChannelRefund(ctx, row.OutRefundNo)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			continue
		} else if err != nil {
			return nil, err
		}
		expected, note := ref.FeeBack, ""
		if share, ok := shares[row.OutRefundNo]; ok {
			expected = share
			if ref.FeeBackRecorded && share != ref.FeeBack {
				note = fmt.Sprintf("; reckoned in the order the channel made the payment's refunds (%s was recorded, in the order we learnt of them)",
					orderpay.FormatYuan(ref.FeeBack))
			}
		} else if !ref.FeeBackRecorded {
			expected, note = 0, "; no share was recorded, and its payment's fee is not known"
		}
		fig.FeeExpected -= expected
		if row.Fee == expected {
			continue
		}
		it := orderpay.ReconItem{Layer: orderpay.LayerFees, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillRefund,
			OutTradeNo: row.OutTradeNo, OutRefundNo: row.OutRefundNo, BillAmount: row.Fee, LocalAmount: expected, InBill: true,
			Difference: row.Fee - expected}
		switch {
		case expected > 0 && row.Fee == 0:
			it.Class = orderpay.ReconRefundFeeNotReturned
			it.Detail = fmt.Sprintf("the refund of %s yuan gave back no fee; its share is %s", orderpay.FormatYuan(row.Amount),
				orderpay.FormatYuan(expected))
		case expected == 0 && !rule.RefundReturnsFee:
			it.Class = orderpay.ReconRefundFeeReturned
			it.Detail = fmt.Sprintf("the refund of %s yuan gave back %s of fee; the contract says refunds give back none",
				orderpay.FormatYuan(row.Amount), orderpay.FormatYuan(row.Fee))
		default:
			it.Class = orderpay.ReconRefundFeeMismatch
			it.Detail = fmt.Sprintf("the refund of %s yuan gave back %s of fee; its share is %s", orderpay.FormatYuan(row.Amount),
				orderpay.FormatYuan(row.Fee), orderpay.FormatYuan(expected))
		}
		it.Detail += note
		// A payment charged another fee gives back its share of what it was charged: that
		// difference is the payment's, already an item of its own. A refund that gives back
		// anything else (none, say) is a difference of its own.
		if d := chargedDiff[row.OutTradeNo]; d != 0 {
			if cs, ok := chargedShares[row.OutRefundNo]; ok && row.Fee == cs {
				it.Resolution = orderpay.ResolutionFollowsPayment
				it.Detail += fmt.Sprintf("; it is the share of what its payment was charged, whose fee difference of %s is counted there", orderpay.FormatYuan(d))
			}
		}
		items = append(items, it)
	}

	// The bill's own totals.
	fig.FeeSummary = bill.FeeTotal
	if bill.FeeTotal != fig.FeeBill {
		items = append(items, orderpay.ReconItem{Layer: orderpay.LayerFees, Class: orderpay.ReconFeeSummaryMismatch,
			Resolution: orderpay.ResolutionUnexplained, BillAmount: bill.FeeTotal, LocalAmount: fig.FeeBill,
			Difference: bill.FeeTotal - fig.FeeBill,
			Detail: fmt.Sprintf("the bill's fee total is %s; its rows add up to %s", orderpay.FormatYuan(bill.FeeTotal),
				orderpay.FormatYuan(fig.FeeBill))})
	}
	if bill.HasNetTotal {
		rows := fig.Paid - fig.Refunded - fig.FeeBill
		if bill.NetTotal != rows {
			items = append(items, orderpay.ReconItem{Layer: orderpay.LayerFees, Class: orderpay.ReconFeeSummaryMismatch,
				Resolution: orderpay.ResolutionUnexplained, BillAmount: bill.NetTotal, LocalAmount: rows, Difference: bill.NetTotal - rows,
				Detail: fmt.Sprintf("the bill's net received is %s; its rows add up to %s", orderpay.FormatYuan(bill.NetTotal),
					orderpay.FormatYuan(rows))})
		}
	}
	return items, nil
}

// channelOrderShares reckons, for every refund row of the bill whose payment recorded its
// fee, the share of the fee the contract gives it back, in the order the channel made the
// payment's refunds: a refund's share depends on the refunds before it (the one that
// completes the payment's refund gets the rest of the fee), and the channel's order is the
// bill's (its time, then its place in the file), with the payment's refunds settled on
// other days before or after by when they settled. The share each refund recorded is in
// the order we learnt of them, which two refunds settling close together can swap.
func (r *Reconciler) channelOrderShares(ctx context.Context, bill *orderpay.Bill, rule orderpay.FeeRule, charged map[string]int64) (shares, chargedShares map[string]int64, err error) {
	type ref struct {
		no     string
		amount int64
		at     time.Time
		index  int
	}
	byTrade := map[string][]ref{}
	inBill := map[string]bool{}
	for i, row := range bill.Rows {
		if row.Kind == orderpay.BillRefund {
			byTrade[row.OutTradeNo] = append(byTrade[row.OutTradeNo], ref{row.OutRefundNo, row.Amount, row.At, i})
			inBill[row.OutRefundNo] = true
		}
	}
	shares, chargedShares = map[string]int64{}, map[string]int64{}
	for trade, refs := range byTrade {
		co, err := r.cfg.Store.ChannelOrder(ctx, trade)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			continue
		} else if err != nil {
			return nil, nil, err
		}
		if !co.FeeRecorded {
			continue
		}
		others, err := r.cfg.Store.ChannelRefunds(ctx, trade)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range others {
			if o.Status == orderpay.ChannelRefundSuccess && !inBill[o.OutRefundNo] {
				refs = append(refs, ref{o.OutRefundNo, o.Amount, o.RefundedAt, -1})
			}
		}
		slices.SortStableFunc(refs, func(a, b ref) int {
			if c := a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)); c != 0 {
				return c
			}
			return cmp.Compare(a.index, b.index)
		})
		// The shares of the fee we recorded, and, for a payment charged another fee, of
		// what it was charged.
		fee, other := co.Fee, int64(-1)
		if c, ok := charged[trade]; ok {
			other = c
		}
		var before, given, givenOther int64
		for _, x := range refs {
			var share, shareOther int64
			if rule.RefundReturnsFee {
				share = orderpay.RefundFeeShare(fee, co.Amount, x.amount, before, given, rule.RoundingRule())
				if other >= 0 {
					shareOther = orderpay.RefundFeeShare(other, co.Amount, x.amount, before, givenOther, rule.RoundingRule())
				}
			}
			before += x.amount
			given += share
			givenOther += shareOther
			if inBill[x.no] {
				shares[x.no] = share
				if other >= 0 {
					chargedShares[x.no] = shareOther
				}
			}
		}
	}
	return shares, chargedShares, nil
}

// markRateChange reclasses the day's last mischarged payments as a rate change. From the
// last payment charged by the contract to the end of the day, every payment was mischarged;
// if at least minRateChangeRows of them, and more than half, were charged at one and the same
// rate, those are FEE_RATE_CHANGED (the others stay FEE_MISMATCH: mischarged at yet another
// rate). "The same rate" is the rate the bill writes, or, where it writes none, one rate that
// gives each of those fees by the contract's rounding: the rate covered by the most of the
// rows' rate intervals.
func markRateChange(rows []feeRow, rule orderpay.FeeRounding) {
	slices.SortStableFunc(rows, func(a, b feeRow) int { return a.at.Compare(b.at) })
	start := len(rows)
	for start > 0 && rows[start-1].mismatch {
		start--
	}
	tail := rows[start:]
	if len(tail) < minRateChangeRows {
		return
	}
	in := make([]bool, len(tail))
	rate := "another rate"
	if tail[0].hasRate {
		count := map[orderpay.FeeRate]int{}
		best := tail[0].rate
		for _, fr := range tail {
			if fr.hasRate {
				count[fr.rate]++
				if count[fr.rate] > count[best] {
					best = fr.rate
				}
			}
		}
		for i, fr := range tail {
			in[i] = fr.hasRate && fr.rate == best
		}
		rate = best.String()
	} else {
		type edge struct {
			at   *big.Rat
			open bool
		}
		var edges []edge
		los, his := make([]*big.Rat, len(tail)), make([]*big.Rat, len(tail))
		for i, fr := range tail {
			los[i], his[i] = rateInterval(fr.amount, fr.fee, rule)
			edges = append(edges, edge{los[i], true}, edge{his[i], false})
		}
		// Closing edges before opening ones at the same rate: the intervals are half-open.
		slices.SortFunc(edges, func(a, b edge) int {
			if c := a.at.Cmp(b.at); c != 0 {
				return c
			}
			if a.open == b.open {
				return 0
			}
			if a.open {
				return 1
			}
			return -1
		})
		var depth, most int
		var point *big.Rat
		for _, e := range edges {
			if !e.open {
				depth--
				continue
			}
			if depth++; depth > most {
				most, point = depth, e.at
			}
		}
		for i := range tail {
			in[i] = point != nil && los[i].Cmp(point) <= 0 && point.Cmp(his[i]) < 0
		}
	}
	var n int
	for _, ok := range in {
		if ok {
			n++
		}
	}
	if n < minRateChangeRows || 2*n <= len(tail) {
		return
	}
	from := tail[0].at.In(orderpay.ChinaTime).Format(time.TimeOnly)
	for i, fr := range tail {
		if in[i] {
			fr.item.Class = orderpay.ReconFeeRateChanged
			fr.item.Detail = fmt.Sprintf("charged at %s from about %s to the end of the day (%d payments): %s", rate, from, n, fr.item.Detail)
		}
	}
}

// rateInterval is the range of rates [lo, hi), in FeeRate units, that charge fee on amount by
// rule: half up takes fee − ½ to fee + ½ fen, down fee to fee + 1, up fee − 1 to fee (an
// open bound at the bottom, taken as closed: only emptiness is asked of the intersection),
// half even as half up.
func rateInterval(amount, fee int64, rule orderpay.FeeRounding) (*big.Rat, *big.Rat) {
	if amount <= 0 {
		return big.NewRat(0, 1), big.NewRat(orderpay.FeeRateUnit, 1)
	}
	at := func(twiceFen int64) *big.Rat {
		return new(big.Rat).SetFrac(big.NewInt(max(twiceFen, 0)*orderpay.FeeRateUnit), big.NewInt(2*amount))
	}
	switch rule {
	case orderpay.RoundDown:
		return at(2 * fee), at(2*fee + 2)
	case orderpay.RoundUp:
		return at(2*fee - 2), at(2 * fee)
	}
	return at(2*fee - 1), at(2*fee + 1)
}

// settlementLayer matches the account's movements of the day to the trade bill's rows and
// chains its balance, filling fig. A channel that serves no account bill, or a bill that
// cannot be had, is a NOT_CHECKED item.
func (r *Reconciler) settlementLayer(ctx context.Context, channel, date string, bill *orderpay.Bill, fig *orderpay.ReconFigures) ([]orderpay.ReconItem, error) {
	src, ok := r.cfg.Bills[channel].(orderpay.AccountBillSource)
	if !ok {
		return []orderpay.ReconItem{notChecked(orderpay.LayerSettlement, channel+" serves no account bill")}, nil
	}
	ab, err := src.DownloadAccountBill(ctx, date)
	if err != nil {
		return []orderpay.ReconItem{notChecked(orderpay.LayerSettlement, "the account bill could not be had: "+orderpay.ErrorMessage(err))}, nil
	}
	fig.SettlementChecked = true
	fig.Movements = len(ab.Movements)
	fig.NetExpected = fig.Paid - fig.Refunded - fig.FeeExpected

	// What each trade-bill row should have moved: its amount net of the fee the bill says.
	type expect struct {
		row orderpay.BillRow
		net int64
		got int64
		n   int
	}
	var order []string
	want := map[string]*expect{}
	for _, row := range bill.Rows {
		key, net := "T:"+row.OutTradeNo, row.Amount-row.Fee
		if row.Kind == orderpay.BillRefund {
			key, net = "R:"+row.OutRefundNo, -(row.Amount - row.Fee)
		}
		if e := want[key]; e != nil {
			e.net += net
			continue
		}
		want[key] = &expect{row: row, net: net}
		order = append(order, key)
	}
	var items []orderpay.ReconItem
	for _, m := range ab.Movements {
		fig.NetBill += m.Amount
		var key string
		switch m.Kind {
		case orderpay.MovementPayment, orderpay.MovementFee:
			key = "T:" + m.OutTradeNo
		case orderpay.MovementRefund, orderpay.MovementFeeReturn:
			key = "R:" + m.OutRefundNo
		}
		if e := want[key]; e != nil && key != "T:" && key != "R:" {
			e.got += m.Amount
			e.n++
			continue
		}
		items = append(items, orderpay.ReconItem{Layer: orderpay.LayerSettlement, Class: orderpay.ReconSettlementUnknown,
			Resolution: orderpay.ResolutionUnexplained, OutTradeNo: m.OutTradeNo, OutRefundNo: m.OutRefundNo, BillAmount: m.Amount,
			Difference: m.Amount,
			Detail: fmt.Sprintf("a movement of %s (%s, %s, %s) that no trade of the day's bill explains", orderpay.FormatYuan(m.Amount),
				cmp.Or(m.Type, string(m.Kind)), m.Ref, m.At.In(orderpay.ChinaTime).Format(time.DateTime))})
	}
	for _, key := range order {
		e := want[key]
		if e.n > 0 && e.got == e.net {
			continue
		}
		it := orderpay.ReconItem{Layer: orderpay.LayerSettlement, Resolution: orderpay.ResolutionUnexplained, Kind: e.row.Kind,
			OutTradeNo: e.row.OutTradeNo, OutRefundNo: e.row.OutRefundNo, BillAmount: e.got, LocalAmount: e.net, InBill: true,
			Difference: e.got - e.net}
		what := "payment"
		if e.row.Kind == orderpay.BillRefund {
			what = "refund"
		}
		if e.n == 0 {
			it.Class = orderpay.ReconSettlementMissing
			it.Detail = fmt.Sprintf("the %s's %s (net of its fee) never moved through the account", what, orderpay.FormatYuan(e.net))
		} else {
			it.Class = orderpay.ReconSettlementMismatch
			it.Detail = fmt.Sprintf("the %s moved %s through the account; its amount net of its fee is %s", what,
				orderpay.FormatYuan(e.got), orderpay.FormatYuan(e.net))
		}
		items = append(items, it)
	}

	// The balance: row by row, and from the previous day's close.
	for i, m := range ab.Movements {
		if i == 0 {
			continue
		}
		if want := ab.Movements[i-1].Balance + m.Amount; m.Balance != want {
			items = append(items, orderpay.ReconItem{Layer: orderpay.LayerSettlement, Class: orderpay.ReconBalanceBreak,
				Resolution: orderpay.ResolutionUnexplained, OutTradeNo: m.OutTradeNo, OutRefundNo: m.OutRefundNo, BillAmount: m.Balance,
				LocalAmount: want, Difference: m.Balance - want,
				Detail: fmt.Sprintf("the balance after %s is %s; the balance before plus its %s is %s", cmp.Or(m.Ref, "a movement"),
					orderpay.FormatYuan(m.Balance), orderpay.FormatYuan(m.Amount), orderpay.FormatYuan(want))})
		}
	}
	if err := r.previousClose(ctx, channel, date, src, fig); err != nil {
		return nil, err
	}
	if len(ab.Movements) > 0 {
		first, last := ab.Movements[0], ab.Movements[len(ab.Movements)-1]
		fig.BalanceKnown, fig.Opening, fig.Closing = true, first.Balance-first.Amount, last.Balance
		if fig.PrevKnown && fig.Opening != fig.PrevClosing {
			items = append(items, orderpay.ReconItem{Layer: orderpay.LayerSettlement, Class: orderpay.ReconBalanceBreak,
				Resolution: orderpay.ResolutionUnexplained, OutTradeNo: first.OutTradeNo, OutRefundNo: first.OutRefundNo,
				BillAmount: fig.Opening, LocalAmount: fig.PrevClosing, Difference: fig.Opening - fig.PrevClosing,
				Detail: fmt.Sprintf("the day opens at %s; %s closed at %s", orderpay.FormatYuan(fig.Opening), fig.PrevDate,
					orderpay.FormatYuan(fig.PrevClosing))})
		}
	} else if fig.PrevKnown {
		fig.BalanceKnown, fig.Opening, fig.Closing = true, fig.PrevClosing, fig.PrevClosing
	}
	return items, nil
}

// previousClose finds the balance the day must open at: the previous day's account bill's
// last balance, or, if that day had no movements (or its bill cannot be had), the close of
// the latest earlier report that knew its balance.
func (r *Reconciler) previousClose(ctx context.Context, channel, date string, src orderpay.AccountBillSource, fig *orderpay.ReconFigures) error {
	from, _, err := orderpay.BillDayRange(date)
	if err != nil {
		return err
	}
	prev := orderpay.BillDay(from.AddDate(0, 0, -1))
	if ab, err := src.DownloadAccountBill(ctx, prev); err == nil && len(ab.Movements) > 0 {
		fig.PrevKnown, fig.PrevDate, fig.PrevClosing = true, prev, ab.Movements[len(ab.Movements)-1].Balance
		return nil
	}
	day, bal, ok, err := r.cfg.Store.LastClosingBalance(ctx, channel, date)
	if err != nil {
		return err
	}
	if ok {
		fig.PrevKnown, fig.PrevDate, fig.PrevClosing = true, day, bal
	}
	return nil
}

// notChecked is the item of a layer that could not be checked: unexplained, since nothing
// about its money is known.
func notChecked(layer orderpay.ReconLayer, why string) orderpay.ReconItem {
	return orderpay.ReconItem{Layer: layer, Class: orderpay.ReconNotChecked, Resolution: orderpay.ResolutionUnexplained, Detail: why}
}

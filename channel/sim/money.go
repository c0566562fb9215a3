package sim

import (
	"cmp"
	"slices"
	"time"

	"orderpay"
)

// A paid trade's money as a channel's bills show it, reckoned alike for both channels
// (fees.go): its fee, the faults on it, and each settled refund's share of the fee. Each
// channel's bills turn it into their own rows (alipay_account.go, wechat_fundflow.go).

// tradeMoney is one paid trade's money.
type tradeMoney struct {
	src        any // the channel's own trade: *alipayTrade or *wechatOrder
	outTradeNo string
	method     orderpay.PayMethod
	amount     int64
	paidAt     time.Time
	seq        int64
	// fee is what the trade was charged at rate; contractFee what the contract says.
	fee, contractFee int64
	rate             orderpay.FeeRate
	// feeFault is the fault its fee carries: fee_rate, rate_change, or "".
	feeFault BillFaultKind
	// missing: settlement_missing, its money never reaches the account; short: how much less
	// than amount reaches it (settlement_short).
	missing bool
	short   int64
	// refunds are its settled refunds, in the order they settled.
	refunds []refundMoney
}

// refundMoney is one settled refund's share of its payment's fee.
type refundMoney struct {
	src         any    // the channel's own refund: *alipayRefund or *wechatRefund
	outRefundNo string // out_request_no (Alipay) or out_refund_no (WeChat)
	amount      int64
	settlesAt   time.Time
	seq         int64 // acceptance order, for ties
	// index is the refund's place in its channel's own list of the trade's refunds.
	index                int
	share, contractShare int64
	fault                BillFaultKind // refund_fee_kept, refund_fee_given, or ""
}

// reckon fills in the money of a paid trade of channel under cfg: t carries the trade
// (outTradeNo, method, amount, paidAt, seq) and its settled refunds (outRefundNo, amount,
// settlesAt, seq, index), in any order. Refund faults are drawn by out_trade_no "/" refund
// number: a refund number is unique only within its trade at Alipay.
func (s *Simulator) reckon(channel string, cfg FeeConfig, t *tradeMoney) {
	contract := cfg.contractRate(t.method)
	t.rate, t.contractFee = cfg.rateAt(t.method, t.paidAt), cfg.fee(t.amount, contract)
	if t.rate != contract {
		t.feeFault = BillFaultRateChange
	}
	if f, ok := s.billFaultHit(BillFaultFeeRate, channel, t.outTradeNo); ok {
		t.rate, t.feeFault = f.OtherRate, BillFaultFeeRate
	}
	t.fee = cfg.fee(t.amount, t.rate)
	if t.fee == t.contractFee {
		t.feeFault = ""
	}
	if _, ok := s.billFaultHit(BillFaultSettlementMissing, channel, t.outTradeNo); ok {
		t.missing = true
	} else if f, ok := s.billFaultHit(BillFaultSettlementShort, channel, t.outTradeNo); ok {
		t.short = min(f.Amount, t.amount)
	}

	slices.SortStableFunc(t.refunds, func(a, b refundMoney) int {
		return cmp.Or(a.settlesAt.Compare(b.settlesAt), cmp.Compare(a.seq, b.seq), cmp.Compare(a.index, b.index))
	})
	amounts := make([]int64, len(t.refunds))
	for i, r := range t.refunds {
		amounts[i] = r.amount
	}
	shares := cfg.refundShares(t.fee, t.amount, amounts)
	contractShares := cfg.refundShares(t.contractFee, t.amount, amounts)
	giving := cfg
	giving.RefundKeepsFee = false
	given := giving.refundShares(t.fee, t.amount, amounts)
	for i := range t.refunds {
		r := &t.refunds[i]
		r.share, r.contractShare = shares[i], contractShares[i]
		key := t.outTradeNo + "/" + r.outRefundNo
		if _, ok := s.billFaultHit(BillFaultRefundFeeKept, channel, key); ok && !cfg.RefundKeepsFee && r.share > 0 {
			r.share, r.fault = 0, BillFaultRefundFeeKept
		} else if _, ok := s.billFaultHit(BillFaultRefundFeeGiven, channel, key); ok && cfg.RefundKeepsFee && given[i] > 0 {
			r.share, r.fault = given[i], BillFaultRefundFeeGiven
		}
	}
}

// sortTrades orders paid trades by pay time, then acceptance.
func sortTrades(ts []*tradeMoney) {
	slices.SortFunc(ts, func(a, b *tradeMoney) int {
		return cmp.Or(a.paidAt.Compare(b.paidAt), cmp.Compare(a.seq, b.seq))
	})
}

// movement is one movement of a merchant account: a trade's or a refund's (refund ≥ 0 is
// its index in the trade's refunds; -1 for the trade's own), or the opening top-up (trade
// nil). kind is the channel's word for it.
type movement struct {
	at      time.Time
	trade   *tradeMoney
	refund  int
	kind    string
	amount  int64 // signed fen
	balance int64 // after it
}

// balanceBreak is a balance_break the account carries: amount added before the first
// movement of day.
type balanceBreak struct {
	day    string
	amount int64
	first  *movement
}

// chain orders an account's movements (by time; payments before refunds at one instant;
// then acceptance), puts the opening balance in (as a top-up at cfg.OpeningAt when set), and
// gives each the balance after it, with the balance breaks planted on the way.
func (s *Simulator) chain(channel string, cfg FeeConfig, ms []*movement) ([]*movement, []balanceBreak) {
	rank := func(m *movement) (int, int64) {
		switch {
		case m.trade == nil:
			return 0, 0
		case m.refund < 0:
			return 1, m.trade.seq
		}
		return 2, m.trade.refunds[m.refund].seq
	}
	slices.SortStableFunc(ms, func(a, b *movement) int {
		ra, sa := rank(a)
		rb, sb := rank(b)
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(ra, rb), cmp.Compare(sa, sb))
	})
	balance, day := cfg.OpeningBalance, ""
	if !cfg.OpeningAt.IsZero() {
		balance = 0
		ms = slices.Insert(ms, 0, &movement{at: cfg.OpeningAt, refund: -1, kind: topUpKind, amount: cfg.OpeningBalance})
	}
	var breaks []balanceBreak
	for _, m := range ms {
		if d := orderpay.BillDay(m.at); d != day {
			day = d
			if f, ok := s.billFaultHit(BillFaultBalanceBreak, channel, d); ok {
				balance += f.Amount
				breaks = append(breaks, balanceBreak{day: d, amount: f.Amount, first: m})
			}
		}
		balance += m.amount
		m.balance = balance
	}
	return ms, breaks
}

// planted lists the faults of channel's bills of date in trades and breaks (PlantedFault): a
// payment's on the day it was paid, a refund's on the day it settled, a balance break on the
// day it opens. Ordered by time, then a break before payments before refunds, then number.
func planted(channel, date string, trades []*tradeMoney, breaks []balanceBreak) []PlantedFault {
	from, to, err := orderpay.BillDayRange(date)
	if err != nil {
		return nil
	}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	type entry struct {
		at    time.Time
		rank  int
		seq   int64
		kind  int
		fault PlantedFault
	}
	var out []entry
	add := func(at time.Time, rank int, seq int64, f PlantedFault) {
		f.Channel, f.Date = channel, date
		out = append(out, entry{at, rank, seq, slices.Index(BillFaultKinds, f.Kind), f})
	}
	for _, b := range breaks {
		if b.day == date {
			var no string
			var seq int64
			if b.first.trade != nil {
				no, seq = b.first.trade.outTradeNo, b.first.trade.seq
			}
			add(b.first.at, 0, seq, PlantedFault{Kind: BillFaultBalanceBreak, OutTradeNo: no, Amount: b.amount})
		}
	}
	for _, t := range trades {
		if in(t.paidAt) {
			if t.feeFault != "" {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: t.feeFault, OutTradeNo: t.outTradeNo, Amount: t.fee - t.contractFee})
			}
			if t.missing {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: BillFaultSettlementMissing, OutTradeNo: t.outTradeNo, Amount: -(t.amount - t.fee)})
			} else if t.short > 0 {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: BillFaultSettlementShort, OutTradeNo: t.outTradeNo, Amount: -t.short})
			}
		}
		for _, r := range t.refunds {
			if r.fault == "" || !in(r.settlesAt) {
				continue
			}
			f := PlantedFault{Kind: r.fault, OutTradeNo: t.outTradeNo, OutRefundNo: r.outRefundNo, Amount: r.share}
			if r.fault == BillFaultRefundFeeKept {
				f.Amount = -r.contractShare
			}
			add(r.settlesAt, 2, r.seq, f)
		}
	}
	slices.SortStableFunc(out, func(a, b entry) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq), cmp.Compare(a.kind, b.kind))
	})
	faults := make([]PlantedFault, len(out))
	for i, e := range out {
		faults[i] = e.fault
	}
	return faults
}

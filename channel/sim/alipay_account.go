package sim

import (
	"archive/zip"
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"slices"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"

	"orderpay"
)

// Alipay's money (fees.go, protocols §F4): what the channel charges each payment, what each
// settled refund gives back, and how both move through the merchant's account, reckoned
// from the trades as they stand whenever a bill is drawn up.

// alipayPayMoney is one paid trade's money as Alipay's bills show it.
type alipayPayMoney struct {
	t *alipayTrade
	// fee is what the trade was charged at rate; contractFee what the contract says.
	fee, contractFee int64
	rate             orderpay.FeeRate
	// feeFault is the fault its fee carries: fee_rate, rate_change, or "".
	feeFault BillFaultKind
	// missing: settlement_missing, its money never reaches the account; short: how much less
	// than amount reaches it (settlement_short).
	missing bool
	short   int64
	refunds []alipayRefundMoney
}

// alipayRefundMoney is one settled refund's share of its payment's fee.
type alipayRefundMoney struct {
	r                    *alipayRefund
	share, contractShare int64
	fault                BillFaultKind // refund_fee_kept, refund_fee_given, or ""
}

// alipayRefundKey is the key a refund's bill faults are drawn by: out_request_no is unique
// only within its trade.
func alipayRefundKey(t *alipayTrade, r *alipayRefund) string {
	return t.outTradeNo + "/" + r.outRequestNo
}

// alipayMoney reckons the money of every paid trade, by its pay time, as of now. The caller
// holds s.mu.
func (s *Simulator) alipayMoney(now time.Time) []*alipayPayMoney {
	cfg := s.cfg.AlipayFees
	const ch = orderpay.ChannelAlipay
	var pays []*alipayPayMoney
	for _, t := range s.alipay.byOutTradeNo {
		t.refresh(now)
		if !t.paid() {
			continue
		}
		m := t.method
		if m == "" {
			m = orderpay.MethodQR
		}
		contract := cfg.contractRate(m)
		p := &alipayPayMoney{t: t, rate: cfg.rateAt(m, t.paidAt), contractFee: cfg.fee(t.amount, contract)}
		if p.rate != contract {
			p.feeFault = BillFaultRateChange
		}
		if f, ok := s.billFaultHit(BillFaultFeeRate, ch, t.outTradeNo); ok {
			p.rate, p.feeFault = f.OtherRate, BillFaultFeeRate
		}
		p.fee = cfg.fee(t.amount, p.rate)
		if p.fee == p.contractFee {
			p.feeFault = ""
		}
		if _, ok := s.billFaultHit(BillFaultSettlementMissing, ch, t.outTradeNo); ok {
			p.missing = true
		} else if f, ok := s.billFaultHit(BillFaultSettlementShort, ch, t.outTradeNo); ok {
			p.short = min(f.Amount, t.amount)
		}

		var settled []*alipayRefund
		for _, r := range t.refunds {
			if r.settled(now) {
				settled = append(settled, r)
			}
		}
		slices.SortStableFunc(settled, func(a, b *alipayRefund) int {
			if c := a.settlesAt.Compare(b.settlesAt); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		amounts := make([]int64, len(settled))
		for i, r := range settled {
			amounts[i] = r.amount
		}
		shares := cfg.refundShares(p.fee, t.amount, amounts)
		contractShares := cfg.refundShares(p.contractFee, t.amount, amounts)
		giving := cfg
		giving.RefundKeepsFee = false
		given := giving.refundShares(p.fee, t.amount, amounts)
		for i, r := range settled {
			rm := alipayRefundMoney{r: r, share: shares[i], contractShare: contractShares[i]}
			key := alipayRefundKey(t, r)
			if _, ok := s.billFaultHit(BillFaultRefundFeeKept, ch, key); ok && !cfg.RefundKeepsFee && rm.share > 0 {
				rm.share, rm.fault = 0, BillFaultRefundFeeKept
			} else if _, ok := s.billFaultHit(BillFaultRefundFeeGiven, ch, key); ok && cfg.RefundKeepsFee && given[i] > 0 {
				rm.share, rm.fault = given[i], BillFaultRefundFeeGiven
			}
			p.refunds = append(p.refunds, rm)
		}
		pays = append(pays, p)
	}
	slices.SortFunc(pays, func(a, b *alipayPayMoney) int {
		if c := a.t.paidAt.Compare(b.t.paidAt); c != 0 {
			return c
		}
		return cmp.Compare(a.t.seq, b.t.seq)
	})
	return pays
}

// alipayMovement is one row of the account bill.
type alipayMovement struct {
	at      time.Time
	refund  bool  // a refund's movement: after payments at the same instant
	seq     int64 // the trade's or the refund's acceptance number
	kind    string
	pay     *alipayPayMoney
	r       *alipayRefund // on 交易退款 and 收费退回
	amount  int64         // signed fen
	balance int64         // after it
}

// alipayBreak is a balance_break the account carries: Amount added before the first
// movement of day.
type alipayBreak struct {
	day    string
	amount int64
	first  *alipayMovement
}

// alipayMovements replays every movement of the account from the first on, with its balance
// after it, and the balance breaks planted on the way.
func (s *Simulator) alipayMovements(pays []*alipayPayMoney) ([]*alipayMovement, []alipayBreak) {
	var ms []*alipayMovement
	for _, p := range pays {
		t := p.t
		if !p.missing {
			ms = append(ms, &alipayMovement{at: t.paidAt, seq: t.seq, kind: "在线支付", pay: p, amount: t.amount - p.short})
			if p.fee > 0 {
				ms = append(ms, &alipayMovement{at: t.paidAt, seq: t.seq, kind: "收费", pay: p, amount: -p.fee})
			}
		}
		for _, rm := range p.refunds {
			ms = append(ms, &alipayMovement{at: rm.r.settlesAt, refund: true, seq: rm.r.seq, kind: "交易退款", pay: p, r: rm.r, amount: -rm.r.amount})
			if rm.share > 0 {
				ms = append(ms, &alipayMovement{at: rm.r.settlesAt, refund: true, seq: rm.r.seq, kind: "收费退回", pay: p, r: rm.r, amount: rm.share})
			}
		}
	}
	// Stable: a trade's two rows, and a refund's, keep their order.
	slices.SortStableFunc(ms, func(a, b *alipayMovement) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.refund != b.refund {
			if a.refund {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	cfg := s.cfg.AlipayFees
	balance, day := cfg.OpeningBalance, ""
	if !cfg.OpeningAt.IsZero() {
		balance = 0
		ms = slices.Insert(ms, 0, &alipayMovement{at: cfg.OpeningAt, kind: topUpKind, amount: cfg.OpeningBalance})
	}
	var breaks []alipayBreak
	for _, m := range ms {
		if d := orderpay.BillDay(m.at); d != day {
			day = d
			if f, ok := s.billFaultHit(BillFaultBalanceBreak, orderpay.ChannelAlipay, d); ok {
				balance += f.Amount
				breaks = append(breaks, alipayBreak{day: d, amount: f.Amount, first: m})
			}
		}
		balance += m.amount
		m.balance = balance
	}
	return ms, breaks
}

// alipayAccountColumns are the columns of the account bill's 账务明细.
var alipayAccountColumns = []string{
	"账务流水号", "业务流水号", "商户订单号", "商品名称", "发生时间", "对方账号", "收入金额（+元）", "支出金额（-元）",
	"账户余额（元）", "交易渠道", "业务类型", "备注",
}

// alipayAccountZip writes the account bill (bill_type=signcustomer) of the day [from, to):
// a zip holding <seller>_<date>_账务明细.csv, GBK, CRLF, one row per movement of the
// account in the day, in order, each with the balance after it:
//
//	#支付宝账务明细查询
//	#账号：[<seller id>]
//	#起始日期：[…]   终止日期：[…]
//	#-----------------------------------------账务明细列表----------------------------------------
//	<the 12 columns>
//	<rows>
//	#-----------------------------------------账务明细列表结束------------------------------------
//	#收入合计：<n>笔，共<yuan>元
//	#支出合计：<n>笔，共<yuan>元
//	#导出时间：[…]
//
// A payment is 在线支付 (its amount in) then 收费 (its fee out); a refund 交易退款 (its amount
// out, 备注 its out_request_no) then 收费退回 (its share of the fee back in). 账务流水号 is
// the day's digits and the row's place in the day.
func (s *Simulator) alipayAccountZip(digits string, from, to, now time.Time) ([]byte, error) {
	s.mu.Lock()
	ms, _ := s.alipayMovements(s.alipayMoney(now))
	s.mu.Unlock()
	day := func(t time.Time) string { return t.In(cst).Format("2006年01月02日 15:04:05") }
	var text bytes.Buffer
	line := func(s string) { text.WriteString(s + "\r\n") }
	line("#支付宝账务明细查询")
	line("#账号：[" + s.keys.SellerID + "]")
	line("#起始日期：[" + day(from) + "]   终止日期：[" + day(to) + "]")
	line("#-----------------------------------------账务明细列表----------------------------------------")
	w := csv.NewWriter(&text)
	w.UseCRLF = true
	_ = w.Write(alipayAccountColumns)
	var nIn, nOut int
	var sumIn, sumOut int64
	n := 0
	for _, m := range ms {
		if m.at.Before(from) || !m.at.Before(to) {
			continue
		}
		n++
		in, out, note := "", "", ""
		if m.amount >= 0 {
			in = orderpay.FormatYuan(m.amount)
			nIn++
			sumIn += m.amount
		} else {
			out = orderpay.FormatYuan(-m.amount)
			nOut++
			sumOut -= m.amount
		}
		if m.r != nil {
			note = m.r.outRequestNo
		}
		var tradeNo, outTradeNo, subject, buyer string
		if m.pay != nil { // the opening top-up has no trade
			t := m.pay.t
			tradeNo, outTradeNo, subject, buyer = t.tradeNo, t.outTradeNo, t.subject, t.buyerLogonID
		}
		_ = w.Write([]string{
			fmt.Sprintf("%s%08d", digits, n), tradeNo, outTradeNo, subject, m.at.In(cst).Format(alipayTimeLayout),
			buyer, in, out, orderpay.FormatYuan(m.balance), "支付宝", m.kind, note,
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, err
	}
	line("#-----------------------------------------账务明细列表结束------------------------------------")
	line(fmt.Sprintf("#收入合计：%d笔，共%s元", nIn, orderpay.FormatYuan(sumIn)))
	line(fmt.Sprintf("#支出合计：%d笔，共%s元", nOut, orderpay.FormatYuan(sumOut)))
	line("#导出时间：[" + day(now) + "]")
	return gbkZip(now, alipayZipEntry{s.keys.SellerID + "_" + digits + "_账务明细.csv", text.Bytes()})
}

// alipayZipEntry is one file of a bill's zip, UTF-8 text to be written as GBK.
type alipayZipEntry struct {
	name string
	text []byte
}

// gbkZip zips entries, each encoded as GBK. A subject can hold characters GBK lacks
// (emoji): they become '?' rather than failing the whole bill. The entries' names are UTF-8
// (flagged as such), not GBK.
func gbkZip(now time.Time, entries ...alipayZipEntry) ([]byte, error) {
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, e := range entries {
		gbk, err := encoding.ReplaceUnsupported(simplifiedchinese.GBK.NewEncoder()).Bytes(e.text)
		if err != nil {
			return nil, err
		}
		f, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: now.In(cst)})
		if err != nil {
			return nil, err
		}
		if _, err := f.Write(gbk); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// alipayPlantedFaults lists every fault the Alipay bills of date (yyyy-MM-dd, China time)
// carry, as of now by Config.Clock, each with its money: the bill's figure less the
// contract's (PlantedFault). A payment's faults are on the day it was paid, a refund's on the
// day it settled, a balance break on the day it opens. Ordered by time, then number.
func (s *Simulator) alipayPlantedFaults(date string) []PlantedFault {
	from, to, err := orderpay.BillDayRange(date)
	if err != nil {
		return nil
	}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	type planted struct {
		at    time.Time
		rank  int // a break first, then payments, then refunds
		seq   int64
		kind  int
		fault PlantedFault
	}
	var out []planted
	add := func(at time.Time, rank int, seq int64, f PlantedFault) {
		f.Channel, f.Date = orderpay.ChannelAlipay, date
		out = append(out, planted{at, rank, seq, slices.Index(BillFaultKinds, f.Kind), f})
	}
	s.mu.Lock()
	pays := s.alipayMoney(s.clock.Now())
	_, breaks := s.alipayMovements(pays)
	s.mu.Unlock()
	for _, b := range breaks {
		if b.day == date {
			var outTradeNo string
			if b.first.pay != nil {
				outTradeNo = b.first.pay.t.outTradeNo
			}
			add(b.first.at, 0, b.first.seq, PlantedFault{Kind: BillFaultBalanceBreak, OutTradeNo: outTradeNo, Amount: b.amount})
		}
	}
	for _, p := range pays {
		t := p.t
		if in(t.paidAt) {
			if p.feeFault != "" {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: p.feeFault, OutTradeNo: t.outTradeNo, Amount: p.fee - p.contractFee})
			}
			if p.missing {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: BillFaultSettlementMissing, OutTradeNo: t.outTradeNo, Amount: -(t.amount - p.fee)})
			} else if p.short > 0 {
				add(t.paidAt, 1, t.seq, PlantedFault{Kind: BillFaultSettlementShort, OutTradeNo: t.outTradeNo, Amount: -p.short})
			}
		}
		for _, rm := range p.refunds {
			if rm.fault == "" || !in(rm.r.settlesAt) {
				continue
			}
			f := PlantedFault{Kind: rm.fault, OutTradeNo: t.outTradeNo, OutRefundNo: rm.r.outRequestNo}
			if rm.fault == BillFaultRefundFeeKept {
				f.Amount = -rm.contractShare
			} else {
				f.Amount = rm.share
			}
			add(rm.r.settlesAt, 2, rm.r.seq, f)
		}
	}
	slices.SortStableFunc(out, func(a, b planted) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq), cmp.Compare(a.kind, b.kind))
	})
	faults := make([]PlantedFault, len(out))
	for i, p := range out {
		faults[i] = p.fault
	}
	return faults
}

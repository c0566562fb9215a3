package sim

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"fmt"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"

	"orderpay"
)

// Alipay's money (fees.go, protocols §F4): what the channel charges each payment, what each
// settled refund gives back, and how both move through the merchant's account, reckoned
// from the trades as they stand whenever a bill is drawn up.

// alipayMoney reckons the money of every paid trade (reckon), in pay order, as of now.
// The caller holds s.mu.
func (s *Simulator) alipayMoney(now time.Time) []*tradeMoney {
	var pays []*tradeMoney
	for _, t := range s.alipay.byOutTradeNo {
		t.refresh(now)
		if !t.paid() {
			continue
		}
		m := t.method
		if m == "" {
			m = orderpay.MethodQR
		}
		p := &tradeMoney{src: t, outTradeNo: t.outTradeNo, method: m, amount: t.amount, paidAt: t.paidAt, seq: t.seq}
		for i, r := range t.refunds {
			if r.settled(now) {
				p.refunds = append(p.refunds, refundMoney{src: r, outRefundNo: r.outRequestNo, amount: r.amount, settlesAt: r.settlesAt,
					seq: r.seq, index: i})
			}
		}
		s.reckon(orderpay.ChannelAlipay, s.cfg.AlipayFees, p)
		pays = append(pays, p)
	}
	sortTrades(pays)
	return pays
}

// alipayMovements lists every movement of the account, chained (chain): a payment's 在线支付
// (its amount in, short if settlement_short) and 收费 (its fee out), unless settlement_missing;
// a refund's 交易退款 (its amount out) and 收费退回 (its share of the fee back in).
func (s *Simulator) alipayMovements(pays []*tradeMoney) ([]*movement, []balanceBreak) {
	var ms []*movement
	for _, p := range pays {
		if !p.missing {
			ms = append(ms, &movement{at: p.paidAt, trade: p, refund: -1, kind: "在线支付", amount: p.amount - p.short})
			if p.fee > 0 {
				ms = append(ms, &movement{at: p.paidAt, trade: p, refund: -1, kind: "收费", amount: -p.fee})
			}
		}
		for i, rm := range p.refunds {
			ms = append(ms, &movement{at: rm.settlesAt, trade: p, refund: i, kind: "交易退款", amount: -rm.amount})
			if rm.share > 0 {
				ms = append(ms, &movement{at: rm.settlesAt, trade: p, refund: i, kind: "收费退回", amount: rm.share})
			}
		}
	}
	return s.chain(orderpay.ChannelAlipay, s.cfg.AlipayFees, ms)
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
		var tradeNo, outTradeNo, subject, buyer string
		if m.trade != nil { // the opening top-up has no trade
			t := m.trade.src.(*alipayTrade)
			tradeNo, outTradeNo, subject, buyer = t.tradeNo, t.outTradeNo, t.subject, t.buyerLogonID
			if m.refund >= 0 {
				note = m.trade.refunds[m.refund].outRefundNo
			}
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
// carry, as of now by Config.Clock, each with its money (planted).
func (s *Simulator) alipayPlantedFaults(date string) []PlantedFault {
	s.mu.Lock()
	pays := s.alipayMoney(s.clock.Now())
	_, breaks := s.alipayMovements(pays)
	s.mu.Unlock()
	return planted(orderpay.ChannelAlipay, date, pays, breaks)
}

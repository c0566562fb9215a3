package sim

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"orderpay"
)

// WeChat Pay's money (fees.go, money.go, protocols §F4): each paid order's fee, each settled
// refund's share of it, and the fund-flow bill of the merchant's basic account, where a
// payment arrives net of its fee and a refund leaves net of the share given back.

// wechatFundFlowColumns head the fund-flow bill's rows, and wechatFundFlowSummaryColumns its
// summary (§F4).
var (
	wechatFundFlowColumns = []string{
		"记账时间", "微信支付业务单号", "资金流水单号", "业务名称", "业务类型", "收支类型", "收支金额(元)", "账户结余(元)",
		"资金变更提交申请人", "备注", "业务凭证号",
	}
	wechatFundFlowSummaryColumns = []string{"资金流水总笔数", "收入笔数", "收入金额", "支出笔数", "支出金额"}
)

var wechatFundFlowBillEndpoint = wechatEndpoint{
	method:   MethodBill,
	key:      func(_ *Simulator, r *http.Request, _ []byte) string { return r.URL.Query().Get("bill_date") },
	run:      (*Simulator).wechatFundFlowBill,
	readOnly: true, // it only issues a download URL
}

// wechatMoney reckons the money of every paid order (reckon) in pay order, with the refunds
// that moved money (SUCCESS), as of now. The caller holds s.mu.
func (s *Simulator) wechatMoney(now time.Time) []*tradeMoney {
	var pays []*tradeMoney
	for _, o := range s.wechat.byOutTradeNo {
		if !o.paid() {
			continue
		}
		p := &tradeMoney{src: o, outTradeNo: o.outTradeNo, method: o.method(s.keys.Wechat.MiniAppID), amount: o.prepay.total,
			paidAt: o.paidAt, seq: o.seq}
		for i, rf := range o.refunds {
			if rf.status(now) == WechatRefundSuccess {
				p.refunds = append(p.refunds, refundMoney{src: rf, outRefundNo: rf.outRefundNo, amount: rf.amount, settlesAt: rf.settlesAt,
					seq: o.seq, index: i})
			}
		}
		s.reckon(orderpay.ChannelWechat, s.cfg.WechatFees, p)
		pays = append(pays, p)
	}
	sortTrades(pays)
	return pays
}

// wechatMovements lists every movement of the basic account, chained (chain): a payment's
// amount net of its fee in (short if settlement_short; none if settlement_missing), a
// refund's amount net of its share out.
func (s *Simulator) wechatMovements(pays []*tradeMoney) ([]*movement, []balanceBreak) {
	var ms []*movement
	for _, p := range pays {
		if !p.missing {
			ms = append(ms, &movement{at: p.paidAt, trade: p, refund: -1, kind: "交易", amount: p.amount - p.fee - p.short})
		}
		for i, rm := range p.refunds {
			ms = append(ms, &movement{at: rm.settlesAt, trade: p, refund: i, kind: "退款", amount: -(rm.amount - rm.share)})
		}
	}
	return s.chain(orderpay.ChannelWechat, s.cfg.WechatFees, ms)
}

// wechatPlantedFaults lists every fault the WeChat Pay bills of date (yyyy-MM-dd, China
// time) carry, as of now by Config.Clock, each with its money (planted).
func (s *Simulator) wechatPlantedFaults(date string) []PlantedFault {
	s.mu.Lock()
	pays := s.wechatMoney(s.clock.Now())
	_, breaks := s.wechatMovements(pays)
	s.mu.Unlock()
	return planted(orderpay.ChannelWechat, date, pays, breaks)
}

// wechatFundFlowBill serves GET /v3/bill/fundflowbill?bill_date=&account_type=&tar_type=
// (§F4): like the trade bill, a signed answer with the SHA1 and a download URL of the file,
// out from 09:00 the next day. account_type is BASIC (the default), OPERATION or FEES; only
// the basic account has movements in the simulator.
func (s *Simulator) wechatFundFlowBill(r *http.Request, _ []byte) wechatAnswer {
	account := r.URL.Query().Get("account_type")
	switch account {
	case "":
		account = "BASIC"
	case "BASIC", "OPERATION", "FEES":
	default:
		return wechatParamError("account_type", "query", "account_type 须为BASIC、OPERATION或FEES")
	}
	return s.wechatBillFile(r, func(day, now time.Time) []byte { return s.wechatFundFlow(day, account == "BASIC", now) })
}

// wechatFundFlow renders the fund-flow bill of one day: the header line, one row per
// movement of the account that day (every value after a backtick, amounts in yuan, the
// balance after the movement), then the summary header and row; lines end with \r\n. The
// opening top-up (FeeConfig.OpeningAt) is a 充值 row. The caller holds s.mu.
func (s *Simulator) wechatFundFlow(day time.Time, basic bool, now time.Time) []byte {
	next := day.AddDate(0, 0, 1)
	var buf bytes.Buffer
	line := func(fields []string, tick bool) { wechatBillLine(&buf, fields, tick) }
	line(wechatFundFlowColumns, false)
	var n, nIn, nOut int
	var in, out int64
	if basic {
		ms, _ := s.wechatMovements(s.wechatMoney(now))
		digits := day.Format("20060102")
		for _, m := range ms {
			if m.at.Before(day) || !m.at.Before(next) {
				continue
			}
			n++
			dir, amount := "收入", m.amount
			if amount < 0 {
				dir, amount = "支出", -amount
				nOut++
				out += amount
			} else {
				nIn++
				in += amount
			}
			var business, voucher string
			switch {
			case m.trade == nil:
			case m.refund < 0:
				o := m.trade.src.(*wechatOrder)
				business, voucher = o.transactionID, o.outTradeNo
			default:
				rf := m.trade.refunds[m.refund].src.(*wechatRefund)
				business, voucher = rf.refundID, rf.outRefundNo
			}
			line([]string{
				m.at.In(cst).Format(time.DateTime), business, fmt.Sprintf("%s%010d", digits, n), m.kind, m.kind, dir,
				orderpay.FormatYuan(amount), orderpay.FormatYuan(m.balance), s.keys.Wechat.MchID, "", voucher,
			}, true)
		}
	}
	line(wechatFundFlowSummaryColumns, false)
	line([]string{strconv.Itoa(n), strconv.Itoa(nIn), orderpay.FormatYuan(in), strconv.Itoa(nOut), orderpay.FormatYuan(out)}, true)
	return buf.Bytes()
}

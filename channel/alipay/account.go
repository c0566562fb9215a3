package alipay

import (
	"context"
	"strings"
	"time"

	"orderpay"
)

var _ orderpay.AccountBillSource = (*Channel)(nil)

// DownloadAccountBill fetches and parses the account bill of one day (yyyy-MM-dd, China
// time): bill_type=signcustomer, by the same URL flow, timing and errors as DownloadBill;
// the file is a zip of one GBK CSV, 账务明细 (ParseAccountBill).
func (c *Channel) DownloadAccountBill(ctx context.Context, date string) (*orderpay.AccountBill, error) {
	data, err := c.downloadBillFile(ctx, "signcustomer", date)
	if err != nil {
		return nil, err
	}
	bill, err := ParseAccountBill(data)
	if err != nil {
		return nil, err
	}
	bill.Date = date
	return bill, nil
}

// Columns of the account bill's 账务明细 that reconciliation reads.
const (
	colRef        = "账务流水号"
	colAt         = "发生时间"
	colIncome     = "收入金额（+元）"
	colExpense    = "支出金额（-元）"
	colBalance    = "账户余额（元）"
	colNote       = "备注"
	colMovingKind = "业务类型"
)

// movementKinds maps the account bill's 业务类型 to a movement's kind; any other is OTHER.
var movementKinds = map[string]orderpay.MovementKind{
	"在线支付": orderpay.MovementPayment,
	"收费":   orderpay.MovementFee,
	"交易退款": orderpay.MovementRefund,
	"收费退回": orderpay.MovementFeeReturn,
}

// ParseAccountBill reads a daily account bill (bill_type=signcustomer) as Alipay serves it:
// a zip holding the GBK CSV of 账务明细, framed by # lines like the trade bill, columns found
// by name, fields trimmed.
//
// Each row is a movement: 在线支付 PAYMENT, 收费 FEE, 交易退款 REFUND, 收费退回 FEE_RETURN,
// anything else OTHER. OutTradeNo is 商户订单号; OutRefundNo the 备注 of a REFUND or
// FEE_RETURN row (the refund's out_request_no); Amount 收入 less 支出 (a row writes one of
// them, the other empty; a 支出 written with a minus sign is read the same); Balance the
// 账户余额 after it; Ref the 账务流水号 and Type the 业务类型. Income and Expense are the
// frame's #收入合计 and #支出合计, whose absence means the file is truncated. Anything that
// does not parse exactly, or a missing column, is EINVALID.
func ParseAccountBill(zipped []byte) (*orderpay.AccountBill, error) {
	files, err := billFiles(zipped)
	if err != nil {
		return nil, err
	}
	var t *billTable
	for name, f := range files {
		if !strings.HasSuffix(strings.ToLower(name), ".csv") {
			continue
		}
		if t != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay account bill holds more than one CSV")
		}
		if t, err = readBillTable(f); err != nil {
			return nil, err
		}
	}
	if t == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay account bill holds no CSV")
	}
	if err := t.need(colRef, colOutTradeNo, colAt, colIncome, colExpense, colBalance, colMovingKind, colNote); err != nil {
		return nil, err
	}
	bill := &orderpay.AccountBill{Channel: orderpay.ChannelAlipay, Account: t.account(), Movements: []orderpay.AccountMovement{}}
	for _, rec := range t.records {
		field := func(name string) string { return t.field(rec, name) }
		bad := func(what string, err error) error {
			return orderpay.Errorf(orderpay.EINVALID, "alipay account bill line %d: %s: %s", rec.line, what, orderpay.ErrorMessage(err))
		}
		m := orderpay.AccountMovement{Kind: orderpay.MovementOther, OutTradeNo: field(colOutTradeNo), Ref: field(colRef), Type: field(colMovingKind)}
		if k, ok := movementKinds[m.Type]; ok {
			m.Kind = k
		}
		if m.Kind == orderpay.MovementRefund || m.Kind == orderpay.MovementFeeReturn {
			m.OutRefundNo = field(colNote)
		}
		in, out := field(colIncome), strings.TrimPrefix(field(colExpense), "-")
		if in == "" && out == "" {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay account bill line %d: neither 收入 nor 支出", rec.line)
		}
		if in != "" {
			v, err := orderpay.ParseYuan(in)
			if err != nil {
				return nil, bad("收入", err)
			}
			m.Amount += v
		}
		if out != "" {
			v, err := orderpay.ParseYuan(out)
			if err != nil {
				return nil, bad("支出", err)
			}
			m.Amount -= v
		}
		if m.Balance, err = orderpay.ParseSignedYuan(field(colBalance)); err != nil {
			return nil, bad("账户余额", err)
		}
		if m.At, err = time.ParseInLocation(timeLayout, field(colAt), cst); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay account bill line %d: 发生时间 %q", rec.line, field(colAt))
		}
		bill.Movements = append(bill.Movements, m)
	}
	for _, total := range []struct {
		prefix string
		into   *int64
	}{{"#收入合计：", &bill.Income}, {"#支出合计：", &bill.Expense}} {
		if *total.into, err = t.frameYuan(total.prefix); err != nil {
			return nil, err
		}
	}
	return bill, nil
}

// frameYuan reads the amount of a frame line "<prefix><n>笔，共<yuan>元" (a negative amount
// is read as its size); the line must be there.
func (t *billTable) frameYuan(prefix string) (int64, error) {
	if _, err := t.frameCount(prefix); err != nil {
		return 0, err
	}
	for _, l := range t.frame {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			_, amount, ok := strings.Cut(rest, "共")
			amount, ok2 := strings.CutSuffix(amount, "元")
			v, err := orderpay.ParseYuan(strings.TrimPrefix(amount, "-"))
			if !ok || !ok2 || err != nil {
				return 0, orderpay.Errorf(orderpay.EINVALID, "alipay account bill: frame line %q has no amount", l)
			}
			return v, nil
		}
	}
	return 0, nil
}

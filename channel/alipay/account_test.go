package alipay_test

import (
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
)

const accountHeader = "账务流水号,业务流水号,商户订单号,商品名称,发生时间,对方账号,收入金额（+元）,支出金额（-元）,账户余额（元）,交易渠道,业务类型,备注\r\n"

// validAccount is a day of the account: a payment and its fee, a refund and its share of
// the fee back, a withdrawal; fields padded with tabs as real files are reported to be.
const validAccount = "#支付宝账务明细查询\r\n#账号：[2088000000000001]\r\n" +
	"#-----------------------------------------账务明细列表----------------------------------------\r\n" +
	accountHeader +
	"2026112000000001\t,T1\t,P1A01\t,x,2026-11-20 10:00:05\t,b,10.00\t,,110.00\t,支付宝,在线支付\t,\r\n" +
	"2026112000000002\t,T1\t,P1A01\t,x,2026-11-20 10:00:05\t,b,,0.06\t,109.94\t,支付宝,收费\t,\r\n" +
	"2026112000000003\t,T1\t,P1A01\t,x,2026-11-20 12:00:00\t,b,,5.00\t,104.94\t,支付宝,交易退款\t,P1A01R1\t\r\n" +
	"2026112000000004\t,T1\t,P1A01\t,x,2026-11-20 12:00:00\t,b,0.03\t,,104.97\t,支付宝,收费退回\t,P1A01R1\t\r\n" +
	"2026112000000005\t,W1\t,\t,提现,2026-11-20 18:00:00\t,,,-100.00\t,4.97\t,支付宝,提现\t,\r\n" +
	"#-----------------------------------------账务明细列表结束------------------------------------\r\n" +
	"#收入合计：2笔，共10.03元\r\n#支出合计：3笔，共105.06元\r\n#导出时间：[2026年11月21日 10:00:00]\r\n"

func accountZip(t *testing.T, text string) []byte {
	t.Helper()
	return gbkZip(t, true, [2]string{"2088000000000001_20261120_账务明细.csv", text})
}

// Each row is a movement of its kind, signed, with the balance after it; the totals come
// from the frame.
func TestParseAccountBill_KindsAmountsBalancesAndTotals(t *testing.T) {
	t.Parallel()
	bill, err := alipay.ParseAccountBill(accountZip(t, validAccount))
	if err != nil {
		t.Fatal(err)
	}
	if bill.Channel != orderpay.ChannelAlipay || bill.Account != "2088000000000001" || bill.Income != 1003 || bill.Expense != 10506 {
		t.Fatalf("bill %+v", bill)
	}
	at := func(h, m, s int) time.Time { return time.Date(2026, 11, 20, h, m, s, 0, orderpay.ChinaTime) }
	want := []orderpay.AccountMovement{
		{At: at(10, 0, 5), Kind: orderpay.MovementPayment, OutTradeNo: "P1A01", Amount: 1000, Balance: 11000, Ref: "2026112000000001", Type: "在线支付"},
		{At: at(10, 0, 5), Kind: orderpay.MovementFee, OutTradeNo: "P1A01", Amount: -6, Balance: 10994, Ref: "2026112000000002", Type: "收费"},
		{At: at(12, 0, 0), Kind: orderpay.MovementRefund, OutTradeNo: "P1A01", OutRefundNo: "P1A01R1", Amount: -500, Balance: 10494, Ref: "2026112000000003", Type: "交易退款"},
		{At: at(12, 0, 0), Kind: orderpay.MovementFeeReturn, OutTradeNo: "P1A01", OutRefundNo: "P1A01R1", Amount: 3, Balance: 10497, Ref: "2026112000000004", Type: "收费退回"},
		{At: at(18, 0, 0), Kind: orderpay.MovementOther, Amount: -10000, Balance: 497, Ref: "2026112000000005", Type: "提现"},
	}
	if len(bill.Movements) != len(want) {
		t.Fatalf("movements %+v", bill.Movements)
	}
	for i, m := range bill.Movements {
		if !m.At.Equal(want[i].At) {
			t.Errorf("movement %d at %v, want %v", i, m.At, want[i].At)
		}
		m.At = want[i].At
		if m != want[i] {
			t.Errorf("movement %d = %+v, want %+v", i, m, want[i])
		}
	}
}

// An account bill cut short or with a figure that does not read exactly is refused whole.
func TestParseAccountBill_RefusesMalformed(t *testing.T) {
	t.Parallel()
	cut := func(old, new string) string {
		t.Helper()
		if !strings.Contains(validAccount, old) {
			t.Fatalf("%q not in the bill", old)
		}
		return strings.Replace(validAccount, old, new, 1)
	}
	for name, text := range map[string]string{
		"no 收入合计 line":       cut("#收入合计：2笔，共10.03元\r\n", ""),
		"no 支出合计 line":       cut("#支出合计：3笔，共105.06元\r\n", ""),
		"收入合计 malformed":     cut("共10.03元", "共10.0.3元"),
		"收入 three decimals":  cut("10.00\t,,110.00", "10.001\t,,110.00"),
		"支出 not a number":    cut(",0.06\t,", ",abc\t,"),
		"余额 malformed":       cut("109.94", "109.9x"),
		"neither in nor out": cut("b,,0.06\t,", "b,,\t,"),
		"no 账户余额 column":     cut("账户余额（元）", "余额（元）"),
		"no 备注 column":       cut(",备注\r\n", ",说明\r\n"),
		"bad 发生时间":           cut("2026-11-20 18:00:00", "2026/11/20 18:00"),
	} {
		if _, err := alipay.ParseAccountBill(accountZip(t, text)); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	for name, data := range map[string][]byte{
		"not a zip": []byte("PK? no"),
		"no csv":    gbkZip(t, false, [2]string{"readme.txt", "x"}),
	} {
		if _, err := alipay.ParseAccountBill(data); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

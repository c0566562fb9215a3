package wechat_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/wechat"
)

const wxHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
	"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包," +
	"手续费,费率,订单金额,申请退款金额,费率备注"

func wxRow(fields ...string) string { return "`" + strings.Join(fields, ",`") }

// The backtick format (§B1): a SUCCESS row is a payment at its order total, a REFUND row a
// refund at its 退款金额 under its 商户退款单号; a product name with a comma does not shift
// the columns; the summary ends the details.
func TestParseTradeBill_BacktickFormat(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		wxHeader,
		wxRow("2026-11-20 10:00:05", "wxapp", "1900000001", "0", "", "4200001", "P1A01", "oid", "NATIVE", "SUCCESS", "OTHERS", "CNY",
			"49.90", "0.00", "0", "0", "0.00", "0.00", "", "", "茶叶, 一斤", "", "0.30", "0.60000%", "49.90", "0.00", ""),
		wxRow("2026-11-20 23:59:50", "wxapp", "1900000001", "0", "", "4200001", "P1A01", "oid", "NATIVE", "REFUND", "OTHERS", "CNY",
			"0.00", "0.00", "5000001", "P1A01R1", "12.30", "0.00", "ORIGINAL", "SUCCESS", "茶叶, 一斤", "", "-0.07", "0.60%", "49.90", "12.30", ""),
		wxRow("2026-11-20 11:00:00", "wxapp", "1900000001", "0", "", "4200002", "P2A01", "oid", "NATIVE", "REVOKED", "OTHERS", "CNY",
			"0.00", "0.00", "0", "0", "0.00", "0.00", "", "", "x", "", "0.00", "0.60%", "1.00", "0.00", ""),
		"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额",
		wxRow("2", "49.90", "12.30", "0.00", "0.23", "49.90", "12.30"),
		"",
	}, "\r\n")
	bill, err := wechat.ParseTradeBill([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rows := bill.Rows
	cst := orderpay.ChinaTime
	want := []orderpay.BillRow{
		{Kind: orderpay.BillPayment, OutTradeNo: "P1A01", TradeNo: "4200001", Amount: 4990, At: time.Date(2026, 11, 20, 10, 0, 5, 0, cst),
			Fee: 30, Rate: 60000, RateKnown: true},
		{Kind: orderpay.BillRefund, OutTradeNo: "P1A01", TradeNo: "4200001", OutRefundNo: "P1A01R1", Amount: 1230,
			At: time.Date(2026, 11, 20, 23, 59, 50, 0, cst), Fee: 7},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for i := range want {
		if rows[i].Kind != want[i].Kind || rows[i].OutTradeNo != want[i].OutTradeNo || rows[i].TradeNo != want[i].TradeNo ||
			rows[i].OutRefundNo != want[i].OutRefundNo || rows[i].Amount != want[i].Amount || !rows[i].At.Equal(want[i].At) ||
			rows[i].Fee != want[i].Fee || rows[i].Rate != want[i].Rate || rows[i].RateKnown != want[i].RateKnown {
			t.Fatalf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	if bill.FeeTotal != 23 || bill.Account != "1900000001" {
		t.Fatalf("fee total %d, account %q", bill.FeeTotal, bill.Account)
	}
	// An empty day: header and summary only.
	if empty, err := wechat.ParseTradeBill([]byte(wxHeader + "\r\n总交易单数,应结订单总金额,手续费总金额\r\n`0,`0.00,`0.00\r\n")); err != nil || len(empty.Rows) != 0 {
		t.Fatalf("empty bill: %+v, %v", empty, err)
	}
}

// A bill that cannot be read exactly is refused whole. Each case differs from a bill that
// parses (good with its summary) by one fault only.
func TestParseTradeBill_RefusesTruncatedOrMalformed(t *testing.T) {
	t.Parallel()
	good := wxRow("2026-11-20 10:00:05", "wxapp", "1900000001", "0", "", "4200001", "P1A01", "oid", "NATIVE", "SUCCESS", "OTHERS", "CNY",
		"49.90", "0.00", "0", "0", "0.00", "0.00", "", "", "x", "", "0.30", "0.60%", "49.90", "0.00", "")
	const summary = "\r\n总交易单数,手续费总金额\r\n`1,`0.30\r\n"
	if _, err := wechat.ParseTradeBill([]byte(wxHeader + "\r\n" + good + summary)); err != nil {
		t.Fatalf("the good bill: %v", err)
	}
	// without drops column name from the header and its field from the row.
	without := func(name string) string {
		header := strings.Split(wxHeader, ",")
		i := slices.Index(header, name)
		row := strings.Split(strings.TrimPrefix(good, "`"), ",`")
		return strings.Join(slices.Delete(header, i, i+1), ",") + "\r\n" + wxRow(slices.Delete(row, i, i+1)...) + summary
	}
	for name, text := range map[string]string{
		"empty":          "",
		"no summary":     wxHeader + "\r\n" + good + "\r\n",
		"summary cut":    wxHeader + "\r\n" + good + "\r\n总交易单数,手续费总金额\r\n",
		"no backtick":    wxHeader + "\r\n" + strings.ReplaceAll(good, "`", "") + summary,
		"bad amount":     wxHeader + "\r\n" + strings.Replace(good, "`0.60%,`49.90", "`0.60%,`49.9x", 1) + summary,
		"missing column": "交易时间,商户订单号\r\n" + summary,
		"no 手续费 column":  without("手续费"),
		"no 费率 column":   without("费率"),
		"bad fee":        wxHeader + "\r\n" + strings.Replace(good, "`0.30,", "`0.3x,", 1) + summary,
		"negative fee":   wxHeader + "\r\n" + strings.Replace(good, "`0.30,", "`-0.30,", 1) + summary,
		"bad rate":       wxHeader + "\r\n" + strings.Replace(good, "`0.60%,", "`0.6,", 1) + summary,
		"bad fee total":  wxHeader + "\r\n" + good + "\r\n总交易单数,手续费总金额\r\n`1,`0.3x\r\n",
		"no fee total":   wxHeader + "\r\n" + good + "\r\n总交易单数\r\n`1\r\n",
	} {
		if _, err := wechat.ParseTradeBill([]byte(text)); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

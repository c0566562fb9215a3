package alipay_test

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"orderpay"
	"orderpay/channel/alipay"
)

// gbkZip zips files (name → UTF-8 text), each written as GBK; gbkNames writes the names in
// GBK without the UTF-8 flag too, as zip tools in China do.
func gbkZip(t *testing.T, gbkNames bool, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		name := f[0]
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		if gbkNames {
			n, err := simplifiedchinese.GBK.NewEncoder().String(name)
			if err != nil {
				t.Fatal(err)
			}
			h.Name, h.NonUTF8 = n, true
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		text, err := simplifiedchinese.GBK.NewEncoder().String(f[1])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(text))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const billHeader = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户," +
	"订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称," +
	"商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注\r\n"

const summaryHeader = "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,支付宝优惠（元）," +
	"商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）\r\n"

// A bill as real files are described (§A3): GBK, # frame lines, fields padded with tabs, a
// product name with a comma (CSV-quoted), a summary file beside the detail file, GBK file
// names. Payments take the order total, refunds the negative 商家实收 made positive; the fee
// is the 服务费 charged (negative in the file) or given back (positive), and the 汇总's 合计
// row gives the day's fees and net.
func TestParseTradeBill_GBKZipWithFrameAndPadding(t *testing.T) {
	t.Parallel()
	detail := "#支付宝业务明细查询\r\n#账号：[2088000000000001]\r\n" +
		"#-----------------------------------------业务明细列表----------------------------------------\r\n" +
		billHeader +
		"2026112022001\t,P20261120A01\t,交易\t,\"茶叶, 一斤\t\",2026-11-20 10:00:00\t,2026-11-20 10:00:05\t,,,,,buyer***,49.90\t,49.90\t,0.00,0.00,0.00,0.00,0.00,,0.00,0.00,\t,-0.30\t,0.00,\r\n" +
		"2026112022001\t,P20261120A01\t,退款\t,茶叶\t,2026-11-20 10:00:00\t,2026-11-20 23:59:59\t,,,,,buyer***,49.90\t,-12.30\t,0.00,0.00,0.00,0.00,0.00,,0.00,0.00,P20261120A01R1\t,0.07\t,0.00,\r\n" +
		"2026112022002\t,P20261120A02\t,其他\t,x\t,2026-11-20 11:00:00\t,2026-11-20 11:00:00\t,,,,,buyer***,1.00\t,1.00\t,0.00,0.00,0.00,0.00,0.00,,0.00,0.00,\t,0.00,0.00,\r\n" +
		"#-----------------------------------------业务明细列表结束------------------------------------\r\n" +
		"#交易合计：1笔，商家实收共：49.90元\r\n#退款合计：1笔，商家实收共：-12.30元\r\n"
	summary := "#支付宝业务汇总查询\r\n#账号：[2088000000000001]\r\n" +
		"#-----------------------------------------业务汇总列表----------------------------------------\r\n" +
		summaryHeader +
		"\t,\t,1\t,1\t,49.90\t,37.60\t,0.00,0.00,0.00,-0.23\t,0.00,37.37\t\r\n" +
		"合计\t,,1\t,1\t,49.90\t,37.60\t,0.00,0.00,0.00,-0.23\t,0.00,37.37\t\r\n" +
		"#-----------------------------------------业务汇总列表结束------------------------------------\r\n"
	for _, gbkNames := range []bool{false, true} {
		bill, err := alipay.ParseTradeBill(gbkZip(t, gbkNames,
			[2]string{"2088000000000001_20261120_业务明细.csv", detail},
			[2]string{"2088000000000001_20261120_业务明细(汇总).csv", summary}))
		if err != nil {
			t.Fatalf("gbk names %v: %v", gbkNames, err)
		}
		if bill.Channel != orderpay.ChannelAlipay || bill.Account != "2088000000000001" ||
			bill.FeeTotal != 23 || bill.NetTotal != 3737 || !bill.HasNetTotal {
			t.Fatalf("gbk names %v: bill %+v", gbkNames, bill)
		}
		rows := bill.Rows
		cst := orderpay.ChinaTime
		want := []orderpay.BillRow{
			{Kind: orderpay.BillPayment, OutTradeNo: "P20261120A01", TradeNo: "2026112022001", Amount: 4990,
				At: time.Date(2026, 11, 20, 10, 0, 5, 0, cst), Fee: 30},
			{Kind: orderpay.BillRefund, OutTradeNo: "P20261120A01", TradeNo: "2026112022001", OutRefundNo: "P20261120A01R1", Amount: 1230,
				At: time.Date(2026, 11, 20, 23, 59, 59, 0, cst), Fee: 7},
		}
		if len(rows) != len(want) {
			t.Fatalf("gbk names %v: rows %+v", gbkNames, rows)
		}
		for i := range want {
			if rows[i].Kind != want[i].Kind || rows[i].OutTradeNo != want[i].OutTradeNo || rows[i].TradeNo != want[i].TradeNo ||
				rows[i].OutRefundNo != want[i].OutRefundNo || rows[i].Amount != want[i].Amount || !rows[i].At.Equal(want[i].At) ||
				rows[i].Fee != want[i].Fee {
				t.Fatalf("gbk names %v: row %d = %+v, want %+v", gbkNames, i, rows[i], want[i])
			}
		}
	}
}

// A bill that cannot be read exactly is refused whole: never half-read, never rounded.
func TestParseTradeBill_RefusesWhatItCannotReadExactly(t *testing.T) {
	t.Parallel()
	row := func(amount string) string {
		return billHeader + "2026112022001,P1A01,交易,x,2026-11-20 10:00:00,2026-11-20 10:00:05,,,,,b," + amount +
			"," + amount + ",0.00,0.00,0.00,0.00,0.00,,0.00,0.00,,0.00,0.00,\r\n"
	}
	for name, data := range map[string][]byte{
		"not a zip":        []byte("PK? no"),
		"no detail file":   gbkZip(t, false, [2]string{"readme.txt", "x"}),
		"three decimals":   gbkZip(t, false, [2]string{"b_业务明细.csv", row("49.901")}),
		"no amount column": gbkZip(t, false, [2]string{"b_业务明细.csv", "支付宝交易号,商户订单号,业务类型,完成时间\r\n1,P1,交易,2026-11-20 10:00:00\r\n"}),
	} {
		if _, err := alipay.ParseTradeBill(data); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

// validTradeBill is a well-formed detail and summary, each of which the malformed cases of
// TestParseTradeBill_RefusesMalformedFeesAndTotals change in one place.
const (
	validDetail = "#支付宝业务明细查询\r\n#账号：[2088000000000001]\r\n" + billHeader +
		"2026112022001,P1A01,交易,x,2026-11-20 10:00:00,2026-11-20 10:00:05,,,,,b,10.00,10.00,0.00,0.00,0.00,0.00,0.00,,0.00,0.00,,-0.06,0.00,\r\n" +
		"2026112022001,P1A01,退款,x,2026-11-20 10:00:00,2026-11-20 12:00:00,,,,,b,10.00,-5.00,0.00,0.00,0.00,0.00,0.00,,0.00,0.00,P1A01R1,0.03,0.00,\r\n" +
		"#交易合计：1笔，商家实收共：10.00元\r\n#退款合计：1笔，商家实收共：-5.00元\r\n"
	validSummary = "#支付宝业务汇总查询\r\n" + summaryHeader +
		",,1,1,10.00,5.00,0.00,0.00,0.00,-0.03,0.00,4.97\r\n" +
		"合计,,1,1,10.00,5.00,0.00,0.00,0.00,-0.03,0.00,4.97\r\n"
)

func tradeBillZip(t *testing.T, detail, summary string) []byte {
	t.Helper()
	return gbkZip(t, false, [2]string{"a_20261120_业务明细.csv", detail}, [2]string{"a_20261120_业务明细(汇总).csv", summary})
}

// Fees and totals that cannot be read exactly, or a file cut short, refuse the whole bill.
func TestParseTradeBill_RefusesMalformedFeesAndTotals(t *testing.T) {
	t.Parallel()
	bill, err := alipay.ParseTradeBill(tradeBillZip(t, validDetail, validSummary))
	if err != nil || len(bill.Rows) != 2 || bill.Rows[0].Fee != 6 || bill.Rows[1].Fee != 3 || bill.FeeTotal != 3 || bill.NetTotal != 497 {
		t.Fatalf("the valid bill: %+v %v", bill, err)
	}
	// Without its summary file the bill is still read, without the totals.
	bill, err = alipay.ParseTradeBill(gbkZip(t, false, [2]string{"a_20261120_业务明细.csv", validDetail}))
	if err != nil || bill.HasNetTotal || bill.FeeTotal != 0 || len(bill.Rows) != 2 {
		t.Fatalf("without a summary: %+v %v", bill, err)
	}
	cut := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("%q not in the bill", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	for name, c := range map[string][2]string{
		"no 交易合计 line":           {cut(validDetail, "#交易合计：1笔，商家实收共：10.00元\r\n", ""), validSummary},
		"no 退款合计 line":           {cut(validDetail, "#退款合计：1笔，商家实收共：-5.00元\r\n", ""), validSummary},
		"交易合计 counts another":    {cut(validDetail, "#交易合计：1笔", "#交易合计：2笔"), validSummary},
		"summary without 合计":     {validDetail, cut(validSummary, "合计,,1,1,10.00,5.00,0.00,0.00,0.00,-0.03,0.00,4.97\r\n", "")},
		"服务费 of three decimals":  {cut(validDetail, ",-0.06,", ",-0.061,"), validSummary},
		"服务费 not a number":       {cut(validDetail, ",0.03,", ",abc,"), validSummary},
		"合计 服务费 malformed":       {validDetail, cut(validSummary, "合计,,1,1,10.00,5.00,0.00,0.00,0.00,-0.03", "合计,,1,1,10.00,5.00,0.00,0.00,0.00,--0.03")},
		"合计 实收净额 malformed":      {validDetail, cut(validSummary, "合计,,1,1,10.00,5.00,0.00,0.00,0.00,-0.03,0.00,4.97", "合计,,1,1,10.00,5.00,0.00,0.00,0.00,-0.03,0.00,4.9.7")},
		"no 服务费 column":          {cut(validDetail, "服务费（元）", "手续费（元）"), validSummary},
		"summary no 实收净额 column": {validDetail, cut(validSummary, "实收净额（元）", "净额（元）")},
		"positive 服务费 on 交易":     {cut(validDetail, ",-0.06,", ",0.06,"), validSummary},
		"negative 服务费 on 退款":     {cut(validDetail, ",0.03,", ",-0.03,"), validSummary},
	} {
		if _, err := alipay.ParseTradeBill(tradeBillZip(t, c[0], c[1])); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

package sim_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/clocktest"
)

var alipayBillColumns = []string{
	"支付宝交易号", "商户订单号", "业务类型", "商品名称", "创建时间", "完成时间", "门店编号", "门店名称",
	"操作员", "终端号", "对方账户", "订单金额（元）", "商家实收（元）", "支付宝红包（元）", "集分宝（元）",
	"支付宝优惠（元）", "商家优惠（元）", "券核销金额（元）", "券名称", "商家红包消费金额（元）", "卡消费金额（元）",
	"退款批次号/请求号", "服务费（元）", "分润（元）", "备注",
}

// alipayBillRow is the detail row the bill should hold for a trade or refund; fee is its
// 服务费 (at the default 0.6 %, half up, refunds giving back their share).
func alipayBillRow(q *alipay.TradeQueryRsp, kind, subject, created, completed, amount, requestNo, fee string) []string {
	return []string{
		q.TradeNo, q.OutTradeNo, kind, subject, created, completed, "", "", "", "", q.BuyerLogonId,
		amount, amount, "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00", "0.00", requestNo, fee, "0.00", "",
	}
}

func TestAlipayBill_DailyZipHoldsGBKRowsOfPaymentsAndSettledRefunds(t *testing.T) {
	t.Parallel()
	// Refunds settle 10 h after they are accepted, so one crosses midnight.
	b := setup(t, sim.Config{RefundDelay: 10 * time.Hour})
	stamp := func(d time.Duration) string { return b.clock.Now().Add(d).In(cst).Format("2006-01-02 15:04:05") }
	dayStart := b.clock.Now() // 2025-03-14 10:00 China time

	// precreate's subject is "order <no>", which the bill shows as 商品名称.
	pay := func(no, amount string) {
		qr := b.precreate(t, no, amount, b.clock.Now().Add(time.Hour), "")
		if _, err := b.sim.Pay(context.Background(), qr); err != nil {
			t.Fatal(err)
		}
	}
	pay("BL_A", "12.34")
	at10 := stamp(0)
	pay("BL_B", "5.00")
	b.alipayRefund(t, "BL_A", "BL_A_r1", "2.00") // settles 20:00 the same day
	b.alipayScanned(t, "BL_W", "9.00")           // never paid: not in any bill
	b.clock.Advance(5 * time.Hour)
	b.alipayRefund(t, "BL_B", "BL_B_r1", "5.00") // accepted 15:00, settles 01:00 the next day
	b.clock.Advance(8 * time.Hour)               // 23:00
	pay("BL_C", "1.00")
	at23 := stamp(0)
	b.clock.Advance(3 * time.Hour) // 02:00 the next day
	pay("BL_E", "3.00")
	at02 := stamp(0)

	qA, qB, qC, qE := b.query(t, "BL_A"), b.query(t, "BL_B"), b.query(t, "BL_C"), b.query(t, "BL_E")
	at20 := dayStart.Add(10 * time.Hour).In(cst).Format("2006-01-02 15:04:05")
	at01 := dayStart.Add(15 * time.Hour).In(cst).Format("2006-01-02 15:04:05")

	// The next day's bill is out at 10:00 China time, not before.
	b.clock.Set(time.Date(2025, 3, 15, 9, 59, 59, 0, cst))
	wantAlipayCode(t, "yesterday before 10:00", b.alipayBillURL(t, "2025-03-14").Error, "40004", "isp.bill_not_exist")
	b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))
	rsp := b.alipayBillURL(t, "2025-03-14")
	if rsp.Code != alipay.CodeSuccess || !strings.HasPrefix(rsp.BillDownloadURL, b.srv.URL+"/sim/bills/alipay/") {
		t.Fatalf("bill url: %+v", rsp)
	}
	got := downloadAlipayBill(t, rsp.BillDownloadURL)
	if !strings.HasSuffix(got.name, "_20250314_业务明细.csv") || !strings.HasPrefix(got.name, b.keys.SellerID) {
		t.Errorf("zip entry %q", got.name)
	}
	for _, want := range []string{"#支付宝业务明细查询", "#账号：[" + b.keys.SellerID + "]",
		"#起始日期：[2025年03月14日 00:00:00]   终止日期：[2025年03月15日 00:00:00]"} {
		if !slices.Contains(got.lines, want) {
			t.Errorf("bill lacks the line %q:\n%s", want, strings.Join(got.lines, "\n"))
		}
	}
	footer := strings.Join(got.lines[len(got.lines)-3:], "\n")
	if !strings.Contains(footer, "#交易合计：3笔，商家实收共：18.34元") || !strings.Contains(footer, "#退款合计：1笔，商家实收共：-2.00元") {
		t.Errorf("footer:\n%s", footer)
	}
	rows := got.rows(t)
	want := [][]string{
		alipayBillColumns,
		alipayBillRow(qA, "交易", "order BL_A", at10, at10, "12.34", "", "-0.07"),
		alipayBillRow(qB, "交易", "order BL_B", at10, at10, "5.00", "", "-0.03"),
		alipayBillRow(qA, "退款", "order BL_A", at10, at20, "-2.00", "BL_A_r1", "0.01"),
		alipayBillRow(qC, "交易", "order BL_C", at23, at23, "1.00", "", "-0.01"),
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows\n got %q\nwant %q", rows, want)
	}

	b.clock.Set(time.Date(2025, 3, 16, 10, 0, 0, 0, cst))
	rows = downloadAlipayBill(t, b.alipayBillURL(t, "2025-03-15").BillDownloadURL).rows(t)
	want = [][]string{
		alipayBillColumns,
		alipayBillRow(qB, "退款", "order BL_B", at10, at01, "-5.00", "BL_B_r1", "0.03"),
		alipayBillRow(qE, "交易", "order BL_E", at02, at02, "3.00", "", "-0.02"),
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("next day's rows\n got %q\nwant %q", rows, want)
	}

	// The monthly bill holds both days, from the 3rd of the next month.
	wantAlipayCode(t, "current month", b.alipayBillURL(t, "2025-03").Error, "40004", "isp.bill_not_exist")
	b.clock.Set(time.Date(2025, 4, 3, 10, 0, 0, 0, cst))
	if rows := downloadAlipayBill(t, b.alipayBillURL(t, "2025-03").BillDownloadURL).rows(t); len(rows) != 1+6 {
		t.Fatalf("monthly bill has %d rows, want a header and 6", len(rows))
	}
}

func TestAlipayBill_TodayFutureAndMalformedAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	// 00:30 in China is still the previous day in UTC: days are China's days.
	b.clock.Set(time.Date(2025, 3, 14, 0, 30, 0, 0, cst))
	cases := []struct{ date, code, subCode string }{
		{"2025-03-14", "40004", "isp.bill_not_exist"},
		{"2025-03-15", "40004", "isp.bill_not_exist"},
		{"2025-03-13", "40004", "isp.bill_not_exist"}, // 00:30: not out before 10:00
		{"2015-12-31", "40004", "isp.bill_not_exist"},
		{"2025-3-1", "40004", "isv.invalid-arguments"},
		{"2025-02-30", "40004", "isv.invalid-arguments"},
		{"20250301", "40004", "isv.invalid-arguments"},
	}
	for _, tc := range cases {
		wantAlipayCode(t, tc.date, b.alipayBillURL(t, tc.date).Error, tc.code, tc.subCode)
	}
	for _, q := range []alipay.BillDownloadURLQuery{{BillType: "signcustomer", BillDate: "2025-02"}, {BillType: "fund", BillDate: "2025-03-01"}} {
		rsp, err := b.client.BillDownloadURLQuery(context.Background(), q)
		if err != nil || rsp.SubCode != "isv.invalid-arguments" {
			t.Fatalf("%+v: %+v %v", q, rsp, err)
		}
	}
	// An empty day still has a bill: the header and no rows.
	if rows := downloadAlipayBill(t, b.alipayBillURL(t, "2025-03-01").BillDownloadURL).rows(t); len(rows) != 1 {
		t.Fatalf("empty day: %q", rows)
	}
}

func TestAlipayBill_URLWorksFor30SecondsOfWallTime(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	wall := clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	sim.SetAlipayWallClock(b.sim, wall.Now)
	url := b.alipayBillURL(t, "2025-03-13").BillDownloadURL

	alipayStatus := func(u string) int {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wall.Advance(29 * time.Second)
	if s := alipayStatus(url); s != http.StatusOK {
		t.Fatalf("at 29 s: %d, want 200", s)
	}
	if s := alipayStatus(url); s != http.StatusOK {
		t.Fatalf("a second download at 29 s: %d, want 200", s)
	}
	wall.Advance(time.Second)
	if s := alipayStatus(url); s != http.StatusNotFound {
		t.Fatalf("at 30 s: %d, want 404", s)
	}
	if s := alipayStatus(b.srv.URL + "/sim/bills/alipay/nosuchtoken"); s != http.StatusNotFound {
		t.Fatalf("unknown token: %d, want 404", s)
	}
	// Simulated time does not expire a URL: only wall time does.
	fresh := b.alipayBillURL(t, "2025-03-13").BillDownloadURL
	b.clock.Advance(time.Hour)
	if s := alipayStatus(fresh); s != http.StatusOK {
		t.Fatalf("after an hour of simulated time: %d, want 200", s)
	}
}

package sim_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// wxTradeBill asks for a bill and returns hash_value and download_url.
func (b *wxBundle) wxTradeBill(t *testing.T, query string) (string, string) {
	t.Helper()
	a := b.call(t, http.MethodGet, "/v3/bill/tradebill?"+query, "")
	if a.status != http.StatusOK {
		t.Fatalf("tradebill %s: %s", query, a)
	}
	m := a.json(t)
	if m["hash_type"] != "SHA1" {
		t.Fatalf("hash_type %v", m["hash_type"])
	}
	hash, _ := m["hash_value"].(string)
	url, _ := m["download_url"].(string)
	return hash, url
}

// download fetches a download_url with a signed GET, as the SDK does, and returns the raw
// answer.
func (b *wxBundle) download(t *testing.T, url string) wxAnswer {
	t.Helper()
	return b.doURL(t, url, wxRequest{method: http.MethodGet, uri: strings.TrimPrefix(url, b.srv.URL)})
}

// wxBillLines splits a bill into its lines, the fields of each row without their backticks.
func wxBillLines(t *testing.T, data []byte) (header []string, rows [][]string, summaryHeader, summary []string) {
	t.Helper()
	text := string(data)
	if !strings.HasSuffix(text, "\r\n") {
		t.Fatalf("bill does not end with CRLF: %q", text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n")
	if len(lines) < 3 {
		t.Fatalf("bill has %d lines: %q", len(lines), text)
	}
	ticked := func(line string) []string {
		if !strings.HasPrefix(line, "`") {
			t.Fatalf("row %q does not start with a backtick", line)
		}
		return strings.Split(line[1:], ",`")
	}
	header = strings.Split(lines[0], ",")
	for _, l := range lines[1 : len(lines)-2] {
		rows = append(rows, ticked(l))
	}
	return header, rows, strings.Split(lines[len(lines)-2], ","), ticked(lines[len(lines)-1])
}

var wxBillColumns = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
	"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"

func TestWechatBill_DayOfPaymentsAndRefundsInTheBacktickFormat(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{}) // the simulated clock starts 2025-03-14 10:00 in China
	day := b.clock.Now()
	b.paid(t, "BILL_A01", 1234)
	b.clock.Advance(time.Hour)
	b.paid(t, "BILL_B01", 500)
	b.clock.Advance(time.Hour)
	refund := wxRefundOf(t, b.refund(t, "BILL_B01", "BILL_B01_R1", 200, 500))
	b.prepay(t, "BILL_C01", 900, time.Time{}, "") // never paid: in no bill
	b.clock.Advance(22 * time.Hour)               // 2025-03-15 10:00
	b.paid(t, "BILL_D01", 100)                    // the next day: not in the 14th's bill
	a, bb := wxEntry(t, b.sim, "BILL_A01"), wxEntry(t, b.sim, "BILL_B01")

	hash, url := b.wxTradeBill(t, "bill_date=2025-03-14&bill_type=ALL")
	if !strings.HasPrefix(url, b.srv.URL+"/v3/billdownload/file?token=") {
		t.Fatalf("download_url %s does not point at the simulator %s", url, b.srv.URL)
	}
	got := b.download(t, url)
	if got.status != http.StatusOK {
		t.Fatalf("download: %s", got)
	}
	// §B1: the download is not signed.
	for _, h := range []string{"Wechatpay-Signature", "Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Serial"} {
		if got.header.Get(h) != "" {
			t.Errorf("the download carries %s", h)
		}
	}
	if sum := sha1.Sum(got.body); hex.EncodeToString(sum[:]) != hash {
		t.Fatalf("hash_value %s is not the SHA1 of the file", hash)
	}

	header, rows, summaryHeader, summary := wxBillLines(t, got.body)
	if strings.Join(header, ",") != wxBillColumns {
		t.Fatalf("header %q", header)
	}
	want := [][]string{
		{day.In(cst).Format(time.DateTime), b.wk.AppID, b.wk.MchID, "0", "", a.TradeNo, "BILL_A01", "", "NATIVE", "SUCCESS", "OTHERS", "CNY",
			"12.34", "0.00", "0", "0", "0.00", "0.00", "", "", "订单 BILL_A01", "", "0.07", "0.60000%", "12.34", "0.00", ""},
		{day.Add(time.Hour).In(cst).Format(time.DateTime), b.wk.AppID, b.wk.MchID, "0", "", bb.TradeNo, "BILL_B01", "", "NATIVE", "SUCCESS", "OTHERS", "CNY",
			"5.00", "0.00", "0", "0", "0.00", "0.00", "", "", "订单 BILL_B01", "", "0.03", "0.60000%", "5.00", "0.00", ""},
		{day.Add(2 * time.Hour).In(cst).Format(time.DateTime), b.wk.AppID, b.wk.MchID, "0", "", bb.TradeNo, "BILL_B01", "", "NATIVE", "REFUND", "OTHERS", "CNY",
			"0.00", "0.00", refund.RefundID, "BILL_B01_R1", "2.00", "0.00", "ORIGINAL", "SUCCESS", "订单 BILL_B01", "", "-0.01", "0.60000%", "5.00", "2.00", ""},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %q", len(rows), len(want), rows)
	}
	for i := range want {
		if len(rows[i]) != len(want[i]) {
			t.Fatalf("row %d has %d fields: %q", i, len(rows[i]), rows[i])
		}
		for j := range want[i] {
			if j == 7 { // 用户标识: the buyer's openid
				if !strings.HasPrefix(rows[i][j], "o") {
					t.Errorf("row %d openid %q", i, rows[i][j])
				}
				continue
			}
			if rows[i][j] != want[i][j] {
				t.Errorf("row %d %s = %q, want %q", i, strings.Split(wxBillColumns, ",")[j], rows[i][j], want[i][j])
			}
		}
	}
	if strings.Join(summaryHeader, ",") != "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额" {
		t.Fatalf("summary header %q", summaryHeader)
	}
	if strings.Join(summary, ",") != "3,17.34,2.00,0.00,0.09,17.34,2.00" {
		t.Fatalf("summary %q", summary)
	}

	// SUCCESS and REFUND bills keep only their rows; GZIP compresses the same file.
	_, url = b.wxTradeBill(t, "bill_date=2025-03-14&bill_type=SUCCESS")
	if _, rows, _, summary := wxBillLines(t, b.download(t, url).body); len(rows) != 2 || summary[0] != "2" {
		t.Fatalf("SUCCESS bill: %q %q", rows, summary)
	}
	_, url = b.wxTradeBill(t, "bill_date=2025-03-14&bill_type=REFUND")
	if _, rows, _, _ := wxBillLines(t, b.download(t, url).body); len(rows) != 1 || rows[0][9] != "REFUND" {
		t.Fatalf("REFUND bill: %q", rows)
	}
	hash, url = b.wxTradeBill(t, "bill_date=2025-03-14&tar_type=GZIP")
	gz := b.download(t, url)
	if sum := sha1.Sum(gz.body); hex.EncodeToString(sum[:]) != hash {
		t.Fatal("GZIP: hash_value is not the SHA1 of the downloaded bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, got.body) {
		t.Fatal("the GZIP bill is not the ALL bill compressed")
	}

	// A day without trades has a bill without rows.
	_, url = b.wxTradeBill(t, "bill_date=2025-03-13")
	if _, rows, _, summary := wxBillLines(t, b.download(t, url).body); len(rows) != 0 || strings.Join(summary, ",") != "0,0.00,0.00,0.00,0.00,0.00,0.00" {
		t.Fatalf("empty day: %q %q", rows, summary)
	}
}

func TestWechatBill_RefusalsAndTheFiveMinuteURLOfWallTime(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{}) // 2025-03-14 10:00 in China
	for _, tc := range []struct{ query, code string }{
		{"bill_date=2025-03-14", "NO_STATEMENT_EXIST"}, // today
		{"bill_date=2025-03-20", "NO_STATEMENT_EXIST"}, // the future
		{"bill_date=2024-12-13", "NO_STATEMENT_EXIST"}, // older than three months
		{"bill_date=20250313", "PARAM_ERROR"},
		{"bill_date=2025-03-13&bill_type=PAID", "PARAM_ERROR"},
		{"bill_date=2025-03-13&tar_type=ZIP", "PARAM_ERROR"},
	} {
		wantWxError(t, tc.query, b.call(t, http.MethodGet, "/v3/bill/tradebill?"+tc.query, ""), 400, tc.code)
	}
	// Yesterday's bill is generated from 09:00 China time.
	b.clock.Set(time.Date(2025, 3, 14, 8, 59, 0, 0, cst))
	wantWxError(t, "before 09:00", b.call(t, http.MethodGet, "/v3/bill/tradebill?bill_date=2025-03-13", ""), 400, "STATEMENT_CREATING")
	b.clock.Advance(time.Minute)
	_, url := b.wxTradeBill(t, "bill_date=2025-03-13")

	// The download is a signed request even though its answer is not signed.
	wantWxError(t, "unsigned download request", b.doURL(t, url, wxRequest{method: http.MethodGet, noAuth: true}), 401, "SIGN_ERROR")
	if a := b.download(t, url); a.status != http.StatusOK {
		t.Fatalf("download within 5 minutes: %s", a)
	}
	// Five minutes of WeChat's wall clock, not of the simulated time.
	b.clock.Advance(time.Hour)
	if a := b.download(t, url); a.status != http.StatusOK {
		t.Fatalf("download after an hour of simulated time: %s", a)
	}
	b.wallClock.Advance(5 * time.Minute)
	// The download's answers are never signed, its refusals neither.
	wantWxErrorSigned(t, "download after 5 minutes", b.download(t, url), 400, "INVALID_REQUEST", false)
	wantWxErrorSigned(t, "unknown token", b.download(t, b.srv.URL+"/v3/billdownload/file?token=nosuch"), 400, "INVALID_REQUEST", false)
}

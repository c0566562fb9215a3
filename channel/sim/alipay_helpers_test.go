package sim_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"
	"golang.org/x/text/encoding/simplifiedchinese"

	"orderpay/channel/sim"
)

// alipayPaid precreates outTradeNo for amount (yuan) and pays it, and returns the trade_no.
func (b *bundle) alipayPaid(t *testing.T, outTradeNo, amount string) string {
	t.Helper()
	qr := b.precreate(t, outTradeNo, amount, b.clock.Now().Add(time.Hour), "")
	res, err := b.sim.Pay(context.Background(), qr)
	if err != nil {
		t.Fatalf("pay %s: %v", outTradeNo, err)
	}
	return res.TradeNo
}

// alipayScanned precreates outTradeNo and scans it without paying.
func (b *bundle) alipayScanned(t *testing.T, outTradeNo, amount string) string {
	t.Helper()
	qr := b.precreate(t, outTradeNo, amount, b.clock.Now().Add(time.Hour), "")
	if _, err := b.sim.Scan(context.Background(), qr); err != nil {
		t.Fatalf("scan %s: %v", outTradeNo, err)
	}
	return qr
}

// The calls below go through the SDK and fail the test unless the answer verifies.

func (b *bundle) alipayClose(t *testing.T, outTradeNo string) *alipay.TradeCloseRsp {
	t.Helper()
	rsp, err := b.client.TradeClose(context.Background(), alipay.TradeClose{OutTradeNo: outTradeNo})
	if err != nil {
		t.Fatalf("close %s: %v", outTradeNo, err)
	}
	return rsp
}

func (b *bundle) alipayCancel(t *testing.T, outTradeNo string) *alipay.TradeCancelRsp {
	t.Helper()
	rsp, err := b.client.TradeCancel(context.Background(), alipay.TradeCancel{OutTradeNo: outTradeNo})
	if err != nil {
		t.Fatalf("cancel %s: %v", outTradeNo, err)
	}
	return rsp
}

func (b *bundle) alipayRefund(t *testing.T, outTradeNo, requestNo, amount string) *alipay.TradeRefundRsp {
	t.Helper()
	rsp, err := b.client.TradeRefund(context.Background(), alipay.TradeRefund{
		OutTradeNo: outTradeNo, OutRequestNo: requestNo, RefundAmount: amount, RefundReason: "test",
	})
	if err != nil {
		t.Fatalf("refund %s/%s: %v", outTradeNo, requestNo, err)
	}
	return rsp
}

func (b *bundle) alipayRefundQuery(t *testing.T, outTradeNo, requestNo string) *alipay.TradeFastPayRefundQueryRsp {
	t.Helper()
	rsp, err := b.client.TradeFastPayRefundQuery(context.Background(), alipay.TradeFastPayRefundQuery{
		OutTradeNo: outTradeNo, OutRequestNo: requestNo,
	})
	if err != nil {
		t.Fatalf("refund query %s/%s: %v", outTradeNo, requestNo, err)
	}
	return rsp
}

func (b *bundle) alipayBillURL(t *testing.T, date string) *alipay.BillDownloadURLQueryRsp {
	t.Helper()
	rsp, err := b.client.BillDownloadURLQuery(context.Background(), alipay.BillDownloadURLQuery{BillType: "trade", BillDate: date})
	if err != nil {
		t.Fatalf("bill url %s: %v", date, err)
	}
	return rsp
}

// alipayEntry returns the ledger entry of outTradeNo, failing the test if there is none.
func alipayEntry(t *testing.T, s *sim.Simulator, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, e := range s.Ledger() {
		if e.OutTradeNo == outTradeNo {
			return e
		}
	}
	t.Fatalf("no ledger entry for %s", outTradeNo)
	return sim.LedgerEntry{}
}

// wantAlipayCode fails the test unless the answer has code and sub_code.
func wantAlipayCode(t *testing.T, what string, e alipay.Error, code, subCode string) {
	t.Helper()
	if string(e.Code) != code || e.SubCode != subCode {
		t.Fatalf("%s: got %s/%s (%s), want %s/%s", what, e.Code, e.SubCode, e.SubMsg, code, subCode)
	}
}

// alipayBill is a downloaded trade bill: the zip entry's name and its lines, decoded from GBK.
type alipayBill struct {
	name  string
	lines []string
}

// downloadAlipayBill fetches a bill URL and decodes its detail file (the one whose name
// has no 汇总): GBK text, CRLF lines.
func downloadAlipayBill(t *testing.T, url string) alipayBill {
	t.Helper()
	var detail []alipayBill
	for _, f := range downloadAlipayBillFiles(t, url) {
		if !strings.Contains(f.name, "汇总") {
			detail = append(detail, f)
		}
	}
	if len(detail) != 1 {
		t.Fatalf("bill zip has %d detail files, want 1", len(detail))
	}
	return detail[0]
}

// downloadAlipayBillFiles fetches a bill URL and decodes every file of its zip.
func downloadAlipayBillFiles(t *testing.T, url string) []alipayBill {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, data)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("bill is not a zip: %v", err)
	}
	var files []alipayBill
	for _, f := range zr.File {
		files = append(files, readGBKEntry(t, f))
	}
	return files
}

// readGBKEntry reads one GBK, CRLF file of a bill's zip.
func readGBKEntry(t *testing.T, zf *zip.File) alipayBill {
	t.Helper()
	f, err := zf.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := io.ReadAll(simplifiedchinese.GBK.NewDecoder().Reader(f))
	if err != nil {
		t.Fatalf("bill is not GBK: %v", err)
	}
	text := string(raw)
	if !strings.HasSuffix(text, "\r\n") {
		t.Fatalf("bill does not end with CRLF: %q", text)
	}
	return alipayBill{name: zf.Name, lines: strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n")}
}

// rows returns the bill's CSV rows: the column header first, then the detail rows, without
// the # comment lines.
func (b alipayBill) rows(t *testing.T) [][]string {
	t.Helper()
	var csvLines []string
	for _, l := range b.lines {
		if !strings.HasPrefix(l, "#") {
			csvLines = append(csvLines, l)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(strings.Join(csvLines, "\n"))).ReadAll()
	if err != nil {
		t.Fatalf("bill rows are not CSV: %v", err)
	}
	return rows
}

package alipay

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/smartwalle/alipay/v3"
	"golang.org/x/text/encoding/simplifiedchinese"

	"orderpay"
)

// maxBill bounds a downloaded bill file (a zip); a day of a busy shop is a few megabytes.
const maxBill = 256 << 20

var _ orderpay.BillSource = (*Channel)(nil)

// DownloadBill fetches and parses the trade bill of one day (yyyy-MM-dd, China time):
// alipay.data.dataservice.bill.downloadurl.query with bill_type=trade gives a signed,
// verified bill_download_url, which is then fetched at once (it works for 30 s, §A3) with
// a plain GET; the file is a zip of GBK CSV (ParseTradeBill).
//
// A bill that is not out yet (T+1, after 10:00: isp.bill_not_exist), an answer that is not
// verified, or a failed download is EUNAVAILABLE: try again later. Any other refusal is
// ECHANNEL, a malformed date EINVALID.
func (c *Channel) DownloadBill(ctx context.Context, date string) (*orderpay.Bill, error) {
	if _, _, err := orderpay.BillDayRange(date); err != nil {
		return nil, err
	}
	rsp, _, detail := call(ctx, c, func(ctx context.Context) (*sdk.BillDownloadURLQueryRsp, error) {
		return c.client.BillDownloadURLQuery(ctx, sdk.BillDownloadURLQuery{BillType: "trade", BillDate: date})
	})
	if rsp == nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay bill %s: %s", date, detail)
	}
	switch {
	case rsp.Code == sdk.CodeSuccess && rsp.BillDownloadURL != "":
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "isp.bill_not_exist":
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay bill %s is not out yet: %s", date, describeCode(rsp.Error))
	case rsp.Code == sdk.CodeSuccess, rsp.Code == sdk.CodeUnknowError, rsp.Code == sdk.CodeCallLimited,
		rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.SYSTEM_ERROR":
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay bill %s: %s", date, describeCode(rsp.Error))
	default:
		return nil, orderpay.Errorf(orderpay.ECHANNEL, "alipay bill %s refused: %s", date, describeCode(rsp.Error))
	}
	data, err := c.fetchBill(ctx, rsp.BillDownloadURL)
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay bill %s: download: %v", date, err)
	}
	rows, err := ParseTradeBill(data)
	if err != nil {
		return nil, err
	}
	return &orderpay.Bill{Channel: orderpay.ChannelAlipay, Date: date, Rows: rows}, nil
}

// fetchBill GETs a bill_download_url. The file is not signed; what vouches for it is the
// signed answer that handed out its one-time URL.
func (c *Channel) fetchBill(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.download.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBill+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBill {
		return nil, errors.New("bill file too large")
	}
	return data, nil
}

// Columns of the trade bill's 业务明细 that reconciliation reads (docs/channels.md §A3).
const (
	colTradeNo    = "支付宝交易号"
	colOutTradeNo = "商户订单号"
	colKind       = "业务类型"
	colCompleted  = "完成时间"
	colTotal      = "订单金额（元）"
	colReceived   = "商家实收（元）"
	colRequestNo  = "退款批次号/请求号"
)

// ParseTradeBill reads a daily trade bill as Alipay serves it: a zip holding the GBK
// (“ANSI”) CSV of 业务明细, and in real files also a 业务明细(汇总) summary, which is skipped.
// In the CSV, lines starting with # are the frame (title, account, period, totals); the
// first other line names the columns, found by name, not position; fields are trimmed of
// the tabs and spaces real files pad them with.
//
// A 交易 row is a payment: its amount is 订单金额, the trade's total. A 退款 row is a
// refund: its amount is the (negative) 商家实收 made positive, and its number the
// 退款批次号/请求号 (out_request_no). Other business types are skipped. An amount that
// does not parse exactly, or a missing column, is EINVALID: a bill is never half-read.
func ParseTradeBill(zipped []byte) ([]orderpay.BillRow, error) {
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill is not a zip: %v", err)
	}
	var detail *zip.File
	for _, f := range zr.File {
		name := f.Name
		if f.NonUTF8 {
			// Zip tools in China write names in GBK without the UTF-8 flag.
			if d, err := simplifiedchinese.GBK.NewDecoder().String(name); err == nil {
				name = d
			}
		}
		if !strings.HasSuffix(strings.ToLower(name), ".csv") || strings.Contains(name, "汇总") {
			continue
		}
		if detail != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill holds more than one detail file")
		}
		detail = f
	}
	if detail == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill holds no detail CSV")
	}
	rc, err := detail.Open()
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill: %v", err)
	}
	defer rc.Close()
	return parseBillCSV(simplifiedchinese.GBK.NewDecoder().Reader(io.LimitReader(rc, maxBill)))
}

func parseBillCSV(r io.Reader) ([]orderpay.BillRow, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	header, err := cr.Read()
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill has no column header: %v", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, name := range []string{colTradeNo, colOutTradeNo, colKind, colCompleted, colTotal, colReceived, colRequestNo} {
		if _, ok := col[name]; !ok {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill has no column %s", name)
		}
	}
	rows := []orderpay.BillRow{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill line %d: %v", line, err)
		}
		field := func(name string) string {
			if i := col[name]; i < len(rec) {
				return strings.Trim(rec[i], " \t")
			}
			return ""
		}
		var row orderpay.BillRow
		var amount string
		switch field(colKind) {
		case "交易":
			row.Kind, amount = orderpay.BillPayment, field(colTotal)
		case "退款":
			row.Kind, row.OutRefundNo = orderpay.BillRefund, field(colRequestNo)
			amount = strings.TrimPrefix(field(colReceived), "-")
		default:
			continue
		}
		row.OutTradeNo, row.TradeNo = field(colOutTradeNo), field(colTradeNo)
		if row.Amount, err = orderpay.ParseYuan(amount); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill line %d: %s", line, orderpay.ErrorMessage(err))
		}
		if row.At, err = time.ParseInLocation(timeLayout, field(colCompleted), cst); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill line %d: 完成时间 %q", line, field(colCompleted))
		}
		if row.OutTradeNo == "" || (row.Kind == orderpay.BillRefund && row.OutRefundNo == "") {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill line %d: no 商户订单号 or refund number", line)
		}
		rows = append(rows, row)
	}
}

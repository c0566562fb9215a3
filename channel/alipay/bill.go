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
	"strconv"
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
	data, err := c.downloadBillFile(ctx, "trade", date)
	if err != nil {
		return nil, err
	}
	bill, err := ParseTradeBill(data)
	if err != nil {
		return nil, err
	}
	bill.Date = date
	return bill, nil
}

// downloadBillFile asks for the bill_download_url of one day's bill of billType (trade,
// signcustomer) and fetches the file, with DownloadBill's errors.
func (c *Channel) downloadBillFile(ctx context.Context, billType, date string) ([]byte, error) {
	if _, _, err := orderpay.BillDayRange(date); err != nil {
		return nil, err
	}
	rsp, _, detail := call(ctx, c, func(ctx context.Context) (*sdk.BillDownloadURLQueryRsp, error) {
		return c.client.BillDownloadURLQuery(ctx, sdk.BillDownloadURLQuery{BillType: billType, BillDate: date})
	})
	if rsp == nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay %s bill %s: %s", billType, date, detail)
	}
	switch {
	case rsp.Code == sdk.CodeSuccess && rsp.BillDownloadURL != "":
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "isp.bill_not_exist":
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay %s bill %s is not out yet: %s", billType, date, describeCode(rsp.Error))
	case rsp.Code == sdk.CodeSuccess, rsp.Code == sdk.CodeUnknowError, rsp.Code == sdk.CodeCallLimited,
		rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.SYSTEM_ERROR":
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay %s bill %s: %s", billType, date, describeCode(rsp.Error))
	default:
		return nil, orderpay.Errorf(orderpay.ECHANNEL, "alipay %s bill %s refused: %s", billType, date, describeCode(rsp.Error))
	}
	data, err := c.fetchBill(ctx, rsp.BillDownloadURL)
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "alipay %s bill %s: download: %v", billType, date, err)
	}
	return data, nil
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
	colFee        = "服务费（元）"
)

// Columns of the 业务明细(汇总) that reconciliation reads.
const (
	colStore = "门店编号"
	colNet   = "实收净额（元）"
)

// ParseTradeBill reads a daily trade bill as Alipay serves it: a zip holding the GBK
// (“ANSI”) CSV of 业务明细 and its 业务明细(汇总) summary. In each CSV, lines starting with
// # are the frame (title, account, period, totals); the first other line names the
// columns, found by name, not position; fields are trimmed of the tabs and spaces real
// files pad them with.
//
// A 交易 row is a payment: its amount is 订单金额, the trade's total, its fee the 服务费
// made positive (a positive 服务费 there is refused). A 退款 row is a refund: its amount is
// the (negative) 商家实收 made positive, its number the 退款批次号/请求号 (out_request_no),
// its fee the 服务费 given back (a negative one is refused). Other business types are
// skipped. The frame's #交易合计 and #退款合计 lines must be there and count the rows: a
// bill without them is truncated. Account is the frame's #账号：[…].
//
// From the summary's 合计 row, FeeTotal is its 服务费 made positive (fees net of the fees
// given back) and NetTotal its 实收净额 (HasNetTotal); a summary without a 合计 row is
// refused, a bill without a summary file is read without them. An amount that does not
// parse exactly, or a missing column, is EINVALID: a bill is never half-read.
func ParseTradeBill(zipped []byte) (*orderpay.Bill, error) {
	files, err := billFiles(zipped)
	if err != nil {
		return nil, err
	}
	var detail, summary *zip.File
	for name, f := range files {
		if !strings.HasSuffix(strings.ToLower(name), ".csv") {
			continue
		}
		target := &detail
		if strings.Contains(name, "汇总") {
			target = &summary
		}
		if *target != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill holds more than one detail or summary file")
		}
		*target = f
	}
	if detail == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill holds no detail CSV")
	}
	bill := &orderpay.Bill{Channel: orderpay.ChannelAlipay}
	t, err := readBillTable(detail)
	if err != nil {
		return nil, err
	}
	if bill.Rows, err = tradeRows(t); err != nil {
		return nil, err
	}
	bill.Account = t.account()
	if summary != nil {
		st, err := readBillTable(summary)
		if err != nil {
			return nil, err
		}
		if bill.FeeTotal, bill.NetTotal, err = summaryTotals(st); err != nil {
			return nil, err
		}
		bill.HasNetTotal = true
	}
	return bill, nil
}

// billFiles lists a bill zip's files by name, decoding names zip tools wrote in GBK.
func billFiles(zipped []byte) (map[string]*zip.File, error) {
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill is not a zip: %v", err)
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		name := f.Name
		if f.NonUTF8 {
			// Zip tools in China write names in GBK without the UTF-8 flag.
			if d, err := simplifiedchinese.GBK.NewDecoder().String(name); err == nil {
				name = d
			}
		}
		files[name] = f
	}
	return files, nil
}

// billTable is one CSV file of a bill: its # frame lines, its columns by name and its
// records, each with its line number.
type billTable struct {
	name    string
	frame   []string
	col     map[string]int
	records []billRecord
}

type billRecord struct {
	line   int
	fields []string
}

// readBillTable reads one GBK CSV file of a bill zip. A record whose first field starts with
// # is a frame line (they hold no ASCII commas; one that does is joined back).
func readBillTable(f *zip.File) (*billTable, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill: %v", err)
	}
	defer rc.Close()
	cr := csv.NewReader(simplifiedchinese.GBK.NewDecoder().Reader(io.LimitReader(rc, maxBill)))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	t := &billTable{name: f.Name}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill: %v", err)
		}
		line, _ := cr.FieldPos(0)
		if strings.HasPrefix(strings.TrimSpace(rec[0]), "#") {
			t.frame = append(t.frame, strings.TrimSpace(strings.Join(rec, ",")))
			continue
		}
		if t.col == nil {
			t.col = map[string]int{}
			for i, h := range rec {
				t.col[strings.Trim(h, " \t")] = i
			}
			continue
		}
		t.records = append(t.records, billRecord{line: line, fields: rec})
	}
	if t.col == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill has no column header")
	}
	return t, nil
}

// need checks that the table has every column of names.
func (t *billTable) need(names ...string) error {
	for _, name := range names {
		if _, ok := t.col[name]; !ok {
			return orderpay.Errorf(orderpay.EINVALID, "alipay bill has no column %s", name)
		}
	}
	return nil
}

// field is the record's field of the named column, trimmed.
func (t *billTable) field(r billRecord, name string) string {
	if i := t.col[name]; i < len(r.fields) {
		return strings.Trim(r.fields[i], " \t")
	}
	return ""
}

// account is the frame's #账号：[…], or "".
func (t *billTable) account() string {
	for _, l := range t.frame {
		if rest, ok := strings.CutPrefix(l, "#账号：["); ok {
			if acct, ok := strings.CutSuffix(rest, "]"); ok {
				return strings.TrimSpace(acct)
			}
		}
	}
	return ""
}

// frameCount finds the frame line starting with prefix and reads the number before its
// first 笔; the line must be there.
func (t *billTable) frameCount(prefix string) (int, error) {
	for _, l := range t.frame {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			n, _, ok := strings.Cut(rest, "笔")
			if v, err := strconv.Atoi(n); ok && err == nil && v >= 0 {
				return v, nil
			}
			return 0, orderpay.Errorf(orderpay.EINVALID, "alipay bill: frame line %q has no count", l)
		}
	}
	return 0, orderpay.Errorf(orderpay.EINVALID, "alipay bill has no %s line: truncated", strings.TrimPrefix(prefix, "#"))
}

func tradeRows(t *billTable) ([]orderpay.BillRow, error) {
	if err := t.need(colTradeNo, colOutTradeNo, colKind, colCompleted, colTotal, colReceived, colRequestNo, colFee); err != nil {
		return nil, err
	}
	rows := []orderpay.BillRow{}
	var trades, refunds int
	for _, rec := range t.records {
		field := func(name string) string { return t.field(rec, name) }
		bad := func(format string, args ...any) error {
			return orderpay.Errorf(orderpay.EINVALID, "alipay bill line %d: %s", rec.line, fmt.Sprintf(format, args...))
		}
		var row orderpay.BillRow
		var amount string
		switch field(colKind) {
		case "交易":
			row.Kind, amount = orderpay.BillPayment, field(colTotal)
			trades++
		case "退款":
			row.Kind, row.OutRefundNo = orderpay.BillRefund, field(colRequestNo)
			amount = strings.TrimPrefix(field(colReceived), "-")
			refunds++
		default:
			continue
		}
		row.OutTradeNo, row.TradeNo = field(colOutTradeNo), field(colTradeNo)
		var err error
		if row.Amount, err = orderpay.ParseYuan(amount); err != nil {
			return nil, bad("%s", orderpay.ErrorMessage(err))
		}
		fee, err := orderpay.ParseSignedYuan(field(colFee))
		if err != nil {
			return nil, bad("服务费: %s", orderpay.ErrorMessage(err))
		}
		switch {
		case row.Kind == orderpay.BillPayment && fee > 0:
			return nil, bad("a 交易 row's 服务费 %s is positive: a fee charged is written negative", field(colFee))
		case row.Kind == orderpay.BillRefund && fee < 0:
			return nil, bad("a 退款 row's 服务费 %s is negative: a fee given back is written positive", field(colFee))
		}
		row.Fee = max(fee, -fee)
		if row.At, err = time.ParseInLocation(timeLayout, field(colCompleted), cst); err != nil {
			return nil, bad("完成时间 %q", field(colCompleted))
		}
		if row.OutTradeNo == "" || (row.Kind == orderpay.BillRefund && row.OutRefundNo == "") {
			return nil, bad("no 商户订单号 or refund number")
		}
		rows = append(rows, row)
	}
	for _, c := range []struct {
		prefix string
		rows   int
	}{{"#交易合计：", trades}, {"#退款合计：", refunds}} {
		n, err := t.frameCount(c.prefix)
		if err != nil {
			return nil, err
		}
		if n != c.rows {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay bill: %s counts %d rows, the bill has %d", strings.TrimPrefix(c.prefix, "#"), n, c.rows)
		}
	}
	return rows, nil
}

// summaryTotals reads the 合计 row of a 业务明细(汇总): the fees net of fees given back
// (服务费 made positive) and 实收净额.
func summaryTotals(t *billTable) (fees, net int64, err error) {
	if err := t.need(colStore, colFee, colNet); err != nil {
		return 0, 0, err
	}
	for _, rec := range t.records {
		if t.field(rec, colStore) != "合计" {
			continue
		}
		fee, err := orderpay.ParseSignedYuan(t.field(rec, colFee))
		if err != nil {
			return 0, 0, orderpay.Errorf(orderpay.EINVALID, "alipay bill summary line %d: 服务费: %s", rec.line, orderpay.ErrorMessage(err))
		}
		net, err := orderpay.ParseSignedYuan(t.field(rec, colNet))
		if err != nil {
			return 0, 0, orderpay.Errorf(orderpay.EINVALID, "alipay bill summary line %d: 实收净额: %s", rec.line, orderpay.ErrorMessage(err))
		}
		return -fee, net, nil
	}
	return 0, 0, orderpay.Errorf(orderpay.EINVALID, "alipay bill summary has no 合计 row: truncated")
}

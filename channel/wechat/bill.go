package wechat

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"

	"orderpay"
)

// maxBill bounds a downloaded bill (gzip bytes, and again the text they unpack to).
const maxBill = 256 << 20

var _ orderpay.BillSource = (*Channel)(nil)

// DownloadBill fetches and parses the trade bill of one day (yyyy-MM-dd, China time), as
// §B1 describes: GET /v3/bill/tradebill?bill_date=&bill_type=ALL&tar_type=GZIP, a signed
// and verified answer {hash_type, hash_value, download_url}; then a signed GET of
// download_url, whose answer is not signed (the SDK's FAQ: a client without validator), so
// the SHA1 hash_value from the verified answer is what vouches for the file. The file is
// gzip of the backtick text format (ParseTradeBill).
//
// A bill not out yet (400 STATEMENT_CREATING, or NO_STATEMENT_EXIST for the current day),
// an unverified answer, a failed download or a hash that does not match is EUNAVAILABLE:
// try again later. Any other refusal is ECHANNEL, a malformed date EINVALID.
func (c *Channel) DownloadBill(ctx context.Context, date string) (*orderpay.Bill, error) {
	if _, _, err := orderpay.BillDayRange(date); err != nil {
		return nil, err
	}
	ctx, _, cancel := c.begin(ctx)
	defer cancel()
	q := url.Values{"bill_date": {date}, "bill_type": {"ALL"}, "tar_type": {"GZIP"}}
	result, err := c.api.Get(ctx, DefaultBaseURL+"/v3/bill/tradebill?"+q.Encode())
	if err != nil {
		apiErr, detail := describe(err, result)
		if isRefusal(apiErr) && apiErr.Code != "STATEMENT_CREATING" && apiErr.Code != "NO_STATEMENT_EXIST" {
			return nil, orderpay.Errorf(orderpay.ECHANNEL, "wechat bill %s refused: %s", date, detail)
		}
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: %s", date, detail)
	}
	var bill struct {
		HashType    string `json:"hash_type"`
		HashValue   string `json:"hash_value"`
		DownloadURL string `json:"download_url"`
	}
	if err := core.UnMarshalResponse(result.Response, &bill); err != nil || bill.DownloadURL == "" {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: unreadable answer", date)
	}
	if !strings.EqualFold(bill.HashType, "SHA1") {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: hash type %q is not SHA1", date, bill.HashType)
	}
	// The download URL lives 5 minutes (30 s by an older page, §D): fetched at once.
	result, err = c.rawAPI.Get(ctx, bill.DownloadURL)
	if err != nil {
		_, detail := describe(err, result)
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: download: %s", date, detail)
	}
	data, err := io.ReadAll(result.Response.Body)
	result.Response.Body.Close()
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: download: %v", date, err)
	}
	sum := sha1.Sum(data)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), bill.HashValue) {
		// A damaged or substituted file: never reconciled against.
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: the file does not match its SHA1", date)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: not gzip: %v", date, err)
	}
	text, err := io.ReadAll(io.LimitReader(zr, maxBill))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat bill %s: gunzip: %v", date, err)
	}
	rows, err := ParseTradeBill(text)
	if err != nil {
		return nil, err
	}
	return &orderpay.Bill{Channel: orderpay.ChannelWechat, Date: date, Rows: rows}, nil
}

// Columns of the trade bill that reconciliation reads (§B1).
const (
	colTime        = "交易时间"
	colTransaction = "微信订单号"
	colOutTradeNo  = "商户订单号"
	colState       = "交易状态"
	colTotal       = "订单金额"
	colOutRefundNo = "商户退款单号"
	colRefund      = "退款金额"
	summaryFirst   = "总交易单数"
)

// ParseTradeBill reads a WeChat Pay trade bill (§B1): a header line naming the columns (no
// backticks; found by name, not position), one line per row with every field prefixed by
// a backtick, then the summary header (总交易单数,…) and the summary row, which end the
// details. Lines end with CRLF (LF is taken too).
//
// A SUCCESS row is a payment: its amount is 订单金额, the order's total. A REFUND row is a
// refund settled that day: its number is 商户退款单号 (out_refund_no) and its amount
// 退款金额. Other states are skipped. Amounts are yuan; one that does not parse exactly,
// or a missing column, is EINVALID: a bill is never half-read.
func ParseTradeBill(text []byte) ([]orderpay.BillRow, error) {
	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill has no header")
	}
	col := map[string]int{}
	for i, h := range strings.Split(strings.TrimPrefix(lines[0], "\ufeff"), ",") {
		col[strings.TrimSpace(h)] = i
	}
	for _, name := range []string{colTime, colTransaction, colOutTradeNo, colState, colTotal, colOutRefundNo, colRefund} {
		if _, ok := col[name]; !ok {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill has no column %s", name)
		}
	}
	rows := []orderpay.BillRow{}
	for n, line := range lines[1:] {
		lineNo := n + 2
		if strings.HasPrefix(line, summaryFirst) {
			return rows, nil
		}
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "`") {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill line %d does not start with a backtick", lineNo)
		}
		// Every field starts with a backtick, and free text has none, so ",`" separates
		// fields even where a product name holds a comma.
		fields := strings.Split(line[1:], ",`")
		field := func(name string) string {
			if i := col[name]; i < len(fields) {
				return strings.TrimSpace(fields[i])
			}
			return ""
		}
		var row orderpay.BillRow
		var amount string
		switch field(colState) {
		case "SUCCESS":
			row.Kind, amount = orderpay.BillPayment, field(colTotal)
		case "REFUND":
			row.Kind, row.OutRefundNo, amount = orderpay.BillRefund, field(colOutRefundNo), field(colRefund)
		default:
			continue
		}
		row.OutTradeNo, row.TradeNo = field(colOutTradeNo), field(colTransaction)
		var err error
		if row.Amount, err = orderpay.ParseYuan(amount); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill line %d: %s", lineNo, orderpay.ErrorMessage(err))
		}
		if row.At, err = time.ParseInLocation(time.DateTime, field(colTime), cst); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill line %d: 交易时间 %q", lineNo, field(colTime))
		}
		if row.OutTradeNo == "" || (row.Kind == orderpay.BillRefund && row.OutRefundNo == "") {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill line %d: no 商户订单号 or 商户退款单号", lineNo)
		}
		rows = append(rows, row)
	}
	// No summary: the file was cut short, and rows may be missing.
	return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill has no summary: truncated")
}

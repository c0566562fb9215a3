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

var (
	_ orderpay.BillSource        = (*Channel)(nil)
	_ orderpay.AccountBillSource = (*Channel)(nil)
)

// DownloadBill fetches and parses the trade bill of one day (yyyy-MM-dd, China time), as
// §B1 describes: GET /v3/bill/tradebill?bill_date=&bill_type=ALL&tar_type=GZIP
// (downloadBill), the file in the backtick text format (ParseTradeBill).
func (c *Channel) DownloadBill(ctx context.Context, date string) (*orderpay.Bill, error) {
	text, err := c.downloadBill(ctx, "tradebill", date, url.Values{"bill_type": {"ALL"}})
	if err != nil {
		return nil, err
	}
	bill, err := ParseTradeBill(text)
	if err != nil {
		return nil, err
	}
	bill.Date = date
	if bill.Account == "" {
		bill.Account = c.mchID
	}
	return bill, nil
}

// DownloadAccountBill fetches and parses the fund-flow bill of the basic account of one day
// (§F4): GET /v3/bill/fundflowbill?bill_date=&account_type=BASIC&tar_type=GZIP
// (downloadBill), the file in the backtick text format (ParseFundFlowBill).
func (c *Channel) DownloadAccountBill(ctx context.Context, date string) (*orderpay.AccountBill, error) {
	text, err := c.downloadBill(ctx, "fundflowbill", date, url.Values{"account_type": {"BASIC"}})
	if err != nil {
		return nil, err
	}
	ab, err := ParseFundFlowBill(text)
	if err != nil {
		return nil, err
	}
	ab.Account, ab.Date = c.mchID, date
	return ab, nil
}

// downloadBill fetches one day's bill file of kind (tradebill or fundflowbill) and returns
// its text: a signed and verified answer {hash_type, hash_value, download_url}; then a
// signed GET of download_url, whose answer is not signed (the SDK's FAQ: a client without
// validator), so the SHA1 hash_value from the verified answer is what vouches for the file,
// which is gzip.
//
// A bill not out yet (400 STATEMENT_CREATING, or NO_STATEMENT_EXIST for the current day),
// an unverified answer, a failed download or a hash that does not match is EUNAVAILABLE:
// try again later. Any other refusal is ECHANNEL, a malformed date EINVALID.
func (c *Channel) downloadBill(ctx context.Context, kind, date string, q url.Values) ([]byte, error) {
	if _, _, err := orderpay.BillDayRange(date); err != nil {
		return nil, err
	}
	ctx, _, cancel := c.begin(ctx)
	defer cancel()
	q.Set("bill_date", date)
	q.Set("tar_type", "GZIP")
	result, err := c.api.Get(ctx, DefaultBaseURL+"/v3/bill/"+kind+"?"+q.Encode())
	if err != nil {
		apiErr, detail := describe(err, result)
		if isRefusal(apiErr) && apiErr.Code != "STATEMENT_CREATING" && apiErr.Code != "NO_STATEMENT_EXIST" {
			return nil, orderpay.Errorf(orderpay.ECHANNEL, "wechat %s %s refused: %s", kind, date, detail)
		}
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: %s", kind, date, detail)
	}
	var bill struct {
		HashType    string `json:"hash_type"`
		HashValue   string `json:"hash_value"`
		DownloadURL string `json:"download_url"`
	}
	if err := core.UnMarshalResponse(result.Response, &bill); err != nil || bill.DownloadURL == "" {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: unreadable answer", kind, date)
	}
	if !strings.EqualFold(bill.HashType, "SHA1") {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: hash type %q is not SHA1", kind, date, bill.HashType)
	}
	// The download URL lives 5 minutes (30 s by an older page, §D): fetched at once.
	result, err = c.rawAPI.Get(ctx, bill.DownloadURL)
	if err != nil {
		_, detail := describe(err, result)
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: download: %s", kind, date, detail)
	}
	data, err := io.ReadAll(io.LimitReader(result.Response.Body, maxBill+1))
	result.Response.Body.Close()
	if err != nil || len(data) > maxBill {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: download: %v (at most %d bytes)", kind, date, err, maxBill)
	}
	sum := sha1.Sum(data)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), bill.HashValue) {
		// A damaged or substituted file: never reconciled against.
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: the file does not match its SHA1", kind, date)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: not gzip: %v", kind, date, err)
	}
	text, err := io.ReadAll(io.LimitReader(zr, maxBill))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "wechat %s %s: gunzip: %v", kind, date, err)
	}
	return text, nil
}

// Columns of the trade bill that reconciliation reads (§B1, §F4).
const (
	colTime        = "交易时间"
	colMchID       = "商户号"
	colTransaction = "微信订单号"
	colOutTradeNo  = "商户订单号"
	colState       = "交易状态"
	colTotal       = "订单金额"
	colOutRefundNo = "商户退款单号"
	colRefund      = "退款金额"
	colFee         = "手续费"
	colRate        = "费率"
	summaryFirst   = "总交易单数"
	summaryFees    = "手续费总金额"
)

// backtickTable is a WeChat Pay bill file read into its parts: the column header's names,
// each detail row's fields (with its line number), and the summary's names and values.
type backtickTable struct {
	col     map[string]int
	rows    [][]string
	lineNos []int
	summary map[string]string
}

// field is row i's value of column name, trimmed ("" if the row is short).
func (t *backtickTable) field(i int, name string) string {
	if c := t.col[name]; c < len(t.rows[i]) {
		return strings.TrimSpace(t.rows[i][c])
	}
	return ""
}

// readBacktickTable reads a bill in WeChat Pay's text format (§B1): a header line naming the
// columns (no backticks; found by name, not position, and every one of want must be there),
// one line per row with every field prefixed by a backtick, then the summary header, whose
// first name is summaryFirst, and the summary row, which end the details. Lines end with CRLF
// (LF is taken too). A file without its summary was cut short: EINVALID, as is anything
// malformed: a bill is never half-read.
func readBacktickTable(what string, text []byte, want []string, summaryFirst string) (*backtickTable, error) {
	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat %s has no header", what)
	}
	t := &backtickTable{col: map[string]int{}}
	for i, h := range strings.Split(strings.TrimPrefix(lines[0], "\ufeff"), ",") {
		t.col[strings.TrimSpace(h)] = i
	}
	for _, name := range want {
		if _, ok := t.col[name]; !ok {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat %s has no column %s", what, name)
		}
	}
	// Every field starts with a backtick, and free text has none, so ",`" separates fields
	// even where a product name holds a comma.
	split := func(line string) []string { return strings.Split(strings.TrimPrefix(line, "`"), ",`") }
	for n := 1; n < len(lines); n++ {
		line := lines[n]
		if strings.HasPrefix(line, summaryFirst) {
			names := strings.Split(line, ",")
			if n+1 >= len(lines) || !strings.HasPrefix(lines[n+1], "`") {
				return nil, orderpay.Errorf(orderpay.EINVALID, "wechat %s has a summary header but no summary: truncated", what)
			}
			values := split(lines[n+1])
			t.summary = map[string]string{}
			for i, name := range names {
				if i < len(values) {
					t.summary[strings.TrimSpace(name)] = strings.TrimSpace(values[i])
				}
			}
			return t, nil
		}
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "`") {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat %s line %d does not start with a backtick", what, n+1)
		}
		t.rows = append(t.rows, split(line))
		t.lineNos = append(t.lineNos, n+1)
	}
	// No summary: the file was cut short, and rows may be missing.
	return nil, orderpay.Errorf(orderpay.EINVALID, "wechat %s has no summary: truncated", what)
}

// ParseTradeBill reads a WeChat Pay trade bill (readBacktickTable).
//
// A SUCCESS row is a payment: its amount is 订单金额, the order's total, its fee 手续费 and
// its rate 费率. A REFUND row is a refund settled that day: its number is 商户退款单号
// (out_refund_no), its amount 退款金额, and the fee it gave back 手续费 (written negative).
// Other states are skipped. The summary's 手续费总金额 is the day's fees net of those given
// back. Amounts are yuan; one that does not parse exactly, a fee of the wrong sign, or a
// missing column, is EINVALID.
func ParseTradeBill(text []byte) (*orderpay.Bill, error) {
	t, err := readBacktickTable("bill", text, []string{colTime, colTransaction, colOutTradeNo, colState, colTotal, colOutRefundNo,
		colRefund, colFee, colRate}, summaryFirst)
	if err != nil {
		return nil, err
	}
	bill := &orderpay.Bill{Channel: orderpay.ChannelWechat, Rows: []orderpay.BillRow{}}
	bad := func(i int, format string, a ...any) error {
		return orderpay.Errorf(orderpay.EINVALID, "wechat bill line %d: "+format, append([]any{t.lineNos[i]}, a...)...)
	}
	for i := range t.rows {
		var row orderpay.BillRow
		var amount string
		switch t.field(i, colState) {
		case "SUCCESS":
			row.Kind, amount = orderpay.BillPayment, t.field(i, colTotal)
		case "REFUND":
			row.Kind, row.OutRefundNo, amount = orderpay.BillRefund, t.field(i, colOutRefundNo), t.field(i, colRefund)
		default:
			continue
		}
		row.OutTradeNo, row.TradeNo = t.field(i, colOutTradeNo), t.field(i, colTransaction)
		if row.Amount, err = orderpay.ParseYuan(amount); err != nil {
			return nil, bad(i, "%s", orderpay.ErrorMessage(err))
		}
		fee, err := orderpay.ParseSignedYuan(t.field(i, colFee))
		if err != nil {
			return nil, bad(i, "手续费: %s", orderpay.ErrorMessage(err))
		}
		if row.Kind == orderpay.BillRefund {
			fee = -fee // given back: written negative
		}
		if fee < 0 {
			return nil, bad(i, "手续费 %q has the wrong sign for a %s row", t.field(i, colFee), t.field(i, colState))
		}
		row.Fee = fee
		if row.Kind == orderpay.BillPayment {
			if row.Rate, err = orderpay.ParseFeeRate(t.field(i, colRate)); err != nil {
				return nil, bad(i, "费率: %s", orderpay.ErrorMessage(err))
			}
			row.RateKnown = true
		}
		if row.At, err = time.ParseInLocation(time.DateTime, t.field(i, colTime), cst); err != nil {
			return nil, bad(i, "交易时间 %q", t.field(i, colTime))
		}
		if row.OutTradeNo == "" || (row.Kind == orderpay.BillRefund && row.OutRefundNo == "") {
			return nil, bad(i, "no 商户订单号 or 商户退款单号")
		}
		if bill.Account == "" {
			bill.Account = t.field(i, colMchID)
		}
		bill.Rows = append(bill.Rows, row)
	}
	if v, ok := t.summary[summaryFees]; ok {
		if bill.FeeTotal, err = orderpay.ParseSignedYuan(v); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill summary %s: %s", summaryFees, orderpay.ErrorMessage(err))
		}
	} else {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat bill summary has no %s", summaryFees)
	}
	return bill, nil
}

// Columns of the fund-flow bill (§F4).
const (
	colFlowTime     = "记账时间"
	colFlowBusiness = "微信支付业务单号"
	colFlowRef      = "资金流水单号"
	colFlowName     = "业务名称"
	colFlowType     = "业务类型"
	colFlowDir      = "收支类型"
	colFlowAmount   = "收支金额(元)"
	colFlowBalance  = "账户结余(元)"
	colFlowVoucher  = "业务凭证号"
	flowSummary     = "资金流水总笔数"
)

// ParseFundFlowBill reads a WeChat Pay fund-flow bill (readBacktickTable): one row per
// movement of the account, 收支类型 收入 (in) or 支出 (out), 收支金额(元) its amount and
// 账户结余(元) the balance after it. A 交易 movement is a payment's settlement, net of its
// fee, for the out_trade_no in 业务凭证号; a 退款 movement a refund's, net of the fee given
// back, for the out_refund_no there; anything else is OTHER. The summary gives the day's
// money in (收入金额) and out (支出金额).
func ParseFundFlowBill(text []byte) (*orderpay.AccountBill, error) {
	t, err := readBacktickTable("fund-flow bill", text, []string{colFlowTime, colFlowBusiness, colFlowRef, colFlowName, colFlowType,
		colFlowDir, colFlowAmount, colFlowBalance, colFlowVoucher}, flowSummary)
	if err != nil {
		return nil, err
	}
	ab := &orderpay.AccountBill{Channel: orderpay.ChannelWechat, Movements: []orderpay.AccountMovement{}}
	for i := range t.rows {
		bad := func(format string, a ...any) error {
			return orderpay.Errorf(orderpay.EINVALID, "wechat fund-flow bill line %d: "+format, append([]any{t.lineNos[i]}, a...)...)
		}
		m := orderpay.AccountMovement{Kind: orderpay.MovementOther, Ref: t.field(i, colFlowRef), Type: t.field(i, colFlowType)}
		switch m.Type {
		case "交易":
			m.Kind, m.OutTradeNo = orderpay.MovementPayment, t.field(i, colFlowVoucher)
		case "退款":
			m.Kind, m.OutRefundNo = orderpay.MovementRefund, t.field(i, colFlowVoucher)
		}
		if m.Amount, err = orderpay.ParseYuan(t.field(i, colFlowAmount)); err != nil {
			return nil, bad("收支金额: %s", orderpay.ErrorMessage(err))
		}
		switch t.field(i, colFlowDir) {
		case "收入":
		case "支出":
			m.Amount = -m.Amount
		default:
			return nil, bad("收支类型 %q is neither 收入 nor 支出", t.field(i, colFlowDir))
		}
		if m.Balance, err = orderpay.ParseSignedYuan(t.field(i, colFlowBalance)); err != nil {
			return nil, bad("账户结余: %s", orderpay.ErrorMessage(err))
		}
		if m.At, err = time.ParseInLocation(time.DateTime, t.field(i, colFlowTime), cst); err != nil {
			return nil, bad("记账时间 %q", t.field(i, colFlowTime))
		}
		ab.Movements = append(ab.Movements, m)
	}
	for name, dst := range map[string]*int64{"收入金额": &ab.Income, "支出金额": &ab.Expense} {
		if *dst, err = orderpay.ParseYuan(t.summary[name]); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "wechat fund-flow bill summary %s: %s", name, orderpay.ErrorMessage(err))
		}
	}
	return ab, nil
}

package sim

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

const (
	// wechatBillDownloadPath is where download_url points: the simulator itself.
	wechatBillDownloadPath = "/v3/billdownload/file"
	// wechatBillURLLifetime is how long a download_url works (§B1, doc 4012556654; an
	// older page says 30 s, §D), on WeChat's wall clock (Config.WechatWallClock).
	wechatBillURLLifetime = 5 * time.Minute
	// wechatBillReadyHour: a day's bill is generated from 09:00 (China) the next day.
	wechatBillReadyHour = 9
	// wechatBillHistory is how far back bills can be fetched: three months.
	wechatBillHistoryMonths = 3
)

// wechatBillColumns are the detail columns of an ALL bill (§B1). The simulator uses them
// for SUCCESS and REFUND bills too, keeping only the rows of that kind.
var wechatBillColumns = []string{
	"交易时间", "公众账号ID", "商户号", "特约商户号", "设备号", "微信订单号", "商户订单号", "用户标识",
	"交易类型", "交易状态", "付款银行", "货币种类", "应结订单金额", "代金券金额", "微信退款单号",
	"商户退款单号", "退款金额", "充值券退款金额", "退款类型", "退款状态", "商品名称", "商户数据包",
	"手续费", "费率", "订单金额", "申请退款金额", "费率备注",
}

// wechatBillSummaryColumns head the summary row that ends every bill.
var wechatBillSummaryColumns = []string{
	"总交易单数", "应结订单总金额", "退款总金额", "充值券退款总金额", "手续费总金额", "订单总金额", "申请退款总金额",
}

// wechatBillFile is one generated bill, served once or more at its download_url until it
// expires.
type wechatBillFile struct {
	date      string // bill_date, for fault draws
	data      []byte
	gzipped   bool
	expiresAt time.Time
}

var wechatTradeBillEndpoint = wechatEndpoint{
	method:   MethodBill,
	key:      func(_ *Simulator, r *http.Request, _ []byte) string { return r.URL.Query().Get("bill_date") },
	run:      (*Simulator).wechatTradeBill,
	readOnly: true, // it only issues a download URL
}

var wechatBillDownloadEndpoint = wechatEndpoint{
	method:         MethodBill,
	key:            (*Simulator).wechatBillDownloadKey,
	run:            (*Simulator).wechatBillDownload,
	readOnly:       true,
	unsignedAnswer: true, // §B1: the download is never signed
}

// wechatBillDownloadKey keys the download's fault draws on the bill date behind its token,
// like the tradebill call that issued it.
func (s *Simulator) wechatBillDownloadKey(r *http.Request, _ []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.wechat.bills[r.URL.Query().Get("token")]; f != nil {
		return f.date
	}
	return ""
}

// wechatTradeBill serves GET /v3/bill/tradebill?bill_date=&bill_type=&tar_type= (§B1).
//
// The bill of a day (in China) is available from 09:00 the next day (before that 400
// STATEMENT_CREATING) and for three months; the current day or later, or older dates,
// are 400 NO_STATEMENT_EXIST. A day without trades gets a bill with no rows (the real API
// may answer NO_STATEMENT_EXIST instead; undocumented). The answer is {hash_type: SHA1,
// hash_value, download_url}, the hash taken over the bytes the download serves (gzip
// bytes for tar_type=GZIP), and download_url points at this simulator, as the request
// reached it, for 5 minutes of WeChat's wall clock (Config.WechatWallClock).
func (s *Simulator) wechatTradeBill(r *http.Request, _ []byte) wechatAnswer {
	billType := r.URL.Query().Get("bill_type")
	switch billType {
	case "":
		billType = "ALL"
	case "ALL", "SUCCESS", "REFUND":
	default:
		return wechatParamError("bill_type", "query", "bill_type 须为ALL、SUCCESS或REFUND")
	}
	return s.wechatBillFile(r, func(day, now time.Time) []byte { return s.wechatBill(day, billType, now) })
}

// wechatBillFile answers a request for one day's bill file (trade or fund flow): it checks
// bill_date and tar_type, and that the day's bill is out, draws the file up with render
// (holding s.mu), and answers {hash_type: SHA1, hash_value, download_url} for it.
func (s *Simulator) wechatBillFile(r *http.Request, render func(day, now time.Time) []byte) wechatAnswer {
	q := r.URL.Query()
	day, err := time.ParseInLocation(time.DateOnly, q.Get("bill_date"), cst)
	if err != nil {
		return wechatParamError("bill_date", "query", "bill_date 须为yyyy-MM-dd格式")
	}
	tarType := q.Get("tar_type")
	if tarType != "" && tarType != "GZIP" {
		return wechatParamError("tar_type", "query", "tar_type 仅支持GZIP")
	}

	now := s.clock.Now()
	local := now.In(cst)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, cst)
	switch {
	case !day.Before(today):
		return wechatError(http.StatusBadRequest, "NO_STATEMENT_EXIST", "账单日期须早于当日，当日及以后的账单不存在")
	case day.Before(today.AddDate(0, -wechatBillHistoryMonths, 0)):
		return wechatError(http.StatusBadRequest, "NO_STATEMENT_EXIST", "只能下载三个月以内的账单")
	case local.Before(day.AddDate(0, 0, 1).Add(wechatBillReadyHour * time.Hour)):
		return wechatError(http.StatusBadRequest, "STATEMENT_CREATING", "账单生成中，请在次日9点后下载")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	data := render(day, now)
	if tarType == "GZIP" {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(data)
		_ = zw.Close()
		data = buf.Bytes()
	}
	wall := s.cfg.WechatWallClock.Now()
	for token, f := range s.wechat.bills {
		if !wall.Before(f.expiresAt) {
			delete(s.wechat.bills, token)
		}
	}
	token := newWechatNonce(40)
	s.wechat.bills[token] = &wechatBillFile{date: q.Get("bill_date"), data: data, gzipped: tarType == "GZIP",
		expiresAt: wall.Add(wechatBillURLLifetime)}

	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	sum := sha1.Sum(data)
	return wechatJSON(http.StatusOK, struct {
		HashType    string `json:"hash_type"`
		HashValue   string `json:"hash_value"`
		DownloadURL string `json:"download_url"`
	}{"SHA1", hex.EncodeToString(sum[:]), scheme + "://" + r.Host + wechatBillDownloadPath + "?token=" + token})
}

// wechatBillDownload serves GET /v3/billdownload/file?token=: a signed request whose answer
// is the file, unsigned. An unknown or expired token is 400 INVALID_REQUEST.
func (s *Simulator) wechatBillDownload(r *http.Request, _ []byte) wechatAnswer {
	now := s.cfg.WechatWallClock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.wechat.bills[r.URL.Query().Get("token")]
	switch {
	case f == nil:
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "下载链接无效")
	case !now.Before(f.expiresAt):
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "下载链接已过期，请重新获取")
	}
	ct := "text/plain; charset=utf-8"
	if f.gzipped {
		ct = "application/x-gzip"
	}
	return wechatAnswer{status: http.StatusOK, body: f.data, contentType: ct}
}

// wechatBill renders the bill of one day (§B1): a header line, one row per payment (and,
// for ALL and REFUND, per settled refund) whose time falls on that day in China, in time
// order, then the summary header and row. Every value is prefixed with a backtick, amounts
// are yuan with two decimals, and lines end with \r\n. A refund row is dated by its
// success time; PROCESSING refunds are not in any bill yet. The caller holds s.mu.
func (s *Simulator) wechatBill(day time.Time, billType string, now time.Time) []byte {
	next := day.AddDate(0, 0, 1)
	onDay := func(t time.Time) bool { return !t.IsZero() && !t.Before(day) && t.Before(next) }
	type row struct {
		at     time.Time
		seq    int64 // the order's creation, then
		refund int   // 0 for the payment, 1 + the refund's index
		fields []string
	}
	var rows []row
	var count int
	var settled, refunds, fees, orders, requested int64
	keys := &s.keys.Wechat
	for _, p := range s.wechatMoney(now) {
		o := p.src.(*wechatOrder)
		base := func(at time.Time, state string) []string {
			return []string{
				at.In(cst).Format(time.DateTime), o.prepay.appID, keys.MchID, "0", "",
				o.transactionID, o.outTradeNo, o.openID, o.prepay.tradeType, state, "OTHERS", "CNY",
			}
		}
		if billType != "REFUND" && onDay(o.paidAt) {
			f := append(base(o.paidAt, WechatSuccess),
				orderpay.FormatYuan(o.prepay.total), "0.00", "0", "0", "0.00", "0.00", "", "",
				billText(o.prepay.description), billText(o.prepay.attach),
				orderpay.FormatYuan(p.fee), p.rate.String(), orderpay.FormatYuan(o.prepay.total), "0.00", "")
			rows = append(rows, row{o.paidAt, o.seq, 0, f})
			count++
			settled += o.prepay.total
			fees += p.fee
			orders += o.prepay.total
		}
		if billType == "SUCCESS" {
			continue
		}
		// Only refunds that moved money are in the bill (wechatMoney keeps those).
		for _, rm := range p.refunds {
			rf := rm.src.(*wechatRefund)
			if !onDay(rf.settlesAt) {
				continue
			}
			f := append(base(rf.settlesAt, WechatRefund),
				"0.00", "0.00", rf.refundID, rf.outRefundNo, orderpay.FormatYuan(rf.amount), "0.00",
				"ORIGINAL", WechatRefundSuccess, billText(o.prepay.description), billText(o.prepay.attach),
				orderpay.FormatYuan(-rm.share), p.rate.String(), orderpay.FormatYuan(o.prepay.total),
				orderpay.FormatYuan(rf.amount), "")
			rows = append(rows, row{rf.settlesAt, o.seq, rm.index + 1, f})
			count++
			refunds += rf.amount
			fees -= rm.share
			requested += rf.amount
		}
	}
	// In time order; ties (several trades in one second) in creation order, so that the
	// same day always gives the same file.
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq), cmp.Compare(a.refund, b.refund))
	})

	var buf bytes.Buffer
	line := func(fields []string, tick bool) { wechatBillLine(&buf, fields, tick) }
	line(wechatBillColumns, false)
	for _, r := range rows {
		line(r.fields, true)
	}
	line(wechatBillSummaryColumns, false)
	line([]string{
		strconv.Itoa(count), orderpay.FormatYuan(settled), orderpay.FormatYuan(refunds), "0.00",
		orderpay.FormatYuan(fees), orderpay.FormatYuan(orders), orderpay.FormatYuan(requested),
	}, true)
	return buf.Bytes()
}

// wechatBillLine writes one line of a WeChat Pay bill: the fields joined by commas, each
// after a backtick when tick (every row but the headers), ended by \r\n.
func wechatBillLine(buf *bytes.Buffer, fields []string, tick bool) {
	for i, f := range fields {
		if i > 0 {
			buf.WriteByte(',')
		}
		if tick {
			buf.WriteByte('`')
		}
		buf.WriteString(f)
	}
	buf.WriteString("\r\n")
}

// billText keeps a free-text value from breaking the backtick format: a backtick would start
// a field, and a line break a row.
func billText(s string) string {
	return strings.NewReplacer("`", "'", "\r", " ", "\n", " ").Replace(s)
}

package sim

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"orderpay"
)

const (
	// alipayBillURLLifetime is how long a bill_download_url works: 30 s (§A3).
	alipayBillURLLifetime = 30 * time.Second
	// alipayBillPath is where the simulator serves the bills it hands out URLs for.
	alipayBillPath = "/sim/bills/alipay/"
	// alipayBillReadyAfter is how long after its period ends a bill can be fetched: bills are
	// T+1, generated overnight, and to be fetched after 10:00 (§A3).
	alipayBillReadyAfter = 10 * time.Hour
	// alipayMonthlyBillReadyAfter: a monthly bill is generated around the 3rd of the next
	// month; the simulator serves it from 10:00 that day.
	alipayMonthlyBillReadyAfter = 2*24*time.Hour + alipayBillReadyAfter
)

// alipayFirstBillDay is the earliest day Alipay keeps bills for.
var alipayFirstBillDay = time.Date(2016, 1, 1, 0, 0, 0, 0, cst)

// alipayBillColumns are the columns of a trade bill's 业务明细 (docs/channels.md §A3).
var alipayBillColumns = []string{
	"支付宝交易号", "商户订单号", "业务类型", "商品名称", "创建时间", "完成时间", "门店编号", "门店名称",
	"操作员", "终端号", "对方账户", "订单金额（元）", "商家实收（元）", "支付宝红包（元）", "集分宝（元）",
	"支付宝优惠（元）", "商家优惠（元）", "券核销金额（元）", "券名称", "商家红包消费金额（元）", "卡消费金额（元）",
	"退款批次号/请求号", "服务费（元）", "分润（元）", "备注",
}

// alipayBill is a bill file behind one download token.
type alipayBill struct {
	fileName  string    // the zip's name, e.g. 2088…_20250313.csv.zip
	data      []byte    // the zip
	expiresAt time.Time // wall time
}

// alipayBillDownloadURL serves alipay.data.dataservice.bill.downloadurl.query (protocols
// §A3) for bill_type=trade, daily (yyyy-MM-dd) or monthly (yyyy-MM), and for
// bill_type=signcustomer, the account bill (alipayAccountZip), daily only. The bill is drawn up
// when the URL is asked for, from the trades as they stand, and the URL, on the simulator
// itself (built from the request's Host), works for 30 s of wall time.
//
// A day (or month) whose bill is not out yet is refused with 40004 isp.bill_not_exist:
// the current day or a later one, and the previous day before 10:00 China time (the
// current month, and the previous month before the 3rd at 10:00), by Config.Clock; so is a
// day before 2016-01-01. Another bill_type, a monthly signcustomer bill (real, not
// simulated) or a malformed date is 40004 isv.invalid-arguments. Both sub_codes are plausible, not
// verified.
func (s *Simulator) alipayBillDownloadURL(biz bizContent, baseURL string) alipayReply {
	invalid := func(msg string) alipayReply { return alipayFailure("40004", "isv.invalid-arguments", msg) }
	billType, err1 := biz.str("bill_type")
	billDate, err2 := biz.str("bill_date")
	if err1 != nil || err2 != nil {
		return invalid("bill_type and bill_date must be strings")
	}
	if billType != "trade" && billType != "signcustomer" {
		return invalid("bill_type must be trade or signcustomer")
	}
	from, to, readyAt, ok := parseAlipayBillDate(billDate)
	if !ok {
		return invalid("bill_date must be yyyy-MM-dd or yyyy-MM")
	}
	if billType == "signcustomer" && len(billDate) != len("2006-01-02") {
		return invalid("the simulator draws up the signcustomer bill of a day only")
	}
	now := s.clock.Now()
	if from.Before(alipayFirstBillDay) || now.Before(readyAt) {
		return alipayFailure("40004", "isp.bill_not_exist", "账单不存在")
	}

	digits := strings.ReplaceAll(billDate, "-", "")
	var data []byte
	var err error
	if billType == "signcustomer" {
		data, err = s.alipayAccountZip(digits, from, to, now)
	} else {
		s.mu.Lock()
		rows := s.alipayBillRows(from, to, now)
		s.mu.Unlock()
		data, err = alipayBillZip(s.keys.SellerID, digits, from, to, now, rows)
	}
	if err != nil {
		s.log.Error("sim: alipay bill", "err", err)
		return alipayFailure("20000", "isp.unknow-error", "服务暂不可用")
	}

	token := strings.ToLower(rand.Text())
	s.mu.Lock()
	wallNow := s.alipay.wallNow()
	for k, b := range s.alipay.bills {
		if !wallNow.Before(b.expiresAt) {
			delete(s.alipay.bills, k)
		}
	}
	s.alipay.bills[token] = &alipayBill{
		fileName:  s.keys.SellerID + "_" + digits + ".csv.zip",
		data:      data,
		expiresAt: wallNow.Add(s.alipay.billURLLifetime),
	}
	s.mu.Unlock()

	r := alipaySuccess()
	r.BillDownloadURL = baseURL + alipayBillPath + token
	return r
}

// parseAlipayBillDate reads a daily or monthly bill date: the period [from, to) in China
// time and when its bill comes out.
func parseAlipayBillDate(s string) (from, to, readyAt time.Time, ok bool) {
	switch len(s) {
	case len("2006-01-02"):
		d, err := time.ParseInLocation("2006-01-02", s, cst)
		if err != nil {
			return from, to, readyAt, false
		}
		to = d.AddDate(0, 0, 1)
		return d, to, to.Add(alipayBillReadyAfter), true
	case len("2006-01"):
		d, err := time.ParseInLocation("2006-01", s, cst)
		if err != nil {
			return from, to, readyAt, false
		}
		to = d.AddDate(0, 1, 0)
		return d, to, to.Add(alipayMonthlyBillReadyAfter), true
	}
	return from, to, readyAt, false
}

// alipayBillRow is one detail row of a bill, with what it is sorted by and summed by.
type alipayBillRow struct {
	at     time.Time
	refund bool
	seq    int64
	fields []string
	store  string // 门店编号
	total  int64  // 订单金额 of a payment, fen (0 on a refund row)
	amount int64  // 商家实收, fen: positive for a trade, negative for a refund
	fee    int64  // 服务费, fen: the fee charged negative, the share given back positive
}

// alipayBillRows lists the bill's detail rows for [from, to): one 交易 row for every trade
// paid in the period (whatever became of it since), and one 退款 row for every refund
// settled in the period, with negative amounts and its out_request_no. 服务费 is the fee
// charged (negative) on a 交易 row and the share given back (positive) on a 退款 row
// (alipayMoney). The caller holds s.mu.
func (s *Simulator) alipayBillRows(from, to, now time.Time) []alipayBillRow {
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	stamp := func(t time.Time) string { return t.In(cst).Format(alipayTimeLayout) }
	var rows []alipayBillRow
	for _, p := range s.alipayMoney(now) {
		t := p.src.(*alipayTrade)
		var storeID, terminalID string
		if t.barcode != nil {
			// A barcode payment names its counter: the store and till the payment came from.
			storeID, terminalID = t.barcode.storeID, t.barcode.terminalID
		}
		row := func(kind string, completed time.Time, amount int64, requestNo string, fee int64) []string {
			a := orderpay.FormatYuan(amount)
			return []string{
				t.tradeNo, t.outTradeNo, kind, t.subject, stamp(t.createdAt), stamp(completed),
				storeID, "", "", terminalID, t.buyerLogonID, a, a, "0.00", "0.00",
				"0.00", "0.00", "0.00", "", "0.00", "0.00",
				requestNo, orderpay.FormatYuan(fee), "0.00", "",
			}
		}
		if in(t.paidAt) {
			rows = append(rows, alipayBillRow{at: t.paidAt, seq: t.seq, store: storeID, total: t.amount, amount: t.amount, fee: -p.fee,
				fields: row("交易", t.paidAt, t.amount, "", -p.fee)})
		}
		for _, rm := range p.refunds {
			r := rm.src.(*alipayRefund)
			if in(r.settlesAt) {
				rows = append(rows, alipayBillRow{at: r.settlesAt, refund: true, seq: r.seq, store: storeID, amount: -r.amount, fee: rm.share,
					fields: row("退款", r.settlesAt, -r.amount, r.outRequestNo, rm.share)})
			}
		}
	}
	slices.SortFunc(rows, func(a, b alipayBillRow) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.refund != b.refund {
			if a.refund {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return rows
}

// alipayBillZip writes the bill: a zip holding two GBK-encoded CSV files with CRLF line
// ends, the detail <seller>_<date>_业务明细.csv and its summary
// <seller>_<date>_业务明细(汇总).csv. The framing follows third-party descriptions of the
// real files, which §D lists as unverified:
//
//	#支付宝业务明细查询
//	#账号：[<seller id>]
//	#起始日期：[yyyy年MM月dd日 00:00:00]   终止日期：[yyyy年MM月dd日 00:00:00]
//	#-----------------------------------------业务明细列表----------------------------------------
//	<the 25 column names of §A3>
//	<detail rows, standard CSV quoting, amounts in yuan with two decimals, no padding>
//	#-----------------------------------------业务明细列表结束------------------------------------
//	#交易合计：<n>笔，商家实收共：<yuan>元
//	#退款合计：<n>笔，商家实收共：<negative yuan>元
//	#导出时间：[yyyy年MM月dd日 HH:mm:ss]
//
// The summary (alipaySummaryText) has a row per store and a 合计 row. Real files are
// reported to pad fields with tabs; the simulator does not, so a parser should trim fields
// and pick the files by name. The zip entries' names are UTF-8 (flagged as such), not GBK.
// Discounts are zero; the store columns are empty but for a barcode trade's store_id
// (门店编号) and terminal_id (终端号).
func alipayBillZip(sellerID, digits string, from, to, now time.Time, rows []alipayBillRow) ([]byte, error) {
	day := func(t time.Time) string { return t.In(cst).Format("2006年01月02日 15:04:05") }
	var text bytes.Buffer
	line := func(s string) { text.WriteString(s + "\r\n") }
	line("#支付宝业务明细查询")
	line("#账号：[" + sellerID + "]")
	line("#起始日期：[" + day(from) + "]   终止日期：[" + day(to) + "]")
	line("#-----------------------------------------业务明细列表----------------------------------------")
	w := csv.NewWriter(&text)
	w.UseCRLF = true
	_ = w.Write(alipayBillColumns)
	var trades, refunds int
	var tradeSum, refundSum int64
	for _, r := range rows {
		_ = w.Write(r.fields)
		if r.refund {
			refunds++
			refundSum += r.amount
		} else {
			trades++
			tradeSum += r.amount
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, err
	}
	line("#-----------------------------------------业务明细列表结束------------------------------------")
	line(fmt.Sprintf("#交易合计：%d笔，商家实收共：%s元", trades, orderpay.FormatYuan(tradeSum)))
	line(fmt.Sprintf("#退款合计：%d笔，商家实收共：%s元", refunds, orderpay.FormatYuan(refundSum)))
	line("#导出时间：[" + day(now) + "]")

	summary, err := alipaySummaryText(sellerID, from, to, now, rows)
	if err != nil {
		return nil, err
	}
	return gbkZip(now,
		alipayZipEntry{sellerID + "_" + digits + "_业务明细.csv", text.Bytes()},
		alipayZipEntry{sellerID + "_" + digits + "_业务明细(汇总).csv", summary})
}

// alipaySummaryColumns are the columns of the trade bill's 业务明细(汇总).
var alipaySummaryColumns = []string{
	"门店编号", "门店名称", "交易订单总笔数", "退款订单总笔数", "订单金额（元）", "商家实收（元）", "支付宝优惠（元）",
	"商家优惠（元）", "卡消费金额（元）", "服务费（元）", "分润（元）", "实收净额（元）",
}

// alipaySummaryText is the 业务明细(汇总) file: one row per 门店编号 the day's rows name
// (those of trades that are not barcode payments name ""), sorted, then the 合计 row:
//
//	#支付宝业务汇总查询
//	#账号：[<seller id>]
//	#起始日期：[…]   终止日期：[…]
//	#-----------------------------------------业务汇总列表----------------------------------------
//	<the 12 columns>
//	<a row per store>
//	合计,,<trades>,<refunds>,<Σ 订单金额 of payments>,<Σ 商家实收>,0.00,0.00,0.00,<Σ 服务费>,0.00,<实收净额>
//	#-----------------------------------------业务汇总列表结束------------------------------------
//	#导出时间：[…]
//
// 实收净额 is 商家实收 + 服务费 + 分润: payments less refunds, less fees, plus fees given back.
func alipaySummaryText(sellerID string, from, to, now time.Time, rows []alipayBillRow) ([]byte, error) {
	type sums struct {
		trades, refunds           int
		total, received, fee, net int64
	}
	byStore := map[string]*sums{}
	var all sums
	add := func(s *sums, r alipayBillRow) {
		if r.refund {
			s.refunds++
		} else {
			s.trades++
		}
		s.total += r.total
		s.received += r.amount
		s.fee += r.fee
		s.net += r.amount + r.fee
	}
	for _, r := range rows {
		s := byStore[r.store]
		if s == nil {
			s = &sums{}
			byStore[r.store] = s
		}
		add(s, r)
		add(&all, r)
	}
	record := func(store string, s *sums) []string {
		y := orderpay.FormatYuan
		return []string{store, "", fmt.Sprint(s.trades), fmt.Sprint(s.refunds), y(s.total), y(s.received),
			"0.00", "0.00", "0.00", y(s.fee), "0.00", y(s.net)}
	}
	day := func(t time.Time) string { return t.In(cst).Format("2006年01月02日 15:04:05") }
	var text bytes.Buffer
	line := func(s string) { text.WriteString(s + "\r\n") }
	line("#支付宝业务汇总查询")
	line("#账号：[" + sellerID + "]")
	line("#起始日期：[" + day(from) + "]   终止日期：[" + day(to) + "]")
	line("#-----------------------------------------业务汇总列表----------------------------------------")
	w := csv.NewWriter(&text)
	w.UseCRLF = true
	_ = w.Write(alipaySummaryColumns)
	stores := make([]string, 0, len(byStore))
	for st := range byStore {
		stores = append(stores, st)
	}
	slices.Sort(stores)
	for _, st := range stores {
		_ = w.Write(record(st, byStore[st]))
	}
	total := record("合计", &all)
	_ = w.Write(total)
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, err
	}
	line("#-----------------------------------------业务汇总列表结束------------------------------------")
	line("#导出时间：[" + day(now) + "]")
	return text.Bytes(), nil
}

// serveAlipayBill is GET /sim/bills/alipay/{token}: the bill behind a bill_download_url,
// as application/octet-stream, or 404 once the URL has expired or for a token never
// handed out.
func (s *Simulator) serveAlipayBill(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	s.mu.Lock()
	b := s.alipay.bills[token]
	if b != nil && !s.alipay.wallNow().Before(b.expiresAt) {
		delete(s.alipay.bills, token)
		b = nil
	}
	s.mu.Unlock()
	if b == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+b.fileName+`"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.data)
}

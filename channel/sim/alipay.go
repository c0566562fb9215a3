package sim

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// Alipay trade statuses (docs/channels.md §A3).
const (
	AlipayWaitBuyerPay  = "WAIT_BUYER_PAY"
	AlipayTradeSuccess  = "TRADE_SUCCESS"
	AlipayTradeClosed   = "TRADE_CLOSED"
	AlipayTradeFinished = "TRADE_FINISHED"
)

const (
	// alipayQRPrefix starts every face-to-face QR code, e.g. https://qr.alipay.com/bax03431….
	alipayQRPrefix = "https://qr.alipay.com/bax"
	// alipayTimeLayout is Alipay's time format, always in China Standard Time.
	alipayTimeLayout = "2006-01-02 15:04:05"
	// alipayDefaultTimeout applies when precreate passes neither time_expire nor
	// timeout_express: the face-to-face default of 3 h (docs/channels.md §A3).
	alipayDefaultTimeout = 3 * time.Hour
	// alipayMaxTimeout is the upper end of timeout_express's range 1m–15d.
	alipayMaxTimeout = 15 * 24 * time.Hour
)

// cst is China Standard Time, the zone of every Alipay timestamp. A fixed zone, so the
// simulator never depends on the machine's tz database.
var cst = time.FixedZone("CST", 8*3600)

// alipayTrade is one out_trade_no at the simulated Alipay: first a pending QR code, then,
// once scanned, a trade. A trade of another method has no code: a pc, wap or app trade is
// made when the buyer pays it, an inapp one by alipay.trade.create (alipay_methods.go).
type alipayTrade struct {
	// appID is the merchant's app that made the trade (precreate, trade.create, or the app
	// a pc, wap or app order was signed as): only that app can query, close, cancel or
	// refund it; to the merchant's other app it does not exist.
	appID      string
	outTradeNo string
	subject    string
	amount     int64 // fen
	notifyURL  string
	// method is how the trade was opened: "" for a precreated QR code (face-to-face),
	// otherwise MethodPC, MethodWAP, MethodApp, MethodInApp or MethodBarcode.
	method orderpay.PayMethod
	// barcode is what a barcode trade (alipay.trade.pay) was paid with and how its buyer
	// goes on; nil for every other trade (alipay_barcode.go).
	barcode *alipayBarcode

	qrCode      string    // the code currently issued for this out_trade_no
	qrExpiresAt time.Time // the code cannot be scanned from then on
	payDeadline time.Time // time_expire / timeout_express, counted from precreate

	// Set when the buyer scans: before that the trade does not exist at Alipay.
	status       string // "" until scanned, then one of the Alipay* statuses
	seq          int64
	tradeNo      string
	buyerUserID  string
	buyerLogonID string
	createdAt    time.Time // gmt_create
	paidAt       time.Time // gmt_payment / send_pay_date
	notifyID     string

	// cancelled is set by alipay.trade.cancel. An unscanned code can then never be scanned,
	// and the out_trade_no can never be precreated again.
	cancelled bool
	// cancelAction is what the first successful cancel did (alipayCancelClose or
	// alipayCancelRefund); every later cancel answers the same.
	cancelAction string
	// refunds are the accepted refunds, in acceptance order (alipay_refund.go).
	refunds []*alipayRefund
}

// scanned reports whether the trade exists at the channel.
func (t *alipayTrade) scanned() bool { return t.status != "" }

// ofApp reports whether the trade is app's: made under it. A trade of the merchant's other
// app is, to app, a trade that does not exist.
func (t *alipayTrade) ofApp(app *alipayApp) bool { return t.appID == app.AppID }

// tradeApp is the app that made t, whose Alipay key signs its notifications and returns.
// The caller holds s.mu.
func (s *Simulator) tradeApp(t *alipayTrade) *alipayApp {
	if app := s.alipayApps[t.appID]; app != nil {
		return app
	}
	return s.alipayMain
}

// paid reports whether the buyer ever paid, whatever became of the trade since: a paid
// trade refunded in full is TRADE_CLOSED, but it was paid.
func (t *alipayTrade) paid() bool { return !t.paidAt.IsZero() }

// refresh applies what time does to a trade, as Alipay does on its own: a barcode trade
// whose buyer confirms by now is paid then, a scanned, unpaid trade whose deadline has
// passed is closed (timeout closing), and a paid trade whose refunds have settled to its
// full amount is closed (§A3: TRADE_CLOSED also means "paid, then fully refunded"). It is
// applied lazily wherever the trade is looked at.
func (t *alipayTrade) refresh(now time.Time) {
	if b := t.barcode; b != nil && t.status == AlipayWaitBuyerPay && !b.payAt.IsZero() && !now.Before(b.payAt) && b.payAt.Before(t.payDeadline) {
		t.status = AlipayTradeSuccess
		t.paidAt = b.payAt
	}
	switch {
	case t.status == AlipayWaitBuyerPay && !now.Before(t.payDeadline):
		t.status = AlipayTradeClosed
	case t.status == AlipayTradeSuccess && t.refundedTotal(now) >= t.amount:
		t.status = AlipayTradeClosed
	}
}

// codeUsable reports whether the current QR code can still be scanned for this trade.
func (t *alipayTrade) codeUsable(now time.Time) bool {
	return now.Before(t.qrExpiresAt) && now.Before(t.payDeadline)
}

// alipayBook holds the simulated Alipay's trades. Every access holds Simulator.mu.
type alipayBook struct {
	byOutTradeNo map[string]*alipayTrade
	byQRCode     map[string]*alipayTrade // every code ever issued, including superseded ones
	byTradeNo    map[string]*alipayTrade
	dirty        *dirtySet // the journal's (state.go); nil in memory only

	refundSeq int64 // acceptance order of refunds across trades, for bills

	// signed are the pc, wap and app orders the cashier or the wallet has seen, by
	// out_trade_no, and cashier the ones shown on a cashier page, by the page's token
	// (alipay_methods.go). None of them is a trade until the buyer pays it.
	signed  map[string]*alipaySeenOrder
	cashier map[string]*alipaySignedOrder
	// authCodes and refreshTokens are the OAuth page's codes and the tokens they were
	// exchanged for (alipay_oauth.go).
	authCodes     map[string]*alipayAuthCode
	refreshTokens map[string]string // refresh_token → user_id

	bills map[string]*alipayBill // bill download tokens (alipay_bill.go)
	// barcodeWaiting are the barcode trades with a notify_url whose buyer confirms later,
	// watched so that their notification goes when they are paid (alipay_barcode.go);
	// watchingBarcode says the watcher runs.
	barcodeWaiting  []*alipayTrade
	watchingBarcode bool
	// billURLLifetime is how long a bill_download_url works, in wall time: 30 s (§A3).
	billURLLifetime time.Duration
	// wallNow is the wall clock that bill URLs expire by; tests replace it.
	wallNow func() time.Time
}

func newAlipayBook() alipayBook {
	return alipayBook{
		byOutTradeNo:    map[string]*alipayTrade{},
		byQRCode:        map[string]*alipayTrade{},
		byTradeNo:       map[string]*alipayTrade{},
		signed:          map[string]*alipaySeenOrder{},
		cashier:         map[string]*alipaySignedOrder{},
		authCodes:       map[string]*alipayAuthCode{},
		refreshTokens:   map[string]string{},
		bills:           map[string]*alipayBill{},
		billURLLifetime: alipayBillURLLifetime,
		wallNow:         time.Now,
	}
}

// find returns the trade a call names by out_trade_no and/or trade_no, or nil. When both
// are given they must name the same trade. The result may be an unscanned code (no trade
// at the channel yet) or a cancelled number: callers check scanned().
func (b *alipayBook) find(outTradeNo, tradeNo string) *alipayTrade {
	if tradeNo != "" {
		t := b.touch(b.byTradeNo[tradeNo])
		if t != nil && outTradeNo != "" && t.outTradeNo != outTradeNo {
			return nil
		}
		return t
	}
	return b.touch(b.byOutTradeNo[outTradeNo])
}

func (b *alipayBook) ledger(now time.Time) []LedgerEntry {
	var entries []LedgerEntry
	for _, t := range b.byOutTradeNo {
		t.refresh(now)
		if !t.scanned() {
			continue
		}
		entries = append(entries, LedgerEntry{
			Channel:    orderpay.ChannelAlipay,
			Method:     cmp.Or(t.method, orderpay.MethodQR),
			AppID:      t.appID,
			OutTradeNo: t.outTradeNo,
			TradeNo:    t.tradeNo,
			Status:     t.status,
			Amount:     t.amount,
			Refunded:   t.refundedTotal(now),
			PaidAt:     t.paidAt,
			Refunds:    t.ledgerRefunds(now),
			seq:        t.seq,
		})
	}
	return entries
}

// precreateRequest is a validated alipay.trade.precreate call.
type precreateRequest struct {
	outTradeNo  string
	amount      int64
	subject     string
	notifyURL   string
	payDeadline time.Time
	qrExpiresAt time.Time
}

var outTradeNoPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// parsePrecreate validates the business fields of a precreate call (docs/channels.md §A3). A
// failure is an ACQ.INVALID_PARAMETER reply.
func (s *Simulator) parsePrecreate(notifyURL string, biz bizContent, now time.Time) (precreateRequest, *alipayReply) {
	invalid := func(format string, args ...any) (precreateRequest, *alipayReply) {
		r := alipayFailure("40004", "ACQ.INVALID_PARAMETER", fmt.Sprintf(format, args...))
		return precreateRequest{}, &r
	}
	var req precreateRequest
	fields := map[string]*string{}
	for _, k := range []string{"out_trade_no", "total_amount", "subject", "product_code",
		"time_expire", "timeout_express", "qr_code_timeout_express"} {
		v, err := biz.str(k)
		if err != nil {
			return invalid("%v", err)
		}
		fields[k] = &v
	}
	var msg string
	if req.outTradeNo, req.amount, req.subject, msg = checkOrderFields(*fields["out_trade_no"], *fields["total_amount"], *fields["subject"]); msg != "" {
		return invalid("%s", msg)
	}
	if pc := *fields["product_code"]; pc != "" && pc != "FACE_TO_FACE_PAYMENT" {
		return invalid("product_code must be FACE_TO_FACE_PAYMENT")
	}
	if !absoluteHTTPURL(notifyURL) {
		return invalid("notify_url must be an absolute http(s) URL")
	}
	req.notifyURL = notifyURL

	// time_expire overrides timeout_express; with neither, the face-to-face default applies.
	switch te, tx := *fields["time_expire"], *fields["timeout_express"]; {
	case te != "":
		d, err := time.ParseInLocation(alipayTimeLayout, te, cst)
		if err != nil {
			return invalid("time_expire must be yyyy-MM-dd HH:mm:ss")
		}
		if !d.After(now) {
			return invalid("time_expire is not in the future")
		}
		req.payDeadline = d
	case tx != "":
		d, err := parseAlipayTimeout(tx, now)
		if err != nil {
			return invalid("timeout_express: %v", err)
		}
		req.payDeadline = d
	default:
		req.payDeadline = now.Add(alipayDefaultTimeout)
	}

	req.qrExpiresAt = now.Add(s.cfg.QRLifetime)
	if qx := *fields["qr_code_timeout_express"]; qx != "" {
		d, err := parseAlipayTimeout(qx, now)
		if err != nil {
			return invalid("qr_code_timeout_express: %v", err)
		}
		req.qrExpiresAt = minTime(req.qrExpiresAt, d)
	}
	return req, nil
}

// checkOrderFields applies the field rules every order shares (docs/channels.md §A3) to
// out_trade_no, total_amount and subject, and returns them read, or why they break them.
func checkOrderFields(outTradeNo, totalAmount, subject string) (string, int64, string, string) {
	if !outTradeNoPattern.MatchString(outTradeNo) {
		return "", 0, "", "out_trade_no must be 1 to 64 letters, digits or underscores"
	}
	amount, err := orderpay.ParseYuan(totalAmount)
	if err != nil || amount < 1 || amount > orderpay.MaxChannelAmount {
		return "", 0, "", "total_amount must be a yuan amount with at most two decimals in [0.01, 100000000]"
	}
	if subject == "" || strings.ContainsAny(subject, "/=&") || len(subject) > 256 {
		return "", 0, "", "subject must be 1 to 256 bytes without / = &"
	}
	return outTradeNo, amount, subject, ""
}

// absoluteHTTPURL reports whether s is empty or an absolute http(s) URL, as Alipay wants
// notify_url, return_url and quit_url.
func absoluteHTTPURL(s string) bool {
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var timeoutPattern = regexp.MustCompile(`^([1-9][0-9]{0,5})([mhd])$`)

// alipayTradeDeadline is when a trade made now stops taking payment: its time_expire
// (yyyy-MM-dd HH:mm:ss in China, in the future), else its timeout_express, else def from
// now. bad is Alipay's words for a field it refuses, or "".
func alipayTradeDeadline(fields map[string]string, now time.Time, def time.Duration) (deadline time.Time, bad string) {
	switch te, tx := fields["time_expire"], fields["timeout_express"]; {
	case te != "":
		d, err := time.ParseInLocation(alipayTimeLayout, te, cst)
		if err != nil {
			return time.Time{}, "time_expire must be yyyy-MM-dd HH:mm:ss"
		}
		if !d.After(now) {
			return time.Time{}, "time_expire is not in the future"
		}
		return d, ""
	case tx != "":
		d, err := parseAlipayTimeout(tx, now)
		if err != nil {
			return time.Time{}, "timeout_express: " + err.Error()
		}
		return d, ""
	}
	return now.Add(def), ""
}

// parseAlipayTimeout reads a relative timeout such as 90m, 2h or 3d (range 1m–15d), or 1c
// (the end of the current day in China), and returns the absolute deadline from now.
func parseAlipayTimeout(s string, now time.Time) (time.Time, error) {
	if s == "1c" {
		n := now.In(cst)
		return time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, cst), nil
	}
	m := timeoutPattern.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, fmt.Errorf("%q is not like 90m, 2h, 3d or 1c", s)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
	d := time.Duration(n) * unit
	if d > alipayMaxTimeout {
		return time.Time{}, fmt.Errorf("%q is longer than 15d", s)
	}
	return now.Add(d), nil
}

// alipayPrecreate serves alipay.trade.precreate, for app: the code's trade is app's.
func (s *Simulator) alipayPrecreate(app *alipayApp, params url.Values, biz bizContent) alipayReply {
	now := s.clock.Now()
	req, fail := s.parsePrecreate(params.Get("notify_url"), biz, now)
	if fail != nil {
		return *fail
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.touch(s.alipay.byOutTradeNo[req.outTradeNo])
	if t != nil {
		t.refresh(now)
		switch {
		case t.cancelled:
			// Cancel guarantees that nothing can be paid under this number, even when the
			// cancel overtook the precreate it was meant to undo.
			return alipayFailure("40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.status == AlipayTradeSuccess || t.status == AlipayTradeFinished:
			return alipayFailure("40004", "ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
		case t.status == AlipayTradeClosed:
			return alipayFailure("40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.amount != req.amount || t.method != "" || !t.ofApp(app):
			// Same out_trade_no, different content (another amount, a trade of another
			// method, or of the merchant's other app): Alipay refuses rather than letting
			// one merchant order number stand for two orders.
			return alipayFailure("40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
		case t.codeUsable(now):
			// A repeated precreate returns the code already issued, so a retried call
			// never produces two payable codes.
			return alipayPrecreateOK(t)
		}
		// The code expired. Issue a new one. An unscanned order number has no trade yet,
		// so the new request's deadline and notify_url apply; a scanned trade keeps its own.
		// The old code stays known, so scanning it reports that it was replaced.
		t.qrCode = s.newAlipayQRCode()
		t.qrExpiresAt = req.qrExpiresAt
		if !t.scanned() {
			t.payDeadline = req.payDeadline
			t.notifyURL = req.notifyURL
			t.subject = req.subject
		}
		s.alipay.byQRCode[t.qrCode] = t
		return alipayPrecreateOK(t)
	}

	t = &alipayTrade{
		appID:       app.AppID,
		outTradeNo:  req.outTradeNo,
		subject:     req.subject,
		amount:      req.amount,
		notifyURL:   req.notifyURL,
		qrCode:      s.newAlipayQRCode(),
		qrExpiresAt: req.qrExpiresAt,
		payDeadline: req.payDeadline,
	}
	s.alipay.byOutTradeNo[t.outTradeNo] = t
	s.alipay.touch(t)
	s.alipay.byQRCode[t.qrCode] = t
	return alipayPrecreateOK(t)
}

func alipayPrecreateOK(t *alipayTrade) alipayReply {
	r := alipaySuccess()
	r.OutTradeNo = t.outTradeNo
	r.QRCode = t.qrCode
	return r
}

// alipayQuery serves alipay.trade.query. Until the buyer scans, the trade does not exist
// and the answer is ACQ.TRADE_NOT_EXIST (docs/channels.md §A3, "Trade creation timing").
func (s *Simulator) alipayQuery(app *alipayApp, biz bizContent) alipayReply {
	return s.withScannedTrade(app, biz, alipayQueryReply)
}

// withScannedTrade is the start that query and close share: the trade the call names,
// brought up to date, handed to fn under the simulator's lock; a trade not yet scanned
// does not exist (ACQ.TRADE_NOT_EXIST), and neither does one of the merchant's other app.
func (s *Simulator) withScannedTrade(app *alipayApp, biz bizContent, fn func(t *alipayTrade) alipayReply) alipayReply {
	outTradeNo, tradeNo, fail := tradeIDs(biz)
	if fail != nil {
		return *fail
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.find(outTradeNo, tradeNo)
	if t == nil || !t.scanned() || !t.ofApp(app) {
		return alipayFailure("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	t.refresh(now)
	return fn(t)
}

func alipayQueryReply(t *alipayTrade) alipayReply {
	r := alipaySuccess()
	r.TradeNo = t.tradeNo
	r.OutTradeNo = t.outTradeNo
	r.BuyerLogonID = t.buyerLogonID
	r.BuyerUserID = t.buyerUserID
	r.TradeStatus = t.status
	r.TotalAmount = orderpay.FormatYuan(t.amount)
	paid := int64(0)
	if t.paid() {
		// Also for a paid trade refunded in full (TRADE_CLOSED): the payment happened,
		// and send_pay_date is what tells it apart from a trade closed unpaid.
		paid = t.amount
		r.SendPayDate = t.paidAt.In(cst).Format(alipayTimeLayout)
	}
	r.BuyerPayAmount = orderpay.FormatYuan(paid)
	r.ReceiptAmount = orderpay.FormatYuan(paid)
	r.InvoiceAmount = orderpay.FormatYuan(paid)
	r.PointAmount = "0.00"
	return r
}

// tradeIDs reads the out_trade_no and trade_no of a call that names a trade by either.
// A failure is an ACQ.INVALID_PARAMETER reply.
func tradeIDs(biz bizContent) (outTradeNo, tradeNo string, fail *alipayReply) {
	outTradeNo, err1 := biz.str("out_trade_no")
	tradeNo, err2 := biz.str("trade_no")
	if err1 != nil || err2 != nil || (outTradeNo == "" && tradeNo == "") {
		r := alipayFailure("40004", "ACQ.INVALID_PARAMETER", "out_trade_no or trade_no is required")
		return "", "", &r
	}
	return outTradeNo, tradeNo, nil
}

// alipayScan plays the buyer scanning an Alipay code and, if pay, paying it in full.
func (s *Simulator) alipayScan(qrCode string, pay bool) (*PayResult, error) {
	now := s.clock.Now()
	s.mu.Lock()
	t := s.alipay.touch(s.alipay.byQRCode[qrCode])
	if t == nil {
		s.mu.Unlock()
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "unknown QR code")
	}
	t.refresh(now)
	var err error
	switch {
	case t.status == AlipayTradeSuccess || t.status == AlipayTradeFinished:
		err = orderpay.Errorf(orderpay.ECONFLICT, "trade %s is already paid", t.outTradeNo)
	case t.status == AlipayTradeClosed:
		err = orderpay.Errorf(orderpay.ECONFLICT, "trade %s is closed", t.outTradeNo)
	case t.cancelled && !t.scanned():
		err = orderpay.Errorf(orderpay.ECONFLICT, "trade %s was cancelled", t.outTradeNo)
	case t.qrCode != qrCode:
		err = orderpay.Errorf(orderpay.ECONFLICT, "the QR code was replaced by a newer one")
	case !t.scanned() && !now.Before(t.payDeadline):
		// The merchant's deadline passed before anyone scanned: the cashier refuses and
		// no trade is created.
		err = orderpay.Errorf(orderpay.ECONFLICT, "the order's payment deadline has passed")
	case !t.scanned() && !now.Before(t.qrExpiresAt):
		err = orderpay.Errorf(orderpay.ECONFLICT, "the QR code has expired")
	}
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}

	if !t.scanned() {
		t.status = AlipayWaitBuyerPay
		t.seq = s.nextSeq()
		t.tradeNo = s.newAlipayTradeNo(now)
		t.buyerUserID = "2088" + randomDigitString(12)
		t.buyerLogonID = "1" + randomDigitString(2) + "******" + randomDigitString(2)
		t.createdAt = now
		s.alipay.byTradeNo[t.tradeNo] = t
	}
	var note *outgoingNotification
	if pay {
		t.status = AlipayTradeSuccess
		t.paidAt = now
		t.notifyID = strings.ToLower(rand.Text())
		note = s.alipayNotification(t)
	}
	res := &PayResult{
		Channel:    orderpay.ChannelAlipay,
		OutTradeNo: t.outTradeNo,
		TradeNo:    t.tradeNo,
		Status:     t.status,
		Amount:     t.amount,
	}
	s.mu.Unlock()

	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, nil
}

// newAlipayQRCode returns an unused, unguessable QR code. The caller holds s.mu.
func (s *Simulator) newAlipayQRCode() string {
	for {
		code := alipayQRPrefix + strings.ToLower(rand.Text())[:22]
		if _, taken := s.alipay.byQRCode[code]; !taken {
			return code
		}
	}
}

// newAlipayTradeNo returns an unused Alipay trade number: the date in China followed by 20
// digits, 28 characters like real ones. The caller holds s.mu.
func (s *Simulator) newAlipayTradeNo(now time.Time) string {
	for {
		no := now.In(cst).Format("20060102") + randomDigitString(20)
		if _, taken := s.alipay.byTradeNo[no]; !taken {
			return no
		}
	}
}

// randomDigitString returns n random decimal digits. Identifiers only need to be unique
// and unpredictable enough for a simulator, so a failure of crypto/rand (which does not
// happen on supported platforms) panics.
func randomDigitString(n int) string {
	d, err := randomDigits(n)
	if err != nil {
		panic(err)
	}
	return d
}

// tamperedAmount is a different amount for a tampered notification: one fen less, or one
// more for a trade of one fen.
func tamperedAmount(amount int64) int64 {
	if amount > 1 {
		return amount - 1
	}
	return amount + 1
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

package sim

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"orderpay"
)

// WeChat Pay trade states (docs/channels.md §B1). REVOKED, USERPAYING and PAYERROR occur only for
// payment-code (micropay) payments and are never produced for Native orders.
const (
	WechatSuccess = "SUCCESS"
	WechatRefund  = "REFUND"
	WechatNotPay  = "NOTPAY"
	WechatClosed  = "CLOSED"
)

// WeChat Pay refund statuses (§B1). An accepted refund is PROCESSING until RefundDelay (or a
// refund fault's Delay) has passed, then SUCCESS, or ABNORMAL or CLOSED if EndWechatRefund or
// an abnormal or closed refund fault said so.
const (
	WechatRefundSuccess    = "SUCCESS"
	WechatRefundProcessing = "PROCESSING"
	// WechatRefundAbnormal: the money could not go back (the buyer's card was closed or
	// frozen); the merchant handles it by hand (§E).
	WechatRefundAbnormal = "ABNORMAL"
	// WechatRefundClosed: WeChat closed the refund; no money moved.
	WechatRefundClosed = "CLOSED"
)

const (
	// wechatQRPrefix starts every Native code_url.
	wechatQRPrefix = "weixin://wxpay/bizpayurl?pr="
	// wechatDefaultExpire applies when prepay sends no time_expire. The documentation does
	// not say; two hours is what Native codes were long documented to live.
	wechatDefaultExpire = 2 * time.Hour
	// wechatMinExpire: a time_expire under order time + 1 min is raised to it (§B1).
	wechatMinExpire = time.Minute
	// wechatMaxRefunds is the most partial refunds one order can have (§B1).
	wechatMaxRefunds = 50
	// wechatUserReceivedAccount is where refunds go back: the buyer's WeChat balance.
	wechatUserReceivedAccount = "支付用户零钱"
)

// wechatStateDesc is trade_state_desc for each state.
var wechatStateDesc = map[string]string{
	WechatSuccess: "支付成功",
	WechatRefund:  "转入退款",
	WechatNotPay:  "订单未支付",
	WechatClosed:  "订单已关闭",
}

// wechatOrder is one out_trade_no at the simulated WeChat Pay. Unlike an Alipay trade, it
// exists from the prepay call on, in state NOTPAY.
type wechatOrder struct {
	outTradeNo string
	seq        int64
	prepay     wechatPrepay // the request that created it, to compare repeats with
	createdAt  time.Time
	timeExpire time.Time // the buyer cannot pay from then on
	codeURL    string

	scanned       bool      // the buyer opened the code (Scan, Decline or Pay)
	paidAt        time.Time // zero until paid; whole seconds, as success_time shows it
	transactionID string
	openID        string
	notifyID      string
	closedAt      time.Time       // zero unless closed unpaid
	refunds       []*wechatRefund // every accepted refund, in creation order
	// micropay is a barcode order's own part (codepay, wechat_barcode.go); nil for every
	// other order.
	micropay *wechatMicropay
}

// wechatRefund is one out_refund_no: a refund WeChat accepted. It reaches its final state
// RefundDelay, or a refund fault's Delay, (simulated time) after it was created: SUCCESS,
// or end if one was set.
type wechatRefund struct {
	outRefundNo string
	refundID    string
	order       *wechatOrder
	amount      int64 // fen
	reason      string
	createdAt   time.Time
	settlesAt   time.Time
	end         string // WechatRefundAbnormal or WechatRefundClosed; "" ends SUCCESS
	notifyURL   string // where the REFUND.* notification goes; "" for none
	notifyID    string
	// notified is set once the refund's notification is queued.
	notified bool
}

func (r *wechatRefund) settled(now time.Time) bool { return !now.Before(r.settlesAt) }

func (r *wechatRefund) status(now time.Time) string {
	switch {
	case !r.settled(now):
		return WechatRefundProcessing
	case r.end != "":
		return r.end
	}
	return WechatRefundSuccess
}

// movesNoMoney reports whether r ended without money going back (ABNORMAL or CLOSED):
// its amount is refundable again.
func (r *wechatRefund) movesNoMoney(now time.Time) bool { return r.settled(now) && r.end != "" }

func (o *wechatOrder) paid() bool   { return !o.paidAt.IsZero() }
func (o *wechatOrder) closed() bool { return !o.closedAt.IsZero() }

// refunded returns the fen refunded so far: every accepted refund, or only the settled
// ones. A refund that ended ABNORMAL or CLOSED moved nothing and counts for neither.
func (o *wechatOrder) refunded(now time.Time, settledOnly bool) int64 {
	var sum int64
	for _, r := range o.refunds {
		if r.movesNoMoney(now) {
			continue
		}
		if !settledOnly || r.settled(now) {
			sum += r.amount
		}
	}
	return sum
}

// ledgerRefunds lists o's refunds for the ledger at now, or nil if it has none. WeChat's
// statuses are the ledger's.
func (o *wechatOrder) ledgerRefunds(now time.Time) []LedgerRefund {
	var out []LedgerRefund
	for _, r := range o.refunds {
		l := LedgerRefund{OutRefundNo: r.outRefundNo, Amount: r.amount, Status: r.status(now)}
		if l.Status == LedgerRefundSuccess {
			l.SettledAt = r.settlesAt
		}
		out = append(out, l)
	}
	return out
}

// state is the order's trade_state at now. A paid order becomes REFUND once refunds of its
// whole amount have settled; the documentation only says "转入退款", and a partly refunded
// order keeps SUCCESS here. An unpaid order past time_expire stays NOTPAY until closed:
// WeChat does not close it by itself (§C "NOTPAY until time_expire plus a successful close").
// A barcode order is USERPAYING, PAYERROR or REVOKED instead of NOTPAY or CLOSED, and
// REVOKED even once paid (micropayState); the caller has brought it up to date
// (advanceMicropay).
func (o *wechatOrder) state(now time.Time) string {
	if s := o.micropayState(); s != "" {
		return s
	}
	switch {
	case o.paid() && o.refunded(now, true) >= o.prepay.total:
		return WechatRefund
	case o.paid():
		return WechatSuccess
	case o.closed():
		return WechatClosed
	}
	return WechatNotPay
}

// wechatBook holds the simulated WeChat Pay's orders, refunds and bill downloads. Every
// access holds Simulator.mu.
type wechatBook struct {
	byOutTradeNo    map[string]*wechatOrder
	byCode          map[string]*wechatOrder
	byTransactionID map[string]*wechatOrder
	dirty           *dirtySet                // the journal's (state.go); nil in memory only
	refunds         map[string]*wechatRefund // by out_refund_no
	refundIDs       map[string]bool
	bills           map[string]*wechatBillFile // by download token

	// userPaying are the barcode orders whose buyer is still confirming, for
	// advanceMicropay (wechat_barcode.go).
	userPaying []*wechatOrder

	refundEnds     map[string]string // EndWechatRefund for refunds not made yet, by out_refund_no
	settling       []*wechatRefund   // refunds with a notify_url whose final state is still to come
	watchingRefund bool              // a watcher is waiting for settling refunds

	// prepayIDs are the prepay_ids of JSAPI, mini program, H5 and App orders, each with
	// its own life (wechat_methods.go).
	prepayIDs map[string]*wechatPrepayID
	// openIDs are the openids the simulator handed out or worked out, by openid: the appid
	// each belongs to; buyers the simulated buyers it has met (wechat_methods.go).
	openIDs map[string]string
	buyers  map[string]bool
	// oauthCodes are the codes of the official account's web OAuth, by code
	// (wechat_oauth.go).
	oauthCodes map[string]*wechatOAuthCode
}

func newWechatBook() wechatBook {
	return wechatBook{
		byOutTradeNo:    map[string]*wechatOrder{},
		byCode:          map[string]*wechatOrder{},
		byTransactionID: map[string]*wechatOrder{},
		refunds:         map[string]*wechatRefund{},
		refundIDs:       map[string]bool{},
		bills:           map[string]*wechatBillFile{},
		refundEnds:      map[string]string{},
		prepayIDs:       map[string]*wechatPrepayID{},
		openIDs:         map[string]string{},
		buyers:          map[string]bool{},
		oauthCodes:      map[string]*wechatOAuthCode{},
	}
}

// ledger lists every order, including unpaid and closed ones: a WeChat order exists at the
// channel from prepay on. miniAppID tells a mini program's JSAPI orders from the official
// account's.
func (b *wechatBook) ledger(now time.Time, miniAppID string) []LedgerEntry {
	entries := make([]LedgerEntry, 0, len(b.byOutTradeNo))
	for _, o := range b.byOutTradeNo {
		entries = append(entries, LedgerEntry{
			Channel:    orderpay.ChannelWechat,
			Method:     o.method(miniAppID),
			OutTradeNo: o.outTradeNo,
			TradeNo:    o.transactionID,
			Status:     o.state(now),
			Amount:     o.prepay.total,
			Refunded:   o.refunded(now, true),
			PaidAt:     o.paidAt,
			Refunds:    o.ledgerRefunds(now),
			seq:        o.seq,
		})
	}
	return entries
}

// method is the way o was paid, by its trade type (and, for JSAPI, its appid).
func (o *wechatOrder) method(miniAppID string) orderpay.PayMethod {
	switch o.prepay.tradeType {
	case wechatTradeJSAPI:
		if o.prepay.appID == miniAppID {
			return orderpay.MethodMini
		}
		return orderpay.MethodJSAPI
	case wechatTradeH5:
		return orderpay.MethodH5
	case wechatTradeApp:
		return orderpay.MethodApp
	case wechatTradeMicropay:
		return orderpay.MethodBarcode
	}
	return orderpay.MethodQR
}

// registerWechat adds the WeChat Pay v3 routes (docs/channels.md §B1).
func (s *Simulator) registerWechat(mux *http.ServeMux) {
	for pattern, ep := range map[string]wechatEndpoint{
		"POST /v3/pay/transactions/native":                              wechatPrepayEndpoint,
		"GET /v3/pay/transactions/out-trade-no/{out_trade_no}":          wechatQueryEndpoint,
		"GET /v3/pay/transactions/id/{transaction_id}":                  wechatQueryByIDEndpoint,
		"POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close":   wechatCloseEndpoint,
		"POST /v3/refund/domestic/refunds":                              wechatRefundEndpoint,
		"GET /v3/refund/domestic/refunds/{out_refund_no}":               wechatRefundQueryEndpoint,
		"GET /v3/bill/tradebill":                                        wechatTradeBillEndpoint,
		"GET /v3/bill/fundflowbill":                                     wechatFundFlowBillEndpoint,
		"GET " + wechatBillDownloadPath:                                 wechatBillDownloadEndpoint,
		"GET /v3/certificates":                                          wechatCertificatesEndpoint,
		"POST /v3/pay/transactions/jsapi":                               wechatJSAPIPrepayEndpoint,
		"POST /v3/pay/transactions/h5":                                  wechatH5PrepayEndpoint,
		"POST /v3/pay/transactions/app":                                 wechatAppPrepayEndpoint,
		"POST /v3/pay/transactions/codepay":                             wechatCodepayEndpoint,
		"POST /v3/pay/transactions/out-trade-no/{out_trade_no}/reverse": wechatReverseEndpoint,
	} {
		mux.HandleFunc(pattern, s.serveWechat(ep))
	}
	mux.HandleFunc("/sim/wechat/certificates", s.serveWechatCertificates)
	s.registerWechatOAuth(mux)
}

// wechatScan plays the buyer's WeChat app on a Native code. WalletPay pays the order in full
// and queues its notification. WalletScan and WalletDecline only mark the code scanned: a
// Native order has no "waiting for the buyer" state (USERPAYING is micropay-only, §B1), so
// it stays NOTPAY, and a declined payment leaves nothing behind either: the buyer can still
// scan again and pay until time_expire.
func (s *Simulator) wechatScan(qrCode, action string) (*PayResult, error) {
	now := s.clock.Now()
	s.mu.Lock()
	o := s.wechat.touch(s.wechat.byCode[qrCode])
	if o == nil {
		s.mu.Unlock()
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "unknown QR code")
	}
	if err := o.payable(now); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	o.scanned = true
	var note *outgoingNotification
	if action == WalletPay {
		note = s.wechatPayOrder(o, now, newWechatOpenID())
	}
	res := wechatPayResult(o, now)
	s.mu.Unlock()

	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, nil
}

// wechatPayOrder pays o in full at now, by the buyer whose openid (for the order's appid)
// is openID, and returns its TRANSACTION.SUCCESS notification to queue once s.mu is let go
// (nil without a notify_url). The caller holds s.mu and has checked o can be paid.
func (s *Simulator) wechatPayOrder(o *wechatOrder, now time.Time, openID string) *outgoingNotification {
	// success_time has whole seconds; keeping the same here makes the ledger agree with
	// what queries and notifications say.
	o.paidAt = now.Truncate(time.Second)
	o.transactionID = s.newWechatTransactionID(now)
	o.openID = openID
	o.notifyID = newWechatNotifyID()
	s.wechat.byTransactionID[o.transactionID] = o
	return s.wechatNotification(o)
}

// wechatPayResult is what the wallet shows of o at now. The caller holds s.mu.
func wechatPayResult(o *wechatOrder, now time.Time) *PayResult {
	return &PayResult{
		Channel:    orderpay.ChannelWechat,
		OutTradeNo: o.outTradeNo,
		TradeNo:    o.transactionID,
		Status:     o.state(now),
		Amount:     o.prepay.total,
	}
}

// newWechatCodeURL returns an unused, unguessable code_url. The caller holds s.mu.
func (s *Simulator) newWechatCodeURL() string {
	for {
		code := wechatQRPrefix + rand.Text()[:12]
		if _, taken := s.wechat.byCode[code]; !taken {
			return code
		}
	}
}

// newWechatTransactionID returns an unused 28-digit transaction_id shaped like WeChat's:
// 4200, six digits, the date in China, ten digits. The caller holds s.mu.
func (s *Simulator) newWechatTransactionID(now time.Time) string {
	for {
		id := "4200" + wechatDigits(6) + now.In(cst).Format("20060102") + wechatDigits(10)
		if _, taken := s.wechat.byTransactionID[id]; !taken {
			return id
		}
	}
}

// newWechatRefundID returns an unused 29-digit refund_id starting with 50, like WeChat's.
// The caller holds s.mu.
func (s *Simulator) newWechatRefundID() string {
	for {
		id := "50" + wechatDigits(27)
		if !s.wechat.refundIDs[id] {
			s.wechat.refundIDs[id] = true
			return id
		}
	}
}

// newWechatOpenID returns a buyer's openid: 28 characters starting with "o".
func newWechatOpenID() string {
	b := make([]byte, 21)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return "o" + base64.RawURLEncoding.EncodeToString(b)[:27]
}

// newWechatNotifyID returns a notification id in the UUID shape WeChat uses.
func newWechatNotifyID() string {
	h := wechatHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newWechatNonce returns n random letters and digits, the alphabet of WeChat's nonces.
func newWechatNonce(n int) string {
	const symbols = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = symbols[int(b[i])%len(symbols)]
	}
	return string(b)
}

// wechatDigits returns n random decimal digits; crypto/rand does not fail on supported
// platforms, so a failure panics.
func wechatDigits(n int) string {
	d, err := randomDigits(n)
	if err != nil {
		panic(err)
	}
	return d
}

func wechatHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// wechatTime renders a time as WeChat Pay v3 does: RFC 3339 in China Standard Time, whole
// seconds, e.g. 2025-03-14T10:00:00+08:00.
func wechatTime(t time.Time) string { return t.In(cst).Format(time.RFC3339) }

// isWechatCode reports whether qrCode is shaped like a Native code_url.
func isWechatCode(qrCode string) bool { return strings.HasPrefix(qrCode, wechatQRPrefix) }

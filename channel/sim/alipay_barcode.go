package sim

import (
	"context"
	"crypto/rand"
	"net/url"
	"regexp"
	"strings"
	"time"

	"orderpay"
)

// Alipay barcode payments (docs/channels.md §A7): alipay.trade.pay with scene bar_code and
// the buyer's payment code. The call is the payment itself: it answers 10000 (paid), 10003
// (the trade is made and waits for the buyer to confirm, WAIT_BUYER_PAY) or a refusal.
// From then on the trade is queried, closed, cancelled, refunded and billed like any other;
// a trade.pay that gives a notify_url is notified when it is paid, one without is not.

const (
	// alipayBarcodeTimeout is how long a barcode trade that names neither time_expire nor
	// timeout_express waits for its buyer before Alipay closes it: the face-to-face
	// default, as for precreate. Alipay's own default for trade.pay is unverified; a till
	// cancels long before.
	alipayBarcodeTimeout = alipayDefaultTimeout
	// alipayCancelWindow is how long after a trade is made alipay.trade.cancel can end
	// it; later it is ACQ.TRADE_CANCEL_TIME_OUT, and a paid trade must be refunded
	// instead. 24 h is a secondary source's word (§D).
	alipayCancelWindow = 24 * time.Hour
	// alipayBarcodeWatchTick is how often (real time) the watcher looks for barcode trades
	// that their buyer paid on the simulated clock, to send their notifications.
	alipayBarcodeWatchTick = 10 * time.Millisecond
)

// alipayStoreIDPattern is the rule the simulator applies to store_id and terminal_id:
// up to 32 letters, digits, _ or -.
var alipayStoreIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`)

// alipayBarcode is a barcode trade's own part: the code it was paid with, the counter, and
// when its buyer confirms.
type alipayBarcode struct {
	authCode   string
	scene      string
	storeID    string
	terminalID string
	behaviour  string
	// payAt is when the buyer's confirmation lands (refresh pays the trade then); zero for
	// a buyer who never confirms by themselves.
	payAt time.Time
	// notified is set once the paid trade's notification is queued (for a trade with a
	// notify_url), whoever saw it paid first.
	notified bool
}

// alipayFundBill is one line of fund_bill_list: how the buyer paid.
type alipayFundBill struct {
	FundChannel string `json:"fund_channel"`
	Amount      string `json:"amount"`
}

// alipayBarcodePay serves alipay.trade.pay for app.
//
// The fields are out_trade_no, total_amount and subject as every order's (checkOrderFields),
// scene (bar_code, or security_code; wave_code and the others are refused), auth_code,
// product_code (FACE_TO_FACE_PAYMENT or none), store_id and terminal_id (optional, up to 32
// letters, digits, _ or -), time_expire or timeout_express (optional: how long a trade
// waits for its buyer, alipayBarcodeTimeout without) and notify_url.
//
// The same out_trade_no again: a cancelled or closed trade is ACQ.TRADE_HAS_CLOSE, a paid
// one ACQ.TRADE_HAS_SUCCESS, a trade of another method, amount, code or app
// ACQ.CONTEXT_INCONSISTENT, and the same payment still waiting answers 10003 again (a pay
// call whose answer was lost, sent again). A new one must bring a live code of the Alipay
// wallet's (takeCode): an unknown, used or expired one is ACQ.PAYMENT_AUTH_CODE_INVALID,
// whose sub_msg says which. Then the buyer's behaviour decides: CodeShort refuses with
// ACQ.BUYER_BALANCE_NOT_ENOUGH and makes no trade (the code is spent; the out_trade_no can
// be paid with another); CodeConfirm answers 10000, paid; the others make the trade
// WAIT_BUYER_PAY and answer 10003, paid the code's After later (password buyers) or never
// by itself (CodeNever), unless its deadline, a close or a cancel comes first.
func (s *Simulator) alipayBarcodePay(app *alipayApp, params url.Values, biz bizContent) alipayReply {
	invalid := func(msg string) alipayReply { return alipayFailure("40004", "ACQ.INVALID_PARAMETER", msg) }
	fields := map[string]string{}
	for _, k := range []string{"out_trade_no", "total_amount", "subject", "scene", "auth_code", "product_code",
		"store_id", "terminal_id", "time_expire", "timeout_express"} {
		v, err := biz.str(k)
		if err != nil {
			return invalid(err.Error())
		}
		fields[k] = v
	}
	outTradeNo, amount, subject, msg := checkOrderFields(fields["out_trade_no"], fields["total_amount"], fields["subject"])
	if msg != "" {
		return invalid(msg)
	}
	switch scene := fields["scene"]; scene {
	case "bar_code", "security_code":
	case "":
		return invalid("scene is required: bar_code for a payment code scanned at a till")
	default:
		return invalid("scene must be bar_code or security_code, not " + scene)
	}
	authCode := fields["auth_code"]
	if authCode == "" {
		return invalid("auth_code is required: the buyer's payment code")
	}
	if pc := fields["product_code"]; pc != "" && pc != "FACE_TO_FACE_PAYMENT" {
		return invalid("product_code must be FACE_TO_FACE_PAYMENT")
	}
	if !alipayStoreIDPattern.MatchString(fields["store_id"]) || !alipayStoreIDPattern.MatchString(fields["terminal_id"]) {
		return invalid("store_id and terminal_id must be at most 32 letters, digits, _ or -")
	}
	notifyURL := params.Get("notify_url")
	if !absoluteHTTPURL(notifyURL) {
		return invalid("notify_url must be an absolute http(s) URL")
	}
	now := s.clock.Now()
	deadline, bad := alipayTradeDeadline(fields, now, alipayBarcodeTimeout)
	if bad != "" {
		return invalid(bad)
	}

	s.mu.Lock()
	reply, note := s.alipayBarcodePayLocked(app, &alipayTrade{
		appID:       app.AppID,
		outTradeNo:  outTradeNo,
		subject:     subject,
		amount:      amount,
		notifyURL:   notifyURL,
		method:      orderpay.MethodBarcode,
		payDeadline: deadline,
		barcode: &alipayBarcode{authCode: authCode, scene: fields["scene"], storeID: fields["store_id"],
			terminalID: fields["terminal_id"]},
	}, now)
	s.mu.Unlock()
	if note != nil {
		s.notifier.enqueue(*note)
	}
	return reply
}

// alipayBarcodePayLocked is alipayBarcodePay's work once the request is valid: req is the
// trade the call would make. The caller holds s.mu and queues the notification returned.
func (s *Simulator) alipayBarcodePayLocked(app *alipayApp, req *alipayTrade, now time.Time) (alipayReply, *outgoingNotification) {
	if t := s.alipay.touch(s.alipay.byOutTradeNo[req.outTradeNo]); t != nil {
		t.refresh(now)
		switch {
		case t.cancelled:
			// A cancel that overtook this payment, or ended an earlier one: nothing can be
			// paid under the number any more.
			return alipayFailure("40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭"), nil
		case t.paid():
			return alipayFailure("40004", "ACQ.TRADE_HAS_SUCCESS", "交易已被支付"), nil
		case t.status == AlipayTradeClosed:
			return alipayFailure("40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭"), nil
		case t.barcode == nil || t.amount != req.amount || t.barcode.authCode != req.barcode.authCode || !t.ofApp(app):
			return alipayFailure("40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改"), nil
		}
		return alipayPayWaiting(t), nil
	}
	if s.alipay.signed[req.outTradeNo] != nil {
		// A pc, wap or app order with this number was opened: one number, one order.
		return alipayFailure("40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改"), nil
	}
	code, refusal := s.takeCode(orderpay.ChannelAlipay, req.barcode.authCode, req.outTradeNo, now)
	switch refusal {
	case codeUnknown:
		return alipayFailure("40004", "ACQ.PAYMENT_AUTH_CODE_INVALID", "支付失败，获取顾客账户信息失败，请顾客刷新付款码后重新收款"), nil
	case codeUsed:
		return alipayFailure("40004", "ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已使用，请顾客刷新付款码后重新收款"), nil
	case codeExpired:
		return alipayFailure("40004", "ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已过期，请顾客刷新付款码后重新收款"), nil
	}
	if code.behaviour == CodeShort {
		// Refused before any trade was made: a query finds none, and the merchant may
		// take the same out_trade_no with another code.
		return alipayFailure("40004", "ACQ.BUYER_BALANCE_NOT_ENOUGH", "买家余额不足"), nil
	}
	t := req
	t.barcode.behaviour = code.behaviour
	s.alipay.byOutTradeNo[t.outTradeNo] = t
	s.alipay.touch(t)
	s.openAlipayTrade(t, s.alipayBuyer(code.buyer), now)
	switch code.behaviour {
	case CodeConfirm:
		note := s.alipayPayBarcodeNow(t, now)
		return alipayPayOK(t), note
	case CodePassword, CodeWrongPassword:
		t.barcode.payAt = now.Add(code.after)
		s.watchAlipayBarcode(t)
	}
	return alipayPayWaiting(t), nil
}

// alipayPayBarcodeNow pays the waiting barcode trade t at now and returns its notification
// (nil without a notify_url). The caller holds s.mu and queues it once it lets go.
func (s *Simulator) alipayPayBarcodeNow(t *alipayTrade, now time.Time) *outgoingNotification {
	t.status = AlipayTradeSuccess
	t.paidAt = now
	t.barcode.payAt = time.Time{}
	return s.alipayBarcodeNotification(t)
}

// alipayBarcodeNotification is the TRADE_SUCCESS notification of the paid barcode trade t,
// once: nil without a notify_url, or if it was queued already. The caller holds s.mu.
func (s *Simulator) alipayBarcodeNotification(t *alipayTrade) *outgoingNotification {
	if t.notifyURL == "" || t.barcode.notified {
		return nil
	}
	t.barcode.notified = true
	t.notifyID = strings.ToLower(rand.Text())
	return s.alipayNotification(t)
}

// alipayPayOK is the 10000 answer of a paid barcode trade.
func alipayPayOK(t *alipayTrade) alipayReply {
	total := orderpay.FormatYuan(t.amount)
	r := alipaySuccess()
	r.TradeNo = t.tradeNo
	r.OutTradeNo = t.outTradeNo
	r.BuyerLogonID = t.buyerLogonID
	r.BuyerUserID = t.buyerUserID
	r.TotalAmount = total
	r.ReceiptAmount = total
	r.BuyerPayAmount = total
	r.InvoiceAmount = total
	r.PointAmount = "0.00"
	r.GmtPayment = t.paidAt.In(cst).Format(alipayTimeLayout)
	r.FundBillList = []alipayFundBill{{FundChannel: "ALIPAYACCOUNT", Amount: total}}
	return r
}

// alipayPayWaiting is the 10003 answer: the trade is made and waits for the buyer.
func alipayPayWaiting(t *alipayTrade) alipayReply {
	r := alipayReply{Code: "10003", Msg: alipayCodeMsg["10003"]}
	r.TradeNo = t.tradeNo
	r.OutTradeNo = t.outTradeNo
	r.BuyerLogonID = t.buyerLogonID
	r.BuyerUserID = t.buyerUserID
	r.TotalAmount = orderpay.FormatYuan(t.amount)
	return r
}

// alipayCodeTrade is the trade code c paid for, or nil. The caller holds s.mu.
func (s *Simulator) alipayCodeTrade(c *payCode) *alipayTrade {
	t := s.alipay.touch(s.alipay.byOutTradeNo[c.outTradeNo])
	if t == nil || t.barcode == nil || t.barcode.authCode != c.code {
		return nil
	}
	return t
}

// alipayConfirmCode is ConfirmCode for an Alipay code: its trade, if it still waits for the
// buyer, is paid now. The caller holds s.mu and queues the notification returned.
func (s *Simulator) alipayConfirmCode(c *payCode, now time.Time) (*PayResult, *outgoingNotification, error) {
	t := s.alipayCodeTrade(c)
	if t == nil {
		return nil, nil, orderpay.Errorf(orderpay.ECONFLICT, "code %s made no trade (%s): there is nothing to confirm", c.code, c.behaviour)
	}
	t.refresh(now)
	if t.status != AlipayWaitBuyerPay {
		return nil, nil, orderpay.Errorf(orderpay.ECONFLICT, "trade %s is %s: it waits for nobody", t.outTradeNo, t.status)
	}
	note := s.alipayPayBarcodeNow(t, now)
	return &PayResult{Channel: orderpay.ChannelAlipay, OutTradeNo: t.outTradeNo, TradeNo: t.tradeNo, Status: t.status, Amount: t.amount}, note, nil
}

// watchAlipayBarcode watches t, a barcode trade whose buyer confirms later, so that its
// notification goes out when the simulated clock gets there even if nobody looks at the
// trade. A trade without a notify_url needs no watching: refresh pays it when looked at.
// The caller holds s.mu.
func (s *Simulator) watchAlipayBarcode(t *alipayTrade) {
	if t.notifyURL == "" {
		return
	}
	s.alipay.barcodeWaiting = append(s.alipay.barcodeWaiting, t)
	if !s.alipay.watchingBarcode {
		s.alipay.watchingBarcode = s.notifier.run(s.watchAlipayBarcodes)
	}
}

// watchAlipayBarcodes queues the notifications of watched barcode trades as their buyers
// pay them, and forgets those that ended otherwise, until none is left or the simulator
// closes.
func (s *Simulator) watchAlipayBarcodes(ctx context.Context) {
	tick := time.NewTicker(alipayBarcodeWatchTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := s.clock.Now()
		var notes []outgoingNotification
		s.mu.Lock()
		still := s.alipay.barcodeWaiting[:0]
		for _, t := range s.alipay.barcodeWaiting {
			s.alipay.touch(t)
			t.refresh(now)
			switch {
			case t.paid():
				if note := s.alipayBarcodeNotification(t); note != nil {
					notes = append(notes, *note)
				}
			case t.status == AlipayWaitBuyerPay:
				still = append(still, t)
			}
		}
		clear(s.alipay.barcodeWaiting[len(still):])
		s.alipay.barcodeWaiting = still
		done := len(still) == 0
		if done {
			s.alipay.watchingBarcode = false
		}
		s.mu.Unlock()
		s.enqueueAll(notes)
		if done {
			return
		}
	}
}

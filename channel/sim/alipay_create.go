package sim

import (
	"net/url"
	"regexp"

	"orderpay"
)

// alipayUserIDPattern is an Alipay user id: 2088 and 12 more digits.
var alipayUserIDPattern = regexp.MustCompile(`^2088[0-9]{12}$`)

// alipayTradeCreate serves alipay.trade.create, the in-app (mini program, JSAPI) prepay
// step (docs/channels.md §A6): the trade exists from this call on, waiting for the buyer
// named by buyer_id (WAIT_BUYER_PAY), and the answer's trade_no is what the page hands
// my.tradePay.
//
// The fields are precreate's (out_trade_no, total_amount, subject, time_expire or
// timeout_express, notify_url) with product_code JSAPI_PAY (or none) and buyer_id, an Alipay
// user id (2088…) that is not the seller's (ACQ.BUYER_SELLER_EQUAL). buyer_open_id is not
// simulated. A repeated call for a trade still waiting, with the same amount and buyer,
// answers the same trade_no; the same out_trade_no with other content is
// ACQ.CONTEXT_INCONSISTENT, a paid one ACQ.TRADE_HAS_SUCCESS, a closed or cancelled one
// ACQ.TRADE_HAS_CLOSE. Call faults act on it as on precreate (MethodPrecreate). The trade is
// app's, the app the call named: any of the merchant's apps may make one (a merchant
// without an in-app app of its own makes them under its main app), and only that app
// queries, closes and refunds it.
func (s *Simulator) alipayTradeCreate(app *alipayApp, params url.Values, biz bizContent) alipayReply {
	invalid := func(msg string) alipayReply { return alipayFailure("40004", "ACQ.INVALID_PARAMETER", msg) }
	fields := map[string]string{}
	for _, k := range []string{"out_trade_no", "total_amount", "subject", "product_code", "time_expire",
		"timeout_express", "buyer_id", "buyer_open_id"} {
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
	if pc := fields["product_code"]; pc != "" && pc != "JSAPI_PAY" {
		return invalid("product_code must be JSAPI_PAY")
	}
	notifyURL := params.Get("notify_url")
	if !absoluteHTTPURL(notifyURL) {
		return invalid("notify_url must be an absolute http(s) URL")
	}
	buyerID := fields["buyer_id"]
	switch {
	case buyerID == "" && fields["buyer_open_id"] != "":
		return invalid("buyer_open_id is not simulated: send buyer_id")
	case buyerID == "":
		return invalid("buyer_id is required")
	case !alipayUserIDPattern.MatchString(buyerID):
		return invalid("buyer_id must be an Alipay user id: 2088 and 12 digits")
	case buyerID == s.keys.SellerID:
		return alipayFailure("40004", "ACQ.BUYER_SELLER_EQUAL", "买卖家不能相同")
	}
	now := s.clock.Now()
	deadline, bad := alipayTradeDeadline(fields, now, alipaySignedDefaultTimeout)
	if bad != "" {
		return invalid(bad)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.alipay.touch(s.alipay.byOutTradeNo[outTradeNo]); t != nil {
		t.refresh(now)
		switch {
		case t.paid():
			return alipayFailure("40004", "ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
		case t.cancelled || t.status == AlipayTradeClosed:
			return alipayFailure("40004", "ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.method != orderpay.MethodInApp || t.amount != amount || t.buyerUserID != buyerID || !t.ofApp(app):
			return alipayFailure("40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
		}
		return alipayCreateOK(t)
	}
	if seen := s.alipay.signed[outTradeNo]; seen != nil {
		// A pc, wap or app order with this number was opened: one number, one order.
		return alipayFailure("40004", "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
	}
	t := &alipayTrade{appID: app.AppID, outTradeNo: outTradeNo, subject: subject, amount: amount, notifyURL: notifyURL,
		method: orderpay.MethodInApp, payDeadline: deadline}
	s.alipay.byOutTradeNo[outTradeNo] = t
	s.alipay.touch(t)
	s.openAlipayTrade(t, buyerID, now)
	return alipayCreateOK(t)
}

func alipayCreateOK(t *alipayTrade) alipayReply {
	r := alipaySuccess()
	r.TradeNo = t.tradeNo
	r.OutTradeNo = t.outTradeNo
	return r
}

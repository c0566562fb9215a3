package sim

import (
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"time"

	"orderpay"
)

// WeChat Pay barcode payments (docs/channels.md §B7): POST /v3/pay/transactions/codepay
// with the buyer's payment code is the payment itself, and POST
// /v3/pay/transactions/out-trade-no/{out_trade_no}/reverse ends one whose result the
// merchant does not know. A barcode order is never notified: only the pay call's answer
// and queries tell.

// The trade type and the states only payment-code orders have (§B1).
const (
	wechatTradeMicropay = "MICROPAY"
	// WechatUserPaying: the buyer is confirming (typing the password).
	WechatUserPaying = "USERPAYING"
	// WechatPayError: the payment failed (the buyer's balance, or a password dialog left
	// open until it closed); nothing was paid.
	WechatPayError = "PAYERROR"
	// WechatRevoked: reversed. Nothing can be paid under the out_trade_no any more; a paid
	// order was refunded in full by the reverse.
	WechatRevoked = "REVOKED"
)

const (
	// wechatReverseWindow: WeChat reverses orders under 7 days old only.
	wechatReverseWindow = 7 * 24 * time.Hour
	// wechatAuthCodeShape is the v2 micropay's words for a code that is not WeChat's.
	wechatAuthCodeShape = "请扫描微信支付付款码(以10/11/12/13/14/15为前缀的18位数字)"
)

// wechatStoreIDPattern is the rule the simulator applies to scene_info.store_info.out_id:
// up to 32 letters, digits, _ or -.
var wechatStoreIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// wechatMicropay is a barcode order's own part: the code it was paid with, the till, and
// how its buyer goes on.
type wechatMicropay struct {
	authCode  string
	behaviour string
	deviceIP  string
	storeID   string
	// payAt is when the buyer's confirmation lands; zero for a buyer who never confirms by
	// themselves. wrongAt is when a CodeWrongPassword buyer types the wrong password.
	payAt   time.Time
	wrongAt time.Time
	// failsAt is when the password dialog closes unpaid (created + WechatUserPayingFor);
	// failedAt when the order ended PAYERROR (zero while it has not).
	failsAt  time.Time
	failedAt time.Time
	// revokedAt is when a reverse ended the order; zero if none did.
	revokedAt time.Time
}

// micropayState is a barcode order's trade_state: the states only micropay has, or "" when
// it is paid (SUCCESS or REFUND, as any order). The caller has brought it up to date
// (advanceMicropay).
func (o *wechatOrder) micropayState() string {
	m := o.micropay
	switch {
	case m == nil:
		return ""
	case !m.revokedAt.IsZero():
		return WechatRevoked
	case o.paid():
		return ""
	case !m.failedAt.IsZero():
		return WechatPayError
	}
	return WechatUserPaying
}

// wechatMicropayDesc is trade_state_desc of a barcode order in a micropay state at now.
func (o *wechatOrder) wechatMicropayDesc(state string, now time.Time) string {
	m := o.micropay
	switch state {
	case WechatUserPaying:
		if !m.wrongAt.IsZero() && !now.Before(m.wrongAt) {
			return "用户密码错误，等待用户重新输入"
		}
		return "用户支付中（需要输入密码）"
	case WechatPayError:
		if m.behaviour == CodeShort {
			return "支付失败：用户余额不足"
		}
		return "支付失败：用户未完成支付"
	case WechatRevoked:
		return "已撤销"
	}
	return wechatStateDesc[state]
}

// wechatCodepayBody is what a codepay body has beyond a prepay's (wechatPrepayBody).
type wechatCodepayBody struct {
	Payer *struct {
		AuthCode *string `json:"auth_code"`
	} `json:"payer"`
	SceneInfo *struct {
		DeviceIP  *string `json:"device_ip"`
		StoreInfo *struct {
			OutID *string `json:"out_id"`
		} `json:"store_info"`
	} `json:"scene_info"`
}

var wechatCodepayEndpoint = wechatEndpoint{
	method:    MethodPay,
	key:       func(_ *Simulator, _ *http.Request, body []byte) string { return bodyField(body, "out_trade_no") },
	run:       (*Simulator).wechatCodepay,
	fabricate: (*Simulator).wechatFabricateCodepay,
}

var wechatReverseEndpoint = wechatEndpoint{
	method:    MethodReverse,
	key:       func(_ *Simulator, r *http.Request, _ []byte) string { return r.PathValue("out_trade_no") },
	run:       (*Simulator).wechatReverse,
	fabricate: (*Simulator).wechatFabricateReverse,
}

// parseWechatCodepay validates a codepay body: a prepay's fields (appid, mchid,
// description, out_trade_no, attach, amount) without notify_url, which a barcode payment
// has none of (it is never notified: refused, so that a merchant waiting for one learns it
// at once), and payer.auth_code, scene_info.device_ip (required, an IP address) and
// scene_info.store_info.out_id (optional). A code that is not shaped as WeChat's (18 digits
// starting 10 to 15) is 400 AUTH_CODE_INVALID, as the v2 micropay answered it.
func (s *Simulator) parseWechatCodepay(body []byte) (wechatPrepay, string, *wechatMicropay, *wechatAnswer) {
	fail := func(a wechatAnswer) (wechatPrepay, string, *wechatMicropay, *wechatAnswer) {
		return wechatPrepay{}, "", nil, &a
	}
	p, outTradeNo, b, refused := s.parseWechatPrepay(body, wechatTradeMicropay)
	if refused != nil {
		return wechatPrepay{}, "", nil, refused
	}
	if b.NotifyURL != nil {
		return fail(wechatParamError("notify_url", "body", "付款码支付不支持notify_url：支付结果请以查询订单为准"))
	}
	var cb wechatCodepayBody
	if a := decodeWechatBody(body, &cb); a != nil {
		return wechatPrepay{}, "", nil, a
	}
	m := &wechatMicropay{}
	if cb.Payer == nil || wechatStr(cb.Payer.AuthCode) == "" {
		return fail(wechatParamError("payer.auth_code", "body", "输入源“/body/payer/auth_code”映射到值字段“付款码”字符串规则校验失败，字段必填"))
	}
	m.authCode = *cb.Payer.AuthCode
	if cb.SceneInfo == nil || net.ParseIP(wechatStr(cb.SceneInfo.DeviceIP)) == nil {
		return fail(wechatParamError("scene_info.device_ip", "body", "输入源“/body/scene_info/device_ip”映射到值字段“商户端设备IP”字符串规则校验失败，须为IPv4或IPv6地址"))
	}
	m.deviceIP = *cb.SceneInfo.DeviceIP
	if si := cb.SceneInfo.StoreInfo; si != nil && si.OutID != nil {
		if !wechatStoreIDPattern.MatchString(*si.OutID) {
			return fail(wechatParamError("scene_info.store_info.out_id", "body", "scene_info.store_info.out_id 须为1至32位字母、数字、_或-"))
		}
		m.storeID = *si.OutID
	}
	if ch, err := orderpay.BarcodeChannel(m.authCode); err != nil || ch != orderpay.ChannelWechat {
		return fail(wechatError(http.StatusBadRequest, "AUTH_CODE_INVALID", wechatAuthCodeShape))
	}
	return p, outTradeNo, m, nil
}

// wechatCodepay serves POST /v3/pay/transactions/codepay.
//
// The same out_trade_no again: an order of another trade type is 403 OUT_TRADE_NO_USED; a
// reversed one 400 ORDERREVERSED, a paid one 400 ORDERPAID, a failed one (PAYERROR) 400
// ORDER_CLOSED; another amount, description, appid or code 400 INVALID_REQUEST 201
// 商户订单号重复; the same payment still USERPAYING answers USERPAYING again (a call whose
// answer was lost, sent again). A new order must bring a live code of the WeChat wallet's
// (takeCode): one it never issued is 400 AUTH_CODE_INVALID 101 付款码无效, a used one 400
// AUTH_CODE_INVALID 101 每个二维码仅限使用一次, an expired one 400 AUTHCODEEXPIRE. Then the
// buyer's behaviour decides: CodeShort makes the order PAYERROR and answers 403 NOTENOUGH;
// CodeConfirm answers 200 with the paid Transaction (trade_type MICROPAY); the others answer
// Config.WechatUserPayingStatus (202 or 200) with trade_state USERPAYING, and the order is
// paid the code's After later (password buyers) unless the dialog closes first, at
// Config.WechatUserPayingFor, when it ends PAYERROR (and CodeNever's always does). Nothing
// is ever notified.
func (s *Simulator) wechatCodepay(_ *http.Request, body []byte) wechatAnswer {
	p, outTradeNo, m, fail := s.parseWechatCodepay(body)
	if fail != nil {
		return *fail
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	if o := s.wechat.touch(s.wechat.byOutTradeNo[outTradeNo]); o != nil {
		switch state := o.micropayState(); {
		case o.micropay == nil:
			return wechatError(http.StatusForbidden, "OUT_TRADE_NO_USED", "商户订单号重复")
		case state == WechatRevoked:
			return wechatError(http.StatusBadRequest, "ORDERREVERSED", "订单已撤销")
		case o.paid():
			return wechatError(http.StatusBadRequest, "ORDERPAID", "订单已支付")
		case state == WechatPayError:
			return wechatError(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
		case !o.prepay.equal(p) || o.micropay.authCode != m.authCode:
			return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "201 商户订单号重复")
		}
		return s.wechatUserPayingAnswer(o, now)
	}
	code, refusal := s.takeCode(orderpay.ChannelWechat, m.authCode, outTradeNo, now)
	switch refusal {
	case codeUnknown:
		return wechatError(http.StatusBadRequest, "AUTH_CODE_INVALID", "101 付款码无效，请重新扫码")
	case codeUsed:
		return wechatError(http.StatusBadRequest, "AUTH_CODE_INVALID", "101 每个二维码仅限使用一次，请刷新再试")
	case codeExpired:
		return wechatError(http.StatusBadRequest, "AUTHCODEEXPIRE", "二维码已过期，请用户在微信上刷新后再试")
	}
	m.behaviour = code.behaviour
	m.failsAt = now.Add(s.cfg.WechatUserPayingFor)
	o := &wechatOrder{
		outTradeNo: outTradeNo,
		seq:        s.nextSeq(),
		prepay:     p,
		createdAt:  now,
		timeExpire: m.failsAt,
		micropay:   m,
	}
	if code.buyer != "" {
		s.meetWechatBuyer(code.buyer)
		o.openID = s.openID(code.buyer, p.appID)
	} else {
		o.openID = newWechatOpenID()
	}
	s.wechat.byOutTradeNo[outTradeNo] = o
	s.wechat.touch(o)
	switch code.behaviour {
	case CodeShort:
		m.failedAt = now
		return wechatError(http.StatusForbidden, "NOTENOUGH", "用户余额不足，请用户换卡支付")
	case CodeConfirm:
		s.wechatPayMicropay(o, now)
		return wechatJSON(http.StatusOK, s.wechatTransaction(o, now))
	case CodePassword, CodeWrongPassword:
		m.payAt = now.Add(code.after)
		if code.behaviour == CodeWrongPassword {
			m.wrongAt = now.Add(code.after / 2)
		}
	}
	s.wechat.userPaying = append(s.wechat.userPaying, o)
	return s.wechatUserPayingAnswer(o, now)
}

// wechatUserPayingAnswer is the codepay answer that the buyer is still confirming: only
// out_trade_no and trade_state USERPAYING (with its desc), under
// Config.WechatUserPayingStatus. The caller holds s.mu.
func (s *Simulator) wechatUserPayingAnswer(o *wechatOrder, now time.Time) wechatAnswer {
	return wechatJSON(s.cfg.WechatUserPayingStatus, struct {
		OutTradeNo     string `json:"out_trade_no"`
		TradeState     string `json:"trade_state"`
		TradeStateDesc string `json:"trade_state_desc"`
	}{o.outTradeNo, WechatUserPaying, o.wechatMicropayDesc(WechatUserPaying, now)})
}

// wechatPayMicropay pays the barcode order o at at: no notification, ever. The caller holds
// s.mu.
func (s *Simulator) wechatPayMicropay(o *wechatOrder, at time.Time) {
	o.paidAt = at.Truncate(time.Second) // success_time has whole seconds
	o.transactionID = s.newWechatTransactionID(at)
	s.wechat.byTransactionID[o.transactionID] = o
	o.micropay.payAt = time.Time{}
}

// advanceMicropay applies what time does to the barcode orders still USERPAYING: a buyer
// who confirms by now pays then, and a password dialog left open past
// Config.WechatUserPayingFor ends the order PAYERROR. It is applied lazily wherever WeChat
// orders are looked at. The caller holds s.mu.
func (s *Simulator) advanceMicropay(now time.Time) {
	still := s.wechat.userPaying[:0]
	for _, o := range s.wechat.userPaying {
		s.wechat.touch(o)
		m := o.micropay
		switch {
		case o.paid() || !m.failedAt.IsZero() || !m.revokedAt.IsZero():
			// Ended meanwhile (ConfirmCode).
		case !m.payAt.IsZero() && !now.Before(m.payAt) && m.payAt.Before(m.failsAt):
			s.wechatPayMicropay(o, m.payAt)
		case !now.Before(m.failsAt):
			m.failedAt = m.failsAt
		default:
			still = append(still, o)
		}
	}
	clear(s.wechat.userPaying[len(still):])
	s.wechat.userPaying = still
}

// wechatFabricateCodepay is the success a forger sends for a codepay that never reached
// WeChat: a paid Transaction under a transaction_id WeChat never issued.
func (s *Simulator) wechatFabricateCodepay(_ *http.Request, body []byte) wechatAnswer {
	p, outTradeNo, _, fail := s.parseWechatCodepay(body)
	if fail != nil {
		return wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
	}
	now := s.clock.Now()
	total := p.total
	return wechatJSON(http.StatusOK, wechatTransaction{
		AppID: p.appID, MchID: s.keys.Wechat.MchID, OutTradeNo: outTradeNo,
		TransactionID: "4200" + wechatDigits(6) + now.In(cst).Format("20060102") + wechatDigits(10),
		TradeType:     wechatTradeMicropay, TradeState: WechatSuccess, TradeStateDesc: wechatStateDesc[WechatSuccess],
		BankType: "OTHERS", Attach: p.attach, SuccessTime: wechatTime(now), Payer: &wechatPayer{OpenID: newWechatOpenID()},
		Amount: wechatTransactionAmt{Total: total, PayerTotal: &total, Currency: "CNY", PayerCurrency: "CNY"},
	})
}

// wechatReverseBody is the JSON of POST …/out-trade-no/{out_trade_no}/reverse.
type wechatReverseBody struct {
	AppID *string `json:"appid"`
	MchID *string `json:"mchid"`
}

// wechatReversed is a reverse's 200 answer.
type wechatReversed struct {
	AppID      string `json:"appid"`
	MchID      string `json:"mchid"`
	OutTradeNo string `json:"out_trade_no"`
}

// wechatReverse serves POST /v3/pay/transactions/out-trade-no/{out_trade_no}/reverse: it
// ends a barcode order whatever its state, so that nothing can be paid under its number and
// nothing paid is kept. It answers 200 {appid, mchid, out_trade_no}, and again for an order
// reversed already (a reverse whose answer was lost can be sent again); the order is REVOKED
// and, if it was paid, refunded in full by a refund numbered with its out_trade_no, which
// settles after Config.RefundDelay (refund faults do not act on it) and is in the ledger and
// the bill as any refund.
//
// Refused: an unknown order 404 ORDER_NOT_EXIST; an order of another trade type 400
// INVALID_REQUEST (close it instead); one 7 days old or more 400 REVERSE_EXPIRE; sooner than
// orderpay.WechatReverseAfter (15 s) after the order 400 INVALID_REQUEST 订单创建15秒内不能撤销
// (send it again later); while the buyer is paying (USERPAYING) 403 USERPAYING
// 正在支付中不能发起撤销 (send it again later: once the buyer pays, or the dialog closes and
// the order is PAYERROR, it is accepted); a paid order with refunds 403 TRADE_ERROR.
func (s *Simulator) wechatReverse(r *http.Request, body []byte) wechatAnswer {
	var b wechatReverseBody
	if a := decodeWechatBody(body, &b); a != nil {
		return *a
	}
	if a := s.checkWechatMchID(deref(b.MchID), "body"); a != nil {
		return *a
	}
	switch {
	case b.AppID == nil || *b.AppID == "":
		return wechatParamError("appid", "body", "appid 为必填参数")
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	o := s.wechat.touch(s.wechat.byOutTradeNo[r.PathValue("out_trade_no")])
	if o == nil {
		return wechatError(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	state := o.micropayState()
	switch {
	case *b.AppID != o.prepay.appID:
		return wechatParamError("appid", "body", "appid与下单时的appid不一致")
	case o.micropay == nil:
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "非付款码订单不能撤销，请调用关闭订单")
	case state == WechatRevoked:
		return wechatJSON(http.StatusOK, wechatReversed{o.prepay.appID, s.keys.Wechat.MchID, o.outTradeNo})
	case !now.Before(o.createdAt.Add(wechatReverseWindow)):
		return wechatError(http.StatusBadRequest, "REVERSE_EXPIRE", "订单已超过7天，不能撤销，请使用退款")
	case now.Before(o.createdAt.Add(orderpay.WechatReverseAfter)):
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "订单创建15秒内不能撤销，请稍后再试")
	case state == WechatUserPaying:
		return wechatError(http.StatusForbidden, "USERPAYING", "用户正在支付中，正在支付中不能发起撤销，请稍后再试")
	case o.paid() && len(o.refunds) > 0:
		return wechatError(http.StatusForbidden, "TRADE_ERROR", "订单已发生退款，不能撤销，请使用退款")
	}
	o.micropay.revokedAt = now
	if o.paid() {
		s.wechatReverseRefund(o, now)
	}
	return wechatJSON(http.StatusOK, wechatReversed{o.prepay.appID, s.keys.Wechat.MchID, o.outTradeNo})
}

// wechatReverseRefund records the full refund a reverse makes of the paid order o, numbered
// with its out_trade_no (as Alipay numbers a cancel's refund), settling after
// Config.RefundDelay, without a notification. The caller holds s.mu.
func (s *Simulator) wechatReverseRefund(o *wechatOrder, now time.Time) {
	r := &wechatRefund{
		outRefundNo: o.outTradeNo,
		refundID:    s.newWechatRefundID(),
		order:       o,
		amount:      o.prepay.total,
		reason:      "撤销订单",
		createdAt:   now,
		settlesAt:   now.Add(s.cfg.RefundDelay),
		notifyID:    newWechatNotifyID(),
	}
	o.refunds = append(o.refunds, r)
	if _, taken := s.wechat.refunds[r.outRefundNo]; !taken {
		// Queryable under its number, unless the merchant used that number for a refund
		// of another order already.
		s.wechat.refunds[r.outRefundNo] = r
	}
}

// wechatFabricateReverse is the success a forger sends for a reverse that never reached
// WeChat.
func (s *Simulator) wechatFabricateReverse(r *http.Request, body []byte) wechatAnswer {
	var b wechatReverseBody
	_ = json.Unmarshal(body, &b)
	return wechatJSON(http.StatusOK, wechatReversed{wechatStr(b.AppID), s.keys.Wechat.MchID, r.PathValue("out_trade_no")})
}

// wechatCodeOrder is the barcode order code c was used for, or nil. The caller holds s.mu.
func (s *Simulator) wechatCodeOrder(c *payCode) *wechatOrder {
	o := s.wechat.touch(s.wechat.byOutTradeNo[c.outTradeNo])
	if o == nil || o.micropay == nil || o.micropay.authCode != c.code {
		return nil
	}
	return o
}

// wechatConfirmCode is ConfirmCode for a WeChat code: its order, if still USERPAYING, is
// paid now. The caller holds s.mu.
func (s *Simulator) wechatConfirmCode(c *payCode, now time.Time) (*PayResult, error) {
	s.advanceMicropay(now)
	o := s.wechatCodeOrder(c)
	if o == nil {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "code %s made no order: there is nothing to confirm", c.code)
	}
	if state := o.state(now); state != WechatUserPaying {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s: it waits for nobody", o.outTradeNo, state)
	}
	s.wechatPayMicropay(o, now)
	return wechatPayResult(o, now), nil
}

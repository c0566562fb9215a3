package sim

import (
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"orderpay"
)

// wechatOutTradeNoPattern is WeChat's rule for out_trade_no: 6 to 32 letters, digits or
// _-|* (§B1).
var wechatOutTradeNoPattern = regexp.MustCompile(`^[A-Za-z0-9_\-|*]{6,32}$`)

// WeChat Pay trade types: what kind of prepay made an order (trade_type in queries and
// notifications, docs/channels.md §F2). A mini program pays through the JSAPI endpoint, with
// its own appid, and its orders are JSAPI too.
const (
	wechatTradeNative = "NATIVE"
	wechatTradeJSAPI  = "JSAPI"
	wechatTradeH5     = "MWEB"
	wechatTradeApp    = "APP"
)

// wechatPrepay is a validated prepay request: everything that must be equal for a repeated
// prepay to be "the same order". The H5 buyer's address (scene_info) is not part of it: a
// buyer who comes back from another network asks again for the same order.
type wechatPrepay struct {
	tradeType   string
	openID      string // payer.openid of a JSAPI order
	appID       string
	description string
	attach      string
	notifyURL   string
	total       int64 // fen
	currency    string
	timeExpire  time.Time // as requested; zero if absent
}

func (p wechatPrepay) equal(q wechatPrepay) bool {
	return p.tradeType == q.tradeType && p.openID == q.openID && p.appID == q.appID && p.description == q.description && p.attach == q.attach &&
		p.notifyURL == q.notifyURL && p.total == q.total && p.currency == q.currency &&
		p.timeExpire.Equal(q.timeExpire)
}

// wechatPrepayBody is the JSON of a prepay (POST /v3/pay/transactions/native, jsapi, h5 or
// app). Pointers tell absent fields from empty ones; fields the simulator does not look at
// (detail, settle_info, scene_info of the other trade types…) are accepted and ignored.
type wechatPrepayBody struct {
	AppID       *string `json:"appid"`
	MchID       *string `json:"mchid"`
	Description *string `json:"description"`
	OutTradeNo  *string `json:"out_trade_no"`
	TimeExpire  *string `json:"time_expire"`
	Attach      *string `json:"attach"`
	NotifyURL   *string `json:"notify_url"`
	Amount      *struct {
		Total    *int64  `json:"total"`
		Currency *string `json:"currency"`
	} `json:"amount"`
	Payer *struct {
		OpenID *string `json:"openid"`
	} `json:"payer"`
	SceneInfo *struct {
		PayerClientIP *string `json:"payer_client_ip"`
		H5Info        *struct {
			Type *string `json:"type"`
		} `json:"h5_info"`
	} `json:"scene_info"`
}

func wechatStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

var wechatPrepayEndpoint = wechatEndpoint{
	method:    MethodPrecreate,
	key:       func(_ *Simulator, _ *http.Request, body []byte) string { return bodyField(body, "out_trade_no") },
	run:       (*Simulator).wechatPrepay,
	fabricate: (*Simulator).wechatFabricatePrepay,
}

// parseWechatPrepay validates a prepay body of tradeType (§B1, §F2) and returns the
// request, its out_trade_no and the body as read, or the 400 answer.
func (s *Simulator) parseWechatPrepay(body []byte, tradeType string) (wechatPrepay, string, *wechatPrepayBody, *wechatAnswer) {
	p, no, b, a := s.parseWechatPrepayBody(body, tradeType)
	p.tradeType = tradeType
	return p, no, b, a
}

func (s *Simulator) parseWechatPrepayBody(body []byte, tradeType string) (wechatPrepay, string, *wechatPrepayBody, *wechatAnswer) {
	fail := func(field, msg string) (wechatPrepay, string, *wechatPrepayBody, *wechatAnswer) {
		a := wechatParamError(field, "body", msg)
		return wechatPrepay{}, "", nil, &a
	}
	var b wechatPrepayBody
	if a := decodeWechatBody(body, &b); a != nil {
		return wechatPrepay{}, "", nil, a
	}
	keys := &s.keys.Wechat
	switch {
	case b.AppID == nil || *b.AppID == "":
		return fail("appid", "输入源“/body/appid”映射到值字段“公众号ID”字符串规则校验失败，字段必填")
	case b.MchID == nil || *b.MchID == "":
		return fail("mchid", "输入源“/body/mchid”映射到值字段“直连商户号”字符串规则校验失败，字段必填")
	case *b.MchID != keys.MchID:
		return fail("mchid", "mchid与请求头中的商户号不一致")
	case !s.wechatAppBound(tradeType, *b.AppID):
		a := wechatError(http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配")
		return wechatPrepay{}, "", nil, &a
	case b.Description == nil || *b.Description == "" || utf8.RuneCountInString(*b.Description) > 127:
		return fail("description", "description 必填，且不超过127个字符")
	case b.OutTradeNo == nil || !wechatOutTradeNoPattern.MatchString(*b.OutTradeNo):
		return fail("out_trade_no", "out_trade_no 须为6至32位数字、大小写字母或_-|*")
	case b.Attach != nil && utf8.RuneCountInString(*b.Attach) > 128:
		return fail("attach", "attach 不超过128个字符")
	case b.Amount == nil || b.Amount.Total == nil || *b.Amount.Total <= 0 || *b.Amount.Total > orderpay.MaxChannelAmount:
		return fail("amount.total", "amount.total 须为正整数（分）")
	case b.Amount.Currency != nil && *b.Amount.Currency != "CNY":
		return fail("amount.currency", "amount.currency 仅支持CNY")
	}
	// notify_url is required by WeChat Pay. The simulator also takes an order without one
	// and sends it no notification, as its Alipay side does, so that payments can be tested
	// without a receiver.
	if msg := checkWechatNotifyURL(wechatStr(b.NotifyURL)); msg != "" {
		return fail("notify_url", msg)
	}
	p := wechatPrepay{
		appID:       *b.AppID,
		description: *b.Description,
		attach:      wechatStr(b.Attach),
		notifyURL:   wechatStr(b.NotifyURL),
		total:       *b.Amount.Total,
		currency:    "CNY",
	}
	if te := wechatStr(b.TimeExpire); te != "" {
		t, err := time.Parse(time.RFC3339, te)
		if err != nil {
			return fail("time_expire", "time_expire 须为RFC 3339格式，如2018-06-08T10:34:56+08:00")
		}
		p.timeExpire = t
	}
	return p, *b.OutTradeNo, &b, nil
}

// wechatAppBound reports whether appid is an app of the merchant's that may place orders
// of tradeType: the main app for Native and H5, the official account or the mini program
// for JSAPI, the mobile app for App. Any other is not bound to the merchant number for it.
func (s *Simulator) wechatAppBound(tradeType, appid string) bool {
	k := &s.keys.Wechat
	switch tradeType {
	case wechatTradeJSAPI:
		return appid == k.JSAPIAppID || appid == k.MiniAppID
	case wechatTradeApp:
		return appid == k.AppAppID
	}
	return appid == k.AppID
}

// askedAgain is WeChat's answer to a prepay of an order that exists, whatever its trade
// type, or nil when it may be asked again (the same parameters, before time_expire): a paid
// order answers 400 ORDERPAID (v2's code; what v3 answers is undocumented), a closed one 400
// ORDER_CLOSED, different parameters 403 OUT_TRADE_NO_USED for Native and 400
// INVALID_REQUEST 201 商户订单号重复 for the other trade types (docs/channels.md), and an
// order past its time_expire 403 OUT_TRADE_NO_USED: it needs a new out_trade_no (doc
// 4012525171).
func (o *wechatOrder) askedAgain(p wechatPrepay, now time.Time) *wechatAnswer {
	var a wechatAnswer
	switch {
	case o.paid():
		a = wechatError(http.StatusBadRequest, "ORDERPAID", "该订单已支付")
	case o.closed():
		a = wechatError(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
	case !o.prepay.equal(p) && p.tradeType == wechatTradeNative:
		a = wechatError(http.StatusForbidden, "OUT_TRADE_NO_USED", "商户订单号重复")
	case !o.prepay.equal(p):
		a = wechatError(http.StatusBadRequest, "INVALID_REQUEST", "201 商户订单号重复")
	case !now.Before(o.timeExpire):
		a = wechatError(http.StatusForbidden, "OUT_TRADE_NO_USED", "订单已过期，请使用新的商户订单号")
	default:
		return nil
	}
	return &a
}

// payable is nil if the buyer can still pay o at now, and the wallet's refusal otherwise.
func (o *wechatOrder) payable(now time.Time) error {
	switch {
	case o.paid():
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s is already paid", o.outTradeNo)
	case o.closed():
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s is closed", o.outTradeNo)
	case !now.Before(o.timeExpire):
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s expired at its time_expire", o.outTradeNo)
	}
	return nil
}

// wechatPrepay serves POST /v3/pay/transactions/native. The order exists from this call on.
//
// A repeat of the same out_trade_no with the same parameters before time_expire returns
// the same code_url (§B1); anything else is refused (askedAgain).
func (s *Simulator) wechatPrepay(_ *http.Request, body []byte) wechatAnswer {
	p, outTradeNo, _, fail := s.parseWechatPrepay(body, wechatTradeNative)
	if fail != nil {
		return *fail
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.wechat.touch(s.wechat.byOutTradeNo[outTradeNo]); o != nil {
		if refused := o.askedAgain(p, now); refused != nil {
			return *refused
		}
		return wechatCodeURL(o.codeURL)
	}

	expire := now.Add(wechatDefaultExpire)
	if !p.timeExpire.IsZero() {
		expire = p.timeExpire
	}
	// time_expire is the last moment the buyer can pay; under order time + 1 min it is
	// raised to that (§B1), so a code is always payable for at least a minute.
	if floor := now.Add(wechatMinExpire); expire.Before(floor) {
		expire = floor
	}
	o := &wechatOrder{
		outTradeNo: outTradeNo,
		seq:        s.nextSeq(),
		prepay:     p,
		createdAt:  now,
		timeExpire: expire,
		codeURL:    s.newWechatCodeURL(),
	}
	s.wechat.byOutTradeNo[outTradeNo] = o
	s.wechat.touch(o)
	s.wechat.byCode[o.codeURL] = o
	s.wechat.touch(o)
	return wechatCodeURL(o.codeURL)
}

// checkWechatNotifyURL applies WeChat's rules for a prepay's or a refund's notify_url and
// returns why url breaks them, or "" ("" itself is taken: no notification). It must be an
// absolute URL without query string, and HTTPS: WeChat calls back only HTTPS addresses
// (§B1; the refund notification doc: "必须为https协议"). Plain http is accepted for a
// loopback host only, because the simulator runs beside the merchant it calls.
func checkWechatNotifyURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "notify_url 须为不带参数的绝对地址"
	}
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		return "notify_url 必须为https地址：微信支付不回调http地址（模拟器只对本机回环地址接受http）"
	}
	return ""
}

// isLoopbackHost reports whether host names this machine: localhost or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func wechatCodeURL(code string) wechatAnswer {
	return wechatJSON(http.StatusOK, struct {
		CodeURL string `json:"code_url"`
	}{code})
}

// wechatFabricatePrepay is the success a forger sends for a prepay that never reached
// WeChat: a code_url no order stands behind.
func (s *Simulator) wechatFabricatePrepay(*http.Request, []byte) wechatAnswer {
	return wechatCodeURL(wechatQRPrefix + newWechatNonce(12))
}

var wechatQueryEndpoint = wechatEndpoint{
	method:   MethodQuery,
	key:      func(_ *Simulator, r *http.Request, _ []byte) string { return r.PathValue("out_trade_no") },
	run:      (*Simulator).wechatQuery,
	readOnly: true,
}

var wechatQueryByIDEndpoint = wechatEndpoint{
	method:   MethodQuery,
	key:      func(_ *Simulator, r *http.Request, _ []byte) string { return r.PathValue("transaction_id") },
	run:      (*Simulator).wechatQuery,
	readOnly: true,
}

// wechatQuery serves GET …/out-trade-no/{out_trade_no}?mchid= and GET …/id/{transaction_id}
// ?mchid=: the Transaction, or 404 ORDER_NOT_EXIST. The transaction id is only known once
// the order is paid.
func (s *Simulator) wechatQuery(r *http.Request, _ []byte) wechatAnswer {
	if a := s.checkWechatMchID(r.URL.Query().Get("mchid"), "query"); a != nil {
		return *a
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	var o *wechatOrder
	if id := r.PathValue("transaction_id"); id != "" {
		o = s.wechat.touch(s.wechat.byTransactionID[id])
	} else {
		o = s.wechat.touch(s.wechat.byOutTradeNo[r.PathValue("out_trade_no")])
	}
	if o == nil {
		return wechatError(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	return wechatJSON(http.StatusOK, s.wechatTransaction(o, now))
}

// wechatTransaction is the Transaction object of queries and notifications (§B1, [WG]
// payments/models.go). Payment fields appear once the order is paid.
type wechatTransaction struct {
	AppID          string               `json:"appid"`
	MchID          string               `json:"mchid"`
	OutTradeNo     string               `json:"out_trade_no"`
	TransactionID  string               `json:"transaction_id,omitempty"`
	TradeType      string               `json:"trade_type,omitempty"`
	TradeState     string               `json:"trade_state"`
	TradeStateDesc string               `json:"trade_state_desc"`
	BankType       string               `json:"bank_type,omitempty"`
	Attach         string               `json:"attach"`
	SuccessTime    string               `json:"success_time,omitempty"`
	Payer          *wechatPayer         `json:"payer,omitempty"`
	Amount         wechatTransactionAmt `json:"amount"`
}

type wechatPayer struct {
	OpenID string `json:"openid"`
}

type wechatTransactionAmt struct {
	Total         int64  `json:"total"`
	PayerTotal    *int64 `json:"payer_total,omitempty"`
	Currency      string `json:"currency"`
	PayerCurrency string `json:"payer_currency"`
}

// wechatTransaction renders o at now. The caller holds s.mu.
func (s *Simulator) wechatTransaction(o *wechatOrder, now time.Time) wechatTransaction {
	state := o.state(now)
	t := wechatTransaction{
		AppID:          o.prepay.appID,
		MchID:          s.keys.Wechat.MchID,
		OutTradeNo:     o.outTradeNo,
		TradeState:     state,
		TradeStateDesc: wechatStateDesc[state],
		Attach:         o.prepay.attach,
		Amount: wechatTransactionAmt{
			Total:         o.prepay.total,
			Currency:      o.prepay.currency,
			PayerCurrency: o.prepay.currency,
		},
	}
	if o.micropay != nil {
		// A barcode order says its trade type from the start, and its own states' words.
		t.TradeType = wechatTradeMicropay
		t.TradeStateDesc = o.wechatMicropayDesc(state, now)
	}
	if o.paid() {
		payerTotal := o.prepay.total
		t.TransactionID = o.transactionID
		t.TradeType = o.prepay.tradeType
		t.BankType = "OTHERS"
		t.SuccessTime = wechatTime(o.paidAt)
		t.Payer = &wechatPayer{OpenID: o.openID}
		t.Amount.PayerTotal = &payerTotal
	}
	return t
}

// wechatCloseBody is the JSON of POST …/{out_trade_no}/close.
type wechatCloseBody struct {
	MchID *string `json:"mchid"`
}

var wechatCloseEndpoint = wechatEndpoint{
	method:    MethodClose,
	key:       func(_ *Simulator, r *http.Request, _ []byte) string { return r.PathValue("out_trade_no") },
	run:       (*Simulator).wechatClose,
	fabricate: func(*Simulator, *http.Request, []byte) wechatAnswer { return wechatNoContent() },
}

// wechatClose serves POST …/out-trade-no/{out_trade_no}/close: 204 for an unpaid order,
// which is closed from then on (its code cannot be paid), and 204 again for a closed one.
// A paid order stays paid and the answer is Config.WechatClosePaid: 400 ORDERPAID, or 204.
// A barcode order is 400 INVALID_REQUEST: it is reversed, not closed.
// WeChat asks merchants to wait 5 minutes after ordering before closing (§B5); that is
// advice, not enforced here.
func (s *Simulator) wechatClose(r *http.Request, body []byte) wechatAnswer {
	var b wechatCloseBody
	if a := decodeWechatBody(body, &b); a != nil {
		return *a
	}
	if a := s.checkWechatMchID(deref(b.MchID), "body"); a != nil {
		return *a
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	o := s.wechat.touch(s.wechat.byOutTradeNo[r.PathValue("out_trade_no")])
	switch {
	case o == nil:
		return wechatError(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	case o.micropay != nil:
		// A barcode order is ended by a reverse, which also refunds a payment the merchant
		// did not know of. Whether the real close refuses it is unverified; refusing is the
		// harsher choice, and a merchant that reverses works either way.
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "付款码订单不能关闭，请调用撤销订单")
	case o.paid():
		if s.cfg.WechatClosePaid == WechatClosePaidNoContent {
			return wechatNoContent()
		}
		return wechatError(http.StatusBadRequest, "ORDERPAID", "订单已支付")
	case !o.closed():
		o.closedAt = now
	}
	return wechatNoContent()
}

// checkWechatMchID is WeChat Pay's refusal of a call's mchid (in the query or the body,
// where): none, or another merchant's than the one the call is signed as. Nil if it is ours.
func (s *Simulator) checkWechatMchID(mchID, where string) *wechatAnswer {
	var a wechatAnswer
	switch {
	case mchID == "":
		a = wechatParamError("mchid", where, "mchid 为必填参数")
	case mchID != s.keys.Wechat.MchID:
		a = wechatParamError("mchid", where, "mchid与请求头中的商户号不一致")
	default:
		return nil
	}
	return &a
}

// deref is *p, or "" for nil: a body's optional string field.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

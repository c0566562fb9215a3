package sim

import (
	"context"
	"crypto/rand"
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"orderpay"
)

// Alipay's pay methods beyond the QR code (docs/channels.md §A6). The merchant signs a pc
// (alipay.trade.page.pay), wap (alipay.trade.wap.pay) or app (alipay.trade.app.pay) order
// itself and hands it to the buyer's device: no call reaches Alipay, so the simulator first
// hears of such an order when the buyer's browser opens the cashier (the gateway, GET or
// POST) or the wallet is handed it (POST /sim/pay), and the trade comes into being only when
// the buyer pays. An inapp order is a trade from alipay.trade.create on (alipay_create.go),
// which the buyer named in it pays with its trade_no (my.tradePay). Once paid, every trade is
// a paid trade like a precreated one: the same notification, query, close, refund and bill.

// The locally signed methods' API names.
const (
	alipayPagePay = "alipay.trade.page.pay"
	alipayWapPay  = "alipay.trade.wap.pay"
	alipayAppPay  = "alipay.trade.app.pay"
)

const (
	// alipayCashierPath is where the cashier page's buttons post, followed by its token.
	alipayCashierPath = "/sim/alipay/cashier/"
	// alipayMinuteLayout is wap.pay's time_expire to the minute, as smartwalle documents it
	// (yyyy-MM-dd HH:mm); the simulator also takes it to the second.
	alipayMinuteLayout = "2006-01-02 15:04"
	// alipaySignedDefaultTimeout bounds a pc, wap, app or inapp order that gives neither
	// time_expire nor timeout_express: the longest timeout_express allows (15d). Alipay's
	// own default for these products is unverified; orderpay always sends time_expire.
	alipaySignedDefaultTimeout = alipayMaxTimeout
)

// alipaySignedSpec is what a locally signed method requires of its order.
type alipaySignedSpec struct {
	method orderpay.PayMethod
	// productCode is the method's product; required says whether the order must name it
	// (page.pay and wap.pay document it as required; app.pay defaults to it).
	productCode string
	required    bool
	// minutes: time_expire may be given to the minute (wap.pay) as well as to the second.
	minutes bool
}

// alipaySignedMethods are the locally signed methods, by API name.
var alipaySignedMethods = map[string]alipaySignedSpec{
	alipayPagePay: {method: orderpay.MethodPC, productCode: "FAST_INSTANT_TRADE_PAY", required: true},
	alipayWapPay:  {method: orderpay.MethodWAP, productCode: "QUICK_WAP_WAY", required: true, minutes: true},
	alipayAppPay:  {method: orderpay.MethodApp, productCode: "QUICK_MSECURITY_PAY"},
}

// alipayCashierMethods are the methods the gateway answers with the cashier page rather than
// JSON: the buyer's browser opens them.
var alipayCashierMethods = map[string]orderpay.PayMethod{
	alipayPagePay: orderpay.MethodPC,
	alipayWapPay:  orderpay.MethodWAP,
}

// alipaySignedOrder is a verified pc, wap or app order, as the merchant signed it.
type alipaySignedOrder struct {
	// appID is the app the order was signed as: its trade is that app's.
	appID      string
	method     orderpay.PayMethod
	api        string // alipay.trade.page.pay, alipay.trade.wap.pay or alipay.trade.app.pay
	outTradeNo string
	subject    string
	amount     int64 // fen
	notifyURL  string
	returnURL  string // pc and wap: where the cashier sends the buyer after paying
	quitURL    string // wap: where the cashier sends a buyer who gives up
	// timeExpire is the order's time_expire; zero when it gives timeout_express (timeout)
	// or neither.
	timeExpire time.Time
	timeout    string
}

// deadline is when the order stops being payable, the order first seen by Alipay at first:
// time_expire, or timeout_express counted from first (the relative timeout runs from when
// the order reaches Alipay, and a locally signed order reaches it only when the buyer opens
// it), or the default.
func (o *alipaySignedOrder) deadline(first time.Time) time.Time {
	switch {
	case !o.timeExpire.IsZero():
		return o.timeExpire
	case o.timeout != "":
		if d, err := parseAlipayTimeout(o.timeout, first); err == nil {
			return d
		}
	}
	return first.Add(alipaySignedDefaultTimeout)
}

// alipaySeenOrder is a signed order Alipay has seen, under its out_trade_no: the latest
// version, and when the first one was seen (timeout_express counts from then).
type alipaySeenOrder struct {
	order     *alipaySignedOrder
	firstSeen time.Time
}

// alipayRefusal is the simulated Alipay refusing what the buyer's device opened (the
// cashier) or handed the wallet, in Alipay's words: a sub_code and its message. code is the
// orderpay error it is to the wallet's caller: EINVALID for an order that is not genuine or
// not well formed, ECONFLICT for a trade that can no longer be paid, ENOTFOUND for one that
// does not exist.
type alipayRefusal struct {
	code    string
	subCode string
	subMsg  string
}

func (r *alipayRefusal) err() error { return orderpay.Errorf(r.code, "%s %s", r.subCode, r.subMsg) }

func refuse(code, subCode, subMsg string) *alipayRefusal {
	return &alipayRefusal{code: code, subCode: subCode, subMsg: subMsg}
}

// refusalOf is a gateway refusal of a signed order's envelope (signature, app id, …).
func refusalOf(r *alipayReply) *alipayRefusal {
	return refuse(orderpay.EINVALID, r.SubCode, r.SubMsg)
}

// verifySignedOrder checks a pc, wap or app order as Alipay does when the buyer's device
// opens it: api is the method it must be, then the envelope as for any call
// (checkAlipayEnvelope: app id, certificate SNs, signature over every parameter, common
// parameters), then the order itself (parseSignedOrder). An order altered anywhere after
// the merchant signed it fails here.
func (s *Simulator) verifySignedOrder(params url.Values, api string) (*alipaySignedOrder, *alipayRefusal) {
	method := params.Get("method")
	spec, ok := alipaySignedMethods[method]
	if !ok || method != api {
		return nil, refuse(orderpay.EINVALID, "isv.invalid-method", "不存在的方法名: the order's method is "+method+", not "+api)
	}
	app, biz, fail := s.checkAlipayEnvelope(params)
	if fail != nil {
		return nil, refusalOf(fail)
	}
	o, refusal := parseSignedOrder(spec, method, params, biz, s.clock.Now())
	if o != nil {
		o.appID = app.AppID
	}
	return o, refusal
}

// parseSignedOrder reads and checks a signed order's fields (docs/channels.md §A3, §A6):
// out_trade_no, total_amount and subject as for precreate, the method's product_code,
// time_expire (to the second; wap.pay also to the minute) or timeout_express (1m–15d),
// and notify_url, return_url and quit_url as absolute http(s) URLs. A failure is
// ACQ.INVALID_PARAMETER.
func parseSignedOrder(spec alipaySignedSpec, api string, params url.Values, biz bizContent, now time.Time) (*alipaySignedOrder, *alipayRefusal) {
	invalid := func(msg string) (*alipaySignedOrder, *alipayRefusal) {
		return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: "+msg)
	}
	fields := map[string]string{}
	for _, k := range []string{"out_trade_no", "total_amount", "subject", "product_code", "time_expire", "timeout_express", "quit_url"} {
		v, err := biz.str(k)
		if err != nil {
			return invalid(err.Error())
		}
		fields[k] = v
	}
	o := &alipaySignedOrder{method: spec.method, api: api, notifyURL: params.Get("notify_url"), timeout: fields["timeout_express"]}
	var msg string
	if o.outTradeNo, o.amount, o.subject, msg = checkOrderFields(fields["out_trade_no"], fields["total_amount"], fields["subject"]); msg != "" {
		return invalid(msg)
	}
	switch pc := fields["product_code"]; {
	case pc == "" && spec.required:
		return invalid("product_code is required: " + spec.productCode)
	case pc != "" && pc != spec.productCode:
		return invalid("product_code must be " + spec.productCode)
	}
	if spec.method == orderpay.MethodPC || spec.method == orderpay.MethodWAP {
		o.returnURL = params.Get("return_url")
	}
	if spec.method == orderpay.MethodWAP {
		o.quitURL = fields["quit_url"]
	}
	for name, u := range map[string]string{"notify_url": o.notifyURL, "return_url": o.returnURL, "quit_url": o.quitURL} {
		if !absoluteHTTPURL(u) {
			return invalid(name + " must be an absolute http(s) URL")
		}
	}
	if te := fields["time_expire"]; te != "" {
		d, err := time.ParseInLocation(alipayTimeLayout, te, cst)
		if err != nil && spec.minutes {
			d, err = time.ParseInLocation(alipayMinuteLayout, te, cst)
		}
		if err != nil {
			if spec.minutes {
				return invalid("time_expire must be yyyy-MM-dd HH:mm or yyyy-MM-dd HH:mm:ss")
			}
			return invalid("time_expire must be yyyy-MM-dd HH:mm:ss")
		}
		o.timeExpire = d
	} else if o.timeout != "" {
		if _, err := parseAlipayTimeout(o.timeout, now); err != nil {
			return invalid("timeout_express: " + err.Error())
		}
	}
	return o, nil
}

// admitSignedOrder is what Alipay does on seeing a signed order, before anything is paid. It
// refuses an order that contradicts what it already holds under the out_trade_no (another
// amount, method or app: ACQ.CONTEXT_INCONSISTENT), one whose trade was paid
// (ACQ.TRADE_HAS_SUCCESS) or closed or cancelled (ACQ.TRADE_HAS_CLOSE), and one past its
// deadline (ACQ.TRADE_HAS_CLOSE: Alipay closes a trade at its time_expire). Otherwise it
// keeps the order (its first sight starts timeout_express) and returns its deadline. The
// caller holds s.mu.
func (s *Simulator) admitSignedOrder(o *alipaySignedOrder, now time.Time) (time.Time, *alipayRefusal) {
	seen := s.alipay.signed[o.outTradeNo]
	if seen != nil && (seen.order.amount != o.amount || seen.order.method != o.method || seen.order.appID != o.appID) {
		return time.Time{}, refuse(orderpay.EINVALID, "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
	}
	if t := s.alipay.touch(s.alipay.byOutTradeNo[o.outTradeNo]); t != nil {
		t.refresh(now)
		switch {
		case t.paid():
			return time.Time{}, refuse(orderpay.ECONFLICT, "ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
		case t.cancelled || t.status == AlipayTradeClosed:
			return time.Time{}, refuse(orderpay.ECONFLICT, "ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.method != o.method || t.amount != o.amount || t.appID != o.appID:
			return time.Time{}, refuse(orderpay.EINVALID, "ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
		}
	}
	if seen == nil {
		seen = &alipaySeenOrder{firstSeen: now}
		s.alipay.signed[o.outTradeNo] = seen
	}
	seen.order = o
	deadline := o.deadline(seen.firstSeen)
	if !now.Before(deadline) {
		return time.Time{}, refuse(orderpay.ECONFLICT, "ACQ.TRADE_HAS_CLOSE",
			"交易已经关闭: the order's deadline "+deadline.In(cst).Format(alipayTimeLayout)+" has passed")
	}
	return deadline, nil
}

// alipayPaySigned plays the buyer paying a verified pc, wap or app order in full, or, with
// WalletDecline, leaving the cashier without paying. Paying creates the trade, paid
// (TRADE_SUCCESS), and queues its notification, so that from then on it is a paid trade like
// any other. The buyer's Alipay user id is buyer's (IdentityOf), or a random one when buyer
// is "". After paying a pc or wap order with a return_url, the result's ReturnURL is where
// the cashier sends the browser (alipayReturnURL); a declined wap order sends it to its
// quit_url. Declining pays and creates nothing.
func (s *Simulator) alipayPaySigned(o *alipaySignedOrder, buyer, action string) (*PayResult, *alipayRefusal) {
	now := s.clock.Now()
	s.mu.Lock()
	deadline, refusal := s.admitSignedOrder(o, now)
	if refusal != nil {
		s.mu.Unlock()
		return nil, refusal
	}
	res := &PayResult{Channel: orderpay.ChannelAlipay, OutTradeNo: o.outTradeNo, Amount: o.amount}
	if action == WalletDecline {
		s.mu.Unlock()
		if o.method == orderpay.MethodWAP {
			res.ReturnURL = o.quitURL
		}
		return res, nil
	}
	t := s.alipay.touch(s.alipay.byOutTradeNo[o.outTradeNo])
	if t == nil {
		t = &alipayTrade{appID: o.appID, outTradeNo: o.outTradeNo, subject: o.subject, amount: o.amount, notifyURL: o.notifyURL,
			method: o.method, payDeadline: deadline}
		s.alipay.byOutTradeNo[t.outTradeNo] = t
		s.alipay.touch(t)
	}
	if !t.scanned() {
		s.openAlipayTrade(t, s.alipayBuyer(buyer), now)
	}
	t.status = AlipayTradeSuccess
	t.paidAt = now
	t.notifyID = strings.ToLower(rand.Text())
	note := s.alipayNotification(t)
	res.TradeNo, res.Status = t.tradeNo, t.status
	if o.returnURL != "" {
		ret, err := s.alipayReturnURL(t, o, now)
		if err != nil {
			s.log.Error("sim: sign alipay return parameters", "out_trade_no", t.outTradeNo, "err", err)
		}
		res.ReturnURL = ret
	}
	s.mu.Unlock()
	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, nil
}

// openAlipayTrade brings t into existence at the channel, waiting for buyerID to pay
// (WAIT_BUYER_PAY), as a scan does for a QR code. The caller holds s.mu.
func (s *Simulator) openAlipayTrade(t *alipayTrade, buyerID string, now time.Time) {
	t.status = AlipayWaitBuyerPay
	t.seq = s.nextSeq()
	t.tradeNo = s.newAlipayTradeNo(now)
	t.buyerUserID = buyerID
	t.buyerLogonID = "1" + randomDigitString(2) + "******" + randomDigitString(2)
	t.createdAt = now
	s.alipay.byTradeNo[t.tradeNo] = t
}

// alipayBuyer is the Alipay user id of a simulated buyer, or a random one for "".
func (s *Simulator) alipayBuyer(buyer string) string {
	if buyer == "" {
		return "2088" + randomDigitString(12)
	}
	return s.alipayUserID(buyer)
}

// alipayReturnMethods name the return of each cashier method (method=….return).
var alipayReturnMethods = map[orderpay.PayMethod]string{
	orderpay.MethodPC:  alipayPagePay + ".return",
	orderpay.MethodWAP: alipayWapPay + ".return",
}

// alipayReturnURL is o's return_url with the parameters Alipay's cashier adds when it sends
// the buyer's browser back after paying trade t (synchronous return, 同步返回): charset,
// out_trade_no, method (alipay.trade.page.pay.return or alipay.trade.wap.pay.return),
// total_amount, trade_no, auth_app_id, version, app_id (the app the order was signed as),
// seller_id, timestamp, signed like a notification with that app's Alipay key (every
// parameter but sign and sign_type), then sign_type and sign. The return_url's own query parameters stay, unsigned, as Alipay leaves them.
// It is "" for an order that is not pc or wap. The caller holds s.mu.
func (s *Simulator) alipayReturnURL(t *alipayTrade, o *alipaySignedOrder, now time.Time) (string, error) {
	method, ok := alipayReturnMethods[o.method]
	if !ok || o.returnURL == "" {
		return "", nil
	}
	v := url.Values{
		"charset":      {"utf-8"},
		"out_trade_no": {t.outTradeNo},
		"method":       {method},
		"total_amount": {orderpay.FormatYuan(t.amount)},
		"trade_no":     {t.tradeNo},
		"auth_app_id":  {t.appID},
		"version":      {"1.0"},
		"app_id":       {t.appID},
		"seller_id":    {s.keys.SellerID},
		"timestamp":    {now.In(cst).Format(alipayTimeLayout)},
	}
	sig, err := SignAlipayParams(s.tradeApp(t).AlipayPrivateKey, v)
	if err != nil {
		return "", err
	}
	v.Set("sign_type", "RSA2")
	v.Set("sign", sig)
	u, err := url.Parse(o.returnURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	maps.Copy(q, v)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// alipayPayInstruction is Alipay's wallet paying (or declining) a pc, wap, app or inapp
// instruction, checked the way the real one checks it:
//
//   - pc: the buyer's browser opens the signed url, or renders the html form, which posts
//     the same parameters; both must be a genuine order (verifySignedOrder) for this app,
//     and the same one.
//   - wap: the signed url.
//   - app: the order string, which the Alipay app sends to Alipay as it is, where it is
//     verified like any signed request (alipay.trade.app.pay).
//   - inapp: the trade_no of a trade made by alipay.trade.create, paid only by the buyer it
//     was made for (alipayPayTrade).
//
// The order must not be past its deadline, nor its trade paid or closed. Errors carry
// Alipay's sub_code and message.
func (s *Simulator) alipayPayInstruction(ctx context.Context, a PayAs) (*PayResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		o       *alipaySignedOrder
		refusal *alipayRefusal
	)
	switch a.Pay.Method {
	case orderpay.MethodPC:
		o, refusal = s.verifyPCInstruction(a.Pay.Field("url"), a.Pay.Field("html"))
	case orderpay.MethodWAP:
		var params url.Values
		if params, refusal = gatewayURLParams(a.Pay.Field("url")); refusal == nil {
			o, refusal = s.verifySignedOrder(params, alipayWapPay)
		}
	case orderpay.MethodApp:
		params, err := url.ParseQuery(a.Pay.Field("order_string"))
		if err != nil {
			return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: the order string is not a query string").err()
		}
		o, refusal = s.verifySignedOrder(params, alipayAppPay)
	case orderpay.MethodInApp:
		res, refusal := s.alipayPayTrade(a.Pay.Field("trade_no"), a.Buyer, a.Action)
		if refusal != nil {
			return nil, refusal.err()
		}
		return res, nil
	default:
		return nil, orderpay.Errorf(orderpay.EINVALID, "Alipay has no %s method", a.Pay.Method)
	}
	if refusal != nil {
		return nil, refusal.err()
	}
	res, refusal := s.alipayPaySigned(o, a.Buyer, a.Action)
	if refusal != nil {
		return nil, refusal.err()
	}
	return res, nil
}

// verifyPCInstruction checks both halves of a pc instruction: the signed URL and the
// auto-submitting form. Each must be a genuine alipay.trade.page.pay order, and the two the
// same parameters, since the device may use either.
func (s *Simulator) verifyPCInstruction(rawURL, formHTML string) (*alipaySignedOrder, *alipayRefusal) {
	byURL, refusal := gatewayURLParams(rawURL)
	if refusal != nil {
		return nil, refusal
	}
	o, refusal := s.verifySignedOrder(byURL, alipayPagePay)
	if refusal != nil {
		return nil, refusal
	}
	byForm, refusal := gatewayFormParams(formHTML)
	if refusal != nil {
		return nil, refusal
	}
	if _, refusal := s.verifySignedOrder(byForm, alipayPagePay); refusal != nil {
		return nil, refusal
	}
	if !maps.EqualFunc(byURL, byForm, slices.Equal[[]string]) {
		return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: the form and the url are not the same order")
	}
	return o, nil
}

// gatewayURLParams reads the parameters of a signed cashier URL: an absolute http(s) URL of
// a gateway (…/gateway.do), its query the signed parameters.
func gatewayURLParams(raw string) (url.Values, *alipayRefusal) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.HasSuffix(u.Path, "/gateway.do") {
		return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: the url is not an Alipay gateway's")
	}
	params, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: the url's query does not parse")
	}
	return collapseRepeats(params)
}

var (
	formTagPattern  = regexp.MustCompile(`(?is)<form\b([^>]*)>`)
	inputTagPattern = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attrPattern     = regexp.MustCompile(`(?s)([A-Za-z_:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')`)
)

// gatewayFormParams reads what a browser submits for an auto-submitting cashier form: the
// first form must post to a gateway (…/gateway.do), and its parameters are those of the
// action's query (charset=utf-8) and every named input, values HTML-unescaped. A parameter
// given twice must have one value.
func gatewayFormParams(formHTML string) (url.Values, *alipayRefusal) {
	bad := func(msg string) (url.Values, *alipayRefusal) {
		return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: "+msg)
	}
	m := formTagPattern.FindStringSubmatch(formHTML)
	if m == nil {
		return bad("the html has no form")
	}
	form := tagAttrs(m[1])
	if !strings.EqualFold(form["method"], "post") {
		return bad("the form does not post")
	}
	params, refusal := gatewayURLParams(form["action"])
	if refusal != nil {
		return nil, refusal
	}
	for _, in := range inputTagPattern.FindAllStringSubmatch(formHTML, -1) {
		attrs := tagAttrs(in[1])
		if name, ok := attrs["name"]; ok && name != "" {
			params.Add(name, attrs["value"])
		}
	}
	return collapseRepeats(params)
}

// tagAttrs reads the quoted attributes of one tag, names lowercased, values unescaped.
func tagAttrs(s string) map[string]string {
	attrs := map[string]string{}
	for _, a := range attrPattern.FindAllStringSubmatch(s, -1) {
		attrs[strings.ToLower(a[1])] = html.UnescapeString(a[2] + a[3])
	}
	return attrs
}

// collapseRepeats gives each parameter repeated with one value that value once: a cashier
// form repeats charset in its action's query and in its inputs. A parameter repeated with
// different values is refused, since the signed content would be ambiguous.
func collapseRepeats(params url.Values) (url.Values, *alipayRefusal) {
	out := make(url.Values, len(params))
	for k, vs := range params {
		for _, v := range vs[1:] {
			if v != vs[0] {
				return nil, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: parameter "+k+" is repeated")
			}
		}
		if len(vs) > 0 {
			out[k] = vs[:1]
		}
	}
	return out, nil
}

// alipayPayTrade plays buyer paying, in the Alipay app (my.tradePay), the trade numbered
// tradeNo, or, with WalletDecline, closing the pay sheet. Only the buyer the trade was made
// for may pay it: anyone else is refused (TRADE_BUYER_NOT_MATCH, 交易买家不匹配), as is a
// trade already paid, or closed (by a close, or at its deadline). Declining changes nothing:
// the trade keeps waiting.
func (s *Simulator) alipayPayTrade(tradeNo, buyer, action string) (*PayResult, *alipayRefusal) {
	if buyer == "" {
		return nil, refuse(orderpay.EINVALID, "TRADE_BUYER_NOT_MATCH", "交易买家不匹配: the buyer paying in the Alipay app is required")
	}
	user := s.alipayUserID(buyer)
	now := s.clock.Now()
	s.mu.Lock()
	t := s.alipay.touch(s.alipay.byTradeNo[tradeNo])
	if t == nil {
		s.mu.Unlock()
		return nil, refuse(orderpay.ENOTFOUND, "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	t.refresh(now)
	var refusal *alipayRefusal
	switch {
	case t.paid():
		refusal = refuse(orderpay.ECONFLICT, "ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
	case t.status != AlipayWaitBuyerPay:
		refusal = refuse(orderpay.ECONFLICT, "ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
	case t.buyerUserID != user:
		refusal = refuse(orderpay.EINVALID, "TRADE_BUYER_NOT_MATCH", "交易买家不匹配")
	}
	if refusal != nil {
		s.mu.Unlock()
		return nil, refusal
	}
	var note *outgoingNotification
	if action != WalletDecline {
		t.status = AlipayTradeSuccess
		t.paidAt = now
		t.notifyID = strings.ToLower(rand.Text())
		note = s.alipayNotification(t)
	}
	res := &PayResult{Channel: orderpay.ChannelAlipay, OutTradeNo: t.outTradeNo, TradeNo: t.tradeNo, Status: t.status, Amount: t.amount}
	s.mu.Unlock()
	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, nil
}

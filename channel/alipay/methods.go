package alipay

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// Alipay's pay methods beyond the QR code (docs/channels.md §A6). pc, wap and app orders are
// signed here and handed to the buyer's device: no call is made, so nothing can go wrong at
// the channel at this step, and the trade exists at Alipay only once the buyer pays. Until
// then a query answers ACQ.TRADE_NOT_EXIST and a close changes nothing, exactly as for a QR
// code nobody scanned: the deadline signed into the order (time_expire) is what stops a
// late payment. inapp is a server call, alipay.trade.create, and its trade exists from then
// on, waiting for the buyer it names.

// Product codes (销售产品码) of the methods.
const (
	productPagePay = "FAST_INSTANT_TRADE_PAY" // pc, alipay.trade.page.pay
	productWapPay  = "QUICK_WAP_WAY"          // wap, alipay.trade.wap.pay
	productAppPay  = "QUICK_MSECURITY_PAY"    // app, alipay.trade.app.pay
	productJSAPI   = "JSAPI_PAY"              // inapp, alipay.trade.create
)

// minuteLayout is wap.pay's time_expire, to the minute, as the SDK documents it
// (TradeWapPay.TimeExpire: yyyy-MM-dd HH:mm).
const minuteLayout = "2006-01-02 15:04"

// userIDPattern is an Alipay user id (buyer_id): 2088 and 12 more digits.
var userIDPattern = regexp.MustCompile(`^2088[0-9]{12}$`)

// channelDeadline is the deadline the channel is given for method m, and its text for
// time_expire: deadline in China time truncated to the second, or to the minute for wap,
// so that the buyer can never pay later than orderpay's own deadline. The instruction stops
// working then, so it is also the result's QRExpiresAt.
func channelDeadline(m orderpay.PayMethod, deadline time.Time) (time.Time, string) {
	if m == orderpay.MethodWAP {
		d := deadline.In(cst).Truncate(time.Minute)
		return d, d.Format(minuteLayout)
	}
	d := deadline.In(cst).Truncate(time.Second)
	return d, d.Format(timeLayout)
}

// signLocally makes the pay instruction of a pc, wap or app order, signed with the app key
// (TradePagePay, TradeWapPay, TradeAppPay): no call reaches Alipay. It is Accepted unless
// the request breaks Alipay's rules (checkPrecreate, a deadline already past once truncated,
// a return_url or quit_url that is not an absolute http(s) URL), which is Rejected, nothing
// made. The order carries notify_url, return_url (pc and wap), quit_url (wap) and
// time_expire (channelDeadline).
//
//   - pc (FAST_INSTANT_TRADE_PAY): url, a GET of the gateway that renders Alipay's cashier,
//     and html, an auto-submitting form posting the same signed parameters (cashierForm).
//   - wap (QUICK_WAP_WAY): url.
//   - app (QUICK_MSECURITY_PAY): order_string, for the Alipay app SDK.
func (c *Channel) signLocally(req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	rejected := func(msg string) orderpay.PrecreateResult {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	if msg := checkPrecreate(req); msg != "" {
		return rejected(msg)
	}
	expires, timeExpire := channelDeadline(req.Method, req.Deadline)
	if !expires.After(c.clock.Now()) {
		return rejected("the deadline has passed (time_expire " + timeExpire + ")")
	}
	for name, u := range map[string]string{"return_url": req.ReturnURL, "quit_url": req.QuitURL} {
		if !absoluteHTTPURL(u) {
			return rejected(name + " must be an absolute http(s) URL")
		}
	}
	trade := sdk.Trade{
		NotifyURL:   req.NotifyURL,
		Subject:     req.Subject,
		OutTradeNo:  req.OutTradeNo,
		TotalAmount: orderpay.FormatYuan(req.Amount),
		TimeExpire:  timeExpire,
	}
	var (
		pay *orderpay.PayInstruction
		err error
	)
	switch req.Method {
	case orderpay.MethodPC:
		trade.ReturnURL, trade.ProductCode = req.ReturnURL, productPagePay
		var u *url.URL
		if u, err = c.client.TradePagePay(sdk.TradePagePay{Trade: trade}); err == nil {
			pay = orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodPC, "url", u.String(), "html", cashierForm(u))
		}
	case orderpay.MethodWAP:
		// TradeWapPay has a time_expire of its own, to the minute, which hides Trade's.
		trade.ReturnURL, trade.ProductCode, trade.TimeExpire = req.ReturnURL, productWapPay, ""
		var u *url.URL
		if u, err = c.client.TradeWapPay(sdk.TradeWapPay{Trade: trade, QuitURL: req.QuitURL, TimeExpire: timeExpire}); err == nil {
			pay = orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodWAP, "url", u.String())
		}
	case orderpay.MethodApp:
		trade.ProductCode = productAppPay
		var s string
		if s, err = c.client.TradeAppPay(sdk.TradeAppPay{Trade: trade}); err == nil {
			pay = orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodApp, "order_string", s)
		}
	}
	if err != nil {
		// Only a broken key fails here; nothing was handed out, so nothing can be paid.
		return rejected("signing failed: " + err.Error())
	}
	return orderpay.PrecreateResult{
		Outcome:     orderpay.OutcomeAccepted,
		Pay:         pay,
		QRExpiresAt: expires,
		Detail:      "signed here, not sent (" + string(req.Method) + ", time_expire " + timeExpire + "): the trade exists at Alipay once the buyer pays",
	}
}

// tradeCreate opens an in-app trade for the buyer req.Payer (alipay.trade.create with
// product_code JSAPI_PAY and buyer_id), passing the deadline as time_expire. The trade exists
// from this call on, waiting for that buyer (WAIT_BUYER_PAY); the instruction is its
// trade_no, which the page hands my.tradePay. A request without a payer, or whose payer is
// not an Alipay user id (2088…), is Rejected unsent, as one that breaks checkPrecreate or
// whose deadline has passed once truncated to the second (Alipay refuses a time_expire that
// is not in the future).
//
// Outcomes are precreate's (precreateOutcome): a verified 10000 with a trade_no for this
// out_trade_no is Accepted; a business refusal is Rejected; everything else, including
// ACQ.SYSTEM_ERROR and ACQ.TRADE_HAS_SUCCESS, is Unknown.
func (c *Channel) tradeCreate(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	if msg := checkPrecreate(req); msg != "" {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	if !userIDPattern.MatchString(req.Payer) {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected,
			Detail: "not sent: in-app payment needs the buyer's Alipay user id (buyer_id, 2088 and 12 digits)"}
	}
	expires, timeExpire := channelDeadline(orderpay.MethodInApp, req.Deadline)
	if !expires.After(c.clock.Now()) {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: the deadline has passed (time_expire " + timeExpire + ")"}
	}
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeCreateRsp, error) {
		return c.client.TradeCreate(ctx, sdk.TradeCreate{Trade: sdk.Trade{
			NotifyURL:   req.NotifyURL,
			Subject:     req.Subject,
			OutTradeNo:  req.OutTradeNo,
			TotalAmount: orderpay.FormatYuan(req.Amount),
			ProductCode: productJSAPI,
			TimeExpire:  timeExpire,
		}, BuyerId: req.Payer})
	})
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res
	}
	res.Detail = describeCode(rsp.Error)
	if rsp.Code != sdk.CodeSuccess {
		res.Outcome = precreateOutcome(rsp.Error)
		return res
	}
	if rsp.TradeNo == "" || (rsp.OutTradeNo != "" && rsp.OutTradeNo != req.OutTradeNo) {
		res.Detail += ": success without a trade_no for this out_trade_no"
		return res
	}
	res.Outcome = orderpay.OutcomeAccepted
	res.Pay = orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodInApp, "trade_no", rsp.TradeNo)
	res.QRExpiresAt = expires
	return res
}

// cashierForm is the pc instruction's html: a form that posts every signed parameter of u,
// each a hidden input, to the gateway (u without its query, plus ?charset=utf-8, as Alipay's
// own SDKs write it), and submits itself. Names and values are HTML-escaped; the inputs are
// in name order.
func cashierForm(u *url.URL) string {
	action := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawQuery: "charset=utf-8"}
	params := u.Query()
	var b strings.Builder
	b.WriteString(`<form id="alipaysubmit" name="alipaysubmit" method="post" action="`)
	b.WriteString(html.EscapeString(action.String()))
	b.WriteString(`">`)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range params {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range params[k] {
			b.WriteString(`<input type="hidden" name="`)
			b.WriteString(html.EscapeString(k))
			b.WriteString(`" value="`)
			b.WriteString(html.EscapeString(v))
			b.WriteString(`">`)
		}
	}
	b.WriteString(`<input type="submit" value="ok" style="display:none"></form>`)
	b.WriteString(`<script>document.forms['alipaysubmit'].submit();</script>`)
	return b.String()
}

// absoluteHTTPURL reports whether s is empty or an absolute http(s) URL, as Alipay wants
// return_url and quit_url.
func absoluteHTTPURL(s string) bool {
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Return is what a verified return_url redirect says: the trade Alipay's cashier says the
// buyer paid. It is a hint for the page the buyer lands on ("checking your payment"), never a
// payment: the browser can be sent back without paying, and only the notification or a query
// decide (docs/channels.md §A6).
type Return struct {
	OutTradeNo string
	TradeNo    string
	Amount     int64 // total_amount, fen
	// Method is alipay.trade.page.pay.return or alipay.trade.wap.pay.return.
	Method string
}

// returnFields are the parameters Alipay's cashier adds to return_url. Only these are
// verified and read: a return_url's own query parameters are not signed by Alipay, and are
// left out.
var returnFields = []string{"app_id", "auth_app_id", "charset", "method", "out_trade_no", "seller_id",
	"sign", "sign_type", "timestamp", "total_amount", "trade_no", "version", "alipay_cert_sn"}

// VerifyReturn checks the query of a return_url redirect (同步返回) as a notification is
// checked: the signature with the Alipay key in use (leaving out sign and sign_type), then
// app_id, auth_app_id when present and seller_id ours, and method a page or wap return. A
// parameter given twice or a total_amount that does not parse is EINVALID; a signature
// that does not verify, or another app or seller, EUNAUTHORIZED.
func (c *Channel) VerifyReturn(ctx context.Context, query url.Values) (*Return, error) {
	values := url.Values{}
	for _, k := range returnFields {
		vs, ok := query[k]
		if !ok {
			continue
		}
		if len(vs) != 1 {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay return repeats %q", k)
		}
		values[k] = vs
	}
	if values.Get("sign") == "" {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay return is not signed")
	}
	if err := c.verifySignature(ctx, values); err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay return signature does not verify")
	}
	if values.Get("app_id") != c.appID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay return is for another app_id")
	}
	if auth, ok := values["auth_app_id"]; ok && auth[0] != c.appID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay return is for another auth_app_id")
	}
	if values.Get("seller_id") != c.sellerID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay return is for another seller_id")
	}
	r := &Return{OutTradeNo: values.Get("out_trade_no"), TradeNo: values.Get("trade_no"), Method: values.Get("method")}
	if r.Method != "alipay.trade.page.pay.return" && r.Method != "alipay.trade.wap.pay.return" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay return has method %q", r.Method)
	}
	if r.OutTradeNo == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay return has no out_trade_no")
	}
	var err error
	if r.Amount, err = orderpay.ParseYuan(values.Get("total_amount")); err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay return total_amount %q is not a yuan amount", values.Get("total_amount"))
	}
	return r, nil
}

package sim

import (
	"crypto/rand"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"orderpay"
)

// The cashier (收银台) is what a buyer's browser gets from the gateway for a pc or wap order:
// GET /gateway.do with the signed URL's query, or POST /gateway.do from the merchant's
// auto-submitting form. It verifies the order as the gateway verifies any call, shows it, and
// keeps it under a token so that the page's buttons can pay it or give up
// (POST /sim/alipay/cashier/{token}). Opening the cashier creates no trade.

// alipayPageTitle is the title of Alipay's web pages, the cashier and its error page.
const alipayPageTitle = "支付宝 - 网上支付 安全快速！"

// serveAlipayCashier answers a pc or wap order opened in a browser: the cashier page
// (200) showing the order, or Alipay's error page (4xx) naming what is wrong in Alipay's
// words. An order altered anywhere after it was signed is refused, and so is one past its
// deadline or whose trade was paid or closed (admitSignedOrder).
func (s *Simulator) serveAlipayCashier(w http.ResponseWriter, params url.Values) {
	params, refusal := collapseRepeats(params)
	if refusal != nil {
		writeCashierError(w, refusal)
		return
	}
	o, refusal := s.verifySignedOrder(params, params.Get("method"))
	if refusal != nil {
		writeCashierError(w, refusal)
		return
	}
	now := s.clock.Now()
	token := strings.ToLower(rand.Text())
	s.mu.Lock()
	deadline, refusal := s.admitSignedOrder(o, now)
	if refusal == nil {
		s.alipay.cashier[token] = o
	}
	s.mu.Unlock()
	if refusal != nil {
		writeCashierError(w, refusal)
		return
	}
	product := "电脑网站支付"
	if o.method == orderpay.MethodWAP {
		product = "手机网站支付"
	}
	writeHTML(w, http.StatusOK, cashierPage, map[string]any{
		"Title":      alipayPageTitle,
		"Product":    product,
		"Subject":    o.subject,
		"Amount":     orderpay.FormatYuan(o.amount),
		"OutTradeNo": o.outTradeNo,
		"SellerID":   s.keys.SellerID,
		"Deadline":   deadline.In(cst).Format(alipayTimeLayout),
		"Action":     alipayCashierPath + token,
		"QuitURL":    o.quitURL,
	})
}

// serveAlipayCashierAction is POST /sim/alipay/cashier/{token}, the cashier page's buttons:
// the form's buyer pays the order the page showed (action=pay, the default) or gives up
// (action=decline). The browser is then sent (303) to the return_url with Alipay's signed
// parameters, or, giving up on a wap order, to its quit_url; without one the answer is a
// page saying what happened. A refusal is Alipay's error page.
func (s *Simulator) serveAlipayCashierAction(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	s.mu.Lock()
	o := s.alipay.cashier[r.PathValue("token")]
	s.mu.Unlock()
	if o == nil {
		writeCashierError(w, refuse(orderpay.ENOTFOUND, "ACQ.TRADE_NOT_EXIST", "交易不存在: open the order again"))
		return
	}
	if err := r.ParseForm(); err != nil {
		writeCashierError(w, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: the form does not parse"))
		return
	}
	action := r.PostForm.Get("action")
	switch action {
	case "":
		action = WalletPay
	case WalletPay, WalletDecline:
	default:
		writeCashierError(w, refuse(orderpay.EINVALID, "ACQ.INVALID_PARAMETER", "参数无效: action must be pay or decline"))
		return
	}
	res, refusal := s.alipayPaySigned(o, strings.TrimSpace(r.PostForm.Get("buyer")), action)
	if refusal != nil {
		writeCashierError(w, refusal)
		return
	}
	if res.ReturnURL != "" {
		http.Redirect(w, r, res.ReturnURL, http.StatusSeeOther)
		return
	}
	msg := "支付成功"
	if action == WalletDecline {
		msg = "您已取消支付"
	}
	writeHTML(w, http.StatusOK, cashierResultPage, map[string]any{"Title": alipayPageTitle, "Message": msg,
		"OutTradeNo": res.OutTradeNo, "TradeNo": res.TradeNo, "Amount": orderpay.FormatYuan(res.Amount)})
}

// cashierReasons are the longer explanations Alipay's error page gives for some sub_codes.
var cashierReasons = map[string]string{
	"isv.invalid-signature": "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配",
}

// writeCashierError writes Alipay's error page for a refused order: 错误代码 (the sub_code,
// without its isv. prefix, as the page shows it) and 错误原因, with 400 for an order that is
// not genuine or well formed, 409 for a trade that can no longer be paid, 404 for one that
// does not exist.
func writeCashierError(w http.ResponseWriter, r *alipayRefusal) {
	status, ok := errorStatus[r.code]
	if !ok {
		status = http.StatusBadRequest
	}
	reason := r.subMsg
	if long, ok := cashierReasons[r.subCode]; ok {
		reason = long
	}
	writeHTML(w, status, cashierErrorPage, map[string]any{"Title": alipayPageTitle,
		"Code": strings.TrimPrefix(r.subCode, "isv."), "SubCode": r.subCode, "Reason": reason})
}

func writeHTML(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = t.Execute(w, data)
}

var cashierPage = template.Must(template.New("cashier").Parse(`<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title></head>
<body>
<h1>支付宝收银台 <small>({{.Product}}, simulated)</small></h1>
<dl id="order">
<dt>订单</dt><dd id="subject">{{.Subject}}</dd>
<dt>金额</dt><dd id="amount">¥{{.Amount}}</dd>
<dt>商户订单号</dt><dd id="out_trade_no">{{.OutTradeNo}}</dd>
<dt>收款方</dt><dd id="seller_id">{{.SellerID}}</dd>
<dt>交易关闭时间</dt><dd id="deadline">{{.Deadline}}</dd>
</dl>
<form method="post" action="{{.Action}}">
<label>付款人 <input name="buyer" placeholder="buyer name"></label>
<button name="action" value="pay">确认付款</button>
<button name="action" value="decline">{{if .QuitURL}}返回商家{{else}}取消{{end}}</button>
</form>
</body></html>
`))

var cashierResultPage = template.Must(template.New("result").Parse(`<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Message}}</h1>
<p>商户订单号 <span id="out_trade_no">{{.OutTradeNo}}</span>{{if .TradeNo}}, 支付宝交易号 <span id="trade_no">{{.TradeNo}}</span>{{end}}, 金额 ¥{{.Amount}}</p>
</body></html>
`))

var cashierErrorPage = template.Must(template.New("error").Parse(`<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>抱歉，您的操作出现了异常</h1>
<p id="error_code" data-sub-code="{{.SubCode}}">错误代码 {{.Code}}</p>
<p id="error_reason">错误原因: {{.Reason}}</p>
</body></html>
`))

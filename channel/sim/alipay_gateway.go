package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"orderpay"
)

// maxGatewayBody bounds a gateway request; real requests are a few kilobytes.
const maxGatewayBody = 1 << 20

// alipayReply is the inner object of a gateway response: code and msg always, sub_code and
// sub_msg on failure, then the method's business fields. Field order is fixed, and the
// response is signed over exactly these bytes.
type alipayReply struct {
	Code           string `json:"code"`
	Msg            string `json:"msg"`
	SubCode        string `json:"sub_code,omitempty"`
	SubMsg         string `json:"sub_msg,omitempty"`
	TradeNo        string `json:"trade_no,omitempty"`
	OutTradeNo     string `json:"out_trade_no,omitempty"`
	QRCode         string `json:"qr_code,omitempty"`
	BuyerLogonID   string `json:"buyer_logon_id,omitempty"`
	TradeStatus    string `json:"trade_status,omitempty"`
	TotalAmount    string `json:"total_amount,omitempty"`
	BuyerPayAmount string `json:"buyer_pay_amount,omitempty"`
	PointAmount    string `json:"point_amount,omitempty"`
	InvoiceAmount  string `json:"invoice_amount,omitempty"`
	SendPayDate    string `json:"send_pay_date,omitempty"`
	ReceiptAmount  string `json:"receipt_amount,omitempty"`
	BuyerUserID    string `json:"buyer_user_id,omitempty"`
	// alipay.trade.pay
	GmtPayment   string           `json:"gmt_payment,omitempty"`
	FundBillList []alipayFundBill `json:"fund_bill_list,omitempty"`
	StoreName    string           `json:"store_name,omitempty"`
	// alipay.trade.cancel
	RetryFlag string `json:"retry_flag,omitempty"`
	Action    string `json:"action,omitempty"`
	// alipay.trade.refund and alipay.trade.fastpay.refund.query
	FundChange   string `json:"fund_change,omitempty"`
	RefundFee    string `json:"refund_fee,omitempty"`
	OutRequestNo string `json:"out_request_no,omitempty"`
	RefundAmount string `json:"refund_amount,omitempty"`
	RefundStatus string `json:"refund_status,omitempty"`
	GmtRefundPay string `json:"gmt_refund_pay,omitempty"`
	// alipay.data.dataservice.bill.downloadurl.query
	BillDownloadURL string `json:"bill_download_url,omitempty"`
	// alipay.open.app.alipaycert.download
	AlipayCertContent string `json:"alipay_cert_content,omitempty"`
	// alipay.system.oauth.token
	UserID       string `json:"user_id,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	ExpiresIn    int64  `json:"expires_in,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	ReExpiresIn  int64  `json:"re_expires_in,omitempty"`
	AuthStart    string `json:"auth_start,omitempty"`
}

// alipayCodeMsg is the gateway's msg for each public code (docs/channels.md §A4).
var alipayCodeMsg = map[string]string{
	"10000": "Success",
	"10003": "Order success pay inprocess",
	"20000": "Service Currently Unavailable",
	"20001": "Insufficient Token Permissions",
	"40001": "Missing Required Arguments",
	"40002": "Invalid Arguments",
	"40003": "Insufficient Conditions",
	"40004": "Business Failed",
	"40005": "Call Limited",
	"40006": "Insufficient Permissions",
}

func alipaySuccess() alipayReply { return alipayReply{Code: "10000", Msg: alipayCodeMsg["10000"]} }

func alipayFailure(code, subCode, subMsg string) alipayReply {
	return alipayReply{Code: code, Msg: alipayCodeMsg[code], SubCode: subCode, SubMsg: subMsg}
}

// alipayApp is one of the merchant's Alipay apps as the gateway serves it: its keys, and
// in certificate mode the SNs of its certificates. A call is verified with the key of the
// app it names, its answer signed with the Alipay key of that app, and a trade belongs to
// the app that made it (alipayTrade.appID).
type alipayApp struct {
	AlipayApp
	cert *alipayCertMode // nil in key mode (AlipayModeKey)
}

// replyApp is the app whose Alipay key signs the answer to a call with params: the app it
// names if it is one of the merchant's, else the main one (an answer refusing an app id
// the gateway does not know).
func (s *Simulator) replyApp(params url.Values) *alipayApp {
	if app := s.alipayApps[params.Get("app_id")]; app != nil {
		return app
	}
	return s.alipayMain
}

// alipayCallContext is one verified gateway call as a method sees it.
type alipayCallContext struct {
	// app is the app the call named and was verified with.
	app    *alipayApp
	params url.Values
	biz    bizContent
	// baseURL is how the caller reached the simulator (scheme and Host header), for the
	// URLs an answer hands out, such as bill_download_url.
	baseURL string
}

// alipayMethod serves one gateway method after the envelope has been checked.
type alipayMethod func(s *Simulator, c alipayCallContext) alipayReply

// alipayMethods are the implemented gateway methods. Any other method is answered like
// Alipay answers a method it does not know: an error_response with 40002
// isv.invalid-method.
var alipayMethods = map[string]alipayMethod{
	"alipay.trade.precreate": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayPrecreate(c.app, c.params, c.biz)
	},
	"alipay.trade.pay": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayBarcodePay(c.app, c.params, c.biz)
	},
	"alipay.trade.query": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayQuery(c.app, c.biz)
	},
	"alipay.trade.close": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayClose(c.app, c.biz)
	},
	"alipay.trade.cancel": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayCancel(c.app, c.biz)
	},
	"alipay.trade.refund": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayRefund(c.app, c.biz)
	},
	"alipay.trade.fastpay.refund.query": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayRefundQuery(c.app, c.biz)
	},
	"alipay.data.dataservice.bill.downloadurl.query": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayBillDownloadURL(c.biz, c.baseURL)
	},
	"alipay.open.app.alipaycert.download": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayCertDownload(c.app, c.biz)
	},
	"alipay.trade.create": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayTradeCreate(c.app, c.params, c.biz)
	},
	"alipay.system.oauth.token": func(s *Simulator, c alipayCallContext) alipayReply {
		return s.alipayOauthToken(c.params)
	},
}

// serveAlipayGateway is GET and POST /gateway.do (docs/channels.md §A1, §A2). The API
// methods answer HTTP 200 with a signed JSON body, as the real gateway's, including
// refusals. alipay.trade.page.pay and alipay.trade.wap.pay are the cashier instead: the
// buyer's browser opens the signed URL (GET) or submits the signed form (POST), and the
// answer is an HTML page (serveAlipayCashier).
func (s *Simulator) serveAlipayGateway(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxGatewayBody)
	// ParseForm merges the form body and the URL query: the official SDKs put the system
	// parameters in the query and the business ones in the body, smartwalle puts all of
	// them in the body (§A1).
	if err := r.ParseForm(); err != nil {
		s.writeAlipayReply(w, s.alipayMain, "error_response",
			alipayFailure("40002", "isv.invalid-parameter", "request body is not a valid form"), signed)
		return
	}
	params := r.Form
	app := s.replyApp(params)
	method := params.Get("method")
	if _, ok := alipayCashierMethods[method]; ok {
		s.serveAlipayCashier(w, params)
		return
	}
	switch {
	case method == "":
		s.writeAlipayReply(w, app, "error_response", alipayFailure("40001", "isv.missing-method", "缺少方法名参数"), signed)
		return
	case len(params["method"]) > 1 || alipayMethods[method] == nil:
		s.writeAlipayReply(w, app, "error_response", alipayFailure("40002", "isv.invalid-method", "不存在的方法名"), signed)
		return
	}
	node := strings.ReplaceAll(method, ".", "_") + "_response"
	base := requestBaseURL(r)
	fault := s.faults.callFault(orderpay.ChannelAlipay, alipayFaultMethod[method], s.alipayFaultKey(params))
	if fault == nil {
		reply := s.alipayCall(method, params, base)
		if method == alipayOauthTokenMethod && reply.Code != "10000" {
			// The token call answers a refusal (an invalid code, a bad signature) under
			// error_response, not under its own node, as real answers show; the SDK then
			// returns it as its error.
			node = "error_response"
		}
		s.writeAlipayReply(w, app, node, reply, signed)
		return
	}
	var reply alipayReply
	if fault.Applied {
		reply = s.alipayCall(method, params, base)
	} else {
		reply = failureFor(method, alipayFailure("40004", "ACQ.SYSTEM_ERROR", "系统错误")) // what an unsigned or forged answer carries
	}
	switch fault.Kind {
	case FaultTimeout:
		s.hang(r.Context(), fault)
	case FaultHTTP500:
		http.Error(w, "<html><body>502 Bad Gateway</body></html>", http.StatusInternalServerError)
	case FaultSystemError:
		s.writeAlipayReply(w, app, node, failureFor(method, alipayFailure("40004", "ACQ.SYSTEM_ERROR", "系统错误")), signed)
	case FaultUnknownError:
		s.writeAlipayReply(w, app, node, failureFor(method, alipayFailure("20000", "isp.unknow-error", "服务暂不可用")), signed)
	case FaultRateLimited:
		s.writeAlipayReply(w, app, node, failureFor(method, alipayFailure("40005", "aop.ACQ.CALL_LIMITED", "调用频次超限")), signed)
	case FaultUnsigned:
		s.writeAlipayReply(w, app, node, reply, unsigned)
	case FaultBadSignature:
		s.writeAlipayReply(w, app, node, reply, forged)
	}
}

// alipayFaultMethod names each gateway method as fault rules do. alipay.trade.create, the
// in-app prepay step, is MethodPrecreate: the call that opens a trade for the buyer.
var alipayFaultMethod = map[string]string{
	"alipay.trade.precreate":                         MethodPrecreate,
	"alipay.trade.create":                            MethodPrecreate,
	"alipay.trade.pay":                               MethodPay,
	"alipay.trade.query":                             MethodQuery,
	"alipay.trade.close":                             MethodClose,
	"alipay.trade.cancel":                            MethodCancel,
	"alipay.trade.refund":                            MethodRefund,
	"alipay.trade.fastpay.refund.query":              MethodRefundQuery,
	"alipay.data.dataservice.bill.downloadurl.query": MethodBill,
}

// failureFor adds to a system failure what the method says with it: a failed cancel
// carries retry_flag=Y ("retry the cancel"), as the face-to-face guide describes.
func failureFor(method string, r alipayReply) alipayReply {
	if method == "alipay.trade.cancel" {
		r.RetryFlag = "Y"
	}
	return r
}

// alipayFaultKey is what a fault draw is keyed on: the call's out_trade_no, or the bill
// date for bills, so that the same traffic meets the same faults. Every call about one
// trade (query, close, cancel, refund, refund query) is keyed on its out_trade_no, never on
// a refund number, even when it names the trade only by trade_no.
func (s *Simulator) alipayFaultKey(params url.Values) string {
	biz, err := parseBizContent(params.Get("biz_content"))
	if err != nil {
		return ""
	}
	if v, _ := biz.str("out_trade_no"); v != "" {
		return v
	}
	if v, _ := biz.str("trade_no"); v != "" {
		s.mu.Lock()
		t := s.alipay.touch(s.alipay.byTradeNo[v])
		s.mu.Unlock()
		if t != nil {
			return t.outTradeNo
		}
		return v
	}
	v, _ := biz.str("bill_date")
	return v
}

// requestBaseURL is the scheme and host the caller used to reach the simulator.
func requestBaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// signMode says how a gateway answer is signed.
type signMode int

const (
	signed   signMode = iota // with the Alipay private key of the app, as the real gateway
	unsigned                 // no sign field at all
	forged                   // with a key that is not Alipay's
)

// registerAlipay adds the Alipay routes:
//
//	GET|POST /gateway.do                  the OpenAPI gateway; page.pay and wap.pay are the cashier
//	POST /sim/alipay/cashier/{token}      the cashier page's pay or decline button
//	GET  /sim/alipay/oauth                the OAuth page: ?buyer=NAME&redirect_uri=… (alipay_oauth.go)
//	GET  /oauth2/publicAppAuthorize.htm   the same, at the path of Alipay's own page
//	GET  <alipayBillPath>{token}          a bill download
func (s *Simulator) registerAlipay(mux *http.ServeMux) {
	mux.HandleFunc("POST /gateway.do", s.serveAlipayGateway)
	mux.HandleFunc("GET /gateway.do", s.serveAlipayGateway)
	mux.HandleFunc("POST "+alipayCashierPath+"{token}", s.serveAlipayCashierAction)
	mux.HandleFunc("GET "+alipayOauthPath, s.serveAlipayOauth)
	mux.HandleFunc("GET /oauth2/publicAppAuthorize.htm", s.serveAlipayOauth)
	mux.HandleFunc("GET "+alipayBillPath+"{token}", s.serveAlipayBill)
}

// alipayCall checks the envelope (checkAlipayEnvelope), then runs the method as the app the
// call named.
func (s *Simulator) alipayCall(method string, params url.Values, baseURL string) alipayReply {
	app, biz, fail := s.checkAlipayEnvelope(params)
	if fail != nil {
		return *fail
	}
	return alipayMethods[method](s, alipayCallContext{app: app, params: params, biz: biz, baseURL: baseURL})
}

// checkAlipayEnvelope checks what every signed request carries, in the gateway's order (app,
// certificate SNs, signature, common parameters), and decodes its biz_content. The app is
// one of the merchant's (the main one or the in-app one), and its own certificates and key
// verify the request. Nothing about the business request is looked at before the signature
// verifies. The gateway's API calls, the cashier (alipay.trade.page.pay and wap.pay) and
// the wallet's check of an app order string all start here.
func (s *Simulator) checkAlipayEnvelope(params url.Values) (*alipayApp, bizContent, *alipayReply) {
	fail := func(code, subCode, subMsg string) (*alipayApp, bizContent, *alipayReply) {
		r := alipayFailure(code, subCode, subMsg)
		return nil, nil, &r
	}
	for k, vs := range params {
		if len(vs) > 1 {
			// A repeated key would make the signed content ambiguous.
			return fail("40002", "ACQ.INVALID_PARAMETER", fmt.Sprintf("parameter %s is repeated", k))
		}
	}
	app := s.alipayApps[params.Get("app_id")]
	switch {
	case params.Get("app_id") == "":
		return fail("40001", "isv.missing-app-id", "缺少AppID参数")
	case app == nil:
		return fail("40002", "isv.invalid-app-id", "无效的AppID参数")
	}
	switch st := params.Get("sign_type"); {
	case st == "":
		return fail("40001", "isv.missing-signature-type", "缺少签名类型参数")
	case st != "RSA2":
		return fail("40002", "isv.invalid-signature-type", "无效的签名类型参数")
	}
	sig := params.Get("sign")
	if sig == "" {
		return fail("40001", "isv.missing-signature", "缺少签名参数")
	}
	if r := checkAlipayCertSN(app, params); r != nil {
		return nil, nil, r
	}
	// §A1: every parameter but sign (sign_type included), empty values dropped, keys
	// sorted, raw k=v joined with &, SHA256WithRSA with the app's public key.
	content, err := AlipaySignContent(params, "sign")
	if err != nil || VerifySHA256RSA(app.AppPublicKey, []byte(content), sig) != nil {
		return fail("40002", "isv.invalid-signature", "验签出错")
	}

	if cs := params.Get("charset"); cs != "" && !strings.EqualFold(cs, "utf-8") {
		return fail("40002", "isv.invalid-charset", "字符集错误")
	}
	if f := params.Get("format"); f != "" && !strings.EqualFold(f, "json") {
		return fail("40002", "isv.invalid-format", "无效的数据格式参数")
	}
	switch ts := params.Get("timestamp"); {
	case ts == "":
		return fail("40001", "isv.missing-timestamp", "缺少时间戳参数")
	default:
		if _, err := time.ParseInLocation(alipayTimeLayout, ts, cst); err != nil {
			return fail("40002", "isv.invalid-timestamp", "非法的时间戳参数")
		}
	}
	switch v := params.Get("version"); {
	case v == "":
		return fail("40001", "isv.missing-version", "缺少版本参数")
	case v != "1.0":
		return fail("40002", "isv.invalid-version", "非法的版本参数")
	}
	if params.Get("encrypt_type") != "" {
		return fail("40002", "isv.invalid-encrypt-type", "content encryption is not simulated")
	}

	biz, err := parseBizContent(params.Get("biz_content"))
	if err != nil {
		return fail("40004", "ACQ.INVALID_PARAMETER", "biz_content is not a JSON object")
	}
	return app, biz, nil
}

// writeAlipayReply writes {"<node>":<reply>,"sign":"<RSA2 over the exact reply bytes>"},
// signed with the Alipay key of app.
// The reply is written byte for byte as signed, because verifiers check the raw text of
// the node (§A2).
func (s *Simulator) writeAlipayReply(w http.ResponseWriter, app *alipayApp, node string, reply alipayReply, mode signMode) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(reply); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	inner := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	key := app.AlipayPrivateKey
	if mode == forged {
		key = s.forgerKey()
	}
	sig, err := SignSHA256RSA(key, inner)
	if err != nil {
		s.log.Error("sim: sign gateway reply", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var body bytes.Buffer
	body.WriteString(`{"`)
	body.WriteString(node)
	body.WriteString(`":`)
	body.Write(inner)
	if app.cert != nil && mode != unsigned {
		// Certificate mode (§A2): the answer names the certificate whose key signed it, so
		// that a client can fetch a certificate it does not know yet. A forged answer
		// claims the genuine one.
		body.WriteString(`,"alipay_cert_sn":"`)
		body.WriteString(app.cert.alipayCertSN)
		body.WriteString(`"`)
	}
	if mode != unsigned {
		body.WriteString(`,"sign":"`)
		body.WriteString(sig)
		body.WriteString(`"`)
	}
	body.WriteString(`}`)
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body.Bytes())
}

// bizContent is a decoded biz_content object. Numbers are kept as their literal text, so
// an amount sent as a JSON number is parsed exactly, never through a float.
type bizContent map[string]any

func parseBizContent(s string) (bizContent, error) {
	if s == "" {
		return bizContent{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var biz bizContent
	if err := dec.Decode(&biz); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after biz_content")
	}
	if biz == nil {
		return nil, fmt.Errorf("biz_content is null")
	}
	return biz, nil
}

// str returns a string field: "" when absent or null, the literal text of a number, and an
// error for any other JSON type.
func (b bizContent) str(key string) (string, error) {
	switch v := b[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("%s must be a string", key)
}

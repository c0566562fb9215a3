package sim

import (
	"context"
	"crypto/rsa"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"orderpay"
)

// WeChat Pay beyond the QR code (docs/channels.md §F2): the JSAPI (official account and mini
// program), H5 and App prepays, and the simulated WeChat client that pays what they hand
// the buyer's device.
//
// A prepay of these creates the order as Native's does, and answers a prepay_id (JSAPI, App)
// or an h5_url (H5) instead of a code. The same out_trade_no asked again with the same
// parameters before time_expire gets a fresh prepay_id, and every earlier one keeps working
// until its own end (2 h; an H5 link 5 min); other parameters are refused as WeChat does,
// 400 INVALID_REQUEST 201 商户订单号重复 (askedAgain).
//
// How the simulator knows an openid: WeChat knows every user; the simulator knows the openids
// it handed out or worked out. Its OAuth pages hand out openids (wechat_oauth.go), and every
// buyer it meets (through OAuth or paying at /sim/pay) has an openid per bound appid that it
// works out (IdentityOf) and keeps. A JSAPI prepay whose openid it knows for another appid
// is refused (PARAM_ERROR appid和openid不匹配). One it has never seen is taken, because
// IdentityOf and GET /sim/wallet/identity compute openids without telling the wallet; such
// an order can still only be paid by the buyer whose openid it is for that appid, which the
// client works out and compares when a buyer pays.

// wechatPrepayID is one prepay_id (or H5 link) of an order.
type wechatPrepayID struct {
	id        string
	order     *wechatOrder
	createdAt time.Time
	expiresAt time.Time // createdAt + its lifetime; the order's time_expire also ends it
	clientIP  string    // H5: scene_info.payer_client_ip of this prepay
}

// wechatH5Base is where WeChat's H5 links lead (the h5_url of an H5 prepay).
const wechatH5Base = "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb"

// wechatOpenIDPattern is the shape of an openid: 28 characters, starting with "o".
var wechatOpenIDPattern = regexp.MustCompile(`^o[A-Za-z0-9_-]{27}$`)

var (
	wechatJSAPIPrepayEndpoint = wechatEndpoint{
		method: MethodPrecreate,
		key:    func(_ *Simulator, _ *http.Request, body []byte) string { return bodyField(body, "out_trade_no") },
		run:    wechatMethodPrepay(wechatTradeJSAPI),
		fabricate: func(*Simulator, *http.Request, []byte) wechatAnswer {
			return wechatPrepayIDAnswer(newWechatPrepayIDValue(time.Now()))
		},
	}
	wechatH5PrepayEndpoint = wechatEndpoint{
		method: MethodPrecreate,
		key:    func(_ *Simulator, _ *http.Request, body []byte) string { return bodyField(body, "out_trade_no") },
		run:    wechatMethodPrepay(wechatTradeH5),
		fabricate: func(*Simulator, *http.Request, []byte) wechatAnswer {
			return wechatH5URLAnswer(wechatH5URL(newWechatPrepayIDValue(time.Now())))
		},
	}
	wechatAppPrepayEndpoint = wechatEndpoint{
		method: MethodPrecreate,
		key:    func(_ *Simulator, _ *http.Request, body []byte) string { return bodyField(body, "out_trade_no") },
		run:    wechatMethodPrepay(wechatTradeApp),
		fabricate: func(*Simulator, *http.Request, []byte) wechatAnswer {
			return wechatPrepayIDAnswer(newWechatPrepayIDValue(time.Now()))
		},
	}
)

// wechatMethodPrepay serves the prepay of tradeType: POST /v3/pay/transactions/jsapi (JSAPI
// and mini program), /h5 or /app.
func wechatMethodPrepay(tradeType string) func(*Simulator, *http.Request, []byte) wechatAnswer {
	return func(s *Simulator, _ *http.Request, body []byte) wechatAnswer {
		p, outTradeNo, b, fail := s.parseWechatPrepay(body, tradeType)
		if fail != nil {
			return *fail
		}
		var clientIP string
		switch tradeType {
		case wechatTradeJSAPI:
			if b.Payer == nil || wechatStr(b.Payer.OpenID) == "" {
				return wechatParamError("payer.openid", "body", "输入源“/body/payer/openid”映射到值字段“用户标识”字符串规则校验失败，字段必填")
			}
			p.openID = *b.Payer.OpenID
			if !wechatOpenIDPattern.MatchString(p.openID) {
				return wechatParamError("payer.openid", "body", "openid格式错误")
			}
		case wechatTradeH5:
			if b.SceneInfo == nil || net.ParseIP(wechatStr(b.SceneInfo.PayerClientIP)) == nil {
				return wechatParamError("scene_info.payer_client_ip", "body", "输入源“/body/scene_info/payer_client_ip”映射到值字段“用户终端IP”字符串规则校验失败，须为用户的IPv4或IPv6地址")
			}
			clientIP = *b.SceneInfo.PayerClientIP
			if b.SceneInfo.H5Info == nil || !slices.Contains([]string{"Wap", "iOS", "Android"}, wechatStr(b.SceneInfo.H5Info.Type)) {
				return wechatParamError("scene_info.h5_info.type", "body", "scene_info.h5_info.type 须为Wap、iOS或Android")
			}
		}
		now := s.clock.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.openID != "" {
			if known, ok := s.wechat.openIDs[p.openID]; ok && known != p.appID {
				return wechatError(http.StatusBadRequest, "PARAM_ERROR", "appid和openid不匹配")
			}
		}
		o := s.wechat.touch(s.wechat.byOutTradeNo[outTradeNo])
		if o != nil {
			if refused := o.askedAgain(p, now); refused != nil {
				return *refused
			}
		} else {
			o = s.newWechatOrder(outTradeNo, p, now)
		}
		lifetime := orderpay.WechatPrepayLifetime
		if tradeType == wechatTradeH5 {
			lifetime = orderpay.WechatH5Lifetime
		}
		pid := &wechatPrepayID{id: s.newWechatPrepayID(now), order: o, createdAt: now, expiresAt: now.Add(lifetime), clientIP: clientIP}
		s.wechat.prepayIDs[pid.id] = pid
		s.wechat.touchPrepayID(pid)
		if tradeType == wechatTradeH5 {
			return wechatH5URLAnswer(wechatH5URL(pid.id))
		}
		return wechatPrepayIDAnswer(pid.id)
	}
}

// newWechatOrder creates the order of a first prepay at now. The caller holds s.mu.
func (s *Simulator) newWechatOrder(outTradeNo string, p wechatPrepay, now time.Time) *wechatOrder {
	expire := now.Add(wechatDefaultExpire)
	if !p.timeExpire.IsZero() {
		expire = p.timeExpire
	}
	// Under order time + 1 min, time_expire is raised to it (§B1).
	if floor := now.Add(wechatMinExpire); expire.Before(floor) {
		expire = floor
	}
	o := &wechatOrder{outTradeNo: outTradeNo, seq: s.nextSeq(), prepay: p, createdAt: now, timeExpire: expire}
	s.wechat.byOutTradeNo[outTradeNo] = o
	s.wechat.touch(o)
	return o
}

// newWechatPrepayID returns an unused prepay_id shaped like WeChat's: wx, the time in China
// to the second, and 20 hex digits. The caller holds s.mu.
func (s *Simulator) newWechatPrepayID(now time.Time) string {
	for {
		id := newWechatPrepayIDValue(now)
		if _, taken := s.wechat.prepayIDs[id]; !taken {
			return id
		}
	}
}

func newWechatPrepayIDValue(now time.Time) string {
	return "wx" + now.In(cst).Format("20060102150405") + wechatHex(10)
}

// wechatH5URL is the h5_url of a prepay_id.
func wechatH5URL(prepayID string) string {
	return wechatH5Base + "?prepay_id=" + prepayID + "&package=" + wechatDigits(10)
}

func wechatPrepayIDAnswer(id string) wechatAnswer {
	return wechatJSON(http.StatusOK, struct {
		PrepayID string `json:"prepay_id"`
	}{id})
}

func wechatH5URLAnswer(u string) wechatAnswer {
	return wechatJSON(http.StatusOK, struct {
		H5URL string `json:"h5_url"`
	}{u})
}

// The words of the WeChat client and cashier when it refuses to pay (docs/channels.md §F2).
const (
	wxH5NotRegistered   = "商家存在未配置的参数，请联系商家解决"
	wxH5BadReferer      = "商家参数格式有误，请联系商家解决"
	wxH5OtherNetwork    = "网络环境未能通过安全验证，请稍后再试"
	wxH5InsideWechat    = "请在微信外打开订单，进行支付"
	wxH5Expired         = "支付链接已失效，请返回商家页面重新发起支付"
	wxPageNotRegistered = "当前页面的URL未注册"
	wxBadPaySign        = "支付验证签名失败"
	wxPrepayExpired     = "prepay_id已失效，请重新下单"
	wxPrepayUnknown     = "prepay_id不存在"
	wxWrongApp          = "商户号与AppID不匹配"
	wxWrongUser         = "当前用户与下单用户不一致，无法支付"
	wxNoUser            = "请先登录微信"
	wxBadPackage        = "支付参数错误：package"
)

// wxRefuse is a refusal of the WeChat client, in its words.
func wxRefuse(msg string) error { return orderpay.Errorf(orderpay.EINVALID, "%s", msg) }

// wechatPayInstruction is WeChat's client paying (or leaving unpaid) a jsapi, mini, h5 or
// app instruction, after the checks the real one makes:
//   - jsapi and mini: signType RSA, paySign (SHA256withRSA over appId, timeStamp, nonceStr
//     and package, each line ending in \n) with the merchant's key, the public key of its API
//     certificate; the appId the official account's (jsapi) or the mini program's (mini),
//     and the one the prepay was made for; a prepay_id that exists and has not expired (2 h);
//     for jsapi a page (Referer) under a registered pay directory (当前页面的URL未注册); and
//     the buyer is the one whose openid the prepay named;
//   - h5: not inside WeChat (a user agent with MicroMessenger: 请在微信外打开订单); a Referer
//     (none: 商家参数格式有误) on a registered H5 domain or a subdomain (else 商家存在未配置的
//     参数); a link at most 5 minutes old; the address the prepay named
//     (网络环境未能通过安全验证); afterwards the browser follows redirect_url (ReturnURL);
//   - app: partnerid the merchant, package Sign=WXPay, appid the app's, sign (over appid,
//     timestamp, noncestr and prepayid) with the merchant's key, the prepay_id alive (2 h).
//
// Each refusal is EINVALID in the client's words; an order already paid, closed or past its
// time_expire is ECONFLICT. Paying makes the order SUCCESS and notifies TRANSACTION.SUCCESS,
// as a scanned Native code does.
func (s *Simulator) wechatPayInstruction(ctx context.Context, a PayAs) (*PayResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := &s.keys.Wechat
	p := a.Pay
	if a.Buyer != "" {
		// WeChat's client knows who is signed in, whatever it is then asked to pay.
		s.mu.Lock()
		s.meetWechatBuyer(a.Buyer)
		s.mu.Unlock()
	}
	var (
		prepayID  string
		appid     string
		returnURL string
	)
	switch p.Method {
	case orderpay.MethodJSAPI, orderpay.MethodMini:
		appid = k.JSAPIAppID
		if p.Method == orderpay.MethodMini {
			appid = k.MiniAppID
		}
		id, ok := strings.CutPrefix(p.Field("package"), "prepay_id=")
		switch {
		case !ok || id == "":
			return nil, wxRefuse(wxBadPackage)
		case p.Field("signType") != "RSA":
			return nil, wxRefuse(wxBadPaySign)
		case !wechatPaySignVerifies(k.MerchantPublicKey, p.Field("paySign"), p.Field("appId"), p.Field("timeStamp"), p.Field("nonceStr"), p.Field("package")):
			return nil, wxRefuse(wxBadPaySign)
		case p.Field("appId") != appid:
			return nil, wxRefuse(wxWrongApp)
		case p.Method == orderpay.MethodJSAPI && !underJSAPIPath(a.Referer, k.JSAPIPaths):
			return nil, wxRefuse(wxPageNotRegistered + "：" + a.Referer)
		}
		prepayID = id
	case orderpay.MethodH5:
		u, err := url.Parse(p.Field("url"))
		if err != nil || u.Scheme+"://"+u.Host+u.Path != wechatH5Base || u.Query().Get("prepay_id") == "" {
			return nil, orderpay.Errorf(orderpay.ENOTFOUND, "not a WeChat Pay H5 link")
		}
		switch {
		case strings.Contains(a.UserAgent, "MicroMessenger"):
			return nil, wxRefuse(wxH5InsideWechat)
		case a.Referer == "":
			return nil, wxRefuse(wxH5BadReferer)
		case !onH5Domain(a.Referer, k.H5Domains):
			return nil, wxRefuse(wxH5NotRegistered)
		}
		prepayID, appid, returnURL = u.Query().Get("prepay_id"), k.AppID, u.Query().Get("redirect_url")
	case orderpay.MethodApp:
		appid = k.AppAppID
		switch {
		case p.Field("package") != "Sign=WXPay":
			return nil, wxRefuse(wxBadPackage)
		case p.Field("partnerid") != k.MchID:
			return nil, wxRefuse(wxWrongApp)
		case !wechatPaySignVerifies(k.MerchantPublicKey, p.Field("sign"), p.Field("appid"), p.Field("timestamp"), p.Field("noncestr"), p.Field("prepayid")):
			return nil, wxRefuse(wxBadPaySign)
		case p.Field("appid") != appid:
			return nil, wxRefuse(wxWrongApp)
		}
		prepayID = p.Field("prepayid")
	default:
		return nil, orderpay.Errorf(orderpay.EINVALID, "WeChat's client does not pay %s instructions", p.Method)
	}

	now := s.clock.Now()
	s.mu.Lock()
	pid := s.wechat.prepayIDs[prepayID]
	if pid != nil {
		s.wechat.touch(pid.order)
	}
	var err error
	switch {
	case pid == nil:
		err = wxRefuse(wxPrepayUnknown)
	case pid.order.prepay.appID != appid:
		err = wxRefuse(wxWrongApp)
	case !now.Before(pid.expiresAt) && p.Method == orderpay.MethodH5:
		err = orderpay.Errorf(orderpay.ECONFLICT, "%s", wxH5Expired)
	case !now.Before(pid.expiresAt):
		err = orderpay.Errorf(orderpay.ECONFLICT, "%s", wxPrepayExpired)
	case p.Method == orderpay.MethodH5 && !net.ParseIP(pid.clientIP).Equal(net.ParseIP(a.ClientIP)):
		err = wxRefuse(wxH5OtherNetwork)
	}
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	o := pid.order
	// The buyer: who is signed in to WeChat. A JSAPI order is paid only by the user it names.
	var openID string
	if a.Buyer != "" {
		openID = s.openID(a.Buyer, appid)
	}
	switch {
	case o.prepay.tradeType == wechatTradeJSAPI && a.Buyer == "":
		err = wxRefuse(wxNoUser)
	case o.prepay.tradeType == wechatTradeJSAPI && openID != o.prepay.openID:
		err = wxRefuse(wxWrongUser)
	default:
		err = o.payable(now)
	}
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if openID == "" {
		openID = newWechatOpenID() // a buyer the test did not name
	}
	o.scanned = true
	var note *outgoingNotification
	if a.Action == WalletPay {
		note = s.wechatPayOrder(o, now, openID)
	}
	res := wechatPayResult(o, now)
	res.ReturnURL = returnURL
	s.mu.Unlock()
	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, nil
}

// wechatPaySignVerifies checks a client-side pay signature: SHA256withRSA with the
// merchant's key over the four values, each line ending in \n (JSAPI and mini program:
// appId, timeStamp, nonceStr, package; App: appid, timestamp, noncestr, prepayid).
func wechatPaySignVerifies(merchant *rsa.PublicKey, sig string, lines ...string) bool {
	if sig == "" {
		return false
	}
	return VerifySHA256RSA(merchant, []byte(strings.Join(lines, "\n")+"\n"), sig) == nil
}

// meetWechatBuyer keeps buyer's openid for every appid bound to the merchant, so that a
// prepay naming one of them for another appid is refused. The caller holds s.mu.
func (s *Simulator) meetWechatBuyer(buyer string) {
	if s.wechat.buyers[buyer] {
		return
	}
	s.wechat.buyers[buyer] = true
	k := &s.keys.Wechat
	for _, appid := range []string{k.AppID, k.JSAPIAppID, k.MiniAppID, k.AppAppID} {
		s.wechat.openIDs[s.openID(buyer, appid)] = appid
	}
}

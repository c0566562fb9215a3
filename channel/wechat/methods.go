package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/app"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/h5"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/jsapi"

	"orderpay"
)

// The pay methods beside Native (docs/channels.md §F2). Each places an order of its own kind
// under the same out_trade_no rules, and each order is queried, closed, refunded and
// notified exactly as a Native one is (by out_trade_no and mchid): only the prepay and what
// the buyer's device is handed differ.
//
//   - jsapi (an official account's page) and mini (a mini program): POST
//     /v3/pay/transactions/jsapi with that app's appid and payer.openid, the buyer's openid
//     for that appid; the device gets appId, timeStamp, nonceStr, package (prepay_id=…),
//     signType RSA and paySign, SHA256withRSA with the merchant key over the first four, one
//     line each (the SDK's PrepayWithRequestPayment). A prepay_id works for 2 h.
//   - h5 (a phone's browser outside WeChat): POST /v3/pay/transactions/h5 with
//     scene_info.payer_client_ip, the buyer's address, and h5_info.type Wap; the device opens
//     the h5_url with &redirect_url= and the URL-encoded return address appended. The link
//     works for 5 minutes, from a page on a registered H5 domain, from that address.
//   - app (the shop's own app): POST /v3/pay/transactions/app with the app's appid; the
//     app SDK gets appid, partnerid (the mchid), prepayid, package Sign=WXPay, noncestr,
//     timestamp and sign, over appid, timestamp, noncestr and prepayid. 2 h.
//
// Asked again for the same out_trade_no with the same parameters, WeChat gives a new
// prepay_id; the instruction's expiry (QRExpiresAt) is the earlier of the deadline and the
// call's start plus the prepay's lifetime.

// Defaults of the official account's web OAuth (snsapi_base).
const (
	// DefaultOAuthAPI is where the OAuth code is exchanged for the openid.
	DefaultOAuthAPI = "https://api.weixin.qq.com"
	// DefaultOAuthAuthorize is the authorize page a buyer's browser is sent to.
	DefaultOAuthAuthorize = "https://open.weixin.qq.com/connect/oauth2/authorize"
)

// methodConfig is what the methods beside Native need: the apps' appids, the registered
// pages, and the official account's OAuth.
type methodConfig struct {
	jsapiAppID, miniAppID, appAppID string
	h5Domains, jsapiPaths           []string
	oauthSecret                     string
	oauthAPI, oauthAuthorize        string
	oauthClient                     *http.Client
}

func newMethodConfig(cfg Config, hc *http.Client) methodConfig {
	m := methodConfig{
		jsapiAppID: cfg.JSAPIAppID, miniAppID: cfg.MiniAppID, appAppID: cfg.AppAppID,
		h5Domains: slices.Clone(cfg.H5Domains), jsapiPaths: slices.Clone(cfg.JSAPIPaths),
		oauthSecret: cfg.OAuthSecret, oauthAPI: DefaultOAuthAPI, oauthAuthorize: DefaultOAuthAuthorize,
	}
	if cfg.OAuthBaseURL != "" {
		base := strings.TrimSuffix(cfg.OAuthBaseURL, "/")
		m.oauthAPI, m.oauthAuthorize = base, base+"/connect/oauth2/authorize"
	}
	client := *hc
	if client.Timeout == 0 {
		client.Timeout = cfg.Timeout
	}
	// The OAuth calls go to hosts of their own: the transport that sends the SDK's calls to
	// BaseURL must leave them alone, and so it does (it rewrites only WeChat Pay's host).
	m.oauthClient = &client
	return m
}

var (
	// appIDPattern is the shape of a WeChat appid: wx and 16 hex digits.
	appIDPattern = regexp.MustCompile(`^wx[0-9a-fA-F]{16}$`)
	// hostLabel is one label of a host name.
	hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// checkMethods checks the methods' settings: appids of WeChat's shape, H5 domains that are
// host names, JSAPI paths that are pay directories, an OAuth base that is a scheme and host.
func (cfg Config) checkMethods() error {
	for name, id := range map[string]string{"JSAPIAppID": cfg.JSAPIAppID, "MiniAppID": cfg.MiniAppID, "AppAppID": cfg.AppAppID} {
		if id != "" && !appIDPattern.MatchString(id) {
			return fmt.Errorf("wechat: %s %q is not an appid (wx and 16 hex digits)", name, id)
		}
	}
	for _, d := range cfg.H5Domains {
		if !ValidH5Domain(d) {
			return fmt.Errorf("wechat: H5Domains: %q is not a host name", d)
		}
	}
	for _, p := range cfg.JSAPIPaths {
		if err := CheckJSAPIPath(p); err != nil {
			return fmt.Errorf("wechat: JSAPIPaths: %w", err)
		}
	}
	if cfg.OAuthBaseURL != "" {
		u, err := url.Parse(cfg.OAuthBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return errors.New("wechat: OAuthBaseURL must be an http(s) scheme and host, without path or query")
		}
	}
	return nil
}

// ValidH5Domain reports whether d can be a registered H5 domain: a host name in lowercase
// (no scheme, port or path), or an IP address.
func ValidH5Domain(d string) bool {
	if net.ParseIP(d) != nil {
		return true
	}
	if d == "" || len(d) > 253 {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if !hostLabel.MatchString(label) {
			return false
		}
	}
	return true
}

// CheckJSAPIPath is nil when p can be a registered JSAPI pay directory (支付授权目录): an
// http(s) URL of a host and a path ending in "/", without query or fragment, e.g.
// https://shop.example.com/pay/.
func CheckJSAPIPath(p string) error {
	u, err := url.Parse(p)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		!strings.HasPrefix(u.Path, "/") || !strings.HasSuffix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a pay directory: an http(s) URL of a host and a path ending in /, such as https://shop.example.com/pay/", p)
	}
	return nil
}

// PayMethods says, for each method WeChat Pay offers (orderpay.ChannelMethods), what this
// adapter still needs to pay by it: "" when it is ready, else the channels file's keys to
// set. Native needs nothing beyond the merchant's credentials.
func (c *Channel) PayMethods() map[orderpay.PayMethod]string {
	out := map[orderpay.PayMethod]string{}
	for _, m := range orderpay.ChannelMethods[orderpay.ChannelWechat] {
		out[m] = c.methods.missing(m)
	}
	return out
}

// missing names the settings method m lacks, as the channels file's keys (what an operator
// writes, never the Config fields behind them), or "".
func (m methodConfig) missing(method orderpay.PayMethod) string {
	var keys []string
	switch method {
	case orderpay.MethodJSAPI:
		if m.jsapiAppID == "" {
			keys = append(keys, "jsapi_appid (the official account's appid)")
		}
		if len(m.jsapiPaths) == 0 {
			keys = append(keys, "jsapi_paths (the registered JSAPI pay directories)")
		}
	case orderpay.MethodMini:
		if m.miniAppID == "" {
			keys = append(keys, "mini_appid (the mini program's appid)")
		}
	case orderpay.MethodH5:
		if len(m.h5Domains) == 0 {
			keys = append(keys, "h5_domains (the registered H5 domains)")
		}
	case orderpay.MethodApp:
		if m.appAppID == "" {
			keys = append(keys, "app_appid (the app's appid)")
		}
	case orderpay.MethodQR:
	default:
		return "WeChat Pay has no " + string(method) + " method"
	}
	if len(keys) == 0 {
		return ""
	}
	return "set " + strings.Join(keys, " and ") + " in [wechat] of the channels file"
}

// describeInto adds the methods' appids and registered pages to Describe's description.
func (m methodConfig) describeInto(d *orderpay.ChannelDescription) {
	d.JSAPIAppID, d.MiniAppID, d.AppAppID = m.jsapiAppID, m.miniAppID, m.appAppID
	d.H5Domains = append([]string(nil), m.h5Domains...)
	d.JSAPIPaths = append([]string(nil), m.jsapiPaths...)
	if m.oauthSecret != "" {
		d.OAuth = "snsapi_base at " + m.oauthAPI // never the secret
	}
}

// prepayMethod places a JSAPI, mini program, H5 or App order and builds what the buyer's
// device is handed. A method whose settings are missing, a request that lacks what its
// method needs (the payer's openid, the buyer's address) or breaks WeChat's rules is
// Rejected before anything is sent. Answers are classified as Native's (prepayFailed).
func (c *Channel) prepayMethod(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	reject := func(msg string) orderpay.PrecreateResult {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	if err := orderpay.CheckMethod(orderpay.ChannelWechat, req.Method); err != nil {
		return reject(orderpay.ErrorMessage(err))
	}
	if missing := c.methods.missing(req.Method); missing != "" {
		return reject(string(req.Method) + " is not set up: " + missing)
	}
	now := c.clock.Now()
	deadline := req.Deadline.Truncate(time.Second).In(cst)
	if msg := checkPrecreate(req, deadline, now); msg != "" {
		return reject(msg)
	}
	lifetime := orderpay.WechatPrepayLifetime
	switch req.Method {
	case orderpay.MethodJSAPI, orderpay.MethodMini:
		if req.Payer == "" || len(req.Payer) > 128 {
			return reject(fmt.Sprintf("%s needs the buyer's openid for appid %s (PrecreateRequest.Payer)", req.Method, c.appIDOf(req.Method)))
		}
	case orderpay.MethodH5:
		if net.ParseIP(req.ClientIP) == nil {
			return reject("h5 needs the buyer's IP address (PrecreateRequest.ClientIP): WeChat opens the link only from it")
		}
		if req.ReturnURL != "" {
			if u, err := url.Parse(req.ReturnURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return reject("the return address must be an absolute http(s) URL")
			}
		}
		lifetime = orderpay.WechatH5Lifetime
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	desc, no, notify := core.String(truncateRunes(req.Subject, maxDescription)), core.String(req.OutTradeNo), core.String(req.NotifyURL)
	appid, mchid := core.String(c.appIDOf(req.Method)), core.String(c.mchID)
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown}
	var (
		pay    *orderpay.PayInstruction
		result *core.APIResult
		err    error
	)
	switch req.Method {
	case orderpay.MethodJSAPI, orderpay.MethodMini:
		var resp *jsapi.PrepayWithRequestPaymentResponse
		resp, result, err = c.jsapi.PrepayWithRequestPayment(ctx, jsapi.PrepayRequest{
			Appid: appid, Mchid: mchid, Description: desc, OutTradeNo: no, TimeExpire: core.Time(deadline), NotifyUrl: notify,
			Amount: &jsapi.Amount{Total: core.Int64(req.Amount), Currency: core.String(currency)},
			Payer:  &jsapi.Payer{Openid: core.String(req.Payer)},
		})
		if err == nil && resp != nil && deref(resp.PrepayId) != "" {
			pay = orderpay.NewInstruction(orderpay.ChannelWechat, req.Method, "appId", deref(resp.Appid), "timeStamp", deref(resp.TimeStamp),
				"nonceStr", deref(resp.NonceStr), "package", deref(resp.Package), "signType", deref(resp.SignType), "paySign", deref(resp.PaySign))
		}
	case orderpay.MethodH5:
		var resp *h5.PrepayResponse
		resp, result, err = c.h5.Prepay(ctx, h5.PrepayRequest{
			Appid: appid, Mchid: mchid, Description: desc, OutTradeNo: no, TimeExpire: core.Time(deadline), NotifyUrl: notify,
			Amount:    &h5.Amount{Total: core.Int64(req.Amount), Currency: core.String(currency)},
			SceneInfo: &h5.SceneInfo{PayerClientIp: core.String(req.ClientIP), H5Info: &h5.H5Info{Type: core.String("Wap")}},
		})
		if err == nil && resp != nil && strings.HasPrefix(deref(resp.H5Url), "https://") {
			link := *resp.H5Url
			if req.ReturnURL != "" {
				link += "&redirect_url=" + url.QueryEscape(req.ReturnURL)
			}
			pay = orderpay.NewInstruction(orderpay.ChannelWechat, req.Method, "url", link)
		}
	case orderpay.MethodApp:
		var resp *app.PrepayWithRequestPaymentResponse
		resp, result, err = c.app.PrepayWithRequestPayment(ctx, app.PrepayRequest{
			Appid: appid, Mchid: mchid, Description: desc, OutTradeNo: no, TimeExpire: core.Time(deadline), NotifyUrl: notify,
			Amount: &app.Amount{Total: core.Int64(req.Amount), Currency: core.String(currency)},
		})
		if err == nil && resp != nil && deref(resp.PrepayId) != "" {
			pay = orderpay.NewInstruction(orderpay.ChannelWechat, req.Method, "appid", *appid, "partnerid", deref(resp.PartnerId),
				"prepayid", deref(resp.PrepayId), "package", deref(resp.Package), "noncestr", deref(resp.NonceStr),
				"timestamp", deref(resp.TimeStamp), "sign", deref(resp.Sign))
		}
	}
	res.Raw = ex.raw()
	if err != nil {
		return prepayFailed(res, err, result)
	}
	res.Detail = statusDetail(result)
	if pay == nil {
		res.Detail += ": no prepay_id or h5_url"
		return res
	}
	if err := pay.Check(); err != nil {
		// The prepay happened; what the device would be handed is not whole: ask again.
		res.Detail += ": " + orderpay.ErrorMessage(err)
		return res
	}
	res.Outcome, res.Pay = orderpay.OutcomeAccepted, pay
	res.QRExpiresAt = deadline
	if end := now.Add(lifetime); end.Before(deadline) {
		res.QRExpiresAt = end
	}
	return res
}

// appIDOf is the appid orders of method are made for.
func (m methodConfig) appIDOf(method orderpay.PayMethod) string {
	switch method {
	case orderpay.MethodJSAPI:
		return m.jsapiAppID
	case orderpay.MethodMini:
		return m.miniAppID
	case orderpay.MethodApp:
		return m.appAppID
	}
	return ""
}

// appIDOf is the appid orders of method are made for: the official account's, the mini
// program's or the app's, and the main one for Native and H5.
func (c *Channel) appIDOf(method orderpay.PayMethod) string {
	if id := c.methods.appIDOf(method); id != "" {
		return id
	}
	return c.appID
}

// AuthorizeURL is where a JSAPI page sends the buyer's browser, inside WeChat, to learn the
// buyer's openid for the official account (web OAuth, snsapi_base: the buyer sees nothing):
// WeChat sends the browser back to redirectURI with ?code=…&state=state, and OpenID
// exchanges the code. redirectURI must be on the official account's web OAuth domain.
func (c *Channel) AuthorizeURL(redirectURI, state string) (string, error) {
	if c.methods.jsapiAppID == "" {
		return "", errors.New("wechat: the official account's web OAuth needs jsapi_appid in [wechat] of the channels file")
	}
	v := url.Values{"appid": {c.methods.jsapiAppID}, "redirect_uri": {redirectURI}, "response_type": {"code"},
		"scope": {"snsapi_base"}, "state": {state}}
	return c.methods.oauthAuthorize + "?" + v.Encode() + "#wechat_redirect", nil
}

// OpenID exchanges a code of the official account's web OAuth (snsapi_base) for the
// buyer's openid for the official account's appid (GET /sns/oauth2/access_token with the
// AppSecret). A code works once, for 5 minutes. WeChat's refusal ({"errcode","errmsg"}) is
// EUNAUTHORIZED for a code it does not take and EINVALID for the merchant's own settings; no
// answer, or one that cannot be read, is a plain error (try again). The secret is never part
// of an error.
func (c *Channel) OpenID(ctx context.Context, code string) (string, error) {
	m := c.methods
	if m.jsapiAppID == "" || m.oauthSecret == "" {
		return "", orderpay.Errorf(orderpay.EINVALID, "the official account's web OAuth needs jsapi_appid and oauth_secret_file in [wechat] of the channels file")
	}
	if code == "" {
		return "", orderpay.Errorf(orderpay.EINVALID, "no OAuth code")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v := url.Values{"appid": {m.jsapiAppID}, "secret": {m.oauthSecret}, "code": {code}, "grant_type": {"authorization_code"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.oauthAPI+"/sns/oauth2/access_token?"+v.Encode(), nil)
	if err != nil {
		return "", errors.New("wechat: OAuth: bad base URL")
	}
	resp, err := m.oauthClient.Do(req)
	if err != nil {
		// The URL holds the secret: say only what failed.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("wechat: OAuth code exchange: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return "", fmt.Errorf("wechat: OAuth code exchange: %v", err)
	}
	var out struct {
		OpenID  string `json:"openid"`
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
		return "", fmt.Errorf("wechat: OAuth code exchange answered HTTP %d", resp.StatusCode)
	}
	switch {
	case out.ErrCode == 40029 || out.ErrCode == 40163:
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "WeChat does not take this OAuth code (%d %s): it is wrong, used or older than 5 minutes", out.ErrCode, out.ErrMsg)
	case out.ErrCode != 0:
		return "", orderpay.Errorf(orderpay.EINVALID, "WeChat refused the OAuth code exchange (%d %s): check jsapi_appid and oauth_secret_file", out.ErrCode, out.ErrMsg)
	case out.OpenID == "":
		return "", errors.New("wechat: OAuth code exchange answered no openid")
	}
	return out.OpenID, nil
}

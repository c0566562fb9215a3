package sim

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"time"
)

// The official account's web OAuth, snsapi_base (静默授权): how a shop's JSAPI page learns
// the buyer's openid. The page sends the buyer to WeChat's authorize page, which sends the
// browser back to redirect_uri with a code; the shop's server exchanges the code, with the
// official account's AppSecret, for the openid.
//
//	GET /connect/oauth2/authorize?appid&redirect_uri&response_type=code&scope=snsapi_base&state&buyer=NAME
//	    (also at /sim/wechat/oauth2/authorize): 302 to redirect_uri?code=CODE&state=STATE.
//	    buyer names the simulated user signed in to WeChat, which a real browser inside
//	    WeChat carries by itself.
//	GET /sns/oauth2/access_token?appid&secret&code&grant_type=authorization_code:
//	    {"access_token","expires_in":7200,"refresh_token","openid","scope"}, or WeChat's
//	    {"errcode","errmsg"} (HTTP 200 either way, as WeChat answers).
//
// A code works once, for 5 minutes (code只能使用一次，5分钟未被使用自动过期). The redirect_uri
// must be on the official account's web OAuth domain (网页授权域名): the simulator takes the
// hosts of the registered JSAPI pay directories as that domain.

// wechatOAuthCodeLife is how long an OAuth code can be exchanged.
const wechatOAuthCodeLife = 5 * time.Minute

// wechatOAuthCode is one code the authorize page gave.
type wechatOAuthCode struct {
	appid, openID, scope string
	createdAt            time.Time
	used                 bool
}

func (s *Simulator) registerWechatOAuth(mux *http.ServeMux) {
	mux.HandleFunc("GET /connect/oauth2/authorize", s.serveWechatAuthorize)
	mux.HandleFunc("GET /sim/wechat/oauth2/authorize", s.serveWechatAuthorize)
	mux.HandleFunc("GET /sns/oauth2/access_token", s.serveWechatAccessToken)
}

// serveWechatAuthorize is the authorize page: the signed-in buyer agrees silently
// (snsapi_base) and the browser goes back to redirect_uri with a code.
func (s *Simulator) serveWechatAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k := &s.keys.Wechat
	refuse := func(msg string) { http.Error(w, msg, http.StatusBadRequest) }
	back, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("appid") != k.JSAPIAppID:
		refuse("appid参数错误：不是本商户的公众号")
		return
	case q.Get("response_type") != "code":
		refuse("response_type参数错误")
		return
	case q.Get("scope") != "snsapi_base" && q.Get("scope") != "snsapi_userinfo":
		refuse("scope参数错误或没有scope权限")
		return
	case err != nil || (back.Scheme != "http" && back.Scheme != "https") || !s.onOAuthDomain(back):
		refuse("redirect_uri域名与后台配置不一致，错误码：10003")
		return
	case q.Get("buyer") == "" || len(q.Get("buyer")) > 64:
		refuse("buyer is required (at most 64 bytes): the simulated user signed in to WeChat")
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.meetWechatBuyer(q.Get("buyer"))
	code := newWechatNonce(32)
	for s.wechat.oauthCodes[code] != nil {
		code = newWechatNonce(32)
	}
	s.wechat.oauthCodes[code] = &wechatOAuthCode{appid: k.JSAPIAppID, openID: s.openID(q.Get("buyer"), k.JSAPIAppID), scope: q.Get("scope"), createdAt: now}
	s.mu.Unlock()
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// onOAuthDomain reports whether u is on a host of a registered JSAPI pay directory.
func (s *Simulator) onOAuthDomain(u *url.URL) bool {
	for _, d := range s.keys.Wechat.JSAPIPaths {
		if dir, err := parseJSAPIPath(d); err == nil && dir.Hostname() == u.Hostname() {
			return true
		}
	}
	return false
}

// wechatOAuthError is WeChat's error answer to an OAuth call.
type wechatOAuthError struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// serveWechatAccessToken exchanges a code for the buyer's openid, given the official
// account's AppSecret.
func (s *Simulator) serveWechatAccessToken(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k := &s.keys.Wechat
	answer := func(code int, msg string) { writeJSON(w, http.StatusOK, wechatOAuthError{code, msg}) }
	switch {
	case q.Get("appid") != k.JSAPIAppID:
		answer(40013, "invalid appid")
		return
	case subtle.ConstantTimeCompare([]byte(q.Get("secret")), []byte(k.OAuthSecret)) != 1:
		answer(40125, "invalid appsecret")
		return
	case q.Get("grant_type") != "authorization_code":
		answer(40002, "invalid grant_type")
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	c := s.wechat.oauthCodes[q.Get("code")]
	var used bool
	if c != nil {
		used = c.used
		c.used = true
	}
	s.mu.Unlock()
	switch {
	case c == nil || c.appid != q.Get("appid") || !now.Before(c.createdAt.Add(wechatOAuthCodeLife)):
		answer(40029, "invalid code")
		return
	case used:
		answer(40163, "code been used")
		return
	}
	writeJSON(w, http.StatusOK, struct {
		AccessToken  string `json:"access_token"`
		ExpiresIn    int    `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
		OpenID       string `json:"openid"`
		Scope        string `json:"scope"`
	}{newWechatNonce(64), 7200, newWechatNonce(64), c.openID, c.scope})
}

package sim

import (
	"cmp"
	"crypto/rand"
	"net/http"
	"net/url"
	"strings"
	"time"

	"orderpay"
)

// How a shop learns an Alipay buyer's user id, for alipay.trade.create's buyer_id (in-app
// payments, docs/channels.md §A6): the buyer's browser (or mini program, with my.getAuthCode)
// visits Alipay's authorisation page, which sends it back to the shop's redirect_uri with an
// auth_code; the shop's server exchanges the code with alipay.system.oauth.token for the
// buyer's user_id. The simulated page has no login: the buyer is named in the query.

const (
	// alipayOauthPath is the simulated authorisation page.
	alipayOauthPath = "/sim/alipay/oauth"
	// alipayOauthTokenMethod exchanges a code for the buyer's user id.
	alipayOauthTokenMethod = "alipay.system.oauth.token"
	// alipayAuthCodeLifetime is how long an auth_code can be exchanged, once. Alipay's own
	// lifetime is unverified; codes are short-lived and single-use there too.
	alipayAuthCodeLifetime = 5 * time.Minute
	// alipayAccessTokenLifetime and alipayRefreshTokenLifetime are what the token call
	// answers as expires_in and re_expires_in.
	alipayAccessTokenLifetime  = 24 * time.Hour
	alipayRefreshTokenLifetime = 30 * 24 * time.Hour
)

// alipayAuthCode is one code the authorisation page handed out.
type alipayAuthCode struct {
	userID    string
	expiresAt time.Time
	used      bool
}

// serveAlipayOauth is the authorisation page, GET /sim/alipay/oauth (and
// /oauth2/publicAppAuthorize.htm, the path of Alipay's own page, so that a URL made by an
// SDK's PublicAppAuthorize works once its host is the simulator's):
//
//	?buyer=NAME&redirect_uri=URL[&app_id=APPID][&scope=auth_base|auth_user][&state=S]
//
// It answers 302 to redirect_uri with app_id, source=alipay_wallet, scope, auth_code and
// state added to its query: the code gives buyer's user id (IdentityOf, the same whichever
// of the merchant's apps asks) to alipay.system.oauth.token, once, within
// alipayAuthCodeLifetime. app_id may name any of the merchant's apps (the main one by
// default); a missing buyer or redirect_uri, or another merchant's app_id, is 400.
func (s *Simulator) serveAlipayOauth(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	buyer, redirect := q.Get("buyer"), q.Get("redirect_uri")
	app := s.alipayMain
	switch appID := q.Get("app_id"); {
	case buyer == "" || len(buyer) > 64:
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "buyer is required, at most 64 bytes: the simulated page has no login"))
		return
	case redirect == "" || !absoluteHTTPURL(redirect):
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "redirect_uri must be an absolute http(s) URL"))
		return
	case appID != "" && s.alipayApps[appID] == nil:
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "app_id %s is not this merchant's app", appID))
		return
	case appID != "":
		app = s.alipayApps[appID]
	}
	code := s.NewAlipayAuthCode(buyer)
	u, _ := url.Parse(redirect) // checked above
	back := u.Query()
	back.Set("app_id", app.AppID)
	back.Set("source", "alipay_wallet")
	back.Set("scope", cmp.Or(q.Get("scope"), "auth_base"))
	back.Set("auth_code", code)
	if st := q.Get("state"); st != "" {
		back.Set("state", st)
	}
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// NewAlipayAuthCode is an auth_code for buyer, as the authorisation page hands it out:
// alipay.system.oauth.token exchanges it, once, for buyer's Alipay user id.
func (s *Simulator) NewAlipayAuthCode(buyer string) string {
	code := strings.ToLower(rand.Text())
	user := s.alipayUserID(buyer)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alipay.authCodes[code] = &alipayAuthCode{userID: user, expiresAt: now.Add(alipayAuthCodeLifetime)}
	return code
}

// alipayOauthToken serves alipay.system.oauth.token. grant_type=authorization_code with a
// code from the authorisation page answers the buyer's user_id with an access_token and a
// refresh_token; grant_type=refresh_token with that refresh_token answers new ones for the
// same user. A code used before, expired or unknown is 40002 isv.code-invalid (授权码code无效),
// an unknown refresh token isv.refresh-token-invalid, another grant_type
// isv.grant-type-invalid; the gateway writes refusals under error_response.
func (s *Simulator) alipayOauthToken(params url.Values) alipayReply {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var user string
	switch params.Get("grant_type") {
	case "authorization_code":
		c := s.alipay.authCodes[params.Get("code")]
		if c == nil || c.used || !now.Before(c.expiresAt) {
			return alipayFailure("40002", "isv.code-invalid", "授权码code无效")
		}
		c.used = true
		user = c.userID
	case "refresh_token":
		user = s.alipay.refreshTokens[params.Get("refresh_token")]
		if user == "" {
			return alipayFailure("40002", "isv.refresh-token-invalid", "刷新令牌refresh_token无效")
		}
	default:
		return alipayFailure("40002", "isv.grant-type-invalid", "grant_type参数不正确")
	}
	refresh := "authbseB" + strings.ToLower(rand.Text())
	s.alipay.refreshTokens[refresh] = user
	r := alipaySuccess()
	r.UserID = user
	r.AccessToken = "authbseB" + strings.ToLower(rand.Text())
	r.ExpiresIn = int64(alipayAccessTokenLifetime / time.Second)
	r.RefreshToken = refresh
	r.ReExpiresIn = int64(alipayRefreshTokenLifetime / time.Second)
	r.AuthStart = now.In(cst).Format(alipayTimeLayout)
	return r
}

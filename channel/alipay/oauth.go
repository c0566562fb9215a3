package alipay

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// The buyer's Alipay user id, for in-app payments (alipay.trade.create's buyer_id), comes
// from Alipay's web OAuth (docs/channels.md §A6): the buyer's browser inside Alipay visits
// the open platform's authorisation page (publicAppAuthorize.htm, scope auth_base: the
// buyer sees nothing), which sends it back to the shop's redirect_uri with an auth_code;
// the shop's server exchanges the code with alipay.system.oauth.token for the user id.

// authorizePath is where the open platform's authorisation page lives on its host.
const authorizePath = "/oauth2/publicAppAuthorize.htm"

// authorizeHosts maps the gateway's host to the host of the authorisation page, for
// Alipay's own gateways; any other gateway (the simulator) serves the page itself.
var authorizeHosts = map[string]string{
	"openapi.alipay.com":               "openauth.alipay.com",
	"openapi-sandbox.dl.alipaydev.com": "openauth-sandbox.dl.alipaydev.com",
	"openapi.alipaydev.com":            "openauth.alipaydev.com",
}

// AuthorizeURL is where a page inside Alipay sends the buyer's browser to learn their user
// id (scope auth_base, no consent screen): Alipay sends the browser back to redirectURI
// with ?auth_code=…&state=state (and app_id, source, scope), and UserID exchanges the code.
// The page is the open platform's publicAppAuthorize.htm for Alipay's own gateways
// (production or sandbox), and the gateway's own host otherwise (the simulator).
// redirectURI must be an absolute http(s) URL on the app's authorised callback domain.
func (c *Channel) AuthorizeURL(redirectURI, state string) (string, error) {
	back, err := url.Parse(redirectURI)
	if err != nil || (back.Scheme != "http" && back.Scheme != "https") || back.Host == "" {
		return "", errors.New("alipay: OAuth redirect_uri must be an absolute http(s) URL")
	}
	gateway := c.gateway
	if gateway == "" {
		gateway = "https://openapi-sandbox.dl.alipaydev.com/gateway.do" // the SDK's default
	}
	g, err := url.Parse(gateway)
	if err != nil || g.Host == "" {
		return "", errors.New("alipay: the gateway URL has no host")
	}
	page := url.URL{Scheme: g.Scheme, Host: g.Host, Path: authorizePath}
	if host, ok := authorizeHosts[g.Hostname()]; ok {
		page = url.URL{Scheme: "https", Host: host, Path: authorizePath}
	}
	v := url.Values{"app_id": {c.appID}, "scope": {"auth_base"}, "redirect_uri": {redirectURI}}
	if state != "" {
		v.Set("state", state)
	}
	page.RawQuery = v.Encode()
	return page.String(), nil
}

// UserID exchanges an auth_code from the authorisation page for the buyer's Alipay user id
// (alipay.system.oauth.token, grant_type authorization_code), within the adapter's timeout.
// A code works once, for a short time. Alipay's refusal of the code (isv.code-invalid, and
// any other refusal of the call) is EUNAUTHORIZED; an answer without a user id of Alipay's
// shape is EINVALID; no answer, or one that does not verify, is a plain error (try again
// with a new code). Neither the code nor the tokens are part of an error or kept.
func (c *Channel) UserID(ctx context.Context, authCode string) (string, error) {
	if authCode == "" || len(authCode) > 128 {
		return "", orderpay.Errorf(orderpay.EINVALID, "no usable Alipay auth_code")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rsp, err := c.client.SystemOauthToken(ctx, sdk.SystemOauthToken{GrantType: "authorization_code", Code: authCode})
	var refusal *sdk.Error
	switch {
	case errors.As(err, &refusal) && refusal != nil && refusal.SubCode != "":
		// Alipay answers a refused exchange under error_response, unsigned: it says only
		// that this code gives nothing, which is all the caller acts on.
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "Alipay does not take this auth_code (%s): it is wrong, used or expired", refusal.SubCode)
	case err != nil:
		return "", fmt.Errorf("alipay: OAuth code exchange: %s", describeError(err))
	case rsp == nil:
		return "", errors.New("alipay: OAuth code exchange: empty response")
	case rsp.Code != "" && rsp.Code != sdk.CodeSuccess:
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "Alipay refused the auth_code: %s", describeCode(rsp.Error))
	case !userIDPattern.MatchString(rsp.UserId):
		return "", orderpay.Errorf(orderpay.EINVALID, "Alipay's OAuth answer has no user id of the form 2088 and 12 digits")
	}
	return rsp.UserId, nil
}

package alipay_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"orderpay"
)

// authCodeFor follows the adapter's authorisation URL at the simulator, signed in as buyer,
// and returns where the page sent the browser back to.
func authCodeFor(t *testing.T, authorize, buyer string) *url.URL {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authorize + "&buyer=" + url.QueryEscape(buyer))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("the authorisation page answered %d", resp.StatusCode)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// The web OAuth for the buyer's user id: the authorisation URL is the open platform's page
// at the gateway's host (the simulator's), with the app, auth_base, the redirect_uri and the
// state; the page sends the browser back with an auth_code, which UserID exchanges once for
// the buyer's user id. A used, unknown or empty code gives nothing.
func TestOAuth_AuthorizeURLAndUserID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const back = "http://127.0.0.1:8080/pay/2025031400000001/oauth/alipay"
	authorize, err := e.ch.AuthorizeURL(back, "signed-state")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authorize)
	q := u.Query()
	if u.Scheme+"://"+u.Host != e.srv.URL || u.Path != "/oauth2/publicAppAuthorize.htm" || q.Get("app_id") != e.keys.AppID ||
		q.Get("scope") != "auth_base" || q.Get("redirect_uri") != back || q.Get("state") != "signed-state" {
		t.Fatalf("authorize URL %s", authorize)
	}
	returned := authCodeFor(t, authorize, "alice")
	code := returned.Query().Get("auth_code")
	if !strings.HasPrefix(returned.String(), back+"?") || code == "" || returned.Query().Get("state") != "signed-state" {
		t.Fatalf("sent back to %s", returned)
	}
	ctx := context.Background()
	user, err := e.ch.UserID(ctx, code)
	if want := e.sim.IdentityOf("alice", "").AlipayUserID; err != nil || user != want {
		t.Fatalf("UserID = %q, %v; want alice's %s", user, err, want)
	}
	if _, err := e.ch.UserID(ctx, code); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("the same code again: %v; want EUNAUTHORIZED", err)
	}
	if _, err := e.ch.UserID(ctx, "not-a-code-alipay-gave"); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("an unknown code: %v; want EUNAUTHORIZED", err)
	}
	if _, err := e.ch.UserID(ctx, ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("no code: %v; want EINVALID", err)
	}
	if _, err := e.ch.AuthorizeURL("/pay/x/oauth/alipay", ""); err == nil {
		t.Fatal("a relative redirect_uri was taken")
	}
}

// Alipay's own gateways have their authorisation page on the open platform's host.
func TestOAuth_AuthorizePageOfAlipaysGateways(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for gateway, page := range map[string]string{
		"https://openapi.alipay.com/gateway.do":               "https://openauth.alipay.com/oauth2/publicAppAuthorize.htm?",
		"https://openapi-sandbox.dl.alipaydev.com/gateway.do": "https://openauth-sandbox.dl.alipaydev.com/oauth2/publicAppAuthorize.htm?",
	} {
		ch := newChannel(t, e.keys, gateway)
		got, err := ch.AuthorizeURL("https://shop.example/pay/1/oauth/alipay", "s")
		if err != nil || !strings.HasPrefix(got, page) {
			t.Errorf("gateway %s: authorize URL %s, %v", gateway, got, err)
		}
	}
}

// An answer that does not verify, or no answer at all, is an error that is not the code's
// refusal: the buyer may try again with a new code.
func TestOAuth_UnverifiedOrFailedExchangeIsNotAnIdentity(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, rewrite := range map[string]func(int, []byte) (int, []byte){
		"tampered": func(status int, body []byte) (int, []byte) {
			return status, bytes.Replace(body, []byte(`"user_id":"2088`), []byte(`"user_id":"2089`), 1)
		},
		"http 500": func(int, []byte) (int, []byte) { return http.StatusInternalServerError, []byte("busy") },
	} {
		ch := newChannel(t, e.keys, gw(proxy(t, e, rewrite)))
		code := e.sim.NewAlipayAuthCode("bob")
		user, err := ch.UserID(context.Background(), code)
		if err == nil || user != "" || orderpay.ErrorCode(err) == orderpay.EUNAUTHORIZED {
			t.Errorf("%s: UserID = %q, %v; want a plain error", name, user, err)
		}
	}
}

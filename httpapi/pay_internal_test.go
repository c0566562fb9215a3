package httpapi

import (
	"net/http/httptest"
	"testing"

	"orderpay"
	"orderpay/buyerauth"
)

// The buyer's own address is the request's peer; through a trusted proxy it is the last
// address X-Forwarded-For names that is not a proxy's, else X-Real-IP. From anyone else
// those headers are not believed.
func TestClientIP(t *testing.T) {
	proxies, err := buyerauth.ParseCIDRs("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{TrustedProxies: proxies}
	for _, tc := range []struct {
		peer, xff, real, want string
	}{
		{"198.51.100.7:4000", "", "", "198.51.100.7"},
		{"198.51.100.7:4000", "203.0.113.9", "203.0.113.8", "198.51.100.7"}, // not a proxy: its headers are the client's words
		{"10.0.0.2:4000", "203.0.113.9", "", "203.0.113.9"},
		{"10.0.0.2:4000", "192.0.2.1, 203.0.113.9, 10.0.0.3", "", "203.0.113.9"}, // the last hop not ours
		{"10.0.0.2:4000", "", "203.0.113.8", "203.0.113.8"},
		{"10.0.0.2:4000", "not-an-address", "", "10.0.0.2"},
	} {
		r := httptest.NewRequest("POST", "/v1/orders/1/pay", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if tc.real != "" {
			r.Header.Set("X-Real-IP", tc.real)
		}
		if got := s.clientIP(r); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q, X-Real-IP %q: %s, want %s", tc.peer, tc.xff, tc.real, got, tc.want)
		}
	}
}

// A method that pays for one wallet user needs the payer: in the demo from the request, with
// a login from the login alone (a request that names one is refused); a method that names
// none needs none.
func TestPayer(t *testing.T) {
	demo := &Server{}
	r := httptest.NewRequest("POST", "/v1/orders/1/pay", nil)
	if got, err := demo.payer(r, orderpay.ChannelWechat, orderpay.MethodJSAPI, "oABCDEF_openid", ""); err != nil || got != "oABCDEF_openid" {
		t.Errorf("demo jsapi: %q, %v", got, err)
	}
	if _, err := demo.payer(r, orderpay.ChannelWechat, orderpay.MethodJSAPI, "", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("demo jsapi without an openid: %v", err)
	}
	if _, err := demo.payer(r, orderpay.ChannelAlipay, orderpay.MethodInApp, "", "2088 0001"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("demo inapp with a malformed user id: %v", err)
	}
	if got, err := demo.payer(r, orderpay.ChannelWechat, orderpay.MethodH5, "oIgnored", ""); err != nil || got != "" {
		t.Errorf("demo h5 names no payer: %q, %v", got, err)
	}
	proxies, err := buyerauth.ParseCIDRs("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := buyerauth.New(t.Context(), buyerauth.Config{Mode: buyerauth.ModeHeader, TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Buyers: gw, WalletAppID: func(string, orderpay.PayMethod) string { return "wxmp01" }}
	r = httptest.NewRequest("POST", "/v1/orders/1/pay", nil)
	r.RemoteAddr = "10.0.0.2:1"
	r.Header.Set("X-Buyer-Id", "alice")
	r.Header.Set("X-Buyer-Openid-wxmp01", "oALICE_mp_openid")
	if got, err := s.payer(r, orderpay.ChannelWechat, orderpay.MethodJSAPI, "", ""); err != nil || got != "oALICE_mp_openid" {
		t.Errorf("jsapi through the gateway: %q, %v", got, err)
	}
	if _, err := s.payer(r, orderpay.ChannelWechat, orderpay.MethodJSAPI, "oSOMEONE_else", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("a request naming the payer under a login: %v", err)
	}
	if _, err := s.payer(r, orderpay.ChannelAlipay, orderpay.MethodInApp, "", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("inapp with no Alipay user id from the gateway: %v", err)
	}
}

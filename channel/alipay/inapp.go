package alipay

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"orderpay"
)

// In-app payments under an app of their own (Config.InApp): a merchant's mini program is an
// app of its own on the open platform, with its own id and keys, and the trades it makes
// (alipay.trade.create) are that app's. The adapter of the main app holds an adapter of the
// in-app app, built from the same configuration but for the app's id and keys: the same
// seller, gateway, HTTP client, timeout and clock. The payment center reaches it through
// ForMethod (orderpay.ChannelFor) for every call about an in-app attempt; notifications come
// to the one notify URL and are verified by the adapter of the app they name.
//
// An app answers ACQ.TRADE_NOT_EXIST for a trade of another app of the same merchant; no
// answer of the in-app app is taken as "no such trade" before the main app has said it too:
// an in-app trade made under the main app (before inapp_app_id was set) stays reachable. The
// main app's own answers are never checked with the in-app app: its methods are its own.

// mainAppSays starts the detail of an answer the main app gave for a trade the in-app app
// does not know.
const mainAppSays = "not the in-app app's trade; the main app's answer: "

// inAppFields are the field references of an error of the in-app app's own adapter.
var inAppFields = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// newInApp is the adapter of cfg.InApp: cfg with the in-app app's id and keys, sharing
// client's connections.
func newInApp(cfg Config, client *http.Client) (*Channel, error) {
	in := cfg.InApp
	switch {
	case in.AppID == "":
		return nil, fieldError("{InApp.AppID} is required", nil)
	case in.AppID == cfg.AppID:
		return nil, fieldError("{InApp.AppID} is {AppID}: leave InApp out to make in-app payments under AppID", nil)
	}
	sub := Config{AppID: in.AppID, SellerID: cfg.SellerID, AppPrivateKeyPEM: in.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: in.AlipayPublicKeyPEM, AppCertPEM: in.AppCertPEM, AlipayCertPEM: in.AlipayCertPEM,
		AlipayRootCertPEM: in.AlipayRootCertPEM, GatewayURL: cfg.GatewayURL, HTTPClient: client, Timeout: cfg.Timeout,
		Clock: cfg.Clock}
	c, err := New(sub)
	if err != nil {
		if fe, ok := errors.AsType[*orderpay.FieldError](err); ok {
			// The in-app app's own fields: InApp's.
			return nil, fieldError("in-app app "+in.AppID+": "+inAppFields.ReplaceAllString(fe.Text, "{InApp.$1}"), fe.Err)
		}
		return nil, fmt.Errorf("alipay: in-app app %s: %s", in.AppID, strings.TrimPrefix(err.Error(), "alipay: "))
	}
	return c, nil
}

var _ orderpay.MethodChannels = (*Channel)(nil)

// ForMethod is the adapter trades of method m are made under: the in-app app's for
// MethodInApp when there is one, c itself otherwise.
func (c *Channel) ForMethod(m orderpay.PayMethod) orderpay.Channel {
	if m == orderpay.MethodInApp && c.inApp != nil {
		return c.inApp
	}
	return c
}

// inAppChannel is the adapter that makes in-app trades: the in-app app's, or c.
func (c *Channel) inAppChannel() *Channel {
	if c.inApp != nil {
		return c.inApp
	}
	return c
}

// PayMethods says, for each method Alipay offers, what the configuration still needs for it:
// nothing, for any (an in-app payment's buyer comes with each request). Which app each is
// made under is ForMethod's.
func (c *Channel) PayMethods() map[orderpay.PayMethod]string {
	out := map[orderpay.PayMethod]string{}
	for _, m := range orderpay.ChannelMethods[orderpay.ChannelAlipay] {
		out[m] = ""
	}
	return out
}

package chaos

import (
	"fmt"
	"slices"
	"strings"

	"orderpay"
)

// PayWay is one way for a buyer's device to pay: a channel and one of its methods
// (docs/api.md, "Ways to pay").
type PayWay struct {
	Channel string
	Method  orderpay.PayMethod
}

// String is the way as --methods and the report name it: "alipay:wap".
func (w PayWay) String() string { return w.Channel + ":" + string(w.Method) }

// ParsePayWay reads "channel:method", a method the channel offers.
func ParsePayWay(s string) (PayWay, error) {
	ch, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	w := PayWay{Channel: ch, Method: orderpay.PayMethod(m)}
	if !ok {
		return w, fmt.Errorf("%q is not channel:method (alipay:wap, wechat:h5, …)", s)
	}
	if err := orderpay.CheckMethod(ch, w.Method); err != nil {
		return w, fmt.Errorf("%q: %s", s, orderpay.ErrorMessage(err))
	}
	return w, nil
}

// AllPayWays are every channel's methods, in report order: Alipay's, then WeChat Pay's,
// each channel's QR code first (orderpay.ChannelMethods).
func AllPayWays() []PayWay {
	var out []PayWay
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		for _, m := range orderpay.ChannelMethods[ch] {
			out = append(out, PayWay{ch, m})
		}
	}
	return out
}

// WayShare is one way's weight in a mix of ways.
type WayShare struct {
	Way    PayWay
	Weight int
}

// qrWeight is the weight of each channel's QR code in the default mix, where every other
// method weighs 1: with eight other methods, QR codes are half of the buyers and each other
// method a sixteenth.
const qrWeight = 4

// DefaultWays is the default mix of ways to pay: a QR code of either channel for half of
// the buyers, and each of the other eight methods (Alipay pc, wap, app, inapp; WeChat
// jsapi, mini, h5, app) an equal share of the rest.
func DefaultWays() []WayShare {
	var out []WayShare
	for _, w := range AllPayWays() {
		weight := 1
		if w.Method == orderpay.MethodQR {
			weight = qrWeight
		}
		out = append(out, WayShare{w, weight})
	}
	return out
}

// ParseWays reads --methods: "" or "all" for DefaultWays, "qr" for the QR codes of both
// channels alone (the buyers of before methods), or a comma list of channel:method[=weight],
// a missing weight being 1: "alipay:wap=2,wechat:h5".
func ParseWays(s string) ([]WayShare, error) {
	switch s = strings.TrimSpace(s); s {
	case "", "all":
		return DefaultWays(), nil
	case "qr":
		return []WayShare{{PayWay{orderpay.ChannelAlipay, orderpay.MethodQR}, 1}, {PayWay{orderpay.ChannelWechat, orderpay.MethodQR}, 1}}, nil
	}
	var out []WayShare
	for _, part := range strings.Split(s, ",") {
		name, weight, hasWeight := strings.Cut(strings.TrimSpace(part), "=")
		w, err := ParsePayWay(name)
		if err != nil {
			return nil, fmt.Errorf("chaos: methods: %w", err)
		}
		n := 1
		if hasWeight {
			if _, err := fmt.Sscan(weight, &n); err != nil || n < 1 {
				return nil, fmt.Errorf("chaos: methods: weight %q of %s is not a positive integer", weight, name)
			}
		}
		if slices.ContainsFunc(out, func(x WayShare) bool { return x.Way == w }) {
			return nil, fmt.Errorf("chaos: methods: %s named twice", w)
		}
		out = append(out, WayShare{w, n})
	}
	return out, nil
}

// waysLabel names a mix as --methods would.
func waysLabel(ways []WayShare) string {
	if slices.Equal(ways, DefaultWays()) {
		return "all"
	}
	var parts []string
	for _, s := range ways {
		parts = append(parts, fmt.Sprintf("%s=%d", s.Way, s.Weight))
	}
	return strings.Join(parts, ",")
}

// expiringWay is the way whose instruction lives shorter than an order: a WeChat H5 link
// opens for 5 minutes (orderpay.WechatH5Lifetime), where an order's window is up to 30. The
// buyers who pay after their instruction expired (PayExpired) pay by it, where the mix has
// it: every other instruction lives 2 hours, or as long as its order.
var expiringWay = PayWay{orderpay.ChannelWechat, orderpay.MethodH5}

// Devices: the user agents of the devices each method is paid on.
const (
	uaDesktop = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 Chrome/126.0 Safari/537.36"
	uaPhone   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1"
	uaWechat  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 MicroMessenger/8.0.49 NetType/WIFI"
	uaMini    = uaWechat + " miniProgram"
	uaAlipay  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 AlipayClient/10.6.0"
	uaShopApp = "orderpay-shop/1.0 (iPhone; iOS 17.0)"
)

// shopDevice is where a buyer's device pays an instruction from, in the shop: the shop's
// pay page of the order (a cashier's Referer, where a wallet sends the browser back), the
// same page under the official account's registered JSAPI pay directory, and the buyer's
// address as the server saw it.
type shopDevice struct {
	Page      string // the shop's pay page, <server>/pay/<order_no>
	JSAPIPage string // the official account's page, under its registered pay directory
	ClientIP  string
}

// deviceFor is the device pay is paid on for buyer, as the real wallet checks it
// (docs/api.md, "Ways to pay"): a QR code in the wallet that scans it; Alipay pc in a
// desktop browser and wap and WeChat H5 in a phone's browser, on the shop's page; WeChat
// JSAPI inside WeChat on a page under the registered pay directory; a mini program inside
// WeChat; Alipay in-app inside Alipay; App in the shop's app. The buyer is who is signed in
// to the wallet: a JSAPI, mini program or in-app instruction pays only for its own buyer.
func deviceFor(pay *orderpay.PayInstruction, buyer string, d shopDevice) WalletDevice {
	dev := WalletDevice{Pay: pay, Buyer: buyer, ClientIP: d.ClientIP}
	if pay == nil {
		return dev
	}
	dev.UserAgent = userAgentOf(pay.Method)
	switch pay.Method {
	case orderpay.MethodPC, orderpay.MethodWAP, orderpay.MethodH5:
		dev.Referer = d.Page
	case orderpay.MethodJSAPI:
		dev.Referer = d.JSAPIPage
	}
	return dev
}

// userAgentOf is the user agent of the device a method is paid on ("" for a QR code,
// paid in the wallet that scans it).
func userAgentOf(m orderpay.PayMethod) string {
	switch m {
	case orderpay.MethodPC:
		return uaDesktop
	case orderpay.MethodWAP, orderpay.MethodH5:
		return uaPhone
	case orderpay.MethodJSAPI:
		return uaWechat
	case orderpay.MethodMini:
		return uaMini
	case orderpay.MethodInApp:
		return uaAlipay
	case orderpay.MethodApp:
		return uaShopApp
	}
	return ""
}

// sameInstruction reports whether a and b are the same instruction to the device: the
// same kind and the same value of the field that names what is paid (a code, a url, a
// prepay id or package, an order string, a trade_no).
func sameInstruction(a, b *orderpay.PayInstruction) bool {
	if a == nil || b == nil || a.Channel != b.Channel || a.Method != b.Method {
		return false
	}
	fields := orderpay.FieldsOf(a.Channel, a.Method)
	for _, f := range fields {
		if a.Field(f) != b.Field(f) {
			return false
		}
	}
	return true
}

// RSAOps is the RSA-2048 work a server cannot avoid per paid order of a way: the
// signatures it makes and the signatures it verifies.
//   - a call that opens the trade (Alipay precreate and trade.create, every WeChat
//     prepay) signs the request and verifies the answer;
//   - an Alipay pc, wap or app order is signed here and makes no call: one signature;
//   - a WeChat JSAPI, mini program or App instruction is signed too (paySign, sign): one
//     more signature;
//   - the notification that pays the order is verified: one verification.
func RSAOps(w PayWay) (signs, verifies int) {
	switch {
	case w.Channel == orderpay.ChannelAlipay && slices.Contains([]orderpay.PayMethod{orderpay.MethodPC, orderpay.MethodWAP, orderpay.MethodApp}, w.Method):
		return 1, 1
	case w.Channel == orderpay.ChannelWechat && slices.Contains([]orderpay.PayMethod{orderpay.MethodJSAPI, orderpay.MethodMini, orderpay.MethodApp}, w.Method):
		return 2, 2
	}
	return 1, 2
}

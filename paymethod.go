package orderpay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// PayMethod is how the buyer's device pays one attempt (docs/design.md §5.2). Every method
// goes through the same payment, attempts, PAYING lock, notifications, queries, closes and
// refunds: only the prepay step and what the device is handed differ.
type PayMethod string

const (
	// MethodQR: a code the wallet scans (Alipay face-to-face precreate, WeChat Pay Native).
	MethodQR PayMethod = "qr"
	// MethodPC: Alipay's cashier in a desktop browser (alipay.trade.page.pay).
	MethodPC PayMethod = "pc"
	// MethodWAP: Alipay's cashier in a phone's browser (alipay.trade.wap.pay).
	MethodWAP PayMethod = "wap"
	// MethodApp: the shop's own app, through the wallet's app SDK (alipay.trade.app.pay's
	// order string; WeChat Pay App).
	MethodApp PayMethod = "app"
	// MethodInApp: inside Alipay, a mini program or in-app page (alipay.trade.create with
	// the buyer's Alipay user id; the page calls my.tradePay with the trade_no).
	MethodInApp PayMethod = "inapp"
	// MethodJSAPI: inside WeChat, an official account's page (WeChat Pay JSAPI, with the
	// buyer's openid for the official account's appid).
	MethodJSAPI PayMethod = "jsapi"
	// MethodMini: a WeChat mini program (JSAPI with the mini program's appid and openid).
	MethodMini PayMethod = "mini"
	// MethodH5: WeChat Pay in a phone's browser outside WeChat (with the buyer's address).
	MethodH5 PayMethod = "h5"
)

// ChannelMethods are the methods each channel offers, QR first.
var ChannelMethods = map[string][]PayMethod{
	ChannelAlipay: {MethodQR, MethodPC, MethodWAP, MethodApp, MethodInApp},
	ChannelWechat: {MethodQR, MethodJSAPI, MethodMini, MethodH5, MethodApp},
}

// CheckMethod is nil if channel offers m, and EINVALID naming what it offers otherwise.
func CheckMethod(channel string, m PayMethod) error {
	methods, ok := ChannelMethods[channel]
	if !ok {
		return Errorf(EINVALID, "no channel %q", channel)
	}
	if !slices.Contains(methods, m) {
		names := make([]string, len(methods))
		for i, x := range methods {
			names[i] = string(x)
		}
		return Errorf(EINVALID, "method must be one of %s for %s, not %q", strings.Join(names, ", "), channel, m)
	}
	return nil
}

// PayerNeeded says what the method needs to know of the payer: "openid" (WeChat jsapi and
// mini: the buyer's openid for that method's appid), "alipay_user_id" (Alipay in-app) or
// "" (nothing).
func PayerNeeded(channel string, m PayMethod) string {
	switch {
	case channel == ChannelWechat && (m == MethodJSAPI || m == MethodMini):
		return "openid"
	case channel == ChannelAlipay && m == MethodInApp:
		return "alipay_user_id"
	}
	return ""
}

// PayKind is what the device does with an instruction.
type PayKind string

const (
	PayKindQR       PayKind = "qr"       // show code as a QR code
	PayKindRedirect PayKind = "redirect" // open url (Alipay WAP; WeChat H5 with its redirect_url)
	PayKindForm     PayKind = "form"     // Alipay PC: open url, or render html (an auto-submitting form)
	PayKindJSAPI    PayKind = "jsapi"    // call getBrandWCPayRequest / wx.requestPayment with the fields
	PayKindApp      PayKind = "app"      // hand the fields to the wallet's app SDK
	PayKindInApp    PayKind = "inapp"    // call my.tradePay with trade_no
)

// KindOf is the kind of instruction a channel's method hands the device.
func KindOf(channel string, m PayMethod) PayKind {
	switch m {
	case MethodQR:
		return PayKindQR
	case MethodPC:
		return PayKindForm
	case MethodWAP, MethodH5:
		return PayKindRedirect
	case MethodJSAPI, MethodMini:
		return PayKindJSAPI
	case MethodApp:
		return PayKindApp
	case MethodInApp:
		return PayKindInApp
	}
	return ""
}

// PayFields are the fields each kind of instruction carries, under the names the device's
// own API takes them (docs/api.md, "What the device is handed"): a shop's front end passes
// them on as they are.
var PayFields = map[PayKind][]string{
	PayKindQR:       {"code"},
	PayKindRedirect: {"url"},
	PayKindForm:     {"url", "html"},
	PayKindJSAPI:    {"appId", "timeStamp", "nonceStr", "package", "signType", "paySign"},
	PayKindInApp:    {"trade_no"},
}

// WechatAppFields are a WeChat App instruction's fields (the app SDK's pay request), and
// AlipayAppFields an Alipay App one's (the order string).
var (
	WechatAppFields = []string{"appid", "partnerid", "prepayid", "package", "noncestr", "timestamp", "sign"}
	AlipayAppFields = []string{"order_string"}
)

// FieldsOf are the fields an instruction of channel's method m carries.
func FieldsOf(channel string, m PayMethod) []string {
	if k := KindOf(channel, m); k != PayKindApp {
		return PayFields[k]
	}
	if channel == ChannelWechat {
		return WechatAppFields
	}
	return AlipayAppFields
}

// PayInstruction is what the buyer's device needs to pay one attempt: its kind, and the
// fields the device's own API takes (FieldsOf). It is the same object the shop's front
// end, the simulator's wallet and the channels' own SDKs exchange: as JSON it is one object,
// {"kind", "channel", "method", and every field by its name}.
type PayInstruction struct {
	Kind    PayKind
	Channel string
	Method  PayMethod
	Fields  map[string]string
}

// NewInstruction is an instruction of channel's method m with fields (name, value pairs).
func NewInstruction(channel string, m PayMethod, fields ...string) *PayInstruction {
	p := &PayInstruction{Kind: KindOf(channel, m), Channel: channel, Method: m, Fields: map[string]string{}}
	for i := 0; i+1 < len(fields); i += 2 {
		p.Fields[fields[i]] = fields[i+1]
	}
	return p
}

// Field is the value of the field name, or "".
func (p *PayInstruction) Field(name string) string {
	if p == nil {
		return ""
	}
	return p.Fields[name]
}

// Check is nil when p is a complete instruction of a method its channel offers: its kind
// is the method's, and it carries every field of it, and no other.
func (p *PayInstruction) Check() error {
	if err := CheckMethod(p.Channel, p.Method); err != nil {
		return err
	}
	if want := KindOf(p.Channel, p.Method); p.Kind != want {
		return Errorf(EINVALID, "a %s %s instruction is of kind %s, not %q", p.Channel, p.Method, want, p.Kind)
	}
	want := FieldsOf(p.Channel, p.Method)
	for _, f := range want {
		if p.Fields[f] == "" {
			return Errorf(EINVALID, "a %s %s instruction needs %s", p.Channel, p.Method, f)
		}
	}
	for f := range p.Fields {
		if !slices.Contains(want, f) {
			return Errorf(EINVALID, "a %s %s instruction has no field %q", p.Channel, p.Method, f)
		}
	}
	return nil
}

// MarshalJSON writes p as one object: kind, channel, method and its fields.
func (p PayInstruction) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(p.Fields)+3)
	for k, v := range p.Fields {
		m[k] = v
	}
	m["kind"], m["channel"], m["method"] = string(p.Kind), p.Channel, string(p.Method)
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes. Every value is a string.
func (p *PayInstruction) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("a pay instruction is one object of strings: %w", err)
	}
	p.Kind, p.Channel, p.Method = PayKind(m["kind"]), m["channel"], PayMethod(m["method"])
	delete(m, "kind")
	delete(m, "channel")
	delete(m, "method")
	p.Fields = m
	return nil
}

// Lifetimes the channels give an instruction, beside the payment's deadline.
const (
	// AlipayQRLifetime: an Alipay precreated code can be paid for 2 h.
	AlipayQRLifetime = 2 * time.Hour
	// WechatPrepayLifetime: a WeChat prepay_id (Native code, JSAPI, mini program, App) can
	// be used for 2 h; asked again with the same parameters, the channel gives a new one.
	WechatPrepayLifetime = 2 * time.Hour
	// WechatH5Lifetime: a WeChat H5 link can be opened for 5 minutes.
	WechatH5Lifetime = 5 * time.Minute
)

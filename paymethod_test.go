package orderpay_test

import (
	"encoding/json"
	"strings"
	"testing"

	"orderpay"
)

// Every method of every channel has one kind and the fields its device's API takes; an
// instruction goes to JSON as one object and back unchanged; Check refuses a wrong kind, a
// missing field and a field of another API.
func TestPayInstructions(t *testing.T) {
	for channel, methods := range orderpay.ChannelMethods {
		for _, m := range methods {
			kind, fields := orderpay.KindOf(channel, m), orderpay.FieldsOf(channel, m)
			if kind == "" || len(fields) == 0 {
				t.Fatalf("%s %s: kind %q, fields %v", channel, m, kind, fields)
			}
			var kv []string
			for _, f := range fields {
				kv = append(kv, f, "v-"+f)
			}
			p := orderpay.NewInstruction(channel, m, kv...)
			if err := p.Check(); err != nil {
				t.Fatalf("%s %s: %v", channel, m, err)
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]string
			if err := json.Unmarshal(b, &obj); err != nil || obj["kind"] != string(kind) || obj["channel"] != channel ||
				obj["method"] != string(m) || len(obj) != len(fields)+3 {
				t.Fatalf("%s %s as JSON: %s, %v", channel, m, b, err)
			}
			var back orderpay.PayInstruction
			if err := json.Unmarshal(b, &back); err != nil || back.Check() != nil || back.Kind != p.Kind || len(back.Fields) != len(fields) {
				t.Fatalf("%s %s back from JSON: %+v, %v", channel, m, back, err)
			}
			for _, f := range fields {
				if back.Field(f) != "v-"+f {
					t.Fatalf("%s %s: field %s is %q", channel, m, f, back.Field(f))
				}
			}
			missing := orderpay.NewInstruction(channel, m, kv[:len(kv)-2]...)
			if err := missing.Check(); orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), fields[len(fields)-1]) {
				t.Errorf("%s %s without %s: %v", channel, m, fields[len(fields)-1], err)
			}
			extra := orderpay.NewInstruction(channel, m, append(kv, "qr_code", "x")...)
			if err := extra.Check(); orderpay.ErrorCode(err) != orderpay.EINVALID {
				t.Errorf("%s %s with a field of no API: %v", channel, m, err)
			}
			wrong := *p
			wrong.Kind = orderpay.PayKindRedirect
			if kind != orderpay.PayKindRedirect && orderpay.ErrorCode(wrong.Check()) != orderpay.EINVALID {
				t.Errorf("%s %s as a redirect: accepted", channel, m)
			}
		}
	}
	if err := orderpay.CheckMethod(orderpay.ChannelWechat, orderpay.MethodPC); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Errorf("wechat pc: %v", err)
	}
	if orderpay.PayerNeeded(orderpay.ChannelWechat, orderpay.MethodJSAPI) != "openid" ||
		orderpay.PayerNeeded(orderpay.ChannelAlipay, orderpay.MethodInApp) != "alipay_user_id" ||
		orderpay.PayerNeeded(orderpay.ChannelWechat, orderpay.MethodH5) != "" {
		t.Error("PayerNeeded")
	}
	// The two app kinds carry their own SDK's fields.
	if f := orderpay.FieldsOf(orderpay.ChannelWechat, orderpay.MethodApp); f[0] != "appid" || len(f) != 7 {
		t.Errorf("wechat app fields %v", f)
	}
	if f := orderpay.FieldsOf(orderpay.ChannelAlipay, orderpay.MethodApp); len(f) != 1 || f[0] != "order_string" {
		t.Errorf("alipay app fields %v", f)
	}
}

// methodChannel is a channel adapter whose in-app trades are made by another adapter.
type methodChannel struct {
	orderpay.Channel
	name  string
	inApp orderpay.Channel
}

func (c *methodChannel) ForMethod(m orderpay.PayMethod) orderpay.Channel {
	if m == orderpay.MethodInApp {
		return c.inApp
	}
	return c
}

// ChannelFor is the adapter of the attempt's method where the channel has one (an attempt
// made before methods being a QR code's), and the channel itself where it does not.
func TestChannelFor(t *testing.T) {
	inApp := &methodChannel{name: "in-app app"}
	inApp.inApp = inApp
	main := &methodChannel{name: "main app", inApp: inApp}
	for m, want := range map[orderpay.PayMethod]orderpay.Channel{
		orderpay.MethodInApp: inApp, orderpay.MethodQR: main, "": main, orderpay.MethodPC: main, orderpay.MethodApp: main,
	} {
		if got := orderpay.ChannelFor(main, m); got != want {
			t.Errorf("ChannelFor(main, %q) is the %s, want the %s", m, got.(*methodChannel).name, want.(*methodChannel).name)
		}
	}
	plain := struct{ orderpay.Channel }{}
	if got := orderpay.ChannelFor(plain, orderpay.MethodInApp); got != orderpay.Channel(plain) {
		t.Errorf("ChannelFor of an adapter without ForMethod is %v, want the adapter itself", got)
	}
}

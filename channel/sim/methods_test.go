package sim_test

import (
	"context"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// A buyer has one openid per WeChat appid, different for different appids and buyers, and
// one Alipay user id (2088 and 12 digits) whatever asks; the same on every call.
func TestIdentities(t *testing.T) {
	k, _ := simtest.Keys(t)
	s, err := sim.New(sim.Config{Keys: k})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := s.IdentityOf("alice", "wxmp1"), s.IdentityOf("alice", "wxmini1")
	if a.OpenID == "" || len(a.OpenID) != 28 || a.OpenID == b.OpenID || a.AlipayUserID != b.AlipayUserID ||
		!strings.HasPrefix(a.AlipayUserID, "2088") || len(a.AlipayUserID) != 16 {
		t.Fatalf("alice: %+v, %+v", a, b)
	}
	if again := s.IdentityOf("alice", "wxmp1"); again != a {
		t.Fatalf("alice again: %+v, was %+v", again, a)
	}
	if bob := s.IdentityOf("bob", "wxmp1"); bob.OpenID == a.OpenID || bob.AlipayUserID == a.AlipayUserID {
		t.Fatalf("bob %+v shares alice's %+v", bob, a)
	}
	if none := s.IdentityOf("alice", ""); none.OpenID != "" {
		t.Fatalf("an openid without an appid: %+v", none)
	}
}

// The wallet takes a qr instruction as a scanned code, and refuses an instruction that is
// not one (no pay, a wrong kind, a missing field) before anything else.
func TestPayInstructionChecksTheInstruction(t *testing.T) {
	k, _ := simtest.Keys(t)
	s, err := sim.New(sim.Config{Keys: k})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for name, a := range map[string]sim.PayAs{
		"no pay":        {},
		"missing field": {Pay: orderpay.NewInstruction(orderpay.ChannelWechat, orderpay.MethodJSAPI, "appId", "wx1")},
		"wrong kind":    {Pay: &orderpay.PayInstruction{Kind: orderpay.PayKindQR, Channel: "alipay", Method: orderpay.MethodWAP, Fields: map[string]string{"url": "x"}}},
		"bad action":    {Pay: orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodQR, "code", "x"), Action: "scan"},
	} {
		if _, err := s.PayInstruction(ctx, a); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	if _, err := s.PayInstruction(ctx, sim.PayAs{Pay: orderpay.NewInstruction(orderpay.ChannelAlipay, orderpay.MethodQR, "code",
		"https://qr.alipay.com/nope")}); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Errorf("an unknown code as a qr instruction: %v, want the wallet's ENOTFOUND", err)
	}
}

package wechat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// genuineNotification runs a payment and returns the notification it produced, as the
// merchant received it.
func genuineNotification(t *testing.T, e *env) delivery {
	t.Helper()
	m := newMerchant(t, e.ch)
	pre := e.accepted(t, "NT_00001", 1234, m.srv.URL+"/notify/wechat")
	if _, err := e.sim.Pay(context.Background(), pre.QRCode); err != nil {
		t.Fatal(err)
	}
	got, _, errs := m.wait(t, 1)
	if errs[0] != nil {
		t.Fatalf("genuine notification refused: %v", errs[0])
	}
	return got[0]
}

func TestVerifyNotification_ForgedForeignOrMalformedIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, forger := simtest.Keys(t)
	wk := &e.keys.Wechat
	g := genuineNotification(t, e)

	// The genuine plaintext, to build correctly encrypted variants from.
	var envelope struct {
		Resource struct {
			Ciphertext     string `json:"ciphertext"`
			AssociatedData string `json:"associated_data"`
			Nonce          string `json:"nonce"`
		} `json:"resource"`
	}
	_ = json.Unmarshal(g.body, &envelope)
	r := envelope.Resource
	plain, err := sim.DecryptWechatResource(wk.APIv3Key, r.Ciphertext, r.AssociatedData, r.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(change func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(plain, &m)
		change(m)
		out, _ := json.Marshal(m)
		return out
	}
	// signed re-signs body genuinely (or with key) at the wall clock's time (or at).
	type sent struct {
		header http.Header
		body   []byte
	}
	signed := func(body []byte, key bool, at time.Time) sent {
		k := wk.PlatformPrivateKey
		if key {
			k = forger
		}
		if at.IsZero() {
			at = time.Now()
		}
		h := signHeaders(t, k, wk.PublicKeyID, at, body)
		h.Set("Content-Type", "application/json")
		return sent{h, body}
	}
	changedBody := []byte(strings.Replace(string(g.body), `"summary":"支付成功"`, `"summary":"支付失败"`, 1))
	noSig := g.header.Clone()
	noSig.Del("Wechatpay-Signature")
	otherSerial := g.header.Clone()
	otherSerial.Set("Wechatpay-Serial", "PUB_KEY_ID_0000000000000000")

	cases := []struct {
		name string
		in   sent
		want string
	}{
		{"body changed, signature kept", sent{g.header, changedBody}, orderpay.EUNAUTHORIZED},
		{"signature removed", sent{noSig, g.body}, orderpay.EUNAUTHORIZED},
		{"no headers at all", sent{nil, g.body}, orderpay.EUNAUTHORIZED},
		{"another serial", sent{otherSerial, g.body}, orderpay.EUNAUTHORIZED},
		{"re-signed by a forger", signed(g.body, true, time.Time{}), orderpay.EUNAUTHORIZED},
		{"genuinely signed 6 minutes ago", signed(g.body, false, time.Now().Add(-6*time.Minute)), orderpay.EUNAUTHORIZED},
		{"encrypted with another APIv3 key", signed(notification(t, encryptResource(t, strings.Repeat("k", 32), plain, "transaction")), false, time.Time{}), orderpay.EUNAUTHORIZED},
		{"another mchid", signed(notification(t, encryptResource(t, wk.APIv3Key, edit(func(m map[string]any) { m["mchid"] = "1900000109" }), "transaction")), false, time.Time{}), orderpay.EUNAUTHORIZED},
		{"another appid", signed(notification(t, encryptResource(t, wk.APIv3Key, edit(func(m map[string]any) { m["appid"] = "wx0000000000000000" }), "transaction")), false, time.Time{}), orderpay.EUNAUTHORIZED},
		{"not JSON, genuinely signed", signed([]byte("<xml>success</xml>"), false, time.Time{}), orderpay.EINVALID},
		{"a refund notification without a refund in it", signed(notification(t, encryptResource(t, wk.APIv3Key, plain, "refund")), false, time.Time{}), orderpay.EINVALID},
		{"neither a payment nor a refund", signed(notification(t, encryptResource(t, wk.APIv3Key, plain, "profitsharing")), false, time.Time{}), orderpay.EINVALID},
		{"plaintext not a transaction", signed(notification(t, encryptResource(t, wk.APIv3Key, []byte("[1,2]"), "transaction")), false, time.Time{}), orderpay.EINVALID},
		{"no out_trade_no", signed(notification(t, encryptResource(t, wk.APIv3Key, edit(func(m map[string]any) { delete(m, "out_trade_no") }), "transaction")), false, time.Time{}), orderpay.EINVALID},
		{"paid without amount", signed(notification(t, encryptResource(t, wk.APIv3Key, edit(func(m map[string]any) { delete(m, "amount") }), "transaction")), false, time.Time{}), orderpay.EINVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := e.ch.VerifyNotification(context.Background(), tc.in.header, tc.in.body)
			if got := orderpay.ErrorCode(err); got != tc.want || n != nil {
				t.Fatalf("got %+v %v, want %s", n, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), wk.APIv3Key) || strings.Contains(err.Error(), "PRIVATE KEY")) {
				t.Fatalf("the error shows key material: %v", err)
			}
		})
	}

	// The genuine one still verifies, and so does a genuine re-encryption and re-signing
	// of it: the refusals above are for what was changed, not for being rebuilt.
	for name, in := range map[string]sent{
		"as received": {g.header, g.body},
		"rebuilt":     signed(notification(t, encryptResource(t, wk.APIv3Key, plain, "transaction")), false, time.Time{}),
	} {
		n, err := e.ch.VerifyNotification(context.Background(), in.header, in.body)
		if err != nil || n.Amount != 1234 || n.Outcome != orderpay.OutcomePaid || n.OutTradeNo != "NT_00001" {
			t.Fatalf("%s: %+v %v", name, n, err)
		}
	}
	// Another trade_state is decoded, never taken for a payment.
	closed := signed(notification(t, encryptResource(t, wk.APIv3Key, edit(func(m map[string]any) {
		m["trade_state"] = "CLOSED"
		delete(m, "transaction_id")
	}), "transaction")), false, time.Time{})
	if n, err := e.ch.VerifyNotification(context.Background(), closed.header, closed.body); err != nil || n.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("CLOSED notification: %+v %v", n, err)
	}
}

// The simulator's bad copies, through the adapter: a forged signature and another
// merchant's notification are refused; a correctly signed copy for another amount passes
// with that amount, for the payment center's amount check to catch.
func TestVerifyNotification_SimulatorBadCopies(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{sim.FaultForgeSignature, sim.FaultWrongApp, sim.FaultTamperAmount} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *sim.Config) {
				c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodNotify, Kind: kind, Limit: 1}}}
			})
			m := newMerchant(t, e.ch)
			pre := e.accepted(t, "BAD_0001", 1000, m.srv.URL)
			if _, err := e.sim.Pay(context.Background(), pre.QRCode); err != nil {
				t.Fatal(err)
			}
			_, ns, errs := m.wait(t, 2)
			switch kind {
			case sim.FaultTamperAmount:
				if errs[0] != nil || ns[0].Amount != 999 {
					t.Fatalf("tampered copy: %+v %v, want it verified with amount 999", ns[0], errs[0])
				}
			default:
				if orderpay.ErrorCode(errs[0]) != orderpay.EUNAUTHORIZED {
					t.Fatalf("%s copy: %v, want EUNAUTHORIZED", kind, errs[0])
				}
			}
			if errs[1] != nil || ns[1].Amount != 1000 {
				t.Fatalf("genuine copy: %+v %v", ns[1], errs[1])
			}
		})
	}
}

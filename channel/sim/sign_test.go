package sim_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

func TestSHA256RSA_SignThenVerifyRoundTrips(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	content := []byte("app_id=2021&total_amount=12.34")

	sig, err := sim.SignSHA256RSA(keys.AlipayPrivateKey, content)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.VerifySHA256RSA(keys.AlipayPublicKey, content, sig); err != nil {
		t.Fatalf("own signature does not verify: %v", err)
	}
	if err := sim.VerifySHA256RSA(keys.AlipayPublicKey, []byte("app_id=2021&total_amount=99.99"), sig); err == nil {
		t.Fatal("signature verified over changed content")
	}
	if err := sim.VerifySHA256RSA(keys.AppPublicKey, content, sig); err == nil {
		t.Fatal("signature verified with another key")
	}
	if err := sim.VerifySHA256RSA(keys.AlipayPublicKey, content, "not base64!"); err == nil {
		t.Fatal("garbage signature verified")
	}
}

func TestAlipaySignContent_DropsExcludedAndEmptyAndSortsKeys(t *testing.T) {
	t.Parallel()
	params := url.Values{
		"timestamp": {"2025-03-14 10:00:00"},
		"app_id":    {"2021"},
		"sign":      {"abc"},
		"sign_type": {"RSA2"},
		"empty":     {""},
		"biz":       {`{"a":"x y&z"}`},
	}
	got, err := sim.AlipaySignContent(params, "sign")
	if err != nil {
		t.Fatal(err)
	}
	want := `app_id=2021&biz={"a":"x y&z"}&sign_type=RSA2&timestamp=2025-03-14 10:00:00`
	if got != want {
		t.Fatalf("request content\n got %s\nwant %s", got, want)
	}
	got, _ = sim.AlipaySignContent(params, "sign", "sign_type")
	if want := `app_id=2021&biz={"a":"x y&z"}&timestamp=2025-03-14 10:00:00`; got != want {
		t.Fatalf("notification content\n got %s\nwant %s", got, want)
	}
	if _, err := sim.AlipaySignContent(url.Values{"a": {"1", "2"}}); err == nil {
		t.Fatal("a repeated key was accepted")
	}
}

// The SDK signs requests the way the gateway verifies them (§A1).
func TestSDKSignedRequest_VerifiesUnderGatewayRule(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	client := sdkClient(t, keys.AppID, simtest.PEM(t, keys.AppPrivateKeyPEM), simtest.PEM(t, keys.AlipayPublicKeyPEM), "http://127.0.0.1:1/gateway.do")
	values, err := client.URLValues(alipay.TradeQuery{OutTradeNo: "T_1"})
	if err != nil {
		t.Fatal(err)
	}
	content, err := sim.AlipaySignContent(values, "sign")
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.VerifySHA256RSA(keys.AppPublicKey, []byte(content), values.Get("sign")); err != nil {
		t.Fatalf("SDK request signature does not verify under §A1: %v", err)
	}
}

// The simulator signs notifications the way the SDK verifies them (§A5).
func TestSignAlipayParams_VerifiesWithSDK(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	client := sdkClient(t, keys.AppID, simtest.PEM(t, keys.AppPrivateKeyPEM), simtest.PEM(t, keys.AlipayPublicKeyPEM), "http://127.0.0.1:1/gateway.do")
	v := url.Values{
		"app_id":       {keys.AppID},
		"out_trade_no": {"T_1"},
		"total_amount": {"12.34"},
		"subject":      {"牛奶 x2"},
	}
	sig, err := sim.SignAlipayParams(keys.AlipayPrivateKey, v)
	if err != nil {
		t.Fatal(err)
	}
	v.Set("sign_type", "RSA2")
	v.Set("sign", sig)
	if err := client.VerifySign(context.Background(), v); err != nil {
		t.Fatalf("SDK rejects the simulator's notification signature: %v", err)
	}
	v.Set("total_amount", "0.01")
	if err := client.VerifySign(context.Background(), v); err == nil {
		t.Fatal("SDK accepted a changed amount")
	}
}

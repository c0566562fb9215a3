package sim_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// certSDKClient is a merchant's SDK client in certificate mode, loaded from the contents of
// the console's three files.
func certSDKClient(t *testing.T, keys *sim.Keys, gateway string) *alipay.Client {
	t.Helper()
	c, err := alipay.New(keys.AppID, simtest.PEM(t, keys.AppPrivateKeyPEM), false,
		alipay.WithSandboxGateway(gateway), alipay.WithTimeLocation(cst))
	if err != nil {
		t.Fatal(err)
	}
	certs := keys.AlipayCerts
	if err := c.LoadAppCertPublicKey(certs.AppCertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayRootCert(certs.RootPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAlipayCertPublicKey(certs.AlipayCertPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

// setupCert is setup with the simulated app in certificate mode and b.client in
// certificate mode too.
func setupCert(t *testing.T, cfg sim.Config) *bundle {
	t.Helper()
	cfg.AlipayMode = sim.AlipayModeCert
	b := setup(t, cfg)
	b.client = certSDKClient(t, b.keys, b.gatewayURL())
	return b
}

// leafCert is the first certificate of a PEM file, the one SDKs read.
func leafCert(t *testing.T, text string) *x509.Certificate {
	t.Helper()
	certs, err := sim.ParseCertificatesPEM(text)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// certSNs are the three SNs of keys' certificates, as the simulator computes them.
func certSNs(t *testing.T, keys *sim.Keys) (app, root, alipaySN string) {
	t.Helper()
	root, err := sim.AlipayRootCertSN(keys.AlipayCerts.RootPEM)
	if err != nil {
		t.Fatal(err)
	}
	return sim.AlipayCertSN(leafCert(t, keys.AlipayCerts.AppCertPEM)), root, sim.AlipayCertSN(leafCert(t, keys.AlipayCerts.AlipayCertPEM))
}

// certParams are the common parameters of a gateway call with the given certificate SNs
// ("" leaves one out), signed with the app key over everything, SNs included (§A1).
func certParams(t *testing.T, b *bundle, method, biz, appSN, rootSN string) url.Values {
	t.Helper()
	return signedParamsWith(t, b, method, biz, url.Values{"app_cert_sn": {appSN}, "alipay_root_cert_sn": {rootSN}})
}

func signedParamsWith(t *testing.T, b *bundle, method, biz string, extra url.Values) url.Values {
	t.Helper()
	v := signedParams(t, b, method, biz, func(string) string { return "" })
	v.Del("sign")
	for k, vs := range extra {
		if vs[0] != "" {
			v[k] = vs
		}
	}
	content, err := sim.AlipaySignContent(v, "sign")
	if err != nil {
		t.Fatal(err)
	}
	v.Set("sign", signWith(t, b)(content))
	return v
}

// rawTop posts params to the gateway and returns the answer's top-level members.
func rawTop(t *testing.T, b *bundle, params url.Values) map[string]json.RawMessage {
	t.Helper()
	resp, err := http.PostForm(b.gatewayURL(), params)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("gateway body %q: %v", body, err)
	}
	return top
}

func jsonString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if raw != nil {
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s is not a JSON string", raw)
		}
	}
	return s
}

// The SNs the simulator requires are the ones the SDK sends and checks, computed by the SDK
// itself from the same files; the root SN counts only the RSA-signed roots of a file that
// also holds an ECDSA root.
func TestCertSN_AsTheSDKComputesIt(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	certs := keys.AlipayCerts
	appSN, rootSN, alipaySN := certSNs(t, keys)

	roots, err := sim.ParseCertificatesPEM(certs.RootPEM)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigned := 0
	for _, c := range roots {
		if c.SignatureAlgorithm == x509.SHA256WithRSA {
			rsaSigned++
		}
	}
	if len(roots) < 3 || rsaSigned < 2 || rsaSigned == len(roots) {
		t.Fatalf("the root file has %d certificates, %d RSA-signed: want several, not all RSA-signed, at least two RSA-signed", len(roots), rsaSigned)
	}
	if n := strings.Count(rootSN, "_") + 1; n != rsaSigned {
		t.Fatalf("root SN %q has %d parts, want one per RSA-signed root (%d)", rootSN, n, rsaSigned)
	}

	client := certSDKClient(t, keys, "http://127.0.0.1:1/gateway.do")
	sent, err := client.URLValues(alipay.TradeQuery{OutTradeNo: "T_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sent.Get("app_cert_sn"); got != appSN {
		t.Errorf("the SDK sends app_cert_sn %q, the simulator computes %q", got, appSN)
	}
	if got := sent.Get("alipay_root_cert_sn"); got != rootSN {
		t.Errorf("the SDK sends alipay_root_cert_sn %q, the simulator computes %q", got, rootSN)
	}

	// The SDK picks its verification key by alipay_cert_sn: a notification signed with the
	// simulator's key verifies under the SN the simulator computes, and under no other.
	note := url.Values{"notify_id": {"n1"}, "total_amount": {"1.00"}}
	sig, err := sim.SignAlipayParams(keys.AlipayPrivateKey, note)
	if err != nil {
		t.Fatal(err)
	}
	note.Set("sign", sig)
	note.Set("alipay_cert_sn", alipaySN)
	if err := client.VerifySign(context.Background(), note); err != nil {
		t.Fatalf("the SDK does not know alipay_cert_sn %q: %v", alipaySN, err)
	}
	note.Set("alipay_cert_sn", strings.Repeat("0", 32))
	if err := client.VerifySign(context.Background(), note); !errors.Is(err, alipay.ErrAliPublicKeyNotFound) {
		t.Fatalf("an unknown alipay_cert_sn: %v, want ErrAliPublicKeyNotFound", err)
	}
}

func TestCertMode_RequestsWithoutTheAppsSNsAreRefused(t *testing.T) {
	t.Parallel()
	b := setupCert(t, sim.Config{})
	appSN, rootSN, alipaySN := certSNs(t, b.keys)
	other := strings.Repeat("a", 32)
	query := `{"out_trade_no":"T_1"}`
	for _, tc := range []struct {
		name, appSN, rootSN, code, subCode string
	}{
		{"no app_cert_sn", "", rootSN, "40002", "isv.missing-app-cert-sn"},
		{"another app_cert_sn", other, rootSN, "40002", "isv.app-cert-not-exist"},
		{"the root SN as app_cert_sn", rootSN, rootSN, "40002", "isv.app-cert-not-exist"},
		{"no alipay_root_cert_sn", appSN, "", "40002", "isv.missing-alipay-root-cert-sn"},
		{"another alipay_root_cert_sn", appSN, other, "40002", "isv.invalid-alipay-root-cert-sn"},
		{"one root of two", appSN, strings.Split(rootSN, "_")[0], "40002", "isv.invalid-alipay-root-cert-sn"},
		{"both right: the call reaches the trade", appSN, rootSN, "40004", "ACQ.TRADE_NOT_EXIST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := certParams(t, b, "alipay.trade.query", query, tc.appSN, tc.rootSN)
			top := rawTop(t, b, params)
			_, got := rawCall(t, b, params)
			if got["code"] != tc.code || got["sub_code"] != tc.subCode {
				t.Fatalf("got %v, want %s/%s", got, tc.code, tc.subCode)
			}
			if sn := jsonString(t, top["alipay_cert_sn"]); sn != alipaySN {
				t.Fatalf("alipay_cert_sn %q, want %q", sn, alipaySN)
			}
		})
	}
	// The right SNs do not stand in for the signature.
	params := certParams(t, b, "alipay.trade.query", query, appSN, rootSN)
	params.Set("biz_content", `{"out_trade_no":"T_2"}`)
	if _, got := rawCall(t, b, params); got["sub_code"] != "isv.invalid-signature" {
		t.Fatalf("tampered request with the right SNs: %v, want isv.invalid-signature", got)
	}
	// And the SDK, set up as a merchant sets it up, gets through.
	if rsp := b.query(t, "T_1"); rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("SDK query in certificate mode: %+v", rsp)
	}
}

// An app in key mode has no app certificate: a request naming one is refused, and answers
// name no certificate.
func TestKeyMode_RequestNamingAnAppCertificateIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	appSN, rootSN, _ := certSNs(t, b.keys)
	query := `{"out_trade_no":"T_1"}`
	for _, tc := range []struct {
		name, appSN, rootSN, subCode string
	}{
		{"both SNs", appSN, rootSN, "isv.app-cert-not-exist"},
		{"app_cert_sn only", appSN, "", "isv.app-cert-not-exist"},
		{"alipay_root_cert_sn only is ignored", "", rootSN, "ACQ.TRADE_NOT_EXIST"},
	} {
		params := certParams(t, b, "alipay.trade.query", query, tc.appSN, tc.rootSN)
		top := rawTop(t, b, params)
		if _, got := rawCall(t, b, params); got["sub_code"] != tc.subCode {
			t.Errorf("%s: got %v, want %s", tc.name, got, tc.subCode)
		}
		if _, ok := top["alipay_cert_sn"]; ok {
			t.Errorf("%s: a key-mode answer names a certificate", tc.name)
		}
	}
	// The certificate-mode SDK client is refused the same way.
	client := certSDKClient(t, b.keys, b.gatewayURL())
	rsp, err := client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "T_1"})
	if err != nil || rsp.SubCode != "isv.app-cert-not-exist" {
		t.Fatalf("certificate-mode client against a key-mode app: %+v %v", rsp, err)
	}
}

// Every signed answer in certificate mode names the certificate whose key signed it:
// successes, business failures, envelope refusals, error_response and fault answers. An
// unsigned answer names none.
func TestCertMode_EveryAnswerNamesTheSigningCertificate(t *testing.T) {
	t.Parallel()
	b := setupCert(t, sim.Config{})
	appSN, rootSN, alipaySN := certSNs(t, b.keys)
	ok := func(method, biz string) url.Values { return certParams(t, b, method, biz, appSN, rootSN) }
	wrongApp := ok("alipay.trade.query", `{"out_trade_no":"T_1"}`)
	wrongApp.Set("app_id", "2021999999999999")
	cases := []struct {
		name   string
		params url.Values
		faults []sim.FaultRule
		signed bool // with the Alipay key
	}{
		{"success", ok("alipay.trade.precreate", `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x"}`), nil, true},
		{"business failure", ok("alipay.trade.query", `{"out_trade_no":"T_none"}`), nil, true},
		{"envelope refusal", wrongApp, nil, true},
		{"unknown method", ok("alipay.trade.pay", `{}`), nil, true},
		{"cert download", ok("alipay.open.app.alipaycert.download", `{"alipay_cert_sn":"`+alipaySN+`"}`), nil, true},
		{"system error fault", ok("alipay.trade.query", `{"out_trade_no":"T_1"}`), []sim.FaultRule{{Method: sim.MethodQuery, Kind: sim.FaultSystemError}}, true},
		{"forged answer", ok("alipay.trade.query", `{"out_trade_no":"T_1"}`), []sim.FaultRule{{Method: sim.MethodQuery, Kind: sim.FaultBadSignature, Applied: true}}, false},
		{"unsigned answer", ok("alipay.trade.query", `{"out_trade_no":"T_1"}`), []sim.FaultRule{{Method: sim.MethodQuery, Kind: sim.FaultUnsigned, Applied: true}}, false},
	}
	for _, tc := range cases {
		if err := b.sim.SetFaults(sim.FaultPlan{Rules: tc.faults}); err != nil {
			t.Fatal(err)
		}
		top := rawTop(t, b, tc.params)
		sn, sig := jsonString(t, top["alipay_cert_sn"]), jsonString(t, top["sign"])
		switch {
		case tc.name == "unsigned answer":
			if sn != "" || sig != "" {
				t.Errorf("%s: alipay_cert_sn %q, sign %q; want neither", tc.name, sn, sig)
			}
			continue
		case sn != alipaySN:
			t.Errorf("%s: alipay_cert_sn %q, want %q", tc.name, sn, alipaySN)
			continue
		}
		var node json.RawMessage
		for name, raw := range top {
			if strings.HasSuffix(name, "_response") {
				node = raw
			}
		}
		err := sim.VerifySHA256RSA(b.keys.AlipayPublicKey, node, sig)
		if (err == nil) != tc.signed {
			t.Errorf("%s: verification with the certificate's key: %v, want signed=%v", tc.name, err, tc.signed)
		}
	}
}

func TestCertDownload_ReturnsTheAlipayCertificateFile(t *testing.T) {
	t.Parallel()
	b := setupCert(t, sim.Config{})
	appSN, rootSN, alipaySN := certSNs(t, b.keys)

	// The SDK does not verify this answer (CertDownload.NeedVerify is false), so check its
	// signature on the raw answer too.
	_, node := rawCall(t, b, certParams(t, b, "alipay.open.app.alipaycert.download", `{"alipay_cert_sn":"`+alipaySN+`"}`, appSN, rootSN))
	if node["code"] != "10000" {
		t.Fatalf("download: %v", node)
	}
	rsp, err := b.client.CertDownload(context.Background(), alipay.CertDownload{AliPayCertSN: alipaySN})
	if err != nil || rsp.Code != alipay.CodeSuccess {
		t.Fatalf("download through the SDK: %+v %v", rsp, err)
	}
	content, err := base64.StdEncoding.DecodeString(rsp.AliPayCertContent)
	if err != nil || string(content) != b.keys.AlipayCerts.AlipayCertPEM || content[0] != '-' {
		t.Fatalf("alipay_cert_content is not the base64 of alipayCertPublicKey_RSA2.crt: %q", rsp.AliPayCertContent)
	}

	rsp, err = b.client.CertDownload(context.Background(), alipay.CertDownload{AliPayCertSN: appSN})
	if err != nil {
		t.Fatal(err)
	}
	wantAlipayCode(t, "download of another SN", rsp.Error, "40002", "isv.alipay-cert-not-exist")

	// An app in key mode has no Alipay certificate to hand out.
	k := setup(t, sim.Config{})
	rsp, err = k.client.CertDownload(context.Background(), alipay.CertDownload{AliPayCertSN: alipaySN})
	if err != nil {
		t.Fatal(err)
	}
	wantAlipayCode(t, "download from a key-mode app", rsp.Error, "40002", "isv.alipay-cert-not-exist")
}

// In production mode the SDK fetches the certificate of an alipay_cert_sn it does not know
// (alipay.open.app.alipaycert.download) and verifies with it: a merchant that loaded only
// its app certificate and the root gets verified answers.
func TestCertMode_SDKFetchesAnAlipayCertificateItDoesNotKnow(t *testing.T) {
	t.Parallel()
	b := setupCert(t, sim.Config{})
	c, err := alipay.New(b.keys.AppID, simtest.PEM(t, b.keys.AppPrivateKeyPEM), true,
		alipay.WithProductionGateway(b.gatewayURL()), alipay.WithTimeLocation(cst))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAppCertPublicKey(b.keys.AlipayCerts.AppCertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayRootCert(b.keys.AlipayCerts.RootPEM); err != nil {
		t.Fatal(err)
	}
	rsp, err := c.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		Subject: "x", OutTradeNo: "T_fetch", TotalAmount: "1.00", ProductCode: "FACE_TO_FACE_PAYMENT",
		TimeExpire: b.clock.Now().Add(time.Hour).In(cst).Format("2006-01-02 15:04:05"),
	}})
	if err != nil || rsp.Code != alipay.CodeSuccess || rsp.QRCode == "" {
		t.Fatalf("precreate with a fetched certificate: %+v %v", rsp, err)
	}
}

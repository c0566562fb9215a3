package alipay_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// The adapter is in exactly one mode: the Alipay public key, or all three certificates.
// Anything else, and certificates that would make every call fail, are refused by New.
func TestNew_ExactlyOneSigningMode(t *testing.T) {
	t.Parallel()
	keys, foreign := simtest.Keys(t)
	certs := keys.AlipayCerts
	base := alipay.Config{AppID: keys.AppID, SellerID: keys.SellerID, AppPrivateKeyPEM: simtest.PEM(t, keys.AppPrivateKeyPEM)}
	withKey := base
	withKey.AlipayPublicKeyPEM = simtest.PEM(t, keys.AlipayPublicKeyPEM)
	withCerts := base
	withCerts.AppCertPEM, withCerts.AlipayCertPEM, withCerts.AlipayRootCertPEM = certs.AppCertPEM, certs.AlipayCertPEM, certs.RootPEM
	for name, cfg := range map[string]alipay.Config{"public-key mode": withKey, "certificate mode": withCerts} {
		if _, err := alipay.New(cfg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	ecdsaRootOnly := func() string {
		// The root file without its RSA-signed certificates: the SDK would send no
		// alipay_root_cert_sn.
		var out strings.Builder
		rest := []byte(certs.RootPEM)
		for {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			if c, _ := x509.ParseCertificate(block.Bytes); c.SignatureAlgorithm == x509.ECDSAWithSHA256 {
				out.Write(pem.EncodeToMemory(block))
			}
		}
		return out.String()
	}()
	for name, mod := range map[string]func(*alipay.Config){
		"neither mode":                           func(c *alipay.Config) { *c = base },
		"both modes":                             func(c *alipay.Config) { c.AlipayPublicKeyPEM = withKey.AlipayPublicKeyPEM },
		"no app certificate":                     func(c *alipay.Config) { c.AppCertPEM = "" },
		"no alipay certificate":                  func(c *alipay.Config) { c.AlipayCertPEM = "" },
		"no root certificate":                    func(c *alipay.Config) { c.AlipayRootCertPEM = "" },
		"garbage app certificate":                func(c *alipay.Config) { c.AppCertPEM = "not a certificate" },
		"garbage alipay certificate":             func(c *alipay.Config) { c.AlipayCertPEM = "not a certificate" },
		"garbage root certificate":               func(c *alipay.Config) { c.AlipayRootCertPEM = "not a certificate" },
		"root without an RSA-signed certificate": func(c *alipay.Config) { c.AlipayRootCertPEM = ecdsaRootOnly },
		"app certificate of another key": func(c *alipay.Config) {
			c.AppPrivateKeyPEM = simtest.PEM(t, func() (string, error) { return sim.PrivateKeyPEM(foreign) })
		},
		"app and alipay certificates swapped": func(c *alipay.Config) { c.AppCertPEM, c.AlipayCertPEM = c.AlipayCertPEM, c.AppCertPEM },
	} {
		cfg := withCerts
		mod(&cfg)
		if _, err := alipay.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func sha256HexOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Describe tells the mode (in the channels file's words), the ids and the fingerprints of
// the public material in use, and nothing private.
func TestDescribe_ModeAndFingerprintsOnly(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	pubDER, err := x509.MarshalPKIXPublicKey(keys.AlipayPublicKey)
	if err != nil {
		t.Fatal(err)
	}
	leafDER := func(text string) []byte { block, _ := pem.Decode([]byte(text)); return block.Bytes }

	key := newChannel(t, keys, "http://127.0.0.1:1/gateway.do").Describe()
	if key.Channel != "alipay" || key.Mode != "key" || key.SellerID != keys.SellerID || key.AppID != keys.AppID || key.PublicKeySHA256 != sha256HexOf(pubDER) ||
		key.AppCertSHA256 != "" || key.AlipayCertSHA256 != "" || key.AlipayRootCertSHA256 != nil {
		t.Fatalf("public-key mode: %+v", key)
	}

	d := newChannel(t, keys, "http://127.0.0.1:1/gateway.do", certMode(t, keys)).Describe()
	if d.Mode != "cert" || d.PublicKeySHA256 != sha256HexOf(pubDER) ||
		d.AppCertSHA256 != sha256HexOf(leafDER(keys.AlipayCerts.AppCertPEM)) ||
		d.AlipayCertSHA256 != sha256HexOf(leafDER(keys.AlipayCerts.AlipayCertPEM)) ||
		len(d.AlipayRootCertSHA256) != strings.Count(keys.AlipayCerts.RootPEM, "BEGIN CERTIFICATE") ||
		d.AlipayRootCertSHA256[0] != sha256HexOf(leafDER(keys.AlipayCerts.RootPEM)) {
		t.Fatalf("certificate mode: %+v", d)
	}
	out, _ := json.Marshal(d)
	fingerprint := regexp.MustCompile(`^[0-9a-f]{64}$`)
	var fields map[string]any
	_ = json.Unmarshal(out, &fields)
	for k, v := range fields {
		switch v := v.(type) {
		case string:
			if k != "channel" && k != "mode" && k != "app_id" && k != "seller_id" && !fingerprint.MatchString(v) {
				t.Errorf("%s = %q is not a fingerprint", k, v)
			}
		case []any:
			for _, f := range v {
				if s, _ := f.(string); !fingerprint.MatchString(s) {
					t.Errorf("%s holds %v, not a fingerprint", k, f)
				}
			}
		default:
			t.Errorf("unexpected field %s = %v", k, v)
		}
	}
}

// In certificate mode an answer must come from the configured Alipay certificate: one that
// names another alipay_cert_sn does not verify, so it is Unknown, never Paid.
func TestCertificateMode_AnswerNamingAnotherCertificateIsUnknown(t *testing.T) {
	t.Parallel()
	e := setupCert(t, sim.Config{})
	e.paid(t, "CS_1", 700)
	if q := e.ch.Query(context.Background(), "CS_1"); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("direct query: %+v", q)
	}
	sn := regexp.MustCompile(`"alipay_cert_sn":"[0-9a-f]+"`)
	renamed := proxy(t, e, func(s int, b []byte) (int, []byte) {
		return s, sn.ReplaceAll(b, []byte(`"alipay_cert_sn":"`+strings.Repeat("0", 32)+`"`))
	})
	ch := newChannel(t, e.keys, gw(renamed), certMode(t, e.keys))
	if q := ch.Query(context.Background(), "CS_1"); q.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("answer naming another certificate: %+v, want Unknown", q)
	}
	// A public-key-mode adapter against the certificate-mode app: Alipay refuses the call,
	// but the refusal names a certificate the SDK has no key for, so it cannot be verified
	// either: Unknown, with the refusal in Raw for the operator.
	keyMode := newChannel(t, e.keys, e.srv.URL+"/gateway.do", func(c *alipay.Config) { c.Clock = e.clock })
	pre := keyMode.Precreate(context.Background(), orderpay.PrecreateRequest{OutTradeNo: "CS_2", Amount: 100, Subject: "x", Deadline: e.clock.Now().Add(time.Hour)})
	if pre.Outcome != orderpay.OutcomeUnknown || pre.QRCode != "" || !strings.Contains(pre.Raw, "isv.missing-app-cert-sn") {
		t.Fatalf("public-key mode against a certificate-mode app: %+v", pre)
	}
}

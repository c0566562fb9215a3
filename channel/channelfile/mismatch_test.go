package channelfile_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"orderpay/channel/alipay"
	"orderpay/channel/channelfile"
	"orderpay/channel/wechat"
)

// goFieldNames are the names of the Go fields that hold what a channels file gives: the
// adapters' configurations and the file's own tables. None belongs in an error an operator
// reads about the file.
func goFieldNames() []string {
	var names []string
	for _, v := range []any{alipay.Config{}, alipay.AppKeys{}, wechat.Config{}, channelfile.AlipayAccount{},
		channelfile.AlipayAppKeys{}, channelfile.WechatAccount{}} {
		for f := range reflect.TypeOf(v).Fields() {
			names = append(names, f.Name)
		}
	}
	return names
}

// ecMaterial is an EC certificate and public key, PEM: material of a kind neither channel
// signs with.
func ecMaterial(t *testing.T) (certPEM, pubPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "not RSA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// A certificate that does not match its private key, and material of the wrong kind, planted
// in a channels file, are refused when the channels are built, and the error names the
// file's table, keys and files (`[alipay] app_cert_file (…) does not match
// app_private_key_file (…)`), never a Go field name.
func TestMismatchedCredentialsNameTheFilesKeys(t *testing.T) {
	t.Parallel()
	ecCert, ecPub := ecMaterial(t)
	fields := goFieldNames()
	for _, tc := range []struct {
		name, alipayMode string
		from, to         func(k keysOf) string
		want             func(k keysOf) string
	}{
		{"the app certificate of another app's key", channelfile.AlipayCertMode,
			func(k keysOf) string { return `app_cert_file = "alipay/appCertPublicKey_` + k.app + `.crt"` },
			func(k keysOf) string { return `app_cert_file = "alipay/appCertPublicKey_` + k.inApp + `.crt"` },
			func(k keysOf) string {
				return "[alipay] app_cert_file (alipay/appCertPublicKey_" + k.inApp + ".crt) does not match app_private_key_file (alipay/app_private_key.pem)"
			}},
		{"the in-app app's certificate of the main app's key", channelfile.AlipayCertMode,
			func(k keysOf) string { return `app_cert_file = "alipay/appCertPublicKey_` + k.inApp + `.crt"` },
			func(k keysOf) string { return `app_cert_file = "alipay/appCertPublicKey_` + k.app + `.crt"` },
			func(k keysOf) string {
				return "[alipay.inapp] app_cert_file (alipay/appCertPublicKey_" + k.app + ".crt) does not match app_private_key_file (alipay/inapp_app_private_key.pem)"
			}},
		{"an Alipay certificate without an RSA key", channelfile.AlipayCertMode,
			func(keysOf) string { return `alipay_cert_file = "alipay/alipayCertPublicKey_RSA2.crt"` },
			func(keysOf) string { return `alipay_cert_file = "ec.crt"` },
			func(keysOf) string { return "[alipay] alipay_cert_file (ec.crt) does not hold an RSA public key" }},
		{"an Alipay public key that is not RSA", channelfile.AlipayKeyMode,
			func(keysOf) string { return `alipay_public_key_file = "alipay/alipay_public_key.pem"` },
			func(keysOf) string { return `alipay_public_key_file = "ec_pub.pem"` },
			func(keysOf) string { return "[alipay] alipay_public_key_file (ec_pub.pem)" }},
		{"a merchant certificate of another key", channelfile.AlipayKeyMode,
			func(keysOf) string { return `merchant_private_key_file = "wechat/apiclient_key.pem"` },
			func(keysOf) string {
				return `merchant_private_key_file = "wechat/apiclient_key.pem"` + "\nmerchant_cert_file = \"other_cert.pem\""
			},
			func(keysOf) string {
				return "[wechat] merchant_cert_file (other_cert.pem) does not match merchant_private_key_file (wechat/apiclient_key.pem)"
			}},
		{"a WeChat Pay public key that is not RSA", channelfile.AlipayKeyMode,
			func(keysOf) string { return `public_key_file = "wechat/pub_key.pem"` },
			func(keysOf) string { return `public_key_file = "ec_pub.pem"` },
			func(keysOf) string { return "[wechat] public_key_file (ec_pub.pem) is not an RSA PKIX PEM public key" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, keys, path := simulatedIn(t, tc.alipayMode)
			k := keysOf{app: keys.AppID, inApp: keys.InApp.AppID}
			write(t, dir, "ec.crt", ecCert)
			write(t, dir, "ec_pub.pem", ecPub)
			write(t, dir, "other_cert.pem", keys.AlipayCerts.AppCertPEM) // an RSA certificate, not the merchant's
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.from(k)) {
				t.Fatalf("the file has no %q:\n%s", tc.from(k), data)
			}
			planted := filepath.Join(dir, "planted.toml")
			write(t, dir, "planted.toml", strings.Replace(string(data), tc.from(k), tc.to(k), 1))
			f, err := channelfile.Load(planted)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Channels("")
			if err == nil || !strings.Contains(err.Error(), tc.want(k)) {
				t.Fatalf("error %v; want one saying %q", err, tc.want(k))
			}
			t.Log(err)
			for _, name := range fields {
				if regexp.MustCompile(`\b` + name + `\b`).MatchString(err.Error()) {
					t.Errorf("the error names the Go field %s: %v", name, err)
				}
			}
			if strings.ContainsAny(err.Error(), "{}") {
				t.Errorf("the error holds an unnamed field: %v", err)
			}
		})
	}
}

// keysOf are the simulated Alipay apps' ids.
type keysOf struct{ app, inApp string }

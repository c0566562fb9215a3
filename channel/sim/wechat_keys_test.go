package sim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// wechatManifest is dir/wechat/manifest.json as an outside client reads it.
type wechatManifest struct {
	MchID                   string `json:"mchid"`
	AppID                   string `json:"appid"`
	MerchantSerial          string `json:"merchant_serial"`
	PublicKeyID             string `json:"public_key_id"`
	PlatformSerial          string `json:"platform_serial"`
	MerchantPrivateKeyFile  string `json:"merchant_private_key_file"`
	MerchantPublicKeyFile   string `json:"merchant_public_key_file"`
	APIv3KeyFile            string `json:"apiv3_key_file"`
	PlatformPrivateKeyFile  string `json:"platform_private_key_file"`
	PlatformPublicKeyFile   string `json:"platform_public_key_file"`
	PlatformCertificateFile string `json:"platform_certificate_file"`
	// Certificate mode's halves, absent from a manifest written before it was simulated.
	PlatformCertificateKeyFile string `json:"platform_certificate_key_file,omitempty"`
	PlatformCACertificateFile  string `json:"platform_ca_certificate_file,omitempty"`
	PlatformCAKeyFile          string `json:"platform_ca_key_file,omitempty"`
}

func readWechatManifest(t *testing.T, dir string) wechatManifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "wechat", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m wechatManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWechatKeys_CreatedInTheirOwnDirectoryAndReadableByTheSDK(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	created, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	wk := created.Wechat
	for _, f := range []struct{ value, pattern string }{
		{wk.MchID, `^1\d{9}$`},
		{wk.AppID, `^wx[0-9a-f]{16}$`},
		{wk.MerchantSerial, `^[0-9A-F]{40}$`},
		{wk.PlatformSerial, `^[0-9A-F]{40}$`},
		{wk.PublicKeyID, `^PUB_KEY_ID_\d+$`},
		{wk.APIv3Key, `^[0-9A-Za-z]{32}$`},
	} {
		if !regexp.MustCompile(f.pattern).MatchString(f.value) {
			t.Errorf("%q does not match %s", f.value, f.pattern)
		}
	}
	m := readWechatManifest(t, dir)
	wdir := filepath.Join(dir, "wechat")
	for path, want := range map[string]os.FileMode{
		wdir: 0o700,
		filepath.Join(wdir, m.MerchantPrivateKeyFile):     0o600,
		filepath.Join(wdir, m.APIv3KeyFile):               0o600,
		filepath.Join(wdir, m.PlatformPrivateKeyFile):     0o600,
		filepath.Join(wdir, m.PlatformPublicKeyFile):      0o644,
		filepath.Join(wdir, m.PlatformCertificateFile):    0o644,
		filepath.Join(wdir, m.PlatformCertificateKeyFile): 0o600,
		filepath.Join(wdir, m.PlatformCACertificateFile):  0o644,
		filepath.Join(wdir, m.PlatformCAKeyFile):          0o600,
		filepath.Join(wdir, "manifest.json"):              0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode %o, want %o", path, got, want)
		}
	}

	// Everything an outside SDK needs, read from the files as the SDK reads them.
	if m.MchID != wk.MchID || m.AppID != wk.AppID || m.MerchantSerial != wk.MerchantSerial ||
		m.PublicKeyID != wk.PublicKeyID || m.PlatformSerial != wk.PlatformSerial {
		t.Fatalf("manifest %+v does not name the keys' ids", m)
	}
	priv, err := utils.LoadPrivateKeyWithPath(filepath.Join(wdir, m.MerchantPrivateKeyFile))
	if err != nil || !priv.Equal(wk.MerchantPrivateKey) {
		t.Fatalf("merchant private key: %v", err)
	}
	pub, err := utils.LoadPublicKeyWithPath(filepath.Join(wdir, m.PlatformPublicKeyFile))
	if err != nil || !pub.Equal(wk.PlatformPublicKey) {
		t.Fatalf("platform public key: %v", err)
	}
	// The platform certificate is the CA's, over a key of its own (not the public key mode
	// key: a merchant is in one mode or the other), under its 40-hex-digit serial.
	cert, err := utils.LoadCertificateWithPath(filepath.Join(wdir, m.PlatformCertificateFile))
	if err != nil || utils.GetCertificateSerialNumber(*cert) != m.PlatformSerial || pub.Equal(cert.PublicKey) ||
		!wk.PlatformCertificateKey.PublicKey.Equal(cert.PublicKey) {
		t.Fatalf("platform certificate: %v", err)
	}
	ca, err := utils.LoadCertificateWithPath(filepath.Join(wdir, m.PlatformCACertificateFile))
	if err != nil || !ca.IsCA || cert.CheckSignatureFrom(ca) != nil {
		t.Fatalf("the platform certificate is not issued by the simulated CA: %v", err)
	}
	apiv3, err := os.ReadFile(filepath.Join(wdir, m.APIv3KeyFile))
	if err != nil || string(apiv3) != wk.APIv3Key {
		t.Fatalf("APIv3 key file %q: %v", apiv3, err)
	}

	reloaded, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	rw := reloaded.Wechat
	if rw.MchID != wk.MchID || rw.AppID != wk.AppID || rw.MerchantSerial != wk.MerchantSerial || rw.APIv3Key != wk.APIv3Key ||
		rw.PublicKeyID != wk.PublicKeyID || rw.PlatformSerial != wk.PlatformSerial ||
		!rw.MerchantPrivateKey.Equal(wk.MerchantPrivateKey) || !rw.PlatformPrivateKey.Equal(wk.PlatformPrivateKey) ||
		!rw.PlatformCertificate.Equal(wk.PlatformCertificate) || !rw.PlatformCertificateKey.Equal(wk.PlatformCertificateKey) ||
		!rw.PlatformCACertificate.Equal(wk.PlatformCACertificate) || !rw.PlatformCAKey.Equal(wk.PlatformCAKey) ||
		reloaded.AppID != created.AppID {
		t.Fatal("reloaded keys differ from the created ones")
	}
}

// A key directory written before WeChat Pay was simulated has only alipay/: its Alipay keys
// are kept and the WeChat part is added.
func TestWechatKeys_AddedToAnAlipayOnlyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "wechat")); err != nil {
		t.Fatal(err)
	}
	again, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.AppID != first.AppID || !again.AppPrivateKey.Equal(first.AppPrivateKey) || !again.AlipayPrivateKey.Equal(first.AlipayPrivateKey) {
		t.Fatal("the Alipay keys changed")
	}
	if again.Wechat.MchID == first.Wechat.MchID || again.Validate() != nil {
		t.Fatalf("the WeChat keys were not generated afresh: %v", again.Validate())
	}
	if m := readWechatManifest(t, dir); m.MchID != again.Wechat.MchID {
		t.Fatal("the new WeChat keys were not written")
	}
}

// A WeChat key directory written before certificate mode was simulated has no CA and a
// self-signed wechatpay_cert.pem over the public key mode key: the CA and a platform
// certificate it issued are added, every existing key and id is kept, and the manifest is
// rewritten last.
func TestWechatKeys_OlderDirectoryGetsPlatformCertificatesAndKeepsItsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	wdir := filepath.Join(dir, "wechat")
	// Turn the directory into what the previous version wrote.
	old := readWechatManifest(t, dir)
	for _, f := range []string{old.PlatformCertificateKeyFile, old.PlatformCACertificateFile, old.PlatformCAKeyFile} {
		if err := os.Remove(filepath.Join(wdir, f)); err != nil {
			t.Fatal(err)
		}
	}
	old.PlatformCertificateKeyFile, old.PlatformCACertificateFile, old.PlatformCAKeyFile = "", "", ""
	oldManifest, _ := json.MarshalIndent(old, "", "  ")
	if err := os.WriteFile(filepath.Join(wdir, "manifest.json"), oldManifest, 0o600); err != nil {
		t.Fatal(err)
	}

	again, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	w0, w1 := first.Wechat, again.Wechat
	if w1.MchID != w0.MchID || w1.AppID != w0.AppID || w1.MerchantSerial != w0.MerchantSerial || w1.APIv3Key != w0.APIv3Key ||
		w1.PublicKeyID != w0.PublicKeyID || !w1.MerchantPrivateKey.Equal(w0.MerchantPrivateKey) ||
		!w1.PlatformPrivateKey.Equal(w0.PlatformPrivateKey) || !again.AppPrivateKey.Equal(first.AppPrivateKey) {
		t.Fatal("an existing key or id changed")
	}
	if err := again.Validate(); err != nil || w1.PlatformCertificate.CheckSignatureFrom(w1.PlatformCACertificate) != nil {
		t.Fatalf("the added certificates: %v", err)
	}
	m := readWechatManifest(t, dir)
	if m.PlatformCertificateKeyFile == "" || m.PlatformCAKeyFile == "" || m.PlatformSerial != w1.PlatformSerial {
		t.Fatalf("manifest %+v does not name the added certificates", m)
	}
	for _, f := range []string{m.PlatformCertificateKeyFile, m.PlatformCAKeyFile} {
		if fi, err := os.Stat(filepath.Join(wdir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 600", f, fi, err)
		}
	}
	// And from now on it is read back as it is.
	third, err := sim.LoadOrCreateKeys(dir)
	if err != nil || !third.Wechat.PlatformCertificate.Equal(w1.PlatformCertificate) || !third.Wechat.PlatformCAKey.Equal(w1.PlatformCAKey) {
		t.Fatalf("reloading the upgraded directory: %v", err)
	}
}

func TestWechatKeys_RefusesAMismatchedPlatformKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := sim.LoadOrCreateKeys(dir); err != nil {
		t.Fatal(err)
	}
	m := readWechatManifest(t, dir)
	other := simtest.PEM(t, testKeys(t).Wechat.PlatformPublicKeyPEM)
	if err := os.WriteFile(filepath.Join(dir, "wechat", m.PlatformPublicKeyFile), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.LoadOrCreateKeys(dir); err == nil {
		t.Fatal("a platform public key of another pair was loaded")
	}
	keys := *testKeys(t)
	keys.Wechat.APIv3Key = "short"
	if keys.Validate() == nil {
		t.Fatal("a short APIv3 key validated")
	}
}

// A WeChat key directory written before the pay methods beside Native were simulated has no
// official account, mini program or app: they are made up and added with the AppSecret and
// the registered pages, every existing key and id is kept, and the manifest names them.
func TestWechatKeys_OlderDirectoryGetsTheOtherAppsAndKeepsItsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	wdir := filepath.Join(dir, "wechat")
	var m map[string]any
	data, _ := os.ReadFile(filepath.Join(wdir, "manifest.json"))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"jsapi_appid", "mini_appid", "app_appid", "h5_domains", "jsapi_paths"} {
		if m[k] == nil {
			t.Fatalf("a new manifest names no %s", k)
		}
		delete(m, k)
	}
	if err := os.Remove(filepath.Join(wdir, m["oauth_secret_file"].(string))); err != nil {
		t.Fatal(err)
	}
	delete(m, "oauth_secret_file")
	old, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(wdir, "manifest.json"), old, 0o600); err != nil {
		t.Fatal(err)
	}

	again, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	w0, w1 := first.Wechat, again.Wechat
	if w1.MchID != w0.MchID || w1.AppID != w0.AppID || w1.APIv3Key != w0.APIv3Key || w1.PlatformSerial != w0.PlatformSerial ||
		!w1.MerchantPrivateKey.Equal(w0.MerchantPrivateKey) || !w1.PlatformCertificateKey.Equal(w0.PlatformCertificateKey) {
		t.Fatal("an existing key or id changed")
	}
	if err := again.Validate(); err != nil || w1.JSAPIAppID == "" || w1.JSAPIAppID == w0.JSAPIAppID || len(w1.H5Domains) == 0 {
		t.Fatalf("the added apps: %v (%s)", err, w1.JSAPIAppID)
	}
	man := readWechatManifest(t, dir)
	var names map[string]any
	data, _ = os.ReadFile(filepath.Join(wdir, "manifest.json"))
	_ = json.Unmarshal(data, &names)
	if names["jsapi_appid"] != w1.JSAPIAppID || names["app_appid"] != w1.AppAppID || names["oauth_secret_file"] != "oauth_secret.txt" || man.MchID != w0.MchID {
		t.Fatalf("manifest %v does not name the added apps", names)
	}
	if fi, err := os.Stat(filepath.Join(wdir, "oauth_secret.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the AppSecret file: %v %v, want mode 600", fi, err)
	}
	third, err := sim.LoadOrCreateKeys(dir)
	if err != nil || third.Wechat.JSAPIAppID != w1.JSAPIAppID || third.Wechat.OAuthSecret != w1.OAuthSecret {
		t.Fatalf("reloading the upgraded directory: %v", err)
	}
}

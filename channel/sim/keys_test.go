package sim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

func TestLoadOrCreateKeys_CreatesThenReloadsIdenticalKeys(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")

	created, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !regexp.MustCompile(`^2088\d{12}$`).MatchString(created.SellerID) {
		t.Errorf("seller id %q is not a 2088 PID", created.SellerID)
	}
	if !regexp.MustCompile(`^\d{16}$`).MatchString(created.AppID) {
		t.Errorf("app id %q is not 16 digits", created.AppID)
	}
	for path, want := range map[string]os.FileMode{
		dir:                          0o700,
		filepath.Join(dir, "alipay"): 0o700,
		filepath.Join(dir, "alipay", "app_private_key.pem"):    0o600,
		filepath.Join(dir, "alipay", "alipay_private_key.pem"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode %o, want %o", path, got, want)
		}
	}

	reloaded, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if reloaded.AppID != created.AppID || reloaded.SellerID != created.SellerID {
		t.Errorf("ids changed: %s/%s → %s/%s", created.AppID, created.SellerID, reloaded.AppID, reloaded.SellerID)
	}
	if !reloaded.AppPrivateKey.Equal(created.AppPrivateKey) || !reloaded.AppPublicKey.Equal(created.AppPublicKey) ||
		!reloaded.AlipayPrivateKey.Equal(created.AlipayPrivateKey) || !reloaded.AlipayPublicKey.Equal(created.AlipayPublicKey) {
		t.Error("reloaded keys differ from the created ones")
	}

	// The PEM forms are what the SDK takes.
	appPriv := simtest.PEM(t, reloaded.AppPrivateKeyPEM)
	if _, err := alipay.New(reloaded.AppID, appPriv, false); err != nil {
		t.Errorf("alipay.New rejects the app private key PEM: %v", err)
	}
	c, _ := alipay.New(reloaded.AppID, appPriv, false)
	if err := c.LoadAliPayPublicKey(simtest.PEM(t, reloaded.AlipayPublicKeyPEM)); err != nil {
		t.Errorf("LoadAliPayPublicKey rejects the alipay public key PEM: %v", err)
	}
}

func TestLoadOrCreateKeys_RefusesMismatchedPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := sim.LoadOrCreateKeys(dir); err != nil {
		t.Fatal(err)
	}
	// Swap in another public key: the set no longer belongs together.
	other := simtest.PEM(t, testKeys(t).AppPublicKeyPEM)
	if err := os.WriteFile(filepath.Join(dir, "alipay", "app_public_key.pem"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.LoadOrCreateKeys(dir); err == nil {
		t.Fatal("a mismatched key pair was loaded")
	}
}

// A new key directory holds the certificate files with the console's names, public (0644),
// and the certificates are of the keys beside them.
func TestLoadOrCreateKeys_WritesTheCertificateFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"alipayRootCert.crt":                      keys.AlipayCerts.RootPEM,
		"alipayCertPublicKey_RSA2.crt":            keys.AlipayCerts.AlipayCertPEM,
		"appCertPublicKey_" + keys.AppID + ".crt": keys.AlipayCerts.AppCertPEM,
	} {
		path := filepath.Join(dir, "alipay", name)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want || want == "" {
			t.Fatalf("%s: %v, or not the loaded certificate", name, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %o, want 644", name, fi.Mode().Perm())
		}
	}
	if !keys.AppPublicKey.Equal(leafCert(t, keys.AlipayCerts.AppCertPEM).PublicKey) ||
		!keys.AlipayPublicKey.Equal(leafCert(t, keys.AlipayCerts.AlipayCertPEM).PublicKey) {
		t.Fatal("the certificates are not of the keys")
	}
	reloaded, err := sim.LoadOrCreateKeys(dir)
	if err != nil || *reloaded.AlipayCerts != *keys.AlipayCerts {
		t.Fatalf("reloaded certificates differ: %v", err)
	}
}

// A key directory written before certificate mode was simulated (no certificate files, a
// manifest that names none) gets certificates for the keys it holds; the keys stay, byte
// for byte, and so do the ids.
func TestLoadOrCreateKeys_OldLayoutGetsCertificatesAndKeepsItsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	created, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	alipayDir := filepath.Join(dir, "alipay")
	// Turn it into the old layout.
	manifestPath := filepath.Join(alipayDir, "manifest.json")
	var manifest map[string]any
	raw, err := os.ReadFile(manifestPath)
	if err != nil || json.Unmarshal(raw, &manifest) != nil {
		t.Fatalf("manifest: %v", err)
	}
	for _, k := range []string{"alipay_root_cert_file", "alipay_cert_public_key_file", "app_cert_public_key_file"} {
		name, _ := manifest[k].(string)
		if name == "" {
			t.Fatalf("the manifest does not name %s", k)
		}
		if err := os.Remove(filepath.Join(alipayDir, name)); err != nil {
			t.Fatal(err)
		}
		delete(manifest, k)
	}
	// The in-app app came after certificate mode: the old layout has none.
	for k := range manifest {
		if strings.HasPrefix(k, "inapp_") {
			delete(manifest, k)
		}
	}
	old, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(manifestPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
	keyFiles := map[string][]byte{}
	for _, name := range []string{"app_private_key.pem", "app_public_key.pem", "alipay_private_key.pem", "alipay_public_key.pem"} {
		keyFiles[name], _ = os.ReadFile(filepath.Join(alipayDir, name))
	}

	upgraded, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatalf("load the old layout: %v", err)
	}
	if upgraded.AppID != created.AppID || upgraded.SellerID != created.SellerID ||
		!upgraded.AppPrivateKey.Equal(created.AppPrivateKey) || !upgraded.AlipayPrivateKey.Equal(created.AlipayPrivateKey) {
		t.Fatal("the upgrade changed the ids or the keys")
	}
	for name, before := range keyFiles {
		after, _ := os.ReadFile(filepath.Join(alipayDir, name))
		if string(after) != string(before) {
			t.Errorf("%s was rewritten", name)
		}
	}
	if upgraded.AlipayCerts == nil || *upgraded.AlipayCerts == *created.AlipayCerts {
		t.Fatal("the upgrade issued no new certificates")
	}
	if upgraded.InApp != nil {
		t.Fatal("the upgrade made up an in-app app")
	}
	if !upgraded.AppPublicKey.Equal(leafCert(t, upgraded.AlipayCerts.AppCertPEM).PublicKey) {
		t.Fatal("the new app certificate is not of the kept app key")
	}
	// The certificates were written and named: the next load reads them, issues nothing.
	again, err := sim.LoadOrCreateKeys(dir)
	if err != nil || *again.AlipayCerts != *upgraded.AlipayCerts {
		t.Fatalf("the certificates added by the upgrade did not stay: %v", err)
	}
	if fi, _ := os.Stat(manifestPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("manifest mode %o, want 600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(alipayDir, "app_private_key.pem")); fi.Mode().Perm() != 0o600 {
		t.Errorf("app private key mode %o, want 600", fi.Mode().Perm())
	}
}

// A new keys directory holds the merchant's second Alipay app, for in-app payments: an id of
// its own, its own key pair and Alipay key pair, certificates of its keys from the same root
// as the main app's, private keys 0600, all named in alipay/manifest.json and read back the
// same.
func TestLoadOrCreateKeys_InAppApp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	created, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := created.InApp
	if a == nil {
		t.Fatal("no in-app app")
	}
	if !regexp.MustCompile(`^\d{16}$`).MatchString(a.AppID) || a.AppID == created.AppID {
		t.Fatalf("in-app app id %q (main %q)", a.AppID, created.AppID)
	}
	if a.AppPrivateKey.Equal(created.AppPrivateKey) || a.AlipayPrivateKey.Equal(created.AlipayPrivateKey) {
		t.Fatal("the in-app app shares a key with the main app")
	}
	if a.AlipayCerts == nil || a.AlipayCerts.RootPEM != created.AlipayCerts.RootPEM ||
		!a.AppPublicKey.Equal(leafCert(t, a.AlipayCerts.AppCertPEM).PublicKey) || !a.AlipayPublicKey.Equal(leafCert(t, a.AlipayCerts.AlipayCertPEM).PublicKey) {
		t.Fatal("the in-app app's certificates are not of its keys, or not from the main app's root")
	}
	var m map[string]string
	raw, _ := os.ReadFile(filepath.Join(dir, "alipay", "manifest.json"))
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["inapp_app_id"] != a.AppID {
		t.Fatalf("manifest inapp_app_id %q", m["inapp_app_id"])
	}
	for _, k := range []string{"inapp_app_private_key_file", "inapp_alipay_private_key_file"} {
		fi, err := os.Stat(filepath.Join(dir, "alipay", m[k]))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s (%s): %v, mode %v", k, m[k], err, fi)
		}
	}
	reloaded, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := reloaded.InApp
	if r == nil || r.AppID != a.AppID || !r.AppPrivateKey.Equal(a.AppPrivateKey) || !r.AlipayPrivateKey.Equal(a.AlipayPrivateKey) ||
		*r.AlipayCerts != *a.AlipayCerts {
		t.Fatal("the in-app app read back differs")
	}
}

// A keys directory written before the in-app app was simulated keeps working as it is: it
// loads with no in-app app, and nothing of it is rewritten.
func TestLoadOrCreateKeys_WithoutTheInAppAppKeepsNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := sim.LoadOrCreateKeys(dir); err != nil {
		t.Fatal(err)
	}
	manifestPath := filepath.Join(dir, "alipay", "manifest.json")
	var manifest map[string]any
	raw, _ := os.ReadFile(manifestPath)
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	for k := range manifest {
		if strings.HasPrefix(k, "inapp_") {
			delete(manifest, k)
		}
	}
	old, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(manifestPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if keys.InApp != nil {
		t.Fatalf("an in-app app %s was made up", keys.InApp.AppID)
	}
	if after, _ := os.ReadFile(manifestPath); string(after) != string(old) {
		t.Fatalf("the manifest was rewritten:\n%s", after)
	}
	s, err := sim.New(sim.Config{Keys: keys})
	if err != nil {
		t.Fatalf("a simulator of the keys: %v", err)
	}
	s.Close()
}

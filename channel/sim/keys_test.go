package sim_test

import (
	"os"
	"path/filepath"
	"regexp"
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

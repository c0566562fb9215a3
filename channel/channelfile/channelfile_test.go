package channelfile_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// write writes name under dir with data, making its directory.
func write(t *testing.T, dir, name, data string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// simulated is a keys directory with a channels file for it, as `orderpay sim` writes.
func simulated(t *testing.T) (dir string, keys *sim.Keys) {
	t.Helper()
	dir = t.TempDir()
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(dir, keys, "http://127.0.0.1:8090", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	if err := f.WriteFile(filepath.Join(dir, "channels.toml")); err != nil {
		t.Fatal(err)
	}
	return dir, keys
}

// refuses checks that good with its first from replaced by to does not load, with an error
// saying want.
func refuses(t *testing.T, dir string, good []byte, name, from, to, want string) {
	t.Helper()
	if !strings.Contains(string(good), from) {
		t.Fatalf("the simulator's file has no %q", from)
	}
	path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".toml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(good), from, to, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := channelfile.Load(path)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one saying %q", err, want)
	}
}

// The file the simulator writes reads back as the same accounts, with paths relative to
// the file, and builds both adapters.
func TestSimulatorFileRoundTrips(t *testing.T) {
	t.Parallel()
	dir, keys := simulated(t)
	f, err := channelfile.Load(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.AlipayConfig()
	if err != nil {
		t.Fatal(err)
	}
	wantPub, _ := keys.AlipayPublicKeyPEM()
	if a.AppID != keys.AppID || a.SellerID != keys.SellerID || a.GatewayURL != "http://127.0.0.1:8090/gateway.do" || a.AlipayPublicKeyPEM != wantPub {
		t.Fatalf("alipay config %+v", a)
	}
	w, err := f.WechatConfig()
	if err != nil {
		t.Fatal(err)
	}
	if w.MchID != keys.Wechat.MchID || w.AppID != keys.Wechat.AppID || w.APIv3Key != keys.Wechat.APIv3Key ||
		w.PublicKeyID != keys.Wechat.PublicKeyID || w.BaseURL != "http://127.0.0.1:8090" || w.MerchantSerial != keys.Wechat.MerchantSerial {
		t.Fatalf("wechat config: mchid %s appid %s public key %s base %s serial %s", w.MchID, w.AppID, w.PublicKeyID, w.BaseURL, w.MerchantSerial)
	}
	channels, err := f.Channels("")
	if err != nil || len(channels) != 2 || channels[orderpay.ChannelAlipay] == nil || channels[orderpay.ChannelWechat] == nil {
		t.Fatalf("channels %v, %v", channels, err)
	}
	if remote := f.Remote(); len(remote) != 0 {
		t.Fatalf("a simulator on loopback is remote: %v", remote)
	}
	// The file holds no secret: no key material, only the names of the files that do.
	data, _ := os.ReadFile(filepath.Join(dir, "channels.toml"))
	if strings.Contains(string(data), "PRIVATE KEY") || strings.Contains(string(data), keys.Wechat.APIv3Key) {
		t.Fatalf("the channels file holds a secret:\n%s", data)
	}
}

// In Alipay's certificate mode the file names the three certificates the console hands out,
// and the adapter is built from them.
func TestAlipayCertificateModeFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(dir, keys, "http://127.0.0.1:8090", channelfile.AlipayCertMode, channelfile.WechatPubKeyMode)
	path := filepath.Join(dir, "channels.toml")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{`mode = "cert"`, "appCertPublicKey_" + keys.AppID + ".crt", "alipayCertPublicKey_RSA2.crt", "alipayRootCert.crt"} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("the file lacks %q:\n%s", want, data)
		}
	}
	loaded, err := channelfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loaded.AlipayConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AlipayPublicKeyPEM != "" || cfg.AppCertPEM != keys.AlipayCerts.AppCertPEM || cfg.AlipayCertPEM != keys.AlipayCerts.AlipayCertPEM ||
		cfg.AlipayRootCertPEM != keys.AlipayCerts.RootPEM {
		t.Fatal("the certificates read back differ from the simulator's")
	}
	if _, err := loaded.Channels(""); err != nil {
		t.Fatal(err)
	}
}

// A shop with only Alipay writes only [alipay]; the console's bare base64 keys are taken as
// they are; the private key may come from the environment; production is the default
// gateway, and a remote channel is reported as such.
func TestOneChannelBareKeysFromTheEnvironment(t *testing.T) {
	k, _ := simtest.Keys(t)
	dir := t.TempDir()
	appKey, _ := k.AppPrivateKeyPEM()
	aliPub, _ := k.AlipayPublicKeyPEM()
	bare := func(p string) string {
		b, _ := pem.Decode([]byte(p))
		return base64.StdEncoding.EncodeToString(b.Bytes)
	}
	write(t, dir, "keys/alipayPublicKey_RSA2.txt", bare(aliPub)+"\n")
	t.Setenv("SHOP_ALIPAY_KEY", bare(appKey))
	write(t, dir, "channels.toml", `[alipay]
app_id = "`+k.AppID+`"
seller_id = "`+k.SellerID+`"
mode = "key"
app_private_key_env = "SHOP_ALIPAY_KEY"
alipay_public_key_file = "keys/alipayPublicKey_RSA2.txt"
`)
	f, err := channelfile.Load(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.AlipayConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GatewayURL != channelfile.AlipayProductionGateway || cfg.AlipayPublicKeyPEM != aliPub {
		t.Fatalf("config %+v", cfg)
	}
	if b, _ := pem.Decode([]byte(cfg.AppPrivateKeyPEM)); b == nil {
		t.Fatal("the bare app private key was not made PEM")
	} else if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
		t.Fatal(err)
	}
	channels, err := f.Channels("")
	if err != nil || len(channels) != 1 || channels[orderpay.ChannelAlipay] == nil {
		t.Fatalf("channels %v, %v", channels, err)
	}
	if remote := f.Remote(); len(remote) != 1 || remote[0] != orderpay.ChannelAlipay {
		t.Fatalf("remote %v, want the production gateway", remote)
	}
}

// A file that cannot be what the operator meant is refused, saying what is wrong and never
// showing a secret.
func TestBadFilesAreRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	dir, keys := simulated(t)
	good, err := os.ReadFile(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"a misspelt key", `seller_id =`, `seller =`, "unknown keys alipay.seller"},
		{"no mode", `mode = "key"`, ``, `[alipay] mode must be "key"`},
		{"cert mode without certificates", `mode = "key"`, `mode = "cert"`, `mode "cert" takes app_cert_file`},
		{"an app id of another shape", `app_id = "` + keys.AppID + `"`, `app_id = "12345"`, "is not an Alipay app id"},
		{"a seller id that is not a PID", `seller_id = "` + keys.SellerID + `"`, `seller_id = "1234567890123456"`, "is not a PID"},
		{"a gateway that is no URL", `gateway = "http://127.0.0.1:8090/gateway.do"`, `gateway = "staging"`, "gateway must be"},
		{"a key named twice", `app_private_key_file =`, `app_private_key_env = "X"` + "\napp_private_key_file =", "name the app private key once"},
		{"wechat pubkey mode without its key", `public_key_id = "` + keys.Wechat.PublicKeyID + `"`, ``, `mode "pubkey" takes public_key_id`},
		{"wechat base URL with a path", `base_url = "http://127.0.0.1:8090"`, `base_url = "http://127.0.0.1:8090/v3"`, "base_url must be"},
	} {
		t.Run(tc.name, func(t *testing.T) { refuses(t, dir, good, tc.name, tc.from, tc.to, tc.want) })
	}
	t.Run("an empty file", func(t *testing.T) {
		write(t, dir, "empty.toml", "# nothing\n")
		if _, err := channelfile.Load(filepath.Join(dir, "empty.toml")); err == nil || !strings.Contains(err.Error(), "no channel") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a key file that is not a key", func(t *testing.T) {
		write(t, dir, "bad/app.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		write(t, dir, "badkey.toml", strings.Replace(string(good), `app_private_key_file = "alipay/app_private_key.pem"`, `app_private_key_file = "bad/app.pem"`, 1))
		f, err := channelfile.Load(filepath.Join(dir, "badkey.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.AlipayConfig(); err == nil || !strings.Contains(err.Error(), "not an RSA private key") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("an APIv3 key of another length", func(t *testing.T) {
		write(t, dir, "short.key", "0123456789")
		write(t, dir, "short.toml", strings.Replace(string(good), `apiv3_key_file = "wechat/apiv3_key.txt"`, `apiv3_key_file = "short.key"`, 1))
		f, err := channelfile.Load(filepath.Join(dir, "short.toml"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WechatConfig()
		if err == nil || !strings.Contains(err.Error(), "32 characters") || strings.Contains(err.Error(), "0123456789") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("an environment variable that is not set", func(t *testing.T) {
		write(t, dir, "env.toml", strings.Replace(string(good), `apiv3_key_file = "wechat/apiv3_key.txt"`, `apiv3_key_env = "ORDERPAY_TEST_UNSET_APIV3"`, 1))
		f, err := channelfile.Load(filepath.Join(dir, "env.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WechatConfig(); err == nil || !strings.Contains(err.Error(), "ORDERPAY_TEST_UNSET_APIV3 is not set") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"http://127.0.0.1:8090/gateway.do":                    true,
		"http://localhost:8090":                               true,
		"http://[::1]:8090":                                   true,
		"http://127.8.9.10":                                   true,
		channelfile.AlipayProductionGateway:                   false,
		"https://api.mch.weixin.qq.com":                       false,
		"http://10.0.0.5:8090":                                false,
		"http://localhost.example.com:8090":                   false,
		"http://127.0.0.1.nip.io/gateway.do":                  false,
		"not a url at all \x7f":                               false,
		"https://openapi-sandbox.dl.alipaydev.com/gateway.do": false,
	} {
		if got := channelfile.IsLoopback(url); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", url, got, want)
		}
	}
}

package channelfile_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// simulatedIn is simulated in Alipay's mode mode: a keys directory with the channels file
// `orderpay sim` writes for it.
func simulatedIn(t *testing.T, mode string) (dir string, keys *sim.Keys, file string) {
	t.Helper()
	dir = t.TempDir()
	keys, err := sim.LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(dir, keys, "http://127.0.0.1:8090", mode, channelfile.WechatPubKeyMode)
	file = filepath.Join(dir, "channels.toml")
	if err := f.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	return dir, keys, file
}

// The file the simulator writes names the app of in-app payments, inapp_app_id, and gives
// its keys under [alipay.inapp] as [alipay] gives the main app's, in either mode, with paths
// relative to the file; they read back into the adapter's configuration (InApp), which
// builds, and whose description shows the in-app app's id, mode and fingerprints. No secret
// is in the file or the description.
func TestAlipayInAppAppFile(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{channelfile.AlipayKeyMode, channelfile.AlipayCertMode} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, keys, path := simulatedIn(t, mode)
			data, _ := os.ReadFile(path)
			for _, want := range []string{`inapp_app_id = "` + keys.InApp.AppID + `"`, "\n[alipay.inapp]\nmode = \"" + mode + `"`,
				`app_private_key_file = "alipay/inapp_app_private_key.pem"`} {
				if !strings.Contains(string(data), want) {
					t.Fatalf("the file lacks %q:\n%s", want, data)
				}
			}
			if strings.Contains(string(data), "PRIVATE KEY") {
				t.Fatalf("the channels file holds a key:\n%s", data)
			}
			f, err := channelfile.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := f.AlipayConfig()
			if err != nil {
				t.Fatal(err)
			}
			in := cfg.InApp
			wantKey, _ := keys.InApp.AppPrivateKeyPEM()
			if in == nil || in.AppID != keys.InApp.AppID || in.AppPrivateKeyPEM != wantKey || cfg.AppID != keys.AppID {
				t.Fatalf("the in-app app read back: %+v", in)
			}
			switch mode {
			case channelfile.AlipayKeyMode:
				wantPub, _ := keys.InApp.AlipayPublicKeyPEM()
				if in.AlipayPublicKeyPEM != wantPub || in.AppCertPEM != "" {
					t.Fatal("the in-app app's Alipay public key read back differs")
				}
			case channelfile.AlipayCertMode:
				c := keys.InApp.AlipayCerts
				if in.AlipayPublicKeyPEM != "" || in.AppCertPEM != c.AppCertPEM || in.AlipayCertPEM != c.AlipayCertPEM || in.AlipayRootCertPEM != c.RootPEM {
					t.Fatal("the in-app app's certificates read back differ")
				}
			}
			channels, err := f.Channels("")
			if err != nil {
				t.Fatal(err)
			}
			ch := channels[orderpay.ChannelAlipay]
			d := channelfile.Describe(ch)
			wantMode := mode // the file's own word
			if d.InApp == nil || d.InApp.AppID != keys.InApp.AppID || d.InApp.Mode != wantMode || d.InApp.PublicKeySHA256 == "" ||
				d.InApp.PublicKeySHA256 == d.PublicKeySHA256 {
				t.Fatalf("the description: %+v, in-app %+v", d, d.InApp)
			}
			shown, _ := json.Marshal(channelfile.Describe(ch))
			if strings.Contains(string(shown), "PRIVATE") || !strings.Contains(string(shown), `"inapp":{"channel":"alipay","mode":"`+wantMode+`","app_id":"`+keys.InApp.AppID+`"`) {
				t.Fatalf("the description as served: %s", shown)
			}
			if orderpay.ChannelFor(ch, orderpay.MethodInApp) == ch {
				t.Fatal("in-app payments are not made under the in-app app")
			}
		})
	}
}

// Older keys directories, without the in-app app, give a file without inapp_app_id: in-app
// payments are made under app_id.
func TestAlipayFileWithoutAnInAppApp(t *testing.T) {
	t.Parallel()
	dir, keys, _ := simulatedIn(t, channelfile.AlipayKeyMode)
	keys.InApp = nil
	path := filepath.Join(dir, "one-app.toml")
	if err := channelfile.ForSimulator(dir, keys, "http://127.0.0.1:8090", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "inapp") {
		t.Fatalf("a file for keys without an in-app app names one:\n%s", data)
	}
	f, err := channelfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	channels, err := f.Channels("")
	if err != nil {
		t.Fatal(err)
	}
	if ch := channels[orderpay.ChannelAlipay]; orderpay.ChannelFor(ch, orderpay.MethodInApp) != ch {
		t.Fatal("in-app payments of a file without inapp_app_id are not made under app_id")
	}
}

// The in-app app is refused, saying which key and why, never showing a secret: named by
// inapp_app_id without its keys, keys without inapp_app_id, the main app itself, an id of
// another shape, a key [alipay.inapp] does not take, its private key named twice or not at
// all, its mode missing or without its files; and, when it is read, an environment variable
// that is not set, a file that is not a key, and certificates that are not its key's. Its
// private key may come from the environment, as the main app's may.
func TestAlipayInAppAppIsRefusedWithTheReason(t *testing.T) {
	dir, keys, path := simulatedIn(t, channelfile.AlipayKeyMode)
	good, _ := os.ReadFile(path)
	inAppID := `inapp_app_id = "` + keys.InApp.AppID + `"`
	section := string(good)[strings.Index(string(good), "# The app of in-app payments"):strings.Index(string(good), "[wechat]")]
	inKey := `app_private_key_file = "alipay/inapp_app_private_key.pem"`
	inPub := `alipay_public_key_file = "alipay/inapp_alipay_public_key.pem"`
	inMode := "[alipay.inapp]\nmode = \"key\""
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"inapp_app_id without [alipay.inapp]", section, "", `[alipay] inapp_app_id "` + keys.InApp.AppID + `" names the app of in-app payments: give its keys under [alipay.inapp]`},
		{"[alipay.inapp] without inapp_app_id", inAppID, "", "[alipay.inapp] gives the keys of the app of in-app payments: name that app with [alipay] inapp_app_id"},
		{"the main app as the in-app app", inAppID, `inapp_app_id = "` + keys.AppID + `"`, "[alipay] inapp_app_id is app_id itself"},
		{"an in-app app id of another shape", inAppID, `inapp_app_id = "2021"`, `[alipay] inapp_app_id "2021" is not an Alipay app id`},
		{"an app id in [alipay.inapp]", inMode, inMode + "\napp_id = \"" + keys.InApp.AppID + `"`, "unknown keys alipay.inapp.app_id"},
		{"a seller in [alipay.inapp]", inMode, inMode + "\nseller_id = \"" + keys.SellerID + `"`, "unknown keys alipay.inapp.seller_id"},
		{"a misspelt key in [alipay.inapp]", inPub, `alipay_pub_key_file = "alipay/inapp_alipay_public_key.pem"`, "unknown keys alipay.inapp.alipay_pub_key_file"},
		{"the private key named twice", inKey, inKey + "\napp_private_key_env = \"X\"", "[alipay.inapp] name the app private key once"},
		{"no private key", inKey, "", "[alipay.inapp] name the app private key once"},
		{"no mode", inMode, "[alipay.inapp]", `[alipay.inapp] mode must be "key"`},
		{"key mode without the Alipay public key", inPub, "", `[alipay.inapp] mode "key" takes alipay_public_key_file`},
		{"key mode with a certificate", inPub, inPub + "\napp_cert_file = \"a.crt\"", `[alipay.inapp] mode "key" takes alipay_public_key_file, and no certificate files`},
		{"cert mode without certificates", inMode, "[alipay.inapp]\nmode = \"cert\"", `[alipay.inapp] mode "cert" takes app_cert_file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.from) {
				t.Fatalf("the simulator's file has no %q:\n%s", tc.from, good)
			}
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(p, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := channelfile.Load(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}

	// Read when the adapter is built.
	load := func(t *testing.T, name, from, to string) (*channelfile.File, error) {
		t.Helper()
		p := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(p, []byte(strings.Replace(string(good), from, to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := channelfile.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Channels("")
		return f, err
	}
	t.Run("the private key from the environment", func(t *testing.T) {
		key, _ := keys.InApp.AppPrivateKeyPEM()
		t.Setenv("SHOP_ALIPAY_INAPP_KEY", key)
		f, err := load(t, "env", inKey, `app_private_key_env = "SHOP_ALIPAY_INAPP_KEY"`)
		if err != nil {
			t.Fatal(err)
		}
		if cfg, _ := f.AlipayConfig(); cfg.InApp.AppPrivateKeyPEM != key {
			t.Fatal("the in-app app's private key from the environment differs")
		}
	})
	t.Run("an environment variable that is not set", func(t *testing.T) {
		_, err := load(t, "unset", inKey, `app_private_key_env = "ORDERPAY_TEST_UNSET_INAPP_KEY"`)
		if err == nil || !strings.Contains(err.Error(), "[alipay.inapp] app_private_key_env: the environment variable ORDERPAY_TEST_UNSET_INAPP_KEY is not set") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a key file that is not a key", func(t *testing.T) {
		write(t, dir, "bad/inapp.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		_, err := load(t, "badkey", inKey, `app_private_key_file = "bad/inapp.pem"`)
		if err == nil || !strings.Contains(err.Error(), "[alipay.inapp] app_private_key_file (bad/inapp.pem): not an RSA private key") || strings.Contains(err.Error(), "AAAA") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a missing Alipay public key file", func(t *testing.T) {
		_, err := load(t, "nofile", inPub, `alipay_public_key_file = "alipay/none.pem"`)
		if err == nil || !strings.Contains(err.Error(), "[alipay.inapp] alipay_public_key_file") {
			t.Fatalf("error %v", err)
		}
	})
}

// In certificate mode, an in-app app whose app certificate is the main app's (not of its
// private key) is refused when the adapter is built, naming the in-app app.
func TestAlipayInAppAppCertificateOfAnotherKey(t *testing.T) {
	t.Parallel()
	dir, keys, path := simulatedIn(t, channelfile.AlipayCertMode)
	data, _ := os.ReadFile(path)
	from := `app_cert_file = "alipay/appCertPublicKey_` + keys.InApp.AppID + `.crt"`
	if !strings.Contains(string(data), from) {
		t.Fatalf("the file has no %q:\n%s", from, data)
	}
	p := filepath.Join(dir, "other-cert.toml")
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), from, `app_cert_file = "alipay/appCertPublicKey_`+keys.AppID+`.crt"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := channelfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Channels(""); err == nil || !strings.Contains(err.Error(), "in-app app "+keys.InApp.AppID) ||
		!strings.Contains(err.Error(), "[alipay.inapp] app_cert_file (alipay/appCertPublicKey_"+keys.AppID+".crt) does not match app_private_key_file") {
		t.Fatalf("error %v", err)
	}
}

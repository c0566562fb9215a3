package channelfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Encode writes the file as TOML, each key with a comment on where its value comes from,
// so that the file a simulator writes reads like a production one an operator fills in.
func (f *File) Encode() []byte {
	var b bytes.Buffer
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	kv := func(key, value, comment string) {
		if value == "" {
			return
		}
		line("%s = %s%s", key, strconv.Quote(value), comment)
	}
	list := func(key string, values []string, comment string) {
		if len(values) == 0 {
			return
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strconv.Quote(v)
		}
		line("%s = [%s]%s", key, strings.Join(quoted, ", "), comment)
	}
	line("# orderpay channels file: the merchant accounts orderpay takes money with.")
	line("# Relative paths are relative to this file. Secrets live in the files (or environment")
	line("# variables) named here, never in this file. See docs/going-live.md.")
	// appKeys writes the keys of one Alipay app, the main app's or the in-app app's.
	appKeys := func(k *AlipayAppKeys) {
		kv("mode", k.Mode, "            # key (Alipay public key) or cert (public-key certificates)")
		kv("app_private_key_file", k.AppPrivateKeyFile, " # the app private key the key tool made")
		kv("app_private_key_env", k.AppPrivateKeyEnv, "")
		kv("alipay_public_key_file", k.AlipayPublicKeyFile, " # key mode: the Alipay public key")
		kv("app_cert_file", k.AppCertFile, "   # cert mode: appCertPublicKey_<app id>.crt")
		kv("alipay_cert_file", k.AlipayCertFile, "   # cert mode: alipayCertPublicKey_RSA2.crt")
		kv("alipay_root_cert_file", k.AlipayRootCertFile, "   # cert mode: alipayRootCert.crt")
	}
	if a := f.Alipay; a != nil {
		line("")
		line("[alipay]")
		kv("app_id", a.AppID, "          # the app's APPID (open platform → the app)")
		kv("seller_id", a.SellerID, "       # the merchant's PID (account centre)")
		kv("gateway", a.Gateway, "         # production, sandbox, or the gateway's URL")
		appKeys(&a.AlipayAppKeys)
		kv("inapp_app_id", a.InAppAppID, "    # the app of in-app payments, when not app_id; its keys below")
		if a.InApp != nil {
			line("")
			line("# The app of in-app payments (inapp_app_id): its keys, as [alipay] gives the main app's.")
			line("[alipay.inapp]")
			appKeys(a.InApp)
		}
		encodeFees(line, "alipay", a.Fees)
	}
	if w := f.Wechat; w != nil {
		line("")
		line("[wechat]")
		kv("mch_id", w.MchID, "          # the merchant number")
		kv("app_id", w.AppID, "          # the app id bound to it")
		kv("base_url", w.BaseURL, "        # default https://api.mch.weixin.qq.com")
		kv("mode", w.Mode, "            # pubkey (WeChat Pay public key) or certificate (platform certificates)")
		kv("merchant_serial", w.MerchantSerial, " # the API certificate's serial number")
		kv("merchant_private_key_file", w.MerchantPrivateKeyFile, " # apiclient_key.pem")
		kv("merchant_private_key_env", w.MerchantPrivateKeyEnv, "")
		kv("merchant_cert_file", w.MerchantCertFile, " # apiclient_cert.pem (optional: checks the key and serial)")
		kv("apiv3_key_file", w.APIv3KeyFile, "  # the 32-character APIv3 key")
		kv("apiv3_key_env", w.APIv3KeyEnv, "")
		kv("public_key_id", w.PublicKeyID, "   # pubkey mode: PUB_KEY_ID_…")
		kv("public_key_file", w.PublicKeyFile, " # pubkey mode: pub_key.pem")
		kv("jsapi_appid", w.JSAPIAppID, "     # JSAPI: the official account's appid")
		kv("mini_appid", w.MiniAppID, "      # mini program: its appid")
		kv("app_appid", w.AppAppID, "       # App: the app's appid")
		list("h5_domains", w.H5Domains, "      # H5: the registered H5 domains")
		list("jsapi_paths", w.JSAPIPaths, "     # JSAPI: the registered pay directories (支付授权目录)")
		kv("oauth_secret_file", w.OAuthSecretFile, " # the official account's AppSecret (web OAuth, snsapi_base)")
		kv("oauth_secret_env", w.OAuthSecretEnv, "")
		encodeFees(line, "wechat", w.Fees)
	}
	return b.Bytes()
}

// WriteFile writes the file at path through a rename, so that a reader never sees half of
// it. It holds no secret, only names of the files that do.
func (f *File) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".channels-*.toml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(f.Encode()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

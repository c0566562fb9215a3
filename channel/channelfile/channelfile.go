// Package channelfile reads the channels file: the merchant accounts orderpay takes money
// with, one TOML file naming the ids the Alipay open platform and the WeChat Pay merchant
// console show, and the key and certificate files they hand out (docs/going-live.md).
//
// Secrets are only ever read from files or environment variables the file names, never
// written in it, never logged and never shown: Describe gives the modes and the
// fingerprints of the public keys in use, for an operator.
package channelfile

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/wechat"
)

// Alipay gateways a file may name instead of a URL.
const (
	AlipayProductionGateway = "https://openapi.alipay.com/gateway.do"
	AlipaySandboxGateway    = "https://openapi-sandbox.dl.alipaydev.com/gateway.do"
)

// Modes: the adapters' own, so that the words written here are the words every output
// (channels check, GET /admin/channels, the startup log) shows.
const (
	AlipayKeyMode         = alipay.ModePublicKey                   // "key", 公钥模式: the Alipay public key
	AlipayCertMode        = alipay.ModeCertificate                 // "cert", 公钥证书模式: app, Alipay and root certificates
	WechatPubKeyMode      = string(wechat.ModePublicKey)           // "pubkey", 微信支付公钥: PUB_KEY_ID_… and pub_key.pem
	WechatCertificateMode = string(wechat.ModePlatformCertificate) // "certificate", 平台证书: downloaded from /v3/certificates
)

// File is a channels file as written. Every channel is optional; a shop with only Alipay
// writes only [alipay].
type File struct {
	Alipay *AlipayAccount `toml:"alipay"`
	Wechat *WechatAccount `toml:"wechat"`

	dir string // relative paths are relative to the file's directory
}

// AlipayAccount is the [alipay] table: an app on the Alipay open platform, and the app
// in-app payments are made under when it is another ([alipay.inapp]).
type AlipayAccount struct {
	AppID    string `toml:"app_id"`    // the app's id (APPID), 2021…
	SellerID string `toml:"seller_id"` // the merchant's PID, 2088…, checked in every notification
	// Gateway is "production", "sandbox" or a URL (the simulator's /gateway.do).
	// Defaults to production.
	Gateway string `toml:"gateway"`
	// The app's keys: its mode, its private key, and the Alipay public key or the
	// certificates of that mode.
	AlipayAppKeys
	// InAppAppID is the app of in-app payments (an Alipay mini program or 生活号) when it is
	// not app_id: 16 digits. Optional; with it, InApp ([alipay.inapp]) gives that app's keys
	// as the table gives the main app's, and in-app payments are made, queried, closed and
	// refunded under it, its notifications verified with its keys.
	InAppAppID string         `toml:"inapp_app_id"`
	InApp      *AlipayAppKeys `toml:"inapp"`
	// Fees is the account's fee contract ([alipay.fees]); optional, but without it fees and
	// settlement are not reconciled.
	Fees *Fees `toml:"fees"`
}

// AlipayAppKeys are the keys of one Alipay app, as [alipay] gives the main app's and
// [alipay.inapp] the in-app app's: the app's signing mode, its private key, and the Alipay
// public key (key mode) or the three certificates (cert mode) the console hands out for it.
type AlipayAppKeys struct {
	Mode string `toml:"mode"` // "key" or "cert"
	// AppPrivateKey is the app private key the Alipay key tool made (应用私钥): PEM, or
	// the bare base64 the tool writes. A file, or an environment variable.
	AppPrivateKeyFile string `toml:"app_private_key_file"`
	AppPrivateKeyEnv  string `toml:"app_private_key_env"`
	// Key mode: the Alipay public key (支付宝公钥) the console shows, PEM or bare base64.
	AlipayPublicKeyFile string `toml:"alipay_public_key_file"`
	// Cert mode: appCertPublicKey_<app id>.crt, alipayCertPublicKey_RSA2.crt and
	// alipayRootCert.crt, as the console hands them out.
	AppCertFile        string `toml:"app_cert_file"`
	AlipayCertFile     string `toml:"alipay_cert_file"`
	AlipayRootCertFile string `toml:"alipay_root_cert_file"`
}

// WechatAccount is the [wechat] table: a WeChat Pay merchant (Native payments, and the
// methods beside it whose apps and pages it names).
type WechatAccount struct {
	MchID string `toml:"mch_id"` // 商户号
	AppID string `toml:"app_id"` // the app id the merchant number is bound to: Native and H5
	// JSAPIAppID, MiniAppID and AppAppID are the official account, mini program and app
	// bound to the merchant number, each its own appid (wx and 16 hex digits): JSAPI, mini
	// program and App payments are made for them. Each is optional; a method without its
	// app is refused.
	JSAPIAppID string `toml:"jsapi_appid"`
	MiniAppID  string `toml:"mini_appid"`
	AppAppID   string `toml:"app_appid"`
	// H5Domains are the H5 payment domains registered in the merchant platform (a subdomain
	// matches); JSAPIPaths the JSAPI pay directories (支付授权目录), e.g.
	// "https://shop.example.com/pay/".
	H5Domains  []string `toml:"h5_domains"`
	JSAPIPaths []string `toml:"jsapi_paths"`
	// OAuthSecret is the official account's AppSecret, for its web OAuth (snsapi_base), which
	// tells the buyer's openid. A file, or an environment variable; optional.
	OAuthSecretFile string `toml:"oauth_secret_file"`
	OAuthSecretEnv  string `toml:"oauth_secret_env"`
	// BaseURL is the API host. Defaults to https://api.mch.weixin.qq.com.
	BaseURL string `toml:"base_url"`
	Mode    string `toml:"mode"` // "pubkey" or "certificate"
	// MerchantSerial is the serial number of the merchant API certificate (商户API证书序列号).
	// It may be left out when MerchantCertFile names apiclient_cert.pem, which it is read
	// from; when both are given they must agree.
	MerchantSerial string `toml:"merchant_serial"`
	// MerchantPrivateKey is apiclient_key.pem. A file, or an environment variable.
	MerchantPrivateKeyFile string `toml:"merchant_private_key_file"`
	MerchantPrivateKeyEnv  string `toml:"merchant_private_key_env"`
	// MerchantCertFile is apiclient_cert.pem, optional: with it the private key and the
	// serial are checked against the certificate before anything is sent.
	MerchantCertFile string `toml:"merchant_cert_file"`
	// APIv3Key is the 32-character APIv3 key set in the console (APIv3密钥). A file, or an
	// environment variable.
	APIv3KeyFile string `toml:"apiv3_key_file"`
	APIv3KeyEnv  string `toml:"apiv3_key_env"`
	// Pubkey mode: the WeChat Pay public key's id (PUB_KEY_ID_…) and pub_key.pem.
	PublicKeyID   string `toml:"public_key_id"`
	PublicKeyFile string `toml:"public_key_file"`
	// Fees is the account's fee contract ([wechat.fees]), as [alipay.fees].
	Fees *Fees `toml:"fees"`
}

// Load reads and checks the channels file at path. Unknown keys are errors (a misspelt key
// would otherwise be silently ignored), and so is a file with no channel.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("channels file: %w", err)
	}
	var f File
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return nil, fmt.Errorf("channels file %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("channels file %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f.dir = filepath.Dir(abs)
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("channels file %s: %w", path, err)
	}
	return &f, nil
}

var (
	alipayAppID    = regexp.MustCompile(`^\d{16}$`)
	alipaySellerID = regexp.MustCompile(`^2088\d{12}$`)
	wechatMchID    = regexp.MustCompile(`^\d{8,12}$`)
	wechatAppID    = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)
	wechatSerial   = regexp.MustCompile(`^[0-9A-Fa-f]{8,64}$`)
	wechatPubKeyID = regexp.MustCompile(`^PUB_KEY_ID_[0-9A-Za-z_]+$`)
	// wechatAppAppID is the shape of the appids of an official account, a mini program or
	// an app: wx and 16 hex digits.
	wechatAppAppID = regexp.MustCompile(`^wx[0-9a-fA-F]{16}$`)
	// wechatSecret is the shape of an official account's AppSecret: 32 hex digits.
	wechatSecret = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)
)

func (f *File) validate() error {
	if f.Alipay == nil && f.Wechat == nil {
		return errors.New("no channel: write an [alipay] or a [wechat] table, or both")
	}
	if a := f.Alipay; a != nil {
		switch {
		case !alipayAppID.MatchString(a.AppID):
			return fmt.Errorf("[alipay] app_id %q is not an Alipay app id (16 digits, from the open platform's app page)", a.AppID)
		case !alipaySellerID.MatchString(a.SellerID):
			return fmt.Errorf("[alipay] seller_id %q is not a PID (16 digits starting 2088, from the account centre)", a.SellerID)
		}
		if err := a.AlipayAppKeys.validate("[alipay]"); err != nil {
			return err
		}
		if _, err := f.alipayGateway(); err != nil {
			return err
		}
		if err := a.validateInApp(); err != nil {
			return err
		}
	}
	if w := f.Wechat; w != nil {
		switch {
		case !wechatMchID.MatchString(w.MchID):
			return fmt.Errorf("[wechat] mch_id %q is not a merchant number (digits, from the merchant console)", w.MchID)
		case !wechatAppID.MatchString(w.AppID):
			return fmt.Errorf("[wechat] app_id %q is not an app id", w.AppID)
		case w.MerchantSerial == "" && w.MerchantCertFile == "":
			return errors.New("[wechat] name merchant_serial (the API certificate's serial number), or merchant_cert_file (apiclient_cert.pem) to read it from")
		case w.MerchantSerial != "" && !wechatSerial.MatchString(w.MerchantSerial):
			return fmt.Errorf("[wechat] merchant_serial %q is not a certificate serial number (hex)", w.MerchantSerial)
		case (w.MerchantPrivateKeyFile == "") == (w.MerchantPrivateKeyEnv == ""):
			return errors.New("[wechat] name the merchant private key once: merchant_private_key_file (apiclient_key.pem) or merchant_private_key_env")
		case (w.APIv3KeyFile == "") == (w.APIv3KeyEnv == ""):
			return errors.New("[wechat] name the APIv3 key once: apiv3_key_file or apiv3_key_env")
		}
		if _, err := f.wechatBaseURL(); err != nil {
			return err
		}
		switch w.Mode {
		case WechatPubKeyMode:
			if !wechatPubKeyID.MatchString(w.PublicKeyID) || w.PublicKeyFile == "" {
				return errors.New(`[wechat] mode "pubkey" takes public_key_id (PUB_KEY_ID_…) and public_key_file (pub_key.pem)`)
			}
		case WechatCertificateMode:
			if w.PublicKeyID != "" || w.PublicKeyFile != "" {
				return errors.New(`[wechat] mode "certificate" downloads the platform certificates: leave out public_key_id and public_key_file`)
			}
		default:
			return fmt.Errorf(`[wechat] mode must be "pubkey" (WeChat Pay public key) or "certificate" (platform certificates), not %q`, w.Mode)
		}
		if err := w.validateMethods(); err != nil {
			return err
		}
	}
	return f.validateFees()
}

// validate checks that the keys of the app of table name its private key once and the files
// of its mode, and no other.
func (k *AlipayAppKeys) validate(table string) error {
	if (k.AppPrivateKeyFile == "") == (k.AppPrivateKeyEnv == "") {
		return fmt.Errorf("%s name the app private key once: app_private_key_file or app_private_key_env", table)
	}
	switch k.Mode {
	case AlipayKeyMode:
		if k.AlipayPublicKeyFile == "" || k.AppCertFile+k.AlipayCertFile+k.AlipayRootCertFile != "" {
			return fmt.Errorf(`%s mode "key" takes alipay_public_key_file, and no certificate files`, table)
		}
	case AlipayCertMode:
		if k.AlipayPublicKeyFile != "" || k.AppCertFile == "" || k.AlipayCertFile == "" || k.AlipayRootCertFile == "" {
			return fmt.Errorf(`%s mode "cert" takes app_cert_file, alipay_cert_file and alipay_root_cert_file, and no alipay_public_key_file`, table)
		}
	default:
		return fmt.Errorf(`%s mode must be "key" (Alipay public key) or "cert" (public-key certificates), not %q`, table, k.Mode)
	}
	return nil
}

// validateInApp checks the in-app payments' app: named by inapp_app_id exactly when
// [alipay.inapp] gives its keys, an app id of its own, and its keys as the main app's are.
func (a *AlipayAccount) validateInApp() error {
	switch {
	case a.InAppAppID == "" && a.InApp == nil:
		return nil
	case a.InApp == nil:
		return fmt.Errorf("[alipay] inapp_app_id %q names the app of in-app payments: give its keys under [alipay.inapp] (mode, app_private_key_file, and alipay_public_key_file or the three certificate files, as [alipay] gives the main app's)", a.InAppAppID)
	case a.InAppAppID == "":
		return errors.New("[alipay.inapp] gives the keys of the app of in-app payments: name that app with [alipay] inapp_app_id")
	case !alipayAppID.MatchString(a.InAppAppID):
		return fmt.Errorf("[alipay] inapp_app_id %q is not an Alipay app id (16 digits, from the open platform's app page)", a.InAppAppID)
	case a.InAppAppID == a.AppID:
		return errors.New("[alipay] inapp_app_id is app_id itself: to make in-app payments under app_id, leave out inapp_app_id and [alipay.inapp]")
	}
	return a.InApp.validate("[alipay.inapp]")
}

// validateMethods checks the keys of the methods beside Native: appids of WeChat's shape,
// each app its own; H5 domains that are host names; JSAPI paths that are pay directories;
// the AppSecret named at most once.
func (w *WechatAccount) validateMethods() error {
	apps := map[string]string{}
	for _, a := range []struct{ key, id string }{{"jsapi_appid", w.JSAPIAppID}, {"mini_appid", w.MiniAppID}, {"app_appid", w.AppAppID}} {
		if a.id == "" {
			continue
		}
		if !wechatAppAppID.MatchString(a.id) {
			return fmt.Errorf("[wechat] %s %q is not an appid (wx and 16 hex digits, from the app's own console)", a.key, a.id)
		}
		if other, dup := apps[strings.ToLower(a.id)]; dup {
			return fmt.Errorf("[wechat] %s and %s are the same appid: an official account, a mini program and an app each have their own", other, a.key)
		}
		apps[strings.ToLower(a.id)] = a.key
	}
	for _, d := range w.H5Domains {
		if !wechat.ValidH5Domain(d) {
			return fmt.Errorf("[wechat] h5_domains: %q is not a domain (a host name as registered in the merchant platform, without scheme, port or path)", d)
		}
	}
	for _, p := range w.JSAPIPaths {
		if err := wechat.CheckJSAPIPath(p); err != nil {
			return fmt.Errorf("[wechat] jsapi_paths: %w", err)
		}
	}
	if w.OAuthSecretFile != "" && w.OAuthSecretEnv != "" {
		return errors.New("[wechat] name the official account's AppSecret once: oauth_secret_file or oauth_secret_env")
	}
	if (w.OAuthSecretFile != "" || w.OAuthSecretEnv != "") && w.JSAPIAppID == "" {
		return errors.New("[wechat] oauth_secret_file is the official account's AppSecret: name the official account with jsapi_appid")
	}
	return nil
}

func (f *File) alipayGateway() (string, error) {
	switch g := f.Alipay.Gateway; g {
	case "", "production":
		return AlipayProductionGateway, nil
	case "sandbox":
		return AlipaySandboxGateway, nil
	default:
		u, err := url.Parse(g)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return "", fmt.Errorf(`[alipay] gateway must be "production", "sandbox" or an http(s) URL, not %q`, g)
		}
		return g, nil
	}
}

func (f *File) wechatBaseURL() (string, error) {
	b := f.Wechat.BaseURL
	if b == "" {
		return wechat.DefaultBaseURL, nil
	}
	u, err := url.Parse(b)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("[wechat] base_url must be an http(s) scheme and host, not %q", b)
	}
	return strings.TrimSuffix(b, "/"), nil
}

// Endpoints are the addresses the configured channels are reached at, by channel name.
func (f *File) Endpoints() map[string]string {
	out := map[string]string{}
	if f.Alipay != nil {
		out["alipay"], _ = f.alipayGateway()
	}
	if f.Wechat != nil {
		out["wechat"], _ = f.wechatBaseURL()
	}
	return out
}

// Remote names the configured channels that are not on a loopback address: real
// gateways, where money moves, which the deployment must face with HTTPS and
// authenticated callers.
func (f *File) Remote() []string {
	var out []string
	for name, endpoint := range f.Endpoints() {
		if !IsLoopback(endpoint) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// IsLoopback reports whether a URL's host is a loopback address (localhost, 127.0.0.0/8,
// ::1): the simulator on this machine, never a real channel.
func IsLoopback(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// path resolves a file name from the channels file: relative to the file's directory.
func (f *File) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(f.dir, name)
}

// read reads a named file, with the key that names it in the error.
func (f *File) read(key, name string) ([]byte, error) {
	b, err := os.ReadFile(f.path(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// secret reads a secret from the file or the environment variable named (one of them).
func (f *File) secret(key, file, env string) ([]byte, error) {
	if file != "" {
		return f.read(key+"_file", file)
	}
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s_env: the environment variable %s is not set", key, env)
	}
	return []byte(v), nil
}

// privateKeyPEM returns a private key as PEM: the key tools' bare base64 (PKCS#8 or
// PKCS#1) is wrapped, PEM is checked to parse. The key is never part of an error.
func privateKeyPEM(key string, data []byte) (string, error) {
	if block, _ := pem.Decode(data); block != nil {
		if _, err := parsePrivateKey(block.Bytes); err != nil {
			return "", fmt.Errorf("%s: not an RSA private key (PKCS#8 or PKCS#1)", key)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})), nil
	}
	der, err := base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(data), nil)))
	if err != nil {
		return "", fmt.Errorf("%s: neither PEM nor base64", key)
	}
	if _, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der})), nil
	}
	return "", fmt.Errorf("%s: not an RSA private key (PKCS#8 or PKCS#1)", key)
}

func parsePrivateKey(der []byte) (any, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	return x509.ParsePKCS1PrivateKey(der)
}

// publicKeyPEM returns a PKIX public key as PEM, from PEM or the consoles' bare base64.
func publicKeyPEM(key string, data []byte) (string, error) {
	der := []byte(nil)
	if block, _ := pem.Decode(data); block != nil {
		der = block.Bytes
	} else {
		var err error
		if der, err = base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(data), nil))); err != nil {
			return "", fmt.Errorf("%s: neither PEM nor base64", key)
		}
	}
	if _, err := x509.ParsePKIXPublicKey(der); err != nil {
		return "", fmt.Errorf("%s: not a public key (PKIX)", key)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// Fingerprint is the SHA-256 of a PEM block's DER, in hex: what an operator compares with
// the console, never the key itself.
func Fingerprint(pemData string) string {
	block, _ := pem.Decode([]byte(pemData))
	if block == nil {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}

// AlipayConfig builds the Alipay adapter's configuration: the file's ids, gateway and mode,
// and the keys and certificates read from their files; the in-app app's too
// ([alipay.inapp]), read the same way.
func (f *File) AlipayConfig() (alipay.Config, error) {
	a := f.Alipay
	if a == nil {
		return alipay.Config{}, errors.New("no [alipay] account in the channels file")
	}
	gateway, _ := f.alipayGateway()
	k, err := f.alipayKeys("[alipay]", a.AppID, &a.AlipayAppKeys)
	if err != nil {
		return alipay.Config{}, err
	}
	cfg := alipay.Config{AppID: a.AppID, SellerID: a.SellerID, AppPrivateKeyPEM: k.AppPrivateKeyPEM, AlipayPublicKeyPEM: k.AlipayPublicKeyPEM,
		AppCertPEM: k.AppCertPEM, AlipayCertPEM: k.AlipayCertPEM, AlipayRootCertPEM: k.AlipayRootCertPEM, GatewayURL: gateway}
	if a.InApp != nil {
		in, err := f.alipayKeys("[alipay.inapp]", a.InAppAppID, a.InApp)
		if err != nil {
			return alipay.Config{}, err
		}
		cfg.InApp = &in
	}
	return cfg, nil
}

// alipayKeys reads the keys of the app appID that table names (k): its private key, and
// the Alipay public key or the three certificates of its mode. Errors name the table's key,
// never a secret.
func (f *File) alipayKeys(table, appID string, k *AlipayAppKeys) (alipay.AppKeys, error) {
	out := alipay.AppKeys{AppID: appID}
	raw, err := f.secret(table+" app_private_key", k.AppPrivateKeyFile, k.AppPrivateKeyEnv)
	if err != nil {
		return out, err
	}
	if out.AppPrivateKeyPEM, err = privateKeyPEM(secretKey(table, "app_private_key", k.AppPrivateKeyFile, k.AppPrivateKeyEnv), raw); err != nil {
		return out, err
	}
	switch k.Mode {
	case AlipayKeyMode:
		b, err := f.read(table+" alipay_public_key_file", k.AlipayPublicKeyFile)
		if err != nil {
			return out, err
		}
		if out.AlipayPublicKeyPEM, err = publicKeyPEM(fileKey(table, "alipay_public_key_file", k.AlipayPublicKeyFile), b); err != nil {
			return out, err
		}
	case AlipayCertMode:
		if err := f.alipayCerts(table, k, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// WechatConfig builds the WeChat Pay adapter's configuration.
func (f *File) WechatConfig() (wechat.Config, error) {
	w := f.Wechat
	if w == nil {
		return wechat.Config{}, errors.New("no [wechat] account in the channels file")
	}
	base, _ := f.wechatBaseURL()
	raw, err := f.secret("[wechat] merchant_private_key", w.MerchantPrivateKeyFile, w.MerchantPrivateKeyEnv)
	if err != nil {
		return wechat.Config{}, err
	}
	key, err := privateKeyPEM(secretKey("[wechat]", "merchant_private_key", w.MerchantPrivateKeyFile, w.MerchantPrivateKeyEnv), raw)
	if err != nil {
		return wechat.Config{}, err
	}
	serial := w.MerchantSerial
	if w.MerchantCertFile != "" {
		if serial, err = f.merchantSerial(key); err != nil {
			return wechat.Config{}, err
		}
	}
	apiV3, err := f.secret("[wechat] apiv3_key", w.APIv3KeyFile, w.APIv3KeyEnv)
	if err != nil {
		return wechat.Config{}, err
	}
	apiV3 = bytes.TrimSpace(apiV3)
	if len(apiV3) != 32 {
		return wechat.Config{}, fmt.Errorf("%s: the APIv3 key must be the 32 characters set in the merchant console (API安全 → APIv3密钥)", secretKey("[wechat]", "apiv3_key", w.APIv3KeyFile, w.APIv3KeyEnv))
	}
	cfg := wechat.Config{MchID: w.MchID, AppID: w.AppID, MerchantSerial: strings.ToUpper(serial), MerchantPrivateKeyPEM: key,
		APIv3Key: string(apiV3), BaseURL: base,
		JSAPIAppID: w.JSAPIAppID, MiniAppID: w.MiniAppID, AppAppID: w.AppAppID,
		H5Domains: w.H5Domains, JSAPIPaths: w.JSAPIPaths}
	if w.OAuthSecretFile != "" || w.OAuthSecretEnv != "" {
		secret, err := f.secret("[wechat] oauth_secret", w.OAuthSecretFile, w.OAuthSecretEnv)
		if err != nil {
			return wechat.Config{}, err
		}
		if secret = bytes.TrimSpace(secret); !wechatSecret.Match(secret) {
			return wechat.Config{}, fmt.Errorf("%s: the official account's AppSecret must be the 32 hex digits its console shows (设置与开发 → 基本配置)", secretKey("[wechat]", "oauth_secret", w.OAuthSecretFile, w.OAuthSecretEnv))
		}
		cfg.OAuthSecret = string(secret)
	}
	if base != wechat.DefaultBaseURL {
		// Another API host (the simulator) serves the official account's OAuth too.
		cfg.OAuthBaseURL = base
	}
	switch w.Mode {
	case WechatPubKeyMode:
		cfg.Mode = wechat.ModePublicKey
		b, err := f.read("[wechat] public_key_file", w.PublicKeyFile)
		if err != nil {
			return wechat.Config{}, err
		}
		if cfg.PlatformPublicKeyPEM, err = publicKeyPEM(fileKey("[wechat]", "public_key_file", w.PublicKeyFile), b); err != nil {
			return wechat.Config{}, err
		}
		cfg.PublicKeyID = w.PublicKeyID
	case WechatCertificateMode:
		wechatCertificateMode(&cfg)
	}
	return cfg, nil
}

// merchantSerial reads the merchant API certificate, checks that the private key is its
// key and that merchant_serial (if written too) is its serial, and returns the serial.
func (f *File) merchantSerial(keyPEM string) (string, error) {
	w := f.Wechat
	b, err := f.read("[wechat] merchant_cert_file", w.MerchantCertFile)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", fmt.Errorf("%s: not a PEM certificate (apiclient_cert.pem)", fileKey("[wechat]", "merchant_cert_file", w.MerchantCertFile))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileKey("[wechat]", "merchant_cert_file", w.MerchantCertFile), err)
	}
	keyName := secretKey("", "merchant_private_key", w.MerchantPrivateKeyFile, w.MerchantPrivateKeyEnv)
	kb, _ := pem.Decode([]byte(keyPEM))
	key, err := parsePrivateKey(kb.Bytes)
	if err != nil {
		return "", fmt.Errorf("[wechat] %s: not an RSA private key", keyName)
	}
	pub, ok := key.(interface{ Public() any })
	if !ok || !publicKeysEqual(pub.Public(), cert.PublicKey) {
		return "", fmt.Errorf("%s does not match %s: apiclient_cert.pem is the certificate of another key than apiclient_key.pem",
			fileKey("[wechat]", "merchant_cert_file", w.MerchantCertFile), keyName)
	}
	serial := strings.ToUpper(hex.EncodeToString(cert.SerialNumber.Bytes()))
	if w.MerchantSerial != "" && !strings.EqualFold(strings.TrimLeft(w.MerchantSerial, "0"), strings.TrimLeft(serial, "0")) {
		return "", fmt.Errorf("[wechat] merchant_serial %s does not match merchant_cert_file (%s), whose serial is %s", w.MerchantSerial, w.MerchantCertFile, serial)
	}
	return serial, nil
}

func publicKeysEqual(a, b any) bool {
	ea, ok := a.(interface{ Equal(x any) bool })
	return ok && ea.Equal(b)
}

// Channels builds an adapter for every channel the file configures, by channel name.
// notifyBase is where the channels post notifications (the public URL): WeChat Pay takes a
// refund's notify_url with each refund; Alipay notifies a refund to its payment's.
func (f *File) Channels(notifyBase string) (map[string]orderpay.Channel, error) {
	out := map[string]orderpay.Channel{}
	if f.Alipay != nil {
		cfg, err := f.AlipayConfig()
		if err != nil {
			return nil, err
		}
		ch, err := alipay.New(cfg)
		if err != nil {
			return nil, f.adapterError(orderpay.ChannelAlipay, err)
		}
		out[orderpay.ChannelAlipay] = ch
	}
	if f.Wechat != nil {
		cfg, err := f.WechatConfig()
		if err != nil {
			return nil, err
		}
		if notifyBase != "" {
			cfg.RefundNotifyURL = notifyBase + "/notify/" + orderpay.ChannelWechat
		}
		ch, err := wechat.New(cfg)
		if err != nil {
			return nil, f.adapterError(orderpay.ChannelWechat, err)
		}
		out[orderpay.ChannelWechat] = ch
	}
	return out, nil
}

// Describe is what an operator may see of a channel's configuration: its mode, ids and the
// fingerprints of the keys and certificates it verifies with, in the channels file's words;
// never a secret.
func Describe(ch orderpay.Channel) orderpay.ChannelDescription {
	switch c := ch.(type) {
	case *alipay.Channel:
		return c.Describe()
	case *wechat.Channel:
		return c.Describe()
	}
	return orderpay.ChannelDescription{Channel: ch.Name()}
}

// WalletAppID is the WeChat appid whose openid a method pays for: the official account's
// for jsapi, the mini program's for mini; "" for any other method or channel, or a file
// without WeChat.
func (f *File) WalletAppID(channel string, m orderpay.PayMethod) string {
	if f == nil || f.Wechat == nil || channel != orderpay.ChannelWechat {
		return ""
	}
	switch m {
	case orderpay.MethodJSAPI:
		return f.Wechat.JSAPIAppID
	case orderpay.MethodMini:
		return f.Wechat.MiniAppID
	}
	return ""
}

// fileKey names a key of table that names a file, with the file: `[alipay] app_cert_file
// (certs/appCertPublicKey.crt)`. An empty table leaves it out.
func fileKey(table, key, file string) string {
	return strings.TrimSpace(fmt.Sprintf("%s %s (%s)", table, key, file))
}

// secretKey names the key of table that gives a secret, key_file or key_env, whichever the
// file writes, with the file or the variable (never the secret).
func secretKey(table, key, file, env string) string {
	if file != "" {
		return fileKey(table, key+"_file", file)
	}
	return fileKey(table, key+"_env", env)
}

// adapterError is an adapter's refusal of what the file gives it. A refusal naming the
// adapter's configuration fields names the file's keys that gave them instead, each table
// once (`[alipay] app_cert_file (…) does not match app_private_key_file (…)`).
func (f *File) adapterError(channel string, err error) error {
	fe, ok := errors.AsType[*orderpay.FieldError](err)
	if !ok {
		return fmt.Errorf("[%s] %w", channel, err)
	}
	named := map[string]bool{}
	text := fe.Named(func(field string) string {
		table, key, value := f.fieldKey(channel, field)
		if key == "" {
			return field
		}
		name := key
		if value != "" {
			name += " (" + value + ")"
		}
		if !named[table] {
			named[table] = true
			name = table + " " + name
		}
		return name
	})
	if !strings.Contains(text, "[") {
		text = "[" + channel + "] " + text
	}
	return errors.New(text)
}

// fieldKey is the table and key of the file that give an adapter's configuration field, and
// the file or environment variable the key names ("" for a value written in the file).
func (f *File) fieldKey(channel, field string) (table, key, value string) {
	switch channel {
	case orderpay.ChannelAlipay:
		a := f.Alipay
		table, k := "[alipay]", &a.AlipayAppKeys
		if rest, ok := strings.CutPrefix(field, "InApp."); ok {
			if rest == "AppID" {
				return "[alipay]", "inapp_app_id", ""
			}
			if a.InApp == nil {
				return "", "", ""
			}
			table, k, field = "[alipay.inapp]", a.InApp, rest
		}
		switch field {
		case "AppID":
			return table, "app_id", ""
		case "SellerID":
			return "[alipay]", "seller_id", ""
		case "AppPrivateKeyPEM":
			if k.AppPrivateKeyFile != "" {
				return table, "app_private_key_file", k.AppPrivateKeyFile
			}
			return table, "app_private_key_env", k.AppPrivateKeyEnv
		case "AlipayPublicKeyPEM":
			return table, "alipay_public_key_file", k.AlipayPublicKeyFile
		case "AppCertPEM":
			return table, "app_cert_file", k.AppCertFile
		case "AlipayCertPEM":
			return table, "alipay_cert_file", k.AlipayCertFile
		case "AlipayRootCertPEM":
			return table, "alipay_root_cert_file", k.AlipayRootCertFile
		}
	case orderpay.ChannelWechat:
		w := f.Wechat
		switch field {
		case "MchID":
			return "[wechat]", "mch_id", ""
		case "AppID":
			return "[wechat]", "app_id", ""
		case "Mode":
			return "[wechat]", "mode", ""
		case "MerchantSerial":
			if w.MerchantSerial == "" {
				return "[wechat]", "merchant_cert_file", w.MerchantCertFile
			}
			return "[wechat]", "merchant_serial", ""
		case "MerchantPrivateKeyPEM":
			if w.MerchantPrivateKeyFile != "" {
				return "[wechat]", "merchant_private_key_file", w.MerchantPrivateKeyFile
			}
			return "[wechat]", "merchant_private_key_env", w.MerchantPrivateKeyEnv
		case "APIv3Key":
			if w.APIv3KeyFile != "" {
				return "[wechat]", "apiv3_key_file", w.APIv3KeyFile
			}
			return "[wechat]", "apiv3_key_env", w.APIv3KeyEnv
		case "PlatformPublicKeyPEM":
			return "[wechat]", "public_key_file", w.PublicKeyFile
		case "PublicKeyID":
			return "[wechat]", "public_key_id", ""
		}
	}
	return "", "", ""
}

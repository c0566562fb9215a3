package sim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// WechatKeys are the WeChat Pay API v3 credentials shared by the simulated WeChat Pay and the
// merchant (docs/channels.md §B3). Never log any of them.
//
// The merchant signs requests with MerchantPrivateKey, naming MerchantSerial in the
// Authorization header; the simulator verifies them with MerchantPublicKey. Notifications
// are encrypted with AES-256-GCM under APIv3Key.
//
// The simulator signs answers and notifications in one of two ways, as a real merchant is
// set up in exactly one of them (Config.WechatMode, docs/channels.md §E):
//   - public key mode: with PlatformPrivateKey, naming PublicKeyID in Wechatpay-Serial; the
//     merchant verifies with PlatformPublicKey (pub_key.pem);
//   - platform certificate mode: with PlatformCertificateKey, naming PlatformSerial; the
//     merchant downloads PlatformCertificate from GET /v3/certificates. It is issued by
//     PlatformCACertificate, the simulated CA, whose key PlatformCAKey also issues the
//     certificates a rotation brings (Simulator.RotateWechatCertificate).
type WechatKeys struct {
	MchID string // the merchant number, 10 digits
	AppID string // the merchant's app id, "wx" + 16 lowercase hex digits: Native and H5

	// JSAPIAppID, MiniAppID and AppAppID are the other apps bound to the merchant number,
	// each with an appid of its own (docs/channels.md §F2): the official account whose pages
	// pay by JSAPI, the mini program, and the mobile app of App payments.
	JSAPIAppID string
	MiniAppID  string
	AppAppID   string
	// OAuthSecret is the official account's AppSecret (32 hex digits), which the shop gives
	// with a code of its web OAuth to learn the buyer's openid (snsapi_base).
	OAuthSecret string
	// H5Domains are the merchant's registered H5 payment domains (a subdomain matches);
	// JSAPIPaths its registered JSAPI pay directories (支付授权目录): URL prefixes with
	// scheme and host, ending in "/". The simulated WeChat client checks the paying page
	// against them.
	H5Domains  []string
	JSAPIPaths []string

	MerchantPrivateKey *rsa.PrivateKey
	MerchantPublicKey  *rsa.PublicKey
	// MerchantSerial is the serial number of the merchant API certificate: 40 uppercase hex
	// digits. Only the number is simulated, not the certificate.
	MerchantSerial string

	// APIv3Key is the 32-character key of the notifications' AES-256-GCM encryption.
	APIv3Key string

	// PlatformPrivateKey and PlatformPublicKey are the WeChat Pay public key pair of public
	// key mode.
	PlatformPrivateKey *rsa.PrivateKey
	PlatformPublicKey  *rsa.PublicKey
	// PublicKeyID names PlatformPublicKey in public key mode: "PUB_KEY_ID_" + digits.
	PublicKeyID string

	// PlatformCACertificate and PlatformCAKey are the simulated CA that issues platform
	// certificates, as Tenpay's CA issues WeChat's.
	PlatformCACertificate *x509.Certificate
	PlatformCAKey         *rsa.PrivateKey
	// PlatformCertificate is the platform certificate of certificate mode, issued by the CA
	// over PlatformCertificateKey, valid five years.
	PlatformCertificate    *x509.Certificate
	PlatformCertificateKey *rsa.PrivateKey
	PlatformSerial         string // PlatformCertificate's serial: 40 uppercase hex digits
}

// The formats of WeChat Pay identifiers.
var (
	wechatMchIDPattern  = regexp.MustCompile(`^[0-9]{10}$`)
	wechatAppIDPattern  = regexp.MustCompile(`^wx[0-9a-f]{16}$`)
	wechatSerialPattern = regexp.MustCompile(`^[0-9A-F]{40}$`)
	wechatPubKeyPattern = regexp.MustCompile(`^PUB_KEY_ID_[0-9]{1,64}$`)
	wechatAPIv3Pattern  = regexp.MustCompile(`^[0-9A-Za-z]{32}$`)
	wechatSecretPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// The simulated merchant's registered pages: the shop's own address, where orderpay serve
// listens by default (127.0.0.1) and its pay page (/pay/{order_no}). A JSAPI path without
// a port stands for its host on any port, so a shop on a test port passes.
var (
	defaultWechatH5Domains  = []string{"127.0.0.1", "localhost"}
	defaultWechatJSAPIPaths = []string{"http://127.0.0.1/pay/", "http://localhost/pay/"}
)

// Lifetimes of the simulated certificates. WeChat's platform certificates last five years
// (docs/channels.md §E); the CA outlives every certificate it issues.
const (
	platformCertLifetime = 5 * 365 * 24 * time.Hour
	platformCALifetime   = 20 * 365 * 24 * time.Hour
)

// GenerateWechatKeys returns fresh WeChat Pay credentials: four RSA-2048 pairs from
// crypto/rand (merchant, public key mode, the simulated CA and the platform certificate),
// the CA's certificate and a platform certificate it issued, and random ids, serials and
// APIv3 key in WeChat's formats.
func GenerateWechatKeys() (*WechatKeys, error) {
	var (
		merchant, platform *rsa.PrivateKey
		certs              *wechatPlatformCerts
		keyErr, certErr    error
		wg                 sync.WaitGroup
	)
	wg.Go(func() { keyErr = generateRSAKeys(&merchant, &platform) })
	wg.Go(func() { certs, certErr = generatePlatformCerts() })
	wg.Wait()
	if err := errors.Join(keyErr, certErr); err != nil {
		return nil, fmt.Errorf("sim: generate wechat keys: %w", err)
	}
	mchID, err := randomDigits(9)
	if err != nil {
		return nil, err
	}
	appID, err := randomHex(8)
	if err != nil {
		return nil, err
	}
	merchantSerial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	pubKeyDigits, err := randomDigits(30)
	if err != nil {
		return nil, err
	}
	apps, err := generateWechatApps()
	if err != nil {
		return nil, err
	}
	keys := &WechatKeys{
		MchID:              "1" + mchID, // real merchant numbers start with 1
		AppID:              "wx" + appID,
		MerchantPrivateKey: merchant,
		MerchantPublicKey:  &merchant.PublicKey,
		MerchantSerial:     merchantSerial,
		APIv3Key:           rand.Text()[:26] + strings.ToLower(rand.Text()[:6]),
		PlatformPrivateKey: platform,
		PlatformPublicKey:  &platform.PublicKey,
		PublicKeyID:        "PUB_KEY_ID_0" + pubKeyDigits,
	}
	certs.setOn(keys)
	apps.setOn(keys)
	return keys, nil
}

// wechatApps are the merchant's bound apps beside the main one, and what is registered for
// its pages: the part of the keys that pay methods other than Native need.
type wechatApps struct {
	jsapi, mini, app, secret string
	h5Domains, jsapiPaths    []string
}

// generateWechatApps makes up the appids of an official account, a mini program and an app,
// the official account's AppSecret, and registers the shop's own address for H5 and JSAPI.
func generateWechatApps() (*wechatApps, error) {
	var ids [4]string
	for i := range ids {
		n := 8
		if i == 3 {
			n = 16 // the AppSecret: 32 hex digits
		}
		h, err := randomHex(n)
		if err != nil {
			return nil, err
		}
		ids[i] = h
	}
	return &wechatApps{jsapi: "wx" + ids[0], mini: "wx" + ids[1], app: "wx" + ids[2], secret: ids[3],
		h5Domains: slices.Clone(defaultWechatH5Domains), jsapiPaths: slices.Clone(defaultWechatJSAPIPaths)}, nil
}

func (a *wechatApps) setOn(k *WechatKeys) {
	k.JSAPIAppID, k.MiniAppID, k.AppAppID, k.OAuthSecret = a.jsapi, a.mini, a.app, a.secret
	k.H5Domains, k.JSAPIPaths = slices.Clone(a.h5Domains), slices.Clone(a.jsapiPaths)
}

// wechatPlatformCerts is the certificate half of the WeChat keys: the simulated CA and the
// first platform certificate it issued.
type wechatPlatformCerts struct {
	ca      *x509.Certificate
	caKey   *rsa.PrivateKey
	cert    *x509.Certificate
	certKey *rsa.PrivateKey
}

func (c *wechatPlatformCerts) setOn(k *WechatKeys) {
	k.PlatformCACertificate, k.PlatformCAKey = c.ca, c.caKey
	k.PlatformCertificate, k.PlatformCertificateKey = c.cert, c.certKey
	k.PlatformSerial = certificateSerial(c.cert)
}

// generatePlatformCerts makes a simulated CA and a first platform certificate under it.
func generatePlatformCerts() (*wechatPlatformCerts, error) {
	var caKey, certKey *rsa.PrivateKey
	if err := generateRSAKeys(&caKey, &certKey); err != nil {
		return nil, err
	}
	ca, err := newPlatformCA(caKey)
	if err != nil {
		return nil, err
	}
	// An hour of slack, so that a verifier whose clock is a little behind takes it as valid.
	cert, err := IssuePlatformCertificate(ca, caKey, &certKey.PublicKey, time.Now().Add(-time.Hour))
	if err != nil {
		return nil, err
	}
	return &wechatPlatformCerts{ca: ca, caKey: caKey, cert: cert, certKey: certKey}, nil
}

// newPlatformCA self-signs the simulated CA's certificate.
func newPlatformCA(key *rsa.PrivateKey) (*x509.Certificate, error) {
	serial, err := randomCertSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "Tenpay.com Root CA (orderpay simulator)",
			Organization: []string{"orderpay channel simulator"},
			Country:      []string{"CN"},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(platformCALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return createCertificate(tmpl, tmpl, &key.PublicKey, key)
}

// IssuePlatformCertificate issues a WeChat Pay platform certificate over pub under the CA
// (ca, caKey), valid from notBefore for five years, with a serial of 40 uppercase hex
// digits like WeChat's. The simulator uses it for rotations; tests use it to make
// certificates of their own.
func IssuePlatformCertificate(ca *x509.Certificate, caKey *rsa.PrivateKey, pub *rsa.PublicKey, notBefore time.Time) (*x509.Certificate, error) {
	serial, err := randomCertSerial()
	if err != nil {
		return nil, err
	}
	notBefore = notBefore.Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         "Tenpay.com sign",
			Organization:       []string{"orderpay channel simulator"},
			OrganizationalUnit: []string{"WeChat Pay API v3 platform certificate"},
			Country:            []string{"CN"},
		},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(platformCertLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	return createCertificate(tmpl, ca, pub, caKey)
}

func createCertificate(tmpl, parent *x509.Certificate, pub *rsa.PublicKey, signer *rsa.PrivateKey) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sim: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sim: parse certificate: %w", err)
	}
	return cert, nil
}

// randomCertSerial is randomSerial as a certificate serial number.
func randomCertSerial() (*big.Int, error) {
	serialHex, err := randomSerial()
	if err != nil {
		return nil, err
	}
	serial, _ := new(big.Int).SetString(serialHex, 16)
	return serial, nil
}

// certificateSerial renders a certificate's serial as WeChat Pay and its SDK do: the
// big-endian bytes in uppercase hex.
func certificateSerial(cert *x509.Certificate) string {
	return strings.ToUpper(hex.EncodeToString(cert.SerialNumber.Bytes()))
}

// randomSerial returns 40 uppercase hex digits whose first byte is in [0x10, 0x7f], so that
// as a certificate serial it is positive and keeps all 40 digits.
func randomSerial() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sim: random serial: %w", err)
	}
	b[0] = 0x10 + b[0]%0x70
	return strings.ToUpper(hex.EncodeToString(b)), nil
}

// randomHex returns 2n lowercase hex digits.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sim: random hex: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Validate reports whether every field is set in WeChat's format, each public key belongs
// to its private key, and the platform certificate is the CA's, over its key and serial.
func (k *WechatKeys) Validate() error {
	switch {
	case k == nil:
		return errors.New("sim: wechat keys are required")
	case !wechatMchIDPattern.MatchString(k.MchID):
		return errors.New("sim: wechat keys: mchid must be 10 digits")
	case !wechatAppIDPattern.MatchString(k.AppID):
		return errors.New("sim: wechat keys: appid must be wx and 16 hex digits")
	case !wechatSerialPattern.MatchString(k.MerchantSerial):
		return errors.New("sim: wechat keys: the merchant certificate serial must be 40 uppercase hex digits")
	case !wechatAPIv3Pattern.MatchString(k.APIv3Key):
		return errors.New("sim: wechat keys: the APIv3 key must be 32 letters or digits")
	case !wechatPubKeyPattern.MatchString(k.PublicKeyID):
		return errors.New("sim: wechat keys: the public key id must be PUB_KEY_ID_ and digits")
	case k.MerchantPrivateKey == nil || k.MerchantPublicKey == nil:
		return errors.New("sim: wechat keys: the merchant key pair is required")
	case k.PlatformPrivateKey == nil || k.PlatformPublicKey == nil:
		return errors.New("sim: wechat keys: the public key mode key pair is required")
	case !k.MerchantPrivateKey.PublicKey.Equal(k.MerchantPublicKey):
		return errors.New("sim: wechat keys: the merchant public key does not belong to the merchant private key")
	case !k.PlatformPrivateKey.PublicKey.Equal(k.PlatformPublicKey):
		return errors.New("sim: wechat keys: the platform public key does not belong to the platform private key")
	}
	if err := k.validateApps(); err != nil {
		return err
	}
	return k.validateCertificates()
}

// validateApps checks the bound apps and the registered pages: four different appids, an
// AppSecret, and at least one H5 domain and one JSAPI path, each well formed.
func (k *WechatKeys) validateApps() error {
	ids := []string{k.AppID, k.JSAPIAppID, k.MiniAppID, k.AppAppID}
	for _, id := range ids[1:] {
		if !wechatAppIDPattern.MatchString(id) {
			return errors.New("sim: wechat keys: the official account, mini program and app appids must each be wx and 16 hex digits")
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 4 {
		return errors.New("sim: wechat keys: the main, official account, mini program and app appids must differ")
	}
	switch {
	case !wechatSecretPattern.MatchString(k.OAuthSecret):
		return errors.New("sim: wechat keys: the official account's AppSecret must be 32 lowercase hex digits")
	case len(k.H5Domains) == 0 || len(k.JSAPIPaths) == 0:
		return errors.New("sim: wechat keys: at least one H5 domain and one JSAPI path must be registered")
	}
	for _, d := range k.H5Domains {
		if !validH5Domain(d) {
			return fmt.Errorf("sim: wechat keys: H5 domain %q is not a host name", d)
		}
	}
	for _, p := range k.JSAPIPaths {
		if _, err := parseJSAPIPath(p); err != nil {
			return fmt.Errorf("sim: wechat keys: %w", err)
		}
	}
	return nil
}

// validateCertificates checks the certificate mode half: the CA, and a platform certificate
// it issued over PlatformCertificateKey under PlatformSerial.
func (k *WechatKeys) validateCertificates() error {
	switch {
	case k.PlatformCACertificate == nil || k.PlatformCAKey == nil:
		return errors.New("sim: wechat keys: the platform CA certificate and key are required")
	case !k.PlatformCACertificate.IsCA || !k.PlatformCAKey.PublicKey.Equal(k.PlatformCACertificate.PublicKey):
		return errors.New("sim: wechat keys: the platform CA key does not belong to a CA certificate")
	case k.PlatformCertificate == nil || k.PlatformCertificateKey == nil:
		return errors.New("sim: wechat keys: the platform certificate and its key are required")
	case !k.PlatformCertificateKey.PublicKey.Equal(k.PlatformCertificate.PublicKey):
		return errors.New("sim: wechat keys: the platform certificate is not over the platform certificate key")
	case k.PlatformCertificate.CheckSignatureFrom(k.PlatformCACertificate) != nil:
		return errors.New("sim: wechat keys: the platform certificate was not issued by the platform CA")
	case !wechatSerialPattern.MatchString(k.PlatformSerial) || certificateSerial(k.PlatformCertificate) != k.PlatformSerial:
		return errors.New("sim: wechat keys: the platform serial is not the certificate's 40 hex digits")
	}
	return nil
}

// MerchantPrivateKeyPEM returns the merchant API private key as a PKCS#8 "PRIVATE KEY" PEM
// block, the form of WeChat's apiclient_key.pem and of utils.LoadPrivateKey.
func (k *WechatKeys) MerchantPrivateKeyPEM() (string, error) {
	return PrivateKeyPEM(k.MerchantPrivateKey)
}

// MerchantPublicKeyPEM returns the merchant API public key as a PKIX "PUBLIC KEY" PEM block.
func (k *WechatKeys) MerchantPublicKeyPEM() (string, error) { return PublicKeyPEM(k.MerchantPublicKey) }

// PlatformPrivateKeyPEM returns the simulator's public key mode signing key as a PKCS#8 PEM
// block.
func (k *WechatKeys) PlatformPrivateKeyPEM() (string, error) {
	return PrivateKeyPEM(k.PlatformPrivateKey)
}

// PlatformPublicKeyPEM returns the WeChat Pay public key as a PKIX "PUBLIC KEY" PEM block,
// the form of WeChat's pub_key.pem and of utils.LoadPublicKey.
func (k *WechatKeys) PlatformPublicKeyPEM() (string, error) { return PublicKeyPEM(k.PlatformPublicKey) }

// PlatformCertificatePEM returns the platform certificate as a "CERTIFICATE" PEM block, the
// form of utils.LoadCertificate.
func (k *WechatKeys) PlatformCertificatePEM() (string, error) {
	return CertificatePEM(k.PlatformCertificate)
}

// PlatformCertificateKeyPEM returns the platform certificate's private key (the simulator's
// certificate mode signing key) as a PKCS#8 PEM block.
func (k *WechatKeys) PlatformCertificateKeyPEM() (string, error) {
	return PrivateKeyPEM(k.PlatformCertificateKey)
}

// PlatformCACertificatePEM returns the simulated CA's certificate as a "CERTIFICATE" PEM
// block.
func (k *WechatKeys) PlatformCACertificatePEM() (string, error) {
	return CertificatePEM(k.PlatformCACertificate)
}

// PlatformCAKeyPEM returns the simulated CA's private key as a PKCS#8 PEM block.
func (k *WechatKeys) PlatformCAKeyPEM() (string, error) { return PrivateKeyPEM(k.PlatformCAKey) }

// CertificatePEM encodes cert as a "CERTIFICATE" PEM block.
func CertificatePEM(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("sim: no certificate")
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), nil
}

// wechatKeyManifest is dir/wechat/manifest.json. File names are relative to dir/wechat.
//
// An outside client (the official SDK in another project) reads:
//   - mchid, appid, merchant_serial: its merchant number, app id and the serial_no it signs
//     with;
//   - merchant_private_key_file (apiclient_key.pem, PKCS#8): the key it signs requests
//     with;
//   - apiv3_key_file (apiv3_key.txt): the 32-character APIv3 key, without a newline, that
//     decrypts notifications and downloaded certificates;
//   - public_key_id and platform_public_key_file (pub_key.pem, PKIX): to verify answers
//     and notifications in public key mode (option.WithWechatPayPublicKeyAuthCipher);
//   - jsapi_appid, mini_appid and app_appid: the official account, mini program and app
//     bound to the merchant number (JSAPI, mini program and App payments; Native and H5 use
//     appid); oauth_secret_file (oauth_secret.txt): the official account's AppSecret, for
//     its web OAuth (snsapi_base); h5_domains and jsapi_paths: the registered H5 domains
//     and JSAPI pay directories;
//   - in platform certificate mode nothing more: it downloads the certificates from
//     GET /v3/certificates (option.WithWechatPayAutoAuthCipher). platform_serial and
//     platform_certificate_file (wechatpay_cert.pem) are the certificate at start, for a
//     client that loads it from a file (option.WithWechatPayAuthCipher); a rotation is only
//     seen through the download.
//
// merchant_public_key_file, platform_private_key_file, platform_certificate_key_file and the
// CA's files are the simulator's own halves. A manifest without platform_certificate_key_file
// was written before certificate mode was simulated (its wechatpay_cert.pem was self-signed
// over the public key mode key): the CA and the certificate are then added, and nothing else
// changes. A manifest without jsapi_appid was written before the other pay methods were
// simulated: the apps and registered pages are then made up and added, and nothing else
// changes either.
type wechatKeyManifest struct {
	MchID                      string   `json:"mchid"`
	AppID                      string   `json:"appid"`
	JSAPIAppID                 string   `json:"jsapi_appid,omitempty"`
	MiniAppID                  string   `json:"mini_appid,omitempty"`
	AppAppID                   string   `json:"app_appid,omitempty"`
	OAuthSecretFile            string   `json:"oauth_secret_file,omitempty"`
	H5Domains                  []string `json:"h5_domains,omitempty"`
	JSAPIPaths                 []string `json:"jsapi_paths,omitempty"`
	MerchantSerial             string   `json:"merchant_serial"`
	PublicKeyID                string   `json:"public_key_id"`
	PlatformSerial             string   `json:"platform_serial"`
	MerchantPrivateKeyFile     string   `json:"merchant_private_key_file"`
	MerchantPublicKeyFile      string   `json:"merchant_public_key_file"`
	APIv3KeyFile               string   `json:"apiv3_key_file"`
	PlatformPrivateKeyFile     string   `json:"platform_private_key_file"`
	PlatformPublicKeyFile      string   `json:"platform_public_key_file"`
	PlatformCertificateFile    string   `json:"platform_certificate_file"`
	PlatformCertificateKeyFile string   `json:"platform_certificate_key_file,omitempty"`
	PlatformCACertificateFile  string   `json:"platform_ca_certificate_file,omitempty"`
	PlatformCAKeyFile          string   `json:"platform_ca_key_file,omitempty"`
}

// Layout of dir/wechat. The merchant key and the public key carry the names WeChat gives
// the files it hands out.
const (
	wechatKeyDir            = "wechat"
	wechatMerchantPrivFile  = "apiclient_key.pem"
	wechatMerchantPubFile   = "apiclient_public_key.pem"
	wechatAPIv3File         = "apiv3_key.txt"
	wechatPlatformPrivFile  = "wechatpay_private_key.pem"
	wechatPlatformPubFile   = "pub_key.pem"
	wechatPlatformCertFile  = "wechatpay_cert.pem"
	wechatPlatformCertKey   = "wechatpay_cert_key.pem"
	wechatPlatformCAFile    = "wechatpay_ca_cert.pem"
	wechatPlatformCAKeyFile = "wechatpay_ca_key.pem"
	wechatOAuthSecretFile   = "oauth_secret.txt"
)

// WechatOAuthSecretFile names the official account's AppSecret in a keys directory
// LoadOrCreateKeys wrote, relative to the directory: what a channels file's
// oauth_secret_file names.
var WechatOAuthSecretFile = filepath.Join(wechatKeyDir, wechatOAuthSecretFile)

// loadOrCreateWechatKeys reads dir/manifest.json and the files it names, or generates and
// writes fresh WeChat keys if there is no manifest. A directory from before certificate mode
// gets its CA and platform certificate added, its other keys kept.
func loadOrCreateWechatKeys(dir string) (*WechatKeys, error) {
	data, err := os.ReadFile(filepath.Join(dir, keyManifestFile))
	switch {
	case err == nil:
		keys, upgrade, err := loadWechatKeys(dir, data)
		if err != nil || upgrade == 0 {
			return keys, err
		}
		if upgrade&upgradeCerts != 0 {
			certs, err := generatePlatformCerts()
			if err != nil {
				return nil, err
			}
			certs.setOn(keys)
		}
		if upgrade&upgradeApps != 0 {
			apps, err := generateWechatApps()
			if err != nil {
				return nil, err
			}
			apps.setOn(keys)
		}
		if err := keys.Validate(); err != nil {
			return nil, err
		}
		if err := writeWechatKeys(dir, keys); err != nil {
			return nil, err
		}
		return keys, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("sim: read wechat key manifest: %w", err)
	}
	keys, err := GenerateWechatKeys()
	if err != nil {
		return nil, err
	}
	if err := writeWechatKeys(dir, keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// wechatUpgrade says what a manifest written by an older simulator lacks.
type wechatUpgrade int

const (
	upgradeCerts wechatUpgrade = 1 << iota // written before certificate mode was simulated
	upgradeApps                            // written before the pay methods beside Native
)

// loadWechatKeys reads the keys a manifest names. upgrade says what a manifest from an
// older simulator lacks: the keys it returns then lack those parts, unvalidated.
func loadWechatKeys(dir string, manifestData []byte) (keys *WechatKeys, upgrade wechatUpgrade, err error) {
	var m wechatKeyManifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		return nil, 0, fmt.Errorf("sim: parse wechat key manifest: %w", err)
	}
	keys = &WechatKeys{
		MchID:          m.MchID,
		AppID:          m.AppID,
		MerchantSerial: m.MerchantSerial,
		PublicKeyID:    m.PublicKeyID,
		PlatformSerial: m.PlatformSerial,
		JSAPIAppID:     m.JSAPIAppID,
		MiniAppID:      m.MiniAppID,
		AppAppID:       m.AppAppID,
		H5Domains:      m.H5Domains,
		JSAPIPaths:     m.JSAPIPaths,
	}
	type keyFile struct {
		name string
		load func([]byte) error
	}
	files := []keyFile{
		{m.MerchantPrivateKeyFile, func(b []byte) (err error) { keys.MerchantPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.MerchantPublicKeyFile, func(b []byte) (err error) { keys.MerchantPublicKey, err = ParsePublicKeyPEM(b); return }},
		{m.APIv3KeyFile, func(b []byte) error { keys.APIv3Key = string(b); return nil }},
		{m.PlatformPrivateKeyFile, func(b []byte) (err error) { keys.PlatformPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.PlatformPublicKeyFile, func(b []byte) (err error) { keys.PlatformPublicKey, err = ParsePublicKeyPEM(b); return }},
	}
	if m.JSAPIAppID == "" {
		upgrade |= upgradeApps
	} else {
		files = append(files, keyFile{m.OAuthSecretFile, func(b []byte) error { keys.OAuthSecret = string(b); return nil }})
	}
	if m.PlatformCertificateKeyFile == "" {
		upgrade |= upgradeCerts
	} else {
		files = append(files,
			keyFile{m.PlatformCertificateFile, func(b []byte) (err error) { keys.PlatformCertificate, err = parseCertificatePEM(b); return }},
			keyFile{m.PlatformCertificateKeyFile, func(b []byte) (err error) { keys.PlatformCertificateKey, err = ParsePrivateKeyPEM(b); return }},
			keyFile{m.PlatformCACertificateFile, func(b []byte) (err error) { keys.PlatformCACertificate, err = parseCertificatePEM(b); return }},
			keyFile{m.PlatformCAKeyFile, func(b []byte) (err error) { keys.PlatformCAKey, err = ParsePrivateKeyPEM(b); return }},
		)
	}
	for _, f := range files {
		b, err := readManifestFile(dir, f.name)
		if err != nil {
			return nil, 0, err
		}
		if err := f.load(b); err != nil {
			return nil, 0, fmt.Errorf("%w (file %s)", err, f.name)
		}
	}
	if upgrade != 0 {
		return keys, upgrade, nil
	}
	if err := keys.Validate(); err != nil {
		return nil, 0, err
	}
	return keys, 0, nil
}

func writeWechatKeys(dir string, keys *WechatKeys) error {
	if err := makePrivateDir(dir); err != nil {
		return err
	}
	files := []struct {
		name string
		data func() (string, error)
		mode os.FileMode
	}{
		{wechatMerchantPrivFile, keys.MerchantPrivateKeyPEM, 0o600},
		{wechatMerchantPubFile, keys.MerchantPublicKeyPEM, 0o644},
		{wechatAPIv3File, func() (string, error) { return keys.APIv3Key, nil }, 0o600},
		{wechatPlatformPrivFile, keys.PlatformPrivateKeyPEM, 0o600},
		{wechatPlatformPubFile, keys.PlatformPublicKeyPEM, 0o644},
		{wechatPlatformCertFile, keys.PlatformCertificatePEM, 0o644},
		{wechatPlatformCertKey, keys.PlatformCertificateKeyPEM, 0o600},
		{wechatPlatformCAFile, keys.PlatformCACertificatePEM, 0o644},
		{wechatPlatformCAKeyFile, keys.PlatformCAKeyPEM, 0o600},
		{wechatOAuthSecretFile, func() (string, error) { return keys.OAuthSecret, nil }, 0o600},
	}
	for _, f := range files {
		data, err := f.data()
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, f.name), []byte(data), f.mode); err != nil {
			return err
		}
	}
	manifest, err := json.MarshalIndent(wechatKeyManifest{
		MchID:                      keys.MchID,
		AppID:                      keys.AppID,
		JSAPIAppID:                 keys.JSAPIAppID,
		MiniAppID:                  keys.MiniAppID,
		AppAppID:                   keys.AppAppID,
		OAuthSecretFile:            wechatOAuthSecretFile,
		H5Domains:                  keys.H5Domains,
		JSAPIPaths:                 keys.JSAPIPaths,
		MerchantSerial:             keys.MerchantSerial,
		PublicKeyID:                keys.PublicKeyID,
		PlatformSerial:             keys.PlatformSerial,
		MerchantPrivateKeyFile:     wechatMerchantPrivFile,
		MerchantPublicKeyFile:      wechatMerchantPubFile,
		APIv3KeyFile:               wechatAPIv3File,
		PlatformPrivateKeyFile:     wechatPlatformPrivFile,
		PlatformPublicKeyFile:      wechatPlatformPubFile,
		PlatformCertificateFile:    wechatPlatformCertFile,
		PlatformCertificateKeyFile: wechatPlatformCertKey,
		PlatformCACertificateFile:  wechatPlatformCAFile,
		PlatformCAKeyFile:          wechatPlatformCAKeyFile,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encode wechat key manifest: %w", err)
	}
	// The manifest last: an interrupted write leaves the previous manifest (or none), so the
	// next start redoes it rather than reading half-written files.
	return writeFileAtomic(filepath.Join(dir, keyManifestFile), append(manifest, '\n'), 0o600)
}

// parseCertificatePEM decodes an X.509 certificate from a "CERTIFICATE" PEM block.
func parseCertificatePEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("sim: no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sim: parse certificate: %w", err)
	}
	return cert, nil
}

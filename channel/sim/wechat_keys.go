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
	"strings"
	"time"
)

// WechatKeys are the WeChat Pay API v3 credentials shared by the simulated WeChat Pay and the
// merchant (protocols §B3). Never log any of them.
//
// The merchant signs requests with MerchantPrivateKey, naming MerchantSerial in the
// Authorization header; the simulator verifies them with MerchantPublicKey. The simulator
// signs answers and notifications with PlatformPrivateKey and names PublicKeyID in
// Wechatpay-Serial (WeChat's "public key" mode), or PlatformSerial when the request asked
// for it in its own Wechatpay-Serial header (the older platform certificate mode). The
// merchant verifies with PlatformPublicKey, which PlatformCertificate also carries.
// Notifications are encrypted with AES-256-GCM under APIv3Key.
type WechatKeys struct {
	MchID string // the merchant number, 10 digits
	AppID string // the merchant's app id, "wx" + 16 lowercase hex digits

	MerchantPrivateKey *rsa.PrivateKey
	MerchantPublicKey  *rsa.PublicKey
	// MerchantSerial is the serial number of the merchant API certificate: 40 uppercase hex
	// digits. Only the number is simulated, not the certificate.
	MerchantSerial string

	// APIv3Key is the 32-character key of the notifications' AES-256-GCM encryption.
	APIv3Key string

	PlatformPrivateKey  *rsa.PrivateKey
	PlatformPublicKey   *rsa.PublicKey
	PlatformCertificate *x509.Certificate // self-signed, over PlatformPublicKey
	PlatformSerial      string            // PlatformCertificate's serial, uppercase hex
	// PublicKeyID names PlatformPublicKey in public key mode: "PUB_KEY_ID_" + digits.
	PublicKeyID string
}

// The formats of WeChat Pay identifiers.
var (
	wechatMchIDPattern  = regexp.MustCompile(`^[0-9]{10}$`)
	wechatAppIDPattern  = regexp.MustCompile(`^wx[0-9a-f]{16}$`)
	wechatSerialPattern = regexp.MustCompile(`^[0-9A-F]{40}$`)
	wechatPubKeyPattern = regexp.MustCompile(`^PUB_KEY_ID_[0-9]{1,64}$`)
	wechatAPIv3Pattern  = regexp.MustCompile(`^[0-9A-Za-z]{32}$`)
)

// platformCertLifetime is how long the simulated platform certificate is valid; WeChat's
// last five years too.
const platformCertLifetime = 5 * 365 * 24 * time.Hour

// GenerateWechatKeys returns fresh WeChat Pay credentials: two RSA-2048 pairs from
// crypto/rand (merchant and platform), a self-signed platform certificate, and random ids,
// serials and APIv3 key in WeChat's formats.
func GenerateWechatKeys() (*WechatKeys, error) {
	var merchant, platform *rsa.PrivateKey
	if err := generateRSAKeys(&merchant, &platform); err != nil {
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
	cert, err := newPlatformCertificate(platform)
	if err != nil {
		return nil, err
	}
	return &WechatKeys{
		MchID:               "1" + mchID, // real merchant numbers start with 1
		AppID:               "wx" + appID,
		MerchantPrivateKey:  merchant,
		MerchantPublicKey:   &merchant.PublicKey,
		MerchantSerial:      merchantSerial,
		APIv3Key:            rand.Text()[:26] + strings.ToLower(rand.Text()[:6]),
		PlatformPrivateKey:  platform,
		PlatformPublicKey:   &platform.PublicKey,
		PlatformCertificate: cert,
		PlatformSerial:      certificateSerial(cert),
		PublicKeyID:         "PUB_KEY_ID_0" + pubKeyDigits,
	}, nil
}

// newPlatformCertificate self-signs a certificate over key, as WeChat Pay's platform
// certificate, with a 40-hex-digit serial like WeChat's.
func newPlatformCertificate(key *rsa.PrivateKey) (*x509.Certificate, error) {
	serialHex, err := randomSerial()
	if err != nil {
		return nil, err
	}
	serial, _ := new(big.Int).SetString(serialHex, 16)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         "Tenpay.com simulated platform certificate",
			Organization:       []string{"orderpay channel simulator"},
			OrganizationalUnit: []string{"WeChat Pay API v3"},
			Country:            []string{"CN"},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(platformCertLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sim: create platform certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sim: parse platform certificate: %w", err)
	}
	return cert, nil
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
// to its private key, and the platform certificate carries the platform key and serial.
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
	case k.PlatformPrivateKey == nil || k.PlatformPublicKey == nil || k.PlatformCertificate == nil:
		return errors.New("sim: wechat keys: the platform key pair and certificate are required")
	case !k.MerchantPrivateKey.PublicKey.Equal(k.MerchantPublicKey):
		return errors.New("sim: wechat keys: the merchant public key does not belong to the merchant private key")
	case !k.PlatformPrivateKey.PublicKey.Equal(k.PlatformPublicKey):
		return errors.New("sim: wechat keys: the platform public key does not belong to the platform private key")
	case !k.PlatformPublicKey.Equal(k.PlatformCertificate.PublicKey):
		return errors.New("sim: wechat keys: the platform certificate is not over the platform public key")
	case certificateSerial(k.PlatformCertificate) != k.PlatformSerial:
		return errors.New("sim: wechat keys: the platform serial is not the certificate's")
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

// PlatformPrivateKeyPEM returns the simulator's signing key as a PKCS#8 PEM block.
func (k *WechatKeys) PlatformPrivateKeyPEM() (string, error) {
	return PrivateKeyPEM(k.PlatformPrivateKey)
}

// PlatformPublicKeyPEM returns the WeChat Pay public key as a PKIX "PUBLIC KEY" PEM block,
// the form of WeChat's pub_key.pem and of utils.LoadPublicKey.
func (k *WechatKeys) PlatformPublicKeyPEM() (string, error) { return PublicKeyPEM(k.PlatformPublicKey) }

// PlatformCertificatePEM returns the platform certificate as a "CERTIFICATE" PEM block, the
// form of utils.LoadCertificate.
func (k *WechatKeys) PlatformCertificatePEM() (string, error) {
	if k.PlatformCertificate == nil {
		return "", errors.New("sim: no platform certificate")
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.PlatformCertificate.Raw})), nil
}

// wechatKeyManifest is dir/wechat/manifest.json. File names are relative to dir/wechat.
//
// An outside client (the official SDK in another project) reads:
//   - mchid, appid, merchant_serial: its merchant number, app id and the serial_no it signs
//     with;
//   - merchant_private_key_file (apiclient_key.pem, PKCS#8): the key it signs requests
//     with;
//   - apiv3_key_file (apiv3_key.txt): the 32-character APIv3 key, without a newline, that
//     decrypts notifications;
//   - public_key_id and platform_public_key_file (pub_key.pem, PKIX): to verify answers
//     and notifications in public key mode (option.WithWechatPayPublicKeyAuthCipher);
//   - or platform_serial and platform_certificate_file (wechatpay_cert.pem): in platform
//     certificate mode (option.WithWechatPayAuthCipher).
//
// merchant_public_key_file and platform_private_key_file are the simulator's own halves.
type wechatKeyManifest struct {
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
}

// Layout of dir/wechat. The merchant key and the public key carry the names WeChat gives
// the files it hands out.
const (
	wechatKeyDir           = "wechat"
	wechatMerchantPrivFile = "apiclient_key.pem"
	wechatMerchantPubFile  = "apiclient_public_key.pem"
	wechatAPIv3File        = "apiv3_key.txt"
	wechatPlatformPrivFile = "wechatpay_private_key.pem"
	wechatPlatformPubFile  = "pub_key.pem"
	wechatPlatformCertFile = "wechatpay_cert.pem"
)

// loadOrCreateWechatKeys reads dir/manifest.json and the files it names, or generates and
// writes fresh WeChat keys if there is no manifest.
func loadOrCreateWechatKeys(dir string) (*WechatKeys, error) {
	data, err := os.ReadFile(filepath.Join(dir, keyManifestFile))
	switch {
	case err == nil:
		return loadWechatKeys(dir, data)
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

func loadWechatKeys(dir string, manifestData []byte) (*WechatKeys, error) {
	var m wechatKeyManifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		return nil, fmt.Errorf("sim: parse wechat key manifest: %w", err)
	}
	keys := &WechatKeys{
		MchID:          m.MchID,
		AppID:          m.AppID,
		MerchantSerial: m.MerchantSerial,
		PublicKeyID:    m.PublicKeyID,
		PlatformSerial: m.PlatformSerial,
	}
	for _, f := range []struct {
		name string
		load func([]byte) error
	}{
		{m.MerchantPrivateKeyFile, func(b []byte) (err error) { keys.MerchantPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.MerchantPublicKeyFile, func(b []byte) (err error) { keys.MerchantPublicKey, err = ParsePublicKeyPEM(b); return }},
		{m.APIv3KeyFile, func(b []byte) error { keys.APIv3Key = string(b); return nil }},
		{m.PlatformPrivateKeyFile, func(b []byte) (err error) { keys.PlatformPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.PlatformPublicKeyFile, func(b []byte) (err error) { keys.PlatformPublicKey, err = ParsePublicKeyPEM(b); return }},
		{m.PlatformCertificateFile, func(b []byte) (err error) { keys.PlatformCertificate, err = parseCertificatePEM(b); return }},
	} {
		b, err := readManifestFile(dir, f.name)
		if err != nil {
			return nil, err
		}
		if err := f.load(b); err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, f.name)
		}
	}
	if err := keys.Validate(); err != nil {
		return nil, err
	}
	return keys, nil
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
		MchID:                   keys.MchID,
		AppID:                   keys.AppID,
		MerchantSerial:          keys.MerchantSerial,
		PublicKeyID:             keys.PublicKeyID,
		PlatformSerial:          keys.PlatformSerial,
		MerchantPrivateKeyFile:  wechatMerchantPrivFile,
		MerchantPublicKeyFile:   wechatMerchantPubFile,
		APIv3KeyFile:            wechatAPIv3File,
		PlatformPrivateKeyFile:  wechatPlatformPrivFile,
		PlatformPublicKeyFile:   wechatPlatformPubFile,
		PlatformCertificateFile: wechatPlatformCertFile,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encode wechat key manifest: %w", err)
	}
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

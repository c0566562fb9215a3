package sim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Keys are the credentials shared by the simulated channels and the merchant (orderpay).
//
// Alipay: orderpay signs requests with AppPrivateKey and the simulator verifies them with
// AppPublicKey; the simulator signs responses and notifications with AlipayPrivateKey and
// orderpay verifies them with AlipayPublicKey. WeChat Pay: see WechatKeys. Never log any of
// these.
type Keys struct {
	AppID    string // the merchant application's id, 16 digits
	SellerID string // the merchant's Alipay PID, 16 digits starting with 2088

	AppPrivateKey    *rsa.PrivateKey
	AppPublicKey     *rsa.PublicKey
	AlipayPrivateKey *rsa.PrivateKey
	AlipayPublicKey  *rsa.PublicKey
	// AlipayCerts are the certificates of the same two public keys, for certificate mode
	// (AlipayModeCert). Nil only for keys built by hand; checked when set.
	AlipayCerts *AlipayCerts

	// Wechat are the WeChat Pay v3 credentials.
	Wechat WechatKeys
}

// keyBits is the RSA modulus size Alipay issues and accepts for RSA2.
const keyBits = 2048

// GenerateKeys returns fresh keys for both channels: the Alipay part (two RSA-2048 pairs
// from crypto/rand, a random app id and a random seller id) and the WeChat Pay part (see
// GenerateWechatKeys). The four RSA keys are generated in parallel; it still takes a
// noticeable fraction of a second.
func GenerateKeys() (*Keys, error) {
	var (
		wg               sync.WaitGroup
		keys             *Keys
		wechat           *WechatKeys
		alipayErr, wxErr error
	)
	wg.Go(func() { keys, alipayErr = generateAlipayKeys() })
	wg.Go(func() { wechat, wxErr = GenerateWechatKeys() })
	wg.Wait()
	if err := errors.Join(alipayErr, wxErr); err != nil {
		return nil, err
	}
	keys.Wechat = *wechat
	return keys, nil
}

// generateAlipayKeys returns fresh Alipay credentials, with no WeChat part.
func generateAlipayKeys() (*Keys, error) {
	var app, ali *rsa.PrivateKey
	if err := generateRSAKeys(&app, &ali); err != nil {
		return nil, fmt.Errorf("sim: generate alipay keys: %w", err)
	}
	appID, err := randomDigits(12)
	if err != nil {
		return nil, err
	}
	sellerID, err := randomDigits(12)
	if err != nil {
		return nil, err
	}
	keys := &Keys{
		AppID:            "2021" + appID,
		SellerID:         "2088" + sellerID,
		AppPrivateKey:    app,
		AppPublicKey:     &app.PublicKey,
		AlipayPrivateKey: ali,
		AlipayPublicKey:  &ali.PublicKey,
	}
	if keys.AlipayCerts, err = generateAlipayCerts(keys.AppID, keys.AppPublicKey, keys.AlipayPublicKey); err != nil {
		return nil, err
	}
	return keys, nil
}

// Validate reports whether every field of both channels is set and each public key belongs
// to its private key.
func (k *Keys) Validate() error {
	if err := k.validateAlipay(); err != nil {
		return err
	}
	return k.Wechat.Validate()
}

func (k *Keys) validateAlipay() error {
	switch {
	case k == nil:
		return errors.New("sim: keys are required")
	case k.AppID == "":
		return errors.New("sim: keys: app id is required")
	case k.SellerID == "":
		return errors.New("sim: keys: seller id is required")
	case k.AppPrivateKey == nil || k.AppPublicKey == nil:
		return errors.New("sim: keys: the app key pair is required")
	case k.AlipayPrivateKey == nil || k.AlipayPublicKey == nil:
		return errors.New("sim: keys: the alipay key pair is required")
	case !k.AppPrivateKey.PublicKey.Equal(k.AppPublicKey):
		return errors.New("sim: keys: the app public key does not belong to the app private key")
	case !k.AlipayPrivateKey.PublicKey.Equal(k.AlipayPublicKey):
		return errors.New("sim: keys: the alipay public key does not belong to the alipay private key")
	}
	if k.AlipayCerts != nil {
		if _, err := newAlipayCertMode(k); err != nil {
			return err
		}
	}
	return nil
}

// AppPrivateKeyPEM returns the app private key as a PKCS#8 "PRIVATE KEY" PEM block, the form
// alipay.New accepts.
func (k *Keys) AppPrivateKeyPEM() (string, error) { return PrivateKeyPEM(k.AppPrivateKey) }

// AppPublicKeyPEM returns the app public key as a PKIX "PUBLIC KEY" PEM block.
func (k *Keys) AppPublicKeyPEM() (string, error) { return PublicKeyPEM(k.AppPublicKey) }

// AlipayPrivateKeyPEM returns the simulator's signing key as a PKCS#8 "PRIVATE KEY" PEM block.
func (k *Keys) AlipayPrivateKeyPEM() (string, error) { return PrivateKeyPEM(k.AlipayPrivateKey) }

// AlipayPublicKeyPEM returns the simulator's public key as a PKIX "PUBLIC KEY" PEM block, the
// form (*alipay.Client).LoadAliPayPublicKey accepts.
func (k *Keys) AlipayPublicKeyPEM() (string, error) { return PublicKeyPEM(k.AlipayPublicKey) }

// PrivateKeyPEM encodes key as a PKCS#8 "PRIVATE KEY" PEM block.
func PrivateKeyPEM(key *rsa.PrivateKey) (string, error) {
	if key == nil {
		return "", errors.New("sim: no private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("sim: encode private key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

// PublicKeyPEM encodes key as a PKIX "PUBLIC KEY" PEM block.
func PublicKeyPEM(key *rsa.PublicKey) (string, error) {
	if key == nil {
		return "", errors.New("sim: no public key")
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", fmt.Errorf("sim: encode public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// ParsePrivateKeyPEM decodes an RSA private key from a PKCS#8 "PRIVATE KEY" or PKCS#1
// "RSA PRIVATE KEY" PEM block.
func ParsePrivateKeyPEM(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("sim: no PEM block in private key data")
	}
	switch block.Type {
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sim: parse PKCS#8 private key: %w", err)
		}
		rsaKey, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("sim: private key is not an RSA key")
		}
		return rsaKey, nil
	case "RSA PRIVATE KEY":
		key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sim: parse PKCS#1 private key: %w", err)
		}
		return key, nil
	}
	return nil, fmt.Errorf("sim: unexpected PEM block %q for a private key", block.Type)
}

// ParsePublicKeyPEM decodes an RSA public key from a PKIX "PUBLIC KEY" PEM block.
func ParsePublicKeyPEM(data []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("sim: no PEM block in public key data")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("sim: unexpected PEM block %q for a public key", block.Type)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sim: parse public key: %w", err)
	}
	rsaKey, ok := key.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("sim: public key is not an RSA key")
	}
	return rsaKey, nil
}

// keyManifest is dir/alipay/manifest.json. File names are relative to dir/alipay.
type keyManifest struct {
	AppID                string `json:"app_id"`
	SellerID             string `json:"seller_id"`
	AppPrivateKeyFile    string `json:"app_private_key_file"`
	AppPublicKeyFile     string `json:"app_public_key_file"`
	AlipayPrivateKeyFile string `json:"alipay_private_key_file"`
	AlipayPublicKeyFile  string `json:"alipay_public_key_file"`
	// The certificate files, with the console's names; absent from a directory written
	// before certificate mode was simulated.
	AlipayRootCertFile string `json:"alipay_root_cert_file,omitempty"`
	AlipayCertFile     string `json:"alipay_cert_public_key_file,omitempty"`
	AppCertFile        string `json:"app_cert_public_key_file,omitempty"`
}

// Layout of a key directory. Each channel gets its own subdirectory so that the WeChat keys
// can live beside the Alipay ones.
const (
	alipayKeyDir     = "alipay"
	keyManifestFile  = "manifest.json"
	appPrivateFile   = "app_private_key.pem"
	appPublicFile    = "app_public_key.pem"
	alipayPrivFile   = "alipay_private_key.pem"
	alipayPublicFile = "alipay_public_key.pem"
)

// LoadOrCreateKeys returns the keys stored under dir, creating them on first use. Each
// channel has its own subdirectory with its own manifest.json, handled independently:
//
//   - dir/alipay: if manifest.json exists, the app id, seller id and the four PEM files it
//     names are read and checked to belong together, with the three certificate files of
//     certificate mode (alipayRootCert.crt, alipayCertPublicKey_RSA2.crt and
//     appCertPublicKey_<app_id>.crt, see AlipayCerts); otherwise fresh Alipay keys are
//     generated and written. A directory written before certificate mode was simulated
//     has no certificates: they are issued for the keys it holds, which are kept, and the
//     manifest is rewritten to name them.
//   - dir/wechat: likewise for the WeChat Pay credentials (see WechatKeys for every file).
//     A directory written before WeChat Pay was simulated has no wechat/ part: it is
//     generated then, and the Alipay keys are kept.
//
// Files are written with directories 0700, private keys and the APIv3 key 0600, public
// keys and certificates 0644, and each manifest last (through a rename), so that an interrupted first run is redone rather than
// read back half-written.
func LoadOrCreateKeys(dir string) (*Keys, error) {
	if dir == "" {
		return nil, errors.New("sim: key directory is required")
	}
	alipayDir := filepath.Join(dir, alipayKeyDir)
	data, err := os.ReadFile(filepath.Join(alipayDir, keyManifestFile))
	var keys *Keys
	switch {
	case err == nil:
		if keys, err = loadKeys(alipayDir, data); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("sim: read key manifest: %w", err)
	default:
		if keys, err = generateAlipayKeys(); err != nil {
			return nil, err
		}
		if err := writeKeys(alipayDir, keys); err != nil {
			return nil, err
		}
	}

	wechat, err := loadOrCreateWechatKeys(filepath.Join(dir, wechatKeyDir))
	if err != nil {
		return nil, err
	}
	keys.Wechat = *wechat
	return keys, nil
}

func loadKeys(alipayDir string, manifestData []byte) (*Keys, error) {
	var m keyManifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		return nil, fmt.Errorf("sim: parse key manifest: %w", err)
	}
	read := func(name string) ([]byte, error) { return readManifestFile(alipayDir, name) }
	keys := &Keys{AppID: m.AppID, SellerID: m.SellerID}
	files := []struct {
		name string
		load func([]byte) error
	}{
		{m.AppPrivateKeyFile, func(b []byte) (err error) { keys.AppPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.AppPublicKeyFile, func(b []byte) (err error) { keys.AppPublicKey, err = ParsePublicKeyPEM(b); return }},
		{m.AlipayPrivateKeyFile, func(b []byte) (err error) { keys.AlipayPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{m.AlipayPublicKeyFile, func(b []byte) (err error) { keys.AlipayPublicKey, err = ParsePublicKeyPEM(b); return }},
	}
	hasCerts := m.AlipayRootCertFile != "" || m.AlipayCertFile != "" || m.AppCertFile != ""
	if hasCerts {
		keys.AlipayCerts = &AlipayCerts{}
		files = append(files, []struct {
			name string
			load func([]byte) error
		}{
			{m.AlipayRootCertFile, func(b []byte) error { keys.AlipayCerts.RootPEM = string(b); return nil }},
			{m.AlipayCertFile, func(b []byte) error { keys.AlipayCerts.AlipayCertPEM = string(b); return nil }},
			{m.AppCertFile, func(b []byte) error { keys.AlipayCerts.AppCertPEM = string(b); return nil }},
		}...)
	}
	for _, f := range files {
		b, err := read(f.name)
		if err != nil {
			return nil, err
		}
		if err := f.load(b); err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, f.name)
		}
	}
	if err := keys.validateAlipay(); err != nil {
		return nil, err
	}
	if !hasCerts {
		if err := addAlipayCerts(alipayDir, keys, m); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// addAlipayCerts upgrades a key directory written before certificate mode was simulated:
// it issues certificates for the keys it holds, writes them, then rewrites the manifest m
// to name them as well. Nothing else is rewritten, so the keys stay byte for byte.
func addAlipayCerts(alipayDir string, keys *Keys, m keyManifest) error {
	certs, err := generateAlipayCerts(keys.AppID, keys.AppPublicKey, keys.AlipayPublicKey)
	if err != nil {
		return err
	}
	keys.AlipayCerts = certs
	if err := writeAlipayCerts(alipayDir, keys, &m); err != nil {
		return err
	}
	return writeKeyManifest(alipayDir, m)
}

// writeAlipayCerts writes the certificate files of keys (public, 0644) and names them in m.
func writeAlipayCerts(alipayDir string, keys *Keys, m *keyManifest) error {
	m.AlipayRootCertFile, m.AlipayCertFile, m.AppCertFile = alipayRootCertFile, alipayCertFile, appCertFile(keys.AppID)
	for name, data := range map[string]string{
		m.AlipayRootCertFile: keys.AlipayCerts.RootPEM,
		m.AlipayCertFile:     keys.AlipayCerts.AlipayCertPEM,
		m.AppCertFile:        keys.AlipayCerts.AppCertPEM,
	} {
		if err := writeFileAtomic(filepath.Join(alipayDir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeKeyManifest writes dir/alipay/manifest.json, last, through a rename.
func writeKeyManifest(alipayDir string, m keyManifest) error {
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encode key manifest: %w", err)
	}
	return writeFileAtomic(filepath.Join(alipayDir, keyManifestFile), append(manifest, '\n'), 0o600)
}

func writeKeys(alipayDir string, keys *Keys) error {
	if err := makePrivateDir(alipayDir); err != nil {
		return err
	}
	appPriv, err := keys.AppPrivateKeyPEM()
	if err != nil {
		return err
	}
	appPub, err := keys.AppPublicKeyPEM()
	if err != nil {
		return err
	}
	aliPriv, err := keys.AlipayPrivateKeyPEM()
	if err != nil {
		return err
	}
	aliPub, err := keys.AlipayPublicKeyPEM()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data string
		mode os.FileMode
	}{
		{appPrivateFile, appPriv, 0o600},
		{appPublicFile, appPub, 0o644},
		{alipayPrivFile, aliPriv, 0o600},
		{alipayPublicFile, aliPub, 0o644},
	} {
		if err := writeFileAtomic(filepath.Join(alipayDir, f.name), []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	m := keyManifest{
		AppID:                keys.AppID,
		SellerID:             keys.SellerID,
		AppPrivateKeyFile:    appPrivateFile,
		AppPublicKeyFile:     appPublicFile,
		AlipayPrivateKeyFile: alipayPrivFile,
		AlipayPublicKeyFile:  alipayPublicFile,
	}
	if keys.AlipayCerts != nil {
		if err := writeAlipayCerts(alipayDir, keys, &m); err != nil {
			return err
		}
	}
	return writeKeyManifest(alipayDir, m)
}

// makePrivateDir creates dir (and its parents) with mode 0700.
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sim: create key directory: %w", err)
	}
	// MkdirAll leaves existing directories alone; make sure ours is private even if it
	// was created earlier with a laxer mode.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("sim: key directory mode: %w", err)
	}
	return nil
}

// generateRSAKeys fills each pointer with a fresh RSA-2048 key, generated in parallel.
func generateRSAKeys(out ...**rsa.PrivateKey) error {
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i, p := range out {
		wg.Go(func() { *p, errs[i] = rsa.GenerateKey(rand.Reader, keyBits) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readManifestFile reads a file named by a manifest, from the manifest's own directory.
func readManifestFile(dir, name string) ([]byte, error) {
	// The manifest names files inside its own directory; anything else is refused so
	// that a stray manifest cannot point the simulator at arbitrary files.
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("sim: key manifest: bad file name %q", name)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("sim: read key file: %w", err)
	}
	return b, nil
}

// writeFileAtomic writes data to a temporary file with the final mode and renames it into
// place, so a reader never sees a partly written key.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("sim: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// randomDigits returns n decimal digits from crypto/rand.
func randomDigits(n int) (string, error) {
	var b strings.Builder
	ten := big.NewInt(10)
	for range n {
		d, err := rand.Int(rand.Reader, ten)
		if err != nil {
			return "", fmt.Errorf("sim: random digits: %w", err)
		}
		b.WriteByte(byte('0' + d.Int64()))
	}
	return b.String(), nil
}

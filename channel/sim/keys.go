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
	"sync/atomic"
)

// Keys are the credentials shared by the simulated channels and the merchant (orderpay).
//
// Alipay: orderpay signs requests with AppPrivateKey and the simulator verifies them with
// AppPublicKey; the simulator signs responses and notifications with AlipayPrivateKey and
// orderpay verifies them with AlipayPublicKey. The merchant's second app, InApp, has keys
// of its own, used the same way for the trades made under it. WeChat Pay: see WechatKeys.
// Never log any of these.
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

	// InApp is the merchant's second Alipay app, the one in-app payments are made under (a
	// mini program's, say), of the same seller: its own id, key pair, Alipay key and, for
	// certificate mode, certificates issued by the same root. Nil for keys built by hand
	// and for a keys directory written before it was simulated: the merchant then has one
	// app, and makes in-app payments under it.
	InApp *AlipayApp

	// Wechat are the WeChat Pay v3 credentials.
	Wechat WechatKeys
}

// AlipayApp is one Alipay app of the simulated merchant: its id, the app's key pair (the
// merchant signs with its private half), the key pair Alipay signs the app's answers and
// notifications with (the merchant verifies with its public half), and their certificates
// for certificate mode (nil only for keys built by hand).
type AlipayApp struct {
	AppID            string
	AppPrivateKey    *rsa.PrivateKey
	AppPublicKey     *rsa.PublicKey
	AlipayPrivateKey *rsa.PrivateKey
	AlipayPublicKey  *rsa.PublicKey
	AlipayCerts      *AlipayCerts
}

// MainApp is the merchant's main Alipay app (AppID and its keys) as an AlipayApp.
func (k *Keys) MainApp() AlipayApp {
	return AlipayApp{AppID: k.AppID, AppPrivateKey: k.AppPrivateKey, AppPublicKey: k.AppPublicKey,
		AlipayPrivateKey: k.AlipayPrivateKey, AlipayPublicKey: k.AlipayPublicKey, AlipayCerts: k.AlipayCerts}
}

// AlipayApps are the merchant's Alipay apps: the main one, then InApp if there is one.
func (k *Keys) AlipayApps() []AlipayApp {
	apps := []AlipayApp{k.MainApp()}
	if k.InApp != nil {
		apps = append(apps, *k.InApp)
	}
	return apps
}

// AppPrivateKeyPEM returns the app private key as a PKCS#8 "PRIVATE KEY" PEM block.
func (a *AlipayApp) AppPrivateKeyPEM() (string, error) { return PrivateKeyPEM(a.AppPrivateKey) }

// AppPublicKeyPEM returns the app public key as a PKIX "PUBLIC KEY" PEM block.
func (a *AlipayApp) AppPublicKeyPEM() (string, error) { return PublicKeyPEM(a.AppPublicKey) }

// AlipayPrivateKeyPEM returns the key Alipay signs the app's answers with, as PKCS#8 PEM.
func (a *AlipayApp) AlipayPrivateKeyPEM() (string, error) { return PrivateKeyPEM(a.AlipayPrivateKey) }

// AlipayPublicKeyPEM returns the Alipay public key of the app, as PKIX PEM.
func (a *AlipayApp) AlipayPublicKeyPEM() (string, error) { return PublicKeyPEM(a.AlipayPublicKey) }

// validate reports whether every field is set and each public key belongs to its private
// key, and, with certificates, that they are the keys' and chain to their root.
func (a *AlipayApp) validate(name string) error {
	switch {
	case a.AppID == "":
		return fmt.Errorf("sim: keys: the %s's app id is required", name)
	case a.AppPrivateKey == nil || a.AppPublicKey == nil:
		return fmt.Errorf("sim: keys: the %s's key pair is required", name)
	case a.AlipayPrivateKey == nil || a.AlipayPublicKey == nil:
		return fmt.Errorf("sim: keys: the alipay key pair of the %s is required", name)
	case !a.AppPrivateKey.PublicKey.Equal(a.AppPublicKey):
		return fmt.Errorf("sim: keys: the %s's public key does not belong to its private key", name)
	case !a.AlipayPrivateKey.PublicKey.Equal(a.AlipayPublicKey):
		return fmt.Errorf("sim: keys: the alipay public key of the %s does not belong to its private key", name)
	}
	if a.AlipayCerts != nil {
		if _, err := newAlipayCertMode(*a); err != nil {
			return err
		}
	}
	return nil
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

// generateAlipayKeys returns fresh Alipay credentials, with no WeChat part: the main app and
// the in-app app, each with its key pair and the Alipay key pair that signs for it, random
// ids (the two apps' different), a random seller id, and every certificate of certificate
// mode, from one root.
func generateAlipayKeys() (*Keys, error) {
	var app, ali, inApp, inAppAli *rsa.PrivateKey
	if err := generateRSAKeys(&app, &ali, &inApp, &inAppAli); err != nil {
		return nil, fmt.Errorf("sim: generate alipay keys: %w", err)
	}
	appID, err := randomDigits(12)
	if err != nil {
		return nil, err
	}
	inAppID := appID
	for inAppID == appID {
		if inAppID, err = randomDigits(12); err != nil {
			return nil, err
		}
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
		InApp: &AlipayApp{AppID: "2021" + inAppID, AppPrivateKey: inApp, AppPublicKey: &inApp.PublicKey,
			AlipayPrivateKey: inAppAli, AlipayPublicKey: &inAppAli.PublicKey},
	}
	certs, err := generateAlipayCerts(
		alipayCertSubject{keys.AppID, keys.AppPublicKey, keys.AlipayPublicKey},
		alipayCertSubject{keys.InApp.AppID, keys.InApp.AppPublicKey, keys.InApp.AlipayPublicKey})
	if err != nil {
		return nil, err
	}
	keys.AlipayCerts, keys.InApp.AlipayCerts = certs[0], certs[1]
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
		if _, err := newAlipayCertMode(k.MainApp()); err != nil {
			return err
		}
	}
	if a := k.InApp; a != nil {
		if a.AppID == k.AppID {
			return errors.New("sim: keys: the in-app app's id is the main app's")
		}
		if err := a.validate("in-app app"); err != nil {
			return err
		}
		if (a.AlipayCerts == nil) != (k.AlipayCerts == nil) {
			return errors.New("sim: keys: the in-app app and the main app must both have certificates, or neither")
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
	// The in-app app (Keys.InApp): its id and the same files as the main app's, but the
	// root certificate, which is the same file; absent from a directory written before it
	// was simulated.
	InAppAppID                string `json:"inapp_app_id,omitempty"`
	InAppAppPrivateKeyFile    string `json:"inapp_app_private_key_file,omitempty"`
	InAppAppPublicKeyFile     string `json:"inapp_app_public_key_file,omitempty"`
	InAppAlipayPrivateKeyFile string `json:"inapp_alipay_private_key_file,omitempty"`
	InAppAlipayPublicKeyFile  string `json:"inapp_alipay_public_key_file,omitempty"`
	InAppAlipayCertFile       string `json:"inapp_alipay_cert_public_key_file,omitempty"`
	InAppAppCertFile          string `json:"inapp_app_cert_public_key_file,omitempty"`
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
	// inAppPrefix starts the names of the in-app app's files, beside the main app's; its
	// app certificate is told apart by its app id (appCertPublicKey_<app id>.crt).
	inAppPrefix = "inapp_"
)

// LoadOrCreateKeys returns the keys stored under dir, creating them on first use. Each
// channel has its own subdirectory with its own manifest.json, handled independently:
//
//   - dir/alipay: if manifest.json exists, the app id, seller id and the four PEM files it
//     names are read and checked to belong together, with the three certificate files of
//     certificate mode (alipayRootCert.crt, alipayCertPublicKey_RSA2.crt and
//     appCertPublicKey_<app_id>.crt, see AlipayCerts), and the in-app app's id and files
//     (its four PEM files and two certificates, prefixed inapp_ but for its
//     appCertPublicKey_<its app id>.crt; the root is the same file); otherwise fresh
//     Alipay keys, both apps', are generated and written. A directory written before
//     certificate mode was simulated has no certificates: they are issued for the keys it
//     holds, which are kept, and the manifest is rewritten to name them. A directory
//     written before the in-app app was simulated has none, and keeps none: its merchant
//     has one app, which in-app payments are made under.
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

// manifestFile is one file a manifest names, and what reading it sets.
type manifestFile struct {
	name string
	load func([]byte) error
}

// keyFiles are the four PEM files of an app, as a manifest names them, loaded into app.
func keyFiles(app *AlipayApp, appPriv, appPub, aliPriv, aliPub string) []manifestFile {
	return []manifestFile{
		{appPriv, func(b []byte) (err error) { app.AppPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{appPub, func(b []byte) (err error) { app.AppPublicKey, err = ParsePublicKeyPEM(b); return }},
		{aliPriv, func(b []byte) (err error) { app.AlipayPrivateKey, err = ParsePrivateKeyPEM(b); return }},
		{aliPub, func(b []byte) (err error) { app.AlipayPublicKey, err = ParsePublicKeyPEM(b); return }},
	}
}

// certFiles are the three certificate files of an app, as a manifest names them, loaded into
// certs.
func certFiles(certs *AlipayCerts, root, alipayCert, appCert string) []manifestFile {
	return []manifestFile{
		{root, func(b []byte) error { certs.RootPEM = string(b); return nil }},
		{alipayCert, func(b []byte) error { certs.AlipayCertPEM = string(b); return nil }},
		{appCert, func(b []byte) error { certs.AppCertPEM = string(b); return nil }},
	}
}

func loadKeys(alipayDir string, manifestData []byte) (*Keys, error) {
	var m keyManifest
	if err := json.Unmarshal(manifestData, &m); err != nil {
		return nil, fmt.Errorf("sim: parse key manifest: %w", err)
	}
	main := AlipayApp{AppID: m.AppID}
	files := keyFiles(&main, m.AppPrivateKeyFile, m.AppPublicKeyFile, m.AlipayPrivateKeyFile, m.AlipayPublicKeyFile)
	hasCerts := m.AlipayRootCertFile != "" || m.AlipayCertFile != "" || m.AppCertFile != ""
	if hasCerts {
		main.AlipayCerts = &AlipayCerts{}
		files = append(files, certFiles(main.AlipayCerts, m.AlipayRootCertFile, m.AlipayCertFile, m.AppCertFile)...)
	}
	var inApp *AlipayApp
	if m.InAppAppID != "" {
		// Written with the certificates, which it always has.
		inApp = &AlipayApp{AppID: m.InAppAppID, AlipayCerts: &AlipayCerts{}}
		files = append(files, keyFiles(inApp, m.InAppAppPrivateKeyFile, m.InAppAppPublicKeyFile, m.InAppAlipayPrivateKeyFile,
			m.InAppAlipayPublicKeyFile)...)
		files = append(files, certFiles(inApp.AlipayCerts, m.AlipayRootCertFile, m.InAppAlipayCertFile, m.InAppAppCertFile)...)
	}
	for _, f := range files {
		b, err := readManifestFile(alipayDir, f.name)
		if err != nil {
			return nil, err
		}
		if err := f.load(b); err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, f.name)
		}
	}
	keys := &Keys{AppID: m.AppID, SellerID: m.SellerID, AppPrivateKey: main.AppPrivateKey, AppPublicKey: main.AppPublicKey,
		AlipayPrivateKey: main.AlipayPrivateKey, AlipayPublicKey: main.AlipayPublicKey, AlipayCerts: main.AlipayCerts, InApp: inApp}
	if !hasCerts && inApp != nil {
		return nil, errors.New("sim: key manifest: the in-app app's certificates are named, but not the main app's")
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

// addAlipayCerts upgrades a key directory written before certificate mode was simulated
// (and so before the in-app app was): it issues certificates for the keys it holds, writes
// them, then rewrites the manifest m to name them as well. Nothing else is rewritten, so the
// keys stay byte for byte.
func addAlipayCerts(alipayDir string, keys *Keys, m keyManifest) error {
	certs, err := generateAlipayCerts(alipayCertSubject{keys.AppID, keys.AppPublicKey, keys.AlipayPublicKey})
	if err != nil {
		return err
	}
	keys.AlipayCerts = certs[0]
	if err := writeAlipayCerts(alipayDir, keys, &m); err != nil {
		return err
	}
	return writeKeyManifest(alipayDir, m)
}

// writeAlipayCerts writes the certificate files of keys (public, 0644), the in-app app's
// too when it has one, and names them in m.
func writeAlipayCerts(alipayDir string, keys *Keys, m *keyManifest) error {
	m.AlipayRootCertFile, m.AlipayCertFile, m.AppCertFile = alipayRootCertFile, alipayCertFile, appCertFile(keys.AppID)
	files := map[string]string{
		m.AlipayRootCertFile: keys.AlipayCerts.RootPEM,
		m.AlipayCertFile:     keys.AlipayCerts.AlipayCertPEM,
		m.AppCertFile:        keys.AlipayCerts.AppCertPEM,
	}
	if a := keys.InApp; a != nil {
		m.InAppAlipayCertFile, m.InAppAppCertFile = inAppPrefix+alipayCertFile, appCertFile(a.AppID)
		files[m.InAppAlipayCertFile], files[m.InAppAppCertFile] = a.AlipayCerts.AlipayCertPEM, a.AlipayCerts.AppCertPEM
	}
	for name, data := range files {
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

// writeAppKeys writes the four PEM files of app under the names of prefix (private keys
// 0600, public keys 0644) and returns their names: app private, app public, Alipay private,
// Alipay public.
func writeAppKeys(alipayDir, prefix string, app *AlipayApp) ([4]string, error) {
	names := [4]string{prefix + appPrivateFile, prefix + appPublicFile, prefix + alipayPrivFile, prefix + alipayPublicFile}
	for i, f := range []struct {
		pem  func() (string, error)
		mode os.FileMode
	}{
		{app.AppPrivateKeyPEM, 0o600},
		{app.AppPublicKeyPEM, 0o644},
		{app.AlipayPrivateKeyPEM, 0o600},
		{app.AlipayPublicKeyPEM, 0o644},
	} {
		data, err := f.pem()
		if err != nil {
			return names, err
		}
		if err := writeFileAtomic(filepath.Join(alipayDir, names[i]), []byte(data), f.mode); err != nil {
			return names, err
		}
	}
	return names, nil
}

func writeKeys(alipayDir string, keys *Keys) error {
	if err := makePrivateDir(alipayDir); err != nil {
		return err
	}
	main := keys.MainApp()
	names, err := writeAppKeys(alipayDir, "", &main)
	if err != nil {
		return err
	}
	m := keyManifest{
		AppID:                keys.AppID,
		SellerID:             keys.SellerID,
		AppPrivateKeyFile:    names[0],
		AppPublicKeyFile:     names[1],
		AlipayPrivateKeyFile: names[2],
		AlipayPublicKeyFile:  names[3],
	}
	if a := keys.InApp; a != nil {
		if keys.AlipayCerts == nil || a.AlipayCerts == nil {
			return errors.New("sim: keys with an in-app app are written with both apps' certificates")
		}
		if names, err = writeAppKeys(alipayDir, inAppPrefix, a); err != nil {
			return err
		}
		m.InAppAppID = a.AppID
		m.InAppAppPrivateKeyFile, m.InAppAppPublicKeyFile, m.InAppAlipayPrivateKeyFile, m.InAppAlipayPublicKeyFile = names[0], names[1], names[2], names[3]
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

// generateRSAKeys fills each pointer with a fresh RSA-2048 key, generated in parallel, or
// with the next keys of the pool a test installed (UseKeyPool).
func generateRSAKeys(out ...**rsa.PrivateKey) error {
	if pool := keyPool.Load(); pool != nil {
		pool.take(out)
		return nil
	}
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

// keyPool, once a test installs it, gives the RSA keys of every fresh key set.
var keyPool atomic.Pointer[rsaKeyPool]

// rsaKeyPool hands out its keys in turn, wrapping round.
type rsaKeyPool struct {
	mu   sync.Mutex
	keys []*rsa.PrivateKey
	next int
}

func (p *rsaKeyPool) take(out []**rsa.PrivateKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range out {
		*k = p.keys[p.next%len(p.keys)]
		p.next++
	}
}

// keyPoolMin is the fewest keys a pool may hold: a key set draws ten, and the sets a test
// compares are drawn within a few sets of each other, so that no key comes round again
// between them.
const keyPoolMin = 64

// UseKeyPool is for tests: from now on, in this process, every fresh key set (GenerateKeys,
// a new key directory) takes its RSA keys in turn from pemKeys, PEM-encoded RSA-2048 private
// keys (at least keyPoolMin, each different), instead of generating them. A test binary
// starts dozens of servers on new key directories, and each set of ten keys takes seconds of
// CPU to generate. What is done with the keys is unchanged: only where they come from.
// The key an attacker forges with, and the keys of a WeChat certificate rotation, are still
// generated.
func UseKeyPool(pemKeys []byte) error {
	keys, err := parseKeyPool(pemKeys)
	if err != nil {
		return err
	}
	if len(keys) < keyPoolMin {
		return fmt.Errorf("sim: key pool: %d keys; it needs at least %d", len(keys), keyPoolMin)
	}
	keyPool.Store(&rsaKeyPool{keys: keys})
	return nil
}

// parseKeyPool reads PEM-encoded RSA-2048 private keys, refusing one seen before.
func parseKeyPool(pemKeys []byte) ([]*rsa.PrivateKey, error) {
	var keys []*rsa.PrivateKey
	seen := map[string]bool{}
	for rest := pemKeys; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return keys, nil
		}
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sim: key pool: %w", err)
		}
		if k.N.BitLen() != keyBits {
			return nil, fmt.Errorf("sim: key pool: a %d-bit key; every key is %d-bit", k.N.BitLen(), keyBits)
		}
		if seen[k.N.String()] {
			return nil, errors.New("sim: key pool: a key appears twice")
		}
		seen[k.N.String()] = true
		keys = append(keys, k)
	}
}

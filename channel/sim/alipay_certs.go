package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"time"
)

// AlipayMode is how a merchant app signs its calls and verifies Alipay's, Alipay's 接口加签方式.
// An app is in exactly one mode at Alipay, and the simulated app too.
type AlipayMode string

const (
	// AlipayModeKey is 公钥模式: the app's public key and Alipay's public key are exchanged
	// as plain keys. The default.
	AlipayModeKey AlipayMode = "key"
	// AlipayModeCert is 公钥证书模式: every request names the app certificate
	// (app_cert_sn) and the root the app trusts (alipay_root_cert_sn), and every answer
	// names the Alipay certificate whose key signed it (alipay_cert_sn). The keys are the
	// same as in key mode; the certificates are Keys.AlipayCerts.
	AlipayModeCert AlipayMode = "cert"
)

// AlipayNotifyCertSN is what a notification does with alipay_cert_sn in certificate mode.
// Protocols §D: unverified. The SDKs agree only on a notification without it:
// smartwalle's VerifySign leaves alipay_cert_sn out of the signed content (and uses it to
// pick the key), while gopay's VerifySignWithCert and the Java SDK's rsaCertCheckV1 leave
// out only sign and sign_type, so they would need it signed. Every variant is signed with
// the same key as the answers.
type AlipayNotifyCertSN string

const (
	// AlipayNotifyCertSNAbsent sends no alipay_cert_sn: the only form every SDK verifies,
	// so the likeliest for the real channel. The default.
	AlipayNotifyCertSNAbsent AlipayNotifyCertSN = "absent"
	// AlipayNotifyCertSNUnsigned sends alipay_cert_sn outside the signed content, as
	// smartwalle's verifier expects.
	AlipayNotifyCertSNUnsigned AlipayNotifyCertSN = "unsigned"
	// AlipayNotifyCertSNSigned sends alipay_cert_sn inside the signed content, like any
	// other field, as the official rule (drop only sign and sign_type, §A5) reads.
	AlipayNotifyCertSNSigned AlipayNotifyCertSN = "signed"
)

// AlipayCerts is the certificate material of certificate mode, as a merchant downloads it
// from the Alipay open platform console: the text of each file. It is all public.
type AlipayCerts struct {
	// RootPEM is alipayRootCert.crt. Like the real file it holds several roots, not all
	// signed with RSA: an RSA root (which issued everything below), an ECDSA root, and the
	// ECDSA root's key certified by the RSA root. alipay_root_cert_sn counts only the
	// RSA-signed ones (AlipayRootCertSN).
	RootPEM string
	// AlipayCertPEM is alipayCertPublicKey_RSA2.crt: the certificate of the app's
	// AlipayPublicKey, which signs its answers and notifications, issued by an
	// intermediate CA under the RSA root; then the intermediate's certificate, as in the
	// real file. SDKs read the first certificate.
	AlipayCertPEM string
	// AppCertPEM is appCertPublicKey_<app_id>.crt: the certificate of the app's
	// AppPublicKey, issued by the same intermediate; then the intermediate's certificate.
	AppCertPEM string
}

// The console's file names (keys dir layout, see LoadOrCreateKeys).
const (
	alipayRootCertFile = "alipayRootCert.crt"
	alipayCertFile     = "alipayCertPublicKey_RSA2.crt"
	appCertFilePrefix  = "appCertPublicKey_" // + app id + ".crt"
)

func appCertFile(appID string) string { return appCertFilePrefix + appID + ".crt" }

// Lifetimes of the simulated certificates: the roots outlive what they issue.
const (
	alipayRootLifetime = 20 * 365 * 24 * time.Hour
	alipayLeafLifetime = 5 * 365 * 24 * time.Hour
)

// simCAName names a simulated CA. The names say what they are, so that a simulated
// certificate is never mistaken for one of Ant Group's.
func simCAName(cn string) pkix.Name {
	return pkix.Name{
		CommonName:         cn,
		OrganizationalUnit: []string{"Certification Authority"},
		Organization:       []string{"orderpay channel simulator"},
		Country:            []string{"CN"},
	}
}

// alipayCertSubject is an app whose certificate-mode material is issued: its id, its public
// key and the key Alipay signs its answers and notifications with.
type alipayCertSubject struct {
	appID             string
	appKey, alipayKey *rsa.PublicKey
}

// generateAlipayCerts issues the certificate-mode material of each app, all from one CA, as
// Alipay's: the same alipayRootCert.crt for every app of a merchant. The CA keys are made for
// the purpose and thrown away: nothing needs to be issued later, and a key that is not kept
// cannot leak.
func generateAlipayCerts(apps ...alipayCertSubject) ([]*AlipayCerts, error) {
	var rootKey, interKey *rsa.PrivateKey
	if err := generateRSAKeys(&rootKey, &interKey); err != nil {
		return nil, fmt.Errorf("sim: generate alipay CA keys: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sim: generate alipay CA keys: %w", err)
	}
	now := time.Now()
	var issueErr error
	// issue signs a certificate for pub with signer as parent (self-signed if parent is
	// nil). The signature algorithm follows the signer's key: SHA256WithRSA for the RSA
	// CAs, ECDSAWithSHA256 for the ECDSA root. After a failure it does nothing.
	issue := func(subject pkix.Name, ca bool, pub any, parent *x509.Certificate, signer any) *x509.Certificate {
		if issueErr != nil {
			return nil
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			issueErr = err
			return nil
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial.Add(serial, big.NewInt(1)), // positive, as X.509 requires
			Subject:               subject,
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(alipayLeafLifetime),
			KeyUsage:              x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
		}
		if ca {
			tmpl.IsCA = true
			tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
			tmpl.NotAfter = now.Add(alipayRootLifetime)
		}
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			issueErr = err
			return nil
		}
		cert, err := x509.ParseCertificate(der)
		issueErr = err
		return cert
	}
	leafName := func(cn, ou string) pkix.Name {
		return pkix.Name{CommonName: cn, OrganizationalUnit: []string{ou},
			Organization: []string{"orderpay channel simulator"}, Country: []string{"CN"}}
	}
	ecName := simCAName("Simulated Alipay Root CA E1")
	root := issue(simCAName("Simulated Alipay Root CA R1"), true, &rootKey.PublicKey, nil, rootKey)
	ecRoot := issue(ecName, true, &ecKey.PublicKey, nil, ecKey)
	cross := issue(ecName, true, &ecKey.PublicKey, root, rootKey)
	inter := issue(simCAName("Simulated Alipay Class 2 CA R1"), true, &interKey.PublicKey, root, rootKey)
	out := make([]*AlipayCerts, len(apps))
	for i, a := range apps {
		alipayCert := issue(leafName("Simulated Alipay signing key", "Alipay Open Platform"), false, a.alipayKey, inter, interKey)
		appCert := issue(leafName(a.appID, "Alipay merchant app"), false, a.appKey, inter, interKey)
		if issueErr != nil {
			break
		}
		out[i] = &AlipayCerts{
			RootPEM:       certsPEM(root, ecRoot, cross),
			AlipayCertPEM: certsPEM(alipayCert, inter),
			AppCertPEM:    certsPEM(appCert, inter),
		}
	}
	if issueErr != nil {
		return nil, fmt.Errorf("sim: issue alipay certificates: %w", issueErr)
	}
	return out, nil
}

func certsPEM(certs ...*x509.Certificate) string {
	var b strings.Builder
	for _, c := range certs {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	return b.String()
}

// ParseCertificatesPEM returns every CERTIFICATE block of text, in order.
func ParseCertificatesPEM(text string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sim: parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("sim: no CERTIFICATE PEM block")
	}
	return certs, nil
}

// AlipayCertSN is a certificate's SN as Alipay and its SDKs compute it for app_cert_sn and
// alipay_cert_sn: the MD5, in lowercase hex, of the issuer's distinguished name as RFC 2253
// text (Go's pkix.Name.String; Java's X500Principal.getName) followed by the serial number
// in decimal (smartwalle getCertSN; Java AlipaySignature.getCertSN).
func AlipayCertSN(cert *x509.Certificate) string {
	sum := md5.Sum([]byte(cert.Issuer.String() + cert.SerialNumber.String()))
	return hex.EncodeToString(sum[:])
}

// rsaSignatures are the signature algorithms whose OID starts with 1.2.840.113549.1.1
// (PKCS #1), the test the Java SDK's getRootCertSN applies. smartwalle's LoadAliPayRootCert
// accepts only SHA256WithRSA and SHA1WithRSA, which is all real roots use; the two agree on
// every certificate the simulator makes.
var rsaSignatures = []x509.SignatureAlgorithm{
	x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.SHA256WithRSA, x509.SHA384WithRSA,
	x509.SHA512WithRSA, x509.SHA256WithRSAPSS, x509.SHA384WithRSAPSS, x509.SHA512WithRSAPSS,
}

// AlipayRootCertSN is alipay_root_cert_sn for the text of alipayRootCert.crt: the SN
// (AlipayCertSN) of each certificate in it signed with RSA, in file order, joined with "_".
// Certificates signed otherwise (ECDSA, SM2) do not count. It is an error if none counts.
func AlipayRootCertSN(rootPEM string) (string, error) {
	certs, err := ParseCertificatesPEM(rootPEM)
	if err != nil {
		return "", err
	}
	var sns []string
	for _, c := range certs {
		if slices.Contains(rsaSignatures, c.SignatureAlgorithm) {
			sns = append(sns, AlipayCertSN(c))
		}
	}
	if len(sns) == 0 {
		return "", errors.New("sim: the root certificate file has no RSA-signed certificate")
	}
	return strings.Join(sns, "_"), nil
}

// alipayCertMode is what the gateway of an app in certificate mode needs, derived once from
// the app's AlipayCerts at New.
type alipayCertMode struct {
	appCertSN, rootCertSN, alipayCertSN string
	alipayCertPEM                       string // what alipay.open.app.alipaycert.download hands out
}

// newAlipayCertMode derives the SNs of app's certificates, and checks that they carry the
// keys they stand for and chain to the RSA root.
func newAlipayCertMode(app AlipayApp) (*alipayCertMode, error) {
	c := app.AlipayCerts
	if c == nil {
		return nil, fmt.Errorf("sim: certificate mode needs the certificates of app %s", app.AppID)
	}
	roots, err := ParseCertificatesPEM(c.RootPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, alipayRootCertFile)
	}
	rootSN, err := AlipayRootCertSN(c.RootPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	leafOf := func(text, file string, key *rsa.PublicKey) (*x509.Certificate, error) {
		chain, err := ParseCertificatesPEM(text)
		if err != nil {
			return nil, fmt.Errorf("%w (%s)", err, file)
		}
		if !key.Equal(chain[0].PublicKey) {
			return nil, fmt.Errorf("sim: %s is not a certificate of its key", file)
		}
		inter := x509.NewCertPool()
		for _, ic := range chain[1:] {
			inter.AddCert(ic)
		}
		// Expiry is not simulated: the chain is checked as of the leaf's issue, so that an
		// old key directory still loads.
		opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: chain[0].NotBefore,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := chain[0].Verify(opts); err != nil {
			return nil, fmt.Errorf("sim: %s does not chain to %s: %w", file, alipayRootCertFile, err)
		}
		return chain[0], nil
	}
	appCert, err := leafOf(c.AppCertPEM, appCertFile(app.AppID), app.AppPublicKey)
	if err != nil {
		return nil, err
	}
	ali, err := leafOf(c.AlipayCertPEM, alipayCertFile+" of app "+app.AppID, app.AlipayPublicKey)
	if err != nil {
		return nil, err
	}
	return &alipayCertMode{
		appCertSN:     AlipayCertSN(appCert),
		rootCertSN:    rootSN,
		alipayCertSN:  AlipayCertSN(ali),
		alipayCertPEM: c.AlipayCertPEM,
	}, nil
}

// checkAlipayCertSN applies the app's signing mode to the certificate SNs of a request
// (docs/channels.md §A1). It runs before the signature is checked: the SNs say which app
// certificate, hence which key, the gateway verifies with.
//
// Sub codes: isv.missing-app-cert-sn (缺少应用公钥证书序列号) is what real gateways answer,
// with 40002, to a request without app_cert_sn where a certificate is required (quoted from
// real answers in merchant code; developer.aliyun.com/ask/285112).
// isv.app-cert-not-exist (应用公钥证书不存在) is answered when the app is in key mode but the
// request is signed in certificate mode (developer.aliyun.com/ask/285114, first cause), and
// is used here too for an app_cert_sn that is not the app's certificate.
// isv.missing-alipay-root-cert-sn and isv.invalid-alipay-root-cert-sn are listed in the
// signing troubleshooting page (common/02kdnf, through third-party notes); the latter is
// reported from the field for a wrong root SN. The code 40002 for these three and the
// sub_msg texts other than the first two are our choice (unverified).
//
// In key mode a request with app_cert_sn is refused as above; alipay_root_cert_sn alone
// names no key and is ignored (unverified).
func checkAlipayCertSN(app *alipayApp, params url.Values) *alipayReply {
	appSN, rootSN := params.Get("app_cert_sn"), params.Get("alipay_root_cert_sn")
	refuse := func(subCode, subMsg string) *alipayReply {
		r := alipayFailure("40002", subCode, subMsg)
		return &r
	}
	m := app.cert
	switch {
	case m == nil && appSN != "":
		return refuse("isv.app-cert-not-exist", "应用公钥证书不存在")
	case m == nil:
		return nil
	case appSN == "":
		return refuse("isv.missing-app-cert-sn", "缺少应用公钥证书序列号")
	case appSN != m.appCertSN:
		return refuse("isv.app-cert-not-exist", "应用公钥证书不存在")
	case rootSN == "":
		return refuse("isv.missing-alipay-root-cert-sn", "缺少支付宝根证书序列号")
	case rootSN != m.rootCertSN:
		return refuse("isv.invalid-alipay-root-cert-sn", "无效的支付宝根证书序列号")
	}
	return nil
}

// alipayCertDownload serves alipay.open.app.alipaycert.download (应用支付宝公钥证书下载), which
// SDKs call on meeting an alipay_cert_sn they do not know: alipay_cert_content is the
// standard base64 of the text of alipayCertPublicKey_RSA2.crt (smartwalle decodes the
// base64, then reads the PEM; the official PHP SDK base64-decodes it and checks the chain
// against the root). An SN that is not the app's Alipay certificate, or any SN for an app in
// key mode, which has no certificate, is refused with 40002 isv.alipay-cert-not-exist, a
// documented gateway sub code (the code, and its use here, are our choice: unverified).
func (s *Simulator) alipayCertDownload(app *alipayApp, biz bizContent) alipayReply {
	sn, err := biz.str("alipay_cert_sn")
	if err != nil || sn == "" {
		return alipayFailure("40001", "isv.missing-parameter", "缺少必选参数 alipay_cert_sn")
	}
	if app.cert == nil || sn != app.cert.alipayCertSN {
		return alipayFailure("40002", "isv.alipay-cert-not-exist", "支付宝公钥证书不存在")
	}
	r := alipaySuccess()
	r.AlipayCertContent = base64.StdEncoding.EncodeToString([]byte(app.cert.alipayCertPEM))
	return r
}

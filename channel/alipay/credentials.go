package alipay

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"

	sdk "github.com/smartwalle/alipay/v3"
	"github.com/smartwalle/ncrypto"

	"orderpay"
)

// The signing modes of an Alipay app (接口加签方式), named as the channels file names them.
// An app is in exactly one at Alipay, and the adapter is configured for exactly one.
const (
	// ModePublicKey is 公钥模式 ("key"): Config.AlipayPublicKeyPEM verifies Alipay.
	ModePublicKey = "key"
	// ModeCertificate is 公钥证书模式 ("cert"): requests carry app_cert_sn and
	// alipay_root_cert_sn, and the key of Config.AlipayCertPEM verifies answers that name it
	// by alipay_cert_sn.
	ModeCertificate = "cert"
)

// Describe returns the adapter's mode, ids and the fingerprints of its public credentials,
// and the in-app app's: what an operator may know of its credentials, never private key
// material, so it can be logged and served.
func (c *Channel) Describe() orderpay.ChannelDescription {
	d := c.desc
	d.AlipayRootCertSHA256 = append([]string(nil), d.AlipayRootCertSHA256...)
	if c.inApp != nil {
		in := c.inApp.Describe()
		d.InApp = &in
	}
	return d
}

// mode tells which mode cfg configures: exactly AlipayPublicKeyPEM, or exactly the three
// certificates. Anything else is a configuration error, because an app is in one mode at
// Alipay and the wrong one is refused on every call.
func (cfg Config) mode() (string, error) {
	certs := 0
	for _, s := range []string{cfg.AppCertPEM, cfg.AlipayCertPEM, cfg.AlipayRootCertPEM} {
		if s != "" {
			certs++
		}
	}
	switch {
	case cfg.AlipayPublicKeyPEM != "" && certs > 0:
		return "", fieldError("set {AlipayPublicKeyPEM} (public-key mode) or {AppCertPEM}, {AlipayCertPEM} and {AlipayRootCertPEM} (certificate mode), not both", nil)
	case cfg.AlipayPublicKeyPEM != "":
		return ModePublicKey, nil
	case certs == 3:
		return ModeCertificate, nil
	case certs > 0:
		return "", fieldError("certificate mode needs all of {AppCertPEM}, {AlipayCertPEM} and {AlipayRootCertPEM}", nil)
	}
	return "", fieldError("{AlipayPublicKeyPEM} (public-key mode) or {AppCertPEM}, {AlipayCertPEM} and {AlipayRootCertPEM} (certificate mode) are required", nil)
}

// loadCredentials gives the SDK client the verification material of cfg's mode, and returns
// the key that verifies Alipay and the description of what was loaded. In certificate mode
// the SDK's own loaders compute the SNs it sends (app_cert_sn, alipay_root_cert_sn) and the
// one it checks in answers (alipay_cert_sn); the checks here catch what those loaders
// accept silently but every call would then fail on.
func loadCredentials(client *sdk.Client, cfg Config, mode string) (*rsa.PublicKey, orderpay.ChannelDescription, error) {
	d := orderpay.ChannelDescription{Channel: orderpay.ChannelAlipay, Mode: mode, AppID: cfg.AppID, SellerID: cfg.SellerID}
	if mode == ModePublicKey {
		if err := client.LoadAliPayPublicKey(cfg.AlipayPublicKeyPEM); err != nil {
			return nil, d, fieldError("{AlipayPublicKeyPEM}", err)
		}
		pub, err := ncrypto.DecodePublicKey([]byte(cfg.AlipayPublicKeyPEM)).PKIX().RSAPublicKey()
		if err != nil {
			return nil, d, fieldError("{AlipayPublicKeyPEM}", err)
		}
		d.PublicKeySHA256, err = publicKeySHA256(pub)
		return pub, d, err
	}

	appCert, err := ncrypto.DecodeCertificate([]byte(cfg.AppCertPEM))
	if err != nil {
		return nil, d, fieldError("{AppCertPEM}", err)
	}
	appKey, err := appPublicKey(cfg.AppPrivateKeyPEM)
	if err != nil {
		return nil, d, err
	}
	if !appKey.Equal(appCert.PublicKey) {
		// Alipay would refuse every request's signature.
		return nil, d, fieldError("{AppCertPEM} does not match {AppPrivateKeyPEM}: it is the certificate of another key", nil)
	}
	alipayCert, err := ncrypto.DecodeCertificate([]byte(cfg.AlipayCertPEM))
	if err != nil {
		return nil, d, fieldError("{AlipayCertPEM}", err)
	}
	pub, ok := alipayCert.PublicKey.(*rsa.PublicKey)
	if !ok {
		// The SDK skips such a certificate without a word, and then verifies nothing.
		return nil, d, fieldError("{AlipayCertPEM} does not hold an RSA public key", nil)
	}
	roots, err := rootCertificates(cfg.AlipayRootCertPEM)
	if err != nil {
		return nil, d, err
	}
	if err := client.LoadAppCertPublicKey(cfg.AppCertPEM); err != nil {
		return nil, d, fieldError("{AppCertPEM}", err)
	}
	if err := client.LoadAliPayRootCert(cfg.AlipayRootCertPEM); err != nil {
		return nil, d, fieldError("{AlipayRootCertPEM}", err)
	}
	if err := client.LoadAlipayCertPublicKey(cfg.AlipayCertPEM); err != nil {
		return nil, d, fieldError("{AlipayCertPEM}", err)
	}
	if d.PublicKeySHA256, err = publicKeySHA256(pub); err != nil {
		return nil, d, err
	}
	d.AppCertSHA256, d.AlipayCertSHA256 = sha256Hex(appCert.Raw), sha256Hex(alipayCert.Raw)
	for _, r := range roots {
		d.AlipayRootCertSHA256 = append(d.AlipayRootCertSHA256, sha256Hex(r.Raw))
	}
	return pub, d, nil
}

// fieldError is a refusal of the credentials in the fields text names in braces.
func fieldError(text string, err error) error {
	return &orderpay.FieldError{Channel: orderpay.ChannelAlipay, Text: text, Err: err}
}

// rootCertificates reads every certificate of alipayRootCert.crt. The SDK builds
// alipay_root_cert_sn from the ones signed with RSA; without one it would send none, and
// Alipay refuses a certificate-mode request without it.
func rootCertificates(text string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rsaSigned := false
	for rest := []byte(text); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fieldError("{AlipayRootCertPEM}", err)
		}
		certs = append(certs, cert)
		rsaSigned = rsaSigned || cert.SignatureAlgorithm == x509.SHA256WithRSA || cert.SignatureAlgorithm == x509.SHA1WithRSA
	}
	if !rsaSigned {
		return nil, fieldError("{AlipayRootCertPEM} holds no RSA-signed certificate, so no alipay_root_cert_sn", nil)
	}
	return certs, nil
}

// appPublicKey is the public half of the app private key, read as the SDK reads it.
func appPublicKey(privatePEM string) (*rsa.PublicKey, error) {
	key, err := ncrypto.DecodePrivateKey([]byte(privatePEM)).PKCS1().RSAPrivateKey()
	if err != nil {
		if key, err = ncrypto.DecodePrivateKey([]byte(privatePEM)).PKCS8().RSAPrivateKey(); err != nil {
			return nil, fieldError("{AppPrivateKeyPEM}", err)
		}
	}
	return &key.PublicKey, nil
}

func publicKeySHA256(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("alipay: fingerprint the alipay public key: %w", err)
	}
	return sha256Hex(der), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

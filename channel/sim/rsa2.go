package sim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// SignSHA256RSA signs content with SHA256WithRSA (PKCS#1 v1.5) and returns the signature in
// standard base64. Alipay calls this RSA2; WeChat Pay v3 uses the same primitive.
func SignSHA256RSA(key *rsa.PrivateKey, content []byte) (string, error) {
	if key == nil {
		return "", errors.New("sim: no signing key")
	}
	digest := sha256.Sum256(content)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sim: sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifySHA256RSA checks a standard-base64 SHA256WithRSA signature over content.
func VerifySHA256RSA(key *rsa.PublicKey, content []byte, signature string) error {
	if key == nil {
		return errors.New("sim: no verification key")
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("sim: signature is not base64: %w", err)
	}
	digest := sha256.Sum256(content)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig); err != nil {
		return errors.New("sim: signature does not verify")
	}
	return nil
}

// AlipaySignContent builds the string Alipay signs for a parameter set (docs/channels.md §A1, §A5):
// every parameter except the excluded keys, empty values dropped, keys sorted by byte
// order, raw (not URL-encoded) "k=v" pairs joined with "&".
//
// Requests exclude only "sign" (sign_type is signed); notifications exclude "sign" and
// "sign_type". A key with several values is refused: the gateway never sends one, and
// accepting it would make the signed content ambiguous.
func AlipaySignContent(params url.Values, exclude ...string) (string, error) {
	keys := make([]string, 0, len(params))
	for k, vs := range params {
		if slices.Contains(exclude, k) {
			continue
		}
		if len(vs) > 1 {
			return "", fmt.Errorf("sim: parameter %q is repeated", k)
		}
		if len(vs) == 0 || vs[0] == "" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params[k][0])
	}
	return b.String(), nil
}

// SignAlipayParams signs a notification-style parameter set with the Alipay key: the
// content excludes "sign" and "sign_type" (§A5). It does not modify params.
func SignAlipayParams(key *rsa.PrivateKey, params url.Values) (string, error) {
	content, err := AlipaySignContent(params, "sign", "sign_type")
	if err != nil {
		return "", err
	}
	return SignSHA256RSA(key, []byte(content))
}

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
	"sync"
)

// SignSHA256RSA signs content with SHA256WithRSA (PKCS#1 v1.5) and returns the signature in
// standard base64. Alipay calls this RSA2; WeChat Pay v3 uses the same primitive.
//
// PKCS#1 v1.5 signatures are deterministic: one key and one content always sign the same.
// The explorer replays one scene thousands of times on its fake clock, and the simulator
// then signs the same replies again and again, a private-key operation each; signatures
// made lately are kept (signMemo) and given again for the same key and content.
func SignSHA256RSA(key *rsa.PrivateKey, content []byte) (string, error) {
	if key == nil {
		return "", errors.New("sim: no signing key")
	}
	digest := sha256.Sum256(content)
	memoKey := signMemoKey(key, digest)
	if sig, ok := signMemo.get(memoKey); ok {
		return sig, nil
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sim: sign: %w", err)
	}
	out := base64.StdEncoding.EncodeToString(sig)
	signMemo.put(memoKey, out)
	return out, nil
}

// signMemo keeps up to signMemoSize signatures, by key and content digest; when full it
// starts again empty. A signature is some 350 bytes: at most a few MiB.
var signMemo = &memo{m: map[[sha256.Size]byte]string{}}

const signMemoSize = 1 << 13

type memo struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]string
}

func (m *memo) get(k [sha256.Size]byte) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

func (m *memo) put(k [sha256.Size]byte, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= signMemoSize {
		clear(m.m)
	}
	m.m[k] = v
}

// signMemoKey names a signature by the key's public modulus and exponent and the content's
// digest: two keys of one modulus are one key.
func signMemoKey(key *rsa.PrivateKey, digest [sha256.Size]byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(key.N.Bytes())
	fmt.Fprintf(h, "/%d/", key.E)
	h.Write(digest[:])
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
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

// Package buyerauthtest is a shop's login for tests and the harnesses: it signs buyers'
// JWTs with an HS256 secret or with rotating RS256/ES256 keys it publishes as a JWKS.
package buyerauthtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// HS256 signs a token for sub with secret, valid from nbf to exp, with iss and aud when set.
func HS256(secret []byte, sub, iss, aud string, nbf, exp time.Time) string {
	return sign(jwt.SigningMethodHS256, secret, "", claims(sub, iss, aud, nbf, exp))
}

// HS256With is HS256 with more claims beside the registered ones (a buyer's wallet
// identities, say).
func HS256With(secret []byte, sub string, exp time.Time, extra map[string]any) string {
	c := jwt.MapClaims{"sub": sub, "exp": exp.Unix()}
	for k, v := range extra {
		c[k] = v
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		panic(err)
	}
	return s
}

func claims(sub, iss, aud string, nbf, exp time.Time) jwt.RegisteredClaims {
	c := jwt.RegisteredClaims{Subject: sub, Issuer: iss}
	if !nbf.IsZero() {
		c.NotBefore = jwt.NewNumericDate(nbf)
	}
	if !exp.IsZero() { // a zero exp leaves the claim out
		c.ExpiresAt = jwt.NewNumericDate(exp)
	}
	if aud != "" {
		c.Audience = jwt.ClaimStrings{aud}
	}
	return c
}

func sign(method jwt.SigningMethod, key any, kid string, c jwt.RegisteredClaims) string {
	t := jwt.NewWithClaims(method, c)
	if kid != "" {
		t.Header["kid"] = kid
	}
	s, err := t.SignedString(key)
	if err != nil {
		panic(err) // only a key of the wrong type fails, which is this package's own bug
	}
	return s
}

// JWKS is a login that signs with the newest of its keys and publishes them all at URL
// (but those Unpublished). Hang and Serve make it slow or make it answer something else.
type JWKS struct {
	srv         *httptest.Server
	mu          sync.Mutex
	keys        []signer // oldest first; the last signs
	unpublished map[string]bool
	hang        time.Duration
	body        []byte // answered instead of the keys, if set
	closed      chan struct{}
	closeOnce   sync.Once
	fetches     atomic.Int64
}

type signer struct {
	kid    string
	method jwt.SigningMethod
	key    crypto.Signer
}

// NewJWKS starts a JWKS endpoint with one RSA key and one EC key, RSA signing.
func NewJWKS() *JWKS {
	j := &JWKS{unpublished: map[string]bool{}, closed: make(chan struct{})}
	j.add(newEC())
	j.add(newRSA())
	j.srv = httptest.NewServer(http.HandlerFunc(j.serve))
	return j
}

// URL is the JWKS's address.
func (j *JWKS) URL() string { return j.srv.URL + "/.well-known/jwks.json" }

// Close stops the endpoint, and lets go the fetches it holds (Hang).
func (j *JWKS) Close() {
	j.closeOnce.Do(func() { close(j.closed) })
	j.srv.Close()
}

// KID is the kid of the key that signs now.
func (j *JWKS) KID() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.keys[len(j.keys)-1].kid
}

// Unpublish takes the key kid out of the set the endpoint publishes (the login no longer
// trusts it); TokenKID can still sign with it.
func (j *JWKS) Unpublish(kid string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.unpublished[kid] = true
}

// Hang makes every fetch wait d before it is answered (or until the client gives up);
// 0 answers at once again.
func (j *JWKS) Hang(d time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hang = d
}

// Serve makes the endpoint answer body (200, JSON) instead of its keys; nil gives the keys
// again.
func (j *JWKS) Serve(body []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.body = body
}

// TokenKID signs a token for sub, valid until exp, with the key kid, or, when the JWKS has
// no such key (a forger's made-up kid), with the current key under that kid.
func (j *JWKS) TokenKID(kid, sub string, exp time.Time) string {
	j.mu.Lock()
	s := j.keys[len(j.keys)-1]
	for _, k := range j.keys {
		if k.kid == kid {
			s = k
		}
	}
	j.mu.Unlock()
	return sign(s.method, s.key, kid, claims(sub, "", "", time.Now().Add(-time.Minute), exp))
}

// Fetches is how many times the JWKS was fetched.
func (j *JWKS) Fetches() int64 { return j.fetches.Load() }

// Rotate adds a new RSA key, which signs from now on (the old ones stay published).
func (j *JWKS) Rotate() string {
	s := newRSA()
	j.add(s)
	return s.kid
}

// Token signs a token for sub with the current key.
func (j *JWKS) Token(sub, iss, aud string, nbf, exp time.Time) string {
	j.mu.Lock()
	s := j.keys[len(j.keys)-1]
	j.mu.Unlock()
	return sign(s.method, s.key, s.kid, claims(sub, iss, aud, nbf, exp))
}

// TokenEC signs a token for sub with the EC key (ES256).
func (j *JWKS) TokenEC(sub string, exp time.Time) string {
	j.mu.Lock()
	s := j.keys[0]
	j.mu.Unlock()
	return sign(s.method, s.key, s.kid, claims(sub, "", "", time.Now().Add(-time.Minute), exp))
}

func (j *JWKS) add(s signer) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys = append(j.keys, s)
}

func (j *JWKS) serve(w http.ResponseWriter, r *http.Request) {
	j.fetches.Add(1)
	set := jwkset.NewMemoryStorage()
	j.mu.Lock()
	keys := append([]signer(nil), j.keys...)
	unpublished, hang, body := maps.Clone(j.unpublished), j.hang, j.body
	j.mu.Unlock()
	if hang > 0 {
		t := time.NewTimer(hang)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-j.closed:
			return
		}
	}
	if body != nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		return
	}
	for _, s := range keys {
		if unpublished[s.kid] {
			continue
		}
		jwk, err := jwkset.NewJWKFromKey(s.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			ALG: jwkset.ALG(s.method.Alg()), KID: s.kid, USE: jwkset.UseSig}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := set.KeyWrite(r.Context(), jwk); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	b, err := set.JSONPublic(context.Background())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func newRSA() signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return signer{kid: kid("rsa"), method: jwt.SigningMethodRS256, key: k}
}

func newEC() signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return signer{kid: kid("ec"), method: jwt.SigningMethodES256, key: k}
}

func kid(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))
}

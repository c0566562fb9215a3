package buyerauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"orderpay"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/clocktest"
)

func bearer(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// A token verified once is answered from memory while it is valid, and for at most
// verifiedFor; it still expires at its exp (with the leeway), and the memory is bounded.
func TestAVerifiedTokenIsRememberedNoLongerThanItIsValid(t *testing.T) {
	secret := []byte("a-shop-secret-of-more-than-thirty-two-bytes")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := clocktest.New(start)
	a, err := New(context.Background(), Config{Mode: ModeJWT, SecretFile: file, Clock: clock, Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	long := buyerauthtest.HS256(secret, "alice", "", "", start.Add(-time.Minute), start.Add(time.Hour))
	short := buyerauthtest.HS256(secret, "bob", "", "", start.Add(-time.Minute), start.Add(10*time.Second))
	for _, tok := range []string{long, short} {
		if _, err := a.Buyer(bearer(tok)); err != nil {
			t.Fatal(err)
		}
	}
	// Another secret from now on: what is answered without it came from memory.
	a.secret = []byte("another-secret-of-more-than-thirty-two-b")
	if b, err := a.Buyer(bearer(long)); err != nil || b != "alice" {
		t.Fatalf("a token verified a moment ago: %q, %v; want alice from memory", b, err)
	}
	fresh := buyerauthtest.HS256(secret, "carol", "", "", start.Add(-time.Minute), start.Add(time.Hour))
	if _, err := a.Buyer(bearer(fresh)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("a token never verified, signed with the old secret: %v; want it verified, and refused", err)
	}
	// bob's exp, 10 s away, plus the 30 s leeway, ends its memory before verifiedFor does.
	clock.Advance(39 * time.Second)
	if b, err := a.Buyer(bearer(short)); err != nil || b != "bob" {
		t.Fatalf("within exp and the leeway: %q, %v", b, err)
	}
	clock.Advance(2 * time.Second)
	if _, err := a.Buyer(bearer(short)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("past exp and the leeway: %v; want EUNAUTHORIZED", err)
	}
	clock.Set(start.Add(verifiedFor))
	if _, err := a.Buyer(bearer(long)); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("after verifiedFor: %v; want it verified again (and refused by the new secret)", err)
	}
	// Bounded.
	a.secret = secret
	for i := range verifiedMax + 10 {
		tok := buyerauthtest.HS256(secret, fmt.Sprint("buyer", i), "", "", time.Time{}, start.Add(2*time.Hour))
		if _, err := a.Buyer(bearer(tok)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.verified.m); n > verifiedMax {
		t.Fatalf("%d tokens remembered, more than %d", n, verifiedMax)
	}
}

// A remembered token keeps its nbf: it is not valid before its nbf less the leeway; a
// token never verified is not remembered.
func TestAVerifiedTokenKeepsItsNotBefore(t *testing.T) {
	var v verified
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	v.put(keyOf("tok"), "dave", now, now.Add(time.Minute), now.Add(time.Hour), 30*time.Second)
	if _, ok := v.get(keyOf("tok"), now.Add(29*time.Second)); ok {
		t.Fatal("valid before its nbf less the leeway")
	}
	if b, ok := v.get(keyOf("tok"), now.Add(30*time.Second)); !ok || b != "dave" {
		t.Fatalf("at nbf less the leeway: %q, %v", b, ok)
	}
	if _, ok := v.get(keyOf("other"), now.Add(time.Minute)); ok {
		t.Fatal("a token never put is remembered")
	}
}

// A token whose verification began before the memory was cleared (a JWKS fetch changed the
// keys meanwhile) is not kept: its key may be the one taken out.
func TestATokenVerifiedAcrossAClearIsNotKept(t *testing.T) {
	var v verified
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	gen := v.generation()
	v.clear()
	v.putAt(gen, keyOf("tok"), "erin", now, time.Time{}, now.Add(time.Hour), 0)
	if _, ok := v.get(keyOf("tok"), now); ok {
		t.Fatal("a token verified across a clear was kept")
	}
	v.putAt(v.generation(), keyOf("tok"), "erin", now, time.Time{}, now.Add(time.Hour), 0)
	if b, ok := v.get(keyOf("tok"), now); !ok || b != "erin" {
		t.Fatalf("a token verified after the clear: %q, %v", b, ok)
	}
}

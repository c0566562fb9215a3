package buyerauth_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/buyerauth/buyerauthtest"
)

func request(remote, authorization string, header map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.RemoteAddr = remote
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// wantBuyer checks that r authenticates as want, or (want "") is refused with EUNAUTHORIZED
// saying why.
func wantBuyer(t *testing.T, a *buyerauth.Authenticator, r *http.Request, want, why string) {
	t.Helper()
	got, err := a.Buyer(r)
	if want != "" {
		if err != nil || got != want {
			t.Fatalf("buyer %q, %v; want %q", got, err, want)
		}
		return
	}
	if orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED || !strings.Contains(orderpay.ErrorMessage(err), why) {
		t.Fatalf("buyer %q, %v; want EUNAUTHORIZED saying %q", got, err, why)
	}
	if auth := r.Header.Get("Authorization"); len(auth) > 20 && strings.Contains(err.Error(), auth[7:]) {
		t.Fatal("the error carries the token")
	}
}

// HS256 with a shared secret: a valid token is its sub; a missing, malformed, expired,
// not-yet-valid, forged, exp-less, other-issuer or other-audience token is 401.
func TestHS256Tokens(t *testing.T) {
	t.Parallel()
	secret := []byte("a-shop-secret-of-more-than-thirty-two-bytes")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := buyerauth.New(context.Background(), buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: file,
		Issuer: "https://login.shop.example", Audience: "orderpay", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := func(sub, iss, aud string, nbf, exp time.Time) *http.Request {
		return request("10.0.0.1:1", "Bearer "+buyerauthtest.HS256(secret, sub, iss, aud, nbf, exp), nil)
	}
	iss, aud := "https://login.shop.example", "orderpay"
	wantBuyer(t, a, tok("alice", iss, aud, now.Add(-time.Minute), now.Add(time.Hour)), "alice", "")
	wantBuyer(t, a, request("10.0.0.1:1", "", nil), "", "Authorization: Bearer")
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer not.a.jwt", nil), "", "malformed")
	wantBuyer(t, a, tok("alice", iss, aud, now.Add(-2*time.Hour), now.Add(-time.Hour)), "", "expired")
	wantBuyer(t, a, tok("alice", iss, aud, now.Add(time.Hour), now.Add(2*time.Hour)), "", "not valid yet")
	wantBuyer(t, a, tok("alice", "https://evil.example", aud, now, now.Add(time.Hour)), "", "wrong issuer")
	wantBuyer(t, a, tok("alice", iss, "another-app", now, now.Add(time.Hour)), "", "wrong audience")
	wantBuyer(t, a, tok("alice", iss, aud, now, time.Time{}), "", "exp is missing")
	wantBuyer(t, a, tok("not a buyer id!", iss, aud, now, now.Add(time.Hour)), "", "not a buyer id")
	forged := buyerauthtest.HS256([]byte("another-secret-of-more-than-thirty-two-b"), "alice", iss, aud, now, now.Add(time.Hour))
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+forged, nil), "", "signature")
	// A token signed with a key pair is not accepted when only a secret is configured.
	j := buyerauthtest.NewJWKS()
	defer j.Close()
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+j.Token("alice", iss, aud, now, now.Add(time.Hour)), nil), "", "signature")
}

// RS256 and ES256 keys from a JWKS: the keys are fetched at start; a token signed with a key
// added to the JWKS later (a rotation, new kid) is accepted once the set is fetched again,
// which the unknown kid causes; HS256 tokens are refused when no secret is configured.
func TestJWKSKeysAndRotation(t *testing.T) {
	t.Parallel()
	j := buyerauthtest.NewJWKS()
	defer j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, JWKSURL: j.URL(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Now()
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+j.Token("bob", "", "", now, now.Add(time.Hour)), nil), "bob", "")
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+j.TokenEC("carol", now.Add(time.Hour)), nil), "carol", "")
	before := j.Fetches()
	j.Rotate()
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+j.Token("dave", "", "", now, now.Add(time.Hour)), nil), "dave", "")
	if j.Fetches() <= before {
		t.Fatalf("the JWKS was fetched %d times before and %d after a token with a new kid", before, j.Fetches())
	}
	hs := buyerauthtest.HS256([]byte("a-shop-secret-of-more-than-thirty-two-bytes"), "eve", "", "", now, now.Add(time.Hour))
	wantBuyer(t, a, request("10.0.0.1:1", "Bearer "+hs, nil), "", "signature")
	// A JWKS URL that answers nothing stops the start.
	if _, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, JWKSURL: "http://127.0.0.1:1/jwks.json", Logger: quiet()}); err == nil {
		t.Fatal("an unreachable JWKS URL was accepted")
	}
}

// The header mode believes the gateway's header only from the gateway's addresses.
func TestHeaderTrustedOnlyFromTheGateway(t *testing.T) {
	t.Parallel()
	proxies, err := buyerauth.ParseCIDRs("10.1.0.0/16, 192.0.2.7, ::1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := buyerauth.New(context.Background(), buyerauth.Config{Mode: buyerauth.ModeHeader, TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	wantBuyer(t, a, request("10.1.2.3:4567", "", map[string]string{"X-Buyer-Id": "alice"}), "alice", "")
	wantBuyer(t, a, request("192.0.2.7:80", "", map[string]string{"X-Buyer-Id": "bob"}), "bob", "")
	wantBuyer(t, a, request("[::1]:80", "", map[string]string{"X-Buyer-Id": "carol"}), "carol", "")
	wantBuyer(t, a, request("203.0.113.9:4567", "", map[string]string{"X-Buyer-Id": "alice"}), "", "through the shop's gateway")
	wantBuyer(t, a, request("10.2.0.1:4567", "", map[string]string{"X-Buyer-Id": "alice"}), "", "through the shop's gateway")
	wantBuyer(t, a, request("10.1.2.3:4567", "", nil), "", "sent no buyer")
	if _, err := buyerauth.New(context.Background(), buyerauth.Config{Mode: buyerauth.ModeHeader}); err == nil {
		t.Fatal("header mode without trusted proxies was accepted")
	}
	if _, err := buyerauth.ParseCIDRs("10.0.0.0/33"); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
}

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []buyerauth.Config{
		{Mode: "oauth"},
		{Mode: buyerauth.ModeJWT},
		{Mode: buyerauth.ModeJWT, SecretFile: short},
		{Mode: buyerauth.ModeJWT, SecretFile: filepath.Join(t.TempDir(), "missing")},
	} {
		if _, err := buyerauth.New(context.Background(), cfg); err == nil {
			t.Errorf("%+v was accepted", cfg)
		}
	}
	a, err := buyerauth.New(context.Background(), buyerauth.Config{Mode: buyerauth.ModeNone})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := a.Buyer(request("1.2.3.4:5", "", map[string]string{"X-Buyer-Id": "alice"})); b != "" || err != nil {
		t.Fatalf("mode none authenticated %q, %v", b, err)
	}
}

// A buyer's wallet identities come from the same credential that names the buyer: the
// verified token's claims (a configured claim, or openid_<appid> / alipay_user_id), or the
// trusted gateway's headers. A credential without one is EINVALID saying where it should
// be; a forged token or a header from elsewhere is EUNAUTHORIZED; mode none names none.
func TestWalletIdentities(t *testing.T) {
	t.Parallel()
	secret := []byte("a-shop-secret-of-more-than-thirty-two-bytes")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: file, Logger: quiet(),
		WalletClaims: map[string]string{"openid:wxmini01": "mini_openid"}})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	tok := buyerauthtest.HS256With(secret, "alice", exp, map[string]any{"openid_wxmp01": "oMP_alice_openid_000000000000",
		"mini_openid": "oMINI_alice_openid_00000000000", "alipay_user_id": "2088000000000001"})
	r := request("10.0.0.1:1", "Bearer "+tok, nil)
	for key, want := range map[string]string{"openid:wxmp01": "oMP_alice_openid_000000000000", "openid:wxmini01": "oMINI_alice_openid_00000000000",
		buyerauth.WalletAlipayUserID: "2088000000000001"} {
		if got, err := a.Wallet(r, key); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := a.Wallet(r, "openid:wxother"); orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), "openid_wxother") {
		t.Errorf("an appid the token names no openid for: %v", err)
	}
	forged := buyerauthtest.HS256With([]byte("another-secret-of-more-than-thirty-two-b"), "alice", exp, map[string]any{"alipay_user_id": "2088000000000009"})
	if _, err := a.Wallet(request("10.0.0.1:1", "Bearer "+forged, nil), buyerauth.WalletAlipayUserID); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Errorf("a forged token's claim: %v", err)
	}

	gw, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeHeader, TrustedProxies: mustCIDRs(t, "10.1.0.0/16"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"X-Buyer-Id": "bob", buyerauth.WalletHeader("openid:wxmp01"): "oMP_bob_openid_00000000000000",
		buyerauth.WalletHeader(buyerauth.WalletAlipayUserID): "2088000000000002"}
	if got, err := gw.Wallet(request("10.1.2.3:1", "", h), "openid:wxmp01"); err != nil || got != "oMP_bob_openid_00000000000000" {
		t.Errorf("the gateway's openid header: %q, %v", got, err)
	}
	if got, err := gw.Wallet(request("10.1.2.3:1", "", h), buyerauth.WalletAlipayUserID); err != nil || got != "2088000000000002" {
		t.Errorf("the gateway's Alipay header: %q, %v", got, err)
	}
	if _, err := gw.Wallet(request("192.0.2.9:1", "", h), "openid:wxmp01"); orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
		t.Errorf("the headers from elsewhere than the gateway: %v", err)
	}
	if got := buyerauth.WalletHeader("openid:wxmp01"); got != "X-Buyer-Openid-wxmp01" {
		t.Errorf("WalletHeader = %q", got)
	}
	none, _ := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeNone})
	if got, err := none.Wallet(request("10.0.0.1:1", "", nil), "openid:wxmp01"); got != "" || err != nil {
		t.Errorf("mode none: %q, %v", got, err)
	}
}

func mustCIDRs(t *testing.T, v string) []netip.Prefix {
	t.Helper()
	p, err := buyerauth.ParseCIDRs(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A token that leaves out a claim the configuration requires is refused naming that claim:
// iss and aud when --buyer-jwt-issuer and --buyer-jwt-audience are set, exp always.
func TestAMissingClaimIsNamed(t *testing.T) {
	t.Parallel()
	secret := []byte("a-shop-secret-of-more-than-thirty-two-bytes")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://login.shop.example", "orderpay"
	a, err := buyerauth.New(context.Background(), buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: file, Issuer: iss, Audience: aud, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, c := range []struct {
		iss, aud string
		exp      time.Time
		want     string
	}{
		{"", aud, now.Add(time.Hour), "not valid: iss is missing"},
		{iss, "", now.Add(time.Hour), "not valid: aud is missing"},
		{iss, aud, time.Time{}, "not valid: exp is missing"},
		{"", "", now.Add(time.Hour), "not valid: aud and iss are missing"},
		{"", "", time.Time{}, "not valid: exp, aud and iss are missing"},
	} {
		r := request("10.0.0.1:1", "Bearer "+buyerauthtest.HS256(secret, "alice", c.iss, c.aud, now.Add(-time.Minute), c.exp), nil)
		wantBuyer(t, a, r, "", c.want)
		if _, err := a.Wallet(r, buyerauth.WalletAlipayUserID); !strings.Contains(orderpay.ErrorMessage(err), c.want) {
			t.Errorf("Wallet: %v; want it to say %q", err, c.want)
		}
	}
}

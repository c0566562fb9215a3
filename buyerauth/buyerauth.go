// Package buyerauth says who the buyer of a request is: from a bearer JWT the shop's login
// issued (verified with github.com/golang-jwt/jwt/v5, keys from a shared secret or a JWKS
// URL through github.com/MicahParks/keyfunc/v3, the JWKS fetched within bounds by jwksKeys),
// from a header the shop's gateway sets
// (trusted only from the gateway's addresses), or, for the demo alone, from nobody.
package buyerauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"orderpay"
)

// Modes.
const (
	ModeNone   = "none"   // the demo: the buyer is whoever the request says (buyer_id)
	ModeJWT    = "jwt"    // Authorization: Bearer <JWT>; the buyer is its sub
	ModeHeader = "header" // a header set by the shop's gateway, from trusted addresses only
)

// Defaults.
const (
	// HeaderDefault is the header a gateway names the buyer in.
	HeaderDefault = "X-Buyer-Id"
	// JWKSRefreshDefault is how often the JWKS is fetched again, so that a key the login
	// takes out of it is no longer trusted after at most that; a token signed with a key it
	// does not hold yet (a rotation) fetches it at once, at most every JWKSUnknownKIDEvery.
	// serve's --buyer-jwks-refresh takes JWKSRefreshMin to JWKSRefreshMax.
	JWKSRefreshDefault  = 5 * time.Minute
	JWKSRefreshMin      = 30 * time.Second
	JWKSRefreshMax      = time.Hour
	JWKSUnknownKIDEvery = 10 * time.Second
	// LeewayDefault tolerates clocks a little apart on exp and nbf.
	LeewayDefault = 30 * time.Second
)

// Config configures an Authenticator. Zero fields take the defaults above.
type Config struct {
	Mode string // none, jwt or header. Required.

	// JWT: at least one of SecretFile (HS256) and JWKSURL (RS256, ES256).
	SecretFile string
	JWKSURL    string
	Issuer     string // checked when set
	Audience   string // checked when set
	Leeway     time.Duration
	// JWKSRefresh is how often the JWKS is fetched. Defaults to JWKSRefreshDefault.
	JWKSRefresh time.Duration
	// HTTPClient fetches the JWKS, each fetch within JWKSFetchTimeout. Defaults to a
	// plain client.
	HTTPClient *http.Client

	// Header: the header and the gateway addresses (CIDRs) it is trusted from.
	Header         string
	TrustedProxies []netip.Prefix

	// WalletClaims name the JWT claim that holds each of the buyer's wallet identities, by
	// its key (WalletKey): "openid:<appid>" for the buyer's openid for a WeChat appid,
	// "alipay_user_id" for their Alipay user id. A key left out is read from the claim of
	// the key's own name with ":" as "_" (openid_<appid>, alipay_user_id).
	WalletClaims map[string]string

	Clock  orderpay.Clock
	Logger *slog.Logger
}

// Authenticator tells the buyer of a request.
type Authenticator struct {
	mode     string
	claims   map[string]string // WalletClaims
	parser   *jwt.Parser
	secret   []byte
	jwks     keyfunc.Keyfunc
	header   string
	trusted  []netip.Prefix
	stopJWKS context.CancelFunc
	// verified remembers the tokens verified lately; now and leeway are the parser's.
	verified verified
	now      func() time.Time
	leeway   time.Duration
	// issuer and audience are the iss and aud a token must have, if set (Config).
	issuer, audience string
}

// New returns an Authenticator for cfg. With a JWKS URL it fetches the key set once now, so
// that a wrong URL is seen at start, and keeps it fresh in the background until Close.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	a := &Authenticator{mode: cfg.Mode, claims: cfg.WalletClaims}
	if cfg.Clock == nil {
		cfg.Clock = orderpay.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.Mode {
	case ModeNone:
		return a, nil
	case ModeHeader:
		a.header = cfg.Header
		if a.header == "" {
			a.header = HeaderDefault
		}
		if len(cfg.TrustedProxies) == 0 {
			return nil, errors.New("buyer auth header: name the gateway's addresses (--trusted-proxies): the header is trusted from nowhere else")
		}
		a.trusted = cfg.TrustedProxies
		return a, nil
	case ModeJWT:
	default:
		return nil, fmt.Errorf("buyer auth must be none, jwt or header, not %q", cfg.Mode)
	}
	var methods []string
	if cfg.SecretFile != "" {
		b, err := os.ReadFile(cfg.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("buyer JWT secret file: %w", err)
		}
		a.secret = []byte(strings.TrimSpace(string(b)))
		// RFC 7518 §3.2: an HS256 key of at least the hash's size.
		if len(a.secret) < 32 {
			return nil, errors.New("buyer JWT secret file: the HS256 secret must be at least 32 bytes")
		}
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if cfg.JWKSURL != "" {
		if err := a.openJWKS(ctx, cfg); err != nil {
			return nil, err
		}
		methods = append(methods, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())
	}
	if len(methods) == 0 {
		return nil, errors.New("buyer auth jwt needs --buyer-jwt-secret-file (HS256) or --buyer-jwks-url (RS256, ES256), or both")
	}
	leeway := cfg.Leeway
	if leeway == 0 {
		leeway = LeewayDefault
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithExpirationRequired(), jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(cfg.Clock.Now)}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	a.parser = jwt.NewParser(opts...)
	a.now, a.leeway = cfg.Clock.Now, leeway
	a.issuer, a.audience = cfg.Issuer, cfg.Audience
	return a, nil
}

// openJWKS fetches the JWKS once now, its error returned so that a wrong URL stops the
// start, and keeps it fresh in the background (jwksKeys).
func (a *Authenticator) openJWKS(ctx context.Context, cfg Config) error {
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	refresh := cfg.JWKSRefresh
	if refresh <= 0 {
		refresh = JWKSRefreshDefault
	}
	jwksCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	keys := &jwksKeys{MemoryJWKSet: jwkset.NewMemoryStorage(), url: cfg.JWKSURL, client: client, log: cfg.Logger, now: cfg.Clock.Now,
		unknown: rate.NewLimiter(rate.Every(JWKSUnknownKIDEvery), 1), ctx: jwksCtx,
		// A verified token is remembered (verified); one a key taken out of the set signed
		// must not outlive the fetch that took it out.
		changed: a.verified.clear}
	if err := keys.fetch(); err != nil {
		stop()
		return fmt.Errorf("buyer JWKS %s: %w", cfg.JWKSURL, err)
	}
	k, err := keyfunc.New(keyfunc.Options{Ctx: jwksCtx, Storage: keys})
	if err != nil {
		stop()
		return fmt.Errorf("buyer JWKS %s: %w", cfg.JWKSURL, err)
	}
	go keys.refreshEvery(refresh)
	a.jwks, a.stopJWKS = k, stop
	return nil
}

// Close stops the JWKS refresh.
func (a *Authenticator) Close() {
	if a.stopJWKS != nil {
		a.stopJWKS()
	}
}

// Mode is the configured mode.
func (a *Authenticator) Mode() string { return a.mode }

// buyerID is what a buyer id may be (orderpay's rule for ids).
var buyerID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Buyer returns the authenticated buyer of r: "" in mode none (the request names its buyer
// itself), or an EUNAUTHORIZED error for a missing, malformed, expired or wrongly signed
// token, or a header from an address that is not a trusted gateway. The error never
// carries the token.
func (a *Authenticator) Buyer(r *http.Request) (string, error) {
	switch a.mode {
	case ModeNone:
		return "", nil
	case ModeHeader:
		return a.headerBuyer(r)
	}
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "buyer routes need Authorization: Bearer <token from the shop's login>")
	}
	if len(raw) > 8<<10 {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "the bearer token is too long")
	}
	now := a.now()
	key := keyOf(raw)
	if sub, ok := a.verified.get(key, now); ok {
		return sub, nil
	}
	gen := a.verified.generation()
	claims := &jwt.RegisteredClaims{}
	if _, err := a.parser.ParseWithClaims(raw, claims, a.keyFor(r.Context())); err != nil {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "the bearer token is not valid: %s", a.tokenProblem(err, claims))
	}
	if !buyerID.MatchString(claims.Subject) {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "the bearer token's sub is not a buyer id (1-64 letters, digits, '.', '_' or '-')")
	}
	var nbf, exp time.Time
	if claims.NotBefore != nil {
		nbf = claims.NotBefore.Time
	}
	if claims.ExpiresAt != nil {
		exp = claims.ExpiresAt.Time
	}
	a.verified.putAt(gen, key, claims.Subject, now, nbf, exp, a.leeway)
	return claims.Subject, nil
}

// Wallet keys name a buyer's identities at the wallets, for the pay methods that pay for one
// wallet user (orderpay.PayerNeeded).
const (
	// WalletOpenIDPrefix + an appid: the buyer's openid for that WeChat appid.
	WalletOpenIDPrefix = "openid:"
	// WalletAlipayUserID: the buyer's Alipay user id (2088…).
	WalletAlipayUserID = "alipay_user_id"
	// WalletHeaderPrefix + the key with ":" as "-": the header the shop's gateway names
	// them in (X-Buyer-Openid-<appid>, X-Buyer-Alipay_user_id is X-Buyer-Alipay-User-Id).
	WalletHeaderPrefix = "X-Buyer-"
)

// walletID is what a wallet identity may be: an openid (28 letters, digits, - or _) or an
// Alipay user id (16 digits), with room for other shapes, but nothing else.
var walletID = regexp.MustCompile(`^[A-Za-z0-9_-]{6,64}$`)

// WalletHeader is the header the shop's gateway names the wallet identity key in.
func WalletHeader(key string) string {
	if key == WalletAlipayUserID {
		return WalletHeaderPrefix + "Alipay-User-Id"
	}
	return WalletHeaderPrefix + "Openid-" + strings.TrimPrefix(key, WalletOpenIDPrefix)
}

// Wallet returns the authenticated buyer's wallet identity key (WalletOpenIDPrefix + an
// appid, or WalletAlipayUserID) from the same credential that names the buyer: the
// verified token's claim (WalletClaims), or the trusted gateway's header (WalletHeader).
// In mode none it is "" (the demo's request names it itself). A credential that names no
// such identity is EINVALID, saying where it should be; one that does not authenticate is
// EUNAUTHORIZED, as for Buyer.
func (a *Authenticator) Wallet(r *http.Request, key string) (string, error) {
	var id, where string
	switch a.mode {
	case ModeNone:
		return "", nil
	case ModeHeader:
		if _, err := a.headerBuyer(r); err != nil {
			return "", err
		}
		where = "the gateway's header " + WalletHeader(key)
		id = r.Header.Get(WalletHeader(key))
	default:
		raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if raw == "" || len(raw) > 8<<10 {
			return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "buyer routes need Authorization: Bearer <token from the shop's login>")
		}
		claims := jwt.MapClaims{}
		if _, err := a.parser.ParseWithClaims(raw, claims, a.keyFor(r.Context())); err != nil {
			return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "the bearer token is not valid: %s", a.tokenProblem(err, claims))
		}
		name := a.claims[key]
		if name == "" {
			name = strings.ReplaceAll(key, ":", "_")
		}
		where = "the token's claim " + name
		id, _ = claims[name].(string)
	}
	if !walletID.MatchString(id) {
		return "", orderpay.Errorf(orderpay.EINVALID, "this way of paying needs the buyer's %s, from %s", key, where)
	}
	return id, nil
}

// keyFor picks the verification key by the token's algorithm: the secret for HS256, the
// JWKS (by kid) for the others, a fetch for an unknown kid waited for no longer than ctx.
// The parser has already refused any algorithm not configured.
func (a *Authenticator) keyFor(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if _, hmac := t.Method.(*jwt.SigningMethodHMAC); hmac {
			return a.secret, nil
		}
		return a.jwks.KeyfuncCtx(ctx)(t)
	}
}

// tokenProblem names what is wrong with a token in words, without the token; claims are
// the token's, as the parser read them.
func (a *Authenticator) tokenProblem(err error, claims jwt.Claims) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// The parser says a required claim is missing, not which: those it requires are
		// exp always, aud and iss when configured (in the parser's order).
		var missing []string
		if exp, _ := claims.GetExpirationTime(); exp == nil {
			missing = append(missing, "exp")
		}
		if aud, _ := claims.GetAudience(); a.audience != "" && len(aud) == 0 {
			missing = append(missing, "aud")
		}
		if iss, _ := claims.GetIssuer(); a.issuer != "" && iss == "" {
			missing = append(missing, "iss")
		}
		switch len(missing) {
		case 0:
			return "a required claim is missing"
		case 1:
			return missing[0] + " is missing"
		}
		return strings.Join(missing[:len(missing)-1], ", ") + " and " + missing[len(missing)-1] + " are missing"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the signature does not verify"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	}
	return "refused"
}

func (a *Authenticator) headerBuyer(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !orderpay.InNetworks(a.trusted, host) {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "requests must come through the shop's gateway")
	}
	id := r.Header.Get(a.header)
	if !buyerID.MatchString(id) {
		return "", orderpay.Errorf(orderpay.EUNAUTHORIZED, "the gateway sent no buyer (%s)", a.header)
	}
	return id, nil
}

// ParseCIDRs reads the proxies' networks and addresses (orderpay.ParseNetworks).
func ParseCIDRs(v string) ([]netip.Prefix, error) { return orderpay.ParseNetworks(v) }

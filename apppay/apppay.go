// Package apppay lets business systems other than the shop's order system take payments
// through the payment center (docs/payments-api.md): membership top-ups, gift cards, service
// fees, a second shop. Each is an app with its own API keys, channels and signed webhooks.
//
// An app payment is a payment-center payment whose order number is an app key
// (orderpay.AppOrderKeyPrefix and 20 digits, never a shop's order number), so that every
// guarantee of the payment center holds for it unchanged: active queries and their safety
// net, query-then-close, automatic refunds of late and duplicate payments, refunds that
// always end, reconciliation. This package plays the order system's part for those
// payments: it accepts a success while the app payment is open, and refuses one that
// arrives after it was closed (by the app, or at its deadline), which makes the payment
// center refund it. Its own events (app.*) carry the results to the app's webhooks.
package apppay

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"orderpay"
	"orderpay/webhook"
)

// SubjectForbidden are the characters a payment's subject may not hold: Alipay refuses a
// trade whose subject has any of them.
const SubjectForbidden = "/=&"

// Bounds of what an app may send or hold.
const (
	MaxNameLen        = 128
	MaxWebhookURLs    = 8
	MaxWebhookURLLen  = 2048
	MaxNumberLen      = 64 // merchant_order_no, refund_no, Idempotency-Key
	MaxSubjectLen     = 256
	MaxReasonLen      = 256
	MaxAmount         = 10_000_000_000 // fen: 100 million yuan
	MinExpiryDefault  = time.Minute
	MaxExpiry         = 15 * 24 * time.Hour
	OverlapDefault    = 24 * time.Hour
	MaxOverlap        = 30 * 24 * time.Hour
	ListLimitDefault  = 50
	ListLimitMax      = 200
	keyPrefix         = "opk_"
	webhookSecretHead = "whsec_"
)

// Payments is what the apps need of the payment center (*payment.Service is one).
type Payments interface {
	orderpay.PaymentCenter
}

// Config configures a Service.
type Config struct {
	Store    orderpay.AppStore // required
	Payments Payments          // required
	// Channels are the channels configured; an app may use a subset. Required.
	Channels []string
	// WebhookAllowNetworks are the internal networks an app's webhook URL may name (by
	// address) all the same (webhook.CheckURL). Defaults to none.
	WebhookAllowNetworks []netip.Prefix
	// Orders pays the shop's orders at a till (PosPay with an order_no). Optional: without
	// it a till takes walk-in sales only.
	Orders PosOrders
	// OutboxWritten is called after a commit that wrote outbox messages; RefundCreated after
	// one that created a channel refund. Optional.
	OutboxWritten func()
	RefundCreated func()
	// MinExpiry is the shortest deadline a payment may have. Defaults to MinExpiryDefault.
	MinExpiry time.Duration
	// PollWait bounds how long a read of an open payment waits for its queries. Defaults
	// to 1 s.
	PollWait time.Duration
	Clock    orderpay.Clock
	Logger   *slog.Logger
	// NewNumber makes an app payment's or an app refund's number: prefix, then digits
	// unique among the numbers made with it. Defaults to the time to the second and 6
	// random digits; the explorer numbers in order, so that a case replays the same.
	NewNumber func(prefix string, now time.Time) string
}

// Service is the apps domain.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("apppay: Config.Store is required")
	case cfg.Payments == nil:
		return nil, errors.New("apppay: Config.Payments is required")
	case len(cfg.Channels) == 0:
		return nil, errors.New("apppay: Config.Channels is required")
	}
	if cfg.OutboxWritten == nil {
		cfg.OutboxWritten = func() {}
	}
	if cfg.RefundCreated == nil {
		cfg.RefundCreated = func() {}
	}
	cfg.PollWait = cmp.Or(cfg.PollWait, time.Second)
	cfg.MinExpiry = cmp.Or(cfg.MinExpiry, MinExpiryDefault)
	cfg.Clock = cmp.Or[orderpay.Clock](cfg.Clock, orderpay.SystemClock{})
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.NewNumber == nil {
		cfg.NewNumber = newNumber
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "apps")}, nil
}

// ---- apps and keys ----

// CreateAppRequest is an admin's new app.
type CreateAppRequest struct {
	Name        string
	WebhookURLs []string
	Channels    []string
}

// KeyHash is the stored form of an API key: hex SHA-256 (the key has 256 random bits, so
// a plain hash is enough).
func KeyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// KeyID is the public part of an API key ("opk_<key id>_<secret>"), by which its stored
// hash is found; ok is false if key does not have that form.
func KeyID(key string) (id string, ok bool) {
	rest, ok1 := strings.CutPrefix(key, keyPrefix)
	id, _, ok2 := strings.Cut(rest, "_")
	return id, ok1 && ok2 && len(id) == 16 && len(key) <= 128
}

// newKey makes a key of appID: "opk_<key id>_<secret>"; only its hash is stored.
func newKey(appID string, now time.Time) (string, *orderpay.AppKey) {
	id := randomHex(8)
	key := keyPrefix + id + "_" + randomToken()
	return key, &orderpay.AppKey{ID: id, AppID: appID, Hash: KeyHash(key), CreatedAt: now}
}

// CreateApp registers an app and makes its first API key and its webhook secret, both
// returned only now. actor names the operator ("operator:<name>").
func (s *Service) CreateApp(ctx context.Context, req CreateAppRequest, actor string) (*orderpay.App, string, error) {
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > MaxNameLen {
		return nil, "", orderpay.Errorf(orderpay.EINVALID, "name is required (at most %d bytes)", MaxNameLen)
	}
	if err := checkWebhookURLs(req.WebhookURLs, s.cfg.WebhookAllowNetworks); err != nil {
		return nil, "", err
	}
	if len(req.Channels) == 0 {
		return nil, "", orderpay.Errorf(orderpay.EINVALID, "channels: name at least one of %s", strings.Join(s.cfg.Channels, ", "))
	}
	var channels []string
	for _, c := range req.Channels {
		if !slices.Contains(s.cfg.Channels, c) {
			return nil, "", orderpay.Errorf(orderpay.EINVALID, "channels: %q is not one of %s", c, strings.Join(s.cfg.Channels, ", "))
		}
		if !slices.Contains(channels, c) {
			channels = append(channels, c)
		}
	}
	now := orderpay.Now(s.cfg.Clock)
	a := &orderpay.App{ID: "app_" + randomHex(8), Name: req.Name, WebhookURLs: slices.Clone(req.WebhookURLs),
		WebhookSecret: webhookSecretHead + randomToken(), Channels: channels, CreatedAt: now, UpdatedAt: now}
	if a.WebhookURLs == nil {
		a.WebhookURLs = []string{}
	}
	key, k := newKey(a.ID, now)
	err := s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
		if err := tx.CreateApp(ctx, a); err != nil {
			return err
		}
		return tx.CreateAppKey(ctx, k)
	})
	if err != nil {
		return nil, "", err
	}
	s.log.Info("app created", "app_id", a.ID, "name", a.Name, "key_id", k.ID, "webhooks", len(a.WebhookURLs), "actor", actor)
	return a, key, nil
}

func checkWebhookURLs(urls []string, allow []netip.Prefix) error {
	if len(urls) > MaxWebhookURLs {
		return orderpay.Errorf(orderpay.EINVALID, "webhook_urls: at most %d", MaxWebhookURLs)
	}
	seen := map[string]bool{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if len(raw) > MaxWebhookURLLen || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return orderpay.Errorf(orderpay.EINVALID, "webhook_urls: each must be an http(s) URL of at most %d bytes", MaxWebhookURLLen)
		}
		if err := webhook.CheckURL(raw, allow); err != nil {
			return orderpay.Errorf(orderpay.EINVALID, "webhook_urls: %s", orderpay.ErrorMessage(err))
		}
		name := u.Scheme + "://" + u.Host + u.Path
		if seen[name] {
			return orderpay.Errorf(orderpay.EINVALID, "webhook_urls: %s is given twice", name)
		}
		seen[name] = true
	}
	return nil
}

// AppView is an app with its keys (never their hashes or the webhook secret).
type AppView struct {
	orderpay.App
	Keys []orderpay.AppKey
}

// App returns one app with its keys.
func (s *Service) App(ctx context.Context, id string) (*AppView, error) {
	a, err := s.cfg.Store.App(ctx, id)
	if err != nil {
		return nil, err
	}
	keys, err := s.cfg.Store.AppKeys(ctx, id)
	if err != nil {
		return nil, err
	}
	return &AppView{App: *a, Keys: keys}, nil
}

// Apps lists every app.
func (s *Service) Apps(ctx context.Context) ([]orderpay.App, error) { return s.cfg.Store.Apps(ctx) }

// RotateKey makes a new key of the app, returned only now, and ends every other key that
// has no end yet at now + overlap (0: OverlapDefault), which it returns: both are accepted
// until then.
func (s *Service) RotateKey(ctx context.Context, appID string, overlap time.Duration, actor string) (string, *orderpay.AppKey, time.Time, error) {
	if overlap == 0 {
		overlap = OverlapDefault
	}
	if overlap < 0 || overlap > MaxOverlap {
		return "", nil, time.Time{}, orderpay.Errorf(orderpay.EINVALID, "overlap_seconds: 1 to %d", int64(MaxOverlap/time.Second))
	}
	now := orderpay.Now(s.cfg.Clock)
	key, k := newKey(appID, now)
	var ended int64
	err := s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
		if _, err := tx.App(ctx, appID); err != nil {
			return err
		}
		if err := tx.CreateAppKey(ctx, k); err != nil {
			return err
		}
		var err error
		ended, err = tx.ExpireAppKeys(ctx, appID, k.ID, now.Add(overlap), now)
		return err
	})
	if err != nil {
		return "", nil, time.Time{}, err
	}
	s.log.Info("app key rotated", "app_id", appID, "key_id", k.ID, "old_keys_end_at", now.Add(overlap), "old_keys", ended, "actor", actor)
	return key, k, now.Add(overlap), nil
}

// RevokeKey revokes one key of the app at once.
func (s *Service) RevokeKey(ctx context.Context, appID, keyID, actor string) (*orderpay.AppKey, error) {
	err := s.cfg.Store.InAppTx(ctx, func(tx orderpay.AppTx) error {
		return tx.RevokeAppKey(ctx, appID, keyID, orderpay.Now(s.cfg.Clock))
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("app key revoked", "app_id", appID, "key_id", keyID, "actor", actor)
	return s.cfg.Store.AppKey(ctx, keyID)
}

// errBadKey is every authentication failure's answer: which part was wrong is not said.
var errBadKey = orderpay.Errorf(orderpay.EUNAUTHORIZED, "the payments API needs Authorization: Bearer <a valid app API key>")

// Authenticate returns the app of an API key that is valid now; EUNAUTHORIZED otherwise.
// The stored hash is compared in constant time.
func (s *Service) Authenticate(ctx context.Context, key string) (*orderpay.App, error) {
	id, ok := KeyID(key)
	if !ok {
		return nil, errBadKey
	}
	k, err := s.cfg.Store.AppKey(ctx, id)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil, errBadKey
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(KeyHash(key)), []byte(k.Hash)) != 1 || !k.Valid(orderpay.Now(s.cfg.Clock)) {
		return nil, errBadKey
	}
	return s.cfg.Store.App(ctx, k.AppID)
}

// ---- numbers ----

// newNumber is prefix, the time to the second in China, and 6 random digits: 22
// characters, in the order of their making (to the second), which fits both channels'
// rules as a trade number with "P" before and "A01" after it.
func newNumber(prefix string, now time.Time) string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return fmt.Sprintf("%s%s%06d", prefix, now.In(orderpay.ChinaTime).Format("20060102150405"), n.Int64())
}

func requestHash(parts ...any) string {
	b, _ := json.Marshal(parts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// limit is a listing's bound.
func limit(n int) int {
	if n <= 0 {
		return ListLimitDefault
	}
	return min(n, ListLimitMax)
}

package orderpay

import (
	"context"
	"strings"
	"time"
)

// Business apps (docs/payments-api.md): the payment center serves other business systems
// than the shop's order system, each an app with its own API keys, webhooks and payments.
// An app's payment is a payment-center payment whose order number is an app key
// (AppOrderKeyPrefix and 20 digits), which no shop order number (all digits) can be; the
// apps domain (package apppay) plays the order system's part for those payments.

// AppOrderKeyPrefix starts the order number of every app payment in the payment center.
const AppOrderKeyPrefix = "AP"

// IsAppOrderKey reports whether a payment-center order number is an app payment's.
func IsAppOrderKey(orderNo string) bool { return strings.HasPrefix(orderNo, AppOrderKeyPrefix) }

// App is a business system the payment center serves.
type App struct {
	ID          string
	Name        string
	WebhookURLs []string
	// WebhookSecret signs the app's webhooks. Never logged or shown after the app's creation.
	WebhookSecret string
	Channels      []string // the channels the app may pay through
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// AppKey is one API key of an app. Only its SHA-256 is stored; the key itself is shown
// once, when it is made. A key is valid until ExpiresAt (zero: no end, until a rotation
// sets one) and unless revoked.
type AppKey struct {
	ID        string // the key's public part, also in the key itself
	AppID     string
	Hash      string // hex SHA-256 of the whole key
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time
}

// Valid reports whether the key is accepted at t.
func (k *AppKey) Valid(t time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || t.Before(k.ExpiresAt))
}

// AppPaymentStatus is the state of an app payment as the app sees it.
type AppPaymentStatus string

const (
	// AppPaymentOpen: payable until its deadline; the app's close or the deadline ends it.
	AppPaymentOpen AppPaymentStatus = "OPEN"
	// AppPaymentSuccess: paid, and the app keeps the money (less its refunds).
	AppPaymentSuccess AppPaymentStatus = "SUCCESS"
	// AppPaymentClosed: closed by the app or at its deadline, the channel having confirmed
	// nothing was paid; a payment that still arrives is refunded.
	AppPaymentClosed AppPaymentStatus = "CLOSED"
)

// AppPaymentEvent is something that happens to an app payment.
type AppPaymentEvent string

const (
	AppPaymentEventSucceed AppPaymentEvent = "succeed" // the payment center's success, accepted
	AppPaymentEventClose   AppPaymentEvent = "close"   // closed by the app, or at the deadline
)

// AppPaymentMachine is the app payment's transition table.
var AppPaymentMachine = NewMachine("app payment", []Transition[AppPaymentStatus, AppPaymentEvent]{
	{AppPaymentOpen, AppPaymentEventSucceed, AppPaymentSuccess},
	{AppPaymentOpen, AppPaymentEventClose, AppPaymentClosed},
})

// AppPayment is an app's payment: what the app asked for, under its own order number, and
// the payment-center payment that collects it.
type AppPayment struct {
	PaymentNo       string // the payment center's payment number (P + OrderKey)
	OrderKey        string // the payment center's order number of it
	AppID           string
	MerchantOrderNo string // the app's own number, unique per app
	Amount          int64
	Subject         string
	Channel         string
	ExpiresAt       time.Time
	Status          AppPaymentStatus
	// RequestHash identifies the create request (SHA-256 of its canonical form, hex), and
	// IdempotencyKey is its Idempotency-Key header, if any.
	RequestHash    string
	IdempotencyKey string
	// RefundReserved is the sum of the app's refunds of it, each counted when asked: never
	// more than Amount (a conditional update).
	RefundReserved int64
	CloseReason    string // "closed" (by the app) or "expired"
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// AppPaymentChange is one conditional transition of an app payment.
type AppPaymentChange struct {
	PaymentNo string
	From, To  AppPaymentStatus
	Event     AppPaymentEvent
	At        time.Time
	Actor     string
	Reason    string
}

// AppRefund is an app's refund of one of its payments: the app's refund number, and the
// channel refund that sends the money (OutRefundNo).
type AppRefund struct {
	OutRefundNo string
	AppID       string
	RefundNo    string // the app's own number, unique per app
	PaymentNo   string
	Amount      int64
	Reason      string
	RequestHash string
	CreatedAt   time.Time
}

// RefundReasonApp is the channel refund reason of a refund an app asked for.
const RefundReasonApp = "app_refund"

// AppFilter narrows a listing of an app's payments or refunds.
type AppFilter struct {
	PaymentNo string // refunds: of this payment only
	Before    string // page: numbers before this one (newest first)
}

// AppReader reads the apps' tables. Every single-entity method returns ENOTFOUND for a
// missing one.
type AppReader interface {
	App(ctx context.Context, id string) (*App, error)
	Apps(ctx context.Context) ([]App, error)
	AppKey(ctx context.Context, id string) (*AppKey, error)
	AppKeys(ctx context.Context, appID string) ([]AppKey, error) // oldest first
	AppPayment(ctx context.Context, paymentNo string) (*AppPayment, error)
	AppPaymentByMerchantNo(ctx context.Context, appID, merchantOrderNo string) (*AppPayment, error)
	AppPaymentByIdempotencyKey(ctx context.Context, appID, key string) (*AppPayment, error)
	// AppPayments lists an app's payments, newest first.
	AppPayments(ctx context.Context, appID string, f AppFilter, limit int) ([]AppPayment, error)
	// DueAppPayments: OPEN app payments whose deadline is before t, oldest first.
	DueAppPayments(ctx context.Context, before time.Time, limit int) ([]AppPayment, error)
	AppRefund(ctx context.Context, outRefundNo string) (*AppRefund, error)
	AppRefundByNo(ctx context.Context, appID, refundNo string) (*AppRefund, error)
	// AppRefunds lists an app's refunds, newest first.
	AppRefunds(ctx context.Context, appID string, f AppFilter, limit int) ([]AppRefund, error)
}

// AppTx is a transaction over the apps' tables and everything else (orderpay.Tx).
type AppTx interface {
	Tx
	AppReader
	CreateApp(ctx context.Context, a *App) error       // ECONFLICT if the id exists
	CreateAppKey(ctx context.Context, k *AppKey) error // ECONFLICT if the id or hash exists
	// ExpireAppKeys sets the end of every key of the app that has none and is not revoked,
	// but except, to until; it returns how many it changed.
	ExpireAppKeys(ctx context.Context, appID, except string, until, at time.Time) (int64, error)
	// RevokeAppKey revokes a key of the app at at, if it is not revoked yet (ECONFLICT
	// otherwise, ENOTFOUND if the app has no such key).
	RevokeAppKey(ctx context.Context, appID, keyID string, at time.Time) error
	// CreateAppPayment inserts p; ECONFLICT if its number, order key, merchant order number
	// or idempotency key is taken.
	CreateAppPayment(ctx context.Context, p *AppPayment) error
	// TransitionAppPayment applies c only if the payment is still c.From (ECONFLICT
	// otherwise), with its history row.
	TransitionAppPayment(ctx context.Context, c AppPaymentChange, closeReason string) error
	// ReserveAppRefund adds amount to a SUCCESS payment's RefundReserved only if the total
	// stays within its Amount: one conditional update, so two refunds racing can never
	// exceed it (ECONFLICT otherwise).
	ReserveAppRefund(ctx context.Context, paymentNo string, amount int64, at time.Time) error
	// CreateAppRefund inserts r; ECONFLICT if its number or the app's refund number is taken.
	CreateAppRefund(ctx context.Context, r *AppRefund) error
}

// AppStore is the store of the apps: its reads, and transactions that reach every table.
type AppStore interface {
	Store
	AppReader
	InAppTx(ctx context.Context, fn func(tx AppTx) error) error
}

// Subjects of the apps domain's events: what each app's webhooks carry (their type is the
// subject without "app.").
const (
	SubjectAppPaymentSucceeded = "app.payment.succeeded"
	SubjectAppPaymentClosed    = "app.payment.closed"
	SubjectAppRefundSucceeded  = "app.refund.succeeded"
)

// AppPaymentPayload is the body of app.payment.succeeded and app.payment.closed.
type AppPaymentPayload struct {
	AppID           string           `json:"app_id"`
	PaymentNo       string           `json:"payment_no"`
	MerchantOrderNo string           `json:"merchant_order_no"`
	Amount          int64            `json:"amount"`
	Channel         string           `json:"channel"`
	Status          AppPaymentStatus `json:"status"`
	OutTradeNo      string           `json:"out_trade_no,omitempty"`
	TradeNo         string           `json:"trade_no,omitempty"`
	PaidAt          *time.Time       `json:"paid_at,omitempty"`
	Reason          string           `json:"reason,omitempty"` // closed: "closed" or "expired"
	At              time.Time        `json:"at"`
}

// AppRefundPayload is the body of app.refund.succeeded: the app's own refunds, and the
// payment center's automatic ones of the app's payments (late or duplicate payments, with no
// RefundNo).
type AppRefundPayload struct {
	AppID           string              `json:"app_id"`
	PaymentNo       string              `json:"payment_no"`
	MerchantOrderNo string              `json:"merchant_order_no"`
	RefundNo        string              `json:"refund_no,omitempty"`
	OutRefundNo     string              `json:"out_refund_no"`
	OutTradeNo      string              `json:"out_trade_no"`
	Amount          int64               `json:"amount"`
	Reason          string              `json:"reason"` // the app's own text, or a RefundReason… of an automatic one
	Status          ChannelRefundStatus `json:"status"`
	At              time.Time           `json:"at"`
}

// EntityAppPayment names an app payment's history.
const EntityAppPayment = "app_payment"

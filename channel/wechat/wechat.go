// Package wechat is the WeChat Pay API v3 channel adapter, built on the official SDK
// github.com/wechatpay-apiv3/wechatpay-go: Native (a QR code), JSAPI (an official account's
// page), mini program, H5 (a phone's browser) and App payments (methods.go).
//
// It maps every answer and notification to exactly one orderpay.Outcome following
// docs/channels.md §C: anything that is not a verified, definite answer is
// OutcomeUnknown, so the payment stays PAYING and is queried later. Answers are verified by
// the SDK's own validator (signature, timestamp within 5 minutes of this machine's clock);
// an unsigned or badly signed 2xx is never believed. The signature is checked with the
// WeChat Pay public key (ModePublicKey) or with the platform certificate the answer names,
// from the list this adapter downloads and keeps current itself (ModePlatformCertificate,
// certificates.go): a merchant is in exactly one mode (§E).
//
// The SDK does not verify error answers (4xx, 5xx), so an error is never taken for a
// payment, a close or a refund. A 4xx is taken at its word only where §C says the call
// was refused (prepay: Rejected; refund: Rejected, RefundRetry or RefundAbnormal, see
// Refund); a refused query or close says nothing and is Unknown. Because that word is
// unverified, a caller that sees a refund Rejected or RefundAbnormal must not send the same
// money back under a new out_refund_no before a query has shown the first number did not
// refund.
package wechat

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/consts"
	"github.com/wechatpay-apiv3/wechatpay-go/core/notify"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/app"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/h5"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/jsapi"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
	"github.com/wechatpay-apiv3/wechatpay-go/services/refunddomestic"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"orderpay"
)

// Defaults applied by New.
const (
	// DefaultBaseURL is WeChat Pay's API host, the one the SDK calls.
	DefaultBaseURL = consts.WechatPayAPIServer
	// DefaultTimeout bounds one call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// IdleConnsPerHost is how many connections to the API host are kept open between calls
	// when Config.HTTPClient has no transport of its own. Go's default keeps 2, so under
	// load most calls would dial and shake hands over TLS again.
	IdleConnsPerHost = 64
)

const (
	// maxResponse bounds an answer body; real ones are a few kilobytes.
	maxResponse = 1 << 20
	// maxDescription is the longest description WeChat takes, in characters.
	maxDescription = 127
	// maxReason is the longest refund reason WeChat takes, in characters.
	maxReason = 80
	// currency is the only one Native orders use.
	currency = "CNY"
)

// WeChat Pay trade states (§B1) and refund statuses.
const (
	stateSuccess    = "SUCCESS"
	stateRefund     = "REFUND"
	stateNotPay     = "NOTPAY"
	stateClosed     = "CLOSED"
	refundSuccess   = "SUCCESS"
	refundPending   = "PROCESSING"
	refundClosed    = "CLOSED"
	refundAbnormal  = "ABNORMAL"
	transactionType = "transaction" // resource.original_type of a payment notification
	refundType      = "refund"      // resource.original_type of a refund notification
)

// Mode is how the adapter verifies WeChat Pay's answers and notifications. A merchant is
// in exactly one mode (docs/channels.md §E).
type Mode string

const (
	// ModePublicKey ("pubkey", as the channels file names it) verifies with the WeChat Pay
	// public key (pub_key.pem) named PUB_KEY_ID_…: since late 2024 the only mode new
	// merchants get.
	ModePublicKey Mode = "pubkey"
	// ModePlatformCertificate ("certificate") verifies with the platform certificates
	// downloaded from GET /v3/certificates, decrypted with the APIv3 key, and kept current
	// through rotations.
	ModePlatformCertificate Mode = "certificate"
)

// cst is China Standard Time, the zone WeChat writes its times in. A fixed zone, so that
// nothing depends on the machine's tz database.
var cst = time.FixedZone("CST", 8*3600)

var (
	// OutTradeNoPattern is WeChat's rule for out_trade_no: 6 to 32 letters, digits or
	// _-|* (§B1). Precreate refuses to send anything else.
	OutTradeNoPattern = regexp.MustCompile(`^[A-Za-z0-9_\-|*]{6,32}$`)
	// OutRefundNoPattern is WeChat's rule for out_refund_no: 1 to 64 letters, digits or
	// _-|*@. Refund refuses to send anything else.
	OutRefundNoPattern = regexp.MustCompile(`^[A-Za-z0-9_\-|*@]{1,64}$`)
)

// Config configures the adapter. Credentials are never logged.
type Config struct {
	MchID string // the merchant number; required
	AppID string // the app id Native and H5 orders are made for; required
	// JSAPIAppID, MiniAppID and AppAppID are the official account, the mini program and
	// the mobile app bound to the merchant number, each with its own appid (docs/channels.md
	// §F2): JSAPI, mini program and App orders are made for them. Each is optional; a
	// method whose appid is empty is refused before anything is sent.
	JSAPIAppID string
	MiniAppID  string
	AppAppID   string
	// H5Domains are the H5 payment domains registered in the merchant platform; H5 is
	// refused without one (WeChat would refuse every page). JSAPIPaths are the registered
	// JSAPI pay directories (支付授权目录); JSAPI is refused without one.
	H5Domains  []string
	JSAPIPaths []string
	// OAuthSecret is the official account's AppSecret: with it OpenID exchanges the code of
	// the official account's web OAuth (snsapi_base) for the buyer's openid. Optional.
	OAuthSecret string
	// OAuthBaseURL replaces https://api.weixin.qq.com (the OAuth code exchange) and
	// https://open.weixin.qq.com (the authorize page, AuthorizeURL): scheme and host.
	// Defaults to those two.
	OAuthBaseURL string
	// MerchantSerial is the serial number of the merchant API certificate, sent in every
	// Authorization header. Required.
	MerchantSerial string
	// MerchantPrivateKeyPEM signs requests: PKCS#8 "PRIVATE KEY" PEM (apiclient_key.pem).
	// Required.
	MerchantPrivateKeyPEM string
	// Mode is how answers and notifications are verified: ModePublicKey, with
	// PlatformPublicKeyPEM and PublicKeyID, or ModePlatformCertificate, with neither (the
	// certificates are downloaded from BaseURL + /v3/certificates and decrypted with
	// APIv3Key). Defaults to ModePublicKey.
	Mode Mode
	// PlatformPublicKeyPEM verifies answers and notifications in public key mode: the WeChat
	// Pay public key, PKIX "PUBLIC KEY" PEM (pub_key.pem). Required in that mode, and must
	// be empty in platform certificate mode.
	PlatformPublicKeyPEM string
	// PublicKeyID names that key ("PUB_KEY_ID_…"); answers signed under another serial are
	// refused. Required in public key mode, and must be empty in platform certificate mode.
	PublicKeyID string
	// CertificateRefreshInterval is, in platform certificate mode, how often the
	// certificates are downloaded again even when every answer names a known one. Defaults
	// to DefaultCertificateRefreshInterval (24 h). An answer or notification under a serial
	// not known yet triggers a download at once, whatever this says.
	CertificateRefreshInterval time.Duration
	// CertificateDownloadGap is, in platform certificate mode, the least time between two
	// downloads of the certificates; a caller that needs one sooner waits for it. Defaults
	// to DefaultCertificateDownloadGap (2 s).
	CertificateDownloadGap time.Duration
	// APIv3Key decrypts notifications (and, in platform certificate mode, the downloaded
	// certificates): 32 characters. Required.
	APIv3Key string
	// RefundNotifyURL is sent as every refund's notify_url, so that WeChat notifies the
	// refund's end there (REFUND.SUCCESS, ABNORMAL or CLOSED; VerifyNotification reads
	// them). Empty sends none: WeChat then notifies the URL set in the merchant platform, if
	// any. An absolute URL without query; WeChat takes only HTTPS.
	RefundNotifyURL string
	// BaseURL replaces https://api.mch.weixin.qq.com: scheme and host only (a path would
	// break the request signatures, which cover the path). Defaults to DefaultBaseURL.
	BaseURL string
	// HTTPClient sends the calls. It is copied, never modified. Defaults to a new client
	// on a copy of http.DefaultTransport that keeps IdleConnsPerHost connections idle.
	HTTPClient *http.Client
	// Timeout bounds each call; a call that runs out of time is OutcomeUnknown. Defaults to
	// DefaultTimeout (10 s).
	Timeout time.Duration
	// Clock decides whether a deadline leaves time to pay. Defaults to
	// orderpay.SystemClock. Signatures always use this machine's clock: the SDK reads
	// time.Now().
	Clock orderpay.Clock
}

// Channel is the WeChat Pay adapter. It is safe for concurrent use.
type Channel struct {
	native  *native.NativeApiService
	jsapi   *jsapi.JsapiApiService
	h5      *h5.H5ApiService
	app     *app.AppApiService
	refunds *refunddomestic.RefundsApiService
	// methods are the appids and registered pages of the other pay methods (methods.go).
	methods methodConfig
	notify  *notify.Handler
	// api makes signed, verified calls of its own (the trade bill); rawAPI makes the bill
	// download, a signed request whose answer is never signed (bill.go).
	api    *core.Client
	rawAPI *core.Client
	// signature checks a notification's signature alone, to tell a forged notification
	// from a malformed one when the handler refuses it.
	signature *validators.WechatPayNotifyValidator
	mchID     string
	appID     string
	apiV3Key  string // only for NotificationTrade; the notify handler has its own copy
	timeout   time.Duration
	clock     orderpay.Clock
	// refundNotifyURL is every refund's notify_url; "" sends none.
	refundNotifyURL string

	// What Describe shows of the verification in use: the mode, and its public key (public
	// key mode) or its certificate store (platform certificate mode).
	mode           Mode
	merchantSerial string
	publicKeyID    string
	publicKey      *rsa.PublicKey
	certs          *platformCertificates

	verifier auth.Verifier // answers' and notifications' signatures (CheckCredentials)
	baseURL  string
}

var _ orderpay.Channel = (*Channel)(nil)

// New returns an adapter for cfg. It makes no call: in platform certificate mode the
// certificates are downloaded when the first answer or notification needs them.
func New(cfg Config) (*Channel, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(cfg.BaseURL) // checked by withDefaults
	// The SDK's own messages describe what failed to parse, never the key.
	privateKey, err := utils.LoadPrivateKey(cfg.MerchantPrivateKeyPEM)
	if err != nil {
		return nil, fieldError("{MerchantPrivateKeyPEM}", err)
	}

	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	next := hc.Transport
	if next == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = IdleConnsPerHost
		next = t
	}
	hc.Transport = apiTransport{base: base, next: next}
	credential := option.WithMerchantCredential(cfg.MchID, cfg.MerchantSerial, privateKey)

	c := &Channel{
		mchID:           cfg.MchID,
		appID:           cfg.AppID,
		apiV3Key:        cfg.APIv3Key,
		timeout:         cfg.Timeout,
		clock:           cfg.Clock,
		refundNotifyURL: cfg.RefundNotifyURL,
		mode:            cfg.Mode,
		merchantSerial:  cfg.MerchantSerial,
	}
	// One verifier for answers and notifications alike: the public key, or the platform
	// certificate named by Wechatpay-Serial from this adapter's own store.
	var verifier auth.Verifier
	switch cfg.Mode {
	case ModePublicKey:
		publicKey, err := utils.LoadPublicKey(cfg.PlatformPublicKeyPEM)
		if err != nil {
			return nil, fieldError("{PlatformPublicKeyPEM} is not an RSA PKIX PEM public key", nil)
		}
		c.publicKeyID, c.publicKey = cfg.PublicKeyID, publicKey
		verifier = verifiers.NewSHA256WithRSAPubkeyVerifier(cfg.PublicKeyID, *publicKey)
	case ModePlatformCertificate:
		// The download is checked by the store itself: its answer is signed by
		// certificates only the download reveals.
		certClient, err := core.NewClient(context.Background(), credential, option.WithHTTPClient(&hc), option.WithoutValidator())
		if err != nil {
			return nil, fmt.Errorf("wechat: %w", err)
		}
		c.certs = &platformCertificates{
			client:       certClient,
			apiV3Key:     cfg.APIv3Key,
			refreshEvery: cfg.CertificateRefreshInterval,
			gap:          cfg.CertificateDownloadGap,
			timeout:      cfg.Timeout,
			now:          time.Now,
			missed:       map[string]time.Time{},
		}
		verifier = verifiers.NewSHA256WithRSAVerifier(c.certs)
	}

	client, err := core.NewClient(context.Background(), credential, option.WithVerifier(verifier), option.WithHTTPClient(&hc))
	if err != nil {
		return nil, fmt.Errorf("wechat: %w", err)
	}
	// The bill download: the SDK's FAQ prescribes a client without validator for it, and
	// a bill can be far larger than an API answer.
	download := hc
	download.Transport = apiTransport{base: base, next: next, limit: maxBill}
	rawClient, err := core.NewClient(context.Background(), credential, option.WithHTTPClient(&download), option.WithoutValidator())
	if err != nil {
		return nil, fmt.Errorf("wechat: %w", err)
	}
	handler, err := notify.NewRSANotifyHandler(cfg.APIv3Key, verifier)
	if err != nil {
		return nil, fmt.Errorf("wechat: notification handler: %w", err)
	}
	c.native = &native.NativeApiService{Client: client}
	c.jsapi = &jsapi.JsapiApiService{Client: client}
	c.h5 = &h5.H5ApiService{Client: client}
	c.app = &app.AppApiService{Client: client}
	c.methods = newMethodConfig(cfg, &hc)
	c.refunds = &refunddomestic.RefundsApiService{Client: client}
	c.notify = handler
	c.api = client
	c.rawAPI = rawClient
	c.signature = validators.NewWechatPayNotifyValidator(verifier)
	c.verifier, c.baseURL = verifier, cfg.BaseURL
	return c, nil
}

// fieldError is a refusal of the credentials in the fields text names in braces.
func fieldError(text string, err error) error {
	return &orderpay.FieldError{Channel: orderpay.ChannelWechat, Text: text, Err: err}
}

// withDefaults checks cfg and returns it with every zero field set to its default. Exactly
// one mode's fields may be set.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.MchID == "":
		return cfg, errors.New("wechat: MchID is required")
	case cfg.AppID == "":
		return cfg, errors.New("wechat: AppID is required")
	case cfg.MerchantSerial == "":
		return cfg, fieldError("{MerchantSerial} is required", nil)
	case cfg.MerchantPrivateKeyPEM == "":
		return cfg, fieldError("{MerchantPrivateKeyPEM} is required", nil)
	case len(cfg.APIv3Key) != 32:
		return cfg, fieldError("{APIv3Key} must be 32 bytes", nil)
	case cfg.Timeout < 0:
		return cfg, errors.New("wechat: Timeout must not be negative")
	case cfg.CertificateRefreshInterval < 0 || cfg.CertificateDownloadGap < 0:
		return cfg, errors.New("wechat: CertificateRefreshInterval and CertificateDownloadGap must not be negative")
	}
	cfg.Mode = cmp.Or(cfg.Mode, ModePublicKey)
	switch cfg.Mode {
	case ModePublicKey:
		switch {
		case cfg.PlatformPublicKeyPEM == "" || cfg.PublicKeyID == "":
			return cfg, fieldError("public key mode needs {PlatformPublicKeyPEM} and {PublicKeyID} (or set {Mode} to ModePlatformCertificate)", nil)
		case cfg.CertificateRefreshInterval != 0 || cfg.CertificateDownloadGap != 0:
			return cfg, errors.New("wechat: CertificateRefreshInterval and CertificateDownloadGap belong to platform certificate mode, not public key mode")
		}
	case ModePlatformCertificate:
		if cfg.PlatformPublicKeyPEM != "" || cfg.PublicKeyID != "" {
			return cfg, fieldError("platform certificate mode downloads the certificates: {PlatformPublicKeyPEM} and {PublicKeyID} belong to public key mode and must be empty", nil)
		}
		cfg.CertificateRefreshInterval = cmp.Or(cfg.CertificateRefreshInterval, DefaultCertificateRefreshInterval)
		cfg.CertificateDownloadGap = cmp.Or(cfg.CertificateDownloadGap, DefaultCertificateDownloadGap)
	default:
		return cfg, fmt.Errorf("wechat: Mode must be %q or %q, got %q", ModePublicKey, ModePlatformCertificate, cfg.Mode)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = orderpay.SystemClock{}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		(base.Path != "" && base.Path != "/") || base.RawQuery != "" || base.User != nil {
		return cfg, errors.New("wechat: BaseURL must be an http(s) scheme and host, without path or query")
	}
	if err := cfg.checkMethods(); err != nil {
		return cfg, err
	}
	if cfg.RefundNotifyURL != "" {
		if u, err := url.Parse(cfg.RefundNotifyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return cfg, errors.New("wechat: RefundNotifyURL must be an absolute http(s) URL without a query")
		}
	}
	return cfg, nil
}

// Describe tells an operator how this adapter talks to WeChat Pay, for a status page or a
// startup log: the mode ("pubkey" or "certificate"), mch_id, app_id, merchant_serial, the
// apps and pages of the other methods, and
//   - in pubkey mode public_key_id and public_key_sha256;
//   - in certificate mode platform_certificates: each certificate's serial, public key
//     fingerprint and expiry (the newest first; none before the first download), the
//     refresh interval, how many downloads were started, when the last good one ended and,
//     if the last download failed, why.
//
// A fingerprint is the lowercase hex SHA-256 of the public key's PKIX DER encoding. Nothing
// secret is shown: no private key and not the APIv3 key. Describe makes no call.
func (c *Channel) Describe() orderpay.ChannelDescription {
	d := orderpay.ChannelDescription{
		Channel:        orderpay.ChannelWechat,
		Mode:           string(c.mode),
		MchID:          c.mchID,
		AppID:          c.appID,
		MerchantSerial: c.merchantSerial,
	}
	c.methods.describeInto(&d)
	if c.certs != nil {
		d.PlatformCertificates = c.certs.describe()
	} else {
		d.PublicKeyID = c.publicKeyID
		d.PublicKeySHA256 = publicKeyFingerprint(c.publicKey)
	}
	return d
}

// publicKeyFingerprint is the lowercase hex SHA-256 of key's PKIX DER encoding, or "" if it
// cannot be encoded.
func publicKeyFingerprint(key any) string {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Name returns orderpay.ChannelWechat.
func (c *Channel) Name() string { return orderpay.ChannelWechat }

// Precreate places an order of req's method: Native (qr, below), or JSAPI, mini program, H5
// or App (prepayMethod, methods.go), or takes a barcode payment (codepay, barcode.go, which
// has its own outcomes). Every method but barcode sends time_expire = the deadline, so that
// the buyer cannot pay after we close the order. A Native code lives until time_expire, so
// QRExpiresAt is the deadline as sent (whole seconds).
//
// Outcomes (§C): a verified 200 with a code_url is Accepted. A 4xx is Rejected (this call
// created nothing payable: PARAM_ERROR, SIGN_ERROR, APPID_MCHID_NOT_MATCH…), except
// OUT_TRADE_NO_USED, ORDER_CLOSED and ORDERPAID, which say that an order under this
// out_trade_no already exists: Unknown, so that a query of it decides. A 5xx, a 429, a
// timeout or transport error, and an unsigned or badly signed 2xx are Unknown. A request
// that breaks WeChat's rules is Rejected without being sent, and so is a deadline already
// past.
//
// WeChat raises a time_expire less than a minute after the order to one minute (§B1), so
// with a short deadline the code outlives it by up to a minute. That is safe: the timeout
// close queries first and then closes the order at WeChat, which works on any unpaid order
// whatever its time_expire, and a payment made before that close is simply a payment.
func (c *Channel) Precreate(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	if req.Method == orderpay.MethodBarcode {
		return c.codepay(ctx, req)
	}
	if req.Method != "" && req.Method != orderpay.MethodQR {
		return c.prepayMethod(ctx, req)
	}
	now := c.clock.Now()
	// time_expire has whole seconds; truncating makes WeChat's deadline never later than
	// ours.
	deadline := req.Deadline.Truncate(time.Second).In(cst)
	if msg := checkPrecreate(req, deadline, now); msg != "" {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	prepay := native.PrepayRequest{
		Appid:       core.String(c.appID),
		Mchid:       core.String(c.mchID),
		Description: core.String(truncateRunes(req.Subject, maxDescription)),
		OutTradeNo:  core.String(req.OutTradeNo),
		TimeExpire:  core.Time(deadline),
		// WeChat requires notify_url, and so does the SDK's encoder. An empty one is sent
		// as it is: the channel decides (WeChat refuses it, the simulator takes it as "do
		// not notify").
		NotifyUrl: core.String(req.NotifyURL),
		Amount:    &native.Amount{Total: core.Int64(req.Amount), Currency: core.String(currency)},
	}
	resp, result, err := c.native.Prepay(ctx, prepay)
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		return prepayFailed(res, err, result)
	}
	res.Detail = statusDetail(result)
	if resp == nil || resp.CodeUrl == nil || !strings.HasPrefix(*resp.CodeUrl, "weixin://") {
		res.Detail += ": no code_url"
		return res
	}
	res.Outcome = orderpay.OutcomeAccepted
	res.QRCode = *resp.CodeUrl
	res.QRExpiresAt = deadline
	return res
}

// prepayFailed classifies a prepay of any method that gave no verified 2xx (§C): a 4xx is
// Rejected (this call created nothing payable), except those that say an order under this
// out_trade_no already exists (OUT_TRADE_NO_USED, ORDER_CLOSED, ORDERPAID, and INVALID_REQUEST
// 商户订单号重复, the JSAPI, H5 and App prepays' word for it), which are Unknown so that a
// query of it decides; every other failure is Unknown.
func prepayFailed(res orderpay.PrecreateResult, err error, result *core.APIResult) orderpay.PrecreateResult {
	apiErr, detail := describe(err, result)
	res.Detail = detail
	if isRefusal(apiErr) {
		switch {
		case apiErr.Code == "OUT_TRADE_NO_USED", apiErr.Code == "ORDER_CLOSED", apiErr.Code == "ORDERPAID",
			apiErr.Code == "INVALID_REQUEST" && strings.Contains(apiErr.Message, "订单号重复"):
			// The out_trade_no exists at WeChat, perhaps paid: query it first (§C).
			res.Detail += ": an order with this out_trade_no exists; query it"
		default:
			res.Outcome = orderpay.OutcomeRejected
		}
	}
	return res
}

// checkPrecreate applies WeChat's field rules (§B1) before sending and returns why req
// breaks them, or "".
func checkPrecreate(req orderpay.PrecreateRequest, deadline, now time.Time) string {
	switch {
	case !OutTradeNoPattern.MatchString(req.OutTradeNo):
		return "out_trade_no must be 6 to 32 letters, digits or _-|*"
	case req.Amount < 1 || req.Amount > orderpay.MaxChannelAmount:
		return "amount must be between 1 fen and 100000000 yuan"
	case strings.TrimSpace(req.Subject) == "":
		return "a subject is required (it is the order's description)"
	case req.Deadline.IsZero():
		return "a deadline is required so the buyer cannot pay after the order closes"
	case !deadline.After(now):
		return "the deadline has passed"
	}
	if req.NotifyURL != "" {
		u, err := url.Parse(req.NotifyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return "notify_url must be an absolute http(s) URL without a query"
		}
	}
	return ""
}

// Query asks WeChat for the order (GET /v3/pay/transactions/out-trade-no/{out_trade_no}).
//
// Outcomes (§C): a verified SUCCESS is Paid with amount.total, transaction_id and
// success_time; so is REFUND, which means paid and then refunded (the Detail says so);
// NOTPAY is NotPaid; CLOSED is Closed. The barcode (micropay) states: USERPAYING is NotPaid
// (the buyer is confirming), PAYERROR (the payment failed) and REVOKED (reversed) are
// Closed. Anything else is Unknown, as is an answer for another order, mchid or appid.
//
// 404 ORDER_NOT_EXIST (or ORDERNOTEXIST) is NotPaid: no order exists under this number, so
// nothing is paid, and nothing can be paid without the code_url only a prepay creates. It
// should not happen after an Accepted prepay (a WeChat order exists from prepay on); after
// an Unknown one it means the prepay never arrived. Like Alipay's TRADE_NOT_EXIST it is not
// final by itself: a prepay still in flight could create the order, which is why the caller
// closes (and queries again) before it gives up on a payment. Every other failure,
// including a refused query, is Unknown.
func (c *Channel) Query(ctx context.Context, outTradeNo string) orderpay.QueryResult {
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	txn, result, err := c.native.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{
		OutTradeNo: core.String(outTradeNo),
		Mchid:      core.String(c.mchID),
	})
	res := orderpay.QueryResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		apiErr, detail := describe(err, result)
		res.Detail = detail
		if apiErr != nil && apiErr.StatusCode == http.StatusNotFound &&
			(apiErr.Code == "ORDER_NOT_EXIST" || apiErr.Code == "ORDERNOTEXIST") {
			res.Outcome = orderpay.OutcomeNotPaid
			res.Detail += ": no order under this out_trade_no (the prepay never arrived)"
		}
		return res
	}
	res.Detail = statusDetail(result)
	if txn == nil {
		res.Detail += ": empty answer"
		return res
	}
	if msg := c.checkTransaction(txn.OutTradeNo, txn.Mchid, txn.Appid, outTradeNo); msg != "" {
		res.Detail += ": " + msg
		return res
	}
	state := deref(txn.TradeState)
	res.Detail += " " + state
	res.TradeNo = deref(txn.TransactionId)
	hasAmount := txn.Amount != nil && txn.Amount.Total != nil
	if hasAmount {
		res.Amount = *txn.Amount.Total
	}
	res.Outcome, res.Detail = tradeOutcome(state, hasAmount, res.TradeNo, deref(txn.SuccessTime), res.Detail)
	if res.Outcome == orderpay.OutcomePaid {
		res.PaidAt = parseTime(deref(txn.SuccessTime))
	}
	return res
}

// tradeOutcome maps a verified trade_state to an outcome (§C), with detail extended.
// transactionID and successTime are the answer's: an order that ended unpaid (CLOSED,
// PAYERROR, REVOKED) yet shows either is not believed to be unpaid.
func tradeOutcome(state string, hasAmount bool, transactionID, successTime, detail string) (orderpay.Outcome, string) {
	switch state {
	case stateSuccess, stateRefund:
		if !hasAmount {
			// Paid, but for an amount we were not told: never guess.
			return orderpay.OutcomeUnknown, detail + ": paid without amount.total"
		}
		if state == stateRefund {
			detail += ": paid, then refunded (in part or in full)"
		}
		return orderpay.OutcomePaid, detail
	case stateNotPay:
		return orderpay.OutcomeNotPaid, detail
	case stateClosed:
		if transactionID != "" {
			// A closed order never has a payment; one that shows both is not believed.
			return orderpay.OutcomeUnknown, detail + ": closed, yet with a transaction_id"
		}
		return orderpay.OutcomeClosed, detail
	case stateUserPaying:
		// A barcode order whose buyer is confirming: it may still be paid.
		return orderpay.OutcomeNotPaid, detail + ": the buyer is confirming"
	case statePayError:
		if transactionID != "" || successTime != "" {
			return orderpay.OutcomeUnknown, detail + ": the payment failed, yet with a transaction_id or success_time"
		}
		return orderpay.OutcomeClosed, detail + ": the payment failed; the order ended unpaid"
	case stateRevoked:
		if transactionID != "" || successTime != "" {
			// Paid, then reversed: the reverse refunded it. Neither paid nor closed unpaid;
			// whoever reversed it knows (a reverse of it answers again as it did).
			return orderpay.OutcomeUnknown, detail + ": reversed after a payment (the reverse refunded it)"
		}
		return orderpay.OutcomeClosed, detail + ": reversed; nothing was paid"
	}
	return orderpay.OutcomeUnknown, detail + ": not a known order state"
}

// checkTransaction reports why a verified Transaction is not the answer for outTradeNo at
// this merchant and one of its apps (the main one, or the official account, mini program or
// app a trade of another method was made for), or "".
func (c *Channel) checkTransaction(gotOutTradeNo, mchID, appID *string, outTradeNo string) string {
	switch {
	case deref(gotOutTradeNo) != outTradeNo:
		return "answer for another out_trade_no " + deref(gotOutTradeNo)
	case mchID != nil && *mchID != c.mchID:
		return "answer for another mchid"
	case appID != nil && !c.ownApp(*appID):
		return "answer for another appid"
	}
	return ""
}

// ownApp reports whether appid is one of the merchant's configured apps.
func (c *Channel) ownApp(appid string) bool {
	return appid != "" && (appid == c.appID || appid == c.methods.jsapiAppID || appid == c.methods.miniAppID || appid == c.methods.appAppID)
}

// Close closes an unpaid order (POST …/out-trade-no/{out_trade_no}/close) so that its code
// cannot be paid any more.
//
// Whether v3 refuses to close a paid order is unverified (§D: v2 answers ORDERPAID), so a
// verified 204 alone does not prove "closed, never paid". Close therefore queries the order
// after the 204: Closed only if the query says CLOSED; anything else (SUCCESS, REFUND, a
// failed query…) is Unknown. Any close failure is Unknown too, including 400 ORDERPAID. The
// caller still queries after closing, as it does for every channel.
func (c *Channel) Close(ctx context.Context, outTradeNo string) orderpay.CloseResult {
	callCtx, ex, cancel := c.begin(ctx)
	result, err := c.native.CloseOrder(callCtx, native.CloseOrderRequest{
		OutTradeNo: core.String(outTradeNo),
		Mchid:      core.String(c.mchID),
	})
	cancel()
	if err != nil {
		_, detail := describe(err, result)
		return orderpay.CloseResult{Outcome: orderpay.OutcomeUnknown, Detail: detail, Raw: ex.raw()}
	}
	closed := statusDetail(result)
	q := c.Query(ctx, outTradeNo)
	if q.Outcome == orderpay.OutcomeClosed {
		return orderpay.CloseResult{Outcome: orderpay.OutcomeClosed, Detail: closed + "; then query: " + q.Detail, Raw: q.Raw}
	}
	return orderpay.CloseResult{
		Outcome: orderpay.OutcomeUnknown,
		Detail:  closed + ", but the query after it did not show CLOSED: " + q.Detail,
		Raw:     q.Raw,
	}
}

// Refund asks WeChat to refund part or all of a paid order (POST
// /v3/refund/domestic/refunds). out_refund_no identifies the refund: resending it never
// refunds twice.
//
// Outcomes (§C), one of the six classes of orderpay.RefundResult:
//   - a verified status SUCCESS is Refunded; PROCESSING is RefundPending (query it later);
//     ABNORMAL (the money could not reach the buyer, e.g. a closed or frozen card) and
//     CLOSED are RefundAbnormal: the refund ended without the money going back, and a
//     person must settle it (the Detail says which);
//   - 403 NOT_ENOUGH (older documents: NOTENOUGH; the merchant's balance cannot cover the
//     refund) and 429 FREQUENCY_LIMITED (the refund was not accepted: too many requests)
//     are RefundRetry: nothing happened under this number, and the same request sent again
//     later, under the same number, can succeed;
//   - 403 USER_ACCOUNT_ABNORMAL (the buyer's account is cancelled or abnormal) is
//     RefundAbnormal: no retry brings the money back this way;
//   - any other 4xx is Rejected, refused for good: INVALID_REQUEST (over-refund, unpaid
//     order, or this number already used for another refund), PARAM_ERROR,
//     RESOURCE_NOT_EXISTS, SIGN_ERROR, NO_AUTH, MCH_NOT_EXISTS…;
//   - a 5xx (SYSTEM_ERROR), a 429 of another code, a timeout and an unsigned or badly
//     signed 2xx are Unknown: retry with the same out_refund_no ("请不要更换商户退款单号").
//
// A request that breaks WeChat's rules is Rejected without being sent.
func (c *Channel) Refund(ctx context.Context, req orderpay.RefundRequest) orderpay.RefundResult {
	switch {
	case !OutTradeNoPattern.MatchString(req.OutTradeNo):
		return rejectedUnsent("out_trade_no must be 6 to 32 letters, digits or _-|*")
	case !OutRefundNoPattern.MatchString(req.OutRefundNo):
		return rejectedUnsent("out_refund_no must be 1 to 64 letters, digits or _-|*@")
	case req.Amount < 1 || req.Total < req.Amount || req.Total > orderpay.MaxChannelAmount:
		return rejectedUnsent("the refund must be at least 1 fen and at most the order's total")
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	create := refunddomestic.CreateRequest{
		OutTradeNo:  core.String(req.OutTradeNo),
		OutRefundNo: core.String(req.OutRefundNo),
		Amount: &refunddomestic.AmountReq{
			Refund:   core.Int64(req.Amount),
			Total:    core.Int64(req.Total),
			Currency: core.String(currency),
		},
	}
	if reason := truncateRunes(req.Reason, maxReason); reason != "" {
		create.Reason = core.String(reason)
	}
	if c.refundNotifyURL != "" {
		create.NotifyUrl = core.String(c.refundNotifyURL)
	}
	resp, result, err := c.refunds.Create(ctx, create)
	res := orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		apiErr, detail := describe(err, result)
		var why string
		res.Outcome, why = refundRefusal(apiErr)
		res.Detail = detail + why
		return res
	}
	res.Detail = statusDetail(result)
	c.refundOutcome(&res, resp, req.OutTradeNo, req.OutRefundNo)
	if res.Outcome != orderpay.OutcomeUnknown && res.Amount != req.Amount {
		res.Outcome = orderpay.OutcomeUnknown
		res.Detail += ": the refund under this number is for another amount"
	}
	return res
}

// QueryRefund asks WeChat for a refund (GET /v3/refund/domestic/refunds/{out_refund_no}).
// Verified statuses map as for Refund (SUCCESS Refunded, PROCESSING RefundPending, ABNORMAL
// and CLOSED RefundAbnormal). Every failure is Unknown: a refused query says nothing about
// the refund, so a 429 FREQUENCY_LIMITED here is Unknown, not RefundRetry, and neither
// NOT_ENOUGH nor USER_ACCOUNT_ABNORMAL is read from a query. That includes 404 RESOURCE_NOT_EXISTS: shortly after a create
// whose answer was lost, the refund may not be visible yet, or the create never arrived; in
// both cases the caller retries the refund with the same out_refund_no, which is safe.
func (c *Channel) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) orderpay.RefundResult {
	if !OutRefundNoPattern.MatchString(outRefundNo) {
		// No refund can exist under a number WeChat would refuse.
		return rejectedUnsent("out_refund_no must be 1 to 64 letters, digits or _-|*@")
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	resp, result, err := c.refunds.QueryByOutRefundNo(ctx, refunddomestic.QueryByOutRefundNoRequest{
		OutRefundNo: core.String(outRefundNo),
	})
	res := orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		apiErr, detail := describe(err, result)
		res.Detail = detail
		if apiErr != nil && apiErr.Code == "RESOURCE_NOT_EXISTS" {
			res.Detail += ": no refund under this number yet; retry the refund with the same out_refund_no"
		}
		return res
	}
	res.Detail = statusDetail(result)
	c.refundOutcome(&res, resp, outTradeNo, outRefundNo)
	return res
}

// refundOutcome fills res from a verified Refund.
func (c *Channel) refundOutcome(res *orderpay.RefundResult, r *refunddomestic.Refund, outTradeNo, outRefundNo string) {
	if r == nil {
		res.Detail += ": empty answer"
		return
	}
	switch {
	case deref(r.OutRefundNo) != outRefundNo:
		res.Detail += ": answer for another out_refund_no " + deref(r.OutRefundNo)
		return
	case r.OutTradeNo != nil && *r.OutTradeNo != outTradeNo:
		res.Detail += ": the refund belongs to another out_trade_no " + *r.OutTradeNo
		return
	case r.Amount == nil || r.Amount.Refund == nil:
		res.Detail += ": no amount.refund"
		return
	}
	res.Amount = *r.Amount.Refund
	res.RefundID = deref(r.RefundId)
	status := ""
	if r.Status != nil {
		status = string(*r.Status)
	}
	res.Detail += " " + status
	switch status {
	case refundSuccess:
		res.Outcome = orderpay.OutcomeRefunded
	case refundPending:
		res.Outcome = orderpay.OutcomeRefundPending
	case refundClosed:
		res.Outcome = orderpay.OutcomeRefundAbnormal
		res.Detail += ": the refund was closed and did not happen"
	case refundAbnormal:
		res.Outcome = orderpay.OutcomeRefundAbnormal
		res.Detail += ": the refund failed (the buyer's account is abnormal or frozen) and needs manual handling in the merchant platform"
	default:
		res.Detail += ": unknown refund status"
	}
}

// refundRefusal classifies the error answer to a refund create (nil if there was none) and
// says what it means for the caller, as Refund documents.
func refundRefusal(e *core.APIError) (orderpay.Outcome, string) {
	switch {
	case e == nil:
		return orderpay.OutcomeUnknown, ""
	case e.StatusCode == http.StatusTooManyRequests && e.Code == "FREQUENCY_LIMITED":
		return orderpay.OutcomeRefundRetry, ": the refund was not accepted (too many requests); send it again later, more slowly, under the same number"
	case !isRefusal(e):
		return orderpay.OutcomeUnknown, ""
	}
	switch e.Code {
	case "NOT_ENOUGH", "NOTENOUGH":
		return orderpay.OutcomeRefundRetry, ": the merchant's balance cannot cover the refund; top it up, then send the refund again under the same number"
	case "USER_ACCOUNT_ABNORMAL":
		return orderpay.OutcomeRefundAbnormal, ": the buyer's account is cancelled or abnormal, so the money cannot go back this way; it needs manual handling"
	}
	return orderpay.OutcomeRejected, ""
}

func rejectedUnsent(msg string) orderpay.RefundResult {
	return orderpay.RefundResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
}

// VerifyNotification checks and decodes a payment or refund notification (§B4, §E) with
// the SDK's notify handler: the signature over the exact body with the WeChat Pay public key
// or the platform certificate it names (and a timestamp within 5 minutes), then the
// AES-256-GCM decryption with the APIv3 key.
//
// A bad or missing signature, a stale timestamp, or a resource that does not decrypt is
// EUNAUTHORIZED; so is a genuine notification for another mchid (or, for a payment, another
// appid). A body that is not a notification, or whose resource is neither a payment
// (original_type "transaction") nor a refund ("refund"), is EINVALID. Raw holds the envelope
// and the decrypted resource: {"notification":…,"resource_plaintext":…}. The payment center
// still checks the order and the amounts before applying it.
//
// A payment: trade_state maps as for Query; Amount is amount.total. A refund (REFUND.SUCCESS,
// REFUND.ABNORMAL or REFUND.CLOSED, whose refund_status must agree with the event): OutRefundNo,
// OutTradeNo and TradeNo (transaction_id), Amount (amount.total) and RefundAmount
// (amount.refund); SUCCESS is OutcomeRefunded, ABNORMAL and CLOSED are OutcomeRefundAbnormal
// with Detail saying which: the refund ended without the money reaching the buyer, and a
// person must settle it.
func (c *Channel) VerifyNotification(ctx context.Context, header http.Header, body []byte) (*orderpay.Notification, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/notify/wechat", bytes.NewReader(body))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification: %v", err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	var plaintext json.RawMessage
	n, err := c.notify.ParseNotifyRequest(ctx, req, &plaintext)
	if err != nil {
		return nil, c.notifyError(ctx, header, body, n)
	}
	if n.Resource == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification has no resource")
	}
	switch n.Resource.OriginalType {
	case transactionType:
		return c.paymentNotification(n, body, plaintext)
	case refundType:
		return c.refundNotification(n, body, plaintext)
	}
	return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification is neither a payment nor a refund (event_type %s)", n.EventType)
}

// paymentNotification decodes a verified payment notification.
func (c *Channel) paymentNotification(n *notify.Request, body, plaintext []byte) (*orderpay.Notification, error) {
	var txn payments.Transaction
	if json.Unmarshal(plaintext, &txn) != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification resource is not a transaction")
	}
	// A genuine signature on someone else's notification is still not ours to apply.
	if deref(txn.Mchid) != c.mchID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "wechat notification is for another mchid")
	}
	if !c.ownApp(deref(txn.Appid)) {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "wechat notification is for another appid")
	}
	if deref(txn.OutTradeNo) == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification has no out_trade_no")
	}
	state := deref(txn.TradeState)
	hasAmount := txn.Amount != nil && txn.Amount.Total != nil
	if !hasAmount && (state == stateSuccess || state == stateRefund) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat notification of a payment has no amount.total")
	}
	outcome, _ := tradeOutcome(state, hasAmount, deref(txn.TransactionId), deref(txn.SuccessTime), "")
	var amount int64
	if hasAmount {
		amount = *txn.Amount.Total
	}
	return &orderpay.Notification{
		Channel:    orderpay.ChannelWechat,
		NotifyID:   n.ID,
		OutTradeNo: *txn.OutTradeNo,
		TradeNo:    deref(txn.TransactionId),
		Outcome:    outcome,
		Amount:     amount,
		PaidAt:     parseTime(deref(txn.SuccessTime)),
		Raw:        notifyRaw(body, n.Resource.Plaintext),
	}, nil
}

// refundNotice is the resource of a refund notification (退款结果通知).
type refundNotice struct {
	MchID         *string `json:"mchid"`
	OutTradeNo    *string `json:"out_trade_no"`
	TransactionID *string `json:"transaction_id"`
	OutRefundNo   *string `json:"out_refund_no"`
	RefundID      *string `json:"refund_id"`
	RefundStatus  *string `json:"refund_status"`
	Amount        *struct {
		Total  *int64 `json:"total"`
		Refund *int64 `json:"refund"`
	} `json:"amount"`
}

// refundEnds is what each final refund_status of a refund notification means.
var refundEnds = map[string]struct {
	outcome orderpay.Outcome
	detail  string
}{
	refundSuccess:  {orderpay.OutcomeRefunded, "REFUND.SUCCESS"},
	refundAbnormal: {orderpay.OutcomeRefundAbnormal, "REFUND.ABNORMAL: the refund failed (the buyer's account is abnormal or frozen) and needs manual handling in the merchant platform"},
	refundClosed:   {orderpay.OutcomeRefundAbnormal, "REFUND.CLOSED: the refund was closed and did not happen"},
}

// refundNotification decodes a verified refund notification.
func (c *Channel) refundNotification(n *notify.Request, body, plaintext []byte) (*orderpay.Notification, error) {
	var r refundNotice
	if json.Unmarshal(plaintext, &r) != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat refund notification resource is not a refund")
	}
	if deref(r.MchID) != c.mchID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "wechat refund notification is for another mchid")
	}
	status := deref(r.RefundStatus)
	end, final := refundEnds[status]
	switch {
	case deref(r.OutRefundNo) == "" || deref(r.OutTradeNo) == "":
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat refund notification has no out_refund_no or out_trade_no")
	case !final:
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat refund notification with refund_status %q is not a final one", status)
	case n.EventType != "REFUND."+status:
		// Both are WeChat's words (the event signed, the status encrypted): if they
		// disagree, neither is believed.
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat refund notification %s says refund_status %s", n.EventType, status)
	case r.Amount == nil || r.Amount.Total == nil || r.Amount.Refund == nil:
		return nil, orderpay.Errorf(orderpay.EINVALID, "wechat refund notification has no amount.total or amount.refund")
	}
	return &orderpay.Notification{
		Channel:      orderpay.ChannelWechat,
		NotifyID:     n.ID,
		OutTradeNo:   *r.OutTradeNo,
		TradeNo:      deref(r.TransactionID),
		OutRefundNo:  *r.OutRefundNo,
		Outcome:      end.outcome,
		Amount:       *r.Amount.Total,
		RefundAmount: *r.Amount.Refund,
		Detail:       end.detail,
		Raw:          notifyRaw(body, n.Resource.Plaintext),
	}, nil
}

// notifyError classifies a notification the SDK refused. The handler's errors are text, so
// the signature is checked again on its own: a notification that does not verify is
// EUNAUTHORIZED whatever else is wrong with it. A verified one that is not a notification
// is EINVALID; one whose resource does not decrypt with our APIv3 key is EUNAUTHORIZED
// (it was not encrypted for us); one that decrypts to something that is not JSON is
// EINVALID.
func (c *Channel) notifyError(ctx context.Context, header http.Header, body []byte, n *notify.Request) error {
	if !c.signatureVerifies(ctx, header, body) {
		return orderpay.Errorf(orderpay.EUNAUTHORIZED, "wechat notification signature does not verify")
	}
	switch {
	case n == nil || n.Resource == nil:
		return orderpay.Errorf(orderpay.EINVALID, "wechat notification is not an encrypted resource notification")
	case n.Resource.Plaintext == "":
		return orderpay.Errorf(orderpay.EUNAUTHORIZED, "wechat notification resource does not decrypt with our APIv3 key")
	}
	return orderpay.Errorf(orderpay.EINVALID, "wechat notification resource is not JSON")
}

// signatureVerifies checks only a notification's signature headers, with the same
// validator the SDK's handler uses.
func (c *Channel) signatureVerifies(ctx context.Context, header http.Header, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/notify/wechat", bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	return c.signature.Validate(ctx, req) == nil
}

// notifyRaw is what an operator reads in the history: the envelope as received and the
// decrypted Transaction.
func notifyRaw(body []byte, plaintext string) string {
	var b strings.Builder
	b.WriteString(`{"notification":`)
	b.Write(bytes.TrimSpace(body))
	b.WriteString(`,"resource_plaintext":`)
	b.WriteString(strings.TrimSpace(plaintext))
	b.WriteString(`}`)
	return b.String()
}

// Ack is WeChat's acknowledgement: HTTP 204 without a body. 200 would do as well; the
// status decides, not the body (§B4).
func (c *Channel) Ack() orderpay.NotifyReply {
	return orderpay.NotifyReply{Status: http.StatusNoContent}
}

// begin bounds one call by the timeout and records its raw answer.
func (c *Channel) begin(ctx context.Context) (context.Context, *exchange, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	ex := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, ex), ex, cancel
}

// isRefusal reports whether an error answer is a definite refusal: a 4xx other than 429
// (rate limiting: whether the call ran is not said, §A4's reasoning applies).
func isRefusal(e *core.APIError) bool {
	return e != nil && e.StatusCode >= 400 && e.StatusCode <= 499 && e.StatusCode != http.StatusTooManyRequests
}

// describe renders why a call gave no verified 2xx answer, and returns the error answer if
// there was one.
func describe(err error, result *core.APIResult) (*core.APIError, string) {
	var apiErr *core.APIError
	if errors.As(err, &apiErr) {
		return apiErr, fmt.Sprintf("HTTP %d %s %s", apiErr.StatusCode, apiErr.Code, apiErr.Message)
	}
	if result != nil && result.Response != nil {
		// A 2xx the SDK did not accept: unsigned, badly signed, stale, or unreadable.
		return nil, fmt.Sprintf("HTTP %d not verified: %v", result.Response.StatusCode, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, "timeout: " + err.Error()
	}
	return nil, err.Error()
}

func statusDetail(result *core.APIResult) string {
	if result == nil || result.Response == nil {
		return "no answer"
	}
	return fmt.Sprintf("HTTP %d", result.Response.StatusCode)
}

// parseTime reads an RFC 3339 time; zero if empty or malformed.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// truncateRunes cuts s to at most n characters, never inside a UTF-8 sequence.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// exchange records the raw answer of one call for the attempt's history. The SDK hands
// the body back only on success, so the transport fills it in through the request context.
type exchange struct {
	status int
	body   []byte
}

func (e *exchange) raw() string {
	if e.status == 0 {
		return ""
	}
	return string(e.body)
}

type exchangeKey struct{}

// apiTransport sends the SDK's requests for https://api.mch.weixin.qq.com to the base URL
// instead (the SDK has no base URL option), and reads each answer in full, bounded, to
// record it. Rewriting is safe: the request signature covers only the path and query,
// which stay as they are.
type apiTransport struct {
	base  *url.URL
	next  http.RoundTripper
	limit int64 // the largest answer read; 0 is maxResponse
}

func (t apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "https" && req.URL.Host == strings.TrimPrefix(DefaultBaseURL, "https://") &&
		(t.base.Scheme != "https" || t.base.Host != req.URL.Host) {
		r := req.Clone(req.Context())
		r.URL.Scheme = t.base.Scheme
		r.URL.Host = t.base.Host
		r.Host = t.base.Host
		req = r
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := cmp.Or(t.limit, maxResponse)
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("wechat: read answer: %w", err)
	}
	if ex, ok := req.Context().Value(exchangeKey{}).(*exchange); ok && ex != nil {
		ex.status = resp.StatusCode
		ex.body = body[:min(len(body), maxResponse)]
	}
	if int64(len(body)) > limit {
		return nil, errors.New("wechat: answer too large")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// NotificationTrade reads the out_trade_no a notification claims, without verifying its
// signature: for a notification that failed verification, whose trade is then queried.
// The resource must still decrypt with our APIv3 key, or "" is returned.
func (c *Channel) NotificationTrade(_ http.Header, body []byte) string {
	var env struct {
		Resource struct {
			Ciphertext     string `json:"ciphertext"`
			AssociatedData string `json:"associated_data"`
			Nonce          string `json:"nonce"`
		} `json:"resource"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	plain, err := utils.DecryptAES256GCM(c.apiV3Key, env.Resource.AssociatedData, env.Resource.Nonce, env.Resource.Ciphertext)
	if err != nil {
		return ""
	}
	var tx struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	if json.Unmarshal([]byte(plain), &tx) != nil || !OutTradeNoPattern.MatchString(tx.OutTradeNo) {
		return ""
	}
	return tx.OutTradeNo
}

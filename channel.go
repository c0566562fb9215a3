package orderpay

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// Channel names.
const (
	ChannelAlipay = "alipay"
	ChannelWechat = "wechat"
)

// Outcome is what one channel call or notification definitely tells us. Adapters map every
// response to exactly one outcome (docs/channels.md §C) and never guess: anything
// that is not a verified, definite answer is OutcomeUnknown.
type Outcome string

const (
	// OutcomeAccepted: precreate/prepay returned a verified QR code.
	OutcomeAccepted Outcome = "ACCEPTED"
	// OutcomeRejected: the channel definitively refused the request; it took no effect.
	OutcomeRejected Outcome = "REJECTED"
	// OutcomePaid: a verified answer that the buyer paid the full amount.
	OutcomePaid Outcome = "PAID"
	// OutcomeNotPaid: a verified answer that nothing is paid yet, but the trade may still be
	// paid (waiting for the buyer, or not scanned yet).
	OutcomeNotPaid Outcome = "NOT_PAID"
	// OutcomeClosed: a verified answer that the trade is closed and was never paid.
	OutcomeClosed Outcome = "CLOSED"
	// OutcomeRefunded: a verified answer that the refund succeeded: the money moved back.
	OutcomeRefunded Outcome = "REFUNDED"
	// OutcomeRefundPending: the channel accepted the refund but it is not final yet (Alipay
	// without fund_change=Y, WeChat PROCESSING): query it again later. Never assumed done.
	OutcomeRefundPending Outcome = "REFUND_PENDING"
	// OutcomeRefundRetry: the channel refused the refund for now (the merchant's balance
	// cannot cover it, too many refund requests): nothing happened under this number, and
	// the same request sent again later, under the same number, may succeed.
	OutcomeRefundRetry Outcome = "REFUND_RETRY"
	// OutcomeRefundAbnormal: the refund ended at the channel without the money reaching the
	// buyer, for a reason no retry cures (WeChat ABNORMAL: the buyer's card or account can
	// no longer receive it; CLOSED; USER_ACCOUNT_ABNORMAL): a person must settle it.
	OutcomeRefundAbnormal Outcome = "REFUND_ABNORMAL"
	// OutcomeUnknown: no definite answer. The trade stays PAYING and is queried later.
	OutcomeUnknown Outcome = "UNKNOWN"
)

// PrecreateRequest asks a channel for the pay instruction of one channel order: the prepay
// step of its method (a QR code, a signed cashier URL or form, a prepay id for the wallet).
type PrecreateRequest struct {
	OutTradeNo string
	Amount     int64 // fen
	Subject    string
	// Deadline is passed to the channel (time_expire / timeout_express) so the buyer cannot
	// pay after we close the order.
	Deadline  time.Time
	NotifyURL string
	// Method is how the buyer's device pays; "" is MethodQR.
	Method PayMethod
	// Payer is the buyer's identity at the wallet, for the methods that name the payer
	// (PayerNeeded): the openid for the method's appid, or the Alipay user id.
	Payer string
	// ClientIP is the buyer's own address (WeChat H5 checks the page is opened from it).
	ClientIP string
	// ReturnURL is where the wallet sends the buyer back (Alipay PC and WAP's return_url,
	// WeChat H5's redirect_url); QuitURL where Alipay WAP sends a buyer who gives up.
	ReturnURL, QuitURL string
	// AuthCode is the buyer's payment code a till scanned (MethodBarcode): the request is
	// then the payment itself (alipay.trade.pay, scene bar_code; WeChat codepay), with no
	// notify URL (WeChat never notifies it). StoreID and TillID name the counter
	// (Alipay store_id and terminal_id; WeChat store_info.out_id); ClientIP is the till's
	// address (WeChat scene_info.device_ip).
	AuthCode, StoreID, TillID string
}

// PrecreateResult is a prepay answer: Accepted with the instruction, Rejected, or Unknown.
type PrecreateResult struct {
	Outcome Outcome
	// QRCode is a qr instruction's code; Pay the instruction of any method (for qr, the
	// payment center makes it from QRCode when the adapter leaves it nil).
	QRCode string
	Pay    *PayInstruction
	// QRExpiresAt is when the instruction stops working: the deadline, or sooner if the
	// channel limits its lifetime (a QR code or prepay id 2 h, a WeChat H5 link 5 min).
	QRExpiresAt time.Time
	Detail      string // the channel's code and message, for history and logs
	Raw         string
	// Refusal classes a Rejected barcode payment's reason for the cashier. A barcode
	// answer is otherwise Paid (the channel said paid: the payment center confirms it by a
	// query before believing it) or Unknown (the buyer is still confirming, 10003 and
	// USERPAYING, or no definite answer): never Accepted.
	Refusal BarcodeRefusal
}

// QueryResult is a trade query answer: Paid, NotPaid, Closed or Unknown.
type QueryResult struct {
	Outcome Outcome
	TradeNo string
	Amount  int64 // the trade's total, fen, when the channel reported it
	PaidAt  time.Time
	Detail  string
	Raw     string
}

// CloseResult is a close answer: Closed (the trade is closed and was never paid), NotPaid
// (Alipay: the trade does not exist yet because nobody scanned; the close changed nothing
// and only the deadline passed at precreate stops a later scan), or Unknown (including "the
// trade is paid": a close answer alone never decides a payment; query after closing).
type CloseResult struct {
	Outcome Outcome
	Detail  string
	Raw     string
}

// RefundRequest refunds Amount of a paid trade. OutRefundNo identifies this refund at the
// channel (out_request_no / out_refund_no): resending the same request with the same number
// never refunds twice, so a refund whose answer was unknown is retried with it unchanged.
type RefundRequest struct {
	OutTradeNo  string
	OutRefundNo string
	Amount      int64 // this refund, fen
	Total       int64 // the trade's total, fen (WeChat requires it)
	Reason      string
}

// RefundResult is a refund or refund-query answer, one of six classes:
//   - Refunded: the money went back;
//   - RefundPending: accepted, not final yet: query again;
//   - RefundRetry: refused for now (balance, frequency): send again later, same number;
//   - Rejected: refused for good (the amount or the trade is wrong: a bug to alert on);
//   - RefundAbnormal: ended without the money reaching the buyer: a person must act;
//   - Unknown: no definite answer: send again or query, never taken as failed.
type RefundResult struct {
	Outcome  Outcome
	Amount   int64 // this refund's amount as the channel reported it, fen; 0 if not reported
	RefundID string
	Detail   string
	Raw      string
}

// Notification is a channel's asynchronous notification that passed the adapter's checks:
// signature, app_id/mchid and seller. The payment center still checks the order and the
// amount against its own records before applying it.
//
// A payment notification has Outcome OutcomePaid (anything else is recorded, not applied).
// A refund notification (WeChat REFUND.SUCCESS, REFUND.ABNORMAL or REFUND.CLOSED; Alipay's
// trade_status_sync after a refund, which names it by out_biz_no) has OutRefundNo set, and
// Outcome OutcomeRefunded (the money went back) or OutcomeRefundAbnormal (the refund was
// closed or ended abnormally: the money did not reach the buyer under this number, a person
// must act, and Detail says why).
type Notification struct {
	Channel    string
	NotifyID   string
	OutTradeNo string
	TradeNo    string
	Outcome    Outcome
	Amount     int64 // the trade's total, fen
	PaidAt     time.Time
	// OutRefundNo names the refund a refund notification is about; "" for a payment.
	OutRefundNo string
	// RefundAmount is that refund's amount when the channel says it (WeChat), fen; 0 if not.
	RefundAmount int64
	Detail       string // the channel's words on a refund that did not happen
	Raw          string
}

// NotifyReply is the exact HTTP answer a channel expects for a handled notification.
type NotifyReply struct {
	Status      int
	ContentType string
	Body        []byte
}

// Channel is one payment channel as the payment center sees it.
type Channel interface {
	Name() string
	Precreate(ctx context.Context, req PrecreateRequest) PrecreateResult
	Query(ctx context.Context, outTradeNo string) QueryResult
	Close(ctx context.Context, outTradeNo string) CloseResult
	Refund(ctx context.Context, req RefundRequest) RefundResult
	QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) RefundResult
	// VerifyNotification checks a notification's signature and identity fields and decodes
	// it. A forged or foreign notification is EUNAUTHORIZED; a malformed one EINVALID.
	VerifyNotification(ctx context.Context, header http.Header, body []byte) (*Notification, error)
	// Ack is the reply that tells the channel to stop resending.
	Ack() NotifyReply
	// NotificationTrade is the out_trade_no a notification claims to be about, read
	// without trusting it (for a notification that failed verification: its trade is
	// queried, never updated from it), or "" if none can be read.
	NotificationTrade(header http.Header, body []byte) string
}

// MethodChannels is a channel adapter whose methods are not all made under one account at
// the channel: Alipay's in-app payments under an app of their own. ForMethod is the adapter
// that makes, queries, closes and refunds the trades of method m (the adapter itself for
// the methods made under its own account). The payment center keys its calls by
// out_trade_no only, so it asks for the attempt's method's adapter (ChannelFor) at every
// call about an attempt; a trade asked about under another account is one that account
// does not know, and its "no such trade" says nothing about the trade.
type MethodChannels interface {
	ForMethod(m PayMethod) Channel
}

// ChannelFor is the adapter every call about an attempt of method m goes to: ch.ForMethod(m)
// when ch is a MethodChannels, else ch itself. "" is MethodQR, the method of attempts made
// before methods.
func ChannelFor(ch Channel, m PayMethod) Channel {
	if m == "" {
		m = MethodQR
	}
	if mc, ok := ch.(MethodChannels); ok {
		if sub := mc.ForMethod(m); sub != nil {
			return sub
		}
	}
	return ch
}

// MaxClockSkew is how far a channel's clock may be from this machine's before a credentials
// check calls it a problem: the channels refuse signatures stamped minutes off (WeChat Pay at
// 5 minutes), and deadlines passed to them would be off by as much.
const MaxClockSkew = time.Minute

// FieldError is a channel adapter's refusal of the credentials in its configuration, naming
// the fields at fault. Text writes each field in braces, "{AppCertPEM} does not match
// {AppPrivateKeyPEM}"; Error names them as the Go fields they are, and a loader that reads
// them from a file of its own (the channels file) names them as the file does, with Named.
type FieldError struct {
	Channel string // the adapter's name, which Error puts first
	Text    string
	Err     error // the cause, after the text; nil if none
}

var fieldRef = regexp.MustCompile(`\{([A-Za-z0-9_.]+)\}`)

// Named is the text with each field written as name says, and the cause.
func (e *FieldError) Named(name func(field string) string) string {
	s := fieldRef.ReplaceAllStringFunc(e.Text, func(ref string) string { return name(ref[1 : len(ref)-1]) })
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FieldError) Error() string {
	return e.Channel + ": " + e.Named(func(field string) string { return field })
}

func (e *FieldError) Unwrap() error { return e.Err }

// ChannelDescription is what an operator may see of a configured channel (GET
// /admin/channels, the startup log): its mode and ids in the channels file's words, and the
// SHA-256 fingerprints, in lowercase hex, of the public keys and certificates it verifies
// with. Both channels give this one shape, sharing the names of the fields they have in
// common; a field that is not the channel's, or not its mode's, is left out. It never
// holds a secret: no private key, no APIv3 key, no AppSecret.
type ChannelDescription struct {
	Channel string `json:"channel"` // ChannelAlipay or ChannelWechat
	// Mode is written as in the channels file: Alipay's "key" or "cert", WeChat Pay's
	// "pubkey" or "certificate".
	Mode string `json:"mode"`
	// AppID is the app: Alipay's app_id (the app the calls are signed as), WeChat Pay's
	// app_id (Native and H5 orders are made for it).
	AppID string `json:"app_id"`
	// SellerID is the Alipay merchant's PID; MchID and MerchantSerial are the WeChat Pay
	// merchant number and its API certificate's serial.
	SellerID       string `json:"seller_id,omitempty"`
	MchID          string `json:"mch_id,omitempty"`
	MerchantSerial string `json:"merchant_serial,omitempty"`
	// PublicKeySHA256 fingerprints the public key that verifies the channel's answers and
	// notifications, the SHA-256 of its PKIX DER: Alipay's in either mode (in cert mode the
	// key of alipay_cert_file), WeChat Pay's in pubkey mode, named PublicKeyID.
	PublicKeySHA256 string `json:"public_key_sha256,omitempty"`
	PublicKeyID     string `json:"public_key_id,omitempty"`
	// Alipay's cert mode: the SHA-256 of each certificate's DER, as `openssl x509 -noout
	// -fingerprint -sha256` prints it without colons: app_cert_file's and
	// alipay_cert_file's first certificate, and every certificate of alipay_root_cert_file in
	// file order.
	AppCertSHA256        string   `json:"app_cert_sha256,omitempty"`
	AlipayCertSHA256     string   `json:"alipay_cert_sha256,omitempty"`
	AlipayRootCertSHA256 []string `json:"alipay_root_cert_sha256,omitempty"`
	// PlatformCertificates is WeChat Pay's certificate mode: the certificates downloaded.
	PlatformCertificates *PlatformCertificates `json:"platform_certificates,omitempty"`
	// The apps and pages of WeChat Pay's methods beside Native, as the file names them, and
	// the official account's web OAuth when its AppSecret is given (never the secret).
	JSAPIAppID string   `json:"jsapi_appid,omitempty"`
	MiniAppID  string   `json:"mini_appid,omitempty"`
	AppAppID   string   `json:"app_appid,omitempty"`
	H5Domains  []string `json:"h5_domains,omitempty"`
	JSAPIPaths []string `json:"jsapi_paths,omitempty"`
	OAuth      string   `json:"oauth,omitempty"`
	// InApp describes Alipay's app of in-app payments ([alipay.inapp]) the same way, when
	// there is one.
	InApp *ChannelDescription `json:"inapp,omitempty"`
}

// PlatformCertificates is the state of WeChat Pay's platform certificates in certificate
// mode.
type PlatformCertificates struct {
	// Certificates are the ones in use, the newest first; none before the first download.
	Certificates []PlatformCertificate `json:"certificates"`
	// RefreshIntervalSeconds is how often they are downloaded again.
	RefreshIntervalSeconds int64 `json:"refresh_interval_seconds"`
	// Downloads is how many downloads were started; DownloadedAt is when the last good one
	// ended (absent before one did), and DownloadError why the last one failed, if it did.
	Downloads     int        `json:"downloads"`
	DownloadedAt  *time.Time `json:"downloaded_at,omitempty"`
	DownloadError string     `json:"download_error,omitempty"`
}

// PlatformCertificate is one WeChat Pay platform certificate: its serial, the SHA-256 of its
// public key's PKIX DER, and when it expires.
type PlatformCertificate struct {
	Serial          string    `json:"serial"`
	PublicKeySHA256 string    `json:"public_key_sha256"`
	ExpireTime      time.Time `json:"expire_time"`
}

// CredentialCheck is what one harmless signed call to a channel (a query of a trade that
// does not exist) shows of the credentials configured for it.
type CredentialCheck struct {
	Channel  string `json:"channel"`
	Endpoint string `json:"endpoint"`
	Mode     string `json:"mode"`
	// App is the app id the call was signed as, for a channel whose methods are made under
	// apps of their own (Alipay: app_id, and the in-app payments' app); "" otherwise.
	App string `json:"app,omitempty"`
	// Reachable: an HTTP answer came back.
	Reachable bool `json:"reachable"`
	// SignatureAccepted: the channel took the request as the merchant's (its app id or
	// merchant number, key and serial).
	SignatureAccepted bool `json:"signature_accepted"`
	// AnswerVerified: the channel's answer verified with the configured public key or
	// certificates.
	AnswerVerified bool `json:"answer_verified"`
	// ClockSkew is the channel's clock minus this machine's, read off its answer; SkewKnown
	// says whether the answer carried a time at all.
	ClockSkew time.Duration `json:"clock_skew_ns"`
	SkewKnown bool          `json:"skew_known"`
	// Problem is what is wrong, in words a merchant understands; "" when healthy.
	Problem string `json:"problem,omitempty"`
	// Inconclusive: the channel answered without saying anything of the credentials (a
	// system error, a rate limit): try again.
	Inconclusive bool `json:"inconclusive,omitempty"`
	// Detail is the channel's own code and message.
	Detail string `json:"detail,omitempty"`
}

// Healthy reports whether the check found nothing wrong.
func (c CredentialCheck) Healthy() bool { return c.Problem == "" }

// SkewProblem is the problem a skew of d is, or "" if it is within MaxClockSkew.
func SkewProblem(channel string, d time.Duration) string {
	if d.Abs() <= MaxClockSkew {
		return ""
	}
	ahead := "ahead of"
	if d < 0 {
		ahead = "behind"
	}
	// To the minute: the channel's clock is read to the second, and minutes are what matter.
	return fmt.Sprintf("%s's clock is %s %s this machine's: set this machine's clock right (NTP); signatures and pay deadlines depend on it",
		channel, d.Abs().Round(time.Minute), ahead)
}

// CredentialChecker is a channel adapter that can check its credentials.
type CredentialChecker interface {
	CheckCredentials(ctx context.Context) CredentialCheck
}

// Package alipay is the Alipay channel adapter, built on github.com/smartwalle/alipay/v3:
// face-to-face QR codes (precreate), the pc, wap, app and inapp methods (methods.go), and
// barcode payments with their cancel (barcode.go), whose trades are queried, closed,
// refunded and notified the same way.
//
// It maps every gateway answer and notification to exactly one orderpay.Outcome following
// docs/channels.md §C: anything that is not a verified, definite answer is
// OutcomeUnknown, so the payment stays PAYING and is queried later.
package alipay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// Defaults applied by New.
const (
	// DefaultTimeout bounds one gateway call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// IdleConnsPerGateway is how many connections to the gateway are kept open between
	// calls when Config.HTTPClient has no transport of its own. Go's default keeps 2, so
	// under load most calls would dial (and, to the real gateway, shake hands over TLS)
	// again.
	IdleConnsPerGateway = 64
	// QRLifetime is the longest an Alipay precreate QR code can be scanned, whatever the
	// order's timeout says (docs/channels.md §A3).
	QRLifetime = 2 * time.Hour
)

const (
	// timeLayout is Alipay's timestamp format, always in China Standard Time.
	timeLayout = "2006-01-02 15:04:05"
	// maxResponse bounds a gateway response body; real ones are a few kilobytes.
	maxResponse = 1 << 20
	// productCode is the face-to-face product.
	productCode = "FACE_TO_FACE_PAYMENT"
)

// cst is China Standard Time. A fixed zone, so that nothing depends on the machine's tz
// database or its local zone.
var cst = time.FixedZone("CST", 8*3600)

// Config configures the adapter. Credentials are never logged.
type Config struct {
	AppID    string // required
	SellerID string // the merchant PID (2088…), checked in every notification; required
	// AppPrivateKeyPEM signs requests: PKCS#1 or PKCS#8 PEM. Required.
	AppPrivateKeyPEM string

	// The app's signing mode, as set at Alipay (接口加签方式): set AlipayPublicKeyPEM for
	// public-key mode (公钥模式), or all three certificates for certificate mode
	// (公钥证书模式); anything else is an error from New.

	// AlipayPublicKeyPEM verifies responses and notifications in public-key mode: PKIX
	// "PUBLIC KEY" PEM.
	AlipayPublicKeyPEM string
	// AppCertPEM is the content (not the path) of appCertPublicKey_<app_id>.crt, the
	// certificate of AppPrivateKeyPEM's public key; its SN is sent as app_cert_sn.
	AppCertPEM string
	// AlipayCertPEM is the content of alipayCertPublicKey_RSA2.crt; its key verifies
	// responses and notifications, and responses must name it by alipay_cert_sn. An
	// answer naming another certificate (Alipay renewed it) does not verify, so its
	// outcome is Unknown until this is updated: the adapter does not fetch certificates
	// (alipay.open.app.alipaycert.download), because the SDK would use a fetched
	// certificate without checking it against the root.
	AlipayCertPEM string
	// AlipayRootCertPEM is the content of alipayRootCert.crt; the SN of its RSA-signed
	// certificates is sent as alipay_root_cert_sn.
	AlipayRootCertPEM string

	// GatewayURL is the OpenAPI gateway, e.g. https://openapi.alipay.com/gateway.do or the
	// simulator's /gateway.do. Defaults to the Alipay sandbox gateway.
	GatewayURL string
	// HTTPClient sends gateway requests. It is copied, never modified. Defaults to a new
	// client on a copy of http.DefaultTransport that keeps IdleConnsPerGateway connections idle.
	HTTPClient *http.Client
	// Timeout bounds each gateway call; a call that runs out of time is OutcomeUnknown.
	// Defaults to DefaultTimeout (10 s).
	Timeout time.Duration
	// Clock is used to compute QRExpiresAt. Defaults to orderpay.SystemClock.
	Clock orderpay.Clock

	// InApp is the app in-app payments (alipay.trade.create) are made under when it is not
	// AppID: a mini program's, say, of the same seller. Nil: they are made under AppID. Its
	// trades are created, queried, closed and refunded, and their refunds queried, under it
	// (ForMethod), with its own keys in its own signing mode, through the same gateway and
	// notify_url; its notifications, which carry its app id, are verified with its Alipay
	// public key or certificate (VerifyNotification).
	InApp *AppKeys
}

// AppKeys are one app's id and credentials, as Config has the main app's: the private key,
// and exactly AlipayPublicKeyPEM (public-key mode) or the three certificates (certificate
// mode), each as in Config.
type AppKeys struct {
	AppID              string
	AppPrivateKeyPEM   string
	AlipayPublicKeyPEM string
	AppCertPEM         string
	AlipayCertPEM      string
	AlipayRootCertPEM  string
}

// Channel is the Alipay adapter. It is safe for concurrent use.
type Channel struct {
	client *sdk.Client
	// alipayKey verifies notifications whose signature covers alipay_cert_sn, which the
	// SDK leaves out (notify.go).
	alipayKey *rsa.PublicKey
	desc      orderpay.ChannelDescription
	appID     string
	sellerID  string
	timeout   time.Duration
	clock     orderpay.Clock
	gateway   string
	// download fetches bill files: plain GETs of the URL a signed answer gave (bill.go).
	download *http.Client

	// inApp is the adapter of Config.InApp, nil without one. main is set in an in-app
	// adapter only: the adapter of AppID, asked about a trade the in-app app does not know
	// (inapp.go).
	inApp *Channel
	main  *Channel
}

var _ orderpay.Channel = (*Channel)(nil)

// New returns an adapter for cfg.
func New(cfg Config) (*Channel, error) {
	switch {
	case cfg.AppID == "":
		return nil, errors.New("alipay: AppID is required")
	case cfg.SellerID == "":
		return nil, errors.New("alipay: SellerID is required")
	case cfg.AppPrivateKeyPEM == "":
		return nil, fieldError("{AppPrivateKeyPEM} is required", nil)
	case cfg.Timeout < 0:
		return nil, errors.New("alipay: Timeout must not be negative")
	}
	mode, err := cfg.mode()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = orderpay.SystemClock{}
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	plain := hc
	next := hc.Transport
	if next == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = IdleConnsPerGateway
		next = t
	}
	hc.Transport = gatewayTransport{next: next}
	// The in-app app's adapter shares the connections to the gateway.
	shared := plain
	shared.Transport = next

	client, err := sdk.New(cfg.AppID, cfg.AppPrivateKeyPEM, false,
		sdk.WithSandboxGateway(cfg.GatewayURL),
		sdk.WithHTTPClient(&hc),
		sdk.WithTimeLocation(cst),
	)
	if err != nil {
		// The SDK's error describes the parsing failure, not the key itself.
		return nil, fieldError("{AppPrivateKeyPEM}", err)
	}
	alipayKey, desc, err := loadCredentials(client, cfg, mode)
	if err != nil {
		return nil, err
	}
	c := &Channel{
		client:    client,
		alipayKey: alipayKey,
		desc:      desc,
		appID:     cfg.AppID,
		sellerID:  cfg.SellerID,
		timeout:   cfg.Timeout,
		clock:     cfg.Clock,
		gateway:   cfg.GatewayURL,
		download:  &plain,
	}
	if cfg.InApp != nil {
		if c.inApp, err = newInApp(cfg, &shared); err != nil {
			return nil, err
		}
		c.inApp.main = c
	}
	return c, nil
}

// Name returns orderpay.ChannelAlipay.
func (c *Channel) Name() string { return orderpay.ChannelAlipay }

var outTradeNoPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// Precreate makes the pay instruction of req's method, passing the deadline as time_expire
// so that the buyer cannot pay after we close the order: a QR code (precreateQR), a pc, wap
// or app order signed here (signLocally), an in-app trade (tradeCreate, under the in-app
// app when there is one), or a barcode payment, which is the payment itself (barcodePay,
// barcode.go). Another method is Rejected unsent.
func (c *Channel) Precreate(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	switch req.Method {
	case "", orderpay.MethodQR:
		return c.precreateQR(ctx, req)
	case orderpay.MethodPC, orderpay.MethodWAP, orderpay.MethodApp:
		return c.signLocally(req)
	case orderpay.MethodInApp:
		return c.inAppChannel().tradeCreate(ctx, req)
	case orderpay.MethodBarcode:
		return c.barcodePay(ctx, req)
	}
	return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: Alipay does not pay by " + string(req.Method)}
}

// precreateQR asks Alipay for a QR code (alipay.trade.precreate).
//
// Outcomes (docs/channels.md §C): a verified 10000 with a qr_code is Accepted; a verified business
// refusal (40004 other than ACQ.SYSTEM_ERROR, 40001/40002/40003/40006/20001) is Rejected;
// everything else (transport error or timeout, non-2xx, non-JSON, an unsigned or
// unverifiable body, 20000, 40004 ACQ.SYSTEM_ERROR, 40005) is Unknown. A request that
// breaks Alipay's field rules, or whose deadline has passed once truncated to the second,
// is Rejected without being sent.
func (c *Channel) precreateQR(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	if msg := checkPrecreate(req); msg != "" {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	now := c.clock.Now()
	// Alipay's time_expire has whole seconds; formatting truncates, so the channel's
	// deadline is never later than ours. One already past once truncated is refused by
	// Alipay (time_expire not in the future): it is not sent.
	expires, timeExpire := channelDeadline(orderpay.MethodQR, req.Deadline)
	if !expires.After(now) {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: the deadline has passed (time_expire " + timeExpire + ")"}
	}
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradePreCreateRsp, error) {
		return c.client.TradePreCreate(ctx, sdk.TradePreCreate{Trade: sdk.Trade{
			NotifyURL:   req.NotifyURL,
			Subject:     req.Subject,
			OutTradeNo:  req.OutTradeNo,
			TotalAmount: orderpay.FormatYuan(req.Amount),
			ProductCode: productCode,
			TimeExpire:  timeExpire,
		}})
	})
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res
	}
	res.Detail = describeCode(rsp.Error)

	switch rsp.Code {
	case sdk.CodeSuccess:
		if rsp.QRCode == "" || (rsp.OutTradeNo != "" && rsp.OutTradeNo != req.OutTradeNo) {
			res.Detail += ": success without a QR code for this out_trade_no"
			return res
		}
		res.Outcome = orderpay.OutcomeAccepted
		res.QRCode = rsp.QRCode
		// A code is valid for at most 2 h from its creation; we count from before the
		// call, which can only make our estimate earlier than the channel's.
		res.QRExpiresAt = req.Deadline
		if limit := now.Add(QRLifetime); limit.Before(res.QRExpiresAt) {
			res.QRExpiresAt = limit
		}
	default:
		res.Outcome = precreateOutcome(rsp.Error)
	}
	return res
}

// precreateOutcome is what a verified answer other than 10000 to a call that opens a trade
// (precreate, trade.create) means: Rejected for a business refusal (40004 but
// ACQ.SYSTEM_ERROR and ACQ.TRADE_HAS_SUCCESS, 40001/40002/40003/40006/20001), Unknown for
// everything else.
func precreateOutcome(e sdk.Error) orderpay.Outcome {
	switch e.Code {
	case sdk.CodeBusinessFailed:
		switch e.SubCode {
		case "ACQ.SYSTEM_ERROR":
			// "业务处理结果是未知的" (§A4): the trade may exist.
		case "ACQ.TRADE_HAS_SUCCESS":
			// This out_trade_no is already paid: not a refusal but the best news there
			// is. Unknown lets the follow-up query find the payment and apply it with
			// its verified amount, instead of closing a paid attempt.
		default:
			return orderpay.OutcomeRejected
		}
	case sdk.CodeMissingParam, sdk.CodeInvalidParam, sdk.CodeInsufficientConditions,
		sdk.CodePermissionDenied, sdk.CodeInvalidAuthToken:
		return orderpay.OutcomeRejected
	}
	// 20000 (service unavailable), 40005 (rate limited: unverified whether it ran) and any
	// code we do not know stay Unknown.
	return orderpay.OutcomeUnknown
}

// checkPrecreate applies Alipay's field rules (docs/channels.md §A3) before sending, and returns
// why req breaks them, or "".
func checkPrecreate(req orderpay.PrecreateRequest) string {
	switch {
	case !outTradeNoPattern.MatchString(req.OutTradeNo):
		return "out_trade_no must be 1 to 64 letters, digits or underscores"
	case req.Amount < 1 || req.Amount > orderpay.MaxChannelAmount:
		return "amount must be between 0.01 and 100000000 yuan"
	case req.Subject == "" || strings.ContainsAny(req.Subject, "/=&"):
		return "subject must be non-empty and contain no / = &"
	case req.Deadline.IsZero():
		return "a deadline is required so the buyer cannot pay after the order closes"
	}
	return ""
}

// Query asks Alipay for the trade's status (alipay.trade.query).
//
// Outcomes (docs/channels.md §C): a verified TRADE_SUCCESS or TRADE_FINISHED is Paid, with the
// trade's total_amount, trade_no and send_pay_date (PaidAt is zero if send_pay_date is
// missing or malformed); WAIT_BUYER_PAY is NotPaid; TRADE_CLOSED is Closed unless it shows a
// payment (send_pay_date): a paid trade fully refunded is also TRADE_CLOSED, and is Paid
// (the refund is recorded elsewhere), as WeChat's REFUND is.
//
// 40004 ACQ.TRADE_NOT_EXIST is NotPaid: a precreated trade only exists at Alipay once the
// buyer scans the code (§A3), and a pc, wap or app trade once the buyer pays the order
// signed for it (§A6), so before that "not exist" means "nobody acted yet". It does not
// mean the trade can never be paid: the caller decides with its own deadline. Only after
// our deadline plus the 2 h QR lifetime (or after a successful close) may it treat NotPaid
// as final; for the signed orders, whose time_expire is never later than our deadline,
// the deadline itself.
//
// Everything else, including transport errors, unsigned or unverifiable answers and
// refusals of the query itself, is Unknown.
//
// An in-app adapter whose app does not know the trade asks the main app (inapp.go): not
// existing is NotPaid only when neither app has it.
func (c *Channel) Query(ctx context.Context, outTradeNo string) orderpay.QueryResult {
	res, notExist := c.query(ctx, outTradeNo)
	if notExist && c.main != nil {
		// Not this in-app app's trade: perhaps the main app's (inapp.go).
		if other, otherNotExist := c.main.query(ctx, outTradeNo); !otherNotExist {
			other.Detail = mainAppSays + other.Detail
			return other
		}
	}
	return res
}

// query is Query of this app alone, and whether the answer was ACQ.TRADE_NOT_EXIST.
func (c *Channel) query(ctx context.Context, outTradeNo string) (res orderpay.QueryResult, notExist bool) {
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeQueryRsp, error) {
		return c.client.TradeQuery(ctx, sdk.TradeQuery{OutTradeNo: outTradeNo})
	})
	res = orderpay.QueryResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res, false
	}
	res.Detail = describeCode(rsp.Error)

	switch {
	case rsp.Code == sdk.CodeSuccess:
		if rsp.OutTradeNo != "" && rsp.OutTradeNo != outTradeNo {
			res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
			return res, false
		}
		res.TradeNo = rsp.TradeNo
		res.Detail += " " + string(rsp.TradeStatus)
		amount, amountErr := orderpay.ParseYuan(rsp.TotalAmount)
		if amountErr == nil {
			res.Amount = amount
		}
		switch rsp.TradeStatus {
		case sdk.TradeStatusSuccess, sdk.TradeStatusFinished:
			if amountErr != nil {
				// Paid, but for an amount we cannot read exactly: never guess.
				res.Detail += ": unreadable total_amount"
				return res, false
			}
			res.Outcome = orderpay.OutcomePaid
			res.PaidAt = parseTime(rsp.SendPayDate)
		case sdk.TradeStatusWaitBuyerPay:
			res.Outcome = orderpay.OutcomeNotPaid
		case sdk.TradeStatusClosed:
			if rsp.SendPayDate != "" {
				// Paid, then fully refunded (§A3: TRADE_CLOSED covers both). The buyer did
				// pay, so it is Paid, like WeChat's REFUND (§C); the refund is the payment
				// center's record to keep, not a reason to query forever.
				if amountErr != nil {
					res.Detail += ": closed after payment, unreadable total_amount"
					return res, false
				}
				res.Outcome = orderpay.OutcomePaid
				res.PaidAt = parseTime(rsp.SendPayDate)
				res.Detail += ": paid, then fully refunded"
				return res, false
			}
			res.Outcome = orderpay.OutcomeClosed
		}
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST":
		res.Outcome, notExist = orderpay.OutcomeNotPaid, true
	}
	return res, notExist
}

// Ack is Alipay's acknowledgement: HTTP 200 with exactly the 7 bytes "success". Anything
// else, even with a trailing newline, makes Alipay resend (§A5).
func (c *Channel) Ack() orderpay.NotifyReply {
	return orderpay.NotifyReply{
		Status:      http.StatusOK,
		ContentType: "text/plain; charset=utf-8",
		Body:        []byte("success"),
	}
}

// parseTime reads an Alipay timestamp in China Standard Time; zero if empty or malformed.
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation(timeLayout, s, cst)
	if err != nil {
		return time.Time{}
	}
	return t
}

// describeCode renders a verified answer's codes for history and logs.
func describeCode(e sdk.Error) string {
	d := string(e.Code) + " " + e.Msg
	if e.SubCode != "" {
		d += " " + e.SubCode
	}
	if e.SubMsg != "" {
		d += " (" + e.SubMsg + ")"
	}
	return d
}

// describeError renders why a call gave no verified answer.
func describeError(err error) string {
	var unsigned *sdk.Error
	if errors.As(err, &unsigned) {
		// The SDK returns the body as an *Error when the answer carries no signature: its
		// content is unverified and only recorded.
		if unsigned == nil {
			return "unsigned response without content"
		}
		return "unsigned response: " + describeCode(*unsigned)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout: " + err.Error()
	}
	return err.Error()
}

// call runs one gateway call within the adapter's timeout and returns the SDK's verified
// answer with the raw reply. When there is no verified answer (a transport error or
// timeout, a non-2xx status, an unsigned or unverifiable body) the answer is nil and
// detail says why: the outcome is then Unknown, whatever the call was.
func call[R any](ctx context.Context, c *Channel, do func(ctx context.Context) (*R, error)) (answer *R, raw, detail string) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, ex := withExchange(ctx)
	rsp, err := do(ctx)
	switch {
	case err != nil:
		return nil, ex.raw(), describeError(err)
	case rsp == nil:
		return nil, ex.raw(), "empty response"
	}
	return rsp, ex.raw(), ""
}

// exchange records the raw HTTP answer of one gateway call for the attempt's history. The
// SDK does not expose it, so the transport fills it in through the request context.
type exchange struct {
	status int
	body   []byte
	date   string // the answer's Date header: the gateway's clock, for a credentials check
}

func (e *exchange) raw() string {
	if e.status == 0 {
		return ""
	}
	return string(e.body)
}

type exchangeKey struct{}

func withExchange(ctx context.Context) (context.Context, *exchange) {
	ex := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, ex), ex
}

// gatewayTransport reads each gateway response in full (bounded), records it, and turns
// any non-2xx status into an error. The SDK looks only at the body, but a 5xx is a gateway
// failure whatever its body says, so its result is unknown (§C).
type gatewayTransport struct {
	next http.RoundTripper
}

func (t gatewayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("alipay gateway: read response: %w", err)
	}
	if ex, ok := req.Context().Value(exchangeKey{}).(*exchange); ok {
		ex.status = resp.StatusCode
		ex.body = body[:min(len(body), maxResponse)]
		ex.date = resp.Header.Get("Date")
	}
	if len(body) > maxResponse {
		return nil, errors.New("alipay gateway: response too large")
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("alipay gateway: HTTP %d", resp.StatusCode)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// NotificationTrade reads the out_trade_no a notification claims, without verifying
// anything: for a notification that failed verification, whose trade is then queried.
func (c *Channel) NotificationTrade(_ http.Header, body []byte) string {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	if no := values.Get("out_trade_no"); outTradeNoPattern.MatchString(no) {
		return no
	}
	return ""
}

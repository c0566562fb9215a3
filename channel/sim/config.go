package sim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"orderpay"
)

// Defaults applied by New (see Config).
const (
	// DefaultTimeScale runs simulated time at wall-clock speed.
	DefaultTimeScale = 1.0
	// DefaultQRLifetime is how long a precreated Alipay QR code can be scanned: at most 2 h
	// whatever the order's own timeout says (docs/channels.md §A3).
	DefaultQRLifetime = 2 * time.Hour
	// DefaultNotifyTimeout bounds one notification attempt when Config.HTTPClient is nil.
	DefaultNotifyTimeout = 10 * time.Second
	// DefaultPayCodeLifetime is how long a buyer's payment code (付款码) can be scanned. A
	// wallet shows a new code about every minute and the channels take a code for a short
	// while after; two minutes of simulated time is the simulator's choice.
	DefaultPayCodeLifetime = 2 * time.Minute
	// DefaultMaxPayCodes bounds the payment codes alive at once: POST /sim/wallet/codes
	// is unauthenticated, and each code is kept in memory.
	DefaultMaxPayCodes = 1000
	// DefaultWechatUserPayingFor is how long WeChat Pay keeps a barcode order USERPAYING
	// while the buyer's password dialog is open before it ends unpaid (PAYERROR).
	DefaultWechatUserPayingFor = 60 * time.Second
)

// AlipayClassicNotifySchedule is the classic documented Alipay resend schedule (protocols
// §A5): after the first, immediate attempt, resend after 4m, 10m, 10m, 1h, 2h, 6h and 15h,
// i.e. 8 attempts in about 25 hours. It is the default Config.AlipayNotifySchedule.
func AlipayClassicNotifySchedule() []time.Duration {
	return []time.Duration{
		4 * time.Minute, 10 * time.Minute, 10 * time.Minute,
		time.Hour, 2 * time.Hour, 6 * time.Hour, 15 * time.Hour,
	}
}

// AlipayImmediateResendNotifySchedule is the newer text of the schedule (docs/channels.md §A5, §D):
// three immediate resends, then the classic intervals. The current official schedule is
// unverified, so the simulator can play either.
func AlipayImmediateResendNotifySchedule() []time.Duration {
	return append([]time.Duration{0, 0, 0}, AlipayClassicNotifySchedule()...)
}

// WechatNotifySchedule returns WeChat Pay's documented notification retry schedule (protocols
// §B4): after the first, immediate attempt, retry after 15s, 15s, 30s, 3m, 10m, 20m, 30m,
// 30m, 30m, 60m, 3h, 3h, 3h, 6h and 6h, i.e. 16 attempts in 24h4m. It is the default
// Config.WechatNotifySchedule.
func WechatNotifySchedule() []time.Duration {
	return []time.Duration{
		15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute,
		10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute,
		60 * time.Minute, 3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour,
	}
}

// WechatClosePaid is how the simulated WeChat Pay answers a close of a paid order. Whether
// v3 refuses it is unverified (docs/channels.md §D: v2 answers ORDERPAID), so both are simulated.
// In both cases the order stays paid.
type WechatClosePaid string

const (
	// WechatClosePaidRefused answers 400 ORDERPAID "订单已支付", like v2. The default.
	WechatClosePaidRefused WechatClosePaid = "refused"
	// WechatClosePaidNoContent answers 204 as for an unpaid order, so that only a query
	// after the close reveals the payment.
	WechatClosePaidNoContent WechatClosePaid = "no_content"
)

// Config configures a Simulator. Zero fields take the documented defaults, applied in one
// place (withDefaults) and checked in validate.
type Config struct {
	// Keys are the merchant and channel credentials. Required.
	Keys *Keys

	// StateDir is where the simulator keeps what the channels remember (trades, refunds,
	// payment codes, short accounts, notifications still due; never a key), so that a new
	// Simulator on the same directory goes on where the last one stopped (state.go). It is
	// created (0700) if missing; its journal is 0600. "" keeps everything in memory only.
	// Two simulators must not share one.
	StateDir string
	// HoldDue makes New keep the notifications the last run left due until SendDue, for a
	// simulator that starts before the merchant it notifies can take them (serve's
	// built-in one starts before serve's API listens).
	HoldDue bool

	// Clock is the simulated time used for deadlines, QR lifetimes, trade times and
	// notification timestamps. Tests move it instead of sleeping. Defaults to the wall
	// clock (orderpay.SystemClock).
	Clock orderpay.Clock

	// TimeScale speeds up the notification retry schedule: every retry delay is divided by
	// it, so 60 means a simulated minute passes in one real second. It does not move Clock.
	// Must be positive. Defaults to 1.
	TimeScale float64

	// AlipayNotifySchedule is the Alipay notification resend schedule: the delay before each
	// retry after the first, immediate attempt. Attempts stop at the first acknowledgement
	// or after len(AlipayNotifySchedule)+1 attempts. Nil defaults to
	// AlipayClassicNotifySchedule (8 attempts in total); a non-nil empty slice means a
	// single attempt and no retries.
	AlipayNotifySchedule []time.Duration

	// WechatNotifySchedule is the WeChat Pay notification retry schedule, with the same
	// rules as AlipayNotifySchedule. Nil defaults to WechatNotifySchedule() (16 attempts in
	// 24h4m); a non-nil empty slice means a single attempt.
	WechatNotifySchedule []time.Duration

	// AlipayMode is the simulated Alipay apps' signing mode, the main app's and the in-app
	// app's alike: AlipayModeKey (公钥模式) or AlipayModeCert (公钥证书模式, which needs
	// Keys.AlipayCerts, and the in-app app's). Defaults to AlipayModeKey.
	AlipayMode AlipayMode

	// AlipayNotifyCertSN is what certificate-mode notifications do with alipay_cert_sn
	// (unverified, docs/channels.md §D). Ignored in key mode. Defaults to
	// AlipayNotifyCertSNAbsent.
	AlipayNotifyCertSN AlipayNotifyCertSN

	// WechatClosePaid is the answer to closing a paid WeChat order. Defaults to
	// WechatClosePaidRefused (400 ORDERPAID).
	WechatClosePaid WechatClosePaid

	// WechatWallClock is WeChat Pay's own wall clock, as opposed to the simulated business
	// time of Clock. It stamps and checks WeChat Pay v3 signatures (an Authorization
	// timestamp more than 5 minutes off is refused, §B3; answers and notifications carry
	// its Wechatpay-Timestamp) and times the 5-minute life of bill download URLs. The
	// official SDK reads time.Now() on both sides and cannot follow a simulated Clock, so
	// this defaults to the wall clock (orderpay.SystemClock), not to Clock: tests can move
	// Clock by hours and the SDK still talks to the simulator. Set it to a skewed clock to
	// simulate a merchant whose clock is off.
	WechatWallClock orderpay.Clock

	// WechatMode is how WeChat Pay signs answers and notifications for the merchant:
	// WechatModePublicKey (the public key, under its PUB_KEY_ID_…) or WechatModeCertificate
	// (platform certificates listed by GET /v3/certificates, which rotate). Defaults to
	// WechatModePublicKey, the only mode merchants registered since late 2024 get (§E).
	WechatMode WechatMode

	// WechatCertOverlap is, in certificate mode, how long (simulated time, Clock) after a
	// rotation the old and the new platform certificate both sign, mixed; after it the new
	// one signs alone and the old one is no longer listed. Defaults to
	// DefaultWechatCertOverlap (5 days, §E).
	WechatCertOverlap time.Duration

	// WechatCertRotateEvery, in certificate mode, rotates the platform certificate each
	// time this much simulated time (Clock) has passed since the last rotation or the start,
	// as if each certificate reached its last ten days. Defaults to 0: no rotation by
	// itself (RotateWechatCertificate and POST /sim/wechat/certificates rotate at any time).
	WechatCertRotateEvery time.Duration

	// PayCodeLifetime is how long (simulated time, Clock) a payment code issued by
	// IssueCode or POST /sim/wallet/codes can be scanned: a pay call with it from then on
	// is refused as an expired code. Defaults to DefaultPayCodeLifetime (2 minutes).
	PayCodeLifetime time.Duration

	// MaxPayCodes is the most payment codes alive (issued and not expired) at once; more
	// are refused until some expire. Expired codes are remembered (to be refused as expired
	// rather than unknown) for a day, at most MaxPayCodes of them. Defaults to
	// DefaultMaxPayCodes.
	MaxPayCodes int

	// WechatUserPayingFor is how long (simulated time) a WeChat barcode order stays
	// USERPAYING while the buyer does not confirm (the password dialog is open): then it
	// ends unpaid, PAYERROR. A buyer who confirms later than this never pays. Defaults to
	// DefaultWechatUserPayingFor (60 s).
	WechatUserPayingFor time.Duration

	// WechatUserPayingStatus is the HTTP status of a codepay answer that says the buyer
	// is still confirming (trade_state USERPAYING): 202 (the default) or 200. Which one
	// the real gateway sends is not verified, so both are simulated.
	WechatUserPayingStatus int

	// QRLifetime is how long a precreated Alipay QR code can be scanned, counted from the
	// precreate call. Defaults to DefaultQRLifetime (2 h). WeChat codes live until the
	// order's time_expire instead.
	QRLifetime time.Duration

	// RefundDelay is how long (simulated time, Clock) a refund takes to settle after the
	// channel accepts it. Until then Alipay answers fund_change=N and its refund query has
	// no refund_status, and WeChat answers PROCESSING. Defaults to 0: refunds settle at once.
	RefundDelay time.Duration

	// HTTPClient delivers notifications. Defaults to a client of its own with a
	// DefaultNotifyTimeout (10 s) timeout, whose idle connections Close releases.
	HTTPClient *http.Client

	// Faults is the fault plan at start. Defaults to none; SetFaults and POST /sim/faults
	// replace it.
	Faults FaultPlan

	// AlipayFees and WechatFees are each channel's fee contract and account (fees.go):
	// what its bills charge, give back and settle. The zero value charges DefaultFeeRate,
	// half up, and gives back a refund's share.
	AlipayFees FeeConfig
	WechatFees FeeConfig
	// BillFaults make the bills disagree with the contract (fees.go); BillFaultSeed fixes
	// their draws.
	BillFaults    []BillFault
	BillFaultSeed uint64

	// Logger receives delivery failures and other simulator events, never key material.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with every zero field set to its default. The schedule
// is copied so that the caller's slice can change without affecting a running simulator.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = orderpay.SystemClock{}
	}
	if c.TimeScale == 0 {
		c.TimeScale = DefaultTimeScale
	}
	if c.AlipayNotifySchedule == nil {
		c.AlipayNotifySchedule = AlipayClassicNotifySchedule()
	} else {
		c.AlipayNotifySchedule = slices.Clone(c.AlipayNotifySchedule)
	}
	if c.WechatNotifySchedule == nil {
		c.WechatNotifySchedule = WechatNotifySchedule()
	} else {
		c.WechatNotifySchedule = slices.Clone(c.WechatNotifySchedule)
	}
	if c.WechatClosePaid == "" {
		c.WechatClosePaid = WechatClosePaidRefused
	}
	c.AlipayMode = cmp.Or(c.AlipayMode, AlipayModeKey)
	c.AlipayNotifyCertSN = cmp.Or(c.AlipayNotifyCertSN, AlipayNotifyCertSNAbsent)
	if c.WechatMode == "" {
		c.WechatMode = WechatModePublicKey
	}
	if c.WechatCertOverlap == 0 {
		c.WechatCertOverlap = DefaultWechatCertOverlap
	}
	if c.WechatWallClock == nil {
		c.WechatWallClock = orderpay.SystemClock{}
	}
	if c.QRLifetime == 0 {
		c.QRLifetime = DefaultQRLifetime
	}
	if c.PayCodeLifetime == 0 {
		c.PayCodeLifetime = DefaultPayCodeLifetime
	}
	if c.MaxPayCodes == 0 {
		c.MaxPayCodes = DefaultMaxPayCodes
	}
	if c.WechatUserPayingFor == 0 {
		c.WechatUserPayingFor = DefaultWechatUserPayingFor
	}
	if c.WechatUserPayingStatus == 0 {
		c.WechatUserPayingStatus = http.StatusAccepted
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:   DefaultNotifyTimeout,
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if err := c.Keys.Validate(); err != nil {
		return err
	}
	if err := c.AlipayFees.validate(orderpay.ChannelAlipay); err != nil {
		return err
	}
	if err := c.WechatFees.validate(orderpay.ChannelWechat); err != nil {
		return err
	}
	if err := validateBillFaults(c.BillFaults); err != nil {
		return err
	}
	if math.IsNaN(c.TimeScale) || math.IsInf(c.TimeScale, 0) || c.TimeScale <= 0 {
		return fmt.Errorf("sim: TimeScale must be a positive number, got %v", c.TimeScale)
	}
	for _, d := range c.AlipayNotifySchedule {
		if d < 0 {
			return errors.New("sim: AlipayNotifySchedule delays must not be negative")
		}
	}
	for _, d := range c.WechatNotifySchedule {
		if d < 0 {
			return errors.New("sim: WechatNotifySchedule delays must not be negative")
		}
	}
	switch c.WechatClosePaid {
	case WechatClosePaidRefused, WechatClosePaidNoContent:
	default:
		return fmt.Errorf("sim: WechatClosePaid must be %q or %q, got %q",
			WechatClosePaidRefused, WechatClosePaidNoContent, c.WechatClosePaid)
	}
	switch c.AlipayMode {
	case AlipayModeKey:
	case AlipayModeCert:
		if c.Keys.AlipayCerts == nil {
			return errors.New("sim: AlipayMode cert needs Keys.AlipayCerts")
		}
	default:
		return fmt.Errorf("sim: AlipayMode must be %q or %q, got %q", AlipayModeKey, AlipayModeCert, c.AlipayMode)
	}
	switch c.AlipayNotifyCertSN {
	case AlipayNotifyCertSNAbsent, AlipayNotifyCertSNUnsigned, AlipayNotifyCertSNSigned:
	default:
		return fmt.Errorf("sim: AlipayNotifyCertSN must be %q, %q or %q, got %q",
			AlipayNotifyCertSNAbsent, AlipayNotifyCertSNUnsigned, AlipayNotifyCertSNSigned, c.AlipayNotifyCertSN)
	}
	switch c.WechatMode {
	case WechatModePublicKey, WechatModeCertificate:
	default:
		return fmt.Errorf("sim: WechatMode must be %q or %q, got %q", WechatModePublicKey, WechatModeCertificate, c.WechatMode)
	}
	if c.WechatCertOverlap < 0 || c.WechatCertRotateEvery < 0 {
		return errors.New("sim: WechatCertOverlap and WechatCertRotateEvery must not be negative")
	}
	if c.RefundDelay < 0 {
		return errors.New("sim: RefundDelay must not be negative")
	}
	if c.QRLifetime < 0 {
		return errors.New("sim: QRLifetime must not be negative")
	}
	if c.PayCodeLifetime < 0 || c.MaxPayCodes < 0 || c.WechatUserPayingFor < 0 {
		return errors.New("sim: PayCodeLifetime, MaxPayCodes and WechatUserPayingFor must not be negative")
	}
	if c.WechatUserPayingStatus != http.StatusOK && c.WechatUserPayingStatus != http.StatusAccepted {
		return fmt.Errorf("sim: WechatUserPayingStatus must be 200 or 202, got %d", c.WechatUserPayingStatus)
	}
	return nil
}

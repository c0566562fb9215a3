package sim

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"

	"orderpay"
)

// Simulator plays the payment channels. Create it with New, serve Handler, and Close it.
type Simulator struct {
	keys      *Keys
	clock     orderpay.Clock
	log       *slog.Logger
	cfg       Config // with defaults applied
	notifier  *notifier
	faults    faultSet
	ownClient bool // the notification client is ours to release on Close
	handler   http.Handler
	closeOnce sync.Once

	// alipayApps are the merchant's Alipay apps by app id, alipayMain the main one
	// (Keys.AppID): the gateway serves each with its own keys and, in certificate mode, its
	// own certificates.
	alipayApps map[string]*alipayApp
	alipayMain *alipayApp

	forgerOnce sync.Once
	forger     *rsa.PrivateKey // signs the bad answers and notifications that faults send

	// wxPlatform holds the WeChat platform certificates in certificate mode; nil in public
	// key mode.
	wxPlatform *wechatPlatform

	// journal keeps the state below on disk (Config.StateDir, state.go), nil in memory
	// only; dirty is what the critical section in progress touched, for the journal.
	journal *journal
	dirty   *dirtySet
	// due are the notifications the last run left due, until SendDue queues them.
	due     []outgoingNotification
	dueOnce sync.Once

	mu     stateMutex // guards everything below; unlocking it writes the changes to the journal
	seq    int64      // creation order of trades across channels, for the ledger
	alipay alipayBook
	wechat wechatBook
	// codes are the buyers' payment codes the wallets showed (barcode.go).
	codes codeBook
	// shortages are the merchant accounts that cannot cover refunds (FaultBalance), by
	// channel; an account that is not short has no entry.
	shortages map[string]shortage
}

// PayResult is the outcome of a buyer scanning (and paying) a QR code.
type PayResult struct {
	Channel    string `json:"channel"`
	OutTradeNo string `json:"out_trade_no"`
	TradeNo    string `json:"trade_no"` // Alipay trade_no / WeChat transaction_id; "" until it exists
	Status     string `json:"status"`   // the channel's trade status after the action
	Amount     int64  `json:"amount"`   // the trade's total, fen
	// ReturnURL is where the wallet sends the buyer's browser next, when it does (WeChat
	// H5's redirect_url after the cashier, whether paid or not; Alipay pc and wap's
	// return_url with Alipay's signed return parameters after paying, and wap's quit_url
	// after the buyer gives up); "" when it does not.
	ReturnURL string `json:"return_url,omitempty"`
}

// Wallet actions: what the buyer does with a scanned code (POST /sim/pay "action").
const (
	// WalletPay scans and pays the full amount.
	WalletPay = "pay"
	// WalletScan scans without paying: an Alipay trade comes into existence and waits
	// (WAIT_BUYER_PAY); a WeChat order, which exists since prepay, stays NOTPAY.
	WalletScan = "scan"
	// WalletDecline scans, then the buyer cancels in the cashier. Nothing is paid and the
	// code can be scanned again: Alipay's trade stays WAIT_BUYER_PAY until its timeout,
	// WeChat's order stays NOTPAY.
	WalletDecline = "decline"
)

// New returns a simulator for cfg. It starts no goroutines until a notification is queued.
// With Config.StateDir it first takes up the state the last run left there: the
// notifications still due are queued again, those overdue sent at once.
func New(cfg Config) (*Simulator, error) {
	ownClient := cfg.HTTPClient == nil
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Simulator{
		keys:      cfg.Keys,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		cfg:       cfg,
		ownClient: ownClient,
		alipay:    newAlipayBook(),
		wechat:    newWechatBook(),
		codes:     newCodeBook(),
		shortages: map[string]shortage{},
	}
	s.alipayApps = map[string]*alipayApp{}
	for i, a := range cfg.Keys.AlipayApps() {
		app := &alipayApp{AlipayApp: a}
		if cfg.AlipayMode == AlipayModeCert {
			var err error
			if app.cert, err = newAlipayCertMode(a); err != nil {
				return nil, err
			}
		}
		s.alipayApps[a.AppID] = app
		if i == 0 {
			s.alipayMain = app
		}
	}
	if cfg.WechatMode == WechatModeCertificate {
		s.wxPlatform = newWechatPlatform(&cfg.Keys.Wechat, cfg)
	}
	s.mu.s = s
	s.notifier = newNotifier(&s.faults, cfg.HTTPClient, cfg.Clock, cfg.TimeScale, cfg.Logger)
	if err := s.faults.set(cfg.Faults); err != nil {
		return nil, err
	}
	var due []outgoingNotification
	if cfg.StateDir != "" {
		var err error
		if due, err = s.openState(cfg.StateDir); err != nil {
			return nil, err
		}
		s.notifier.journal = s.journalNotify
	}
	s.handler = s.routes()
	s.due = due
	if !cfg.HoldDue {
		s.SendDue()
	}
	return s, nil
}

// SendDue goes on where the last run on Config.StateDir stopped: it queues the
// notifications still due (those overdue are sent at once) and watches again the barcode
// trades and refunds whose notifications are still to come. New calls it unless
// Config.HoldDue; calls after the first do nothing.
func (s *Simulator) SendDue() {
	s.dueOnce.Do(func() {
		for _, n := range s.due {
			s.notifier.enqueue(n)
		}
		s.due = nil
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.alipay.barcodeWaiting) > 0 && !s.alipay.watchingBarcode {
			s.alipay.watchingBarcode = s.notifier.run(s.watchAlipayBarcodes)
		}
		if len(s.wechat.settling) > 0 && !s.wechat.watchingRefund {
			s.wechat.watchingRefund = s.notifier.run(s.watchWechatRefunds)
		}
	})
}

// Keys returns the simulator's credentials.
func (s *Simulator) Keys() *Keys { return s.keys }

// Handler serves the channel gateways and the simulator's own endpoints:
//
//	POST /gateway.do   Alipay OpenAPI gateway (alipay.trade.pay among its methods); GET and
//	                   POST of alipay.trade.page.pay and wap.pay are the cashier page (its
//	                   buttons: POST /sim/alipay/cashier/{token})
//	GET  /sim/alipay/oauth   Alipay's OAuth page for a buyer (an auth_code for oauth.token)
//	/v3/…              WeChat Pay API v3 (the base URL replaces https://api.mch.weixin.qq.com):
//	                   POST /v3/pay/transactions/native, /jsapi, /h5, /app and /codepay,
//	                   POST …/out-trade-no/{n}/reverse,
//	                   GET /v3/pay/transactions/out-trade-no/{n}
//	                   and /id/{transaction_id}, POST …/out-trade-no/{n}/close,
//	                   POST /v3/refund/domestic/refunds, GET /v3/refund/domestic/refunds/{n},
//	                   GET /v3/bill/tradebill, GET /v3/billdownload/file, GET /v3/certificates
//	GET  /connect/oauth2/authorize, GET /sns/oauth2/access_token   WeChat's web OAuth
//	                   (snsapi_base) of the official account
//	POST /sim/pay      the buyer's wallet: {"qr_code":"…","channel":"alipay|wechat"(optional),
//	                   "action":"pay"(default)|"scan"|"decline"}, or a pay instruction of any
//	                   method on a device: {"pay":{…},"user_agent","referer","client_ip","buyer"}
//	GET  /sim/wallet/identity   a buyer's openid for a WeChat appid and Alipay user id
//	POST /sim/wallet/codes      a buyer's payment code for a till (IssueCode); GET it, list
//	                   them, POST …/{code}/confirm (ConfirmCode), GET …/{code}/barcode.svg
//	POST /sim/scan     the same with action scan
//	GET  /sim/ledger   every trade the channels know, with its refunds, amounts in fen
//	GET|POST|DELETE /sim/faults   the fault plan in force, with how often each rule fired
//	POST /sim/topup    the merchant tops up a channel's account: {"channel":"alipay|wechat"}
//	GET  /sim/accounts whether each channel's account is short (refunds refused for balance)
//	GET|POST /sim/wechat/certificates   the WeChat mode and platform certificates; POST
//	                   rotates (RotateWechatCertificate)
//	GET  /healthz      200 when serving
func (s *Simulator) Handler() http.Handler { return s.handler }

// Close stops all notification deliveries and waits for their goroutines to end. Payments
// made after Close are recorded, but their notifications are not sent. Close is idempotent.
func (s *Simulator) Close() {
	s.closeOnce.Do(func() {
		s.notifier.close()
		if s.journal != nil {
			s.mu.Lock()
			s.journal.close()
			s.mu.Unlock()
		}
		if s.ownClient {
			s.cfg.HTTPClient.CloseIdleConnections()
		}
	})
}

// Ledger returns every trade the channels know, in creation order, as each channel would
// report it: Alipay trades once scanned, with unpaid ones past their deadline closed;
// WeChat orders from prepay on, unpaid ones NOTPAY until closed.
func (s *Simulator) Ledger() []LedgerEntry {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	entries := append(s.alipay.ledger(now), s.wechat.ledger(now, s.keys.Wechat.MiniAppID)...)
	sortLedger(entries)
	return entries
}

// Calls counts the API calls the channels received so far, by "<channel>.<method>" (the
// Method* names: alipay.precreate, wechat.query, …), whether or not a fault hit them.
func (s *Simulator) Calls() map[string]int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return maps.Clone(s.faults.calls)
}

// NotifyStats returns the delivery record of every notification queued so far, in the
// order they were queued.
func (s *Simulator) NotifyStats() []NotifyStats { return s.notifier.snapshot() }

// Scan plays a buyer scanning qrCode without paying (WalletScan): Alipay creates the trade,
// which then waits for payment; a WeChat order only records the scan and stays NOTPAY.
// Scanning an already scanned, unpaid trade changes nothing. Errors are orderpay errors:
// ENOTFOUND for an unknown code, ECONFLICT for an expired code or a paid or closed trade.
func (s *Simulator) Scan(ctx context.Context, qrCode string) (*PayResult, error) {
	return s.Wallet(ctx, qrCode, WalletScan)
}

// Pay plays a buyer scanning qrCode and paying the full amount (WalletPay). The channel's
// notification is queued and delivered in the background; Pay does not wait for it. Errors
// are as for Scan.
func (s *Simulator) Pay(ctx context.Context, qrCode string) (*PayResult, error) {
	return s.Wallet(ctx, qrCode, WalletPay)
}

// Decline plays a buyer scanning qrCode and cancelling in the cashier (WalletDecline):
// nothing is paid, and the code can still be paid later. Errors are as for Scan.
func (s *Simulator) Decline(ctx context.Context, qrCode string) (*PayResult, error) {
	return s.Wallet(ctx, qrCode, WalletDecline)
}

// Wallet plays the buyer's wallet doing action (WalletPay, WalletScan or WalletDecline) on
// qrCode, whose channel its shape tells. An unknown action is EINVALID; other errors are
// as for Scan.
func (s *Simulator) Wallet(ctx context.Context, qrCode, action string) (*PayResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch action {
	case WalletPay, WalletScan, WalletDecline:
	default:
		return nil, orderpay.Errorf(orderpay.EINVALID, "action must be %s, %s or %s", WalletPay, WalletScan, WalletDecline)
	}
	if qrCode == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "qr_code is required")
	}
	switch QRChannel(qrCode) {
	case orderpay.ChannelAlipay:
		// Declining leaves an Alipay trade exactly as a scan does: it exists and waits.
		return s.alipayScan(qrCode, action == WalletPay)
	case orderpay.ChannelWechat:
		return s.wechatScan(qrCode, action)
	}
	return nil, orderpay.Errorf(orderpay.ENOTFOUND, "unknown QR code")
}

// QRChannel returns the channel whose codes look like qrCode (orderpay.ChannelAlipay or
// orderpay.ChannelWechat), or "" for neither.
func QRChannel(qrCode string) string {
	switch {
	case strings.HasPrefix(qrCode, alipayQRPrefix):
		return orderpay.ChannelAlipay
	case isWechatCode(qrCode):
		return orderpay.ChannelWechat
	}
	return ""
}

// forgerKey is a key that is not any channel's, made on first use: what an attacker, or a
// fault, signs with.
func (s *Simulator) forgerKey() *rsa.PrivateKey {
	s.forgerOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		s.forger = k
	})
	return s.forger
}

// nextSeq returns the next creation sequence number. The caller holds s.mu.
func (s *Simulator) nextSeq() int64 {
	s.seq++
	return s.seq
}

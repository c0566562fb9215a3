package sim

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"log/slog"
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

	forgerOnce sync.Once
	forger     *rsa.PrivateKey // signs the bad answers and notifications that faults send

	mu     sync.Mutex // guards everything below
	seq    int64      // creation order of trades across channels, for the ledger
	alipay alipayBook
}

// PayResult is the outcome of a buyer scanning (and paying) a QR code.
type PayResult struct {
	Channel    string `json:"channel"`
	OutTradeNo string `json:"out_trade_no"`
	TradeNo    string `json:"trade_no"`
	Status     string `json:"status"` // the channel's trade status after the action
	Amount     int64  `json:"amount"` // the trade's total, fen
}

// New returns a simulator for cfg. It starts no goroutines until a notification is queued.
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
	}
	s.notifier = newNotifier(&s.faults, cfg.HTTPClient, cfg.Clock, cfg.TimeScale, cfg.Logger)
	if err := s.faults.set(cfg.Faults); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Keys returns the simulator's credentials.
func (s *Simulator) Keys() *Keys { return s.keys }

// Handler serves the channel gateways and the simulator's own endpoints:
//
//	POST /gateway.do   Alipay OpenAPI gateway (alipay.trade.precreate, alipay.trade.query)
//	POST /sim/scan     buyer scans a QR code: {"qr_code":"…"} (the trade comes into existence)
//	POST /sim/pay      buyer scans and pays a QR code in full: {"qr_code":"…"}
//	GET  /sim/ledger   every trade the channels know, amounts in fen
//	GET|POST|DELETE /sim/faults   the fault plan in force, with how often each rule fired
//	GET  /healthz      200 when serving
func (s *Simulator) Handler() http.Handler { return s.handler }

// Close stops all notification deliveries and waits for their goroutines to end. Payments
// made after Close are recorded, but their notifications are not sent. Close is idempotent.
func (s *Simulator) Close() {
	s.closeOnce.Do(func() {
		s.notifier.close()
		if s.ownClient {
			s.cfg.HTTPClient.CloseIdleConnections()
		}
	})
}

// Ledger returns every trade the channels know, in creation order. Unpaid trades past their
// deadline are reported closed, as the channel would report them.
func (s *Simulator) Ledger() []LedgerEntry {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := s.alipay.ledger(now)
	sortLedger(entries)
	return entries
}

// NotifyStats returns the delivery record of every notification queued so far, in the
// order they were queued.
func (s *Simulator) NotifyStats() []NotifyStats { return s.notifier.snapshot() }

// Scan plays a buyer scanning qrCode without paying: the channel creates the trade, which
// then waits for payment. Scanning an already scanned, unpaid trade changes nothing.
// Errors are orderpay errors: ENOTFOUND for an unknown code, ECONFLICT for an expired code
// or a paid or closed trade.
func (s *Simulator) Scan(ctx context.Context, qrCode string) (*PayResult, error) {
	return s.scan(ctx, qrCode, false)
}

// Pay plays a buyer scanning qrCode and paying the full amount. The channel's notification
// is queued and delivered in the background; Pay does not wait for it. Errors are as for
// Scan.
func (s *Simulator) Pay(ctx context.Context, qrCode string) (*PayResult, error) {
	return s.scan(ctx, qrCode, true)
}

func (s *Simulator) scan(ctx context.Context, qrCode string, pay bool) (*PayResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case qrCode == "":
		return nil, orderpay.Errorf(orderpay.EINVALID, "qr_code is required")
	case strings.HasPrefix(qrCode, alipayQRPrefix):
		return s.alipayScan(qrCode, pay)
	}
	return nil, orderpay.Errorf(orderpay.ENOTFOUND, "unknown QR code")
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

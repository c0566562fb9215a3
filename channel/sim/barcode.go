package sim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"orderpay"
)

// Barcode payments (付款码, docs/channels.md §A7, §B7): the buyer's wallet shows a payment code, a
// till scans it and the merchant sends it with the payment itself (Alipay alipay.trade.pay,
// WeChat Pay's codepay). The simulator plays the wallet's side: it issues codes, each with
// the way its buyer will behave once a till uses it (a behaviour), and the pay calls take
// only the codes it issued, each once and before it expires, as the channels do. The pay
// calls are alipay_barcode.go and wechat_barcode.go.

// What the buyer does once a till uses their code (POST /sim/wallet/codes "behaviour").
const (
	// CodeConfirm: no password is asked; the pay call itself answers paid.
	CodeConfirm = "confirm"
	// CodePassword: the wallet asks for the password. The pay call answers that the buyer
	// is confirming (Alipay 10003, WeChat USERPAYING), and the trade is paid the code's
	// After later, or sooner if the buyer confirms on the wallet page (ConfirmCode).
	CodePassword = "password"
	// CodeWrongPassword: as CodePassword, but the buyer first types a wrong password (the
	// trade keeps waiting) and the right one After after the pay call.
	CodeWrongPassword = "wrong_password"
	// CodeNever: the buyer opens the password dialog and walks away. WeChat keeps the order
	// USERPAYING for Config.WechatUserPayingFor, then ends it unpaid (PAYERROR); Alipay's
	// trade waits (WAIT_BUYER_PAY) until its timeout. Only ConfirmCode pays it meanwhile.
	CodeNever = "never"
	// CodeShort: the buyer's balance cannot cover it. The pay call is refused (Alipay 40004
	// ACQ.BUYER_BALANCE_NOT_ENOUGH, WeChat 403 NOTENOUGH) and nothing is paid.
	CodeShort = "short"
)

// CodeBehaviours are the behaviours a code can have, CodeConfirm first.
var CodeBehaviours = []string{CodeConfirm, CodePassword, CodeWrongPassword, CodeNever, CodeShort}

const (
	// DefaultCodeAfter is how long a CodePassword or CodeWrongPassword buyer takes to
	// confirm when the code names no time.
	DefaultCodeAfter = 10 * time.Second
	// MaxCodeAfter bounds how long a buyer may take: a password is typed in seconds.
	MaxCodeAfter = time.Hour
	// payCodeMemory is how long an expired code is remembered, so that a pay call with it
	// is refused as an expired code rather than an unknown one.
	payCodeMemory = 24 * time.Hour
	// maxBuyerName bounds a code's buyer name, as GET /sim/wallet/identity does.
	maxBuyerName = 64
	// maxCodeBody bounds the body of POST /sim/wallet/codes.
	maxCodeBody = 1 << 10
	// codesListed is how many codes GET /sim/wallet/codes lists, newest first.
	codesListed = 20
)

// payCode is one code a wallet showed.
type payCode struct {
	code      string
	channel   string
	buyer     string
	behaviour string
	after     time.Duration // when the buyer confirms, counted from the pay call
	issuedAt  time.Time
	expiresAt time.Time
	// outTradeNo is the trade whose pay call used the code, and usedAt when; "" while the
	// code is unused. A pay call refused before the code was looked at leaves it unused.
	outTradeNo string
	usedAt     time.Time
}

// codeBook holds the issued codes. Every access holds Simulator.mu.
type codeBook struct {
	byCode map[string]*payCode
	dirty  *dirtySet  // the journal's (state.go); nil in memory only
	issued []*payCode // in issue order, which is expiry order: every code lives as long
}

func newCodeBook() codeBook { return codeBook{byCode: map[string]*payCode{}} }

// prune forgets the codes expired for longer than payCodeMemory, and the oldest expired
// ones beyond keep, so that the book holds at most the live codes and keep expired ones.
func (b *codeBook) prune(now time.Time, keep int) {
	expired := 0
	for _, c := range b.issued {
		if !now.Before(c.expiresAt) {
			expired++
		}
	}
	drop := 0
	for _, c := range b.issued {
		if now.Before(c.expiresAt) || (expired-drop <= keep && now.Before(c.expiresAt.Add(payCodeMemory))) {
			break
		}
		delete(b.byCode, c.code)
		drop++
	}
	clear(b.issued[:drop]) // no stale pointers in the array's head
	b.issued = b.issued[drop:]
}

// live counts the codes not expired at now.
func (b *codeBook) live(now time.Time) int {
	n := 0
	for i := len(b.issued) - 1; i >= 0 && now.Before(b.issued[i].expiresAt); i-- {
		n++
	}
	return n
}

// codeRefusal is why a pay call cannot use a code; the channels answer each in their words.
type codeRefusal int

const (
	codeOK      codeRefusal = iota
	codeUnknown             // never issued by this channel's wallet (a misread, another channel's)
	codeUsed                // a pay call used it already
	codeExpired             // past its lifetime
)

// takeCode is a pay call of channel using code for outTradeNo at now: the code, marked
// used, or why it cannot be used. The caller holds s.mu and calls it only once nothing
// else refuses the call: a refused call leaves the code as it was.
func (s *Simulator) takeCode(channel, code, outTradeNo string, now time.Time) (*payCode, codeRefusal) {
	c := s.codes.touch(s.codes.byCode[code])
	switch {
	case c == nil || c.channel != channel:
		return nil, codeUnknown
	case c.outTradeNo != "":
		return nil, codeUsed
	case !now.Before(c.expiresAt):
		return nil, codeExpired
	}
	c.outTradeNo, c.usedAt = outTradeNo, now
	return c, codeOK
}

// newPayCode returns an unused code of channel, shaped as its wallet's are
// (orderpay.BarcodeChannel): WeChat 18 digits starting 10 to 15; Alipay starting 25 to 30,
// mostly 18 digits long and now and then any length from 16 to 24, as real Alipay codes
// vary. The caller holds s.mu.
func (s *Simulator) newPayCode(channel string) string {
	for {
		var code string
		if channel == orderpay.ChannelWechat {
			code = itoa2(10+rand.IntN(6)) + randomDigitString(16)
		} else {
			n := 18
			if rand.IntN(4) == 0 {
				n = 16 + rand.IntN(9)
			}
			code = itoa2(25+rand.IntN(6)) + randomDigitString(n-2)
		}
		if _, taken := s.codes.byCode[code]; !taken {
			return code
		}
	}
}

// itoa2 is a two-digit number's text.
func itoa2(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }

// PayCode is a payment code as the wallet shows it, and what became of it.
type PayCode struct {
	AuthCode  string `json:"auth_code"`
	Channel   string `json:"channel"`
	Buyer     string `json:"buyer"`
	Behaviour string `json:"behaviour"`
	// After is when a CodePassword or CodeWrongPassword buyer confirms, counted from the
	// pay call; AfterSeconds is the same in seconds.
	After        time.Duration `json:"-"`
	AfterSeconds float64       `json:"after_seconds"`
	IssuedAt     time.Time     `json:"issued_at"`
	ExpiresAt    time.Time     `json:"expires_at"`
	// State is PayCodeLive (not used yet, can be scanned), PayCodeUsed or PayCodeExpired
	// (not used, and past ExpiresAt).
	State string `json:"state"`
	// The trade a pay call made with the code: its out_trade_no, the channel's trade
	// number (once the channel has one), its status at the channel now, and what it is for.
	// Empty until used; a refused pay call (CodeShort at Alipay) leaves no trade.
	OutTradeNo  string `json:"out_trade_no,omitempty"`
	TradeNo     string `json:"trade_no,omitempty"`
	TradeStatus string `json:"trade_status,omitempty"`
	Amount      int64  `json:"amount,omitempty"`
	Subject     string `json:"subject,omitempty"`
	// Waiting: the trade waits for this buyer to confirm (Alipay WAIT_BUYER_PAY, WeChat
	// USERPAYING): ConfirmCode pays it now.
	Waiting bool `json:"waiting"`
}

// States of a payment code (PayCode.State).
const (
	PayCodeLive    = "live"
	PayCodeUsed    = "used"
	PayCodeExpired = "expired"
)

// IssueCode plays a buyer's wallet showing a fresh payment code of channel
// (orderpay.ChannelAlipay or ChannelWechat), for the simulated buyer (a name, as
// IdentityOf takes; "" for a buyer nobody knows), who will behave as behaviour says (one
// of CodeBehaviours; "" is CodeConfirm) once a till uses it. after is when a password
// buyer confirms, counted from the pay call: 0 is DefaultCodeAfter, at most MaxCodeAfter;
// other behaviours ignore it. The code can be used once, until Config.PayCodeLifetime has
// passed. Errors: EINVALID for a bad argument, ECONFLICT when Config.MaxPayCodes codes are
// alive already.
func (s *Simulator) IssueCode(channel, buyer, behaviour string, after time.Duration) (PayCode, error) {
	if err := checkChannel(channel); err != nil {
		return PayCode{}, err
	}
	if behaviour == "" {
		behaviour = CodeConfirm
	}
	if !slices.Contains(CodeBehaviours, behaviour) {
		return PayCode{}, orderpay.Errorf(orderpay.EINVALID, "behaviour must be one of confirm, password, wrong_password, never, short")
	}
	if len(buyer) > maxBuyerName {
		return PayCode{}, orderpay.Errorf(orderpay.EINVALID, "buyer must be at most %d bytes", maxBuyerName)
	}
	if after < 0 || after > MaxCodeAfter {
		return PayCode{}, orderpay.Errorf(orderpay.EINVALID, "after must be from 0 to %s", MaxCodeAfter)
	}
	switch {
	case behaviour != CodePassword && behaviour != CodeWrongPassword:
		after = 0
	case after == 0:
		after = DefaultCodeAfter
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes.prune(now, s.cfg.MaxPayCodes)
	if s.codes.live(now) >= s.cfg.MaxPayCodes {
		return PayCode{}, orderpay.Errorf(orderpay.ECONFLICT, "%d payment codes are alive, the most the simulator keeps: wait until some expire (%s after issue)",
			s.cfg.MaxPayCodes, s.cfg.PayCodeLifetime)
	}
	c := &payCode{
		code:      s.newPayCode(channel),
		channel:   channel,
		buyer:     buyer,
		behaviour: behaviour,
		after:     after,
		issuedAt:  now,
		expiresAt: now.Add(s.cfg.PayCodeLifetime),
	}
	s.codes.byCode[c.code] = c
	s.codes.touch(c)
	s.codes.issued = append(s.codes.issued, c)
	return s.payCodeView(c, now), nil
}

// Code is the payment code code as it stands: ENOTFOUND for one the simulator did not
// issue, or has forgotten (a day after it expired).
func (s *Simulator) Code(code string) (PayCode, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	c := s.codes.touch(s.codes.byCode[code])
	if c == nil {
		return PayCode{}, orderpay.Errorf(orderpay.ENOTFOUND, "no payment code %s", code)
	}
	return s.payCodeView(c, now), nil
}

// PayCodes lists the latest codes issued, newest first, at most n.
func (s *Simulator) PayCodes(n int) []PayCode {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceMicropay(now)
	out := []PayCode{}
	for i := len(s.codes.issued) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, s.payCodeView(s.codes.issued[i], now))
	}
	return out
}

// payCodeView is c as it stands at now, with its trade. The caller holds s.mu and has
// brought WeChat's barcode orders up to date (advanceMicropay).
func (s *Simulator) payCodeView(c *payCode, now time.Time) PayCode {
	v := PayCode{
		AuthCode:     c.code,
		Channel:      c.channel,
		Buyer:        c.buyer,
		Behaviour:    c.behaviour,
		After:        c.after,
		AfterSeconds: c.after.Seconds(),
		IssuedAt:     c.issuedAt,
		ExpiresAt:    c.expiresAt,
		State:        PayCodeLive,
		OutTradeNo:   c.outTradeNo,
	}
	switch {
	case c.outTradeNo != "":
		v.State = PayCodeUsed
	case !now.Before(c.expiresAt):
		v.State = PayCodeExpired
	}
	if c.outTradeNo == "" {
		return v
	}
	switch c.channel {
	case orderpay.ChannelAlipay:
		if t := s.alipayCodeTrade(c); t != nil {
			t.refresh(now)
			v.TradeNo, v.TradeStatus, v.Amount, v.Subject = t.tradeNo, t.status, t.amount, t.subject
			v.Waiting = t.status == AlipayWaitBuyerPay
		}
	case orderpay.ChannelWechat:
		if o := s.wechatCodeOrder(c); o != nil {
			v.TradeNo, v.TradeStatus, v.Amount, v.Subject = o.transactionID, o.state(now), o.prepay.total, o.prepay.description
			v.Waiting = v.TradeStatus == WechatUserPaying
		}
	}
	return v
}

// ConfirmCode plays the buyer confirming, in the wallet, the payment a till started with
// code (typing the password): a trade still waiting for them (Alipay WAIT_BUYER_PAY,
// WeChat USERPAYING) is paid now. Errors: ENOTFOUND for an unknown code; ECONFLICT for a
// code no till has used, or whose trade waits for nobody (paid, closed, reversed, or
// WeChat's ended PAYERROR).
func (s *Simulator) ConfirmCode(code string) (*PayResult, error) {
	now := s.clock.Now()
	s.mu.Lock()
	c := s.codes.touch(s.codes.byCode[code])
	if c == nil {
		s.mu.Unlock()
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "no payment code %s", code)
	}
	if c.outTradeNo == "" {
		s.mu.Unlock()
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "code %s has not been scanned by a till: there is nothing to confirm", code)
	}
	var (
		res  *PayResult
		note *outgoingNotification
		err  error
	)
	switch c.channel {
	case orderpay.ChannelAlipay:
		res, note, err = s.alipayConfirmCode(c, now)
	case orderpay.ChannelWechat:
		res, err = s.wechatConfirmCode(c, now)
	}
	s.mu.Unlock()
	if note != nil {
		s.notifier.enqueue(*note)
	}
	return res, err
}

// registerCodes adds the wallet's payment codes:
//
//	POST /sim/wallet/codes                     issue a code (IssueCode)
//	GET  /sim/wallet/codes                     the latest codes, newest first (PayCodes)
//	GET  /sim/wallet/codes/{code}              one code and its trade (Code)
//	POST /sim/wallet/codes/{code}/confirm      the buyer confirms (ConfirmCode)
//	GET  /sim/wallet/codes/{code}/barcode.svg  the code drawn as a Code 128 barcode
func (s *Simulator) registerCodes(mux *http.ServeMux) {
	mux.HandleFunc("POST /sim/wallet/codes", s.serveIssueCode)
	mux.HandleFunc("GET /sim/wallet/codes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"codes": s.PayCodes(codesListed)})
	})
	mux.HandleFunc("GET /sim/wallet/codes/{code}", func(w http.ResponseWriter, r *http.Request) {
		c, err := s.Code(r.PathValue("code"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
	})
	mux.HandleFunc("POST /sim/wallet/codes/{code}/confirm", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.ConfirmCode(r.PathValue("code"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /sim/wallet/codes/{code}/barcode.svg", s.serveCodeBarcode)
}

// serveIssueCode is POST /sim/wallet/codes {"channel","buyer","behaviour","after_seconds"}:
// IssueCode, answered with the PayCode; a bad body 400, too many live codes 409.
func (s *Simulator) serveIssueCode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel      string  `json:"channel"`
		Buyer        string  `json:"buyer"`
		Behaviour    string  `json:"behaviour"`
		AfterSeconds float64 `json:"after_seconds"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCodeBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, orderpay.Errorf(orderpay.EINVALID,
			`body must be JSON {"channel":"alipay|wechat","buyer":"…","behaviour":"confirm|password|wrong_password|never|short","after_seconds":N} of at most %d bytes`, maxCodeBody))
		return
	}
	if math.IsNaN(req.AfterSeconds) || req.AfterSeconds < 0 || req.AfterSeconds > MaxCodeAfter.Seconds() {
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "after_seconds must be from 0 to %.0f", MaxCodeAfter.Seconds()))
		return
	}
	c, err := s.IssueCode(req.Channel, req.Buyer, req.Behaviour, time.Duration(req.AfterSeconds*float64(time.Second)))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// serveCodeBarcode is GET /sim/wallet/codes/{code}/barcode.svg: a code the simulator
// issued, drawn as the wallet shows it under its QR code (Code 128, digits below).
func (s *Simulator) serveCodeBarcode(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	s.mu.Lock()
	_, ok := s.codes.byCode[code]
	s.mu.Unlock()
	if !ok {
		writeError(w, orderpay.Errorf(orderpay.ENOTFOUND, "no payment code %s", code))
		return
	}
	svg, err := Code128SVG(code)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(svg)
}

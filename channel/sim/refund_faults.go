package sim

import (
	"encoding/json"
	"net/http"
	"time"

	"orderpay"
)

// shortage is a merchant account that cannot cover refunds (FaultBalance).
type shortage struct {
	since time.Time // simulated time the account went short
	// cureAfter is how long after since the account is covered again by itself; 0 means
	// only a top-up covers it.
	cureAfter time.Duration
}

// curesAt is when the shortage ends by itself; zero if only a top-up ends it.
func (sh shortage) curesAt() time.Time {
	if sh.cureAfter <= 0 {
		return time.Time{}
	}
	return sh.since.Add(sh.cureAfter)
}

// refundDraw is what the refund faults say of one refund the channel would accept.
type refundDraw struct {
	// refuse is FaultBalance or FaultAccountAbnormal when the refund is to be refused so;
	// "" accepts it.
	refuse string
	// settleAfter is how long after acceptance the refund settles.
	settleAfter time.Duration
	// end is WechatRefundAbnormal or WechatRefundClosed for a refund that is to end so; ""
	// ends it normally.
	end string
}

// drawRefundFaults decides what happens to a new refund of outTradeNo that channel would
// otherwise accept now: refused because the account is (or now goes) short, refused for the
// buyer's account, or accepted, settling after Config.RefundDelay or what a slow, abnormal
// or closed rule says (the longest, if several fire), and ending as an abnormal or closed
// rule says (the first in the plan). The caller holds s.mu.
func (s *Simulator) drawRefundFaults(channel, outTradeNo string, now time.Time) refundDraw {
	d := refundDraw{settleAfter: s.cfg.RefundDelay}
	if s.shortNow(channel, now) {
		d.refuse = FaultBalance
		return d
	}
	var delay time.Duration
	delayed := false
	later := func(r FaultRule) {
		if r.Delay > 0 && (!delayed || time.Duration(r.Delay) > delay) {
			delay, delayed = time.Duration(r.Delay), true
		}
	}
	for _, r := range s.faults.fire(channel, MethodRefund, outTradeNo, refundKinds) {
		switch r.Kind {
		case FaultBalance:
			if d.refuse != FaultBalance {
				s.shortages[channel] = shortage{since: now, cureAfter: time.Duration(r.Delay)}
				s.log.Info("sim: merchant account short: refunds refused for balance until topped up",
					"channel", channel, "out_trade_no", outTradeNo, "cure_after", time.Duration(r.Delay))
			}
			d.refuse = FaultBalance // a shortage outranks the buyer's account
		case FaultAccountAbnormal:
			if d.refuse == "" {
				d.refuse = FaultAccountAbnormal
			}
		case FaultSlow:
			later(r)
		case FaultAbnormal, FaultClosed:
			if d.end == "" {
				d.end = map[string]string{FaultAbnormal: WechatRefundAbnormal, FaultClosed: WechatRefundClosed}[r.Kind]
			}
			later(r)
		}
	}
	if delayed {
		d.settleAfter = delay
	}
	return d
}

// shortNow reports whether channel's account is short at now, ending a shortage whose
// Delay has passed. The caller holds s.mu.
func (s *Simulator) shortNow(channel string, now time.Time) bool {
	sh, ok := s.shortages[channel]
	if !ok {
		return false
	}
	if at := sh.curesAt(); !at.IsZero() && !now.Before(at) {
		delete(s.shortages, channel)
		s.log.Info("sim: merchant account covered again after its delay", "channel", channel)
		return false
	}
	return true
}

// Short reports whether channel's merchant account is short now (FaultBalance): new refunds
// on it are refused for balance. False for a channel the simulator does not play.
func (s *Simulator) Short(channel string) bool {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shortNow(channel, now)
}

// TopUp plays the merchant topping up channel's account: a shortage (FaultBalance) ends, and
// new refunds are accepted again. Topping up an account that is not short changes nothing.
// A channel other than alipay or wechat is EINVALID.
func (s *Simulator) TopUp(channel string) error {
	if err := checkChannel(channel); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.shortages[channel]; ok {
		delete(s.shortages, channel)
		s.log.Info("sim: merchant account topped up", "channel", channel)
	}
	return nil
}

// Account is a channel's merchant account as refunds see it (GET /sim/accounts).
type Account struct {
	Channel string `json:"channel"`
	// Short: new refunds are refused for balance (FaultBalance) until TopUp or CuresAt.
	Short bool `json:"short"`
	// ShortSince is when the account went short (simulated time); zero unless Short.
	ShortSince time.Time `json:"short_since,omitzero"`
	// CuresAt is when the shortage ends by itself (simulated time); zero if only a top-up
	// ends it, or if the account is not short.
	CuresAt time.Time `json:"cures_at,omitzero"`
}

// Accounts returns the merchant account of each channel, Alipay first.
func (s *Simulator) Accounts() []Account {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return []Account{s.account(orderpay.ChannelAlipay, now), s.account(orderpay.ChannelWechat, now)}
}

// account is channel's Account at now. The caller holds s.mu.
func (s *Simulator) account(channel string, now time.Time) Account {
	a := Account{Channel: channel, Short: s.shortNow(channel, now)}
	if a.Short {
		sh := s.shortages[channel]
		a.ShortSince, a.CuresAt = sh.since, sh.curesAt()
	}
	return a
}

func checkChannel(channel string) error {
	switch channel {
	case orderpay.ChannelAlipay, orderpay.ChannelWechat:
		return nil
	}
	return orderpay.Errorf(orderpay.EINVALID, "channel must be %s or %s", orderpay.ChannelAlipay, orderpay.ChannelWechat)
}

// maxTopUpBody bounds the body of POST /sim/topup: {"channel":"wechat"} is 20 bytes.
const maxTopUpBody = 1 << 10

// serveTopUp is POST /sim/topup {"channel":"alipay|wechat"}: TopUp, answered with the
// channel's Account; a bad body or channel is 400 with {"error":{"code","message"}}.
func (s *Simulator) serveTopUp(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel string `json:"channel"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTopUpBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, orderpay.Errorf(orderpay.EINVALID, `body must be JSON {"channel":"alipay|wechat"} of at most %d bytes`, maxTopUpBody))
		return
	}
	if err := s.TopUp(req.Channel); err != nil {
		writeError(w, err)
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	a := s.account(req.Channel, now)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, a)
}

// serveAccounts is GET /sim/accounts: every channel's Account.
func (s *Simulator) serveAccounts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Accounts())
}

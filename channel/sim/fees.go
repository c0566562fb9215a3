package sim

import (
	"fmt"
	"slices"
	"time"

	"orderpay"
)

// Fees and the merchant account (protocols §F4). Each channel charges every payment its
// service fee, per payment, rounded to the fen; a refund may give back its share of the fee
// (a switch: not confirmed on either channel); the money, net of fees, moves through the
// merchant's account, whose balance chains from day to day. Everything here is reckoned when
// a bill is drawn up, from the trades as they stand and this configuration, so nothing of it
// needs journalling: the same trades and the same configuration always give the same bills.
//
// Bill faults (BillFault) make the channel charge, give back or settle other amounts than
// its contract says, for reconciliation to find; PlantedFaults lists every one a day's bills
// carry, with its exact amount.

// FeeConfig is one channel's fee contract and account as the simulator plays it.
type FeeConfig struct {
	// Rate is the rate every payment is charged; Methods a rate per pay method where it
	// differs (MethodBarcode included). Rate 0 with no methods means DefaultFeeRate.
	Rate    orderpay.FeeRate
	Methods map[orderpay.PayMethod]orderpay.FeeRate
	// Rounding is how a fee rounds to the fen (default half up).
	Rounding orderpay.FeeRounding
	// RefundKeepsFee: a refund gives back no share of its payment's fee. By default a refund
	// gives back its share (orderpay.RefundFeeShare's rule, in the order the refunds settle).
	RefundKeepsFee bool
	// RateChanges are rates the channel starts charging at a time, whatever the contract
	// (a rate change mid-day); from At on, every payment is charged Rate.
	RateChanges []RateChange
	// OpeningBalance is the account's balance before its first movement, fen. With OpeningAt
	// set, the account starts at 0 and OpeningBalance arrives then, as a top-up (a movement
	// of its own, 充值, in that day's account bill): an account with a day of history before
	// its trades, whose first trading day opens from a close a bill shows.
	OpeningBalance int64
	OpeningAt      time.Time
}

// topUpKind is the business type of the opening top-up in both channels' account bills.
const topUpKind = "充值"

// DefaultFeeRate is the simulated rate when none is configured: 0.6 %, the common rate of
// both channels for physical goods.
const DefaultFeeRate orderpay.FeeRate = 60000

// RateChange is the channel charging another rate from a time on.
type RateChange struct {
	At   time.Time
	Rate orderpay.FeeRate
}

// BillFaultKind is a way the channel's money disagrees with its contract.
type BillFaultKind string

const (
	// BillFaultFeeRate: a payment charged at OtherRate instead of its contract's.
	BillFaultFeeRate BillFaultKind = "fee_rate"
	// BillFaultRefundFeeKept: a refund that should give back its share of the fee gives none.
	BillFaultRefundFeeKept BillFaultKind = "refund_fee_kept"
	// BillFaultRefundFeeGiven: a refund gives back its share although the contract says
	// refunds keep the fee (FeeConfig.RefundKeepsFee).
	BillFaultRefundFeeGiven BillFaultKind = "refund_fee_given"
	// BillFaultSettlementMissing: a payment's money never reaches the account (no movement).
	BillFaultSettlementMissing BillFaultKind = "settlement_missing"
	// BillFaultSettlementShort: a payment's money reaches the account Amount fen short.
	BillFaultSettlementShort BillFaultKind = "settlement_short"
	// BillFaultBalanceBreak: the account's balance jumps by Amount fen before a day's first
	// movement: the day does not open at the previous day's close.
	BillFaultBalanceBreak BillFaultKind = "balance_break"
)

// BillFaultRateChange names, in PlantedFaults only, a payment charged at a RateChange's
// rate instead of its contract's: it is configured as FeeConfig.RateChanges, not as a
// BillFault.
const BillFaultRateChange BillFaultKind = "rate_change"

// BillFaultKinds lists every kind a BillFault may have.
var BillFaultKinds = []BillFaultKind{BillFaultFeeRate, BillFaultRefundFeeKept, BillFaultRefundFeeGiven,
	BillFaultSettlementMissing, BillFaultSettlementShort, BillFaultBalanceBreak}

// BillFault is one rule: on Channel ("" for both), each eligible payment, refund or (for
// balance_break) day is hit with Probability (0 means 1), drawn from Config.BillFaultSeed
// and its number, so the same trades always carry the same faults.
type BillFault struct {
	Kind        BillFaultKind
	Channel     string
	Probability float64
	// OtherRate is the rate of fee_rate.
	OtherRate orderpay.FeeRate
	// Amount is how short settlement_short is, and how far balance_break jumps (fen, > 0).
	Amount int64
}

// PlantedFault is one fault a bill carries, as reconciliation should find it: its kind, the
// day and channel, the trade (and refund) it hit, and its money, the bill's figure less the
// contract's, signed fen (a fee charged above the contract positive, a share not given back
// negative, a settlement short negative, a balance that jumped up positive).
type PlantedFault struct {
	Channel     string
	Date        string
	Kind        BillFaultKind
	OutTradeNo  string
	OutRefundNo string
	Amount      int64
}

func (p PlantedFault) String() string {
	return fmt.Sprintf("%s %s %s %s %s %d", p.Channel, p.Date, p.Kind, p.OutTradeNo, p.OutRefundNo, p.Amount)
}

func (c FeeConfig) validate(channel string) error {
	rates := []orderpay.FeeRate{c.Rate}
	for _, r := range c.Methods {
		rates = append(rates, r)
	}
	for _, rc := range c.RateChanges {
		rates = append(rates, rc.Rate)
	}
	for _, r := range rates {
		if r < 0 || r > orderpay.FeeRateUnit/10 {
			return fmt.Errorf("sim: %s fee rate %s is outside 0%%..10%%", channel, r)
		}
	}
	if c.Rounding != "" && !slices.Contains(orderpay.FeeRoundings, c.Rounding) {
		return fmt.Errorf("sim: %s fee rounding %q is not one of %v", channel, c.Rounding, orderpay.FeeRoundings)
	}
	return nil
}

func validateBillFaults(faults []BillFault) error {
	for i, f := range faults {
		switch {
		case !slices.Contains(BillFaultKinds, f.Kind):
			return fmt.Errorf("sim: bill fault %d: kind %q is not one of %v", i, f.Kind, BillFaultKinds)
		case f.Channel != "" && f.Channel != orderpay.ChannelAlipay && f.Channel != orderpay.ChannelWechat:
			return fmt.Errorf("sim: bill fault %d: channel must be alipay, wechat or empty", i)
		case f.Probability < 0 || f.Probability > 1:
			return fmt.Errorf("sim: bill fault %d: probability must be in [0, 1]", i)
		case f.Kind == BillFaultFeeRate && (f.OtherRate < 0 || f.OtherRate > orderpay.FeeRateUnit/10):
			return fmt.Errorf("sim: bill fault %d: other rate outside 0%%..10%%", i)
		case (f.Kind == BillFaultSettlementShort || f.Kind == BillFaultBalanceBreak) && f.Amount <= 0:
			return fmt.Errorf("sim: bill fault %d: %s needs an amount > 0", i, f.Kind)
		}
	}
	return nil
}

// rateAt is the rate the channel charges a payment by method m made at t: the latest rate
// change by then, or the method's rate, or the account's.
func (c FeeConfig) rateAt(m orderpay.PayMethod, t time.Time) orderpay.FeeRate {
	var at time.Time
	rate, changed := orderpay.FeeRate(0), false
	for _, rc := range c.RateChanges {
		if !t.Before(rc.At) && (!changed || !rc.At.Before(at)) {
			rate, at, changed = rc.Rate, rc.At, true
		}
	}
	if changed {
		return rate
	}
	if r, ok := c.Methods[m]; ok {
		return r
	}
	if c.Rate == 0 && len(c.Methods) == 0 {
		return DefaultFeeRate
	}
	return c.Rate
}

// contractRate is the rate the contract says, without rate changes.
func (c FeeConfig) contractRate(m orderpay.PayMethod) orderpay.FeeRate {
	c.RateChanges = nil
	return c.rateAt(m, time.Time{})
}

// fee is the channel's own reckoning of a fee: amount × rate in units of 1e-7, rounded to
// the fen by the configured rule. It is written apart from orderpay.Fee on purpose: the
// simulator plays the channel, and a test comparing the two compares two reckonings.
func (c FeeConfig) fee(amount int64, rate orderpay.FeeRate) int64 {
	return divRound(amount*int64(rate), orderpay.FeeRateUnit, c.Rounding)
}

// divRound is num/den rounded by rule (num ≥ 0, den > 0, num small enough not to overflow:
// an amount of at most 10^12 fen times a rate of at most 10^6).
func divRound(num, den int64, rule orderpay.FeeRounding) int64 {
	q, r := num/den, num%den
	if r == 0 {
		return q
	}
	switch rule {
	case orderpay.RoundDown:
		return q
	case orderpay.RoundUp:
		return q + 1
	case orderpay.RoundHalfEven:
		if 2*r > den || (2*r == den && q%2 == 1) {
			return q + 1
		}
		return q
	}
	if 2*r >= den {
		return q + 1
	}
	return q
}

// refundShares gives back, for a payment of paid fen charged fee, each refund's share of the
// fee, for refunds of amounts in the order they settled: its proportional share, and the
// refund that completes the payment's refund the rest. With keep set, every share is 0.
func (c FeeConfig) refundShares(fee, paid int64, amounts []int64) []int64 {
	shares := make([]int64, len(amounts))
	if c.RefundKeepsFee || fee <= 0 || paid <= 0 {
		return shares
	}
	var refunded, given int64
	for i, a := range amounts {
		share := divRound(fee*a, paid, c.Rounding)
		if refunded+a >= paid {
			share = fee - given
		}
		share = max(0, min(share, fee-given))
		shares[i] = share
		refunded += a
		given += share
	}
	return shares
}

// billFaultHit reports whether a rule of kind hits key (a trade or refund number, or a day)
// on channel, and the rule.
func (s *Simulator) billFaultHit(kind BillFaultKind, channel, key string) (BillFault, bool) {
	for i, f := range s.cfg.BillFaults {
		if f.Kind != kind || (f.Channel != "" && f.Channel != channel) {
			continue
		}
		p := f.Probability
		if p == 0 {
			p = 1
		}
		if draw(s.cfg.BillFaultSeed, fmt.Sprintf("bill:%d:%s:%s", i, channel, key), 0) < p {
			return f, true
		}
	}
	return BillFault{}, false
}

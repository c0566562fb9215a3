package orderpay

import (
	"math/big"
	"strconv"
	"strings"
)

// Fees (docs/reconciliation.md): each merchant account's contracted service fee, as the
// channels file gives it, and the arithmetic both sides of reconciliation agree on. A
// payment records the fee it expects to be charged when it succeeds; a refund the channel
// makes records the share of that fee it expects back. Everything is integer fen; a rate is
// an integer too, so that nothing is ever a float.

// FeeRate is a rate in units of 0.00001 % (one ten-millionth of the amount): the precision
// WeChat Pay's bill writes rates in ("0.60000%"). 0.6 % is 60000, 0.38 % is 38000.
type FeeRate int64

// FeeRateUnit is the number of FeeRate units in one whole (100 %).
const FeeRateUnit = 10_000_000

// maxFeeRate bounds a rate: 10 %, far above any contracted payment fee.
const maxFeeRate FeeRate = FeeRateUnit / 10

// ParseFeeRate reads a percentage with at most five decimals: "0.6%", "0.38%", "0.60000%",
// "0%". Anything else (no %, a sign, six decimals, more than 10 %) is EINVALID: a rate that
// does not parse exactly is never rounded into one.
func ParseFeeRate(s string) (FeeRate, error) {
	bad := Errorf(EINVALID, "fee rate %q is not a percentage with at most five decimals, from 0%% to 10%%, such as \"0.6%%\"", s)
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok {
		return 0, bad
	}
	whole, frac, hasDot := strings.Cut(num, ".")
	if whole == "" || len(whole) > 2 || (hasDot && (frac == "" || len(frac) > 5)) {
		return 0, bad
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	frac += strings.Repeat("0", 5-len(frac))
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	r := FeeRate(w*100_000 + f)
	if r > maxFeeRate {
		return 0, bad
	}
	return r, nil
}

// String writes the rate as WeChat Pay's bill does: five decimals and a percent sign.
func (r FeeRate) String() string {
	frac := strconv.FormatInt(int64(r)%100_000, 10)
	return strconv.FormatInt(int64(r)/100_000, 10) + "." + strings.Repeat("0", 5-len(frac)) + frac + "%"
}

// FeeRounding is how a fee of a fractional fen is rounded to the fen.
type FeeRounding string

const (
	RoundHalfUp   FeeRounding = "half_up"   // 0.5 fen and above up: the default
	RoundHalfEven FeeRounding = "half_even" // banker's rounding
	RoundDown     FeeRounding = "down"      // truncated
	RoundUp       FeeRounding = "up"        // any fraction up
)

// FeeRoundings lists the rules a channels file may name.
var FeeRoundings = []FeeRounding{RoundHalfUp, RoundHalfEven, RoundDown, RoundUp}

// roundDiv is num/den (den > 0, num ≥ 0) rounded by rule, exactly, whatever the size.
func roundDiv(num, den *big.Int, rule FeeRounding) int64 {
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if m.Sign() != 0 {
		twice := new(big.Int).Lsh(m, 1)
		c := twice.Cmp(den)
		switch rule {
		case RoundDown:
		case RoundUp:
			q.Add(q, big.NewInt(1))
		case RoundHalfEven:
			if c > 0 || (c == 0 && q.Bit(0) == 1) {
				q.Add(q, big.NewInt(1))
			}
		default: // half up
			if c >= 0 {
				q.Add(q, big.NewInt(1))
			}
		}
	}
	return q.Int64()
}

// Fee is the fee of amount (fen, ≥ 0) at rate, rounded to the fen by rule: per payment, as
// the channels charge it.
func Fee(amount int64, rate FeeRate, rule FeeRounding) int64 {
	if amount <= 0 || rate <= 0 {
		return 0
	}
	return roundDiv(new(big.Int).Mul(big.NewInt(amount), big.NewInt(int64(rate))), big.NewInt(FeeRateUnit), rule)
}

// RefundFeeShare is the part of a payment's fee a refund gives back when the channel returns
// fees: fee is what the payment of paid fen was charged; refund is this refund's amount,
// refundedBefore the amount the channel refunded of the payment before it, and sharesBefore
// the fee it gave back with those. A refund that completes the payment's refund gives back
// the rest of the fee, so that the shares of a fully refunded payment sum exactly to its fee;
// any other refund gives back its proportional share, fee × refund / paid, rounded by rule.
// Nothing is ever given back twice: the share is bounded by what is left.
func RefundFeeShare(fee, paid, refund, refundedBefore, sharesBefore int64, rule FeeRounding) int64 {
	if fee <= 0 || paid <= 0 || refund <= 0 {
		return 0
	}
	left := max(fee-sharesBefore, 0)
	if refundedBefore+refund >= paid {
		return left
	}
	share := roundDiv(new(big.Int).Mul(big.NewInt(fee), big.NewInt(refund)), big.NewInt(paid), rule)
	return min(share, left)
}

// FeeRule is one merchant account's contract: its rate, a rate per method where the channel
// charges another, how fees round, and whether a refund gives its share of the fee back (not
// confirmed on either channel, so a switch).
type FeeRule struct {
	Rate             FeeRate
	Methods          map[PayMethod]FeeRate
	Rounding         FeeRounding
	RefundReturnsFee bool
}

// RateFor is the rate a payment by method m is charged.
func (r FeeRule) RateFor(m PayMethod) FeeRate {
	if rate, ok := r.Methods[m]; ok {
		return rate
	}
	return r.Rate
}

// RoundingRule is the rule's rounding, half up when none is set.
func (r FeeRule) RoundingRule() FeeRounding {
	if r.Rounding == "" {
		return RoundHalfUp
	}
	return r.Rounding
}

// FeeFor is the fee a payment of amount by method m is charged, and the rate.
func (r FeeRule) FeeFor(amount int64, m PayMethod) (int64, FeeRate) {
	rate := r.RateFor(m)
	return Fee(amount, rate, r.RoundingRule()), rate
}

// FeeSchedule is every configured account's contract, by channel name (one merchant account
// per channel). A channel without an entry has no contract written down: its fees and
// settlement cannot be checked.
type FeeSchedule map[string]FeeRule

// Rule is the contract of channel, and whether there is one.
func (s FeeSchedule) Rule(channel string) (FeeRule, bool) {
	r, ok := s[channel]
	return r, ok
}

package channeltest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// The fee property of random days, shared by both adapters' tests: a random contract for the
// simulator to play, and what orderpay's own arithmetic expects of the bills it draws up.

// RandomFees is a random contract for seed: a rate up to 1 %, sometimes a rate of its own
// for method (the payments' method) or for other (a method they do not use), each rounding
// rule (and none) on every fifth seed, refunds keeping the fee one time in three, and an
// opening balance. It returns the contract and the rate method's payments pay.
func RandomFees(rng *rand.Rand, seed uint64, method, other orderpay.PayMethod) (sim.FeeConfig, orderpay.FeeRate) {
	fees := sim.FeeConfig{
		Rate:           orderpay.FeeRate(rng.IntN(100_001)),
		Rounding:       append(slices.Clone(orderpay.FeeRoundings), "")[seed%5],
		RefundKeepsFee: rng.IntN(3) == 0,
		OpeningBalance: rng.Int64N(1_000_000),
	}
	switch rng.IntN(3) {
	case 0:
		fees.Methods = map[orderpay.PayMethod]orderpay.FeeRate{method: orderpay.FeeRate(rng.IntN(100_001))}
	case 1:
		fees.Methods = map[orderpay.PayMethod]orderpay.FeeRate{other: orderpay.FeeRate(rng.IntN(100_001))}
	}
	rate := fees.Rate
	if r, ok := fees.Methods[method]; ok {
		rate = r
	}
	return fees, rate
}

// FeePayment is one payment of a random day, with its refunds in the order they were made.
type FeePayment struct {
	No      string
	Amount  int64
	Refunds []FeeRefund
}

// FeeRefund is one refund of a FeePayment; Key names it in the bills' rows (the adapter's
// out_trade_no "/" refund number, or the refund number alone, as the test keys them).
type FeeRefund struct {
	Key    string
	Amount int64
}

// ExpectedFees is what orderpay's arithmetic expects of the bills: each payment's fee
// (orderpay.Fee at rate, by fees' rounding), and each settled refund's share of it
// (orderpay.RefundFeeShare, none if the contract keeps fees), in the order the refunds
// settled: by settledAt (the bills' times of the refund rows, by Key), then the order they
// were made. A refund the bills do not have did not settle and has no share.
func ExpectedFees(fees sim.FeeConfig, rate orderpay.FeeRate, pays []FeePayment, settledAt map[string]time.Time) (feeOf, shareOf map[string]int64) {
	rounding := cmp.Or(fees.Rounding, orderpay.RoundHalfUp)
	feeOf, shareOf = map[string]int64{}, map[string]int64{}
	for _, p := range pays {
		fee := orderpay.Fee(p.Amount, rate, rounding)
		feeOf[p.No] = fee
		type settled struct {
			FeeRefund
			at    time.Time
			order int
		}
		var done []settled
		for i, r := range p.Refunds {
			if at, ok := settledAt[r.Key]; ok {
				done = append(done, settled{r, at, i})
			}
		}
		slices.SortStableFunc(done, func(a, b settled) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.order, b.order)) })
		var before, given int64
		for _, r := range done {
			var share int64
			if !fees.RefundKeepsFee {
				share = orderpay.RefundFeeShare(fee, p.Amount, r.Amount, before, given, rounding)
			}
			before += r.Amount
			given += share
			shareOf[r.Key] = share
		}
	}
	return feeOf, shareOf
}

// CheckChain checks that an account bill's movements chain from closing (each balance the
// one before plus its amount) and returns the day's close and the sum of its movements; a
// movement that does not chain is reported through fail.
func CheckChain(acct *orderpay.AccountBill, closing int64, fail func(format string, args ...any)) (close, sum int64) {
	for i, m := range acct.Movements {
		if m.Balance != closing+m.Amount {
			fail("%s: movement %d (%+v) does not chain from %d", acct.Date, i, m, closing)
		}
		closing = m.Balance
		sum += m.Amount
	}
	return closing, sum
}

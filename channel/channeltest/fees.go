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

// FeeTrader is what RandomTrading drives: a hand-moved clock, a payment of amount (its
// out_trade_no), and a refund of a payment, accepted (made or pending) or the test fails.
type FeeTrader struct {
	Advance func(time.Duration)
	Now     func() time.Time
	Pay     func(amount int64) string
	Refund  func(outTradeNo, outRefundNo string, amount, total int64)
	// RefundNo names a payment's n-th refund (from 1).
	RefundNo func(outTradeNo string, n int) string
	// Key names a refund as ExpectedFees keys it.
	Key func(outTradeNo, outRefundNo string) string
}

// RandomTrading trades until max payments or until an hour before end: every step the clock
// moves on up to step, and either refunds part or the rest of an open payment (one step in
// three, when one is open) or takes a new payment (up to 5,000 yuan; one in four of a few
// fen, whose fees are fractions of a fen). It returns the payments with their refunds.
func RandomTrading(rng *rand.Rand, tr FeeTrader, end time.Time, max int, step time.Duration) []FeePayment {
	var pays []FeePayment
	left := map[int]int64{}
	for n := 0; n < max; {
		tr.Advance(time.Duration(1+rng.Int64N(int64(step/time.Second))) * time.Second)
		if !tr.Now().Before(end.Add(-time.Hour)) {
			break
		}
		var open []int
		for i := range pays {
			if left[i] > 0 {
				open = append(open, i)
			}
		}
		if len(open) > 0 && rng.IntN(3) == 0 {
			i := open[rng.IntN(len(open))]
			p := &pays[i]
			amount := left[i]
			if rng.IntN(2) == 0 && left[i] > 1 {
				amount = 1 + rng.Int64N(left[i]-1)
			}
			no := tr.RefundNo(p.No, len(p.Refunds)+1)
			tr.Refund(p.No, no, amount, p.Amount)
			left[i] -= amount
			p.Refunds = append(p.Refunds, FeeRefund{Key: tr.Key(p.No, no), Amount: amount})
			continue
		}
		n++
		amount := 1 + rng.Int64N(500_000)
		if rng.IntN(4) == 0 {
			amount = 1 + rng.Int64N(300)
		}
		pays = append(pays, FeePayment{No: tr.Pay(amount), Amount: amount})
		left[len(pays)-1] = amount
	}
	return pays
}

package orderpay_test

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"orderpay"
)

// refRound is x (≥ 0) rounded to an integer by rule, reckoned with big rationals from the
// rule's definition: the reference the fee arithmetic is checked against.
func refRound(x *big.Rat, rule orderpay.FeeRounding) int64 {
	floor := new(big.Int).Quo(x.Num(), x.Denom()) // x ≥ 0: truncation is the floor
	frac := new(big.Rat).Sub(x, new(big.Rat).SetInt(floor))
	half := big.NewRat(1, 2)
	up := false
	switch rule {
	case orderpay.RoundDown:
	case orderpay.RoundUp:
		up = frac.Sign() > 0
	case orderpay.RoundHalfEven:
		c := frac.Cmp(half)
		up = c > 0 || (c == 0 && floor.Bit(0) == 1)
	case orderpay.RoundHalfUp:
		up = frac.Cmp(half) >= 0
	default:
		panic("unknown rounding " + string(rule))
	}
	if up {
		floor.Add(floor, big.NewInt(1))
	}
	return floor.Int64()
}

// refFee is amount × rate / FeeRateUnit, rounded by rule.
func refFee(amount int64, rate orderpay.FeeRate, rule orderpay.FeeRounding) int64 {
	return refRound(new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(amount), big.NewInt(int64(rate))), big.NewInt(orderpay.FeeRateUnit)), rule)
}

// randAmount is an amount of fen: often small (where rounding shows), sometimes up to the
// largest an order may be, sometimes huge (where a product would overflow int64).
func randAmount(rng *rand.Rand) int64 {
	switch rng.IntN(4) {
	case 0:
		return 1 + rng.Int64N(100)
	case 1:
		return 1 + rng.Int64N(1_000_000)
	case 2:
		return 1 + rng.Int64N(10_000_000_000)
	}
	return 1 + rng.Int64N(1<<62)
}

func TestFeeRoundsAsItsRuleSays(t *testing.T) {
	// Known values: 0.6 % of 49.90 yuan is 29.94 fen; of 0.75 yuan 0.45 fen; of 2.50 yuan
	// exactly 1.5 fen and of 7.50 yuan 4.5 fen (half even goes to 2 and to 4).
	for _, c := range []struct {
		amount                     int64
		halfUp, halfEven, down, up int64
	}{{4990, 30, 30, 29, 30}, {75, 0, 0, 0, 1}, {250, 2, 2, 1, 2}, {750, 5, 4, 4, 5}, {0, 0, 0, 0, 0}, {-5, 0, 0, 0, 0}} {
		for rule, want := range map[orderpay.FeeRounding]int64{orderpay.RoundHalfUp: c.halfUp, orderpay.RoundHalfEven: c.halfEven,
			orderpay.RoundDown: c.down, orderpay.RoundUp: c.up} {
			if got := orderpay.Fee(c.amount, 60000, rule); got != want {
				t.Errorf("Fee(%d, 0.6%%, %s) = %d, want %d", c.amount, rule, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(37, 1))
	for range 20000 {
		amount := randAmount(rng)
		rate := orderpay.FeeRate(rng.Int64N(orderpay.FeeRateUnit/10 + 1))
		rule := orderpay.FeeRoundings[rng.IntN(len(orderpay.FeeRoundings))]
		if got, want := orderpay.Fee(amount, rate, rule), refFee(amount, rate, rule); got != want {
			t.Fatalf("Fee(%d, %v, %s) = %d, want %d", amount, rate, rule, got, want)
		}
	}
	// A rule left empty rounds half up.
	if got := (orderpay.FeeRule{Rate: 60000}).RoundingRule(); got != orderpay.RoundHalfUp {
		t.Fatalf("an empty rounding is %q, want half up", got)
	}
}

// The shares of a payment's refunds: whatever the split of the amount and the order the
// refunds come in, each is ≥ 0, a refund that does not complete the payment's refund gets
// its proportional share (rounded by the rule, bounded by what is left), and the shares of a
// payment refunded whole sum exactly to its fee; of one refunded in part, to no more.
func TestRefundFeeSharesSumToTheFee(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	for range 20000 {
		paid := randAmount(rng)
		if rng.IntN(2) == 0 {
			paid = 1 + rng.Int64N(500)
		}
		rule := orderpay.FeeRoundings[rng.IntN(len(orderpay.FeeRoundings))]
		rate := orderpay.FeeRate(rng.Int64N(orderpay.FeeRateUnit/10 + 1))
		fee := orderpay.Fee(paid, rate, rule)
		whole := rng.IntN(3) > 0
		parts := splitFen(rng, paid, 1+rng.IntN(6), whole)
		var before, shares int64
		for i, refund := range parts {
			share := orderpay.RefundFeeShare(fee, paid, refund, before, shares, rule)
			left := fee - shares
			switch {
			case share < 0 || share > left:
				t.Fatalf("paid %d fee %d, refund %d of %v after %d (shares %d): share %d, outside [0, %d]", paid, fee, refund, parts, before, shares, share, left)
			case before+refund == paid && share != left:
				t.Fatalf("paid %d fee %d, the last refund %d of %v: share %d, want the rest %d", paid, fee, refund, parts, share, left)
			case before+refund < paid:
				prop := refRound(new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(fee), big.NewInt(refund)), big.NewInt(paid)), rule)
				if want := min(prop, left); share != want {
					t.Fatalf("paid %d fee %d, refund %d (%d of %v) %s: share %d, want %d", paid, fee, refund, i, parts, rule, share, want)
				}
			}
			before, shares = before+refund, shares+share
		}
		if whole && shares != fee {
			t.Fatalf("paid %d fee %d refunded whole in %v: shares sum to %d", paid, fee, parts, shares)
		}
		if shares > fee {
			t.Fatalf("paid %d fee %d refunded %v: shares %d give back more than the fee", paid, fee, parts, shares)
		}
	}
	// Nothing to share: no fee, no payment, no refund.
	for _, c := range [][3]int64{{0, 100, 50}, {5, 0, 50}, {5, 100, 0}, {-1, 100, 50}} {
		if got := orderpay.RefundFeeShare(c[0], c[1], c[2], 0, 0, orderpay.RoundUp); got != 0 {
			t.Errorf("RefundFeeShare(fee %d, paid %d, refund %d) = %d, want 0", c[0], c[1], c[2], got)
		}
	}
}

// splitFen splits amount into at most n positive parts in a random order, summing to amount
// when whole, to less (but at least 1) otherwise.
func splitFen(rng *rand.Rand, amount int64, n int, whole bool) []int64 {
	total := amount
	if !whole && amount > 1 {
		total = 1 + rng.Int64N(amount-1)
	}
	n = int(min(int64(n), total))
	cuts := map[int64]bool{}
	for len(cuts) < n-1 {
		cuts[1+rng.Int64N(total-1)] = true
	}
	points := []int64{0, total}
	for c := range cuts {
		points = append(points, c)
	}
	slices.Sort(points)
	parts := make([]int64, 0, n)
	for i := 1; i < len(points); i++ {
		parts = append(parts, points[i]-points[i-1])
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return parts
}

func TestParseFeeRate(t *testing.T) {
	for s, want := range map[string]orderpay.FeeRate{"0.6%": 60000, "0.38%": 38000, "0.60000%": 60000, "0%": 0, "0.00001%": 1,
		"10%": 1_000_000, "10.00000%": 1_000_000, "1.5%": 150000, "09.99999%": 999_999} {
		got, err := orderpay.ParseFeeRate(s)
		if err != nil || got != want {
			t.Errorf("ParseFeeRate(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "%", "0.6", "-0.6%", "+0.6%", "0.600001%", "10.00001%", "11%", "100%", "abc%", "0.6 %", ".5%",
		"5.%", "1e2%", "0x1%", "0,6%", "0.6%%", "٣%", "0.6%x"} {
		if got, err := orderpay.ParseFeeRate(s); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("ParseFeeRate(%q) = %d, %v; want EINVALID", s, got, err)
		}
	}
	// Every rate from 0 to 10 % writes as five decimals and a percent sign, and reads back.
	rng := rand.New(rand.NewPCG(37, 3))
	for range 20000 {
		r := orderpay.FeeRate(rng.Int64N(orderpay.FeeRateUnit/10 + 1))
		s := r.String()
		if whole, frac, _ := strings.Cut(strings.TrimSuffix(s, "%"), "."); !strings.HasSuffix(s, "%") || len(frac) != 5 || whole == "" {
			t.Fatalf("%d writes as %q", r, s)
		}
		if back, err := orderpay.ParseFeeRate(s); err != nil || back != r {
			t.Fatalf("%d writes as %q, which reads back as %d, %v", r, s, back, err)
		}
	}
	// Random text: whatever parses is the rate the text says, exactly.
	const alphabet = "0123456789.%-+ e"
	for range 50000 {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		r, err := orderpay.ParseFeeRate(s)
		if err != nil {
			if orderpay.ErrorCode(err) != orderpay.EINVALID {
				t.Fatalf("ParseFeeRate(%q): %v, want EINVALID", s, err)
			}
			continue
		}
		num, ok := new(big.Rat).SetString(strings.TrimSuffix(strings.TrimSpace(s), "%"))
		if !ok || new(big.Rat).Mul(num, big.NewRat(100_000, 1)).Cmp(big.NewRat(int64(r), 1)) != 0 || r > orderpay.FeeRateUnit/10 {
			t.Fatalf("ParseFeeRate(%q) = %d, which is not the rate the text says", s, r)
		}
	}
}

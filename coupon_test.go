package orderpay

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestApportion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		discount int64
		amounts  []int64
		want     []int64
	}{
		{"no lines", 0, nil, []int64{}},
		{"no discount", 0, []int64{100, 200}, []int64{0, 0}},
		{"one line takes it all", 1000, []int64{5000}, []int64{1000}},
		{"exact shares", 300, []int64{100, 200}, []int64{100, 200}},
		// 1000×3333/10000 = 333.3 twice, 1000×3334/10000 = 333.4: floors 333+333+333 = 999;
		// the one fen left goes to the largest remainder, the third line (0.4 > 0.3).
		{"remainder to the largest", 1000, []int64{3333, 3333, 3334}, []int64{333, 333, 334}},
		// Three equal lines: each 33.33…; the fen left goes to the earliest.
		{"ties to the earlier line", 100, []int64{100, 100, 100}, []int64{34, 33, 33}},
		// 11/3 = 3.67 each: 3, 3, 3 and two fen left, to the first two.
		{"two fen left", 11, []int64{5, 5, 5}, []int64{4, 4, 3}},
		{"discount equals total", 601, []int64{100, 200, 301}, []int64{100, 200, 301}},
		{"zero-amount line gets nothing", 10, []int64{0, 7, 0, 3}, []int64{0, 7, 0, 3}},
		{"small discount over many lines", 2, []int64{10, 30, 20, 40}, []int64{0, 1, 0, 1}},
		// 7×[3,3,4]/10 = 2.1, 2.1, 2.8 → 2,2,2 and 1 left → the third (0.8).
		{"remainder beats a tie", 7, []int64{3, 3, 4}, []int64{2, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Apportion(tc.discount, tc.amounts)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Apportion(%d, %v) = %v, want %v", tc.discount, tc.amounts, got, tc.want)
			}
		})
	}
}

// apportionBig is the definition in arbitrary precision, to check Apportion against.
func apportionBig(discount int64, amounts []int64) []int64 {
	total := new(big.Int)
	for _, a := range amounts {
		total.Add(total, big.NewInt(a))
	}
	shares := make([]int64, len(amounts))
	if total.Sign() == 0 {
		return shares
	}
	rems := make([]*big.Int, len(amounts))
	left := discount
	for i, a := range amounts {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(discount), big.NewInt(a)), total, new(big.Int))
		shares[i], rems[i] = q.Int64(), r
		left -= q.Int64()
	}
	for ; left > 0; left-- {
		best := -1
		for i, r := range rems {
			if r != nil && (best < 0 || r.Cmp(rems[best]) > 0) {
				best = i
			}
		}
		shares[best]++
		rems[best] = nil
	}
	return shares
}

func TestApportionProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2026))
	for n := range 20000 {
		lines := 1 + rng.IntN(8)
		max := int64(1_000_000)
		if n%3 == 0 {
			max = 10_000_000_000 // 1e10 fen a line: discount × amount passes int64
		}
		amounts := make([]int64, lines)
		var total int64
		for i := range amounts {
			if rng.IntN(10) > 0 {
				amounts[i] = 1 + rng.Int64N(max)
			}
			total += amounts[i]
		}
		discount := int64(0)
		if total > 0 {
			discount = rng.Int64N(total + 1)
		}
		got := Apportion(discount, amounts)
		var sum int64
		for i, s := range got {
			if s < 0 || s > amounts[i] {
				t.Fatalf("Apportion(%d, %v) = %v: share %d outside [0, %d]", discount, amounts, got, s, amounts[i])
			}
			sum += s
		}
		if sum != discount {
			t.Fatalf("Apportion(%d, %v) = %v sums to %d", discount, amounts, got, sum)
		}
		if want := apportionBig(discount, amounts); !slices.Equal(got, want) {
			t.Fatalf("Apportion(%d, %v) = %v, the definition gives %v", discount, amounts, got, want)
		}
	}
}

func TestApportionLargeValues(t *testing.T) {
	amounts := []int64{10_000_000_000, 10_000_000_000, 9_999_999_999}
	discount := int64(29_999_999_998)
	got := Apportion(discount, amounts)
	if want := apportionBig(discount, amounts); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Near the top of int64: the sum still fits, every product is 128-bit.
	huge := []int64{math.MaxInt64 / 2, math.MaxInt64/2 - 1}
	got = Apportion(math.MaxInt64/2, huge)
	if got[0]+got[1] != math.MaxInt64/2 || !slices.Equal(got, apportionBig(math.MaxInt64/2, huge)) {
		t.Fatalf("huge: %v", got)
	}
}

func TestApportionRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		discount int64
		amounts  []int64
	}{
		{"discount above total", 301, []int64{100, 200}},
		{"negative discount", -1, []int64{100}},
		{"negative amount", 1, []int64{100, -1}},
		{"sum overflows", 1, []int64{math.MaxInt64, 1}},
		{"discount without lines", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("Apportion(%d, %v) did not panic", tc.discount, tc.amounts)
				}
			}()
			Apportion(tc.discount, tc.amounts)
		})
	}
}

func TestRefundShare(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		payable, qty, countedQty, countedAm int64
		refund                              int64
		want                                int64
	}{
		{"everything at once", 1000, 3, 0, 0, 3, 1000},
		{"one of three, floored", 1000, 3, 0, 0, 1, 333},
		{"second of three", 1000, 3, 1, 333, 1, 333},
		{"last unit takes what is left", 1000, 3, 2, 666, 1, 334},
		{"two of three", 1000, 3, 0, 0, 2, 666},
		{"nothing", 1000, 3, 1, 333, 0, 0},
		{"exact division", 900, 3, 0, 0, 1, 300},
		{"free line", 0, 5, 0, 0, 2, 0},
		{"more units than fen", 2, 5, 0, 0, 1, 0},
		{"more units than fen, the rest", 2, 5, 1, 0, 4, 2},
		{"large", 10_000_000_000, 10_000, 0, 0, 9_999, 9_999_000_000},
		// The reproduction of the over-refund: cup ×3, payable 299. Requests of 1 (99) and 1
		// (100); the first is rejected, so 1 unit and 100 fen still count. The two units left
		// share the 199 fen left, not positions 2 and 3 at 100 each.
		{"after a rejection, the next unit", 299, 3, 1, 100, 1, 99},
		{"after a rejection, the last unit", 299, 3, 2, 199, 1, 100},
		// Survivors that took more than their positional share: what is left is shared, never
		// below zero.
		{"generous survivors leave less", 5, 10, 3, 3, 1, 0},
		{"generous survivors, the rest", 5, 10, 3, 3, 7, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefundShare(tc.payable, tc.qty, tc.countedQty, tc.countedAm, tc.refund); got != tc.want {
				t.Fatalf("RefundShare(%d, %d, %d, %d, %d) = %d, want %d", tc.payable, tc.qty, tc.countedQty, tc.countedAm, tc.refund, got, tc.want)
			}
		})
	}
}

// Random sequences of requests, rejections and approvals on one line: whatever is asked,
// in whatever parts, and whichever requests are rejected on the way (rejected units may be
// asked for again), the requests that still count never give back more than the line's
// payable, never a negative amount, and give back exactly the payable once they take every
// unit.
func TestRefundShareOverSequencesWithRejections(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2026))
	type request struct {
		qty, amount int64
		reviewed    bool // approved: can no longer be rejected
		rejected    bool
	}
	for range 20000 {
		qty := 1 + rng.Int64N(12)
		payable := rng.Int64N(10_000_000_001)
		if rng.IntN(3) == 0 {
			payable = rng.Int64N(3 * qty) // fewer fen than units, or close: rounding matters most
		}
		var reqs []request
		counted := func() (units, money int64) {
			for _, r := range reqs {
				if !r.rejected {
					units, money = units+r.qty, money+r.amount
				}
			}
			return units, money
		}
		for step := 0; step < 40; step++ {
			units, money := counted()
			switch op := rng.IntN(4); {
			case op <= 1 && units < qty: // a new request for some of the units not asked for
				part := 1 + rng.Int64N(qty-units)
				share := RefundShare(payable, qty, units, money, part)
				if share < 0 {
					t.Fatalf("RefundShare(%d, %d, %d, %d, %d) = %d < 0", payable, qty, units, money, part, share)
				}
				reqs = append(reqs, request{qty: part, amount: share})
			case op == 2: // the merchant rejects an open request
				if open := openRequests(len(reqs), func(i int) bool { return !reqs[i].reviewed && !reqs[i].rejected }); len(open) > 0 {
					reqs[open[rng.IntN(len(open))]].rejected = true
				}
			default: // or approves one
				if open := openRequests(len(reqs), func(i int) bool { return !reqs[i].reviewed && !reqs[i].rejected }); len(open) > 0 {
					reqs[open[rng.IntN(len(open))]].reviewed = true
				}
			}
			units, money = counted()
			if money > payable || units == qty && money != payable {
				t.Fatalf("line of %d units, payable %d: requests that count take %d units and %d fen (%+v)", qty, payable, units, money, reqs)
			}
		}
	}
}

func openRequests(n int, open func(int) bool) []int {
	var out []int
	for i := range n {
		if open(i) {
			out = append(out, i)
		}
	}
	return out
}

func TestRefundShareRefusesBadInput(t *testing.T) {
	for _, args := range [][5]int64{{100, 0, 0, 0, 0}, {-1, 3, 0, 0, 1}, {100, 3, 2, 0, 2}, {100, 3, -1, 0, 1}, {100, 3, 0, 0, -1},
		{100, 3, 1, 101, 1}, {100, 3, 1, -1, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("RefundShare%v did not panic", args)
				}
			}()
			RefundShare(args[0], args[1], args[2], args[3], args[4])
		}()
	}
}

func TestCouponTemplateValidAt(t *testing.T) {
	t0 := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		from, until time.Time
		at          time.Time
		want        bool
	}{
		{time.Time{}, time.Time{}, t0, true},
		{t0, time.Time{}, t0, true},
		{t0, time.Time{}, t0.Add(-time.Millisecond), false},
		{time.Time{}, t0, t0.Add(-time.Millisecond), true},
		{time.Time{}, t0, t0, false},
		{t0, t0.Add(time.Hour), t0.Add(30 * time.Minute), true},
	} {
		tpl := CouponTemplate{ValidFrom: tc.from, ValidUntil: tc.until}
		if got := tpl.ValidAt(tc.at); got != tc.want {
			t.Errorf("[%v, %v) at %v = %v, want %v", tc.from, tc.until, tc.at, got, tc.want)
		}
	}
}

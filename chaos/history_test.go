package chaos

import (
	"math"
	"testing"
	"time"
)

// A worker's pass is the mean of its fastest nine tenths between two scrapes, each
// bucket's passes at the bucket's middle; passes before the first scrape do not count.
func TestPassMeansLeaveOutTheSlowestTenth(t *testing.T) {
	inf := math.Inf(1)
	before := map[string]map[float64]float64{"refunds": {0.00005: 100, 0.0001: 100, 0.0002: 100, 0.01: 100, inf: 100}}
	after := map[string]map[float64]float64{
		// 100 passes since: 50 at most 50 µs (25 µs each, the middle), 40 in (50, 100]
		// µs (75), and 10 slow ones in (200 µs, 10 ms] that the mean leaves out.
		"refunds": {0.00005: 150, 0.0001: 190, 0.0002: 190, 0.01: 200, inf: 200},
		// No pass since the first scrape: no figure.
		"idle": {0.00005: 0, inf: 0},
	}
	got := passMeans(before, after)
	// (50 × 25 + 40 × 75) / 90 µs.
	if want := 0.047; got["refunds"] != want {
		t.Fatalf("refunds' pass %v ms, want %v", got["refunds"], want)
	}
	if _, ok := got["idle"]; ok {
		t.Fatalf("a worker with no pass has a figure: %v", got)
	}
	if got := trimmedMeanMS([]time.Duration{9 * time.Second, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond,
		time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}); got != 2 {
		t.Fatalf("trimmed mean %v ms, want 2 (the 9 s left out)", got)
	}
}

// The templates' kinds are drawn by their shares, which add up to one.
func TestHistoryKindsCoverTheirShares(t *testing.T) {
	var sum float64
	for _, k := range historyKinds {
		sum += k.share
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares add up to %v", sum)
	}
	counts := make([]int, len(historyKinds))
	for i := range 10000 {
		counts[historyKindOf(float64(i)/10000)]++
	}
	for k, c := range counts {
		if want := int(historyKinds[k].share * 10000); c < want-1 || c > want+1 {
			t.Fatalf("kind %s drawn %d times in 10,000, want %d", historyKinds[k].name, c, want)
		}
	}
}

// A paired ratio is the median of each pair's shop ÷ control: a pair the machine slowed on
// one side moves it little, where a ratio of the two sides' own figures would follow it.
func TestPairedRatioIsTheMedianOfThePairs(t *testing.T) {
	shop := []float64{10, 12, 40, 11} // the third round stalled on the shop's side
	control := []float64{10, 10, 10, 10}
	if got := pairedRatio(shop, control); got != 1.15 {
		t.Fatalf("paired ratio %v, want 1.15 (the mean of the middle pairs, 1.1 and 1.2)", got)
	}
	if got := pairedRatio([]float64{3, 0, 5}, []float64{1, 2, 5}); got != 2 {
		t.Fatalf("paired ratio %v, want 2 (of 3 and 1, the pair with no figure left out)", got)
	}
	if got := pairedRatio(nil, []float64{1}); got != 0 {
		t.Fatalf("paired ratio of nothing %v, want 0", got)
	}
	if got := medianOf([]float64{5, 1, 3}); got != 3 {
		t.Fatalf("median %v, want 3", got)
	}
}

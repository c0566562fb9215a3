package chaos

import (
	"math"
	"testing"
)

// A worker's median pass comes from the histogram's buckets between two scrapes, within
// its bucket, and passes before the first scrape do not count.
func TestPassMediansInterpolateWithinTheBucket(t *testing.T) {
	inf := math.Inf(1)
	before := map[string]map[float64]float64{"refunds": {0.00005: 100, 0.0001: 100, 0.0002: 100, inf: 100}}
	after := map[string]map[float64]float64{
		// 100 passes since: 20 at most 50 µs, 60 in (50, 100] µs, 20 in (100, 200] µs.
		"refunds": {0.00005: 120, 0.0001: 180, 0.0002: 200, inf: 200},
		// No pass since the first scrape: no figure.
		"idle": {0.00005: 0, inf: 0},
	}
	got := passMedians(before, after)
	// The 50th pass is the 30th of the 60 in (50, 100] µs: half-way, 75 µs.
	if got["refunds"] != 0.075 {
		t.Fatalf("median of refunds %v ms, want 0.075", got["refunds"])
	}
	if _, ok := got["idle"]; ok {
		t.Fatalf("a worker with no pass has a median: %v", got)
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

package httpapi

import (
	"slices"
	"testing"

	"orderpay"
)

// Each bar of the convergence chart ends on a bound of the store's latency buckets, so that
// each bucket's count falls in one bar whole; and each bucket's bound is at most a third
// above the one before: the most a percentile read from them can be above the latency it
// stands for.
func TestChartBarsEndOnLatencyBounds(t *testing.T) {
	for _, b := range latencyBuckets {
		if !slices.Contains(orderpay.PaidLatencyBounds, b) {
			t.Errorf("the bar ≤%s ends inside a latency bucket", b)
		}
	}
	bounds := orderpay.PaidLatencyBounds
	if !slices.IsSorted(bounds) {
		t.Fatalf("latency bounds not in order: %v", bounds)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i]*3 > bounds[i-1]*4 {
			t.Errorf("bucket %s is more than a third above %s", bounds[i], bounds[i-1])
		}
	}
}

package orderpay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
)

func TestForEachCallsEveryItemOnceWithBoundedConcurrency(t *testing.T) {
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	var running, peak atomic.Int32
	var mu sync.Mutex
	seen := map[int]int{}
	err := orderpay.ForEach(context.Background(), items, 4, func(_ context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range items {
		if seen[i] != 1 {
			t.Fatalf("item %d called %d times", i, seen[i])
		}
	}
	if p := peak.Load(); p > 4 || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..4", p)
	}
}

// One failing item does not stop the others; its error is returned.
func TestForEachReturnsAnErrorAfterTheRest(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := orderpay.ForEach(context.Background(), []string{"a", "b", "c", "d"}, 2, func(_ context.Context, s string) error {
		calls.Add(1)
		if s == "b" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() != 4 {
		t.Fatalf("err %v after %d calls; want boom after 4", err, calls.Load())
	}
	if err := orderpay.ForEach(context.Background(), []int(nil), 8, func(context.Context, int) error { return boom }); err != nil {
		t.Fatalf("no items: %v", err)
	}
}

func TestForEachStopsHandingOutItemsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	err := orderpay.ForEach(ctx, make([]int, 50), 1, func(context.Context, int) error {
		if calls.Add(1) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls.Load() > 4 {
		t.Fatalf("err %v after %d calls; want context.Canceled after at most 4", err, calls.Load())
	}
}

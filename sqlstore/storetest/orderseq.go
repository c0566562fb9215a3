package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"orderpay"
)

// testOrderSeq: the per-day order sequence (migration 0004). Blocks reserved at once from
// many goroutines never overlap and leave no gap between them, each day counts from 0 on
// its own, and a bad request is refused.
func testOrderSeq(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	const day, other = "20261122", "20261123"

	first, err := s.NextOrderSeq(ctx, day, 1)
	if err != nil || first != 0 {
		t.Fatalf("first reservation of a day: %d, %v; want 0", first, err)
	}
	if first, err = s.NextOrderSeq(ctx, day, 5); err != nil || first != 1 {
		t.Fatalf("second reservation: %d, %v; want 1", first, err)
	}
	// Another day starts from 0 and does not move the first.
	if first, err = s.NextOrderSeq(ctx, other, 3); err != nil || first != 0 {
		t.Fatalf("first reservation of another day: %d, %v; want 0", first, err)
	}
	if first, err = s.NextOrderSeq(ctx, day, 1); err != nil || first != 6 {
		t.Fatalf("back on the first day: %d, %v; want 6", first, err)
	}
	for _, bad := range []struct {
		day string
		n   int64
	}{{"", 1}, {day, 0}, {day, -1}} {
		if _, err := s.NextOrderSeq(ctx, bad.day, bad.n); err == nil {
			t.Fatalf("NextOrderSeq(%q, %d) succeeded", bad.day, bad.n)
		}
	}

	// Goroutines racing on two days: every sequence number handed out once, and together
	// they are exactly [start, start+total) of each day.
	const workers, perWorker = 16, 20
	type block struct {
		day         string
		first, size int64
	}
	var (
		mu     sync.Mutex
		blocks []block
		wg     sync.WaitGroup
		errs   = make(chan error, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				d, n := day, int64(1+(w+i)%4) // blocks of 1 to 4
				if (w+i)%3 == 0 {
					d = other
				}
				first, err := s.NextOrderSeq(ctx, d, n)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				mu.Lock()
				blocks = append(blocks, block{d, first, n})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	start := map[string]int64{day: 7, other: 3}
	seen := map[string]map[int64]bool{day: {}, other: {}}
	for _, b := range blocks {
		for x := b.first; x < b.first+b.size; x++ {
			if seen[b.day][x] {
				t.Fatalf("%s: sequence number %d handed out twice", b.day, x)
			}
			seen[b.day][x] = true
		}
	}
	for d, set := range seen {
		nums := make([]int64, 0, len(set))
		for x := range set {
			nums = append(nums, x)
		}
		sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
		for i, x := range nums {
			if x != start[d]+int64(i) {
				t.Fatalf("%s: reserved numbers have a gap or start wrong at %d: %d", d, i, x)
			}
		}
		next, err := s.NextOrderSeq(ctx, d, 1)
		if err != nil || next != start[d]+int64(len(nums)) {
			t.Fatalf("%s: after the race the next number is %d, %v; want %d", d, next, err, start[d]+int64(len(nums)))
		}
	}
}

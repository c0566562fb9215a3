package orderpay

import (
	"cmp"
	"context"
	"sync"
)

// ForEach calls fn for every item on up to workers goroutines (at least one) and returns
// the first error a call returned, after every started call has finished. Once ctx is done
// it hands out no more items and returns ctx's error. The sweepers use it: each item waits
// on a channel call that may take seconds (a timeout), and one slow item must not hold the
// rest back.
func ForEach[T any](ctx context.Context, items []T, workers int, fn func(ctx context.Context, item T) error) error {
	if workers <= 1 {
		// One at a time, in the caller's goroutine: the same calls in the same order, and
		// what lets the explorer (docs/explorer.md) stop a sweeper at any of its steps.
		var firstErr error
		for _, item := range items {
			if ctx.Err() != nil {
				break
			}
			if err := fn(ctx, item); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		return cmp.Or(firstErr, ctx.Err())
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	work := make(chan T)
	for range min(max(workers, 1), max(len(items), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				if err := fn(ctx, item); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range items {
		if ctx.Err() != nil {
			break
		}
		work <- item
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

package sqlstore_test

import (
	"context"
	"sync"
	"testing"

	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// Two stores on one database, as two instances (on SQLite, two processes: each store has
// its own write lock, so they meet only at the database's), reserve blocks at once: no
// number is handed out twice.
func TestOrderSeqSharedByTwoStores(t *testing.T) {
	t.Parallel()
	for _, engine := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", storetest.SQLiteDSN}, {"postgres", storetest.PostgresDSN}} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			dsn := engine.dsn(t)
			ctx := context.Background()
			var stores []*sqlstore.Store
			for range 2 {
				s, err := sqlstore.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				stores = append(stores, s)
			}
			const goroutines, each, block = 8, 25, 3
			var mu sync.Mutex
			seen := map[int64]bool{}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					s := stores[g%2]
					for range each {
						first, err := s.NextOrderSeq(ctx, "20261122", block)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for x := first; x < first+block; x++ {
							if seen[x] {
								t.Errorf("sequence number %d handed out twice", x)
							}
							seen[x] = true
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if want := goroutines * each * block; len(seen) != want {
				t.Fatalf("%d numbers handed out, want %d", len(seen), want)
			}
		})
	}
}

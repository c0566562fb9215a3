package order_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

func teaFor(buyer, key string, qty int64) order.CreateOrderRequest {
	return order.CreateOrderRequest{BuyerID: buyer, IdempotencyKey: key, Items: []order.ItemRequest{{SKU: "tea", Qty: qty}}}
}

// The same Idempotency-Key returns the first order for 24 hours, with no second stock
// deduction; the same key with another request is EIDEMPOTENCY and writes nothing; the
// key is the buyer's own.
func TestIdempotencyKeyReturnsTheFirstOrderFor24Hours(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	first, replayed, err := b.svc.Create(ctx, teaFor("alice", "k-1", 2))
	if err != nil || replayed {
		t.Fatalf("first: %v, replayed %v", err, replayed)
	}
	b.clock.Advance(23 * time.Hour)
	again, replayed, err := b.svc.Create(ctx, teaFor("alice", "k-1", 2))
	if err != nil || !replayed || again.No != first.No {
		t.Fatalf("same key after 23 h: %v, %v, replayed %v; want order %s", again, err, replayed, first.No)
	}
	_, _, err = b.svc.Create(ctx, teaFor("alice", "k-1", 3))
	if orderpay.ErrorCode(err) != orderpay.EIDEMPOTENCY {
		t.Fatalf("same key, other quantity: %v; want EIDEMPOTENCY", err)
	}
	if st := stockOf(t, b.store, "tea"); st.Locked != 2 || st.Available != 8 {
		t.Fatalf("stock %+v: want only the first order's 2 locked", st)
	}
	bob, replayed, err := b.svc.Create(ctx, teaFor("bob", "k-1", 2))
	if err != nil || replayed || bob.No == first.No {
		t.Fatalf("bob with alice's key name: %v, %v, replayed %v", bob, err, replayed)
	}
	b.clock.Advance(time.Hour) // 24 h after the first: the key has expired
	later, replayed, err := b.svc.Create(ctx, teaFor("alice", "k-1", 3))
	if err != nil || replayed || later.No == first.No {
		t.Fatalf("after 24 h: %v, %v, replayed %v; want a new order", later, err, replayed)
	}
	if _, _, err := b.svc.Create(ctx, teaFor("alice", "bad\nkey", 1)); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("a key with a newline: %v; want EINVALID", err)
	}
}

// Without a key, the same request from the same buyer within 10 seconds is the first order;
// after 10 seconds, or with other items, it is a new one.
func TestDuplicateSubmitWithin10SecondsReturnsTheFirstOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{})
	ctx := context.Background()
	first, _, err := b.svc.Create(ctx, teaFor("alice", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(9 * time.Second)
	dup, replayed, err := b.svc.Create(ctx, teaFor("alice", "", 1))
	if err != nil || !replayed || dup.No != first.No {
		t.Fatalf("9 s later: %v, %v, replayed %v; want order %s", dup, err, replayed, first.No)
	}
	other, replayed, err := b.svc.Create(ctx, teaFor("alice", "", 2))
	if err != nil || replayed || other.No == first.No {
		t.Fatalf("other quantity: %v, %v, replayed %v; want a new order", other, err, replayed)
	}
	b.clock.Advance(time.Second)
	next, replayed, err := b.svc.Create(ctx, teaFor("alice", "", 1))
	if err != nil || replayed || next.No == first.No {
		t.Fatalf("10 s later: %v, %v, replayed %v; want a new order", next, err, replayed)
	}
	if st := stockOf(t, b.store, "tea"); st.Locked != 4 {
		t.Fatalf("stock %+v: want 1 + 2 + 1 locked", st)
	}
}

func TestConcurrentIdenticalRequestsMakeOneOrderSQLite(t *testing.T) {
	t.Parallel()
	concurrentIdentical(t, storetest.OpenSQLite(t))
}

func TestConcurrentIdenticalRequestsMakeOneOrderPostgres(t *testing.T) {
	t.Parallel()
	concurrentIdentical(t, storetest.OpenPostgres(t))
}

// Twenty copies of one request at once, with a key and without: one order each, every copy
// answered with it, one unit locked each.
func concurrentIdentical(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{})
	ctx := context.Background()
	for _, key := range []string{"double-click", ""} {
		var wg sync.WaitGroup
		nos := make([]string, 20)
		for i := range nos {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, _, err := b.svc.Create(ctx, teaFor("carol"+key, key, 1))
				if err != nil {
					t.Errorf("copy %d: %v", i, err)
					return
				}
				nos[i] = o.No
			}()
		}
		wg.Wait()
		for _, no := range nos {
			if no != nos[0] {
				t.Fatalf("key %q: copies got different orders: %v", key, nos)
			}
		}
	}
	if st := stockOf(t, b.store, "tea"); st.Locked != 2 {
		t.Fatalf("stock %+v: want 2 locked (one order per request)", st)
	}
}

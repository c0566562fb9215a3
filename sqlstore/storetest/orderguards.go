package storetest

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
)

// A request key is claimed by one transaction only while it lives; once expired, the next
// claim takes it over; other buyers' keys are their own; expired keys are deleted.
func testRequestKeys(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	key := func(buyer, k, orderNo string, at time.Time, ttl time.Duration) *orderpay.RequestKey {
		return &orderpay.RequestKey{BuyerID: buyer, Key: k, RequestHash: "h-" + orderNo, OrderNo: orderNo, CreatedAt: at, ExpiresAt: at.Add(ttl)}
	}
	claim := func(k *orderpay.RequestKey) (claimed bool) {
		t.Helper()
		mustTx(t, s, func(tx orderpay.Tx) (err error) {
			claimed, err = tx.ClaimRequestKey(ctx, k)
			return err
		})
		return claimed
	}
	if !claim(key("alice", "key:k1", "O1", t0, time.Hour)) {
		t.Fatal("a new key was not claimed")
	}
	if claim(key("alice", "key:k1", "O2", t0.Add(59*time.Minute), time.Hour)) {
		t.Fatal("a live key was claimed again")
	}
	if !claim(key("bob", "key:k1", "O3", t0, time.Hour)) {
		t.Fatal("another buyer's key of the same name was refused")
	}
	got, err := s.RequestKey(ctx, "alice", "key:k1")
	if err != nil || got.OrderNo != "O1" || got.RequestHash != "h-O1" || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("alice's key after a refused claim: %+v, %v", got, err)
	}
	// Expired: the next claim takes the key over.
	if !claim(key("alice", "key:k1", "O4", t0.Add(time.Hour), 10*time.Second)) {
		t.Fatal("an expired key was not taken over")
	}
	if got, _ := s.RequestKey(ctx, "alice", "key:k1"); got.OrderNo != "O4" {
		t.Fatalf("after the takeover: %+v", got)
	}
	_, err = s.RequestKey(ctx, "carol", "key:k1")
	wantCode(t, err, orderpay.ENOTFOUND)

	// Ten transactions race for one new key: exactly one claims it.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.InTx(ctx, func(tx orderpay.Tx) error {
				ok, err := tx.ClaimRequestKey(ctx, key("dave", "body:x", string(rune('A'+i)), t0, time.Minute))
				if ok {
					wins.Add(1)
				}
				return err
			})
			if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d transactions claimed the same key", n)
	}

	ret, ok := s.(orderpay.Retainer)
	if !ok {
		return
	}
	res, err := ret.Retain(ctx, t0.Add(time.Hour), orderpay.DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	deleted := res.RequestKeys
	// At t0+1h, bob's key (expiring then) and dave's (t0+1m) are gone; alice's, taken over
	// at t0+1h for 10 s, lives on.
	for _, k := range []struct {
		buyer, key string
		live       bool
	}{{"alice", "key:k1", true}, {"bob", "key:k1", false}, {"dave", "body:x", false}} {
		_, err := s.RequestKey(ctx, k.buyer, k.key)
		if live := err == nil; live != k.live {
			t.Errorf("%s %s: present %v after deleting the expired, want %v", k.buyer, k.key, live, k.live)
		}
	}
	if deleted != 2 {
		t.Errorf("deleted %d expired keys, want 2", deleted)
	}
}

// A per-buyer purchase count moves only within its limit, even with ten transactions
// racing; a release gives units back, never below zero. The blocklist matches a buyer or a
// device, never an empty device.
func testAntiAbuse(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "capped", 100)
	add := func(buyer string, qty, limit int64) error {
		return s.InTx(ctx, func(tx orderpay.Tx) error { return tx.AddBuyerPurchase(ctx, buyer, "capped", qty, limit) })
	}
	if err := add("ann", 2, 3); err != nil {
		t.Fatal(err)
	}
	wantCode(t, add("ann", 2, 3), orderpay.ELIMIT)
	wantCode(t, add("ben", 4, 3), orderpay.ELIMIT)
	if err := add("ann", 1, 3); err != nil {
		t.Fatal(err)
	}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := add("cat", 1, 3); orderpay.ErrorCode(err) {
			case "":
				ok.Add(1)
			case orderpay.ELIMIT, orderpay.ECONFLICT: // ECONFLICT: the database asked to retry, and the retries ran out
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, _ := s.BuyerPurchases(ctx, "cat", "capped"); n != int64(ok.Load()) || n > 3 {
		t.Fatalf("cat holds %d after %d successful adds, limit 3", n, ok.Load())
	}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.ReleaseBuyerPurchase(ctx, "ann", "capped", 3) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.ReleaseBuyerPurchase(ctx, "ann", "capped", 1) }), orderpay.ECONFLICT)
	if n, _ := s.BuyerPurchases(ctx, "ann", "capped"); n != 0 {
		t.Fatalf("ann holds %d after releasing everything", n)
	}

	at := time.UnixMilli(1_800_000_000_000)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.Block(ctx, orderpay.BlockEntry{Kind: orderpay.BlockBuyer, Value: "mallory", Reason: "chargebacks", CreatedAt: at}); err != nil {
			return err
		}
		return tx.Block(ctx, orderpay.BlockEntry{Kind: orderpay.BlockDevice, Value: "dev-1", CreatedAt: at})
	})
	for _, tc := range []struct {
		buyer, device string
		want          int
	}{{"mallory", "", 1}, {"mallory", "dev-1", 2}, {"ann", "dev-1", 1}, {"ann", "", 0}, {"ann", "dev-2", 0}} {
		// CreateChecks reads the entries of the buyer and the device, and the buyer's
		// request key with them (none here).
		got, stored, err := s.CreateChecks(ctx, tc.buyer, tc.device, "key:k9")
		if err != nil || len(got) != tc.want || stored != nil {
			t.Errorf("CreateChecks(%q, %q) = %+v, %+v, %v; want %d entries and no key", tc.buyer, tc.device, got, stored, err, tc.want)
		}
		for _, e := range got {
			if !(e.Kind == orderpay.BlockBuyer && e.Value == tc.buyer || e.Kind == orderpay.BlockDevice && e.Value == tc.device) {
				t.Errorf("CreateChecks(%q, %q) returned %+v, of someone else", tc.buyer, tc.device, e)
			}
		}
	}
	k := &orderpay.RequestKey{BuyerID: "mallory", Key: "key:k9", RequestHash: "h-O9", OrderNo: "O9", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	mustTx(t, s, func(tx orderpay.Tx) error {
		_, err := tx.ClaimRequestKey(ctx, k)
		return err
	})
	want, _ := s.RequestKey(ctx, "mallory", "key:k9")
	checked, stored, err := s.CreateChecks(ctx, "mallory", "dev-1", "key:k9")
	if err != nil || len(checked) != 2 || !reflect.DeepEqual(stored, want) || want.OrderNo != "O9" {
		t.Fatalf("CreateChecks = %+v, %+v, %v; want two entries and %+v", checked, stored, err, want)
	}
	if b := checked[0]; b.Kind != orderpay.BlockBuyer || b.Value != "mallory" || b.Reason != "chargebacks" || !b.CreatedAt.Equal(at) ||
		checked[1].Kind != orderpay.BlockDevice || checked[1].Value != "dev-1" {
		t.Fatalf("CreateChecks read the entries as %+v", checked)
	}
	if _, stored, err := s.CreateChecks(ctx, "ann", "", "key:k9"); err != nil || stored != nil {
		t.Fatalf("CreateChecks found %+v (%v) under another buyer", stored, err)
	}
	if _, stored, err := s.CreateChecks(ctx, "mallory", "", ""); err != nil || stored != nil {
		t.Fatalf("CreateChecks without a key found %+v (%v)", stored, err)
	}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.Unblock(ctx, orderpay.BlockDevice, "dev-1") })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.Unblock(ctx, orderpay.BlockDevice, "dev-1") }), orderpay.ENOTFOUND)
	if all, err := s.Blocklist(ctx); err != nil || len(all) != 1 || all[0].Value != "mallory" || all[0].Reason != "chargebacks" {
		t.Fatalf("blocklist %+v, %v", all, err)
	}
}

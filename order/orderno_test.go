package order

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/sqlstore/storetest"
)

var (
	testKey  = []byte("0123456789abcdef0123456789abcdef")
	otherKey = []byte("fedcba9876543210fedcba9876543210")
)

// On reduced domains the permutation is checked exhaustively: every x in [0, half²) has
// an image in range, no two share one, and Unpermute undoes it.
func TestPermutationIsABijectionOnSmallDomains(t *testing.T) {
	t.Parallel()
	for _, half := range []uint64{2, 3, 10, 99, 100, 256} {
		p, err := newPermutation(testKey, half)
		if err != nil {
			t.Fatal(err)
		}
		n := p.Domain()
		hit := make([]bool, n)
		for x := range n {
			y := p.Permute(x)
			if y >= n {
				t.Fatalf("half %d: Permute(%d) = %d, outside [0, %d)", half, x, y, n)
			}
			if hit[y] {
				t.Fatalf("half %d: %d is the image of two numbers", half, y)
			}
			hit[y] = true
			if back := p.Unpermute(y); back != x {
				t.Fatalf("half %d: Unpermute(Permute(%d)) = %d", half, x, back)
			}
		}
	}
}

// On the full domain [0, 10^12): a sample of the first sequence numbers of a day, the
// edges and random points all stay in range, are distinct, and decode back.
func TestPermutationFullDomainSample(t *testing.T) {
	t.Parallel()
	p, err := NewPermutation(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if p.Domain() != OrderSeqDomain {
		t.Fatalf("domain %d, want %d", p.Domain(), uint64(OrderSeqDomain))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []uint64{0, 1, 999_999, 1_000_000, OrderSeqDomain - 1}
	for x := range uint64(20_000) {
		xs = append(xs, x)
	}
	for range 20_000 {
		xs = append(xs, rng.Uint64N(OrderSeqDomain))
	}
	images := make(map[uint64]uint64, len(xs))
	ascending := 0
	for i, x := range xs {
		y := p.Permute(x)
		if y >= OrderSeqDomain {
			t.Fatalf("Permute(%d) = %d, outside the domain", x, y)
		}
		if prev, ok := images[y]; ok && prev != x {
			t.Fatalf("Permute(%d) = Permute(%d) = %d", x, prev, y)
		}
		images[y] = x
		if back := p.Unpermute(y); back != x {
			t.Fatalf("Unpermute(Permute(%d)) = %d", x, back)
		}
		if i > 5 && i < 5+20_000 && y > p.Permute(x-1) {
			ascending++
		}
	}
	// Consecutive sequence numbers give unordered numbers: about half the steps go up.
	if ascending < 9_000 || ascending > 11_000 {
		t.Fatalf("%d of 20000 consecutive steps go up: the order leaks through", ascending)
	}
}

// Another key gives another permutation; the same key always the same one.
func TestPermutationIsKeyed(t *testing.T) {
	t.Parallel()
	a, _ := NewPermutation(testKey)
	a2, _ := NewPermutation(append([]byte(nil), testKey...))
	b, err := NewPermutation(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for x := range uint64(1000) {
		if a.Permute(x) != a2.Permute(x) {
			t.Fatalf("the same key permutes %d two ways", x)
		}
		if a.Permute(x) == b.Permute(x) {
			same++
		}
	}
	if same > 1 {
		t.Fatalf("%d of 1000 numbers are the same under two keys", same)
	}
	if _, err := NewPermutation([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// The sequence scheme on a real store: 20 digits, dated in UTC+8 (17:30 UTC is already the
// next day in China), distinct, decoding back to the day's sequence 0, 1, 2…; one block
// reserved for the first numbers, and a new day starting again at 0.
func TestSequenceOrderNos(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	ctx := context.Background()
	g, err := NewSequenceOrderNos(store, testKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 17, 30, 0, 0, time.UTC) // 01:30 on the 23rd in UTC+8
	seen := map[string]bool{}
	for i := range 40 {
		no, err := g.NewOrderNo(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(no) != 20 || strings.Trim(no, "0123456789") != "" || !strings.HasPrefix(no, "20261123") {
			t.Fatalf("order number %q: want 20 digits starting with 20261123", no)
		}
		if seen[no] {
			t.Fatalf("order number %q given twice", no)
		}
		seen[no] = true
		day, seq, err := g.Decode(no)
		if err != nil || day != "20261123" || seq != int64(i) {
			t.Fatalf("Decode(%q) = %s, %d, %v; want 20261123, %d", no, day, seq, err, i)
		}
	}
	// 40 numbers took two blocks of 32: the store's next free number is 64.
	if next, err := store.NextOrderSeq(ctx, "20261123", 1); err != nil || next != 2*OrderSeqBlockDefault {
		t.Fatalf("store's next = %d, %v; want %d (two blocks)", next, err, 2*OrderSeqBlockDefault)
	}
	// The next day (UTC+8) has its own sequence.
	no, err := g.NewOrderNo(ctx, at.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if day, seq, err := g.Decode(no); err != nil || day != "20261124" || seq != 0 || !strings.HasPrefix(no, "20261124") {
		t.Fatalf("first number of the next day %q decodes to %s, %d, %v", no, day, seq, err)
	}
	// Another key decodes it to another sequence number.
	other, _ := NewSequenceOrderNos(store, otherKey, 0)
	if _, seq, err := other.Decode(no); err != nil || seq == 0 {
		t.Fatalf("the wrong key decoded %q to %d, %v", no, seq, err)
	}
	for _, bad := range []string{"", "2026112300000000000", "20261323000000000000", "2026112300000000000x", "20261123+00000000000"} {
		if _, _, err := g.Decode(bad); err == nil {
			t.Fatalf("Decode(%q) succeeded", bad)
		}
	}
}

// Two generators on one store (two instances with the same key), used from many
// goroutines at once, never give the same number.
func TestSequenceOrderNosConcurrent(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	ctx := context.Background()
	var gens []*SequenceOrderNos
	for _, block := range []int64{1, 7} {
		g, err := NewSequenceOrderNos(store, testKey, block)
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 25 {
				no, err := gens[w%2].NewOrderNo(ctx, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[no] {
					t.Errorf("%s given twice", no)
				}
				seen[no] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d numbers, want 200", len(seen))
	}
}

type failingSeqStore struct{ orderpay.Store }

func (failingSeqStore) NextOrderSeq(context.Context, string, int64) (int64, error) {
	return 0, errors.New("database down")
}

// An order number that cannot be made fails the order, which then writes nothing; an
// order made with the sequence scheme gets its number.
func TestCreateOrderWithTheSequenceScheme(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	ctx := context.Background()
	broken, _ := NewSequenceOrderNos(failingSeqStore{store}, testKey, 0)
	working, _ := NewSequenceOrderNos(store, testKey, 0)
	for _, tc := range []struct {
		gen     *SequenceOrderNos
		wantErr bool
	}{{broken, true}, {working, false}} {
		svc, err := New(Config{Store: store, NewOrderNo: tc.gen.NewOrderNo})
		if err != nil {
			t.Fatal(err)
		}
		sku := fmt.Sprintf("tea-%t", tc.wantErr)
		if _, _, err := svc.CreateSKU(ctx, NewSKU{SKU: sku, MerchantID: "m1", Title: "Tea", Price: 100, Stock: 5}); err != nil {
			t.Fatal(err)
		}
		o, err := svc.CreateOrder(ctx, CreateOrderRequest{BuyerID: "alice", Items: []ItemRequest{{SKU: sku, Qty: 1}}})
		if tc.wantErr {
			if err == nil || orderpay.ErrorCode(err) != orderpay.EINTERNAL {
				t.Fatalf("order with a failing sequence: %+v, %v", o, err)
			}
			if st, _ := store.Stock(ctx, sku); st.Locked != 0 {
				t.Fatalf("the failed order locked stock: %+v", st)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if day, seq, err := working.Decode(o.No); err != nil || day != OrderNoDay(o.CreatedAt) || seq != 0 {
			t.Fatalf("order %s decodes to %s, %d, %v", o.No, day, seq, err)
		}
	}
}

// The key is made once, kept (mode 0600), and read back the same; instances starting at
// once on one directory all get the one key; a key file too short is refused.
func TestLoadOrCreateOrderNoKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys", OrderNoKeyFile)
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadOrCreateOrderNoKey(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if string(k) != string(keys[0]) || len(k) != 64 {
			t.Fatalf("keys %q and %q", k, keys[0])
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v", fi, err)
	}
	if again, err := LoadOrCreateOrderNoKey(path); err != nil || string(again) != string(keys[0]) {
		t.Fatalf("reloaded %q, %v", again, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	short := filepath.Join(t.TempDir(), OrderNoKeyFile)
	os.WriteFile(short, []byte("too short\n"), 0o600)
	if _, err := LoadOrCreateOrderNoKey(short); err == nil {
		t.Fatal("a short key file was accepted")
	}
}

package order

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Seed 000 names two order-number schemes; both make 20 decimal digits dated in UTC+8.
//
//   - TimestampOrderNo: yyyyMMddHHmmss + 6 random digits. Simple and stateless, but two
//     orders in the same second collide one time in a million, so CreateOrder retries a
//     taken number with a fresh draw.
//   - SequenceOrderNos: yyyyMMdd + the day's sequence number put through a keyed
//     permutation of [0, 10^12), so that the numbers neither collide (a permutation of a
//     sequence that never repeats within the day) nor reveal the day's sales volume (the
//     permuted numbers look random to anyone without the key).

// TimestampOrderNoFunc is TimestampOrderNo as a Config.NewOrderNo: it cannot fail.
func TimestampOrderNoFunc(_ context.Context, now time.Time) (string, error) {
	return TimestampOrderNo(now), nil
}

// OrderSeqDomain is the size of a day's sequence space: the 12 digits after the date.
const OrderSeqDomain = 1_000_000_000_000

// orderSeqHalf is the square root of OrderSeqDomain: the permutation's balanced split.
const orderSeqHalf = 1_000_000

// feistelRounds is the number of Feistel rounds. Four make a pseudorandom permutation in
// theory (Luby–Rackoff); small domains want more margin, and NIST's FF1 uses ten.
const feistelRounds = 10

// MinOrderNoKeyLen is the shortest key NewPermutation accepts, in bytes.
const MinOrderNoKeyLen = 16

// Permutation is a keyed bijection on [0, half²): a balanced Feistel network on the pair
// (x / half, x % half), whose round function is HMAC-SHA256 keyed with the secret. Each
// round maps (L, R) to (R, (L + F_i(R)) mod half), where F_i(R) is the first 8 bytes of
// HMAC(key, i ‖ R) mod half; it is undone by L = (R' − F_i(L')) mod half. Because the split
// is exactly half × half (10^6 × 10^6 for order numbers), every round stays inside the
// domain and no cycle walking is needed. It is safe for concurrent use.
type Permutation struct {
	key  []byte
	half uint64
}

// NewPermutation returns the permutation of [0, OrderSeqDomain) keyed by key.
func NewPermutation(key []byte) (*Permutation, error) {
	return newPermutation(key, orderSeqHalf)
}

func newPermutation(key []byte, half uint64) (*Permutation, error) {
	if len(key) < MinOrderNoKeyLen {
		return nil, fmt.Errorf("order: the order-number key must be at least %d bytes", MinOrderNoKeyLen)
	}
	if half < 2 || half > 1<<31 {
		return nil, fmt.Errorf("order: permutation half-domain %d out of range", half)
	}
	return &Permutation{key: append([]byte(nil), key...), half: half}, nil
}

// Domain is the size of the permuted range: the permutation is defined on [0, Domain()).
func (p *Permutation) Domain() uint64 { return p.half * p.half }

// round is F_i(r): HMAC-SHA256(key, i ‖ r) reduced mod half. The 64-bit value's modulo
// bias is below 2^-40 for half = 10^6: irrelevant here, and it is a bijection regardless.
func (p *Permutation) round(mac hash.Hash, i int, r uint64) uint64 {
	var in [9]byte
	in[0] = byte(i)
	binary.BigEndian.PutUint64(in[1:], r)
	mac.Reset()
	mac.Write(in[:])
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(mac.Sum(sum[:0])) % p.half
}

// Permute maps x, which must be below Domain(), to its image.
func (p *Permutation) Permute(x uint64) uint64 {
	if x >= p.Domain() {
		panic(fmt.Sprintf("order: Permute(%d) outside [0, %d)", x, p.Domain()))
	}
	mac := hmac.New(sha256.New, p.key)
	l, r := x/p.half, x%p.half
	for i := range feistelRounds {
		l, r = r, (l+p.round(mac, i, r))%p.half
	}
	return l*p.half + r
}

// Unpermute is Permute's inverse: Unpermute(Permute(x)) == x.
func (p *Permutation) Unpermute(y uint64) uint64 {
	if y >= p.Domain() {
		panic(fmt.Sprintf("order: Unpermute(%d) outside [0, %d)", y, p.Domain()))
	}
	mac := hmac.New(sha256.New, p.key)
	l, r := y/p.half, y%p.half
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = (r+p.half-p.round(mac, i, l))%p.half, l
	}
	return l*p.half + r
}

// OrderSeqStore is what SequenceOrderNos needs of the store (orderpay.Store has it).
type OrderSeqStore interface {
	NextOrderSeq(ctx context.Context, day string, n int64) (first int64, err error)
}

// OrderSeqBlockDefault is how many sequence numbers SequenceOrderNos reserves per round
// trip to the database.
const OrderSeqBlockDefault = 32

// SequenceOrderNos is the second order-number scheme: yyyyMMdd (UTC+8) followed by
// the 12-digit image of the day's sequence number under a keyed Permutation. The sequence
// is the store's (the order_sequences table), shared by every instance on the database; to
// spare a round trip per order, each SequenceOrderNos reserves Block numbers at a time and
// hands them out from memory. Numbers stay unique but are not dense: a block left
// unfinished at a restart or at midnight is skipped. Every instance sharing a database
// must use the same key: two keys could map different sequence numbers to the same
// order number (CreateOrder would then retry, but the guarantee is gone).
type SequenceOrderNos struct {
	store OrderSeqStore
	perm  *Permutation
	block int64

	mu        sync.Mutex
	day       string
	next, end int64 // the reserved block [next, end) of day
}

// NewSequenceOrderNos returns the scheme on store with key; block ≤ 0 means
// OrderSeqBlockDefault.
func NewSequenceOrderNos(store OrderSeqStore, key []byte, block int64) (*SequenceOrderNos, error) {
	if store == nil {
		return nil, errors.New("order: the sequence order-number scheme needs a store")
	}
	perm, err := NewPermutation(key)
	if err != nil {
		return nil, err
	}
	if block <= 0 {
		block = OrderSeqBlockDefault
	}
	return &SequenceOrderNos{store: store, perm: perm, block: block}, nil
}

// OrderNoDay is the date part of an order number made at now: yyyyMMdd in UTC+8.
func OrderNoDay(now time.Time) string { return now.In(ChinaTime).Format("20060102") }

// NewOrderNo takes the next number of now's day (UTC+8); it is a Config.NewOrderNo. It
// fails only if the store does (or if a day ever ran through all 10^12 numbers).
func (g *SequenceOrderNos) NewOrderNo(ctx context.Context, now time.Time) (string, error) {
	day := OrderNoDay(now)
	seq, err := g.take(ctx, day)
	if err != nil {
		return "", err
	}
	return g.format(day, seq), nil
}

func (g *SequenceOrderNos) format(day string, seq int64) string {
	return fmt.Sprintf("%s%012d", day, g.perm.Permute(uint64(seq)))
}

func (g *SequenceOrderNos) take(ctx context.Context, day string) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.day != day || g.next >= g.end {
		first, err := g.store.NextOrderSeq(ctx, day, g.block)
		if err != nil {
			return 0, fmt.Errorf("order: reserve order numbers: %w", err)
		}
		if first < 0 || first >= OrderSeqDomain {
			return 0, fmt.Errorf("order: the order sequence of %s is exhausted (%d)", day, first)
		}
		g.day, g.next, g.end = day, first, min(first+g.block, OrderSeqDomain)
	}
	seq := g.next
	g.next++
	return seq, nil
}

// Decode returns the day and the sequence number an order number of this scheme (and this
// key) was made from: for support tools, e.g. to tell how many orders preceded it that day.
func (g *SequenceOrderNos) Decode(no string) (day string, seq int64, err error) {
	if len(no) != 20 {
		return "", 0, fmt.Errorf("order: %q is not a 20-digit order number", no)
	}
	if _, err := time.ParseInLocation("20060102", no[:8], ChinaTime); err != nil {
		return "", 0, fmt.Errorf("order: %q does not start with a date", no)
	}
	v, err := strconv.ParseUint(no[8:], 10, 64)
	if err != nil || v >= OrderSeqDomain {
		return "", 0, fmt.Errorf("order: %q does not end with 12 digits", no)
	}
	return no[:8], int64(g.perm.Unpermute(v)), nil
}

// OrderNoKeyFile is the file, in the keys directory, that holds the sequence scheme's key.
const OrderNoKeyFile = "order-no.key"

// LoadOrCreateOrderNoKey returns the key kept in path, first writing a new random one (32
// bytes, as 64 hex digits, mode 0600) if there is none. The key is the file's text
// without surrounding space, so that it can be given to another instance as it is. The
// file appears whole or not at all (written aside, then linked into place), so two
// instances starting at once on the same directory end up with the same key.
func LoadOrCreateOrderNoKey(path string) ([]byte, error) {
	read := func() ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		key := []byte(strings.TrimSpace(string(b)))
		if len(key) < MinOrderNoKeyLen {
			return nil, fmt.Errorf("order: %s: the key must be at least %d bytes", path, MinOrderNoKeyLen)
		}
		return key, nil
	}
	key, err := read()
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".order-no-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// Link fails if path exists: whoever linked first wins, and everyone reads that key.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return read()
}

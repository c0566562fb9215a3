package buyerauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// verified remembers the tokens verified lately, so that a buyer's page polling its order is
// not parsed (JSON) and verified again on every request: a few per cent of the server's CPU
// per paid order went to it. A token is kept by its hash, with its buyer and
// the times it is valid between (its nbf and exp, with the leeway, as the parser checks
// them), and for at most verifiedFor; a JWKS fetch that changes the keys forgets them all,
// so that a key removed from the JWKS stops the tokens it signed at that fetch. Only a
// verified token is kept, and at most verifiedMax of them.
type verified struct {
	mu  sync.Mutex
	m   map[tokenKey]verifiedToken
	gen uint64 // counts the clears
}

type verifiedToken struct {
	buyer       string
	from, until time.Time // valid at t when !t.Before(from) && t.Before(until)
}

const (
	verifiedFor = time.Minute
	verifiedMax = 10000
)

// tokenKey is what a token is remembered by.
type tokenKey [sha256.Size]byte

func keyOf(raw string) tokenKey { return sha256.Sum256([]byte(raw)) }

// get is the buyer of the token k if it was verified lately and is still valid at now.
func (v *verified) get(k tokenKey, now time.Time) (string, bool) {
	v.mu.Lock()
	t, ok := v.m[k]
	v.mu.Unlock()
	if !ok || now.Before(t.from) || !now.Before(t.until) {
		return "", false
	}
	return t.buyer, true
}

// clear forgets every token: the keys they were verified with may be gone.
func (v *verified) clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.m = nil
	v.gen++
}

// generation is the number of clears so far: a token verified after it is read is kept
// by putAt only if no clear came in between (its key may be gone).
func (v *verified) generation() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// put keeps the token k, verified at now for buyer, valid from nbf to exp (either zero if
// absent) with leeway either side.
func (v *verified) put(k tokenKey, buyer string, now, nbf, exp time.Time, leeway time.Duration) {
	v.putAt(v.generation(), k, buyer, now, nbf, exp, leeway)
}

// putAt is put of a token whose verification began at generation gen: nothing if the
// memory was cleared since.
func (v *verified) putAt(gen uint64, k tokenKey, buyer string, now, nbf, exp time.Time, leeway time.Duration) {
	t := verifiedToken{buyer: buyer, until: now.Add(verifiedFor)}
	if !nbf.IsZero() {
		t.from = nbf.Add(-leeway)
	}
	if !exp.IsZero() && exp.Add(leeway).Before(t.until) {
		t.until = exp.Add(leeway)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen {
		return
	}
	if v.m == nil || len(v.m) >= verifiedMax {
		// Full: start again. Those still in use are verified again once.
		v.m = make(map[tokenKey]verifiedToken)
	}
	v.m[k] = t
}

package httpapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ERATELIMITED is the error code of a request refused by a rate limit (429). It lives here,
// not with the domain's codes: only the API refuses for this reason.
const ERATELIMITED = "ERATELIMITED"

// Limit is the shape of a token bucket: it holds at most Burst tokens and refills at Rate
// tokens a second; each request takes one. The zero Limit is off.
type Limit struct {
	Rate  float64 // tokens per second
	Burst int
}

// Off reports whether the limit lets everything through: a bucket that never refills or
// holds no token would refuse everything, which is never what a config means.
func (l Limit) Off() bool { return !(l.Rate > 0) || l.Burst <= 0 }

// String is the limit as ParseRateLimit reads it.
func (l Limit) String() string {
	if l.Off() {
		return "off"
	}
	return strconv.FormatFloat(l.Rate, 'g', -1, 64) + "/s,burst=" + strconv.Itoa(l.Burst)
}

// MarshalText and UnmarshalText let a Limit be a flag (flag.TextVar).
func (l Limit) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

func (l *Limit) UnmarshalText(b []byte) error {
	v, err := ParseRateLimit(string(b))
	if err == nil {
		*l = v
	}
	return err
}

// rateUnits are the periods a rate may be given per.
var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRateLimit reads "off" or "<rate>/<s|m|h>[,burst=<n>]", e.g. "5/s,burst=10" or
// "30/m". Without a burst, the bucket holds one second's worth of tokens (at least one).
func ParseRateLimit(v string) (Limit, error) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "off") {
		return Limit{}, nil
	}
	bad := func() (Limit, error) {
		return Limit{}, fmt.Errorf("rate limit %q is not off or <rate>/<s|m|h>[,burst=<n>] with a positive rate and burst", v)
	}
	rate, burst, hasBurst := strings.Cut(v, ",")
	count, unit, ok := strings.Cut(strings.TrimSpace(rate), "/")
	per, known := rateUnits[strings.TrimSpace(unit)]
	n, err := strconv.ParseFloat(strings.TrimSpace(count), 64)
	if !ok || !known || err != nil || !(n > 0) || math.IsInf(n, 0) {
		return bad()
	}
	l := Limit{Rate: n / per.Seconds()}
	l.Burst = int(max(1, min(math.Ceil(l.Rate), math.MaxInt32)))
	if hasBurst {
		value, ok := strings.CutPrefix(strings.TrimSpace(burst), "burst=")
		b, err := strconv.Atoi(value)
		if !ok || err != nil || b <= 0 {
			return bad()
		}
		l.Burst = b
	}
	return l, nil
}

// Limiter is a token bucket per key, e.g. per buyer; one key ("") makes it a single bucket.
// It is safe for concurrent use. It reads no clock: the caller passes the time, so that
// tests move it instead of sleeping.
//
// A bucket is kept as the moment it will be full again: at now it holds Burst minus
// (full-now)/interval tokens, taking one moves full on by an interval, and refilling is the
// clock reaching full. In integer nanoseconds, refills and waits are exact where a float
// count of tokens would be off by rounding; and a clock that steps back makes a bucket look
// emptier, never fuller.
//
// Memory: a full bucket is the same as no bucket (a new key starts full), so full buckets
// are dropped without changing any answer. A new key sweeps them out when the map has
// doubled since the last sweep (and holds at least minSweep): the cost is O(1) per call
// amortised, a quiet map is never swept, and the map holds at most about twice the buckets
// that are not full, or minSweep. A bucket is not full for longer than Burst/Rate after its
// key's last request (1/Rate if a key is used once), so however many keys clients make up,
// the map is bounded by the request rate times that.
type Limiter struct {
	limit     Limit
	interval  time.Duration // between two tokens
	tolerance time.Duration // how far full may be ahead of now with a token left: (Burst-1) intervals

	mu        sync.Mutex
	full      map[string]time.Time // by key: when its bucket is full again
	sweepSize int                  // a new key sweeps when the map holds this many
}

// minSweep is the size below which the map is never swept.
const minSweep = 1024

// NewLimiter returns a limiter with one bucket of shape l per key. An Off limit allows
// everything and keeps nothing.
func NewLimiter(l Limit) *Limiter {
	lim := &Limiter{limit: l, full: map[string]time.Time{}, sweepSize: minSweep}
	if !l.Off() {
		lim.interval = max(1, time.Duration(math.Round(float64(time.Second)/l.Rate)))
		lim.tolerance = time.Duration(min(float64(l.Burst-1)*float64(lim.interval), math.MaxInt64/2))
	}
	return lim
}

// Allow takes a token from key's bucket at now. When there is none, it says how long until
// there will be one; nothing is taken, so a refused request costs its sender nothing more.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	if l.limit.Off() {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	full, seen := l.full[key]
	if !seen && len(l.full) >= l.sweepSize {
		l.sweep(now)
	}
	if !seen || full.Before(now) {
		full = now
	}
	if ahead := full.Sub(now); ahead > l.tolerance {
		return false, ahead - l.tolerance
	}
	l.full[key] = full.Add(l.interval)
	return true, 0
}

// sweep drops the buckets that are full at now, and sets the size for the next sweep.
func (l *Limiter) sweep(now time.Time) {
	for key, full := range l.full {
		if !full.After(now) {
			delete(l.full, key)
		}
	}
	l.sweepSize = max(minSweep, 2*len(l.full))
}

// Len is how many buckets the limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.full)
}

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded up, at least 1
// (0 would invite an immediate retry that is refused again).
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

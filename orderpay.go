// Package orderpay is the domain of the order-and-payment core: its types, the state
// machines of orders, payments and channel orders, the error codes, and the interfaces
// (Store, Channel, Publisher, Clock) that the infrastructure packages implement.
//
// The package imports only the standard library. Everything that talks to a database,
// a broker or a payment channel lives in a package named after that dependency.
package orderpay

import "time"

// Clock tells the time. Services take one so that tests can move time instead of sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// ValidID reports whether s can be an identifier a caller chooses (a buyer, a SKU, an
// app's own order or refund number, an idempotency key): 1 to 64 letters, digits, '-',
// '_' or '.', which fits in a URL path as it is.
func ValidID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Millis converts t to the integer milliseconds since the Unix epoch that the store keeps.
// A zero time becomes 0.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis converts stored milliseconds back to a time; 0 becomes the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Now reads c, cut to the millisecond the store keeps, so that a value returned to a caller
// equals the value read back later.
func Now(c Clock) time.Time { return c.Now().Truncate(time.Millisecond) }

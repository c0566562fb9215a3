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

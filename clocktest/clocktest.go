// Package clocktest has a clock that only moves when a test moves it, so that deadlines,
// schedules and timestamps can be tested without sleeping.
package clocktest

import (
	"sync"
	"time"

	"orderpay"
)

// Clock is an orderpay.Clock set by hand. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ orderpay.Clock = (*Clock)(nil)

// New returns a clock showing t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

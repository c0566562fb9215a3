package orderpay

import "time"

// RequestKey makes order creation idempotent ("重复下单"). A client that sends an
// Idempotency-Key gets, for 24 hours, the order its first request with that key created;
// the same key with another request is refused. Without a key, the request itself is the
// key for 10 seconds: a buyer who submits the same order twice (a double click, a retry
// after a timeout) gets the first order back instead of a second one.
type RequestKey struct {
	BuyerID string
	// Key is "key:" + the client's Idempotency-Key, or "body:" + RequestHash.
	Key string
	// RequestHash identifies the request: SHA-256 of its canonical form, hex.
	RequestHash string
	OrderNo     string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// Request key lifetimes.
const (
	IdempotencyKeyTTL = 24 * time.Hour
	DuplicateGuardTTL = 10 * time.Second
)

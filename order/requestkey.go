package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode"

	"orderpay"
)

// errRequestKeyTaken is createOrder's answer when an identical request (same buyer and
// Idempotency-Key, or the same body within the guard's 10 seconds) committed its order first.
var errRequestKeyTaken = errors.New("order: request key taken")

// requestKey is the key under which req's order is remembered: the client's
// Idempotency-Key, or else the request itself. Its times are set when it is claimed.
func requestKey(req CreateOrderRequest) (*orderpay.RequestKey, error) {
	// The coupon is part of the request (the same items with another coupon are another
	// order); omitted when empty, so that a request without one hashes as it always did.
	// So is the address, likewise.
	var addr *orderpay.Address
	if !req.Address.Empty() {
		addr = &req.Address
	}
	canonical, err := json.Marshal(struct {
		BuyerID  string            `json:"buyer_id"`
		Items    []ItemRequest     `json:"items"`
		CouponID string            `json:"coupon_id,omitempty"`
		Address  *orderpay.Address `json:"address,omitempty"`
	}{req.BuyerID, req.Items, req.CouponID, addr})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	k := &orderpay.RequestKey{BuyerID: req.BuyerID, RequestHash: hex.EncodeToString(sum[:])}
	if req.IdempotencyKey == "" {
		k.Key = "body:" + k.RequestHash
		return k, nil
	}
	if !validIdempotencyKey(req.IdempotencyKey) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "Idempotency-Key must be 1-128 printable ASCII characters")
	}
	k.Key = "key:" + req.IdempotencyKey
	return k, nil
}

func validIdempotencyKey(k string) bool {
	if len(k) > 128 {
		return false
	}
	for _, r := range k {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// ttl is how long a key holds its order: a day for a client's key, the guard's 10 seconds
// for a request without one.
func ttl(k *orderpay.RequestKey) time.Duration {
	if k.Key == "body:"+k.RequestHash {
		return orderpay.DuplicateGuardTTL
	}
	return orderpay.IdempotencyKeyTTL
}

// replay returns the order an earlier request with key k created, if its key is still
// live; nil if there is none. A client key reused for another request is EIDEMPOTENCY.
func (s *Service) replay(ctx context.Context, k *orderpay.RequestKey) (*orderpay.Order, error) {
	stored, err := s.cfg.Store.RequestKey(ctx, k.BuyerID, k.Key)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.replayStored(ctx, k, stored)
}

// replayStored is replay of the key k as stored (nil: none).
func (s *Service) replayStored(ctx context.Context, k, stored *orderpay.RequestKey) (*orderpay.Order, error) {
	if stored == nil || !orderpay.Now(s.cfg.Clock).Before(stored.ExpiresAt) {
		return nil, nil
	}
	if stored.RequestHash != k.RequestHash {
		return nil, orderpay.Errorf(orderpay.EIDEMPOTENCY, "this Idempotency-Key was used for a different request (order %s)", stored.OrderNo)
	}
	return s.cfg.Store.Order(ctx, stored.OrderNo)
}

// claimRequestKey remembers, in the transaction that creates order orderNo, that key k
// created it. errRequestKeyTaken if a live key got there first: that transaction rolls back.
func (s *Service) claimRequestKey(ctx context.Context, tx orderpay.Tx, k *orderpay.RequestKey, orderNo string, now time.Time) error {
	c := *k
	c.OrderNo, c.CreatedAt, c.ExpiresAt = orderNo, now, now.Add(ttl(k))
	claimed, err := tx.ClaimRequestKey(ctx, &c)
	if err != nil {
		return err
	}
	if !claimed {
		return errRequestKeyTaken
	}
	return nil
}

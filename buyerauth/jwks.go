package buyerauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// Bounds of the JWKS, which the shop's login serves and nobody here controls.
const (
	// JWKSMaxBytes is the largest JWKS answer read; a larger one is refused.
	JWKSMaxBytes = 1 << 20
	// JWKSMaxKeys is the most keys a JWKS may hold (a login publishes a few: the current
	// one, the next, the last); one with more is refused.
	JWKSMaxKeys = 100
	// JWKSFetchTimeout bounds one fetch of the JWKS, whoever waits for it.
	JWKSFetchTimeout = 5 * time.Second
)

// errUnknownKIDWindow says a fetch for an unknown kid was not made: one was made less than
// JWKSUnknownKIDEvery ago.
var errUnknownKIDWindow = errors.New("a JWKS fetch for an unknown kid was made less than " + JWKSUnknownKIDEvery.String() + " ago")

// jwksKeys holds the keys of the shop's JWKS for keyfunc (it is its jwkset.Storage), and
// fetches them: every refresh interval, and for a kid it does not hold (a rotation) at
// most once every JWKSUnknownKIDEvery. One fetch at a time: who needs one while it runs
// waits for it, for at most JWKSFetchTimeout. A kid it holds is answered from memory and
// never waits for a fetch. A fetch that fails, or whose answer is beyond JWKSMaxBytes or
// JWKSMaxKeys, is logged and the keys of the last good one stay.
type jwksKeys struct {
	*jwkset.MemoryJWKSet
	url     string
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	unknown *rate.Limiter // the fetches for unknown kids
	flight  singleflight.Group
	ctx     context.Context // ends with the Authenticator (Close)
	// changed is called when a fetch brings a set unlike the one held, before the
	// refresh's waiters read it.
	changed func()

	mu  sync.Mutex
	sum [sha256.Size]byte // of the answer whose keys are held
}

// KeyRead is the key kid: from memory, or, if it is not there, from a fetch made now (or
// joined), unless one for an unknown kid was made less than JWKSUnknownKIDEvery ago.
func (s *jwksKeys) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	if k, err := s.MemoryJWKSet.KeyRead(ctx, kid); err == nil {
		return k, nil
	}
	done := s.flight.DoChan("fetch", func() (any, error) {
		if !s.unknown.AllowN(s.now(), 1) {
			return nil, errUnknownKIDWindow
		}
		return nil, s.fetchAndLog("an unknown kid")
	})
	select {
	case <-done:
	case <-ctx.Done():
		return jwkset.JWK{}, ctx.Err()
	}
	return s.MemoryJWKSet.KeyRead(ctx, kid)
}

// refreshEvery fetches the set every interval until s.ctx ends.
func (s *jwksKeys) refreshEvery(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.flight.Do("fetch", func() (any, error) { return nil, s.fetchAndLog("the refresh") })
		}
	}
}

func (s *jwksKeys) fetchAndLog(why string) error {
	err := s.fetch()
	if err != nil && s.ctx.Err() == nil {
		s.log.Error("buyer JWKS fetch failed: the keys of the last good fetch stay", "url", s.url, "for", why, "err", err)
	}
	return err
}

// fetch reads the set and, if it is within the bounds, holds its keys instead of those
// held.
func (s *jwksKeys) fetch() error {
	ctx, cancel := context.WithTimeout(s.ctx, JWKSFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	if resp.ContentLength > JWKSMaxBytes {
		return fmt.Errorf("the answer is larger than %d bytes (%d)", JWKSMaxBytes, resp.ContentLength)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, JWKSMaxBytes+1))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > JWKSMaxBytes {
		return fmt.Errorf("the answer is larger than %d bytes", JWKSMaxBytes)
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&set); err != nil {
		return fmt.Errorf("the answer is not a JWKS: %w", err)
	}
	if len(set.Keys) > JWKSMaxKeys {
		return fmt.Errorf("the set has %d keys, more than %d", len(set.Keys), JWKSMaxKeys)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue // a key type this program does not verify with (Ed448, say)
		case err != nil:
			return fmt.Errorf("key %q: %w", m.KID, err)
		}
		keys = append(keys, k)
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if sum == s.sum {
		return nil
	}
	if err := s.MemoryJWKSet.KeyReplaceAll(ctx, keys); err != nil {
		return err
	}
	s.sum = sum
	if s.changed != nil {
		s.changed()
	}
	return nil
}

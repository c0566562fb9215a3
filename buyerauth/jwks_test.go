package buyerauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/clocktest"
)

// logBuffer is a log that many goroutines may write while a test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func bearerOf(token string) *http.Request { return request("10.0.0.1:1", "Bearer "+token, nil) }

// publishedKey is one key of j's set as it publishes it, to copy.
func publishedKey(t *testing.T, j *buyerauthtest.JWKS) map[string]any {
	t.Helper()
	resp, err := http.Get(j.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("the test JWKS: %v, %d keys", err, len(set.Keys))
	}
	return set.Keys[0]
}

// A JWKS answer larger than the bound (2 MiB), or with more keys than the bound, is
// refused with an error in the log, and the keys of the last fetch stay: tokens they sign
// are still accepted. Neither answer holds the keys, so taking it would drop them.
func TestAnOversizedJWKSIsRefusedAndTheKeysKept(t *testing.T) {
	t.Parallel()
	j := buyerauthtest.NewJWKS()
	defer j.Close()
	var log logBuffer
	clock := clocktest.New(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, JWKSURL: j.URL(), Clock: clock,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	exp := time.Now().Add(time.Hour)
	wantBuyer(t, a, bearerOf(j.TokenKID(j.KID(), "bob", exp)), "bob", "")

	key := publishedKey(t, j)
	many := make([]map[string]any, 1000)
	for i := range many {
		k := map[string]any{}
		for name, v := range key {
			k[name] = v
		}
		k["kid"] = fmt.Sprintf("copy-%d", i)
		many[i] = k
	}
	manyKeys, err := json.Marshal(map[string]any{"keys": many})
	if err != nil {
		t.Fatal(err)
	}
	if len(manyKeys) > 1<<20 {
		t.Fatalf("the set of many keys is %d bytes, beyond the size bound: it would not test the key bound", len(manyKeys))
	}
	for i, c := range []struct {
		name string
		body []byte
		log  string
	}{
		{"2 MiB", []byte(`{"keys":[],"padding":"` + strings.Repeat("a", 2<<20) + `"}`), "larger than"},
		{"1000 keys", manyKeys, "1000 keys"},
	} {
		j.Serve(c.body)
		clock.Advance(buyerauth.JWKSUnknownKIDEvery) // a fetch for an unknown kid is allowed again
		before := j.Fetches()
		wantBuyer(t, a, bearerOf(j.TokenKID("unknown-kid", "mallory", exp)), "", "signature")
		if j.Fetches() != before+1 {
			t.Fatalf("%s: an unknown kid made %d fetches, want 1", c.name, j.Fetches()-before)
		}
		// Another buyer: a token not verified before, checked against the keys held.
		buyer := fmt.Sprintf("carol-%d", i)
		wantBuyer(t, a, bearerOf(j.TokenKID(j.KID(), buyer, exp)), buyer, "")
		if !strings.Contains(log.String(), c.log) || !strings.Contains(log.String(), "level=ERROR") {
			t.Fatalf("%s: the log does not say %q at ERROR:\n%s", c.name, c.log, log.String())
		}
	}
}

// A key taken out of the JWKS stops being trusted at the next refresh: a token it signed,
// even one verified a moment before, is refused once the set is fetched again.
func TestARemovedKeyIsNotTrustedAfterTheRefresh(t *testing.T) {
	t.Parallel()
	j := buyerauthtest.NewJWKS()
	defer j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const refresh = 200 * time.Millisecond
	a, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, JWKSURL: j.URL(), JWKSRefresh: refresh, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	exp := time.Now().Add(time.Hour)
	old := j.KID()
	tok := j.TokenKID(old, "bob", exp)
	wantBuyer(t, a, bearerOf(tok), "bob", "")
	j.Rotate()
	j.Unpublish(old)
	// Two fetches after the removal: the first has surely finished.
	before := j.Fetches()
	for deadline := time.Now().Add(5 * time.Second); j.Fetches() < before+2; time.Sleep(refresh / 4) {
		if time.Now().After(deadline) {
			t.Fatalf("the JWKS was fetched %d times in 5 s with a refresh of %s", j.Fetches()-before, refresh)
		}
	}
	wantBuyer(t, a, bearerOf(tok), "", "signature")
	wantBuyer(t, a, bearerOf(j.TokenKID(old, "carol", exp)), "", "signature")
	wantBuyer(t, a, bearerOf(j.TokenKID(j.KID(), "dave", exp)), "dave", "")
}

// Fifty forged tokens with made-up kids at once, while the JWKS server hangs for 10 s: they
// make one fetch between them, and are refused once it times out (5 s), not after the
// server; a valid token meanwhile is accepted at once. Until the window of
// JWKSUnknownKIDEvery has passed, made-up kids make no fetch; after it, the first token of
// a key just added is accepted, through one fetch.
func TestUnknownKIDsFetchOncePerWindowAndValidTokensNeverWait(t *testing.T) {
	t.Parallel()
	j := buyerauthtest.NewJWKS()
	defer j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clocktest.New(time.Now())
	a, err := buyerauth.New(ctx, buyerauth.Config{Mode: buyerauth.ModeJWT, JWKSURL: j.URL(), Clock: clock, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	exp := time.Now().Add(time.Hour)
	before := j.Fetches()
	j.Hang(10 * time.Second)

	const forgers = 50
	took := make([]time.Duration, forgers)
	errs := make([]error, forgers)
	var wg sync.WaitGroup
	for i := range forgers {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = a.Buyer(bearerOf(j.TokenKID(fmt.Sprintf("forged-%d", i), "mallory", exp)))
			took[i] = time.Since(start)
		})
	}
	for deadline := time.Now().Add(5 * time.Second); j.Fetches() == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no fetch for the unknown kids")
		}
	}
	start := time.Now()
	wantBuyer(t, a, bearerOf(j.TokenKID(j.KID(), "alice", exp)), "alice", "")
	if d := time.Since(start); d > time.Second {
		t.Errorf("a valid token waited %s while the JWKS server hung", d)
	}
	wg.Wait()
	for i := range forgers {
		if orderpay.ErrorCode(errs[i]) != orderpay.EUNAUTHORIZED {
			t.Errorf("forged token %d: %v", i, errs[i])
		}
		if took[i] > buyerauth.JWKSFetchTimeout+2*time.Second {
			t.Errorf("forged token %d was answered after %s, beyond the fetch timeout", i, took[i])
		}
	}
	if n := j.Fetches() - before; n != 1 {
		t.Errorf("%d forged tokens made %d fetches in one window, want 1", forgers, n)
	}

	// The window not over: no fetch, and an answer at once.
	j.Hang(0)
	start = time.Now()
	wantBuyer(t, a, bearerOf(j.TokenKID("forged-again", "mallory", exp)), "", "signature")
	if d := time.Since(start); d > time.Second || j.Fetches()-before != 1 {
		t.Errorf("a made-up kid in the same window: answered in %s, %d fetches in all", d, j.Fetches()-before)
	}
	// The window over: a new key's first token is fetched for, once, and accepted.
	clock.Advance(buyerauth.JWKSUnknownKIDEvery)
	j.Rotate()
	start = time.Now()
	wantBuyer(t, a, bearerOf(j.TokenKID(j.KID(), "erin", exp)), "erin", "")
	if d := time.Since(start); d > time.Second || j.Fetches()-before != 2 {
		t.Errorf("a new key's first token: accepted in %s, %d fetches in all", d, j.Fetches()-before)
	}
}

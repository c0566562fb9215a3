// Package simtest has helpers for tests that run against the channel simulator.
package simtest

import (
	"crypto/rand"
	"crypto/rsa"
	"sync"
	"testing"

	"orderpay/channel/sim"
)

var (
	once   sync.Once
	keys   *sim.Keys
	forger *rsa.PrivateKey
	err    error
)

// Keys returns the simulator's keys and a key that is no channel's (to forge with). RSA
// generation is slow, so each test binary makes them once and shares them.
func Keys(t testing.TB) (*sim.Keys, *rsa.PrivateKey) {
	t.Helper()
	once.Do(func() {
		if keys, err = sim.GenerateKeys(); err == nil {
			forger, err = rsa.GenerateKey(rand.Reader, 2048)
		}
	})
	if err != nil {
		t.Fatalf("generate keys: %v", err)
	}
	return keys, forger
}

// PEM returns what f returns, failing the test on an error.
func PEM(t testing.TB, f func() (string, error)) string {
	t.Helper()
	s, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

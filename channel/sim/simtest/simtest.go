// Package simtest has helpers for tests that run against the channel simulator.
package simtest

import (
	"crypto/rand"
	"crypto/rsa"
	_ "embed"
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

// keyPool is 128 RSA-2048 keys made for the tests, each with
// `openssl genrsa -traditional 2048`: they guard nothing.
//
//go:embed keypool.pem
var keyPool []byte

// UseKeyPool makes the simulator take the keys of every fresh key set in this test binary
// from keypool.pem (sim.UseKeyPool): a test that starts a server on a new key directory then
// spends no CPU generating ten RSA keys. A test binary's TestMain or init calls it.
func UseKeyPool() {
	if err := sim.UseKeyPool(keyPool); err != nil {
		panic(err)
	}
}

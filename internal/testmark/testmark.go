// Package testmark lets a test say that it reached an optional part of the test machine (a
// PostgreSQL server, a Chromium), so that scripts/test counts the tests that really ran on
// it rather than trusting an environment variable: a test that skips, or a suite that a
// -run pattern left out, is not counted.
package testmark

import "testing"

// Prefix starts every mark in a test's log; the suite's name follows it.
const Prefix = "orderpay-test-reached: "

// The optional suites.
const (
	Postgres = "postgres"
	Browser  = "browser"
)

// Reached logs that t uses suite. Call it once the test has what it needs, before it can
// still skip.
func Reached(t testing.TB, suite string) {
	t.Helper()
	t.Log(Prefix + suite)
}

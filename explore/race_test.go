//go:build race

package explore_test

// raceDetector: the race detector makes each case several times slower; the sample of
// every pair runs in scripts/test's own step without it (the cases' one-at-a-time driver
// is what the quick tests here check under it).
const raceDetector = true

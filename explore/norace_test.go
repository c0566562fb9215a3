//go:build !race

package explore_test

const raceDetector = false

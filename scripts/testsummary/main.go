// Command testsummary reads the `go test -json` streams of scripts/test.
//
//	go test -json ./... 2>&1 | tee tests.json | testsummary -show
//
// prints the stream as go test without -v would: each package's result line, the whole
// output of every failing test, build errors and the go command's own lines.
//
//	testsummary -tests tests.json -tests-exit N -explore explore.json -explore-exit M
//
// prints the one line that ends scripts/test (packages and tests passed, failed and
// skipped; whether any test ran on PostgreSQL and in Chromium, counted by the marks the
// tests log through orderpay/internal/testmark; the explorer sample's result) and exits 1
// unless everything passed and every suite that ORDERPAY_TEST_PG_REQUIRED=1 or
// ORDERPAY_TEST_BROWSER_REQUIRED=1 requires ran at least one test.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	show := flag.Bool("show", false, "print the go test -json stream on stdin as go test without -v would")
	tests := flag.String("tests", "", "the main run's go test -json output")
	testsExit := flag.Int("tests-exit", 0, "the main run's exit status")
	explore := flag.String("explore", "", "the explorer sample's go test -json output")
	exploreExit := flag.Int("explore-exit", 0, "the explorer sample's exit status")
	flag.Parse()
	if *show {
		if err := NewRun(os.Stdout).Read(os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
		return
	}
	if *tests == "" || *explore == "" {
		fmt.Fprintln(os.Stderr, "testsummary: -show, or -tests and -explore")
		os.Exit(2)
	}
	t, err := countFile(*tests)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	e, err := countFile(*explore)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	line, ok := Summary(t, *testsExit, e, *exploreExit, Required{
		Postgres: os.Getenv("ORDERPAY_TEST_PG_REQUIRED") == "1",
		Browser:  os.Getenv("ORDERPAY_TEST_BROWSER_REQUIRED") == "1",
	})
	fmt.Println(line)
	if !ok {
		os.Exit(1)
	}
}

func countFile(path string) (Counts, error) {
	f, err := os.Open(path)
	if err != nil {
		return Counts{}, err
	}
	defer f.Close()
	r := NewRun(nil)
	if err := r.Read(f); err != nil {
		return Counts{}, err
	}
	return r.Counts(), nil
}

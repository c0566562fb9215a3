package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"orderpay/internal/testmark"
)

// event is one line of `go test -json` (the fields this program reads).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail
}

// testKey names one test or subtest of one package.
type testKey struct{ pkg, test string }

// Run reads one `go test -json` stream. Show prints it as `go test` without -v would:
// the packages' result lines, the whole output of every failing test, build errors and
// any line that is not JSON (the go command's own errors); Counts totals it.
type Run struct {
	show io.Writer // nil: count only

	buffered map[testKey][]string // output of the tests still running
	reached  map[testKey]map[string]bool
	finished map[testKey]string // pass, fail or skip

	pkgs map[string]string // package → pass, fail or skip (no test files)
}

// NewRun returns a Run that prints to show (nil: it only counts).
func NewRun(show io.Writer) *Run {
	return &Run{show: show, buffered: map[testKey][]string{}, reached: map[testKey]map[string]bool{},
		finished: map[testKey]string{}, pkgs: map[string]string{}}
}

// Read feeds the whole stream in to the Run, line by line as it comes, then ends it.
func (r *Run) Read(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.Line(line)
		}
		if err == io.EOF {
			r.End()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *Run) print(s string) {
	if r.show != nil {
		io.WriteString(r.show, s)
	}
}

// Line takes one line of the stream.
func (r *Run) Line(line []byte) {
	var e event
	if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) || json.Unmarshal(line, &e) != nil || e.Action == "" {
		r.print(string(line)) // not go test's JSON: the go command or a tool said it
		return
	}
	switch e.Action {
	case "build-output":
		r.print(e.Output)
		return
	case "build-fail":
		return // the package's own fail follows
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			// A package's own lines: "ok", "FAIL", "--- FAIL" of a package-level failure,
			// a panic outside any test. The bare PASS that -json adds is left out, as
			// go test without -v does.
			if e.Output != "PASS\n" {
				r.print(e.Output)
			}
		case "pass", "fail", "skip":
			r.pkgs[e.Package] = e.Action
		}
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		r.buffered[k] = append(r.buffered[k], e.Output)
		if i := strings.Index(e.Output, testmark.Prefix); i >= 0 {
			suite := strings.TrimSpace(e.Output[i+len(testmark.Prefix):])
			if r.reached[k] == nil {
				r.reached[k] = map[string]bool{}
			}
			r.reached[k][suite] = true
		}
	case "pass", "skip":
		r.finished[k] = e.Action
		delete(r.buffered, k)
	case "fail":
		r.finished[k] = e.Action
		for _, s := range r.buffered[k] {
			r.print(s)
		}
		delete(r.buffered, k)
	}
}

// End is called at the end of the stream: a test that never finished (the run was killed,
// or timed out) is shown in full and counted as failed.
func (r *Run) End() {
	keys := make([]testKey, 0, len(r.buffered))
	for k := range r.buffered {
		if _, done := r.finished[k]; !done {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pkg != keys[j].pkg {
			return keys[i].pkg < keys[j].pkg
		}
		return keys[i].test < keys[j].test
	})
	for _, k := range keys {
		r.print(fmt.Sprintf("--- %s (%s) never finished; its output:\n", k.test, k.pkg))
		for _, s := range r.buffered[k] {
			r.print(s)
		}
		r.finished[k] = "fail"
	}
	r.buffered = map[testKey][]string{}
}

// Counts totals a Run. Tests are the top-level tests (TestX, not TestX/sub); a suite's
// count is of the tests and subtests that logged its testmark and then passed or failed
// (one that skipped after it is not counted).
type Counts struct {
	PackagesOK, PackagesFailed int
	Passed, Failed, Skipped    int
	Reached                    map[string]int    // testmark suite → tests that ran on it
	TopTests                   map[string]string // top-level test → pass, fail or skip
	failedTests                []string
}

// Counts returns the Run's totals.
func (r *Run) Counts() Counts {
	c := Counts{Reached: map[string]int{}, TopTests: map[string]string{}}
	for _, result := range r.pkgs {
		switch result {
		case "pass":
			c.PackagesOK++
		case "fail":
			c.PackagesFailed++
		}
	}
	for k, result := range r.finished {
		if !strings.Contains(k.test, "/") {
			c.TopTests[k.test] = result
			switch result {
			case "pass":
				c.Passed++
			case "fail":
				c.Failed++
				c.failedTests = append(c.failedTests, k.pkg+"."+k.test)
			case "skip":
				c.Skipped++
			}
		}
		if result == "skip" {
			continue
		}
		for suite := range r.reached[k] {
			c.Reached[suite]++
		}
	}
	sort.Strings(c.failedTests)
	return c
}

// maxNamed is how many failed tests the summary names; their output is above it.
const maxNamed = 10

// Required says which optional suites must have run.
type Required struct{ Postgres, Browser bool }

// Summary is the one line that ends scripts/test, and whether the run passed: every
// package and test passed, both go test runs exited 0, and each required suite ran at
// least one test.
func Summary(tests Counts, testsExit int, explore Counts, exploreExit int, req Required) (string, bool) {
	ok := testsExit == 0 && exploreExit == 0 && tests.Failed == 0 && tests.PackagesFailed == 0 &&
		explore.Failed == 0 && explore.PackagesFailed == 0
	var parts []string
	parts = append(parts, fmt.Sprintf("packages %d ok, %d failed", tests.PackagesOK, tests.PackagesFailed))
	parts = append(parts, fmt.Sprintf("tests %d passed, %d failed, %d skipped", tests.Passed, tests.Failed, tests.Skipped))
	if n := tests.Reached[testmark.Postgres]; n > 0 {
		parts = append(parts, fmt.Sprintf("engines SQLite and PostgreSQL (%s on PostgreSQL)", plural(n, "test")))
	} else {
		parts = append(parts, "engines SQLite only (no test ran on PostgreSQL)")
	}
	if n := tests.Reached[testmark.Browser]; n > 0 {
		parts = append(parts, fmt.Sprintf("browser covered (%s in Chromium)", plural(n, "test")))
	} else {
		parts = append(parts, "browser not covered (no test ran in Chromium)")
	}
	parts = append(parts, "explorer sample "+exploreResult(explore, exploreExit))
	if testsExit != 0 && tests.Failed == 0 && tests.PackagesFailed == 0 {
		parts = append(parts, fmt.Sprintf("go test exited %d with no failed test (see above)", testsExit))
	}
	if req.Postgres && tests.Reached[testmark.Postgres] == 0 {
		ok = false
		parts = append(parts, "ORDERPAY_TEST_PG_REQUIRED=1 but no test ran on PostgreSQL")
	}
	if req.Browser && tests.Reached[testmark.Browser] == 0 {
		ok = false
		parts = append(parts, "ORDERPAY_TEST_BROWSER_REQUIRED=1 but no test ran in Chromium")
	}
	if n := len(tests.failedTests); n > 0 {
		names := tests.failedTests[:min(n, maxNamed)]
		line := "failed: " + strings.Join(names, " ")
		if n > maxNamed {
			line += fmt.Sprintf(" and %d more", n-maxNamed)
		}
		parts = append(parts, line)
	}
	verdict := "ok"
	if !ok {
		verdict = "FAIL"
	}
	return "scripts/test: " + verdict + ": " + strings.Join(parts, "; "), ok
}

// exploreResult is the explorer sample's result: passed or failed, and each of its tests.
func exploreResult(c Counts, exit int) string {
	result := "passed"
	switch {
	case c.Failed > 0 || c.PackagesFailed > 0 || exit != 0:
		result = "FAILED"
	case c.Passed == 0:
		result = "ran nothing"
	}
	names := make([]string, 0, len(c.TopTests))
	for name := range c.TopTests {
		names = append(names, name)
	}
	sort.Strings(names)
	var each []string
	for _, name := range names {
		each = append(each, name+" "+pastTense(c.TopTests[name]))
	}
	if len(each) == 0 {
		return result
	}
	return result + " (" + strings.Join(each, ", ") + ")"
}

func pastTense(action string) string {
	switch action {
	case "pass":
		return "passed"
	case "fail":
		return "failed"
	case "skip":
		return "skipped"
	}
	return action
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

package main

import (
	"os"
	"strings"
	"testing"
)

// testdata/tests.json is `go test -json ./... 2>&1` of a module made for this test: in
// package a a passing test, a test whose postgres subtest logs the PostgreSQL mark, a
// failing test, a skipped one and a parallel one with the mark; in b a test that logs the
// browser mark then skips, one that logs it and passes, and a test with a failing subtest;
// c does not build; d has no tests. Its last line, the go command's own, was added by hand.
// testdata/explore.json is the same of a package with the explorer sample's two tests, the
// PostgreSQL one skipped.
func read(t *testing.T, path string, show *strings.Builder) Counts {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := NewRun(nil)
	if show != nil {
		r = NewRun(show)
	}
	if err := r.Read(f); err != nil {
		t.Fatal(err)
	}
	return r.Counts()
}

func TestCountsOfARecordedRun(t *testing.T) {
	c := read(t, "testdata/tests.json", nil)
	if c.PackagesOK != 0 || c.PackagesFailed != 3 {
		t.Errorf("packages %d ok, %d failed; want 0 and 3 (a, b, and c's build; d has no tests)", c.PackagesOK, c.PackagesFailed)
	}
	// Top-level tests only: TestPasses, TestEngines, TestParallelPostgres, TestBrowser
	// passed; TestFails and TestSubtestFails failed; TestSkips and TestBrowserThenSkips
	// skipped.
	if c.Passed != 4 || c.Failed != 2 || c.Skipped != 2 {
		t.Errorf("tests %d passed, %d failed, %d skipped; want 4, 2, 2", c.Passed, c.Failed, c.Skipped)
	}
	// The postgres subtest and the parallel test; the test that logged the browser mark
	// and then skipped did not run in the browser.
	if c.Reached["postgres"] != 2 || c.Reached["browser"] != 1 {
		t.Errorf("reached %v, want postgres 2 and browser 1", c.Reached)
	}
}

func TestShowPrintsFailuresInFullAndNothingOfPassingTests(t *testing.T) {
	var out strings.Builder
	read(t, "testdata/tests.json", &out)
	got := out.String()
	for _, want := range []string{
		"c/c.go:3:23: undefined: undefined", // the build error
		"the line before the failure",       // all of a failing test's output
		"want 3, got 2",
		"--- FAIL: TestFails",
		"the subtest's failure",
		"--- FAIL: TestSubtestFails/bad",
		"FAIL\tfixture/a",
		"FAIL\tfixture/c [build failed]",
		"?   \tfixture/d\t[no test files]",
		"go: downloading example.invalid/never v1.0.0", // a line that is not JSON
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"never shown", "orderpay-test-reached", "TestSkips", "\nPASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the output has %q, of a test that did not fail:\n%s", unwanted, got)
		}
	}
}

func TestATestThatNeverFinishedIsShownAndFailed(t *testing.T) {
	var out strings.Builder
	r := NewRun(&out)
	r.Line([]byte(`{"Action":"run","Package":"p","Test":"TestHangs"}` + "\n"))
	r.Line([]byte(`{"Action":"output","Package":"p","Test":"TestHangs","Output":"waiting for the server\n"}` + "\n"))
	r.End()
	if c := r.Counts(); c.Failed != 1 || !strings.Contains(out.String(), "waiting for the server") {
		t.Errorf("counts %+v, output %q", c, out.String())
	}
}

func TestSummaryLine(t *testing.T) {
	tests := read(t, "testdata/tests.json", nil)
	explore := read(t, "testdata/explore.json", nil)
	line, ok := Summary(tests, 1, explore, 0, Required{})
	want := "scripts/test: FAIL: packages 0 ok, 3 failed; tests 4 passed, 2 failed, 2 skipped; " +
		"engines SQLite and PostgreSQL (2 tests on PostgreSQL); browser covered (1 test in Chromium); " +
		"explorer sample passed (TestEveryPairOnSQLite passed, TestPairsOnPostgres skipped); " +
		"failed: fixture/a.TestFails fixture/b.TestSubtestFails"
	if ok || line != want {
		t.Errorf("summary (ok %v)\n%s\nwant\n%s", ok, line, want)
	}

	// A clean run passes; one where no test reached PostgreSQL or Chromium passes too,
	// unless a suite is required.
	clean := Counts{PackagesOK: 3, Passed: 10, Skipped: 1, Reached: map[string]int{"postgres": 4, "browser": 2}}
	bare := Counts{PackagesOK: 3, Passed: 10, Skipped: 5, Reached: map[string]int{}}
	for _, c := range []struct {
		name   string
		tests  Counts
		req    Required
		ok     bool
		saying string
	}{
		{"clean", clean, Required{Postgres: true, Browser: true}, true, "scripts/test: ok: packages 3 ok, 0 failed; tests 10 passed, 0 failed, 1 skipped; engines SQLite and PostgreSQL (4 tests on PostgreSQL); browser covered (2 tests in Chromium)"},
		{"bare, nothing required", bare, Required{}, true, "engines SQLite only (no test ran on PostgreSQL); browser not covered (no test ran in Chromium)"},
		{"bare, PostgreSQL required", bare, Required{Postgres: true}, false, "ORDERPAY_TEST_PG_REQUIRED=1 but no test ran on PostgreSQL"},
		{"bare, browser required", bare, Required{Browser: true}, false, "ORDERPAY_TEST_BROWSER_REQUIRED=1 but no test ran in Chromium"},
	} {
		line, ok := Summary(c.tests, 0, explore, 0, c.req)
		if ok != c.ok || !strings.Contains(line, c.saying) || strings.Count(line, "\n") != 0 {
			t.Errorf("%s: ok %v, %q; want ok %v and %q", c.name, ok, line, c.ok, c.saying)
		}
	}

	// A run that exited non-zero with nothing failed (killed, or a flag go test refused)
	// is a failure; so is a failed explorer sample.
	if line, ok := Summary(clean, 2, explore, 0, Required{}); ok || !strings.Contains(line, "go test exited 2") {
		t.Errorf("go test exited 2: ok %v, %q", ok, line)
	}
	if line, ok := Summary(clean, 0, explore, 1, Required{}); ok || !strings.Contains(line, "explorer sample FAILED") {
		t.Errorf("the explorer exited 1: ok %v, %q", ok, line)
	}
}

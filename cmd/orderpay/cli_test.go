package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"orderpay"
)

// Every command, and every subcommand with flags of its own: what to run, and the name its
// usage must show.
var cliCommands = []struct {
	args []string
	name string
}{
	{[]string{"serve"}, "orderpay serve"},
	{[]string{"sim"}, "orderpay sim"},
	{[]string{"channels"}, "orderpay channels check"},
	{[]string{"channels", "check"}, "orderpay channels check"},
	{[]string{"operators"}, "orderpay operators add"},
	{[]string{"operators", "add"}, "orderpay operators add"},
	{[]string{"reconcile"}, "orderpay reconcile"},
	{[]string{"chaos"}, "orderpay chaos"},
	{[]string{"explore"}, "orderpay explore"},
	{[]string{"bench"}, "orderpay bench"},
	{[]string{"bench", "flash"}, "orderpay bench flash"},
	{[]string{"bench", "timers"}, "orderpay bench timers"},
	{[]string{"bench", "flood"}, "orderpay bench flood"},
	{[]string{"bench", "pos"}, "orderpay bench pos"},
	{[]string{"version"}, "orderpay version"},
}

// runCLI runs the command line as main does, and returns its exit status and output.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = exitCode(run(context.Background(), args, &out, &errOut), &errOut)
	return code, out.String(), errOut.String()
}

// -h and --help print the command's usage on stdout and exit 0; a flag the command does not
// have exits 2 and says which; the same for every command.
func TestEveryCommandAnswersHelpAndRefusesABadFlag(t *testing.T) {
	for _, c := range cliCommands {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for _, h := range []string{"-h", "--help"} {
				code, out, errOut := runCLI(append(c.args, h)...)
				if code != exitOK || !strings.Contains(out, c.name) {
					t.Errorf("%s: exit %d, want 0, with a usage naming %q on stdout:\n%s\nstderr:\n%s", h, code, c.name, out, errOut)
				}
			}
			code, out, errOut := runCLI(append(c.args, "--no-such-flag")...)
			if code != exitUsage || !strings.Contains(errOut, "no-such-flag") {
				t.Errorf("a bad flag: exit %d, want 2, naming the flag on stderr:\n%s\nstdout:\n%s", code, errOut, out)
			}
		})
	}
	// Arguments a command does not take are usage errors too.
	for _, args := range [][]string{{"serve", "extra"}, {"version", "extra"}, {"operators", "add", "alice"}, {"channels", "check"}, {"reconcile"},
		{"explore", "--engine", "mysql"}, {"explore", "--engine", "postgres", "--db", ""}, {"explore", "--depth", "3"},
		// The queue's flags only with --queued; the spread run and the naive baseline never with it.
		{"bench", "flash", "--queue-pace", "5"}, {"bench", "flash", "--compare=false"}, {"bench", "flash", "--queued", "--skus", "4"},
		{"bench", "flash", "--queued", "--concurrency", "0"}, {"bench", "flash", "--queued", "--queue-wait-seconds", "0"}} {
		if code, _, errOut := runCLI(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want 2:\n%s", args, code, errOut)
		}
	}
}

// The list of commands (no arguments, help, -h) names every command, in one column, and
// the descriptions start in another.
func TestCommandListIsAligned(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runCLI(args...)
		list, want := out, exitOK
		if args == nil {
			list, want = errOut, exitUsage
		}
		if code != want {
			t.Errorf("%q: exit %d, want %d", args, code, want)
		}
		_, body, ok := strings.Cut(list, "commands:\n")
		body, _, _ = strings.Cut(body, "\n\n")
		if !ok || body == "" {
			t.Fatalf("%q: no list of commands:\n%s", args, list)
		}
		line := regexp.MustCompile(`^  ([a-z]+)( +)\S`)
		column := -1
		names := map[string]bool{}
		for _, l := range strings.Split(body, "\n") {
			m := line.FindStringSubmatchIndex(l)
			if m == nil {
				t.Fatalf("%q: %q is not a command and its description", args, l)
			}
			names[l[m[2]:m[3]]] = true
			if column == -1 {
				column = m[5]
			} else if m[5] != column {
				t.Errorf("%q: the description of %q starts at column %d, the first one's at %d:\n%s", args, l[m[2]:m[3]], m[5], column, body)
			}
		}
		for _, c := range cliCommands {
			if !names[c.args[0]] {
				t.Errorf("%q: the list leaves out %q", args, c.args[0])
			}
		}
	}
	if code, out, _ := runCLI("help", "reconcile"); code != exitOK || !strings.Contains(out, "orderpay reconcile") {
		t.Errorf("help reconcile: exit %d:\n%s", code, out)
	}
}

// A default is shown once, as what it means: reconcile's date is "yesterday", not the day
// the help was printed; serve's pay windows show theirs, which is what the flag gets
// without it.
func TestHelpShowsMeaningfulDefaults(t *testing.T) {
	_, out, _ := runCLI("reconcile", "-h")
	if !strings.Contains(out, "(default: yesterday)") || regexp.MustCompile(`default "\d{4}-\d\d-\d\d"`).MatchString(out) {
		t.Errorf("reconcile -h shows a frozen date, or not yesterday:\n%s", out)
	}
	_, out, _ = runCLI("serve", "-h")
	shown := regexp.MustCompile(`(?s)-pay-windows value\n[^\n]*\(default ([^)]+)\)`).FindStringSubmatch(out)
	if shown == nil {
		t.Fatalf("serve -h shows no default for --pay-windows:\n%s", out)
	}
	if w, err := parsePayWindows(shown[1]); err != nil || !maps.Equal(w, orderpay.DefaultPayWindows) {
		t.Errorf("the default shown, %q, is %v (%v), not the default %v", shown[1], w, err, orderpay.DefaultPayWindows)
	}
	_, out, _ = runCLI("explore", "-h")
	if regexp.MustCompile(`(?s)-workers int\n[^\n]*\(default \d+\)`).MatchString(out) {
		t.Errorf("explore -h shows this machine's worker count as the default:\n%s", out)
	}
}

// version prints the revision when Go stamped one, and says plainly when it did not.
func TestVersionPrintsTheRevision(t *testing.T) {
	code, out, _ := runCLI("version")
	if code != exitOK || !strings.HasPrefix(out, "orderpay "+orderpay.Build().Version+"\n") || !strings.Contains(out, "\nrevision: ") {
		t.Fatalf("version: exit %d:\n%s", code, out)
	}
	var b bytes.Buffer
	writeVersion(&b, orderpay.BuildInfo{Version: "0.3.0-devel", Revision: "0123456789abcdef0123456789abcdef01234567",
		Time: "2026-11-27T10:00:00Z", Modified: true, GoVersion: "go1.26.8"})
	for _, s := range []string{"orderpay 0.3.0-devel\n", "revision: 0123456789abcdef0123456789abcdef01234567 (modified", "2026-11-27T10:00:00Z", "go1.26.8"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("a stamped build: %q is missing:\n%s", s, b.String())
		}
	}
	b.Reset()
	writeVersion(&b, orderpay.BuildInfo{Version: "0.3.0-devel", GoVersion: "go1.26.8"})
	if !strings.Contains(b.String(), "revision: unknown (built without version control information)\n") {
		t.Errorf("an unstamped build:\n%s", b.String())
	}
}

// serve prints its own PID with its URLs (with go run, the PID a process list shows first
// is the go tool's). A second serve on a port the first one holds says another orderpay
// is there, whichever of its listeners it is; on a port another program holds, that it is
// taken by another program; and it does not start.
func TestServePrintsItsPIDAndNamesWhoHoldsItsPort(t *testing.T) {
	var out bytes.Buffer
	first, _ := startMain(t, "", func(m *Main) { m.Stdout = io.MultiWriter(m.Stdout, &out) })
	if want := fmt.Sprintf("PID:                 %d ", os.Getpid()); !strings.Contains(out.String(), want) {
		t.Errorf("serve did not print its PID (%q):\n%s", want, out.String())
	}

	other := httptest.NewServer(http.NotFoundHandler()) // a program that is not orderpay
	defer other.Close()
	hostOf := func(u string) string { return strings.TrimPrefix(u, "http://") }
	for _, c := range []struct {
		name      string
		configure func(*Main)
		want      string
	}{
		{"api", func(m *Main) { m.Config.Addr = hostOf(first.URL) }, "another orderpay seems to be running there (its API answers"},
		{"simulator", func(m *Main) { m.Config.SimAddr = hostOf(first.SimURL) }, "another orderpay seems to be running there (its channel simulator answers"},
		{"metrics", func(m *Main) { m.Config.MetricsAddr = hostOf(first.MetricsURL) }, "another orderpay seems to be running there (its metrics answer"},
		{"another program", func(m *Main) { m.Config.Addr = hostOf(other.URL) }, hostOf(other.URL) + " is taken by another program"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMain()
			m.Config.Addr, m.Config.SimAddr, m.Config.MetricsAddr, m.Config.DataDir = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
			m.Config.AdminToken, m.Config.LogLevel = "test-admin-token-of-24-chars", "warn"
			m.Stdout, m.Stderr = io.Discard, io.Discard
			c.configure(m)
			err := m.Run(context.Background())
			m.Close()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the second serve: %v; want %q", err, c.want)
			}
			if code := exitCode(err, io.Discard); code != exitFailure {
				t.Errorf("exit %d, want 1", code)
			}
		})
	}
}

// -h shows a flag's built-in default, never the value its environment variable holds: a
// token, a key or a DSN's password would be printed to whoever runs -h (and into a
// terminal's scroll-back). The variable still sets the value.
func TestHelpNeverPrintsAVariablesValue(t *testing.T) {
	const marker = "s3cret-from-the-environment-0123456789"
	for _, v := range []string{"ORDERPAY_ADMIN_TOKEN", "ORDERPAY_ORDER_NO_KEY", "ORDERPAY_WEBHOOK_SECRET", "ORDERPAY_NATS",
		"ORDERPAY_EXPLORE_PG", "ORDERPAY_CHANNELS"} {
		t.Setenv(v, marker)
	}
	t.Setenv("ORDERPAY_DB", "postgres://u:"+marker+"@db/orderpay")
	for _, c := range cliCommands {
		code, out, errOut := runCLI(append(c.args, "-h")...)
		if code != exitOK || strings.Contains(out+errOut, marker) {
			t.Errorf("%s -h: exit %d; the help prints a variable's value:\n%s", c.name, code, out+errOut)
		}
	}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.parseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if m.Config.AdminToken != marker || m.Config.NATS != marker {
		t.Errorf("the variables did not set the values: %q, %q", m.Config.AdminToken, m.Config.NATS)
	}
}

// Command orderpay runs the order-and-payment core.
//
//	orderpay serve            the API, with SQLite, embedded NATS and the channel simulator by default
//	orderpay sim              the channel simulator alone, as a sandbox for other projects
//	orderpay channels check   one harmless signed call per merchant account of a channels file
//	orderpay operators add    a new operator's token and the lines of the operators file
//	orderpay reconcile        one channel's bill of one day against the database
//	orderpay chaos            buyers, channel faults and kill -9 against a server, then an audit of I1–I10
//	orderpay explore          every pair of money operations interleaved at every step, each case audited
//	orderpay bench            a fault-free end-to-end throughput and latency run
//	orderpay version          the release and the revision it was built from
//
// Every command answers -h and --help with its usage (exit 0); a command line that cannot
// be understood exits 2, a failure while running 1.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"orderpay"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage is a command line that could not be understood; its usage was printed.
var errUsage = errors.New("usage")

// exitError is an error that ends the process with its own exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err, a flag or variable whose value cannot be used, as a usage error
// (exit 2). A help request and usage errors stay as they are.
func usageError(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

// usageErrorf is a command line that could not be understood, with what was wrong; the
// caller has printed the usage.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// Exit statuses, the same for every command: 0 done (and a help request, -h, --help), 1 a
// failure while running, 2 a command line that could not be understood. reconcile also
// exits 1 when a difference is left unexplained, and 2 when it could not run.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitCode prints err once, prefixed "orderpay:", and returns the process's exit status:
// exitOK for none or a help request, exitUsage for a command line that could not be
// understood, the status an exitError carries, else exitFailure.
func exitCode(err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		var shown *shownError
		if err != errUsage && !errors.As(err, &shown) { // else its usage and message are printed
			fmt.Fprintln(stderr, "orderpay:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		}
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintln(stderr, "orderpay:", strings.TrimPrefix(err.Error(), "orderpay: "))
		return ee.code
	}
	fmt.Fprintln(stderr, "orderpay:", strings.TrimPrefix(err.Error(), "orderpay: "))
	return exitFailure
}

// parseFlags parses args into fs, alike for every command: -h or --help prints the usage on
// stdout and returns flag.ErrHelp (exit 0); a flag that cannot be read prints what is wrong
// and the usage on stderr and returns it as a usage error (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return flag.ErrHelp
	}
	_, _ = stderr.Write(out.Bytes())
	return &shownError{err}
}

// shownError is a usage error whose message package flag has printed already.
type shownError struct{ err error }

func (e *shownError) Error() string   { return e.err.Error() }
func (e *shownError) Unwrap() []error { return []error{errUsage, e.err} }

// showBuiltInDefault makes -h show def as the flag's default, not the value its
// environment variable gave it: a variable may hold a secret (a token, a key, a DSN's
// password), which the help must not print. The variable is named in the help instead.
func showBuiltInDefault(fs *flag.FlagSet, name, def string) {
	fs.Lookup(name).DefValue = def
}

// noArgs refuses the arguments left after fs's flags (a usage error).
func noArgs(fs *flag.FlagSet, stderr io.Writer) error {
	if fs.NArg() == 0 {
		return nil
	}
	fs.SetOutput(stderr)
	fs.Usage()
	return usageErrorf("%s: unexpected arguments %v", strings.TrimPrefix(fs.Name(), "orderpay "), fs.Args())
}

// commands are the top-level commands, in the order the usage lists them.
var commands = []struct{ name, what string }{
	{"serve", "run the API (defaults: ./data, SQLite, embedded NATS, built-in channel simulator)"},
	{"sim", "run the Alipay and WeChat Pay simulator alone, as a sandbox (with fault injection)"},
	{"channels", "check the merchant accounts of a channels file with one harmless signed call each"},
	{"operators", "add NAME ROLE: make an operator's token and print the lines for --operators-file"},
	{"reconcile", "reconcile one channel's T+1 bill of a day against the database, repairing lost orders"},
	{"chaos", "many buyers, channel faults and kill -9 crashes against a real server, then audit I1–I10"},
	{"explore", "run every pair of money operations interleaved at every step, and audit each case"},
	{"bench", "measure create + pay + notify end to end, fault-free: orders/s, latency, CPU per order"},
	{"version", "print the release and the revision this binary was built from"},
	{"help", "print this list"},
}

// isCommand says whether name is one of the commands.
func isCommand(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return true
		}
	}
	return false
}

// usage is the list of commands, aligned.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: orderpay <command> [flags]\n\ncommands:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.what)
	}
	tw.Flush()
	b.WriteString("\nRun \"orderpay <command> -h\" for the flags of a command. Exit status: 0 done, 1 failed,\n2 a command line that could not be understood.\n")
	return b.String()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return errUsage
	}
	switch args[0] {
	case "serve":
		m := NewMain()
		m.Stdout, m.Stderr = stdout, stderr
		if err := m.ParseFlags(args[1:]); err != nil {
			return err
		}
		if err := m.Run(ctx); err != nil {
			m.Close()
			return err
		}
		<-ctx.Done()
		fmt.Fprintln(stdout, "orderpay: shutting down")
		return m.Close()
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "chaos":
		return runChaos(ctx, args[1:], stdout, stderr)
	case "sim":
		return runSim(ctx, args[1:], stdout, stderr)
	case "explore":
		return runExplore(ctx, args[1:], stdout, stderr)
	case "reconcile":
		return runReconcile(ctx, args[1:], stdout, stderr)
	case "channels":
		return runChannels(ctx, args[1:], stdout, stderr)
	case "operators":
		return runOperators(args[1:], stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		switch {
		case len(args) == 1:
		case len(args) == 2 && isCommand(args[1]) && args[1] != "help": // orderpay help serve: the command's own usage
			return run(ctx, []string{args[1], "-h"}, stdout, stderr)
		case len(args) == 2 && (args[1] == "-h" || args[1] == "--help" || args[1] == "help"):
		default:
			fmt.Fprintf(stderr, "orderpay: help takes one command, not %q\n\n%s", args[1:], usage())
			return errUsage
		}
		fmt.Fprint(stdout, usage())
		return nil
	default:
		fmt.Fprintf(stderr, "orderpay: unknown command %q\n\n%s", args[0], usage())
		return errUsage
	}
}

// runVersion is `orderpay version`: the release, and the revision the binary was built
// from when Go stamped it (vcs.revision, vcs.time, vcs.modified; README.md says when it
// does).
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderpay version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: orderpay version\n\nPrints the release, the revision this binary was built from and its Go version.\n")
	}
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	writeVersion(stdout, orderpay.Build())
	return nil
}

// writeVersion prints b, one fact a line.
func writeVersion(w io.Writer, b orderpay.BuildInfo) {
	fmt.Fprintf(w, "orderpay %s\n", b.Version)
	if b.Revision == "" {
		fmt.Fprintln(w, "revision: unknown (built without version control information)")
	} else {
		rev := b.Revision
		if b.Modified {
			rev += " (modified: built with uncommitted changes)"
		}
		fmt.Fprintf(w, "revision: %s\n", rev)
		if b.Time != "" {
			fmt.Fprintf(w, "committed: %s\n", b.Time)
		}
	}
	fmt.Fprintf(w, "go: %s\n", cmp.Or(b.GoVersion, "unknown"))
}

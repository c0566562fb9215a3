// Command orderpay runs the order-and-payment core.
//
//	orderpay serve   the API, with SQLite, embedded NATS and the channel simulator by default
//	orderpay bench   a fault-free end-to-end throughput and latency run
//	orderpay chaos   buyers, channel faults and kill -9 against a server, then an audit of I1–I8
//	orderpay sim     the channel simulator alone, as a sandbox for other projects
//	orderpay channels check   one harmless signed call per merchant account of a channels file
//	orderpay operators add    a new operator's token and the lines of the operators file
//	orderpay version          the release and the revision it was built from
package main

import (
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

// exitCode prints err once, prefixed "orderpay:", and returns the process's exit status:
// 0 for none or a help request (-h, --help), 2 for a command line that could not be
// understood, the status an exitError carries, else 1.
func exitCode(err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &ee):
		fmt.Fprintln(stderr, "orderpay:", strings.TrimPrefix(err.Error(), "orderpay: "))
		return ee.code
	}
	fmt.Fprintln(stderr, "orderpay:", strings.TrimPrefix(err.Error(), "orderpay: "))
	return 1
}

const usage = `usage: orderpay <command> [flags]

commands:
  serve   run the API (defaults: ./data, SQLite, embedded NATS, built-in channel simulator)
  bench   measure create + pay + notify end to end, fault-free: orders/s, latency, CPU per order
  chaos   many buyers, channel faults and kill -9 crashes against a real server, then audit I1–I8
  reconcile  reconcile one channel's T+1 bill of a day against the database, repairing lost orders
  channels   check the merchant accounts of a channels file with one harmless signed call each
  operators  add NAME ROLE: make an operator's token and print the lines for --operators-file
  version    print the release and the revision this binary was built from
  sim     run the Alipay and WeChat Pay simulator alone, as a sandbox (with fault injection)
  explore run every pair of money operations interleaved at every step, and audit each case

Run "orderpay <command> -h" for the flags of a command.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
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
		b := orderpay.Build()
		fmt.Fprintf(stdout, "orderpay %s %s\n", b, b.GoVersion)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "orderpay: unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

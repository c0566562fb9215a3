// Command orderpay runs the order-and-payment core.
//
//	orderpay serve   the API, with SQLite, embedded NATS and the channel simulator by default
//	orderpay bench   a fault-free end-to-end throughput and latency run
//	orderpay chaos   buyers, channel faults and kill -9 against a server, then an audit of I1–I8
//	orderpay sim     the channel simulator alone, as a sandbox for other projects
//	orderpay channels check   one harmless signed call per merchant account of a channels file
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "orderpay:", err)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

const usage = `usage: orderpay <command> [flags]

commands:
  serve   run the API (defaults: ./data, SQLite, embedded NATS, built-in channel simulator)
  bench   measure create + pay + notify end to end, fault-free: orders/s, latency, CPU per order
  chaos   many buyers, channel faults and kill -9 crashes against a real server, then audit I1–I8
  reconcile  reconcile one channel's T+1 bill of a day against the database, repairing lost orders
  channels   check the merchant accounts of a channels file with one harmless signed call each
  sim     run the Alipay and WeChat Pay simulator alone, as a sandbox (with fault injection)

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
	case "reconcile":
		return runReconcile(ctx, args[1:], stdout, stderr)
	case "channels":
		return runChannels(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "orderpay: unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

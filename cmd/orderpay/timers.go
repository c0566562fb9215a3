package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"orderpay/chaos"
	"orderpay/natsbus"
)

// runBenchTimers is `orderpay bench timers`: a million broker timers (deadlines and active
// queries) on an embedded JetStream in this process, reporting how late they fire, whether
// each fires exactly once, and the process's peak RSS. The work is in chaos.TimerBench.
func runBenchTimers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := chaos.TimerBenchConfig{Progress: stderr}
	var asJSON bool
	fs := flag.NewFlagSet("orderpay bench timers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Timers, "timers", chaos.DefaultTimerBenchTimers, "timers to set, half deadlines, half queries")
	fs.DurationVar(&cfg.Window, "window", chaos.DefaultTimerBenchWindow, "the due times are spread evenly over this")
	fs.DurationVar(&cfg.Lead, "lead", chaos.DefaultTimerBenchLead, "from the start of the set phase to the first due time; must exceed the set phase")
	fs.IntVar(&cfg.SetConcurrency, "set-concurrency", chaos.DefaultTimerBenchSetConcurrency, "SetTimer calls in flight")
	fs.IntVar(&cfg.Workers, "workers", chaos.DefaultTimerBenchWorkers, "handler goroutines per consumer (deadlines, queries)")
	fs.DurationVar(&cfg.HandlerTime, "handler-time", 0, "how long each handler call takes (a sleep)")
	fs.DurationVar(&cfg.Drain, "drain", chaos.DefaultTimerBenchDrain, "how long after the last due time to wait for the rest")
	fs.StringVar(&cfg.StoreDir, "store", "", "JetStream store directory (default: a temp dir, removed afterwards)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "orders the due times")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	fs.DurationVar(&cfg.Horizon, "horizon", natsbus.DefaultTimerHorizon, "a timer due further ahead waits in the process until it is this close, as in serve; negative: every timer on the broker at once")
	memLimit := fs.String("memory-limit", "none", "the Go runtime's soft memory limit for the run (as GOMEMLIMIT: 900MiB, 1GiB; none keeps the process's own)")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address during the run (e.g. 127.0.0.1:6060)")
	floor := fs.String("gc-floor", fmt.Sprintf("%dMiB", defaultGCFloor>>20), "the GC floor of the run, as serve's --gc-floor (its default), since this process stands for serve; 0: none")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	limit, err := parseBytes(*memLimit)
	if err != nil {
		return fmt.Errorf("bench timers: --memory-limit: %w", err)
	}
	cfg.MemoryLimit = limit
	gcFloorBytes, err := parseGCFloor(*floor)
	if err != nil {
		return fmt.Errorf("bench timers: --gc-floor: %w", err)
	}
	setGCFloor(gcFloorBytes)
	defer setGCFloor(0)
	fmt.Fprintf(stderr, "GC floor %d MiB, as serve's --gc-floor\n", gcFloorBytes>>20)
	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		srv := &http.Server{Handler: mux}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(stderr, "pprof on http://%s/debug/pprof/\n", ln.Addr())
	}
	rep, err := chaos.TimerBench(ctx, cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, asJSON, rep, chaos.PrintTimerBench)
}

// parseBytes reads a size as GOMEMLIMIT writes it: a number of bytes with an optional B,
// KiB, MiB or GiB suffix; "none" and "0" are 0.
func parseBytes(s string) (int64, error) {
	if s == "none" {
		return 0, nil
	}
	num, unit := s, int64(1)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is not a size such as 800MiB or 1GiB", s)
	}
	return n * unit, nil
}

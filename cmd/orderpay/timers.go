package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"orderpay/chaos"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench timers: unexpected arguments %v", fs.Args())
	}
	rep, err := chaos.TimerBench(ctx, cfg)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	chaos.PrintTimerBench(stdout, rep)
	return nil
}

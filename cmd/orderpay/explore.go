package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"orderpay/explore"
)

// runExplore is `orderpay explore`: the interleaving explorer (docs/explorer.md).
func runExplore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderpay explore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		engine   = fs.String("engine", "sqlite", "sqlite or postgres")
		db       = fs.String("db", os.Getenv("ORDERPAY_EXPLORE_PG"), "postgres: a DSN of a server the explorer may make and drop databases on (env ORDERPAY_EXPLORE_PG)")
		caseName = fs.String("case", "", `replay one case and print its trace, e.g. "channel-paid/base: cancel@3 | notify"`)
		opsFlag  = fs.String("ops", "", "only the pairs of these operations (comma-separated; default every one)")
		scenes   = fs.String("scenes", "", "only these scenes (comma-separated; default every one)")
		profiles = fs.String("profiles", "", "only these profiles (comma-separated; default every one: "+profileNames()+")")
		depth    = fs.Int("depth", 1, "1: A to each of its steps, then B to its end; 2: also B to each of its steps, then A, then B")
		workers  = fs.Int("workers", 0, "cases run at once, a case waiting as much as it computes (default: twice the CPUs Go may use)")
		dir      = fs.String("dir", "", "directory for the SQLite databases (default: a temporary one)")
		list     = fs.Bool("list", false, "list the operations, scenes and profiles, and stop")
		quiet    = fs.Bool("quiet", false, "no progress line")
	)
	showBuiltInDefault(fs, "db", "")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	if *list {
		fmt.Fprintln(stdout, "scenes:", strings.Join(explore.Scenes, " "))
		fmt.Fprintln(stdout, "profiles:", profileNames())
		for _, op := range explore.Catalogue {
			fmt.Fprintf(stdout, "  %-20s %s\n", op.Name, strings.Join(op.Scenes, " "))
		}
		fmt.Fprintf(stdout, "  %-20s (as B) A's process dies at its step; every instance restarts\n", "crash")
		return nil
	}
	if *engine != "sqlite" && *engine != "postgres" {
		return usageErrorf("explore: --engine must be sqlite or postgres")
	}
	if *engine == "postgres" && *db == "" {
		return usageErrorf("explore: --engine postgres needs --db (or ORDERPAY_EXPLORE_PG): a server the explorer may make databases on")
	}
	if *depth < 1 || *depth > 2 {
		return usageErrorf("explore: --depth must be 1 or 2")
	}
	if *workers <= 0 {
		*workers = 2 * runtime.GOMAXPROCS(0)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "orderpay-explore-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	start := time.Now()
	e := &explore.Explorer{Engine: *engine, Dir: *dir, PG: *db}
	if !*quiet {
		e.Progress = func(done, total int) {
			if done%100 == 0 || done == total {
				fmt.Fprintf(stderr, "  %d/%d cases, %s\n", done, total, time.Since(start).Round(time.Second))
			}
		}
	}
	defer e.Close()
	replay := func(c explore.Case) string {
		cmd := fmt.Sprintf("orderpay explore --engine %s --case '%s'", *engine, c.Name())
		if *engine == "postgres" {
			cmd += " --db '" + *db + "'"
		}
		return cmd
	}
	if *caseName != "" {
		c, err := explore.ParseCase(*caseName)
		if err != nil {
			return err
		}
		r := e.Run(ctx, c)
		fmt.Fprint(stdout, r.Trace)
		if r.Skipped {
			return &exitError{code: 1, err: fmt.Errorf("no such case: %s ends before that step", c.A.Name)}
		}
		if r.Failed() {
			return &exitError{code: 1, err: fmt.Errorf("case failed: %s", strings.Join(r.Failures, "; "))}
		}
		return nil
	}
	var ps []explore.Profile
	for _, p := range explore.Profiles {
		if *profiles == "" || contains(strings.Split(*profiles, ","), p.Name) {
			ps = append(ps, p)
		}
	}
	var ops []string
	if *opsFlag != "" {
		ops = strings.Split(*opsFlag, ",")
		for _, name := range ops {
			if _, err := explore.OpNamed(name); err != nil {
				return err
			}
		}
	}
	sc := explore.Scenes
	if *scenes != "" {
		sc = strings.Split(*scenes, ",")
		for _, s := range sc {
			if !contains(explore.Scenes, s) {
				return fmt.Errorf("no scene %q (see orderpay explore --list)", s)
			}
		}
	}
	cases, err := e.CasesIn(ctx, ps, sc, ops, *depth)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "%d cases (%s, depth %d), %d at once\n", len(cases), *engine, *depth, *workers)
	}
	results := e.RunAll(ctx, cases, *workers, stdout, replay)
	ran, failed, skipped := explore.Summary(results)
	if !*quiet {
		fmt.Fprintf(stderr, "%d listed, %d ran to no step of that number, in %s\n", len(cases), skipped, time.Since(start).Round(time.Second))
	}
	fmt.Fprintf(stdout, "%d cases, %d failed\n", ran, failed)
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d cases failed", failed, ran)}
	}
	return nil
}

func profileNames() string {
	var names []string
	for _, p := range explore.Profiles {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

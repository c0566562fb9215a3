package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"orderpay/natsbus"
)

// BusConfig shapes orderpay's streams on NATS (the --nats-* flags): their replicas and how
// much they keep. Its defaults are natsbus's, documented on natsbus.Config.
type BusConfig struct {
	// Replicas of every stream and consumer; 0 detects them at connect.
	Replicas int
	// MaxAge and MaxBytes bound the event stream, TimerMaxAge and TimerMaxBytes the timer
	// stream; negative is unlimited.
	MaxAge        time.Duration
	MaxBytes      int64
	TimerMaxAge   time.Duration
	TimerMaxBytes int64
}

// defaultBusConfig shows natsbus's defaults in the flags' help.
func defaultBusConfig() BusConfig {
	return BusConfig{MaxAge: natsbus.DefaultMaxAge, MaxBytes: natsbus.DefaultMaxBytes,
		TimerMaxAge: natsbus.DefaultTimerMaxAge, TimerMaxBytes: natsbus.DefaultTimerMaxBytes}
}

// busFlags reads the --nats-* environment variables into c and defines the flags.
func busFlags(fs *flag.FlagSet, c *BusConfig) error {
	env := envName("nats-replicas")
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %w", env, err)
		}
		c.Replicas = n
	}
	fs.IntVar(&c.Replicas, "nats-replicas", c.Replicas, "replicas of every stream and consumer; 0 detects them at connect: 3 on a cluster of three or more nodes, "+
		"the cluster's size on a smaller one, 1 on a single server or the embedded one. orderpay never lowers replicas or limits an operator raised ["+env+"]")
	for _, f := range []struct {
		value      flag.Value
		name, help string
	}{
		{ageLimit{&c.MaxAge}, "nats-max-age", "keep events on the bus this long (a duration, or unlimited)"},
		{sizeLimit{&c.MaxBytes}, "nats-max-bytes", "keep at most this much of the events per replica (e.g. 1GiB, or unlimited); the oldest go first"},
		{ageLimit{&c.TimerMaxAge}, "nats-timers-max-age", "drop a timer nobody handled after this long (a duration, or unlimited); the sweepers catch it"},
		{sizeLimit{&c.TimerMaxBytes}, "nats-timers-max-bytes", "keep at most this much of the timers per replica (e.g. 1GiB, or unlimited)"},
	} {
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.value.Set(v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
		fs.Var(f.value, f.name, f.help+" ["+env+"]")
	}
	return nil
}

// natsConfig is the bus of `serve`: an external server at url, or the embedded one under
// dataDir.
func (c BusConfig) natsConfig(url, storeDir string, log *slog.Logger) natsbus.Config {
	return natsbus.Config{URL: url, StoreDir: storeDir, Replicas: c.Replicas, MaxAge: c.MaxAge, MaxBytes: c.MaxBytes,
		TimerMaxAge: c.TimerMaxAge, TimerMaxBytes: c.TimerMaxBytes, Logger: log}
}

// ageLimit is a retention age flag: a positive duration, or "unlimited" (stored as -1).
type ageLimit struct{ d *time.Duration }

func (a ageLimit) String() string {
	switch {
	case a.d == nil:
		return ""
	case *a.d < 0:
		return "unlimited"
	}
	return a.d.String()
}

func (a ageLimit) Set(v string) error {
	if v == "unlimited" {
		*a.d = -1
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a positive duration or unlimited", v)
	}
	*a.d = d
	return nil
}

// sizeLimit is a retention size flag: a positive size as GOMEMLIMIT writes it (1GiB), or
// "unlimited" (stored as -1).
type sizeLimit struct{ n *int64 }

func (s sizeLimit) String() string {
	switch {
	case s.n == nil:
		return ""
	case *s.n < 0:
		return "unlimited"
	case *s.n%(1<<30) == 0:
		return strconv.FormatInt(*s.n>>30, 10) + "GiB"
	case *s.n%(1<<20) == 0:
		return strconv.FormatInt(*s.n>>20, 10) + "MiB"
	}
	return strconv.FormatInt(*s.n, 10) + "B"
}

func (s sizeLimit) Set(v string) error {
	if v == "unlimited" {
		*s.n = -1
		return nil
	}
	n, err := parseBytes(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive size (such as 512MiB or 1GiB) or unlimited", v)
	}
	*s.n = n
	return nil
}

package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"orderpay/natsbus"
)

func TestParseProcStatusReadsRSSAndPeak(t *testing.T) {
	status := "Name:\torderpay\nVmPeak:\t 2482192 kB\nVmSize:\t 2482192 kB\nVmHWM:\t 1391572 kB\nVmRSS:\t  700932 kB\nThreads:\t12\n"
	m, err := ParseProcStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 700932<<10 || m.HWM != 1391572<<10 {
		t.Fatalf("got %+v", m)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t 12 MB\nVmRSS:\t 1 kB\n", "VmHWM:\t x kB\nVmRSS:\t 1 kB\n"} {
		if _, err := ParseProcStatus(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLatenessSummaryIsNearestRankAndCountsTheLate(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*20*time.Millisecond) // 20 ms … 2 s
	}
	p50, p99, maxMS, over := LatenessSummary(ds)
	if p50 != 1000 || p99 != 1980 || maxMS != 2000 || over != 50 {
		t.Fatalf("p50 %v p99 %v max %v over 1 s %d", p50, p99, maxMS, over)
	}
	if p50, p99, maxMS, over := LatenessSummary(nil); p50 != 0 || p99 != 0 || maxMS != 0 || over != 0 {
		t.Fatal("empty lateness must summarise to zeros")
	}
}

func TestTimerNamesLookLikeTheServersAndRoundTrip(t *testing.T) {
	if got := timerName(0); got != "deadline.20261100000000000000" {
		t.Errorf("timer 0 is %q", got)
	}
	if got := timerName(7); got != "query.P20261100000000000003A01" {
		t.Errorf("timer 7 is %q", got)
	}
	for _, i := range []int{0, 1, 2, 999_999, 1_000_001} {
		if j, ok := timerIndex(timerName(i)); !ok || j != i {
			t.Errorf("timer %d came back as %d, %v", i, j, ok)
		}
	}
	for _, bad := range []string{"query.P20261100000000000003", "deadline.1", "other.20261100000000000000", "query.X20261100000000000003A01"} {
		if _, ok := timerIndex(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A small run of the real thing: every timer fires once, not early, and the stream is empty
// afterwards. The drain outlasts the bus's AckWait: on a loaded machine the client can drop
// timers it was sent and could not take in time (a slow consumer), and JetStream sends
// those again once AckWait has passed (a CI run gave up after 20 s with 17 of them still
// in the stream). An idle machine is done in a few seconds: the drain ends when every
// timer has fired.
func TestTimerBenchFiresEveryTimerOnce(t *testing.T) {
	t.Parallel()
	rep, err := TimerBench(context.Background(), TimerBenchConfig{Timers: 2000, Window: 2 * time.Second, Lead: 2 * time.Second,
		Drain: natsbus.DefaultAckWait + 20*time.Second, StoreDir: t.TempDir(), Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Set != 2000 || rep.Fired != 2000 || rep.Missing != 0 || rep.Duplicates != 0 || rep.LeftInStream != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.LatenessP50 < 0 || rep.LatenessMax < rep.LatenessP99 || rep.PeakRSSBytes <= 0 && rep.MaxSampledRSS > 0 {
		t.Fatalf("report %+v", rep)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/natsbus/natstest"
	"orderpay/sqlstore/storetest"
)

// BenchmarkPayWithTheBusDown measures the buyer's pay call (POST /v1/orders/{no}/pay, which
// asks the channel simulator for a code and schedules the payment's queries) on an instance
// given a three-node NATS cluster (nodes in child processes): with the bus up, with the
// cluster's quorum lost (two nodes killed: the last one takes connections and answers
// nothing), and with every node killed. It reports each phase's p50 and p99 and the ratio
// of its p99 to the bus-up p99. The calls run one at a time, b.N per phase, on SQLite, or
// on ORDERPAY_TEST_PG when set:
//
//	go test -run '^$' -bench BenchmarkPayWithTheBusDown -benchtime 400x ./cmd/orderpay/
func BenchmarkPayWithTheBusDown(b *testing.B) {
	db := ""
	if os.Getenv("ORDERPAY_TEST_PG") != "" {
		db = storetest.PostgresDSN(b)
	}
	cl := natstest.StartCluster(b, 3, natstest.Processes())
	m, c := startMain(b, db, func(m *Main) { m.Config.NATS = cl.URLs() })
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for m.Bus.Ready() != nil {
		if time.Now().After(deadline) {
			b.Fatalf("bus not ready: %v", m.Bus.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.createSKU(ctx, "bench-pay", 100, int64(3*b.N+10), "normal"); err != nil {
		b.Fatal(err)
	}
	store := "SQLite"
	if db != "" {
		store = "PostgreSQL"
	}

	type result struct {
		phase    string
		p50, p99 time.Duration
	}
	var results []result
	for _, phase := range []struct {
		name  string
		enter func()
	}{
		{"up", func() {}},
		{"no-quorum", func() { cl.Kill(1); cl.Kill(2) }},
		{"down", func() { cl.Kill(0) }},
	} {
		phase.enter()
		orders := createOrders(ctx, b, c, phase.name, b.N)
		lat := make([]time.Duration, 0, len(orders))
		for i, no := range orders {
			ch := []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}[i%2]
			start := time.Now()
			if _, err := c.pay(ctx, no, ch); err != nil {
				b.Fatalf("bus %s: pay %s: %v", phase.name, no, err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		r := result{phase.name, percentile(lat, 0.50), percentile(lat, 0.99)}
		results = append(results, r)
		b.ReportMetric(ms(r.p50), "p50-"+r.phase+"-ms")
		b.ReportMetric(ms(r.p99), "p99-"+r.phase+"-ms")
	}
	up := results[0].p99
	for _, r := range results {
		ratio := float64(r.p99) / float64(up)
		if r.phase != "up" {
			b.ReportMetric(ratio, "p99-"+r.phase+"/up")
		}
		b.Logf("%s, %d pay calls, bus %-9s p50 %7.2f ms  p99 %7.2f ms  p99/p99(up) %.2f", store, b.N, r.phase, ms(r.p50), ms(r.p99), ratio)
	}
	b.Logf("query timers waiting in the queue for the bus: %d", m.Bus.Timers().Len())
}

// createOrders creates n orders of bench-pay, four at a time, each by its own buyer (a
// buyer's second order of the same items would be the first one again: anti-abuse).
func createOrders(ctx context.Context, b *testing.B, c *apiClient, phase string, n int) []string {
	b.Helper()
	out := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	slots := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			o, err := c.createOrder(ctx, fmt.Sprintf("bench-%s-%d", phase, i), "bench-pay", 1)
			if err != nil {
				errs <- err
				return
			}
			out[i] = o.OrderNo
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return out
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package alipay_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
)

// Gateway calls made at once keep their connections for the next ones: rounds of 16
// concurrent calls never open more than 16 connections in all. (Go's default transport
// keeps 2 idle per host, and would dial again, over TLS in production, for most calls of
// every round.)
func TestConcurrentCallsKeepTheirConnections(t *testing.T) {
	e := setup(t)
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(e.sim.Handler())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	ch := newChannel(t, e.keys, srv.URL+"/gateway.do", func(c *alipay.Config) { c.Clock = e.clock })
	const calls = 16
	round := func(r int) {
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				no := fmt.Sprintf("P2025031410000000%d%02d", r, i)
				res := ch.Precreate(context.Background(), orderpay.PrecreateRequest{OutTradeNo: no, Amount: 100,
					Subject: "订单 " + no, Deadline: e.clock.Now().Add(time.Hour), NotifyURL: "https://shop.example/notify"})
				if res.Outcome != orderpay.OutcomeAccepted {
					t.Errorf("precreate %s: %+v", no, res)
				}
			})
		}
		wg.Wait()
	}
	const rounds = 4
	for r := range rounds {
		round(r)
	}
	if n := opened.Load(); n > calls {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections", rounds, calls, n)
	}
}

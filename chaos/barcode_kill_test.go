package chaos

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore/storetest"
)

// A till's barcode payment whose server is killed (kill -9) in the middle of its loop, on
// both engines: the attempt was written before the channel heard of it, so the restarted
// server's safety net finds it and ends it: a WeChat buyer who confirms 8 s after the scan
// is paid and recorded (the till's retry, under the same Idempotency-Key, is told PAID);
// an Alipay buyer who walked away has the trade cancelled at the channel (the till is told
// CANCELLED) and nothing held. Each code is used once: no second charge.
func TestBarcodeKilledMidLoopIsEndedByTheSafetyNet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the server twice per engine and waits out a till's wait")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		killedMidLoop(t, "")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		killedMidLoop(t, storetest.PostgresDSN(t))
	})
}

func killedMidLoop(t *testing.T, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	ec := envConfig{Binary: serverBinary(t), DataDir: dir, Prefix: "orderpay-barcode-kill-", TimeScale: 1, LogLevel: "info",
		ServerArgs: []string{"--pos-wait", "20s"}}
	ec.DB = db
	e, err := startEnv(ctx, ec)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	defer func() {
		if t.Failed() {
			t.Logf("the server's errors (serve.log):\n%s", serverErrors(filepath.Join(dir, "serve.log")))
		}
	}()
	till, err := e.client.CreateApp(ctx, "counter", nil, []string{"alipay", "wechat"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		channel, behaviour string
		after              time.Duration
		want               string
	}{
		{orderpay.ChannelWechat, sim.CodePassword, 8 * time.Second, "PAID"},
		{orderpay.ChannelAlipay, sim.CodeNever, 0, "CANCELLED"},
	}
	codes := make([]string, len(cases))
	for i, tc := range cases {
		c, err := e.sim.IssueCode(tc.channel, "walk-in", tc.behaviour, tc.after)
		if err != nil {
			t.Fatal(err)
		}
		codes[i] = c.AuthCode
	}
	// The tills scan; their requests die with the server.
	var wg sync.WaitGroup
	first := make([]error, len(cases))
	for i := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, first[i] = e.client.PosPay(ctx, till.APIKey, "sale-"+cases[i].channel, PosRequest{AuthCode: codes[i], Amount: 1290, TillID: "t1"})
		}()
	}
	// Kill once both trades exist at the channel: the loops are waiting for their buyers.
	for {
		made := 0
		for _, code := range codes {
			if c, err := e.sim.Code(code); err == nil && c.OutTradeNo != "" {
				made++
			}
		}
		if made == len(codes) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the payment calls never reached the channel")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := e.server.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range first {
		var apiErr *APIError
		if err == nil || errors.As(err, &apiErr) {
			t.Fatalf("%s: the request the kill cut answered %v", cases[i].channel, err)
		}
	}
	// The tills try again with the same keys: the same payments, ended by the safety net.
	e.client.RetryFor = 15 * time.Second
	for i, tc := range cases {
		v, err := e.client.PosPay(ctx, till.APIKey, "sale-"+tc.channel, PosRequest{AuthCode: codes[i], Amount: 1290, TillID: "t1"})
		if err != nil {
			t.Fatalf("%s: the till's retry: %v", tc.channel, err)
		}
		replayed := v.Replayed
		if v.Status == "UNKNOWN" {
			v, err = e.client.WaitPos(ctx, till.APIKey, v.No, 250*time.Millisecond)
		}
		if err != nil || v.Status != tc.want || !replayed {
			t.Fatalf("%s after kill -9: %+v, %v; want %s, replayed", tc.channel, v, err, tc.want)
		}
		c, err := e.sim.Code(codes[i])
		if err != nil {
			t.Fatal(err)
		}
		if c.OutTradeNo != v.No {
			t.Fatalf("%s: the code paid trade %s, the till was told of %s", tc.channel, c.OutTradeNo, v.No)
		}
		var trades int
		for _, l := range e.sim.Ledger() {
			if l.Channel != tc.channel || l.Method != orderpay.MethodBarcode {
				continue
			}
			trades++
			held := l.Amount - l.Refunded
			if l.PaidAt.IsZero() {
				held = 0
			}
			if (tc.want == "PAID") != (held == 1290) || (tc.want == "CANCELLED" && held != 0) {
				t.Fatalf("%s: the trade at the channel is %s, paid at %v, %d fen held; the till was told %s", tc.channel, l.Status, l.PaidAt, held, v.Status)
			}
		}
		if trades != 1 {
			t.Fatalf("%s: %d barcode trades at the channel, want 1", tc.channel, trades)
		}
	}
}

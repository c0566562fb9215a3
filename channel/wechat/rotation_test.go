package wechat_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// A platform certificate rotated in the middle of a run: trades are being paid, queried and
// notified when a new certificate appears, and for the overlap WeChat signs with old and
// new mixed, then with the new one alone. The adapter, with its default refresh settings,
// verifies every genuine answer (no trade is left Unknown) and accepts every genuine
// notification on its first attempt, while forged copies of notifications and a forged
// answer are still refused.
func TestCertificateMode_RotationMidRunLosesNoNotificationAndRefusesNoGenuineAnswer(t *testing.T) {
	t.Parallel()
	e := certSetup(t, func(c *sim.Config) {
		c.WechatCertOverlap = time.Hour
		c.Faults = sim.FaultPlan{Seed: 11, Rules: []sim.FaultRule{
			{Channel: "wechat", Method: sim.MethodNotify, Kind: sim.FaultForgeSignature, Probability: 0.3},
		}}
	})
	m := newMerchant(t, e.ch)
	ctx := context.Background()
	oldSerial := e.keys.Wechat.PlatformSerial

	var (
		mu       sync.Mutex
		failures []string
		newestMu sync.Mutex
		newest   string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// trade places, pays and queries one trade through the adapter.
	trade := func(no string, amount int64) {
		pre := e.ch.Precreate(ctx, orderpay.PrecreateRequest{OutTradeNo: no, Amount: amount, Subject: "订单 " + no,
			Deadline: e.clock.Now().Add(time.Hour), NotifyURL: m.srv.URL + "/notify/wechat"})
		if pre.Outcome != orderpay.OutcomeAccepted {
			fail("precreate %s: %s %s", no, pre.Outcome, pre.Detail)
			return
		}
		if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
			fail("query %s before paying: %s %s", no, q.Outcome, q.Detail)
		}
		if _, err := e.sim.Pay(ctx, pre.QRCode); err != nil {
			fail("pay %s: %v", no, err)
			return
		}
		for range 2 {
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid {
				fail("query %s after paying: %s %s", no, q.Outcome, q.Detail)
			}
		}
	}
	// run runs n trades, 8 at a time; after the first `rotateAfter` of them finish, the
	// certificate rotates while the rest are under way.
	run := func(prefix string, n, rotateAfter int) {
		var wg sync.WaitGroup
		slots := make(chan struct{}, 8)
		var done sync.WaitGroup
		done.Add(min(rotateAfter, n))
		for i := range n {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				trade(fmt.Sprintf("%s_%03d_%d", prefix, i, time.Now().UnixNano()%1e6), 1000+int64(i))
				if i < rotateAfter {
					done.Done()
				}
			})
			if i == rotateAfter {
				done.Wait()
				c, err := e.sim.RotateWechatCertificate()
				if err != nil {
					t.Fatal(err)
				}
				newestMu.Lock()
				newest = c.SerialNo
				newestMu.Unlock()
			}
		}
		wg.Wait()
	}

	run("ROT", 40, 15)
	// After the overlap only the new certificate signs.
	e.clock.Advance(time.Hour)
	run("AFT", 10, 100)
	for _, f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every genuine notification was accepted on its first attempt; every forged copy was
	// refused.
	waitUntil(t, func() bool {
		stats := e.sim.NotifyStats()
		for _, st := range stats {
			if !st.Done() {
				return false
			}
		}
		return len(stats) == 50
	})
	forged := 0
	for _, st := range e.sim.NotifyStats() {
		if !st.Acked || len(st.Attempts) != 1 || !st.Attempts[0].Acked {
			t.Errorf("notification of %s: %+v, want accepted at its first attempt", st.OutTradeNo, st)
		}
		for _, b := range st.Bad {
			forged++
			if b.Acked {
				t.Errorf("a forged copy for %s was accepted", st.OutTradeNo)
			}
		}
	}
	if forged == 0 {
		t.Fatal("test bug: no forged copy was sent")
	}

	// Both certificates signed notifications during the run, and only the new one after the
	// overlap.
	got, _, errs := m.wait(t, 50+forged)
	bySerial := map[string]int{}
	for i, d := range got {
		if errs[i] == nil {
			bySerial[d.header.Get("Wechatpay-Serial")]++
		}
	}
	if bySerial[oldSerial] == 0 || bySerial[newest] == 0 || len(bySerial) != 2 {
		t.Fatalf("accepted notifications by serial %v, want both %s and %s", bySerial, oldSerial, newest)
	}
	// The adapter learned the new certificate, the newest it knows, with few downloads.
	if d := e.ch.Describe(); !strings.HasPrefix(d["platform_certificate_serials"], newest+",") {
		t.Fatalf("after the rotation the adapter knows %q, want %s first", d["platform_certificate_serials"], newest)
	}
	if n := downloads(t, e.ch); n > 4 {
		t.Fatalf("%d certificate downloads for one rotation", n)
	}

	// A forged answer under the new certificate's serial is refused as ever.
	if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodQuery, Kind: sim.FaultBadSignature, Applied: true, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	no := e.paid(t, 500)
	if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("a forged answer after the rotation: %s %s, want Unknown", q.Outcome, q.Detail)
	}
}

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
// notified when a new certificate appears; WeChat lists it at once but signs with the old
// one alone for five days (sim.WechatCertLead), then with old and new mixed for the overlap,
// then with the new one alone. The adapter, with its default refresh settings,
// verifies every genuine answer (no trade is left Unknown) and accepts every genuine
// notification on its first attempt, while forged copies of notifications and a forged
// answer are still refused. The same holds for an immediate rotation (not WeChat's way: the
// new certificate signs at once, before the adapter could have downloaded it), which the
// adapter learns from the first answer that names it.
func TestCertificateMode_RotationMidRunLosesNoNotificationAndRefusesNoGenuineAnswer(t *testing.T) {
	t.Parallel()
	for _, immediate := range []bool{false, true} {
		t.Run(map[bool]string{false: "as_wechat_rotates", true: "immediate"}[immediate], func(t *testing.T) {
			t.Parallel()
			testRotationMidRun(t, immediate)
		})
	}
}

func testRotationMidRun(t *testing.T, immediate bool) {
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
				rotate := e.sim.RotateWechatCertificate
				if immediate {
					rotate = e.sim.RotateWechatCertificateImmediately
				}
				c, err := rotate()
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

	// sent waits until the first n notifications have been delivered: one is signed when
	// it is sent, so the clock moves on only after a run's are out.
	sent := func(n int) {
		waitUntil(t, func() bool {
			stats := e.sim.NotifyStats()
			for _, st := range stats {
				if !st.Done() {
					return false
				}
			}
			return len(stats) >= n
		})
	}
	run("ROT", 40, 15)
	sent(40)
	// After the lead both sign, mixed; after the overlap only the new certificate signs.
	if !immediate {
		e.clock.Advance(sim.WechatCertLead)
	}
	run("MIX", 20, 100)
	sent(60)
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
		return len(stats) == 70
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

	// The old certificate alone signed the notifications of the run the rotation came in
	// (the lead), both those of the overlap, and the new one alone those after it.
	got, ns, errs := m.wait(t, 70+forged)
	bySerial := map[string]map[string]int{"ROT": {}, "MIX": {}, "AFT": {}}
	for i, d := range got {
		if errs[i] == nil {
			bySerial[ns[i].OutTradeNo[:3]][d.header.Get("Wechatpay-Serial")]++
		}
	}
	switch rot := bySerial["ROT"]; {
	case !immediate && (rot[oldSerial] != 40 || len(rot) != 1):
		t.Fatalf("accepted notifications during the lead by serial %v, want %s alone", rot, oldSerial)
	case immediate && (rot[oldSerial] == 0 || rot[newest] == 0 || len(rot) != 2):
		t.Fatalf("accepted notifications of the run an immediate rotation came in, by serial %v, want both %s and %s", rot, oldSerial, newest)
	}
	if mix := bySerial["MIX"]; mix[oldSerial] == 0 || mix[newest] == 0 || len(mix) != 2 {
		t.Fatalf("accepted notifications during the overlap by serial %v, want both %s and %s", mix, oldSerial, newest)
	}
	if aft := bySerial["AFT"]; aft[newest] != 10 || len(aft) != 1 {
		t.Fatalf("accepted notifications after the overlap by serial %v, want %s alone", aft, newest)
	}
	// The adapter learned the new certificate, the newest it knows, with few downloads.
	if serials, _ := certs(e.ch.Describe()); !strings.HasPrefix(serials, newest+",") {
		t.Fatalf("after the rotation the adapter knows %q, want %s first", serials, newest)
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

package sim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// fastTime makes Alipay's schedule (4m, 10m, 10m, 1h, …) pass in milliseconds.
const fastTime = 1e6

func TestNotify_RetriedUntilReplyIsExactlySuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: fastTime})
	recv := newNotifyReceiver(t,
		reply{http.StatusOK, "success\n"},                // not exact: trailing newline
		reply{http.StatusOK, "ok"},                       // not the ack word
		reply{http.StatusInternalServerError, "success"}, // right word, wrong status
		reply{http.StatusOK, "success"},
	)
	qr := b.precreate(t, "N_1", "12.34", b.clock.Now().Add(time.Hour), recv.srv.URL+"/notify/alipay")
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}

	st := waitNotify(t, b.sim, "N_1")
	if !st.Acked || st.GaveUp || len(st.Attempts) != 4 {
		t.Fatalf("stats %+v, want acked on the 4th attempt", st)
	}
	if !st.Attempts[3].Acked || st.Attempts[0].Acked || st.Attempts[0].Body != "success\n" || st.Attempts[2].Status != 500 {
		t.Errorf("attempts %+v", st.Attempts)
	}
	bodies := recv.received()
	if len(bodies) != 4 {
		t.Fatalf("receiver saw %d attempts, want 4", len(bodies))
	}
	// Every attempt is a complete, verifiable notification with the same notify_id.
	for i, body := range bodies {
		v, err := url.ParseQuery(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.client.VerifySign(context.Background(), v); err != nil {
			t.Errorf("attempt %d does not verify with the SDK: %v", i, err)
		}
		if v.Get("notify_id") != st.NotifyID || v.Get("notify_id") == "" {
			t.Errorf("attempt %d notify_id %q, want %q", i, v.Get("notify_id"), st.NotifyID)
		}
		for key, want := range map[string]string{
			"notify_type": "trade_status_sync", "trade_status": "TRADE_SUCCESS", "out_trade_no": "N_1",
			"total_amount": "12.34", "receipt_amount": "12.34", "buyer_pay_amount": "12.34",
			"invoice_amount": "12.34", "app_id": b.keys.AppID, "seller_id": b.keys.SellerID,
			"charset": "utf-8", "version": "1.0", "sign_type": "RSA2",
		} {
			if v.Get(key) != want {
				t.Errorf("attempt %d %s = %q, want %q", i, key, v.Get(key), want)
			}
		}
		for _, key := range []string{"notify_time", "trade_no", "buyer_id", "buyer_logon_id", "subject", "gmt_create", "gmt_payment", "sign"} {
			if v.Get(key) == "" {
				t.Errorf("attempt %d lacks %s", i, key)
			}
		}
	}
	// Acknowledged: no further attempt even though the schedule has more.
	time.Sleep(20 * time.Millisecond)
	if n := len(recv.received()); n != 4 {
		t.Fatalf("receiver saw %d attempts after the ack, want 4", n)
	}
}

func TestNotify_GivesUpAfterTheSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: fastTime}) // default schedule: 8 attempts in total
	recv := newNotifyReceiver(t, reply{http.StatusOK, "fail"})
	qr := b.precreate(t, "N_2", "1.00", b.clock.Now().Add(time.Hour), recv.srv.URL)
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	st := waitNotify(t, b.sim, "N_2")
	if st.Acked || !st.GaveUp || len(st.Attempts) != 8 || len(recv.received()) != 8 {
		t.Fatalf("stats %+v (receiver saw %d), want 8 attempts then give up", st, len(recv.received()))
	}
}

func TestNotify_ScheduleIsDividedByTimeScale(t *testing.T) {
	t.Parallel()
	// One retry after a simulated minute at 60x: about one real second.
	b := setup(t, sim.Config{TimeScale: 60, AlipayNotifySchedule: []time.Duration{time.Minute}})
	recv := newNotifyReceiver(t, reply{http.StatusOK, "no"}, reply{http.StatusOK, "success"})
	qr := b.precreate(t, "N_3", "1.00", b.clock.Now().Add(time.Hour), recv.srv.URL)
	start := time.Now()
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	st := waitNotify(t, b.sim, "N_3")
	elapsed := time.Since(start)
	if !st.Acked || len(st.Attempts) != 2 {
		t.Fatalf("stats %+v", st)
	}
	if elapsed < 900*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("retry after %v, want about 1s", elapsed)
	}
}

func TestPay_ReturnsWithoutWaitingForTheNotification(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("success"))
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs before slow.Close: the handler returns

	b := setup(t, sim.Config{})
	qr := b.precreate(t, "N_4", "1.00", b.clock.Now().Add(time.Hour), slow.URL)
	done := make(chan error, 1)
	go func() {
		_, err := b.sim.Pay(context.Background(), qr)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Pay blocked on the notification")
	}
	for _, st := range b.sim.NotifyStats() {
		if st.OutTradeNo == "N_4" && st.Done() {
			t.Fatalf("notification settled while the receiver still holds it: %+v", st)
		}
	}
}

// Not parallel: it inspects every goroutine of the test binary, and parallel tests only
// start after the sequential ones have finished.
func TestClose_StopsDeliveriesWithoutLeakingGoroutines(t *testing.T) {
	b := setup(t, sim.Config{}) // real-time schedule: the first retry is 4 minutes away
	recv := newNotifyReceiver(t, reply{http.StatusServiceUnavailable, ""})
	for _, no := range []string{"C_1", "C_2"} {
		qr := b.precreate(t, no, "1.00", b.clock.Now().Add(time.Hour), recv.srv.URL)
		if _, err := b.sim.Pay(context.Background(), qr); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(recv.received()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}

	closed := make(chan struct{})
	go func() { b.sim.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return while deliveries were waiting to retry")
	}
	for _, st := range b.sim.NotifyStats() {
		if !st.Stopped || st.Acked || st.GaveUp || len(st.Attempts) != 1 {
			t.Errorf("after Close: %+v", st)
		}
	}
	// Close waited for every delivery (each settled Stopped before its Done, checked
	// above). Done is the last thing a delivery does, but its goroutine may still be on
	// its way out of the function for a moment after; one still there a second later did
	// not end.
	buf := make([]byte, 1<<20)
	for gone := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "sim.(*notifier).deliver") {
			break
		}
		if time.Now().After(gone) {
			t.Fatalf("a delivery goroutine survived Close:\n%s", stacks)
		}
	}
	b.sim.Close() // idempotent
}

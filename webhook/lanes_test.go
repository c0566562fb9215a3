package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"orderpay/clocktest"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

// slowReceiver answers only when its test lets it (release): a receiver that takes
// "long", whatever the time, with no clock to wait on.
type slowReceiver struct {
	srv      *httptest.Server
	inflight atomic.Int32
	max      atomic.Int32
	release  chan struct{}
}

func newSlowReceiver(t *testing.T) *slowReceiver {
	r := &slowReceiver{release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := r.inflight.Add(1)
		defer r.inflight.Add(-1)
		for m := r.max.Load(); n > m && !r.max.CompareAndSwap(m, n); m = r.max.Load() {
		}
		<-r.release
		w.WriteHeader(http.StatusNoContent)
	}))
	// Let the hanging handlers go before the server is closed.
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.free)
	return r
}

func (r *slowReceiver) free() {
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

// waitFor waits (in real time, generously) until ok, or fails with what.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One app's receiver hangs on each of its twenty deliveries; another app's delivery, due
// after them all, is delivered in the same run while the slow receiver still hangs, and
// the slow one holds no more than its share of the workers (PerSubscriber, 2).
func TestSlowSubscriberDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	slow := newSlowReceiver(t)
	fast := newReceiver(t, clock, http.StatusNoContent)
	store := storetest.OpenSQLite(t)
	svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, AllowNetworks: loopback, Subscribers: []webhook.Subscriber{
		{URL: slow.srv.URL + "/hooks", Secret: []byte(secret)}, {URL: fast.srv.URL + "/hooks", Secret: []byte(secret), Key: "fast"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The slow subscriber's deliveries are due first: each result goes to both, and the
	// fast one's is made later.
	for i := range 20 {
		m := paymentSucceeded("O" + string(rune('A'+i)))
		if err := svc.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan webhook.RunResult, 1)
	go func() {
		res, err := svc.RunOnce(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the fast subscriber's 20 deliveries while the slow receiver hangs", func() bool { return len(fast.received()) == 20 })
	if n := slow.inflight.Load(); n == 0 {
		t.Fatal("the slow receiver was not being posted to")
	}
	slow.free()
	res := <-done
	if slow.max.Load() > 2 {
		t.Fatalf("the slow subscriber had %d attempts in flight at once, want at most 2", slow.max.Load())
	}
	if res.Delivered != 40 {
		t.Fatalf("run %+v, want all 40 delivered once the slow receiver answered", res)
	}
}

// Dispatch does not wait for a slow receiver: a result published while the slow one still
// hangs is delivered to another subscriber by the next Dispatch, at once; the slow
// subscriber, its lane full, is not read meanwhile.
func TestDispatchDeliversOthersWhileASlowReceiverHangs(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	slow := newSlowReceiver(t)
	fast := newReceiver(t, clock, http.StatusNoContent)
	store := storetest.OpenSQLite(t)
	svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, AllowNetworks: loopback, Subscribers: []webhook.Subscriber{
		{URL: slow.srv.URL + "/hooks", Secret: []byte(secret)}, {URL: fast.srv.URL + "/hooks", Secret: []byte(secret), Key: "fast"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Handle(ctx, paymentSucceeded("O1")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow receiver's first request", func() bool { return slow.inflight.Load() == 1 })
	waitFor(t, "the fast receiver's first delivery", func() bool { return len(fast.received()) == 1 })
	if err := svc.Handle(ctx, paymentSucceeded("O2")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "O2 at the fast receiver while the slow one hangs on O1", func() bool { return len(fast.received()) == 2 })
	if slow.inflight.Load() == 0 {
		t.Fatal("the slow receiver answered before the test let it")
	}
	slow.free()
	svc.Wait()
	waitFor(t, "O2 at the slow receiver", func() bool {
		_, _ = svc.Dispatch(ctx)
		svc.Wait()
		list, _ := store.Deliveries(ctx, webhook.Filter{Status: webhook.StatusSucceeded}, 10)
		return len(list) == 4
	})
}

// A failed attempt pauses its subscriber (one second, doubling with each failure in a
// row, never beyond the schedule's first wait): its other due deliveries wait, another
// subscriber's do not, and a 2xx ends the pause.
func TestFailingSubscriberBacksOffAlone(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	down, up := newReceiver(t, clock, http.StatusServiceUnavailable), newReceiver(t, clock, http.StatusOK)
	store := storetest.OpenSQLite(t)
	svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, AllowNetworks: loopback, Workers: 1, Subscribers: []webhook.Subscriber{
		{URL: down.srv.URL + "/hooks", Secret: []byte(secret)}, {URL: up.srv.URL + "/hooks", Secret: []byte(secret), Key: "up"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range []string{"O1", "O2", "O3"} {
		if err := svc.Handle(ctx, paymentSucceeded(o)); err != nil {
			t.Fatal(err)
		}
	}
	// One attempt at the failing subscriber, then it is paused; the other gets all three.
	res, err := svc.RunOnce(ctx)
	if err != nil || len(down.received()) != 1 || len(up.received()) != 3 || res.Retrying != 1 || res.Delivered != 3 {
		t.Fatalf("run %+v, %v; down got %d, up got %d", res, err, len(down.received()), len(up.received()))
	}
	clock.Advance(999 * time.Millisecond)
	if res, _ := svc.RunOnce(ctx); len(down.received()) != 1 || res.Due != 0 {
		t.Fatalf("paused subscriber posted to within its second: %+v", res)
	}
	clock.Advance(time.Millisecond) // 1 s: O2 tried, fails: paused 2 s
	if _, err := svc.RunOnce(ctx); err != nil || len(down.received()) != 2 {
		t.Fatalf("after its pause: down got %d", len(down.received()))
	}
	clock.Advance(time.Second)
	if _, err := svc.RunOnce(ctx); err != nil || len(down.received()) != 2 {
		t.Fatalf("the second pause is not 2 s: down got %d", len(down.received()))
	}
	down.status.Store(http.StatusOK)
	clock.Advance(time.Second) // O3 delivered; the pause ends
	if _, err := svc.RunOnce(ctx); err != nil || len(down.received()) != 3 {
		t.Fatalf("down got %d", len(down.received()))
	}
	clock.Advance(15 * time.Second) // O1 and O2's retries, both at once
	if res, err := svc.RunOnce(ctx); err != nil || res.Delivered != 2 {
		t.Fatalf("after the pause ended: %+v, %v", res, err)
	}
	if all, _ := store.Deliveries(ctx, webhook.Filter{Status: webhook.StatusSucceeded}, 10); len(all) != 6 {
		t.Fatalf("succeeded %d, want 6", len(all))
	}
}

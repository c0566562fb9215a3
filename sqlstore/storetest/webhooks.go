package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/webhook"
)

// RunWebhooks runs the webhook store's conformance tests against stores made by newStore.
func RunWebhooks(t *testing.T, newStore func(t *testing.T) webhook.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s webhook.Store)
	}{
		{"DeliveryOncePerMessageAndSubscriber", testDeliveryOnce},
		{"OneWorkerClaimsADueDelivery", testDeliveryClaim},
		{"ScheduledAttemptAppliesOnceResendAlways", testDeliveryAttempts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func newDelivery(msgID, subscriber string, at time.Time) *webhook.Delivery {
	return &webhook.Delivery{MsgID: msgID, Subscriber: subscriber, Subject: orderpay.SubjectPaymentSucceeded,
		Payload: []byte(`{"id":"` + msgID + `","data":{"order_no":"O1"}}`), OrderNo: "O1", PaymentNo: "PO1",
		Status: webhook.StatusPending, NextAt: at, CreatedAt: at, UpdatedAt: at}
}

func mustCreateDelivery(t *testing.T, s webhook.Store, d *webhook.Delivery) {
	t.Helper()
	if ok, err := s.CreateDelivery(context.Background(), d); err != nil || !ok || d.ID == 0 {
		t.Fatalf("CreateDelivery(%s, %s) = %v, %v, id %d", d.MsgID, d.Subscriber, ok, err, d.ID)
	}
}

// A redelivered message creates nothing more; each subscriber has its own row; listings
// filter and read back what was written.
func testDeliveryOnce(t *testing.T, s webhook.Store) {
	ctx := context.Background()
	a := newDelivery("payment.succeeded:PO1", "https://a.example/hook", t0)
	mustCreateDelivery(t, s, a)
	again := newDelivery("payment.succeeded:PO1", "https://a.example/hook", t0.Add(time.Minute))
	if ok, err := s.CreateDelivery(ctx, again); err != nil || ok || again.ID != 0 {
		t.Fatalf("second CreateDelivery of the same message = %v, %v, id %d", ok, err, again.ID)
	}
	b := newDelivery("payment.succeeded:PO1", "https://b.example/hook", t0)
	mustCreateDelivery(t, s, b)
	other := newDelivery("payment.closed:PO2", "https://a.example/hook", t0)
	other.PaymentNo, other.OrderNo = "PO2", "O2"
	mustCreateDelivery(t, s, other)

	got, attempts, err := s.Delivery(ctx, a.ID)
	if err != nil || got.MsgID != a.MsgID || got.Subscriber != a.Subscriber || string(got.Payload) != string(a.Payload) ||
		got.Status != webhook.StatusPending || got.Attempts != 0 || !got.NextAt.Equal(t0) || got.PaymentNo != "PO1" || len(attempts) != 0 {
		t.Fatalf("Delivery = %+v, %v, %v", got, attempts, err)
	}
	_, _, err = s.Delivery(ctx, other.ID+100)
	wantCode(t, err, orderpay.ENOTFOUND)
	all, err := s.Deliveries(ctx, webhook.Filter{}, 10)
	if err != nil || len(all) != 3 || all[0].ID != other.ID {
		t.Fatalf("Deliveries, newest first = %+v, %v", all, err)
	}
	if byPayment, _ := s.Deliveries(ctx, webhook.Filter{PaymentNo: "PO1"}, 10); len(byPayment) != 2 {
		t.Fatalf("Deliveries of PO1 = %+v", byPayment)
	}
	if byOrder, _ := s.Deliveries(ctx, webhook.Filter{OrderNo: "O2", Status: webhook.StatusPending}, 10); len(byOrder) != 1 || byOrder[0].ID != other.ID {
		t.Fatalf("PENDING deliveries of O2 = %+v", byOrder)
	}
	if limited, _ := s.Deliveries(ctx, webhook.Filter{}, 2); len(limited) != 2 {
		t.Fatalf("limit 2 returned %d", len(limited))
	}
}

// Of workers racing for one due delivery exactly one claims it; a claimed delivery is not
// due until its lease ends.
func testDeliveryClaim(t *testing.T, s webhook.Store) {
	ctx := context.Background()
	d := newDelivery("payment.succeeded:PO1", "https://a.example/hook", t0)
	mustCreateDelivery(t, s, d)
	later := newDelivery("payment.succeeded:PO2", "https://a.example/hook", t0.Add(time.Hour))
	mustCreateDelivery(t, s, later)
	due, err := s.DueDeliveries(ctx, t0, 10, nil)
	if err != nil || len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("DueDeliveries at t0 = %+v, %v", due, err)
	}
	// A busy subscriber's rows are left out, and take no room from another's.
	busy := newDelivery("payment.succeeded:PO3", "https://busy.example/hook", t0.Add(-time.Minute))
	mustCreateDelivery(t, s, busy)
	if due, err := s.DueDeliveries(ctx, t0, 1, []string{busy.Subscriber, "https://idle.example/hook"}); err != nil || len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("DueDeliveries skipping the busy subscriber = %+v, %v", due, err)
	}
	if due, _ := s.DueDeliveries(ctx, t0, 1, nil); len(due) != 1 || due[0].ID != busy.ID {
		t.Fatalf("DueDeliveries, oldest first = %+v", due)
	}
	if ok, err := s.ClaimDelivery(ctx, busy.ID, 0, t0.Add(48*time.Hour), t0); err != nil || !ok {
		t.Fatalf("claim of the busy one: %v, %v", ok, err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.ClaimDelivery(ctx, d.ID, 0, t0.Add(time.Minute), t0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d workers claimed one delivery", wins.Load())
	}
	if due, _ := s.DueDeliveries(ctx, t0.Add(59*time.Second), 10, nil); len(due) != 0 {
		t.Fatalf("a claimed delivery is due during its lease: %+v", due)
	}
	// A claim with a stale attempt count takes nothing.
	if ok, _ := s.ClaimDelivery(ctx, d.ID, 1, t0.Add(2*time.Minute), t0.Add(time.Minute)); ok {
		t.Fatal("a claim with the wrong attempt count succeeded")
	}
	if due, _ := s.DueDeliveries(ctx, t0.Add(time.Hour), 1, nil); len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("oldest due first, limit 1: %+v", due)
	}
}

// A scheduled attempt moves its delivery only from the attempt count it was claimed at,
// and only while PENDING; a resend applies to any delivery; every attempt is stored.
func testDeliveryAttempts(t *testing.T, s webhook.Store) {
	ctx := context.Background()
	d := newDelivery("payment.succeeded:PO1", "https://a.example/hook", t0)
	mustCreateDelivery(t, s, d)
	record := func(r webhook.AttemptRecord) bool {
		t.Helper()
		changed, err := s.RecordAttempt(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	fail := webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindSchedule, HTTPStatus: 500, Error: "HTTP 500: 服务繁忙", At: t0},
		Before: 0, Status: webhook.StatusPending, NextAt: t0.Add(15 * time.Second)}
	if !record(fail) {
		t.Fatal("the first scheduled attempt did not apply")
	}
	if record(fail) {
		t.Fatal("the same step applied twice")
	}
	got, attempts, _ := s.Delivery(ctx, d.ID)
	if got.Attempts != 1 || got.Status != webhook.StatusPending || !got.NextAt.Equal(t0.Add(15*time.Second)) || got.LastStatus != 500 ||
		got.LastError != "HTTP 500: 服务繁忙" || len(attempts) != 2 || attempts[0].HTTPStatus != 500 || attempts[0].Kind != webhook.KindSchedule {
		t.Fatalf("after a failed attempt: %+v, %+v", got, attempts)
	}
	// The last attempt fails: dead.
	if !record(webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindSchedule, Error: "connection refused", At: t0.Add(time.Minute)},
		Before: 1, Status: webhook.StatusFailed}) {
		t.Fatal("the last attempt did not apply")
	}
	if due, _ := s.DueDeliveries(ctx, t0.Add(48*time.Hour), 10, nil); len(due) != 0 {
		t.Fatalf("a dead delivery is due: %+v", due)
	}
	// A failed resend leaves it dead; a delivered one makes it SUCCEEDED.
	record(webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindResend, HTTPStatus: 502, Error: "HTTP 502", At: t0.Add(2 * time.Hour)},
		Status: webhook.StatusFailed})
	if got, _, _ := s.Delivery(ctx, d.ID); got.Status != webhook.StatusFailed || got.LastStatus != 502 || !got.DeliveredAt.IsZero() {
		t.Fatalf("after a failed resend: %+v", got)
	}
	delivered := t0.Add(3 * time.Hour)
	if !record(webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindResend, HTTPStatus: 204, At: delivered},
		Status: webhook.StatusSucceeded}) {
		t.Fatal("a resend did not apply")
	}
	got, attempts, _ = s.Delivery(ctx, d.ID)
	if got.Status != webhook.StatusSucceeded || !got.DeliveredAt.Equal(delivered) || got.LastStatus != 204 || got.LastError != "" || got.Attempts != 2 || len(attempts) != 5 {
		t.Fatalf("after a delivered resend: %+v, %d attempts", got, len(attempts))
	}
	// Resent again once delivered: stays SUCCEEDED, and keeps its first delivery time.
	record(webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindResend, HTTPStatus: 200, At: delivered.Add(time.Hour)},
		Status: webhook.StatusSucceeded})
	if got, _, _ := s.Delivery(ctx, d.ID); got.Status != webhook.StatusSucceeded || !got.DeliveredAt.Equal(delivered) {
		t.Fatalf("after a second resend: %+v", got)
	}
}

package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"orderpay"
)

// Stats counts what the gauges show: orders and payments by status, the pending-query
// table (flagged rows apart), and the outbox rows not yet published with the oldest's age.
func testStats(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	sr, ok := s.(orderpay.StatsReader)
	if !ok {
		t.Fatalf("%T does not implement orderpay.StatsReader", s)
	}
	st, err := sr.Stats(ctx)
	if err != nil || len(st.Orders) != 0 || st.PendingQueries != 0 || st.OutboxUnpublished != 0 || !st.OldestUnpublished.IsZero() {
		t.Fatalf("empty store: %+v, %v", st, err)
	}
	newSKU(t, s, "tea", 10)
	for i := range 3 {
		o := newOrder(fmt.Sprint("O", i), "tea", 1)
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.CreateOrder(ctx, o); err != nil {
				return err
			}
			if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Status: orderpay.PaymentPaying,
				Subject: "x", PayDeadline: o.PayDeadline, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
			if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + o.No + "A01", PaymentNo: "P" + o.No, Channel: "alipay",
				Seq: 1, Amount: o.Payable, Status: orderpay.ChannelOrderPaying, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
			if err := tx.CreatePendingQuery(ctx, &orderpay.PendingQuery{OutTradeNo: "P" + o.No + "A01", PaymentNo: "P" + o.No, Channel: "alipay",
				NextAt: t0, Flagged: i == 2, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
			return tx.Enqueue(ctx, orderpay.Message{ID: "order.created:" + o.No, Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{}`),
				CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
		})
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O0", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: t0, Actor: "test", PaymentNo: "PO0"})
	})
	if err := s.MarkPublished(ctx, []string{"order.created:O0"}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	st, err = sr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orders[orderpay.OrderPaid] != 1 || st.Orders[orderpay.OrderPendingPayment] != 2 || st.Payments[orderpay.PaymentPaying] != 3 {
		t.Fatalf("orders %v, payments %v", st.Orders, st.Payments)
	}
	if st.PendingQueries != 3 || st.FlaggedPendingQueries != 1 {
		t.Fatalf("pending queries %d (flagged %d), want 3 (1)", st.PendingQueries, st.FlaggedPendingQueries)
	}
	// O0's message is published; the oldest left is O1's, written a minute after t0.
	if st.OutboxUnpublished != 2 || !st.OldestUnpublished.Equal(t0.Add(time.Minute)) {
		t.Fatalf("outbox: %d unpublished, oldest %v", st.OutboxUnpublished, st.OldestUnpublished)
	}
}

package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"orderpay"
)

// testOpsLog covers the operations console's reads and logs: order search (a prefix
// taken literally, LIKE's wildcards and all; by prefix newest number first), the notification and query logs, refunds by
// reason, paid latencies and notification outcome counts.
func testOpsLog(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	ops, ok := s.(orderpay.OpsReader)
	if !ok {
		t.Skip("the store keeps no operations log")
	}
	newSKU(t, s, "tea", 10)
	for i, no := range []string{"A_1", "AB1", "B1", `A\1`, "A%1", "a1"} {
		o := newOrder(no, "tea", 1)
		o.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		if no != "A_1" && no != "AB1" {
			o.BuyerID = "b2"
		}
		mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, o) })
	}
	// Two orders numbered as orderpay numbers them (OrderNoDigits digits), of another buyer
	// and created before the others.
	for i, no := range []string{"20260101000000000001", "20260101000000000002"} {
		o := newOrder(no, "tea", 1)
		o.CreatedAt, o.BuyerID = t0.Add(time.Duration(i-10)*time.Second), "b3"
		mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, o) })
	}
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "AB1", From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled,
			Event: orderpay.OrderEventCancel, At: t0, Actor: "buyer"})
	})
	nos := func(f orderpay.OrderFilter) string {
		t.Helper()
		orders, err := ops.Orders(ctx, f, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range orders {
			if len(o.Items) != 0 {
				t.Fatalf("listed order %s with items", o.No)
			}
			out = append(out, o.No)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		f    orderpay.OrderFilter
		want string
	}{
		{orderpay.OrderFilter{}, `a1,A%1,A\1,B1,AB1,A_1,20260101000000000002,20260101000000000001`},
		{orderpay.OrderFilter{NoPrefix: "A_"}, "A_1"},            // not AB1: _ is no wildcard here
		{orderpay.OrderFilter{NoPrefix: "A%"}, "A%1"},            // not the others: nor is %
		{orderpay.OrderFilter{NoPrefix: `A\`}, `A\1`},            // nor is \ an escape
		{orderpay.OrderFilter{NoPrefix: "A"}, `A_1,A\1,AB1,A%1`}, // by number, descending; not a1: case counts
		{orderpay.OrderFilter{NoPrefix: "a"}, "a1"},
		{orderpay.OrderFilter{NoPrefix: "%"}, ""},
		{orderpay.OrderFilter{NoPrefix: "_"}, ""},
		{orderpay.OrderFilter{NoPrefix: "A\xff"}, ""}, // no order number holds it: nothing to run
		{orderpay.OrderFilter{NoPrefix: "A", Status: orderpay.OrderCancelled}, "AB1"},
		{orderpay.OrderFilter{BuyerID: "b2"}, `a1,A%1,A\1,B1`},
		{orderpay.OrderFilter{Status: orderpay.OrderCancelled}, "AB1"},
		{orderpay.OrderFilter{BuyerID: "b1", Status: orderpay.OrderPendingPayment}, "A_1"},
		// A whole number is that order (an equality, not a range), with the other filters.
		{orderpay.OrderFilter{NoPrefix: "20260101000000000001"}, "20260101000000000001"},
		{orderpay.OrderFilter{NoPrefix: "20260101000000000001", BuyerID: "b3"}, "20260101000000000001"},
		{orderpay.OrderFilter{NoPrefix: "20260101000000000001", BuyerID: "b1"}, ""},
		{orderpay.OrderFilter{NoPrefix: "20260101000000000001", Status: orderpay.OrderCancelled}, ""},
		{orderpay.OrderFilter{NoPrefix: "20260101000000000003"}, ""},
		{orderpay.OrderFilter{NoPrefix: "2026010100000000000"}, "20260101000000000002,20260101000000000001"},
	} {
		if got := nos(tc.f); got != tc.want {
			t.Errorf("Orders(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}

	long := strings.Repeat("x", orderpay.NotificationLogRawMax+100)
	for _, e := range []orderpay.NotificationLogEntry{
		{ReceivedAt: t0, Channel: "alipay", OutTradeNo: "T1", Verified: false, Result: orderpay.NotifyRejected, Detail: "bad signature", Raw: "sign=forged\xff"},
		{ReceivedAt: t0.Add(time.Second), Channel: "alipay", OutTradeNo: "T1", Verified: true, Result: orderpay.NotifyApplied, Raw: long},
		{ReceivedAt: t0.Add(2 * time.Second), Channel: "wechat", OutTradeNo: "T2", Verified: true, Result: orderpay.NotifyApplied, Raw: "{}"},
		{ReceivedAt: t0.Add(-time.Hour), Channel: "wechat", OutTradeNo: "T3", Verified: true, Result: orderpay.NotifyIgnored, Raw: "{}"},
	} {
		if err := ops.LogNotification(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	notes, err := ops.NotificationLog(ctx, []string{"T1", "nope"}, 10)
	if err != nil || len(notes) != 2 {
		t.Fatalf("notification log of T1: %+v, %v", notes, err)
	}
	if n := notes[0]; n.Verified || n.Result != orderpay.NotifyRejected || n.Detail != "bad signature" || !strings.HasPrefix(n.Raw, "sign=forged") || !n.ReceivedAt.Equal(t0) {
		t.Fatalf("first entry %+v", n)
	}
	if n := notes[1]; !n.Verified || n.Result != orderpay.NotifyApplied || len(n.Raw) != orderpay.NotificationLogRawMax {
		t.Fatalf("second entry: verified %v, result %s, %d raw bytes", n.Verified, n.Result, len(n.Raw))
	}
	if notes, err := ops.NotificationLog(ctx, nil, 10); err != nil || len(notes) != 0 {
		t.Fatalf("no trades: %+v, %v", notes, err)
	}
	counts, err := ops.NotificationOutcomes(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[orderpay.NotificationOutcomeCount]bool{}
	for _, c := range counts {
		got[c] = true
	}
	if len(counts) != 2 || !got[orderpay.NotificationOutcomeCount{Verified: true, Result: orderpay.NotifyApplied, Count: 2}] ||
		!got[orderpay.NotificationOutcomeCount{Verified: false, Result: orderpay.NotifyRejected, Count: 1}] {
		t.Fatalf("outcomes since t0 (the ignored one is older): %+v", counts)
	}

	for i, outcome := range []orderpay.Outcome{orderpay.OutcomeUnknown, orderpay.OutcomePaid} {
		e := orderpay.QueryLogEntry{At: t0.Add(time.Duration(i) * time.Second), Channel: "alipay", OutTradeNo: "T1", Trigger: "poll", Outcome: outcome, Detail: "d\xff"}
		if err := ops.LogQuery(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := ops.QueryLog(ctx, []string{"T1"}, 10)
	if err != nil || len(qs) != 2 || qs[0].Outcome != orderpay.OutcomeUnknown || qs[1].Outcome != orderpay.OutcomePaid || qs[1].Trigger != "poll" {
		t.Fatalf("query log %+v, %v", qs, err)
	}

	paidAttempt(t, s, "O9", 500)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: "PO9A01R1", OutTradeNo: "PO9A01", PaymentNo: "PO9", Channel: "alipay",
			Amount: 500, Reason: orderpay.RefundReasonDuplicate, Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
	})
	if rs, err := ops.RefundsByReason(ctx, []string{orderpay.RefundReasonLate}, 10); err != nil || len(rs) != 0 {
		t.Fatalf("late refunds %+v, %v", rs, err)
	}
	if rs, err := ops.RefundsByReason(ctx, []string{orderpay.RefundReasonLate, orderpay.RefundReasonDuplicate}, 10); err != nil || len(rs) != 1 || rs[0].OutRefundNo != "PO9A01R1" {
		t.Fatalf("late or duplicate refunds %+v, %v", rs, err)
	}
	// Of two reasons, the newest of both, newest first, and no more than the limit: a
	// later late refund, then the duplicate.
	paidAttempt(t, s, "O10", 500)
	paidAttempt(t, s, "O11", 500)
	for i, no := range []string{"O10", "O11"} {
		mustTx(t, s, func(tx orderpay.Tx) error {
			at := t0.Add(time.Duration(i+1) * time.Minute)
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: "P" + no + "A01R1", OutTradeNo: "P" + no + "A01", PaymentNo: "P" + no,
				Channel: "alipay", Amount: 500, Reason: orderpay.RefundReasonLate, Status: orderpay.ChannelRefundPending, NextAt: at, CreatedAt: at, UpdatedAt: at})
		})
	}
	if rs, err := ops.RefundsByReason(ctx, []string{orderpay.RefundReasonDuplicate, orderpay.RefundReasonLate}, 2); err != nil || len(rs) != 2 ||
		rs[0].OutRefundNo != "PO11A01R1" || rs[1].OutRefundNo != "PO10A01R1" {
		t.Fatalf("the newest two late or duplicate refunds %+v, %v", rs, err)
	}
	if rs, err := ops.RefundsByReason(ctx, []string{orderpay.RefundReasonDuplicate, orderpay.RefundReasonLate}, 3); err != nil || len(rs) != 3 ||
		rs[2].OutRefundNo != "PO9A01R1" {
		t.Fatalf("the newest three late or duplicate refunds %+v, %v", rs, err)
	}

	// A payment whose attempt opened at t0+1s, recorded paid at t0+4.25s; the channel's own
	// paid_at is in whole seconds by its clock (t0+4s): the latency is ours, 3.25 s. The
	// payment becomes paid as in the flow, by its transition, which keeps the attempt's
	// opening beside it. Another was recorded paid in the hour before t0's.
	PaidAt(t, s, "L1", t0.Add(time.Second), t0.Add(4250*time.Millisecond))
	PaidAt(t, s, "L0", t0.Add(-time.Hour), t0.Add(-time.Hour+time.Second))
	lat, err := ops.PaidLatencyCounts(ctx, t0.Add(time.Second))
	if err != nil || len(lat) != 1 || lat[0] != (orderpay.LatencyCount{UpTo: 4 * time.Second, Count: 1}) {
		t.Fatalf("paid latencies %v, %v; want one in the bucket of 4 s, 3.25 s (the payment paid in the hour before the window's is not counted)", lat, err)
	}
	if lat, err := ops.PaidLatencyCounts(ctx, t0.Add(-time.Minute)); err != nil || len(lat) != 2 || lat[0] != (orderpay.LatencyCount{UpTo: time.Second, Count: 1}) {
		t.Fatalf("paid latencies from the hour before t0's %v, %v; want 1 s and 3.25 s", lat, err)
	}
}

// PaidAt makes a payment for order no whose one attempt opened at opened, and makes it
// paid at recorded by its transition, as the flow does (which keeps the attempt's opening
// beside it, for the charts).
func PaidAt(t *testing.T, s orderpay.Store, no string, opened, recorded time.Time) {
	t.Helper()
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + no, OrderNo: no, Amount: 500, Status: orderpay.PaymentPaying, Subject: "x",
			PayDeadline: opened.Add(time.Hour), CreatedAt: opened, UpdatedAt: opened}); err != nil {
			return err
		}
		if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + no + "A01", PaymentNo: "P" + no, Channel: "wechat", Seq: 1, Amount: 500,
			Status: orderpay.ChannelOrderSuccess, CreatedAt: opened, UpdatedAt: opened, PaidAt: recorded.Truncate(time.Second)}); err != nil {
			return err
		}
		return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "P" + no, From: orderpay.PaymentPaying, To: orderpay.PaymentSuccess,
			Event: orderpay.PaymentEventSucceed, At: recorded, Actor: "t", PaidChannel: "wechat", PaidOutTradeNo: "P" + no + "A01"})
	})
}

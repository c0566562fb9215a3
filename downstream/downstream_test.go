package downstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/downstream"
	"orderpay/natsbus"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// engines runs a test on SQLite, and on PostgreSQL when ORDERPAY_TEST_PG is set.
func engines(t *testing.T, test func(t *testing.T, s *sqlstore.Store)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); test(t, storetest.OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); test(t, storetest.OpenPostgres(t)) })
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func orderMsg(id, subject, orderNo, buyer string, payable int64) orderpay.Message {
	b, _ := json.Marshal(orderpay.OrderEventPayload{OrderNo: orderNo, BuyerID: buyer, Payable: payable, At: t0})
	return orderpay.Message{ID: id, Subject: subject, Payload: b, CreatedAt: t0}
}

func paidMsg(id, orderNo, buyer string, payable int64) orderpay.Message {
	return orderMsg(id, orderpay.SubjectOrderPaid, orderNo, buyer, payable)
}

func refundMsg(id, orderNo, outRefundNo, reason string, amount int64) orderpay.Message {
	b, _ := json.Marshal(orderpay.RefundEventPayload{OutRefundNo: outRefundNo, OrderNo: orderNo, Amount: amount, Reason: reason, At: t0})
	return orderpay.Message{ID: id, Subject: orderpay.SubjectRefundSucceeded, Payload: b, CreatedAt: t0}
}

// afterSales stands for a buyer's refund of a paid order (not one of the payment center's
// own refunds of money the order never kept).
const afterSales = orderpay.RefundReasonAfterSales

func account(t *testing.T, s downstream.Store, buyer string) *downstream.PointsAccount {
	t.Helper()
	a, err := (&downstream.Examples{Store: s}).PointsAccount(context.Background(), buyer)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ledgerSummary(a *downstream.PointsAccount) string {
	out := fmt.Sprintf("balance=%d", a.Balance)
	for i := len(a.Ledger) - 1; i >= 0; i-- { // oldest first
		e := a.Ledger[i]
		out += fmt.Sprintf(" %s/%s/%s=%d", e.OrderNo, e.Kind, e.Ref, e.Points)
	}
	return out
}

// The store: an award once per order, a revoke once per refund and capped at what the
// award has left, no revoke without an award, and the SMS log once per (message, template).
func TestStore_pointsAndSMSAreIdempotent(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		award := downstream.PointsEntry{OrderNo: "O1", Kind: downstream.PointsAward, Points: 12, BuyerID: "alice", MsgID: "m1", CreatedAt: t0}
		for i, want := range []bool{true, false} {
			award.MsgID = fmt.Sprint("m", i)
			if ok, err := s.AwardPoints(ctx, award); err != nil || ok != want {
				t.Fatalf("award #%d: applied=%v err=%v, want %v", i+1, ok, err, want)
			}
		}
		if _, _, err := s.RevokePoints(ctx, downstream.PointsEntry{OrderNo: "NOPE", Ref: "R0", Points: 1, CreatedAt: t0}); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
			t.Fatalf("revoke without award: %v, want ENOTFOUND", err)
		}
		for _, c := range []struct {
			ref          string
			ask, got     int64
			applied      bool
			afterBalance int64
		}{
			{"R1", 5, 5, true, 7},
			{"R1", 5, 0, false, 7}, // the same refund again
			{"R2", 100, 7, true, 0},
			{"R3", 3, 0, true, 0}, // nothing left to take back
		} {
			got, applied, err := s.RevokePoints(ctx, downstream.PointsEntry{OrderNo: "O1", Ref: c.ref, Points: c.ask, MsgID: "r-" + c.ref, CreatedAt: t0.Add(time.Second)})
			if err != nil || got != c.got || applied != c.applied {
				t.Fatalf("revoke %s of %d: got %d applied=%v err=%v, want %d applied=%v", c.ref, c.ask, got, applied, err, c.got, c.applied)
			}
			if b, _ := s.PointsBalance(ctx, "alice"); b != c.afterBalance {
				t.Fatalf("after %s balance %d, want %d", c.ref, b, c.afterBalance)
			}
		}
		a := account(t, s, "alice")
		if got, want := ledgerSummary(a), "balance=0 O1/award/=12 O1/revoke/R1=5 O1/revoke/R2=7 O1/revoke/R3=0"; got != want {
			t.Fatalf("ledger %q, want %q", got, want)
		}
		for _, e := range a.Ledger {
			if e.BuyerID != "alice" {
				t.Fatalf("row %+v: the revoke takes the award's buyer", e)
			}
		}

		sms := downstream.SMSEntry{MsgID: "order.paid:O1", Template: downstream.TemplateOrderPaid, BuyerID: "alice", OrderNo: "O1", Text: "x", CreatedAt: t0}
		for i, want := range []bool{true, false} {
			if ok, err := s.LogSMS(ctx, sms); err != nil || ok != want {
				t.Fatalf("sms #%d: applied=%v err=%v, want %v", i+1, ok, err, want)
			}
		}
		sms.MsgID = "order.paid:O1#again"
		if ok, err := s.LogSMS(ctx, sms); err != nil || !ok {
			t.Fatalf("sms of another message: applied=%v err=%v", ok, err)
		}
		if rows, err := s.SMSLog(ctx, "O1", 10); err != nil || len(rows) != 2 {
			t.Fatalf("sms log %+v %v, want 2 rows", rows, err)
		}
		if rows, err := s.SMSLog(ctx, "O2", 10); err != nil || len(rows) != 0 {
			t.Fatalf("sms log of O2 %+v %v, want none", rows, err)
		}
		if rows, err := s.SMSLog(ctx, "", 10); err != nil || len(rows) != 2 {
			t.Fatalf("sms log of every order %+v %v, want 2 rows", rows, err)
		}
	})
}

// Many refunds of one order at once never take back more than the award.
func TestStore_concurrentRevokesNeverExceedTheAward(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		if _, err := s.AwardPoints(ctx, downstream.PointsEntry{OrderNo: "O1", Points: 10, BuyerID: "bob", MsgID: "m", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var total int64
		for i := range 8 {
			wg.Go(func() {
				got, _, err := s.RevokePoints(ctx, downstream.PointsEntry{OrderNo: "O1", Ref: fmt.Sprint("R", i), Points: 3, MsgID: "r", CreatedAt: t0})
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += got
				mu.Unlock()
			})
		}
		wg.Wait()
		if b, _ := s.PointsBalance(ctx, "bob"); total != 10 || b != 0 {
			t.Fatalf("revoked %d, balance %d; want 10 and 0", total, b)
		}
	})
}

// The handlers, called directly: a redelivery (the same message twice) and a duplicate (the
// same event under another id) award once; a refund revokes once and never more than the
// award; the payment center's own refunds take nothing back; a refund that overtakes the
// award fails, to come back after it.
func TestPoints_handler(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		p := (&downstream.Examples{Store: s}).Points()
		handle := func(m orderpay.Message) {
			t.Helper()
			if err := p.Handle(ctx, m); err != nil {
				t.Fatalf("handle %s: %v", m.ID, err)
			}
		}
		paid := paidMsg("order.paid:O1", "O1", "carol", 12_80) // 12.80 yuan: 12 points
		handle(paid)
		handle(paid)
		handle(paidMsg("order.paid:O1#republished", "O1", "carol", 12_80))
		handle(orderMsg("order.created:O1", orderpay.SubjectOrderCreated, "O1", "carol", 12_80)) // not points' business
		if got := ledgerSummary(account(t, s, "carol")); got != "balance=12 O1/award/=12" {
			t.Fatalf("after the award: %s", got)
		}

		refund := refundMsg("refund.succeeded:R1", "O1", "R1", afterSales, 5_99) // 5 points
		handle(refund)
		handle(refund)
		handle(refundMsg("refund.succeeded:R1#republished", "O1", "R1", afterSales, 5_99))
		handle(refundMsg("refund.succeeded:D1", "O1", "D1", orderpay.RefundReasonDuplicate, 12_80))
		if got := ledgerSummary(account(t, s, "carol")); got != "balance=7 O1/award/=12 O1/revoke/R1=5" {
			t.Fatalf("after one refund: %s", got)
		}
		handle(refundMsg("refund.succeeded:R2", "O1", "R2", afterSales, 100_00)) // asks 100, 7 left
		if got := ledgerSummary(account(t, s, "carol")); got != "balance=0 O1/award/=12 O1/revoke/R1=5 O1/revoke/R2=7" {
			t.Fatalf("after a refund above the award: %s", got)
		}

		early := refundMsg("refund.succeeded:R9", "O9", "R9", afterSales, 3_00)
		if err := p.Handle(ctx, early); err == nil {
			t.Fatal("a refund before its order's award must fail, to be redelivered")
		}
		handle(paidMsg("order.paid:O9", "O9", "carol", 50)) // 0.50 yuan: 0 points, still recorded
		handle(early)
		if got := ledgerSummary(account(t, s, "carol")); got != "balance=0 O1/award/=12 O1/revoke/R1=5 O1/revoke/R2=7 O9/award/=0 O9/revoke/R9=0" {
			t.Fatalf("after the early refund: %s", got)
		}
		// A malformed message is dropped (acked), not retried for ever.
		handle(orderpay.Message{ID: "bad", Subject: orderpay.SubjectOrderPaid, Payload: []byte("{")})
		// A business app's refund is no order's: acked at once, nothing taken back, never
		// redelivered for an award that will never come.
		handle(refundMsg("refund.succeeded:AR1", "AP20261124000000123456", "AR1", orderpay.RefundReasonApp, 5_00))
		if got := ledgerSummary(account(t, s, "carol")); got != "balance=0 O1/award/=12 O1/revoke/R1=5 O1/revoke/R2=7 O9/award/=0 O9/revoke/R9=0" {
			t.Fatalf("after an app's refund: %s", got)
		}
	})
}

type orders map[string]*orderpay.Order

func (o orders) Order(_ context.Context, no string) (*orderpay.Order, error) {
	if x, ok := o[no]; ok {
		return x, nil
	}
	return nil, orderpay.Errorf(orderpay.ENOTFOUND, "order %q not found", no)
}

func TestSMS_handlerTextsOncePerMessage(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	ctx := context.Background()
	h := (&downstream.Examples{Store: s, Orders: orders{"O1": {No: "O1", BuyerID: "dave"}}}).SMS()
	msgs := []orderpay.Message{
		orderMsg("order.created:O1", orderpay.SubjectOrderCreated, "O1", "dave", 12_80),
		paidMsg("order.paid:O1", "O1", "dave", 12_80),
		paidMsg("order.paid:O1", "O1", "dave", 12_80), // redelivered
		refundMsg("refund.succeeded:R1", "O1", "R1", afterSales, 3_05),
		refundMsg("refund.succeeded:R1", "O1", "R1", afterSales, 3_05), // redelivered
		orderMsg("order.cancelled:O2", orderpay.SubjectOrderCancelled, "O2", "erin", 1_00),
		{ID: "payment.succeeded:P1", Subject: orderpay.SubjectPaymentSucceeded, Payload: []byte(`{"order_no":"O1"}`)}, // not SMS's business
	}
	for _, m := range msgs {
		if err := h.Handle(ctx, m); err != nil {
			t.Fatalf("handle %s: %v", m.ID, err)
		}
	}
	rows, err := s.SMSLog(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.MsgID] = r.BuyerID + " " + r.Template + " " + r.Text
	}
	want := map[string]string{
		"order.created:O1":    "dave order_created 您的订单 O1 已提交，应付 ¥12.80，请尽快支付",
		"order.paid:O1":       "dave order_paid 您的订单 O1 已支付 ¥12.80",
		"refund.succeeded:R1": "dave refund_succeeded 您的订单 O1 退款 ¥3.05 已原路退回",
		"order.cancelled:O2":  "erin order_cancelled 您的订单 O2 已取消",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(rows) != len(want) {
		t.Fatalf("sms log\n got %v\nwant %v", got, want)
	}
}

// drained waits until the durable consumer has acked everything in the stream.
func drained(t *testing.T, b *natsbus.Bus, durable string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := b.JetStream().Consumer(t.Context(), b.StreamName(), durable)
		if err == nil {
			info, err := c.Info(t.Context())
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s not drained", durable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Through the embedded JetStream: both examples subscribed under their own durables, the
// same events published twice under two ids (a re-publish after the duplicate window), a
// refund that overtakes its order's award, and a refund above the award.
func TestExamples_onTheBus(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		b, err := natsbus.Open(ctx, natsbus.Config{StoreDir: t.TempDir(), RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		x := &downstream.Examples{Store: s, Orders: orders{"O1": {No: "O1", BuyerID: "frank"}, "O2": {No: "O2", BuyerID: "frank"}}}
		stop, err := x.Start(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)

		for _, m := range []orderpay.Message{
			orderMsg("order.created:O1", orderpay.SubjectOrderCreated, "O1", "frank", 25_99),
			paidMsg("order.paid:O1", "O1", "frank", 25_99),
			paidMsg("order.paid:O1", "O1", "frank", 25_99), // dropped by the broker (same id)
			paidMsg("order.paid:O1#2", "O1", "frank", 25_99),
			refundMsg("refund.succeeded:R1", "O1", "R1", afterSales, 10_00),
			refundMsg("refund.succeeded:R1#2", "O1", "R1", afterSales, 10_00),
			refundMsg("refund.succeeded:R2", "O1", "R2", afterSales, 99_00),
			refundMsg("refund.succeeded:R3", "O2", "R3", afterSales, 4_00), // before O2's award
			paidMsg("order.paid:O2", "O2", "frank", 8_00),
		} {
			if err := b.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		drained(t, b, downstream.DurablePoints)
		drained(t, b, downstream.DurableSMS)

		a, err := x.PointsAccount(ctx, "frank")
		if err != nil {
			t.Fatal(err)
		}
		// O1: 25 awarded, 10 + 15 (of 99 asked) taken back; O2: 8 awarded, 4 taken back.
		if got := a.Balance; got != 4 || len(a.Ledger) != 5 {
			t.Fatalf("account %s", ledgerSummary(a))
		}
		rows, err := x.SMSLog(ctx, "O1")
		if err != nil {
			t.Fatal(err)
		}
		perID := map[string]int{}
		for _, r := range rows {
			perID[r.MsgID]++
		}
		want := map[string]int{"order.created:O1": 1, "order.paid:O1": 1, "order.paid:O1#2": 1,
			"refund.succeeded:R1": 1, "refund.succeeded:R1#2": 1, "refund.succeeded:R2": 1}
		if fmt.Sprint(perID) != fmt.Sprint(want) {
			t.Fatalf("sms rows per message %v, want %v", perID, want)
		}
	})
}

package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
	"orderpay/webhook"
)

// A retention pass removes what only operators read once it is older than the policy keeps
// it, and nothing else: logs, published outbox messages, delivered webhooks' attempts and
// bodies, expired request keys, ended stock holds, raw bodies of old transitions. The
// transitions themselves, unpublished messages, pending webhooks, standing holds and
// recent rows all stay; a second pass removes nothing more.
func testRetention(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	ret, ok := s.(orderpay.Retainer)
	ops, ok2 := s.(orderpay.OpsLog)
	hooks, ok3 := s.(webhook.Store)
	if !ok || !ok2 || !ok3 {
		t.Skip("the store keeps no logs to retain")
	}
	old, recent := t0, t0.Add(40*24*time.Hour) // 40 days apart; the pass runs at recent+1h
	now := recent.Add(time.Hour)
	policy := orderpay.RetentionPolicy{Logs: 30 * 24 * time.Hour, Published: 7 * 24 * time.Hour, RawBodies: 30 * 24 * time.Hour}

	// Notifications of a hundred and a hundred and one days before: their log lines go with
	// the logs; of the charts' running totals past the longest window, the older goes and
	// the later stays, the longest window's baseline.
	ancient := recent.Add(-100 * 24 * time.Hour)
	if err := ops.LogNotification(ctx, &orderpay.NotificationLogEntry{ReceivedAt: ancient.Add(-24 * time.Hour), Channel: "alipay", OutTradeNo: "T1",
		Result: orderpay.NotifyRejected, Raw: "x"}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{ancient, old, recent} {
		if err := ops.LogNotification(ctx, &orderpay.NotificationLogEntry{ReceivedAt: at, Channel: "alipay", OutTradeNo: "T1", Result: orderpay.NotifyRejected, Raw: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := ops.LogQuery(ctx, &orderpay.QueryLogEntry{At: at, Channel: "alipay", OutTradeNo: "T1", Trigger: "poll", Outcome: orderpay.OutcomeNotPaid}); err != nil {
			t.Fatal(err)
		}
	}
	// Outbox: an old published message goes; an old unpublished one and a recent published
	// one stay.
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.Enqueue(ctx, orderpay.Message{ID: "m-old", Subject: "order.created", Payload: []byte(`{}`), CreatedAt: old},
			orderpay.Message{ID: "m-unpublished", Subject: "order.created", Payload: []byte(`{}`), CreatedAt: old},
			orderpay.Message{ID: "m-recent", Subject: "order.created", Payload: []byte(`{}`), CreatedAt: recent})
	})
	if err := s.MarkPublished(ctx, []string{"m-old"}, old); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPublished(ctx, []string{"m-recent"}, recent); err != nil {
		t.Fatal(err)
	}
	// Webhooks: a delivered one keeps its row but loses its body and attempts; a failed one
	// keeps everything.
	delivered := &webhook.Delivery{MsgID: "m-old", Subscriber: "https://a.example/h", Subject: "payment.succeeded", Payload: []byte(`{"a":1}`),
		Status: webhook.StatusPending, NextAt: old, CreatedAt: old, UpdatedAt: old}
	failed := &webhook.Delivery{MsgID: "m-old", Subscriber: "https://b.example/h", Subject: "payment.succeeded", Payload: []byte(`{"b":1}`),
		Status: webhook.StatusPending, NextAt: old, CreatedAt: old, UpdatedAt: old}
	for _, d := range []*webhook.Delivery{delivered, failed} {
		if _, err := hooks.CreateDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hooks.RecordAttempt(ctx, webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: delivered.ID, Kind: webhook.KindSchedule, HTTPStatus: 200, At: old},
		Before: 0, Status: webhook.StatusSucceeded, NextAt: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := hooks.RecordAttempt(ctx, webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: failed.ID, Kind: webhook.KindSchedule, HTTPStatus: 500, At: old},
		Before: 0, Status: webhook.StatusFailed, NextAt: old}); err != nil {
		t.Fatal(err)
	}
	// An expired request key goes, a live one stays; an ended hold goes, a standing one stays.
	newSKU(t, s, "tea", 10)
	o := newOrder("O-RET", "tea", 2)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreateOrder(ctx, o); err != nil {
			return err
		}
		for _, k := range []*orderpay.RequestKey{
			{BuyerID: "b1", Key: "key:old", RequestHash: "h", OrderNo: o.No, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour)},
			{BuyerID: "b1", Key: "key:live", RequestHash: "h", OrderNo: o.No, CreatedAt: recent, ExpiresAt: now.Add(time.Hour)},
		} {
			if _, err := tx.ClaimRequestKey(ctx, k); err != nil {
				return err
			}
		}
		for line := 1; line <= 2; line++ {
			if err := tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: o.No, Line: line, SKU: "tea", Qty: 1, HoldUntil: old.Add(time.Hour),
				State: orderpay.HoldStanding, CreatedAt: old, UpdatedAt: old}); err != nil {
				return err
			}
		}
		return tx.EndStockHold(ctx, o.No, 1, orderpay.HoldReleased, old)
	})
	// History: an old transition keeps its row and loses its raw body; a recent one keeps both.
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: o.No, From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled,
			Event: orderpay.OrderEventCancel, At: old, Actor: "t", Reason: "kept"}); err != nil {
			return err
		}
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "PRET", OrderNo: o.No, Amount: o.Payable, Status: orderpay.PaymentPaying,
			Subject: "x", PayDeadline: old.Add(time.Hour), CreatedAt: old, UpdatedAt: old}); err != nil {
			return err
		}
		for i, at := range []time.Time{old, recent} {
			no := []string{"PRETA01", "PRETA02"}[i]
			if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: no, PaymentNo: "PRET", Channel: []string{"alipay", "wechat"}[i],
				Seq: i + 1, Amount: o.Payable, Status: orderpay.ChannelOrderCreated, CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
			if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: no, From: orderpay.ChannelOrderCreated,
				To: orderpay.ChannelOrderPaying, Event: orderpay.ChannelOrderEventSubmit, At: at, Actor: "t", Raw: "the channel's answer"}); err != nil {
				return err
			}
		}
		return nil
	})

	if f, ok := s.(interface {
		FoldCounts(ctx context.Context) (int, error)
	}); ok {
		if _, err := f.FoldCounts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ret.Retain(ctx, now, policy)
	if err != nil {
		t.Fatal(err)
	}
	want := orderpay.RetentionResult{NotificationLog: 3, ChartCounts: 1, QueryLog: 2, Outbox: 1, WebhookAttempts: 1, WebhookBodies: 1, RequestKeys: 1, StockHolds: 1,
		RawBodies: 1}
	if res != want {
		t.Fatalf("retention removed %+v, want %+v", res, want)
	}
	if again, err := ret.Retain(ctx, now, policy); err != nil || again != (orderpay.RetentionResult{}) {
		t.Fatalf("a second pass removed %+v, %v", again, err)
	}
	if notes, _ := ops.(orderpay.OpsReader); notes != nil {
		if n, _ := notes.NotificationLog(ctx, []string{"T1"}, 10); len(n) != 1 || !n[0].ReceivedAt.Equal(recent) {
			t.Fatalf("notification log after retention %+v", n)
		}
		// The longest window counts its two, not the four ever counted.
		outcomes, err := notes.NotificationOutcomes(ctx, now.Add(-orderpay.ChartWindowMax))
		if want := (orderpay.NotificationOutcomeCount{Result: orderpay.NotifyRejected, Count: 2}); err != nil || len(outcomes) != 1 || outcomes[0] != want {
			t.Fatalf("the longest window's notifications after retention %+v, %v; want %+v", outcomes, err, want)
		}
	}
	if msgs, _ := s.UnpublishedMessages(ctx, 10); len(msgs) != 1 || msgs[0].ID != "m-unpublished" {
		t.Fatalf("unpublished messages after retention %+v", msgs)
	}
	if d, attempts, err := hooks.Delivery(ctx, delivered.ID); err != nil || len(d.Payload) != 0 || len(attempts) != 0 || d.Status != webhook.StatusSucceeded {
		t.Fatalf("the delivered webhook %+v, %d attempts, %v", d, len(attempts), err)
	}
	if d, attempts, err := hooks.Delivery(ctx, failed.ID); err != nil || string(d.Payload) != `{"b":1}` || len(attempts) != 1 {
		t.Fatalf("the failed webhook %+v, %d attempts, %v", d, len(attempts), err)
	}
	if k, err := s.RequestKey(ctx, "b1", "key:live"); err != nil || k.OrderNo != o.No {
		t.Fatalf("the live request key: %+v, %v", k, err)
	}
	if _, err := s.RequestKey(ctx, "b1", "key:old"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("the expired request key: %v", err)
	}
	if holds, _ := s.StockHolds(ctx, o.No); len(holds) != 1 || holds[0].Line != 2 || holds[0].State != orderpay.HoldStanding {
		t.Fatalf("holds after retention %+v", holds)
	}
	h, err := s.History(ctx, orderpay.EntityOrder, o.No)
	if err != nil || len(h) == 0 || h[len(h)-1].Reason != "kept" || h[len(h)-1].To != string(orderpay.OrderCancelled) {
		t.Fatalf("the order's history after retention %+v, %v", h, err)
	}
	for no, raw := range map[string]string{"PRETA01": "", "PRETA02": "the channel's answer"} {
		h, err := s.History(ctx, orderpay.EntityChannelOrder, no)
		if err != nil || len(h) != 2 || h[1].To != string(orderpay.ChannelOrderPaying) || h[1].Raw != raw {
			t.Fatalf("%s's history after retention %+v, %v; want its submit with raw %q", no, h, err, raw)
		}
	}
}

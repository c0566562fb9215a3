package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

func appTx(t *testing.T, s orderpay.Store, fn func(tx orderpay.AppTx) error) error {
	t.Helper()
	as, ok := s.(orderpay.AppStore)
	if !ok {
		t.Fatalf("%T is not an orderpay.AppStore", s)
	}
	return as.InAppTx(context.Background(), fn)
}

// paidAppPayment makes an app (once), and a SUCCESS app payment of it with its paid
// payment-center payment.
func paidAppPayment(t *testing.T, s orderpay.Store, appID, key string, amount int64) *orderpay.AppPayment {
	t.Helper()
	ctx := context.Background()
	if err := appTx(t, s, func(tx orderpay.AppTx) error {
		if _, err := tx.App(ctx, appID); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
			return err
		}
		return tx.CreateApp(ctx, &orderpay.App{ID: appID, Name: appID, WebhookURLs: []string{}, WebhookSecret: "whsec_x", Channels: []string{"alipay"},
			CreatedAt: t0, UpdatedAt: t0})
	}); err != nil {
		t.Fatal(err)
	}
	paidAttempt(t, s, key, amount)
	ap := &orderpay.AppPayment{PaymentNo: "P" + key, OrderKey: key, AppID: appID, MerchantOrderNo: "M-" + key, Amount: amount, Subject: "x",
		Channel: "alipay", ExpiresAt: t0.Add(time.Hour), Status: orderpay.AppPaymentSuccess, RequestHash: "h", CreatedAt: t0, UpdatedAt: t0}
	if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.CreateAppPayment(ctx, ap) }); err != nil {
		t.Fatal(err)
	}
	return ap
}

// Apps, keys, payments and refunds: every number is unique where it must be, every change
// conditional, and a refused change writes nothing.
func testApps(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	as := s.(orderpay.AppStore)
	app := &orderpay.App{ID: "app_1", Name: "top-ups", WebhookURLs: []string{"https://a.example/h"}, WebhookSecret: "whsec_1",
		Channels: []string{"alipay", "wechat"}, CreatedAt: t0, UpdatedAt: t0}
	k1 := &orderpay.AppKey{ID: "k1", AppID: "app_1", Hash: "h1", CreatedAt: t0}
	if err := appTx(t, s, func(tx orderpay.AppTx) error {
		if err := tx.CreateApp(ctx, app); err != nil {
			return err
		}
		return tx.CreateAppKey(ctx, k1)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := as.App(ctx, "app_1")
	if err != nil || got.Name != "top-ups" || len(got.WebhookURLs) != 1 || len(got.Channels) != 2 || got.WebhookSecret != "whsec_1" {
		t.Fatalf("app %+v, %v", got, err)
	}
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.CreateApp(ctx, app) }), orderpay.ECONFLICT)
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error {
		return tx.CreateAppKey(ctx, &orderpay.AppKey{ID: "k2", AppID: "app_1", Hash: "h1", CreatedAt: t0})
	}), orderpay.ECONFLICT)
	if _, err := as.App(ctx, "nope"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a missing app: %v", err)
	}

	// A rotation ends the other keys with no end; a revoke happens once.
	if err := appTx(t, s, func(tx orderpay.AppTx) error {
		if err := tx.CreateAppKey(ctx, &orderpay.AppKey{ID: "k2", AppID: "app_1", Hash: "h2", CreatedAt: t0}); err != nil {
			return err
		}
		n, err := tx.ExpireAppKeys(ctx, "app_1", "k2", t0.Add(time.Hour), t0)
		if err == nil && n != 1 {
			t.Errorf("rotation ended %d keys, want 1", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if k, _ := as.AppKey(ctx, "k1"); !k.ExpiresAt.Equal(t0.Add(time.Hour)) || !k.Valid(t0.Add(59*time.Minute)) || k.Valid(t0.Add(time.Hour)) {
		t.Fatalf("the old key after a rotation %+v", k)
	}
	if k, _ := as.AppKey(ctx, "k2"); !k.ExpiresAt.IsZero() || !k.Valid(t0.Add(1000*time.Hour)) {
		t.Fatalf("the new key %+v", k)
	}
	if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.RevokeAppKey(ctx, "app_1", "k2", t0) }); err != nil {
		t.Fatal(err)
	}
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.RevokeAppKey(ctx, "app_1", "k2", t0) }), orderpay.ECONFLICT)
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.RevokeAppKey(ctx, "app_2", "k1", t0) }), orderpay.ENOTFOUND)
	if k, _ := as.AppKey(ctx, "k2"); k.Valid(t0) {
		t.Fatalf("a revoked key is valid: %+v", k)
	}

	// Payments: one per merchant order number and per Idempotency-Key of an app.
	p1 := &orderpay.AppPayment{PaymentNo: "PAP1", OrderKey: "AP1", AppID: "app_1", MerchantOrderNo: "M1", Amount: 1000, Subject: "x",
		Channel: "alipay", ExpiresAt: t0.Add(time.Minute), Status: orderpay.AppPaymentOpen, RequestHash: "h", IdempotencyKey: "idem-1",
		CreatedAt: t0, UpdatedAt: t0}
	if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.CreateAppPayment(ctx, p1) }); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]orderpay.AppPayment{
		"same merchant number": {PaymentNo: "PAP2", OrderKey: "AP2", MerchantOrderNo: "M1"},
		"same key":             {PaymentNo: "PAP3", OrderKey: "AP3", MerchantOrderNo: "M3", IdempotencyKey: "idem-1"},
		"same order key":       {PaymentNo: "PAP4", OrderKey: "AP1", MerchantOrderNo: "M4"},
	} {
		p.AppID, p.Amount, p.Subject, p.Channel, p.Status, p.RequestHash, p.ExpiresAt = "app_1", 1, "x", "alipay", orderpay.AppPaymentOpen, "h", t0
		if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.CreateAppPayment(ctx, &p) }); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			t.Errorf("%s: %v", name, err)
		}
	}
	if p, err := as.AppPaymentByIdempotencyKey(ctx, "app_1", "idem-1"); err != nil || p.PaymentNo != "PAP1" {
		t.Fatalf("by key: %+v, %v", p, err)
	}
	if _, err := as.AppPaymentByIdempotencyKey(ctx, "app_1", ""); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("an empty key finds nothing: %v", err)
	}
	if due, err := as.DueAppPayments(ctx, t0.Add(2*time.Minute), 10); err != nil || len(due) != 1 {
		t.Fatalf("due %+v, %v", due, err)
	}
	if due, _ := as.DueAppPayments(ctx, t0, 10); len(due) != 0 {
		t.Fatalf("due before the deadline: %+v", due)
	}
	// Conditional transitions: closed once; a success after it finds it CLOSED.
	change := orderpay.AppPaymentChange{PaymentNo: "PAP1", From: orderpay.AppPaymentOpen, To: orderpay.AppPaymentClosed, Event: orderpay.AppPaymentEventClose,
		At: t0, Actor: "system"}
	if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.TransitionAppPayment(ctx, change, "expired") }); err != nil {
		t.Fatal(err)
	}
	change.To, change.Event = orderpay.AppPaymentSuccess, orderpay.AppPaymentEventSucceed
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.TransitionAppPayment(ctx, change, "") }), orderpay.ECONFLICT)
	if p, _ := as.AppPayment(ctx, "PAP1"); p.Status != orderpay.AppPaymentClosed || p.CloseReason != "expired" {
		t.Fatalf("after the close %+v", p)
	}
	// A closed payment refunds nothing.
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.ReserveAppRefund(ctx, "PAP1", 1, t0) }), orderpay.ECONFLICT)

	// Refunds: bounded by the amount; the app's number once; a refused one writes nothing.
	paid := paidAppPayment(t, s, "app_1", "AP9", 500)
	r := &orderpay.AppRefund{OutRefundNo: "AR1", AppID: "app_1", RefundNo: "R1", PaymentNo: paid.PaymentNo, Amount: 300, RequestHash: "h", CreatedAt: t0}
	if err := appTx(t, s, func(tx orderpay.AppTx) error {
		if err := tx.ReserveAppRefund(ctx, paid.PaymentNo, 300, t0); err != nil {
			return err
		}
		return tx.CreateAppRefund(ctx, r)
	}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error { return tx.ReserveAppRefund(ctx, paid.PaymentNo, 201, t0) }), orderpay.ECONFLICT)
	wantCode(t, appTx(t, s, func(tx orderpay.AppTx) error {
		if err := tx.ReserveAppRefund(ctx, paid.PaymentNo, 100, t0); err != nil {
			return err
		}
		dup := *r
		dup.OutRefundNo = "AR2"
		return tx.CreateAppRefund(ctx, &dup) // the same refund number: the reservation rolls back with it
	}), orderpay.ECONFLICT)
	if p, _ := as.AppPayment(ctx, paid.PaymentNo); p.RefundReserved != 300 {
		t.Fatalf("reserved %d after a refused refund, want 300", p.RefundReserved)
	}
	if err := appTx(t, s, func(tx orderpay.AppTx) error { return tx.ReserveAppRefund(ctx, paid.PaymentNo, 200, t0) }); err != nil {
		t.Fatalf("the rest: %v", err)
	}
	if got, err := as.AppRefundByNo(ctx, "app_1", "R1"); err != nil || got.OutRefundNo != "AR1" || got.Amount != 300 {
		t.Fatalf("refund by number %+v, %v", got, err)
	}
	if list, err := as.AppRefunds(ctx, "app_1", orderpay.AppFilter{PaymentNo: paid.PaymentNo}, 10); err != nil || len(list) != 1 {
		t.Fatalf("refunds of the payment %+v, %v", list, err)
	}
	if list, err := as.AppPayments(ctx, "app_1", orderpay.AppFilter{}, 10); err != nil || len(list) != 2 || list[0].PaymentNo != "PAP9" {
		t.Fatalf("payments, newest number first: %+v, %v", list, err)
	}
}

// Two refunds of one payment race, the first holding its commit while the second waits on
// the payment's row: on PostgreSQL under READ COMMITTED the second re-reads the row after the
// first commits, and the conditional update refuses what would pass the amount. Two that fit
// together both pass.
func testAppRefundRace(t *testing.T, s orderpay.Store) {
	const pattern = "UPDATE app_payments SET refund_reserved%"
	reserve := func(no string, amount int64) func(ctx context.Context, tx orderpay.Tx) error {
		return func(ctx context.Context, tx orderpay.Tx) error {
			return tx.(orderpay.AppTx).ReserveAppRefund(ctx, no, amount, t0)
		}
	}
	as := s.(orderpay.AppStore)
	over := paidAppPayment(t, s, "app_r", "APR1", 1000)
	first, second := raceHeldOn(t, s, pattern, reserve(over.PaymentNo, 600), reserve(over.PaymentNo, 600))
	if first != nil || orderpay.ErrorCode(second) != orderpay.ECONFLICT {
		t.Fatalf("600 + 600 of 1000: first %v, second %v; want the second refused", first, second)
	}
	if p, _ := as.AppPayment(context.Background(), over.PaymentNo); p.RefundReserved != 600 {
		t.Fatalf("reserved %d, want 600", p.RefundReserved)
	}
	fit := paidAppPayment(t, s, "app_r", "APR2", 1000)
	first, second = raceHeldOn(t, s, pattern, reserve(fit.PaymentNo, 400), reserve(fit.PaymentNo, 600))
	if first != nil || second != nil {
		t.Fatalf("400 + 600 of 1000: %v, %v", first, second)
	}
	if p, _ := as.AppPayment(context.Background(), fit.PaymentNo); p.RefundReserved != 1000 {
		t.Fatalf("reserved %d, want 1000", p.RefundReserved)
	}
}

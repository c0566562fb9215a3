package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/chaos"
	"orderpay/sqlstore/storetest"
)

// payingCenter is the payment center with a hook in its Close: once the real close has
// answered, before the caller acts on the answer, afterClose runs (the buyer pays, say).
type payingCenter struct {
	orderpay.PaymentCenter
	afterClose func(orderpay.CloseOutcome)
}

func (p payingCenter) Close(ctx context.Context, orderNo string) (orderpay.CloseOutcome, error) {
	out, err := p.PaymentCenter.Close(ctx, orderNo)
	if err == nil && p.afterClose != nil {
		p.afterClose(out)
	}
	return out, err
}

func TestAppCloseRacingThePaymentSQLite(t *testing.T) {
	t.Parallel()
	appCloseRacingThePayment(t, "")
}

func TestAppCloseRacingThePaymentPostgres(t *testing.T) {
	t.Parallel()
	appCloseRacingThePayment(t, storetest.PostgresDSN(t))
}

// An app closes its Alipay payment whose code nobody scanned: the payment center's close
// answers "not paid yet" (an unscanned code cannot be closed). Between that answer and the
// app payment's CLOSED, the buyer scans and pays, and the payment turns SUCCESS. The close
// must then answer that it was paid (EPAID), keep the payment SUCCESS, and write no
// app.payment.closed: the app is never told both. (Review defect 1: the close moved the
// SUCCESS payment to CLOSED and answered 200.)
func appCloseRacingThePayment(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	app, err := c.CreateApp(ctx, "top-ups", nil, []string{orderpay.ChannelAlipay})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateAppPayment(ctx, app.APIKey, chaos.AppPaymentRequest{MerchantOrderNo: "RACE-1", Amount: 1200, Subject: "Top-up",
		Channel: orderpay.ChannelAlipay, ExpiresInSeconds: 900})
	if err != nil {
		t.Fatal(err)
	}
	status := func() orderpay.AppPaymentStatus {
		ap, err := m.Store.AppPayment(ctx, p.PaymentNo)
		if err != nil {
			t.Fatal(err)
		}
		return ap.Status
	}
	var answered orderpay.CloseOutcome
	center := payingCenter{PaymentCenter: m.Payments, afterClose: func(out orderpay.CloseOutcome) {
		answered = out
		if err := c.walletPay(ctx, p.QRCode); err != nil {
			t.Error(err)
			return
		}
		waitFor(t, 30*time.Second, "the app payment to turn SUCCESS", func() bool { return status() == orderpay.AppPaymentSuccess })
	}}
	svc, err := apppay.New(apppay.Config{Store: m.Store, Payments: center, Channels: []string{orderpay.ChannelAlipay},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Store.App(ctx, app.AppID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ClosePayment(ctx, a, p.PaymentNo)
	if answered != orderpay.CloseNotPaidYet {
		t.Fatalf("the payment center's close answered %q; the race needs %q", answered, orderpay.CloseNotPaidYet)
	}
	if code := orderpay.ErrorCode(err); code != orderpay.EPAID {
		t.Errorf("the close answered %v (code %q), want %s: the buyer paid before it committed", err, code, orderpay.EPAID)
	}
	if got := status(); got != orderpay.AppPaymentSuccess {
		t.Errorf("the app payment is %s, want SUCCESS", got)
	}
	// Through the API too: a close of a paid payment is EPAID, and changes nothing.
	if _, err := c.CloseAppPayment(ctx, app.APIKey, p.PaymentNo); apiCode(err) != orderpay.EPAID {
		t.Errorf("closing the paid payment through the API: %v, want %s", err, orderpay.EPAID)
	}
	var subjects []string
	rows, err := m.Store.DB().QueryContext(ctx, m.Store.Rebind(`SELECT subject, payload FROM outbox WHERE subject LIKE 'app.%'`))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var subject, payload string
		if err := rows.Scan(&subject, &payload); err != nil {
			t.Fatal(err)
		}
		var body struct {
			PaymentNo string `json:"payment_no"`
		}
		if json.Unmarshal([]byte(payload), &body) == nil && body.PaymentNo == p.PaymentNo {
			subjects = append(subjects, subject)
		}
	}
	if len(subjects) != 1 || subjects[0] != orderpay.SubjectAppPaymentSucceeded {
		t.Errorf("the app's events of the payment: %v, want only %s", subjects, orderpay.SubjectAppPaymentSucceeded)
	}
	if n := m.refundedAtChannel(p.PaymentNo + "A01"); n != 0 {
		t.Errorf("%d fen of the paid payment went back", n)
	}
}

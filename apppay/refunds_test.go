package apppay_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/sqlstore/storetest"
)

// stubCenter is a payment center that is never asked anything in these tests.
type stubCenter struct{ orderpay.PaymentCenter }

// paid stores a SUCCESS app payment of amount with its paid payment-center payment.
func paid(t *testing.T, s orderpay.AppStore, app *orderpay.App, key string, amount int64) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	err := s.InAppTx(ctx, func(tx orderpay.AppTx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + key, OrderNo: key, Amount: amount, Status: orderpay.PaymentSuccess,
			Subject: "x", PayDeadline: now.Add(time.Hour), PaidChannel: "alipay", PaidOutTradeNo: "P" + key + "A01", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + key + "A01", PaymentNo: "P" + key, Channel: "alipay", Seq: 1,
			Amount: amount, Status: orderpay.ChannelOrderSuccess, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.CreateAppPayment(ctx, &orderpay.AppPayment{PaymentNo: "P" + key, OrderKey: key, AppID: app.ID, MerchantOrderNo: "M" + key,
			Amount: amount, Subject: "x", Channel: "alipay", ExpiresAt: now.Add(time.Hour), Status: orderpay.AppPaymentSuccess, RequestHash: "h",
			CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	return "P" + key
}

// The refund arithmetic of app refunds over random sequences of requests: new refunds of
// any amount (nothing, too much, exactly what is left, partial), the same request again (a
// retry), the same number with another amount, another app's key. Against a model, after
// every step: a request is accepted exactly when its amount is positive and at most what is
// left; a retry returns the same refund and changes nothing; a refused request writes
// nothing; the payment's reserved total is the sum of its accepted refunds, never more than
// its amount; and each accepted refund is one channel refund of that amount, of the paid
// attempt.
func TestAppRefundArithmeticOverSequences(t *testing.T) {
	t.Parallel()
	store := storetest.OpenSQLite(t)
	svc, err := apppay.New(apppay.Config{Store: store, Payments: stubCenter{}, Channels: []string{"alipay"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app, _, err := svc.CreateApp(ctx, apppay.CreateAppRequest{Name: "a", Channels: []string{"alipay"}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := svc.CreateApp(ctx, apppay.CreateAppRequest{Name: "b", Channels: []string{"alipay"}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	for seq := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seq), 7))
		amount := 1 + rng.Int64N(5000)
		paymentNo := paid(t, store, app, fmt.Sprintf("AP%020d", seq), amount)
		type accepted struct {
			amount int64
			out    string
		}
		model := map[string]accepted{} // refund_no → what was accepted
		var sum int64
		for step := range 30 {
			no := fmt.Sprintf("S%d-R%d", seq, rng.IntN(8))
			var amt int64
			switch rng.IntN(5) {
			case 0:
				amt = 0 // nothing
			case 1:
				amt = amount - sum // exactly what is left
			case 2:
				amt = amount - sum + 1 + rng.Int64N(100) // too much
			default:
				amt = 1 + rng.Int64N(max(1, amount/3)) // partial
			}
			if prev, ok := model[no]; ok && rng.IntN(2) == 0 {
				amt = prev.amount // the same request again
			}
			reason := "r" // the same reason every time: the body is the number and the amount
			caller := app
			if rng.IntN(10) == 0 {
				caller = other
			}
			v, replayed, err := svc.CreateRefund(ctx, caller, paymentNo, apppay.CreateRefundRequest{RefundNo: no, Amount: amt, Reason: reason})
			prev, known := model[no]
			known = known && caller == app
			want := ""
			switch {
			case amt <= 0:
				want = orderpay.EINVALID
			case caller == other:
				want = orderpay.ENOTFOUND
			case known && prev.amount != amt:
				want = orderpay.EIDEMPOTENCY
			case known:
				// a retry
			case amt > amount-sum:
				want = orderpay.ECONFLICT
			}
			if got := orderpay.ErrorCode(err); got != want {
				t.Fatalf("seq %d step %d: refund %s of %d (left %d): %v, want %q", seq, step, no, amt, amount-sum, err, want)
			}
			if err == nil {
				if known {
					if !replayed || v.OutRefundNo != prev.out {
						t.Fatalf("seq %d step %d: a retry of %s made %+v (replayed %v)", seq, step, no, v, replayed)
					}
				} else {
					if replayed {
						t.Fatalf("seq %d step %d: a new refund replayed", seq, step)
					}
					model[no] = accepted{amt, v.OutRefundNo}
					sum += amt
				}
			}
			ap, err := store.AppPayment(ctx, paymentNo)
			if err != nil {
				t.Fatal(err)
			}
			if ap.RefundReserved != sum || sum > amount {
				t.Fatalf("seq %d step %d: reserved %d, the accepted refunds sum to %d, amount %d", seq, step, ap.RefundReserved, sum, amount)
			}
			rows, err := store.AppRefunds(ctx, app.ID, orderpay.AppFilter{PaymentNo: paymentNo}, 100)
			if err != nil || len(rows) != len(model) {
				t.Fatalf("seq %d step %d: %d refund rows, %d accepted, %v", seq, step, len(rows), len(model), err)
			}
			channelRefunds, err := store.ChannelRefunds(ctx, paymentNo+"A01")
			if err != nil || len(channelRefunds) != len(model) {
				t.Fatalf("seq %d step %d: %d channel refunds, %d accepted, %v", seq, step, len(channelRefunds), len(model), err)
			}
			var channelSum int64
			for _, r := range channelRefunds {
				channelSum += r.Amount
				if r.Reason != orderpay.RefundReasonApp || r.PaymentNo != paymentNo || r.Status != orderpay.ChannelRefundPending {
					t.Fatalf("seq %d step %d: channel refund %+v", seq, step, r)
				}
			}
			if channelSum != sum {
				t.Fatalf("seq %d step %d: channel refunds sum to %d, accepted %d", seq, step, channelSum, sum)
			}
		}
	}
}

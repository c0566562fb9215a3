package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/chaos"
	"orderpay/sqlstore/storetest"
)

// Barcode payments at the counter through the shop's production code path: `orderpay sim`
// runs as a process of its own in each key mode of each channel, and `serve --channels`
// takes a till's payments (an app of the payments API) with the simulated buyers' codes:
//   - each outcome: paid at once, after a password, after a wrong password and then the
//     right one; a short balance REFUSED; a buyer who walks away CANCELLED at Alipay (the
//     trade cancelled) and, at WeChat, UNKNOWN to the till and then ended by the safety net
//     once WeChat ends it (PAYERROR), nothing paid;
//   - a walk-in sale paid by code refunds in part and in full through the payments API;
//   - one of the shop's orders paid at the till becomes PAID;
//   - a till that retries with the same Idempotency-Key gets the same payment; another
//     request under the key is refused; a code of no channel writes nothing;
//   - an answer lost after the payment took effect: the loop's query finds it paid;
//   - a reverse whose answer was lost while the buyer paid: the reverse, sent again,
//     refunds the payment (the reverse of a paid trade refunds it) and the till hears
//     CANCELLED.
func TestBarcodePaymentsAtTheTill(t *testing.T) {
	t.Parallel()
	runs := []struct{ alipay, wechat, engine string }{{"key", "pubkey", "sqlite"}, {"cert", "certificate", "sqlite"}}
	if os.Getenv("ORDERPAY_TEST_PG") != "" {
		runs = append(runs, struct{ alipay, wechat, engine string }{"key", "certificate", "postgres"},
			struct{ alipay, wechat, engine string }{"cert", "pubkey", "postgres"})
	}
	for _, run := range runs {
		t.Run("alipay-"+run.alipay+"-wechat-"+run.wechat+"-"+run.engine, func(t *testing.T) {
			t.Parallel()
			db := ""
			if run.engine == "postgres" {
				db = storetest.PostgresDSN(t)
			}
			barcodeAtTheTill(t, db, run.alipay, run.wechat)
		})
	}
}

func barcodeAtTheTill(t *testing.T, db, alipayMode, wechatMode string) {
	dir := t.TempDir()
	// WeChat keeps a walked-away buyer's trade USERPAYING for 25 s here (a minute by
	// default), so that the safety net's end comes within the test.
	simURL, channels := startSimProcess(t, dir, alipayMode, wechatMode, "--refund-delay", "1s", "--wechat-userpaying-for", "25s")
	m, _ := startMain(t, db, func(m *Main) {
		m.Config.Channels = channels
		m.Config.PosWait = 20 * time.Second
	})
	c := newAPIClient(m.URL, simURL, m.AdminToken)
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	app, err := c.CreateApp(ctx, "counter", nil, []string{"alipay", "wechat"})
	if err != nil {
		t.Fatal(err)
	}
	key := app.APIKey
	code := func(t *testing.T, channel, behaviour string, after time.Duration) string {
		t.Helper()
		v, err := c.IssueCode(ctx, channel, "walk-in", behaviour, after)
		if err != nil {
			t.Fatal(err)
		}
		return v.AuthCode
	}
	walkIn := func(t *testing.T, idem, auth string, amount int64) *chaos.PosView {
		t.Helper()
		v, err := c.PosPay(ctx, key, idem, chaos.PosRequest{AuthCode: auth, Amount: amount, StoreID: "sh-01", TillID: "t3", Description: "Coffee"})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	appPayment := func(t *testing.T, no string) *chaos.AppPaymentView {
		t.Helper()
		p, err := c.AppPayment(ctx, key, no)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// A code of no channel, or a request without a key, writes nothing.
	before := rowCounts(t, m)
	for name, req := range map[string]chaos.PosRequest{
		"UnionPay code":      {AuthCode: "624567890123456789", Amount: 100},
		"17 digits":          {AuthCode: "13456789012345678", Amount: 100},
		"no amount or order": {AuthCode: code(t, "wechat", "confirm", 0)},
	} {
		if _, err := c.PosPay(ctx, key, "bad-"+fmt.Sprint(len(name)), req); apiCode(err) != orderpay.EINVALID {
			t.Fatalf("%s: %v, want EINVALID", name, err)
		}
	}
	if _, err := c.PosPay(ctx, key, "", chaos.PosRequest{AuthCode: code(t, "wechat", "confirm", 0), Amount: 100}); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("without an Idempotency-Key: %v, want EINVALID", err)
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("refused requests wrote rows: %v → %v", before, after)
	}

	var wg sync.WaitGroup
	for _, channel := range []string{"alipay", "wechat"} {
		for _, tc := range []struct {
			behaviour string
			after     time.Duration
			want      string
			refusal   string
		}{
			{"confirm", 0, "PAID", ""},
			{"password", 6 * time.Second, "PAID", ""},
			{"wrong_password", 6 * time.Second, "PAID", ""},
			{"short", 0, "REFUSED", "BALANCE"},
			{"never", 0, map[string]string{"alipay": "CANCELLED", "wechat": "UNKNOWN"}[channel], ""},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := channel + " " + tc.behaviour
				v, err := c.PosPay(ctx, key, "sale-"+channel+"-"+tc.behaviour, chaos.PosRequest{AuthCode: code(t, channel, tc.behaviour, tc.after),
					Amount: 1250, StoreID: "sh-01", TillID: "t3"})
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				if v.Status != tc.want || v.Refusal != tc.refusal || v.Channel != channel || v.Message == "" || v.MessageZh == "" {
					t.Errorf("%s: %+v, want %s %q", name, v, tc.want, tc.refusal)
					return
				}
				if v.Status == "UNKNOWN" {
					// The safety net ends it once WeChat has ended it, nothing paid, and
					// settles the walk-in sale with it, though the till never asks again.
					deadline := time.Now().Add(60 * time.Second)
					for appPayment(t, v.PaymentNo).Status != "CLOSED" {
						if time.Now().After(deadline) {
							t.Errorf("%s: the walk-in sale is still %s after its barcode payment ended", name, appPayment(t, v.PaymentNo).Status)
							return
						}
						time.Sleep(250 * time.Millisecond)
					}
					if v, err = c.PosPayment(ctx, key, v.No); err != nil || v.Status != "CANCELLED" || v.Answered != "CANCELLED" {
						t.Errorf("%s after the wait: %+v, %v; want CANCELLED", name, v, err)
						return
					}
				}
				p := appPayment(t, v.PaymentNo)
				wantApp := map[string]string{"PAID": "SUCCESS", "REFUSED": "CLOSED", "CANCELLED": "CLOSED"}[v.Status]
				if p.Status != wantApp {
					// The close of an ended sale may be the deadline's: give it a moment.
					deadline := time.Now().Add(10 * time.Second)
					for p.Status != wantApp && time.Now().Before(deadline) {
						time.Sleep(200 * time.Millisecond)
						p = appPayment(t, v.PaymentNo)
					}
				}
				if p.Status != wantApp {
					t.Errorf("%s: the walk-in sale's app payment is %s, want %s", name, p.Status, wantApp)
				}
			}()
		}
	}

	// A paid walk-in sale refunds in part, then in full, through the one refund path.
	for _, channel := range []string{"alipay", "wechat"} {
		v := walkIn(t, "refund-"+channel, code(t, channel, "confirm", 0), 3000)
		if v.Status != "PAID" {
			t.Fatalf("%s: %+v", channel, v)
		}
		if _, err := c.RefundAppPayment(ctx, key, v.PaymentNo, "r1-"+channel, 1000, "one cup back"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RefundAppPayment(ctx, key, v.PaymentNo, "r2-"+channel, 2000, "the rest"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			p := appPayment(t, v.PaymentNo)
			if p.Refunded == 3000 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: refunded %d of 3000", channel, p.Refunded)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The same key and body again: the same payment; with another body: refused.
	auth := code(t, "alipay", "confirm", 0)
	first := walkIn(t, "retry-key", auth, 990)
	again := walkIn(t, "retry-key", auth, 990)
	if first.Status != "PAID" || again.No != first.No || !again.Replayed || first.Replayed {
		t.Fatalf("a till's retry: %+v then %+v", first, again)
	}
	if _, err := c.PosPay(ctx, key, "retry-key", chaos.PosRequest{AuthCode: auth, Amount: 991}); apiCode(err) != orderpay.EIDEMPOTENCY {
		t.Fatalf("the same key with another amount: %v, want EIDEMPOTENCY", err)
	}

	// One of the shop's orders, paid at the till.
	if err := c.createSKU(ctx, "beans", 4200, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.As("counter-buyer").CreateOrder(ctx, "counter-buyer", "", chaos.Item{SKU: "beans", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	orderReq := chaos.PosRequest{AuthCode: code(t, "wechat", "password", 3*time.Second), OrderNo: o.OrderNo, TillID: "t3"}
	v, err := c.PosPay(ctx, key, "order-"+o.OrderNo, orderReq)
	if err != nil || v.Status != "PAID" || v.OrderNo != o.OrderNo || v.Amount != 4200 {
		t.Fatalf("the order at the till: %+v, %v", v, err)
	}
	if _, err := c.WaitStatus(ctx, o.OrderNo, "PAID", 100*time.Millisecond); err != nil {
		t.Fatalf("the order paid at the till: %v", err)
	}
	// The till's retry, once the order is PAID, is told its payment: not that the order
	// cannot be paid any more.
	again, err = c.PosPay(ctx, key, "order-"+o.OrderNo, orderReq)
	if err != nil || again.No != v.No || again.Status != "PAID" || !again.Replayed {
		t.Fatalf("the till's retry of the paid order: %+v, %v", again, err)
	}

	// An answer lost after the payment took effect: the loop's query finds it paid.
	if err := c.Call(ctx, http.MethodPost, simURL+"/sim/faults", nil, map[string]any{"rules": []map[string]any{
		{"channel": "wechat", "method": "pay", "kind": "timeout", "applied": true, "delay": "3s", "limit": 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	lost := walkIn(t, "lost-answer", code(t, "wechat", "confirm", 0), 1800)
	var status struct {
		Fired []int `json:"fired"`
	}
	if err := c.Call(ctx, http.MethodGet, simURL+"/sim/faults", nil, nil, &status); err != nil || len(status.Fired) != 1 || status.Fired[0] != 1 {
		t.Fatalf("the fault: %+v, %v", status, err)
	}
	if lost.Status != "PAID" {
		t.Fatalf("after a lost answer: %+v, want PAID", lost)
	}
	wg.Wait()

	// The reverse of a paid trade refunds it. Alipay's cancel of a walked-away buyer's trade
	// gets no answer (it did nothing), and the buyer pays meanwhile: the query then says
	// paid while a reverse may have taken effect, so it is not believed; the cancel is sent
	// again and refunds the payment (action=refund). The till hears CANCELLED, the sale
	// closes, and the channel shows the payment and its full refund.
	if err := c.Call(ctx, http.MethodPost, simURL+"/sim/faults", nil, map[string]any{"rules": []map[string]any{
		{"channel": "alipay", "method": "cancel", "kind": "timeout", "delay": "3s", "limit": 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	late := code(t, "alipay", "never", 0)
	done := make(chan *chaos.PosView, 1)
	go func() {
		v, err := c.PosPay(ctx, key, "paid-then-reversed", chaos.PosRequest{AuthCode: late, Amount: 2600, TillID: "t3"})
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	for status.Fired = nil; len(status.Fired) != 1 || status.Fired[0] != 1; {
		if ctx.Err() != nil {
			t.Fatal("the cancel never came")
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Call(ctx, http.MethodGet, simURL+"/sim/faults", nil, nil, &status); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Call(ctx, http.MethodPost, simURL+"/sim/wallet/codes/"+late+"/confirm", nil, nil, nil); err != nil {
		t.Fatalf("the buyer confirms while the cancel is on its way: %v", err)
	}
	rv := <-done
	if rv == nil {
		t.FailNow()
	}
	if rv.Status == "UNKNOWN" {
		if rv, err = c.WaitPos(ctx, key, rv.No, 250*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if rv.Status != "CANCELLED" {
		t.Fatalf("a payment the reverse refunded: %+v, want CANCELLED", rv)
	}
	// The channel settles the refund after its refund delay (1 s here).
	type ledgerEntry struct {
		OutTradeNo string `json:"out_trade_no"`
		Amount     int64  `json:"amount"`
		Refunded   int64  `json:"refunded"`
		PaidAt     string `json:"paid_at"`
	}
	var trade ledgerEntry
	for settle := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var ledger []ledgerEntry
		if err := c.Call(ctx, http.MethodGet, simURL+"/sim/ledger", nil, nil, &ledger); err != nil {
			t.Fatal(err)
		}
		for _, l := range ledger {
			if l.OutTradeNo == rv.No {
				trade = l
			}
		}
		if trade.PaidAt != "" && trade.Amount == 2600 && trade.Refunded == trade.Amount {
			break
		}
		if time.Now().After(settle) {
			t.Fatalf("at the channel: %+v, want paid and refunded in full", trade)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for appPayment(t, rv.PaymentNo).Status != "CLOSED" {
		if time.Now().After(deadline) {
			t.Fatalf("the sale whose payment went back is %s", appPayment(t, rv.PaymentNo).Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package payment_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// tillApp is the app the tests' tills belong to (till_payments name one).
const tillApp = "app_till0000000001"

// barcodeSetup makes the tills' app in b's store and moves b's clock by step every
// millisecond of wall time until the test ends: the barcode loop and the simulator's
// buyers keep time on it, so a 35 s wait passes in a fraction of a second.
func barcodeSetup(t *testing.T, b *bundle, step time.Duration) {
	t.Helper()
	as, ok := b.cfg.Store.(orderpay.AppStore)
	if !ok {
		t.Fatal("the store keeps no apps")
	}
	err := as.InAppTx(context.Background(), func(tx orderpay.AppTx) error {
		now := b.clock.Now()
		return tx.CreateApp(context.Background(), &orderpay.App{ID: tillApp, Name: "till", WebhookURLs: []string{},
			WebhookSecret: "whsec_x", Channels: []string{"alipay", "wechat"}, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				b.clock.Advance(step)
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}

// barcodeRequest is a till's payment of 12.50 yuan for orderNo with code, under key.
func (b *bundle) barcodeRequest(orderNo, code, key string) orderpay.BarcodeRequest {
	return orderpay.BarcodeRequest{OrderNo: orderNo, Amount: 1250, Subject: "Coffee", Deadline: b.clock.Now().Add(15 * time.Minute),
		AuthCode: code, ClientIP: "10.0.0.8", Till: orderpay.TillPayment{AppID: tillApp, IdempotencyKey: key,
			RequestHash: "hash-" + key + "-" + code, StoreID: "s1", TillID: "t1"}}
}

func (b *bundle) issueCode(t *testing.T, channel, behaviour string, after time.Duration) string {
	t.Helper()
	c, err := b.sim.IssueCode(channel, "buyer-"+behaviour, behaviour, after)
	if err != nil {
		t.Fatal(err)
	}
	return c.AuthCode
}

// ledgerOf is the simulator's ledger entry of outTradeNo (Status "" when the channel has
// no such trade: a refused payment call leaves none at Alipay).
func (b *bundle) ledgerOf(outTradeNo string) sim.LedgerEntry {
	for _, l := range b.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	return sim.LedgerEntry{}
}

// Every outcome of a barcode payment, for both channels, on both engines: the till's answer,
// the attempt and the payment as recorded, and the trade at the channel agree.
func TestBarcodeOutcomes(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		type outcome struct {
			channel, behaviour string
			after              time.Duration
			want               orderpay.BarcodeStatus
			refusal            orderpay.BarcodeRefusal
			attempt            orderpay.ChannelOrderStatus
			paidAtChannel      bool
		}
		cases := []outcome{
			{"alipay", sim.CodeConfirm, 0, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"wechat", sim.CodeConfirm, 0, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"alipay", sim.CodePassword, 12 * time.Second, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"wechat", sim.CodePassword, 12 * time.Second, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"alipay", sim.CodeWrongPassword, 8 * time.Second, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"wechat", sim.CodeWrongPassword, 8 * time.Second, orderpay.BarcodePaid, "", orderpay.ChannelOrderSuccess, true},
			{"alipay", sim.CodeShort, 0, orderpay.BarcodeRefused, orderpay.RefusalBalance, orderpay.ChannelOrderFailed, false},
			{"wechat", sim.CodeShort, 0, orderpay.BarcodeRefused, orderpay.RefusalBalance, orderpay.ChannelOrderFailed, false},
			// Alipay's waiting trade is cancelled once the buyer has had their time.
			{"alipay", sim.CodeNever, 0, orderpay.BarcodeCancelled, "", orderpay.ChannelOrderClosed, false},
		}
		var wg sync.WaitGroup
		for i, tc := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				orderNo := fmt.Sprintf("B%s%02d", engine[:2], i)
				res, err := b.svc.PayBarcode(ctx, b.barcodeRequest(orderNo, b.issueCode(t, tc.channel, tc.behaviour, tc.after), fmt.Sprint("k", i)))
				if err != nil {
					t.Errorf("%s %s: %v", tc.channel, tc.behaviour, err)
					return
				}
				co, err := b.store.ChannelOrder(ctx, res.Till.OutTradeNo)
				if err != nil {
					t.Error(err)
					return
				}
				p, _ := b.store.Payment(ctx, co.PaymentNo)
				l := b.ledgerOf(co.OutTradeNo)
				paidAtChannel := !l.PaidAt.IsZero()
				if res.Status != tc.want || res.Refusal != tc.refusal || co.Status != tc.attempt || co.Method != orderpay.MethodBarcode ||
					paidAtChannel != tc.paidAtChannel || res.Till.Answer != tc.want {
					t.Errorf("%s %s: answered %s %q (recorded %q), attempt %s %s, the channel's trade %s; want %s %q, attempt %s, paid at the channel %v",
						tc.channel, tc.behaviour, res.Status, res.Refusal, res.Till.Answer, co.Status, co.Method, l.Status, tc.want, tc.refusal, tc.attempt, tc.paidAtChannel)
				}
				if (p.Status == orderpay.PaymentSuccess) != (tc.want == orderpay.BarcodePaid) {
					t.Errorf("%s %s: the payment is %s after %s", tc.channel, tc.behaviour, p.Status, res.Status)
				}
			}()
		}
		wg.Wait()
		if got := b.results.count(); got != 6 {
			t.Errorf("the order system was told of %d payments, want 6", got)
		}
	})
}

// WeChat keeps the trade of a buyer who walked away from the password dialog USERPAYING for
// a minute and refuses a reverse meanwhile: the till hears UNKNOWN at the end of its wait,
// and the safety net ends the trade once WeChat has (PAYERROR), with nothing paid.
func TestBarcodeAWeChatBuyerWhoWalkedAwayIsEndedByTheSafetyNet(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		res, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BW"+engine[:2], b.issueCode(t, "wechat", sim.CodeNever, 0), "k1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != orderpay.BarcodeUnknown || res.Till.Answer != "" {
			t.Fatalf("after the till's wait: %s (answer %q), want UNKNOWN and no answer recorded", res.Status, res.Till.Answer)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := b.svc.QueryDue(ctx, 10, 2); err != nil {
				t.Fatal(err)
			}
			st, err := b.svc.BarcodeStatus(ctx, res.Till.OutTradeNo)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != orderpay.BarcodeUnknown {
				if st.Status != orderpay.BarcodeCancelled || st.Till.Answer != orderpay.BarcodeCancelled {
					t.Fatalf("the safety net ended it as %s (answer %q), want CANCELLED", st.Status, st.Till.Answer)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %s on the simulator's clock at %s", st.Status, b.clock.Now())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if l := b.ledgerOf(res.Till.OutTradeNo); !l.PaidAt.IsZero() || l.Status == "" {
			t.Fatalf("the trade is %q at the channel, paid at %v", l.Status, l.PaidAt)
		}
	})
}

// cancelGate runs a hook as Alipay's cancel of a barcode trade reaches the simulator.
type cancelGate struct {
	next   http.Handler
	mu     sync.Mutex
	before func()
}

func (g *cancelGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() == nil && r.Form.Get("method") == "alipay.trade.cancel" {
		g.mu.Lock()
		f := g.before
		g.before = nil
		g.mu.Unlock()
		if f != nil {
			f()
		}
	}
	g.next.ServeHTTP(w, r)
}

// The buyer confirms between the till's last query and its cancel (the worst moment):
// Alipay's cancel then refunds the trade (action=refund). The attempt is recorded paid
// and its money back in one transaction, the sale is not paid, and the till hears
// CANCELLED.
func TestBarcodePaymentBetweenTheLastQueryAndTheCancelGoesBack(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		gate := &cancelGate{next: b.gw.next}
		b.gw.next = gate
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		code := b.issueCode(t, "alipay", sim.CodeNever, 0)
		gate.before = func() {
			if _, err := b.sim.ConfirmCode(code); err != nil {
				t.Errorf("the buyer confirms: %v", err)
			}
		}
		res, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BR"+engine[:2], code, "k1"))
		if err != nil {
			t.Fatal(err)
		}
		co, _ := b.store.ChannelOrder(ctx, res.Till.OutTradeNo)
		p, _ := b.store.Payment(ctx, co.PaymentNo)
		refunds, _ := b.store.ChannelRefunds(ctx, co.OutTradeNo)
		if res.Status != orderpay.BarcodeCancelled || co.Status != orderpay.ChannelOrderSuccess || p.Status == orderpay.PaymentSuccess ||
			len(refunds) != 1 || refunds[0].Status != orderpay.ChannelRefundSuccess || refunds[0].Amount != 1250 ||
			refunds[0].Reason != orderpay.RefundReasonReversed {
			t.Fatalf("answered %s; attempt %s, payment %s, refunds %+v", res.Status, co.Status, p.Status, refunds)
		}
		if b.results.count() != 0 {
			t.Fatal("the order system was told of a payment that went back")
		}
	})
}

// A payment call whose answer is lost after it took effect (the buyer paid at once) is
// unknown; the loop's query finds it paid.
func TestBarcodeUnknownAnswerThatWasPaid(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		for i, channel := range []string{"alipay", "wechat"} {
			if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: channel, Method: sim.MethodPay,
				Kind: sim.FaultTimeout, Applied: true, Delay: sim.Duration(3 * time.Second), Limit: 1}}}); err != nil {
				t.Fatal(err)
			}
			res, err := b.svc.PayBarcode(ctx, b.barcodeRequest(fmt.Sprintf("BU%s%d", engine[:2], i), b.issueCode(t, channel, sim.CodeConfirm, 0), fmt.Sprint("k", i)))
			if err != nil {
				t.Fatal(err)
			}
			if st := b.sim.Faults(); st.Fired[0] != 1 {
				t.Fatalf("%s: the fault fired %d times", channel, st.Fired[0])
			}
			if res.Status != orderpay.BarcodePaid {
				t.Fatalf("%s: %s after an answer lost, want PAID", channel, res.Status)
			}
		}
	})
}

// A till that retries, twice at once, with the same Idempotency-Key gets one payment: one
// attempt, one payment call, one charge. The same key with another request is refused.
func TestBarcodeTillRetriesWithTheSameKey(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		code := b.issueCode(t, "wechat", sim.CodePassword, 6*time.Second)
		req := b.barcodeRequest("BK"+engine[:2], code, "same-key")
		var wg sync.WaitGroup
		results := make([]*orderpay.BarcodeResult, 3)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.svc.PayBarcode(ctx, req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				results[i] = res
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		replayed := 0
		for _, r := range results {
			if r.Till.OutTradeNo != results[0].Till.OutTradeNo || r.Status != orderpay.BarcodePaid {
				t.Fatalf("results %+v", results)
			}
			if r.Replayed {
				replayed++
			}
		}
		if replayed != 2 {
			t.Fatalf("%d of 3 replayed, want 2", replayed)
		}
		attempts, _ := b.store.ChannelOrders(ctx, results[0].Till.PaymentNo)
		if len(attempts) != 1 {
			t.Fatalf("%d attempts", len(attempts))
		}
		if calls := b.sim.Calls()["wechat."+sim.MethodPay]; calls != 1 {
			t.Fatalf("%d payment calls at the channel, want 1 (%v)", calls, b.sim.Calls())
		}
		other := req
		other.Till.RequestHash = "another request"
		if _, err := b.svc.PayBarcode(ctx, other); orderpay.ErrorCode(err) != orderpay.EIDEMPOTENCY {
			t.Fatalf("the same key with another request: %v, want EIDEMPOTENCY", err)
		}
	})
}

// A code of no channel is refused before anything is written or sent.
func TestBarcodeCodeOfNoChannelWritesNothing(t *testing.T) {
	b := setup(t)
	barcodeSetup(t, b, time.Millisecond)
	ctx := context.Background()
	for _, code := range []string{"624567890123456789", "1345678901234567", "abc", ""} {
		if _, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BN1", code, "k")); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Fatalf("code %q: %v, want EINVALID", code, err)
		}
	}
	if _, err := b.store.PaymentByOrder(ctx, "BN1"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a payment was written: %v", err)
	}
	if len(b.sim.Ledger()) != 0 {
		t.Fatal("the channel heard of it")
	}
}

// The buyer confirms just before Alipay's cancel, the cancel refunds the payment, and its
// answer is lost. Alipay's query still shows the payment: it must not be taken for one
// (the till told PAID while the money went back). The cancel is sent again, its answer
// (action=refund) says what happened, and the attempt is recorded paid and refunded: with
// its contract's fee, all of which the reverse's refund expects back.
func TestBarcodeCancelWhoseAnswerIsLostAfterItRefunded(t *testing.T) {
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		rule := orderpay.FeeRule{Rate: 38000, RefundReturnsFee: true}
		b.cfg.Fees = orderpay.FeeSchedule{"alipay": rule}
		b.svc = b.twin(t, b.store)
		gate := &cancelGate{next: b.gw.next}
		b.gw.next = gate
		barcodeSetup(t, b, 50*time.Millisecond)
		ctx := context.Background()
		if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "alipay", Method: sim.MethodCancel,
			Kind: sim.FaultTimeout, Applied: true, Limit: 1}}}); err != nil {
			t.Fatal(err)
		}
		code := b.issueCode(t, "alipay", sim.CodeNever, 0)
		gate.before = func() {
			if _, err := b.sim.ConfirmCode(code); err != nil {
				t.Errorf("the buyer confirms: %v", err)
			}
		}
		res, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BL"+engine[:2], code, "k1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == orderpay.BarcodePaid {
			t.Fatal("the till was told PAID for a payment the cancel refunded")
		}
		deadline := time.Now().Add(20 * time.Second)
		for res.Status == orderpay.BarcodeUnknown {
			if _, err := b.svc.QueryDue(ctx, 10, 2); err != nil {
				t.Fatal(err)
			}
			if res, err = b.svc.BarcodeStatus(ctx, res.Till.OutTradeNo); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("still UNKNOWN")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if st := b.sim.Faults(); st.Fired[0] != 1 {
			t.Fatalf("the lost answer fired %d times", st.Fired[0])
		}
		co, _ := b.store.ChannelOrder(ctx, res.Till.OutTradeNo)
		p, _ := b.store.Payment(ctx, co.PaymentNo)
		refunds, _ := b.store.ChannelRefunds(ctx, co.OutTradeNo)
		l := b.ledgerOf(co.OutTradeNo)
		if res.Status != orderpay.BarcodeCancelled || res.Till.Answer != orderpay.BarcodeCancelled || p.Status == orderpay.PaymentSuccess ||
			co.Status != orderpay.ChannelOrderSuccess || len(refunds) != 1 || refunds[0].Status != orderpay.ChannelRefundSuccess ||
			refunds[0].Reason != orderpay.RefundReasonReversed || l.Refunded != l.Amount {
			t.Fatalf("answered %s (%q); attempt %s, payment %s, refunds %+v; at the channel %s, %d of %d refunded",
				res.Status, res.Till.Answer, co.Status, p.Status, refunds, l.Status, l.Refunded, l.Amount)
		}
		if fee, rate := rule.FeeFor(co.Amount, co.Method); !co.FeeRecorded || co.Fee != fee || co.FeeRate != rate || fee == 0 ||
			co.ChannelRefunded != co.Amount || !refunds[0].FeeBackRecorded || refunds[0].FeeBack != fee {
			t.Fatalf("attempt paid and reversed: fee recorded %v, %d at %v, channel refunded %d of %d; the reverse's share %v %d; want %d at %v, all back",
				co.FeeRecorded, co.Fee, co.FeeRate, co.ChannelRefunded, co.Amount, refunds[0].FeeBackRecorded, refunds[0].FeeBack, fee, rate)
		}
		if b.results.count() != 0 {
			t.Fatal("the order system was told of a payment that went back")
		}
	})
}

// tillHookStore is the store with a hook run once, when armed, after a read of a till
// payment outside a transaction: where applyQuery has just found no reverse on its way.
type tillHookStore struct {
	*sqlstore.Store
	mu   sync.Mutex
	hook func()
}

func (s *tillHookStore) TillPayment(ctx context.Context, outTradeNo string) (*orderpay.TillPayment, error) {
	t, err := s.Store.TillPayment(ctx, outTradeNo)
	s.mu.Lock()
	h := s.hook
	s.hook = nil
	s.mu.Unlock()
	if h != nil {
		h()
	}
	return t, err
}

// A payment found by a query and a reverse being sent meet on one attempt. Whichever takes
// the attempt's row first wins, on both engines, under PostgreSQL's READ COMMITTED too:
//   - the reverse is marked on its way after the query's check found none and before its
//     transaction: the payment is not applied (the reverse decides: Alipay's cancel refunds
//     it, and the attempt is recorded paid and refunded, the till told CANCELLED);
//   - the payment is applied first: the reverse is never marked, nor sent.
func TestBarcodePaymentAndReverseMeetingOnOneAttempt(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			hs := &tillHookStore{}
			var b *bundle
			if engine == "postgres" {
				pg := storetest.OpenPostgres(t)
				hs.Store = pg
			} else {
				hs.Store = storetest.OpenSQLite(t)
			}
			b = setupWith(t, func(c *payment.Config) { c.Store = hs })
			b.store = hs.Store
			barcodeSetup(t, b, 0) // the clock stands still until the test moves it
			ctx := context.Background()
			ts := orderpay.TillStore(hs)
			mark := func(no string) error {
				return ts.InTillTx(ctx, func(tx orderpay.TillTx) error { return tx.MarkTillReverse(ctx, no, true, b.clock.Now()) })
			}

			// 1. The reverse is marked between the query's check and its transaction.
			code := b.issueCode(t, "alipay", sim.CodeNever, 0)
			done := make(chan *orderpay.BarcodeResult, 1)
			go func() {
				res, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BM"+engine[:2]+"1", code, "k1"))
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			no := waitTrade(t, b, code)
			if _, err := b.sim.ConfirmCode(code); err != nil {
				t.Fatal(err)
			}
			hs.mu.Lock()
			hs.hook = func() {
				if err := mark(no); err != nil {
					t.Errorf("the reverse's mark: %v", err)
				}
			}
			hs.mu.Unlock()
			if o, err := b.svc.QueryAttempt(ctx, no, "poll"); err != nil || o != orderpay.OutcomePaid {
				t.Fatalf("the query: %s, %v", o, err)
			}
			co, _ := b.store.ChannelOrder(ctx, no)
			if co.Status != orderpay.ChannelOrderPaying {
				t.Fatalf("the payment was applied while the reverse was on its way: attempt %s", co.Status)
			}
			// The loop's reverse then says what happened: refunded by Alipay's cancel.
			go func() {
				for len(done) == 0 {
					b.clock.Advance(50 * time.Millisecond)
					time.Sleep(time.Millisecond)
				}
			}()
			res := <-done
			co, _ = b.store.ChannelOrder(ctx, no)
			p, _ := b.store.Payment(ctx, co.PaymentNo)
			refunds, _ := b.store.ChannelRefunds(ctx, no)
			if res == nil || res.Status != orderpay.BarcodeCancelled || co.Status != orderpay.ChannelOrderSuccess || p.Status == orderpay.PaymentSuccess ||
				len(refunds) != 1 || refunds[0].Reason != orderpay.RefundReasonReversed || refunds[0].Status != orderpay.ChannelRefundSuccess {
				t.Fatalf("after the reverse: %+v; attempt %s, payment %s, refunds %+v", res, co.Status, p.Status, refunds)
			}

			// 2. The payment is applied first: no reverse can be marked after it.
			code = b.issueCode(t, "wechat", sim.CodePassword, time.Hour)
			go func() {
				res, err := b.svc.PayBarcode(ctx, b.barcodeRequest("BM"+engine[:2]+"2", code, "k2"))
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			no = waitTrade(t, b, code)
			if _, err := b.sim.ConfirmCode(code); err != nil {
				t.Fatal(err)
			}
			if o, err := b.svc.QueryAttempt(ctx, no, "poll"); err != nil || o != orderpay.OutcomePaid {
				t.Fatalf("the query: %s, %v", o, err)
			}
			if err := mark(no); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("a reverse marked after the payment was applied: %v, want ECONFLICT", err)
			}
			go func() {
				for len(done) == 0 {
					b.clock.Advance(50 * time.Millisecond)
					time.Sleep(time.Millisecond)
				}
			}()
			if res := <-done; res == nil || res.Status != orderpay.BarcodePaid {
				t.Fatalf("answered %+v, want PAID", res)
			}
			if l := b.ledgerOf(no); l.Refunded != 0 || l.PaidAt.IsZero() {
				t.Fatalf("at the channel: %+v", l)
			}
		})
	}
}

// waitTrade waits for the trade the code made at the channel and returns its number.
func waitTrade(t *testing.T, b *bundle, code string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := b.sim.Code(code); err == nil && c.OutTradeNo != "" {
			return c.OutTradeNo
		}
		if time.Now().After(deadline) {
			t.Fatal("no trade at the channel")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

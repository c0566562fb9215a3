package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
	"orderpay/clocktest"
	"orderpay/order"
	"orderpay/payment"
	"orderpay/reconcile"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// day is the business day every test trades on, and morning the next morning, when its
// bills are out (Alipay after 10:00, WeChat from 09:00).
var (
	day     = "2026-11-20"
	start   = time.Date(2026, 11, 20, 12, 0, 0, 0, orderpay.ChinaTime)
	morning = time.Date(2026, 11, 21, 10, 30, 0, 0, orderpay.ChinaTime)
)

// bundle is the payment center and the order system on SQLite, the real Alipay and WeChat
// Pay adapters, and the simulator, all on one hand-moved clock. Notifications reach the
// payment center as they would the server: the simulator posts them to a handler that
// calls HandleNotification.
type bundle struct {
	clock    *clocktest.Clock
	sim      *sim.Simulator
	store    *sqlstore.Store
	payments *payment.Service
	orders   *order.Service
	rec      *reconcile.Reconciler
	ali      *alipay.Channel
	wx       *wechat.Channel
	buyers   int
	fees     orderpay.FeeSchedule // the contract the simulator's accounts play
}

func setup(t *testing.T, mods ...func(*sim.Config)) *bundle {
	t.Helper()
	k, _ := simtest.Keys(t)
	quiet := slog.New(slog.DiscardHandler)
	b := &bundle{clock: clocktest.New(start), store: storetest.OpenSQLite(t)}
	cfg := sim.Config{Keys: k, Clock: b.clock, TimeScale: 1e6, Logger: quiet}
	for _, m := range mods {
		m(&cfg)
	}
	var err error
	if b.sim, err = sim.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.sim.Close)
	simSrv := httptest.NewServer(b.sim.Handler())
	t.Cleanup(simSrv.Close)
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reply, err := b.payments.HandleNotification(r.Context(), strings.TrimPrefix(r.URL.Path, "/"), "127.0.0.1", r.Header, body)
		if err != nil {
			http.Error(w, orderpay.ErrorMessage(err), http.StatusBadRequest)
			return
		}
		if reply.ContentType != "" {
			w.Header().Set("Content-Type", reply.ContentType)
		}
		w.WriteHeader(reply.Status)
		w.Write(reply.Body)
	}))
	t.Cleanup(notify.Close)
	if b.ali, err = alipay.New(alipay.Config{AppID: k.AppID, SellerID: k.SellerID, AppPrivateKeyPEM: simtest.PEM(t, k.AppPrivateKeyPEM),
		AlipayPublicKeyPEM: simtest.PEM(t, k.AlipayPublicKeyPEM), GatewayURL: simSrv.URL + "/gateway.do", Timeout: 2 * time.Second,
		Clock: b.clock}); err != nil {
		t.Fatal(err)
	}
	wk := &k.Wechat
	if b.wx, err = wechat.New(wechat.Config{MchID: wk.MchID, AppID: wk.AppID, MerchantSerial: wk.MerchantSerial,
		MerchantPrivateKeyPEM: simtest.PEM(t, wk.MerchantPrivateKeyPEM), PlatformPublicKeyPEM: simtest.PEM(t, wk.PlatformPublicKeyPEM),
		PublicKeyID: wk.PublicKeyID, APIv3Key: wk.APIv3Key, BaseURL: simSrv.URL, Timeout: 2 * time.Second, Clock: b.clock}); err != nil {
		t.Fatal(err)
	}
	fees := orderpay.FeeSchedule{orderpay.ChannelAlipay: contract(cfg.AlipayFees), orderpay.ChannelWechat: contract(cfg.WechatFees)}
	b.fees = fees
	if b.payments, err = payment.New(payment.Config{Store: b.store, Fees: fees,
		Channels:  map[string]orderpay.Channel{orderpay.ChannelAlipay: b.ali, orderpay.ChannelWechat: b.wx},
		NotifyURL: func(ch string) string { return notify.URL + "/" + ch },
		Results: orderpay.PaymentResultsFunc(func(ctx context.Context, ev orderpay.PaymentSucceeded) error {
			return b.orders.PaymentSucceeded(ctx, ev)
		}), Clock: b.clock, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	windows := orderpay.PayWindows{orderpay.ProductNormal: 72 * time.Hour, orderpay.ProductSpecial: 30 * time.Minute,
		orderpay.ProductFast: 20 * time.Second}
	if b.orders, err = order.New(order.Config{Store: b.store, Payments: b.payments, Clock: b.clock, PayWindows: windows, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if b.rec, err = reconcile.New(reconcile.Config{Store: b.store, Payments: b.payments, Clock: b.clock, Logger: quiet, Fees: fees,
		Bills: map[string]orderpay.BillSource{orderpay.ChannelAlipay: b.ali, orderpay.ChannelWechat: b.wx}}); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []order.NewSKU{
		{SKU: "tea", MerchantID: "m1", Title: "Tea", Price: 4990, Stock: 100, ProductType: orderpay.ProductNormal},
		{SKU: "flash", MerchantID: "m1", Title: "Flash", Price: 1990, Stock: 100, ProductType: orderpay.ProductFast},
	} {
		if _, _, err := b.orders.CreateSKU(context.Background(), sku); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// contract is the fee contract the simulator's account plays, as a channels file states
// it: its rates, rounding and refund switch, and not the rate changes or faults it plays
// against it.
func contract(c sim.FeeConfig) orderpay.FeeRule {
	rate := c.Rate
	if rate == 0 && len(c.Methods) == 0 {
		rate = sim.DefaultFeeRate
	}
	return orderpay.FeeRule{Rate: rate, Methods: c.Methods, Rounding: c.Rounding, RefundReturnsFee: !c.RefundKeepsFee}
}

// order creates an order of one sku and asks to pay it through channel: its number and
// the QR code.
// pay asks for a code for order no at channel, as the buyer's pay request does.
func (b *bundle) pay(ctx context.Context, no, channel string) (*orderpay.PayResult, error) {
	o, err := b.orders.Order(ctx, no)
	if err != nil {
		return nil, err
	}
	return b.orders.Pay(ctx, o, channel)
}

func (b *bundle) order(t *testing.T, sku, channel string) (string, string) {
	t.Helper()
	ctx := context.Background()
	// A buyer per order: the same buyer ordering the same again within 10 s would get the
	// first order back (the duplicate-submit guard), and the clock stands still here.
	b.buyers++
	o, _, err := b.orders.Create(ctx, order.CreateOrderRequest{BuyerID: fmt.Sprintf("buyer-%d", b.buyers),
		Items: []order.ItemRequest{{SKU: sku, Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.orders.Pay(ctx, o, channel)
	if err != nil {
		t.Fatal(err)
	}
	return o.No, res.QRCode
}

// buyerPays plays the buyer's wallet paying a code.
func (b *bundle) buyerPays(t *testing.T, qr string) {
	t.Helper()
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
}

// waitOrder waits for an order to reach a status (a notification is delivered in the
// background); it fails the test if it does not within a generous bound.
func (b *bundle) waitOrder(t *testing.T, no string, want orderpay.OrderStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, err := b.store.Order(context.Background(), no)
		if err == nil && o.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is %v (%v), want %s", no, o, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *bundle) orderStatus(t *testing.T, no string) orderpay.OrderStatus {
	t.Helper()
	o, err := b.store.Order(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

// faults sets the simulator's fault plan; none clears it.
func (b *bundle) faults(t *testing.T, rules ...sim.FaultRule) {
	t.Helper()
	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: rules}); err != nil {
		t.Fatal(err)
	}
}

// lostResults are the faults of a channel that loses a trade's results: every notification
// attempt dropped, every query answered with a system error (Alipay ACQ.SYSTEM_ERROR,
// WeChat 500 SYSTEM_ERROR).
func lostResults(channel string) []sim.FaultRule {
	return []sim.FaultRule{
		{Channel: channel, Method: sim.MethodNotify, Kind: sim.FaultDrop, Probability: 1},
		{Channel: channel, Method: sim.MethodQuery, Kind: sim.FaultSystemError, Probability: 1},
	}
}

// notificationsLost waits until the channel has given up notifying a trade (every attempt
// dropped), so that clearing the faults later cannot let a late retry through.
func (b *bundle) notificationsLost(t *testing.T, outTradeNo string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, n := range b.sim.NotifyStats() {
			if n.OutTradeNo != outTradeNo || !n.Done() {
				continue
			}
			if n.Acked {
				t.Fatalf("the notification of %s got through", outTradeNo)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the channel is still notifying %s", outTradeNo)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reconcile runs the next morning's reconciliation of channel's bill of date.
func (b *bundle) reconcile(t *testing.T, channel, date string) *orderpay.Reconciliation {
	t.Helper()
	if b.clock.Now().Before(morning) {
		b.clock.Set(morning)
	}
	rep, err := b.rec.Run(context.Background(), channel, date)
	if err != nil {
		t.Fatalf("reconcile %s %s: %v", channel, date, err)
	}
	return rep
}

// item finds the report's item of a trade (and refund number, for a refund).
func item(t *testing.T, rep *orderpay.Reconciliation, kind orderpay.BillRowKind, outTradeNo, outRefundNo string) orderpay.ReconItem {
	t.Helper()
	for _, it := range rep.Items {
		if it.Kind == kind && it.OutTradeNo == outTradeNo && it.OutRefundNo == outRefundNo {
			return it
		}
	}
	t.Fatalf("no %s item for %s %s in %+v", kind, outTradeNo, outRefundNo, rep.Items)
	return orderpay.ReconItem{}
}

func outTradeNo(orderNo string) string { return payment.OutTradeNo(payment.PaymentNo(orderNo), 1) }

// Matched: an order paid by Alipay, and one paid twice (Alipay, then WeChat: the duplicate
// refunded). Every row of both bills matches, the report is stored and reads back.
func TestMatched_PaidTradesAndTheirRefundsAgreeWithTheBills(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	one, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	b.waitOrder(t, one, orderpay.OrderPaid)

	two, qrAli := b.order(t, "tea", orderpay.ChannelAlipay)
	res, err := b.pay(ctx, two, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	b.buyerPays(t, qrAli)
	b.waitOrder(t, two, orderpay.OrderPaid)
	b.buyerPays(t, res.QRCode) // the same order paid again, at WeChat: a duplicate
	dup := payment.OutTradeNo(payment.PaymentNo(two), 2)
	waitRefund(t, b, payment.AutoRefundNo(dup))

	ali := b.reconcile(t, orderpay.ChannelAlipay, day)
	if ali.BillRows != 2 || ali.Counts[orderpay.ReconMatched] != 2 || len(ali.Items) != 2 || ali.Unexplained != 0 {
		t.Fatalf("alipay report %+v", ali)
	}
	wx := b.reconcile(t, orderpay.ChannelWechat, day)
	if wx.BillRows != 2 || wx.Counts[orderpay.ReconMatched] != 2 || len(wx.Items) != 2 || wx.Unexplained != 0 {
		t.Fatalf("wechat report %+v", wx)
	}
	refundItem := item(t, wx, orderpay.BillRefund, dup, payment.AutoRefundNo(dup))
	if refundItem.Class != orderpay.ReconMatched || refundItem.BillAmount != 4990 || refundItem.LocalAmount != 4990 {
		t.Fatalf("duplicate's refund %+v", refundItem)
	}
	stored, err := b.store.Reconciliation(ctx, wx.ID)
	if err != nil || len(stored.Items) != 2 || stored.Counts[orderpay.ReconMatched] != 2 {
		t.Fatalf("stored report %+v, %v", stored, err)
	}
	_ = one
}

// waitRefund works due refunds until the refund is SUCCESS.
func waitRefund(t *testing.T, b *bundle, outRefundNo string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.payments.RefundDue(context.Background(), 100, 4); err != nil {
			t.Fatal(err)
		}
		r, err := b.store.ChannelRefund(context.Background(), outRefundNo)
		if err == nil && r.Status == orderpay.ChannelRefundSuccess {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund %s: %+v, %v", outRefundNo, r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Missing locally, repaired as paid: the channel loses every notification and every query
// answer of an Alipay trade the buyer paid. The payment center's own queries all come back
// unknown and the order stays unpaid. The next morning the channel answers again and the
// bill shows the payment: reconciliation alone (no worker runs in this test) queries it and
// marks the order paid.
func TestMissingLocal_NotificationsAndQueriesLost_ReconciliationAloneMarksItPaid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.faults(t, lostResults(orderpay.ChannelAlipay)...)
	no, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	// The payment center's schedule runs its queries: every one unknown.
	for range 3 {
		b.clock.Advance(2 * time.Minute)
		if _, err := b.payments.QueryDue(ctx, 100, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.orderStatus(t, no); got != orderpay.OrderPendingPayment {
		h, _ := b.store.History(ctx, orderpay.EntityChannelOrder, outTradeNo(no))
		t.Fatalf("order %s before reconciliation, want PENDING_PAYMENT (results lost): %+v", got, h)
	}
	if pq, err := b.store.PendingQuery(ctx, outTradeNo(no)); err != nil || pq.Attempts == 0 || pq.LastOutcome != string(orderpay.OutcomeUnknown) {
		t.Fatalf("the schedule's queries did not run and fail: %+v, %v", pq, err)
	}

	b.notificationsLost(t, outTradeNo(no))
	b.faults(t) // the next morning the channel answers again
	rep := b.reconcile(t, orderpay.ChannelAlipay, day)
	it := item(t, rep, orderpay.BillPayment, outTradeNo(no), "")
	if it.Class != orderpay.ReconMissingLocal || it.Resolution != orderpay.ResolutionRepairedPaid || rep.Unexplained != 0 {
		t.Fatalf("item %+v, report %+v", it, rep)
	}
	if got := b.orderStatus(t, no); got != orderpay.OrderPaid {
		t.Fatalf("order %s after reconciliation, want PAID", got)
	}
	// Reconciling again finds nothing left to repair.
	if again := b.reconcile(t, orderpay.ChannelAlipay, day); again.Counts[orderpay.ReconMatched] != 1 || again.Unexplained != 0 {
		t.Fatalf("second run %+v", again)
	}
}

// Missing locally, repaired by a refund: a WeChat order with a 20 s window. At the
// deadline the payment center queries (NOTPAY), its close fails at the channel (a 500,
// nothing closed), it queries again (NOTPAY, past the deadline) and closes the attempt;
// the order is cancelled. WeChat kept the code payable for its one-minute floor (§B1), and
// the buyer pays it then, while the channel loses the notifications and the query answers.
// Nothing in the system looks at a closed attempt again. The next morning reconciliation
// finds the payment in the bill, the query confirms it, and since its order is closed the
// money goes back.
func TestMissingLocal_OrderAlreadyClosed_ReconciliationRefundsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.faults(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodClose, Kind: sim.FaultHTTP500, Probability: 1})
	no, qr := b.order(t, "flash", orderpay.ChannelWechat)
	b.clock.Advance(26 * time.Second) // past the deadline and its 5 s margin
	if o, err := b.orders.Cancel(ctx, no); err != nil || o.Status != orderpay.OrderCancelled {
		t.Fatalf("cancel: %+v, %v", o, err)
	}
	if co, _ := b.store.ChannelOrder(ctx, outTradeNo(no)); co.Status != orderpay.ChannelOrderClosed {
		t.Fatalf("attempt %s after the close, want CLOSED", co.Status)
	}
	b.faults(t, lostResults(orderpay.ChannelWechat)...)
	b.clock.Advance(10 * time.Second) // still inside WeChat's one-minute floor
	b.buyerPays(t, qr)
	if _, err := b.payments.CloseDue(ctx, 0, 100, 1); err != nil { // the payment sweeper: nothing open to look at
		t.Fatal(err)
	}
	if co, _ := b.store.ChannelOrder(ctx, outTradeNo(no)); co.Status != orderpay.ChannelOrderClosed {
		t.Fatalf("attempt %s before reconciliation, want CLOSED (results lost)", co.Status)
	}

	b.notificationsLost(t, outTradeNo(no))
	b.faults(t)
	rep := b.reconcile(t, orderpay.ChannelWechat, day)
	it := item(t, rep, orderpay.BillPayment, outTradeNo(no), "")
	if it.Class != orderpay.ReconMissingLocal || it.Resolution != orderpay.ResolutionRepairedRefund || rep.Unexplained != 0 {
		t.Fatalf("item %+v, report %+v", it, rep)
	}
	if got := b.orderStatus(t, no); got != orderpay.OrderCancelled {
		t.Fatalf("order %s, want it to stay CANCELLED", got)
	}
	refundNo := payment.AutoRefundNo(outTradeNo(no))
	r, err := b.store.ChannelRefund(ctx, refundNo)
	if err != nil || r.Reason != orderpay.RefundReasonLate || r.Amount != 1990 {
		t.Fatalf("refund %+v, %v", r, err)
	}
	waitRefund(t, b, refundNo)
	for _, e := range b.sim.Ledger() {
		if e.OutTradeNo == outTradeNo(no) && e.Refunded != 1990 {
			t.Fatalf("the channel refunded %d of the trade, want 1990", e.Refunded)
		}
	}
}

// Missing at the channel: a SUCCESS attempt, paid that day, that the channel never had
// paid. Nothing in orderpay writes such a thing (a payment is applied only on a verified
// answer), so this test SIMULATES CORRUPTION: it writes the record straight into the store.
// The bills of the day and of the day before lack it; it is unexplained.
func TestMissingAtChannel_APhantomPaymentIsUnexplained(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	no, _ := b.order(t, "tea", orderpay.ChannelWechat) // prepaid, never paid
	co, err := b.store.ChannelOrder(ctx, outTradeNo(no))
	if err != nil {
		t.Fatal(err)
	}
	// Simulated corruption: the attempt marked paid without any channel answer.
	if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: co.OutTradeNo, From: co.Status,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: b.clock.Now(), Actor: "test:corruption",
			PaidAt: b.clock.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	rep := b.reconcile(t, orderpay.ChannelWechat, day)
	it := item(t, rep, orderpay.BillPayment, co.OutTradeNo, "")
	if it.Class != orderpay.ReconMissingChannel || it.Resolution != orderpay.ResolutionUnexplained || it.InBill ||
		rep.Unexplained != 1 || rep.BillRows != 0 || !strings.Contains(it.Detail, "NOT_PAID") {
		t.Fatalf("item %+v, report %+v", it, rep)
	}
}

// Amount mismatch: an order paid normally whose attempt's amount is then changed in the
// database (SIMULATED CORRUPTION, written straight into the store): the bill's amount no
// longer agrees, and reconciliation neither repairs nor hides it.
func TestAmountMismatch_BillAndAttemptDisagreeOnTheAmount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	no, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	b.waitOrder(t, no, orderpay.OrderPaid)
	if _, err := b.store.DB().ExecContext(ctx, `UPDATE channel_orders SET amount = amount - 100 WHERE out_trade_no = ?`, outTradeNo(no)); err != nil {
		t.Fatal(err)
	}
	rep := b.reconcile(t, orderpay.ChannelAlipay, day)
	it := item(t, rep, orderpay.BillPayment, outTradeNo(no), "")
	if it.Class != orderpay.ReconAmountMismatch || it.Resolution != orderpay.ResolutionUnexplained || it.BillAmount != 4990 ||
		it.LocalAmount != 4890 || rep.Unexplained != 1 {
		t.Fatalf("item %+v, report %+v", it, rep)
	}
}

// Refund mismatch. A duplicate payment's refund that the channel settled while we still
// hold it PROCESSING (we have not asked since): while the channel's refund queries fail it
// is in flight, explained, for the refund worker; once they answer, reconciliation settles
// it here too. A refund made at the channel outside orderpay (by hand, in the merchant
// console) under a number we never issued is unexplained, every time.
func TestRefundMismatch_InFlightIsExplainedThenSettled_AForeignRefundIsNot(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) { c.RefundDelay = time.Minute })
	ctx := context.Background()
	no, qrAli := b.order(t, "tea", orderpay.ChannelAlipay)
	res, err := b.pay(ctx, no, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	b.buyerPays(t, qrAli)
	b.waitOrder(t, no, orderpay.OrderPaid)
	b.buyerPays(t, res.QRCode)
	dup := payment.OutTradeNo(payment.PaymentNo(no), 2)
	refundNo := payment.AutoRefundNo(dup)
	deadline := time.Now().Add(10 * time.Second)
	for { // the duplicate is refunded: sent, accepted, PROCESSING for the channel's minute
		if _, err := b.payments.RefundDue(ctx, 100, 1); err != nil {
			t.Fatal(err)
		}
		if r, err := b.store.ChannelRefund(ctx, refundNo); err == nil && r.Status == orderpay.ChannelRefundProcessing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the duplicate's refund was not accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	foreignOrder, qr := b.order(t, "tea", orderpay.ChannelWechat)
	b.buyerPays(t, qr)
	b.waitOrder(t, foreignOrder, orderpay.OrderPaid)
	foreign := outTradeNo(foreignOrder)
	if r := b.wx.Refund(ctx, orderpay.RefundRequest{OutTradeNo: foreign, OutRefundNo: "CONSOLE-1", Amount: 1000, Total: 4990,
		Reason: "by hand"}); r.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("refund by hand: %+v", r)
	}
	b.clock.Advance(2 * time.Minute) // both refunds settle at the channel

	b.faults(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefundQuery, Kind: sim.FaultSystemError, Probability: 1})
	rep := b.reconcile(t, orderpay.ChannelWechat, day)
	it := item(t, rep, orderpay.BillRefund, dup, refundNo)
	if it.Class != orderpay.ReconRefundMismatch || it.Resolution != orderpay.ResolutionRefundInFlight || it.BillAmount != 4990 {
		t.Fatalf("in-flight refund: %+v", it)
	}
	foreignItem := item(t, rep, orderpay.BillRefund, foreign, "CONSOLE-1")
	if foreignItem.Class != orderpay.ReconRefundMismatch || foreignItem.Resolution != orderpay.ResolutionUnexplained ||
		foreignItem.BillAmount != 1000 || rep.Unexplained != 1 {
		t.Fatalf("foreign refund %+v, report %+v", foreignItem, rep)
	}

	b.faults(t) // the channel answers refund queries again
	rep = b.reconcile(t, orderpay.ChannelWechat, day)
	if it := item(t, rep, orderpay.BillRefund, dup, refundNo); it.Class != orderpay.ReconRefundMismatch ||
		it.Resolution != orderpay.ResolutionRefundSettled {
		t.Fatalf("refund once the channel answers: %+v", it)
	}
	if r, _ := b.store.ChannelRefund(ctx, refundNo); r.Status != orderpay.ChannelRefundSuccess {
		t.Fatalf("refund is %s after reconciliation", r.Status)
	}
	if rep.Unexplained != 1 {
		t.Fatalf("second report %+v", rep)
	}
	third := b.reconcile(t, orderpay.ChannelWechat, day)
	if it := item(t, third, orderpay.BillRefund, dup, refundNo); it.Class != orderpay.ReconMatched || third.Unexplained != 1 {
		t.Fatalf("third report (only the foreign refund left) %+v", third)
	}
}

// Day boundary: a trade paid at 23:59:59 whose notification is applied after midnight, and
// a refund the channel settled at 23:59:50 that we learn of at 00:00:10 (so we date it the
// next day). Neither day's reconciliation shows a difference: the payment is matched by
// number in the first day's bill, the refund, dated the next day by us, is found in the
// previous day's bill.
func TestDayBoundary_PaidOrSettledBeforeMidnightLearnedAfter_IsNoDifference(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) { c.RefundDelay = 30 * time.Second })
	ctx := context.Background()
	// A duplicate whose refund is accepted at 23:59:20 and settles at 23:59:50.
	b.clock.Set(time.Date(2026, 11, 20, 23, 59, 0, 0, orderpay.ChinaTime))
	dupOrder, qrAli := b.order(t, "tea", orderpay.ChannelAlipay)
	res, err := b.pay(ctx, dupOrder, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	b.buyerPays(t, qrAli)
	b.waitOrder(t, dupOrder, orderpay.OrderPaid)
	b.faults(t, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodNotify, Kind: sim.FaultDrop, Probability: 1})
	b.buyerPays(t, res.QRCode)
	dup := payment.OutTradeNo(payment.PaymentNo(dupOrder), 2)
	b.clock.Set(time.Date(2026, 11, 20, 23, 59, 20, 0, orderpay.ChinaTime))
	if _, err := b.payments.QueryAttempt(ctx, dup, "test"); err != nil { // its notification was dropped: found by a query
		t.Fatal(err)
	}
	if _, err := b.payments.RefundDue(ctx, 100, 1); err != nil {
		t.Fatal(err)
	}
	// A trade paid at 23:59:59 whose notifications are all lost until after midnight.
	b.faults(t, sim.FaultRule{Channel: orderpay.ChannelAlipay, Method: sim.MethodNotify, Kind: sim.FaultDrop, Probability: 1})
	late, qr := b.order(t, "tea", orderpay.ChannelAlipay)
	b.clock.Set(time.Date(2026, 11, 20, 23, 59, 59, 0, orderpay.ChinaTime))
	b.buyerPays(t, qr)
	b.clock.Set(time.Date(2026, 11, 21, 0, 0, 10, 0, orderpay.ChinaTime))
	b.notificationsLost(t, outTradeNo(late))
	b.faults(t)
	if _, err := b.payments.QueryAttempt(ctx, outTradeNo(late), "test"); err != nil {
		t.Fatal(err)
	}
	b.waitOrder(t, late, orderpay.OrderPaid)
	waitRefund(t, b, payment.AutoRefundNo(dup))
	if r, _ := b.store.ChannelRefund(ctx, payment.AutoRefundNo(dup)); orderpay.BillDay(r.RefundedAt) != "2026-11-21" {
		t.Fatalf("the refund is dated %s here, want the next day", r.RefundedAt)
	}
	if co, _ := b.store.ChannelOrder(ctx, outTradeNo(late)); orderpay.BillDay(co.PaidAt) != day {
		t.Fatalf("the late trade is dated %s (the channel's time), want %s", co.PaidAt, day)
	}

	b.clock.Set(time.Date(2026, 11, 22, 10, 30, 0, 0, orderpay.ChinaTime))
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		for _, date := range []string{day, "2026-11-21"} {
			rep := b.reconcile(t, ch, date)
			if rep.Unexplained != 0 || len(rep.Items) != rep.Counts[orderpay.ReconMatched] {
				t.Fatalf("%s %s: %+v", ch, date, rep)
			}
		}
	}
	next := b.reconcile(t, orderpay.ChannelWechat, "2026-11-21")
	it := item(t, next, orderpay.BillRefund, dup, payment.AutoRefundNo(dup))
	if it.InBill || it.Class != orderpay.ReconMatched || !strings.Contains(it.Detail, day) {
		t.Fatalf("the refund in the next day's report: %+v", it)
	}
}

// Before the bill is out (the next day before 10:00 for Alipay), nothing is compared and
// nothing is stored.
func TestBillNotOutYet_NothingIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.clock.Set(time.Date(2026, 11, 21, 9, 30, 0, 0, orderpay.ChinaTime))
	if _, err := b.rec.Run(ctx, orderpay.ChannelAlipay, day); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("alipay bill before 10:00: %v, want EUNAVAILABLE", err)
	}
	if _, err := b.rec.Run(ctx, orderpay.ChannelWechat, "2026-11-21"); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("wechat bill of today: %v, want EUNAVAILABLE", err)
	}
	if _, err := b.rec.Run(ctx, orderpay.ChannelWechat, "2026-13-01"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("bad date: %v, want EINVALID", err)
	}
	if _, err := b.rec.Run(ctx, "paypal", day); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("unknown channel: %v, want EINVALID", err)
	}
	if list, _ := b.store.Reconciliations(ctx, "", "", 10); len(list) != 0 {
		t.Fatalf("reports stored: %+v", list)
	}
}

package payment_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
	"orderpay/clocktest"
	"orderpay/payment"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// gateway sits between the adapter and the simulator: it passes calls through, or answers
// 500 without reaching the simulator while failing is set.
type gateway struct {
	failing    atomic.Bool
	precreates atomic.Int64
	// onPrecreate, if set, runs as a precreate reaches the gateway.
	onPrecreate atomic.Pointer[func()]
	next        http.Handler
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.failing.Load() {
		http.Error(w, "upstream unavailable", http.StatusInternalServerError)
		return
	}
	r.ParseForm()
	if r.Form.Get("method") == "alipay.trade.precreate" {
		g.precreates.Add(1)
		if f := g.onPrecreate.Load(); f != nil {
			(*f)()
		}
	}
	g.next.ServeHTTP(w, r)
}

// results records what the payment center told the order system.
type results struct {
	mu     sync.Mutex
	events []orderpay.PaymentSucceeded
}

func (r *results) PaymentSucceeded(_ context.Context, ev orderpay.PaymentSucceeded) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *results) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

type bundle struct {
	svc      *payment.Service
	store    *sqlstore.Store
	sim      *sim.Simulator
	gw       *gateway
	results  *results
	clock    *clocktest.Clock // shared by the simulator, the adapters and the service
	captured chan note        // notifications the simulator sent
	cfg      payment.Config   // the service's, for a second instance (twin)
	gateway  string           // the Alipay gateway the adapter calls (through gw)
}

// setup wires the payment center to the real Alipay and WeChat Pay adapters and the
// simulator, on one hand-moved clock. The simulator's notifications go to a sink that keeps
// them, so each test delivers them itself. mods adjust the simulator (faults, refund delay).
func setup(t *testing.T, mods ...func(*sim.Config)) *bundle {
	t.Helper()
	return setupWith(t, nil, mods...)
}

// setupWith is setup with the payment center's config adjusted by cfg too.
func setupWith(t *testing.T, adjust func(*payment.Config), mods ...func(*sim.Config)) *bundle {
	t.Helper()
	k, _ := simtest.Keys(t)
	quiet := slog.New(slog.DiscardHandler)
	clock := clocktest.New(time.Now().Truncate(time.Second))
	cfg := sim.Config{Keys: k, Clock: clock, TimeScale: 1e6, Logger: quiet}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	gw := &gateway{next: s.Handler()}
	simSrv := httptest.NewServer(gw)
	t.Cleanup(simSrv.Close)
	b := &bundle{sim: s, gw: gw, results: &results{}, clock: clock, captured: make(chan note, 64), store: storetest.OpenSQLite(t),
		gateway: simSrv.URL + "/gateway.do"}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case b.captured <- note{channel: channelOf(r), header: r.Header.Clone(), body: body}:
		default:
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "success") // an acknowledgement for both channels: 200, and Alipay's word
	}))
	t.Cleanup(sink.Close)
	ali, err := alipay.New(alipay.Config{AppID: k.AppID, SellerID: k.SellerID, AppPrivateKeyPEM: simtest.PEM(t, k.AppPrivateKeyPEM),
		AlipayPublicKeyPEM: simtest.PEM(t, k.AlipayPublicKeyPEM), GatewayURL: b.gateway, Timeout: 2 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	wk := &k.Wechat
	wx, err := wechat.New(wechat.Config{MchID: wk.MchID, AppID: wk.AppID, MerchantSerial: wk.MerchantSerial,
		MerchantPrivateKeyPEM: simtest.PEM(t, wk.MerchantPrivateKeyPEM), PlatformPublicKeyPEM: simtest.PEM(t, wk.PlatformPublicKeyPEM),
		PublicKeyID: wk.PublicKeyID, APIv3Key: wk.APIv3Key, BaseURL: simSrv.URL, Timeout: 2 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	pc := payment.Config{Store: b.store, Channels: map[string]orderpay.Channel{"alipay": ali, "wechat": wx},
		NotifyURL: func(string) string { return sink.URL }, Results: b.results, Clock: clock, Logger: quiet}
	if adjust != nil {
		adjust(&pc)
		if st, ok := pc.Store.(*sqlstore.Store); ok {
			b.store = st // the adjusted store (PostgreSQL, say) is the one the test reads
		}
	}
	b.cfg = pc
	b.svc, err = payment.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// twin is a second instance of b's payment center, on store (another pool of the same
// database, say), with the same channels, clock and simulator.
func (b *bundle) twin(t *testing.T, store orderpay.Store) *payment.Service {
	t.Helper()
	cfg := b.cfg
	cfg.Store = store
	svc, err := payment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// setupOn is setup on the engine named: "sqlite", or "postgres" (ORDERPAY_TEST_PG).
func setupOn(t *testing.T, engine string) *bundle {
	t.Helper()
	if engine == "postgres" {
		pg := storetest.OpenPostgres(t)
		return setupWith(t, func(c *payment.Config) { c.Store = pg })
	}
	return setup(t)
}

// onEachEngine runs fn as a parallel subtest on SQLite and on PostgreSQL, each with a
// bundle of its own (setupOn).
func onEachEngine(t *testing.T, fn func(t *testing.T, engine string, b *bundle)) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, engine, setupOn(t, engine))
		})
	}
}

// paidAtWallet asks for orderNo's payment (b.request) and pays its code at the wallet.
func (b *bundle) paidAtWallet(t *testing.T, orderNo string) *orderpay.PayResult {
	t.Helper()
	ctx := context.Background()
	res, err := b.svc.Pay(ctx, b.request(orderNo))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	return res
}

// request is a payment of 49.90 yuan for orderNo by Alipay, due in 30 minutes.
func (b *bundle) request(orderNo string) orderpay.PayRequest {
	return orderpay.PayRequest{OrderNo: orderNo, Amount: 4990, Subject: "Tea", Deadline: b.clock.Now().Add(30 * time.Minute), Channel: "alipay"}
}

// note is one notification the simulator sent.
type note struct {
	channel string
	header  http.Header
	body    []byte
}

// channelOf tells a WeChat notification (signed headers, JSON) from an Alipay one (a form).
func channelOf(r *http.Request) string {
	if r.Header.Get("Wechatpay-Signature") != "" {
		return "wechat"
	}
	return "alipay"
}

func (b *bundle) nextNotification(t *testing.T) note {
	t.Helper()
	select {
	case n := <-b.captured:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("the simulator sent no notification")
		return note{}
	}
}

// deliver hands the next notification to the payment center, as the channel would.
func (b *bundle) deliver(t *testing.T) orderpay.NotifyReply {
	t.Helper()
	n := b.nextNotification(t)
	reply, err := b.svc.HandleNotification(context.Background(), n.channel, "127.0.0.1", n.header, n.body)
	if err != nil {
		t.Fatalf("%s notification refused: %v", n.channel, err)
	}
	return reply
}

func TestRepeatedPayReturnsTheSameCodeWithoutAskingAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.svc.Pay(ctx, b.request("O1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.svc.Pay(ctx, b.request("O1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.QRCode == "" || !reflect.DeepEqual(first, second) || first.PaymentNo != "PO1" || first.Pay.Field("code") != first.QRCode {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	if n := b.gw.precreates.Load(); n != 1 {
		t.Fatalf("%d precreate calls, want 1", n)
	}
	p, _ := b.store.PaymentByOrder(ctx, "O1")
	attempts, _ := b.store.ChannelOrders(ctx, "PO1")
	if p.Status != orderpay.PaymentPaying || len(attempts) != 1 || attempts[0].Status != orderpay.ChannelOrderPaying || attempts[0].OutTradeNo != "PO1A01" {
		t.Fatalf("payment %+v attempts %+v", p, attempts)
	}
}

// Ten concurrent pay requests for one order share one payment, one attempt and one code;
// and the PAYING lock lets only one of them ask the channel: one precreate. On PostgreSQL
// under READ COMMITTED too, where the first requests race to insert the payment, and one
// that read the attempt without a code takes the lock just after its holder stored the code
// and let go: it must see that code, not ask again.
func TestConcurrentPayRequestsShareOneAttempt(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, engine string, b *bundle) {
		ctx := context.Background()
		orders := 1
		if engine == "postgres" {
			orders = 5 // more rounds of the race
		}
		for o := range orders {
			orderNo := fmt.Sprint("O2", o)
			before := b.gw.precreates.Load()
			var wg sync.WaitGroup
			codes := make([]string, 10)
			for i := range codes {
				wg.Go(func() {
					res, err := b.svc.Pay(ctx, b.request(orderNo))
					if err != nil {
						t.Error(err)
						return
					}
					codes[i] = res.QRCode
				})
			}
			wg.Wait()
			for _, c := range codes {
				if c == "" || c != codes[0] {
					t.Fatalf("%s: codes differ: %v", orderNo, codes)
				}
			}
			attempts, _ := b.store.ChannelOrders(ctx, payment.PaymentNo(orderNo))
			if len(attempts) != 1 {
				t.Fatalf("%s: %d attempts, want 1", orderNo, len(attempts))
			}
			if n := b.gw.precreates.Load() - before; n != 1 {
				t.Fatalf("%s: %d precreate calls, want 1", orderNo, n)
			}
		}
	})
}

// Every way a code is stored lets go of the payment's PAYING lock in the same transaction:
// the first attempt (in the payment's own UNPAID → PAYING update), a second attempt at
// another channel (the payment is PAYING already), and a code for an attempt whose
// precreate answer was unknown. A lock left held would make the buyer's next request for a
// code wait out its lease.
func TestStoringACodeLetsGoOfThePayingLock(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, _ string, b *bundle) {
		ctx := context.Background()
		lockFree := func(paymentNo, step string) {
			t.Helper()
			var locked bool
			err := b.store.InTx(ctx, func(tx orderpay.Tx) (err error) {
				now := b.clock.Now()
				if locked, err = tx.LockPrepay(ctx, paymentNo, now.Add(time.Minute), now); err != nil || !locked {
					return err
				}
				return tx.UnlockPrepay(ctx, paymentNo)
			})
			if err != nil || !locked {
				t.Fatalf("%s: the PAYING lock is still held (locked=%v, err=%v)", step, locked, err)
			}
		}
		if _, err := b.svc.Pay(ctx, b.request("O9")); err != nil {
			t.Fatal(err)
		}
		if p, _ := b.store.PaymentByOrder(ctx, "O9"); p.Status != orderpay.PaymentPaying {
			t.Fatalf("payment %+v, want PAYING", p)
		}
		lockFree("PO9", "first attempt")
		wx := b.request("O9")
		wx.Channel = "wechat"
		if _, err := b.svc.Pay(ctx, wx); err != nil {
			t.Fatal(err)
		}
		lockFree("PO9", "second attempt, at another channel")
		b.gw.failing.Store(true)
		third := b.request("O10")
		if _, err := b.svc.Pay(ctx, third); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
			t.Fatalf("pay through a failing gateway: %v, want EUNAVAILABLE", err)
		}
		b.gw.failing.Store(false)
		if _, err := b.svc.Pay(ctx, third); err != nil {
			t.Fatal(err)
		}
		lockFree("PO10", "a code for an attempt whose precreate was unknown")
		// The payment moves on while its first code is asked for (here by hand; in
		// life, an attempt paid before its code was recorded): the code is still stored,
		// the payment is left as it stands, and the lock is let go all the same.
		moved := func() {
			if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
				return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "PO11", From: orderpay.PaymentUnpaid, To: orderpay.PaymentPaying,
					Event: orderpay.PaymentEventStart, At: b.clock.Now(), Actor: "test"})
			}); err != nil {
				t.Error(err)
			}
		}
		b.gw.onPrecreate.Store(&moved)
		res, err := b.svc.Pay(ctx, b.request("O11"))
		b.gw.onPrecreate.Store(nil)
		if err != nil || res.QRCode == "" {
			t.Fatalf("pay while the payment moved on: %+v, %v", res, err)
		}
		if co, _ := b.store.ChannelOrder(ctx, "PO11A01"); co.Status != orderpay.ChannelOrderPaying || co.QRCode != res.QRCode {
			t.Fatalf("the attempt is %+v; want PAYING with the code %s", co, res.QRCode)
		}
		if h, _ := b.store.History(ctx, orderpay.EntityPayment, "PO11"); len(h) != 2 || h[1].Actor != "test" {
			t.Fatalf("the payment's history is %+v; want its creation and the move made meanwhile, nothing more", h)
		}
		lockFree("PO11", "a code stored after the payment moved on")
	})
}

// The gateway fails with 500: the answer is unknown, so the attempt is PAYING and flagged,
// not failed, and the buyer is told to retry. The retry reuses the same out_trade_no.
func TestUnknownPrecreateStaysPayingAndRetryReusesTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.gw.failing.Store(true)
	_, err := b.svc.Pay(ctx, b.request("O3"))
	if orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("pay through a failing gateway: %v, want EUNAVAILABLE", err)
	}
	co, err := b.store.ChannelOrder(ctx, "PO3A01")
	if err != nil || co.Status != orderpay.ChannelOrderPaying || !co.Unknown || co.QRCode != "" {
		t.Fatalf("attempt after unknown precreate: %+v, %v", co, err)
	}
	b.gw.failing.Store(false)
	res, err := b.svc.Pay(ctx, b.request("O3"))
	if err != nil {
		t.Fatal(err)
	}
	co, _ = b.store.ChannelOrder(ctx, "PO3A01")
	if co.QRCode != res.QRCode || co.Unknown {
		t.Fatalf("attempt after retry: %+v", co)
	}
	if attempts, _ := b.store.ChannelOrders(ctx, "PO3"); len(attempts) != 1 {
		t.Fatalf("%d attempts, want the one reused", len(attempts))
	}
}

// A definite refusal fails the attempt; the next request opens a new one.
func TestRejectedPrecreateFailsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bad := b.request("O4")
	bad.Subject = "a/b=c" // Alipay forbids these characters: refused before sending
	if _, err := b.svc.Pay(ctx, bad); orderpay.ErrorCode(err) != orderpay.ECHANNEL {
		t.Fatalf("got %v, want ECHANNEL", err)
	}
	if co, _ := b.store.ChannelOrder(ctx, "PO4A01"); co.Status != orderpay.ChannelOrderFailed {
		t.Fatalf("attempt %+v, want FAILED", co)
	}
	if _, err := b.svc.Pay(ctx, b.request("O4")); err != nil {
		t.Fatal(err)
	}
	if co, _ := b.store.ChannelOrder(ctx, "PO4A02"); co == nil || co.Status != orderpay.ChannelOrderPaying {
		t.Fatalf("second attempt %+v", co)
	}
}

// The genuine notification is applied once: the attempt and the payment become SUCCESS,
// payment.succeeded is written, and the order system is told. Redelivery changes nothing.
// A genuine notification delivered three times is applied once; the two replays are
// acknowledged, counted and logged as duplicates, not as applied.
func TestNotificationAppliedOnce(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{}
	b := setupWith(t, func(c *payment.Config) { c.Observer = obs })
	ctx := context.Background()
	b.paidAtWallet(t, "O5")
	body := b.nextNotification(t).body
	for i := 0; i < 3; i++ {
		reply, err := b.svc.HandleNotification(ctx, "alipay", "127.0.0.1", http.Header{}, body)
		if err != nil || reply.Status != 200 || string(reply.Body) != "success" {
			t.Fatalf("delivery %d: %+v, %v", i, reply, err)
		}
	}
	if obs.results(orderpay.NotifyApplied) != 1 || obs.results(orderpay.NotifyDuplicate) != 2 {
		t.Fatalf("notifications counted %v, want 1 applied and 2 duplicates", obs.notifications)
	}
	logged, err := b.store.NotificationLog(ctx, []string{"PO5A01"}, 10)
	if err != nil || len(logged) != 3 || logged[0].Result != orderpay.NotifyApplied ||
		logged[1].Result != orderpay.NotifyDuplicate || logged[2].Result != orderpay.NotifyDuplicate {
		t.Fatalf("notification log %+v, %v", logged, err)
	}
	p, _ := b.store.Payment(ctx, "PO5")
	co, _ := b.store.ChannelOrder(ctx, "PO5A01")
	if p.Status != orderpay.PaymentSuccess || p.PaidOutTradeNo != "PO5A01" || co.Status != orderpay.ChannelOrderSuccess || co.TradeNo == "" {
		t.Fatalf("payment %+v attempt %+v", p, co)
	}
	if n := b.results.count(); n != 1 {
		t.Fatalf("the order system was told %d times, want 1", n)
	}
	ev := b.results.events[0]
	if ev.OrderNo != "O5" || ev.Amount != 4990 || ev.OutTradeNo != "PO5A01" || ev.TradeNo != co.TradeNo {
		t.Fatalf("event %+v", ev)
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	if len(msgs) != 1 || msgs[0].ID != "payment.succeeded:PO5" {
		t.Fatalf("outbox %+v", msgs)
	}
	// The pull side gives the same result the push carried.
	pulled, err := b.svc.Result(ctx, "O5")
	if err != nil || pulled == nil || pulled.PaymentNo != ev.PaymentNo || pulled.Amount != ev.Amount || pulled.OutTradeNo != ev.OutTradeNo ||
		pulled.TradeNo != ev.TradeNo || pulled.Channel != ev.Channel {
		t.Fatalf("pulled %+v, pushed %+v, %v", pulled, ev, err)
	}
	if none, err := b.svc.Result(ctx, "no-such-order"); none != nil || err != nil {
		t.Fatalf("result of an order without a payment: %+v, %v", none, err)
	}
}

// A signed notification for an attempt that is not ours, of another channel, or for an
// amount other than the attempt's is never applied, and nothing of it is kept but its
// line in the notification log. (The simulator signs what it was told to charge; here our
// record of the attempt is changed, as if our records and the channel disagreed.) The
// attempt is read and checked in the transaction that would apply it.
func TestNotificationWithAnotherAmountIsNotApplied(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, change string
		code         string
	}{
		{"another amount", `UPDATE channel_orders SET amount = 5000 WHERE out_trade_no = 'PO6A01'`, orderpay.EINVALID},
		{"another channel", `UPDATE channel_orders SET channel = 'wechat' WHERE out_trade_no = 'PO6A01'`, orderpay.EUNAUTHORIZED},
		{"not ours", `DELETE FROM pending_queries WHERE out_trade_no = 'PO6A01'; DELETE FROM channel_orders WHERE out_trade_no = 'PO6A01'`, orderpay.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			b.paidAtWallet(t, "O6")
			body := b.nextNotification(t).body
			if _, err := b.store.DB().Exec(tc.change); err != nil {
				t.Fatal(err)
			}
			if _, err := b.svc.HandleNotification(ctx, "alipay", "127.0.0.1", http.Header{}, body); orderpay.ErrorCode(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			var records, logged int
			if err := b.store.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM notifications), (SELECT COUNT(*) FROM notification_log WHERE result = ?)`,
				string(orderpay.NotifyRejected)).Scan(&records, &logged); err != nil {
				t.Fatal(err)
			}
			if records != 0 || logged != 1 {
				t.Fatalf("kept %d notification records and logged %d rejections; want none and one", records, logged)
			}
			var status string
			err := b.store.DB().QueryRow(`SELECT status FROM channel_orders WHERE payment_no = 'PO6'`).Scan(&status)
			if tc.name == "not ours" && err != sql.ErrNoRows || tc.name != "not ours" && (err != nil || status != string(orderpay.ChannelOrderPaying)) {
				t.Fatalf("the attempt is %q (%v); want it still PAYING, or still none", status, err)
			}
			if b.results.count() != 0 {
				t.Fatal("the order system was told about a payment the notification could not prove")
			}
		})
	}
}

// inTxResults is an order system on the payment center's store: it takes a payment in the
// payment's transaction, writing a message of its own there, or fails there with fail.
type inTxResults struct {
	results
	fail    error
	inTx    atomic.Int64 // PaymentSucceededTx calls
	applied atomic.Int64 // after-commit calls
}

func (r *inTxResults) PaymentSucceededTx(ctx context.Context, tx orderpay.Tx, ev orderpay.PaymentSucceeded) (func(), error) {
	r.inTx.Add(1)
	if err := orderpay.EnqueueJSON(ctx, tx, "test.order_paid", ev.OrderNo, ev, time.Now()); err != nil {
		return nil, err
	}
	if r.fail != nil {
		return nil, r.fail
	}
	return func() { r.applied.Add(1) }, nil
}

// want checks how often the order system was called in the payment's transaction, after
// its commit by the func it returned, and told after the commit by PaymentSucceeded.
func (r *inTxResults) want(t *testing.T, inTx, applied, told int) {
	t.Helper()
	if got := [3]int{int(r.inTx.Load()), int(r.applied.Load()), r.count()}; got != [3]int{inTx, applied, told} {
		t.Fatalf("in the transaction %d, after it %d, told after the commit %d: want %d, %d, %d", got[0], got[1], got[2], inTx, applied, told)
	}
}

// An order system on the same store takes the payment in the transaction that records it:
// one write transaction applies the notification, the order's write included, and the
// order system is not called again after it.
func TestPaymentAndOrderCommitTogether(t *testing.T) {
	t.Parallel()
	r := &inTxResults{}
	b := setupWith(t, func(c *payment.Config) { c.Results = r })
	ctx := context.Background()
	b.paidAtWallet(t, "O41")
	n := b.nextNotification(t)
	before, _, _ := b.store.Counters()
	if reply, err := b.svc.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, n.body); err != nil || reply.Status != 200 {
		t.Fatalf("notification: %+v, %v", reply, err)
	}
	after, _, _ := b.store.Counters()
	if tx := after - before; tx != 1 {
		t.Fatalf("applying the notification took %d write transactions, want 1", tx)
	}
	p, _ := b.store.Payment(ctx, "PO41")
	if p.Status != orderpay.PaymentSuccess {
		t.Fatalf("payment %+v", p)
	}
	r.want(t, 1, 1, 0)
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	if len(msgs) != 2 || msgs[0].ID != "payment.succeeded:PO41" || msgs[1].Subject != "test.order_paid" {
		t.Fatalf("outbox %+v, want the payment's message and the order's", msgs)
	}
}

// When the order system's part fails in the payment's transaction (a refusal, say), none of
// it is written: the payment commits alone, and the order system is told after the commit,
// as without a shared transaction.
func TestAFailedOrderPartLeavesThePaymentToCommitAlone(t *testing.T) {
	t.Parallel()
	r := &inTxResults{fail: orderpay.RefusePayment(orderpay.RefundReasonCancelled, "order O42 is cancelled")}
	b := setupWith(t, func(c *payment.Config) { c.Results = r })
	ctx := context.Background()
	b.paidAtWallet(t, "O42")
	b.deliver(t)
	p, _ := b.store.Payment(ctx, "PO42")
	if p.Status != orderpay.PaymentSuccess {
		t.Fatalf("payment %+v", p)
	}
	r.want(t, 1, 0, 1)
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	if len(msgs) != 1 || msgs[0].ID != "payment.succeeded:PO42" {
		t.Fatalf("outbox %+v, want the payment's message alone", msgs)
	}
}

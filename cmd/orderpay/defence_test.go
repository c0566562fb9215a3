package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// waitFor polls cond every 20 ms until it holds, or fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, last ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			seen := ""
			for _, l := range last {
				seen += "; last seen: " + l()
			}
			t.Fatalf("timed out waiting for %s%s", what, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *Main) refundedAtChannel(outTradeNo string) int64 {
	for _, l := range m.Sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l.Refunded
		}
	}
	return -1
}

// A buyer cancels with an unscanned Alipay code in hand, then pays it anyway: the order
// stays cancelled, its stock is back, and the money goes back.
func TestBuyerCancelThenLatePaymentIsRefunded(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "cancel-me", 1500, 3, "fast"); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "erin", "cancel-me", 2)
	p, err := c.pay(ctx, o.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	var cancelled orderView
	if err := c.call(ctx, http.MethodPost, c.API+"/v1/orders/"+o.OrderNo+"/cancel", nil, nil, &cancelled); err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != "CANCELLED" {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	if st, _ := m.Store.Stock(ctx, "cancel-me"); st.Available != 3 || st.Locked != 0 {
		t.Fatalf("stock after cancel %+v", st)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err) // the code stays payable until its deadline: a late payment
	}
	waitFor(t, 10*time.Second, "the late payment to be refunded", func() bool { return m.refundedAtChannel(p.PaymentNo+"A01") == 3000 })
	got, _ := c.order(ctx, o.OrderNo)
	if got.Status != "CANCELLED" {
		t.Fatalf("order %s after a late payment", got.Status)
	}
	if st, _ := m.Store.Stock(ctx, "cancel-me"); st.Sold != 0 || st.Available != 3 {
		t.Fatalf("stock after the late payment %+v", st)
	}
}

// Unpaid orders are closed at the deadline (plus grace): the channel is asked first, the
// trade closed, the order cancelled and its stock released; a buyer who paid in time, but
// whose notification was lost, is found by that same query and gets a PAID order.
func TestTimeoutCloseCancelsUnpaidOrders(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) {
		// Long enough for the buyers to act on a loaded machine (the race detector, the
		// other tests): a payment after the deadline is refused, and this test would fail.
		m.Config.PayWindows[orderpay.ProductFast] = 5 * time.Second
		m.Config.CloseGrace, m.Config.SweepInterval = 300*time.Millisecond, 50*time.Millisecond
		m.Config.Compensation = CompensationNotifyOnly
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "perishable", 990, 5, "fast"); err != nil {
		t.Fatal(err)
	}
	abandoned, _ := c.createOrder(ctx, "frank", "perishable", 1)
	scanned, _ := c.createOrder(ctx, "grace", "perishable", 1)
	lost, _ := c.createOrder(ctx, "heidi", "perishable", 1)
	qr, err := c.pay(ctx, scanned.OrderNo, "wechat")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sim.Scan(ctx, qr.QRCode); err != nil {
		t.Fatal(err)
	}
	lostQR, err := c.pay(ctx, lost.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, lostQR.QRCode); err != nil {
		t.Fatal(err)
	}
	for no, want := range map[string]string{abandoned.OrderNo: "CANCELLED", scanned.OrderNo: "CANCELLED", lost.OrderNo: "PAID"} {
		if _, err := c.waitStatus(ctx, no, want, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := m.Store.Stock(ctx, "perishable"); st.Available != 4 || st.Locked != 0 || st.Sold != 1 {
		t.Fatalf("stock %+v", st)
	}
	if p, _ := m.Store.PaymentByOrder(ctx, scanned.OrderNo); p.Status != orderpay.PaymentClosed {
		t.Fatalf("payment of the scanned order %+v", p)
	}
	h, _ := m.Store.History(ctx, orderpay.EntityOrder, abandoned.OrderNo)
	if len(h) != 2 || h[1].Actor != "system" {
		t.Fatalf("history of the abandoned order %+v", h)
	}
}

// The buyer pays by Alipay and by WeChat Pay: one pays the order, the other is refunded.
func TestDuplicatePaymentAcrossChannelsIsRefunded(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createSKU(ctx, "twice", 700, 2, "special"); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "ivan", "twice", 1)
	ali, err := c.pay(ctx, o.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	wx, err := c.pay(ctx, o.OrderNo, "wechat")
	if err != nil {
		t.Fatal(err)
	}
	if ali.QRCode == wx.QRCode || ali.PaymentNo != wx.PaymentNo {
		t.Fatalf("codes %+v %+v", ali, wx)
	}
	for _, qr := range []string{ali.QRCode, wx.QRCode} {
		if err := c.walletPay(ctx, qr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "one of the two payments to be refunded", func() bool {
		return m.refundedAtChannel(ali.PaymentNo+"A01")+m.refundedAtChannel(ali.PaymentNo+"A02") == 700
	})
	p, _ := m.Store.PaymentByOrder(ctx, o.OrderNo)
	if m.refundedAtChannel(p.PaidOutTradeNo) != 0 {
		t.Fatalf("the attempt that paid the order was refunded")
	}
}

// simDropAll loses every notification.
func simDropAll() sim.FaultPlan {
	return sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}
}

// A forged notification is never applied, but it names a trade: that trade is queried at
// once (well before its first scheduled query at 10 s), and the payment it finds is
// applied, with the query as its evidence.
func TestUnverifiableNotificationTriggersAQuery(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "forged-hint", 800, 2, "normal"); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "judy", "forged-hint", 1)
	p, err := c.pay(ctx, o.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	forged := "out_trade_no=" + p.PaymentNo + "A01&trade_status=TRADE_SUCCESS&total_amount=8.00&sign=AAAA"
	resp, err := http.Post(m.URL+"/notify/alipay", "application/x-www-form-urlencoded", strings.NewReader(forged))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged notification answered %d", resp.StatusCode)
	}
	waitFor(t, 5*time.Second, "the query the forgery triggered to apply the payment", func() bool {
		p, err := m.Store.PaymentByOrder(ctx, o.OrderNo)
		return err == nil && p.Status == orderpay.PaymentSuccess
	})
	h, _ := m.Store.History(ctx, orderpay.EntityChannelOrder, p.PaymentNo+"A01")
	last := h[len(h)-1]
	if last.To != "SUCCESS" || last.Reason != "query" {
		t.Fatalf("the payment was applied from %q, not from a query: %+v", last.Reason, last)
	}
	var recorded int
	m.Store.DB().QueryRow(`SELECT COUNT(*) FROM notifications`).Scan(&recorded)
	if recorded != 0 {
		t.Fatalf("%d notifications recorded: the forgery must not be", recorded)
	}
}

// queriesBy sums the queries the server made with a trigger, from its metrics.
func queriesBy(t *testing.T, m *Main, trigger string) float64 {
	t.Helper()
	families, err := m.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "orderpay_channel_queries_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "trigger" && l.GetValue() == trigger {
					total += metric.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// Every notification is lost and nobody watches: the scheduled query (10 s after the code
// was issued; 1 s here, time ×10) finds the payment.
func TestLostNotificationFoundByTheQuerySchedule(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.TimeScale = 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "kim", "tea-longjing-250g", 1)
	p, err := c.pay(ctx, o.OrderNo, "wechat")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the scheduled query to find the payment", func() bool {
		got, err := m.Store.Order(ctx, o.OrderNo)
		return err == nil && got.Status == orderpay.OrderPaid
	})
	if n := queriesBy(t, m, "schedule"); n < 1 {
		t.Fatalf("%v scheduled queries", n)
	}
}

// The broker loses every timer (the timer stream is purged once the pay call's query timer
// is on it): the pending-query sweeper still finds the payment.
func TestQueriesConvergeAfterTheBrokerLostItsTimers(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.TimeScale = 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	o, _ := c.createOrder(ctx, "leo", "tea-longjing-250g", 1)
	p, err := c.pay(ctx, o.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	// The pay call queued its query timer; once the queue has set it on the broker, the
	// broker loses it.
	waitFor(t, 10*time.Second, "the query timer on the broker", func() bool { return m.Bus.Timers().Len() == 0 })
	if err := m.Bus.PurgeTimers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the sweeper to find the payment", func() bool {
		got, err := m.Store.Order(ctx, o.OrderNo)
		return err == nil && got.Status == orderpay.OrderPaid
	})
	if n := queriesBy(t, m, "sweep"); n < 1 {
		t.Fatalf("%v swept queries; schedule %v", n, queriesBy(t, m, "schedule"))
	}
}

// An operator confirms a payment by hand: the channel is asked, and only its verified
// answer moves anything. An unpaid payment stays unpaid whatever the operator hoped.
func TestAdminConfirmAsksTheChannel(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.Compensation = CompensationNotifyOnly })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	paid, _ := c.createOrder(ctx, "mia", "tea-longjing-250g", 1)
	unpaid, _ := c.createOrder(ctx, "ned", "tea-longjing-250g", 1)
	pp, err := c.pay(ctx, paid.OrderNo, "alipay")
	if err != nil {
		t.Fatal(err)
	}
	pu, err := c.pay(ctx, unpaid.OrderNo, "wechat")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, pp.QRCode); err != nil {
		t.Fatal(err)
	}
	var pending struct {
		PendingQueries []struct {
			OutTradeNo string `json:"out_trade_no"`
		} `json:"pending_queries"`
	}
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/pending-queries", admin, nil, &pending); err != nil || len(pending.PendingQueries) != 2 {
		t.Fatalf("pending queries %+v, %v", pending, err)
	}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/payments/"+pp.PaymentNo+"/confirm", nil, nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("confirm without the token: %v", err)
	}
	type confirmed struct {
		Payment struct {
			Status string `json:"status"`
		} `json:"payment"`
		Attempts []struct {
			ChannelSays string `json:"channel_says"`
			After       string `json:"after"`
		} `json:"attempts"`
	}
	var got confirmed
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/payments/"+pp.PaymentNo+"/confirm", admin, nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Payment.Status != "SUCCESS" || len(got.Attempts) != 1 || got.Attempts[0].ChannelSays != "PAID" || got.Attempts[0].After != "SUCCESS" {
		t.Fatalf("confirm of the paid payment: %+v", got)
	}
	if _, err := c.waitStatus(ctx, paid.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got = confirmed{}
	if err := c.call(ctx, http.MethodPost, c.API+"/admin/payments/"+pu.PaymentNo+"/confirm", admin, nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Payment.Status != "PAYING" || got.Attempts[0].ChannelSays != "NOT_PAID" || got.Attempts[0].After != "PAYING" {
		t.Fatalf("confirm of the unpaid payment: %+v", got)
	}
	if o, _ := m.Store.Order(ctx, unpaid.OrderNo); o.Status != orderpay.OrderPendingPayment {
		t.Fatalf("unpaid order is %s after a confirm", o.Status)
	}
	var stuck map[string]any
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/payments/stuck", admin, nil, &stuck); err != nil {
		t.Fatal(err)
	}
	if _, ok := stuck["open_past_deadline"]; !ok {
		t.Fatalf("stuck payments answer %v", stuck)
	}
}

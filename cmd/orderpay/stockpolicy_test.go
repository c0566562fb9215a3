package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/chaos"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

// wantStockEq checks a SKU's counts and the stock equation.
func wantStockEq(t *testing.T, m *Main, sku string, available, locked, sold int64) {
	t.Helper()
	st, err := m.Store.Stock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if st.Available != available || st.Locked != locked || st.Sold != sold || st.Available+st.Locked+st.Sold != st.Total {
		t.Fatalf("stock of %s %+v, want available %d locked %d sold %d adding up to total", sku, st, available, locked, sold)
	}
}

// storeStatus waits for an order's status by reading the database, not the API: a GET of
// an unpaid order pulls its payment result, which would hide whether the path under test
// delivered it.
func storeStatus(t *testing.T, m *Main, no string, status orderpay.OrderStatus) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("order %s to be %s", no, status), func() bool {
		o, err := m.Store.Order(context.Background(), no)
		return err == nil && o.Status == status
	})
}

// soldOutRefunded waits until the refused payment's refund is SUCCESS at orderpay, for
// the sold-out reason, and the simulator's ledger shows the money back.
func soldOutRefunded(t *testing.T, m *Main, p *payView, amount int64) {
	t.Helper()
	trade := p.PaymentNo + "A01"
	waitFor(t, 20*time.Second, "the sold-out payment to be refunded at the channel", func() bool {
		r, err := m.Store.ChannelRefund(context.Background(), payment.AutoRefundNo(trade))
		return err == nil && r.Status == orderpay.ChannelRefundSuccess && m.refundedAtChannel(trade) == amount
	})
	r, _ := m.Store.ChannelRefund(context.Background(), payment.AutoRefundNo(trade))
	if r.Reason != orderpay.RefundReasonSoldOut || r.Amount != amount {
		t.Fatalf("refund %+v, want %d fen for %s", r, amount, orderpay.RefundReasonSoldOut)
	}
	refunds, _ := m.Store.ChannelRefunds(context.Background(), trade)
	if len(refunds) != 1 {
		t.Fatalf("%d refunds of %s, want 1", len(refunds), trade)
	}
}

func TestPaymentPolicyOverHTTPSQLite(t *testing.T) {
	t.Parallel()
	paymentPolicyLastUnit(t, "", false)
}

// On PostgreSQL, and with the payment center's direct call off: the bus consumer alone
// delivers the results, cancels the sold-out order and has its payment refunded.
func TestPaymentPolicyOverHTTPPostgresBusOnly(t *testing.T) {
	t.Parallel()
	paymentPolicyLastUnit(t, storetest.PostgresDSN(t), true)
}

// A "payment" SKU with one unit left: two buyers both order it (the create only checks)
// and both pay at the same moment, one by Alipay and one by WeChat Pay. One order is PAID;
// the other is cancelled and its payment refunded at the channel; the unit is sold once.
func paymentPolicyLastUnit(t *testing.T, db string, busOnly bool) {
	m, c := startMain(t, db, func(m *Main) { m.noDirectResults = busOnly })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var view chaos.SKUView
	if err := c.AddSKU(ctx, chaos.SKUSpec{SKU: "last-kettle", Price: 8800, Stock: 1, ProductType: "normal", StockPolicy: "payment"}, &view); err != nil {
		t.Fatal(err)
	}
	if view.StockPolicy != "payment" || view.ReserveMinutes != 0 || view.Stock.Available != 1 {
		t.Fatalf("SKU as created %+v", view)
	}
	a, err := c.createOrder(ctx, "ann", "last-kettle", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantStockEq(t, m, "last-kettle", 1, 0, 0) // checked, not deducted
	b, err := c.createOrder(ctx, "ben", "last-kettle", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantStockEq(t, m, "last-kettle", 1, 0, 0)
	if _, err := c.createOrder(ctx, "cat", "last-kettle", 2); apiCode(err) != orderpay.EOUTOFSTOCK {
		t.Fatalf("2 of 1 available: %v, want EOUTOFSTOCK", err)
	}
	pa, err := c.pay(ctx, a.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := c.pay(ctx, b.OrderNo, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range []*payView{pa, pb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.walletPay(ctx, p.QRCode); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	final := func(no string) orderpay.OrderStatus {
		var o *orderpay.Order
		waitFor(t, 20*time.Second, "order "+no+" to be final", func() bool {
			o, _ = m.Store.Order(ctx, no)
			return o != nil && o.Status != orderpay.OrderPendingPayment
		})
		return o.Status
	}
	sa, sb := final(a.OrderNo), final(b.OrderNo)
	winner, loser, lostPay := a, b, pb
	if sa != orderpay.OrderPaid {
		winner, loser, lostPay = b, a, pa
	}
	storeStatus(t, m, winner.OrderNo, orderpay.OrderPaid)
	storeStatus(t, m, loser.OrderNo, orderpay.OrderCancelled)
	if (sa == orderpay.OrderPaid) == (sb == orderpay.OrderPaid) {
		t.Fatalf("statuses %s and %s: want one PAID, one CANCELLED", sa, sb)
	}
	soldOutRefunded(t, m, lostPay, 8800)
	wantStockEq(t, m, "last-kettle", 0, 0, 1)
	h, _ := m.Store.History(ctx, orderpay.EntityOrder, loser.OrderNo)
	if len(h) != 2 || h[1].Actor != "system" || h[1].Reason != "sold out after payment" {
		t.Fatalf("history of the sold-out order %+v", h)
	}
	waitForSubjects(t, m, orderpay.SubjectOrderPaid, orderpay.SubjectOrderCancelled, orderpay.SubjectRefundSucceeded)
}

// A "reserve" SKU over HTTP, on a server whose business time runs 600 times faster, so that
// a one-minute hold lasts 100 ms: the sweeper releases it, a payment after that deducts
// again, and one that finds nothing left cancels the order and is refunded. A long hold
// (ended by the pay deadline, minutes away) shows the create locking and a cancel giving
// the units back.
func TestReservePolicyOverHTTP(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.TimeScale = 600 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var short, long, dflt chaos.SKUView
	if err := c.AddSKU(ctx, chaos.SKUSpec{SKU: "short-hold", Price: 1200, Stock: 2, ProductType: "normal", StockPolicy: "reserve", ReserveMinutes: 1}, &short); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSKU(ctx, chaos.SKUSpec{SKU: "long-hold", Price: 1500, Stock: 3, ProductType: "normal", StockPolicy: "reserve", ReserveMinutes: 600}, &long); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSKU(ctx, chaos.SKUSpec{SKU: "default-hold", Price: 1500, Stock: 3, ProductType: "normal", StockPolicy: "reserve"}, &dflt); err != nil {
		t.Fatal(err)
	}
	if short.StockPolicy != "reserve" || short.ReserveMinutes != 1 || long.ReserveMinutes != 600 || dflt.ReserveMinutes != 10 {
		t.Fatalf("SKUs as created %+v / %+v / %+v", short, long, dflt)
	}
	if err := c.AddSKU(ctx, chaos.SKUSpec{SKU: "bad-hold", Price: 1, Stock: 1, ProductType: "normal", StockPolicy: "order", ReserveMinutes: 5}, nil); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("reserve_minutes on an order-policy SKU: %v, want EINVALID", err)
	}
	released := func(no string) {
		t.Helper()
		waitFor(t, 20*time.Second, "the hold of "+no+" to be released", func() bool {
			hs, err := m.Store.StockHolds(ctx, no)
			return err == nil && len(hs) == 1 && hs[0].State == orderpay.HoldReleased
		})
	}

	// Cancel while held: 600 business minutes is a minute here, ample for the create and
	// the cancel.
	d, err := c.createOrder(ctx, "dan", "long-hold", 2)
	if err != nil {
		t.Fatal(err)
	}
	if hs, _ := m.Store.StockHolds(ctx, d.OrderNo); len(hs) != 1 || hs[0].State != orderpay.HoldStanding {
		t.Fatalf("holds of a new order %+v", hs)
	}
	wantStockEq(t, m, "long-hold", 1, 2, 0)
	if o, err := c.Cancel(ctx, d.OrderNo); err != nil || o.Status != "CANCELLED" {
		t.Fatalf("cancel: %+v, %v", o, err)
	}
	wantStockEq(t, m, "long-hold", 3, 0, 0)
	if hs, _ := m.Store.StockHolds(ctx, d.OrderNo); hs[0].State != orderpay.HoldReleased {
		t.Fatalf("hold after the cancel %+v", hs[0])
	}

	// The hold ends: the sweeper gives the unit back, and the payment deducts it again.
	a, err := c.createOrder(ctx, "amy", "short-hold", 1)
	if err != nil {
		t.Fatal(err)
	}
	released(a.OrderNo)
	wantStockEq(t, m, "short-hold", 2, 0, 0)
	payByAlipay(ctx, t, c, a.OrderNo)
	wantStockEq(t, m, "short-hold", 1, 0, 1)

	// Bea's hold ends, Cid takes the last unit and pays; Bea's payment finds none left.
	bea, err := c.createOrder(ctx, "bea", "short-hold", 1)
	if err != nil {
		t.Fatal(err)
	}
	released(bea.OrderNo)
	cid, err := c.createOrder(ctx, "cid", "short-hold", 1)
	if err != nil {
		t.Fatal(err)
	}
	payByAlipay(ctx, t, c, cid.OrderNo)
	wantStockEq(t, m, "short-hold", 0, 0, 2)
	pb, err := c.pay(ctx, bea.OrderNo, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, pb.QRCode); err != nil {
		t.Fatal(err)
	}
	storeStatus(t, m, bea.OrderNo, orderpay.OrderCancelled)
	soldOutRefunded(t, m, pb, 1200)
	wantStockEq(t, m, "short-hold", 0, 0, 2)
	if got, _ := c.order(ctx, bea.OrderNo); got.Status != "CANCELLED" {
		t.Fatalf("the buyer sees %s", got.Status)
	}
}

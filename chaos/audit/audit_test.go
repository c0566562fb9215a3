package audit_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos/audit"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

var engines = []struct {
	name string
	open func(testing.TB) *sqlstore.Store
}{
	{"sqlite", storetest.OpenSQLite},
	{"postgres", storetest.OpenPostgres},
}

var (
	t0       = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	settled  = t0.Add(time.Hour)
	grace    = 10 * time.Minute
	longTime = t0.Add(72 * time.Hour) // a normal product's deadline: still open at settle
)

// world is a small run that ended consistent, built through the store's real transactions,
// with the ledger, notifications and events that match it:
//
//	O1 TEA×2  2000 fen  PAID: alipay T1
//	O2 CUP×1  2500 fen  CANCELLED: wechat T2 closed unpaid, payment closed
//	O3 TEA×1  1000 fen  PAID: alipay T3a; the buyer also paid wechat T3b, refunded (duplicate_payment)
//	O4 CUP×2  5000 fen  PAID: wechat T4, one cup returned (restocked) and its 2500 fen refunded after sales
//	O5 TEA×1  1000 fen  CANCELLED, then paid late through alipay T5, refunded (order_cancelled)
//	O6 TEA×1  1000 fen  PENDING_PAYMENT: wechat T6 PAYING, not scanned, deadline ahead
//	O7 CUP×1  2500 fen  PENDING_PAYMENT: never asked to pay
type world struct {
	t    *testing.T
	s    *sqlstore.Store
	in   audit.Inputs
	msgs []orderpay.Message
}

func newWorld(t *testing.T, open func(testing.TB) *sqlstore.Store, more ...func(w *world)) *world {
	t.Helper()
	w := &world{t: t, s: open(t)}
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		for _, sku := range []struct {
			sku   string
			price int64
			stock int64
		}{{"TEA", 1000, 20}, {"CUP", 2500, 5}} {
			if err := tx.CreateSKU(ctx, &orderpay.SKU{SKU: sku.sku, MerchantID: "m1", Title: sku.sku, Price: sku.price,
				ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder, CreatedAt: t0}, sku.stock); err != nil {
				return err
			}
		}
		return nil
	})

	at := t0.Add(time.Minute)
	w.createOrder("O1", longTime, "TEA", 2)
	w.startPayment("O1", "P1", 2000, longTime, "T1", orderpay.ChannelAlipay, 1)
	w.paid("P1", "T1", true)
	w.orderPaid("O1", "P1")
	w.trade(orderpay.ChannelAlipay, "T1", "TRADE_SUCCESS", 2000, 0, true)

	w.createOrder("O2", t0.Add(30*time.Minute), "CUP", 1)
	w.startPayment("O2", "P2", 2500, t0.Add(30*time.Minute), "T2", orderpay.ChannelWechat, 1)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "T2", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderClosed, Event: orderpay.ChannelOrderEventClose, At: at, Actor: "payment-center", Reason: "timeout"}); err != nil {
			return err
		}
		if err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "P2", From: orderpay.PaymentPaying, To: orderpay.PaymentClosed,
			Event: orderpay.PaymentEventClose, At: at, Actor: "payment-center", Reason: "timeout"}); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectPaymentClosed, "P2", orderpay.PaymentClosedPayload{PaymentNo: "P2", OrderNo: "O2", At: at})
	})
	w.cancel("O2")
	w.trade(orderpay.ChannelWechat, "T2", "CLOSED", 2500, 0, false)

	w.createOrder("O3", longTime, "TEA", 1)
	w.startPayment("O3", "P3", 1000, longTime, "T3a", orderpay.ChannelAlipay, 1)
	w.attempt("P3", "T3b", orderpay.ChannelWechat, 2, 1000)
	w.paid("P3", "T3a", true)
	w.paid("P3", "T3b", false) // the second success: the payment is already SUCCESS
	w.orderPaid("O3", "P3")
	w.refund("R3", "T3b", "P3", orderpay.ChannelWechat, 1000, orderpay.RefundReasonDuplicate, false)
	w.trade(orderpay.ChannelAlipay, "T3a", "TRADE_SUCCESS", 1000, 0, true)
	w.trade(orderpay.ChannelWechat, "T3b", "REFUND", 1000, 1000, true, "R3")

	w.createOrder("O4", longTime, "CUP", 2)
	w.startPayment("O4", "P4", 5000, longTime, "T4", orderpay.ChannelWechat, 1)
	w.paid("P4", "T4", true)
	w.orderPaid("O4", "P4")
	w.returned("O4", "P4", "R4", 1, "CUP", 1, 2500)
	w.refund("R4", "T4", "P4", orderpay.ChannelWechat, 2500, orderpay.RefundReasonAfterSales, true)
	w.trade(orderpay.ChannelWechat, "T4", "REFUND", 5000, 2500, true, "R4")

	w.createOrder("O5", longTime, "TEA", 1)
	w.startPayment("O5", "P5", 1000, longTime, "T5", orderpay.ChannelAlipay, 1)
	w.cancel("O5")
	w.paid("P5", "T5", true)
	w.refund("R5", "T5", "P5", orderpay.ChannelAlipay, 1000, orderpay.RefundReasonCancelled, true)
	w.trade(orderpay.ChannelAlipay, "T5", "TRADE_CLOSED", 1000, 1000, true, "R5")

	w.createOrder("O6", longTime, "TEA", 1)
	w.startPayment("O6", "P6", 1000, longTime, "T6", orderpay.ChannelWechat, 1)
	w.trade(orderpay.ChannelWechat, "T6", "NOTPAY", 1000, 0, false)

	w.createOrder("O7", longTime, "CUP", 1)
	for _, f := range more {
		f(w)
	}

	// The relay published everything, and the bus holds exactly those messages.
	var ids []string
	for _, m := range w.msgs {
		ids = append(ids, m.ID)
		w.in.Events = append(w.in.Events, audit.Event{Subject: m.Subject, MsgID: m.ID, Payload: m.Payload})
	}
	if err := w.s.MarkPublished(context.Background(), ids, settled); err != nil {
		t.Fatal(err)
	}
	// A forged copy the merchant refused is no violation.
	w.in.Notifications = []sim.NotifyStats{{Channel: orderpay.ChannelAlipay, OutTradeNo: "T1", NotifyID: "N1", Acked: true,
		Attempts: []sim.NotifyAttempt{{At: t0, Status: 200, Body: "success", Acked: true}},
		Bad:      []sim.NotifyAttempt{{At: t0, Status: 400, Body: "fail", Variant: sim.FaultForgeSignature}}}}
	w.in.Store, w.in.Now, w.in.Grace = w.s, settled, grace
	return w
}

func (w *world) tx(fn func(ctx context.Context, tx orderpay.Tx) error) {
	w.t.Helper()
	ctx := context.Background()
	if err := w.s.InTx(ctx, func(tx orderpay.Tx) error { return fn(ctx, tx) }); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) exec(query string, args ...any) {
	w.t.Helper()
	if w.s.Dialect() == "postgres" {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	res, err := w.s.DB().Exec(query, args...)
	if err != nil {
		w.t.Fatalf("%s: %v", query, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		w.t.Fatalf("%s: %d rows changed, want 1", query, n)
	}
}

// enqueue writes an outbox message the way the services do: id "<subject>:<number>".
func (w *world) enqueue(ctx context.Context, tx orderpay.Tx, subject, no string, payload any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	m := orderpay.Message{ID: subject + ":" + no, Subject: subject, Payload: body, CreatedAt: t0}
	if err := tx.Enqueue(ctx, m); err != nil {
		return err
	}
	w.msgs = append(w.msgs, m)
	return nil
}

func (w *world) createOrder(no string, deadline time.Time, sku string, qty int64) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		s, err := tx.SKU(ctx, sku)
		if err != nil {
			return err
		}
		amount := s.Price * qty
		o := &orderpay.Order{No: no, BuyerID: "b-" + no, Status: orderpay.OrderPendingPayment, Total: amount, Payable: amount,
			ProductType: orderpay.ProductNormal, PayDeadline: deadline, CreatedAt: t0, UpdatedAt: t0,
			Items: []orderpay.OrderItem{{Line: 1, SKU: sku, MerchantID: "m1", Title: sku, UnitPrice: s.Price, Qty: qty, Amount: amount, Payable: amount}}}
		if err := lockAtCreate(ctx, tx, s, o); err != nil {
			return err
		}
		if err := tx.CreateOrder(ctx, o); err != nil {
			return err
		}
		if err := holdAtCreate(ctx, tx, s, o); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectOrderCreated, no, orderpay.OrderEventPayload{OrderNo: no, BuyerID: o.BuyerID,
			Status: o.Status, Payable: amount, At: t0})
	})
}

func (w *world) startPayment(orderNo, paymentNo string, amount int64, deadline time.Time, outTradeNo, channel string, seq int) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		return tx.CreatePayment(ctx, &orderpay.Payment{No: paymentNo, OrderNo: orderNo, Amount: amount, Status: orderpay.PaymentUnpaid,
			Subject: "goods", PayDeadline: deadline, CreatedAt: t0, UpdatedAt: t0})
	})
	w.attempt(paymentNo, outTradeNo, channel, seq, amount)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: paymentNo, From: orderpay.PaymentUnpaid, To: orderpay.PaymentPaying,
			Event: orderpay.PaymentEventStart, At: t0, Actor: "payment-center"})
	})
}

// attempt creates a channel order and submits it (PAYING).
func (w *world) attempt(paymentNo, outTradeNo, channel string, seq int, amount int64) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: outTradeNo, PaymentNo: paymentNo, Channel: channel,
			Seq: seq, Amount: amount, Status: orderpay.ChannelOrderCreated, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: outTradeNo, From: orderpay.ChannelOrderCreated,
			To: orderpay.ChannelOrderPaying, Event: orderpay.ChannelOrderEventSubmit, At: t0, Actor: "payment-center",
			QRCode: "https://qr/" + outTradeNo, QRExpiresAt: t0.Add(2 * time.Hour)})
	})
}

// paid applies a verified payment of an attempt; first says it is the payment's success.
func (w *world) paid(paymentNo, outTradeNo string, first bool) {
	at := t0.Add(2 * time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		co, err := tx.ChannelOrder(ctx, outTradeNo)
		if err != nil {
			return err
		}
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: outTradeNo, From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: at, Actor: "channel:" + co.Channel,
			Reason: "notification", TradeNo: "tn-" + outTradeNo, PaidAt: at}); err != nil {
			return err
		}
		if !first {
			return nil
		}
		p, err := tx.Payment(ctx, paymentNo)
		if err != nil {
			return err
		}
		if err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: paymentNo, From: orderpay.PaymentPaying, To: orderpay.PaymentSuccess,
			Event: orderpay.PaymentEventSucceed, At: at, Actor: "channel:" + co.Channel, PaidChannel: co.Channel, PaidOutTradeNo: outTradeNo}); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectPaymentSucceeded, paymentNo, orderpay.PaymentSucceeded{PaymentNo: paymentNo,
			OrderNo: p.OrderNo, Amount: p.Amount, Channel: co.Channel, OutTradeNo: outTradeNo, TradeNo: "tn-" + outTradeNo, PaidAt: at})
	})
}

func (w *world) orderPaid(orderNo, paymentNo string) {
	at := t0.Add(3 * time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		o, err := tx.Order(ctx, orderNo)
		if err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: orderNo, From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: at, Actor: "payment-center", PaymentNo: paymentNo}); err != nil {
			return err
		}
		for _, it := range o.Items {
			if err := sellAtPayment(ctx, tx, o, it); err != nil {
				return err
			}
		}
		// One parcel with everything, as the order system packs a single-merchant order.
		parcel := &orderpay.Shipment{No: orderpay.ShipmentNo(orderNo, 1), OrderNo: orderNo, Seq: 1, MerchantID: o.Items[0].MerchantID,
			Warehouse: orderpay.DefaultWarehouse, Status: orderpay.ShipmentPending, CreatedAt: at, UpdatedAt: at}
		for _, it := range o.Items {
			parcel.Items = append(parcel.Items, orderpay.ShipmentItem{Line: it.Line, SKU: it.SKU, Qty: it.Qty})
		}
		if err := tx.CreateShipment(ctx, parcel); err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectOrderPaid, orderNo, orderpay.OrderEventPayload{OrderNo: orderNo, BuyerID: o.BuyerID,
			Status: orderpay.OrderPaid, Payable: o.Payable, PaymentNo: paymentNo, At: at})
	})
}

func (w *world) cancel(orderNo string) {
	at := t0.Add(time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		o, err := tx.Order(ctx, orderNo)
		if err != nil {
			return err
		}
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: orderNo, From: orderpay.OrderPendingPayment, To: orderpay.OrderCancelled,
			Event: orderpay.OrderEventCancel, At: at, Actor: "system", Reason: "timeout"}); err != nil {
			return err
		}
		for _, it := range o.Items {
			if err := releaseAtCancel(ctx, tx, o, it); err != nil {
				return err
			}
		}
		return w.enqueue(ctx, tx, orderpay.SubjectOrderCancelled, orderNo, orderpay.OrderEventPayload{OrderNo: orderNo, BuyerID: o.BuyerID,
			Status: orderpay.OrderCancelled, Payable: o.Payable, At: at})
	})
}

// returned records an after-sales return of qty units of a line that came back, was
// restocked and refunded (the refund itself is recorded by refund).
func (w *world) returned(orderNo, paymentNo, afterSaleNo string, line int, sku string, qty, amount int64) {
	at := t0.Add(4 * time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		if err := tx.CreateAfterSale(ctx, &orderpay.AfterSale{No: afterSaleNo, OrderNo: orderNo, Seq: 1, PaymentNo: paymentNo, BuyerID: "b",
			Kind: orderpay.AfterSaleReturn, Status: orderpay.AfterSaleSucceeded, Amount: amount, CreatedAt: at, UpdatedAt: at,
			Items: []orderpay.AfterSaleItem{{Line: line, SKU: sku, Qty: qty, Amount: amount}}}); err != nil {
			return err
		}
		return tx.RestockSold(ctx, sku, qty)
	})
}

// refund records a refund that the channel settled; ofPayment counts it in the payment's
// refunded total (a refund of the attempt that paid it).
func (w *world) refund(outRefundNo, outTradeNo, paymentNo, channel string, amount int64, reason string, ofPayment bool) {
	at := t0.Add(4 * time.Minute)
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		if err := tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: outRefundNo, OutTradeNo: outTradeNo, PaymentNo: paymentNo,
			Channel: channel, Amount: amount, Reason: reason, Status: orderpay.ChannelRefundPending, NextAt: at, CreatedAt: at, UpdatedAt: at}); err != nil {
			return err
		}
		if err := tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: outRefundNo, From: orderpay.ChannelRefundPending,
			To: orderpay.ChannelRefundSuccess, Event: orderpay.ChannelRefundEventSucceed, At: at, Actor: "channel:" + channel, NextAt: at}); err != nil {
			return err
		}
		if ofPayment {
			if err := tx.AddPaymentRefunded(ctx, paymentNo, amount, at); err != nil {
				return err
			}
		}
		p, err := tx.Payment(ctx, paymentNo)
		if err != nil {
			return err
		}
		return w.enqueue(ctx, tx, orderpay.SubjectRefundSucceeded, outRefundNo, orderpay.RefundEventPayload{OutRefundNo: outRefundNo,
			OutTradeNo: outTradeNo, PaymentNo: paymentNo, OrderNo: p.OrderNo, Channel: channel, Amount: amount, Reason: reason, At: at})
	})
}

// trade adds the channel's record of a trade to the ledger; refunded, if not zero, is one
// settled refund under the number refundNo.
func (w *world) trade(channel, outTradeNo, status string, amount, refunded int64, paid bool, refundNo ...string) {
	e := sim.LedgerEntry{Channel: channel, OutTradeNo: outTradeNo, TradeNo: "tn-" + outTradeNo, Status: status, Amount: amount, Refunded: refunded}
	if paid {
		e.PaidAt = t0.Add(2 * time.Minute)
	}
	for _, no := range refundNo {
		e.Refunds = append(e.Refunds, sim.LedgerRefund{OutRefundNo: no, Amount: refunded, Status: sim.LedgerRefundSuccess, SettledAt: t0.Add(4 * time.Minute)})
	}
	w.in.Ledger = append(w.in.Ledger, e)
}

func (w *world) ledgerEntry(outTradeNo string) *sim.LedgerEntry {
	for i := range w.in.Ledger {
		if w.in.Ledger[i].OutTradeNo == outTradeNo {
			return &w.in.Ledger[i]
		}
	}
	w.t.Fatalf("no ledger entry %s", outTradeNo)
	return nil
}

func (w *world) dropEvent(msgID string) {
	n := len(w.in.Events)
	w.in.Events = slices.DeleteFunc(w.in.Events, func(e audit.Event) bool { return e.MsgID == msgID })
	if len(w.in.Events) != n-1 {
		w.t.Fatalf("no event %s", msgID)
	}
}

func (w *world) audit() *audit.Result {
	w.t.Helper()
	res, err := audit.Audit(context.Background(), w.in)
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// A run in which every flow ended as it should (paid, cancelled, duplicate payment refunded,
// partial refund after sales, late payment for a cancelled order refunded, still pending)
// passes every invariant.
func TestConsistentRunPasses(t *testing.T) {
	t.Parallel()
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			res := newWorld(t, eng.open).audit()
			for _, v := range res.Violations {
				t.Errorf("unexpected violation: %s", v)
			}
			if !res.Passed() || len(res.Failing()) != 0 {
				t.Fatalf("Passed %v, Failing %v", res.Passed(), res.Failing())
			}
			for _, name := range audit.Invariants {
				if n, ok := res.Counts[name]; !ok || n != 0 {
					t.Errorf("Counts[%s] = %d, %v; want 0, present", name, n, ok)
				}
			}
			if res.Orders != 7 || res.FinalStates["PAID"] != 3 || res.FinalStates["CANCELLED"] != 2 || res.FinalStates["PENDING_PAYMENT"] != 2 {
				t.Errorf("Orders %d, FinalStates %v", res.Orders, res.FinalStates)
			}
			// 2000 + 1000×2 + 5000 + 1000 captured; 1000 + 2500 + 1000 refunded; O1, O3, O4 keep 5500.
			if want := (audit.Money{Captured: 10000, Refunded: 4500, Owed: 5500}); res.Money != want {
				t.Errorf("Money = %+v, want %+v", res.Money, want)
			}
			if res.Events.Ignored[orderpay.SubjectRefundSucceeded] != 3 || res.Events.Ignored[orderpay.SubjectPaymentClosed] != 1 {
				t.Errorf("Events = %+v", res.Events)
			}
		})
	}
}

// Each case plants one failure in a consistent run and names every invariant it breaks, with
// the orders each violation must name ("" for a SKU or a global sum).
func TestAuditCatchesEachInvariant(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(w *world)
		want  map[string][]string // invariant → orders of its violations
		sku   string              // I4: the SKU named
		refs  []string            // entities (beyond the order) the history must show
	}{{
		// The channel captured O1's money and the payment center recorded it, but the order
		// system never applied it: the order is still unpaid with its stock locked. The money
		// is also not conserved: captured for an order that keeps nothing.
		name: "I1 lost payment: captured and recorded, order never marked paid",
		plant: func(w *world) {
			w.exec(`UPDATE orders SET status = 'PENDING_PAYMENT', payment_no = '', paid_at = 0 WHERE order_no = ?`, "O1")
			w.exec(`UPDATE stock SET sold = sold - 2, locked = locked + 2 WHERE sku = ?`, "TEA")
			w.dropEvent("order.paid:O1")
		},
		want: map[string][]string{"I1": {"O1"}, "I3": {"O1"}},
		refs: []string{"payment:P1", "channel_order:T1"},
	}, {
		// A trade paid at the channel that orderpay has no record of at all.
		name: "I1 lost payment: a paid trade orderpay never created",
		plant: func(w *world) {
			w.trade(orderpay.ChannelAlipay, "T9", "TRADE_SUCCESS", 800, 0, true)
		},
		want: map[string][]string{"I1": {""}, "I3": {""}},
	}, {
		// O7 (never asked to pay) marked PAID with its stock sold and its event written: an order
		// paid with money nobody captured.
		name: "I2 phantom payment: order PAID without a payment",
		plant: func(w *world) {
			w.exec(`UPDATE orders SET status = 'PAID', paid_at = ? WHERE order_no = ?`, orderpay.Millis(t0), "O7")
			w.exec(`UPDATE stock SET locked = locked - 1, sold = sold + 1 WHERE sku = ?`, "CUP")
			w.in.Events = append(w.in.Events, audit.Event{Subject: orderpay.SubjectOrderPaid, MsgID: "order.paid:O7",
				Payload: []byte(`{"order_no":"O7","status":"PAID"}`)})
		},
		want: map[string][]string{"I2": {"O7"}, "I3": {"O7"}},
	}, {
		name: "I3 money: a payment's refunded total the channel never refunded",
		plant: func(w *world) {
			w.exec(`UPDATE payments SET refunded = 100 WHERE payment_no = ?`, "P1")
		},
		// Twice: the channel never refunded it, and no after-sales request asked for it.
		want: map[string][]string{"I3": {"O1", "O1"}},
	}, {
		// The duplicate payment's refund is still PROCESSING at settle and the channel has not
		// refunded yet: not lost (it is on its way back), but the books do not balance.
		name: "I3 money: a refund still in flight at settle",
		plant: func(w *world) {
			w.exec(`UPDATE refunds SET status = 'PROCESSING', refunded_at = 0 WHERE out_refund_no = ?`, "R3")
			e := w.ledgerEntry("T3b")
			e.Status, e.Refunded = "SUCCESS", 0
			e.Refunds[0].Status, e.Refunds[0].SettledAt = sim.LedgerRefundProcessing, time.Time{}
		},
		want: map[string][]string{"I3": {"O3"}},
		refs: []string{"refund:R3", "channel_order:T3b", "channel_order:T3a"},
	}, {
		// One CUP unit stays locked although no pending order holds it (O2 was cancelled).
		name: "I4 stock: a cancelled order's unit never released",
		plant: func(w *world) {
			w.exec(`UPDATE stock SET available = available - 1, locked = locked + 1 WHERE sku = ?`, "CUP")
		},
		want: map[string][]string{"I4": {""}},
		sku:  "CUP",
	}, {
		name: "I5 forged: a tampered notification acknowledged",
		plant: func(w *world) {
			w.in.Notifications = append(w.in.Notifications, sim.NotifyStats{Channel: orderpay.ChannelAlipay, OutTradeNo: "T1", NotifyID: "N2",
				Bad: []sim.NotifyAttempt{{At: t0, Status: 200, Body: "success", Acked: true, Variant: sim.FaultTamperAmount}}})
		},
		want: map[string][]string{"I5": {"O1"}},
	}, {
		name: "I5 forged: a SUCCESS attempt for another amount than the channel captured",
		plant: func(w *world) {
			w.exec(`UPDATE channel_orders SET amount = amount + 1 WHERE out_trade_no = ?`, "T4")
		},
		want: map[string][]string{"I5": {"O4"}},
		refs: []string{"refund:R4"},
	}, {
		// O6, its payment and its attempt all still open although the deadline and the grace
		// have passed: one violation for the order.
		name: "I6 stuck: PENDING_PAYMENT past deadline plus grace",
		plant: func(w *world) {
			w.exec(`UPDATE orders SET pay_deadline = ? WHERE order_no = ?`, orderpay.Millis(t0.Add(30*time.Minute)), "O6")
			w.exec(`UPDATE payments SET pay_deadline = ? WHERE payment_no = ?`, orderpay.Millis(t0.Add(30*time.Minute)), "P6")
		},
		want: map[string][]string{"I6": {"O6"}},
		refs: []string{"payment:P6", "channel_order:T6"},
	}, {
		// A second order.paid under another message id: consumers would award points twice.
		name: "I7 effects: order.paid twice under two message ids",
		plant: func(w *world) {
			w.in.Events = append(w.in.Events, audit.Event{Subject: orderpay.SubjectOrderPaid, MsgID: "order.paid:O1:again",
				Payload: []byte(`{"order_no":"O1","status":"PAID","payment_no":"P1"}`)})
		},
		want: map[string][]string{"I7": {"O1"}},
	}, {
		name: "I7 effects: an event that never left the outbox",
		plant: func(w *world) {
			w.exec(`UPDATE outbox SET published_at = 0 WHERE msg_id = ?`, "order.created:O2")
		},
		want: map[string][]string{"I7": {"O2"}},
	}, {
		// The payment center recorded O4's return refunded, but WeChat never made the refund:
		// the buyer is owed 2500 fen that nobody will send.
		name: "I8 owed silently: a refund SUCCESS here that the channel never made",
		plant: func(w *world) {
			e := w.ledgerEntry("T4")
			e.Status, e.Refunded, e.Refunds = "SUCCESS", 0, nil
		},
		want: map[string][]string{"I3": {"O4"}, "I8": {"O4"}},
		refs: []string{"refund:R4", "channel_order:T4"},
	}, {
		// O3's duplicate payment went to the operators' queue with no problem stated, and the
		// channel has not refunded it: owed, and nobody is told why.
		name: "I8 owed silently: a refund in the operators' queue without a problem",
		plant: func(w *world) {
			w.exec(`UPDATE refunds SET status = 'NEEDS_ACTION', refunded_at = 0, problem = '', needs_action_at = ? WHERE out_refund_no = ?`, orderpay.Millis(t0), "R3")
			e := w.ledgerEntry("T3b")
			e.Status, e.Refunded, e.Refunds = "SUCCESS", 0, nil
		},
		want: map[string][]string{"I3": {"O3"}, "I8": {"O3"}},
		refs: []string{"refund:R3", "channel_order:T3b"},
	}, {
		name: "I7 effects: order.created never took effect",
		plant: func(w *world) {
			w.dropEvent("order.created:O3")
		},
		want: map[string][]string{"I7": {"O3"}},
	}}
	for _, eng := range engines {
		for _, tc := range cases {
			t.Run(eng.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, eng.open)
				tc.plant(w)
				res := w.audit()
				for _, v := range res.Violations {
					t.Logf("%s", v)
				}

				var wantFailing []string
				for inv := range tc.want {
					wantFailing = append(wantFailing, inv)
				}
				slices.Sort(wantFailing)
				if got := res.Failing(); !slices.Equal(got, wantFailing) || res.Passed() {
					t.Fatalf("Failing = %v (Passed %v), want %v", got, res.Passed(), wantFailing)
				}
				for inv, orders := range tc.want {
					var got []string
					for _, v := range res.Violations {
						if v.Invariant == inv {
							got = append(got, v.OrderNo)
						}
					}
					if !slices.Equal(got, orders) || res.Counts[inv] != len(orders) {
						t.Errorf("%s names orders %q (count %d), want %q", inv, got, res.Counts[inv], orders)
					}
				}
				for _, v := range res.Violations {
					if v.Detail == "" {
						t.Errorf("%s: no detail", v.Invariant)
					}
					if v.Invariant == audit.StockConserved {
						if v.SKU != tc.sku || !strings.Contains(v.Detail, tc.sku) || len(v.History) != 0 {
							t.Errorf("I4 violation names sku %q (%s), history %d; want %q", v.SKU, v.Detail, len(v.History), tc.sku)
						}
					}
					if v.OrderNo != "" {
						checkHistory(t, v, tc.refs)
					}
				}
			})
		}
	}
}

// checkHistory checks that a violation carries its order's full history, oldest first.
func checkHistory(t *testing.T, v audit.Violation, refs []string) {
	t.Helper()
	seen := map[string]bool{}
	for i, h := range v.History {
		if i > 0 && h.Seq <= v.History[i-1].Seq {
			t.Errorf("%s: history not oldest first at %d", v.Invariant, i)
		}
		seen[h.Entity+":"+h.EntityNo] = true
	}
	if !seen["order:"+v.OrderNo] {
		t.Errorf("%s: history of order %s missing: %+v", v.Invariant, v.OrderNo, v.History)
	}
	for _, ref := range refs {
		if !seen[ref] {
			t.Errorf("%s: history lacks %s", v.Invariant, ref)
		}
	}
}

package audit_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/chaos/audit"
)

// The world's stock moves by each SKU's policy (docs/design.md §6), as the order system makes them.

func lockAtCreate(ctx context.Context, tx orderpay.Tx, s *orderpay.SKU, o *orderpay.Order) error {
	if s.StockPolicy == orderpay.StockAtPayment {
		return nil // checked only
	}
	return tx.LockStock(ctx, s.SKU, o.Items[0].Qty)
}

func holdAtCreate(ctx context.Context, tx orderpay.Tx, s *orderpay.SKU, o *orderpay.Order) error {
	if s.StockPolicy != orderpay.StockReserve {
		return nil
	}
	until := min(t0.Add(time.Duration(s.ReserveMinutes)*time.Minute).UnixNano(), o.PayDeadline.UnixNano())
	return tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: o.No, Line: 1, SKU: s.SKU, Qty: o.Items[0].Qty,
		HoldUntil: time.Unix(0, until).UTC(), CreatedAt: t0})
}

func policyOf(ctx context.Context, tx orderpay.Tx, sku string) orderpay.StockPolicy {
	s, err := tx.SKU(ctx, sku)
	if err != nil {
		return ""
	}
	return s.StockPolicy
}

func sellAtPayment(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem) error {
	switch policyOf(ctx, tx, it.SKU) {
	case orderpay.StockAtPayment:
		return sellAvailableOrBackup(ctx, tx, o, it)
	case orderpay.StockReserve:
		if err := tx.EndStockHold(ctx, o.No, it.Line, orderpay.HoldSold, t0.Add(3*time.Minute)); orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			return sellAvailableOrBackup(ctx, tx, o, it) // released before: deducted again
		} else if err != nil {
			return err
		}
	}
	return tx.SellLockedStock(ctx, it.SKU, it.Qty)
}

// sellAvailableOrBackup deducts a line at payment from the sellable units, or, when they
// cannot cover it, from the SKU's backup (docs/design.md §6.2).
func sellAvailableOrBackup(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem) error {
	err := tx.SellAvailableStock(ctx, it.SKU, it.Qty)
	if orderpay.ErrorCode(err) == orderpay.EOUTOFSTOCK {
		return tx.SellBackupStock(ctx, o.No, it.Line, it.SKU, it.Qty, t0.Add(3*time.Minute))
	}
	return err
}

func releaseAtCancel(ctx context.Context, tx orderpay.Tx, o *orderpay.Order, it orderpay.OrderItem) error {
	switch policyOf(ctx, tx, it.SKU) {
	case orderpay.StockAtPayment:
		return nil
	case orderpay.StockReserve:
		if err := tx.EndStockHold(ctx, o.No, it.Line, orderpay.HoldReleased, t0.Add(time.Minute)); orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			return nil // the sweeper released it
		} else if err != nil {
			return err
		}
	}
	return tx.ReleaseLockedStock(ctx, it.SKU, it.Qty)
}

// releaseHold is the hold sweeper ending an order's hold.
func (w *world) releaseHold(orderNo string) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		hs, err := tx.StockHolds(ctx, orderNo)
		if err != nil {
			return err
		}
		if err := tx.EndStockHold(ctx, orderNo, hs[0].Line, orderpay.HoldReleased, hs[0].HoldUntil); err != nil {
			return err
		}
		return tx.ReleaseLockedStock(ctx, hs[0].SKU, hs[0].Qty)
	})
}

// withPolicies adds to the consistent world SKUs of the other two policies and their flows:
//
//	PAY "payment" ×5; RSV "reserve" 120 min ×5; RSS "reserve" 10 min ×5
//	O8  PAY×2  PENDING_PAYMENT: nothing deducted
//	O9  RSV×2  PENDING_PAYMENT: hold standing (until t0+2h, after settle)
//	O10 RSS×1  PENDING_PAYMENT: hold expired and released
//	O11 PAY×1  PAID: deducted at payment
//	O12 RSS×1  PAID after its hold was released: deducted again
//	O13 RSV×1  PAID while held
//	O14 PAY×1  CANCELLED: sold out when the payment came, refunded (sold_out)
//	O15 RSV×1  CANCELLED while held: released
func withPolicies(w *world) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		for _, s := range []orderpay.SKU{
			{SKU: "PAY", Price: 300, StockPolicy: orderpay.StockAtPayment},
			{SKU: "RSV", Price: 400, StockPolicy: orderpay.StockReserve, ReserveMinutes: 120},
			{SKU: "RSS", Price: 500, StockPolicy: orderpay.StockReserve, ReserveMinutes: 10},
		} {
			s.MerchantID, s.Title, s.ProductType, s.CreatedAt = "m1", s.SKU, orderpay.ProductNormal, t0
			if err := tx.CreateSKU(ctx, &s, 5); err != nil {
				return err
			}
		}
		return nil
	})
	w.createOrder("O8", longTime, "PAY", 2)
	w.createOrder("O9", longTime, "RSV", 2)
	w.createOrder("O10", longTime, "RSS", 1)
	w.releaseHold("O10")

	w.createOrder("O11", longTime, "PAY", 1)
	w.startPayment("O11", "P11", 300, longTime, "T11", orderpay.ChannelAlipay, 1)
	w.paid("P11", "T11", true)
	w.orderPaid("O11", "P11")
	w.trade(orderpay.ChannelAlipay, "T11", "TRADE_SUCCESS", 300, 0, true)

	w.createOrder("O12", longTime, "RSS", 1)
	w.releaseHold("O12")
	w.startPayment("O12", "P12", 500, longTime, "T12", orderpay.ChannelWechat, 1)
	w.paid("P12", "T12", true)
	w.orderPaid("O12", "P12")
	w.trade(orderpay.ChannelWechat, "T12", "SUCCESS", 500, 0, true)

	w.createOrder("O13", longTime, "RSV", 1)
	w.startPayment("O13", "P13", 400, longTime, "T13", orderpay.ChannelAlipay, 1)
	w.paid("P13", "T13", true)
	w.orderPaid("O13", "P13")
	w.trade(orderpay.ChannelAlipay, "T13", "TRADE_SUCCESS", 400, 0, true)

	w.createOrder("O14", longTime, "PAY", 1)
	w.startPayment("O14", "P14", 300, longTime, "T14", orderpay.ChannelWechat, 1)
	w.paid("P14", "T14", true)
	w.cancel("O14")
	w.refund("R14", "T14", "P14", orderpay.ChannelWechat, 300, orderpay.RefundReasonSoldOut, true)
	w.trade(orderpay.ChannelWechat, "T14", "REFUND", 300, 300, true, "R14")

	w.createOrder("O15", longTime, "RSV", 1)
	w.cancel("O15")
}

// I4 under every policy: the consistent world with "payment" and "reserve" SKUs passes; a
// hold released without its units, units locked or sold twice for a "payment" SKU, a
// standing hold of a paid order, and an expired hold never released are each caught.
func TestAuditStockPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		plant  func(w *world)
		want   []string // failing invariants
		sku    string   // I4's SKU
		detail string   // I4's detail must contain it
		stuck  string   // I6's order
	}{
		{name: "consistent"},
		{name: "hold released without giving its units back", plant: func(w *world) {
			w.exec(`UPDATE stock_holds SET state = 'RELEASED' WHERE order_no = ?`, "O9")
		}, want: []string{audit.StockConserved}, sku: "RSV", detail: "locked 2 but pending orders hold 0 units"},
		{name: "a payment SKU's pending order locked units", plant: func(w *world) {
			w.exec(`UPDATE stock SET available = available - 2, locked = locked + 2 WHERE sku = ?`, "PAY")
		}, want: []string{audit.StockConserved}, sku: "PAY", detail: "locked 2 but pending orders hold 0"},
		{name: "a payment SKU sold twice", plant: func(w *world) {
			w.exec(`UPDATE stock SET available = available - 1, sold = sold + 1 WHERE sku = ?`, "PAY")
		}, want: []string{audit.StockConserved}, sku: "PAY", detail: "sold 2 but paid orders hold 1"},
		{name: "a paid order's hold still standing", plant: func(w *world) {
			w.exec(`UPDATE stock_holds SET state = 'HELD' WHERE order_no = ?`, "O13")
		}, want: []string{audit.StockConserved}, sku: "RSV", detail: "holds still standing for orders no longer pending: O13 line 1"},
		{name: "an expired hold never released", plant: func(w *world) {
			w.exec(`UPDATE stock_holds SET hold_until = ? WHERE order_no = ?`, orderpay.Millis(t0.Add(10*time.Minute)), "O9")
		}, want: []string{audit.NothingStuck}, stuck: "O9"},
	}
	for _, eng := range engines {
		for _, tc := range cases {
			t.Run(eng.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, eng.open, withPolicies)
				if tc.plant != nil {
					tc.plant(w)
				}
				res := w.audit()
				for _, v := range res.Violations {
					t.Logf("%s", v)
				}
				if got := res.Failing(); !slices.Equal(got, tc.want) {
					t.Fatalf("Failing = %v, want %v", got, tc.want)
				}
				if tc.name == "consistent" && (res.Orders != 15 || res.FinalStates["PAID"] != 6 || res.FinalStates["CANCELLED"] != 4 || res.FinalStates["PENDING_PAYMENT"] != 5) {
					t.Fatalf("Orders %d, FinalStates %v", res.Orders, res.FinalStates)
				}
				for _, v := range res.Violations {
					switch v.Invariant {
					case audit.StockConserved:
						if v.SKU != tc.sku || !strings.Contains(v.Detail, tc.detail) || res.Counts[audit.StockConserved] != 1 {
							t.Errorf("I4 on %q: %s; want one on %q saying %q", v.SKU, v.Detail, tc.sku, tc.detail)
						}
					case audit.NothingStuck:
						if v.OrderNo != tc.stuck || !strings.Contains(v.Detail, "stock hold of line 1") {
							t.Errorf("I6 on %q: %s; want %q's hold", v.OrderNo, v.Detail, tc.stuck)
						}
					}
				}
			})
		}
	}
}

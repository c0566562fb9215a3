package audit_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"orderpay"
	"orderpay/chaos/audit"
)

// withBackup adds to the consistent world a "payment" SKU with a backup (docs/design.md
// §6.2) and the paths its payments take:
//
//	BAK "payment" ×1, 3 aside
//	O16 BAK×1  PAID: the sellable unit
//	O17 BAK×1  PAID late: a backup unit
//	O18 BAK×1  PAID late: a backup unit (one is left)
//	O19 BAK×2  CANCELLED: paid late, two asked of the one left: sold out, refunded (sold_out)
func withBackup(w *world) {
	w.tx(func(ctx context.Context, tx orderpay.Tx) error {
		s := orderpay.SKU{SKU: "BAK", MerchantID: "m1", Title: "BAK", Price: 300, ProductType: orderpay.ProductNormal,
			StockPolicy: orderpay.StockAtPayment, CreatedAt: t0}
		if err := tx.CreateSKU(ctx, &s, 1); err != nil {
			return err
		}
		return tx.CreateStockBackup(ctx, "BAK", 3)
	})
	for _, o := range []struct {
		no, pay, trade, channel, status string
	}{
		{"O16", "P16", "T16", orderpay.ChannelAlipay, "TRADE_SUCCESS"},
		{"O17", "P17", "T17", orderpay.ChannelWechat, "SUCCESS"},
		{"O18", "P18", "T18", orderpay.ChannelAlipay, "TRADE_SUCCESS"},
	} {
		w.createOrder(o.no, longTime, "BAK", 1)
		w.startPayment(o.no, o.pay, 300, longTime, o.trade, o.channel, 1)
		w.paid(o.pay, o.trade, true)
		w.orderPaid(o.no, o.pay)
		w.trade(o.channel, o.trade, o.status, 300, 0, true)
	}
	w.createOrder("O19", longTime, "BAK", 2)
	w.startPayment("O19", "P19", 600, longTime, "T19", orderpay.ChannelWechat, 1)
	w.paid("P19", "T19", true)
	w.cancel("O19")
	w.refund("R19", "T19", "P19", orderpay.ChannelWechat, 600, orderpay.RefundReasonSoldOut, true)
	w.trade(orderpay.ChannelWechat, "T19", "REFUND", 600, 600, true, "R19")
}

// I4 with a backup: the consistent world passes (the two late payments' units are sold
// units of paid orders, the backup adds up, bucket 0 counts them); backup units used that
// no paid order's line took, a served line moved to a cancelled order, and served units
// missing from bucket 0 are each caught, on the SKU.
func TestAuditBackupStock(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		plant  func(w *world)
		detail []string // I4's detail must contain each
	}{
		{name: "consistent"},
		{name: "a backup unit used by no order", plant: func(w *world) {
			w.exec(`UPDATE stock_backup SET used = used + 1, remaining = remaining - 1 WHERE sku = ?`, "BAK")
		}, detail: []string{"backup used 3 but the order lines it served hold 2 units"}},
		{name: "a served line of a cancelled order", plant: func(w *world) {
			w.exec(`UPDATE stock_backup_sales SET order_no = ? WHERE order_no = ?`, "O19", "O18")
		}, detail: []string{"backup units went to lines no paid order holds: O19 line 1 (the order is CANCELLED)"}},
		{name: "served units missing from bucket 0", plant: func(w *world) {
			w.exec(`UPDATE stock SET sold = sold - 2, total = total - 2 WHERE sku = ? AND bucket = 0`, "BAK")
		}, detail: []string{"sold 1 but paid orders hold 3 units", "bucket 0's total 1 is less than the 2 units the backup served"}},
	}
	for _, eng := range engines {
		for _, tc := range cases {
			t.Run(eng.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, eng.open, withBackup)
				if tc.plant != nil {
					tc.plant(w)
				}
				res := w.audit()
				for _, v := range res.Violations {
					t.Logf("%s", v)
				}
				var want []string
				if tc.detail != nil {
					want = []string{audit.StockConserved}
				}
				if got := res.Failing(); !slices.Equal(got, want) {
					t.Fatalf("Failing = %v, want %v", got, want)
				}
				if tc.name == "consistent" && (res.Orders != 11 || res.FinalStates["PAID"] != 6 || res.FinalStates["CANCELLED"] != 3) {
					t.Fatalf("Orders %d, FinalStates %v", res.Orders, res.FinalStates)
				}
				for _, v := range res.Violations {
					for _, d := range tc.detail {
						if v.SKU != "BAK" || !strings.Contains(v.Detail, d) || res.Counts[audit.StockConserved] != 1 {
							t.Errorf("I4 on %q: %s; want one on BAK saying %q", v.SKU, v.Detail, d)
						}
					}
				}
			})
		}
	}
}

package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/order"
)

// The fees and settlement layers, against the simulator's real bills of both channels: a
// day without faults is MATCHED on all three layers, whether refunds give their fee back or
// not; every fee and settlement fault the simulator plants is found, classed, and its amount
// exact to the fen, and nothing else is a difference.

// plantedClass is the class reconciliation must give each kind of planted fault.
var plantedClass = map[sim.BillFaultKind]orderpay.ReconClass{
	sim.BillFaultFeeRate:           orderpay.ReconFeeMismatch,
	sim.BillFaultRateChange:        orderpay.ReconFeeRateChanged,
	sim.BillFaultRefundFeeKept:     orderpay.ReconRefundFeeNotReturned,
	sim.BillFaultRefundFeeGiven:    orderpay.ReconRefundFeeReturned,
	sim.BillFaultSettlementMissing: orderpay.ReconSettlementMissing,
	sim.BillFaultSettlementShort:   orderpay.ReconSettlementMismatch,
	sim.BillFaultBalanceBreak:      orderpay.ReconBalanceBreak,
}

// prices are the day's payments, in fen: amounts whose 0.6 % fee rounds up, down and
// exactly, and a large one.
var prices = []int64{4990, 1990, 12345, 250, 100000, 3333, 1075}

// bases are when each channel's day of trading starts.
var bases = map[string]time.Time{orderpay.ChannelAlipay: start, orderpay.ChannelWechat: start.Add(30 * time.Minute)}

// trade makes a day of trading on channel from bases[channel]: one paid order per price, a
// minute apart, then
// a partial refund of the first (a fifth of it) and a full refund of the second in two
// parts, each sent through the refund worker and settled. It returns the attempts' numbers.
func (b *bundle) trade(t *testing.T, channel string) []string {
	t.Helper()
	ctx := context.Background()
	var paid []string
	b.clock.Set(bases[channel])
	for i, price := range prices {
		sku := fmt.Sprintf("p%s%d", channel, i)
		if _, _, err := b.orders.CreateSKU(ctx, order.NewSKU{SKU: sku, MerchantID: "m1", Title: sku, Price: price, Stock: 10,
			ProductType: orderpay.ProductNormal}); err != nil {
			t.Fatal(err)
		}
		no, qr := b.order(t, sku, channel)
		b.buyerPays(t, qr)
		b.waitOrder(t, no, orderpay.OrderPaid)
		paid = append(paid, outTradeNo(no))
		b.clock.Advance(time.Minute)
	}
	b.refund(t, paid[0], "A", prices[0]/5)
	b.refund(t, paid[1], "A", prices[1]/3)
	b.refund(t, paid[1], "B", prices[1]-prices[1]/3)
	return paid
}

// yesterday pays one order on each channel the day before the test's day, so that the day's
// account opens from a close its bill knows.
func (b *bundle) yesterday(t *testing.T) {
	t.Helper()
	b.clock.Set(start.AddDate(0, 0, -1))
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		no, qr := b.order(t, "tea", ch)
		b.buyerPays(t, qr)
		b.waitOrder(t, no, orderpay.OrderPaid)
	}
	b.clock.Set(start)
}

// refund sends a refund of amount of a paid attempt through the payment center's refund
// path (as an after-sales refund does) and waits for it to settle.
func (b *bundle) refund(t *testing.T, outTradeNo, suffix string, amount int64) string {
	t.Helper()
	ctx := context.Background()
	co, err := b.store.ChannelOrder(ctx, outTradeNo)
	if err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	no := outTradeNo + "F" + suffix
	if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: outTradeNo, PaymentNo: co.PaymentNo,
			Channel: co.Channel, Amount: amount, Reason: "test", Status: orderpay.ChannelRefundPending, NextAt: now, CreatedAt: now,
			UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	waitRefund(t, b, no)
	b.clock.Advance(time.Second)
	return no
}

// differences lists a report's unexplained items of the fees and settlement layers as
// "CLASS trade refund difference" (a balance break without its trade: where the day's first
// movement is is the bill's business).
func differences(rep *orderpay.Reconciliation) []string {
	var out []string
	for _, it := range rep.Items {
		if it.Layer == orderpay.LayerTrades || it.Resolution.Explained() {
			continue
		}
		if it.Class == orderpay.ReconBalanceBreak {
			out = append(out, fmt.Sprintf("%s - - %d", it.Class, it.Difference))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s %d", it.Class, it.OutTradeNo, strings.TrimSpace(it.OutRefundNo+" "), it.Difference))
	}
	slices.Sort(out)
	return out
}

// planted lists the simulator's planted faults of a day as differences would list them.
func planted(t *testing.T, s *sim.Simulator, channel, date string) []string {
	t.Helper()
	var out []string
	for _, p := range s.PlantedFaults(channel, date) {
		class, ok := plantedClass[p.Kind]
		if !ok {
			t.Fatalf("planted fault of an unknown kind: %v", p)
		}
		if class == orderpay.ReconBalanceBreak {
			out = append(out, fmt.Sprintf("%s - - %d", class, p.Amount))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s %d", class, p.OutTradeNo, strings.TrimSpace(p.OutRefundNo+" "), p.Amount))
	}
	slices.Sort(out)
	return out
}

// A day without faults is MATCHED on all three layers, with and without refunds giving their
// fee back, on both channels; the figures add up: the fees we expect are the bill's rows and
// its summary, and what should have reached the account did.
func TestLayers_ADayWithoutFaultsIsMatchedOnAllThreeLayers(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("refund_keeps_fee=%v", keep), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *sim.Config) { c.AlipayFees.RefundKeepsFee, c.WechatFees.RefundKeepsFee = keep, keep })
			b.yesterday(t)
			chans := []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}
			for _, ch := range chans {
				b.trade(t, ch)
			}
			for _, ch := range chans {
				rep := b.reconcile(t, ch, day)
				for _, l := range orderpay.ReconLayers {
					if s := rep.Layers[l]; s.Differences != 0 || s.Unexplained != 0 {
						t.Errorf("%s layer %s: %+v; items %+v", ch, l, s, rep.Items)
					}
				}
				f := rep.Figures
				if !f.PrevKnown || f.Opening != f.PrevClosing {
					t.Errorf("%s balance does not chain from the day before: %+v", ch, f)
				}
				if !f.FeesChecked || !f.SettlementChecked || f.FeeExpected != f.FeeBill || f.FeeBill != f.FeeSummary || f.FeeExpected <= 0 {
					t.Errorf("%s fee figures %+v", ch, f)
				}
				if f.NetExpected != f.NetBill || f.NetExpected != f.Paid-f.Refunded-f.FeeExpected || !f.BalanceKnown ||
					f.Closing-f.Opening != f.NetBill {
					t.Errorf("%s settlement figures %+v", ch, f)
				}
				var wantPaid int64
				for _, p := range prices {
					wantPaid += p
				}
				if f.Paid != wantPaid || f.Refunded != prices[0]/5+prices[1] {
					t.Errorf("%s paid %d refunded %d, want %d and %d", ch, f.Paid, f.Refunded, wantPaid, prices[0]/5+prices[1])
				}
				if !rep.Explained() {
					t.Errorf("%s report not explained: %+v", ch, rep.Items)
				}
			}
		})
	}
}

// Every fee and settlement fault, on each channel: the report's unexplained differences of
// the fees and settlement layers are exactly the faults the simulator planted, each in its
// class and with its amount to the fen.
func TestLayers_EveryPlantedFaultIsFoundWithItsExactAmount(t *testing.T) {
	t.Parallel()
	// A rate change after each channel's fourth payment of the day.
	midday := func(ch string) time.Time { return bases[ch].Add(3*time.Minute + 30*time.Second) }
	cases := []struct {
		name string
		mod  func(*sim.Config)
	}{
		{"fee_rate", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultFeeRate, Probability: 0.5, OtherRate: 38000}}
		}},
		{"rate_change", func(c *sim.Config) {
			c.AlipayFees.RateChanges = []sim.RateChange{{At: midday(orderpay.ChannelAlipay), Rate: 100000}}
			c.WechatFees.RateChanges = []sim.RateChange{{At: midday(orderpay.ChannelWechat), Rate: 100000}}
		}},
		{"refund_fee_kept", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultRefundFeeKept, Probability: 1}}
		}},
		// A refund that keeps its fee on a payment charged another fee: the refund's own
		// difference, not one that follows its payment's (it once was taken for one).
		{"fee_rate+refund_fee_kept", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultFeeRate, Probability: 0.5, OtherRate: 38000},
				{Kind: sim.BillFaultRefundFeeKept, Probability: 1}}
		}},
		{"refund_fee_given", func(c *sim.Config) {
			c.AlipayFees.RefundKeepsFee, c.WechatFees.RefundKeepsFee = true, true
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultRefundFeeGiven, Probability: 1}}
		}},
		{"settlement_missing", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultSettlementMissing, Probability: 0.5}}
		}},
		{"settlement_short", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultSettlementShort, Probability: 0.5, Amount: 7}}
		}},
		{"balance_break", func(c *sim.Config) {
			c.BillFaults = []sim.BillFault{{Kind: sim.BillFaultBalanceBreak, Probability: 1, Amount: 1234}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *sim.Config) { c.BillFaultSeed = 7 }, tc.mod)
			b.yesterday(t)
			chans := []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}
			for _, ch := range chans {
				b.trade(t, ch)
			}
			for _, ch := range chans {
				want := planted(t, b.sim, ch, day)
				if len(want) == 0 {
					t.Fatalf("%s: the simulator planted no %s fault", ch, tc.name)
				}
				rep := b.reconcile(t, ch, day)
				got := differences(rep)
				if strings.HasPrefix(tc.name, "fee_rate") {
					// Mischarged payments that happen to be the day's last three or more, all
					// at the one other rate, read as a rate change (docs/reconciliation.md): the
					// same payments with the same amounts, in the other class.
					for i, d := range got {
						got[i] = strings.Replace(d, string(orderpay.ReconFeeRateChanged), string(orderpay.ReconFeeMismatch), 1)
					}
					slices.Sort(got)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: found\n  %s\nplanted\n  %s", ch, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
				if rep.Layers[orderpay.LayerTrades].Unexplained != 0 || rep.Explained() {
					t.Errorf("%s: layers %+v", ch, rep.Layers)
				}
			}
		})
	}
}

// A refund's share depends on the refunds before it (the one that completes the payment's
// refund gets the rest of the fee), so it follows the order the channel made them, which the
// bill shows. Three refunds of one payment: the shares recorded are overwritten as if we had
// learnt of the last two in the other order (SIMULATED: two refunds settling close together
// are told to us in either order). Reconciliation reckons the shares in the bill's order and
// finds no difference.
func TestLayers_RefundSharesFollowTheChannelsOrderNotOurs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.yesterday(t)
	ctx := context.Background()
	if _, _, err := b.orders.CreateSKU(ctx, order.NewSKU{SKU: "tin", MerchantID: "m1", Title: "tin", Price: 4990, Stock: 10,
		ProductType: orderpay.ProductNormal}); err != nil {
		t.Fatal(err)
	}
	no, qr := b.order(t, "tin", orderpay.ChannelAlipay)
	b.buyerPays(t, qr)
	b.waitOrder(t, no, orderpay.OrderPaid)
	trade := outTradeNo(no)
	// A fee of 30 fen: 1397 fen gives back 8 (8.399), 2196 fen 13 (13.2); the last to
	// settle gets the rest.
	a, bb, c := b.refund(t, trade, "A", 1397), b.refund(t, trade, "B", 1397), b.refund(t, trade, "C", 2196)
	recorded := map[string]int64{}
	for _, no := range []string{a, bb, c} {
		r, err := b.store.ChannelRefund(ctx, no)
		if err != nil || !r.FeeBackRecorded {
			t.Fatalf("refund %s: %+v, %v", no, r, err)
		}
		recorded[no] = r.FeeBack
	}
	if recorded[a] != 8 || recorded[bb] != 8 || recorded[c] != 14 {
		t.Fatalf("recorded shares %v, want 8, 8 and the rest, 14", recorded)
	}
	// As if we had learnt of C before B: B would have completed the refund.
	if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.SetChannelRefundFeeBack(ctx, c, 13); err != nil {
			return err
		}
		return tx.SetChannelRefundFeeBack(ctx, bb, 9)
	}); err != nil {
		t.Fatal(err)
	}
	rep := b.reconcile(t, orderpay.ChannelAlipay, day)
	if s := rep.Layers[orderpay.LayerFees]; s.Differences != 0 || !rep.Explained() {
		t.Fatalf("fees layer %+v; items %+v", s, rep.Items)
	}
	if f := rep.Figures; f.FeeExpected != f.FeeBill || f.FeeBill != 30-30 {
		t.Fatalf("figures %+v: the payment's 30 fen all given back", f)
	}
}

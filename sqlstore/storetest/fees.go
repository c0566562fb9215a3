package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

// feeRule is the contract the fee tests reckon with: 0.6 %, half up, refunds give their
// share back.
var feeRule = orderpay.FeeRule{Rate: 60000, Rounding: orderpay.RoundHalfUp, RefundReturnsFee: true}

// payingAttempt creates payment "P"+no and its attempt "P"+no+"A01" of amount, PAYING.
func payingAttempt(t *testing.T, s orderpay.Store, no string, amount int64) {
	t.Helper()
	ctx := context.Background()
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + no, OrderNo: no, Amount: amount, Status: orderpay.PaymentPaying,
			Subject: "x", PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + no + "A01", PaymentNo: "P" + no, Channel: "alipay", Seq: 1,
			Amount: amount, Status: orderpay.ChannelOrderPaying, CreatedAt: t0, UpdatedAt: t0})
	})
}

// testFees: an attempt's fee is written with its move to SUCCESS only when the change
// records one, and every read of an attempt carries it and what the channel refunded of it;
// AddChannelRefunded counts a channel's refund, never past the attempt's amount, and returns
// the total before it with the other SUCCESS refunds' shares; a refund's share reads back
// from every read of refunds.
func testFees(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	rs := s.(orderpay.ReconciliationStore)
	payingAttempt(t, s, "F1", 999)
	payingAttempt(t, s, "F2", 500)
	paidAt := t0.Add(time.Minute)
	fee, rate := feeRule.FeeFor(999, orderpay.MethodQR)
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PF1A01", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: paidAt, Actor: "t", PaidAt: paidAt,
			FeeRecorded: true, Fee: fee, FeeRate: rate}); err != nil {
			return err
		}
		// A change that records no fee leaves the attempt without one.
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PF2A01", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: paidAt, Actor: "t", PaidAt: paidAt, Fee: 99, FeeRate: 99})
	})
	if fee != 6 || rate != 60000 {
		t.Fatalf("the contract's fee of 9.99 yuan at 0.6%% is %d at %v; want 6 at 0.60000%%", fee, rate)
	}
	wantFee := func(where string, co orderpay.ChannelOrder, recorded bool, fee int64, rate orderpay.FeeRate, refunded int64) {
		t.Helper()
		if co.FeeRecorded != recorded || co.Fee != fee || co.FeeRate != rate || co.ChannelRefunded != refunded {
			t.Fatalf("%s: attempt %s has fee recorded %v, fee %d at %v, channel refunded %d; want %v, %d at %v, %d",
				where, co.OutTradeNo, co.FeeRecorded, co.Fee, co.FeeRate, co.ChannelRefunded, recorded, fee, rate, refunded)
		}
	}
	readAll := func(refunded int64) {
		t.Helper()
		co, err := s.ChannelOrder(ctx, "PF1A01")
		if err != nil {
			t.Fatal(err)
		}
		wantFee("ChannelOrder", *co, true, 6, 60000, refunded)
		cos, err := s.ChannelOrders(ctx, "PF1")
		if err != nil || len(cos) != 1 {
			t.Fatalf("ChannelOrders: %+v, %v", cos, err)
		}
		wantFee("ChannelOrders", cos[0], true, 6, 60000, refunded)
		_, cos, err = s.PaymentWithAttempts(ctx, "F1")
		if err != nil || len(cos) != 1 {
			t.Fatalf("PaymentWithAttempts: %+v, %v", cos, err)
		}
		wantFee("PaymentWithAttempts", cos[0], true, 6, 60000, refunded)
		cos, err = rs.PaidChannelOrders(ctx, "alipay", t0, t0.Add(time.Hour))
		if err != nil || len(cos) != 2 || cos[0].OutTradeNo != "PF1A01" {
			t.Fatalf("PaidChannelOrders: %+v, %v", cos, err)
		}
		wantFee("PaidChannelOrders", cos[0], true, 6, 60000, refunded)
		wantFee("PaidChannelOrders", cos[1], false, 0, 0, 0)
	}
	readAll(0)

	// A channel refund of 333 fen, then one of 666: each is counted, and the second reads the
	// first's amount and share.
	refund := func(no string, amount int64) {
		t.Helper()
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: "PF1A01", PaymentNo: "PF1", Channel: "alipay",
				Amount: amount, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
		})
	}
	refund("RF1", 333)
	refund("RF2", 666)
	refund("RF3", 1)
	r, err := s.ChannelRefund(ctx, "RF1")
	if err != nil || r.FeeBackRecorded || r.FeeBack != 0 {
		t.Fatalf("a new refund: %+v, %v; want no share recorded", r, err)
	}
	before, shares, err := settleRefund(ctx, t, s, "RF1", 333, paidAt)
	if err != nil || before != 0 || shares != 0 {
		t.Fatalf("first refund: before %d, shares %d, %v; want 0, 0", before, shares, err)
	}
	r, err = s.ChannelRefund(ctx, "RF1")
	if err != nil || !r.FeeBackRecorded || r.FeeBack != 2 { // 6 × 333 / 999 = 2
		t.Fatalf("first refund read back: %+v, %v; want a share of 2 recorded", r, err)
	}
	readAll(333)
	before, shares, err = settleRefund(ctx, t, s, "RF2", 666, paidAt)
	if err != nil || before != 333 || shares != 2 {
		t.Fatalf("second refund: before %d, shares %d, %v; want 333, 2", before, shares, err)
	}
	readAll(999)
	for _, read := range []func() ([]orderpay.ChannelRefund, error){
		func() ([]orderpay.ChannelRefund, error) { return s.ChannelRefunds(ctx, "PF1A01") },
		func() ([]orderpay.ChannelRefund, error) {
			return rs.SettledChannelRefunds(ctx, "alipay", t0, t0.Add(time.Hour))
		},
	} {
		got, err := read()
		if err != nil {
			t.Fatal(err)
		}
		backs := map[string]int64{}
		for _, r := range got {
			if r.FeeBackRecorded {
				backs[r.OutRefundNo] = r.FeeBack
			}
		}
		if len(backs) != 2 || backs["RF1"] != 2 || backs["RF2"] != 4 {
			t.Fatalf("refunds read back with shares %v; want RF1 2, RF2 4", backs)
		}
	}

	// Past the attempt's amount: refused, and nothing counted.
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		_, _, err := tx.AddChannelRefunded(ctx, "PF1A01", "RF3", 1)
		return err
	})
	wantCode(t, err, orderpay.ECONFLICT)
	readAll(999)
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		_, _, err := tx.AddChannelRefunded(ctx, "nope", "RF3", 1)
		return err
	})
	wantCode(t, err, orderpay.ENOTFOUND)
	err = s.InTx(ctx, func(tx orderpay.Tx) error { return tx.SetChannelRefundFeeBack(ctx, "nope", 1) })
	wantCode(t, err, orderpay.ENOTFOUND)
	// A refund that gives back no fee records a share of 0, recorded.
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.SetChannelRefundFeeBack(ctx, "RF3", 0) })
	if r, err := s.ChannelRefund(ctx, "RF3"); err != nil || !r.FeeBackRecorded || r.FeeBack != 0 {
		t.Fatalf("a share of 0 read back: %+v, %v", r, err)
	}
	if due, err := s.DueChannelRefunds(ctx, t0.Add(time.Hour), 10); err != nil || len(due) != 1 || !due[0].FeeBackRecorded {
		t.Fatalf("due refunds: %+v, %v", due, err)
	}
}

// settleRefund makes refund no (of attempt PF1A01 or the like) SUCCESS in one transaction
// as the payment center's moneyBack does: the transition, the channel's refund counted, the
// attempt read after it, the share reckoned by the contract and recorded. It returns what
// AddChannelRefunded returned.
func settleRefund(ctx context.Context, t *testing.T, s orderpay.Store, no string, amount int64, at time.Time) (before, shares int64, err error) {
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		before, shares, err = settleIn(ctx, tx, no, amount, at)
		return err
	})
	return before, shares, err
}

func settleIn(ctx context.Context, tx orderpay.Tx, no string, amount int64, at time.Time) (before, shares int64, err error) {
	r, err := tx.ChannelRefund(ctx, no)
	if err != nil {
		return 0, 0, err
	}
	if err := tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: no, From: r.Status, To: orderpay.ChannelRefundSuccess,
		Event: orderpay.ChannelRefundEventSucceed, At: at, Actor: "t", NextAt: at}); err != nil {
		return 0, 0, err
	}
	before, shares, err = tx.AddChannelRefunded(ctx, r.OutTradeNo, no, amount)
	if err != nil {
		return 0, 0, err
	}
	co, err := tx.ChannelOrder(ctx, r.OutTradeNo)
	if err != nil {
		return 0, 0, err
	}
	share := orderpay.RefundFeeShare(co.Fee, co.Amount, amount, before, shares, feeRule.RoundingRule())
	return before, shares, tx.SetChannelRefundFeeBack(ctx, no, share)
}

// testRefundSharesMeet is the worst interleaving of two refunds of one attempt that
// together refund all of it: the second settles while the first holds the attempt's row
// (on PostgreSQL under READ COMMITTED it waits on that row in AddChannelRefunded's update;
// on SQLite on the write lock). The second must reckon from what the first committed, its
// amount and its share, so that the two shares sum exactly to the fee.
func testRefundSharesMeet(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	payingAttempt(t, s, "M1", 999)
	paidAt := t0.Add(time.Minute)
	fee, rate := feeRule.FeeFor(999, orderpay.MethodQR)
	mustTx(t, s, func(tx orderpay.Tx) error {
		return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PM1A01", From: orderpay.ChannelOrderPaying,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: paidAt, Actor: "t", PaidAt: paidAt,
			FeeRecorded: true, Fee: fee, FeeRate: rate})
	})
	for _, r := range []struct {
		no     string
		amount int64
	}{{"RM1", 333}, {"RM2", 666}} {
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: r.no, OutTradeNo: "PM1A01", PaymentNo: "PM1", Channel: "alipay",
				Amount: r.amount, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundProcessing, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
		})
	}
	var before2, shares2 int64
	first, second := raceHeldOn(t, s, "UPDATE channel_orders SET channel_refunded%",
		func(ctx context.Context, tx orderpay.Tx) error {
			_, _, err := settleIn(ctx, tx, "RM1", 333, paidAt)
			return err
		},
		func(ctx context.Context, tx orderpay.Tx) error {
			var err error
			before2, shares2, err = settleIn(ctx, tx, "RM2", 666, paidAt)
			return err
		})
	if first != nil || second != nil {
		t.Fatalf("the two refunds settled with %v and %v", first, second)
	}
	r1, err1 := s.ChannelRefund(ctx, "RM1")
	r2, err2 := s.ChannelRefund(ctx, "RM2")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if before2 != 333 || shares2 != r1.FeeBack {
		t.Fatalf("the second refund read %d fen refunded before and %d fen of shares; want the first's 333 and %d", before2, shares2, r1.FeeBack)
	}
	if !r1.FeeBackRecorded || !r2.FeeBackRecorded || r1.FeeBack+r2.FeeBack != fee || r1.FeeBack != 2 {
		t.Fatalf("shares %d + %d of a fee of %d (recorded %v, %v); want 2 + 4 = 6", r1.FeeBack, r2.FeeBack, fee, r1.FeeBackRecorded, r2.FeeBackRecorded)
	}
	if co, err := s.ChannelOrder(ctx, "PM1A01"); err != nil || co.ChannelRefunded != 999 {
		t.Fatalf("attempt after both refunds: %+v, %v; want 999 fen refunded by the channel", co, err)
	}
}

// testReconciliationLayers: a report keeps its account, its layers and its figures, and its
// items their layer and difference, in the report and in the list; LastClosingBalance is the
// close of the latest earlier day whose balance is known, its latest report.
func testReconciliationLayers(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	rs := s.(orderpay.ReconciliationStore)
	save := func(channel, date string, known bool, closing int64) *orderpay.Reconciliation {
		t.Helper()
		r := &orderpay.Reconciliation{Channel: channel, Date: date, StartedAt: t0, FinishedAt: t0, Account: "2088000000000001",
			Figures: orderpay.ReconFigures{FeesChecked: true, Paid: 999, Refunded: 333, FeeExpected: 4, FeeBill: 5, FeeSummary: 5,
				SettlementChecked: true, NetExpected: 662, NetBill: 661, Movements: 3, BalanceKnown: known, Opening: 100, Closing: closing,
				PrevKnown: true, PrevDate: "2026-11-20", PrevClosing: 100},
			Items: []orderpay.ReconItem{
				{Layer: orderpay.LayerTrades, Class: orderpay.ReconMatched, Kind: orderpay.BillPayment, OutTradeNo: "PA1", BillAmount: 999, LocalAmount: 999, InBill: true},
				{Layer: orderpay.LayerFees, Class: orderpay.ReconFeeMismatch, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillPayment,
					OutTradeNo: "PA1", BillAmount: 999, LocalAmount: 999, InBill: true, Detail: "fee 0.07, want 0.06", Difference: 1},
				{Layer: orderpay.LayerSettlement, Class: orderpay.ReconSettlementMismatch, Resolution: orderpay.ResolutionUnexplained,
					Kind: orderpay.BillRefund, OutTradeNo: "PA1", OutRefundNo: "RA1", BillAmount: 333, LocalAmount: 333, Difference: -2},
			}}
		r.Tally()
		if err := rs.SaveReconciliation(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	rep := save("alipay", "2026-11-21", true, 761)
	if rep.Layers[orderpay.LayerFees].UnexplainedAmount != 1 || rep.Layers[orderpay.LayerSettlement].UnexplainedAmount != 2 {
		t.Fatalf("tally %+v", rep.Layers)
	}
	got, err := rs.Reconciliation(ctx, rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Account != rep.Account || got.Figures != rep.Figures || len(got.Layers) != 3 || len(got.Items) != 3 {
		t.Fatalf("read back account %q, figures %+v, layers %+v, %d items; want %q, %+v, %+v", got.Account, got.Figures, got.Layers,
			len(got.Items), rep.Account, rep.Figures, rep.Layers)
	}
	for _, l := range orderpay.ReconLayers {
		if got.Layers[l] != rep.Layers[l] {
			t.Fatalf("layer %s read back %+v, want %+v", l, got.Layers[l], rep.Layers[l])
		}
	}
	for i := range rep.Items {
		if got.Items[i] != rep.Items[i] {
			t.Fatalf("item %d read back %+v, want %+v", i, got.Items[i], rep.Items[i])
		}
	}
	list, err := rs.Reconciliations(ctx, "alipay", "", 10)
	if err != nil || len(list) != 1 || list[0].Items != nil || list[0].Account != rep.Account || list[0].Figures != rep.Figures ||
		list[0].Layers[orderpay.LayerSettlement] != rep.Layers[orderpay.LayerSettlement] {
		t.Fatalf("list %+v, %v", list, err)
	}

	if _, _, ok, err := rs.LastClosingBalance(ctx, "alipay", "2026-11-21"); err != nil || ok {
		t.Fatalf("a close before the first day: ok %v, %v", ok, err)
	}
	wantClose := func(date, day string, balance int64) {
		t.Helper()
		d, b, ok, err := rs.LastClosingBalance(ctx, "alipay", date)
		if err != nil || !ok || d != day || b != balance {
			t.Fatalf("close before %s: %s %d %v %v; want %s %d", date, d, b, ok, err, day, balance)
		}
	}
	wantClose("2026-11-22", "2026-11-21", 761)
	save("alipay", "2026-11-21", true, 800) // the day reconciled again: its latest report
	wantClose("2026-11-22", "2026-11-21", 800)
	save("alipay", "2026-11-22", false, 0)  // a later day whose balance is not known
	save("wechat", "2026-11-22", true, 5)   // another channel
	save("alipay", "2026-11-25", true, 900) // a day not before the one asked
	wantClose("2026-11-23", "2026-11-21", 800)
	wantClose("2026-11-25", "2026-11-21", 800)
	wantClose("2026-11-26", "2026-11-25", 900)
}

package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

// testReconciliation: the day's paid attempts and settled refunds of a channel are exactly
// those of that channel whose time falls in [from, to), and a report reads back with its
// items in order; the list is newest first, filtered, without items.
func testReconciliation(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	rs, ok := s.(orderpay.ReconciliationStore)
	if !ok {
		t.Fatalf("%T is not an orderpay.ReconciliationStore", s)
	}
	from, to, err := orderpay.BillDayRange("2026-11-22")
	if err != nil {
		t.Fatal(err)
	}
	attempt := func(no, channel string, status orderpay.ChannelOrderStatus, paidAt time.Time) {
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P" + no, OrderNo: no, Amount: 100, Status: orderpay.PaymentPaying,
				Subject: "x", PayDeadline: t0, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
			return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "P" + no + "A01", PaymentNo: "P" + no, Channel: channel,
				Seq: 1, Amount: 100, Status: status, CreatedAt: t0, UpdatedAt: t0, PaidAt: paidAt})
		})
	}
	attempt("R1", "alipay", orderpay.ChannelOrderSuccess, from)                      // first instant of the day: in
	attempt("R2", "alipay", orderpay.ChannelOrderSuccess, to.Add(-time.Millisecond)) // last instant: in
	attempt("R3", "alipay", orderpay.ChannelOrderSuccess, to)                        // the next day: out
	attempt("R4", "wechat", orderpay.ChannelOrderSuccess, from.Add(time.Hour))       // another channel: out
	attempt("R5", "alipay", orderpay.ChannelOrderPaying, time.Time{})                // not paid: out
	paid, err := rs.PaidChannelOrders(ctx, "alipay", from, to)
	if err != nil || len(paid) != 2 || paid[0].OutTradeNo != "PR1A01" || paid[1].OutTradeNo != "PR2A01" {
		t.Fatalf("paid attempts of the day: %+v, %v", paid, err)
	}

	refund := func(no string, settled time.Time) {
		mustTx(t, s, func(tx orderpay.Tx) error {
			if err := tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: "PR1A01", PaymentNo: "PR1",
				Channel: "alipay", Amount: 10, Reason: orderpay.RefundReasonLate, Status: orderpay.ChannelRefundPending, NextAt: t0,
				CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
			if settled.IsZero() {
				return nil
			}
			return tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: no, From: orderpay.ChannelRefundPending,
				To: orderpay.ChannelRefundSuccess, Event: orderpay.ChannelRefundEventSucceed, At: settled, Actor: "test", NextAt: settled})
		})
	}
	refund("PR1A01R1", from.Add(time.Minute))
	refund("PR1A01R2", to.Add(time.Minute))
	refund("PR1A01R3", time.Time{})
	settled, err := rs.SettledChannelRefunds(ctx, "alipay", from, to)
	if err != nil || len(settled) != 1 || settled[0].OutRefundNo != "PR1A01R1" {
		t.Fatalf("settled refunds of the day: %+v, %v", settled, err)
	}

	rep := &orderpay.Reconciliation{Channel: "alipay", Date: "2026-11-22", StartedAt: t0, FinishedAt: t0.Add(time.Second), BillRows: 2,
		Items: []orderpay.ReconItem{
			{Class: orderpay.ReconMatched, Kind: orderpay.BillPayment, OutTradeNo: "PR1A01", BillAmount: 100, LocalAmount: 100, InBill: true},
			{Class: orderpay.ReconMissingLocal, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillPayment,
				OutTradeNo: "PR5A01", BillAmount: 100, LocalAmount: 100, InBill: true, Detail: "query unknown"},
		}}
	rep.Tally()
	if err := rs.SaveReconciliation(ctx, rep); err != nil || rep.ID == 0 {
		t.Fatalf("save: id %d, %v", rep.ID, err)
	}
	second := &orderpay.Reconciliation{Channel: "wechat", Date: "2026-11-22", StartedAt: t0, FinishedAt: t0}
	second.Tally()
	if err := rs.SaveReconciliation(ctx, second); err != nil || second.ID == rep.ID {
		t.Fatalf("save second: id %d, %v", second.ID, err)
	}
	got, err := rs.Reconciliation(ctx, rep.ID)
	if err != nil || got.Channel != "alipay" || got.Date != "2026-11-22" || got.BillRows != 2 || got.Unexplained != 1 ||
		got.Counts[orderpay.ReconMatched] != 1 || got.Counts[orderpay.ReconMissingLocal] != 1 || !got.FinishedAt.Equal(t0.Add(time.Second)) ||
		len(got.Items) != 2 || got.Items[1] != rep.Items[1] || got.Items[0] != rep.Items[0] {
		t.Fatalf("read back %+v, %v", got, err)
	}
	_, err = rs.Reconciliation(ctx, rep.ID+second.ID+100)
	wantCode(t, err, orderpay.ENOTFOUND)
	list, err := rs.Reconciliations(ctx, "", "", 10)
	if err != nil || len(list) != 2 || list[0].ID != second.ID || list[1].ID != rep.ID || list[1].Items != nil {
		t.Fatalf("list %+v, %v", list, err)
	}
	if list, _ := rs.Reconciliations(ctx, "alipay", "2026-11-22", 10); len(list) != 1 || list[0].ID != rep.ID {
		t.Fatalf("filtered list %+v", list)
	}
	if list, _ := rs.Reconciliations(ctx, "", "2026-11-21", 10); len(list) != 0 {
		t.Fatalf("another day's list %+v", list)
	}
}

package audit

import (
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore"
)

// Failures the database's own constraints refuse to store (a stock bucket that does not add
// up, a negative count) or that need no database at all are checked on a snapshot built by
// hand.
func TestCheckWithoutDatabase(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	paidOrder := func() *sqlstore.Snapshot {
		return &sqlstore.Snapshot{
			Orders: []orderpay.Order{{No: "O1", Status: orderpay.OrderPaid, Total: 1000, Payable: 1000, PaymentNo: "P1", PayDeadline: t0.Add(time.Hour),
				Items: []orderpay.OrderItem{{Line: 1, SKU: "TEA", Qty: 1, UnitPrice: 1000, Amount: 1000, Payable: 1000}}}},
			Payments: []orderpay.Payment{{No: "P1", OrderNo: "O1", Amount: 1000, Status: orderpay.PaymentSuccess, PayDeadline: t0.Add(time.Hour),
				PaidChannel: orderpay.ChannelAlipay, PaidOutTradeNo: "T1"}},
			ChannelOrders: []orderpay.ChannelOrder{{OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay, Seq: 1, Amount: 1000,
				Status: orderpay.ChannelOrderSuccess}},
			Stock:     []orderpay.Stock{{SKU: "TEA", Available: 9, Sold: 1, Total: 10}},
			StockRows: []sqlstore.SnapshotStockRow{{SKU: "TEA", Available: 9, Sold: 1, Total: 10}},
			Shipments: []orderpay.Shipment{{No: "O1S01", OrderNo: "O1", Seq: 1, Status: orderpay.ShipmentPending,
				Items: []orderpay.ShipmentItem{{Line: 1, SKU: "TEA", Qty: 1}}}},
		}
	}
	// returned is the paid order with its one unit returned and refunded in full.
	returned := func(s *sqlstore.Snapshot, in *Inputs) {
		s.Shipments[0].Status = orderpay.ShipmentReceived
		s.AfterSales = []orderpay.AfterSale{{No: "ASO101", OrderNo: "O1", Seq: 1, PaymentNo: "P1", Kind: orderpay.AfterSaleReturn,
			Status: orderpay.AfterSaleSucceeded, Amount: 1000, Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "TEA", Qty: 1, Amount: 1000}}}}
		s.Refunds = []sqlstore.SnapshotRefund{{OutRefundNo: "ASO101", OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay,
			Amount: 1000, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundSuccess}}
		s.Payments[0].Refunded = 1000
		s.Stock[0].Available, s.Stock[0].Sold = 10, 0
		s.StockRows[0].Available, s.StockRows[0].Sold = 10, 0
		in.Ledger[0].Refunded = 1000
		in.Ledger[0].Refunds = []sim.LedgerRefund{{OutRefundNo: "ASO101", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: t0}}
	}
	ledger := func() []sim.LedgerEntry {
		return []sim.LedgerEntry{{Channel: orderpay.ChannelAlipay, OutTradeNo: "T1", Status: "TRADE_SUCCESS", Amount: 1000, PaidAt: t0}}
	}
	events := func() []Event {
		return []Event{
			{Subject: orderpay.SubjectOrderCreated, MsgID: "order.created:O1", Payload: []byte(`{"order_no":"O1"}`)},
			{Subject: orderpay.SubjectPaymentSucceeded, MsgID: "payment.succeeded:P1", Payload: []byte(`{"payment_no":"P1","order_no":"O1"}`)},
			{Subject: orderpay.SubjectOrderPaid, MsgID: "order.paid:O1", Payload: []byte(`{"order_no":"O1"}`)},
		}
	}
	cases := []struct {
		name   string
		change func(s *sqlstore.Snapshot, in *Inputs)
		want   []string // "I4 O1" style: invariant and order of each violation
		detail string   // a phrase the first violation's detail must contain
	}{
		{"consistent", func(*sqlstore.Snapshot, *Inputs) {}, nil, ""},
		{"a return received, restocked and refunded", returned, nil, ""},
		{"a return refunded but not restocked", func(s *sqlstore.Snapshot, in *Inputs) {
			returned(s, in)
			s.Stock[0].Available, s.Stock[0].Sold = 9, 1
			s.StockRows[0].Available, s.StockRows[0].Sold = 9, 1
		}, []string{"I4 "}, "sold 1 but paid orders hold 0 units"},
		{"a return whose refund the payment does not count", func(s *sqlstore.Snapshot, in *Inputs) {
			returned(s, in)
			s.Payments[0].Refunded = 0
		}, []string{"I3 O1", "I3 O1"}, "captured 1000 − refunded 1000 = 0 fen, but the order (PAID) keeps 1000"},
		{"a partial refund that gives back more than its line", func(s *sqlstore.Snapshot, in *Inputs) {
			s.Orders[0].Items[0].Qty, s.Orders[0].Total, s.Orders[0].Payable = 2, 2000, 2000
			s.Orders[0].Items[0].Amount, s.Orders[0].Items[0].Payable = 2000, 2000
			s.Shipments[0].Items[0].Qty = 2
			s.Stock[0].Available, s.Stock[0].Sold, s.StockRows[0].Available, s.StockRows[0].Sold = 8, 2, 8, 2
			s.Payments[0].Amount, s.ChannelOrders[0].Amount, in.Ledger[0].Amount = 2000, 2000, 2000
			s.AfterSales = []orderpay.AfterSale{{No: "ASO101", OrderNo: "O1", PaymentNo: "P1", Kind: orderpay.AfterSaleReturn,
				Status: orderpay.AfterSaleAwaitingGoods, Amount: 2500, Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "TEA", Qty: 1, Amount: 2500}}}}
		}, []string{"I3 O1"}, "give back 2500 fen of its 2000"},
		{"a paid order whose paying attempt went back as refused by the order", func(s *sqlstore.Snapshot, in *Inputs) {
			// The sums balance (captured 1000 − refunded 1000, payment refunded 1000): only
			// the refund's reason shows that goods would ship for money that went back.
			s.Refunds = []sqlstore.SnapshotRefund{{OutRefundNo: "T1R1", OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay,
				Amount: 1000, Reason: orderpay.RefundReasonCancelled, Status: orderpay.ChannelRefundSuccess}}
			s.Payments[0].Refunded = 1000
			in.Ledger[0].Refunded = 1000
			in.Ledger[0].Refunds = []sim.LedgerRefund{{OutRefundNo: "T1R1", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: t0}}
		}, []string{"I3 O1", "I3 O1"}, "was refunded as refused by the order (order_cancelled"},
		{"a paid order whose parcels miss a unit", func(s *sqlstore.Snapshot, _ *Inputs) {
			s.Shipments = nil
		}, []string{"I4 O1"}, "parcels carry 0 units, the order has 1"},
		{"a bucket that does not add up", func(s *sqlstore.Snapshot, _ *Inputs) {
			s.StockRows = append(s.StockRows, sqlstore.SnapshotStockRow{SKU: "TEA", Bucket: 1, Available: 3, Total: 2})
		}, []string{"I4 "}, "bucket 1: available 3 + locked 0 + sold 0 = 3, not total 2"},
		{"a negative count", func(s *sqlstore.Snapshot, _ *Inputs) {
			s.StockRows[0].Available, s.StockRows[0].Sold, s.StockRows[0].Total = -1, 1, 0
			s.Stock[0] = orderpay.Stock{SKU: "TEA", Available: -1, Sold: 1}
		}, []string{"I4 "}, "available is -1"},
		{"a duplicate delivery of the same message id is no second effect", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Events = append(in.Events, in.Events[2])
		}, nil, ""},
		{"payment.succeeded without a message id twice", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Events[1].MsgID = ""
			in.Events = append(in.Events, in.Events[1])
		}, []string{"I7 O1"}, "payment.succeeded took effect 2 times"},
		{"an event for an order orderpay does not have", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Events = append(in.Events, Event{Subject: orderpay.SubjectOrderCreated, MsgID: "order.created:O9"})
		}, []string{"I7 O9"}, "does not have"},
		{"the paid attempt's trade is not paid at the channel", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[0].PaidAt, in.Ledger[0].Status = time.Time{}, "WAIT_BUYER_PAY"
		}, []string{"I2 O1", "I3 O1", "I5 O1"}, "not paid"},
		{"paid at one channel, recorded at the other", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[0].Channel = orderpay.ChannelWechat
		}, []string{"I1 O1", "I2 O1", "I3 ", "I3 O1", "I5 O1"}, "orderpay's attempt T1 is at alipay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snap, in := paidOrder(), Inputs{Ledger: ledger(), Events: events(), Now: t0}
			tc.change(snap, &in)
			res := newWorld(snap, in).check()
			var got []string
			for _, v := range res.Violations {
				t.Logf("%s", v)
				got = append(got, v.Invariant+" "+v.OrderNo)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
			if tc.detail != "" && !strings.Contains(res.Violations[0].Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", res.Violations[0].Detail, tc.detail)
			}
		})
	}
}

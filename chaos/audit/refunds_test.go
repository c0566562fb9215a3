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

// I8 and the refunds' side of I3 on a snapshot built by hand: a paid order whose one unit
// was returned and refunded through Alipay (O1, refund ASO101), and a cancelled order whose
// late WeChat payment was sent back (O2, refund T2R1). Each case changes how one of those
// refunds went, at orderpay or at the channel, and names every violation that must follow.
func TestNoMoneyOwedSilently(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := t0.Add(10 * time.Minute)
	world := func() (*sqlstore.Snapshot, *Inputs) {
		s := &sqlstore.Snapshot{
			Orders: []orderpay.Order{
				{No: "O1", Status: orderpay.OrderCompleted, Total: 1000, Payable: 1000, PaymentNo: "P1", PayDeadline: t0.Add(time.Hour),
					Items: []orderpay.OrderItem{{Line: 1, SKU: "TEA", Qty: 1, UnitPrice: 1000, Amount: 1000, Payable: 1000}}},
				{No: "O2", Status: orderpay.OrderCancelled, Total: 500, Payable: 500, PayDeadline: t0.Add(time.Hour),
					Items: []orderpay.OrderItem{{Line: 1, SKU: "CUP", Qty: 1, UnitPrice: 500, Amount: 500, Payable: 500}}},
			},
			Payments: []orderpay.Payment{
				{No: "P1", OrderNo: "O1", Amount: 1000, Status: orderpay.PaymentSuccess, PayDeadline: t0.Add(time.Hour),
					PaidChannel: orderpay.ChannelAlipay, PaidOutTradeNo: "T1", Refunded: 1000},
				{No: "P2", OrderNo: "O2", Amount: 500, Status: orderpay.PaymentSuccess, PayDeadline: t0.Add(time.Hour),
					PaidChannel: orderpay.ChannelWechat, PaidOutTradeNo: "T2"},
			},
			ChannelOrders: []orderpay.ChannelOrder{
				{OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay, Seq: 1, Amount: 1000, Status: orderpay.ChannelOrderSuccess},
				{OutTradeNo: "T2", PaymentNo: "P2", Channel: orderpay.ChannelWechat, Seq: 1, Amount: 500, Status: orderpay.ChannelOrderSuccess},
			},
			Refunds: []sqlstore.SnapshotRefund{
				{OutRefundNo: "ASO101", OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay, Amount: 1000,
					Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundSuccess, NextAt: at, RefundedAt: at},
				{OutRefundNo: "T2R1", OutTradeNo: "T2", PaymentNo: "P2", Channel: orderpay.ChannelWechat, Amount: 500,
					Reason: orderpay.RefundReasonCancelled, Status: orderpay.ChannelRefundSuccess, NextAt: at, RefundedAt: at},
			},
			Stock:     []orderpay.Stock{{SKU: "CUP", Available: 5, Total: 5}, {SKU: "TEA", Available: 10, Total: 10}},
			StockRows: []sqlstore.SnapshotStockRow{{SKU: "CUP", Available: 5, Total: 5}, {SKU: "TEA", Available: 10, Total: 10}},
			Shipments: []orderpay.Shipment{{No: "O1S01", OrderNo: "O1", Seq: 1, Status: orderpay.ShipmentReceived,
				Items: []orderpay.ShipmentItem{{Line: 1, SKU: "TEA", Qty: 1}}}},
			AfterSales: []orderpay.AfterSale{{No: "ASO101", OrderNo: "O1", Seq: 1, PaymentNo: "P1", Kind: orderpay.AfterSaleReturn,
				Status: orderpay.AfterSaleSucceeded, Amount: 1000, Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "TEA", Qty: 1, Amount: 1000}}}},
		}
		in := &Inputs{Now: t0.Add(time.Hour), Ledger: []sim.LedgerEntry{
			{Channel: orderpay.ChannelAlipay, OutTradeNo: "T1", Status: "TRADE_CLOSED", Amount: 1000, Refunded: 1000, PaidAt: t0,
				Refunds: []sim.LedgerRefund{{OutRefundNo: "ASO101", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: at}}},
			{Channel: orderpay.ChannelWechat, OutTradeNo: "T2", Status: "REFUND", Amount: 500, Refunded: 500, PaidAt: t0,
				Refunds: []sim.LedgerRefund{{OutRefundNo: "T2R1", Amount: 500, Status: sim.LedgerRefundSuccess, SettledAt: at}}},
		}, Events: []Event{
			{Subject: orderpay.SubjectOrderCreated, MsgID: "order.created:O1", Payload: []byte(`{"order_no":"O1"}`)},
			{Subject: orderpay.SubjectPaymentSucceeded, MsgID: "payment.succeeded:P1", Payload: []byte(`{"payment_no":"P1","order_no":"O1"}`)},
			{Subject: orderpay.SubjectOrderPaid, MsgID: "order.paid:O1", Payload: []byte(`{"order_no":"O1"}`)},
			{Subject: orderpay.SubjectOrderCreated, MsgID: "order.created:O2", Payload: []byte(`{"order_no":"O2"}`)},
			{Subject: orderpay.SubjectOrderCancelled, MsgID: "order.cancelled:O2", Payload: []byte(`{"order_no":"O2"}`)},
			{Subject: orderpay.SubjectPaymentSucceeded, MsgID: "payment.succeeded:P2", Payload: []byte(`{"payment_no":"P2","order_no":"O2"}`)},
		}}
		return s, in
	}
	// The two refunds and the ledger's record of each.
	aso := func(s *sqlstore.Snapshot) *sqlstore.SnapshotRefund { return &s.Refunds[0] }
	t2r1 := func(s *sqlstore.Snapshot) *sqlstore.SnapshotRefund { return &s.Refunds[1] }
	// channelRefused: the channel never took ASO101 (refused for balance until the retries
	// ran out): nothing in the ledger.
	channelRefused := func(in *Inputs) {
		in.Ledger[0].Refunded, in.Ledger[0].Refunds, in.Ledger[0].Status = 0, nil, "TRADE_SUCCESS"
	}
	// owed: ASO101 is not back yet: the payment does not count it, its request is REFUNDING.
	owed := func(s *sqlstore.Snapshot, status orderpay.ChannelRefundStatus) {
		r := aso(s)
		r.Status, r.RefundedAt = status, time.Time{}
		s.Payments[0].Refunded = 0
		s.AfterSales[0].Status = orderpay.AfterSaleRefunding
	}
	// resolved: ASO101, refused by the channel, went to the operators' queue and was paid
	// back by bank transfer; the payment counts it and the request succeeded, as
	// payment.ResolveRefund records it.
	resolved := func(s *sqlstore.Snapshot, in *Inputs) {
		channelRefused(in)
		r := aso(s)
		r.Status, r.Tries, r.Retried, r.NeedsActionAt = orderpay.ChannelRefundResolved, 4, 3, at.Add(-time.Minute)
		r.Problem = "the channel refused it 4 times over 24m0s, the last: ACQ.SELLER_BALANCE_NOT_ENOUGH"
		r.ResolvedBy, r.ResolvedRef, r.ResolvedNote = "operator:admin", "BANK-1", "transferred"
	}
	cases := []struct {
		name   string
		change func(s *sqlstore.Snapshot, in *Inputs)
		want   []string // "I8 O1": invariant and order of each violation, in the result's order
		detail string   // a phrase the I8 violation's detail (or the first one's) must contain
	}{
		{"every refund back through the channel", func(*sqlstore.Snapshot, *Inputs) {}, nil, ""},
		{"a return refused by the channel, queued and paid back by bank transfer", resolved, nil, ""},
		{"a late payment's refund ended ABNORMAL at WeChat and paid back by bank transfer", func(s *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[1].Refunded, in.Ledger[1].Status = 0, "SUCCESS"
			in.Ledger[1].Refunds[0].Status, in.Ledger[1].Refunds[0].SettledAt = sim.LedgerRefundAbnormal, time.Time{}
			r := t2r1(s)
			r.Status, r.NeedsActionAt, r.Problem = orderpay.ChannelRefundResolved, at, "ended at the channel without reaching the buyer: ABNORMAL"
			r.ResolvedBy, r.ResolvedRef = "operator:admin", "BANK-2"
		}, nil, ""},
		{"a refund on its way with a next try is owed visibly: the books are open, I8 holds", func(s *sqlstore.Snapshot, in *Inputs) {
			owed(s, orderpay.ChannelRefundProcessing)
			in.Ledger[0].Refunded, in.Ledger[0].Status = 0, "TRADE_SUCCESS"
			in.Ledger[0].Refunds[0].Status, in.Ledger[0].Refunds[0].SettledAt = sim.LedgerRefundProcessing, time.Time{}
		}, []string{"I3 O1"}, "refunds still owed at settle: ASO101 1000 fen PROCESSING"},
		{"a refund in the operators' queue with its problem is owed visibly: the books are open, I8 holds", func(s *sqlstore.Snapshot, in *Inputs) {
			channelRefused(in)
			owed(s, orderpay.ChannelRefundNeedsAction)
			aso(s).Problem, aso(s).NeedsActionAt = "the channel refused it 4 times over 24m0s, the last: ACQ.SELLER_BALANCE_NOT_ENOUGH", at
		}, []string{"I3 O1"}, "ASO101 1000 fen NEEDS_ACTION"},

		{"SUCCESS here, no such refund at the channel", func(_ *sqlstore.Snapshot, in *Inputs) {
			channelRefused(in)
		}, []string{"I3 O1", "I8 O1"}, "is SUCCESS but alipay has no refund ASO101 of trade T1"},
		{"SUCCESS here for another amount than the channel refunded", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[0].Refunded, in.Ledger[0].Refunds[0].Amount = 900, 900
		}, []string{"I3 O1", "I8 O1"}, "is SUCCESS for 1000 fen but alipay refunded 900 fen"},
		{"SUCCESS here, ABNORMAL at the channel", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[1].Refunded, in.Ledger[1].Status = 0, "SUCCESS"
			in.Ledger[1].Refunds[0].Status, in.Ledger[1].Refunds[0].SettledAt = sim.LedgerRefundAbnormal, time.Time{}
		}, []string{"I3 O2", "I8 O2"}, "is SUCCESS but wechat's refund is ABNORMAL"},
		{"SUCCESS here, CLOSED at the channel", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[1].Refunded, in.Ledger[1].Status = 0, "SUCCESS"
			in.Ledger[1].Refunds[0].Status, in.Ledger[1].Refunds[0].SettledAt = sim.LedgerRefundClosed, time.Time{}
		}, []string{"I3 O2", "I8 O2"}, "is SUCCESS but wechat's refund is CLOSED"},
		{"RESOLVED without a reference", func(s *sqlstore.Snapshot, in *Inputs) {
			resolved(s, in)
			aso(s).ResolvedRef = ""
		}, []string{"I8 O1"}, "names no one or no reference"},
		{"RESOLVED without who resolved it", func(s *sqlstore.Snapshot, in *Inputs) {
			resolved(s, in)
			aso(s).ResolvedBy = ""
		}, []string{"I8 O1"}, "names no one or no reference"},
		{"RESOLVED outside the channel and refunded by the channel too", func(s *sqlstore.Snapshot, in *Inputs) {
			resolved(s, in)
			in.Ledger[0].Refunded, in.Ledger[0].Status = 1000, "TRADE_CLOSED"
			in.Ledger[0].Refunds = []sim.LedgerRefund{{OutRefundNo: "ASO101", Amount: 1000, Status: sim.LedgerRefundSuccess, SettledAt: at}}
		}, []string{"I3 O1", "I8 O1"}, "the buyer got it twice"},
		{"PENDING with no next try", func(s *sqlstore.Snapshot, in *Inputs) {
			channelRefused(in)
			owed(s, orderpay.ChannelRefundPending)
			aso(s).NextAt = time.Time{}
		}, []string{"I3 O1", "I8 O1"}, "is PENDING with no next try"},
		{"PROCESSING with no next try", func(s *sqlstore.Snapshot, in *Inputs) {
			owed(s, orderpay.ChannelRefundProcessing)
			in.Ledger[0].Refunded, in.Ledger[0].Status = 0, "TRADE_SUCCESS"
			in.Ledger[0].Refunds[0].Status, in.Ledger[0].Refunds[0].SettledAt = sim.LedgerRefundProcessing, time.Time{}
			aso(s).NextAt = time.Time{}
		}, []string{"I3 O1", "I8 O1"}, "is PROCESSING with no next try"},
		{"NEEDS_ACTION without a problem", func(s *sqlstore.Snapshot, in *Inputs) {
			channelRefused(in)
			owed(s, orderpay.ChannelRefundNeedsAction)
			aso(s).NeedsActionAt = at
		}, []string{"I3 O1", "I8 O1"}, "waits for an operator without saying why"},
		{"a refund left FAILED: nothing sends it and nobody is asked, yet the sums balance", func(s *sqlstore.Snapshot, in *Inputs) {
			channelRefused(in)
			owed(s, "FAILED")
		}, []string{"I8 O1"}, `is "FAILED"`},
		{"the channel refunded under a number orderpay does not know", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[0].Refunded += 100
			in.Ledger[0].Refunds = append(in.Ledger[0].Refunds, sim.LedgerRefund{OutRefundNo: "X9", Amount: 100, Status: sim.LedgerRefundSuccess, SettledAt: at})
		}, []string{"I3 O1", "I8 O1"}, "alipay refunded 100 fen of trade T1 under X9, a refund orderpay does not know"},
		{"a refund the channel took but never settled, unknown to orderpay, is no money moved", func(_ *sqlstore.Snapshot, in *Inputs) {
			in.Ledger[1].Refunds = append(in.Ledger[1].Refunds, sim.LedgerRefund{OutRefundNo: "X8", Amount: 100, Status: sim.LedgerRefundAbnormal})
		}, nil, ""},
		{"a RESOLVED refund the payment does not count as returned", func(s *sqlstore.Snapshot, in *Inputs) {
			resolved(s, in)
			s.Payments[0].Refunded = 0
		}, []string{"I3 O1", "I3 O1"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snap, in := world()
			tc.change(snap, in)
			res := newWorld(snap, *in).check()
			var got []string
			for _, v := range res.Violations {
				t.Logf("%s", v)
				got = append(got, v.Invariant+" "+v.OrderNo)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("violations %q, want %q", got, tc.want)
			}
			if tc.detail == "" {
				return
			}
			i := slices.IndexFunc(res.Violations, func(v Violation) bool { return v.Invariant == NoMoneyOwedSilently })
			if i < 0 {
				i = 0
			}
			if !strings.Contains(res.Violations[i].Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", res.Violations[i].Detail, tc.detail)
			}
		})
	}
}

// I3 counts money paid back outside the channel as returned, per payment and in the global
// sums; and the refund outcomes count each refund once by how it went.
func TestMoneyPaidBackOutsideTheChannel(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	snap := &sqlstore.Snapshot{
		Orders: []orderpay.Order{{No: "O1", Status: orderpay.OrderCancelled, Total: 700, Payable: 700, PayDeadline: t0,
			Items: []orderpay.OrderItem{{Line: 1, SKU: "CUP", Qty: 1, UnitPrice: 700, Amount: 700, Payable: 700}}}},
		Payments: []orderpay.Payment{{No: "P1", OrderNo: "O1", Amount: 700, Status: orderpay.PaymentSuccess, PayDeadline: t0,
			PaidChannel: orderpay.ChannelAlipay, PaidOutTradeNo: "T1"}},
		ChannelOrders: []orderpay.ChannelOrder{{OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay, Seq: 1, Amount: 700,
			Status: orderpay.ChannelOrderSuccess}},
		Refunds: []sqlstore.SnapshotRefund{{OutRefundNo: "T1R1", OutTradeNo: "T1", PaymentNo: "P1", Channel: orderpay.ChannelAlipay,
			Amount: 700, Reason: orderpay.RefundReasonLate, Status: orderpay.ChannelRefundResolved, NeedsActionAt: t0, Retried: 3,
			ResolvedBy: "operator:admin", ResolvedRef: "BANK-1"}},
		Stock:     []orderpay.Stock{{SKU: "CUP", Available: 5, Total: 5}},
		StockRows: []sqlstore.SnapshotStockRow{{SKU: "CUP", Available: 5, Total: 5}},
	}
	in := Inputs{Now: t0, Ledger: []sim.LedgerEntry{{Channel: orderpay.ChannelAlipay, OutTradeNo: "T1", Status: "TRADE_SUCCESS", Amount: 700, PaidAt: t0}},
		Events: []Event{
			{Subject: orderpay.SubjectOrderCreated, MsgID: "order.created:O1"},
			{Subject: orderpay.SubjectOrderCancelled, MsgID: "order.cancelled:O1"},
			{Subject: orderpay.SubjectPaymentSucceeded, MsgID: "payment.succeeded:P1", Payload: []byte(`{"payment_no":"P1"}`)},
		}}
	res := newWorld(snap, in).check()
	for _, v := range res.Violations {
		t.Errorf("unexpected violation: %s", v)
	}
	if want := (Money{Captured: 700, Resolved: 700}); res.Money != want {
		t.Errorf("Money = %+v, want %+v", res.Money, want)
	}
	if want := (RefundOutcomes{Total: 1, Queued: 1, Resolved: 1, Amount: 700}); res.Refunds != want {
		t.Errorf("Refunds = %+v, want %+v", res.Refunds, want)
	}

	// Every outcome once.
	add := func(no string, status orderpay.ChannelRefundStatus, retried int, queued bool) {
		r := sqlstore.SnapshotRefund{OutRefundNo: no, Status: status, Retried: retried, Amount: 10}
		if queued {
			r.NeedsActionAt = t0
		}
		snap.Refunds = append(snap.Refunds, r)
	}
	snap.Refunds = nil
	add("A", orderpay.ChannelRefundSuccess, 0, false)
	add("B", orderpay.ChannelRefundSuccess, 2, false)
	add("C", orderpay.ChannelRefundSuccess, 4, true)
	add("D", orderpay.ChannelRefundResolved, 4, true)
	add("E", orderpay.ChannelRefundNeedsAction, 1, true)
	add("F", orderpay.ChannelRefundPending, 1, true)
	add("G", orderpay.ChannelRefundProcessing, 0, false)
	add("H", orderpay.ChannelRefundSuccess, 4, true)
	w := newWorld(snap, in)
	// C left the queue by an operator's retry, then the channel made it; H left it on the
	// channel's late word, with no operator in between.
	hist := func(from, to orderpay.ChannelRefundStatus, ev orderpay.ChannelRefundEvent, actor string) orderpay.HistoryEntry {
		return orderpay.HistoryEntry{Entity: orderpay.EntityRefund, From: string(from), To: string(to), Event: string(ev), Actor: actor}
	}
	escalate := hist(orderpay.ChannelRefundPending, orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventEscalate, "channel:wechatpay")
	w.refundHistory["C"] = []orderpay.HistoryEntry{escalate,
		hist(orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundPending, orderpay.ChannelRefundEventOperatorRetry, "operator:admin"),
		hist(orderpay.ChannelRefundPending, orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventSucceed, "channel:wechatpay")}
	w.refundHistory["H"] = []orderpay.HistoryEntry{escalate,
		hist(orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventSucceed, "channel:wechatpay")}
	got := w.refundOutcomes()
	want := RefundOutcomes{Total: 8, FirstTry: 1, Retried: 1, Queued: 5, Resolved: 1, OperatorRetried: 1, SettledByChannel: 1, StillQueued: 1,
		InFlight: 2, Amount: 80}
	if got != want {
		t.Errorf("outcomes %+v, want %+v", got, want)
	}
}

package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
)

func TestAlipayRefund_PartialRefundsMoveMoneyAndLeaveTheTradePaid(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	tradeNo := b.alipayPaid(t, "R_part", "10.00")

	r := b.alipayRefund(t, "R_part", "R_part_1", "3.00")
	if r.Code != alipay.CodeSuccess || r.FundChange != "Y" || r.RefundFee != "3.00" || r.TradeNo != tradeNo ||
		r.OutTradeNo != "R_part" || r.BuyerUserId == "" {
		t.Fatalf("first refund: %+v", r)
	}
	b.clock.Advance(time.Second)
	// refund_fee is the trade's cumulative total, not this refund's amount. (The SDK has no
	// field for gmt_refund_pay: read the raw answer.)
	_, raw := rawCall(t, b, signedParams(t, b, "alipay.trade.refund",
		`{"out_trade_no":"R_part","out_request_no":"R_part_2","refund_amount":"2.50"}`, signWith(t, b)))
	if raw["code"] != "10000" || raw["fund_change"] != "Y" || raw["refund_fee"] != "5.50" ||
		raw["gmt_refund_pay"] != b.clock.Now().In(cst).Format("2006-01-02 15:04:05") {
		t.Fatalf("second refund: %v", raw)
	}
	if q := b.query(t, "R_part"); q.TradeStatus != alipay.TradeStatusSuccess {
		t.Fatalf("query after partial refunds: %+v, want TRADE_SUCCESS", q)
	}
	if e := alipayEntry(t, b.sim, "R_part"); e.Refunded != 550 || e.Status != sim.AlipayTradeSuccess {
		t.Fatalf("ledger %+v", e)
	}
}

func TestAlipayRefund_ResendWithSameNumberAndAmountRefundsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "R_rep", "10.00")
	first := b.alipayRefund(t, "R_rep", "R_rep_1", "4.00")
	b.clock.Advance(time.Minute)
	again := b.alipayRefund(t, "R_rep", "R_rep_1", "4.00")
	if first.Code != alipay.CodeSuccess || again.Code != alipay.CodeSuccess || again.FundChange != "Y" ||
		again.RefundFee != "4.00" || again.TradeNo != first.TradeNo {
		t.Fatalf("resend: %+v, first %+v", again, first)
	}
	if refunds := b.sim.AlipayRefunds("R_rep"); len(refunds) != 1 || refunds[0].Amount != 400 {
		t.Fatalf("refunds %+v, want one of 400", refunds)
	}
	if e := alipayEntry(t, b.sim, "R_rep"); e.Refunded != 400 {
		t.Fatalf("ledger %+v", e)
	}
}

func TestAlipayRefund_SameNumberOtherAmountIsDiscordant(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "R_dis", "10.00")
	b.alipayRefund(t, "R_dis", "R_dis_1", "4.00")
	wantAlipayCode(t, "other amount", b.alipayRefund(t, "R_dis", "R_dis_1", "5.00").Error, "40004", "ACQ.DISCORDANT_REPEAT_REQUEST")
	if e := alipayEntry(t, b.sim, "R_dis"); e.Refunded != 400 {
		t.Fatalf("ledger %+v", e)
	}
}

func TestAlipayRefund_MoreThanPaidIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: time.Hour})
	b.alipayPaid(t, "R_over", "10.00")
	wantAlipayCode(t, "one refund above the total", b.alipayRefund(t, "R_over", "R_over_0", "10.01").Error, "40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL")
	b.alipayRefund(t, "R_over", "R_over_1", "6.00")
	// Pending refunds count: the second would take the total past the amount paid.
	wantAlipayCode(t, "refunds adding up above the total", b.alipayRefund(t, "R_over", "R_over_2", "4.01").Error, "40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL")
	if r := b.alipayRefund(t, "R_over", "R_over_3", "4.00"); r.Code != alipay.CodeSuccess {
		t.Fatalf("the exact remainder: %+v", r)
	}
	if refunds := b.sim.AlipayRefunds("R_over"); len(refunds) != 2 {
		t.Fatalf("refunds %+v, want 2", refunds)
	}
}

func TestAlipayRefund_FullRefundClosesTheTrade(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "R_full", "10.00")
	b.alipayRefund(t, "R_full", "R_full_1", "4.00")
	if r := b.alipayRefund(t, "R_full", "R_full_2", "6.00"); r.FundChange != "Y" || r.RefundFee != "10.00" {
		t.Fatalf("last refund: %+v", r)
	}
	q := b.query(t, "R_full")
	if q.TradeStatus != alipay.TradeStatusClosed || q.SendPayDate == "" || q.TotalAmount != "10.00" {
		t.Fatalf("query: %+v, want TRADE_CLOSED that shows the payment", q)
	}
	e := alipayEntry(t, b.sim, "R_full")
	if e.Status != sim.AlipayTradeClosed || e.Refunded != 1000 || e.PaidAt.IsZero() {
		t.Fatalf("ledger %+v", e)
	}
	// Nothing more can be refunded, but resending the last refund still answers the same.
	wantAlipayCode(t, "new refund", b.alipayRefund(t, "R_full", "R_full_3", "0.01").Error, "40004", "ACQ.TRADE_STATUS_ERROR")
	if r := b.alipayRefund(t, "R_full", "R_full_2", "6.00"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" {
		t.Fatalf("resend after close: %+v", r)
	}
}

func TestAlipayRefund_WithoutRequestNoUsesOutTradeNo(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "R_def", "10.00")
	if r := b.alipayRefund(t, "R_def", "", "10.00"); r.FundChange != "Y" {
		t.Fatalf("refund: %+v", r)
	}
	if refunds := b.sim.AlipayRefunds("R_def"); len(refunds) != 1 || refunds[0].OutRequestNo != "R_def" {
		t.Fatalf("refunds %+v, want one numbered R_def", refunds)
	}
	if rq := b.alipayRefundQuery(t, "R_def", ""); rq.RefundStatus != "REFUND_SUCCESS" || rq.OutRequestNo != "R_def" {
		t.Fatalf("refund query: %+v", rq)
	}
}

func TestAlipayRefund_RefusedUnlessPaidAndRefundable(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.precreate(t, "R_pending", "1.00", b.clock.Now().Add(time.Hour), "")
	b.alipayScanned(t, "R_wait", "1.00")
	b.alipayScanned(t, "R_closed", "1.00")
	b.alipayClose(t, "R_closed")
	b.alipayPaid(t, "R_fin", "1.00")
	if err := b.sim.AlipayFinishTrade("R_fin"); err != nil {
		t.Fatal(err)
	}
	b.alipayPaid(t, "R_ok", "1.00")

	cases := []struct{ outTradeNo, amount, code, subCode string }{
		{"R_never", "1.00", "40004", "ACQ.TRADE_NOT_EXIST"},
		{"R_pending", "1.00", "40004", "ACQ.TRADE_NOT_EXIST"},
		{"R_wait", "1.00", "40004", "ACQ.TRADE_STATUS_ERROR"},
		{"R_closed", "1.00", "40004", "ACQ.TRADE_STATUS_ERROR"},
		{"R_fin", "1.00", "40004", "ACQ.TRADE_HAS_FINISHED"},
		{"R_ok", "0.00", "40004", "ACQ.INVALID_PARAMETER"},
		{"R_ok", "0.001", "40004", "ACQ.INVALID_PARAMETER"},
		{"R_ok", "-1.00", "40004", "ACQ.INVALID_PARAMETER"},
	}
	for _, tc := range cases {
		wantAlipayCode(t, tc.outTradeNo+" "+tc.amount, b.alipayRefund(t, tc.outTradeNo, "N1", tc.amount).Error, tc.code, tc.subCode)
	}
	for _, e := range b.sim.Ledger() {
		if e.Refunded != 0 || len(b.sim.AlipayRefunds(e.OutTradeNo)) != 0 {
			t.Fatalf("a refused refund left a trace: %+v", e)
		}
	}
}

func TestAlipayRefund_DelayedRefundIsPendingUntilTheClockMoves(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: 30 * time.Second})
	b.alipayPaid(t, "R_slow", "8.00")

	r := b.alipayRefund(t, "R_slow", "R_slow_1", "8.00")
	if r.Code != alipay.CodeSuccess || r.FundChange != "N" || r.RefundFee != "0.00" {
		t.Fatalf("refund before settlement: %+v, want fund_change=N", r)
	}
	if rq := b.alipayRefundQuery(t, "R_slow", "R_slow_1"); rq.Code != alipay.CodeSuccess || rq.RefundStatus != "" {
		t.Fatalf("refund query before settlement: %+v, want no refund_status", rq)
	}
	if e := alipayEntry(t, b.sim, "R_slow"); e.Refunded != 0 || e.Status != sim.AlipayTradeSuccess {
		t.Fatalf("ledger before settlement %+v", e)
	}
	if again := b.alipayRefund(t, "R_slow", "R_slow_1", "8.00"); again.FundChange != "N" {
		t.Fatalf("resend before settlement: %+v", again)
	}

	settle := b.clock.Now().Add(30 * time.Second)
	b.clock.Advance(29 * time.Second)
	if rq := b.alipayRefundQuery(t, "R_slow", "R_slow_1"); rq.RefundStatus != "" {
		t.Fatalf("refund query a second early: %+v", rq)
	}
	b.clock.Advance(time.Minute)
	rq := b.alipayRefundQuery(t, "R_slow", "R_slow_1")
	if rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "8.00" || rq.TotalAmount != "8.00" ||
		rq.OutRequestNo != "R_slow_1" || rq.GMTRefundPay != settle.In(cst).Format("2006-01-02 15:04:05") {
		t.Fatalf("refund query after settlement: %+v", rq)
	}
	if again := b.alipayRefund(t, "R_slow", "R_slow_1", "8.00"); again.FundChange != "Y" || again.RefundFee != "8.00" {
		t.Fatalf("resend after settlement: %+v", again)
	}
	if e := alipayEntry(t, b.sim, "R_slow"); e.Refunded != 800 || e.Status != sim.AlipayTradeClosed {
		t.Fatalf("ledger after settlement %+v", e)
	}
}

func TestAlipayRefundQuery_EachState(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: time.Minute})
	tradeNo := b.alipayPaid(t, "Q_r", "9.00")
	b.precreate(t, "Q_pending", "1.00", b.clock.Now().Add(time.Hour), "")

	// No such refund: 10000 without refund_status.
	if rq := b.alipayRefundQuery(t, "Q_r", "none"); rq.Code != alipay.CodeSuccess || rq.RefundStatus != "" || rq.OutTradeNo != "Q_r" {
		t.Fatalf("no such refund: %+v", rq)
	}
	b.alipayRefund(t, "Q_r", "Q_r_1", "2.00")
	if rq := b.alipayRefundQuery(t, "Q_r", "Q_r_1"); rq.Code != alipay.CodeSuccess || rq.RefundStatus != "" {
		t.Fatalf("pending: %+v", rq)
	}
	b.clock.Advance(time.Minute)
	if rq := b.alipayRefundQuery(t, "Q_r", "Q_r_1"); rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "2.00" || rq.TradeNo != tradeNo {
		t.Fatalf("settled: %+v", rq)
	}
	// By trade_no alone.
	rq, err := b.client.TradeFastPayRefundQuery(context.Background(), alipay.TradeFastPayRefundQuery{TradeNo: tradeNo, OutRequestNo: "Q_r_1"})
	if err != nil || rq.RefundStatus != "REFUND_SUCCESS" {
		t.Fatalf("by trade_no: %+v %v", rq, err)
	}
	wantAlipayCode(t, "unscanned trade", b.alipayRefundQuery(t, "Q_pending", "x").Error, "40004", "ACQ.TRADE_NOT_EXIST")
	wantAlipayCode(t, "unknown trade", b.alipayRefundQuery(t, "Q_never", "x").Error, "40004", "ACQ.TRADE_NOT_EXIST")
}

func TestAlipayLedger_RefundedIsTheSettledTotal(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: time.Minute})
	b.alipayPaid(t, "LR_part", "10.00")
	b.alipayPaid(t, "LR_full", "3.00")
	b.alipayPaid(t, "LR_cancel", "7.77")
	b.alipayPaid(t, "LR_none", "1.00")
	b.alipayScanned(t, "LR_wait", "2.00")

	b.alipayRefund(t, "LR_part", "a", "1.00")
	b.alipayRefund(t, "LR_full", "a", "3.00")
	b.alipayCancel(t, "LR_cancel")
	b.clock.Advance(time.Minute) // those three settle
	b.alipayRefund(t, "LR_part", "b", "2.00")

	want := map[string]struct {
		status   string
		refunded int64
	}{
		"LR_part":   {sim.AlipayTradeSuccess, 100}, // b is still pending
		"LR_full":   {sim.AlipayTradeClosed, 300},
		"LR_cancel": {sim.AlipayTradeClosed, 777},
		"LR_none":   {sim.AlipayTradeSuccess, 0},
		"LR_wait":   {sim.AlipayWaitBuyerPay, 0},
	}
	check := func() {
		t.Helper()
		got := b.sim.Ledger()
		if len(got) != len(want) {
			t.Fatalf("ledger has %d entries, want %d", len(got), len(want))
		}
		for _, e := range got {
			if w := want[e.OutTradeNo]; e.Status != w.status || e.Refunded != w.refunded {
				t.Errorf("%s: %s refunded %d, want %s %d", e.OutTradeNo, e.Status, e.Refunded, w.status, w.refunded)
			}
		}
	}
	check()
	b.clock.Advance(time.Minute)
	want["LR_part"] = struct {
		status   string
		refunded int64
	}{sim.AlipayTradeSuccess, 300}
	check()
}

func TestAlipayFinishTrade_OnlyPaidTrades(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayScanned(t, "F_wait", "1.00")
	if err := b.sim.AlipayFinishTrade("F_wait"); err == nil {
		t.Fatal("finished an unpaid trade")
	}
	if err := b.sim.AlipayFinishTrade("F_never"); err == nil {
		t.Fatal("finished an unknown trade")
	}
	b.alipayPaid(t, "F_paid", "1.00")
	if err := b.sim.AlipayFinishTrade("F_paid"); err != nil {
		t.Fatal(err)
	}
	if q := b.query(t, "F_paid"); q.TradeStatus != alipay.TradeStatusFinished {
		t.Fatalf("query %+v, want TRADE_FINISHED", q)
	}
}

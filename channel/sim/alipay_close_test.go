package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
)

// Close before anyone scanned: there is no trade to close, and the code keeps working
// until its deadline (the documented choice: only the precreate deadline stops it).
func TestAlipayClose_BeforeScanTradeNotExistAndCodeStaysScannable(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.precreate(t, "C_pending", "5.00", b.clock.Now().Add(time.Hour), "")

	wantAlipayCode(t, "close", b.alipayClose(t, "C_pending").Error, "40004", "ACQ.TRADE_NOT_EXIST")
	wantAlipayCode(t, "close unknown", b.alipayClose(t, "C_never").Error, "40004", "ACQ.TRADE_NOT_EXIST")
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("ledger %+v, want empty", l)
	}
	if res, err := b.sim.Pay(context.Background(), qr); err != nil || res.Status != sim.AlipayTradeSuccess {
		t.Fatalf("pay after a close of the pending code: %+v %v, want paid", res, err)
	}
}

func TestAlipayClose_AfterScanClosesTheTradeForGood(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.alipayScanned(t, "C_wait", "5.00")

	rsp := b.alipayClose(t, "C_wait")
	if rsp.Code != alipay.CodeSuccess || rsp.OutTradeNo != "C_wait" || rsp.TradeNo == "" {
		t.Fatalf("close: %+v", rsp)
	}
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after close: err %v, want ECONFLICT", err)
	}
	if q := b.query(t, "C_wait"); q.TradeStatus != alipay.TradeStatusClosed || q.SendPayDate != "" || q.TradeNo != rsp.TradeNo {
		t.Fatalf("query after close: %+v, want TRADE_CLOSED unpaid", q)
	}
	// A second close finds nothing waiting.
	wantAlipayCode(t, "close again", b.alipayClose(t, "C_wait").Error, "40004", "ACQ.TRADE_STATUS_ERROR")
	if e := alipayEntry(t, b.sim, "C_wait"); e.Status != sim.AlipayTradeClosed || !e.PaidAt.IsZero() {
		t.Fatalf("ledger %+v", e)
	}
}

func TestAlipayClose_PaidOrRefundedTradeIsStatusErrorAndStaysPaid(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "C_paid", "5.00")
	b.alipayPaid(t, "C_refunded", "5.00")
	b.alipayRefund(t, "C_refunded", "R1", "5.00")

	for _, no := range []string{"C_paid", "C_refunded"} {
		wantAlipayCode(t, "close "+no, b.alipayClose(t, no).Error, "40004", "ACQ.TRADE_STATUS_ERROR")
	}
	if q := b.query(t, "C_paid"); q.TradeStatus != alipay.TradeStatusSuccess {
		t.Fatalf("query after a refused close: %+v, want TRADE_SUCCESS", q)
	}
}

func TestAlipayClose_ByTradeNo(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayScanned(t, "C_byno", "1.00")
	tradeNo := b.query(t, "C_byno").TradeNo
	rsp, err := b.client.TradeClose(context.Background(), alipay.TradeClose{TradeNo: tradeNo})
	if err != nil || rsp.Code != alipay.CodeSuccess || rsp.OutTradeNo != "C_byno" {
		t.Fatalf("close by trade_no: %+v %v", rsp, err)
	}
	rsp, err = b.client.TradeClose(context.Background(), alipay.TradeClose{TradeNo: tradeNo, OutTradeNo: "C_other"})
	if err != nil || rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("close with a trade_no of another out_trade_no: %+v %v", rsp, err)
	}
}

func wantAlipayCancel(t *testing.T, what string, rsp *alipay.TradeCancelRsp, action string) {
	t.Helper()
	if rsp.Code != alipay.CodeSuccess || rsp.Action != action || rsp.RetryFlag != "N" {
		t.Fatalf("%s: got %s/%s action=%q retry_flag=%q, want 10000 action=%s retry_flag=N",
			what, rsp.Code, rsp.SubCode, rsp.Action, rsp.RetryFlag, action)
	}
}

func TestAlipayCancel_PendingCodeCanNeverBeScannedOrPrecreatedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	deadline := b.clock.Now().Add(time.Hour)
	qr := b.precreate(t, "X_pending", "5.00", deadline, "")

	wantAlipayCancel(t, "cancel", b.alipayCancel(t, "X_pending"), "close")
	if _, err := b.sim.Scan(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("scan after cancel: err %v, want ECONFLICT", err)
	}
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after cancel: err %v, want ECONFLICT", err)
	}
	rsp, err := b.client.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		Subject: "x", OutTradeNo: "X_pending", TotalAmount: "5.00", ProductCode: "FACE_TO_FACE_PAYMENT",
		TimeExpire: deadline.In(cst).Format("2006-01-02 15:04:05"),
	}})
	if err != nil || rsp.SubCode != "ACQ.TRADE_HAS_CLOSE" || rsp.QRCode != "" {
		t.Fatalf("precreate after cancel: %+v %v, want ACQ.TRADE_HAS_CLOSE", rsp, err)
	}
	// No trade ever existed.
	wantAlipayCode(t, "query", b.query(t, "X_pending").Error, "40004", "ACQ.TRADE_NOT_EXIST")
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("ledger %+v, want empty", l)
	}
	wantAlipayCancel(t, "cancel again", b.alipayCancel(t, "X_pending"), "close")
}

// Cancel is for a precreate whose answer was lost: if the cancel overtakes the precreate,
// the precreate must not create a payable code afterwards.
func TestAlipayCancel_NeverPrecreatedIsClosedAndBlocksALatePrecreate(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	wantAlipayCancel(t, "cancel", b.alipayCancel(t, "X_never"), "close")
	rsp, err := b.client.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		Subject: "x", OutTradeNo: "X_never", TotalAmount: "5.00", ProductCode: "FACE_TO_FACE_PAYMENT",
	}})
	if err != nil || rsp.SubCode != "ACQ.TRADE_HAS_CLOSE" {
		t.Fatalf("late precreate: %+v %v, want ACQ.TRADE_HAS_CLOSE", rsp, err)
	}
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("ledger %+v, want empty", l)
	}
}

func TestAlipayCancel_WaitingTradeIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.alipayScanned(t, "X_wait", "5.00")
	rsp := b.alipayCancel(t, "X_wait")
	wantAlipayCancel(t, "cancel", rsp, "close")
	if rsp.OutTradeNo != "X_wait" || rsp.TradeNo == "" {
		t.Fatalf("cancel ids: %+v", rsp)
	}
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after cancel: err %v, want ECONFLICT", err)
	}
	if e := alipayEntry(t, b.sim, "X_wait"); e.Status != sim.AlipayTradeClosed || e.Refunded != 0 || !e.PaidAt.IsZero() {
		t.Fatalf("ledger %+v", e)
	}
}

func TestAlipayCancel_ClosedTradeAnswersClose(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayScanned(t, "X_closed", "5.00")
	b.alipayClose(t, "X_closed")
	wantAlipayCancel(t, "cancel", b.alipayCancel(t, "X_closed"), "close")
}

func TestAlipayCancel_PaidTradeIsRefundedInFullUnderItsOutTradeNo(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: time.Minute})
	b.alipayPaid(t, "X_paid", "12.34")

	wantAlipayCancel(t, "cancel", b.alipayCancel(t, "X_paid"), "refund")
	refunds := b.sim.AlipayRefunds("X_paid")
	if len(refunds) != 1 || refunds[0].OutRequestNo != "X_paid" || refunds[0].Amount != 1234 || !refunds[0].ByCancel || refunds[0].Settled {
		t.Fatalf("refunds %+v, want one pending full refund numbered X_paid", refunds)
	}
	// Until the refund settles the money has not moved.
	if e := alipayEntry(t, b.sim, "X_paid"); e.Refunded != 0 || e.Status != sim.AlipayTradeSuccess {
		t.Fatalf("ledger before settlement %+v", e)
	}
	if rq := b.alipayRefundQuery(t, "X_paid", "X_paid"); rq.Code != alipay.CodeSuccess || rq.RefundStatus != "" {
		t.Fatalf("refund query before settlement: %+v", rq)
	}
	// A resent cancel answers the same and refunds nothing more.
	wantAlipayCancel(t, "cancel again", b.alipayCancel(t, "X_paid"), "refund")

	b.clock.Advance(time.Minute)
	if rq := b.alipayRefundQuery(t, "X_paid", ""); rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "12.34" {
		t.Fatalf("refund query after settlement: %+v", rq)
	}
	e := alipayEntry(t, b.sim, "X_paid")
	if e.Status != sim.AlipayTradeClosed || e.Refunded != 1234 || e.PaidAt.IsZero() {
		t.Fatalf("ledger after settlement %+v", e)
	}
	// Closed, but after a payment: the query still shows it was paid.
	if q := b.query(t, "X_paid"); q.TradeStatus != alipay.TradeStatusClosed || q.SendPayDate == "" || q.BuyerPayAmount != "12.34" {
		t.Fatalf("query %+v, want TRADE_CLOSED with send_pay_date", q)
	}
	wantAlipayCancel(t, "cancel after settlement", b.alipayCancel(t, "X_paid"), "refund")
	if n := len(b.sim.AlipayRefunds("X_paid")); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	// The cancel's refund is the refund numbered out_trade_no: resending it is a replay.
	if r := b.alipayRefund(t, "X_paid", "X_paid", "12.34"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" || r.RefundFee != "12.34" {
		t.Fatalf("refund replay of the cancel's refund: %+v", r)
	}
}

func TestAlipayCancel_PaidTradeWithRefundsIsStatusError(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "X_part", "10.00")
	b.alipayRefund(t, "X_part", "R1", "3.00")
	rsp := b.alipayCancel(t, "X_part")
	if rsp.Code != "40004" || rsp.SubCode != "ACQ.TRADE_STATUS_ERROR" || rsp.RetryFlag != "N" {
		t.Fatalf("cancel: %+v, want 40004 ACQ.TRADE_STATUS_ERROR retry_flag=N", rsp)
	}
	if e := alipayEntry(t, b.sim, "X_part"); e.Refunded != 300 || e.Status != sim.AlipayTradeSuccess {
		t.Fatalf("ledger %+v", e)
	}
}

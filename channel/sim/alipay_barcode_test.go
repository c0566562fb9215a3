package sim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
)

// issue makes a payment code, failing the test on an error.
func issue(t *testing.T, s *sim.Simulator, channel, buyer, behaviour string, after time.Duration) string {
	t.Helper()
	c, err := s.IssueCode(channel, buyer, behaviour, after)
	if err != nil {
		t.Fatalf("IssueCode %s %s: %v", channel, behaviour, err)
	}
	return c.AuthCode
}

// barcodePayReq is an alipay.trade.pay of amount (yuan) with code, at store S01 till T01.
func barcodePayReq(no, amount, code string) alipay.TradePay {
	return alipay.TradePay{
		Trade: alipay.Trade{Subject: "till " + no, OutTradeNo: no, TotalAmount: amount, ProductCode: "FACE_TO_FACE_PAYMENT",
			StoreId: "S01", TimeoutExpress: "5m"},
		Scene: "bar_code", AuthCode: code, TerminalId: "T01",
	}
}

// barcodePay sends alipay.trade.pay through client and fails the test unless the answer
// verifies.
func barcodePay(t *testing.T, client *alipay.Client, req alipay.TradePay) *alipay.TradePayRsp {
	t.Helper()
	rsp, err := client.TradePay(context.Background(), req)
	if err != nil {
		t.Fatalf("trade.pay %s: %v", req.OutTradeNo, err)
	}
	return rsp
}

// Every behaviour through the SDK, in both key modes, with every answer verified: confirm
// pays at once (10000 with the payment's fields), password and wrong_password answer 10003
// and are paid the code's time later (not before), never waits until ConfirmCode, short is
// refused with no trade. The trades query, refund, appear in the ledger as barcode and in
// the bill with their store and till, and nothing is notified without a notify_url.
func TestAlipayBarcode_EveryBehaviour(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.AlipayMode{sim.AlipayModeKey, sim.AlipayModeCert} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{})
			if mode == sim.AlipayModeCert {
				b = setupCert(t, sim.Config{})
			}
			start := b.clock.Now()
			alice := b.sim.IdentityOf("alice", "").AlipayUserID

			// confirm: paid by the call itself.
			rsp := barcodePay(t, b.client, barcodePayReq("BC_OK", "12.34", issue(t, b.sim, "alipay", "alice", sim.CodeConfirm, 0)))
			if rsp.Code != alipay.CodeSuccess || rsp.OutTradeNo != "BC_OK" || rsp.TradeNo == "" || rsp.TotalAmount != "12.34" ||
				rsp.BuyerUserId != alice || rsp.BuyerLogonId == "" || rsp.ReceiptAmount != "12.34" ||
				rsp.GmtPayment != start.In(cst).Format("2006-01-02 15:04:05") || len(rsp.FundBillList) != 1 {
				t.Fatalf("confirm: %+v", rsp)
			}
			if q := b.query(t, "BC_OK"); q.TradeStatus != alipay.TradeStatusSuccess || q.TradeNo != rsp.TradeNo || q.BuyerUserId != alice {
				t.Fatalf("query after confirm: %+v", q)
			}

			// password and wrong_password: 10003, waiting, paid 20 s later.
			for _, beh := range []string{sim.CodePassword, sim.CodeWrongPassword} {
				no := "BC_" + strings.ToUpper(beh)
				rsp := barcodePay(t, b.client, barcodePayReq(no, "1.00", issue(t, b.sim, "alipay", "bob", beh, 20*time.Second)))
				if rsp.Code != alipay.CodeOrderSuccessPayInProcess || rsp.OutTradeNo != no || rsp.TradeNo == "" || rsp.GmtPayment != "" {
					t.Fatalf("%s: %+v, want 10003 with the trade", beh, rsp)
				}
			}
			b.clock.Advance(19 * time.Second)
			for _, no := range []string{"BC_PASSWORD", "BC_WRONG_PASSWORD"} {
				if q := b.query(t, no); q.TradeStatus != alipay.TradeStatusWaitBuyerPay {
					t.Fatalf("%s at 19 s: %+v", no, q)
				}
			}
			b.clock.Advance(time.Second)
			for _, no := range []string{"BC_PASSWORD", "BC_WRONG_PASSWORD"} {
				q := b.query(t, no)
				if q.TradeStatus != alipay.TradeStatusSuccess || q.SendPayDate != start.Add(20*time.Second).In(cst).Format("2006-01-02 15:04:05") {
					t.Fatalf("%s at 20 s: %+v", no, q)
				}
			}

			// never: waits; the buyer confirms on the wallet page.
			never := issue(t, b.sim, "alipay", "carol", sim.CodeNever, 0)
			if rsp := barcodePay(t, b.client, barcodePayReq("BC_NEVER", "2.00", never)); rsp.Code != alipay.CodeOrderSuccessPayInProcess {
				t.Fatalf("never: %+v", rsp)
			}
			b.clock.Advance(4 * time.Minute)
			if q := b.query(t, "BC_NEVER"); q.TradeStatus != alipay.TradeStatusWaitBuyerPay {
				t.Fatalf("never after 4 min: %+v", q)
			}
			if c, err := b.sim.Code(never); err != nil || !c.Waiting || c.State != sim.PayCodeUsed || c.OutTradeNo != "BC_NEVER" || c.Amount != 200 {
				t.Fatalf("the never code: %+v, %v", c, err)
			}
			if res, err := b.sim.ConfirmCode(never); err != nil || res.Status != sim.AlipayTradeSuccess {
				t.Fatalf("ConfirmCode: %+v, %v", res, err)
			}
			if _, err := b.sim.ConfirmCode(never); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("a second ConfirmCode: %v, want ECONFLICT", err)
			}

			// short: refused, no trade; the same number with another code pays.
			short := issue(t, b.sim, "alipay", "dave", sim.CodeShort, 0)
			wantAlipayCode(t, "short", barcodePay(t, b.client, barcodePayReq("BC_SHORT", "3.00", short)).Error, "40004", "ACQ.BUYER_BALANCE_NOT_ENOUGH")
			wantAlipayCode(t, "query after short", b.query(t, "BC_SHORT").Error, "40004", "ACQ.TRADE_NOT_EXIST")
			if c, _ := b.sim.Code(short); c.State != sim.PayCodeUsed || c.TradeStatus != "" {
				t.Fatalf("the short code after the refusal: %+v", c)
			}
			if rsp := barcodePay(t, b.client, barcodePayReq("BC_SHORT", "3.00", issue(t, b.sim, "alipay", "dave", "", 0))); rsp.Code != alipay.CodeSuccess {
				t.Fatalf("the same number with another code: %+v", rsp)
			}

			// A barcode trade refunds like any other, and is in the ledger as one.
			if r := b.alipayRefund(t, "BC_OK", "BC_OK_r1", "2.34"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" {
				t.Fatalf("refund: %+v", r)
			}
			for _, no := range []string{"BC_OK", "BC_PASSWORD", "BC_NEVER", "BC_SHORT"} {
				if e := alipayEntry(t, b.sim, no); e.Method != orderpay.MethodBarcode || e.PaidAt.IsZero() {
					t.Fatalf("ledger %+v, want a paid barcode trade", e)
				}
			}
			if e := alipayEntry(t, b.sim, "BC_OK"); e.Refunded != 234 || e.Status != sim.AlipayTradeSuccess {
				t.Fatalf("ledger after the refund: %+v", e)
			}
			if n := len(b.sim.NotifyStats()); n != 0 {
				t.Fatalf("%d notifications without a notify_url", n)
			}

			// The bill names the store and the till.
			b.clock.Set(start.Add(24 * time.Hour))
			bill := downloadAlipayBill(t, b.alipayBillURL(t, start.In(cst).Format("2006-01-02")).BillDownloadURL)
			found := false
			for _, row := range bill.rows(t)[1:] {
				if row[1] == "BC_OK" && row[2] == "交易" {
					found = true
					if row[6] != "S01" || row[9] != "T01" || row[11] != "12.34" {
						t.Fatalf("bill row %q", row)
					}
				}
			}
			if !found {
				t.Fatalf("BC_OK is not in the bill: %q", bill.lines)
			}
		})
	}
}

// What a pay call checks: the scene, the code (shape, issuer, single use, lifetime), the
// fields, and the out_trade_no's history. Refusals leave the code as it was; a wrong code
// leaves no trade.
func TestAlipayBarcode_Refusals(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	code := issue(t, b.sim, "alipay", "alice", sim.CodeConfirm, 0)
	wxCode := issue(t, b.sim, "wechat", "alice", sim.CodeConfirm, 0)
	refused := func(what string, req alipay.TradePay, subCode, msgPart string) {
		t.Helper()
		rsp := barcodePay(t, b.client, req)
		wantAlipayCode(t, what, rsp.Error, "40004", subCode)
		if !strings.Contains(rsp.SubMsg, msgPart) {
			t.Fatalf("%s: sub_msg %q, want it to say %q", what, rsp.SubMsg, msgPart)
		}
	}
	with := func(f func(*alipay.TradePay)) alipay.TradePay {
		r := barcodePayReq("BR_1", "5.00", code)
		f(&r)
		return r
	}
	refused("wave_code", with(func(r *alipay.TradePay) { r.Scene = "wave_code" }), "ACQ.INVALID_PARAMETER", "scene")
	refused("no scene", with(func(r *alipay.TradePay) { r.Scene = "" }), "ACQ.INVALID_PARAMETER", "scene")
	refused("no code", with(func(r *alipay.TradePay) { r.AuthCode = "" }), "ACQ.INVALID_PARAMETER", "auth_code")
	refused("amount", with(func(r *alipay.TradePay) { r.TotalAmount = "5.001" }), "ACQ.INVALID_PARAMETER", "total_amount")
	refused("product", with(func(r *alipay.TradePay) { r.ProductCode = "QUICK_WAP_WAY" }), "ACQ.INVALID_PARAMETER", "product_code")
	refused("store", with(func(r *alipay.TradePay) { r.StoreId = "a store" }), "ACQ.INVALID_PARAMETER", "store_id")
	refused("a WeChat code", with(func(r *alipay.TradePay) { r.AuthCode = wxCode }), "ACQ.PAYMENT_AUTH_CODE_INVALID", "获取顾客账户信息失败")
	refused("a code never issued", with(func(r *alipay.TradePay) { r.AuthCode = "281234567890123456" }), "ACQ.PAYMENT_AUTH_CODE_INVALID", "获取顾客账户信息失败")
	noTrades(t, b.sim)

	// The code is still good after all that; once used it is not.
	if rsp := barcodePay(t, b.client, barcodePayReq("BR_1", "5.00", code)); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("the code after refusals: %+v", rsp)
	}
	refused("the code again", barcodePayReq("BR_2", "5.00", code), "ACQ.PAYMENT_AUTH_CODE_INVALID", "已使用")
	wantAlipayCode(t, "query BR_2", b.query(t, "BR_2").Error, "40004", "ACQ.TRADE_NOT_EXIST")

	// Expired: two minutes after issue.
	old := issue(t, b.sim, "alipay", "alice", sim.CodeConfirm, 0)
	b.clock.Advance(sim.DefaultPayCodeLifetime)
	refused("an expired code", barcodePayReq("BR_3", "5.00", old), "ACQ.PAYMENT_AUTH_CODE_INVALID", "已过期")

	// The out_trade_no: paid, then the same number again.
	refused("paid", barcodePayReq("BR_1", "5.00", issue(t, b.sim, "alipay", "", "", 0)), "ACQ.TRADE_HAS_SUCCESS", "")
	wait := issue(t, b.sim, "alipay", "bob", sim.CodeNever, 0)
	if rsp := barcodePay(t, b.client, barcodePayReq("BR_4", "5.00", wait)); rsp.Code != alipay.CodeOrderSuccessPayInProcess {
		t.Fatalf("never: %+v", rsp)
	}
	// The same call again (its answer was lost) answers the same; other parameters are
	// another order under the same number.
	if rsp := barcodePay(t, b.client, barcodePayReq("BR_4", "5.00", wait)); rsp.Code != alipay.CodeOrderSuccessPayInProcess || rsp.OutTradeNo != "BR_4" {
		t.Fatalf("the same call again: %+v", rsp)
	}
	refused("another amount", barcodePayReq("BR_4", "5.01", wait), "ACQ.CONTEXT_INCONSISTENT", "")
	refused("another code", barcodePayReq("BR_4", "5.00", issue(t, b.sim, "alipay", "bob", "", 0)), "ACQ.CONTEXT_INCONSISTENT", "")
	b.precreate(t, "BR_QR", "5.00", b.clock.Now().Add(time.Hour), "")
	refused("a precreated number", barcodePayReq("BR_QR", "5.00", issue(t, b.sim, "alipay", "", "", 0)), "ACQ.CONTEXT_INCONSISTENT", "")
	// Cancelled: closed for good.
	if c := b.alipayCancel(t, "BR_4"); c.Code != alipay.CodeSuccess || c.Action != "close" || c.RetryFlag != "N" {
		t.Fatalf("cancel: %+v", c)
	}
	refused("cancelled", barcodePayReq("BR_4", "5.00", wait), "ACQ.TRADE_HAS_CLOSE", "")
	if _, err := b.sim.ConfirmCode(wait); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("confirming a cancelled trade: %v, want ECONFLICT", err)
	}
	// The in-app app does not know the main app's barcode trades.
	in := inAppClient(t, b, sim.AlipayModeKey)
	q, err := in.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "BR_1"})
	if err != nil {
		t.Fatal(err)
	}
	wantAlipayCode(t, "the other app's query", q.Error, "40004", "ACQ.TRADE_NOT_EXIST")
}

// alipay.trade.cancel of barcode trades: a waiting trade closes (action=close) and its buyer
// can no longer pay it; a paid one is refunded in full (action=refund) by a refund numbered
// with its out_trade_no, in the ledger and the next day's bill; a number Alipay never saw
// answers success and blocks a pay call that arrives later; a trade with refunds, or older
// than 24 h, is refused with retry_flag=N; under a fault the cancel says retry_flag=Y.
func TestAlipayBarcode_Cancel(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	start := b.clock.Now()
	pw := issue(t, b.sim, "alipay", "alice", sim.CodePassword, 30*time.Second)
	barcodePay(t, b.client, barcodePayReq("BX_WAIT", "4.00", pw))
	b.clock.Advance(10 * time.Second)
	if c := b.alipayCancel(t, "BX_WAIT"); c.Code != alipay.CodeSuccess || c.Action != "close" || c.RetryFlag != "N" || c.OutTradeNo != "BX_WAIT" || c.TradeNo == "" {
		t.Fatalf("cancel of a waiting trade: %+v", c)
	}
	b.clock.Advance(time.Minute)
	if q := b.query(t, "BX_WAIT"); q.TradeStatus != alipay.TradeStatusClosed || q.SendPayDate != "" {
		t.Fatalf("after the buyer's time: %+v, want closed unpaid", q)
	}

	barcodePay(t, b.client, barcodePayReq("BX_PAID", "9.99", issue(t, b.sim, "alipay", "bob", "", 0)))
	c := b.alipayCancel(t, "BX_PAID")
	if c.Code != alipay.CodeSuccess || c.Action != "refund" || c.RetryFlag != "N" {
		t.Fatalf("cancel of a paid trade: %+v", c)
	}
	e := alipayEntry(t, b.sim, "BX_PAID")
	if e.Status != sim.AlipayTradeClosed || e.Refunded != 999 || len(e.Refunds) != 1 || e.Refunds[0].OutRefundNo != "BX_PAID" || e.PaidAt.IsZero() {
		t.Fatalf("ledger after the cancel: %+v", e)
	}
	if r := b.sim.AlipayRefunds("BX_PAID"); len(r) != 1 || !r[0].ByCancel || r[0].Amount != 999 {
		t.Fatalf("refunds %+v", r)
	}
	wantAlipayCode(t, "refund after cancel", b.alipayRefund(t, "BX_PAID", "BX_PAID_r2", "0.01").Error, "40004", "ACQ.TRADE_STATUS_ERROR")

	// Unknown number: success, and a pay call that comes later is refused.
	if c := b.alipayCancel(t, "BX_LATE"); c.Code != alipay.CodeSuccess || c.Action != "close" {
		t.Fatalf("cancel of an unknown number: %+v", c)
	}
	late := issue(t, b.sim, "alipay", "", "", 0)
	wantAlipayCode(t, "a pay call after its cancel", barcodePay(t, b.client, barcodePayReq("BX_LATE", "1.00", late)).Error, "40004", "ACQ.TRADE_HAS_CLOSE")
	if c, _ := b.sim.Code(late); c.State != sim.PayCodeLive {
		t.Fatalf("the code of the refused call: %+v, want still live", c)
	}

	// A paid trade with a refund cannot be cancelled; one older than 24 h neither.
	barcodePay(t, b.client, barcodePayReq("BX_REFUNDED", "5.00", issue(t, b.sim, "alipay", "", "", 0)))
	b.alipayRefund(t, "BX_REFUNDED", "r1", "1.00")
	rsp := b.alipayCancel(t, "BX_REFUNDED")
	wantAlipayCode(t, "cancel with a refund", rsp.Error, "40004", "ACQ.TRADE_STATUS_ERROR")
	if rsp.RetryFlag != "N" {
		t.Fatalf("retry_flag %q", rsp.RetryFlag)
	}
	barcodePay(t, b.client, barcodePayReq("BX_OLD", "5.00", issue(t, b.sim, "alipay", "", sim.CodeNever, 0)))
	b.clock.Set(start.Add(25 * time.Hour))
	rsp = b.alipayCancel(t, "BX_OLD")
	wantAlipayCode(t, "cancel after 24 h", rsp.Error, "40004", "ACQ.TRADE_CANCEL_TIME_OUT")
	if rsp.RetryFlag != "N" {
		t.Fatalf("retry_flag %q", rsp.RetryFlag)
	}
	// A cancel that succeeded answers the same later, whatever the time.
	if c := b.alipayCancel(t, "BX_PAID"); c.Code != alipay.CodeSuccess || c.Action != "refund" {
		t.Fatalf("the cancel again: %+v", c)
	}

	// The cancel's refund is in the bill of its day, as a refund of the trade.
	bill := downloadAlipayBill(t, b.alipayBillURL(t, start.In(cst).Format("2006-01-02")).BillDownloadURL)
	refund := false
	for _, row := range bill.rows(t)[1:] {
		if row[1] == "BX_PAID" && row[2] == "退款" && row[21] == "BX_PAID" && row[11] == "-9.99" {
			refund = true
		}
	}
	if !refund {
		t.Fatalf("no refund row for the cancel: %q", bill.lines)
	}

	// Under a fault the cancel does not happen and says retry_flag=Y.
	barcodePay(t, b.client, barcodePayReq("FT", "10.00", issue(t, b.sim, "alipay", "", sim.CodeNever, 0)))
	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{alipayRule(sim.MethodCancel, sim.FaultSystemError, false)}}); err != nil {
		t.Fatal(err)
	}
	if a := alipayCancelCall(context.Background(), b); !a.is("40004", "ACQ.SYSTEM_ERROR") || a.retryFlag != "Y" {
		t.Fatalf("cancel under a fault: %+v", a)
	}
	_ = b.sim.SetFaults(sim.FaultPlan{})
	if e := alipayEntry(t, b.sim, "FT"); e.Status != sim.AlipayWaitBuyerPay {
		t.Fatalf("after the failed cancel: %+v", e)
	}
}

// A barcode trade past its timeout_express closes unpaid; a password buyer slower than it
// never pays.
func TestAlipayBarcode_TimeoutCloses(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	barcodePay(t, b.client, barcodePayReq("BT_NEVER", "1.00", issue(t, b.sim, "alipay", "", sim.CodeNever, 0)))
	barcodePay(t, b.client, barcodePayReq("BT_SLOW", "1.00", issue(t, b.sim, "alipay", "", sim.CodePassword, 6*time.Minute)))
	b.clock.Advance(5 * time.Minute)
	for _, no := range []string{"BT_NEVER", "BT_SLOW"} {
		if q := b.query(t, no); q.TradeStatus != alipay.TradeStatusClosed {
			t.Fatalf("%s after its 5m timeout: %+v", no, q)
		}
	}
	b.clock.Advance(2 * time.Minute)
	if q := b.query(t, "BT_SLOW"); q.TradeStatus != alipay.TradeStatusClosed || q.SendPayDate != "" {
		t.Fatalf("the slow buyer: %+v, want closed unpaid", q)
	}
}

// With a notify_url, a barcode trade is notified once when paid, by the call or later by
// the buyer, even when nobody queries it; without one, never.
func TestAlipayBarcode_NotifiedOnlyWithANotifyURL(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: fastTime})
	rcv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
	now := barcodePayReq("BN_NOW", "1.00", issue(t, b.sim, "alipay", "", "", 0))
	now.NotifyURL = rcv.srv.URL
	barcodePay(t, b.client, now)
	later := barcodePayReq("BN_LATER", "2.00", issue(t, b.sim, "alipay", "", sim.CodePassword, 10*time.Second))
	later.NotifyURL = rcv.srv.URL
	barcodePay(t, b.client, later)
	barcodePay(t, b.client, barcodePayReq("BN_NONE", "3.00", issue(t, b.sim, "alipay", "", sim.CodePassword, 10*time.Second)))

	if st := waitNotify(t, b.sim, "BN_NOW"); !st.Acked {
		t.Fatalf("BN_NOW: %+v", st)
	}
	b.clock.Advance(10 * time.Second)
	st := waitNotify(t, b.sim, "BN_LATER")
	if !st.Acked {
		t.Fatalf("BN_LATER: %+v", st)
	}
	body := ""
	for _, r := range rcv.received() {
		if strings.Contains(r, "BN_LATER") {
			body = r
		}
	}
	if !strings.Contains(body, "trade_status=TRADE_SUCCESS") || !strings.Contains(body, "total_amount=2.00") {
		t.Fatalf("the notification of BN_LATER: %q", body)
	}
	b.query(t, "BN_LATER")
	time.Sleep(50 * time.Millisecond)
	n := 0
	for _, s := range b.sim.NotifyStats() {
		if s.OutTradeNo == "BN_NONE" {
			t.Fatalf("a trade without notify_url was notified: %+v", s)
		}
		if s.OutTradeNo == "BN_LATER" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("BN_LATER notified %d times", n)
	}
}

// Faults on alipay.trade.pay, keyed on its out_trade_no: a timeout without effect spends
// nothing (the code still pays), one with effect makes the trade (the code is used); system
// and unknown errors, unsigned and forged answers are what the gateway sends for any call.
func TestAlipayBarcode_Faults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rule   sim.FaultRule
		answer func(alipayAnswer) bool
		made   bool // the trade exists after the call
	}{
		{"timeout", alipayRule(sim.MethodPay, sim.FaultTimeout, false), alipayTimedOut, false},
		{"timeout applied", alipayRule(sim.MethodPay, sim.FaultTimeout, true), alipayTimedOut, true},
		{"system_error", alipayRule(sim.MethodPay, sim.FaultSystemError, false), func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") }, false},
		{"system_error applied", alipayRule(sim.MethodPay, sim.FaultSystemError, true), func(a alipayAnswer) bool { return a.is("40004", "ACQ.SYSTEM_ERROR") }, true},
		{"unknown_error applied", alipayRule(sim.MethodPay, sim.FaultUnknownError, true), func(a alipayAnswer) bool { return a.is("20000", "isp.unknow-error") }, true},
		{"unsigned applied", alipayRule(sim.MethodPay, sim.FaultUnsigned, true), alipayUnsignedWith("10000", ""), true},
		{"bad_signature", alipayRule(sim.MethodPay, sim.FaultBadSignature, false), alipayNoVerifiedAnswer, false},
		{"http_500 applied", alipayRule(sim.MethodPay, sim.FaultHTTP500, true), alipayNoVerifiedAnswer, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{})
			code := issue(t, b.sim, "alipay", "alice", sim.CodeConfirm, 0)
			// Aimed at one number: another meets no fault.
			tc.rule.Limit = 0
			if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{tc.rule}}); err != nil {
				t.Fatal(err)
			}
			limit := 10 * time.Second
			if tc.rule.Kind == sim.FaultTimeout {
				limit = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			var a alipayAnswer
			rsp, err := b.client.TradePay(ctx, barcodePayReq("FT", "10.00", code))
			if err != nil {
				a.err = err
			} else {
				a.code, a.subCode = string(rsp.Code), rsp.SubCode
			}
			if !tc.answer(a) {
				t.Fatalf("answer %+v", a)
			}
			_ = b.sim.SetFaults(sim.FaultPlan{})
			c, _ := b.sim.Code(code)
			if made := c.State == sim.PayCodeUsed; made != tc.made {
				t.Fatalf("code %+v, want used=%v", c, tc.made)
			}
			if tc.made {
				if q := b.query(t, "FT"); q.TradeStatus != alipay.TradeStatusSuccess {
					t.Fatalf("query: %+v", q)
				}
				// Sent again, the payment is already made.
				wantAlipayCode(t, "resent", barcodePay(t, b.client, barcodePayReq("FT", "10.00", code)).Error, "40004", "ACQ.TRADE_HAS_SUCCESS")
				return
			}
			if rsp := barcodePay(t, b.client, barcodePayReq("FT", "10.00", code)); rsp.Code != alipay.CodeSuccess {
				t.Fatalf("resent after a fault without effect: %+v", rsp)
			}
		})
	}
}

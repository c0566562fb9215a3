package alipay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// Barcode payments (docs/channels.md §F3) told against the simulator, whose wallet issues
// payment codes with the way their buyer behaves, in both signing modes: every answer the
// adapter reads is verified.

// code issues a payment code of the simulated Alipay wallet.
func (e *env) code(t *testing.T, behaviour string, after time.Duration) string {
	t.Helper()
	c, err := e.sim.IssueCode(orderpay.ChannelAlipay, "alice", behaviour, after)
	if err != nil {
		t.Fatalf("IssueCode %s: %v", behaviour, err)
	}
	return c.AuthCode
}

// barcodeReq is a till's payment of amount with code, at store S-01 till T1.
func (e *env) barcodeReq(outTradeNo string, amount int64, code string) orderpay.PrecreateRequest {
	return orderpay.PrecreateRequest{OutTradeNo: outTradeNo, Amount: amount, Subject: "till " + outTradeNo,
		Deadline: e.clock.Now().Add(15 * time.Minute), Method: orderpay.MethodBarcode, AuthCode: code,
		StoreID: "S-01", TillID: "T1", ClientIP: "10.0.0.7"}
}

// pay takes a barcode payment through the adapter trades of that method go to.
func (e *env) pay(t *testing.T, outTradeNo string, amount int64, code string) orderpay.PrecreateResult {
	t.Helper()
	return orderpay.ChannelFor(e.ch, orderpay.MethodBarcode).Precreate(context.Background(), e.barcodeReq(outTradeNo, amount, code))
}

func (e *env) reverse(t *testing.T, outTradeNo string) orderpay.ReverseResult {
	t.Helper()
	rv, ok := orderpay.ChannelFor(e.ch, orderpay.MethodBarcode).(orderpay.Reverser)
	if !ok {
		t.Fatal("the barcode adapter is not a Reverser")
	}
	return rv.Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: outTradeNo, OrderedAt: e.clock.Now()})
}

func (e *env) ledger(t *testing.T, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, l := range e.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	t.Fatalf("no trade %s at the channel", outTradeNo)
	return sim.LedgerEntry{}
}

// Every buyer's behaviour, in both signing modes: confirm is Paid by the call; password and
// wrong_password are Unknown (10003: the trade waits for the buyer), NotPaid to a query, and
// Paid to a query once the buyer has typed it; never is Unknown, NotPaid until the cancel
// closes it (action=close: Closed, nothing refunded), after which the buyer cannot pay;
// short is Rejected BALANCE with no trade; a used, an expired and an unknown code are
// Rejected CODE_USED, CODE_EXPIRED and CODE_INVALID; a WeChat code is Rejected unsent. A
// cancel of the paid trade refunds it (action=refund: Closed, Refunded), and says so again.
func TestBarcode_EachBuyer(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupMode(t, mode, sim.Config{RefundDelay: time.Second})
		ctx := context.Background()

		// confirm: paid at once, under the main app.
		confirmCode := e.code(t, sim.CodeConfirm, 0)
		res := e.pay(t, "BC_OK", 1234, confirmCode)
		if res.Outcome != orderpay.OutcomePaid || res.Refusal != "" || !strings.Contains(res.Detail, "10000") {
			t.Fatalf("confirm: %+v, want Paid", res)
		}
		if q := e.ch.Query(ctx, "BC_OK"); q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 || q.TradeNo == "" {
			t.Fatalf("query after confirm: %+v", q)
		}
		if l := e.ledger(t, "BC_OK"); l.Method != orderpay.MethodBarcode || l.AppID != e.keys.AppID || l.Amount != 1234 {
			t.Fatalf("ledger: %+v, want a barcode trade of the main app", l)
		}

		// password and wrong_password: 10003 is not a payment.
		for i, beh := range []string{sim.CodePassword, sim.CodeWrongPassword} {
			no := "BC_PW" + string(rune('1'+i))
			res := e.pay(t, no, 500, e.code(t, beh, 10*time.Second))
			if res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "10003") || !strings.Contains(res.Detail, "waits for the buyer") {
				t.Fatalf("%s: %+v, want Unknown (10003)", beh, res)
			}
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "WAIT_BUYER_PAY") {
				t.Fatalf("%s: query before the buyer types: %+v, want NotPaid", beh, q)
			}
		}
		e.clock.Advance(10 * time.Second)
		for _, no := range []string{"BC_PW1", "BC_PW2"} {
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid || q.Amount != 500 {
				t.Fatalf("%s: query after the buyer typed: %+v, want Paid", no, q)
			}
		}

		// never: waits until the cancel closes it.
		neverCode := e.code(t, sim.CodeNever, 0)
		if res := e.pay(t, "BC_NEVER", 700, neverCode); res.Outcome != orderpay.OutcomeUnknown {
			t.Fatalf("never: %+v, want Unknown", res)
		}
		if q := e.ch.Query(ctx, "BC_NEVER"); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("never: query: %+v, want NotPaid", q)
		}
		r := e.reverse(t, "BC_NEVER")
		if r.Outcome != orderpay.OutcomeClosed || r.Refunded || !r.RefundKnown || !strings.Contains(r.Detail, "action=close") || r.Raw == "" {
			t.Fatalf("cancel of a waiting trade: %+v, want Closed, nothing refunded", r)
		}
		if _, err := e.sim.ConfirmCode(neverCode); err == nil {
			t.Fatal("the buyer paid after the cancel")
		}
		if q := e.ch.Query(ctx, "BC_NEVER"); q.Outcome != orderpay.OutcomeClosed {
			t.Fatalf("never: query after the cancel: %+v, want Closed", q)
		}

		// short: refused, no trade.
		res = e.pay(t, "BC_SHORT", 800, e.code(t, sim.CodeShort, 0))
		if res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalBalance || !strings.Contains(res.Detail, "ACQ.BUYER_BALANCE_NOT_ENOUGH") {
			t.Fatalf("short: %+v, want Rejected BALANCE", res)
		}
		if q := e.ch.Query(ctx, "BC_SHORT"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "ACQ.TRADE_NOT_EXIST") {
			t.Fatalf("short: query: %+v, want no trade", q)
		}

		// Codes the wallet will not take.
		if res := e.pay(t, "BC_USED", 100, confirmCode); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeUsed {
			t.Fatalf("a used code: %+v, want Rejected CODE_USED", res)
		}
		stale := e.code(t, sim.CodeConfirm, 0)
		e.clock.Advance(sim.DefaultPayCodeLifetime)
		if res := e.pay(t, "BC_STALE", 100, stale); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeExpired {
			t.Fatalf("an expired code: %+v, want Rejected CODE_EXPIRED", res)
		}
		if res := e.pay(t, "BC_UNKNOWN", 100, "281234567890123456"); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeInvalid ||
			!strings.Contains(res.Detail, "ACQ.PAYMENT_AUTH_CODE_INVALID") {
			t.Fatalf("a code the wallet never issued: %+v, want Rejected CODE_INVALID", res)
		}
		if res := e.pay(t, "BC_WX", 100, "134567890123456789"); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeInvalid ||
			!strings.HasPrefix(res.Detail, "not sent") || res.Raw != "" {
			t.Fatalf("a WeChat code: %+v, want Rejected unsent", res)
		}
		for _, no := range []string{"BC_USED", "BC_STALE", "BC_UNKNOWN", "BC_WX"} {
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
				t.Fatalf("%s: query: %+v, want no trade", no, q)
			}
		}

		// The cancel of the paid trade refunds it, and says so each time.
		for range 2 {
			r := e.reverse(t, "BC_OK")
			if r.Outcome != orderpay.OutcomeClosed || !r.Refunded || !r.RefundKnown || !strings.Contains(r.Detail, "action=refund") {
				t.Fatalf("cancel of the paid trade: %+v, want Closed and Refunded", r)
			}
		}
		e.clock.Advance(time.Second)
		if got := e.refunded(t, "BC_OK"); got != 1234 {
			t.Fatalf("refunded %d at the channel, want 1234", got)
		}
	})
}

// A barcode trade is the main app's even with an in-app app configured: it is paid,
// queried and cancelled under app_id.
func TestBarcode_UnderTheMainAppWithAnInAppApp(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupInApp(t, mode)
		if orderpay.ChannelFor(e.ch, orderpay.MethodBarcode) != orderpay.Channel(e.ch) {
			t.Fatal("barcode trades go to the in-app app's adapter")
		}
		if res := e.pay(t, "BM_1", 300, e.code(t, sim.CodePassword, time.Second)); res.Outcome != orderpay.OutcomeUnknown {
			t.Fatalf("pay: %+v", res)
		}
		if l := e.ledger(t, "BM_1"); l.AppID != e.keys.AppID {
			t.Fatalf("made under %s, want the main app %s", l.AppID, e.keys.AppID)
		}
		if r := e.reverse(t, "BM_1"); r.Outcome != orderpay.OutcomeClosed || r.Refunded {
			t.Fatalf("cancel: %+v", r)
		}
	})
}

// recorder forwards gateway calls to the simulator and keeps each call's form.
type recorder struct {
	mu    sync.Mutex
	forms []url.Values
}

func (rec *recorder) proxy(t *testing.T, e *env) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		rec.mu.Lock()
		rec.forms = append(rec.forms, form)
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// What alipay.trade.pay carries: scene bar_code, the code, the counter, the product,
// time_expire = the deadline, and no notify_url. A counter name Alipay would not take is
// left out and said so; a subject's / = & are sent as spaces.
func TestBarcode_TheCall(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{})
	var rec recorder
	ch := newChannel(t, e.keys, gw(rec.proxy(t, e)), func(c *alipay.Config) { c.Clock = e.clock })
	req := e.barcodeReq("BT_1", 990, e.code(t, sim.CodeConfirm, 0))
	req.Subject = "coffee/tea & cake=1"
	req.NotifyURL = "https://shop.example/notify" // never sent with a barcode payment
	if res := ch.Precreate(context.Background(), req); res.Outcome != orderpay.OutcomePaid {
		t.Fatalf("pay: %+v", res)
	}
	form := rec.forms[0]
	var biz map[string]any
	if err := json.Unmarshal([]byte(form.Get("biz_content")), &biz); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"scene": "bar_code", "auth_code": req.AuthCode, "out_trade_no": "BT_1", "total_amount": "9.90",
		"subject": "coffee tea   cake 1", "store_id": "S-01", "terminal_id": "T1", "product_code": "FACE_TO_FACE_PAYMENT",
		"time_expire": req.Deadline.In(cst).Format("2006-01-02 15:04:05")}
	for k, v := range want {
		if biz[k] != v {
			t.Errorf("%s = %v, want %v", k, biz[k], v)
		}
	}
	if form.Get("method") != "alipay.trade.pay" || form.Has("notify_url") || biz["notify_url"] != nil {
		t.Errorf("method %q, notify_url %q: want alipay.trade.pay without notify_url", form.Get("method"), form.Get("notify_url"))
	}

	req = e.barcodeReq("BT_2", 100, e.code(t, sim.CodeConfirm, 0))
	req.StoreID, req.TillID = "shop.one", strings.Repeat("t", 33)
	res := ch.Precreate(context.Background(), req)
	if res.Outcome != orderpay.OutcomePaid || !strings.Contains(res.Detail, "store_id and terminal_id not sent") {
		t.Fatalf("counter names Alipay would refuse: %+v, want Paid, saying they were left out", res)
	}
	biz = nil
	_ = json.Unmarshal([]byte(rec.forms[1].Get("biz_content")), &biz)
	if _, ok := biz["store_id"]; ok {
		t.Errorf("store_id sent: %v", biz)
	}
	if _, ok := biz["terminal_id"]; ok {
		t.Errorf("terminal_id sent: %v", biz)
	}

	// Refused before anything is sent.
	calls := len(rec.forms)
	for name, mod := range map[string]func(*orderpay.PrecreateRequest){
		"deadline passed": func(r *orderpay.PrecreateRequest) { r.Deadline = e.clock.Now().Add(-time.Second) },
		"no deadline":     func(r *orderpay.PrecreateRequest) { r.Deadline = time.Time{} },
		"no code":         func(r *orderpay.PrecreateRequest) { r.AuthCode = "" },
		"not digits":      func(r *orderpay.PrecreateRequest) { r.AuthCode = "28abcdefghijklmnop" },
		"zero amount":     func(r *orderpay.PrecreateRequest) { r.Amount = 0 },
	} {
		r := e.barcodeReq("BT_3", 100, "281234567890123456")
		mod(&r)
		if res := ch.Precreate(context.Background(), r); res.Outcome != orderpay.OutcomeRejected || !strings.HasPrefix(res.Detail, "not sent") || res.Refusal == "" {
			t.Errorf("%s: %+v, want Rejected unsent with a refusal", name, res)
		}
	}
	if len(rec.forms) != calls {
		t.Errorf("%d calls sent for requests refused unsent", len(rec.forms)-calls)
	}
}

// The trap: smartwalle's Code.IsSuccess() is true for 10003, "order made, the buyer is
// still paying". The adapter reads the code itself: 10003 is never Paid, whatever else the
// answer carries; only a verified 10000 for this out_trade_no and amount is.
func TestBarcode_10003IsNotSuccess(t *testing.T) {
	t.Parallel()
	if !sdk.CodeOrderSuccessPayInProcess.IsSuccess() {
		t.Fatal("the SDK no longer counts 10003 as success: the trap this test guards against is gone, check the adapter")
	}
	keys, _ := simtest.Keys(t)
	req := orderpay.PrecreateRequest{OutTradeNo: "T_1", Amount: 100, Subject: "x", Deadline: time.Now().Add(time.Hour),
		Method: orderpay.MethodBarcode, AuthCode: "281234567890123456", ClientIP: "10.0.0.7"}
	const paidFields = `"out_trade_no":"T_1","trade_no":"2025031422001","total_amount":"1.00","receipt_amount":"1.00","gmt_payment":"2025-03-14 10:00:00"`
	for _, reply := range []string{
		`{"code":"10003","msg":"Order success pay inprocess",` + paidFields + `}`,
		`{"code":"10003","msg":"Success",` + paidFields + `}`,
	} {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, reply).URL)
		if res := ch.Precreate(context.Background(), req); res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "waits for the buyer") {
			t.Errorf("%s: %+v, want Unknown", reply, res)
		}
	}
	// And against the simulator, a password buyer's 10003 stays Unknown until a query says
	// otherwise.
	e := setupWith(t, sim.Config{})
	if res := e.pay(t, "T_2", 100, e.code(t, sim.CodePassword, time.Minute)); res.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("10003 from the simulator: %+v, want Unknown", res)
	}
}

// Every signed answer alipay.trade.pay can give, and the refusal class of each sub_code.
func TestBarcode_SignedAnswers(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	req := orderpay.PrecreateRequest{OutTradeNo: "T_1", Amount: 100, Subject: "x", Deadline: time.Now().Add(time.Hour),
		Method: orderpay.MethodBarcode, AuthCode: "281234567890123456", ClientIP: "10.0.0.7"}
	refused := func(sub, msg string) string {
		return `{"code":"40004","msg":"Business Failed","sub_code":"` + sub + `","sub_msg":"` + msg + `"}`
	}
	for _, tc := range []struct {
		reply   string
		want    orderpay.Outcome
		refusal orderpay.BarcodeRefusal
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"T_1","trade_no":"1","total_amount":"1.00"}`, orderpay.OutcomePaid, ""},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","trade_no":"1","total_amount":"1.00"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"10000","msg":"Success","trade_no":"1","total_amount":"1.00"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"10000","msg":"Success","out_trade_no":"T_1","trade_no":"1","total_amount":"0.99"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"10000","msg":"Success","out_trade_no":"T_1","trade_no":"1"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"10000","msg":"Success","out_trade_no":"T_1","trade_no":"1","total_amount":"1.001"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown, ""},
		{refused("ACQ.SYSTEM_ERROR", "系统错误"), orderpay.OutcomeUnknown, ""},
		{refused("ACQ.TRADE_HAS_SUCCESS", "交易已被支付"), orderpay.OutcomeUnknown, ""},
		{`{"code":"40005","msg":"Call Limited","sub_code":"aop.ACQ.CALL_LIMITED"}`, orderpay.OutcomeUnknown, ""},
		{`{"code":"30000","msg":"Something new"}`, orderpay.OutcomeUnknown, ""},
		{refused("ACQ.BUYER_BALANCE_NOT_ENOUGH", "买家余额不足"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{refused("ACQ.BUYER_BANKCARD_BALANCE_NOT_ENOUGH", "用户银行卡余额不足"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{refused("ACQ.BEYOND_PAY_RESTRICTION", "超出支付限制"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{refused("ACQ.BUYER_PAYMENT_AMOUNT_DAY_LIMIT_ERROR", "买家付款日限额超限"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{refused("ACQ.BUYER_PAYMENT_AMOUNT_MONTH_LIMIT_ERROR", "买家付款月额度超限"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{refused("ACQ.PAYMENT_AUTH_CODE_INVALID", "支付失败，获取顾客账户信息失败，请顾客刷新付款码后重新收款"), orderpay.OutcomeRejected, orderpay.RefusalCodeInvalid},
		{refused("ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已使用，请顾客刷新付款码后重新收款"), orderpay.OutcomeRejected, orderpay.RefusalCodeUsed},
		{refused("ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已过期，请顾客刷新付款码后重新收款"), orderpay.OutcomeRejected, orderpay.RefusalCodeExpired},
		{refused("ACQ.BUYER_ENABLE_STATUS_FORBID", "买家状态非法"), orderpay.OutcomeRejected, orderpay.RefusalRisk},
		{refused("ACQ.PAYMENT_FAIL", "支付失败"), orderpay.OutcomeRejected, orderpay.RefusalRisk},
		{refused("ACQ.PAYMENT_REQUEST_HAS_RISK", "支付有风险"), orderpay.OutcomeRejected, orderpay.RefusalRisk},
		{refused("ACQ.TRADE_HAS_CLOSE", "交易已经关闭"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{refused("ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{refused("ACQ.INVALID_PARAMETER", "参数无效"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{`{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, orderpay.OutcomeRejected, orderpay.RefusalOther},
		{`{"code":"40006","msg":"Insufficient Permissions","sub_code":"isv.insufficient-isv-permissions"}`, orderpay.OutcomeRejected, orderpay.RefusalOther},
	} {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		res := ch.Precreate(context.Background(), req)
		if res.Outcome != tc.want || res.Refusal != tc.refusal {
			t.Errorf("%s: %s %q (%s), want %s %q", tc.reply, res.Outcome, res.Refusal, res.Detail, tc.want, tc.refusal)
		}
	}
	// Unsigned, even a perfect payment is no answer.
	ch := newChannel(t, keys, fakeGateway(t, nil, `{"code":"10000","msg":"Success","out_trade_no":"T_1","trade_no":"1","total_amount":"1.00"}`).URL)
	if res := ch.Precreate(context.Background(), req); res.Outcome != orderpay.OutcomeUnknown {
		t.Errorf("unsigned 10000: %+v, want Unknown", res)
	}
}

// Every signed answer alipay.trade.cancel can give, read as a reverse.
func TestBarcode_ReverseSignedAnswers(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	type want struct {
		outcome             orderpay.Outcome
		refunded, knowsThat bool
	}
	closed, refunded := want{orderpay.OutcomeClosed, false, true}, want{orderpay.OutcomeClosed, true, true}
	for _, tc := range []struct {
		reply string
		want  want
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","trade_no":"1","retry_flag":"N","action":"close"}`, closed},
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","trade_no":"1","retry_flag":"N","action":"refund"}`, refunded},
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","retry_flag":"N"}`, closed}, // no trade under the number
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","retry_flag":"N","action":""}`, closed},
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","retry_flag":"Y","action":"close"}`, want{outcome: orderpay.OutcomeRefundRetry}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR","retry_flag":"Y"}`, want{outcome: orderpay.OutcomeRefundRetry}},
		{`{"code":"10000","msg":"Success","out_trade_no":"RV_1","retry_flag":"N","action":"something_new"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","retry_flag":"N","action":"refund"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR","retry_flag":"Y"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR","retry_flag":"N"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error","retry_flag":"Y"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"40005","msg":"Call Limited","sub_code":"aop.ACQ.CALL_LIMITED","retry_flag":"Y"}`, want{outcome: orderpay.OutcomeUnknown}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR","retry_flag":"N"}`, want{outcome: orderpay.OutcomeRejected}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_CANCEL_TIME_OUT","retry_flag":"N"}`, want{outcome: orderpay.OutcomeRejected}},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","retry_flag":"N"}`, want{outcome: orderpay.OutcomeRejected}},
		{`{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, want{outcome: orderpay.OutcomeRejected}},
	} {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		r := ch.Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: "RV_1"})
		if got := (want{r.Outcome, r.Refunded, r.RefundKnown}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.reply, r, tc.want)
		}
	}
	ch := newChannel(t, keys, fakeGateway(t, nil, `{"code":"10000","msg":"Success","out_trade_no":"RV_1","retry_flag":"N","action":"close"}`).URL)
	if r := ch.Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: "RV_1"}); r.Outcome != orderpay.OutcomeUnknown {
		t.Errorf("unsigned cancel: %+v, want Unknown", r)
	}
	if r := ch.Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: "no/such"}); r.Outcome != orderpay.OutcomeRejected || !strings.HasPrefix(r.Detail, "not sent") {
		t.Errorf("a bad out_trade_no: %+v, want Rejected unsent", r)
	}
}

// A cancel of a number Alipay never saw (the pay call was lost) is Closed, and fences the
// number: the lost call arriving later cannot pay under it. A trade older than the cancel's
// 24 h is Rejected (ACQ.TRADE_CANCEL_TIME_OUT): a person must look.
func TestBarcode_ReverseOfALostPaymentAndOfAnOldTrade(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode sim.AlipayMode) {
		e := setupMode(t, mode, sim.Config{})
		if r := e.reverse(t, "BL_LOST"); r.Outcome != orderpay.OutcomeClosed || r.Refunded || !r.RefundKnown {
			t.Fatalf("cancel of a number Alipay never saw: %+v, want Closed", r)
		}
		res := e.pay(t, "BL_LOST", 100, e.code(t, sim.CodeConfirm, 0))
		if res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "ACQ.TRADE_HAS_CLOSE") {
			t.Fatalf("the lost call, late: %+v, want Rejected", res)
		}

		if res := e.pay(t, "BL_OLD", 100, e.code(t, sim.CodeConfirm, 0)); res.Outcome != orderpay.OutcomePaid {
			t.Fatalf("pay: %+v", res)
		}
		e.clock.Advance(24 * time.Hour)
		if r := e.reverse(t, "BL_OLD"); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "ACQ.TRADE_CANCEL_TIME_OUT") {
			t.Fatalf("cancel after 24 h: %+v, want Rejected", r)
		}
		if l := e.ledger(t, "BL_OLD"); l.Refunded != 0 || len(l.Refunds) != 0 {
			t.Fatalf("refunded by a refused cancel: %+v", l)
		}
	})
}

// Every call fault on the payment is Unknown, never Paid nor Rejected, in both modes; the
// query then tells what happened: a fault with effect hides a payment the query finds, one
// without left no trade.
func TestBarcode_PayFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		for _, f := range callFaults {
			t.Run(string(mode)+"/"+faultName(f.kind, f.applied), func(t *testing.T) {
				t.Parallel()
				e := setupMode(t, mode, sim.Config{})
				e.fault(t, sim.MethodPay, f.kind, f.applied)
				req := e.barcodeReq("BF_1", 600, e.code(t, sim.CodeConfirm, 0))
				ch := e.faulty(t, f.kind)
				if mode == sim.AlipayModeCert && f.kind == sim.FaultTimeout {
					ch = newChannel(t, e.keys, e.srv.URL+"/gateway.do", certMode(t, e.keys), shortTimeout, func(c *alipay.Config) { c.Clock = e.clock })
				}
				start := time.Now()
				if res := ch.Precreate(context.Background(), req); res.Outcome != orderpay.OutcomeUnknown || res.Refusal != "" {
					t.Fatalf("pay: %+v, want Unknown", res)
				}
				if d := time.Since(start); f.kind == sim.FaultTimeout && d > 3*time.Second {
					t.Fatalf("took %v: the timeout did not bound the call", d)
				}
				e.noFaults()
				want := orderpay.OutcomeNotPaid
				if f.applied {
					want = orderpay.OutcomePaid
				}
				if q := e.ch.Query(context.Background(), "BF_1"); q.Outcome != want {
					t.Fatalf("query: %+v, want %s", q, want)
				}
			})
		}
	}
}

// Every call fault on the cancel is Unknown; the query then tells whether it took effect.
func TestBarcode_ReverseFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	for _, f := range callFaults {
		t.Run(faultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, sim.Config{})
			if res := e.pay(t, "BR_1", 600, e.code(t, sim.CodeNever, 0)); res.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("pay: %+v", res)
			}
			e.fault(t, sim.MethodCancel, f.kind, f.applied)
			rv := e.faulty(t, f.kind)
			if r := rv.Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: "BR_1"}); r.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("cancel: %+v, want Unknown", r)
			}
			e.noFaults()
			want := orderpay.OutcomeNotPaid
			if f.applied {
				want = orderpay.OutcomeClosed
			}
			if q := e.ch.Query(context.Background(), "BR_1"); q.Outcome != want {
				t.Fatalf("query: %+v, want %s", q, want)
			}
			// Cancelled again, it ends.
			if r := e.reverse(t, "BR_1"); r.Outcome != orderpay.OutcomeClosed || r.Refunded {
				t.Fatalf("cancel again: %+v, want Closed", r)
			}
		})
	}
}

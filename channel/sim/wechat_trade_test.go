package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

func TestWechatPrepay_SameParametersSameCode_OthersRefused(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	expire := b.clock.Now().Add(30 * time.Minute)
	first := b.prepay(t, "PRE_001", 1234, expire, "https://merchant.example/notify/wechat")
	if again := b.prepay(t, "PRE_001", 1234, expire, "https://merchant.example/notify/wechat"); again != first {
		t.Fatalf("repeated prepay gave %s, first %s", again, first)
	}
	for name, body := range map[string]string{
		"other amount":      b.prepayBody("PRE_001", 1235, expire, "https://merchant.example/notify/wechat"),
		"other time_expire": b.prepayBody("PRE_001", 1234, expire.Add(time.Minute), "https://merchant.example/notify/wechat"),
		"other notify_url":  b.prepayBody("PRE_001", 1234, expire, "https://merchant.example/other"),
		"other description": strings.Replace(b.prepayBody("PRE_001", 1234, expire, "https://merchant.example/notify/wechat"), "订单", "商品", 1),
	} {
		wantWxError(t, name, b.call(t, http.MethodPost, "/v3/pay/transactions/native", body), http.StatusForbidden, "OUT_TRADE_NO_USED")
	}

	// Past time_expire the number is spent, even with the same parameters.
	b.clock.Advance(30 * time.Minute)
	wantWxError(t, "after time_expire", b.call(t, http.MethodPost, "/v3/pay/transactions/native",
		b.prepayBody("PRE_001", 1234, expire, "https://merchant.example/notify/wechat")), http.StatusForbidden, "OUT_TRADE_NO_USED")

	// Closed, then paid orders answer with their own codes.
	b.prepay(t, "PRE_002", 500, time.Time{}, "")
	if c := b.close(t, "PRE_002"); c.status != http.StatusNoContent {
		t.Fatalf("close: %s", c)
	}
	wantWxError(t, "after close", b.call(t, http.MethodPost, "/v3/pay/transactions/native",
		b.prepayBody("PRE_002", 500, time.Time{}, "")), http.StatusBadRequest, "ORDER_CLOSED")
	b.paid(t, "PRE_003", 700)
	wantWxError(t, "after payment", b.call(t, http.MethodPost, "/v3/pay/transactions/native",
		b.prepayBody("PRE_003", 700, b.clock.Now().Add(time.Hour), "")), http.StatusBadRequest, "ORDERPAID")
}

func TestWechatPrepay_InvalidRequestsAreRefusedAndCreateNothing(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	valid := func(change func(m map[string]any)) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(b.prepayBody("VAL_001", 100, b.clock.Now().Add(time.Hour), "https://m.example/n")), &m)
		change(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not JSON", "{", 400, "PARAM_ERROR"},
		{"out_trade_no of 5", valid(func(m map[string]any) { m["out_trade_no"] = "A1234" }), 400, "PARAM_ERROR"},
		{"out_trade_no of 33", valid(func(m map[string]any) { m["out_trade_no"] = strings.Repeat("A", 33) }), 400, "PARAM_ERROR"},
		{"out_trade_no with a dot", valid(func(m map[string]any) { m["out_trade_no"] = "ABC.12345" }), 400, "PARAM_ERROR"},
		{"description of 128 characters", valid(func(m map[string]any) { m["description"] = strings.Repeat("茶", 128) }), 400, "PARAM_ERROR"},
		{"no description", valid(func(m map[string]any) { delete(m, "description") }), 400, "PARAM_ERROR"},
		{"zero total", valid(func(m map[string]any) { m["amount"] = map[string]any{"total": 0} }), 400, "PARAM_ERROR"},
		{"fractional total", valid(func(m map[string]any) { m["amount"] = map[string]any{"total": 1.5} }), 400, "PARAM_ERROR"},
		{"USD", valid(func(m map[string]any) { m["amount"] = map[string]any{"total": 100, "currency": "USD"} }), 400, "PARAM_ERROR"},
		{"time_expire not RFC 3339", valid(func(m map[string]any) { m["time_expire"] = "2025-03-14 10:00:00" }), 400, "PARAM_ERROR"},
		{"notify_url with a query", valid(func(m map[string]any) { m["notify_url"] = "https://m.example/n?a=1" }), 400, "PARAM_ERROR"},
		{"another merchant's mchid", valid(func(m map[string]any) { m["mchid"] = "1900000109" }), 400, "PARAM_ERROR"},
		{"another app's appid", valid(func(m map[string]any) { m["appid"] = "wx0000000000000000" }), 400, "APPID_MCHID_NOT_MATCH"},
	}
	for _, tc := range cases {
		wantWxError(t, tc.name, b.call(t, http.MethodPost, "/v3/pay/transactions/native", tc.body), tc.status, tc.code)
	}
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("refused prepays left orders: %+v", l)
	}
	// 6 and 32 characters of every allowed kind are fine; 127 characters of description too.
	for _, no := range []string{"Ab-_|*", strings.Repeat("z", 32)} {
		body := valid(func(m map[string]any) { m["out_trade_no"] = no; m["description"] = strings.Repeat("茶", 127) })
		if a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", body); a.status != http.StatusOK {
			t.Fatalf("out_trade_no %q: %s", no, a)
		}
	}
}

func TestWechatPrepay_TimeExpireUnderOneMinuteIsRaisedToIt(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	// time_expire already past: WeChat keeps the code payable until order time + 1 min.
	code := b.prepay(t, "EXP_001", 100, b.clock.Now().Add(-time.Hour), "")
	b.clock.Advance(59 * time.Second)
	if _, err := b.sim.Scan(context.Background(), code); err != nil {
		t.Fatalf("scan 59 s after ordering: %v", err)
	}
	b.clock.Advance(time.Second)
	if _, err := b.sim.Pay(context.Background(), code); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay 60 s after ordering: %v, want ECONFLICT", err)
	}
	// Without time_expire, an order can be paid for two hours.
	code = b.prepay(t, "EXP_002", 100, time.Time{}, "")
	b.clock.Advance(2*time.Hour - time.Second)
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatalf("pay just before the default 2 h: %v", err)
	}
}

func TestWechatQuery_EveryStateOfANativeOrder(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wantWxError(t, "before prepay", b.query(t, "QRY_001"), http.StatusNotFound, "ORDER_NOT_EXIST")

	code := b.prepay(t, "QRY_001", 2599, b.clock.Now().Add(time.Hour), "")
	a := b.query(t, "QRY_001")
	notPaid := a.json(t)
	if a.status != 200 || notPaid["trade_state"] != "NOTPAY" || notPaid["trade_state_desc"] != "订单未支付" ||
		notPaid["transaction_id"] != nil || notPaid["payer"] != nil || notPaid["success_time"] != nil ||
		notPaid["out_trade_no"] != "QRY_001" || notPaid["mchid"] != b.wk.MchID || notPaid["appid"] != b.wk.AppID {
		t.Fatalf("after prepay: %s", a)
	}
	// Scanning and declining leave a Native order NOTPAY: USERPAYING is micropay-only.
	for _, act := range []func(context.Context, string) (*sim.PayResult, error){b.sim.Scan, b.sim.Decline} {
		res, err := act(context.Background(), code)
		if err != nil || res.Status != "NOTPAY" || res.TradeNo != "" || res.Channel != "wechat" {
			t.Fatalf("scan/decline: %+v %v", res, err)
		}
		if s := b.tradeState(t, "QRY_001"); s != "NOTPAY" {
			t.Fatalf("after scan/decline: %s", s)
		}
	}

	b.clock.Advance(90 * time.Second)
	paid, err := b.sim.Pay(context.Background(), code)
	if err != nil || paid.Status != "SUCCESS" || paid.Amount != 2599 || len(paid.TradeNo) != 28 {
		t.Fatalf("pay: %+v %v", paid, err)
	}
	a = b.query(t, "QRY_001")
	var txn struct {
		TransactionID string `json:"transaction_id"`
		TradeType     string `json:"trade_type"`
		TradeState    string `json:"trade_state"`
		SuccessTime   string `json:"success_time"`
		Payer         struct {
			OpenID string `json:"openid"`
		} `json:"payer"`
		Amount struct {
			Total         int64  `json:"total"`
			PayerTotal    int64  `json:"payer_total"`
			Currency      string `json:"currency"`
			PayerCurrency string `json:"payer_currency"`
		} `json:"amount"`
	}
	if err := json.Unmarshal(a.body, &txn); err != nil {
		t.Fatal(err)
	}
	wantTime := b.clock.Now().In(cst).Format(time.RFC3339)
	if txn.TradeState != "SUCCESS" || txn.TransactionID != paid.TradeNo || txn.TradeType != "NATIVE" ||
		txn.SuccessTime != wantTime || !strings.HasPrefix(txn.Payer.OpenID, "o") || txn.Amount.Total != 2599 ||
		txn.Amount.PayerTotal != 2599 || txn.Amount.Currency != "CNY" || txn.Amount.PayerCurrency != "CNY" {
		t.Fatalf("after pay: %s (success_time want %s)", a, wantTime)
	}
	// The same Transaction by transaction_id.
	byID := b.call(t, http.MethodGet, "/v3/pay/transactions/id/"+paid.TradeNo+"?mchid="+b.wk.MchID, "")
	if byID.status != 200 || string(byID.body) != string(a.body) {
		t.Fatalf("by transaction_id: %s, want %s", byID, a)
	}

	wantWxError(t, "no mchid", b.call(t, http.MethodGet, "/v3/pay/transactions/out-trade-no/QRY_001", ""), 400, "PARAM_ERROR")
	wantWxError(t, "other mchid", b.call(t, http.MethodGet, "/v3/pay/transactions/out-trade-no/QRY_001?mchid=1900000109", ""),
		400, "PARAM_ERROR")
}

func TestWechatClose_UnpaidOrderIsClosedAndItsCodeDead(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	code := b.prepay(t, "CLS_001", 500, b.clock.Now().Add(time.Hour), "")
	if _, err := b.sim.Scan(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // closing a closed order is 204 again
		if c := b.close(t, "CLS_001"); c.status != http.StatusNoContent {
			t.Fatalf("close #%d: %s", i+1, c)
		}
	}
	if s := b.tradeState(t, "CLS_001"); s != "CLOSED" {
		t.Fatalf("after close: %s", s)
	}
	if _, err := b.sim.Pay(context.Background(), code); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after close: %v, want ECONFLICT", err)
	}
	if e := wxEntry(t, b.sim, "CLS_001"); e.Status != "CLOSED" || !e.PaidAt.IsZero() {
		t.Fatalf("ledger %+v", e)
	}
	wantWxError(t, "unknown order", b.close(t, "CLS_404"), http.StatusNotFound, "ORDER_NOT_EXIST")
	wantWxError(t, "other mchid", b.call(t, http.MethodPost, "/v3/pay/transactions/out-trade-no/CLS_001/close",
		`{"mchid":"1900000109"}`), http.StatusBadRequest, "PARAM_ERROR")
}

// An unpaid order past time_expire cannot be paid, but WeChat does not close it: it stays
// NOTPAY until the merchant closes it.
func TestWechatPay_AfterTimeExpireFailsAndTheOrderStaysNotPay(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	code := b.prepay(t, "LATE_001", 300, b.clock.Now().Add(5*time.Minute), "")
	b.clock.Advance(5 * time.Minute)
	if _, err := b.sim.Pay(context.Background(), code); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay at time_expire: %v, want ECONFLICT", err)
	}
	if s := b.tradeState(t, "LATE_001"); s != "NOTPAY" {
		t.Fatalf("after time_expire: %s, want NOTPAY", s)
	}
}

func TestWechatClose_PaidOrderEitherRefusedOr204AndStaysPaid(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.WechatClosePaid{"", sim.WechatClosePaidRefused, sim.WechatClosePaidNoContent} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := wxSetup(t, sim.Config{WechatClosePaid: mode})
			b.paid(t, "CPD_001", 800)
			c := b.close(t, "CPD_001")
			if mode == sim.WechatClosePaidNoContent {
				if c.status != http.StatusNoContent {
					t.Fatalf("close of a paid order: %s, want 204", c)
				}
			} else {
				wantWxError(t, "close of a paid order", c, http.StatusBadRequest, "ORDERPAID")
			}
			if s := b.tradeState(t, "CPD_001"); s != "SUCCESS" {
				t.Fatalf("after closing a paid order: %s, want SUCCESS", s)
			}
		})
	}
	if _, err := sim.New(sim.Config{Keys: testKeys(t), WechatClosePaid: "maybe"}); err == nil {
		t.Fatal("an unknown WechatClosePaid was accepted")
	}
}

// WeChat calls back only HTTPS addresses: a prepay or a refund whose notify_url is plain
// http on another host is refused with 400 PARAM_ERROR naming notify_url, and creates
// nothing. http on a loopback host is taken, since the simulator runs beside its merchant.
func TestWechatNotifyURL_HTTPSRequiredExceptOnLoopback(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.paid(t, "URL_PAID", 1000)
	refused := []string{"http://merchant.example.com/notify", "http://10.1.2.3:8080/notify", "http://localhost.example.com/n", "ftp://127.0.0.1/n"}
	taken := []string{"https://merchant.example.com/notify", "http://127.0.0.1:8080/notify/wechat", "http://localhost/n", "http://[::1]:9000/n", "http://127.0.0.2/n"}
	for i, u := range refused {
		a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody(fmt.Sprintf("URL_P%02d", i), 100, time.Time{}, u))
		wantWxError(t, "prepay to "+u, a, http.StatusBadRequest, "PARAM_ERROR")
		if d, _ := a.json(t)["detail"].(map[string]any); d["field"] != "notify_url" || !strings.Contains(a.json(t)["message"].(string), "notify_url") {
			t.Fatalf("prepay to %s: %s, want the error to name notify_url", u, a)
		}
		body := strings.Replace(wxRefundBody("URL_PAID", fmt.Sprintf("URL_R%02d", i), 100, 1000), `"reason"`, `"notify_url":"`+u+`","reason"`, 1)
		wantWxError(t, "refund to "+u, b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", body), http.StatusBadRequest, "PARAM_ERROR")
	}
	if l := b.sim.Ledger(); len(l) != 1 || l[0].Refunded != 0 {
		t.Fatalf("refused calls left something behind: %+v", l)
	}
	for i, u := range taken {
		if a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody(fmt.Sprintf("URL_T%02d", i), 100, time.Time{}, u)); a.status != http.StatusOK {
			t.Fatalf("prepay to %s: %s", u, a)
		}
		body := strings.Replace(wxRefundBody("URL_PAID", fmt.Sprintf("URL_S%02d", i), 100, 1000), `"reason"`, `"notify_url":"`+u+`","reason"`, 1)
		if a := b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", body); a.status != http.StatusOK {
			t.Fatalf("refund to %s: %s", u, a)
		}
	}
}

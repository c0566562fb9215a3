package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// wxModeBundle is a simulator in one WeChat mode, with the way a merchant in that mode
// verifies an answer: the public key, or the downloaded platform certificates.
type wxModeBundle struct {
	*wxBundle
	verify func(a wxAnswer) error
}

func wxModeSetup(t *testing.T, mode sim.WechatMode, cfg sim.Config) *wxModeBundle {
	t.Helper()
	if mode == sim.WechatModePublicKey {
		b := wxSetup(t, cfg)
		return &wxModeBundle{wxBundle: b, verify: b.verifyAnswer}
	}
	b := wxCertSetup(t, cfg)
	certs := b.downloadCertificates(t).certs
	return &wxModeBundle{wxBundle: b, verify: func(a wxAnswer) error {
		return verifyCertSigned(certs, a.header, a.body, b.wallClock.Now())
	}}
}

// wcall sends a signed request and fails the test unless an answer WeChat signs (2xx, and
// a 4xx to an authenticated request) verifies as the mode says.
func (b *wxModeBundle) wcall(t *testing.T, method, uri, body string) wxAnswer {
	t.Helper()
	a := b.do(t, wxRequest{method: method, uri: uri, body: body})
	if a.status >= 200 && a.status < 500 && a.status != http.StatusUnauthorized {
		if err := b.verify(a); err != nil {
			t.Fatalf("%s %s answered %s, not correctly signed: %v", method, uri, a, err)
		}
	}
	return a
}

// codepayBody is a codepay body for this merchant: total fen, the code, a till's address
// and store.
func (b *wxBundle) codepayBody(no string, total int64, code string, extra map[string]any) string {
	m := map[string]any{
		"appid":        b.wk.AppID,
		"mchid":        b.wk.MchID,
		"description":  "till " + no,
		"out_trade_no": no,
		"payer":        map[string]any{"auth_code": code},
		"amount":       map[string]any{"total": total, "currency": "CNY"},
		"scene_info":   map[string]any{"device_ip": "192.0.2.10", "store_info": map[string]any{"out_id": "S01"}},
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func (b *wxModeBundle) codepay(t *testing.T, no string, total int64, code string) wxAnswer {
	t.Helper()
	return b.wcall(t, http.MethodPost, "/v3/pay/transactions/codepay", b.codepayBody(no, total, code, nil))
}

func (b *wxModeBundle) reverse(t *testing.T, no string) wxAnswer {
	t.Helper()
	return b.wcall(t, http.MethodPost, "/v3/pay/transactions/out-trade-no/"+no+"/reverse",
		`{"appid":"`+b.wk.AppID+`","mchid":"`+b.wk.MchID+`"}`)
}

func (b *wxModeBundle) txn(t *testing.T, no string) map[string]any {
	t.Helper()
	a := b.wcall(t, http.MethodGet, "/v3/pay/transactions/out-trade-no/"+no+"?mchid="+b.wk.MchID, "")
	if a.status != http.StatusOK {
		t.Fatalf("query %s: %s", no, a)
	}
	return a.json(t)
}

func wantState(t *testing.T, what string, txn map[string]any, state string) {
	t.Helper()
	if txn["trade_state"] != state || txn["trade_type"] != "MICROPAY" {
		t.Fatalf("%s: %v, want %s of MICROPAY", what, txn, state)
	}
}

// wantUserPaying fails unless a is the codepay answer that the buyer is confirming.
func wantUserPaying(t *testing.T, what string, a wxAnswer, status int, no string) {
	t.Helper()
	m := a.json(t)
	if a.status != status || m["trade_state"] != "USERPAYING" || m["out_trade_no"] != no || m["transaction_id"] != nil {
		t.Fatalf("%s: %s, want %d USERPAYING", what, a, status)
	}
}

// Every behaviour over HTTP, in both WeChat modes, every answer verified: confirm answers
// the paid Transaction; password and wrong_password answer USERPAYING (202) and are paid the
// code's time later; never ends PAYERROR after 60 s unless confirmed on the wallet first;
// short is 403 NOTENOUGH and PAYERROR. Queries say MICROPAY, the ledger barcode, the bill
// MICROPAY, and nothing is ever notified.
func TestWechatBarcode_EveryBehaviour(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.WechatMode{sim.WechatModePublicKey, sim.WechatModeCertificate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := wxModeSetup(t, mode, sim.Config{})
			start := b.clock.Now()

			a := b.codepay(t, "WB_OKAY", 1234, issue(t, b.sim, "wechat", "alice", sim.CodeConfirm, 0))
			m := a.json(t)
			payer, _ := m["payer"].(map[string]any)
			amount, _ := m["amount"].(map[string]any)
			if a.status != http.StatusOK || m["trade_state"] != "SUCCESS" || m["trade_type"] != "MICROPAY" || m["out_trade_no"] != "WB_OKAY" ||
				m["appid"] != b.wk.AppID || m["mchid"] != b.wk.MchID || m["transaction_id"] == nil || m["success_time"] != start.In(cst).Format(time.RFC3339) ||
				payer["openid"] != b.sim.IdentityOf("alice", b.wk.AppID).OpenID || amount["total"] != 1234.0 || amount["payer_total"] != 1234.0 {
				t.Fatalf("confirm: %s", a)
			}
			wantState(t, "query after confirm", b.txn(t, "WB_OKAY"), "SUCCESS")

			for _, beh := range []string{sim.CodePassword, sim.CodeWrongPassword} {
				no := "WB_" + strings.ToUpper(beh)
				wantUserPaying(t, beh, b.codepay(t, no, 100, issue(t, b.sim, "wechat", "bob", beh, 20*time.Second)), http.StatusAccepted, no)
			}
			b.clock.Advance(10 * time.Second)
			if d := b.txn(t, "WB_WRONG_PASSWORD")["trade_state_desc"]; !strings.Contains(d.(string), "密码错误") {
				t.Fatalf("wrong password after 10 s: desc %v", d)
			}
			b.clock.Advance(9 * time.Second)
			wantState(t, "password at 19 s", b.txn(t, "WB_PASSWORD"), "USERPAYING")
			b.clock.Advance(time.Second)
			for _, no := range []string{"WB_PASSWORD", "WB_WRONG_PASSWORD"} {
				txn := b.txn(t, no)
				wantState(t, no+" at 20 s", txn, "SUCCESS")
				if txn["success_time"] != start.Add(20*time.Second).In(cst).Format(time.RFC3339) {
					t.Fatalf("%s: success_time %v", no, txn["success_time"])
				}
			}

			// never: USERPAYING for 60 s, then PAYERROR; another never buyer confirms in time.
			b.codepay(t, "WB_NEVER", 100, issue(t, b.sim, "wechat", "carol", sim.CodeNever, 0))
			late := issue(t, b.sim, "wechat", "carol", sim.CodeNever, 0)
			b.codepay(t, "WB_CONFIRMED", 100, late)
			b.clock.Advance(59 * time.Second)
			wantState(t, "never at 59 s", b.txn(t, "WB_NEVER"), "USERPAYING")
			if res, err := b.sim.ConfirmCode(late); err != nil || res.Status != sim.WechatSuccess {
				t.Fatalf("ConfirmCode: %+v, %v", res, err)
			}
			b.clock.Advance(time.Second)
			wantState(t, "never at 60 s", b.txn(t, "WB_NEVER"), "PAYERROR")
			wantState(t, "confirmed", b.txn(t, "WB_CONFIRMED"), "SUCCESS")

			short := issue(t, b.sim, "wechat", "dave", sim.CodeShort, 0)
			wantWxError(t, "short", b.codepay(t, "WB_SHORT", 100, short), http.StatusForbidden, "NOTENOUGH")
			wantState(t, "after NOTENOUGH", b.txn(t, "WB_SHORT"), "PAYERROR")
			if c, _ := b.sim.Code(short); c.State != sim.PayCodeUsed || c.TradeStatus != "PAYERROR" || c.Waiting {
				t.Fatalf("the short code: %+v", c)
			}

			if r := b.wcall(t, http.MethodPost, "/v3/refund/domestic/refunds", wxRefundBody("WB_OKAY", "WB_OKAY_r1", 234, 1234)); r.status != http.StatusOK {
				t.Fatalf("refund: %s", r)
			}
			for no, paid := range map[string]bool{"WB_OKAY": true, "WB_PASSWORD": true, "WB_NEVER": false, "WB_SHORT": false} {
				if e := wxEntry(t, b.sim, no); e.Method != orderpay.MethodBarcode || e.PaidAt.IsZero() == paid {
					t.Fatalf("ledger %+v", e)
				}
			}
			if n := len(b.sim.NotifyStats()); n != 0 {
				t.Fatalf("%d notifications of barcode orders", n)
			}

			b.clock.Set(start.Add(24 * time.Hour))
			bill := b.wcall(t, http.MethodGet, "/v3/bill/tradebill?bill_date="+start.In(cst).Format("2006-01-02")+"&bill_type=ALL", "")
			if bill.status != http.StatusOK {
				t.Fatalf("bill: %s", bill)
			}
			url, _ := bill.json(t)["download_url"].(string)
			file := b.do(t, wxRequest{method: http.MethodGet, uri: strings.TrimPrefix(url, b.srv.URL)})
			if !strings.Contains(string(file.body), "`WB_OKAY,`"+b.sim.IdentityOf("alice", b.wk.AppID).OpenID+",`MICROPAY,`SUCCESS") {
				t.Fatalf("the bill has no MICROPAY row for WB_OKAY:\n%s", file.body)
			}
		})
	}
}

// Whether the real gateway answers USERPAYING with 200 or 202 is not verified: the
// simulator does either, 202 by default; anything else is not a valid configuration.
func TestWechatBarcode_UserPayingStatusSwitch(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusAccepted} {
		b := wxModeSetup(t, sim.WechatModePublicKey, sim.Config{WechatUserPayingStatus: status})
		wantUserPaying(t, "USERPAYING", b.codepay(t, "WS_001", 100, issue(t, b.sim, "wechat", "", sim.CodeNever, 0)), status, "WS_001")
		// Sent again while waiting, it answers the same.
		a := b.wcall(t, http.MethodPost, "/v3/pay/transactions/codepay", b.codepayBody("WS_001", 100, mustCodeOf(t, b.sim, "WS_001"), nil))
		wantUserPaying(t, "the same call again", a, status, "WS_001")
	}
	if _, err := sim.New(sim.Config{Keys: testKeys(t), WechatUserPayingStatus: http.StatusCreated}); err == nil {
		t.Fatal("New took WechatUserPayingStatus 201")
	}
}

// mustCodeOf is the code the latest issued code list shows for outTradeNo.
func mustCodeOf(t *testing.T, s *sim.Simulator, outTradeNo string) string {
	t.Helper()
	for _, c := range s.PayCodes(100) {
		if c.OutTradeNo == outTradeNo {
			return c.AuthCode
		}
	}
	t.Fatalf("no code used for %s", outTradeNo)
	return ""
}

// What codepay refuses, each as WeChat answers it, signed: the body (notify_url, device_ip,
// auth_code, the appid), the code (shape, issuer, use, lifetime), and the out_trade_no's
// history. A barcode order cannot be closed: it is reversed.
func TestWechatBarcode_Refusals(t *testing.T) {
	t.Parallel()
	b := wxModeSetup(t, sim.WechatModePublicKey, sim.Config{})
	code := issue(t, b.sim, "wechat", "alice", sim.CodeConfirm, 0)
	post := func(body string) wxAnswer {
		return b.wcall(t, http.MethodPost, "/v3/pay/transactions/codepay", body)
	}
	for name, tc := range map[string]struct {
		extra  map[string]any
		status int
		code   string
	}{
		"notify_url":      {map[string]any{"notify_url": "https://shop.example/notify"}, 400, "PARAM_ERROR"},
		"no device_ip":    {map[string]any{"scene_info": map[string]any{"store_info": map[string]any{"out_id": "S01"}}}, 400, "PARAM_ERROR"},
		"no scene_info":   {map[string]any{"scene_info": nil}, 400, "PARAM_ERROR"},
		"no auth_code":    {map[string]any{"payer": map[string]any{}}, 400, "PARAM_ERROR"},
		"another mchid":   {map[string]any{"mchid": "1900000109"}, 400, "PARAM_ERROR"},
		"the JSAPI appid": {map[string]any{"appid": b.wk.JSAPIAppID}, 400, "APPID_MCHID_NOT_MATCH"},
		"an Alipay code":  {map[string]any{"payer": map[string]any{"auth_code": issue(t, b.sim, "alipay", "", "", 0)}}, 400, "AUTH_CODE_INVALID"},
		"never issued":    {map[string]any{"payer": map[string]any{"auth_code": "134567890123456789"}}, 400, "AUTH_CODE_INVALID"},
		"letters":         {map[string]any{"payer": map[string]any{"auth_code": "13456789012345678x"}}, 400, "AUTH_CODE_INVALID"},
	} {
		wantWxError(t, name, post(b.codepayBody("WR_001", 500, code, tc.extra)), tc.status, tc.code)
	}
	if _, err := b.sim.Code(code); err != nil {
		t.Fatal(err)
	}
	if c, _ := b.sim.Code(code); c.State != sim.PayCodeLive {
		t.Fatalf("the code after refusals: %+v", c)
	}
	if a := b.codepay(t, "WR_001", 500, code); a.status != http.StatusOK {
		t.Fatalf("pay: %s", a)
	}
	a := b.codepay(t, "WR_002", 500, code)
	wantWxError(t, "the code again", a, http.StatusBadRequest, "AUTH_CODE_INVALID")
	if !strings.Contains(string(a.body), "仅限使用一次") {
		t.Fatalf("used code: %s", a)
	}
	old := issue(t, b.sim, "wechat", "", "", 0)
	b.clock.Advance(sim.DefaultPayCodeLifetime)
	wantWxError(t, "expired", b.codepay(t, "WR_003", 500, old), http.StatusBadRequest, "AUTHCODEEXPIRE")

	wantWxError(t, "paid number", b.codepay(t, "WR_001", 500, issue(t, b.sim, "wechat", "", "", 0)), http.StatusBadRequest, "ORDERPAID")
	b.codepay(t, "WR_SHORT", 500, issue(t, b.sim, "wechat", "", sim.CodeShort, 0))
	wantWxError(t, "failed number", b.codepay(t, "WR_SHORT", 500, issue(t, b.sim, "wechat", "", "", 0)), http.StatusBadRequest, "ORDER_CLOSED")
	wait := issue(t, b.sim, "wechat", "", sim.CodeNever, 0)
	b.codepay(t, "WR_WAIT", 500, wait)
	wantWxError(t, "another amount", b.codepay(t, "WR_WAIT", 501, wait), http.StatusBadRequest, "INVALID_REQUEST")
	wantWxError(t, "another code", b.codepay(t, "WR_WAIT", 500, issue(t, b.sim, "wechat", "", "", 0)), http.StatusBadRequest, "INVALID_REQUEST")
	b.prepay(t, "WR_NATIVE", 500, time.Time{}, "")
	wantWxError(t, "a Native number", b.codepay(t, "WR_NATIVE", 500, issue(t, b.sim, "wechat", "", "", 0)), http.StatusForbidden, "OUT_TRADE_NO_USED")
	wantWxError(t, "close", b.wcall(t, http.MethodPost, "/v3/pay/transactions/out-trade-no/WR_WAIT/close", `{"mchid":"`+b.wk.MchID+`"}`),
		http.StatusBadRequest, "INVALID_REQUEST")
	wantState(t, "after the refused close", b.txn(t, "WR_WAIT"), "USERPAYING")
}

// The reverse rules: not sooner than 15 s after the order, not while the buyer is paying
// (USERPAYING), accepted once PAYERROR; a reverse of a paid order refunds it in full, under
// its out_trade_no, in the ledger, the refund query and the bill; the number is dead after;
// a reverse is answered the same when sent again; unknown, Native, 7-day-old and refunded
// orders are refused.
func TestWechatBarcode_Reverse(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.WechatMode{sim.WechatModePublicKey, sim.WechatModeCertificate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := wxModeSetup(t, mode, sim.Config{})
			start := b.clock.Now()
			never := issue(t, b.sim, "wechat", "alice", sim.CodeNever, 0)
			b.codepay(t, "WV_NEVER", 300, never)
			b.codepay(t, "WV_PAID", 888, issue(t, b.sim, "wechat", "bob", sim.CodeConfirm, 0))

			b.clock.Advance(14 * time.Second)
			wantWxError(t, "at 14 s", b.reverse(t, "WV_NEVER"), http.StatusBadRequest, "INVALID_REQUEST")
			wantWxError(t, "paid at 14 s", b.reverse(t, "WV_PAID"), http.StatusBadRequest, "INVALID_REQUEST")
			b.clock.Advance(time.Second)
			a := b.reverse(t, "WV_NEVER")
			wantWxError(t, "while USERPAYING", a, http.StatusForbidden, "USERPAYING")
			if !strings.Contains(string(a.body), "正在支付中不能发起撤销") {
				t.Fatalf("USERPAYING refusal: %s", a)
			}

			// The paid order: reversed and refunded in full.
			a = b.reverse(t, "WV_PAID")
			if m := a.json(t); a.status != http.StatusOK || m["out_trade_no"] != "WV_PAID" || m["appid"] != b.wk.AppID || m["mchid"] != b.wk.MchID {
				t.Fatalf("reverse of a paid order: %s", a)
			}
			txn := b.txn(t, "WV_PAID")
			wantState(t, "reversed paid", txn, "REVOKED")
			if txn["transaction_id"] == nil {
				t.Fatalf("a reversed payment keeps its transaction: %v", txn)
			}
			e := wxEntry(t, b.sim, "WV_PAID")
			if e.Status != "REVOKED" || e.Refunded != 888 || len(e.Refunds) != 1 || e.Refunds[0].OutRefundNo != "WV_PAID" || e.Refunds[0].Status != "SUCCESS" || e.PaidAt.IsZero() {
				t.Fatalf("ledger of the reversed payment: %+v", e)
			}
			if r := b.wcall(t, http.MethodGet, "/v3/refund/domestic/refunds/WV_PAID", ""); r.status != http.StatusOK || r.json(t)["status"] != "SUCCESS" {
				t.Fatalf("the reverse's refund: %s", r)
			}
			if a := b.reverse(t, "WV_PAID"); a.status != http.StatusOK {
				t.Fatalf("the reverse again: %s", a)
			}
			wantWxError(t, "refund after reverse", b.wcall(t, http.MethodPost, "/v3/refund/domestic/refunds", wxRefundBody("WV_PAID", "WV_r2", 1, 888)),
				http.StatusBadRequest, "INVALID_REQUEST")
			if e := wxEntry(t, b.sim, "WV_PAID"); e.Refunded != 888 {
				t.Fatalf("refunded twice: %+v", e)
			}

			// The never order: PAYERROR after 60 s, then reversed; its number is dead.
			b.clock.Advance(45 * time.Second)
			if a := b.reverse(t, "WV_NEVER"); a.status != http.StatusOK {
				t.Fatalf("reverse after PAYERROR: %s", a)
			}
			wantState(t, "reversed unpaid", b.txn(t, "WV_NEVER"), "REVOKED")
			if e := wxEntry(t, b.sim, "WV_NEVER"); e.Refunded != 0 || len(e.Refunds) != 0 || !e.PaidAt.IsZero() {
				t.Fatalf("ledger of the reversed unpaid order: %+v", e)
			}
			wantWxError(t, "codepay after reverse", b.codepay(t, "WV_NEVER", 300, issue(t, b.sim, "wechat", "", "", 0)), http.StatusBadRequest, "ORDERREVERSED")
			if _, err := b.sim.ConfirmCode(never); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("confirming a reversed order: %v", err)
			}

			// A password buyer who confirms first: once paid the reverse refunds.
			b.codepay(t, "WV_PASS", 500, issue(t, b.sim, "wechat", "", sim.CodePassword, 20*time.Second))
			b.clock.Advance(16 * time.Second)
			wantWxError(t, "password buyer typing", b.reverse(t, "WV_PASS"), http.StatusForbidden, "USERPAYING")
			b.clock.Advance(4 * time.Second)
			if a := b.reverse(t, "WV_PASS"); a.status != http.StatusOK {
				t.Fatalf("reverse of the paid password order: %s", a)
			}
			if e := wxEntry(t, b.sim, "WV_PASS"); e.Status != "REVOKED" || e.Refunded != 500 {
				t.Fatalf("ledger: %+v", e)
			}

			// Refusals.
			wantWxError(t, "unknown", b.reverse(t, "WV_NONE"), http.StatusNotFound, "ORDER_NOT_EXIST")
			if a := b.wcall(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody("WV_NATIVE", 100, time.Time{}, "")); a.status != http.StatusOK {
				t.Fatalf("prepay: %s", a)
			}
			b.clock.Advance(time.Minute)
			wantWxError(t, "Native", b.reverse(t, "WV_NATIVE"), http.StatusBadRequest, "INVALID_REQUEST")
			b.codepay(t, "WV_REFUNDED", 600, issue(t, b.sim, "wechat", "", "", 0))
			b.wcall(t, http.MethodPost, "/v3/refund/domestic/refunds", wxRefundBody("WV_REFUNDED", "WV_REFUNDED_r1", 100, 600))
			b.clock.Advance(time.Minute)
			wantWxError(t, "refunded", b.reverse(t, "WV_REFUNDED"), http.StatusForbidden, "TRADE_ERROR")
			wantWxError(t, "another appid", b.wcall(t, http.MethodPost, "/v3/pay/transactions/out-trade-no/WV_REFUNDED/reverse",
				`{"appid":"`+b.wk.JSAPIAppID+`","mchid":"`+b.wk.MchID+`"}`), http.StatusBadRequest, "PARAM_ERROR")
			b.codepay(t, "WV_OLD", 700, issue(t, b.sim, "wechat", "", "", 0))
			b.clock.Advance(7 * 24 * time.Hour)
			wantWxError(t, "7 days old", b.reverse(t, "WV_OLD"), http.StatusBadRequest, "REVERSE_EXPIRE")

			// The reverse's refund is in the bill of its day.
			bill := b.wcall(t, http.MethodGet, "/v3/bill/tradebill?bill_date="+start.In(cst).Format("2006-01-02")+"&bill_type=ALL", "")
			url, _ := bill.json(t)["download_url"].(string)
			file := b.do(t, wxRequest{method: http.MethodGet, uri: strings.TrimPrefix(url, b.srv.URL)})
			if !strings.Contains(string(file.body), "`WV_PAID,`8.88,`0.00,`ORIGINAL,`SUCCESS") {
				t.Fatalf("the bill has no refund row for the reverse of WV_PAID:\n%s", file.body)
			}
		})
	}
}

// Faults on codepay and reverse, keyed on the out_trade_no: timeouts with and without
// effect, system and bank errors (500, unsigned), a forged success (unsigned or badly
// signed) for a payment that never happened, and a reverse that took effect while its
// answer was lost.
func TestWechatBarcode_Faults(t *testing.T) {
	t.Parallel()
	rule := func(method, kind string, applied bool) sim.FaultRule {
		return sim.FaultRule{Channel: "wechat", Method: method, Kind: kind, Applied: applied}
	}
	cases := []struct {
		name   string
		rule   sim.FaultRule
		status int // the answer's status; 0 for a timeout
		code   string
		signed bool
		made   bool // the payment happened
	}{
		{"timeout", rule(sim.MethodPay, sim.FaultTimeout, false), 0, "", false, false},
		{"timeout applied", rule(sim.MethodPay, sim.FaultTimeout, true), 0, "", false, true},
		{"system_error", rule(sim.MethodPay, sim.FaultSystemError, false), 500, "SYSTEM_ERROR", false, false},
		{"system_error applied", rule(sim.MethodPay, sim.FaultSystemError, true), 500, "SYSTEM_ERROR", false, true},
		{"bank_error", rule(sim.MethodPay, sim.FaultBankError, false), 500, "BANKERROR", false, false},
		{"bank_error applied", rule(sim.MethodPay, sim.FaultBankError, true), 500, "BANKERROR", false, true},
		{"unsigned", rule(sim.MethodPay, sim.FaultUnsigned, false), 200, "", false, false},
		{"bad_signature", rule(sim.MethodPay, sim.FaultBadSignature, false), 200, "", false, false},
		{"bad_signature applied", rule(sim.MethodPay, sim.FaultBadSignature, true), 200, "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := wxModeSetup(t, sim.WechatModePublicKey, sim.Config{})
			code := issue(t, b.sim, "wechat", "alice", sim.CodeConfirm, 0)
			if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{tc.rule}}); err != nil {
				t.Fatal(err)
			}
			// Another number meets no fault: a rule is aimed by its key, and fires once here.
			client := http.DefaultClient
			if tc.rule.Kind == sim.FaultTimeout {
				client = &http.Client{Timeout: 300 * time.Millisecond}
			}
			a, err := b.try(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/codepay", body: b.codepayBody("FT_PAY", 1000, code, nil)}, client)
			switch {
			case tc.status == 0:
				var ne interface{ Timeout() bool }
				if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("answer %s, err %v, want a timeout", a, err)
				}
			case err != nil:
				t.Fatal(err)
			case a.status != tc.status || (tc.code != "" && a.code() != tc.code):
				t.Fatalf("answer %s, want %d %s", a, tc.status, tc.code)
			case (b.verifyAnswer(a) == nil) != tc.signed:
				t.Fatalf("answer %s verifies: %v, want %v", a, b.verifyAnswer(a) == nil, tc.signed)
			}
			_ = b.sim.SetFaults(sim.FaultPlan{})
			c, _ := b.sim.Code(code)
			if tc.made != (c.State == sim.PayCodeUsed) {
				t.Fatalf("code %+v, want used=%v", c, tc.made)
			}
			if !tc.made {
				if a := b.query(t, "FT_PAY"); a.status != http.StatusNotFound {
					t.Fatalf("query after a fault without effect: %s", a)
				}
				if a := b.codepay(t, "FT_PAY", 1000, code); a.status != http.StatusOK {
					t.Fatalf("resent: %s", a)
				}
				return
			}
			wantState(t, "query", b.txn(t, "FT_PAY"), "SUCCESS")
			wantWxError(t, "resent", b.codepay(t, "FT_PAY", 1000, code), http.StatusBadRequest, "ORDERPAID")
		})
	}

	// A reverse whose answer was lost took effect; sent again it answers the same.
	b := wxModeSetup(t, sim.WechatModePublicKey, sim.Config{})
	b.codepay(t, "FR_REV", 1000, issue(t, b.sim, "wechat", "", "", 0))
	b.clock.Advance(20 * time.Second)
	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{rule(sim.MethodReverse, sim.FaultTimeout, true)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/v3/pay/transactions/out-trade-no/FR_REV/reverse",
		strings.NewReader(`{"appid":"`+b.wk.AppID+`","mchid":"`+b.wk.MchID+`"}`))
	req.Header.Set("Authorization", b.authorization(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/out-trade-no/FR_REV/reverse",
		body: `{"appid":"` + b.wk.AppID + `","mchid":"` + b.wk.MchID + `"}`}))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("reverse under a timeout answered %d", resp.StatusCode)
	}
	_ = b.sim.SetFaults(sim.FaultPlan{})
	wantState(t, "after the lost reverse", b.txn(t, "FR_REV"), "REVOKED")
	if a := b.reverse(t, "FR_REV"); a.status != http.StatusOK {
		t.Fatalf("reverse again: %s", a)
	}
	if e := wxEntry(t, b.sim, "FR_REV"); e.Refunded != 1000 || len(e.Refunds) != 1 {
		t.Fatalf("ledger: %+v", e)
	}

	// Rules that make no sense are refused.
	for name, r := range map[string]sim.FaultRule{
		"alipay reverse":       {Channel: "alipay", Method: sim.MethodReverse, Kind: sim.FaultTimeout},
		"alipay bank_error":    {Channel: "alipay", Method: sim.MethodPay, Kind: sim.FaultBankError},
		"bank_error, any":      {Method: sim.MethodPay, Kind: sim.FaultBankError},
		"bank_error on query":  {Channel: "wechat", Method: sim.MethodQuery, Kind: sim.FaultBankError},
		"applied rate limited": {Channel: "wechat", Method: sim.MethodPay, Kind: sim.FaultRateLimited, Applied: true},
	} {
		if err := (sim.FaultPlan{Rules: []sim.FaultRule{r}}).Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

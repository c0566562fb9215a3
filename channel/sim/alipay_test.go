package sim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

func TestGateway_RequestSignedWithWrongKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	wrong, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	wrongPEM, _ := sim.PrivateKeyPEM(wrong)
	client := sdkClient(t, b.keys.AppID, wrongPEM, simtest.PEM(t, b.keys.AlipayPublicKeyPEM), b.gatewayURL())

	// err == nil means the SDK verified the refusal's signature: errors are signed too.
	rsp, err := client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "T_1"})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if rsp.Code != "40002" || rsp.SubCode != "isv.invalid-signature" {
		t.Fatalf("got %s/%s, want 40002/isv.invalid-signature", rsp.Code, rsp.SubCode)
	}
}

func TestGateway_TamperedParameterAfterSigningIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	params := signedParams(t, b, "alipay.trade.precreate",
		`{"out_trade_no":"T_1","total_amount":"100.00","subject":"x"}`, signWith(t, b))
	params.Set("biz_content", `{"out_trade_no":"T_1","total_amount":"0.01","subject":"x"}`)

	node, got := rawCall(t, b, params)
	if node != "alipay_trade_precreate_response" || got["code"] != "40002" || got["sub_code"] != "isv.invalid-signature" {
		t.Fatalf("got %s %v, want 40002 isv.invalid-signature", node, got)
	}
	if len(b.sim.Ledger()) != 0 {
		t.Fatal("a refused request left a trade")
	}
	// Nothing was precreated: the honest request for the same number still works.
	b.precreate(t, "T_1", "100.00", b.clock.Now().Add(time.Hour), "")
}

func TestGateway_EnvelopeRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	sign := signWith(t, b)
	cases := []struct {
		name    string
		params  func() url.Values
		node    string
		code    string
		subCode string
	}{
		{"unknown app", func() url.Values {
			p := signedParams(t, b, "alipay.trade.query", `{"out_trade_no":"T_1"}`, sign)
			p.Set("app_id", "2021999999999999")
			return p
		}, "alipay_trade_query_response", "40002", "isv.invalid-app-id"},
		{"missing signature", func() url.Values {
			p := signedParams(t, b, "alipay.trade.query", `{"out_trade_no":"T_1"}`, sign)
			p.Del("sign")
			return p
		}, "alipay_trade_query_response", "40001", "isv.missing-signature"},
		{"unimplemented method", func() url.Values {
			// alipay.trade.pay was the example until barcode payments came; settle is not simulated.
			return signedParams(t, b, "alipay.trade.order.settle", `{}`, sign)
		}, "error_response", "40002", "isv.invalid-method"},
		{"sign_type is signed", func() url.Values {
			p := signedParams(t, b, "alipay.trade.query", `{"out_trade_no":"T_1"}`, sign)
			p.Set("sign_type", "RSA")
			return p
		}, "alipay_trade_query_response", "40002", "isv.invalid-signature-type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, got := rawCall(t, b, tc.params())
			if node != tc.node || got["code"] != tc.code || got["sub_code"] != tc.subCode {
				t.Fatalf("got %s %v, want %s %s/%s", node, got, tc.node, tc.code, tc.subCode)
			}
		})
	}
}

// The official SDKs send the system parameters in the URL query and the business ones in
// the body (§A1); the gateway verifies the union.
func TestGateway_ReadsParametersFromQueryAndBody(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	params := signedParams(t, b, "alipay.trade.query", `{"out_trade_no":"T_1"}`, signWith(t, b))
	body := url.Values{"biz_content": {params.Get("biz_content")}}
	params.Del("biz_content")
	resp, err := http.Post(b.gatewayURL()+"?"+params.Encode(), "application/x-www-form-urlencoded;charset=utf-8",
		strings.NewReader(body.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var top struct {
		Node map[string]any `json:"alipay_trade_query_response"`
		Sign string         `json:"sign"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if got := top.Node; got["sub_code"] != "ACQ.TRADE_NOT_EXIST" || top.Sign == "" {
		t.Fatalf("got %s, want the query to pass verification and find no trade", raw)
	}
}

func TestQuery_BeforeScanTradeNotExist_ThenWaitBuyerPay_ThenSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.precreate(t, "T_scan", "12.34", b.clock.Now().Add(30*time.Minute), "")

	if rsp := b.query(t, "T_scan"); rsp.Code != "40004" || rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("before scan: got %s/%s, want 40004/ACQ.TRADE_NOT_EXIST", rsp.Code, rsp.SubCode)
	}

	scanned, err := b.sim.Scan(context.Background(), qr)
	if err != nil {
		t.Fatal(err)
	}
	rsp := b.query(t, "T_scan")
	if rsp.Code != alipay.CodeSuccess || rsp.TradeStatus != alipay.TradeStatusWaitBuyerPay || rsp.TradeNo != scanned.TradeNo {
		t.Fatalf("after scan: got %+v", rsp)
	}

	b.clock.Advance(time.Minute)
	paid, err := b.sim.Pay(context.Background(), qr)
	if err != nil {
		t.Fatal(err)
	}
	rsp = b.query(t, "T_scan")
	if rsp.Code != alipay.CodeSuccess || rsp.TradeStatus != alipay.TradeStatusSuccess {
		t.Fatalf("after pay: got %+v", rsp)
	}
	if rsp.TradeNo != paid.TradeNo || !regexp.MustCompile(`^\d{28}$`).MatchString(rsp.TradeNo) {
		t.Errorf("trade_no %q (pay said %q)", rsp.TradeNo, paid.TradeNo)
	}
	if rsp.TotalAmount != "12.34" || rsp.BuyerPayAmount != "12.34" || rsp.ReceiptAmount != "12.34" {
		t.Errorf("amounts %s/%s/%s, want 12.34", rsp.TotalAmount, rsp.BuyerPayAmount, rsp.ReceiptAmount)
	}
	if want := b.clock.Now().In(cst).Format("2006-01-02 15:04:05"); rsp.SendPayDate != want {
		t.Errorf("send_pay_date %q, want %q", rsp.SendPayDate, want)
	}
	if rsp.BuyerUserId == "" || rsp.BuyerLogonId == "" {
		t.Errorf("buyer ids missing: %+v", rsp)
	}
	if paid.Amount != 1234 || paid.Status != sim.AlipayTradeSuccess {
		t.Errorf("pay result %+v", paid)
	}
}

func TestPrecreate_RepeatReturnsSameCode_OtherAmountOrPaidRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	deadline := b.clock.Now().Add(time.Hour)
	first := b.precreate(t, "T_rep", "5.00", deadline, "")
	if again := b.precreate(t, "T_rep", "5.00", deadline, ""); again != first {
		t.Fatalf("repeat precreate gave a new code %s, want %s", again, first)
	}

	call := func(amount string) *alipay.TradePreCreateRsp {
		rsp, err := b.client.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
			Subject: "x", OutTradeNo: "T_rep", TotalAmount: amount, ProductCode: "FACE_TO_FACE_PAYMENT",
			TimeExpire: deadline.In(cst).Format("2006-01-02 15:04:05"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return rsp
	}
	if rsp := call("6.00"); rsp.Code != "40004" || rsp.SubCode != "ACQ.CONTEXT_INCONSISTENT" || rsp.QRCode != "" {
		t.Fatalf("other amount: got %+v", rsp)
	}
	if _, err := b.sim.Pay(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if rsp := call("5.00"); rsp.Code != "40004" || rsp.SubCode != "ACQ.TRADE_HAS_SUCCESS" {
		t.Fatalf("after payment: got %+v", rsp)
	}
}

func TestPrecreate_InvalidBusinessParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	now := b.clock.Now().In(cst)
	cases := map[string]string{
		"dash in out_trade_no": `{"out_trade_no":"T-1","total_amount":"1.00","subject":"x"}`,
		"65 char out_trade_no": `{"out_trade_no":"` + strings.Repeat("a", 65) + `","total_amount":"1.00","subject":"x"}`,
		"zero amount":          `{"out_trade_no":"T_1","total_amount":"0.00","subject":"x"}`,
		"three decimals":       `{"out_trade_no":"T_1","total_amount":"1.001","subject":"x"}`,
		"above the maximum":    `{"out_trade_no":"T_1","total_amount":"100000000.01","subject":"x"}`,
		"negative amount":      `{"out_trade_no":"T_1","total_amount":"-1.00","subject":"x"}`,
		"exponent as number":   `{"out_trade_no":"T_1","total_amount":1e2,"subject":"x"}`,
		"empty subject":        `{"out_trade_no":"T_1","total_amount":"1.00","subject":""}`,
		"ampersand subject":    `{"out_trade_no":"T_1","total_amount":"1.00","subject":"a&b"}`,
		"slash subject":        `{"out_trade_no":"T_1","total_amount":"1.00","subject":"a/b"}`,
		"time_expire RFC3339":  `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x","time_expire":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`,
		"time_expire past":     `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x","time_expire":"` + now.Add(-time.Second).Format("2006-01-02 15:04:05") + `"}`,
		"timeout 1.5h":         `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x","timeout_express":"1.5h"}`,
		"timeout 16d":          `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x","timeout_express":"16d"}`,
		"timeout 0m":           `{"out_trade_no":"T_1","total_amount":"1.00","subject":"x","timeout_express":"0m"}`,
		"biz not JSON":         `{"out_trade_no":`,
	}
	for name, biz := range cases {
		t.Run(name, func(t *testing.T) {
			_, got := rawCall(t, b, signedParams(t, b, "alipay.trade.precreate", biz, signWith(t, b)))
			if got["code"] != "40004" || got["sub_code"] != "ACQ.INVALID_PARAMETER" {
				t.Fatalf("got %v, want 40004 ACQ.INVALID_PARAMETER", got)
			}
		})
	}
	// A JSON number amount is read from its literal text, never through a float.
	_, got := rawCall(t, b, signedParams(t, b, "alipay.trade.precreate",
		`{"out_trade_no":"T_num","total_amount":12.30,"subject":"x","timeout_express":"90m"}`, signWith(t, b)))
	if got["code"] != "10000" {
		t.Fatalf("numeric amount: got %v", got)
	}
}

func TestPay_AfterTimeExpireFailsAndCreatesNoTrade(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.precreate(t, "T_late", "9.99", b.clock.Now().Add(10*time.Minute), "http://127.0.0.1:1/notify")

	b.clock.Advance(10 * time.Minute)
	_, err := b.sim.Pay(context.Background(), qr)
	if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay at the deadline: err %v, want ECONFLICT", err)
	}
	if rsp := b.query(t, "T_late"); rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("query: got %+v, want ACQ.TRADE_NOT_EXIST", rsp)
	}
	if l := b.sim.Ledger(); len(l) != 0 {
		t.Fatalf("ledger %+v, want empty", l)
	}
	if st := b.sim.NotifyStats(); len(st) != 0 {
		t.Fatalf("notifications %+v, want none", st)
	}
}

func TestPay_ScannedTradePastTimeoutExpressIsClosedNotPaid(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	_, got := rawCall(t, b, signedParams(t, b, "alipay.trade.precreate",
		`{"out_trade_no":"T_close","total_amount":"3.00","subject":"x","timeout_express":"5m"}`, signWith(t, b)))
	qr, _ := got["qr_code"].(string)
	if _, err := b.sim.Scan(context.Background(), qr); err != nil {
		t.Fatal(err)
	}

	b.clock.Advance(5*time.Minute + time.Second)
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay after timeout_express: err %v, want ECONFLICT", err)
	}
	if rsp := b.query(t, "T_close"); rsp.TradeStatus != alipay.TradeStatusClosed || rsp.SendPayDate != "" {
		t.Fatalf("query: got %+v, want TRADE_CLOSED without payment", rsp)
	}
	l := b.sim.Ledger()
	if len(l) != 1 || l[0].Status != sim.AlipayTradeClosed || !l[0].PaidAt.IsZero() {
		t.Fatalf("ledger %+v", l)
	}
}

func TestPay_AfterQRLifetimeFailsEvenBeforeDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{QRLifetime: 2 * time.Hour})
	qr := b.precreate(t, "T_qr", "1.00", b.clock.Now().Add(3*time.Hour), "")
	b.clock.Advance(2 * time.Hour)
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("pay with an expired code: err %v, want ECONFLICT", err)
	}
	// A new precreate for the unscanned number issues a fresh code that works.
	fresh := b.precreate(t, "T_qr", "1.00", b.clock.Now().Add(time.Hour), "")
	if fresh == qr {
		t.Fatal("expired code reissued")
	}
	if _, err := b.sim.Pay(context.Background(), qr); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("old code after reissue: err %v, want ECONFLICT", err)
	}
	if _, err := b.sim.Pay(context.Background(), fresh); err != nil {
		t.Fatalf("fresh code: %v", err)
	}
}

func TestLedger_IsExact(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	deadline := b.clock.Now().Add(time.Hour)
	qrA := b.precreate(t, "L_A", "12.34", deadline, "")
	qrB := b.precreate(t, "L_B", "0.01", deadline, "")
	b.precreate(t, "L_C", "7.00", deadline, "") // never scanned: not a trade
	qrD := b.precreate(t, "L_D", "100000000", deadline, "")

	paidA, err := b.sim.Pay(context.Background(), qrA)
	if err != nil {
		t.Fatal(err)
	}
	paidAtA := b.clock.Now()
	b.clock.Advance(time.Second)
	scannedB, err := b.sim.Scan(context.Background(), qrB)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	paidD, err := b.sim.Pay(context.Background(), qrD)
	if err != nil {
		t.Fatal(err)
	}
	paidAtD := b.clock.Now()

	want := []sim.LedgerEntry{
		{Channel: "alipay", OutTradeNo: "L_A", TradeNo: paidA.TradeNo, Status: "TRADE_SUCCESS", Amount: 1234, PaidAt: paidAtA},
		{Channel: "alipay", OutTradeNo: "L_B", TradeNo: scannedB.TradeNo, Status: "WAIT_BUYER_PAY", Amount: 1},
		{Channel: "alipay", OutTradeNo: "L_D", TradeNo: paidD.TradeNo, Status: "TRADE_SUCCESS", Amount: 100_000_000_00, PaidAt: paidAtD},
	}
	got := b.sim.Ledger()
	if len(got) != len(want) {
		t.Fatalf("ledger has %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Channel != w.Channel || g.OutTradeNo != w.OutTradeNo || g.TradeNo != w.TradeNo || g.Status != w.Status ||
			g.Amount != w.Amount || g.Refunded != 0 || !g.PaidAt.Equal(w.PaidAt) {
			t.Errorf("entry %d\n got %+v\nwant %+v", i, g, w)
		}
	}

	// The HTTP view carries the same numbers as integers of fen.
	resp, err := http.Get(b.srv.URL + "/sim/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("GET /sim/ledger: %d rows", len(rows))
	}
	for _, key := range []string{"channel", "out_trade_no", "trade_no", "status", "amount", "refunded", "paid_at"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("row lacks %q", key)
		}
	}
	if string(rows[0]["amount"]) != "1234" || string(rows[2]["amount"]) != "10000000000" || string(rows[1]["refunded"]) != "0" {
		t.Errorf("amounts %s %s %s", rows[0]["amount"], rows[2]["amount"], rows[1]["refunded"])
	}
	if string(rows[1]["paid_at"]) != "null" {
		t.Errorf("unpaid paid_at = %s, want null", rows[1]["paid_at"])
	}
	var paidAt time.Time
	if err := json.Unmarshal(rows[0]["paid_at"], &paidAt); err != nil || !paidAt.Equal(paidAtA) {
		t.Errorf("paid_at %s, want %s", rows[0]["paid_at"], paidAtA)
	}
}

func TestWalletHTTP_StatusesAndErrorBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	qr := b.precreate(t, "W_1", "8.88", b.clock.Now().Add(time.Hour), "")
	expired := b.precreate(t, "W_2", "1.00", b.clock.Now().Add(time.Minute), "")

	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(b.srv.URL+"/sim/pay", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("status %d: undecodable body: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, out
	}
	errCode := func(out map[string]any) any {
		e, _ := out["error"].(map[string]any)
		return e["code"]
	}

	status, out := post(`{"qr_code":"` + qr + `"}`)
	if status != 200 || out["channel"] != "alipay" || out["out_trade_no"] != "W_1" || out["status"] != "TRADE_SUCCESS" ||
		out["amount"] != float64(888) || out["trade_no"] == "" {
		t.Fatalf("pay: %d %v", status, out)
	}
	if status, out = post(`{"qr_code":"` + qr + `"}`); status != 409 || errCode(out) != "ECONFLICT" {
		t.Fatalf("pay twice: %d %v", status, out)
	}
	if status, out = post(`{"qr_code":"https://qr.alipay.com/baxnosuchcode"}`); status != 404 || errCode(out) != "ENOTFOUND" {
		t.Fatalf("unknown code: %d %v", status, out)
	}
	b.clock.Advance(2 * time.Minute)
	if status, out = post(`{"qr_code":"` + expired + `"}`); status != 409 || errCode(out) != "ECONFLICT" {
		t.Fatalf("expired code: %d %v", status, out)
	}
	if status, out = post(`{"qr_code":`); status != 400 || errCode(out) != "EINVALID" {
		t.Fatalf("malformed JSON: %d %v", status, out)
	}

	resp, err := http.Get(b.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
}

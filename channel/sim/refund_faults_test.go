package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
)

func TestRefundFaults_ValidateKindsMethodsAndChannels(t *testing.T) {
	t.Parallel()
	hour := sim.Duration(time.Hour)
	for name, rule := range map[string]sim.FaultRule{
		"balance on a query":            {Method: sim.MethodQuery, Kind: sim.FaultBalance},
		"balance on a refund query":     {Method: sim.MethodRefundQuery, Kind: sim.FaultBalance},
		"slow on notifications":         {Method: sim.MethodNotify, Kind: sim.FaultSlow, Delay: hour},
		"balance applied":               {Method: sim.MethodRefund, Kind: sim.FaultBalance, Applied: true},
		"slow without a delay":          {Method: sim.MethodRefund, Kind: sim.FaultSlow},
		"abnormal on alipay":            {Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultAbnormal},
		"abnormal on both channels":     {Method: sim.MethodRefund, Kind: sim.FaultAbnormal},
		"closed on alipay":              {Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultClosed},
		"account_abnormal on both":      {Method: sim.MethodRefund, Kind: sim.FaultAccountAbnormal},
		"account_abnormal on a prepay":  {Channel: "wechat", Method: sim.MethodPrecreate, Kind: sim.FaultAccountAbnormal},
		"balance with a negative delay": {Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: sim.Duration(-time.Minute)},
	} {
		if err := (sim.FaultPlan{Rules: []sim.FaultRule{rule}}).Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, rule)
		}
	}
	ok := sim.FaultPlan{Seed: 3, Rules: []sim.FaultRule{
		{Method: sim.MethodRefund, Kind: sim.FaultBalance},
		{Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: hour, Limit: 1},
		{Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: hour, Probability: 0.5},
		{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultAbnormal},
		{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultClosed, Delay: hour},
		{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultAccountAbnormal},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The refund kinds go through PUT and GET /sim/faults like any other; a refund kind on the
// wrong channel is a 400 with a code, and leaves the plan in force.
func TestRefundFaults_PlanThroughHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	put := func(body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPut, b.srv.URL+"/sim/faults", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	status, got := put(`{"seed":9,"rules":[{"method":"refund","kind":"balance","delay":"30m","limit":1},
		{"channel":"wechat","method":"refund","kind":"abnormal"},{"method":"refund","kind":"slow","delay":"1h"},
		{"channel":"wechat","method":"refund","kind":"account_abnormal","probability":0.1}]}`)
	if status != http.StatusOK || len(got["rules"].([]any)) != 4 {
		t.Fatalf("PUT /sim/faults: %d %v", status, got)
	}
	f := b.sim.Faults()
	if f.Rules[0].Kind != sim.FaultBalance || time.Duration(f.Rules[0].Delay) != 30*time.Minute || f.Rules[2].Kind != sim.FaultSlow {
		t.Fatalf("plan in force: %+v", f)
	}
	status, got = put(`{"rules":[{"channel":"alipay","method":"refund","kind":"abnormal"}]}`)
	if e, _ := got["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != "EINVALID" || !strings.Contains(e["message"].(string), "wechat") {
		t.Fatalf("abnormal on alipay: %d %v", status, got)
	}
	if len(b.sim.Faults().Rules) != 4 {
		t.Fatal("a refused plan replaced the one in force")
	}
}

// postJSON posts body to the simulator's path and decodes the JSON answer.
func postJSON(t *testing.T, b *bundle, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(b.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("POST %s: %d %q is not a JSON object", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func TestTopUp_EndpointRefusesBadBodiesWithACode(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	for name, body := range map[string]string{
		"not JSON":        `channel=alipay`,
		"unknown channel": `{"channel":"paypal"}`,
		"no channel":      `{}`,
		"unknown field":   `{"channel":"alipay","amount":100}`,
		"too large":       `{"channel":"alipay","x":"` + strings.Repeat("a", 2048) + `"}`,
	} {
		status, got := postJSON(t, b, "/sim/topup", body)
		if e, _ := got["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != "EINVALID" || e["message"] == "" {
			t.Errorf("%s: %d %v, want 400 EINVALID", name, status, got)
		}
	}
	resp, err := http.Get(b.srv.URL + "/sim/topup")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /sim/topup: %d, want 405", resp.StatusCode)
	}
	if status, got := postJSON(t, b, "/sim/topup", `{"channel":"wechat"}`); status != http.StatusOK || got["channel"] != "wechat" || got["short"] != false {
		t.Fatalf("topping up an account that is not short: %d %v", status, got)
	}
	if err := b.sim.TopUp("paypal"); err == nil {
		t.Fatal("TopUp of an unknown channel succeeded")
	}
}

// accounts reads GET /sim/accounts.
func accounts(t *testing.T, b *bundle) map[string]map[string]any {
	t.Helper()
	resp, err := http.Get(b.srv.URL + "/sim/accounts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sim/accounts: %d %v", resp.StatusCode, err)
	}
	out := map[string]map[string]any{}
	for _, a := range list {
		out[a["channel"].(string)] = a
	}
	return out
}

func setRefundFaults(t *testing.T, s *sim.Simulator, rules ...sim.FaultRule) {
	t.Helper()
	if err := s.SetFaults(sim.FaultPlan{Seed: 1, Rules: rules}); err != nil {
		t.Fatal(err)
	}
}

// A balance fault makes the account short: this refund and every new one on the channel is
// refused, signed, and refunds nothing, until the merchant tops up; the same request under
// the same number then refunds once.
func TestAlipayRefund_BalanceShortUntilTopUp(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "BAL_A", "10.00")
	b.alipayPaid(t, "BAL_B", "10.00")
	setRefundFaults(t, b.sim, sim.FaultRule{Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1})

	// The SDK verified the refusal's signature, or alipayRefund would have failed.
	r := b.alipayRefund(t, "BAL_A", "BAL_A_1", "3.00")
	wantAlipayCode(t, "refund while short", r.Error, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH")
	if r.SubMsg != "卖家余额不足" {
		t.Fatalf("sub_msg %q", r.SubMsg)
	}
	wantAlipayCode(t, "another trade's refund while short", b.alipayRefund(t, "BAL_B", "BAL_B_1", "1.00").Error, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH")
	log := b.sim.FaultLog()
	if len(log) != 1 || log[0].Kind != sim.FaultBalance || log[0].Key != "BAL_A" || log[0].Method != sim.MethodRefund || log[0].Channel != "alipay" {
		t.Fatalf("fault log %+v, want the one balance fault keyed on BAL_A", log)
	}
	if !b.sim.Short("alipay") || b.sim.Short("wechat") {
		t.Fatalf("short: alipay %v, wechat %v", b.sim.Short("alipay"), b.sim.Short("wechat"))
	}
	if a := accounts(t, b)["alipay"]; a["short"] != true || a["short_since"] == nil || a["cures_at"] != nil {
		t.Fatalf("account while short: %v", a)
	}
	for _, no := range []string{"BAL_A", "BAL_B"} {
		if e := alipayEntry(t, b.sim, no); e.Refunded != 0 || e.Refunds != nil {
			t.Fatalf("a refused refund left %+v", e)
		}
	}
	if q := b.alipayRefundQuery(t, "BAL_A", "BAL_A_1"); q.RefundStatus != "" {
		t.Fatalf("refund query of the refused refund: %+v", q)
	}

	if status, got := postJSON(t, b, "/sim/topup", `{"channel":"alipay"}`); status != http.StatusOK || got["short"] != false {
		t.Fatalf("POST /sim/topup: %d %v", status, got)
	}
	if b.sim.Short("alipay") {
		t.Fatal("still short after the top-up")
	}
	for range 2 { // the resend after the cure, then a resend of that
		if r := b.alipayRefund(t, "BAL_A", "BAL_A_1", "3.00"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" || r.RefundFee != "3.00" {
			t.Fatalf("the same refund after the top-up: %+v", r)
		}
	}
	e := alipayEntry(t, b.sim, "BAL_A")
	if e.Refunded != 300 || len(e.Refunds) != 1 || e.Refunds[0] != (sim.LedgerRefund{OutRefundNo: "BAL_A_1", Amount: 300,
		Status: sim.LedgerRefundSuccess, SettledAt: b.clock.Now()}) {
		t.Fatalf("ledger after the top-up: %+v", e)
	}
}

func TestAlipayRefund_BalanceShortageEndsAfterItsDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "BD_1", "5.00")
	setRefundFaults(t, b.sim, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: sim.Duration(10 * time.Minute), Limit: 1})
	start := b.clock.Now()
	wantAlipayCode(t, "refund", b.alipayRefund(t, "BD_1", "BD_1_1", "5.00").Error, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH")
	if a := accounts(t, b)["alipay"]; a["cures_at"] != start.Add(10*time.Minute).Format(time.RFC3339Nano) {
		t.Fatalf("account %v, want cures_at %s", a, start.Add(10*time.Minute))
	}
	b.clock.Advance(10*time.Minute - time.Second)
	wantAlipayCode(t, "a second before the delay", b.alipayRefund(t, "BD_1", "BD_1_1", "5.00").Error, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH")
	b.clock.Advance(time.Second)
	if b.sim.Short("alipay") {
		t.Fatal("still short after the delay")
	}
	if r := b.alipayRefund(t, "BD_1", "BD_1_1", "5.00"); r.Code != alipay.CodeSuccess || r.FundChange != "Y" {
		t.Fatalf("refund after the delay: %+v", r)
	}
	if e := alipayEntry(t, b.sim, "BD_1"); e.Refunded != 500 || len(e.Refunds) != 1 {
		t.Fatalf("ledger %+v", e)
	}
}

// A slow refund is accepted and settles after the rule's delay, not the configured one.
func TestAlipayRefund_SlowSettlesAfterTheRulesDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "SL_1", "8.00")
	setRefundFaults(t, b.sim, sim.FaultRule{Channel: "alipay", Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(time.Hour), Limit: 1})
	start := b.clock.Now()
	if r := b.alipayRefund(t, "SL_1", "SL_1_1", "8.00"); r.Code != alipay.CodeSuccess || r.FundChange != "N" || r.RefundFee != "0.00" {
		t.Fatalf("slow refund: %+v, want accepted with fund_change=N", r)
	}
	// The rule fired once; an ordinary refund of the same trade settles at once beside it.
	b.clock.Advance(59 * time.Minute)
	if q := b.alipayRefundQuery(t, "SL_1", "SL_1_1"); q.Code != alipay.CodeSuccess || q.RefundStatus != "" {
		t.Fatalf("query before the delay: %+v, want no refund_status", q)
	}
	if e := alipayEntry(t, b.sim, "SL_1"); e.Refunded != 0 || len(e.Refunds) != 1 || e.Refunds[0].Status != sim.LedgerRefundProcessing ||
		!e.Refunds[0].SettledAt.IsZero() || e.Status != sim.AlipayTradeSuccess {
		t.Fatalf("ledger before the delay: %+v", e)
	}
	b.clock.Advance(time.Minute)
	if q := b.alipayRefundQuery(t, "SL_1", "SL_1_1"); q.RefundStatus != "REFUND_SUCCESS" || q.RefundAmount != "8.00" {
		t.Fatalf("query after the delay: %+v", q)
	}
	e := alipayEntry(t, b.sim, "SL_1")
	if e.Refunded != 800 || e.Refunds[0] != (sim.LedgerRefund{OutRefundNo: "SL_1_1", Amount: 800, Status: sim.LedgerRefundSuccess,
		SettledAt: start.Add(time.Hour)}) || e.Status != sim.AlipayTradeClosed {
		t.Fatalf("ledger after the delay: %+v", e)
	}
}

// WeChat's balance refusal is a 403 NOT_ENOUGH signed like every refusal of an
// authenticated request; a refund accepted before the shortage still answers as it stands.
func TestWechatRefund_BalanceShortUntilTopUp(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.paid(t, "WBAL_01", 1000)
	wxRefundOf(t, b.refund(t, "WBAL_01", "WBAL_01_R0", 100, 1000))
	setRefundFaults(t, b.sim, sim.FaultRule{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultBalance, Limit: 1})

	a := b.refund(t, "WBAL_01", "WBAL_01_R1", 400, 1000)
	wantWxError(t, "refund while short", a, http.StatusForbidden, "NOT_ENOUGH")
	if err := b.verifyAnswer(a); err != nil {
		t.Fatalf("the refusal does not verify: %v", err)
	}
	wantWxError(t, "the same again while short", b.refund(t, "WBAL_01", "WBAL_01_R1", 400, 1000), http.StatusForbidden, "NOT_ENOUGH")
	if v := wxRefundOf(t, b.refund(t, "WBAL_01", "WBAL_01_R0", 100, 1000)); v.Status != "SUCCESS" {
		t.Fatalf("resend of a refund accepted before the shortage: %+v", v)
	}
	wantWxError(t, "query of the refused refund", b.refundQuery(t, "WBAL_01_R1"), http.StatusNotFound, "RESOURCE_NOT_EXISTS")
	if e := wxEntry(t, b.sim, "WBAL_01"); e.Refunded != 100 || len(e.Refunds) != 1 {
		t.Fatalf("ledger while short: %+v", e)
	}
	if log := b.sim.FaultLog(); len(log) != 1 || log[0].Key != "WBAL_01" || log[0].Kind != sim.FaultBalance {
		t.Fatalf("fault log %+v", log)
	}
	if !b.sim.Short("wechat") || b.sim.Short("alipay") {
		t.Fatal("only the WeChat account is short")
	}

	if err := b.sim.TopUp("wechat"); err != nil {
		t.Fatal(err)
	}
	if v := wxRefundOf(t, b.refund(t, "WBAL_01", "WBAL_01_R1", 400, 1000)); v.Status != "SUCCESS" || v.Amount.Refund != 400 {
		t.Fatalf("the same refund after the top-up: %+v", v)
	}
	e := wxEntry(t, b.sim, "WBAL_01")
	if e.Refunded != 500 || len(e.Refunds) != 2 || e.Refunds[1].OutRefundNo != "WBAL_01_R1" || e.Refunds[1].Amount != 400 ||
		e.Refunds[1].Status != sim.LedgerRefundSuccess {
		t.Fatalf("ledger after the top-up: %+v", e)
	}
}

func TestWechatRefund_BalanceShortageEndsAfterItsDelay(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.paid(t, "WBD_001", 600)
	setRefundFaults(t, b.sim, sim.FaultRule{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultBalance, Delay: sim.Duration(time.Hour), Limit: 1})
	wantWxError(t, "refund", b.refund(t, "WBD_001", "WBD_001_R1", 600, 600), http.StatusForbidden, "NOT_ENOUGH")
	b.clock.Advance(time.Hour - time.Second)
	wantWxError(t, "before the delay", b.refund(t, "WBD_001", "WBD_001_R1", 600, 600), http.StatusForbidden, "NOT_ENOUGH")
	b.clock.Advance(time.Second)
	if v := wxRefundOf(t, b.refund(t, "WBD_001", "WBD_001_R1", 600, 600)); v.Status != "SUCCESS" {
		t.Fatalf("after the delay: %+v", v)
	}
}

func TestWechatRefund_AccountAbnormalRefusesAndRefundsNothing(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.paid(t, "WUA_001", 500)
	setRefundFaults(t, b.sim, sim.FaultRule{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultAccountAbnormal, Limit: 1})
	wantWxError(t, "refund", b.refund(t, "WUA_001", "WUA_001_R1", 500, 500), http.StatusForbidden, "USER_ACCOUNT_ABNORMAL")
	if e := wxEntry(t, b.sim, "WUA_001"); e.Refunded != 0 || e.Refunds != nil {
		t.Fatalf("ledger %+v", e)
	}
	if b.sim.Short("wechat") {
		t.Fatal("the buyer's account made the merchant's short")
	}
}

// An abnormal or closed fault lets the refund be accepted, PROCESSING, and end so when it
// settles: nothing moves, and the amount can be refunded again under another number.
func TestWechatRefund_AbnormalAndClosedFaultsEndTheRefundWithoutMoney(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kind, status string }{
		{sim.FaultAbnormal, sim.WechatRefundAbnormal},
		{sim.FaultClosed, sim.WechatRefundClosed},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			b := wxSetup(t, sim.Config{})
			b.paid(t, "WAB_001", 900)
			setRefundFaults(t, b.sim, sim.FaultRule{Channel: "wechat", Method: sim.MethodRefund, Kind: tc.kind, Delay: sim.Duration(5 * time.Minute), Limit: 1})
			if v := wxRefundOf(t, b.refund(t, "WAB_001", "WAB_001_R1", 900, 900)); v.Status != "PROCESSING" {
				t.Fatalf("create: %+v, want PROCESSING", v)
			}
			if e := wxEntry(t, b.sim, "WAB_001"); len(e.Refunds) != 1 || e.Refunds[0].Status != sim.LedgerRefundProcessing {
				t.Fatalf("ledger before it ends: %+v", e)
			}
			b.clock.Advance(5 * time.Minute)
			if v := wxRefundOf(t, b.refundQuery(t, "WAB_001_R1")); v.Status != tc.status || v.SuccessTime != "" {
				t.Fatalf("query after it ends: %+v, want %s", v, tc.status)
			}
			e := wxEntry(t, b.sim, "WAB_001")
			if e.Refunded != 0 || e.Status != sim.WechatSuccess || len(e.Refunds) != 1 ||
				e.Refunds[0] != (sim.LedgerRefund{OutRefundNo: "WAB_001_R1", Amount: 900, Status: tc.status}) {
				t.Fatalf("ledger after it ends: %+v", e)
			}
			// The money never left: the whole amount can go back under another number.
			if v := wxRefundOf(t, b.refund(t, "WAB_001", "WAB_001_R2", 900, 900)); v.Status != "SUCCESS" {
				t.Fatalf("refund under another number: %+v", v)
			}
			if e := wxEntry(t, b.sim, "WAB_001"); e.Refunded != 900 || len(e.Refunds) != 2 || e.Status != sim.WechatRefund {
				t.Fatalf("ledger after the second refund: %+v", e)
			}
		})
	}
}

func TestWechatRefund_SlowIsProcessingUntilTheRulesDelay(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{RefundDelay: time.Minute})
	b.paid(t, "WSL_001", 700)
	setRefundFaults(t, b.sim, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(2 * time.Hour), Limit: 1})
	start := b.clock.Now()
	if v := wxRefundOf(t, b.refund(t, "WSL_001", "WSL_001_R1", 300, 700)); v.Status != "PROCESSING" {
		t.Fatalf("create: %+v", v)
	}
	b.clock.Advance(time.Hour) // far past Config.RefundDelay
	if v := wxRefundOf(t, b.refundQuery(t, "WSL_001_R1")); v.Status != "PROCESSING" {
		t.Fatalf("query after the configured delay: %+v, want PROCESSING", v)
	}
	b.clock.Advance(time.Hour)
	if v := wxRefundOf(t, b.refundQuery(t, "WSL_001_R1")); v.Status != "SUCCESS" {
		t.Fatalf("query after the rule's delay: %+v", v)
	}
	if e := wxEntry(t, b.sim, "WSL_001"); e.Refunded != 300 || e.Refunds[0].SettledAt != start.Add(2*time.Hour) {
		t.Fatalf("ledger %+v", e)
	}
}

// GET /sim/ledger lists each trade's refunds, with settled_at only for SUCCESS, and [] for a
// trade without any; the existing fields are unchanged.
func TestLedger_HTTPListsEveryRefund(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.alipayPaid(t, "LR_A", "10.00")
	b.alipayPaid(t, "LR_none", "1.00")
	b.paid(t, "LR_W001", 1000)
	if r := b.alipayRefund(t, "LR_A", "LR_A_1", "2.00"); r.FundChange != "Y" {
		t.Fatalf("refund %+v", r)
	}
	setRefundFaults(t, b.sim, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultSlow, Delay: sim.Duration(time.Hour), Limit: 1},
		sim.FaultRule{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultAbnormal})
	if r := b.alipayRefund(t, "LR_A", "LR_A_2", "3.00"); r.FundChange != "N" {
		t.Fatalf("slow refund %+v", r)
	}
	if v := wxRefundOf(t, b.refund(t, "LR_W001", "LR_W001_R1", 400, 1000)); v.Status != "ABNORMAL" {
		t.Fatalf("abnormal refund %+v", v)
	}

	resp, err := http.Get(b.srv.URL + "/sim/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []struct {
		OutTradeNo string  `json:"out_trade_no"`
		Refunded   int64   `json:"refunded"`
		PaidAt     *string `json:"paid_at"`
		Refunds    []struct {
			OutRefundNo string  `json:"out_refund_no"`
			Amount      int64   `json:"amount"`
			Status      string  `json:"status"`
			SettledAt   *string `json:"settled_at"`
		} `json:"refunds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		t.Fatal(err)
	}
	byNo := map[string]int{}
	for i, r := range rows {
		byNo[r.OutTradeNo] = i
	}
	a := rows[byNo["LR_A"]]
	if a.Refunded != 200 || a.PaidAt == nil || len(a.Refunds) != 2 ||
		a.Refunds[0].OutRefundNo != "LR_A_1" || a.Refunds[0].Amount != 200 || a.Refunds[0].Status != "SUCCESS" || a.Refunds[0].SettledAt == nil ||
		a.Refunds[1].OutRefundNo != "LR_A_2" || a.Refunds[1].Status != "PROCESSING" || a.Refunds[1].SettledAt != nil {
		t.Fatalf("alipay row %+v", a)
	}
	if none := rows[byNo["LR_none"]]; none.Refunds == nil || len(none.Refunds) != 0 {
		t.Fatalf("a trade without refunds: %+v, want refunds []", none)
	}
	w := rows[byNo["LR_W001"]]
	if w.Refunded != 0 || len(w.Refunds) != 1 || w.Refunds[0].Status != "ABNORMAL" || w.Refunds[0].Amount != 400 || w.Refunds[0].SettledAt != nil {
		t.Fatalf("wechat row %+v", w)
	}
}

// The full refund alipay.trade.cancel makes of a paid trade is in the ledger too, under the
// out_trade_no; refund faults do not touch it.
func TestLedger_AlipayCancelRefundIsListed(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.alipayPaid(t, "LC_1", "4.00")
	setRefundFaults(t, b.sim, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultBalance})
	if r := b.alipayCancel(t, "LC_1"); r.Action != "refund" {
		t.Fatalf("cancel %+v", r)
	}
	if e := alipayEntry(t, b.sim, "LC_1"); e.Refunded != 400 || len(e.Refunds) != 1 || e.Refunds[0].OutRefundNo != "LC_1" || e.Refunds[0].Status != sim.LedgerRefundSuccess {
		t.Fatalf("ledger %+v", e)
	}
	if b.sim.Short("alipay") || len(b.sim.FaultLog()) != 0 {
		t.Fatal("the cancel's refund met a refund fault")
	}
}

package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// wxLedgerRow is a LedgerEntry without its unexported parts, for comparison.
type wxLedgerRow struct {
	Channel, OutTradeNo, TradeNo, Status string
	Amount, Refunded                     int64
	PaidAt                               time.Time
}

func wxLedgerRows(entries []sim.LedgerEntry) []wxLedgerRow {
	out := make([]wxLedgerRow, len(entries))
	for i, e := range entries {
		out[i] = wxLedgerRow{e.Channel, e.OutTradeNo, e.TradeNo, e.Status, e.Amount, e.Refunded, e.PaidAt}
	}
	return out
}

func TestLedger_BothChannelsInCreationOrderWithEveryWechatOrder(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	ctx := context.Background()
	b.prepay(t, "LED_W1", 100, b.clock.Now().Add(time.Hour), "")                // 1: exists from prepay on
	aliQR := b.precreate(t, "LED_A1", "2.00", b.clock.Now().Add(time.Hour), "") // not a trade until scanned
	b.clock.Advance(time.Minute)
	w2 := b.paid(t, "LED_W2", 300) // 2
	paidAt := b.clock.Now()
	if _, err := b.sim.Scan(ctx, aliQR); err != nil { // 3: the Alipay trade now exists
		t.Fatal(err)
	}
	b.prepay(t, "LED_W3", 400, b.clock.Now().Add(time.Hour), "") // 4
	if c := b.close(t, "LED_W3"); c.status != http.StatusNoContent {
		t.Fatal(c)
	}
	wxRefundOf(t, b.refund(t, "LED_W2", "LED_W2_R1", 100, 300))
	paid, _ := b.sim.Pay(ctx, w2) // already paid: refused, changes nothing
	if paid != nil {
		t.Fatalf("paid twice: %+v", paid)
	}

	got := wxLedgerRows(b.sim.Ledger())
	aliTradeNo, w2TxnID := "", ""
	for _, r := range got {
		switch r.OutTradeNo {
		case "LED_A1":
			aliTradeNo = r.TradeNo
		case "LED_W2":
			w2TxnID = r.TradeNo
		}
	}
	want := []wxLedgerRow{
		{"wechat", "LED_W1", "", "NOTPAY", 100, 0, time.Time{}},
		{"wechat", "LED_W2", w2TxnID, "SUCCESS", 300, 100, paidAt},
		{"alipay", "LED_A1", aliTradeNo, "WAIT_BUYER_PAY", 200, 0, time.Time{}},
		{"wechat", "LED_W3", "", "CLOSED", 400, 0, time.Time{}},
	}
	if len(got) != len(want) || w2TxnID == "" || aliTradeNo == "" {
		t.Fatalf("ledger %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Channel != want[i].Channel || got[i].OutTradeNo != want[i].OutTradeNo || got[i].TradeNo != want[i].TradeNo ||
			got[i].Status != want[i].Status || got[i].Amount != want[i].Amount || got[i].Refunded != want[i].Refunded ||
			!got[i].PaidAt.Equal(want[i].PaidAt) {
			t.Errorf("ledger[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}

	// GET /sim/ledger says the same, with null paid_at for unpaid orders.
	resp, err := http.Get(b.srv.URL + "/sim/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 4 || listed[0]["channel"] != "wechat" || listed[0]["paid_at"] != nil || listed[0]["status"] != "NOTPAY" ||
		listed[1]["refunded"] != float64(100) || listed[1]["paid_at"] == nil || listed[3]["status"] != "CLOSED" {
		t.Fatalf("GET /sim/ledger: %v", listed)
	}
}

func TestWalletHTTP_ChannelAndActionForBothChannels(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wx := b.prepay(t, "WAL_001", 888, b.clock.Now().Add(time.Hour), "")
	ali := b.precreate(t, "WAL_A1", "1.00", b.clock.Now().Add(time.Hour), "")
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(b.srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}
	errCode := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(string)
		return c
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		check            func(m map[string]any) bool
	}{
		{"scan through /sim/scan", "/sim/scan", `{"qr_code":"` + wx + `"}`, 200,
			func(m map[string]any) bool {
				return m["status"] == "NOTPAY" && m["channel"] == "wechat" && m["trade_no"] == ""
			}},
		{"decline", "/sim/pay", `{"qr_code":"` + wx + `","action":"decline"}`, 200,
			func(m map[string]any) bool { return m["status"] == "NOTPAY" }},
		{"scan through /sim/pay", "/sim/pay", `{"qr_code":"` + wx + `","channel":"wechat","action":"scan"}`, 200,
			func(m map[string]any) bool { return m["status"] == "NOTPAY" }},
		{"the other channel named", "/sim/pay", `{"qr_code":"` + wx + `","channel":"alipay"}`, 400,
			func(m map[string]any) bool { return errCode(m) == "EINVALID" }},
		{"an unknown channel", "/sim/pay", `{"qr_code":"` + wx + `","channel":"paypal"}`, 400,
			func(m map[string]any) bool { return errCode(m) == "EINVALID" }},
		{"an unknown action", "/sim/pay", `{"qr_code":"` + wx + `","action":"steal"}`, 400,
			func(m map[string]any) bool { return errCode(m) == "EINVALID" }},
		{"paying through /sim/scan", "/sim/scan", `{"qr_code":"` + wx + `","action":"pay"}`, 400,
			func(m map[string]any) bool { return errCode(m) == "EINVALID" }},
		{"pay", "/sim/pay", `{"qr_code":"` + wx + `"}`, 200,
			func(m map[string]any) bool {
				return m["status"] == "SUCCESS" && m["out_trade_no"] == "WAL_001" && m["amount"] == float64(888) && m["trade_no"] != ""
			}},
		{"pay twice", "/sim/pay", `{"qr_code":"` + wx + `","channel":"wechat"}`, 409,
			func(m map[string]any) bool { return errCode(m) == "ECONFLICT" }},
		{"an unknown WeChat code", "/sim/pay", `{"qr_code":"weixin://wxpay/bizpayurl?pr=nosuch"}`, 404,
			func(m map[string]any) bool { return errCode(m) == "ENOTFOUND" }},
		{"Alipay decline leaves the trade waiting", "/sim/pay", `{"qr_code":"` + ali + `","action":"decline"}`, 200,
			func(m map[string]any) bool { return m["status"] == "WAIT_BUYER_PAY" && m["channel"] == "alipay" }},
	} {
		status, m := post(tc.path, tc.body)
		if status != tc.status || !tc.check(m) {
			t.Errorf("%s: %d %v", tc.name, status, m)
		}
	}
	if s := b.tradeState(t, "WAL_001"); s != "SUCCESS" {
		t.Fatalf("trade_state %s", s)
	}
}

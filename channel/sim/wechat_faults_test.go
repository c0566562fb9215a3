package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// wxFaultCase is one WeChat endpoint under faults: how to set up the order it acts on, the
// call, and what the ledger shows when the call took effect and when it did not.
type wxFaultCase struct {
	method  string
	arrange func(t *testing.T, b *wxBundle) string // returns the order's code_url, if any
	call    func(b *wxBundle) wxRequest
	// effect checks the ledger (and wallet) after the faulty call.
	effect func(t *testing.T, b *wxBundle, code string, applied bool)
}

var wxFaultCases = []wxFaultCase{
	{
		method:  sim.MethodPrecreate,
		arrange: func(*testing.T, *wxBundle) string { return "" },
		call: func(b *wxBundle) wxRequest {
			return wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/native",
				body: b.prepayBody("FLT_001", 700, b.clock.Now().Add(time.Hour), "")}
		},
		effect: func(t *testing.T, b *wxBundle, _ string, applied bool) {
			if got := len(b.sim.Ledger()); got != map[bool]int{true: 1, false: 0}[applied] {
				t.Fatalf("ledger has %d orders after a faulty prepay (applied=%v)", got, applied)
			}
		},
	},
	{
		method: sim.MethodClose,
		arrange: func(t *testing.T, b *wxBundle) string {
			return b.prepay(t, "FLT_001", 700, b.clock.Now().Add(time.Hour), "")
		},
		call: func(b *wxBundle) wxRequest {
			return wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/out-trade-no/FLT_001/close", body: `{"mchid":"` + b.wk.MchID + `"}`}
		},
		effect: func(t *testing.T, b *wxBundle, code string, applied bool) {
			want := map[bool]string{true: "CLOSED", false: "NOTPAY"}[applied]
			if e := wxEntry(t, b.sim, "FLT_001"); e.Status != want {
				t.Fatalf("after a faulty close (applied=%v): %s, want %s", applied, e.Status, want)
			}
			_, err := b.sim.Pay(context.Background(), code)
			if applied != (orderpay.ErrorCode(err) == orderpay.ECONFLICT) {
				t.Fatalf("paying after a faulty close (applied=%v): %v", applied, err)
			}
		},
	},
	{
		method:  sim.MethodRefund,
		arrange: func(t *testing.T, b *wxBundle) string { return b.paid(t, "FLT_001", 700) },
		call: func(*wxBundle) wxRequest {
			return wxRequest{method: http.MethodPost, uri: "/v3/refund/domestic/refunds", body: wxRefundBody("FLT_001", "FLT_001_R1", 300, 700)}
		},
		effect: func(t *testing.T, b *wxBundle, _ string, applied bool) {
			want := map[bool]int64{true: 300, false: 0}[applied]
			if e := wxEntry(t, b.sim, "FLT_001"); e.Refunded != want {
				t.Fatalf("after a faulty refund (applied=%v): refunded %d, want %d", applied, e.Refunded, want)
			}
			// Resending the same refund is always safe: exactly one refund in the end.
			if v := wxRefundOf(t, b.refund(t, "FLT_001", "FLT_001_R1", 300, 700)); v.Status != "SUCCESS" {
				t.Fatalf("resent refund: %+v", v)
			}
			if e := wxEntry(t, b.sim, "FLT_001"); e.Refunded != 300 {
				t.Fatalf("after resending: refunded %d, want 300", e.Refunded)
			}
		},
	},
	{
		method:  sim.MethodQuery,
		arrange: func(t *testing.T, b *wxBundle) string { return b.paid(t, "FLT_001", 700) },
		call: func(b *wxBundle) wxRequest {
			return wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/FLT_001?mchid=" + b.wk.MchID}
		},
		effect: func(*testing.T, *wxBundle, string, bool) {},
	},
	{
		method: sim.MethodRefundQuery,
		arrange: func(t *testing.T, b *wxBundle) string {
			code := b.paid(t, "FLT_001", 700)
			wxRefundOf(t, b.refund(t, "FLT_001", "FLT_001_R1", 300, 700))
			return code
		},
		call: func(*wxBundle) wxRequest {
			return wxRequest{method: http.MethodGet, uri: "/v3/refund/domestic/refunds/FLT_001_R1"}
		},
		effect: func(*testing.T, *wxBundle, string, bool) {},
	},
	{
		method:  sim.MethodBill,
		arrange: func(*testing.T, *wxBundle) string { return "" },
		call: func(*wxBundle) wxRequest {
			return wxRequest{method: http.MethodGet, uri: "/v3/bill/tradebill?bill_date=2025-03-13"}
		},
		effect: func(*testing.T, *wxBundle, string, bool) {},
	},
}

func TestWechatFaults_EveryKindOnEveryEndpointAnswersAndTakesEffectAsTheRuleSays(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		kind    string
		applied []bool
	}{
		{sim.FaultTimeout, []bool{false, true}},
		{sim.FaultHTTP500, []bool{false, true}},
		{sim.FaultSystemError, []bool{false, true}},
		{sim.FaultUnknownError, []bool{false, true}},
		{sim.FaultUnsigned, []bool{false, true}},
		{sim.FaultBadSignature, []bool{false, true}},
		{sim.FaultRateLimited, []bool{false}},
	}
	for _, fc := range wxFaultCases {
		for _, k := range kinds {
			for _, applied := range k.applied {
				t.Run(fmt.Sprintf("%s/%s/applied=%v", fc.method, k.kind, applied), func(t *testing.T) {
					t.Parallel()
					wxFault(t, fc, k.kind, applied)
				})
			}
		}
	}
}

func wxFault(t *testing.T, fc wxFaultCase, kind string, applied bool) {
	b := wxSetup(t, sim.Config{})
	code := fc.arrange(t, b)
	if err := b.sim.SetFaults(sim.FaultPlan{Seed: 9, Rules: []sim.FaultRule{
		{Channel: "wechat", Method: fc.method, Kind: kind, Applied: applied, Limit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	// Only the timeout needs a client that gives up soon; the others must see the answer
	// even when making it takes a while (a forged signature needs a key made on first use).
	client := &http.Client{Timeout: 10 * time.Second}
	if kind == sim.FaultTimeout {
		client.Timeout = 300 * time.Millisecond
	}
	a, err := b.try(t, fc.call(b), client)
	if fired := b.sim.Faults().Fired[0]; fired != 1 {
		t.Fatalf("the rule fired %d times, want 1", fired)
	}
	switch kind {
	case sim.FaultTimeout:
		var ne interface{ Timeout() bool }
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("timeout fault: %s %v, want the client's own timeout", a, err)
		}
	case sim.FaultHTTP500, sim.FaultSystemError, sim.FaultUnknownError:
		wantWxError(t, kind, a, http.StatusInternalServerError, "SYSTEM_ERROR")
	case sim.FaultRateLimited:
		wantWxError(t, kind, a, http.StatusTooManyRequests, "FREQUENCY_LIMITED")
	case sim.FaultUnsigned, sim.FaultBadSignature:
		if err != nil || a.status < 200 || a.status > 299 {
			t.Fatalf("%s: %s %v, want a 2xx", kind, a, err)
		}
		sigErr := b.verifyAnswer(a)
		if kind == sim.FaultUnsigned && (a.header.Get("Wechatpay-Signature") != "" || a.header.Get("Wechatpay-Timestamp") != "") {
			t.Fatalf("unsigned fault carries signature headers: %v", a.header)
		}
		if sigErr == nil {
			t.Fatalf("%s answer verifies", kind)
		}
		if fc.method == sim.MethodPrecreate {
			var pre struct {
				CodeURL string `json:"code_url"`
			}
			_ = json.Unmarshal(a.body, &pre)
			// Applied, the code is real; not applied, a forger made it up.
			_, payErr := b.sim.Pay(context.Background(), pre.CodeURL)
			if applied != (payErr == nil) {
				t.Fatalf("paying the code of a %s prepay (applied=%v): %v", kind, applied, payErr)
			}
			if applied {
				return // the payment changed what the effect check looks at
			}
		}
	}
	if err := b.sim.SetFaults(sim.FaultPlan{}); err != nil {
		t.Fatal(err)
	}
	fc.effect(t, b, code, applied)
}

// Faults are drawn per channel: a rule for WeChat leaves Alipay alone.
func TestWechatFaults_RuleForWechatDoesNotTouchAlipay(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{Faults: sim.FaultPlan{Rules: []sim.FaultRule{
		{Channel: "wechat", Method: sim.MethodQuery, Kind: sim.FaultSystemError},
	}}})
	b.precreate(t, "ALI_1", "1.00", b.clock.Now().Add(time.Hour), "")
	if rsp := b.bundle.query(t, "ALI_1"); rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Fatalf("alipay query under a wechat rule: %+v", rsp)
	}
	wantWxError(t, "wechat query", b.wxQuery(t, "ANY_001"), 500, "SYSTEM_ERROR")
}

// wxQuery is query for an order that may not exist.
func (b *wxBundle) wxQuery(t *testing.T, outTradeNo string) wxAnswer {
	t.Helper()
	return b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/" + outTradeNo + "?mchid=" + b.wk.MchID})
}

// Refund calls are keyed on their order's out_trade_no, like every call about that order
// (and like Alipay's): with a seeded probability, the faults met by queries of two refund
// numbers of one order, interleaved, are exactly those met by as many queries of one of
// them. Keyed on the refund number, the interleaved queries would replay each number's
// own sequence from its start.
func TestWechatFaults_RefundCallsAreKeyedOnTheOutTradeNo(t *testing.T) {
	t.Parallel()
	pattern := func(numbers []string) []bool {
		b := wxSetup(t, sim.Config{})
		b.paid(t, "KEY_0001", 1000)
		wxRefundOf(t, b.refund(t, "KEY_0001", "KEY_0001_R1", 100, 1000))
		wxRefundOf(t, b.refund(t, "KEY_0001", "KEY_0001_R2", 100, 1000))
		if err := b.sim.SetFaults(sim.FaultPlan{Seed: 11, Rules: []sim.FaultRule{
			{Channel: "wechat", Method: sim.MethodRefundQuery, Kind: sim.FaultSystemError, Probability: 0.5},
		}}); err != nil {
			t.Fatal(err)
		}
		var out []bool
		for _, no := range numbers {
			out = append(out, b.call(t, http.MethodGet, "/v3/refund/domestic/refunds/"+no, "").status == 500)
		}
		return out
	}
	var one, both []string
	for i := range 16 {
		one = append(one, "KEY_0001_R1")
		both = append(both, []string{"KEY_0001_R1", "KEY_0001_R2"}[i%2])
	}
	p1, p2 := pattern(one), pattern(both)
	if fmt.Sprint(p1) != fmt.Sprint(p2) {
		t.Fatalf("faults for one refund number %v, for two of the same order %v: not keyed on the order", p1, p2)
	}
	fired := 0
	for _, f := range p1 {
		if f {
			fired++
		}
	}
	if fired == 0 || fired == len(p1) {
		t.Fatalf("pattern %v does not tell keys apart", p1)
	}
}

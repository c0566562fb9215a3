package chaos

import (
	"testing"
	"time"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

func simEvent(method, kind string) sim.FaultEvent { return sim.FaultEvent{Method: method, Kind: kind} }

func testKeys(t *testing.T) *sim.Keys {
	keys, _ := simtest.Keys(t)
	return keys
}

// Four orders paid at the channel: A untouched, B whose notification was lost and query
// timed out, C the server was killed under, D never PAID (refunded). Each lands in its
// classes (the crash also falls between B's payment and PAID, and before D's end), and a
// fault after PAID does not count. By way to pay, each order counts under its first paid
// trade's: B's second attempt, by WeChat's QR code and paid later, does not move it.
func TestConvergenceByClass(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	wap, h5, qr := PayWay{"alipay", "wap"}, PayWay{"wechat", "h5"}, PayWay{"wechat", "qr"}
	trades := []tradeRow{
		{"PA01", "A", at(20), wap},
		{"PB01", "B", at(4000), h5},
		{"PB02", "B", at(4000), qr},
		{"PC01", "C", at(900), wap},
		{"PD01", "D", time.Time{}, h5},
	}
	ledger := []sim.LedgerEntry{
		{OutTradeNo: "PA01", PaidAt: at(0)},
		{OutTradeNo: "PB01", PaidAt: at(0).Truncate(time.Second)}, // WeChat: whole seconds
		{OutTradeNo: "PB02", PaidAt: at(3000)},                    // a second payment, refunded
		{OutTradeNo: "PC01", PaidAt: at(100)},
		{OutTradeNo: "PD01", PaidAt: at(100)},
		{OutTradeNo: "PX01"}, // never paid
	}
	wallet := map[string]time.Time{"PB01": at(0)}
	notify := []sim.NotifyStats{{OutTradeNo: "PB01", NotifyID: "nB"}, {OutTradeNo: "PA01", NotifyID: "nA"}}
	faults := []sim.FaultEvent{
		{Method: sim.MethodNotify, Kind: sim.FaultDrop, Key: "nB", At: at(1)},
		{Method: sim.MethodQuery, Kind: sim.FaultTimeout, Key: "PB01", At: at(2)},
		{Method: sim.MethodNotify, Kind: sim.FaultDuplicate, Key: "nA", At: at(500)}, // after A was PAID
	}
	crashes := []crashWindow{{From: at(300), To: at(320)}}
	got, byMethod := convergence(trades, ledger, wallet, faults, notify, crashes)
	want := map[string]ClassConvergence{
		ClassAll:         {Latency: Latency{Count: 3, P50: 800, P99: 4000, Max: 4000}, NotPaid: 1},
		ClassNone:        {Latency: Latency{Count: 1, P50: 20, P99: 20, Max: 20}},
		FaultNotifyDrop:  {Latency: Latency{Count: 1, P50: 4000, P99: 4000, Max: 4000}},
		FaultCallTimeout: {Latency: Latency{Count: 1, P50: 4000, P99: 4000, Max: 4000}},
		ClassCrash:       {Latency: Latency{Count: 2, P50: 800, P99: 4000, Max: 4000}, NotPaid: 1}, // B and C; D never PAID
	}
	if len(got) != len(want) {
		t.Fatalf("classes %v, want %v", got, want)
	}
	for c, w := range want {
		if got[c] != w {
			t.Errorf("%s: %+v, want %+v", c, got[c], w)
		}
	}
	wantMethod := map[string]MethodConvergence{
		"alipay:wap": {Latency: Latency{Count: 2, P50: 20, P99: 800, Max: 800}},
		"wechat:h5":  {Latency: Latency{Count: 1, P50: 4000, P99: 4000, Max: 4000}, NotPaid: 1, Faulted: 1},
	}
	if len(byMethod) != len(wantMethod) {
		t.Fatalf("by method %v, want %v", byMethod, wantMethod)
	}
	for w, want := range wantMethod {
		if byMethod[w] != want {
			t.Errorf("%s: %+v, want %+v", w, byMethod[w], want)
		}
	}
}

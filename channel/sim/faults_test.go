package sim_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
)

func TestFaultPlan_ValidateRefusesNonsense(t *testing.T) {
	t.Parallel()
	for name, rule := range map[string]sim.FaultRule{
		"unknown method":          {Method: "teleport", Kind: sim.FaultTimeout},
		"call kind on notify":     {Method: sim.MethodNotify, Kind: sim.FaultTimeout},
		"notify kind on a call":   {Method: sim.MethodQuery, Kind: sim.FaultDrop},
		"unknown channel":         {Channel: "paypal", Method: sim.MethodQuery, Kind: sim.FaultTimeout},
		"probability above one":   {Method: sim.MethodQuery, Kind: sim.FaultTimeout, Probability: 1.5},
		"negative probability":    {Method: sim.MethodQuery, Kind: sim.FaultTimeout, Probability: -0.1},
		"delay without a delay":   {Method: sim.MethodNotify, Kind: sim.FaultDelay},
		"applied rate limit":      {Method: sim.MethodQuery, Kind: sim.FaultRateLimited, Applied: true},
		"wechat cancel":           {Channel: "wechat", Method: sim.MethodCancel, Kind: sim.FaultTimeout},
		"negative limit":          {Method: sim.MethodQuery, Kind: sim.FaultTimeout, Limit: -1},
		"negative timeout delay":  {Method: sim.MethodQuery, Kind: sim.FaultTimeout, Delay: sim.Duration(-time.Second)},
		"empty kind for a method": {Method: sim.MethodRefund},
	} {
		if err := (sim.FaultPlan{Rules: []sim.FaultRule{rule}}).Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, rule)
		}
	}
	ok := sim.FaultPlan{Seed: 7, Rules: []sim.FaultRule{
		{Method: sim.MethodQuery, Kind: sim.FaultTimeout, Applied: true, Delay: sim.Duration(time.Second)},
		{Channel: "alipay", Method: sim.MethodNotify, Kind: sim.FaultDelay, Delay: sim.Duration(time.Minute), Probability: 0.5},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFaultPlan_JSONRoundTripThroughHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	plan := `{"seed":42,"rules":[{"channel":"alipay","method":"query","kind":"system_error","applied":false,"probability":0.25,"limit":3},
		{"method":"notify","kind":"delay","delay":"1m30s"}]}`
	resp, err := http.Post(b.srv.URL+"/sim/faults", "application/json", strings.NewReader(plan))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /sim/faults: %d", resp.StatusCode)
	}
	got := b.sim.Faults()
	if got.Seed != 42 || len(got.Rules) != 2 || got.Rules[0].Probability != 0.25 || got.Rules[0].Limit != 3 ||
		time.Duration(got.Rules[1].Delay) != 90*time.Second || len(got.Fired) != 2 {
		t.Fatalf("plan in force %+v", got)
	}
	bad, _ := http.Post(b.srv.URL+"/sim/faults", "application/json", strings.NewReader(`{"rules":[{"method":"query","kind":"nope"}]}`))
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid plan: %d", bad.StatusCode)
	}
	if b.sim.Faults().Seed != 42 {
		t.Fatal("an invalid plan replaced the one in force")
	}
	req, _ := http.NewRequest(http.MethodDelete, b.srv.URL+"/sim/faults", nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if len(b.sim.Faults().Rules) != 0 {
		t.Fatal("DELETE did not clear the plan")
	}
	if _, err := sim.ParseFaultPlan([]byte(plan)); err != nil {
		t.Fatalf("ParseFaultPlan: %v", err)
	}
}

// queryOutcomes queries n trades once each and reports, per trade, whether the answer was
// the injected ACQ.SYSTEM_ERROR.
func queryOutcomes(t *testing.T, b *bundle, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		rsp, err := b.client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: fmt.Sprintf("F_%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = rsp.SubCode == "ACQ.SYSTEM_ERROR"
	}
	return out
}

// The same seed and the same traffic meet the same faults; another seed meets others; the
// share that fires follows the probability.
func TestFaults_SeededDrawsAreRepeatable(t *testing.T) {
	t.Parallel()
	plan := func(seed uint64) sim.FaultPlan {
		return sim.FaultPlan{Seed: seed, Rules: []sim.FaultRule{{Channel: "alipay", Method: sim.MethodQuery, Kind: sim.FaultSystemError, Probability: 0.3}}}
	}
	run := func(seed uint64) []bool {
		b := setup(t, sim.Config{Faults: plan(seed)})
		return queryOutcomes(t, b, 200)
	}
	a, again, other := run(1), run(1), run(2)
	fired, differ := 0, 0
	for i := range a {
		if a[i] != again[i] {
			t.Fatalf("trade %d: seed 1 gave %v then %v", i, a[i], again[i])
		}
		if a[i] {
			fired++
		}
		if a[i] != other[i] {
			differ++
		}
	}
	if fired < 35 || fired > 85 { // 200 × 0.3 = 60; far outside this is a broken draw
		t.Fatalf("%d of 200 fired at probability 0.3", fired)
	}
	if differ == 0 {
		t.Fatal("seed 2 met exactly the same faults as seed 1")
	}
}

func TestFaults_LimitStopsARule(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Faults: sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodQuery, Kind: sim.FaultSystemError, Limit: 3}}}})
	fired := 0
	for _, f := range queryOutcomes(t, b, 10) {
		if f {
			fired++
		}
	}
	if fired != 3 || b.sim.Faults().Fired[0] != 3 {
		t.Fatalf("fired %d times (status %v), want exactly the limit 3", fired, b.sim.Faults().Fired)
	}
}

// Every notification fault, on a paid trade, against a receiver that acknowledges
// everything: what reaches the receiver is exactly what the fault says.
func TestFaults_Notifications(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind  string
		check func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string)
	}{
		{sim.FaultDuplicate, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string) {
			if len(bodies) != 2 || bodies[0] == "" || len(st.Attempts) != 2 {
				t.Fatalf("duplicate: receiver saw %d, attempts %+v", len(bodies), st.Attempts)
			}
		}},
		{sim.FaultForgeSignature, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string) {
			badAndGenuine(t, b, st, bodies, func(bad url.Values) bool { return b.client.VerifySign(context.Background(), bad) != nil })
		}},
		{sim.FaultTamperAmount, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string) {
			badAndGenuine(t, b, st, bodies, func(bad url.Values) bool {
				return b.client.VerifySign(context.Background(), bad) == nil && bad.Get("total_amount") == "12.33"
			})
		}},
		{sim.FaultWrongApp, func(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string) {
			badAndGenuine(t, b, st, bodies, func(bad url.Values) bool {
				return b.client.VerifySign(context.Background(), bad) == nil && bad.Get("app_id") != b.keys.AppID
			})
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{TimeScale: fastTime, Faults: sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: tc.kind, Limit: 1}}}})
			recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
			qr := b.precreate(t, "NF_1", "12.34", b.clock.Now().Add(time.Hour), recv.srv.URL)
			if _, err := b.sim.Pay(context.Background(), qr); err != nil {
				t.Fatal(err)
			}
			st := waitNotify(t, b.sim, "NF_1")
			if !st.Acked {
				t.Fatalf("genuine notification not acked: %+v", st)
			}
			tc.check(t, b, st, recv.received())
		})
	}
}

// badAndGenuine checks that the receiver got the bad copy first (recorded in Bad, and
// matching isBad), then the genuine notification, which verifies.
func badAndGenuine(t *testing.T, b *bundle, st sim.NotifyStats, bodies []string, isBad func(url.Values) bool) {
	t.Helper()
	if len(bodies) != 2 || len(st.Bad) != 1 || len(st.Attempts) != 1 {
		t.Fatalf("receiver saw %d bodies; bad %+v; attempts %+v", len(bodies), st.Bad, st.Attempts)
	}
	bad, _ := url.ParseQuery(bodies[0])
	genuine, _ := url.ParseQuery(bodies[1])
	if !isBad(bad) {
		t.Fatalf("the first copy is not the expected bad one: %v", bad)
	}
	if err := b.client.VerifySign(context.Background(), genuine); err != nil || genuine.Get("total_amount") != "12.34" || genuine.Get("app_id") != b.keys.AppID {
		t.Fatalf("the genuine copy does not verify or was changed: %v %v", err, genuine)
	}
	if !st.Bad[0].Acked {
		t.Fatal("this receiver acks everything, so the stats must say the bad copy was acked")
	}
}

// Every attempt dropped: the receiver sees nothing, and the channel resends on its schedule
// until it gives up.
func TestFaults_DropEveryAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: fastTime, Faults: sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}})
	recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
	qr := b.precreate(t, "ND_1", "1.00", b.clock.Now().Add(time.Hour), recv.srv.URL)
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	st := waitNotify(t, b.sim, "ND_1")
	if !st.GaveUp || st.Acked || len(st.Attempts) != 8 || !st.Attempts[7].Dropped || len(recv.received()) != 0 {
		t.Fatalf("stats %+v; receiver saw %d", st, len(recv.received()))
	}
}

// A delayed attempt arrives after its delay (in simulated time, divided by the time scale).
func TestFaults_DelayHoldsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TimeScale: 60, Faults: sim.FaultPlan{Rules: []sim.FaultRule{
		{Method: sim.MethodNotify, Kind: sim.FaultDelay, Delay: sim.Duration(12 * time.Second)}}}})
	recv := newNotifyReceiver(t, reply{http.StatusOK, "success"})
	qr := b.precreate(t, "NL_1", "1.00", b.clock.Now().Add(time.Hour), recv.srv.URL)
	start := time.Now()
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, b.sim, "NL_1")
	if elapsed := time.Since(start); elapsed < 150*time.Millisecond { // 12 s / 60 = 200 ms
		t.Fatalf("delivered after %v, before the 200 ms delay", elapsed)
	}
}

package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// The barcode buyers are a share of the buyers, spread evenly, every combination of
// behaviour, channel and kind (walk-in sale or shop order) in every run of 20 of them; a
// password buyer confirms 2 to 12 s after the payment call; about half of the tills poll an
// UNKNOWN sale. Every other buyer's script is what it is without barcode buyers.
func TestBarcodeBuyersArePlanned(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		pop := DefaultPopulation()
		pop.App = DefaultAppShare
		without := pop
		pop.Barcode = DefaultBarcodeShare
		const n = 1000
		var barcode []BarcodePlan
		polls := 0
		for i := range n {
			p, q := pop.Plan(seed, i), without.Plan(seed, i)
			if p.Barcode == nil {
				if fmt.Sprint(p) != fmt.Sprint(q) {
					t.Fatalf("seed %d buyer %d: %+v, without barcode buyers %+v", seed, i, p, q)
				}
				continue
			}
			if p.App || p.Watch {
				t.Fatalf("seed %d buyer %d pays at a till and is an app buyer or watches: %+v", seed, i, p)
			}
			b := *p.Barcode
			barcode = append(barcode, b)
			if b.Poll {
				polls++
			}
			password := b.Behaviour == sim.CodePassword || b.Behaviour == sim.CodeWrongPassword
			if password && (b.After < 2*time.Second || b.After > 12*time.Second) || !password && b.After != 0 {
				t.Fatalf("seed %d buyer %d: %s after %s", seed, i, b.Behaviour, b.After)
			}
		}
		if len(barcode) != int(math.Floor(n*DefaultBarcodeShare)) {
			t.Fatalf("seed %d: %d barcode buyers of %d, want %d%%", seed, len(barcode), n, int(100*DefaultBarcodeShare))
		}
		for start := 0; start+barcodeCombos <= len(barcode); start += barcodeCombos {
			seen := map[string]bool{}
			for _, b := range barcode[start : start+barcodeCombos] {
				seen[b.Row()+" "+b.Kind()] = true
			}
			if len(seen) != barcodeCombos {
				t.Fatalf("seed %d: barcode buyers %d… cover %d combinations: %v", seed, start, len(seen), seen)
			}
		}
		if polls < len(barcode)*2/5 || polls > len(barcode)*3/5 {
			t.Errorf("seed %d: %d of %d tills poll, want about half", seed, polls, len(barcode))
		}
	}
	pop := DefaultPopulation()
	for i := range 100 {
		if pop.Plan(1, i).Barcode != nil {
			t.Fatal("a barcode buyer in a population without them")
		}
	}
	for _, c := range []struct {
		in   string
		want float64
		err  bool
	}{{"", 0.2, false}, {"none", 0, false}, {"0.5", 0.5, false}, {"1", 1, false}, {"1.5", 0, true}, {"some", 0, true}} {
		got, err := ParseBarcodeShare(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseBarcodeShare(%q) = %v, %v", c.in, got, err)
		}
	}
}

// A kill ends the loop of the attempts made before it within their wait; the loop of one
// made after it, or past its wait, is not its.
func TestLoopEndIsTheWaitOrTheKill(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	wait := 30 * time.Second
	crashes := []crashWindow{{From: t0.Add(10 * time.Second), To: t0.Add(11 * time.Second)}, {From: t0.Add(50 * time.Second), To: t0.Add(51 * time.Second)}}
	for _, c := range []struct {
		created, want time.Time
	}{
		{t0, t0.Add(10 * time.Second)},
		{t0.Add(12 * time.Second), t0.Add(42 * time.Second)},
		{t0.Add(25 * time.Second), t0.Add(50 * time.Second)},
		{t0.Add(60 * time.Second), t0.Add(90 * time.Second)},
	} {
		if got := loopEnd(c.created, wait, crashes); !got.Equal(c.want) {
			t.Errorf("made at %s: the loop ends %s, want %s", c.created.Format("15:04:05"), got.Format("15:04:05"), c.want.Format("15:04:05"))
		}
	}
	if (BarcodePlan{Channel: orderpay.ChannelWechat, Behaviour: sim.CodeNever}).Row() != "wechat:never" {
		t.Error("row name")
	}
}

// The barcode table shows each row's answers, latency and safety-net count, the tills' errors
// and the walk-in sales left open; the JSON carries the same.
func TestBarcodeReportPrintsItsTable(t *testing.T) {
	b := &BarcodeReport{Share: 0.2, Buyers: 2, WalkIn: 1, Orders: 1, PosWait: "27s", WechatUserPayingFor: "32s", KilledMidLoop: 1, CrashesMidLoop: 1,
		Rows: map[string]BarcodeRow{"wechat:never": {Buyers: 2, Answers: map[string]int{"CANCELLED": 1, answerError: 1},
			ScanToAnswerMS: Latency{Count: 1, P50: 31000, P99: 31000, Max: 31000}, SafetyNet: 1, Polled: 1, Killed: 1}},
		Errors:      map[string]int{"wechat:never order 409 ECONFLICT: order N passed its pay deadline (after a kill)": 1},
		TillAnswers: map[string]int{"CANCELLED": 1, "none": 1}, WalkInsOpen: 1, WalkInsOpenBy: map[string]int{"none": 1}}
	var out strings.Builder
	printBarcode(&out, b)
	text := out.String()
	for _, want := range []string{"--pos-wait 27s", "WeChat USERPAYING 32s", "wechat:never", "31000.0", "1 × wechat:never order 409 ECONFLICT",
		"CANCELLED 1  none 1", "still OPEN although their trade ended (none: the till never asked again), by their till's answer: none 1", "1 sales in flight at a kill, over 1 kills"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	js, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"by_behaviour":{"wechat:never":{"buyers":2,"answers":{`, `"scan_to_answer_ms":{"count":1,"p50":31000`, `"safety_net":1`,
		`"till_answers":`, `"walk_ins_open":1`, `"pos_wait":"27s"`, `"killed_mid_loop":1`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("the JSON lacks %s: %s", want, js)
		}
	}
}

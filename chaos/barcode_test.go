package chaos

import (
	"fmt"
	"math"
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

package orderpay_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"orderpay"
)

// The documented default: 1 min, 5 min, 30 min, 2 h, 6 h, then every 12 h for 7 days.
func TestDefaultRefundRetryPlanIsTheDocumentedOne(t *testing.T) {
	p := orderpay.DefaultRefundRetryPlan
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := start
	var waits []time.Duration
	for tries := 1; ; tries++ {
		next, ok := p.Next(tries, start, now)
		if !ok {
			break
		}
		waits = append(waits, next.Sub(now))
		now = next
	}
	want := []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour}
	for len(want) < len(waits) {
		want = append(want, 12*time.Hour)
	}
	if len(waits) < 6 || orderpay.FormatDurations(waits) != orderpay.FormatDurations(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if now.Sub(start) > 7*24*time.Hour || now.Add(12*time.Hour).Sub(start) <= 7*24*time.Hour {
		t.Fatalf("the last try is %s after the first refusal: it must be the last one within 7 days", now.Sub(start))
	}
}

// Over random plans and random sequences of refusals, each arriving at its try or late
// (the worker was busy, the process was down): a try never comes sooner than its wait
// after the refusal before it, never past the window, the retries always run out, and
// they run out at the first refusal whose next try would leave the window.
func TestRefundRetryPlanOverSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 8))
	for round := range 2000 {
		p := orderpay.RefundRetryPlan{Every: time.Duration(1+rng.IntN(600)) * time.Second}
		for range rng.IntN(7) {
			p.Schedule = append(p.Schedule, time.Duration(1+rng.IntN(600))*time.Second)
		}
		first := p.Every
		if len(p.Schedule) > 0 {
			first = p.Schedule[0]
		}
		p.For = first + time.Duration(rng.IntN(7200))*time.Second
		if err := p.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		since := time.Unix(1_700_000_000+int64(rng.IntN(1_000_000)), 0)
		refusedAt := since
		late := rng.IntN(3) == 0
		for tries := 1; ; tries++ {
			if tries > 100_000 {
				t.Fatalf("round %d: the retries never run out", round)
			}
			wait := p.Every
			if tries <= len(p.Schedule) {
				wait = p.Schedule[tries-1]
			}
			next, ok := p.Next(tries, since, refusedAt)
			if next.Sub(refusedAt) != wait {
				t.Fatalf("round %d, refusal %d: next try %s after it, want %s", round, tries, next.Sub(refusedAt), wait)
			}
			within := !next.After(since.Add(p.For))
			if ok != within {
				t.Fatalf("round %d, refusal %d: ok=%v but the try at +%s is within=%v of the %s window", round, tries, ok, next.Sub(since), within, p.For)
			}
			if !ok {
				break
			}
			refusedAt = next
			if late {
				refusedAt = refusedAt.Add(time.Duration(rng.IntN(300)) * time.Second)
			}
		}
	}
}

func TestRefundRetryPlanRefusesWaitsThatAreNotPositive(t *testing.T) {
	for _, p := range []orderpay.RefundRetryPlan{
		{Schedule: []time.Duration{time.Minute, 0}, Every: time.Hour, For: time.Hour},
		{Every: 0, For: time.Hour},
		{Schedule: []time.Duration{2 * time.Hour}, Every: time.Hour, For: time.Hour},
	} {
		if err := p.Validate(); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if _, err := orderpay.ParseDurations("1m,x"); err == nil {
		t.Error("a list with a word in it parsed")
	}
}

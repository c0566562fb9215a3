package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"orderpay/channel/sim"
)

// Fault classes, the units of --faults. Each maps to rules of the simulator's fault plan.
const (
	FaultNotifyDrop      = "notify_drop"      // a notification attempt is lost; the channel resends on its schedule
	FaultNotifyDuplicate = "notify_duplicate" // an attempt is sent twice
	FaultNotifyDelay     = "notify_delay"     // an attempt is held back (3 minutes, business time)
	FaultNotifyForge     = "notify_forge"     // a copy signed with a key that is not the channel's comes first
	FaultNotifyTamper    = "notify_tamper"    // a correctly signed copy for another amount comes first
	FaultNotifyWrongApp  = "notify_wrong_app" // a correctly signed copy for another app_id / mchid comes first
	FaultCallTimeout     = "call_timeout"     // a channel call gets no answer, applied or not
	FaultCallError       = "call_error"       // a channel call gets an error, an unsigned or a badly signed answer, applied or not
)

// FaultClasses are every fault class, in report order. "all" means all of them.
var FaultClasses = []string{
	FaultNotifyDrop, FaultNotifyDuplicate, FaultNotifyDelay, FaultNotifyForge, FaultNotifyTamper,
	FaultNotifyWrongApp, FaultCallTimeout, FaultCallError,
}

// Probabilities of the plan. Lost notifications are the common case in the field (and the
// one compensation exists for), so they are frequent; the rest are rarer.
const (
	probNotifyDrop  = 0.3
	probNotifyOther = 0.1  // duplicate, delay
	probNotifyBad   = 0.05 // forged, tampered, wrong app
	// probCallTimeout and probCallError are per call of each faulted method, split evenly
	// over the rules of the class.
	probCallTimeout = 0.05
	probCallError   = 0.05
	notifyDelay     = 3 * time.Minute // business time: 3 s at the default time scale
)

// TimeoutHang is how long a call_timeout fault holds the channel's answer before dropping
// the connection. It is wall time (the simulator does not scale it): shorter than the
// adapters' own 10 s timeout, so that a timeout costs the run seconds, not minutes. To the
// server it is the same: no answer, result unknown.
const TimeoutHang = 2 * time.Second

// faultedMethods are the channel calls that call faults hit: everything the server does
// for a payment (bills are reconciliation's, not the run's).
var faultedMethods = []string{sim.MethodPrecreate, sim.MethodQuery, sim.MethodClose, sim.MethodCancel, sim.MethodRefund, sim.MethodRefundQuery}

// errorKinds are call_error's kinds; rate_limited is never applied (the simulator refuses
// that combination: a limited call does not run).
var errorKinds = []string{sim.FaultHTTP500, sim.FaultSystemError, sim.FaultUnknownError, sim.FaultRateLimited, sim.FaultUnsigned, sim.FaultBadSignature}

// ParseFaults reads --faults: "none", "all" or a comma-separated list of classes. The
// result is in FaultClasses order, without repeats.
func ParseFaults(s string) ([]string, error) {
	classes, _, err := ParseFaultSpec(s)
	return classes, err
}

// ParseFaultSpec reads --faults like ParseFaults, where each class may also carry its own
// probability: "notify_drop=1" loses every notification attempt; "call_error=0.2" makes a
// fifth of the calls fail. Classes without one keep the plan's.
func ParseFaultSpec(s string) ([]string, map[string]float64, error) {
	probs := map[string]float64{}
	switch s = strings.TrimSpace(s); s {
	case "none", "":
		return []string{}, probs, nil
	case "all":
		return slices.Clone(FaultClasses), probs, nil
	}
	want := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c, p, hasP := strings.Cut(strings.TrimSpace(c), "=")
		if !slices.Contains(FaultClasses, c) {
			return nil, nil, fmt.Errorf("chaos: unknown fault class %q; use none, all or a list of %s, each optionally =probability", c, strings.Join(FaultClasses, ", "))
		}
		if hasP {
			var f float64
			if _, err := fmt.Sscan(p, &f); err != nil || f <= 0 || f > 1 {
				return nil, nil, fmt.Errorf("chaos: fault class %s: probability %q is not in (0, 1]", c, p)
			}
			probs[c] = f
		}
		want[c] = true
	}
	var out []string
	for _, c := range FaultClasses {
		if want[c] {
			out = append(out, c)
		}
	}
	return out, probs, nil
}

// FaultPlan is the simulator's plan for these classes and seed: a pure function of both, so
// the same seed gives the same plan. The seed also drives the simulator's draws, which are
// keyed on trade numbers; since order numbers carry the time, the faults that actually fire
// differ from run to run, in the same proportions.
func FaultPlan(classes []string, seed uint64) sim.FaultPlan {
	return FaultPlanWith(classes, nil, seed)
}

// FaultPlanWith is FaultPlan with some classes at their own probability (see
// ParseFaultSpec).
func FaultPlanWith(classes []string, probs map[string]float64, seed uint64) sim.FaultPlan {
	prob := func(class string, def float64) float64 {
		if p, ok := probs[class]; ok {
			return p
		}
		return def
	}
	plan := sim.FaultPlan{Seed: seed, Rules: []sim.FaultRule{}}
	notify := func(kind string, p float64, delay time.Duration) {
		plan.Rules = append(plan.Rules, sim.FaultRule{Method: sim.MethodNotify, Kind: kind, Probability: p, Delay: sim.Duration(delay)})
	}
	for _, class := range classes {
		switch class {
		case FaultNotifyDrop:
			notify(sim.FaultDrop, prob(class, probNotifyDrop), 0)
		case FaultNotifyDuplicate:
			notify(sim.FaultDuplicate, prob(class, probNotifyOther), 0)
		case FaultNotifyDelay:
			notify(sim.FaultDelay, prob(class, probNotifyOther), notifyDelay)
		case FaultNotifyForge:
			notify(sim.FaultForgeSignature, prob(class, probNotifyBad), 0)
		case FaultNotifyTamper:
			notify(sim.FaultTamperAmount, prob(class, probNotifyBad), 0)
		case FaultNotifyWrongApp:
			notify(sim.FaultWrongApp, prob(class, probNotifyBad), 0)
		case FaultCallTimeout:
			for _, m := range faultedMethods {
				for _, applied := range []bool{false, true} {
					plan.Rules = append(plan.Rules, sim.FaultRule{Method: m, Kind: sim.FaultTimeout, Applied: applied,
						Probability: prob(class, probCallTimeout) / 2, Delay: sim.Duration(TimeoutHang)})
				}
			}
		case FaultCallError:
			n := 2*len(errorKinds) - 1
			for _, m := range faultedMethods {
				for _, kind := range errorKinds {
					for _, applied := range []bool{false, true} {
						if applied && kind == sim.FaultRateLimited {
							continue
						}
						plan.Rules = append(plan.Rules, sim.FaultRule{Method: m, Kind: kind, Applied: applied,
							Probability: prob(class, probCallError) / float64(n)})
					}
				}
			}
		}
	}
	return plan
}

// faultClassOf is the class of a fault that fired.
func faultClassOf(ev sim.FaultEvent) string {
	if ev.Method == sim.MethodNotify {
		switch ev.Kind {
		case sim.FaultDrop:
			return FaultNotifyDrop
		case sim.FaultDuplicate:
			return FaultNotifyDuplicate
		case sim.FaultDelay:
			return FaultNotifyDelay
		case sim.FaultForgeSignature:
			return FaultNotifyForge
		case sim.FaultTamperAmount:
			return FaultNotifyTamper
		case sim.FaultWrongApp:
			return FaultNotifyWrongApp
		}
		return "notify_" + ev.Kind
	}
	if ev.Kind == sim.FaultTimeout {
		return FaultCallTimeout
	}
	return FaultCallError
}

// describePlan is one line per class, for the report table, with each class's probability
// (its own, if the run gave one).
func describePlan(classes []string, probs map[string]float64) []string {
	var out []string
	for _, c := range classes {
		p := func(def float64) float64 {
			if v, ok := probs[c]; ok {
				return v
			}
			return def
		}
		var s string
		switch c {
		case FaultNotifyDrop:
			s = fmt.Sprintf("each notification attempt lost with p=%.2f (the channel resends on its schedule)", p(probNotifyDrop))
		case FaultNotifyDuplicate:
			s = fmt.Sprintf("each attempt sent twice with p=%.2f", p(probNotifyOther))
		case FaultNotifyDelay:
			s = fmt.Sprintf("each attempt held %s (business time) with p=%.2f", notifyDelay, p(probNotifyOther))
		case FaultNotifyForge:
			s = fmt.Sprintf("a copy signed with a foreign key first, p=%.2f per attempt", p(probNotifyBad))
		case FaultNotifyTamper:
			s = fmt.Sprintf("a signed copy for another amount first, p=%.2f per attempt", p(probNotifyBad))
		case FaultNotifyWrongApp:
			s = fmt.Sprintf("a signed copy for another app_id/mchid first, p=%.2f per attempt", p(probNotifyBad))
		case FaultCallTimeout:
			s = fmt.Sprintf("no answer for %s then a dropped connection, applied or not, p=%.2f per call of %s",
				TimeoutHang, p(probCallTimeout), strings.Join(faultedMethods, ", "))
		case FaultCallError:
			s = fmt.Sprintf("%s, applied or not, p=%.2f per call of the same", strings.Join(errorKinds, ", "), p(probCallError))
		}
		out = append(out, fmt.Sprintf("%-17s %s", c, s))
	}
	return out
}

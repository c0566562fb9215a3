package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"orderpay"
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
	// FaultRefundRefused: the channel refuses a refund for now: the merchant's account is
	// short (both channels; most shortages end by themselves after a few business minutes,
	// a rarer one only when the merchant tops up), or WeChat Pay's frequency limit.
	FaultRefundRefused = "refund_refused"
	// FaultRefundAbnormal: a WeChat Pay refund ends ABNORMAL or CLOSED, or is refused for
	// the buyer's account: the money never reaches the buyer, and an operator must act.
	FaultRefundAbnormal = "refund_abnormal"
	// FaultRefundSlow: a refund is accepted but settles tens of business minutes later.
	FaultRefundSlow = "refund_slow"
)

// FaultClasses are every fault class, in report order. "all" means all of them.
var FaultClasses = []string{
	FaultNotifyDrop, FaultNotifyDuplicate, FaultNotifyDelay, FaultNotifyForge, FaultNotifyTamper,
	FaultNotifyWrongApp, FaultCallTimeout, FaultCallError, FaultRefundRefused, FaultRefundAbnormal, FaultRefundSlow,
}

// refundClasses are the fault classes of refunds.
var refundClasses = []string{FaultRefundRefused, FaultRefundAbnormal, FaultRefundSlow}

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

// The refund faults (business time, and probabilities per new refund a channel would accept,
// or for the frequency limit per refund call). A shortage of the merchant's account refuses
// every refund on that channel while it lasts, so its probabilities are small: at the
// after-sales phase's pace (afterSalesPace) a shortage of a few minutes meets a handful of
// refunds. A 1,000-order run sends some 550 refunds, about half on each channel: the
// shortages that cure fire about once per channel, the one that does not (Limit 1 on each
// channel) on most runs, the abnormal ends fifteen to twenty times, and most refunds go
// straight through.
const (
	// probBalanceCures: the account goes short and is covered again balanceCure later, by
	// itself: about the first retry of the run's plan (Settings.RefundRetry, its waits
	// drawn between 20 s and 3 min), so the refunds it meets are refused once or twice,
	// then made, or, where the plan's window is shorter than the shortage, queued for the
	// operator on duty.
	probBalanceCures = 0.004
	balanceCure      = 2 * time.Minute
	// probBalanceStays: the account goes short until the merchant tops it up: the refunds
	// it meets are retried until the plan runs out, and the first that runs out goes to the
	// operators' queue, where the operator on duty tops the account up and retries it. At
	// most once per channel and run (the stall lasts the plan's window).
	probBalanceStays = 0.008
	// probFrequency: WeChat Pay's 429 FREQUENCY_LIMITED on a refund: refused for now, sent
	// again on the plan.
	probFrequency = 0.05
	// probRefundAbnormal is WeChat Pay's ABNORMAL ends; CLOSED and USER_ACCOUNT_ABNORMAL
	// come at half of it each.
	probRefundAbnormal = 0.04
	// probRefundSlow: settles refundSlowDelay after acceptance (both channels).
	probRefundSlow  = 0.05
	refundSlowDelay = 20 * time.Minute
)

// TimeoutHang is how long a call_timeout fault holds the channel's answer before dropping
// the connection. It is wall time (the simulator does not scale it): shorter than the
// adapters' own 10 s timeout, so that a timeout costs the run seconds, not minutes. To the
// server it is the same: no answer, result unknown.
const TimeoutHang = 2 * time.Second

// faultedMethods are the channel calls that call faults hit: everything the server does
// for a payment (bills are reconciliation's, not the run's). Every prepay is precreate to
// the simulator's fault plan: Alipay's precreate and trade.create (in-app), WeChat Pay's
// Native, JSAPI (and mini program), H5 and App prepays. Alipay pc, wap and app orders are
// signed by the server and make no call; their notifications, queries and closes are
// faulted like any other.
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
	return parseClassSpec(s, FaultClasses, "fault class")
}

// parseClassSpec reads a list of classes out of known: "none" (or ""), "all", or a comma list
// of class[=probability], the probability in (0, 1]. The classes come back in known's order,
// without repeats, with the probabilities given.
func parseClassSpec(s string, known []string, what string) ([]string, map[string]float64, error) {
	probs := map[string]float64{}
	switch s = strings.TrimSpace(s); s {
	case "none", "":
		return []string{}, probs, nil
	case "all":
		return slices.Clone(known), probs, nil
	}
	want := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c, p, hasP := strings.Cut(strings.TrimSpace(c), "=")
		if !slices.Contains(known, c) {
			return nil, nil, fmt.Errorf("chaos: unknown %s %q; use none, all or a list of %s, each optionally =probability", what, c, strings.Join(known, ", "))
		}
		if hasP {
			var f float64
			if _, err := fmt.Sscan(p, &f); err != nil || f <= 0 || f > 1 {
				return nil, nil, fmt.Errorf("chaos: %s %s: probability %q is not in (0, 1]", what, c, p)
			}
			probs[c] = f
		}
		want[c] = true
	}
	var out []string
	for _, c := range known {
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
	return FaultPlanAt(classes, probs, seed, DefaultTimeScale)
}

// FaultPlanAt is FaultPlanWith at a time scale: the refund faults' delays (a shortage's
// cure, a slow refund's settling) run on the simulator's clock, which is the wall clock, so
// their business durations are compressed here, as the server compresses its own.
func FaultPlanAt(classes []string, probs map[string]float64, seed uint64, timeScale float64) sim.FaultPlan {
	wall := func(d time.Duration) sim.Duration { return sim.Duration(float64(d) / timeScale) }
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
						r := sim.FaultRule{Method: m, Kind: kind, Applied: applied, Probability: prob(class, probCallError) / float64(n)}
						if m == sim.MethodRefund && kind == sim.FaultRateLimited {
							// WeChat Pay's 429 on a refund is its frequency refusal, a
							// refusal for now (refund_refused); Alipay's 40005 stays an
							// unknown answer, a call error.
							r.Channel = orderpay.ChannelAlipay
						}
						plan.Rules = append(plan.Rules, r)
					}
				}
			}
		case FaultRefundRefused:
			p := prob(class, probFrequency) // a probability given for the class scales its rules
			for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
				plan.Rules = append(plan.Rules,
					sim.FaultRule{Channel: ch, Method: sim.MethodRefund, Kind: sim.FaultBalance, Probability: scaleProb(p, probBalanceCures), Delay: wall(balanceCure)},
					sim.FaultRule{Channel: ch, Method: sim.MethodRefund, Kind: sim.FaultBalance, Probability: scaleProb(p, probBalanceStays), Limit: 1})
			}
			plan.Rules = append(plan.Rules, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultRateLimited,
				Probability: scaleProb(p, probFrequency)})
		case FaultRefundAbnormal:
			p := prob(class, probRefundAbnormal)
			for _, r := range []struct {
				kind string
				p    float64
			}{{sim.FaultAbnormal, p}, {sim.FaultClosed, p / 2}, {sim.FaultAccountAbnormal, p / 2}} {
				plan.Rules = append(plan.Rules, sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: r.kind, Probability: r.p})
			}
		case FaultRefundSlow:
			plan.Rules = append(plan.Rules, sim.FaultRule{Method: sim.MethodRefund, Kind: sim.FaultSlow,
				Probability: prob(class, probRefundSlow), Delay: wall(refundSlowDelay)})
		}
	}
	return plan
}

// scaleProb is a refund_refused rule's probability when the class's is p: p is the chance of
// its commonest rule (the frequency limit), and the others keep their ratio to it. At the
// default (probFrequency) every rule keeps its own.
func scaleProb(p, rule float64) float64 {
	return min(1, rule*p/probFrequency)
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
	switch ev.Kind {
	case sim.FaultTimeout:
		return FaultCallTimeout
	case sim.FaultBalance:
		return FaultRefundRefused
	case sim.FaultAbnormal, sim.FaultClosed, sim.FaultAccountAbnormal:
		return FaultRefundAbnormal
	case sim.FaultSlow:
		return FaultRefundSlow
	case sim.FaultRateLimited:
		if ev.Method == sim.MethodRefund && ev.Channel == orderpay.ChannelWechat {
			return FaultRefundRefused
		}
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
			s = fmt.Sprintf("no answer for %s then a dropped connection, applied or not, p=%.2f per call of %s (precreate: every prepay, Alipay precreate and trade.create, WeChat Native, JSAPI, H5 and App)",
				TimeoutHang, p(probCallTimeout), strings.Join(faultedMethods, ", "))
		case FaultCallError:
			s = fmt.Sprintf("%s, applied or not, p=%.2f per call of the same (a refund's rate limit at Alipay only)", strings.Join(errorKinds, ", "), p(probCallError))
		case FaultRefundRefused:
			q := p(probFrequency)
			s = fmt.Sprintf("the merchant's account short (every refund refused for balance): covered again %s later p=%.3f, or until topped up p=%.3f (once per channel), per new refund on each channel; WeChat 429 frequency limit p=%.3f per refund call",
				balanceCure, scaleProb(q, probBalanceCures), scaleProb(q, probBalanceStays), scaleProb(q, probFrequency))
		case FaultRefundAbnormal:
			a := p(probRefundAbnormal)
			s = fmt.Sprintf("WeChat refund ends ABNORMAL p=%.3f, CLOSED p=%.3f, refused USER_ACCOUNT_ABNORMAL p=%.3f, per new refund", a, a/2, a/2)
		case FaultRefundSlow:
			s = fmt.Sprintf("a refund settles after %s instead of 1m, p=%.2f per new refund", refundSlowDelay, p(probRefundSlow))
		}
		out = append(out, fmt.Sprintf("%-17s %s", c, s))
	}
	return out
}

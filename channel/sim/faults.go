package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"orderpay"
)

// Methods that faults can target, named the same for both channels. "notify" targets the
// channel's asynchronous notifications instead of a call.
const (
	MethodPrecreate   = "precreate"    // alipay.trade.precreate / WeChat Native prepay
	MethodQuery       = "query"        // alipay.trade.query / query by out_trade_no
	MethodClose       = "close"        // alipay.trade.close / close
	MethodCancel      = "cancel"       // alipay.trade.cancel (Alipay only)
	MethodPay         = "pay"          // alipay.trade.pay / codepay: a barcode payment
	MethodReverse     = "reverse"      // a codepay's reverse (WeChat only; Alipay's is cancel)
	MethodRefund      = "refund"       // alipay.trade.refund / domestic refund
	MethodRefundQuery = "refund_query" // alipay.trade.fastpay.refund.query / refund query
	MethodBill        = "bill"         // bill download URL / trade bill
	MethodNotify      = "notify"       // the channel's payment notifications
)

// Fault kinds for calls. Applied says whether the operation takes effect at the channel
// before the fault hits the answer: the "result unknown" case is exactly a fault whose
// caller cannot tell the two apart.
const (
	// FaultTimeout holds the answer past the client's deadline (or Delay, if set), then
	// drops the connection without answering.
	FaultTimeout = "timeout"
	// FaultHTTP500 answers HTTP 500 with an unsigned error body.
	FaultHTTP500 = "http_500"
	// FaultSystemError answers Alipay 40004 ACQ.SYSTEM_ERROR, or WeChat 500 SYSTEM_ERROR.
	FaultSystemError = "system_error"
	// FaultUnknownError answers Alipay 20000 isp.unknow-error, or WeChat 500 SYSTEM_ERROR.
	FaultUnknownError = "unknown_error"
	// FaultUnsigned answers the real result with no signature.
	FaultUnsigned = "unsigned"
	// FaultBadSignature answers the real result signed with a key that is not the channel's.
	FaultBadSignature = "bad_signature"
	// FaultRateLimited answers Alipay 40005 aop.ACQ.CALL_LIMITED or WeChat 429
	// FREQUENCY_LIMITED, without running the operation (Applied must be false). On
	// MethodRefund it is the channel's frequency refusal: WeChat's 429 says the refund was
	// not accepted and may be sent again, more slowly, under the same number; Alipay
	// documents no refund-specific one, so its answer stays the gateway's call limit. Either
	// way nothing is refunded.
	FaultRateLimited = "rate_limited"
	// FaultBankError (WeChat only, MethodPay only) answers 500 BANKERROR (银行系统异常):
	// the buyer's bank did not say whether the money moved, so the result is unknown, as
	// for SYSTEM_ERROR.
	FaultBankError = "bank_error"
)

// Fault kinds for refunds, MethodRefund only. Unlike call faults they are not drawn when the
// call arrives but where the channel would accept a new refund: on an authenticated, valid
// request under a number the trade has no refund for yet, that fits in what remains to
// refund. So a resend of a refund already accepted, or a refusal for another reason, never
// meets them. They have no applied form.
const (
	// FaultBalance: the merchant's account is short. The refund it fires on, and every
	// new refund after it on that channel, is refused for balance (Alipay 40004
	// ACQ.SELLER_BALANCE_NOT_ENOUGH, WeChat 403 NOT_ENOUGH, signed like any business
	// refusal) and refunds nothing, until TopUp, or until Delay of simulated time has
	// passed since the account went short (Delay 0: only TopUp cures it). While the account
	// is short nothing is drawn: the refusals that follow are the shortage, not new firings.
	// A refund sent again under the same number after the cure is accepted as a new one,
	// unless the rule fires on it again: without a Limit (or with probability 1) the first
	// new refund after every cure makes the account short once more.
	FaultBalance = "balance"
	// FaultSlow: the refund is accepted and settles Delay (simulated time, required)
	// after acceptance instead of Config.RefundDelay. Until then Alipay answers
	// fund_change=N and its refund query has no refund_status; WeChat answers PROCESSING.
	FaultSlow = "slow"
	// FaultAbnormal (WeChat only): the refund is accepted, PROCESSING, and ends ABNORMAL
	// when it settles (after Delay if set, otherwise Config.RefundDelay; with neither, at
	// once, so the create's own answer says ABNORMAL), as EndWechatRefund makes it: its
	// answers, queries and REFUND.ABNORMAL notification say so, no money moves, and the
	// amount can be refunded again under another number.
	FaultAbnormal = "abnormal"
	// FaultClosed (WeChat only): as FaultAbnormal, ending CLOSED.
	FaultClosed = "closed"
	// FaultAccountAbnormal (WeChat only): the refund is refused with 403
	// USER_ACCOUNT_ABNORMAL (the buyer's account is cancelled or abnormal), signed, and
	// refunds nothing.
	FaultAccountAbnormal = "account_abnormal"
)

// Fault kinds for notifications. They act on one delivery attempt each.
const (
	// FaultDrop loses the attempt: nothing reaches the merchant, and the channel, seeing
	// no acknowledgement, resends on its schedule.
	FaultDrop = "drop"
	// FaultDelay sends the attempt Delay (simulated time) late.
	FaultDelay = "delay"
	// FaultDuplicate sends the attempt twice.
	FaultDuplicate = "duplicate"
	// FaultForgeSignature first sends a copy signed with a key that is not the channel's.
	FaultForgeSignature = "forge_signature"
	// FaultTamperAmount first sends a correctly signed copy for a different amount, as if
	// the channel's record and the merchant's disagreed: only the amount check catches it.
	FaultTamperAmount = "tamper_amount"
	// FaultWrongApp first sends a correctly signed copy for another app_id / mchid.
	FaultWrongApp = "wrong_app"
)

var (
	callMethods = []string{MethodPrecreate, MethodPay, MethodQuery, MethodClose, MethodCancel, MethodReverse, MethodRefund, MethodRefundQuery, MethodBill, MethodCertificates}
	callKinds   = []string{FaultTimeout, FaultHTTP500, FaultSystemError, FaultUnknownError, FaultUnsigned, FaultBadSignature, FaultRateLimited, FaultBankError}
	notifyKinds = []string{FaultDrop, FaultDelay, FaultDuplicate, FaultForgeSignature, FaultTamperAmount, FaultWrongApp}
	refundKinds = []string{FaultBalance, FaultSlow, FaultAbnormal, FaultClosed, FaultAccountAbnormal}
	// wechatRefundKinds are the refund kinds only WeChat Pay has: Alipay refuses a refund at
	// once or settles it, and has no account check of the buyer's.
	wechatRefundKinds = []string{FaultAbnormal, FaultClosed, FaultAccountAbnormal}
)

// Duration is a time.Duration written as a Go duration string in JSON ("30s", "1m30s").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// FaultRule is one kind of misbehaviour, injected into the calls or notifications it
// matches with the given probability.
type FaultRule struct {
	// Channel is "alipay" or "wechat"; empty matches both.
	Channel string `json:"channel,omitempty"`
	// Method is one of the Method* names.
	Method string `json:"method"`
	// Kind is a call kind (Fault* for calls), for MethodRefund also a refund kind
	// (FaultBalance, FaultSlow, FaultAbnormal, FaultClosed, FaultAccountAbnormal), or, for
	// MethodNotify, a notification kind.
	Kind string `json:"kind"`
	// Applied makes the operation take effect at the channel before a call fault hits its
	// answer. Ignored for notifications.
	Applied bool `json:"applied,omitempty"`
	// Probability of firing on each matching call or attempt, in (0, 1]. 0 means 1.
	Probability float64 `json:"probability,omitempty"`
	// Delay is the simulated delay of FaultDelay (required), and for FaultTimeout how long
	// the answer is held at most (default: until the client gives up, at most 2 minutes).
	// For FaultSlow (required), FaultAbnormal and FaultClosed it is how long (simulated
	// time) the refund takes to settle; for FaultBalance how long (simulated time) the
	// account stays short unless topped up first (0: until TopUp).
	Delay Duration `json:"delay,omitempty"`
	// Limit fires the rule at most this many times; 0 means no limit.
	Limit int `json:"limit,omitempty"`
}

// FaultPlan is every rule in force, and the seed that makes their draws repeatable: each
// draw is a hash of the seed, the rule, the trade and how many times that trade met the
// rule, so the same plan and the same traffic give the same faults whatever the timing.
type FaultPlan struct {
	Seed  uint64      `json:"seed"`
	Rules []FaultRule `json:"rules"`
}

// Validate checks every rule.
func (p FaultPlan) Validate() error {
	for i, r := range p.Rules {
		if err := r.validate(); err != nil {
			return orderpay.Errorf(orderpay.EINVALID, "rules[%d]: %s", i, orderpay.ErrorMessage(err))
		}
	}
	return nil
}

func (r FaultRule) validate() error {
	switch r.Channel {
	case "", orderpay.ChannelAlipay, orderpay.ChannelWechat:
	default:
		return orderpay.Errorf(orderpay.EINVALID, "channel must be alipay, wechat or empty")
	}
	switch {
	case r.Method == MethodNotify:
		if !slices.Contains(notifyKinds, r.Kind) {
			return orderpay.Errorf(orderpay.EINVALID, "notify kind must be one of %s", strings.Join(notifyKinds, ", "))
		}
		if r.Kind == FaultDelay && r.Delay <= 0 {
			return orderpay.Errorf(orderpay.EINVALID, "a delay fault needs a positive delay")
		}
	case slices.Contains(refundKinds, r.Kind):
		if err := r.validateRefund(); err != nil {
			return err
		}
	case slices.Contains(callMethods, r.Method):
		if !slices.Contains(callKinds, r.Kind) {
			return orderpay.Errorf(orderpay.EINVALID, "call kind must be one of %s (and, for method %s, %s)",
				strings.Join(callKinds, ", "), MethodRefund, strings.Join(refundKinds, ", "))
		}
		if r.Kind == FaultRateLimited && r.Applied {
			return orderpay.Errorf(orderpay.EINVALID, "a rate-limited call is never applied")
		}
		if r.Method == MethodCancel && r.Channel == orderpay.ChannelWechat {
			return orderpay.Errorf(orderpay.EINVALID, "WeChat Pay has no cancel")
		}
		if r.Method == MethodReverse && r.Channel == orderpay.ChannelAlipay {
			return orderpay.Errorf(orderpay.EINVALID, "Alipay has no reverse: its barcode trades are ended by cancel")
		}
		if r.Kind == FaultBankError && (r.Channel != orderpay.ChannelWechat || r.Method != MethodPay) {
			return orderpay.Errorf(orderpay.EINVALID, "bank_error is WeChat Pay's answer to a barcode payment: set channel %s and method %s", orderpay.ChannelWechat, MethodPay)
		}
		if r.Method == MethodCertificates && r.Channel == orderpay.ChannelAlipay {
			return orderpay.Errorf(orderpay.EINVALID, "only WeChat Pay has certificates to download")
		}
	default:
		return orderpay.Errorf(orderpay.EINVALID, "method must be one of %s, %s", strings.Join(callMethods, ", "), MethodNotify)
	}
	if math.IsNaN(r.Probability) || r.Probability < 0 || r.Probability > 1 {
		return orderpay.Errorf(orderpay.EINVALID, "probability must be in (0, 1]")
	}
	if r.Delay < 0 || r.Limit < 0 {
		return orderpay.Errorf(orderpay.EINVALID, "delay and limit must not be negative")
	}
	return nil
}

// validateRefund checks a rule of a refund kind.
func (r FaultRule) validateRefund() error {
	switch {
	case r.Method != MethodRefund:
		return orderpay.Errorf(orderpay.EINVALID, "%s is a refund fault: its method must be %s", r.Kind, MethodRefund)
	case r.Applied:
		return orderpay.Errorf(orderpay.EINVALID, "a %s refund fault has no applied form", r.Kind)
	case slices.Contains(wechatRefundKinds, r.Kind) && r.Channel != orderpay.ChannelWechat:
		return orderpay.Errorf(orderpay.EINVALID, "%s happens to WeChat Pay refunds only: set channel %s", r.Kind, orderpay.ChannelWechat)
	case r.Kind == FaultSlow && r.Delay <= 0:
		return orderpay.Errorf(orderpay.EINVALID, "a slow refund fault needs a positive delay")
	}
	return nil
}

// FaultStatus is the plan in force with how often each rule has fired.
type FaultStatus struct {
	FaultPlan
	Fired []int `json:"fired"`
}

// FaultEvent is one fault that fired: which rule, on what.
type FaultEvent struct {
	Rule    int    `json:"rule"` // index in the plan
	Channel string `json:"channel"`
	Method  string `json:"method"`
	Kind    string `json:"kind"`
	Applied bool   `json:"applied,omitempty"`
	// Key is what the draw was keyed on: the out_trade_no of a call, or the notify id of
	// a notification (NotifyStats maps it to its out_trade_no).
	Key string    `json:"key"`
	At  time.Time `json:"at"`
}

// faultSet decides which faults fire, and counts the calls it was asked about. It is safe
// for concurrent use.
type faultSet struct {
	calls map[string]int // by "<channel>.<method>"
	mu    sync.Mutex
	plan  FaultPlan
	fired []int
	seen  map[string]int // draws so far per rule+channel+method+key
	log   []FaultEvent
}

func (f *faultSet) set(p FaultPlan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.Rules = slices.Clone(p.Rules)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan, f.fired, f.seen, f.log = p, make([]int, len(p.Rules)), map[string]int{}, nil
	return nil
}

func (f *faultSet) status() FaultStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultStatus{FaultPlan: FaultPlan{Seed: f.plan.Seed, Rules: slices.Clone(f.plan.Rules)}, Fired: slices.Clone(f.fired)}
}

// fire returns every rule for channel and method, of one of kinds, that fires on this draw
// for key (an out_trade_no, bill date or notify id), in plan order.
func (f *faultSet) fire(channel, method, key string, kinds []string) []FaultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FaultRule
	for i, r := range f.plan.Rules {
		if r.Method != method || (r.Channel != "" && r.Channel != channel) || (r.Limit > 0 && f.fired[i] >= r.Limit) ||
			!slices.Contains(kinds, r.Kind) {
			continue
		}
		drawKey := fmt.Sprintf("%d|%s|%s|%s", i, channel, method, key)
		n := f.seen[drawKey]
		f.seen[drawKey] = n + 1
		p := r.Probability
		if p == 0 {
			p = 1
		}
		if draw(f.plan.Seed, drawKey, n) < p {
			f.fired[i]++
			f.log = append(f.log, FaultEvent{Rule: i, Channel: channel, Method: method, Kind: r.Kind, Applied: r.Applied, Key: key, At: time.Now()})
			out = append(out, r)
		}
	}
	return out
}

// callFault returns the first call fault that fires for this call, or nil. Refund faults
// are not drawn here (refundFaults).
func (f *faultSet) callFault(channel, method, key string) *FaultRule {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[channel+"."+method]++
	f.mu.Unlock()
	if fired := f.fire(channel, method, key, callKinds); len(fired) > 0 {
		return &fired[0]
	}
	return nil
}

// draw is a uniform number in [0, 1) fixed by the seed, the draw key and its count.
func draw(seed uint64, key string, n int) float64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	h.Write([]byte(key))
	// A final mix, so that nearby keys give unrelated draws.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return float64(x>>11) / (1 << 53)
}

// maxHang bounds how long a timeout fault holds an answer when the client does not give up.
const maxHang = 2 * time.Minute

// hang holds a call until its client gives up, the rule's delay passes, or the simulator
// closes, then aborts the answer: the client sees its own timeout or a dropped connection,
// never a reply.
func (s *Simulator) hang(ctx context.Context, r *FaultRule) {
	d := time.Duration(r.Delay)
	if d <= 0 {
		d = maxHang
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.notifier.ctx.Done():
	}
	panic(http.ErrAbortHandler)
}

// FaultLog returns every fault that fired under the plan in force, in order.
func (s *Simulator) FaultLog() []FaultEvent {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return slices.Clone(s.faults.log)
}

// SetFaults replaces the fault plan (and clears the log). An empty plan turns faults off.
func (s *Simulator) SetFaults(p FaultPlan) error { return s.faults.set(p) }

// Faults returns the plan in force and how often each rule fired.
func (s *Simulator) Faults() FaultStatus { return s.faults.status() }

// serveFaults is GET, POST and DELETE /sim/faults.
func (s *Simulator) serveFaults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		var p FaultPlan
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			writeError(w, orderpay.Errorf(orderpay.EINVALID, "body must be a fault plan {\"seed\":1,\"rules\":[…]}: %v", err))
			return
		}
		if err := s.SetFaults(p); err != nil {
			writeError(w, err)
			return
		}
	case http.MethodDelete:
		_ = s.SetFaults(FaultPlan{})
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

// ParseFaultPlan reads a plan from JSON, for the --faults flag.
func ParseFaultPlan(data []byte) (FaultPlan, error) {
	var p FaultPlan
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, orderpay.Errorf(orderpay.EINVALID, "fault plan: %v", err)
	}
	return p, p.Validate()
}

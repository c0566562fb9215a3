package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The operator on duty: while a run goes on (load, settle, after-sales, crashes and all), a
// person watches the operators' refund queue (GET /admin/refunds/needs-action) through the
// admin API and deals with each refund in it as the runbook says:
//
//   - the channel kept refusing it for the merchant's balance until its retries ran out:
//     top the merchant's account up (the simulator's TopUp, as the merchant would in the
//     channel's console), then retry it (POST /admin/refunds/{no}/retry);
//   - its retries ran out on another refusal for now (WeChat's frequency limit): retry it;
//   - anything else (ended ABNORMAL or CLOSED at the channel, the buyer's account abnormal,
//     refused for good): pay the buyer back outside the channel and record it (POST
//     /admin/refunds/{no}/resolve with the bank transfer's reference).
//
// A call that fails (the server is restarting after a crash) is tried again at the next
// look. The settle phases wait until the queue is empty and nothing is in flight, so every
// refund the operator acts on ends before the audit.

// operatorEvery is how often the operator looks at the queue (wall time: a person).
const operatorEvery = 2 * time.Second

// OperatorStats counts what the operator on duty did.
type OperatorStats struct {
	Looks       int `json:"looks"`       // reads of the queue that got an answer
	Queued      int `json:"queued_seen"` // distinct refunds seen in the queue
	TopUps      int `json:"top_ups"`     // merchant accounts topped up (found short)
	Retries     int `json:"retries"`     // refunds sent again
	Resolutions int `json:"resolutions"` // refunds paid back outside the channel
	// Errors counts calls that failed (mostly while the server restarted); each was tried
	// again at a later look.
	Errors int `json:"errors"`
}

type operator struct {
	r     *runner
	every time.Duration

	mu    sync.Mutex
	stats OperatorStats
	seen  map[string]bool
	refs  map[string]string // out_refund_no → the reference of the transfer that paid it back
}

// startOperator puts an operator on duty until stop is called; stop waits for it to finish
// what it is doing and returns what it did.
func (r *runner) startOperator(ctx context.Context) (stop func() OperatorStats) {
	op := &operator{r: r, every: operatorEvery, seen: map[string]bool{}, refs: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(ctx, op.every) {
			op.look(ctx)
		}
	}()
	return func() OperatorStats {
		cancel()
		<-done
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.stats
	}
}

// look reads the queue once and acts on every refund in it.
func (op *operator) look(ctx context.Context) {
	queue, err := op.r.client.RefundQueue(ctx)
	if err != nil {
		op.failed(ctx, "queue", err)
		return
	}
	op.count(func(s *OperatorStats) { s.Looks++ })
	for _, rf := range queue {
		if ctx.Err() != nil {
			return
		}
		op.count(func(s *OperatorStats) {
			if !op.seen[rf.OutRefundNo] {
				op.seen[rf.OutRefundNo] = true
				s.Queued++
			}
		})
		ranOut := strings.HasPrefix(rf.Problem, "the channel refused it ")
		switch {
		case ranOut && balanceProblem(rf.Problem):
			// Another queued refund of the same shortage may have had the account topped up
			// already: the operator looks at it first.
			if op.r.sim.Short(rf.Channel) {
				if err := op.r.sim.TopUp(rf.Channel); err != nil {
					op.failed(ctx, "top-up", err)
					continue
				}
				op.count(func(s *OperatorStats) { s.TopUps++ })
			}
			fallthrough
		case ranOut:
			if _, err := op.r.client.RetryRefund(ctx, rf.OutRefundNo); err != nil {
				op.failed(ctx, "retry", err)
				continue
			}
			op.count(func(s *OperatorStats) { s.Retries++ })
		default:
			ref := op.reference(rf.OutRefundNo)
			note := fmt.Sprintf("chaos operator: %d fen paid back to the buyer by bank transfer (%s)", rf.Amount, rf.Problem)
			if _, err := op.r.client.ResolveRefund(ctx, rf.OutRefundNo, ref, note); err != nil {
				op.failed(ctx, "resolve", err)
				continue
			}
			op.count(func(s *OperatorStats) { s.Resolutions++ })
		}
	}
}

// balanceProblem reports whether a queued refund's problem is the merchant's balance: the
// channels' refusals name it (Alipay ACQ.SELLER_BALANCE_NOT_ENOUGH, WeChat Pay NOT_ENOUGH,
// and the adapters' words for both).
func balanceProblem(problem string) bool {
	return strings.Contains(problem, "NOT_ENOUGH") || strings.Contains(problem, "NOTENOUGH") || strings.Contains(problem, "balance")
}

// reference is the transfer's reference for a refund, the same at every try: resolving is
// idempotent for the same reference, so a resolution whose answer was lost in a crash can
// be sent again.
func (op *operator) reference(outRefundNo string) string {
	op.mu.Lock()
	defer op.mu.Unlock()
	ref, ok := op.refs[outRefundNo]
	if !ok {
		ref = fmt.Sprintf("CHAOS-BANK-%d", len(op.refs)+1)
		op.refs[outRefundNo] = ref
	}
	return ref
}

func (op *operator) count(f func(s *OperatorStats)) {
	op.mu.Lock()
	defer op.mu.Unlock()
	f(&op.stats)
}

// failed counts a failed call, unless the run is over (the stop cancelled it).
func (op *operator) failed(ctx context.Context, call string, err error) {
	if ctx.Err() != nil {
		return
	}
	op.count(func(s *OperatorStats) { s.Errors++ })
	op.r.stats.apiError("operator "+call, err)
}

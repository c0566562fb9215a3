package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"orderpay"
)

// testRefundClaimsOverSequences drives one refund through random sequences of what the
// workers of several instances, the channel's notifications and an operator do to it, and
// checks the store against a model after every step:
//   - a claim is taken only of a refund on its way (PENDING, PROCESSING) with no claim
//     standing, and it counts one more send;
//   - a worker's answer (accept, retry, escalate, reschedule) applies only under the last
//     claim taken, and ends that claim;
//   - the channel's "refunded" applies from every owed state, claim or not;
//   - anything else that is no worker's answer (an operator's retry, a notification's
//     "look now") applies only while no claim stands;
//   - a claim that lapses (its instance died) lets another worker claim the refund.
//
// Every refused step writes nothing.
func testRefundClaimsOverSequences(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	const lease = time.Minute
	applied, refused := map[string]int{}, map[string]int{}
	defer func() { t.Logf("applied %v; refused %v", applied, refused) }()
	for seq := range 25 {
		rng := rand.New(rand.NewPCG(uint64(seq), 31))
		order := fmt.Sprintf("RC%d", seq)
		no := "P" + order + "A01R1"
		paidAttempt(t, s, order, 1000)
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: "P" + order + "A01", PaymentNo: "P" + order,
				Channel: "alipay", Amount: 1000, Reason: "x", Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
		})
		now := t0
		// The model.
		status := orderpay.ChannelRefundPending
		sends, tries := 0, 0
		var claimedUntil time.Time
		tokens := map[int]int{} // worker → the claim it holds (0: none)
		standing := func() bool { return claimedUntil.After(now) }
		last := 0 // the worker that claimed last
		for step := range 60 {
			worker := rng.IntN(3)
			r, err := s.ChannelRefund(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			var what string
			var want bool
			var run func(tx orderpay.Tx) error
			op := rng.IntN(8)
			if op == 4 && rng.IntN(3) > 0 {
				op = 7 // the channel's "refunded" ends a sequence: seldom
			}
			if op == 2 || op == 3 {
				if rng.IntN(10) < 7 {
					worker = last // mostly the worker that claimed answers
				}
			}
			switch {
			case op <= 1:
				what = "claim"
				want = (status == orderpay.ChannelRefundPending || status == orderpay.ChannelRefundProcessing) && !standing()
				run = func(tx orderpay.Tx) error {
					claim, err := tx.ClaimChannelRefund(ctx, no, r.Status, r.Attempts, now.Add(lease), now)
					if err == nil {
						tokens[worker], last = claim, worker
					}
					return err
				}
			case op <= 3:
				from := status
				if rng.IntN(4) == 0 {
					from = orderpay.ChannelRefundProcessing // a worker that read an older state
				}
				token := tokens[worker]
				events := []struct {
					e  orderpay.ChannelRefundEvent
					to orderpay.ChannelRefundStatus
				}{{orderpay.ChannelRefundEventAccept, orderpay.ChannelRefundProcessing}, {orderpay.ChannelRefundEventRetry, orderpay.ChannelRefundPending},
					{orderpay.ChannelRefundEventEscalate, orderpay.ChannelRefundNeedsAction}, {"reschedule", from}}
				ev := events[rng.IntN(len(events))]
				what = fmt.Sprintf("answer %s from %s under claim %d", ev.e, from, token)
				onItsWay := from == orderpay.ChannelRefundPending || from == orderpay.ChannelRefundProcessing
				allowed := ev.e == "reschedule" && onItsWay || orderpay.ChannelRefundMachine.Permits(from, ev.e, ev.to)
				want = token > 0 && token == sends && from == status && allowed
				run = func(tx orderpay.Tx) error {
					if token == 0 {
						return orderpay.Errorf(orderpay.ECONFLICT, "no claim") // a worker answers only under a claim
					}
					if ev.e == "reschedule" {
						return tx.RescheduleChannelRefund(ctx, no, from, token, true, now, now)
					}
					return tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: no, From: from, To: ev.to, Event: ev.e,
						At: now, Actor: "channel:alipay", NextAt: now, Claim: token, Tries: tries + 1, RetryingSince: now, Problem: "p"})
				}
			case op == 4:
				what = "refunded (the channel's word)"
				want = status.Owed()
				run = func(tx orderpay.Tx) error {
					return tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: no, From: r.Status, To: orderpay.ChannelRefundSuccess,
						Event: orderpay.ChannelRefundEventSucceed, At: now, Actor: "channel:alipay", NextAt: now})
				}
			case op == 5:
				what = "a notification's look-now"
				want = (status == orderpay.ChannelRefundPending || status == orderpay.ChannelRefundProcessing) && !standing()
				run = func(tx orderpay.Tx) error { return tx.RescheduleChannelRefund(ctx, no, r.Status, 0, false, now, now) }
			case op == 6:
				what = "an operator's retry"
				want = status == orderpay.ChannelRefundNeedsAction && !standing()
				run = func(tx orderpay.Tx) error {
					return tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: no, From: r.Status, To: orderpay.ChannelRefundPending,
						Event: orderpay.ChannelRefundEventOperatorRetry, At: now, Actor: "operator:ann", NextAt: now})
				}
			default:
				what = "time passes"
				now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
				want = true
				run = func(orderpay.Tx) error { return nil }
			}
			err = s.InTx(ctx, run)
			if got := err == nil; got != want {
				t.Fatalf("seq %d step %d: %s (status %s, sends %d, claimed until %s, now %s): err %v, want applied %v",
					seq, step, what, status, sends, claimedUntil.Format(time.TimeOnly), now.Format(time.TimeOnly), err, want)
			}
			kind, _, _ := strings.Cut(what, " from")
			if err == nil {
				applied[kind]++
			} else {
				refused[kind]++
			}
			if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("seq %d step %d: %s: %v, want ECONFLICT", seq, step, what, err)
			}
			if err == nil {
				switch {
				case what == "claim":
					sends++
					claimedUntil = now.Add(lease)
				case what == "time passes":
				default:
					claimedUntil = time.Time{}
					r2, _ := s.ChannelRefund(ctx, no)
					status, tries = r2.Status, r2.Tries
				}
			}
			got, err := s.ChannelRefund(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != status || got.Sends != sends || !got.ClaimedUntil.Equal(claimedUntil) {
				t.Fatalf("seq %d step %d after %s: store %s sends %d claimed until %v; model %s sends %d claimed until %v",
					seq, step, what, got.Status, got.Sends, got.ClaimedUntil, status, sends, claimedUntil)
			}
		}
	}
}

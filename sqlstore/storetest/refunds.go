package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

// raceHeld runs first in a transaction that holds its commit while second runs in another,
// and lets first commit once second waits on its row lock (PostgreSQL) or after a moment
// (SQLite, where second waits on the store's write lock). It returns both results: the
// interleaving in which a read-then-update would miss the first change.
func raceHeld(t *testing.T, s orderpay.Store, first, second func(ctx context.Context, tx orderpay.Tx) error) (error, error) {
	t.Helper()
	return raceHeldOn(t, s, "UPDATE refunds SET status%", first, second)
}

// raceHeldOn is raceHeld where second, on PostgreSQL, waits on a lock in a statement that
// matches the LIKE pattern.
func raceHeldOn(t *testing.T, s orderpay.Store, pattern string, first, second func(ctx context.Context, tx orderpay.Tx) error) (error, error) {
	t.Helper()
	ctx := context.Background()
	held, commit, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		firstDone <- s.InTx(ctx, func(tx orderpay.Tx) error {
			err := first(ctx, tx)
			close(held)
			<-commit
			return err
		})
	}()
	<-held
	secondDone := make(chan error, 1)
	go func() { secondDone <- s.InTx(ctx, func(tx orderpay.Tx) error { return second(ctx, tx) }) }()
	var secondErr error
	finished := false
	wait := 200 * time.Millisecond
	if isPostgres(s) {
		wait = 3 * time.Second
	}
	for deadline := time.Now().Add(wait); !finished && time.Now().Before(deadline) && !waitingOn(ctx, s, pattern); {
		select {
		case secondErr = <-secondDone:
			finished = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(commit)
	firstErr := <-firstDone
	if !finished {
		secondErr = <-secondDone
	}
	return firstErr, secondErr
}

// The operators' queue: a refund escalates with its problem and leaves the due list; an
// operator's resolution and the channel's word that it refunded after all race for it, and
// exactly one moves it; two workers that met the same refusal for now count it once; an
// operator's retry starts a fresh schedule.
func testRefundQueue(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	paidAttempt(t, s, "OQ", 1000)
	newRefund := func(no string) {
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: "POQA01", PaymentNo: "POQ", Channel: "wechat",
				Amount: 400, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
		})
	}
	change := func(no string, from, to orderpay.ChannelRefundStatus, ev orderpay.ChannelRefundEvent, at time.Time) orderpay.ChannelRefundChange {
		return orderpay.ChannelRefundChange{OutRefundNo: no, From: from, To: to, Event: ev, At: at, Actor: "test", NextAt: at}
	}

	// Two workers met the same refusal for now: the second's record of it finds the first's
	// and is refused, so the schedule does not skip a step.
	newRefund("R1")
	retry := change("R1", orderpay.ChannelRefundPending, orderpay.ChannelRefundPending, orderpay.ChannelRefundEventRetry, t0)
	retry.Tries, retry.RetryingSince, retry.Problem, retry.NextAt = 1, t0, "NOT_ENOUGH", t0.Add(time.Minute)
	first, second := raceHeld(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, retry) },
		func(ctx context.Context, tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, retry) })
	if first != nil {
		t.Fatal(first)
	}
	wantCode(t, second, orderpay.ECONFLICT)
	r, err := s.ChannelRefund(ctx, "R1")
	if err != nil || r.Tries != 1 || r.Retried != 1 || !r.RetryingSince.Equal(t0) || r.Problem != "NOT_ENOUGH" || !r.NextAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after one refusal recorded twice: %+v, %v", r, err)
	}
	retry.Tries, retry.At, retry.NextAt = 2, t0.Add(time.Minute), t0.Add(6*time.Minute)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, retry) })

	// Out of retries: into the queue, off the due list.
	esc := change("R1", orderpay.ChannelRefundPending, orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventEscalate, t0.Add(time.Hour))
	esc.Problem = "retries ran out"
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, esc) })
	r, _ = s.ChannelRefund(ctx, "R1")
	if r.Status != orderpay.ChannelRefundNeedsAction || r.Problem != "retries ran out" || !r.NeedsActionAt.Equal(t0.Add(time.Hour)) || r.Tries != 2 || r.Retried != 2 {
		t.Fatalf("escalated: %+v", r)
	}
	if due, _ := s.DueChannelRefunds(ctx, t0.Add(48*time.Hour), 10); len(due) != 0 {
		t.Fatalf("a refund of the queue is due: %+v", due)
	}
	if q, err := s.RefundsNeedingAction(ctx, 10); err != nil || len(q) != 1 || q[0].OutRefundNo != "R1" {
		t.Fatalf("queue %+v, %v", q, err)
	}
	// An operator's retry: a fresh schedule, due now; the refusals so far are kept.
	op := change("R1", orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundPending, orderpay.ChannelRefundEventOperatorRetry, t0.Add(2*time.Hour))
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, op) })
	r, _ = s.ChannelRefund(ctx, "R1")
	if r.Status != orderpay.ChannelRefundPending || r.Tries != 0 || !r.RetryingSince.IsZero() || r.Retried != 2 {
		t.Fatalf("after an operator's retry: %+v", r)
	}
	if due, _ := s.DueChannelRefunds(ctx, t0.Add(2*time.Hour), 10); len(due) != 1 {
		t.Fatalf("an operator's retry is not due: %+v", due)
	}

	// An operator resolves a queued refund while the channel's word that it refunded comes
	// in: whichever commits first moves it, the other finds it moved.
	newRefund("R2")
	esc = change("R2", orderpay.ChannelRefundPending, orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventEscalate, t0)
	esc.Problem = "ABNORMAL"
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, esc) })
	resolve := change("R2", orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundResolved, orderpay.ChannelRefundEventResolve, t0.Add(time.Hour))
	resolve.ResolvedBy, resolve.ResolvedRef, resolve.ResolvedNote = "operator:li", "BANK-77", "sent to the buyer's new card"
	succeed := change("R2", orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventSucceed, t0.Add(time.Hour))
	first, second = raceHeld(t, s,
		func(ctx context.Context, tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, resolve) },
		func(ctx context.Context, tx orderpay.Tx) error { return tx.TransitionChannelRefund(ctx, succeed) })
	if first != nil {
		t.Fatal(first)
	}
	wantCode(t, second, orderpay.ECONFLICT)
	r, _ = s.ChannelRefund(ctx, "R2")
	if r.Status != orderpay.ChannelRefundResolved || r.ResolvedBy != "operator:li" || r.ResolvedRef != "BANK-77" ||
		r.ResolvedNote != "sent to the buyer's new card" || !r.RefundedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("resolved: %+v", r)
	}
	if q, _ := s.RefundsNeedingAction(ctx, 10); len(q) != 0 {
		t.Fatalf("queue after the resolution: %+v", q)
	}
	if h, _ := s.History(ctx, orderpay.EntityRefund, "R2"); len(h) != 3 || h[2].Actor != "test" || h[2].To != "RESOLVED" {
		t.Fatalf("history %+v", h)
	}
}

package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
)

// stepRecorder is a Stepper that lets every step go at once and writes down what it was
// told, in order: "begin", "stmt UPDATE payments", "note 1 row", "waiting write lock".
type stepRecorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *stepRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

func (r *stepRecorder) Step(ctx context.Context, kind orderpay.StepKind, what string) {
	if what == "" {
		r.add(string(kind))
		return
	}
	r.add(string(kind) + " " + what)
}

func (r *stepRecorder) Waiting(ctx context.Context, on string)  { r.add("waiting " + on) }
func (r *stepRecorder) Note(ctx context.Context, effect string) { r.add("note " + effect) }
func (r *stepRecorder) Released(ctx context.Context, what string) {
	r.add("released " + what)
}
func (r *stepRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.steps
	r.steps = nil
	return s
}

func (r *stepRecorder) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	got := r.take()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("%s: steps\n  %s\nwant\n  %s", what, strings.Join(got, " | "), strings.Join(want, " | "))
	}
}

// The store's steps, on both engines: a write transaction is its begin and its commit,
// and on PostgreSQL each of its statements in between (labelled by verb and table, a
// write's effect noted after it); on SQLite none, the transaction holding the database
// alone. A transaction ends in a release: its row locks, or SQLite's write lock, are let go
// (and a write alone on SQLite, which takes the write lock too). A statement run alone is
// one step, a write's effect noted. Without a Stepper in
// the context nothing is recorded. The SQLite store runs without its checkpointer, whose
// hold on the write lock would add a wait and its end to the sequence asserted here.
func TestStepsOfATransactionAndOfAStatementAlone(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, engine)
			if s.stopCheckpoints != nil {
				close(s.stopCheckpoints)
				<-s.checkpointsDone
				s.stopCheckpoints = nil
			}
			rec := &stepRecorder{}
			plain := context.Background()
			ctx := orderpay.WithStepper(plain, rec)
			at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

			// Seeded without a Stepper: nothing is recorded.
			if err := s.InTx(plain, func(tx orderpay.Tx) error {
				if err := tx.CreateOrder(plain, &orderpay.Order{No: "O1", BuyerID: "b1", Status: orderpay.OrderPendingPayment,
					Total: 100, Payable: 100, ProductType: orderpay.ProductNormal, PayDeadline: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at}); err != nil {
					return err
				}
				return tx.CreatePayment(plain, &orderpay.Payment{No: "P1", OrderNo: "O1", Amount: 100, Status: orderpay.PaymentUnpaid,
					PayDeadline: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at})
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Payment(plain, "P1"); err != nil {
				t.Fatal(err)
			}
			rec.expect(t, "without a Stepper")

			// One transaction of two statements: a read and a conditional write of one row.
			if err := s.InTx(ctx, func(tx orderpay.Tx) error {
				if o, err := tx.Order(ctx, "O1"); err != nil || o.Status != orderpay.OrderPendingPayment {
					return fmt.Errorf("order %+v, %v", o, err)
				}
				locked, err := tx.LockPrepay(ctx, "P1", at.Add(time.Minute), at)
				if err == nil && !locked {
					err = fmt.Errorf("the PAYING lock was not taken")
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if engine == "postgres" {
				rec.expect(t, "a transaction", "begin", "stmt SELECT orders", "stmt UPDATE payments", "note 1 row", "commit", "released transaction")
			} else {
				rec.expect(t, "a transaction", "begin", "commit", "released write lock")
			}

			// A write alone: one step, its effect noted; a read alone: one step.
			if err := s.UnlockPrepay(ctx, "P1"); err != nil {
				t.Fatal(err)
			}
			if engine == "postgres" {
				rec.expect(t, "a write alone", "stmt UPDATE payments", "note 1 row")
			} else {
				rec.expect(t, "a write alone", "stmt UPDATE payments", "released write lock", "note 1 row")
			}
			if _, err := s.Payment(ctx, "P1"); err != nil {
				t.Fatal(err)
			}
			rec.expect(t, "a read alone", "stmt SELECT payments")
		})
	}
}

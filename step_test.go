package orderpay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"orderpay"
)

// recorder is a Stepper that writes down what it is told, with whether the context it was
// given is the operation's (the one the step was marked in).
type recorder struct {
	mu   sync.Mutex
	seen []string
	want context.Context
}

func (r *recorder) add(ctx context.Context, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx != r.want {
		s += " (another context)"
	}
	r.seen = append(r.seen, s)
}

func (r *recorder) Step(ctx context.Context, kind orderpay.StepKind, what string) {
	r.add(ctx, "step "+string(kind)+" "+what)
}
func (r *recorder) Waiting(ctx context.Context, on string)  { r.add(ctx, "waiting "+on) }
func (r *recorder) Note(ctx context.Context, effect string) { r.add(ctx, "note "+effect) }
func (r *recorder) Released(ctx context.Context, what string) {
	r.add(ctx, "released "+what)
}

type depthKey int

// deepContext is parent under depth values and two cancels, as a request's context is
// under net/http's and the middlewares' by the time it reaches the store.
func deepContext(t testing.TB, parent context.Context, depth int) context.Context {
	ctx, cancel := context.WithCancel(parent)
	t.Cleanup(cancel)
	for i := range depth {
		ctx = context.WithValue(ctx, depthKey(i), i)
		if i == depth/2 {
			ctx, cancel = context.WithCancel(ctx)
			t.Cleanup(cancel)
		}
	}
	return ctx
}

// Step, StepWaiting, StepNote and StepReleased reach the Stepper installed in the context, however deep
// under other values, with their kind and text and the operation's own context; the
// innermost Stepper is the one told; without one they do nothing.
func TestStepReachesTheInstalledStepperOnly(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	if orderpay.StepperOf(base) != nil {
		t.Fatal("a Stepper in a context with none installed")
	}
	outer := &recorder{}
	rec := &recorder{}
	ctx := deepContext(t, orderpay.WithStepper(deepContext(t, orderpay.WithStepper(base, outer), 3), rec), 8)
	rec.want = ctx
	if orderpay.StepperOf(ctx) != rec {
		t.Fatalf("StepperOf = %v, want the innermost one installed", orderpay.StepperOf(ctx))
	}

	orderpay.Step(ctx, orderpay.StepBegin, "")
	orderpay.Step(ctx, orderpay.StepStatement, "UPDATE orders")
	orderpay.StepNote(ctx, "1 row")
	orderpay.StepWaiting(ctx, "write lock")
	orderpay.Step(ctx, orderpay.StepAcquired, "write lock")
	orderpay.Step(ctx, orderpay.StepCommit, "")
	orderpay.StepReleased(ctx, "write lock")
	orderpay.Step(ctx, orderpay.StepCall, "alipay.precreate")
	orderpay.StepNote(ctx, "answer 10000")
	want := []string{"step begin ", "step stmt UPDATE orders", "note 1 row", "waiting write lock", "step acquired write lock",
		"step commit ", "released write lock", "step call alipay.precreate", "note answer 10000"}
	if got := strings.Join(rec.seen, " | "); got != strings.Join(want, " | ") {
		t.Fatalf("the Stepper was told\n  %s\nwant\n  %s", got, strings.Join(want, " | "))
	}
	if len(outer.seen) != 0 {
		t.Fatalf("the outer Stepper was told %v", outer.seen)
	}

	// Without one: nothing to tell, nothing panics, and the Steppers of other contexts
	// hear nothing.
	rec.seen, outer.seen = nil, nil
	for _, c := range []context.Context{context.Background(), deepContext(t, base, 8)} {
		orderpay.Step(c, orderpay.StepBegin, "")
		orderpay.StepWaiting(c, "write lock")
		orderpay.StepNote(c, "1 row")
		orderpay.StepReleased(c, "transaction")
		if orderpay.StepperOf(c) != nil {
			t.Fatal("a Stepper in a context with none installed")
		}
	}
	if len(rec.seen)+len(outer.seen) != 0 {
		t.Fatalf("steps without a Stepper reached one: %v %v", rec.seen, outer.seen)
	}
}

// What a step costs in production, where no Stepper is installed: one lookup down the
// context's chain that finds nothing. The store marks one for each statement run alone,
// and a write transaction's begin and commit.
func BenchmarkStepWithoutStepper(b *testing.B) {
	for _, depth := range []int{0, 8} {
		b.Run(fmt.Sprintf("values=%d", depth), func(b *testing.B) {
			ctx := deepContext(b, context.Background(), depth)
			b.ReportAllocs()
			for b.Loop() {
				orderpay.Step(ctx, orderpay.StepStatement, "UPDATE orders")
			}
		})
	}
}

// StepperOf alone, as sqlstore's statements call it (then nothing more without one).
func BenchmarkStepperOfWithoutStepper(b *testing.B) {
	ctx := deepContext(b, context.Background(), 8)
	b.ReportAllocs()
	for b.Loop() {
		if orderpay.StepperOf(ctx) != nil {
			b.Fatal("a Stepper")
		}
	}
}

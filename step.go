package orderpay

import "context"

// A step is a boundary in an operation that touches money, stock or a state machine, at
// which another operation may meet it: a transaction's begin and commit, a statement, a
// channel call and its answer, a bus publish and its ack, a timer or sweeper firing, a
// retention pass. The interleaving explorer (package explore, docs/explorer.md) installs a
// Stepper in an operation's context and decides, at each step, what runs next. Without one
// (production) a step is one context lookup that finds nothing.
type StepKind string

// The kinds of step.
const (
	StepBegin     StepKind = "begin"    // a write transaction is about to start (nothing held yet)
	StepStatement StepKind = "stmt"     // a statement is about to run
	StepCommit    StepKind = "commit"   // a transaction's work is done; it is about to commit
	StepCall      StepKind = "call"     // a channel call is about to be sent
	StepAnswer    StepKind = "answer"   // a channel call's answer arrived, not yet acted on
	StepPublish   StepKind = "publish"  // a bus message is about to be handed to its consumer
	StepAck       StepKind = "ack"      // a consumer handled a message; the ack is about to go
	StepFire      StepKind = "fire"     // a timer or sweeper fires
	StepRetain    StepKind = "retain"   // a retention pass is about to delete
	StepAcquired  StepKind = "acquired" // a lock the operation waited for is now its own
)

// Stepper is what the explorer installs in an operation's context.
type Stepper interface {
	// Step is called at a step boundary, before what it names happens, and returns when the
	// operation may go on.
	Step(ctx context.Context, kind StepKind, what string)
	// Waiting tells that the operation is about to wait for a lock another one holds. It
	// does not block.
	Waiting(ctx context.Context, on string)
	// Note records the effect of what the last step named (rows changed, an answer). It
	// does not block.
	Note(ctx context.Context, effect string)
	// Released tells that the operation let go of what another may be waiting for: its
	// transaction ended (its row locks with it), or SQLite's write lock. It does not block.
	// Until one is let go, an operation waiting for a lock cannot go on.
	Released(ctx context.Context, what string)
}

type stepperKey struct{}

// WithStepper is ctx with s installed: every step of an operation run in it goes to s.
func WithStepper(ctx context.Context, s Stepper) context.Context {
	return context.WithValue(ctx, stepperKey{}, s)
}

// StepperOf is the Stepper installed in ctx, or nil.
func StepperOf(ctx context.Context) Stepper {
	s, _ := ctx.Value(stepperKey{}).(Stepper)
	return s
}

// Step marks a step boundary: a no-op unless a Stepper is installed in ctx.
func Step(ctx context.Context, kind StepKind, what string) {
	if s := StepperOf(ctx); s != nil {
		s.Step(ctx, kind, what)
	}
}

// StepWaiting tells the Stepper in ctx, if any, that the operation is about to wait for on.
func StepWaiting(ctx context.Context, on string) {
	if s := StepperOf(ctx); s != nil {
		s.Waiting(ctx, on)
	}
}

// StepNote records an effect with the Stepper in ctx, if any.
func StepNote(ctx context.Context, effect string) {
	if s := StepperOf(ctx); s != nil {
		s.Note(ctx, effect)
	}
}

// StepReleased tells the Stepper in ctx, if any, that the operation let go of what.
func StepReleased(ctx context.Context, what string) {
	if s := StepperOf(ctx); s != nil {
		s.Released(ctx, what)
	}
}

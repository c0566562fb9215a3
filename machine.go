package orderpay

import "slices"

// Transition is one row of a state machine's table: in state From, Event leads to To.
type Transition[S ~string, E ~string] struct {
	From  S
	Event E
	To    S
}

// Machine is a state machine given by its transition table. Anything not in the table is
// refused with ECONFLICT, never silently ignored (docs/design.md §4).
type Machine[S ~string, E ~string] struct {
	name  string
	rows  []Transition[S, E]
	next  map[S]map[E]S
	final map[S]bool
}

// NewMachine builds a machine from its table. States that appear only as a target are final.
func NewMachine[S ~string, E ~string](name string, rows []Transition[S, E]) *Machine[S, E] {
	m := &Machine[S, E]{name: name, rows: rows, next: map[S]map[E]S{}, final: map[S]bool{}}
	for _, r := range rows {
		if m.next[r.From] == nil {
			m.next[r.From] = map[E]S{}
		}
		if _, dup := m.next[r.From][r.Event]; dup {
			panic("orderpay: " + name + ": duplicate transition " + string(r.From) + " --" + string(r.Event) + "-->")
		}
		m.next[r.From][r.Event] = r.To
	}
	for _, r := range rows {
		if m.next[r.To] == nil {
			m.final[r.To] = true
		}
	}
	return m
}

// Next returns the state that event leads to from the state from, or ECONFLICT.
func (m *Machine[S, E]) Next(from S, event E) (S, error) {
	if to, ok := m.next[from][event]; ok {
		return to, nil
	}
	var zero S
	return zero, Errorf(ECONFLICT, "%s: %s is not allowed in state %s", m.name, event, from)
}

// Name is the machine's name, as its errors and the store's refusals say it.
func (m *Machine[S, E]) Name() string { return m.name }

// Permits reports whether the table has the row from --event--> to.
func (m *Machine[S, E]) Permits(from S, event E, to S) bool {
	got, ok := m.next[from][event]
	return ok && got == to
}

// PermitsNames is Permits of the states and the event by their names: how a store, which
// holds them as text, checks a transition (TransitionChecker).
func (m *Machine[S, E]) PermitsNames(from, event, to string) bool {
	return m.Permits(S(from), E(event), S(to))
}

// Refuse is the ECONFLICT of a transition the table does not have, naming the machine,
// the entity and the pair.
func (m *Machine[S, E]) Refuse(key, from, event, to string) error {
	return Errorf(ECONFLICT, "%s %s: %s --%s--> %s is not a transition of its machine", m.name, key, from, event, to)
}

// StateNames and EventNames are States and Events by their names.
func (m *Machine[S, E]) StateNames() []string { return names(m.States()) }
func (m *Machine[S, E]) EventNames() []string { return names(m.Events()) }

func names[T ~string](ts []T) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// TransitionChecker is any machine read by names: what the store checks every transition
// of an entity against before it writes anything (docs/design.md §4).
type TransitionChecker interface {
	Name() string
	PermitsNames(from, event, to string) bool
	Refuse(key, from, event, to string) error
	StateNames() []string
	EventNames() []string
}

// Final reports whether no transition leaves state s.
func (m *Machine[S, E]) Final(s S) bool { return m.final[s] }

// EventTo is the event of the first transition into to ("" for a state no event reaches):
// for a machine whose states are each reached by one event, the event that ends in to.
func (m *Machine[S, E]) EventTo(to S) E {
	for _, t := range m.Table() {
		if t.To == to {
			return t.Event
		}
	}
	return ""
}

// Known reports whether the table mentions state s.
func (m *Machine[S, E]) Known(s S) bool { _, from := m.next[s]; return from || m.final[s] }

// Table returns a copy of the transition table, for tests and documentation.
func (m *Machine[S, E]) Table() []Transition[S, E] { return slices.Clone(m.rows) }

// States returns every state the table mentions, in order of first appearance.
func (m *Machine[S, E]) States() []S {
	var out []S
	for _, r := range m.rows {
		for _, s := range []S{r.From, r.To} {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Events returns every event the table mentions, in order of first appearance.
func (m *Machine[S, E]) Events() []E {
	var out []E
	for _, r := range m.rows {
		if !slices.Contains(out, r.Event) {
			out = append(out, r.Event)
		}
	}
	return out
}

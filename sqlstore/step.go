package sqlstore

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"orderpay"
)

// step marks a statement as a step (orderpay.Step) for the explorer, if one runs this
// operation: every statement outside a transaction, on both engines, and every statement
// inside one on PostgreSQL, where another transaction's statements interleave with them
// (on SQLite a write transaction holds the database alone, and a reader sees what was
// committed before it began, so a step inside one would show nothing new). It reports
// whether the statement is a step, for its effect to be noted.
func (q *queries) step(ctx context.Context, query string) bool {
	st := orderpay.StepperOf(ctx)
	if st == nil || (q.tx != nil && !q.d.numbered) {
		return false
	}
	st.Step(ctx, orderpay.StepStatement, statementLabel(query))
	return true
}

// statementLabels remembers each query's label: the explorer runs the same few hundred.
var statementLabels sync.Map

// statementLabel names a query by its verb and its table: "UPDATE orders",
// "SELECT payments", "INSERT transitions".
func statementLabel(query string) string {
	if l, ok := statementLabels.Load(query); ok {
		return l.(string)
	}
	words := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(query, "(", " "), ",", " "))
	label := "statement"
	if len(words) > 0 {
		verb := strings.ToUpper(words[0])
		label = verb
		after := map[string]string{"SELECT": "FROM", "DELETE": "FROM", "INSERT": "INTO", "UPDATE": "", "WITH": ""}
		if key, ok := after[verb]; ok {
			for i, w := range words[1:] {
				if key == "" || strings.EqualFold(w, key) {
					j := i + 1
					if key != "" {
						j = i + 2
					}
					if j < len(words) {
						label += " " + strings.Trim(words[j], `"`)
					}
					break
				}
			}
		}
	}
	statementLabels.Store(query, label)
	return label
}

// effect is what a write statement did, for the explorer's trace.
func effect(rows int64, err error) string {
	if err != nil {
		return "error: " + orderpay.ErrorMessage(err)
	}
	if rows == 1 {
		return "1 row"
	}
	return strconv.FormatInt(rows, 10) + " rows"
}

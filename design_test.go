package orderpay_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"orderpay"
	"orderpay/webhook"
)

// rowsOf renders a machine's table as the design document writes it.
func rowsOf[S ~string, E ~string](m *orderpay.Machine[S, E]) []string {
	var out []string
	for _, t := range m.Table() {
		out = append(out, fmt.Sprintf("| `%s` | %s | `%s` |", t.From, t.Event, t.To))
	}
	return out
}

// The state machines in docs/design.md §4 are the code's, row for row: a transition added,
// removed or renamed in the code without the design saying so fails here.
func TestDesignDocMatchesTheStateMachines(t *testing.T) {
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"order":          rowsOf(orderpay.OrderMachine),
		"payment":        rowsOf(orderpay.PaymentMachine),
		"channel order":  rowsOf(orderpay.ChannelOrderMachine),
		"channel refund": rowsOf(orderpay.ChannelRefundMachine),
		"shipment":       rowsOf(orderpay.ShipmentMachine),
		"after-sale":     rowsOf(orderpay.AfterSaleMachine),
		"app payment":    rowsOf(orderpay.AppPaymentMachine),
		"stock hold":     rowsOf(orderpay.HoldMachine),
		"ticket":         rowsOf(orderpay.TicketMachine),
		// The one machine outside the root package: a delivery's states are the webhook
		// package's.
		"webhook delivery": rowsOf(webhook.DeliveryMachine),
	}
	block := regexp.MustCompile(`(?s)<!-- machine: ([a-z -]+) -->\n(.*?)<!-- end machine -->`)
	seen := map[string]bool{}
	for _, m := range block.FindAllStringSubmatch(string(doc), -1) {
		name := m[1]
		rows, ok := want[name]
		if !ok {
			t.Errorf("docs/design.md has a machine %q the code does not", name)
			continue
		}
		seen[name] = true
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(m[2]), "\n") {
			if strings.HasPrefix(line, "| `") {
				got = append(got, strings.TrimSpace(line))
			}
		}
		for _, r := range rows {
			if !slices.Contains(got, r) {
				t.Errorf("docs/design.md, machine %s: missing %s", name, r)
			}
		}
		for _, r := range got {
			if !slices.Contains(rows, r) {
				t.Errorf("docs/design.md, machine %s: %s is not in the code", name, r)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("docs/design.md does not show the %s machine", name)
		}
	}
}

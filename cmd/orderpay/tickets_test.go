package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
)

type ticketView struct {
	ID       string `json:"ticket_id"`
	State    string `json:"state"`
	Position int64  `json:"position"`
	OrderNo  string `json:"order_no"`
}

// A queued SKU through the API: the order request answers 202 and a ticket, the ticket's
// event stream follows its position down to its order and ends, and the order is the
// buyer's to pay like any other.
func TestTicketStreamFollowsThePositionToTheOrder(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + c.AdminToken}}
	if err := c.call(ctx, http.MethodPost, m.URL+"/admin/skus", admin, map[string]any{"sku": "queued-tea", "merchant_id": "m1",
		"title": "Queued tea", "price": 990, "stock": 5, "queued": true, "queue_pace": 2}, nil); err != nil {
		t.Fatal(err)
	}
	place := func(buyer string) (int, http.Header, ticketView) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL+"/v1/orders",
			strings.NewReader(fmt.Sprintf(`{"buyer_id":%q,"items":[{"sku":"queued-tea","qty":1}]}`, buyer)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tk ticketView
		_ = json.NewDecoder(resp.Body).Decode(&tk)
		return resp.StatusCode, resp.Header, tk
	}
	var last ticketView
	for i := range 3 {
		code, h, tk := place(fmt.Sprintf("q%d", i))
		if code != http.StatusAccepted || h.Get("Location") != "/v1/tickets/"+tk.ID || tk.State != "WAITING" || tk.Position < 1 {
			t.Fatalf("buyer q%d: %d %v %+v", i, code, h, tk)
		}
		last = tk
	}
	// The same buyer again: the same ticket, said to be a replay.
	if code, h, tk := place("q2"); code != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || tk.ID != last.ID {
		t.Errorf("q2 again: %d %v %+v", code, h, tk)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/v1/tickets/"+last.ID+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream answered %d %s", resp.StatusCode, ct)
	}
	var seen []ticketView
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var tk ticketView
			if err := json.Unmarshal([]byte(v), &tk); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, tk)
		}
	}
	// At two orders a second, the third arrival waits a second or so: the stream saw it
	// waiting, then ordered, and nothing after.
	if n := len(seen); n < 2 || seen[0].State != "WAITING" || seen[n-1].State != string(orderpay.TicketOrdered) || seen[n-1].OrderNo == "" || seen[n-1].Position != 0 {
		t.Fatalf("the stream sent %+v", seen)
	}
	for i := 1; i < len(seen)-1; i++ {
		if seen[i].Position > seen[i-1].Position {
			t.Errorf("the position rose: %+v", seen)
		}
	}
	o, err := c.order(ctx, seen[len(seen)-1].OrderNo)
	if err != nil || o.Status != string(orderpay.OrderPendingPayment) {
		t.Fatalf("the ticket's order: %+v, %v", o, err)
	}
	if _, err := c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay); err != nil {
		t.Errorf("paying the ticket's order: %v", err)
	}
	// A queued SKU with another line is refused, and a ticket that is not one is not found.
	if err := c.call(ctx, http.MethodPost, m.URL+"/v1/orders", nil, map[string]any{"buyer_id": "mixed",
		"items": []map[string]any{{"sku": "queued-tea", "qty": 1}, {"sku": "queued-tea", "qty": 1}}}, nil); apiCode(err) != orderpay.EINVALID {
		t.Errorf("two lines of a queued SKU: %v, want EINVALID", err)
	}
	if code, _, _ := get(t, m.URL+"/v1/tickets/T000000000000000000000000", nil); code != http.StatusNotFound {
		t.Errorf("an unknown ticket: %d, want 404", code)
	}
}

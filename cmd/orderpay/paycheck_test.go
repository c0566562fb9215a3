package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay/sqlstore/storetest"
)

// demoCall sends a request to the API as the buyer X-Buyer-Id names ("" for none) and
// returns its status and error.
func demoCall(t *testing.T, m *Main, method, path, buyer, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, m.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if buyer != "" {
		req.Header.Set("X-Buyer-Id", buyer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code, e.Error.Message
}

// A pay request is checked before the order's state: a channel or method that is none of
// the server's is 400 EINVALID naming the field, on a paid order as on any, never the
// state's 409.
func TestPayRequestIsCheckedBeforeTheOrdersState(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); payCheckedFirst(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); payCheckedFirst(t, storetest.PostgresDSN(t)) })
}

func payCheckedFirst(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := c.createOrder(ctx, "carol", "tea-longjing-250g", 1)
	if err != nil {
		t.Fatal(err)
	}
	payByAlipay(ctx, t, c, o.OrderNo)
	before := rowCounts(t, m)
	for _, r := range []struct{ no, buyer, body, field string }{
		{o.OrderNo, "carol", `{"channel":"unionpay"}`, "channel"},
		{o.OrderNo, "", `{"channel":"unionpay"}`, "channel"},
		{o.OrderNo, "carol", `{"channel":"alipay","method":"nfc"}`, "method"},
		{"20990101000000000000", "carol", `{"channel":"unionpay"}`, "channel"},
	} {
		status, code, msg := demoCall(t, m, "POST", "/v1/orders/"+r.no+"/pay", r.buyer, r.body)
		if status != http.StatusBadRequest || code != "EINVALID" || !strings.HasPrefix(msg, r.field) {
			t.Errorf("pay %s on %s: %d %s %q, want 400 EINVALID about %s", r.body, r.no, status, code, msg, r.field)
		}
	}
	if after := rowCounts(t, m); !maps.Equal(after, before) {
		t.Fatalf("refused pays wrote: %v -> %v", before, after)
	}
	// A good request on the paid order is still refused for its state.
	if status, code, _ := demoCall(t, m, "POST", "/v1/orders/"+o.OrderNo+"/pay", "carol", `{"channel":"wechat"}`); status != http.StatusConflict {
		t.Errorf("a good pay on a paid order: %d %s, want 409", status, code)
	}
}

package main

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"orderpay/sqlstore/storetest"
)

// demoRows counts what a buyer's request could write, after-sales requests and addresses
// included.
func demoRows(t *testing.T, m *Main) map[string]int {
	t.Helper()
	rows := rowCounts(t, m)
	for name, q := range map[string]string{
		"after_sales":            `SELECT COUNT(*) FROM after_sales`,
		"orders with an address": `SELECT COUNT(*) FROM orders WHERE address_name <> ''`,
	} {
		var n int
		if err := m.Store.DB().QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows[name] = n
	}
	return rows
}

// In the demo (--buyer-auth none) the buyer X-Buyer-Id names is held to their own orders as
// a signed-in buyer is, on both engines: another buyer's order is 404 on every buyer route,
// read or write, and nothing is written; its own buyer gets 200.
func TestDemoBuyerActsOnlyOnTheirOwnOrders(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); demoOwnership(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); demoOwnership(t, storetest.PostgresDSN(t)) })
}

func demoOwnership(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if status, code, msg := demoCall(t, m, "POST", "/v1/orders", "alice", `{"buyer_id":"alice","items":[{"sku":"tea-longjing-250g","qty":1}]}`); status != http.StatusCreated {
		t.Fatalf("alice's create: %d %s %s", status, code, msg)
	}
	var paid string
	if err := m.Store.DB().QueryRow(`SELECT order_no FROM orders WHERE buyer_id = 'alice'`).Scan(&paid); err != nil {
		t.Fatal(err)
	}
	payByAlipay(ctx, t, c, paid)
	status, _, msg := demoCall(t, m, "POST", "/v1/orders", "alice", `{"buyer_id":"alice","items":[{"sku":"tea-longjing-250g","qty":2}]}`)
	if status != http.StatusCreated {
		t.Fatalf("alice's second create: %d %s", status, msg)
	}
	var unpaid string
	if err := m.Store.DB().QueryRow(`SELECT order_no FROM orders WHERE buyer_id = 'alice' AND status = 'PENDING_PAYMENT'`).Scan(&unpaid); err != nil {
		t.Fatal(err)
	}

	before := demoRows(t, m)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/orders/" + unpaid, ""},
		{"GET", "/v1/orders/" + paid, ""},
		{"POST", "/v1/orders/" + unpaid + "/cancel", ""},
		{"POST", "/v1/orders/" + unpaid + "/pay", `{"channel":"alipay"}`},
		{"POST", "/v1/orders/" + unpaid + "/return", `{"query":"?out_trade_no=x"}`},
		{"PATCH", "/v1/orders/" + unpaid + "/address", `{"name":"Bob","phone":"13800138000","detail":"2 Wensan Road, Hangzhou"}`},
		{"POST", "/v1/orders/" + paid + "/refunds", `{"kind":"refund","reason":"mine now","items":[{"line":1,"qty":1}]}`},
		{"GET", "/v1/orders/" + paid + "/refunds", ""},
		{"GET", "/v1/orders/" + unpaid + "/qr.png", ""},
	} {
		if status, code, msg := demoCall(t, m, r.method, r.path, "bob", r.body); status != http.StatusNotFound || code != "ENOTFOUND" {
			t.Errorf("bob's %s %s: %d %s %s, want 404 ENOTFOUND", r.method, r.path, status, code, msg)
		}
	}
	// Naming alice in the body does not make bob alice.
	if status, code, _ := demoCall(t, m, "POST", "/v1/orders/"+paid+"/refunds", "bob",
		`{"buyer_id":"alice","kind":"refund","items":[{"line":1,"qty":1}]}`); status != http.StatusForbidden || code != "EFORBIDDEN" {
		t.Errorf("bob naming alice in the body: %d %s, want 403 EFORBIDDEN", status, code)
	}
	if after := demoRows(t, m); !maps.Equal(after, before) {
		t.Fatalf("another buyer's requests wrote: %v -> %v", before, after)
	}

	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/orders/" + unpaid},
		{"GET", "/v1/orders/" + paid},
		{"GET", "/v1/orders/" + paid + "/refunds"},
		{"POST", "/v1/orders/" + unpaid + "/cancel"},
	} {
		if status, code, msg := demoCall(t, m, r.method, r.path, "alice", ""); status != http.StatusOK {
			t.Errorf("alice's %s %s: %d %s %s, want 200", r.method, r.path, status, code, msg)
		}
	}
	if status, code, msg := demoCall(t, m, "GET", "/v1/orders/"+paid, "not a buyer id", ""); status != http.StatusBadRequest {
		t.Errorf("a malformed X-Buyer-Id: %d %s %s, want 400", status, code, msg)
	}
}

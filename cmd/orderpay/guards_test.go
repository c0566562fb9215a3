package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"orderpay"
)

// Through the API: an Idempotency-Key gives the first order back (200, Idempotent-Replayed)
// and refuses another request (422 EIDEMPOTENCY, nothing written); without a key, the same
// request again is the duplicate guard's replay.
func TestCreateOrderIsIdempotentOverHTTP(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	if err := c.createSKU(context.Background(), "kettle", 5900, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status   int
		replayed string
		orderNo  string
		code     string
	}
	post := func(key, body string) answer {
		t.Helper()
		req, _ := http.NewRequest("POST", m.URL+"/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			OrderNo string `json:"order_no"`
			Error   struct{ Code string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return answer{resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), out.OrderNo, out.Error.Code}
	}
	one := `{"buyer_id":"dora","items":[{"sku":"kettle","qty":1}]}`
	two := `{"buyer_id":"dora","items":[{"sku":"kettle","qty":2}]}`

	first := post("checkout-7f3a", one)
	if first.status != http.StatusCreated || first.replayed != "" || first.orderNo == "" {
		t.Fatalf("first: %+v", first)
	}
	if again := post("checkout-7f3a", one); again != (answer{http.StatusOK, "true", first.orderNo, ""}) {
		t.Fatalf("same key again: %+v, want 200 replay of %s", again, first.orderNo)
	}
	before := rowCounts(t, m)
	if reused := post("checkout-7f3a", two); reused.status != http.StatusUnprocessableEntity || reused.code != orderpay.EIDEMPOTENCY {
		t.Fatalf("same key, other body: %+v, want 422 EIDEMPOTENCY", reused)
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("the refused request wrote rows: before %v, after %v", before, after)
	}

	guarded := post("", two)
	if guarded.status != http.StatusCreated || guarded.orderNo == first.orderNo {
		t.Fatalf("no key, new request: %+v", guarded)
	}
	if dup := post("", two); dup != (answer{http.StatusOK, "true", guarded.orderNo, ""}) {
		t.Fatalf("no key, same request at once: %+v, want 200 replay of %s", dup, guarded.orderNo)
	}
}

// Through the API: a SKU's per-buyer limit counts units in orders not cancelled (409
// ELIMIT past it, nothing written; a cancel gives the units back); a blocked buyer or
// device gets 403 EFORBIDDEN until unblocked; the blocklist is admin-only.
func TestPurchaseLimitAndBlocklistOverHTTP(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx := context.Background()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	var sku struct {
		LimitPerBuyer int64 `json:"limit_per_buyer"`
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/skus", admin, map[string]any{"sku": "mask", "merchant_id": "m1", "title": "N95 mask box",
		"price": 2900, "stock": 100, "limit_per_buyer": 2}, &sku); err != nil || sku.LimitPerBuyer != 2 {
		t.Fatalf("create a SKU with a limit: %+v, %v", sku, err)
	}
	create := func(buyer, device string, qty int64) (*orderView, error) {
		var o orderView
		h := http.Header{}
		if device != "" {
			h.Set("X-Device-Id", device)
		}
		err := c.call(ctx, "POST", m.URL+"/v1/orders", h, map[string]any{"buyer_id": buyer, "items": []map[string]any{{"sku": "mask", "qty": qty}}}, &o)
		return &o, err
	}
	first, err := create("erin", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	before := rowCounts(t, m)
	if _, err := create("erin", "", 1); apiCode(err) != orderpay.ELIMIT || err.(*apiError).Status != http.StatusConflict {
		t.Fatalf("a third unit for erin: %v; want 409 ELIMIT", err)
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("the refused order wrote rows: before %v, after %v", before, after)
	}
	if _, err := create("finn", "", 2); err != nil {
		t.Fatalf("another buyer within the limit: %v", err)
	}
	if _, err := c.Cancel(ctx, first.OrderNo); err != nil {
		t.Fatal(err)
	}
	if _, err := create("erin", "", 2); err != nil {
		t.Fatalf("erin after cancelling her first order: %v", err)
	}

	call := func(method, path string, header http.Header, body any) error {
		return c.call(ctx, method, m.URL+path, header, body, nil)
	}
	if err := call("PUT", "/admin/blocklist/buyer/gus", nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("blocking without the token: %v", err)
	}
	if err := call("PUT", "/admin/blocklist/planet/gus", admin, nil); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("an unknown kind: %v", err)
	}
	if err := call("PUT", "/admin/blocklist/buyer/gus", admin, map[string]string{"reason": "card testing"}); err != nil {
		t.Fatal(err)
	}
	if err := call("PUT", "/admin/blocklist/device/phone-9", admin, nil); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Blocklist []struct{ Kind, Value, Reason string } `json:"blocklist"`
	}
	if err := c.call(ctx, "GET", m.URL+"/admin/blocklist", admin, nil, &list); err != nil || len(list.Blocklist) != 2 || list.Blocklist[0].Reason != "card testing" {
		t.Fatalf("blocklist %+v, %v", list, err)
	}
	before = rowCounts(t, m)
	for _, tc := range []struct{ buyer, device string }{{"gus", ""}, {"hana", "phone-9"}} {
		if _, err := create(tc.buyer, tc.device, 1); apiCode(err) != orderpay.EFORBIDDEN || err.(*apiError).Status != http.StatusForbidden {
			t.Fatalf("buyer %s on device %q: %v; want 403 EFORBIDDEN", tc.buyer, tc.device, err)
		}
	}
	if after := rowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("blocked orders wrote rows: before %v, after %v", before, after)
	}
	if _, err := create("hana", "phone-10", 1); err != nil {
		t.Fatalf("hana on another device: %v", err)
	}
	if err := call("DELETE", "/admin/blocklist/buyer/gus", admin, nil); err != nil {
		t.Fatal(err)
	}
	if err := call("DELETE", "/admin/blocklist/buyer/gus", admin, nil); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("unblocking twice: %v", err)
	}
	if _, err := create("gus", "", 1); err != nil {
		t.Fatalf("gus after unblocking: %v", err)
	}
}

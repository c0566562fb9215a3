package main

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"

	"orderpay"
	"orderpay/chaos"
	"orderpay/sqlstore/storetest"
)

// Through the API, on both engines: the finding, one buyer ordering a product's whole
// stock (5,000 of 5,000) in one request, is 409 EQUANTITYCAP and writes nothing, so the
// next buyer still gets the product; a SKU created with caps of its own shows them and
// has them enforced; a shop that turns the cap off gets the old behaviour back.
func TestBuyerCapsOverHTTP(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); buyerCapsOverHTTP(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); buyerCapsOverHTTP(t, storetest.PostgresDSN(t)) })
}

func buyerCapsOverHTTP(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx := context.Background()
	if err := c.createSKU(ctx, "console", 299900, 5000, "normal"); err != nil {
		t.Fatal(err)
	}
	before := rowCounts(t, m)
	if _, err := c.createOrder(ctx, "mallory", "console", 5000); apiCode(err) != orderpay.EQUANTITYCAP || err.(*apiError).Status != http.StatusConflict {
		t.Fatalf("5000 of 5000 in one order: %v; want 409 EQUANTITYCAP", err)
	}
	if after := rowCounts(t, m); !maps.Equal(before, after) {
		t.Fatalf("the refused order wrote rows: before %v, after %v", before, after)
	}
	if _, err := c.createOrder(ctx, "next-buyer", "console", 1); err != nil {
		t.Fatalf("the next buyer: %v", err)
	}

	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	var sku struct {
		MaxPerOrder       int64 `json:"max_per_order"`
		MaxUnpaidPerBuyer int64 `json:"max_unpaid_per_buyer"`
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/skus", admin, map[string]any{"sku": "lantern", "merchant_id": "m1", "title": "Paper lantern",
		"price": 1500, "stock": 100, "product_type": "normal", "max_per_order": 2, "max_unpaid_per_buyer": 3}, &sku); err != nil || sku.MaxPerOrder != 2 || sku.MaxUnpaidPerBuyer != 3 {
		t.Fatalf("a SKU with caps of its own: %+v, %v", sku, err)
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/skus", admin, map[string]any{"sku": "kite", "merchant_id": "m1", "title": "Kite",
		"price": 1500, "stock": 100, "max_per_order": -1}, nil); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("a negative max_per_order: %v; want EINVALID", err)
	}
	if _, err := c.createOrder(ctx, "gus", "lantern", 3); apiCode(err) != orderpay.EQUANTITYCAP {
		t.Fatalf("3 lanterns in one order: %v; want EQUANTITYCAP", err)
	}
	if _, err := c.createOrder(ctx, "gus", "lantern", 2); err != nil {
		t.Fatal(err)
	}
	before = rowCounts(t, m)
	// Another key: the same request again without one would be the duplicate-submit
	// guard's replay of the first.
	if _, err := c.CreateOrder(ctx, "gus", "again", chaos.Item{SKU: "lantern", Qty: 2}); apiCode(err) != orderpay.EUNPAIDCAP || err.(*apiError).Status != http.StatusConflict {
		t.Fatalf("4 lanterns unpaid: %v; want 409 EUNPAIDCAP", err)
	}
	if after := rowCounts(t, m); !maps.Equal(before, after) {
		t.Fatalf("the refused order wrote rows: before %v, after %v", before, after)
	}

	// A shop that lifts the cap.
	_, c2 := startMain(t, "", func(m *Main) {
		if err := m.ParseFlags([]string{"--order-qty-cap", "normal=off", "--unpaid-qty-cap", "normal=0"}); err != nil {
			t.Fatal(err)
		}
	})
	if err := c2.createSKU(ctx, "console", 299900, 5000, "normal"); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.createOrder(ctx, "mallory", "console", 5000); err != nil {
		t.Fatalf("5000 of 5000 with the caps off: %v", err)
	}
}

// The cap flags default to orderpay.DefaultBuyerCaps, their variables set them, the flags
// win, a type left out keeps its value, and a bad value is refused with the flag's name.
func TestServeBuyerCapFlags(t *testing.T) {
	m := NewMain()
	var help strings.Builder
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags(nil); err != nil || !maps.Equal(m.Config.BuyerCaps, orderpay.DefaultBuyerCaps) {
		t.Fatalf("defaults %v, %v; want %v", m.Config.BuyerCaps, err, orderpay.DefaultBuyerCaps)
	}
	m.ParseFlags([]string{"-h"})
	for _, s := range []string{"-order-qty-cap", "ORDERPAY_ORDER_QTY_CAP", "(default normal=200,special=10,fast=5)", "-unpaid-qty-cap",
		"EUNPAIDCAP", "-unpaid-orders-cap", "ORDERPAY_UNPAID_ORDERS_CAP"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help does not mention %q", s)
		}
	}
	t.Setenv("ORDERPAY_UNPAID_ORDERS_CAP", "normal=7,fast=1")
	t.Setenv("ORDERPAY_ORDER_QTY_CAP", "fast=9")
	m = NewMain()
	if err := m.ParseFlags([]string{"--order-qty-cap", "fast=2,special=off", "--unpaid-qty-cap", "normal=40"}); err != nil {
		t.Fatal(err)
	}
	want := orderpay.BuyerCaps{
		orderpay.ProductNormal:  {PerOrder: 200, UnpaidUnits: 40, UnpaidOrders: 7},
		orderpay.ProductSpecial: {PerOrder: 0, UnpaidUnits: 20, UnpaidOrders: 5},
		orderpay.ProductFast:    {PerOrder: 2, UnpaidUnits: 10, UnpaidOrders: 1},
	}
	if !maps.Equal(m.Config.BuyerCaps, want) {
		t.Fatalf("caps %v, want %v", m.Config.BuyerCaps, want)
	}
	for _, bad := range [][]string{{"--order-qty-cap", "fast=-1"}, {"--unpaid-qty-cap", "bulk=3"}, {"--unpaid-orders-cap", "normal"},
		{"--order-qty-cap", "normal=1000000001"}} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(bad); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("%v: %v; want an error naming the flag", bad, err)
		}
	}
}

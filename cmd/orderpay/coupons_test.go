package main

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/sqlstore/storetest"
)

type couponView struct {
	ID       string `json:"id"`
	Code     string `json:"code"`
	BuyerID  string `json:"buyer_id"`
	Status   string `json:"status"`
	OrderNo  string `json:"order_no"`
	Template *struct {
		AmountOff int64 `json:"amount_off"`
		Threshold int64 `json:"threshold"`
	} `json:"template"`
}

type couponOrderView struct {
	OrderNo  string `json:"order_no"`
	Status   string `json:"status"`
	Total    int64  `json:"total"`
	Discount int64  `json:"discount"`
	Payable  int64  `json:"payable"`
	CouponID string `json:"coupon_id"`
	Items    []struct {
		SKU      string `json:"sku"`
		Amount   int64  `json:"amount"`
		Discount int64  `json:"discount"`
		Payable  int64  `json:"payable"`
	} `json:"items"`
}

// couponRowCounts is rowCounts with the coupons and their states.
func couponRowCounts(t *testing.T, m *Main) map[string]int {
	t.Helper()
	out := rowCounts(t, m)
	for _, q := range []struct{ name, sql string }{
		{"coupons", `SELECT COUNT(*) FROM coupons`},
		{"coupon templates", `SELECT COUNT(*) FROM coupon_templates`},
		{"coupons used", `SELECT COUNT(*) FROM coupons WHERE status = 'USED'`},
	} {
		var n int
		if err := m.Store.DB().QueryRow(q.sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[q.name] = n
	}
	return out
}

// Through the API: a "1000 off 5000" coupon on three lines of 3333, 3333 and 3334 fen is
// apportioned 333, 333, 334 (the largest remainder takes the leftover fen), and paying the
// order charges the channel the discounted 9000 fen. Below the threshold, a used coupon,
// another buyer's: refused, nothing written. A cancel gives the coupon back for another order.
func TestCouponsOverHTTP(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); couponsOverHTTP(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); couponsOverHTTP(t, storetest.PostgresDSN(t)) })
}

func couponsOverHTTP(t *testing.T, db string) {
	m, c := startMain(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	prices := map[string]int64{"cup-a": 3333, "cup-b": 3333, "cup-c": 3334}
	for _, sku := range []string{"cup-a", "cup-b", "cup-c"} {
		if err := c.createSKU(ctx, sku, prices[sku], 20, "normal"); err != nil {
			t.Fatal(err)
		}
	}
	var tpl struct {
		Code      string `json:"code"`
		AmountOff int64  `json:"amount_off"`
		Threshold int64  `json:"threshold"`
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/coupons", admin, map[string]any{"code": "M50-10", "title": "10 yuan off 50",
		"amount_off": 1000, "threshold": 5000}, &tpl); err != nil || tpl.AmountOff != 1000 || tpl.Threshold != 5000 {
		t.Fatalf("create the template: %+v, %v", tpl, err)
	}
	issue := func(buyer string) string {
		t.Helper()
		var cp couponView
		if err := c.call(ctx, "POST", m.URL+"/admin/coupons/M50-10/issue", admin, map[string]string{"buyer_id": buyer}, &cp); err != nil {
			t.Fatal(err)
		}
		if cp.ID == "" || cp.Status != "AVAILABLE" || cp.BuyerID != buyer || cp.Code != "M50-10" {
			t.Fatalf("issued %+v", cp)
		}
		return cp.ID
	}
	coupons := func(buyer string) []couponView {
		t.Helper()
		var list struct {
			Coupons []couponView `json:"coupons"`
		}
		if err := c.call(ctx, "GET", m.URL+"/v1/buyers/"+buyer+"/coupons", nil, nil, &list); err != nil {
			t.Fatal(err)
		}
		return list.Coupons
	}
	type line struct {
		SKU string `json:"sku"`
		Qty int64  `json:"qty"`
	}
	three := []line{{"cup-a", 1}, {"cup-b", 1}, {"cup-c", 1}}
	create := func(buyer, coupon string, items []line) (*couponOrderView, error) {
		var o couponOrderView
		body := map[string]any{"buyer_id": buyer, "items": items}
		if coupon != "" {
			body["coupon_id"] = coupon
		}
		err := c.call(ctx, "POST", m.URL+"/v1/orders", nil, body, &o)
		return &o, err
	}

	first := issue("alice")
	o, err := create("alice", first, three)
	if err != nil {
		t.Fatal(err)
	}
	var discounts, amounts []int64
	var payables int64
	for _, it := range o.Items {
		discounts, amounts = append(discounts, it.Discount), append(amounts, it.Amount)
		payables += it.Payable
		if it.Payable != it.Amount-it.Discount {
			t.Fatalf("item %+v", it)
		}
	}
	if o.Total != 10000 || o.Discount != 1000 || o.Payable != 9000 || o.CouponID != first || payables != 9000 ||
		!slices.Equal(discounts, []int64{333, 333, 334}) || !slices.Equal(discounts, orderpay.Apportion(1000, amounts)) {
		t.Fatalf("order with the coupon: %+v", o)
	}
	if got := coupons("alice"); len(got) != 1 || got[0].Status != "USED" || got[0].OrderNo != o.OrderNo || got[0].Template == nil || got[0].Template.AmountOff != 1000 {
		t.Fatalf("alice's coupons after the order: %+v", got)
	}
	// Paying charges the channel the discounted payable.
	p := payByAlipay(ctx, t, c, o.OrderNo)
	var trade *sim.LedgerEntry
	for _, l := range m.Sim.Ledger() {
		if l.OutTradeNo == p.PaymentNo+"A01" {
			trade = &l
		}
	}
	if trade == nil || trade.Amount != 9000 || trade.Status != "TRADE_SUCCESS" {
		t.Fatalf("ledger entry %+v; want 9000 fen paid", trade)
	}

	second := issue("alice")
	bobs := issue("bob")
	before := couponRowCounts(t, m)
	for _, tc := range []struct {
		name, buyer, coupon string
		items               []line
		status              int
		code                string
	}{
		{"below the threshold", "alice", second, []line{{"cup-a", 1}}, http.StatusBadRequest, orderpay.EINVALID},
		{"already used", "alice", first, []line{{"cup-a", 2}}, http.StatusConflict, orderpay.ECONFLICT},
		{"another buyer's", "alice", bobs, three, http.StatusBadRequest, orderpay.EINVALID},
		{"alice's for bob", "bob", second, three, http.StatusBadRequest, orderpay.EINVALID},
		{"unknown", "alice", "CPNOSUCHCOUPON", three, http.StatusBadRequest, orderpay.EINVALID},
	} {
		_, err := create(tc.buyer, tc.coupon, tc.items)
		if apiCode(err) != tc.code || err.(*apiError).Status != tc.status {
			t.Fatalf("%s: %v; want %d %s", tc.name, err, tc.status, tc.code)
		}
	}
	// Bad admin input too.
	for _, tc := range []struct {
		name, path string
		header     http.Header
		body       any
		code       string
	}{
		{"no token", "/admin/coupons", nil, map[string]any{"code": "X", "title": "t", "amount_off": 1}, orderpay.EUNAUTHORIZED},
		{"zero off", "/admin/coupons", admin, map[string]any{"code": "X", "title": "t", "amount_off": 0}, orderpay.EINVALID},
		{"fractional fen", "/admin/coupons", admin, map[string]any{"code": "X", "title": "t", "amount_off": 9.5}, orderpay.EINVALID},
		{"unknown field", "/admin/coupons", admin, map[string]any{"code": "X", "title": "t", "amount_off": 1, "percent": 10}, orderpay.EINVALID},
		{"ends before it starts", "/admin/coupons", admin, map[string]any{"code": "X", "title": "t", "amount_off": 1,
			"valid_from": "2026-12-01T00:00:00Z", "valid_until": "2026-11-01T00:00:00Z"}, orderpay.EINVALID},
		{"code taken", "/admin/coupons", admin, map[string]any{"code": "M50-10", "title": "t", "amount_off": 1}, orderpay.ECONFLICT},
		{"issue unknown template", "/admin/coupons/NOPE/issue", admin, map[string]string{"buyer_id": "alice"}, orderpay.ENOTFOUND},
		{"issue to nobody", "/admin/coupons/M50-10/issue", admin, map[string]string{"buyer_id": ""}, orderpay.EINVALID},
		{"issue without token", "/admin/coupons/M50-10/issue", nil, map[string]string{"buyer_id": "alice"}, orderpay.EUNAUTHORIZED},
		{"coupon_id not a string", "/v1/orders", nil, map[string]any{"buyer_id": "alice", "items": three, "coupon_id": 7}, orderpay.EINVALID},
	} {
		if err := c.call(ctx, "POST", m.URL+tc.path, tc.header, tc.body, nil); apiCode(err) != tc.code {
			t.Fatalf("%s: %v; want %s", tc.name, err, tc.code)
		}
	}
	if after := couponRowCounts(t, m); !equalCounts(before, after) {
		t.Fatalf("refused requests wrote rows: before %v, after %v", before, after)
	}
	if err := c.call(ctx, "GET", m.URL+"/v1/buyers/not%20an%20id/coupons", nil, nil, nil); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("listing a bad buyer id: %v", err)
	}

	// A cancel gives the coupon back, and it can be used again.
	o2, err := create("alice", second, three)
	if err != nil || o2.Discount != 1000 || o2.CouponID != second {
		t.Fatalf("order with the second coupon: %+v, %v", o2, err)
	}
	if _, err := c.Cancel(ctx, o2.OrderNo); err != nil {
		t.Fatal(err)
	}
	for _, cp := range coupons("alice") {
		if cp.ID == second && (cp.Status != "AVAILABLE" || cp.OrderNo != "") {
			t.Fatalf("after the cancel: %+v", cp)
		}
	}
	o3, err := create("alice", second, []line{{"cup-c", 2}})
	if err != nil || o3.Discount != 1000 || o3.Payable != 2*3334-1000 || o3.OrderNo == o2.OrderNo {
		t.Fatalf("the restored coupon again: %+v, %v", o3, err)
	}
	var read couponOrderView
	if err := c.call(ctx, "GET", m.URL+"/v1/orders/"+o3.OrderNo, nil, nil, &read); err != nil || read.CouponID != second || read.Items[0].Discount != 1000 {
		t.Fatalf("read back: %+v, %v", read, err)
	}
}

package main

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"orderpay"
	"orderpay/downstream"
)

// The example consumers run by default: an order paid through the simulator earns its
// buyer one point per yuan, once, and an SMS log row for each of its events; both are
// read back through the admin API.
func TestExampleConsumersAwardPointsAndLogSMS(t *testing.T) {
	t.Parallel()
	_, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + c.AdminToken}}
	const buyer = "points-buyer"
	if err := c.createSKU(ctx, "points-tea", 1280, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, buyer, "points-tea", 2)
	if err != nil {
		t.Fatal(err)
	}
	payByAlipay(ctx, t, c, o.OrderNo)

	wantPoints := o.Payable / 100 // 25.60 yuan: 25 points
	var acct downstream.PointsAccount
	waitForDownstream(t, ctx, "the points award", func() bool {
		return c.call(ctx, http.MethodGet, c.API+"/admin/points/"+buyer, admin, nil, &acct) == nil && acct.Balance == wantPoints
	})
	if len(acct.Ledger) != 1 || acct.Ledger[0].OrderNo != o.OrderNo || acct.Ledger[0].Kind != downstream.PointsAward || acct.Ledger[0].Points != wantPoints {
		t.Fatalf("account %+v", acct)
	}
	var sms struct{ SMS []downstream.SMSEntry }
	wantText := "您的订单 " + o.OrderNo + " 已支付 ¥" + orderpay.FormatYuan(o.Payable)
	waitForDownstream(t, ctx, "the paid SMS", func() bool {
		if c.call(ctx, http.MethodGet, c.API+"/admin/sms?order_no="+url.QueryEscape(o.OrderNo), admin, nil, &sms) != nil {
			return false
		}
		for _, r := range sms.SMS {
			if r.Template == downstream.TemplateOrderPaid && r.Text == wantText && r.BuyerID == buyer {
				return true
			}
		}
		return false
	})
	if err := c.call(ctx, http.MethodGet, c.API+"/admin/points/"+buyer, nil, nil, nil); apiCode(err) != orderpay.EUNAUTHORIZED {
		t.Fatalf("points without the admin token: %v", err)
	}
}

// --example-consumers=false (or ORDERPAY_EXAMPLE_CONSUMERS=false) leaves them off, and
// their admin reads answer 404.
func TestExampleConsumersOff(t *testing.T) {
	t.Setenv("ORDERPAY_EXAMPLE_CONSUMERS", "off")
	if err := NewMain().ParseFlags(nil); err == nil {
		t.Fatal(`"off" is not a boolean; want an error`)
	}
	t.Setenv("ORDERPAY_EXAMPLE_CONSUMERS", "false")
	m := NewMain()
	if err := m.ParseFlags(nil); err != nil || m.Config.ExampleConsumers {
		t.Fatalf("env false: %v %v", m.Config.ExampleConsumers, err)
	}
	if err := m.ParseFlags([]string{"--example-consumers=true"}); err != nil || !m.Config.ExampleConsumers {
		t.Fatalf("the flag wins: %v %v", m.Config.ExampleConsumers, err)
	}

	_, c := startMain(t, "", func(m *Main) { m.Config.ExampleConsumers = false })
	admin := http.Header{"Authorization": {"Bearer " + c.AdminToken}}
	for _, path := range []string{"/admin/points/x", "/admin/sms?order_no=x"} {
		if err := c.call(t.Context(), http.MethodGet, c.API+path, admin, nil, nil); apiCode(err) != orderpay.ENOTFOUND {
			t.Fatalf("GET %s with the examples off: %v", path, err)
		}
	}
}

func waitForDownstream(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"orderpay"
	"orderpay/chaos"
	"orderpay/payment"
	"orderpay/sqlstore/storetest"
)

func TestFulfilmentAndAfterSalesOverHTTP(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fulfilmentAndAfterSales(t, "") })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fulfilmentAndAfterSales(t, storetest.PostgresDSN(t)) })
}

// One order's life after payment, through the HTTP API: split into parcels, the address
// changed before shipping and not after, a partial refund before shipping approved by the
// rule and one sent to review and rejected, a parcel shipped, extended and received, a
// partial return reviewed, sent back, received and restocked; every refund reaches the
// simulator's ledger for exactly the apportioned amount, the stock adds up, and the order
// completes once its parcels are received and nothing is open.
func fulfilmentAndAfterSales(t *testing.T, db string) {
	m, c := startMain(t, db, func(m *Main) { m.Config.AutoApproveRefundMax = 5000 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	for _, s := range []map[string]any{
		{"sku": "rice-9kg", "merchant_id": "m-grain", "title": "Northeast rice 9kg", "price": 4990, "stock": 10, "weight_g": 9000, "volume_cm3": 12000},
		{"sku": "tea-tin", "merchant_id": "m-tea", "title": "Longjing tin", "price": 8800, "stock": 10, "warehouse": "hangzhou", "weight_g": 500},
	} {
		if err := c.call(ctx, "POST", m.URL+"/admin/skus", admin, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A coupon of 10 yuan off, so that refunds must take back its apportioned share.
	if err := c.call(ctx, "POST", m.URL+"/admin/coupons", admin, map[string]any{"code": "OFF10", "title": "10 off", "amount_off": 1000, "threshold": 1000}, nil); err != nil {
		t.Fatal(err)
	}
	var cp struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/coupons/OFF10/issue", admin, map[string]string{"buyer_id": "alice"}, &cp); err != nil {
		t.Fatal(err)
	}
	home := chaos.Address{Name: "Alice", Phone: "13800138000", Detail: "1 Wensan Road, Hangzhou"}
	var created chaos.OrderDetail
	if err := c.call(ctx, "POST", m.URL+"/v1/orders", nil, map[string]any{"buyer_id": "alice", "coupon_id": cp.ID, "address": home,
		"items": []map[string]any{{"sku": "rice-9kg", "qty": 3}, {"sku": "tea-tin", "qty": 2}}}, &created); err != nil {
		t.Fatal(err)
	}
	no := created.OrderNo
	if created.Address == nil || *created.Address != home {
		t.Fatalf("address at create: %+v", created.Address)
	}
	p := payByAlipay(ctx, t, c, no)
	o := detail(ctx, t, c.Client, no)
	// Rice: 9 kg a bag, two per 20 kg parcel; tea from its own merchant and warehouse.
	if len(o.Shipments) != 3 || o.Shipments[0].MerchantID != "m-grain" || o.Shipments[0].Items[0].Qty != 2 ||
		o.Shipments[1].Items[0].Qty != 1 || o.Shipments[2].MerchantID != "m-tea" || o.Shipments[2].Warehouse != "hangzhou" {
		t.Fatalf("parcels %+v", o.Shipments)
	}
	rice, tea := o.Items[0], o.Items[1]
	if rice.Discount+tea.Discount != 1000 {
		t.Fatalf("coupon shares %d + %d", rice.Discount, tea.Discount)
	}
	s1, s2, s3 := o.Shipments[0].ShipmentNo, o.Shipments[1].ShipmentNo, o.Shipments[2].ShipmentNo

	// The address: not someone else's to change; the buyer's until the first parcel ships.
	office := chaos.Address{Name: "Alice", Phone: "+86 571 8888 0000", Detail: "Floor 9, 18 Huanglong Road, Hangzhou"}
	if _, err := c.ChangeAddress(ctx, no, "mallory", office); apiCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("someone else's change: %v", err)
	}
	if _, err := c.ChangeAddress(ctx, no, "alice", chaos.Address{Name: "Alice", Phone: "no phone", Detail: "x"}); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("a bad phone: %v", err)
	}
	if got, err := c.ChangeAddress(ctx, no, "alice", office); err != nil || got.Address == nil || *got.Address != office {
		t.Fatalf("change before shipping: %+v, %v", got, err)
	}
	if _, err := c.Ship(ctx, s1, "SF Express", ""); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("ship without a tracking number: %v", err)
	}
	if sh, err := c.Ship(ctx, s1, "SF Express", "SF100"); err != nil || sh.Status != "SHIPPED" || sh.ReceiptRemaining != "10天00小时00分钟" && sh.ReceiptRemaining != "09天23小时59分钟" {
		t.Fatalf("ship: %+v, %v", sh, err)
	}
	if st := detail(ctx, t, c.Client, no).Status; st != "SHIPPED" {
		t.Fatalf("order %s after its first parcel shipped", st)
	}
	if _, err := c.ChangeAddress(ctx, no, "alice", home); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("change after shipping: %v", err)
	}

	// A refund of one bag before shipping: only the unshipped one can be refunded; 49.90
	// less its coupon share is within the 50-yuan rule, so it is approved at once.
	if _, err := c.RequestAfterSale(ctx, no, "alice", "refund", "changed my mind", chaos.AfterSaleItem{Line: 1, Qty: 2}); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("a refund of shipped units: %v", err)
	}
	r1, err := c.RequestAfterSale(ctx, no, "alice", "refund", "changed my mind", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := orderpay.RefundShare(rice.Payable, rice.Qty, 0, 0, 1); r1.Amount != want || !r1.AutoReview || r1.Status != "REFUNDING" && r1.Status != "SUCCESS" {
		t.Fatalf("refund before shipping: %+v, want amount %d auto-approved", r1, want)
	}
	waitAfterSale(ctx, t, c.Client, no, r1.AfterSaleNo, "SUCCESS")
	if o = detail(ctx, t, c.Client, no); o.Shipments[1].Status != "CANCELLED" {
		t.Fatalf("the emptied parcel is %s", o.Shipments[1].Status)
	}
	// A tea refund of 88 yuan is above the rule: review, and the merchant says no.
	r2, err := c.RequestAfterSale(ctx, no, "alice", "refund", "too expensive", chaos.AfterSaleItem{Line: 2, Qty: 1})
	if err != nil || r2.Status != "REQUESTED" {
		t.Fatalf("a refund above the rule: %+v, %v", r2, err)
	}
	if _, err := c.ReviewAfterSale(ctx, r2.AfterSaleNo, "reject", ""); apiCode(err) != orderpay.EINVALID {
		t.Fatalf("a rejection without a reason: %v", err)
	}
	if r2, err = c.ReviewAfterSale(ctx, r2.AfterSaleNo, "reject", "already packed"); err != nil || r2.Status != "REJECTED" {
		t.Fatalf("reject: %+v, %v", r2, err)
	}

	// The tea ships; the buyer extends once, the merchant as well; both rice and tea arrive.
	if _, err := c.Ship(ctx, s3, "YTO", "YT200"); err != nil {
		t.Fatal(err)
	}
	if sh, err := c.ExtendReceipt(ctx, no, s3, "alice"); err != nil || !sh.BuyerExtended {
		t.Fatalf("buyer's extension: %+v, %v", sh, err)
	}
	if _, err := c.ExtendReceipt(ctx, no, s3, "alice"); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("buyer's second extension: %v", err)
	}
	if sh, err := c.AdminExtendReceipt(ctx, s3, "merchant", 5); err != nil || sh.Extensions != 2 {
		t.Fatalf("merchant's extension: %+v, %v", sh, err)
	}
	if _, err := c.Ship(ctx, s2, "SF Express", "SF101"); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("shipping a cancelled parcel: %v", err)
	}
	for _, s := range []string{s1, s3} {
		if sh, err := c.ConfirmReceipt(ctx, no, s, "alice"); err != nil || sh.Status != "RECEIVED" || sh.ReceivedBy != "buyer" {
			t.Fatalf("confirm %s: %+v, %v", s, sh, err)
		}
	}
	if st := detail(ctx, t, c.Client, no).Status; st != "COMPLETED" {
		t.Fatalf("order %s once every parcel was received", st)
	}

	// A return of one tin after receipt: review, send back, receive (restock), refund.
	r3, err := c.RequestAfterSale(ctx, no, "alice", "return", "dented tin", chaos.AfterSaleItem{Line: 2, Qty: 1})
	if err != nil || r3.Status != "REQUESTED" || r3.Amount != orderpay.RefundShare(tea.Payable, tea.Qty, 0, 0, 1) {
		t.Fatalf("return: %+v, %v", r3, err)
	}
	if r3, err = c.ReviewAfterSale(ctx, r3.AfterSaleNo, "approve", ""); err != nil || r3.Status != "AWAITING_GOODS" {
		t.Fatalf("approve the return: %+v, %v", r3, err)
	}
	if _, err := c.ReviewAfterSale(ctx, r3.AfterSaleNo, "receive-goods", ""); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("receiving goods never sent: %v", err)
	}
	if r3, err = c.ShipBack(ctx, no, r3.AfterSaleNo, "alice", "ZTO", "ZT300"); err != nil || r3.ReturnTrackingNo != "ZT300" {
		t.Fatalf("ship back: %+v, %v", r3, err)
	}
	// The refund worker is woken at once, so the answer may already show the refund done.
	if r3, err = c.ReviewAfterSale(ctx, r3.AfterSaleNo, "receive-goods", ""); err != nil || r3.Status != "REFUNDING" && r3.Status != "SUCCESS" {
		t.Fatalf("receive the goods: %+v, %v", r3, err)
	}
	waitAfterSale(ctx, t, c.Client, no, r3.AfterSaleNo, "SUCCESS")
	// The last tin can still be returned, the rice bags too; but not a unit twice.
	if _, err := c.RequestAfterSale(ctx, no, "alice", "return", "again", chaos.AfterSaleItem{Line: 2, Qty: 2}); apiCode(err) != orderpay.ECONFLICT {
		t.Fatalf("returning a returned unit: %v", err)
	}

	// Money: what the simulator refunded is what the requests say, and the order shows it.
	o = detail(ctx, t, c.Client, no)
	want := r1.Amount + r3.Amount
	if o.Refunded != want || o.RefundStatus != "PARTIAL" {
		t.Fatalf("order refunded %d (%s), want %d PARTIAL", o.Refunded, o.RefundStatus, want)
	}
	outTradeNo := payment.OutTradeNo(p.PaymentNo, 1)
	if got := m.refundedAtChannel(outTradeNo); got != want {
		t.Fatalf("the channel refunded %d, want %d", got, want)
	}
	// Stock: one bag refunded before shipping and one tin returned are back on the shelf.
	for sku, sold := range map[string]int64{"rice-9kg": 2, "tea-tin": 1} {
		st, err := m.Store.Stock(ctx, sku)
		if err != nil || st.Sold != sold || st.Available != 10-sold || st.Locked != 0 {
			t.Fatalf("%s stock %+v, %v; want %d sold", sku, st, err, sold)
		}
	}
	waitForSubjects(t, m, orderpay.SubjectOrderShipped, orderpay.SubjectOrderReceived, orderpay.SubjectOrderCompleted,
		orderpay.SubjectRefundRequested, orderpay.SubjectRefundApproved, orderpay.SubjectRefundRejected,
		orderpay.SubjectRefundGoodsReceived, orderpay.SubjectRefundSucceeded)
}

func detail(ctx context.Context, t *testing.T, c *chaos.Client, no string) *chaos.OrderDetail {
	t.Helper()
	o, err := c.OrderDetail(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func waitAfterSale(ctx context.Context, t *testing.T, c *chaos.Client, no, afterSaleNo, status string) {
	t.Helper()
	waitFor(t, 20*time.Second, afterSaleNo+" "+status, func() bool {
		for _, a := range detail(ctx, t, c, no).Refunds {
			if a.AfterSaleNo == afterSaleNo {
				return a.Status == status
			}
		}
		return false
	})
}

// A rejected request leaves a gap in a line's units: cup ×3 and lid ×1 at 1.00 each, a
// 1-fen coupon on the cup line (payable 299, order 399), every request reviewed. Request a
// cup (99), another (100), reject the first, request a cup twice more, approve the three,
// then refund the lid. The cups give back exactly the 299 they cost (not 300), the lid's
// refund is not refused for going past the trade's total, and the channel refunds the whole
// 399.
func TestRejectedRequestNeverLetsALineRefundMoreThanItCost(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.AutoApproveRefundMax = -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	for _, sku := range []string{"cup", "lid"} {
		if err := c.call(ctx, "POST", m.URL+"/admin/skus", admin, map[string]any{"sku": sku, "merchant_id": "m-kitchen", "title": sku, "price": 100, "stock": 10}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/coupons", admin, map[string]any{"code": "FEN1", "title": "1 fen off", "amount_off": 1, "threshold": 0}, nil); err != nil {
		t.Fatal(err)
	}
	var cp struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, "POST", m.URL+"/admin/coupons/FEN1/issue", admin, map[string]string{"buyer_id": "alice"}, &cp); err != nil {
		t.Fatal(err)
	}
	var created chaos.OrderDetail
	if err := c.call(ctx, "POST", m.URL+"/v1/orders", nil, map[string]any{"buyer_id": "alice", "coupon_id": cp.ID,
		"items": []map[string]any{{"sku": "cup", "qty": 3}, {"sku": "lid", "qty": 1}}}, &created); err != nil {
		t.Fatal(err)
	}
	no := created.OrderNo
	p := payByAlipay(ctx, t, c, no)
	o := detail(ctx, t, c.Client, no)
	if o.Payable != 399 || o.Items[0].Payable != 299 || o.Items[1].Payable != 100 {
		t.Fatalf("order payable %d, lines %+v: want 399 = 299 (cups, the coupon's fen) + 100 (lid)", o.Payable, o.Items)
	}
	cup := chaos.AfterSaleItem{Line: 1, Qty: 1}
	request := func(item chaos.AfterSaleItem) *chaos.AfterSaleView {
		t.Helper()
		a, err := c.RequestAfterSale(ctx, no, "alice", "refund", "changed my mind", item)
		if err != nil || a.Status != "REQUESTED" {
			t.Fatalf("request %+v: %+v, %v", item, a, err)
		}
		return a
	}
	review := func(a *chaos.AfterSaleView, action, reason string) {
		t.Helper()
		if _, err := c.ReviewAfterSale(ctx, a.AfterSaleNo, action, reason); err != nil {
			t.Fatalf("%s %s: %v", action, a.AfterSaleNo, err)
		}
	}
	first, second := request(cup), request(cup)
	review(first, "reject", "one cup is already packed")
	third, fourth := request(cup), request(cup)
	var cups int64
	for _, a := range []*chaos.AfterSaleView{second, third, fourth} {
		review(a, "approve", "")
		cups += a.Amount
	}
	if cups != 299 {
		t.Fatalf("the three cups counted give back %d fen (%d + %d + %d; the rejected one was %d), the line cost 299",
			cups, second.Amount, third.Amount, fourth.Amount, first.Amount)
	}
	lid := request(chaos.AfterSaleItem{Line: 2, Qty: 1})
	review(lid, "approve", "")
	for _, a := range []*chaos.AfterSaleView{second, third, fourth, lid} {
		waitAfterSale(ctx, t, c.Client, no, a.AfterSaleNo, "SUCCESS")
	}
	if got := m.refundedAtChannel(payment.OutTradeNo(p.PaymentNo, 1)); got != 399 {
		t.Fatalf("the channel refunded %d, want the whole 399", got)
	}
	if o = detail(ctx, t, c.Client, no); o.Refunded != 399 || o.RefundStatus != "FULL" {
		t.Fatalf("order refunded %d (%s), want 399 FULL", o.Refunded, o.RefundStatus)
	}
}

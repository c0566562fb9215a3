package order_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// paidWithPayment marks an order paid as the payment center would, with a payment row and
// its paid attempt behind it, so that approved after-sales requests can record their
// channel refunds.
func paidWithPayment(t *testing.T, b bundle, o *orderpay.Order) {
	t.Helper()
	paymentRows(t, b, o)
	if err := b.svc.PaymentSucceeded(context.Background(), settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable,
		Channel: orderpay.ChannelAlipay, OutTradeNo: "P" + o.No + "A01"})); err != nil {
		t.Fatal(err)
	}
}

// paymentRows writes the payment of an order and its paid attempt, as the payment center
// would have.
func paymentRows(t *testing.T, b bundle, o *orderpay.Order) {
	t.Helper()
	ctx := context.Background()
	payNo, outTradeNo := "P"+o.No, "P"+o.No+"A01"
	at := b.clock.Now()
	if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: payNo, OrderNo: o.No, Amount: o.Payable, Status: orderpay.PaymentSuccess,
			Subject: "test", PayDeadline: o.PayDeadline, PaidChannel: orderpay.ChannelAlipay, PaidOutTradeNo: outTradeNo,
			CreatedAt: at, UpdatedAt: at, PaidAt: at}); err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return err // (recorded already when the payment was told: settled)
		}
		return tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: outTradeNo, PaymentNo: payNo, Channel: orderpay.ChannelAlipay,
			Seq: 1, Amount: o.Payable, Status: orderpay.ChannelOrderSuccess, CreatedAt: at, UpdatedAt: at, PaidAt: at})
	}); err != nil {
		t.Fatal(err)
	}
}

// Random sequences of after-sales work on random orders with random coupons, through the
// order system on a real store: refunds before shipping and returns of random units of
// random lines, rejections and approvals in any order, parcels shipped and received on
// the way, goods sent back and received. After every step, each line's requests that
// still count give back at most its payable, exactly its payable once they take every
// unit, and never a negative amount; and the channel refunds recorded for the order add up
// to what its counted, approved requests ask.
func TestAfterSalesNeverRefundALineMoreThanItCost(t *testing.T) {
	t.Parallel()
	b := setup(t, storetest.OpenSQLite(t), order.Config{AutoApproveRefundMax: -1, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	prices := []int64{1, 3, 7, 99, 100, 101, 3333, 12800}
	for i, p := range prices {
		if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: fmt.Sprintf("p%d", i), MerchantID: fmt.Sprintf("m%d", i%3),
			Title: fmt.Sprintf("Item %d", i), Price: p, Stock: 1_000_000, StockBuckets: 1 + i%3}); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(12, 2026))
	addr := orderpay.Address{Name: "Li Lei", Phone: "13800138000", Detail: "1 Wensan Road, Hangzhou"}
	for round := range 30 {
		var items []order.ItemRequest
		for _, i := range rng.Perm(len(prices))[:1+rng.IntN(3)] {
			items = append(items, order.ItemRequest{SKU: fmt.Sprintf("p%d", i), Qty: 1 + rng.Int64N(6)})
		}
		var total int64
		for _, it := range items {
			var i int
			fmt.Sscanf(it.SKU, "p%d", &i)
			total += prices[i] * it.Qty
		}
		buyer := fmt.Sprintf("buyer-%d", round)
		req := order.CreateOrderRequest{BuyerID: buyer, Items: items, Address: addr}
		if total > 1 {
			// A coupon of a random part of the total, down to a single fen: its shares are
			// what makes a line's payable not divide by its units.
			code := fmt.Sprintf("c%d", round)
			if _, err := b.svc.CreateCouponTemplate(ctx, order.NewCouponTemplate{Code: code, Title: code, AmountOff: 1 + rng.Int64N(total-1)}); err != nil {
				t.Fatal(err)
			}
			c, err := b.svc.IssueCoupon(ctx, code, buyer)
			if err != nil {
				t.Fatal(err)
			}
			req.CouponID = c.ID
		}
		o, err := b.svc.CreateOrder(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		paidWithPayment(t, b, o)
		for step := 0; step < 40; step++ {
			afterSalesStep(t, b, rng, o)
			checkLines(t, b, o, fmt.Sprintf("round %d step %d", round, step))
		}
	}
}

// afterSalesStep does one random thing to a paid order's after-sales. Requests and reviews
// the order refuses (units shipped meanwhile, already asked for) are part of the sequence.
func afterSalesStep(t *testing.T, b bundle, rng *rand.Rand, o *orderpay.Order) {
	t.Helper()
	ctx := context.Background()
	page, err := b.svc.Page(ctx, o.No)
	if err != nil {
		t.Fatal(err)
	}
	parcels, sales := page.Parcels, page.Sales
	pick := func(status orderpay.AfterSaleStatus) *orderpay.AfterSale {
		var in []*orderpay.AfterSale
		for i := range sales {
			if sales[i].Status == status {
				in = append(in, &sales[i])
			}
		}
		if len(in) == 0 {
			return nil
		}
		return in[rng.IntN(len(in))]
	}
	refused := func(err error) {
		t.Helper()
		if c := orderpay.ErrorCode(err); c != "" && c != orderpay.ECONFLICT {
			t.Fatalf("order %s: %v", o.No, err)
		}
	}
	switch rng.IntN(12) {
	case 0, 1, 2, 3, 4: // a request for some units of one line
		line := o.Items[rng.IntN(len(o.Items))]
		kind := orderpay.AfterSaleRefund
		if rng.IntN(3) == 0 {
			kind = orderpay.AfterSaleReturn
		}
		_, err := b.svc.RequestAfterSale(ctx, o.No, order.AfterSaleRequest{BuyerID: o.BuyerID, Kind: kind, Reason: "property",
			Items: []order.AfterSaleItemRequest{{Line: line.Line, Qty: 1 + rng.Int64N(min(line.Qty, 2))}}})
		refused(err)
	case 5, 6:
		if a := pick(orderpay.AfterSaleRequested); a != nil {
			_, err := b.svc.Reject(ctx, a.No, "merchant", "no")
			refused(err)
		}
	case 7, 8:
		if a := pick(orderpay.AfterSaleRequested); a != nil {
			_, err := b.svc.Approve(ctx, a.No, "merchant")
			refused(err)
		}
	case 9: // a parcel ships and arrives
		for _, p := range parcels {
			if p.Status == orderpay.ShipmentPending && p.Units() > 0 {
				if _, err := b.svc.Ship(ctx, p.No, "SF", "SF"+p.No, "merchant"); err != nil {
					t.Fatal(err)
				}
				if _, err := b.svc.ConfirmReceipt(ctx, o.No, p.No, o.BuyerID); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	case 10:
		if a := pick(orderpay.AfterSaleAwaitingGoods); a != nil {
			if a.ReturnTrackingNo == "" {
				_, err = b.svc.ShipBack(ctx, o.No, a.No, o.BuyerID, "ZTO", "ZT"+a.No)
			} else {
				_, err = b.svc.ReceiveGoods(ctx, a.No, "merchant")
			}
			refused(err)
		}
	case 11: // a refund's money comes back: made by the channel, or paid outside it by an operator
		// (a refund the channel refuses never reaches the order system: the request stays
		// REFUNDING, which the other rounds leave it in)
		if a := pick(orderpay.AfterSaleRefunding); a != nil {
			r, err := b.store.ChannelRefund(ctx, a.No)
			if err != nil {
				t.Fatal(err)
			}
			r.Status = orderpay.ChannelRefundSuccess
			if rng.IntN(5) == 0 {
				r.Status, r.ResolvedBy, r.ResolvedRef = orderpay.ChannelRefundResolved, "operator:test", "BANK-"+a.No
			}
			if err := b.store.InTx(ctx, func(tx orderpay.Tx) error {
				return b.svc.AfterSaleRefundFinal(ctx, tx, r, b.clock.Now())
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkLines holds the line rule over an order's requests, and that its recorded channel
// refunds are exactly those of its approved requests.
func checkLines(t *testing.T, b bundle, o *orderpay.Order, when string) {
	t.Helper()
	ctx := context.Background()
	sales, err := b.svc.AfterSales(ctx, o.No)
	if err != nil {
		t.Fatal(err)
	}
	units, money := map[int]int64{}, map[int]int64{}
	var sent int64
	for _, a := range sales {
		var sum int64
		for _, it := range a.Items {
			if it.Amount < 0 {
				t.Fatalf("%s: %s asks %d fen for line %d", when, a.No, it.Amount, it.Line)
			}
			sum += it.Amount
			if a.Counts() {
				units[it.Line] += it.Qty
				money[it.Line] += it.Amount
			}
		}
		if sum != a.Amount {
			t.Fatalf("%s: %s asks %d fen, its items %d", when, a.No, a.Amount, sum)
		}
		if a.Amount > 0 {
			r, err := b.store.ChannelRefund(ctx, a.No)
			switch a.Status {
			case orderpay.AfterSaleRefunding, orderpay.AfterSaleSucceeded:
				if err != nil || r.Amount != a.Amount {
					t.Fatalf("%s: %s is %s for %d fen; its channel refund %+v, %v", when, a.No, a.Status, a.Amount, r, err)
				}
				sent += r.Amount
			default:
				if err == nil {
					t.Fatalf("%s: %s is %s but has a channel refund", when, a.No, a.Status)
				}
			}
		}
	}
	for _, it := range o.Items {
		if units[it.Line] > it.Qty || money[it.Line] > it.Payable || units[it.Line] == it.Qty && money[it.Line] != it.Payable {
			t.Fatalf("%s: line %d (%d units, payable %d): requests that count take %d units and %d fen", when, it.Line, it.Qty, it.Payable, units[it.Line], money[it.Line])
		}
	}
	if sent > o.Payable {
		t.Fatalf("%s: %d fen sent back on an order of %d", when, sent, o.Payable)
	}
}

func TestBucketedStockHasNoFalseShortageSQLite(t *testing.T) {
	t.Parallel()
	bucketedOrders(t, storetest.OpenSQLite(t))
}

func TestBucketedStockHasNoFalseShortagePostgres(t *testing.T) {
	t.Parallel()
	bucketedOrders(t, storetest.OpenPostgres(t))
}

// A SKU of 16 units in 8 buckets of 2, five buyers of 3 at once, through the order system:
// every order is created (15 of 16 units: an "out of stock" would be false), every payment
// is applied (a conflict here was taken as the order refusing the payment, which refunded
// it), two orders are cancelled and three refunded before shipping, all at once; over 30
// rounds, and the stock adds up after each.
func bucketedOrders(t *testing.T, store orderpay.Store) {
	b := setup(t, store, order.Config{Payments: closing(orderpay.CloseNotPaidYet), AutoApproveRefundMax: 1_000_000})
	ctx := context.Background()
	all := func(orders []*orderpay.Order, what string, fn func(o *orderpay.Order) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(orders))
		for i, o := range orders {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = fn(o) }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s of order %d: %v", what, i, err)
			}
		}
	}
	for round := range 30 {
		sku := fmt.Sprintf("hot-%d", round)
		if _, _, err := b.svc.CreateSKU(ctx, order.NewSKU{SKU: sku, MerchantID: "m1", Title: "Hot kettle", Price: 100, Stock: 16, StockBuckets: 8}); err != nil {
			t.Fatal(err)
		}
		orders := make([]*orderpay.Order, 5)
		var mu sync.Mutex
		n := 0
		all(orders, "create", func(*orderpay.Order) error {
			o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: fmt.Sprint("alice-", buyers.Add(1)),
				Address: orderpay.Address{Name: "Li Lei", Phone: "13800138000", Detail: "1 Wensan Road"}, Items: []order.ItemRequest{{SKU: sku, Qty: 3}}})
			if err == nil {
				mu.Lock()
				orders[n] = o
				n++
				mu.Unlock()
			}
			return err
		})
		paid, cancelled := orders[:3], orders[3:]
		all(paid, "payment", func(o *orderpay.Order) error {
			return b.svc.PaymentSucceeded(ctx, settled(t, b.store, orderpay.PaymentSucceeded{PaymentNo: "P" + o.No, OrderNo: o.No, Amount: o.Payable, Channel: "alipay"}))
		})
		for _, o := range paid {
			paymentRows(t, b, o)
		}
		all(orders, "cancel or refund", func(o *orderpay.Order) error {
			if slices.Contains(cancelled, o) {
				_, err := b.svc.Cancel(ctx, o.No)
				return err
			}
			_, err := b.svc.RequestAfterSale(ctx, o.No, order.AfterSaleRequest{BuyerID: o.BuyerID, Kind: orderpay.AfterSaleRefund,
				Reason: "contention", Items: []order.AfterSaleItemRequest{{Line: 1, Qty: 3}}})
			return err
		})
		if st := stockOf(t, b.store, sku); st.Available != 16 || st.Locked != 0 || st.Sold != 0 || st.Total != 16 {
			t.Fatalf("round %d: stock %+v, want all 16 back", round, st)
		}
	}
}

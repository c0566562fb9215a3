package order_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// couponSetup adds three SKUs whose shares of a 1000-fen discount need the remainder step
// (3333, 3333, 3334 of 10000: 333.3, 333.3, 333.4) and a "1000 off 5000" template.
func couponSetup(t *testing.T, cfg order.Config) bundle {
	t.Helper()
	return couponSetupOn(t, storetest.OpenSQLite(t), cfg)
}

func couponSetupOn(t *testing.T, store orderpay.Store, cfg order.Config) bundle {
	t.Helper()
	b := setup(t, store, cfg)
	ctx := context.Background()
	for _, n := range []order.NewSKU{
		{SKU: "cup-a", MerchantID: "m1", Title: "Cup A", Price: 3333, Stock: 10},
		{SKU: "cup-b", MerchantID: "m2", Title: "Cup B", Price: 3333, Stock: 10},
		{SKU: "cup-c", MerchantID: "m1", Title: "Cup C", Price: 3334, Stock: 10},
	} {
		if _, _, err := b.svc.CreateSKU(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.CreateCouponTemplate(ctx, order.NewCouponTemplate{Code: "M50-10", Title: "10 off 50", AmountOff: 1000, Threshold: 5000}); err != nil {
		t.Fatal(err)
	}
	return b
}

func issue(t *testing.T, b bundle, code, buyer string) string {
	t.Helper()
	c, err := b.svc.IssueCoupon(context.Background(), code, buyer)
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func couponStatus(t *testing.T, b bundle, id string) (orderpay.CouponStatus, string) {
	t.Helper()
	c, err := b.store.Coupon(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Status, c.OrderNo
}

var threeCups = []order.ItemRequest{{SKU: "cup-a", Qty: 1}, {SKU: "cup-b", Qty: 1}, {SKU: "cup-c", Qty: 1}}

func TestCouponIsApportionedByTheLargestRemainder(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{})
	ctx := context.Background()
	id := issue(t, b, "M50-10", "alice")
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: id})
	if err != nil {
		t.Fatal(err)
	}
	if o.Total != 10000 || o.Discount != 1000 || o.Payable != 9000 || o.CouponID != id {
		t.Fatalf("order %+v", o)
	}
	got, err := b.store.Order(ctx, o.No)
	if err != nil {
		t.Fatal(err)
	}
	var discounts []int64
	var sum int64
	for _, it := range got.Items {
		discounts = append(discounts, it.Discount)
		sum += it.Payable
		if it.Payable != it.Amount-it.Discount {
			t.Fatalf("item %+v", it)
		}
	}
	if !slices.Equal(discounts, []int64{333, 333, 334}) || sum != 9000 || got.CouponID != id || got.Discount != 1000 {
		t.Fatalf("read back: discounts %v, payable sum %d, order %+v", discounts, sum, got)
	}
	if st, no := couponStatus(t, b, id); st != orderpay.CouponUsed || no != o.No {
		t.Fatalf("coupon %s by %q", st, no)
	}
	list, err := b.svc.ListCoupons(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].Status != orderpay.CouponUsed || list[0].Template.AmountOff != 1000 {
		t.Fatalf("alice's coupons %+v, %v", list, err)
	}
}

// An order must cost at least 1 fen: a coupon worth more takes all but that fen.
func TestCouponLeavesAtLeastOneFen(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{})
	ctx := context.Background()
	if _, err := b.svc.CreateCouponTemplate(ctx, order.NewCouponTemplate{Code: "FREE", Title: "everything free", AmountOff: 1_000_000}); err != nil {
		t.Fatal(err)
	}
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "bob", Items: threeCups, CouponID: issue(t, b, "FREE", "bob")})
	if err != nil {
		t.Fatal(err)
	}
	if o.Discount != 9999 || o.Payable != 1 || o.Items[0].Payable+o.Items[1].Payable+o.Items[2].Payable != 1 {
		t.Fatalf("order %+v", o)
	}
}

// Every refusal is a clear error, and the order's transaction leaves nothing behind: no
// stock locked, no order, no event, the coupon still AVAILABLE.
func TestCouponRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{})
	ctx := context.Background()
	for _, n := range []order.NewCouponTemplate{
		{Code: "LATER", Title: "from tomorrow", AmountOff: 100, ValidFrom: now.Add(24 * time.Hour)},
		{Code: "GONE", Title: "until an hour ago", AmountOff: 100, ValidUntil: now.Add(-time.Hour)},
	} {
		if _, err := b.svc.CreateCouponTemplate(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	alices := issue(t, b, "M50-10", "alice")
	bobs := issue(t, b, "M50-10", "bob")
	later, gone := issue(t, b, "LATER", "alice"), issue(t, b, "GONE", "alice")
	used := issue(t, b, "M50-10", "alice")
	first, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: used})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 100)
	for _, tc := range []struct {
		name   string
		req    order.CreateOrderRequest
		code   string
		coupon string
	}{
		{"unknown coupon", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: "CPNOPE"}, orderpay.EINVALID, ""},
		{"another buyer's", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: bobs}, orderpay.EINVALID, bobs},
		{"below the threshold", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups[:1], CouponID: alices}, orderpay.EINVALID, alices},
		{"not yet valid", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: later}, orderpay.EINVALID, later},
		{"expired", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups, CouponID: gone}, orderpay.EINVALID, gone},
		{"already used", order.CreateOrderRequest{BuyerID: "alice", Items: threeCups[1:], CouponID: used}, orderpay.ECONFLICT, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.CreateOrder(ctx, tc.req)
			if code := orderpay.ErrorCode(err); code != tc.code {
				t.Fatalf("code %q (%v), want %q", code, err, tc.code)
			}
			if tc.coupon != "" {
				if st, _ := couponStatus(t, b, tc.coupon); st != orderpay.CouponAvailable {
					t.Fatalf("coupon %s after a refused order", st)
				}
			}
		})
	}
	for _, sku := range []string{"cup-a", "cup-b", "cup-c"} {
		if st := stockOf(t, b.store, sku); st.Locked != 1 {
			t.Fatalf("%s stock %+v: only the first order holds any", sku, st)
		}
	}
	if after, _ := b.store.UnpublishedMessages(ctx, 100); len(after) != len(msgs) {
		t.Fatalf("refused orders wrote events: %d then %d", len(msgs), len(after))
	}
	if st, no := couponStatus(t, b, used); st != orderpay.CouponUsed || no != first.No {
		t.Fatalf("used coupon %s by %q", st, no)
	}
}

// A cancel, by the buyer or by the timeout, gives the coupon back in its transaction; it
// can then be used again.
func TestCancelRestoresTheCoupon(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{Payments: closing(orderpay.CloseDone)})
	ctx := context.Background()
	id := issue(t, b, "M50-10", "carol")
	o, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "carol", Items: threeCups, CouponID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Cancel(ctx, o.No); err != nil {
		t.Fatal(err)
	}
	if st, no := couponStatus(t, b, id); st != orderpay.CouponAvailable || no != "" {
		t.Fatalf("after the cancel: %s by %q", st, no)
	}
	// Again, with other items (not the duplicate guard's replay), until the timeout closes it.
	o2, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "carol", Items: []order.ItemRequest{{SKU: "cup-a", Qty: 2}}, CouponID: id})
	if err != nil {
		t.Fatalf("using the restored coupon: %v", err)
	}
	if o2.Discount != 1000 || o2.Payable != 2*3333-1000 {
		t.Fatalf("second order %+v", o2)
	}
	b.clock.Advance(73 * time.Hour)
	if res, err := b.svc.ExpireDue(ctx, 0, 10, 2); err != nil || res.Cancelled != 1 {
		t.Fatalf("timeout close: %+v, %v", res, err)
	}
	if st, _ := couponStatus(t, b, id); st != orderpay.CouponAvailable {
		t.Fatalf("after the timeout close: %s", st)
	}
	// Cancelling the cancelled order again does not touch the coupon, now free for others.
	if _, err := b.svc.Cancel(ctx, o.No); err != nil {
		t.Fatal(err)
	}
}

// Ten orders race for one coupon: exactly one gets it; the rest are ECONFLICT and hold no
// stock.
func TestConcurrentOrdersUseACouponOnce(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); concurrentCouponOrders(t, storetest.OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); concurrentCouponOrders(t, storetest.OpenPostgres(t)) })
}

func concurrentCouponOrders(t *testing.T, store orderpay.Store) {
	b := couponSetupOn(t, store, order.Config{})
	ctx := context.Background()
	id := issue(t, b, "M50-10", "dave")
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each a different request, so that the duplicate guard does not merge them.
			_, errs[i] = b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "dave", CouponID: id,
				Items: []order.ItemRequest{{SKU: "cup-a", Qty: 1}, {SKU: "cup-c", Qty: int64(1 + i%5)}, {SKU: fmt.Sprint("cup-", string(rune('a'+i/5))), Qty: 1}}})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch orderpay.ErrorCode(err) {
		case "":
			ok++
		case orderpay.ECONFLICT:
		default:
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d orders used the coupon: %v", ok, errs)
	}
	if st := stockOf(t, b.store, "cup-a"); st.Locked < 1 || st.Locked > 2 {
		t.Fatalf("cup-a stock %+v", st)
	}
}

// The duplicate-submit guard hashes the coupon with the items: the same items with a
// coupon are another order, the same items with the same coupon at once are the same one.
func TestDuplicateGuardTellsCouponsApart(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{})
	ctx := context.Background()
	id := issue(t, b, "M50-10", "erin")
	plain, _, err := b.svc.Create(ctx, order.CreateOrderRequest{BuyerID: "erin", Items: threeCups})
	if err != nil {
		t.Fatal(err)
	}
	with, replayed, err := b.svc.Create(ctx, order.CreateOrderRequest{BuyerID: "erin", Items: threeCups, CouponID: id})
	if err != nil || replayed || with.No == plain.No || with.Discount != 1000 {
		t.Fatalf("with a coupon: %+v, replayed %v, %v", with, replayed, err)
	}
	again, replayed, err := b.svc.Create(ctx, order.CreateOrderRequest{BuyerID: "erin", Items: threeCups, CouponID: id})
	if err != nil || !replayed || again.No != with.No {
		t.Fatalf("the same request again: %+v, replayed %v, %v", again, replayed, err)
	}
}

func TestCouponAdmin(t *testing.T) {
	t.Parallel()
	b := couponSetup(t, order.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    order.NewCouponTemplate
		code string
	}{
		{"bad code", order.NewCouponTemplate{Code: "a b", Title: "t", AmountOff: 1}, orderpay.EINVALID},
		{"no title", order.NewCouponTemplate{Code: "X", AmountOff: 1}, orderpay.EINVALID},
		{"zero off", order.NewCouponTemplate{Code: "X", Title: "t"}, orderpay.EINVALID},
		{"negative threshold", order.NewCouponTemplate{Code: "X", Title: "t", AmountOff: 1, Threshold: -1}, orderpay.EINVALID},
		{"ends before it starts", order.NewCouponTemplate{Code: "X", Title: "t", AmountOff: 1, ValidFrom: now, ValidUntil: now}, orderpay.EINVALID},
		{"code taken", order.NewCouponTemplate{Code: "M50-10", Title: "t", AmountOff: 1}, orderpay.ECONFLICT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.svc.CreateCouponTemplate(ctx, tc.n); orderpay.ErrorCode(err) != tc.code {
				t.Fatalf("%v, want %s", err, tc.code)
			}
		})
	}
	if _, err := b.svc.IssueCoupon(ctx, "NOPE", "alice"); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("issuing an unknown template: %v", err)
	}
	if _, err := b.svc.IssueCoupon(ctx, "M50-10", ""); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("issuing to nobody: %v", err)
	}
	a, b2 := issue(t, b, "M50-10", "frank"), issue(t, b, "M50-10", "frank")
	list, err := b.svc.ListCoupons(ctx, "frank")
	if err != nil || len(list) != 2 || a == b2 || list[0].Template.Threshold != 5000 || list[0].Status != orderpay.CouponAvailable {
		t.Fatalf("frank's coupons %+v, %v", list, err)
	}
}

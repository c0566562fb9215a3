package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
)

// A coupon template and its coupons read back as written; a coupon is used once, only by
// its buyer; of ten transactions racing to use it exactly one wins; only the order that used
// it can restore it, after which it can be used again; an order records its coupon.
func testCoupons(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	tpl := &orderpay.CouponTemplate{Code: "SAVE10", Title: "10 yuan off 50", AmountOff: 1000, Threshold: 5000,
		ValidFrom: t0, ValidUntil: t0.Add(30 * 24 * time.Hour), CreatedAt: t0}
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateCouponTemplate(ctx, tpl) })
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error { return tx.CreateCouponTemplate(ctx, tpl) }), orderpay.ECONFLICT)
	got, err := s.CouponTemplate(ctx, "SAVE10")
	if err != nil || got.Code != tpl.Code || got.Title != tpl.Title || got.AmountOff != tpl.AmountOff || got.Threshold != tpl.Threshold ||
		!got.ValidFrom.Equal(tpl.ValidFrom) || !got.ValidUntil.Equal(tpl.ValidUntil) || !got.CreatedAt.Equal(tpl.CreatedAt) {
		t.Fatalf("template read back as %+v, %v; want %+v", got, err, tpl)
	}
	_, err = s.CouponTemplate(ctx, "NOPE")
	wantCode(t, err, orderpay.ENOTFOUND)

	issue := func(id, buyer string, at time.Time) {
		t.Helper()
		mustTx(t, s, func(tx orderpay.Tx) error {
			return tx.IssueCoupon(ctx, &orderpay.Coupon{ID: id, Code: "SAVE10", BuyerID: buyer, Status: orderpay.CouponAvailable,
				IssuedAt: at, UpdatedAt: at})
		})
	}
	issue("C1", "alice", t0)
	issue("C2", "alice", t0.Add(time.Second))
	issue("C3", "bob", t0)
	wantCode(t, s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.IssueCoupon(ctx, &orderpay.Coupon{ID: "C1", Code: "SAVE10", BuyerID: "carol", Status: orderpay.CouponAvailable, IssuedAt: t0, UpdatedAt: t0})
	}), orderpay.ECONFLICT)
	list, err := s.BuyerCoupons(ctx, "alice")
	if err != nil || len(list) != 2 || list[0].ID != "C1" || list[1].ID != "C2" || list[0].Status != orderpay.CouponAvailable ||
		!list[1].IssuedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("alice's coupons: %+v, %v", list, err)
	}
	if none, err := s.BuyerCoupons(ctx, "nobody"); err != nil || len(none) != 0 {
		t.Fatalf("nobody's coupons: %+v, %v", none, err)
	}

	use := func(id, buyer, orderNo string, at time.Time) error {
		return s.InTx(ctx, func(tx orderpay.Tx) error { return tx.UseCoupon(ctx, id, buyer, orderNo, at) })
	}
	restore := func(id, orderNo string, at time.Time) error {
		return s.InTx(ctx, func(tx orderpay.Tx) error { return tx.RestoreCoupon(ctx, id, orderNo, at) })
	}
	wantCode(t, use("C1", "bob", "O0", t0), orderpay.ECONFLICT) // not bob's
	wantCode(t, use("C9", "alice", "O0", t0), orderpay.ENOTFOUND)
	wantCode(t, restore("C1", "O0", t0), orderpay.ECONFLICT) // not used
	if err := use("C1", "alice", "O1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c, err := s.Coupon(ctx, "C1")
	if err != nil || c.Status != orderpay.CouponUsed || c.OrderNo != "O1" || !c.UsedAt.Equal(t0.Add(time.Minute)) || c.BuyerID != "alice" {
		t.Fatalf("used coupon: %+v, %v", c, err)
	}
	wantCode(t, use("C1", "alice", "O2", t0), orderpay.ECONFLICT) // used once only
	wantCode(t, restore("C1", "O2", t0), orderpay.ECONFLICT)      // only its order restores it
	// A failed transaction uses nothing.
	err = s.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.UseCoupon(ctx, "C2", "alice", "O3", t0); err != nil {
			return err
		}
		return fmt.Errorf("rolled back")
	})
	if err == nil || orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		t.Fatalf("rollback: %v", err)
	}
	if c, _ := s.Coupon(ctx, "C2"); c.Status != orderpay.CouponAvailable || c.OrderNo != "" {
		t.Fatalf("a rolled-back use stuck: %+v", c)
	}
	if err := restore("C1", "O1", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Coupon(ctx, "C1"); c.Status != orderpay.CouponAvailable || c.OrderNo != "" || !c.UsedAt.IsZero() || !c.UpdatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("restored coupon: %+v", c)
	}
	wantCode(t, restore("C1", "O1", t0), orderpay.ECONFLICT) // twice is a conflict, not a second restore
	if err := use("C1", "alice", "O4", t0.Add(3*time.Minute)); err != nil {
		t.Fatalf("using a restored coupon: %v", err)
	}
	_, err = s.Coupon(ctx, "C9")
	wantCode(t, err, orderpay.ENOTFOUND)

	// Ten transactions race for bob's coupon: exactly one uses it.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := use("C3", "bob", fmt.Sprintf("R%d", i), t0)
			switch orderpay.ErrorCode(err) {
			case "":
				wins.Add(1)
			case orderpay.ECONFLICT:
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d transactions used the same coupon", n)
	}
	if c, _ := s.Coupon(ctx, "C3"); c.Status != orderpay.CouponUsed || c.OrderNo == "" {
		t.Fatalf("raced coupon: %+v", c)
	}

	// An order records the coupon it used.
	newSKU(t, s, "tea", 5)
	o := newOrder("O5", "tea", 3)
	o.Discount, o.Payable, o.CouponID = 1000, o.Total-1000, "C2"
	o.Items[0].Discount, o.Items[0].Payable = 1000, o.Items[0].Amount-1000
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.UseCoupon(ctx, "C2", "b1", o.No, t0); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return fmt.Errorf("b1 used alice's coupon: %v", err)
		}
		return tx.CreateOrder(ctx, o)
	})
	back, err := s.Order(ctx, "O5")
	if err != nil || back.CouponID != "C2" || back.Discount != 1000 || back.Payable != o.Total-1000 || back.Items[0].Discount != 1000 {
		t.Fatalf("order with a coupon read back as %+v, %v", back, err)
	}
}

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// The after-sales phase: once every payment has settled, merchants and buyers work
// on the paid orders through the API while the channel faults stay in force, so that the
// auditor's stock and money invariants are checked over partial refunds before shipping,
// returns and completed orders too. Each paid order draws one script from the seed:
//
//	20 % a partial refund before shipping (one unit of the first line); if it exceeds the
//	     auto-approve rule the merchant approves it, or rejects every third one;
//	20 % shipped and received, then one unit of the first line returned: approved, sent
//	     back, received (restocked) and refunded;
//	20 % shipped and received: the order completes;
//	15 % a line of several units refunded before shipping one unit at a time: two requests,
//	     the first rejected, then the rest one by one, all approved; the requests above
//	     the auto-approve rule are reviewed, so the rejected one leaves a gap in the line's
//	     units that the later ones must be priced around (the buyers' coupons make the
//	     line's payable seldom divide by its units);
//	25 % left as they are (paid, not shipped).
//
// Every refund goes through the simulator under the run's faults (timeouts, unknown
// answers, and under refund faults refusals for now, abnormal ends and slow settling), so it
// must be retried under its number and queried until it is final, or go before the operator.
//
// Under refund faults the orders' scripts start afterSalesPace apart rather than all at
// once: a shortage of the merchant's account refuses every refund on its channel while it
// lasts, and buyers ask for their money back over hours, not within one second; at this pace
// a shortage of a few business minutes meets a share of the refunds, as in the field.
const afterSalesPace = 4 * time.Second // business time: 15 orders' scripts a business minute

// AfterSalesStats counts what the phase did.
type AfterSalesStats struct {
	Orders           int `json:"orders"`            // paid orders considered
	RefundsRequested int `json:"refunds_requested"` // before shipping
	ReturnsRequested int `json:"returns_requested"`
	Completed        int `json:"completed"` // shipped and received without after-sales
	Rejected         int `json:"rejected"`
	// SplitRefunds are lines refunded unit by unit with a rejection between approvals.
	SplitRefunds int            `json:"split_refunds"`
	RefundedFen  int64          `json:"refunded_fen"`     // asked for by approved requests
	Failed       map[string]int `json:"failed,omitempty"` // steps that failed, by step
}

// afterSalesScript is what one paid order gets.
type afterSalesScript int

const (
	scriptLeave afterSalesScript = iota
	scriptRefund
	scriptReturn
	scriptComplete
	scriptSplitRefund
)

func planAfterSales(seed uint64, orderNo string) (afterSalesScript, int) {
	var h uint64
	for _, c := range orderNo {
		h = h*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(seed^0xa5a5, h))
	roll, extra := rng.IntN(100), rng.IntN(3)
	switch {
	case roll < 20:
		return scriptRefund, extra
	case roll < 40:
		return scriptReturn, extra
	case roll < 60:
		return scriptComplete, extra
	case roll < 75:
		return scriptSplitRefund, extra
	}
	return scriptLeave, extra
}

// afterSales runs the phase over every PAID order, a few at a time.
func (r *runner) afterSales(ctx context.Context) (*AfterSalesStats, error) {
	rows, err := r.store.DB().QueryContext(ctx, `SELECT order_no, buyer_id FROM orders WHERE status = 'PAID' ORDER BY order_no`)
	if err != nil {
		return nil, fmt.Errorf("chaos: after-sales: %w", err)
	}
	type paid struct{ no, buyer string }
	var orders []paid
	for rows.Next() {
		var p paid
		if err := rows.Scan(&p.no, &p.buyer); err != nil {
			rows.Close()
			return nil, err
		}
		orders = append(orders, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st := &AfterSalesStats{Orders: len(orders), Failed: map[string]int{}}
	var mu sync.Mutex
	count := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }
	fail := func(step string, err error) {
		r.stats.apiError("after-sales "+step, err)
		count(func() { st.Failed[step]++ })
	}
	work := make(chan paid)
	var wg sync.WaitGroup
	for range min(r.cfg.Concurrency, 16) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				r.afterSalesOf(ctx, p.no, p.buyer, st, count, fail)
			}
		}()
	}
	var pace time.Duration
	if r.refundFaults() {
		pace = r.cfg.scaled(afterSalesPace)
	}
	began := time.Now()
	for i, p := range orders {
		if pace > 0 && !sleepCtx(ctx, time.Until(began.Add(time.Duration(i)*pace))) {
			break
		}
		select {
		case work <- p:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return st, ctx.Err()
}

// afterSalesOf plays one order's script. A step the server refuses ends the script (the
// auditor judges what was done); a 5xx is retried.
func (r *runner) afterSalesOf(ctx context.Context, no, buyer string, st *AfterSalesStats, count func(func()), fail func(string, error)) {
	script, extra := planAfterSales(r.cfg.Seed, no)
	if script == scriptLeave {
		return
	}
	c := r.client.As(buyer)
	step := func(name string, call func() error) bool {
		var err error
		for attempt := 0; attempt < apiRetries; attempt++ {
			if err = call(); err == nil || StatusOf(err) < 500 || ctx.Err() != nil {
				break
			}
			sleepCtx(ctx, time.Duration(attempt+1)*200*time.Millisecond)
		}
		if err != nil {
			fail(name, err)
		}
		return err == nil
	}
	var o *OrderDetail
	if !step("read", func() (err error) { o, err = c.OrderDetail(ctx, no); return err }) || len(o.Items) == 0 {
		return
	}
	first := AfterSaleItem{Line: o.Items[0].Line, Qty: 1}
	if script == scriptSplitRefund {
		r.splitRefund(ctx, no, buyer, o, st, count, step)
		return
	}
	if script == scriptRefund {
		var a *AfterSaleView
		if !step("refund", func() (err error) {
			a, err = c.RequestAfterSale(ctx, no, buyer, "refund", "chaos: changed my mind", first)
			return err
		}) {
			return
		}
		count(func() { st.RefundsRequested++ })
		if a.Status == "REQUESTED" { // above the rule: the merchant reviews it
			if extra == 0 {
				if step("reject", func() (err error) {
					a, err = c.ReviewAfterSale(ctx, a.AfterSaleNo, "reject", "chaos: already packed")
					return err
				}) {
					count(func() { st.Rejected++ })
				}
				return
			}
			if !step("approve", func() (err error) { a, err = c.ReviewAfterSale(ctx, a.AfterSaleNo, "approve", ""); return err }) {
				return
			}
		}
		count(func() { st.RefundedFen += a.Amount })
		return
	}
	// Ship every parcel and receive it (the address first: the buyers gave none).
	if !step("address", func() error {
		_, err := c.ChangeAddress(ctx, no, buyer, Address{Name: buyer, Phone: "13800138000", Detail: "chaos street 1"})
		return err
	}) {
		return
	}
	for i, sh := range o.Shipments {
		if !step("ship", func() error {
			_, err := c.Ship(ctx, sh.ShipmentNo, "SF Express", fmt.Sprintf("SF%s%d", no, i))
			return err
		}) {
			return
		}
		if !step("confirm", func() error { _, err := c.ConfirmReceipt(ctx, no, sh.ShipmentNo, buyer); return err }) {
			return
		}
	}
	if script == scriptComplete {
		count(func() { st.Completed++ })
		return
	}
	var a *AfterSaleView
	if !step("return", func() (err error) {
		a, err = c.RequestAfterSale(ctx, no, buyer, "return", "chaos: not as described", first)
		return err
	}) {
		return
	}
	count(func() { st.ReturnsRequested++ })
	for _, s := range []struct{ name, call string }{{"approve", "approve"}, {"ship-back", ""}, {"receive-goods", "receive-goods"}} {
		ok := step(s.name, func() (err error) {
			if s.call == "" {
				a, err = c.ShipBack(ctx, no, a.AfterSaleNo, buyer, "ZTO", "ZT"+a.AfterSaleNo)
			} else {
				a, err = c.ReviewAfterSale(ctx, a.AfterSaleNo, s.call, "")
			}
			return err
		})
		if !ok {
			return
		}
	}
	count(func() { st.RefundedFen += a.Amount })
}

// splitRefund refunds a line of several units before shipping, one unit at a time: a
// request, a second one, the first rejected if it waits for review, then the rest of the
// line's units one request each, every one approved. A line's requests that count must
// then give back exactly its payable (the auditor's I3), however the rejection fell.
func (r *runner) splitRefund(ctx context.Context, no, buyer string, o *OrderDetail, st *AfterSalesStats, count func(func()),
	step func(string, func() error) bool) {
	line := -1
	for i, it := range o.Items {
		if it.Qty >= 2 {
			line = i
			break
		}
	}
	if line < 0 {
		return // no line of several units: left as it is
	}
	c := r.client.As(buyer)
	unit := AfterSaleItem{Line: o.Items[line].Line, Qty: 1}
	request := func() *AfterSaleView {
		var a *AfterSaleView
		if !step("refund", func() (err error) {
			a, err = c.RequestAfterSale(ctx, no, buyer, "refund", "chaos: one at a time", unit)
			return err
		}) {
			return nil
		}
		count(func() { st.RefundsRequested++ })
		return a
	}
	first, second := request(), request()
	if first == nil || second == nil {
		return
	}
	left := o.Items[line].Qty - 2
	if first.Status == "REQUESTED" {
		if !step("reject", func() (err error) {
			first, err = c.ReviewAfterSale(ctx, first.AfterSaleNo, "reject", "chaos: that one is packed")
			return err
		}) {
			return
		}
		count(func() { st.Rejected++ })
		left++
	} else {
		count(func() { st.RefundedFen += first.Amount })
	}
	open := []*AfterSaleView{second}
	for ; left > 0; left-- {
		a := request()
		if a == nil {
			return
		}
		open = append(open, a)
	}
	for _, a := range open {
		if a.Status == "REQUESTED" && !step("approve", func() (err error) {
			a, err = c.ReviewAfterSale(ctx, a.AfterSaleNo, "approve", "")
			return err
		}) {
			return
		}
		count(func() { st.RefundedFen += a.Amount })
	}
	count(func() { st.SplitRefunds++ })
}

package explore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/order"
	"orderpay/payment"
)

// The scenes, operations and check the known-defect mutants need (testdata/mutants, run by
// scripts/mutants): each defect found by review is two operations meeting in a state the
// first catalogue did not hold, or a breach I1–I9 do not name.
//
//   - two-requested: a line of two units whose payable does not split evenly (a 1-fen
//     coupon), each unit asked back: a rejected request and a new one meet (01), and a
//     refund before shipping meets the shipment of a parcel it does not empty (03).
//   - buckets-unapplied: two orders of three units drawn from stock spread over three rows,
//     the first's payment waiting for the bus, the second's notification on its way: two
//     gathers of the same buckets meet under READ COMMITTED (02).
//   - wallet.pay.notify: the buyer pays and the notification lands while an app closes its
//     payment (04).
//   - retention.holds: the hold sweeper and then retention at the first moment it may
//     delete the released hold, before a late payment or cancel of the order (05).
//   - last-try: a WeChat refund at the last send its retry plan allows, which the channel
//     refuses once more and then makes; refund.send.resolve and i2.refund.send.resolve send
//     it and have the operator on duty pay back outside the channel what that queued (06).
//   - the parcels check: no unit is refunded out of a parcel after it shipped (03).
const (
	SceneTwoRequested     = "two-requested"     // two units, 1-fen coupon (payable 199), paid; a refund of each unit waits for review
	SceneBucketsUnapplied = "buckets-unapplied" // two orders of 3 of 6 units in 3 stock rows, both paid; the first waits for the bus
	SceneLastTry          = "last-try"          // a WeChat refund refused for now until its next send is the plan's last
)

func init() {
	Scenes = append(Scenes, SceneTwoRequested, SceneBucketsUnapplied, SceneLastTry)
	crashOp.Scenes = Scenes
	sceneSetups[SceneTwoRequested] = setupTwoRequested
	sceneSetups[SceneBucketsUnapplied] = setupBucketsUnapplied
	sceneSetups[SceneLastTry] = setupLastTry
	for name, scenes := range map[string][]string{
		"aftersale.request": {SceneTwoRequested},
		"aftersale.approve": {SceneTwoRequested},
		"aftersale.reject":  {SceneTwoRequested},
		"ship":              {SceneTwoRequested},
		"bus":               {SceneBucketsUnapplied},
		"cancel":            {SceneBucketsUnapplied},
		"refund.send":       {SceneLastTry},
		"i2.refund.send":    {SceneLastTry},
	} {
		op, err := OpNamed(name)
		if err != nil {
			panic(err)
		}
		op.Scenes = append(op.Scenes, scenes...)
	}
	Catalogue = append(Catalogue,
		&Op{Name: "notify.other", Scenes: []string{SceneBucketsUnapplied}, Run: notifyOther},
		&Op{Name: "wallet.pay.notify", Scenes: []string{SceneAppUnpaid}, Run: walletPayNotify},
		&Op{Name: "retention.holds", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: retentionHolds},
		&Op{Name: "refund.send.resolve", Scenes: []string{SceneLastTry}, Run: refundSendResolve(0)},
		&Op{Name: "i2.refund.send.resolve", Second: true, Scenes: []string{SceneLastTry}, Run: refundSendResolve(1)},
	)
	checks = append(checks, checkParcels)
}

// ---- scenes ----

// setupTwoRequested: an order of two units at 1.00 of a SKU of its own (two in stock, the
// profile's goods and stock policy), less a 1-fen coupon (payable 199: 99 and 100 by
// unit), paid and its bus drained; the buyer asked for a refund of one unit, then of the
// other (99, then 100), both waiting for review. The subject's request is the first.
func setupTwoRequested(ctx context.Context, w *World, in *Instance, s *Subject) error {
	p := w.Profile
	sku := w.fixture.SKU + "-two"
	if _, _, err := in.Orders.CreateSKU(ctx, order.NewSKU{SKU: sku, MerchantID: "shop", Title: "explorer two", Price: 100, Stock: 2,
		ProductType: p.ProductType, StockPolicy: p.Policy, ReserveMinutes: p.ReserveMinutes}); err != nil {
		return err
	}
	if _, err := in.Orders.CreateCouponTemplate(ctx, order.NewCouponTemplate{Code: "FEN1", Title: "1 fen off", AmountOff: 1}); err != nil {
		return err
	}
	c, err := in.Orders.IssueCoupon(ctx, "FEN1", s.BuyerID)
	if err != nil {
		return err
	}
	if err := w.paidOrder(ctx, in, s, sku, 2, c.ID); err != nil {
		return err
	}
	for i := range 2 {
		as, err := in.Orders.RequestAfterSale(ctx, s.OrderNo, order.AfterSaleRequest{BuyerID: s.BuyerID, Kind: orderpay.AfterSaleRefund,
			Reason: "changed my mind", Items: []order.AfterSaleItemRequest{{Line: 1, Qty: 1}}})
		if err != nil {
			return err
		}
		if as.Status != orderpay.AfterSaleRequested {
			return fmt.Errorf("request %s is %s, not waiting for review", as.No, as.Status)
		}
		if i == 0 {
			s.AfterSaleNo = as.No
		}
	}
	return nil
}

// paidOrder has s's buyer order qty of sku (with the coupon, if any), pay it by Alipay's QR
// code, and the notification and the bus apply it; s is that order, its payment, attempt
// and parcel.
func (w *World) paidOrder(ctx context.Context, in *Instance, s *Subject, sku string, qty int64, coupon string) error {
	if err := w.channelPaidOrder(ctx, in, s, sku, qty, coupon, orderpay.ChannelAlipay); err != nil {
		return err
	}
	if err := w.deliver(ctx, in, s.OutTradeNo, false); err != nil {
		return err
	}
	return w.drainToParcel(ctx, in, s)
}

// drainToParcel drains the bus, so that the paid order's results are applied, and names
// its parcel in s.
func (w *World) drainToParcel(ctx context.Context, in *Instance, s *Subject) error {
	if err := w.drain(ctx, in); err != nil {
		return err
	}
	parcels, err := in.Orders.Shipments(ctx, s.OrderNo)
	if err != nil {
		return err
	}
	if len(parcels) == 0 {
		return errors.New("the paid order has no parcel")
	}
	s.ShipmentNo = parcels[0].No
	return nil
}

// channelPaidOrder has s's buyer order qty of sku and pay it by the channel's QR code at
// the wallet; nothing is delivered. s is that order, its payment and its attempt.
func (w *World) channelPaidOrder(ctx context.Context, in *Instance, s *Subject, sku string, qty int64, coupon, channel string) error {
	o, _, err := in.Orders.Create(ctx, order.CreateOrderRequest{BuyerID: s.BuyerID, CouponID: coupon,
		Items: []order.ItemRequest{{SKU: sku, Qty: qty}}, Address: address})
	if err != nil {
		return err
	}
	s.OrderNo = o.No
	res, err := in.Orders.PayBy(ctx, o, order.PayWith{Channel: channel, Method: orderpay.MethodQR})
	if err != nil {
		return err
	}
	s.PaymentNo, s.QRCode, s.Channel = res.PaymentNo, res.QRCode, res.Channel
	if err := w.attemptOf(ctx); err != nil {
		return err
	}
	_, err = w.Sim.Pay(ctx, s.QRCode)
	return err
}

// setupBucketsUnapplied: a SKU of its own with six units spread over three stock rows (two
// each; the profile's goods, price and stock policy), and two buyers' orders of three
// units each, so that every move of their units gathers from several rows (the stock
// policy "order" locks rows 0-1, then 1-2: two locked in each). Both are paid at the
// channel. The first's notification reached the payment center, whose word to the order
// system was lost (a crash after its commit, say): the order waits for payment.succeeded on
// the bus. The second's notification is not delivered yet (notify.other). The subject is
// the first order.
func setupBucketsUnapplied(ctx context.Context, w *World, in *Instance, s *Subject) error {
	p := w.Profile
	sku := w.fixture.SKU + "-buckets"
	if _, _, err := in.Orders.CreateSKU(ctx, order.NewSKU{SKU: sku, MerchantID: "shop", Title: "explorer buckets", Price: p.Price, Stock: 6,
		StockBuckets: 3, ProductType: p.ProductType, StockPolicy: p.Policy, ReserveMinutes: p.ReserveMinutes}); err != nil {
		return err
	}
	if err := w.channelPaidOrder(ctx, in, s, sku, 3, "", orderpay.ChannelAlipay); err != nil {
		return err
	}
	other := &Subject{BuyerID: "buyer-2"}
	w.S = other
	err := w.channelPaidOrder(ctx, in, other, sku, 3, "", orderpay.ChannelAlipay)
	w.S = s
	if err != nil {
		return err
	}
	// The payment center without an order system to tell: it records the payment and
	// writes payment.succeeded, and nobody hears it until the bus.
	unheard, err := payment.New(payment.Config{Store: in.Store, Channels: w.Channels, Clock: w.Clock, Logger: w.log,
		NotifyURL: func(channel string) string { return notifyBase + "/notify/" + channel }, Go: func(fn func()) { fn() }})
	if err != nil {
		return err
	}
	n, ok := w.notification(s.OutTradeNo)
	if !ok {
		return fmt.Errorf("the channel sent no notification of %s", s.OutTradeNo)
	}
	if _, err := unheard.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, n.body); err != nil {
		return err
	}
	if o, err := in.Orders.Order(ctx, s.OrderNo); err != nil || o.Status != orderpay.OrderPendingPayment {
		return fmt.Errorf("order %s should wait for its payment's result: %v %v", s.OrderNo, o, err)
	}
	return nil
}

// setupLastTry: an order of the profile's SKU paid by WeChat Pay's QR code, its refund
// before shipping approved; WeChat refused each send of the refund for now (429, frequency)
// until its next send, now due, is the last its retry plan allows: refused once more, it
// goes before an operator. WeChat refuses the next refund once more, then makes it. The
// subject's request is the refund's number.
func setupLastTry(ctx context.Context, w *World, in *Instance, s *Subject) error {
	if err := w.channelPaidOrder(ctx, in, s, w.fixture.SKU, 1, "", orderpay.ChannelWechat); err != nil {
		return err
	}
	if err := w.deliver(ctx, in, s.OutTradeNo, false); err != nil {
		return err
	}
	if err := w.drain(ctx, in); err != nil {
		return err
	}
	as, err := in.Orders.RequestAfterSale(ctx, s.OrderNo, order.AfterSaleRequest{BuyerID: s.BuyerID, Kind: orderpay.AfterSaleRefund,
		Reason: "changed my mind", Items: []order.AfterSaleItemRequest{{Line: 1, Qty: 1}}})
	if err != nil {
		return err
	}
	s.AfterSaleNo = as.No
	if as.Status == orderpay.AfterSaleRequested {
		if _, err := in.Orders.Approve(ctx, as.No, operator); err != nil {
			return err
		}
	}
	limited := sim.FaultRule{Channel: orderpay.ChannelWechat, Method: sim.MethodRefund, Kind: sim.FaultRateLimited}
	if err := w.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{limited}}); err != nil {
		return err
	}
	for range 200 {
		r, err := in.Store.ChannelRefund(ctx, as.No)
		if err != nil {
			return err
		}
		if r.Status != orderpay.ChannelRefundPending {
			return fmt.Errorf("refund %s is %s, not waiting for its next send", r.OutRefundNo, r.Status)
		}
		if r.NextAt.After(w.Clock.Now()) {
			w.Clock.Set(r.NextAt)
		}
		if _, ok := w.Profile.RefundRetry.Next(r.Tries+1, r.RetryingSince, r.NextAt); r.Tries > 0 && !ok {
			limited.Limit = 1
			return w.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{limited}})
		}
		if _, err := in.Payments.RefundDue(ctx, 100, 1); err != nil {
			return err
		}
	}
	return errors.New("the refund never reached its last try")
}

// ---- operations ----

// notifyOther delivers the channel's notification of every trade but the subject's (in
// buckets-unapplied, the second order's).
func notifyOther(ctx context.Context, w *World, label string) error {
	for _, n := range w.Sim.NotifyStats() {
		if n.OutRefundNo != "" || n.OutTradeNo == w.S.OutTradeNo {
			continue
		}
		if err := w.deliver(ctx, w.In(0), n.OutTradeNo, false); err != nil {
			return err
		}
	}
	return nil
}

// walletPayNotify: the buyer pays the scene's QR code at the wallet, and the channel's
// notification of it is delivered at once.
func walletPayNotify(ctx context.Context, w *World, label string) error {
	orderpay.Step(ctx, orderpay.StepCall, "the buyer pays at the wallet")
	if _, err := w.Sim.Pay(ctx, w.S.QRCode); err != nil {
		return err
	}
	return w.deliver(ctx, w.In(0), w.S.OutTradeNo, false)
}

// retentionHolds: the stock-hold sweeper fires when the order's hold ends, then retention
// runs at the first moment it may delete that released hold (its Published period, at its
// floor, after the release). Without a hold (the stock policies "order" and "payment") it
// runs as late as it would have.
func retentionHolds(ctx context.Context, w *World, label string) error {
	in := w.In(0)
	at := w.Clock.Now()
	if hs, err := in.Store.StockHolds(ctx, w.S.OrderNo); err == nil && len(hs) > 0 {
		at = hs[0].HoldUntil
	}
	w.fire(ctx, "stock hold release", at.Add(time.Second))
	if _, err := in.Orders.ReleaseExpiredHolds(ctx, 100); err != nil {
		return err
	}
	w.fire(ctx, "retention", w.Clock.Now().Add(w.Profile.Retention.Published+time.Second))
	orderpay.Step(ctx, orderpay.StepRetain, "retention pass")
	_, err := in.Store.Retain(ctx, w.Clock.Now(), w.Profile.Retention)
	return err
}

// refundSendResolve: the refund worker fires on instance i; a refund it put before the
// operators is at once recorded paid outside the channel by the operator on duty (what an
// operator who trusts the queue does). One still on its way is left alone.
func refundSendResolve(i int) func(ctx context.Context, w *World, label string) error {
	send := refundSend(i)
	return func(ctx context.Context, w *World, label string) error {
		if err := send(ctx, w, label); err != nil {
			return err
		}
		in := w.In(i)
		r, err := in.Store.ChannelRefund(ctx, w.S.AfterSaleNo)
		if err != nil || r.Status != orderpay.ChannelRefundNeedsAction {
			return err
		}
		_, err = in.Payments.ResolveRefund(ctx, r.OutRefundNo, operator, "BANK-"+label, "paid back by bank transfer")
		return err
	}
}

// ---- checks ----

// checkParcels: no unit is refunded out of a parcel after it shipped. A refund before
// shipping takes its units out of parcels still PENDING when it is approved; so a shipped
// parcel's refunded units of a line are at most those of the refunds before shipping
// approved before it shipped (by the history's order). More went with the goods.
func checkParcels(ctx context.Context, w *World) ([]string, error) {
	st := w.In(0).Store
	rows, err := st.DB().QueryContext(ctx, fmt.Sprintf(`SELECT seq, entity, entity_no FROM history
		WHERE (entity = '%s' AND to_status = '%s' AND event = '%s') OR (entity = '%s' AND event = '%s') ORDER BY seq`,
		orderpay.EntityShipment, orderpay.ShipmentShipped, orderpay.ShipmentEventShip, orderpay.EntityAfterSale, orderpay.AfterSaleEventApprove))
	if err != nil {
		return nil, err
	}
	at := map[string]int64{} // a parcel's ship, a request's approval: its history seq
	for rows.Next() {
		var seq int64
		var entity, no string
		if err := rows.Scan(&seq, &entity, &no); err != nil {
			rows.Close()
			return nil, err
		}
		if _, seen := at[entity+"/"+no]; !seen {
			at[entity+"/"+no] = seq
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	orders, err := orderNos(ctx, st.DB())
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, no := range orders {
		parcels, err := st.Shipments(ctx, no)
		if err != nil {
			return nil, err
		}
		sales, err := st.AfterSales(ctx, no)
		if err != nil {
			return nil, err
		}
		for _, p := range parcels {
			shipped, ok := at[orderpay.EntityShipment+"/"+p.No]
			if !ok {
				continue
			}
			for _, pi := range p.Items {
				var before int64 // units of refunds before shipping approved before it shipped
				for _, a := range sales {
					if approved, ok := at[orderpay.EntityAfterSale+"/"+a.No]; a.Kind == orderpay.AfterSaleRefund && ok && approved < shipped {
						for _, ai := range a.Items {
							if ai.Line == pi.Line {
								before += ai.Qty
							}
						}
					}
				}
				if pi.Refunded > before {
					bad = append(bad, fmt.Sprintf("parcels: %s line %d shipped with %d units refunded out of it, of which refunds approved before it shipped take %d: the rest went with the goods",
						p.No, pi.Line, pi.Refunded, before))
				}
			}
		}
	}
	return bad, nil
}

// orderNos are every order's number, in order.
func orderNos(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT order_no FROM orders ORDER BY order_no`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var nos []string
	for rows.Next() {
		var no string
		if err := rows.Scan(&no); err != nil {
			return nil, err
		}
		nos = append(nos, no)
	}
	return nos, rows.Err()
}

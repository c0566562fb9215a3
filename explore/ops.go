package explore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/channel/sim"
	"orderpay/order"
	"orderpay/reconcile"
)

// Op is one operation of the catalogue: something a buyer, an operator, a channel, a
// timer or a second instance does to one order, payment or app payment. Run does it to
// the scene's subject (World.S) and returns what the caller would be told; every step it
// takes is a point at which another operation can meet it.
type Op struct {
	Name string
	// Scenes are the scenes in which it has something to do.
	Scenes []string
	// Second: it runs on the second instance (PostgreSQL only).
	Second bool
	Run    func(ctx context.Context, w *World, label string) error
}

// Subject is what a scene made.
type Subject struct {
	Scene       string
	BuyerID     string
	OrderNo     string
	PaymentNo   string
	OutTradeNo  string
	QRCode      string
	Channel     string
	ShipmentNo  string
	AfterSaleNo string
	App         *orderpay.App
	AppPayment  string        // the app payment's number
	Queue       *QueueSubject // ticket-waiting: the queued SKU and its tickets (ops_tickets.go)
}

// The scenes: the states of one order (or app payment) in which operations meet.
const (
	SceneFresh       = "fresh"        // a SKU with one unit, no order
	SceneUnpaid      = "unpaid"       // an order with an open QR attempt, nobody paid
	SceneChannelPaid = "channel-paid" // the buyer paid at the channel; no notification yet
	ScenePaid        = "paid"         // the notification applied; its bus message not yet delivered
	SceneShipped     = "shipped"      // paid, the bus drained, the parcel shipped
	SceneRequested   = "requested"    // paid, a refund before shipping waits for review
	SceneRefunding   = "refunding"    // the request approved: its refund not yet sent
	SceneQueued      = "queued"       // the refund was refused until the operators' queue took it
	SceneAppUnpaid   = "app-unpaid"   // an app payment with an open QR attempt
	SceneAppPaid     = "app-paid"     // the app payment paid and told
)

// Scenes lists the scenes in order.
var Scenes = []string{SceneFresh, SceneUnpaid, SceneChannelPaid, ScenePaid, SceneShipped, SceneRequested, SceneRefunding, SceneQueued, SceneAppUnpaid, SceneAppPaid}

const operator = "op:explorer"

var address = orderpay.Address{Name: "Li Lei", Phone: "13800000000", Detail: "1 Explorer Road, Hangzhou"}

// sceneSetups set up the scenes added by other files (ops_defects.go), by name.
var sceneSetups = map[string]func(ctx context.Context, w *World, in *Instance, s *Subject) error{}

// setup brings w to scene, with no stepper: it is the case's fixture, not part of it.
func (w *World) setup(ctx context.Context, scene string) error {
	in := w.In(0)
	s := &Subject{Scene: scene, BuyerID: "buyer-1"}
	w.S = s
	if set := sceneSetups[scene]; set != nil {
		return set(ctx, w, in, s)
	}
	switch scene {
	case SceneFresh:
		return nil
	case SceneAppUnpaid, SceneAppPaid:
		app, err := in.Apps.App(ctx, w.fixture.AppID)
		if err != nil {
			return err
		}
		s.App = &app.App
		v, _, err := in.Apps.CreatePayment(ctx, s.App, apppay.CreatePaymentRequest{MerchantOrderNo: "M1", Amount: w.Profile.Price,
			Subject: "explorer", Channel: orderpay.ChannelAlipay, ExpiresIn: w.Profile.PayWindows[w.Profile.ProductType]})
		if err != nil {
			return err
		}
		s.AppPayment, s.PaymentNo, s.QRCode, s.Channel = v.PaymentNo, v.PaymentNo, v.QRCode, orderpay.ChannelAlipay
		if err := w.attemptOf(ctx); err != nil {
			return err
		}
		if scene == SceneAppUnpaid {
			return nil
		}
		if _, err := w.Sim.Pay(ctx, s.QRCode); err != nil {
			return err
		}
		if err := w.deliver(ctx, in, s.OutTradeNo, false); err != nil {
			return err
		}
		return w.drain(ctx, in)
	}
	o, _, err := in.Orders.Create(ctx, order.CreateOrderRequest{BuyerID: s.BuyerID, Items: []order.ItemRequest{{SKU: w.fixture.SKU, Qty: 1}}, Address: address})
	if err != nil {
		return err
	}
	s.OrderNo = o.No
	res, err := in.Orders.PayBy(ctx, o, order.PayWith{Channel: orderpay.ChannelAlipay, Method: orderpay.MethodQR})
	if err != nil {
		return err
	}
	s.PaymentNo, s.QRCode, s.Channel = res.PaymentNo, res.QRCode, res.Channel
	if err := w.attemptOf(ctx); err != nil {
		return err
	}
	if scene == SceneUnpaid {
		return nil
	}
	if _, err := w.Sim.Pay(ctx, s.QRCode); err != nil {
		return err
	}
	if scene == SceneChannelPaid {
		return nil
	}
	if err := w.deliver(ctx, in, s.OutTradeNo, false); err != nil {
		return err
	}
	if scene == ScenePaid {
		return nil
	}
	if err := w.drainToParcel(ctx, in, s); err != nil {
		return err
	}
	switch scene {
	case SceneShipped:
		_, err := in.Orders.Ship(ctx, s.ShipmentNo, "SF", "SF0001", operator)
		return err
	case SceneRequested, SceneRefunding, SceneQueued:
		as, err := in.Orders.RequestAfterSale(ctx, s.OrderNo, order.AfterSaleRequest{BuyerID: s.BuyerID, Kind: orderpay.AfterSaleRefund,
			Reason: "changed my mind", Items: []order.AfterSaleItemRequest{{Line: 1, Qty: 1}}})
		if err != nil {
			return err
		}
		s.AfterSaleNo = as.No
		if scene != SceneRequested && as.Status == orderpay.AfterSaleRequested {
			if _, err = in.Orders.Approve(ctx, as.No, operator); err != nil {
				return err
			}
		}
		if scene == SceneQueued {
			return w.queueRefund(ctx, in, as.No)
		}
		return err
	}
	return nil
}

// queueRefund has the channel refuse refund no (the merchant's balance is short) until the
// retry plan gives it to the operators (NEEDS_ACTION); then the balance is topped up.
func (w *World) queueRefund(ctx context.Context, in *Instance, no string) error {
	if err := w.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodRefund, Kind: sim.FaultBalance}}}); err != nil {
		return err
	}
	defer w.Sim.SetFaults(sim.FaultPlan{})
	for range 200 {
		if _, err := in.Payments.RefundDue(ctx, 100, 1); err != nil {
			return err
		}
		r, err := in.Store.ChannelRefund(ctx, no)
		if err != nil {
			return err
		}
		if r.Status == orderpay.ChannelRefundNeedsAction {
			for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
				if err := w.Sim.TopUp(ch); err != nil {
					return err
				}
			}
			return nil
		}
		w.Clock.Set(r.NextAt.Add(time.Second))
	}
	return errors.New("the refund never reached the operators' queue")
}

// attemptOf finds the subject's open attempt.
func (w *World) attemptOf(ctx context.Context) error {
	cos, err := w.In(0).Store.ChannelOrders(ctx, w.S.PaymentNo)
	if err != nil {
		return err
	}
	if len(cos) == 0 {
		return errors.New("the payment has no attempt")
	}
	w.S.OutTradeNo = cos[len(cos)-1].OutTradeNo
	return nil
}

// deliver hands the channel's notification of trade to in, as the channel would post it;
// forged changes its amount (its signature no longer holds).
func (w *World) deliver(ctx context.Context, in *Instance, trade string, forged bool) error {
	n, ok := w.notification(trade)
	if !ok {
		return orderpay.Errorf(orderpay.ENOTFOUND, "the channel sent no notification of %s", trade)
	}
	body := n.body
	if forged {
		body = forge(n)
	}
	_, err := in.Payments.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, body)
	return err
}

// notification is the channel's notification of trade, if it sent one.
func (w *World) notification(trade string) (note, bool) {
	for _, n := range w.Sim.NotifyStats() {
		if n.OutTradeNo == trade && n.OutRefundNo == "" {
			return w.mail.wait(trade)
		}
	}
	return note{}, false
}

// forge is a notification with its amount changed and its signature kept.
func forge(n note) []byte {
	if n.channel == orderpay.ChannelAlipay {
		q, err := url.ParseQuery(string(n.body))
		if err != nil {
			return n.body
		}
		q.Set("total_amount", "0.01")
		q.Set("receipt_amount", "0.01")
		return []byte(q.Encode())
	}
	var m map[string]any
	if json.Unmarshal(n.body, &m) != nil {
		return n.body
	}
	m["id"] = "forged"
	b, _ := json.Marshal(m)
	return b
}

// drain delivers every message of the outbox to its consumers, in order, and marks it
// published: the relay and the bus, each message a publish and an ack.
func (w *World) drain(ctx context.Context, in *Instance) error {
	for {
		msgs, err := in.Store.UnpublishedMessages(ctx, 100)
		if err != nil || len(msgs) == 0 {
			return err
		}
		for _, m := range msgs {
			if err := w.publish(ctx, in, m); err != nil {
				return err
			}
			if err := in.Store.MarkPublished(ctx, []string{m.ID}, w.Clock.Now()); err != nil {
				return err
			}
		}
	}
}

// publish hands one message to its consumers: the order system's (payment results, and
// the queued SKUs' tickets) and the webhooks' (the app's endpoint).
func (w *World) publish(ctx context.Context, in *Instance, m orderpay.Message) error {
	orderpay.Step(ctx, orderpay.StepPublish, m.Subject)
	w.Events = append(w.Events, eventOf(m))
	if m.Subject == orderpay.SubjectPaymentSucceeded {
		if err := in.Results.Consume(ctx, m); err != nil {
			return err
		}
	}
	// The order system's queue consumer ("order-system-tickets").
	if m.Subject == orderpay.SubjectTicketQueued {
		if err := in.Orders.HandleTicket(ctx, m); err != nil {
			return err
		}
	}
	// The webhooks' own consumer of the same stream.
	if err := in.Webhooks.Handle(ctx, m); err != nil {
		return err
	}
	orderpay.Step(ctx, orderpay.StepAck, m.Subject)
	return nil
}

// fire is a timer or sweeper firing at its time: the clock moves on to at, if it is not
// there yet.
func (w *World) fire(ctx context.Context, what string, at time.Time) {
	orderpay.Step(ctx, orderpay.StepFire, what)
	if now := w.Clock.Now(); at.After(now) {
		w.Clock.Set(at)
	}
}

// deadline is the subject's payment deadline.
func (w *World) deadline(ctx context.Context, in *Instance) time.Time {
	if p, err := in.Store.Payment(ctx, w.S.PaymentNo); err == nil {
		return p.PayDeadline
	}
	return w.Clock.Now()
}

func (w *World) order(ctx context.Context, in *Instance) (*orderpay.Order, error) {
	return in.Orders.Order(ctx, w.S.OrderNo)
}

// Catalogue is every operation.
var Catalogue = []*Op{
	{Name: "create", Scenes: []string{SceneFresh, SceneUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
		_, _, err := w.In(0).Orders.Create(ctx, order.CreateOrderRequest{BuyerID: "buyer-" + label, Items: []order.ItemRequest{{SKU: w.fixture.SKU, Qty: 1}}, Address: address})
		return err
	}},
	{Name: "pay.alipay.qr", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: payBy(orderpay.ChannelAlipay, orderpay.MethodQR, "")},
	{Name: "pay.alipay.wap", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelAlipay, orderpay.MethodWAP, "")},
	{Name: "pay.wechat.native", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: payBy(orderpay.ChannelWechat, orderpay.MethodQR, "")},
	{Name: "pay.alipay.pc", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelAlipay, orderpay.MethodPC, "")},
	{Name: "pay.alipay.app", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelAlipay, orderpay.MethodApp, "")},
	{Name: "pay.alipay.inapp", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelAlipay, orderpay.MethodInApp, "alipay")},
	{Name: "pay.wechat.jsapi", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelWechat, orderpay.MethodJSAPI, "jsapi")},
	{Name: "pay.wechat.mini", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelWechat, orderpay.MethodMini, "mini")},
	{Name: "pay.wechat.h5", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelWechat, orderpay.MethodH5, "")},
	{Name: "pay.wechat.app", Scenes: []string{SceneUnpaid}, Run: payBy(orderpay.ChannelWechat, orderpay.MethodApp, "")},
	{Name: "pay.barcode", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		code, err := w.Sim.IssueCode(orderpay.ChannelWechat, w.S.BuyerID, sim.CodeConfirm, 0)
		if err != nil {
			return err
		}
		app, err := in.Apps.App(ctx, w.fixture.AppID)
		if err != nil {
			return err
		}
		_, err = in.Apps.PosPay(ctx, &app.App, apppay.PosRequest{AuthCode: code.AuthCode, Amount: w.Profile.Price, OrderNo: w.S.OrderNo,
			StoreID: "store-1", TillID: "till-" + label, IdempotencyKey: "till-" + label, ClientIP: "10.0.0.2"})
		return err
	}},
	{Name: "wallet.pay", Scenes: []string{SceneUnpaid, SceneAppUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
		orderpay.Step(ctx, orderpay.StepCall, "the buyer pays at the wallet")
		_, err := w.Sim.Pay(ctx, w.S.QRCode)
		return err
	}},
	{Name: "notify", Scenes: []string{SceneChannelPaid, ScenePaid}, Run: func(ctx context.Context, w *World, label string) error {
		return w.deliver(ctx, w.In(0), w.S.OutTradeNo, false)
	}},
	{Name: "notify.forged", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: func(ctx context.Context, w *World, label string) error {
		if _, ok := w.notification(w.S.OutTradeNo); !ok {
			// Nobody paid: a forger copies another trade's notification. Pay one
			// elsewhere to have a genuine body to tamper with? The trade itself is
			// unpaid, so the forgery is of a notification that never was.
			return orderpay.Errorf(orderpay.ENOTFOUND, "no notification to forge")
		}
		return w.deliver(ctx, w.In(0), w.S.OutTradeNo, true)
	}},
	{Name: "query", Scenes: []string{SceneUnpaid, SceneChannelPaid, SceneAppUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Payments.QueryAttempt(ctx, w.S.OutTradeNo, "explorer")
		return err
	}},
	{Name: "sweep.queries", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: sweepQueries(0)},
	{Name: "timeout.close", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		w.fire(ctx, "order timeout close", w.deadline(ctx, in).Add(w.Profile.CloseGrace+time.Second))
		_, err := in.Orders.ExpireDue(ctx, w.Profile.CloseGrace, 100, 1)
		return err
	}},
	{Name: "payment.close", Scenes: []string{SceneUnpaid, SceneChannelPaid, SceneAppUnpaid}, Run: paymentClose(0)},
	{Name: "cancel", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Orders.Cancel(ctx, w.S.OrderNo)
		return err
	}},
	{Name: "bus", Scenes: []string{ScenePaid, SceneChannelPaid, SceneRequested}, Run: func(ctx context.Context, w *World, label string) error {
		return w.drain(ctx, w.In(0))
	}},
	{Name: "bus.redeliver", Scenes: []string{ScenePaid, SceneShipped}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		ev, err := in.Payments.Result(ctx, w.S.OrderNo)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(ev)
		return w.publish(ctx, in, orderpay.Message{ID: orderpay.SubjectPaymentSucceeded + ":" + ev.PaymentNo, Subject: orderpay.SubjectPaymentSucceeded, Payload: b, CreatedAt: w.Clock.Now()})
	}},
	{Name: "aftersale.request", Scenes: []string{ScenePaid, SceneShipped, SceneRequested, SceneRefunding}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Orders.RequestAfterSale(ctx, w.S.OrderNo, order.AfterSaleRequest{BuyerID: w.S.BuyerID, Kind: orderpay.AfterSaleRefund,
			Reason: "explorer " + label, Items: []order.AfterSaleItemRequest{{Line: 1, Qty: 1}}})
		return err
	}},
	{Name: "aftersale.approve", Scenes: []string{SceneRequested}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Orders.Approve(ctx, w.S.AfterSaleNo, operator)
		return err
	}},
	{Name: "aftersale.reject", Scenes: []string{SceneRequested}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Orders.Reject(ctx, w.S.AfterSaleNo, operator, "not this time")
		return err
	}},
	{Name: "ship", Scenes: []string{ScenePaid, SceneRequested, SceneRefunding}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		no := w.S.ShipmentNo
		if no == "" {
			parcels, err := in.Orders.Shipments(ctx, w.S.OrderNo)
			if err != nil || len(parcels) == 0 {
				return orderpay.Errorf(orderpay.ENOTFOUND, "no parcel yet")
			}
			no = parcels[0].No
		}
		_, err := in.Orders.Ship(ctx, no, "SF", "SF0001", operator)
		return err
	}},
	{Name: "confirm", Scenes: []string{SceneShipped}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Orders.ConfirmReceipt(ctx, w.S.OrderNo, w.S.ShipmentNo, w.S.BuyerID)
		return err
	}},
	{Name: "refund.send", Scenes: []string{SceneRefunding, SceneQueued, SceneAppPaid}, Run: refundSend(0)},
	{Name: "operator.retry", Scenes: []string{SceneQueued}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Payments.RetryRefund(ctx, w.S.AfterSaleNo, operator)
		return err
	}},
	{Name: "operator.resolve", Scenes: []string{SceneQueued}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Payments.ResolveRefund(ctx, w.S.AfterSaleNo, operator, "BANK-"+label, "paid back by bank transfer")
		return err
	}},
	{Name: "reconcile", Scenes: []string{SceneUnpaid, SceneChannelPaid, ScenePaid, SceneRefunding}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		// The bill of a day is ready the next morning.
		w.fire(ctx, "daily reconciliation", w.Clock.Now().In(orderpay.ChinaTime).Truncate(24*time.Hour).Add(34*time.Hour))
		_, err := in.Recon.Run(ctx, orderpay.ChannelAlipay, reconcile.Yesterday(w.Clock.Now()))
		return err
	}},
	{Name: "stock.holds", Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		at := w.Clock.Now()
		if hs, err := in.Store.StockHolds(ctx, w.S.OrderNo); err == nil && len(hs) > 0 {
			at = hs[0].HoldUntil
		}
		w.fire(ctx, "stock hold release", at.Add(time.Second))
		_, err := in.Orders.ReleaseExpiredHolds(ctx, 100)
		return err
	}},
	{Name: "retention", Scenes: []string{SceneUnpaid, SceneChannelPaid, ScenePaid, SceneRefunding}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		orderpay.Step(ctx, orderpay.StepRetain, "retention pass")
		_, err := in.Store.Retain(ctx, w.Clock.Now(), w.Profile.Retention)
		return err
	}},
	{Name: "app.close", Scenes: []string{SceneAppUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
		_, err := w.In(0).Apps.ClosePayment(ctx, w.S.App, w.S.AppPayment)
		return err
	}},
	{Name: "app.timeout", Scenes: []string{SceneAppUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		w.fire(ctx, "app payment close", w.deadline(ctx, in).Add(w.Profile.CloseGrace+time.Second))
		_, err := in.Apps.CloseDue(ctx, w.Profile.CloseGrace, 100, 1)
		return err
	}},
	{Name: "app.refund", Scenes: []string{SceneAppPaid}, Run: func(ctx context.Context, w *World, label string) error {
		_, _, err := w.In(0).Apps.CreateRefund(ctx, w.S.App, w.S.AppPayment, apppay.CreateRefundRequest{RefundNo: "R" + label, Amount: w.Profile.Price, Reason: "explorer"})
		return err
	}},
	{Name: "webhook.deliver", Scenes: []string{SceneAppPaid}, Run: webhookDeliver(0)},
	// The same background steps on the second instance (PostgreSQL).
	{Name: "i2.webhook.deliver", Second: true, Scenes: []string{SceneAppPaid}, Run: webhookDeliver(1)},
	{Name: "i2.refund.send", Second: true, Scenes: []string{SceneRefunding, SceneQueued, SceneAppPaid}, Run: refundSend(1)},
	{Name: "i2.sweep.queries", Second: true, Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: sweepQueries(1)},
	{Name: "i2.payment.close", Second: true, Scenes: []string{SceneUnpaid, SceneChannelPaid}, Run: paymentClose(1)},
}

// crashOp is the crash: B is not an operation but the end of A's process at its step, and
// a restart of every instance.
var crashOp = &Op{Name: "crash", Scenes: Scenes}

// payBy asks for a pay instruction of the method; payer names the wallet identity it is
// made for: "alipay" (the buyer's Alipay user id), or a WeChat app ("jsapi", "mini") whose
// openid of the buyer it is.
func payBy(channel string, m orderpay.PayMethod, payer string) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		in := w.In(0)
		o, err := w.order(ctx, in)
		if err != nil {
			return err
		}
		wk := &w.Sim.Keys().Wechat
		switch payer {
		case "alipay":
			payer = w.Sim.IdentityOf(w.S.BuyerID, "").AlipayUserID
		case "jsapi":
			payer = w.Sim.IdentityOf(w.S.BuyerID, wk.JSAPIAppID).OpenID
		case "mini":
			payer = w.Sim.IdentityOf(w.S.BuyerID, wk.MiniAppID).OpenID
		}
		_, err = in.Orders.PayBy(ctx, o, order.PayWith{Channel: channel, Method: m, Payer: payer, ClientIP: "10.0.0.1"})
		return err
	}
}

func sweepQueries(i int) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		in := w.In(i)
		at := w.Clock.Now()
		if q, err := in.Store.PendingQuery(ctx, w.S.OutTradeNo); err == nil {
			at = q.NextAt
		}
		w.fire(ctx, "pending-query sweeper", at.Add(3*time.Second))
		_, err := in.Payments.QueryDue(ctx, 100, 1)
		return err
	}
}

func paymentClose(i int) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		in := w.In(i)
		w.fire(ctx, "payment close", w.deadline(ctx, in).Add(2*w.Profile.CloseGrace+time.Second))
		_, err := in.Payments.CloseDue(ctx, 2*w.Profile.CloseGrace, 100, 1)
		return err
	}
}

func webhookDeliver(i int) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		in := w.In(i)
		w.fire(ctx, "webhook delivery", w.Clock.Now())
		_, err := in.Webhooks.RunOnce(ctx)
		return err
	}
}

func refundSend(i int) func(ctx context.Context, w *World, label string) error {
	return func(ctx context.Context, w *World, label string) error {
		in := w.In(i)
		w.fire(ctx, "refund worker", w.Clock.Now())
		_, err := in.Payments.RefundDue(ctx, 100, 1)
		return err
	}
}

// OpNamed is the catalogue's operation of that name (crash included).
func OpNamed(name string) (*Op, error) {
	if name == crashOp.Name {
		return crashOp, nil
	}
	for _, op := range Catalogue {
		if op.Name == name {
			return op, nil
		}
	}
	return nil, fmt.Errorf("no operation %q (see orderpay explore --list)", name)
}

// applies reports whether op has something to do in scene.
func (op *Op) applies(scene string) bool { return slices.Contains(op.Scenes, scene) }

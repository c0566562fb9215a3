package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"orderpay"
)

// Behaviour is what a simulated buyer does with an order.
type Behaviour string

const (
	// PayNow asks for a code and pays at once.
	PayNow Behaviour = "pay_now"
	// PayDelayed asks for a code and pays later, at a random moment within the window.
	PayDelayed Behaviour = "pay_delayed"
	// PayLate asks for a code and pays after the deadline: the channel must refuse, or
	// the server must refund.
	PayLate Behaviour = "pay_late"
	// Abandon creates the order and walks away, with or without asking for a code first.
	Abandon Behaviour = "abandon"
	// PayTwice pays by both channels, or asks again and re-scans after paying.
	PayTwice Behaviour = "pay_twice"
	// CancelInFlight scans the code, cancels the order and then tries to pay, or does both
	// at once.
	CancelInFlight Behaviour = "cancel_in_flight"
	// ReturnEarly pays, comes back from the wallet at once (to the shop's page, where the
	// wallet sends the browser) and polls the order at once, before the notification can
	// have arrived: the page's "ok" proves nothing, only the order's status does.
	ReturnEarly Behaviour = "return_early"
	// ReturnUnpaid opens the cashier and leaves without paying (the wallet's decline; an
	// Alipay WAP cashier then sends the browser to quit_url), comes back to the shop and
	// polls: the order must end CANCELLED at its deadline, nothing paid.
	ReturnUnpaid Behaviour = "return_unpaid"
	// PayExpired asks for an instruction that expires before the order does (a WeChat H5
	// link, 5 business minutes), waits past its expires_at, tries the old one (the wallet
	// must refuse it), asks again and pays the fresh one.
	PayExpired Behaviour = "pay_expired"
	// FalseOK opens the cashier and pays nothing, but the page it lands on says "ok": the
	// buyer believes it paid and polls until the deadline and after. The order must end
	// CANCELLED, nothing paid and nothing owed.
	FalseOK Behaviour = "false_ok"
)

// Behaviours are every behaviour with its share of buyers, in percent.
var Behaviours = []struct {
	Behaviour Behaviour
	Percent   int
}{
	{PayNow, 48}, {PayDelayed, 10}, {PayLate, 5}, {Abandon, 10}, {PayTwice, 7}, {CancelInFlight, 8},
	{ReturnEarly, 4}, {ReturnUnpaid, 3}, {PayExpired, 3}, {FalseOK, 2},
}

// unpaidBehaviours are the behaviours whose orders nobody pays: each must end CANCELLED with
// nothing paid at the channel (UnpaidCheck).
var unpaidBehaviours = []Behaviour{ReturnUnpaid, FalseOK}

// Variants of behaviours.
const (
	VariantBothChannels = "both_channels" // PayTwice: codes from both channels, both paid
	VariantRescan       = "rescan"        // PayTwice: pay, ask for the code again, scan and pay again
	VariantNoCode       = "no_code"       // Abandon: never asks for a code
	VariantScanned      = "scanned"       // Abandon: asks for a code and scans it, never pays
	VariantSequential   = "sequential"    // CancelInFlight: scan, cancel, then pay
	VariantConcurrent   = "concurrent"    // CancelInFlight: scan, then cancel and pay at the same time
)

// catalogue is what the buyers order from: fast-moving goods and special offers, whose
// windows the run's settings keep within minutes, so every order's deadline passes within
// the run. Stock is plenty: the run is about payments, not about selling out. The stock
// policies here are the fixed settings' (FixedSettings): each policy is on the list, so
// that the auditor's I4 checks all three under faults: the milk is deducted at payment, and
// the mooncakes are held for 5 minutes, so a buyer who pays late pays after the hold was
// released and the payment deducts again. Drawn settings (DrawSettings) give each SKU a
// policy of their own, every policy on at least one SKU.
var catalogue = []struct {
	name           string
	price          int64
	productType    string
	stockPolicy    string
	reserveMinutes int64
}{
	{"fast-lychee", 3990, "fast", "order", 0},
	{"fast-milk", 1250, "fast", "payment", 0},
	{"special-tea", 25800, "special", "order", 0},
	{"special-mooncake", 8800, "special", "reserve", 5},
}

// BuyerPlan is one buyer's script, drawn from the seed.
type BuyerPlan struct {
	Index     int
	Behaviour Behaviour
	Variant   string
	// Watch makes the buyer poll the order after paying (or cancelling) until it is final.
	Watch bool
	// Channel is the channel the buyer pays by first.
	Channel string
	// Method is how the buyer's device pays at Channel (a QR code, a cashier, an app…):
	// Channel and Method are the buyer's way to pay (Way).
	Method orderpay.PayMethod
	// Lines are catalogue indexes and quantities.
	Lines []PlanLine
	// At places the buyer's delayed action: for PayDelayed, the fraction of the remaining
	// window to wait before paying; for PayLate, how far past the deadline to pay, as a
	// fraction of the late spread.
	At float64
	// Coupon: the buyer orders with a coupon of a few fen off, so that the order's lines
	// carry shares of it and their payables seldom divide by their units (what after-sales
	// pricing must get right).
	Coupon bool
	// App: the buyer pays a business app through the payments API instead of the shop
	// (apps.go); the lines only price it.
	App bool
	// Barcode, if not nil, makes the buyer pay at a till with their wallet's payment code
	// (barcode.go), whatever the behaviour and way drawn above; the lines price a walk-in
	// sale, or make the order the till takes.
	Barcode *BarcodePlan
}

// PlanLine is one line of a planned order.
type PlanLine struct {
	Catalogue int
	Qty       int64
}

// Population is who the buyers are: the behaviours with their relative weights, and the
// share of buyers who watch their order.
type Population struct {
	Mix   []Share
	Watch float64 // in [0, 1]
	// App is the share of buyers who pay a business app instead (apps.go), in [0, 1].
	App float64
	// Ways are the ways to pay with their weights (DefaultWays, ParseWays); nil is
	// DefaultWays.
	Ways []WayShare
	// Barcode is the share of buyers who pay at a till with a payment code instead
	// (barcode.go), in [0, 1].
	Barcode float64
}

// Share is one behaviour's weight in a mix.
type Share struct {
	Behaviour Behaviour
	Weight    int
}

// DefaultPopulation is Behaviours' shares, half of the buyers watching, the default mix of
// ways to pay.
func DefaultPopulation() Population {
	p := Population{Watch: 0.5, Ways: DefaultWays()}
	for _, b := range Behaviours {
		p.Mix = append(p.Mix, Share{b.Behaviour, b.Percent})
	}
	return p
}

// ParsePopulation reads --buyers ("" for the default mix, or a comma list of
// behaviour[=weight], a missing weight being 1: "pay_now", "pay_now=9,abandon=1") and
// --watch ("half", "all", "none", or a share in [0, 1]).
func ParsePopulation(buyers, watch string) (Population, error) {
	p := DefaultPopulation()
	if buyers = strings.TrimSpace(buyers); buyers != "" {
		p.Mix = nil
		for _, part := range strings.Split(buyers, ",") {
			name, weight, hasWeight := strings.Cut(strings.TrimSpace(part), "=")
			w := 1
			if hasWeight {
				if _, err := fmt.Sscan(weight, &w); err != nil || w < 1 {
					return p, fmt.Errorf("chaos: buyers: weight %q of %s is not a positive integer", weight, name)
				}
			}
			known := false
			for _, b := range Behaviours {
				known = known || string(b.Behaviour) == name
			}
			if !known {
				return p, fmt.Errorf("chaos: buyers: unknown behaviour %q", name)
			}
			p.Mix = append(p.Mix, Share{Behaviour(name), w})
		}
	}
	var err error
	p.Watch, err = parseShare("watch", watch, "half, all, none", map[string]float64{"": p.Watch, "half": p.Watch, "all": 1, "none": 0})
	return p, err
}

// parseShare reads a flag that is a share of the buyers: one of the words named (listed in
// words, for the error), or a number in [0, 1].
func parseShare(flag, v, words string, named map[string]float64) (float64, error) {
	v = strings.TrimSpace(v)
	if share, ok := named[v]; ok {
		return share, nil
	}
	var share float64
	if _, err := fmt.Sscan(v, &share); err != nil || share < 0 || share > 1 {
		return 0, fmt.Errorf("chaos: %s: %q is not %s or a share in [0, 1]", flag, v, words)
	}
	return share, nil
}

// PlanBuyer draws buyer i's script from the seed, in the default population. The same seed
// and index always give the same script.
func PlanBuyer(seed uint64, i int) BuyerPlan { return DefaultPopulation().Plan(seed, i) }

// Plan draws buyer i's script from the seed, in this population.
func (pop Population) Plan(seed uint64, i int) BuyerPlan {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	p := BuyerPlan{Index: i}
	total := 0
	for _, s := range pop.Mix {
		total += s.Weight
	}
	roll := rng.IntN(total)
	for _, b := range pop.Mix {
		if roll < b.Weight {
			p.Behaviour = b.Behaviour
			break
		}
		roll -= b.Weight
	}
	p.Watch = rng.Float64() < pop.Watch
	p.Channel = orderpay.ChannelAlipay
	if rng.IntN(2) == 0 {
		p.Channel = orderpay.ChannelWechat
	}
	first := rng.IntN(len(catalogue))
	p.Lines = []PlanLine{{first, 1 + rng.Int64N(3)}}
	if rng.IntN(10) < 3 {
		second := (first + 1 + rng.IntN(len(catalogue)-1)) % len(catalogue)
		p.Lines = append(p.Lines, PlanLine{second, 1 + rng.Int64N(3)})
	}
	p.At = rng.Float64()
	either := rng.IntN(2) == 0
	switch p.Behaviour {
	case PayTwice:
		p.Variant = pick(either, VariantBothChannels, VariantRescan)
	case Abandon:
		// A buyer who walked away does not watch.
		p.Variant, p.Watch = pick(either, VariantNoCode, VariantScanned), false
	case CancelInFlight:
		p.Variant = pick(either, VariantSequential, VariantConcurrent)
	}
	p.Coupon = rng.IntN(2) == 0 // drawn last, so that the draws above stay what they were
	p.App = rng.Float64() < pop.App
	// The way to pay, drawn after every draw of before methods, decides the channel too. An
	// app buyer keeps the channel drawn above and pays the app's QR code; a buyer who pays
	// after the instruction expired pays by the way whose instruction expires before its
	// order, where the mix has it.
	way := pop.drawWay(rng)
	switch {
	case p.App:
		way = PayWay{p.Channel, orderpay.MethodQR}
	case p.Behaviour == PayExpired && slices.ContainsFunc(pop.ways(), func(s WayShare) bool { return s.Way == expiringWay }):
		way = expiringWay
	}
	p.Channel, p.Method = way.Channel, way.Method
	// Who pays at a till is decided by the index alone, and their own draws have a stream
	// of their own: every draw above is what it was.
	if p.Barcode = pop.barcodePlan(seed, i); p.Barcode != nil {
		p.App, p.Watch = false, false
	}
	return p
}

// Way is the buyer's way to pay.
func (p BuyerPlan) Way() PayWay { return PayWay{p.Channel, p.Method} }

// ways is the population's mix of ways to pay.
func (pop Population) ways() []WayShare {
	if len(pop.Ways) == 0 {
		return DefaultWays()
	}
	return pop.Ways
}

// drawWay draws a way to pay by the mix's weights.
func (pop Population) drawWay(rng *rand.Rand) PayWay {
	ways := pop.ways()
	total := 0
	for _, s := range ways {
		total += s.Weight
	}
	roll := rng.IntN(total)
	for _, s := range ways {
		if roll < s.Weight {
			return s.Way
		}
		roll -= s.Weight
	}
	return ways[len(ways)-1].Way
}

func pick(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

func otherChannel(ch string) string {
	if ch == orderpay.ChannelAlipay {
		return orderpay.ChannelWechat
	}
	return orderpay.ChannelAlipay
}

// apiRetries is how many times a buyer repeats a request the server answered with a 5xx
// (EUNAVAILABLE says "retry the same request"); every failed attempt is recorded.
const apiRetries = 3

// buyer is one buyer at work: its plan, its order, and the shared run.
type buyer struct {
	r      *runner
	plan   BuyerPlan
	client *Client // the run's client, acting as this buyer

	orderNo   string
	paymentNo string    // an app buyer's payment
	deadline  time.Time // the order's deadline, capped to the compressed window (see windowEnd)
	paidAt    time.Time // when the wallet accepted this buyer's first payment
	// claims are the wallet identities the buyer's login carries so far (payer).
	claims map[string]any
	// refused says the channel refused the last instruction asked for (502 ECHANNEL).
	refused bool
}

// id is the buyer's id.
func (b *buyer) id() string { return fmt.Sprintf("buyer-%d", b.plan.Index) }

// script plays the buyer's script, up to the point where it only watches. The caller
// holds a slot for it; the buyer gives it up while it waits and holds one again when
// script returns. It reports whether the buyer now watches the order.
//
// Every instruction is asked for by the buyer's way to pay (BuyerPlan.Way), with the
// payer's wallet identity in the buyer's login where the method pays for one wallet user,
// and paid by the wallet on the device the method is for (deviceFor), as a shop's pay page
// and the real wallets do.
func (b *buyer) script(ctx context.Context) (watch bool) {
	if b.plan.Barcode != nil {
		return b.barcodeScript(ctx)
	}
	if b.plan.App {
		return b.appScript(ctx)
	}
	if b.plan.Way() == wapWay && !b.awaitMinute(ctx) {
		return false
	}
	if !b.create(ctx) {
		return false
	}
	if slices.Contains(unpaidBehaviours, b.plan.Behaviour) {
		b.r.stats.unpaidOrder(b.orderNo, b.plan.Behaviour)
	}
	way := b.plan.Way()
	switch b.plan.Behaviour {
	case PayNow:
		if p := b.first(ctx, way); p != nil {
			b.payAndReturn(ctx, "wallet", p)
		}
	case PayDelayed:
		if p := b.first(ctx, way); p != nil {
			if !b.wait(ctx, time.Duration(b.plan.At*float64(time.Until(b.usableUntil(p))))) {
				return false
			}
			b.payAndReturn(ctx, "wallet", p)
		}
	case PayLate:
		if p := b.first(ctx, way); p != nil {
			// Past the deadline, within the close grace and a little more: the window in
			// which the order may still be PENDING_PAYMENT at orderpay but is closed at
			// the channel.
			spread := b.r.cfg.scaled(b.r.settings.CloseGrace + 30*time.Second)
			if !b.wait(ctx, time.Until(b.deadline)+50*time.Millisecond+time.Duration(b.plan.At*float64(spread))) {
				return false
			}
			if b.payInstruction(ctx, "wallet_late", p) != nil {
				b.r.stats.outcome("late payment ACCEPTED by the channel (must be refunded)")
			} else {
				b.r.stats.outcome("late payment refused by the channel")
			}
		}
	case Abandon:
		if b.plan.Variant == VariantScanned {
			if p := b.first(ctx, way); p != nil {
				b.open(ctx, "wallet_scan", p)
			}
		}
	case PayTwice:
		b.payTwice(ctx, way)
	case CancelInFlight:
		b.cancelInFlight(ctx, way)
	case ReturnEarly:
		if p := b.first(ctx, way); p != nil {
			b.payAndReturn(ctx, "wallet", p)
		}
		return true
	case ReturnUnpaid:
		if p := b.first(ctx, way); p != nil {
			if res, ok := b.walletAs(ctx, "wallet_decline", p, walletDecline); ok {
				b.comeBack(ctx, "return_page", "back from the cashier, not paid", res.ReturnURL)
			}
		}
		return true
	case PayExpired:
		b.payExpired(ctx, way)
	case FalseOK:
		b.falseOK(ctx, way)
		return true
	}
	return b.plan.Watch && b.plan.Behaviour != Abandon
}

// create places the order. It reports false if the buyer has none.
func (b *buyer) create(ctx context.Context) bool {
	items := make([]Item, len(b.plan.Lines))
	for i, l := range b.plan.Lines {
		items[i] = Item{SKU: b.r.skus[l.Catalogue], Qty: l.Qty}
	}
	buyerID := b.id()
	key := fmt.Sprintf("%s-%d", b.r.runID, b.plan.Index)
	var coupon string
	if b.plan.Coupon {
		// Issued once, before the order: a create retried under its Idempotency-Key must
		// send the same body.
		if err := b.retry(ctx, "coupon", func() (err error) {
			coupon, err = b.r.client.IssueCoupon(ctx, b.r.couponCode(), buyerID)
			return err
		}); err != nil {
			return false
		}
	}
	var o *OrderView
	err := b.retry(ctx, "create", func() (err error) {
		o, err = b.client.CreateOrderWithCoupon(ctx, buyerID, key, coupon, items...)
		return err
	})
	if err != nil {
		return false
	}
	created := time.Now()
	b.r.stats.created(created)
	b.orderNo = o.OrderNo
	b.deadline = b.r.windowEnd(o, created)
	return true
}

// retry runs call, repeating it after a 5xx answer other than ECHANNEL, and records every
// failure.
func (b *buyer) retry(ctx context.Context, name string, call func() error) error {
	var err error
	for attempt := 0; attempt < apiRetries; attempt++ {
		if err = call(); err == nil {
			return nil
		}
		b.r.stats.apiError(name, err)
		// A 502 ECHANNEL is the channel's definite refusal: the same request gets it again.
		if StatusOf(err) < 500 || CodeOf(err) == orderpay.ECHANNEL || ctx.Err() != nil {
			return err
		}
		if !sleepCtx(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			return err
		}
	}
	return err
}

// Wallet actions on an instruction (WalletDevice.Action).
const (
	walletPayAction = "pay"
	walletDecline   = "decline"
)

// payer makes sure the buyer's login carries the wallet identity way's method pays for
// (orderpay.PayerNeeded): the buyer's openid for the method's appid, or their Alipay user
// id, asked of the simulator's wallet once (what the wallet's OAuth tells a shop's login)
// and carried in the buyer's token from then on. It reports false if the identity could
// not be had.
func (b *buyer) payer(ctx context.Context, way PayWay) bool {
	need := orderpay.PayerNeeded(way.Channel, way.Method)
	if need == "" {
		return true
	}
	appid := b.r.channels.WalletAppID(way.Channel, way.Method)
	claim := "alipay_user_id"
	if need == "openid" {
		claim = "openid_" + appid
	}
	if _, ok := b.claims[claim]; ok {
		return true
	}
	var id *WalletIdentity
	if err := b.retry(ctx, "identity", func() (err error) {
		id, err = b.r.client.Identity(ctx, b.id(), appid)
		return err
	}); err != nil {
		return false
	}
	if b.claims == nil {
		b.claims = map[string]any{}
	}
	if need == "openid" {
		b.claims[claim] = id.OpenID
	} else {
		b.claims[claim] = id.AlipayUserID
	}
	b.client = b.r.client.AsWith(b.id(), b.claims)
	return true
}

// ask asks for the order's instruction by way and returns it, or nil. A method the
// channel refuses to prepay (502 ECHANNEL) is an outcome of its own: at a compressed time
// scale an Alipay WAP order, whose time_expire has whole minutes, cannot be made when no
// minute boundary is left before the deadline.
func (b *buyer) ask(ctx context.Context, name string, way PayWay) *PayView {
	if !b.payer(ctx, way) {
		return nil
	}
	req := PayRequest{Channel: way.Channel, Method: way.Method}
	var p *PayView
	err := b.retry(ctx, name, func() (err error) {
		p, err = b.client.PayBy(ctx, b.orderNo, req)
		return err
	})
	b.refused = err != nil && CodeOf(err) == orderpay.ECHANNEL
	switch {
	case b.refused:
		b.r.stats.outcome(fmt.Sprintf("%s: the channel refused the prepay (%s)", way, refusalOf(err)))
		return nil
	case err != nil:
		return nil
	case p.Pay == nil || p.Pay.Check() != nil || p.Pay.Channel != way.Channel || p.Pay.Method != way.Method:
		b.r.stats.outcome(fmt.Sprintf("%s: an instruction that is not one (%+v)", way, p.Pay))
		return nil
	}
	return p
}

// wapWay is Alipay WAP, whose time_expire has whole minutes.
var wapWay = PayWay{orderpay.ChannelAlipay, orderpay.MethodWAP}

// wapLead is how long before the minute a WAP buyer orders at the latest (awaitMinute):
// time to ask for the instruction and pay it.
const wapLead = time.Second

// awaitMinute holds a WAP buyer back, before it orders, until a whole minute of the clock
// falls within its order's window, if that comes soon enough: an Alipay WAP order's
// time_expire has whole minutes (the deadline truncated), and at a compressed time scale a
// window is seconds, which a minute boundary mostly misses, so that the adapter cannot make
// the order at all (its time_expire would be past). Soon enough is within Config.WAPWait,
// or within what the load lasts anyway (loadLeft), whichever is longer: a buyer that waits
// no longer than the latter is done no later than a buyer of the longest window launched
// last. One whose minute is further off orders at once. It reports false if ctx ended.
func (b *buyer) awaitMinute(ctx context.Context) bool {
	window := b.r.cfg.scaled(b.orderWindow())
	if window <= wapLead {
		return true
	}
	now := time.Now()
	boundary := now.Truncate(time.Minute).Add(time.Minute)
	if now.After(boundary.Add(-wapLead)) {
		boundary = boundary.Add(time.Minute)
	}
	// Ordered after boundary - window, the deadline is past the boundary, and the order's
	// time_expire is that minute.
	wait := boundary.Add(-window + 50*time.Millisecond).Sub(now)
	if wait <= 0 || wait > max(b.r.cfg.WAPWait, b.r.loadLeft()-window) {
		return true
	}
	return b.wait(ctx, wait)
}

// loadLeft is how much longer the load lasts at the least: until every buyer is launched,
// at the pace of the launches so far beyond the first Concurrency (which start at once),
// and a buyer launched last has waited out the load's longest window.
func (r *runner) loadLeft() time.Duration {
	left := r.cfg.scaled(r.settings.loadWindow())
	start, _ := r.loadStart.Load().(time.Time)
	paced := r.stats.launched.Load() - int64(r.cfg.Concurrency)
	if start.IsZero() || paced <= 0 {
		return left
	}
	perBuyer := time.Since(start) / time.Duration(paced)
	return left + perBuyer*time.Duration(int64(r.cfg.Orders)-r.stats.launched.Load())
}

// orderWindow is the pay window the buyer's order will get: the shortest of its lines'
// product types' windows, as the server gives it.
func (b *buyer) orderWindow() time.Duration {
	var w time.Duration
	for _, l := range b.plan.Lines {
		if lw := b.r.settings.window(b.r.settings.SKUs[l.Catalogue].ProductType); w == 0 || lw < w {
			w = lw
		}
	}
	return w
}

// first asks for the order's first instruction by way. If the channel refuses that way
// (ask), the buyer pays by its channel's QR code instead, as a pay page offers when one way
// fails. A WAP buyer first waits, within reason, for a moment when its order can be paid
// by WAP at all (awaitMinute).
func (b *buyer) first(ctx context.Context, way PayWay) *PayView {
	p := b.ask(ctx, "pay", way)
	if p != nil || !b.refused || way.Method == orderpay.MethodQR {
		return p
	}
	if p = b.ask(ctx, "pay_qr", PayWay{way.Channel, orderpay.MethodQR}); p != nil {
		b.r.stats.outcome(fmt.Sprintf("%s: refused, paid by the QR code instead", way))
	}
	return p
}

// refusalOf is the part of an ECHANNEL answer that says why, for the report: the detail
// after the last colon, without its numbers (a time_expire, an order number).
func refusalOf(err error) string {
	var e *APIError
	if !errors.As(err, &e) {
		return ErrorKey(err)
	}
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(e.Body), &body)
	msg := body.Error.Message
	if i := strings.Index(msg, "(time_expire"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(strings.TrimPrefix(msg, "the channel refused the payment: "))
}

// wayOf is the way p pays by.
func wayOf(p *PayView) PayWay { return PayWay{p.Channel, p.Method} }

// usableUntil is the last moment the buyer can pay p: its expires_at, or the order's
// deadline if that is sooner.
func (b *buyer) usableUntil(p *PayView) time.Time {
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(b.deadline) {
		return p.ExpiresAt
	}
	return b.deadline
}

// device is the device the buyer pays p on (deviceFor).
func (b *buyer) device(p *PayView) WalletDevice {
	return deviceFor(p.Pay, b.id(), b.r.shopDevice(b.orderNo))
}

// walletAs has the wallet do action (pay or decline) on p on the buyer's device, and
// returns its answer. A refusal (expired, closed, paid, another buyer…) is recorded as an
// outcome of the call, like any API error.
func (b *buyer) walletAs(ctx context.Context, name string, p *PayView, action string) (*WalletResult, bool) {
	at := time.Now()
	dev := b.device(p)
	dev.Action = action
	res, err := b.r.client.WalletPayAs(ctx, dev)
	if err != nil {
		b.r.stats.apiError(name, err)
		return nil, false
	}
	if action == walletPayAction {
		b.r.stats.walletPaid(res.OutTradeNo, at)
		if b.paidAt.IsZero() {
			b.paidAt = time.Now()
		}
	}
	return res, true
}

// payInstruction pays p at the wallet, and returns the wallet's answer, or nil if the
// wallet refused.
func (b *buyer) payInstruction(ctx context.Context, name string, p *PayView) *WalletResult {
	res, ok := b.walletAs(ctx, name, p, walletPayAction)
	if !ok {
		return nil
	}
	return res
}

// payAndReturn pays p and, where the wallet sends the browser back to the shop (Alipay
// pc and wap's return_url, WeChat H5's redirect_url), follows it. It reports whether the
// wallet took the payment.
func (b *buyer) payAndReturn(ctx context.Context, name string, p *PayView) bool {
	res := b.payInstruction(ctx, name, p)
	if res == nil {
		return false
	}
	b.comeBack(ctx, "return_page", "back from the cashier, paid", res.ReturnURL)
	return true
}

// comeBack is the buyer's browser following the wallet back to the page it names, if
// any. Where that is the shop's pay page, the page hands the server what it came back
// with (POST /v1/orders/{no}/return), as the shop's pay page does: Alipay's signed return
// after paying by PC or WAP verifies, anything else does not, and nothing in it is ever
// applied; the buyer then believes only the order's status, which it polls next. what
// says how the buyer came back, for the outcome.
func (b *buyer) comeBack(ctx context.Context, name, what, page string) {
	if page == "" {
		return
	}
	if err := b.client.Page(ctx, page, http.Header{"User-Agent": {userAgentOf(b.plan.Method)}}); err != nil {
		b.r.stats.apiError(name, err)
		return
	}
	shop := b.r.shopDevice(b.orderNo).Page
	if page != shop && !strings.HasPrefix(page, shop+"?") {
		return
	}
	_, query, _ := strings.Cut(page, "?")
	var v *ReturnView
	if err := b.retry(ctx, "return", func() (err error) {
		v, err = b.client.Return(ctx, b.orderNo, query)
		return err
	}); err != nil {
		return
	}
	switch {
	case v.Verified && strings.Contains(what, "FORGED"):
		b.r.stats.forgedVerified.Add(1)
		b.r.stats.outcome(what + ": VERIFIED (it must never be)")
	case v.Verified:
		b.r.stats.outcome(what + ": the return verified")
	default:
		reason, _, _ := strings.Cut(v.Reason, ":")
		b.r.stats.outcome(what + ": the return not verified (" + reason + ")")
	}
}

// open is the buyer opening p on the device without paying: a QR code scanned (an Alipay
// trade comes into being, waiting for the buyer), an Alipay pc or wap cashier loaded in
// the browser (the gateway shows the order; no trade yet); the other methods' wallets show
// their pay sheet, which tells the channel nothing.
func (b *buyer) open(ctx context.Context, name string, p *PayView) {
	switch {
	case p.Method == orderpay.MethodQR:
		b.wallet(ctx, name, p.Pay.Field("code"), "scan")
	case p.Pay.Channel == orderpay.ChannelAlipay && (p.Method == orderpay.MethodPC || p.Method == orderpay.MethodWAP):
		h := http.Header{"User-Agent": {userAgentOf(p.Method)}, "Referer": {b.r.shopDevice(b.orderNo).Page}}
		if err := b.r.client.Page(ctx, p.Pay.Field("url"), h); err != nil {
			b.r.stats.apiError(name, err)
		}
	}
}

// wallet does action on a QR code at the channel and reports whether it succeeded. A
// refusal (the code expired, the trade is closed or paid) is recorded as an outcome of
// the call, like any API error.
func (b *buyer) wallet(ctx context.Context, name, qr, action string) bool {
	at := time.Now()
	res, err := b.r.client.Wallet(ctx, qr, action)
	if err != nil {
		b.r.stats.apiError(name, err)
		return false
	}
	if action == "pay" {
		b.r.stats.walletPaid(res.OutTradeNo, at)
	}
	return true
}

// walletPay pays a QR code at the channel (an app buyer's) and reports whether it was paid.
func (b *buyer) walletPay(ctx context.Context, name, qr string) bool {
	ok := b.wallet(ctx, name, qr, "pay")
	if ok && b.paidAt.IsZero() {
		b.paidAt = time.Now()
	}
	return ok
}

// payTwice pays twice: by the buyer's way and the other channel's QR code, both asked for
// while the order is unpaid (two cashier pages open); or by the buyer's way, then, unsure
// it went through, asks again by the same way and pays what it gets.
func (b *buyer) payTwice(ctx context.Context, way PayWay) {
	if b.plan.Variant == VariantBothChannels {
		p1 := b.first(ctx, way)
		p2 := b.ask(ctx, "pay_second", PayWay{otherChannel(way.Channel), orderpay.MethodQR})
		paid1 := p1 != nil && b.payInstruction(ctx, "wallet", p1) != nil
		paid2 := p2 != nil && b.payInstruction(ctx, "wallet_second", p2) != nil
		if paid1 && paid2 {
			b.r.stats.outcome("paid by both channels (one must be refunded)")
		}
		return
	}
	p := b.first(ctx, way)
	if p == nil || b.payInstruction(ctx, "wallet", p) == nil {
		return
	}
	again := b.ask(ctx, "pay_again", wayOf(p))
	if again == nil {
		return
	}
	if !sameInstruction(again.Pay, p.Pay) {
		b.r.stats.outcome("asked again after paying: got a NEW instruction")
	}
	if b.payInstruction(ctx, "wallet_rescan", again) != nil {
		b.r.stats.outcome("re-scan after paying paid AGAIN (must be refunded)")
	}
}

// cancelInFlight opens the instruction, then cancels the order and pays, one after the
// other or at once. An Alipay pc, wap or app order exists at Alipay only once it is paid,
// so the cancel cannot close it there, and a payment after the cancel is taken and must
// go back.
func (b *buyer) cancelInFlight(ctx context.Context, way PayWay) {
	p := b.first(ctx, way)
	if p == nil {
		return
	}
	b.open(ctx, "wallet_scan", p)
	var cancelled, paid bool
	cancel := func() {
		err := b.retry(ctx, "cancel", func() error {
			_, err := b.client.Cancel(ctx, b.orderNo)
			return err
		})
		cancelled = err == nil
	}
	pay := func() { paid = b.payInstruction(ctx, "wallet_after_cancel", p) != nil }
	stopAndPay(b.plan.Variant, cancel, pay)
	switch {
	case cancelled && paid:
		b.r.stats.outcome("cancelled AND paid at the channel (must be refunded)")
	case cancelled:
		b.r.stats.outcome("cancelled, payment refused by the channel")
	case paid:
		b.r.stats.outcome("cancel failed, paid")
	}
}

// payExpired waits past the instruction's expires_at, tries it (the wallet must refuse
// it), asks again and pays the fresh instruction. Where the instruction lives as long as
// its order (its lifetime is longer than the order's window), expires_at is the deadline:
// the buyer then comes back after it, and the order is not payable any more.
func (b *buyer) payExpired(ctx context.Context, way PayWay) {
	const who = "pay after the instruction expired: "
	p := b.first(ctx, way)
	if p == nil {
		return
	}
	if !p.ExpiresAt.Before(b.deadline.Add(-time.Second)) {
		b.r.stats.outcome(who + "the instruction lived until the order's deadline")
		b.r.note("an instruction of %s lived until its order's deadline (expires_at %s, the deadline %s): "+
			"its lifetime is not shorter than the order's window here, so buyers who pay after their instruction expired came back after the deadline", wayOf(p),
			p.ExpiresAt.Format("15:04:05.000"), b.deadline.Format("15:04:05.000"))
	}
	if !b.wait(ctx, time.Until(p.ExpiresAt)+50*time.Millisecond) {
		return
	}
	if b.payInstruction(ctx, "wallet_expired", p) != nil {
		b.r.stats.outcome(who + "the old instruction ACCEPTED by the wallet (must be PAID or refunded)")
		return
	}
	b.r.stats.outcome(who + "the old instruction refused by the wallet")
	again := b.ask(ctx, "pay_again", wayOf(p))
	switch {
	case again == nil:
		b.r.stats.outcome(who + "asked again: no instruction")
	case sameInstruction(again.Pay, p.Pay):
		b.r.stats.outcome(who + "asked again: the SAME instruction")
	case b.payAndReturn(ctx, "wallet_fresh", again):
		b.r.stats.outcome(who + "paid the fresh instruction")
	default:
		b.r.stats.outcome(who + "the fresh instruction refused by the wallet")
	}
}

// falseOK opens the instruction and pays nothing, but comes back to a page that says
// "ok": an Alipay cashier's browser lands on the shop's page with return parameters that
// claim a payment (Alipay never signed them), a WeChat H5 one on the redirect page, and an
// SDK tells the app or page "ok". The buyer believes it and polls.
func (b *buyer) falseOK(ctx context.Context, way PayWay) {
	p := b.first(ctx, way)
	if p == nil {
		return
	}
	b.open(ctx, "wallet_scan", p)
	page := b.r.shopDevice(b.orderNo).Page
	way = wayOf(p)
	switch {
	case way.Channel == orderpay.ChannelAlipay && (way.Method == orderpay.MethodPC || way.Method == orderpay.MethodWAP):
		method := "alipay.trade.page.pay.return"
		if way.Method == orderpay.MethodWAP {
			method = "alipay.trade.wap.pay.return"
		}
		q := url.Values{"out_trade_no": {p.PaymentNo + "A01"}, "trade_no": {"2026112722001400000000000000"},
			"total_amount": {"0.01"}, "method": {method}, "sign_type": {"RSA2"}, "sign": {"bm90IHNpZ25lZCBieSBBbGlwYXk"}}
		b.comeBack(ctx, "return_page", "the page said ok, a FORGED return", page+"?"+q.Encode())
	case way.Method == orderpay.MethodH5:
		b.comeBack(ctx, "return_page", "the page said ok, no return", page)
	}
}

// watch polls the order until it is final, as a cashier page does, giving the slot up
// between polls. It stops with watchCtx (the end of the run) or once the order's deadline,
// grace and settle time are all past. The new behaviours' buyers say what they saw.
func (b *buyer) watch(ctx context.Context) {
	if b.plan.App {
		b.appWatch(ctx)
		return
	}
	first := ""
	status := b.pollFinal(ctx, "watcher gave up: order", "get", string(orderpay.OrderPendingPayment), func() (string, error) {
		o, err := b.client.Order(ctx, b.orderNo)
		if err != nil {
			return "", err
		}
		if first == "" {
			first = o.Status
		}
		return o.Status, nil
	})
	if status == string(orderpay.OrderPaid) && !b.paidAt.IsZero() {
		b.r.stats.seenPaid(time.Since(b.paidAt))
	}
	final := status
	if final == "" {
		return // the run ended first, or the buyer gave up (an outcome of its own)
	}
	switch b.plan.Behaviour {
	case ReturnEarly:
		if b.paidAt.IsZero() {
			break
		}
		if first == string(orderpay.OrderPendingPayment) {
			b.r.stats.outcome("returned before the notification: the first poll PENDING_PAYMENT, then " + final)
		} else {
			b.r.stats.outcome("returned before the notification: the first poll already " + first)
		}
	case ReturnUnpaid:
		b.r.stats.outcome("returned without paying: order " + final)
	case FalseOK:
		b.r.stats.outcome("the page said ok, nothing paid: order " + final)
	}
}

// pollFinal reads a status with read, at once and then every WatchInterval, giving the
// slot up between reads, until it is no longer pending, and returns it. It returns "" once
// ctx ends, or once the buyer's deadline, grace and settle time are all past (an outcome
// that starts with who, for the report). A failed read is counted as apiName's error.
func (b *buyer) pollFinal(ctx context.Context, who, apiName, pending string, read func() (string, error)) string {
	cfg := b.r.cfg
	until := b.deadline.Add(cfg.scaled(b.r.settings.CloseGrace + cfg.SettleTimeout))
	every := cfg.scaled(cfg.WatchInterval)
	for first := true; ; first = false {
		if !first && !b.wait(ctx, every) {
			return ""
		}
		status, err := read()
		if err != nil {
			if ctx.Err() != nil {
				return ""
			}
			b.r.stats.apiError(apiName, err)
			continue
		}
		if status != pending {
			return status
		}
		if time.Now().After(until) {
			b.r.stats.outcome(who + " still " + pending + " past deadline + grace + settle time")
			return ""
		}
	}
}

// wait gives the buyer's slot up for d, then takes one again (also when ctx ended). It
// reports false if ctx ended meanwhile.
func (b *buyer) wait(ctx context.Context, d time.Duration) bool {
	b.r.release()
	ok := sleepCtx(ctx, d)
	b.r.acquire()
	return ok
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stopAndPay runs a buyer's stop (a cancel, an app's close) and a payment of the same code:
// the stop first for VariantSequential, else both at once, so that they race.
func stopAndPay(variant string, stop, pay func()) {
	if variant == VariantSequential {
		stop()
		pay()
		return
	}
	var wg sync.WaitGroup
	wg.Go(stop)
	wg.Go(pay)
	wg.Wait()
}

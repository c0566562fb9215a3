package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
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
)

// Behaviours are every behaviour with its share of buyers, in percent.
var Behaviours = []struct {
	Behaviour Behaviour
	Percent   int
}{
	{PayNow, 60}, {PayDelayed, 10}, {PayLate, 5}, {Abandon, 10}, {PayTwice, 7}, {CancelInFlight, 8},
}

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
}

// Share is one behaviour's weight in a mix.
type Share struct {
	Behaviour Behaviour
	Weight    int
}

// DefaultPopulation is Behaviours' shares, half of the buyers watching.
func DefaultPopulation() Population {
	p := Population{Watch: 0.5}
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
	return p
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
}

// id is the buyer's id.
func (b *buyer) id() string { return fmt.Sprintf("buyer-%d", b.plan.Index) }

// script plays the buyer's script, up to the point where it only watches. The caller
// holds a slot for it; the buyer gives it up while it waits and holds one again when
// script returns. It reports whether the buyer now watches the order.
func (b *buyer) script(ctx context.Context) (watch bool) {
	if b.plan.App {
		return b.appScript(ctx)
	}
	if !b.create(ctx) {
		return false
	}
	switch b.plan.Behaviour {
	case PayNow:
		if qr := b.pay(ctx, "pay", b.plan.Channel); qr != "" {
			b.walletPay(ctx, "wallet", qr)
		}
	case PayDelayed:
		if qr := b.pay(ctx, "pay", b.plan.Channel); qr != "" {
			if !b.wait(ctx, time.Duration(b.plan.At*float64(time.Until(b.deadline)))) {
				return false
			}
			b.walletPay(ctx, "wallet", qr)
		}
	case PayLate:
		if qr := b.pay(ctx, "pay", b.plan.Channel); qr != "" {
			// Past the deadline, within the close grace and a little more: the window in
			// which the order may still be PENDING_PAYMENT at orderpay but is closed at
			// the channel.
			spread := b.r.cfg.scaled(b.r.settings.CloseGrace + 30*time.Second)
			if !b.wait(ctx, time.Until(b.deadline)+50*time.Millisecond+time.Duration(b.plan.At*float64(spread))) {
				return false
			}
			if b.walletPay(ctx, "wallet_late", qr) {
				b.r.stats.outcome("late payment ACCEPTED by the channel (must be refunded)")
			} else {
				b.r.stats.outcome("late payment refused by the channel")
			}
		}
	case Abandon:
		if b.plan.Variant == VariantScanned {
			if qr := b.pay(ctx, "pay", b.plan.Channel); qr != "" {
				b.wallet(ctx, "wallet_scan", qr, "scan")
			}
		}
	case PayTwice:
		b.payTwice(ctx)
	case CancelInFlight:
		b.cancelInFlight(ctx)
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

// retry runs call, repeating it after a 5xx answer, and records every failure.
func (b *buyer) retry(ctx context.Context, name string, call func() error) error {
	var err error
	for attempt := 0; attempt < apiRetries; attempt++ {
		if err = call(); err == nil {
			return nil
		}
		b.r.stats.apiError(name, err)
		if StatusOf(err) < 500 || ctx.Err() != nil {
			return err
		}
		if !sleepCtx(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			return err
		}
	}
	return err
}

// pay asks for a code and returns it, or "".
func (b *buyer) pay(ctx context.Context, name, channel string) string {
	var p *PayView
	err := b.retry(ctx, name, func() (err error) {
		p, err = b.client.Pay(ctx, b.orderNo, channel)
		return err
	})
	if err != nil {
		return ""
	}
	return p.QRCode
}

// wallet does action on the code at the channel and reports whether it succeeded. A
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

func (b *buyer) walletPay(ctx context.Context, name, qr string) bool {
	ok := b.wallet(ctx, name, qr, "pay")
	if ok && b.paidAt.IsZero() {
		b.paidAt = time.Now()
	}
	return ok
}

func (b *buyer) payTwice(ctx context.Context) {
	first := b.plan.Channel
	if b.plan.Variant == VariantBothChannels {
		// Both codes first, while the order is unpaid: the buyer has two cashier pages open
		// and pays on both.
		qr1 := b.pay(ctx, "pay", first)
		qr2 := b.pay(ctx, "pay_second", otherChannel(first))
		paid1 := qr1 != "" && b.walletPay(ctx, "wallet", qr1)
		paid2 := qr2 != "" && b.walletPay(ctx, "wallet_second", qr2)
		if paid1 && paid2 {
			b.r.stats.outcome("paid by both channels (one must be refunded)")
		}
		return
	}
	qr := b.pay(ctx, "pay", first)
	if qr == "" || !b.walletPay(ctx, "wallet", qr) {
		return
	}
	// The buyer is unsure it went through, asks again and scans what it gets.
	again := b.pay(ctx, "pay_again", first)
	if again == "" {
		return
	}
	if again != qr {
		b.r.stats.outcome("asked again after paying: got a NEW code")
	}
	if b.walletPay(ctx, "wallet_rescan", again) {
		b.r.stats.outcome("re-scan after paying paid AGAIN (must be refunded)")
	}
}

func (b *buyer) cancelInFlight(ctx context.Context) {
	qr := b.pay(ctx, "pay", b.plan.Channel)
	if qr == "" {
		return
	}
	b.wallet(ctx, "wallet_scan", qr, "scan")
	var cancelled, paid bool
	cancel := func() {
		err := b.retry(ctx, "cancel", func() error {
			_, err := b.client.Cancel(ctx, b.orderNo)
			return err
		})
		cancelled = err == nil
	}
	pay := func() { paid = b.walletPay(ctx, "wallet_after_cancel", qr) }
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

// watch polls the order until it is final, as a cashier page does, giving the slot up
// between polls. It stops with watchCtx (the end of the run) or once the order's deadline,
// grace and settle time are all past.
func (b *buyer) watch(ctx context.Context) {
	if b.plan.App {
		b.appWatch(ctx)
		return
	}
	status := b.pollFinal(ctx, "watcher gave up: order", "get", string(orderpay.OrderPendingPayment), func() (string, error) {
		o, err := b.client.Order(ctx, b.orderNo)
		if err != nil {
			return "", err
		}
		return o.Status, nil
	})
	if status == string(orderpay.OrderPaid) && !b.paidAt.IsZero() {
		b.r.stats.seenPaid(time.Since(b.paidAt))
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

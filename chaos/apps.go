package chaos

import (
	"context"
	"fmt"
	"time"

	"orderpay"
)

// DefaultAppShare is the share of buyers who pay a business app through the payments API
// (docs/payments-api.md) rather than the shop: a small share, so that every run covers the
// apps' payments under the same faults and crashes.
const DefaultAppShare = 0.1

// ParseAppShare reads --app-share: "" for DefaultAppShare, "none", or a share in [0, 1].
func ParseAppShare(v string) (float64, error) {
	return parseShare("app-share", v, "none", map[string]float64{"": DefaultAppShare, "none": 0})
}

// setUpApp creates the run's business app, whose key the app buyers' payments go under.
func (r *runner) setUpApp(ctx context.Context) error {
	if r.population.App == 0 {
		return nil
	}
	app, err := r.client.CreateApp(ctx, r.runID+"-app", nil, []string{orderpay.ChannelAlipay, orderpay.ChannelWechat})
	if err != nil {
		return fmt.Errorf("chaos: create the business app: %w", err)
	}
	r.appKey = app.APIKey
	return nil
}

// appAmount is what an app buyer pays: the plan's lines at catalogue prices.
func (b *buyer) appAmount() int64 {
	var sum int64
	for _, l := range b.plan.Lines {
		sum += catalogue[l.Catalogue].price * l.Qty
	}
	return sum
}

// createApp creates the app buyer's payment through the payments API and returns its QR
// code ("" if there is none). A create retried after a 5xx or a crash sends the same body
// under the same merchant order number, so it finds the same payment.
func (b *buyer) createApp(ctx context.Context, name string) string {
	// The app's deadline is the fast goods' window (Settings.appWindow), compressed: the
	// payments API takes it in seconds of the server's clock, which it does not scale.
	secs := max(1, int64(b.r.cfg.scaled(b.r.settings.appWindow())/time.Second))
	req := AppPaymentRequest{MerchantOrderNo: fmt.Sprintf("%s-%d", b.r.runID, b.plan.Index), Amount: b.appAmount(),
		Subject: "chaos top-up", Channel: b.plan.Channel, ExpiresInSeconds: secs}
	var p *AppPaymentView
	err := b.retry(ctx, name, func() (err error) {
		p, err = b.r.client.CreateAppPayment(ctx, b.r.appKey, req)
		return err
	})
	if err != nil {
		return ""
	}
	if b.paymentNo == "" {
		created := time.Now()
		b.r.stats.created(created)
		b.paymentNo, b.deadline = p.PaymentNo, p.ExpiresAt
	}
	return p.QRCode
}

// appScript is an app buyer's script: the behaviours of the shop's buyers, through the
// payments API, by the app's QR code. A cancel is the app's close; paying twice is paying
// the same code again after asking for it again (one channel per app payment); returning
// without paying declines the code, and a page that says ok over nothing paid scans it;
// a code outlives its payment, so paying after it expired is paying late.
func (b *buyer) appScript(ctx context.Context) (watch bool) {
	qr := b.createApp(ctx, "app_create")
	if b.paymentNo == "" {
		return false
	}
	if qr == "" && b.plan.Behaviour != Abandon {
		return b.plan.Watch
	}
	switch b.plan.Behaviour {
	case PayNow, ReturnEarly:
		b.walletPay(ctx, "wallet", qr)
	case ReturnUnpaid:
		b.wallet(ctx, "wallet_decline", qr, "decline")
	case FalseOK:
		b.wallet(ctx, "wallet_scan", qr, "scan")
	case PayDelayed:
		if !b.wait(ctx, time.Duration(b.plan.At*float64(time.Until(b.deadline)))) {
			return false
		}
		b.walletPay(ctx, "wallet", qr)
	case PayLate, PayExpired:
		// An app's QR code lives as long as its payment: past its expires_at is past the
		// deadline.
		spread := b.r.cfg.scaled(b.r.settings.CloseGrace + 30*time.Second)
		if !b.wait(ctx, time.Until(b.deadline)+50*time.Millisecond+time.Duration(b.plan.At*float64(spread))) {
			return false
		}
		if b.walletPay(ctx, "wallet_late", qr) {
			b.r.stats.outcome("app: late payment ACCEPTED by the channel (must be refunded)")
		}
	case Abandon:
		if b.plan.Variant == VariantScanned && qr != "" {
			b.wallet(ctx, "wallet_scan", qr, "scan")
		}
	case PayTwice:
		if !b.walletPay(ctx, "wallet", qr) {
			return b.plan.Watch
		}
		if again := b.createApp(ctx, "app_create_again"); again != "" && b.walletPay(ctx, "wallet_rescan", again) {
			b.r.stats.outcome("app: re-scan after paying paid AGAIN (must be refunded)")
		}
	case CancelInFlight:
		b.wallet(ctx, "wallet_scan", qr, "scan")
		var closed, paid bool
		closeIt := func() {
			err := b.retry(ctx, "app_close", func() error {
				_, err := b.r.client.CloseAppPayment(ctx, b.r.appKey, b.paymentNo)
				return err
			})
			closed = err == nil
		}
		pay := func() { paid = b.walletPay(ctx, "wallet_after_close", qr) }
		stopAndPay(b.plan.Variant, closeIt, pay)
		if closed && paid {
			b.r.stats.outcome("app: closed AND paid at the channel (must be refunded)")
		}
	}
	switch b.plan.Behaviour {
	case ReturnEarly, ReturnUnpaid, FalseOK:
		return true
	}
	return b.plan.Watch && b.plan.Behaviour != Abandon
}

// appWatch reads the app payment until it is final, as the app's back end would; once it
// is paid, the app refunds part of it (a third, for half of the buyers) and, for some, the
// rest, each refund retried under its own refund number.
func (b *buyer) appWatch(ctx context.Context) {
	var p *AppPaymentView
	status := b.pollFinal(ctx, "app watcher gave up: payment", "app_get", string(orderpay.AppPaymentOpen), func() (string, error) {
		var err error
		p, err = b.r.client.AppPayment(ctx, b.r.appKey, b.paymentNo)
		if err != nil {
			return "", err
		}
		return p.Status, nil
	})
	if status == string(orderpay.AppPaymentSuccess) {
		if !b.paidAt.IsZero() {
			b.r.stats.seenPaid(time.Since(b.paidAt))
		}
		b.appRefunds(ctx, p)
	}
}

// appRefunds refunds a paid app payment in part, and sometimes the rest, as the plan says.
func (b *buyer) appRefunds(ctx context.Context, p *AppPaymentView) {
	if b.plan.At >= 0.5 {
		return
	}
	parts := []int64{p.Amount / 3}
	if b.plan.At < 0.2 {
		parts = append(parts, p.Amount-p.Amount/3)
	}
	for i, amount := range parts {
		if amount <= 0 {
			continue
		}
		no := fmt.Sprintf("%s-%d-R%d", b.r.runID, b.plan.Index, i+1)
		if err := b.retry(ctx, "app_refund", func() error {
			_, err := b.r.client.RefundAppPayment(ctx, b.r.appKey, b.paymentNo, no, amount, "chaos")
			return err
		}); err != nil {
			return
		}
		b.r.stats.outcome("app: refund asked")
	}
}

package explore

import (
	"context"

	"orderpay"
)

// Operations added for the mutants under testdata/mutants/ (11 on): paths that no pair of the
// catalogue's operations reaches at a step of its own.
func init() {
	Catalogue = append(Catalogue,
		// A late payment, as one operation: the buyer cancels the order (the channel
		// confirms nothing is paid, and an Alipay code nobody scanned stays payable until its
		// deadline), pays that code anyway, and the channel's notification of it arrives.
		// The payment center records the money, the order refuses it, and the money must
		// go back: through the direct call after the payment's commit, or, if the process
		// dies before that call's refund commits, through the bus's payment.succeeded. In
		// the catalogue's pairs the notification of such a payment is delivered only in
		// the settle, where no operation stops and nothing crashes; here a crash (B) meets
		// every step of it.
		&Op{Name: "late.notify", Scenes: []string{SceneUnpaid}, Run: func(ctx context.Context, w *World, label string) error {
			in := w.In(0)
			if _, err := in.Orders.Cancel(ctx, w.S.OrderNo); err != nil {
				return err
			}
			orderpay.Step(ctx, orderpay.StepCall, "the buyer pays at the wallet")
			if _, err := w.Sim.Pay(ctx, w.S.QRCode); err != nil {
				return err
			}
			return w.deliver(ctx, in, w.S.OutTradeNo, false)
		}},
	)
}

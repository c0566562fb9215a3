package payment_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
)

func (b *bundle) ledger(t *testing.T, outTradeNo string) sim.LedgerEntry {
	t.Helper()
	for _, l := range b.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l
		}
	}
	t.Fatalf("%s is not in the ledger", outTradeNo)
	return sim.LedgerEntry{}
}

func (b *bundle) wantClose(t *testing.T, orderNo string, want orderpay.CloseOutcome) {
	t.Helper()
	got, err := b.svc.Close(context.Background(), orderNo)
	if err != nil || got != want {
		t.Fatalf("Close(%s) = %s, %v; want %s", orderNo, got, err, want)
	}
}

func (b *bundle) wantStatus(t *testing.T, paymentNo string, want orderpay.PaymentStatus) *orderpay.Payment {
	t.Helper()
	p, err := b.store.Payment(context.Background(), paymentNo)
	if err != nil || p.Status != want {
		t.Fatalf("payment %s is %+v, %v; want %s", paymentNo, p, err, want)
	}
	return p
}

// refundAll runs the refund worker until nothing is due, and returns what it did in all.
func (b *bundle) refundAll(t *testing.T) payment.RefundResult {
	t.Helper()
	var all payment.RefundResult
	for range 10 {
		r, err := b.svc.RefundDue(context.Background(), 100, 4)
		if err != nil {
			t.Fatal(err)
		}
		all.Succeeded, all.Pending, all.Retrying = all.Succeeded+r.Succeeded, all.Pending+r.Pending, all.Retrying+r.Retrying
		all.NeedsAction, all.Unknown = all.NeedsAction+r.NeedsAction, all.Unknown+r.Unknown
		if r == (payment.RefundResult{}) {
			break
		}
	}
	return all
}

func TestCloseWithoutAPaymentIsDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.wantClose(t, "never-asked-to-pay", orderpay.CloseDone)
}

// A scanned, unpaid trade is closed at the channel, then the payment is closed and
// payment.closed written. The buyer can no longer pay the code.
func TestCloseUnpaidScannedTrade(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := b.svc.Pay(ctx, b.request("C1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Scan(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	b.wantClose(t, "C1", orderpay.CloseDone)
	b.wantStatus(t, "PC1", orderpay.PaymentClosed)
	if co, _ := b.store.ChannelOrder(ctx, "PC1A01"); co.Status != orderpay.ChannelOrderClosed {
		t.Fatalf("attempt %+v", co)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("paying a closed trade: %v", err)
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 10)
	if len(msgs) != 1 || msgs[0].ID != "payment.closed:PC1" {
		t.Fatalf("outbox %+v", msgs)
	}
	b.wantClose(t, "C1", orderpay.CloseDone) // idempotent
	if _, err := b.svc.Pay(ctx, b.request("C1")); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("paying a closed payment: %v", err)
	}
}

// The notification was lost: the close queries first, finds the payment, and applies it
// instead of closing.
func TestCloseFindsALostPayment(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}
	})
	b.paidAtWallet(t, "C2")
	b.wantClose(t, "C2", orderpay.ClosePaid)
	b.wantStatus(t, "PC2", orderpay.PaymentSuccess)
	if b.results.count() != 1 {
		t.Fatalf("the order system was told %d times", b.results.count())
	}
}

// An Alipay code nobody scanned cannot be closed: before the deadline the answer is "not
// paid yet"; once the deadline we passed to the channel is behind us, it is done.
func TestCloseUnscannedAlipayCodeWaitsForTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := b.request("C3")
	if _, err := b.svc.Pay(ctx, req); err != nil {
		t.Fatal(err)
	}
	b.wantClose(t, "C3", orderpay.CloseNotPaidYet)
	b.wantStatus(t, "PC3", orderpay.PaymentPaying)
	b.clock.Set(req.Deadline.Add(payment.DeadlineMarginDefault))
	b.wantClose(t, "C3", orderpay.CloseDone)
	b.wantStatus(t, "PC3", orderpay.PaymentClosed)
}

// The channel does not answer: nothing is decided, and the close says so.
func TestCloseWithoutAnAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.svc.Pay(ctx, b.request("C4")); err != nil {
		t.Fatal(err)
	}
	b.gw.failing.Store(true)
	b.wantClose(t, "C4", orderpay.CloseUnknown)
	b.wantStatus(t, "PC4", orderpay.PaymentPaying)
	b.gw.failing.Store(false)
}

// The buyer paid by Alipay and by WeChat Pay: the first payment pays the order, the second
// is recorded and refunded in full, once, and the ledger shows the money back.
func TestDuplicatePaymentIsRefunded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ali, err := b.svc.Pay(ctx, b.request("D1"))
	if err != nil {
		t.Fatal(err)
	}
	wreq := b.request("D1")
	wreq.Channel = "wechat"
	wx, err := b.svc.Pay(ctx, wreq)
	if err != nil {
		t.Fatal(err)
	}
	for _, qr := range []string{ali.QRCode, wx.QRCode} {
		if _, err := b.sim.Pay(ctx, qr); err != nil {
			t.Fatal(err)
		}
	}
	// Both notifications arrive.
	b.deliver(t)
	b.deliver(t)
	p := b.wantStatus(t, "PD1", orderpay.PaymentSuccess)
	extra := "PD1A02"
	if p.PaidOutTradeNo == extra {
		extra = "PD1A01"
	}
	r, err := b.store.ChannelRefund(ctx, payment.AutoRefundNo(extra))
	if err != nil || r.Reason != orderpay.RefundReasonDuplicate || r.Amount != 4990 || r.Status != orderpay.ChannelRefundPending {
		t.Fatalf("refund of the duplicate: %+v, %v", r, err)
	}
	if got := b.refundAll(t); got.Succeeded != 1 {
		t.Fatalf("refund worker: %+v", got)
	}
	if l := b.ledger(t, extra); l.Refunded != 4990 {
		t.Fatalf("the duplicate was not refunded at the channel: %+v", l)
	}
	if l := b.ledger(t, p.PaidOutTradeNo); l.Refunded != 0 {
		t.Fatalf("the paying attempt was refunded: %+v", l)
	}
	if p := b.wantStatus(t, "PD1", orderpay.PaymentSuccess); p.Refunded != 0 {
		t.Fatalf("a duplicate's refund counted against the payment: %+v", p)
	}
	if b.results.count() != 1 {
		t.Fatalf("the order system was told %d times, want once", b.results.count())
	}
}

// The order was cancelled while an unscanned code was still payable, then the buyer paid
// it: the order system refuses the payment, and it is refunded.
func TestPaymentRefusedByTheOrderIsRefunded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.paidAtWallet(t, "L1")
	ev := orderpay.PaymentSucceeded{PaymentNo: "PL1", OrderNo: "L1", Amount: 4990, Channel: "alipay", OutTradeNo: "PL1A01"}
	b.deliver(t)
	for range 2 { // the direct call and the bus both report the refusal
		if err := b.svc.RefundRejected(ctx, ev, orderpay.RefundReasonCancelled); err != nil {
			t.Fatal(err)
		}
	}
	refunds, _ := b.store.ChannelRefunds(ctx, "PL1A01")
	if len(refunds) != 1 || refunds[0].Reason != orderpay.RefundReasonCancelled {
		t.Fatalf("refunds %+v", refunds)
	}
	b.refundAll(t)
	if l := b.ledger(t, "PL1A01"); l.Refunded != 4990 {
		t.Fatalf("ledger %+v", l)
	}
	if p := b.wantStatus(t, "PL1", orderpay.PaymentSuccess); p.Refunded != 4990 {
		t.Fatalf("payment refunded %d, want 4990", p.Refunded)
	}
	// A refusal for an attempt that was not paid is not a refund.
	ev.OutTradeNo = "nope"
	if err := b.svc.RefundRejected(ctx, ev, orderpay.RefundReasonCancelled); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("refusal for an unknown attempt: %v", err)
	}
}

// A refund the channel takes time to settle is queried until it is final; one whose
// answer is lost is sent again under the same number, and refunds once.
func TestRefundsAreFollowedUntilFinal(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) { c.RefundDelay = time.Minute })
	ctx := context.Background()
	for _, no := range []string{"R1", "R2"} {
		res, err := b.svc.Pay(ctx, b.request(no))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
			t.Fatal(err)
		}
		b.deliver(t)
		if err := b.svc.RefundRejected(ctx, orderpay.PaymentSucceeded{PaymentNo: "P" + no, OrderNo: no, Amount: 4990, OutTradeNo: "P" + no + "A01"}, orderpay.RefundReasonCancelled); err != nil {
			t.Fatal(err)
		}
	}
	// R2's first refund call takes effect at the channel, but its answer is lost.
	if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodRefund, Kind: sim.FaultHTTP500, Applied: true, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	first, _ := b.svc.RefundDue(ctx, 100, 4)
	if first.Pending+first.Unknown != 2 || first.Succeeded != 0 {
		t.Fatalf("first run: %+v", first)
	}
	for _, no := range []string{"PR1A01R1", "PR2A01R1"} {
		if r, _ := b.store.ChannelRefund(ctx, no); r.Status == orderpay.ChannelRefundSuccess {
			t.Fatalf("%s succeeded before the channel settled it: %+v", no, r)
		}
	}
	b.clock.Advance(time.Hour) // the refunds settle, and the retries are due
	b.refundAll(t)
	for _, no := range []string{"R1", "R2"} {
		r, _ := b.store.ChannelRefund(ctx, "P"+no+"A01R1")
		if r.Status != orderpay.ChannelRefundSuccess {
			t.Fatalf("refund %+v not final", r)
		}
		if l := b.ledger(t, "P"+no+"A01"); l.Refunded != 4990 {
			t.Fatalf("ledger %+v: refunded once, in full", l)
		}
	}
	msgs, _ := b.store.UnpublishedMessages(ctx, 100)
	refunded := 0
	for _, m := range msgs {
		if m.Subject == orderpay.SubjectRefundSucceeded {
			refunded++
		}
	}
	if refunded != 2 {
		t.Fatalf("%d refund.succeeded events, want 2", refunded)
	}
}

// The scan compensation finds a payment whose notification was lost once the attempt is
// old enough, and not before.
func TestScanFindsLostPaymentsOlderThanItsAge(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultDrop}}}
	})
	ctx := context.Background()
	b.paidAtWallet(t, "S1")
	if n, err := b.svc.ScanOnce(ctx, 10*time.Minute, 100); err != nil || n != 0 {
		t.Fatalf("scan of a fresh attempt: %d, %v", n, err)
	}
	b.clock.Advance(11 * time.Minute)
	if n, err := b.svc.ScanOnce(ctx, 10*time.Minute, 100); err != nil || n != 1 {
		t.Fatalf("scan after 11 minutes: %d, %v", n, err)
	}
	b.wantStatus(t, "PS1", orderpay.PaymentSuccess)
}

// The payment sweeper closes payments past deadline + grace, and only those.
func TestCloseDueClosesOnlyPaymentsPastTheirDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, no := range []string{"T1", "T2"} {
		req := b.request(no)
		if no == "T2" {
			req.Deadline = b.clock.Now().Add(2 * time.Hour)
		}
		if _, err := b.svc.Pay(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Hour)
	res, err := b.svc.CloseDue(ctx, time.Minute, 100, 4)
	if err != nil || res.Closed != 1 {
		t.Fatalf("CloseDue: %+v, %v", res, err)
	}
	b.wantStatus(t, "PT1", orderpay.PaymentClosed)
	b.wantStatus(t, "PT2", orderpay.PaymentPaying)
}

// The buyer paid by both channels and the second channel's notifications were all lost:
// the payment is SUCCESS, so only the sweep of attempts still open past the deadline finds
// the second payment, and refunds it.
func TestCloseDueFindsADuplicateWhoseNotificationWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodNotify, Kind: sim.FaultDrop}}}
	})
	ctx := context.Background()
	req := b.request("W1")
	ali, err := b.svc.Pay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Channel = "wechat"
	wx, err := b.svc.Pay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, qr := range []string{ali.QRCode, wx.QRCode} {
		if _, err := b.sim.Pay(ctx, qr); err != nil {
			t.Fatal(err)
		}
	}
	b.deliver(t) // Alipay's: it pays the order
	b.wantStatus(t, "PW1", orderpay.PaymentSuccess)
	b.clock.Set(req.Deadline.Add(2 * time.Minute))
	res, err := b.svc.CloseDue(ctx, time.Minute, 100, 4)
	if err != nil || res.Paid != 1 {
		t.Fatalf("CloseDue: %+v, %v", res, err)
	}
	r, err := b.store.ChannelRefund(ctx, payment.AutoRefundNo("PW1A02"))
	if err != nil || r.Reason != orderpay.RefundReasonDuplicate {
		t.Fatalf("refund of the WeChat duplicate: %+v, %v", r, err)
	}
	b.refundAll(t)
	if l := b.ledger(t, "PW1A02"); l.Refunded != 4990 {
		t.Fatalf("ledger %+v", l)
	}
}

// A WeChat prepay that failed with a 500 before taking effect left an attempt PAYING that
// the channel has never heard of: close and query both say "not found". Past the deadline
// that is final, and the order can be closed.
func TestCloseAttemptThatNeverExistedAtTheChannel(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) {
		c.Faults = sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodPrecreate, Kind: sim.FaultHTTP500, Limit: 1}}}
	})
	ctx := context.Background()
	req := b.request("N1")
	req.Channel = "wechat"
	if _, err := b.svc.Pay(ctx, req); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("pay through a failing prepay: %v", err)
	}
	b.wantClose(t, "N1", orderpay.CloseUnknown) // before the deadline: not decided
	b.clock.Set(req.Deadline.Add(payment.DeadlineMarginDefault))
	b.wantClose(t, "N1", orderpay.CloseDone)
	b.wantStatus(t, "PN1", orderpay.PaymentClosed)
}

// A result the order system answers with a conflict is not a refusal: on PostgreSQL a
// stock move that found its bucket changed by a concurrent one answered ECONFLICT for an
// order still waiting to be paid, and the payment center refunded the payment; the next
// delivery then marked the order PAID, and its goods shipped for money that went back.
// Only the order system's explicit refusal (orderpay.RefusePayment) refunds a payment.
func TestOnlyAnExplicitRefusalRefundsAPayment(t *testing.T) {
	t.Parallel()
	var answer atomic.Pointer[error] // the error the order system answers with
	b := setupWith(t, func(c *payment.Config) {
		c.Results = orderpay.PaymentResultsFunc(func(context.Context, orderpay.PaymentSucceeded) error {
			return *answer.Load()
		})
		c.ResultCallAttempts = 1
	})
	ctx := context.Background()
	pay := func(no string) {
		t.Helper()
		res, err := b.svc.Pay(ctx, b.request(no))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
			t.Fatal(err)
		}
		b.deliver(t)
	}
	var conflict error = orderpay.Errorf(orderpay.ECONFLICT, `sku "hot" has fewer than 3 locked units`)
	answer.Store(&conflict)
	pay("C1")
	if refunds, _ := b.store.ChannelRefunds(ctx, "PC1A01"); len(refunds) != 0 {
		t.Fatalf("a conflict refunded the payment: %+v", refunds)
	}
	refusal := orderpay.RefusePayment(orderpay.RefundReasonSoldOut, "order C2 sold out")
	answer.Store(&refusal)
	pay("C2")
	refunds, _ := b.store.ChannelRefunds(ctx, "PC2A01")
	if len(refunds) != 1 || refunds[0].Reason != orderpay.RefundReasonSoldOut || refunds[0].Amount != 4990 {
		t.Fatalf("an explicit refusal: refunds %+v", refunds)
	}
}

// A refund the channel takes a while to settle ends by the channel's own refund
// notification, before any query: the refund is SUCCESS and the payment counts its money,
// once, however often the notification comes. (Alipay notifies the payment's notify_url
// after a refund, naming it by out_biz_no.)
func TestRefundNotificationSettlesTheRefundOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *sim.Config) { c.RefundDelay = time.Minute })
	ctx := context.Background()
	b.paidAtWallet(t, "N1")
	b.deliver(t)
	if err := b.svc.RefundRejected(ctx, orderpay.PaymentSucceeded{PaymentNo: "PN1", OrderNo: "N1", Amount: 4990, OutTradeNo: "PN1A01"},
		orderpay.RefundReasonCancelled); err != nil {
		t.Fatal(err)
	}
	if first, err := b.svc.RefundDue(ctx, 100, 4); err != nil || first.Pending != 1 {
		t.Fatalf("the refund's first call: %+v, %v; want it accepted and pending", first, err)
	}
	b.clock.Advance(2 * time.Minute) // the refund settles at the channel, which then notifies
	n := b.nextNotification(t)
	for range 2 { // the notification, and a resend of it
		reply, err := b.svc.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, n.body)
		if err != nil || reply.Status != http.StatusOK {
			t.Fatalf("refund notification: %+v, %v", reply, err)
		}
	}
	r, err := b.store.ChannelRefund(ctx, payment.AutoRefundNo("PN1A01"))
	if err != nil || r.Status != orderpay.ChannelRefundSuccess {
		t.Fatalf("refund after its notification: %+v, %v", r, err)
	}
	if p := b.wantStatus(t, "PN1", orderpay.PaymentSuccess); p.Refunded != 4990 {
		t.Fatalf("payment refunded %d, want 4990 once", p.Refunded)
	}
	if l := b.ledger(t, "PN1A01"); l.Refunded != 4990 {
		t.Fatalf("ledger %+v", l)
	}
	if due, _ := b.svc.RefundDue(ctx, 100, 4); due != (payment.RefundResult{}) {
		t.Fatalf("the refund is still worked on: %+v", due)
	}
}

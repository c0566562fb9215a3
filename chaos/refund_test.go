package chaos

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos/audit"
	"orderpay/natsbus"
)

// A refund Alipay refuses for the merchant's balance is recorded as such and sent again on
// the retry plan; a kill -9 of the server between a refusal and the next try loses nothing
// (the refusal count goes on from where it was, nothing is sent twice in the meantime, the
// refund is still owed); once the merchant tops up, the next try refunds it exactly once and
// the after-sales request and its order end as they should. The real `orderpay serve`, its
// retry plan at 5 business minutes (5 s) a try, the simulator's shortage with no cure but a
// top-up.
func TestRefundRefusedThenKilledLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the server twice and waits for three tries, 5 s apart")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	plan := sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{
		{Channel: orderpay.ChannelAlipay, Method: sim.MethodRefund, Kind: sim.FaultBalance, Probability: 1, Limit: 1}}}
	e, err := startEnv(ctx, envConfig{Binary: serverBinary(t), DataDir: dir, Prefix: "orderpay-refund-kill-", TimeScale: 60,
		Faults: plan, LogLevel: "info", ServerArgs: []string{"--auto-approve-refund-max", "100000",
			"--refund-retry-schedule", "5m,5m", "--refund-retry-every", "5m", "--refund-retry-for", "2h"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	defer func() {
		if t.Failed() {
			t.Logf("the server's errors (serve.log):\n%s", serverErrors(filepath.Join(dir, "serve.log")))
		}
	}()
	e.client.RetryFor = 15 * time.Second

	// A paid order of one unit, refunded before shipping by the rule: the refund is due at once.
	sku := e.runID + "-tea"
	if err := e.client.AddSKU(ctx, SKUSpec{SKU: sku, Price: 3990, Stock: 5, ProductType: "normal", StockPolicy: "order"}, nil); err != nil {
		t.Fatal(err)
	}
	buyer := "b-" + e.runID
	c := e.client.As(buyer)
	o, err := c.CreateOrder(ctx, buyer, "", Item{SKU: sku, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WalletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitStatus(ctx, o.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	a, err := c.RequestAfterSale(ctx, o.OrderNo, buyer, "refund", "changed my mind", AfterSaleItem{Line: 1, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != "REFUNDING" || a.Amount != 3990 {
		t.Fatalf("after-sale %+v: want REFUNDING for 3990 fen", a)
	}
	no := a.AfterSaleNo

	// waitRefund polls the refund until ok says so.
	waitRefund := func(what string, ok func(*RefundView) bool) *RefundView {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			rf, err := e.client.Refund(ctx, no)
			if err == nil && ok(rf) {
				return rf
			}
			if time.Now().After(deadline) {
				t.Fatalf("refund %s: waited 20 s for %s; last %+v, %v", no, what, rf, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// ledgerRefunds is what the channel knows of the trade's refunds.
	ledgerRefunds := func() (refunds []sim.LedgerRefund, refunded int64) {
		for _, l := range e.sim.Ledger() { // the run's one trade
			refunds, refunded = append(refunds, l.Refunds...), refunded+l.Refunded
		}
		return refunds, refunded
	}

	first := waitRefund("its first refusal recorded", func(rf *RefundView) bool { return rf.Tries >= 1 })
	if first.Status != "PENDING" || first.NextAt == nil || first.Tries != 1 || first.Problem == "" {
		t.Fatalf("after the first refusal: %+v; want PENDING, 1 try, a problem and a next try", first)
	}
	// Kill it well before the next try is due: between the refusal and its retry.
	if left := time.Until(*first.NextAt); left < time.Second {
		t.Fatalf("the next try is due in %s: too soon to kill the server between the two", left)
	}
	pid := e.server.PID()
	if _, err := e.server.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if e.server.PID() == pid {
		t.Fatal("the server was not restarted")
	}
	after, err := e.client.Refund(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != "PENDING" || after.Tries != 1 || after.NextAt == nil || !after.NextAt.Equal(*first.NextAt) {
		t.Fatalf("after kill -9: %+v; want it as it was: PENDING, 1 try, next at %s", after, first.NextAt)
	}
	if rs, refunded := ledgerRefunds(); len(rs) != 0 || refunded != 0 {
		t.Fatalf("the channel refunded %d fen (%+v) while the account is short", refunded, rs)
	}

	// The restarted server sends it again at its time: refused again, counted on.
	second := waitRefund("its second refusal", func(rf *RefundView) bool { return rf.Tries >= 2 })
	if second.Status != "PENDING" || second.Tries != 2 || second.Retried != 2 || second.NextAt == nil {
		t.Fatalf("after the second refusal: %+v; want PENDING, 2 tries, retried twice, a next try", second)
	}
	if !e.sim.Short(orderpay.ChannelAlipay) {
		t.Fatal("the account is no longer short: the test's premise is gone")
	}

	// The merchant tops up: the next try refunds it, once.
	if err := e.sim.TopUp(orderpay.ChannelAlipay); err != nil {
		t.Fatal(err)
	}
	done := waitRefund("SUCCESS", func(rf *RefundView) bool { return rf.Status == "SUCCESS" })
	if done.Retried != 2 || done.NeedsActionAt != nil {
		t.Errorf("succeeded as %+v; want retried twice and never queued", done)
	}
	rs, refunded := ledgerRefunds()
	if len(rs) != 1 || rs[0].OutRefundNo != no || rs[0].Amount != 3990 || rs[0].Status != sim.LedgerRefundSuccess || refunded != 3990 {
		t.Errorf("the channel's refunds %+v, %d fen refunded; want one refund %s of 3990 fen, SUCCESS", rs, refunded, no)
	}
	detail, err := c.OrderDetail(ctx, o.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	if detail.Status != "REFUNDED" || detail.Refunded != 3990 || len(detail.Refunds) != 1 || detail.Refunds[0].Status != "SUCCESS" {
		t.Errorf("order %s %s refunded %d, after-sales %+v; want REFUNDED, 3990 fen, its request SUCCESS", o.OrderNo, detail.Status, detail.Refunded, detail.Refunds)
	}
	// Every refusal is in the refund's history, and it succeeded once.
	h, err := e.store.History(ctx, orderpay.EntityRefund, no)
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]int{}
	for _, l := range h {
		events[l.Event]++
	}
	if events[string(orderpay.ChannelRefundEventRetry)] != 2 || events[string(orderpay.ChannelRefundEventSucceed)] != 1 {
		t.Errorf("refund history %v: want 2 retries and 1 success", events)
	}

	// And the auditor agrees: nothing lost, nothing owed. Its events are those published,
	// so the outbox is drained first: the refund's event is relayed a moment after its
	// commit, and a server stopped in between publishes it only when it starts again.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var unpublished int
		if err := e.store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE published_at = 0`).Scan(&unpublished); err != nil {
			t.Fatal(err)
		}
		if unpublished == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outbox messages still unpublished after 20 s", unpublished)
		}
	}
	e.server.Stop()
	evs, err := readEvents(ctx, e.nats.ClientURL(), natsbus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	res, err := audit.Audit(ctx, audit.Inputs{Store: e.store, Ledger: e.sim.Ledger(), Notifications: e.sim.NotifyStats(), Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("audit: %s", v)
	}
	if res.Refunds.Total != 1 || res.Refunds.Retried != 1 {
		t.Errorf("refund outcomes %+v: want one, retried then succeeded", res.Refunds)
	}
}

package payment_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/payment"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// paidWith pays orderNo's payment of amount by channel at the wallet and delivers the
// simulator's notification, twice when twice (a duplicate delivery of the same success).
func (b *bundle) paidWith(t *testing.T, orderNo, channel string, amount int64, twice bool) {
	t.Helper()
	ctx := context.Background()
	req := b.request(orderNo)
	req.Channel, req.Amount = channel, amount
	res, err := b.svc.Pay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Pay(ctx, res.QRCode); err != nil {
		t.Fatal(err)
	}
	n := b.nextNotification(t)
	deliveries := 1
	if twice {
		deliveries = 2
	}
	for range deliveries {
		if _, err := b.svc.HandleNotification(ctx, n.channel, "127.0.0.1", n.header, n.body); err != nil {
			t.Fatalf("%s notification refused: %v", n.channel, err)
		}
	}
}

// afterSalesRefund records a refund of amount of orderNo's paid attempt, due now, as the
// order system's after-sales does.
func (b *bundle) afterSalesRefund(t *testing.T, orderNo, no, channel string, amount int64) {
	t.Helper()
	now := b.clock.Now()
	r := &orderpay.ChannelRefund{OutRefundNo: no, OutTradeNo: "P" + orderNo + "A01", PaymentNo: "P" + orderNo, Channel: channel,
		Amount: amount, Reason: orderpay.RefundReasonAfterSales, Status: orderpay.ChannelRefundPending, NextAt: now, CreatedAt: now, UpdatedAt: now}
	if err := b.store.InTx(context.Background(), func(tx orderpay.Tx) error { return tx.CreateChannelRefund(context.Background(), r) }); err != nil {
		t.Fatal(err)
	}
}

// An attempt that succeeds records the fee its channel's contract says, and one at a channel
// without a contract records none.
func TestPaidAttemptRecordsItsContractsFee(t *testing.T) {
	t.Parallel()
	fees := orderpay.FeeSchedule{"alipay": {Rate: 60000, Rounding: orderpay.RoundDown}}
	b := setupWith(t, func(c *payment.Config) { c.Fees = fees })
	ctx := context.Background()
	b.paidWith(t, "FA1", orderpay.ChannelAlipay, 4990, false)
	b.paidWith(t, "FW1", orderpay.ChannelWechat, 4990, false)
	co, err := b.store.ChannelOrder(ctx, "PFA1A01")
	if err != nil || co.Status != orderpay.ChannelOrderSuccess || !co.FeeRecorded || co.Fee != 29 || co.FeeRate != 60000 {
		t.Fatalf("alipay attempt %+v, %v; want a fee of 29 fen (29.94 rounded down) at 0.6%%", co, err)
	}
	co, err = b.store.ChannelOrder(ctx, "PFW1A01")
	if err != nil || co.Status != orderpay.ChannelOrderSuccess || co.FeeRecorded || co.Fee != 0 {
		t.Fatalf("wechat attempt without a contract %+v, %v; want no fee recorded", co, err)
	}
}

// The arithmetic of fees over random sequences, through the payment center and the
// simulator on SQLite: payments of random amounts on both channels (some notified twice),
// each refunded in up to four parts in any order, some parts never asked for, some refused
// for now (the account short) and sent again, some slow to settle, some ending abnormal at
// WeChat and paid back by an operator outside the channel, every refund notification
// delivered twice. Whatever happened, each attempt's fee is the contract's, its channel
// refunded total is the sum of its SUCCESS refunds, every channel refund records a share
// (0 when the contract gives none back) and no refund paid back outside the channel does;
// the shares are never negative, never more than the fee together, and exactly the fee when
// the channel refunded the whole amount under a contract that gives fees back.
func TestFeeSharesOverRefundSequences(t *testing.T) {
	t.Parallel()
	roundings := orderpay.FeeRoundings
	// What the sequences went through, all seeds together: each case must have happened.
	var mu sync.Mutex
	seen := map[string]int{}
	note := func(what string) { mu.Lock(); seen[what]++; mu.Unlock() }
	t.Cleanup(func() {
		for _, what := range []string{"resolved outside the channel", "refused for now and sent again", "notified twice",
			"refunded whole in parts with fees back", "refunded in part", "no fee back by contract"} {
			if seen[what] == 0 {
				t.Errorf("no sequence had a payment %s: %v", what, seen)
			}
		}
	})
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 37))
			rule := func() orderpay.FeeRule {
				return orderpay.FeeRule{Rate: orderpay.FeeRate(rng.IntN(1_000_001)), Rounding: roundings[rng.IntN(len(roundings))],
					RefundReturnsFee: rng.IntN(3) > 0}
			}
			fees := orderpay.FeeSchedule{"alipay": rule(), "wechat": rule()}
			b := setupWith(t, func(c *payment.Config) { c.Fees = fees })
			ctx := context.Background()
			if err := b.sim.SetFaults(sim.FaultPlan{Seed: seed, Rules: []sim.FaultRule{
				{Method: sim.MethodRefund, Kind: sim.FaultBalance, Probability: 0.15},
				{Method: sim.MethodRefund, Kind: sim.FaultSlow, Probability: 0.25, Delay: sim.Duration(3 * time.Minute)},
				{Channel: "wechat", Method: sim.MethodRefund, Kind: sim.FaultAbnormal, Probability: 0.15},
			}}); err != nil {
				t.Fatal(err)
			}
			type pay struct {
				orderNo, channel string
				amount           int64
			}
			var pays []pay
			var refundNos []string
			for i := range 6 {
				p := pay{orderNo: fmt.Sprintf("S%dN%d", seed, i), channel: []string{"alipay", "wechat"}[rng.IntN(2)]}
				p.amount = 1 + rng.Int64N(200_000)
				if rng.IntN(4) == 0 {
					p.amount = 1 + rng.Int64N(20)
				}
				pays = append(pays, p)
				twice := rng.IntN(2) == 0
				if twice {
					note("notified twice")
				}
				b.paidWith(t, p.orderNo, p.channel, p.amount, twice)
				// The amount in up to four parts, sometimes not all of it, asked for in any order.
				n := int(min(int64(1+rng.IntN(4)), p.amount))
				amounts := splitAmounts(p.amount, n, rng)
				for _, k := range rng.Perm(n) {
					no := fmt.Sprintf("%sR%d", p.orderNo, k)
					refundNos = append(refundNos, no)
					b.afterSalesRefund(t, p.orderNo, no, p.channel, amounts[k])
				}
			}
			// Work the refunds until none is owed: the worker, operators resolving what waits
			// for them, top-ups of short accounts, time passing, every notification twice.
			for round := 0; round < 40; round++ {
				b.refundAll(t)
				queue, err := b.svc.RefundsNeedingAction(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range queue {
					if _, err := b.svc.ResolveRefund(ctx, r.OutRefundNo, "operator:test", "BANK-"+r.OutRefundNo, ""); err != nil {
						t.Fatal(err)
					}
				}
				for _, ch := range []string{"alipay", "wechat"} {
					if b.sim.Short(ch) {
						if err := b.sim.TopUp(ch); err != nil {
							t.Fatal(err)
						}
					}
				}
				b.deliverAllTwice(t)
				owed, next := 0, b.clock.Now().Add(2*time.Minute)
				for _, no := range refundNos {
					if r := b.refund(t, no); r.Status.Owed() {
						owed++
						if r.NextAt.After(next) {
							next = r.NextAt // the retry plan's next try
						}
					}
				}
				if owed == 0 {
					break
				}
				b.clock.Set(next)
				b.sim.SendDue()
			}

			for _, p := range pays {
				co, err := b.store.ChannelOrder(ctx, "P"+p.orderNo+"A01")
				if err != nil {
					t.Fatal(err)
				}
				r := fees[p.channel]
				want := orderpay.Fee(p.amount, r.RateFor(co.Method), r.RoundingRule())
				if !co.FeeRecorded || co.Fee != want || co.FeeRate != r.RateFor(co.Method) {
					t.Fatalf("%s: %d fen by %s at %v %s: fee recorded %v, %d at %v; want %d", co.OutTradeNo, p.amount, p.channel,
						r.Rate, r.RoundingRule(), co.FeeRecorded, co.Fee, co.FeeRate, want)
				}
				refunds, err := b.store.ChannelRefunds(ctx, co.OutTradeNo)
				if err != nil {
					t.Fatal(err)
				}
				var channelRefunded, shares int64
				for _, rf := range refunds {
					if rf.Retried > 0 {
						note("refused for now and sent again")
					}
					switch rf.Status {
					case orderpay.ChannelRefundSuccess:
						channelRefunded += rf.Amount
						if !rf.FeeBackRecorded || rf.FeeBack < 0 || (!r.RefundReturnsFee && rf.FeeBack != 0) {
							t.Fatalf("%s: channel refund %s of %d fen: share recorded %v, %d (contract gives fees back: %v)",
								co.OutTradeNo, rf.OutRefundNo, rf.Amount, rf.FeeBackRecorded, rf.FeeBack, r.RefundReturnsFee)
						}
						shares += rf.FeeBack
					case orderpay.ChannelRefundResolved:
						note("resolved outside the channel")
						if rf.FeeBackRecorded || rf.FeeBack != 0 {
							t.Fatalf("%s: refund %s paid back outside the channel records a share: %+v", co.OutTradeNo, rf.OutRefundNo, rf)
						}
					default:
						t.Fatalf("%s: refund %s still %s after the sequence", co.OutTradeNo, rf.OutRefundNo, rf.Status)
					}
				}
				if co.ChannelRefunded != channelRefunded {
					t.Fatalf("%s: channel refunded %d, its SUCCESS refunds sum to %d", co.OutTradeNo, co.ChannelRefunded, channelRefunded)
				}
				if shares > co.Fee {
					t.Fatalf("%s: shares %d give back more than the fee %d", co.OutTradeNo, shares, co.Fee)
				}
				switch {
				case channelRefunded == p.amount && r.RefundReturnsFee && len(refunds) > 1 && co.Fee > 0:
					note("refunded whole in parts with fees back")
				case channelRefunded < p.amount:
					note("refunded in part")
				}
				if !r.RefundReturnsFee && channelRefunded > 0 {
					note("no fee back by contract")
				}
				if channelRefunded == p.amount && r.RefundReturnsFee && shares != co.Fee {
					t.Fatalf("%s: refunded whole by the channel, shares sum to %d, want the fee %d: %+v", co.OutTradeNo, shares, co.Fee, refunds)
				}
			}
		})
	}
}

// splitAmounts splits amount into n positive parts (n ≤ amount), or into fewer than the
// whole: with n > 1, one time in four the parts leave some of it unasked.
func splitAmounts(amount int64, n int, rng *rand.Rand) []int64 {
	total := amount
	if n > 1 && rng.IntN(4) == 0 {
		total = max(int64(n), amount-1-rng.Int64N(max(amount-int64(n), 1)))
	}
	parts := make([]int64, n)
	left := total
	for i := range n - 1 {
		parts[i] = 1 + rng.Int64N(max(left-int64(n-1-i), 1))
		parts[i] = min(parts[i], left-int64(n-1-i))
		left -= parts[i]
	}
	parts[n-1] = left
	return parts
}

// deliverAllTwice hands every notification the simulator has sent so far to the payment
// center twice, as a channel that repeats itself would.
func (b *bundle) deliverAllTwice(t *testing.T) {
	t.Helper()
	for {
		select {
		case n := <-b.captured:
			for range 2 {
				if _, err := b.svc.HandleNotification(context.Background(), n.channel, "127.0.0.1", n.header, n.body); err != nil {
					t.Fatalf("%s notification refused: %v", n.channel, err)
				}
			}
		default:
			return
		}
	}
}

// Two refunds of one attempt that together refund all of it settle at once through the
// refund worker, on both engines: the first holds its transaction open (inside RefundFinal,
// after its share is recorded) until the second waits for the attempt's row (on PostgreSQL,
// in AddChannelRefunded's update; on SQLite, for the write lock). The second reckons its
// share from what the first committed: the shares sum exactly to the fee.
func TestRefundSharesMeetingOnTheAttemptSumToItsFee(t *testing.T) {
	t.Parallel()
	fees := orderpay.FeeSchedule{"alipay": {Rate: 60000, Rounding: orderpay.RoundHalfUp, RefundReturnsFee: true}}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			refundSharesMeet(t, engine, fees)
		})
	}
}

func refundSharesMeet(t *testing.T, engine string, fees orderpay.FeeSchedule) {
	ctx := context.Background()
	var once sync.Once
	held, release := make(chan struct{}), make(chan struct{})
	b := setupWith(t, func(c *payment.Config) {
		c.Fees = fees
		if engine == "postgres" {
			c.Store = storetest.OpenPostgres(t)
		}
		c.RefundFinal = func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error {
			first := false
			once.Do(func() { first = true })
			if first {
				close(held)
				<-release
			}
			return nil
		}
	})
	b.paidWith(t, "MEET", orderpay.ChannelAlipay, 999, false)
	b.afterSalesRefund(t, "MEET", "RMEET1", "alipay", 333)
	b.afterSalesRefund(t, "MEET", "RMEET2", "alipay", 666)
	done := make(chan error, 1)
	go func() {
		_, err := b.svc.RefundDue(ctx, 10, 2)
		done <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no refund reached its commit")
	}
	met := false
	wait := 300 * time.Millisecond
	if engine == "postgres" {
		wait = 10 * time.Second
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if engine == "postgres" && waitingOnAttempt(ctx, t, b.store) {
			met = true
			break
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if engine == "postgres" && !met {
		t.Fatal("the second refund never waited on the attempt's row: the interleaving was not forced")
	}
	co, err := b.store.ChannelOrder(ctx, "PMEETA01")
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := b.refund(t, "RMEET1"), b.refund(t, "RMEET2")
	if r1.Status != orderpay.ChannelRefundSuccess || r2.Status != orderpay.ChannelRefundSuccess || co.ChannelRefunded != 999 {
		t.Fatalf("after both: %s, %s, channel refunded %d", r1.Status, r2.Status, co.ChannelRefunded)
	}
	if co.Fee != 6 || r1.FeeBack+r2.FeeBack != co.Fee || !r1.FeeBackRecorded || !r2.FeeBackRecorded {
		t.Fatalf("shares %d + %d of a fee of %d; want them to sum to it", r1.FeeBack, r2.FeeBack, co.Fee)
	}
}

// waitingOnAttempt reports whether a session waits on a lock to add to an attempt's
// channel refunded total.
func waitingOnAttempt(ctx context.Context, t *testing.T, s *sqlstore.Store) bool {
	t.Helper()
	var n int
	err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		AND datname = current_database() AND query LIKE 'UPDATE channel_orders SET channel_refunded%'`).Scan(&n)
	return err == nil && n > 0
}

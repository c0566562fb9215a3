package alipay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
)

// The adapter reads both bills the simulator draws up, fees, totals and movements as the
// contract says; the account bill is T+1 like the trade bill; a malformed date is EINVALID.
func TestDownloadAccountBill_RoundTripsAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	e := setupWith(t, sim.Config{RefundDelay: time.Hour, AlipayFees: sim.FeeConfig{Rate: 38000, OpeningBalance: 12345}})
	ctx := context.Background()
	e.paid(t, "RT_A", 10000) // 10:00, fee 0.38
	if r := e.ch.Refund(ctx, refundReq("RT_A", "RT_A_r1", 2500)); r.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("refund: %+v", r)
	}
	e.clock.Advance(2 * time.Hour)
	e.paid(t, "RT_B", 333) // fee 0.0127 → 0.01

	e.clock.Set(time.Date(2025, 3, 15, 9, 59, 0, 0, cst))
	if _, err := e.ch.DownloadAccountBill(ctx, "2025-03-14"); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("before 10:00: %v, want EUNAVAILABLE", err)
	}
	if _, err := e.ch.DownloadAccountBill(ctx, "2025-3-14"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("malformed date: %v, want EINVALID", err)
	}
	e.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))

	bill, err := e.ch.DownloadBill(ctx, "2025-03-14")
	if err != nil {
		t.Fatal(err)
	}
	if bill.Date != "2025-03-14" || bill.Account != e.keys.SellerID || !bill.HasNetTotal || len(bill.Rows) != 3 {
		t.Fatalf("bill %+v", bill)
	}
	fees := map[string]int64{}
	for _, r := range bill.Rows {
		fees[string(r.Kind)+" "+r.OutTradeNo+" "+r.OutRefundNo] = r.Fee
	}
	// RT_A's refund of a quarter gives back a quarter of 38 fen: 9.5, rounded half up.
	wantFees := map[string]int64{"PAYMENT RT_A ": 38, "REFUND RT_A RT_A_r1": 10, "PAYMENT RT_B ": 1}
	if fmt.Sprint(fees) != fmt.Sprint(wantFees) {
		t.Fatalf("fees %v, want %v", fees, wantFees)
	}
	if bill.FeeTotal != 38+1-10 || bill.NetTotal != 10000+333-2500-29 {
		t.Fatalf("totals: fees %d, net %d", bill.FeeTotal, bill.NetTotal)
	}

	acct, err := e.ch.DownloadAccountBill(ctx, "2025-03-14")
	if err != nil {
		t.Fatal(err)
	}
	if acct.Channel != orderpay.ChannelAlipay || acct.Account != e.keys.SellerID || acct.Date != "2025-03-14" ||
		acct.Income != 10000+333+10 || acct.Expense != 38+1+2500 {
		t.Fatalf("account bill %+v", acct)
	}
	type mv struct {
		kind            orderpay.MovementKind
		trade, refund   string
		amount, balance int64
	}
	var got []mv
	for _, m := range acct.Movements {
		got = append(got, mv{m.Kind, m.OutTradeNo, m.OutRefundNo, m.Amount, m.Balance})
	}
	want := []mv{
		{orderpay.MovementPayment, "RT_A", "", 10000, 22345},
		{orderpay.MovementFee, "RT_A", "", -38, 22307},
		{orderpay.MovementRefund, "RT_A", "RT_A_r1", -2500, 19807},
		{orderpay.MovementFeeReturn, "RT_A", "RT_A_r1", 10, 19817},
		{orderpay.MovementPayment, "RT_B", "", 333, 20150},
		{orderpay.MovementFee, "RT_B", "", -1, 20149},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("movements\n got %+v\nwant %+v", got, want)
	}
}

// A property of random days: whatever the contract (rate, per-method rates, rounding,
// whether refunds keep the fee), with no faults, the bills the adapter reads agree with
// orderpay's own arithmetic: every payment's fee is orderpay.Fee, every refund's share is
// orderpay.RefundFeeShare in the order the refunds settled, the 汇总's totals are the sums
// of the rows, and the account's movements sum to paid − fees − refunds + shares with every
// balance chaining, day 2 opening at day 1's close.
func TestBills_RandomDaysAgreeWithTheFeeArithmetic(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			randomDays(t, seed)
		})
	}
}

func randomDays(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 37))
	fees, rate := channeltest.RandomFees(rng, seed, orderpay.MethodQR, orderpay.MethodPC)
	delay := time.Duration(rng.IntN(180)) * time.Minute
	t.Logf("rate %s, rounding %s, keep %v, refund delay %v", rate, fees.Rounding, fees.RefundKeepsFee, delay)
	e := setupWith(t, sim.Config{RefundDelay: delay, AlipayFees: fees})
	// Some refunds are slow, so that refunds settle in another order than they were made.
	if err := e.sim.SetFaults(sim.FaultPlan{Seed: seed, Rules: []sim.FaultRule{{Channel: orderpay.ChannelAlipay,
		Method: sim.MethodRefund, Kind: sim.FaultSlow, Probability: 0.3, Delay: sim.Duration(5 * time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	end := time.Date(2025, 3, 16, 0, 0, 0, 0, cst) // the end of day 2
	n := 0
	fps := channeltest.RandomTrading(rng, channeltest.FeeTrader{
		Advance: e.clock.Advance, Now: e.clock.Now,
		Pay: func(amount int64) string {
			n++
			no := fmt.Sprintf("PR%d_%03d", seed, n)
			e.paid(t, no, amount)
			return no
		},
		Refund: func(no, refundNo string, amount, _ int64) {
			if res := e.ch.Refund(ctx, refundReq(no, refundNo, amount)); res.Outcome != orderpay.OutcomeRefunded && res.Outcome != orderpay.OutcomeRefundPending {
				t.Fatalf("refund %s: %+v", refundNo, res)
			}
		},
		RefundNo: func(no string, i int) string { return fmt.Sprintf("%s_r%d", no, i) },
		Key:      func(no, refundNo string) string { return no + "/" + refundNo },
	}, end, 200, 600*time.Second)
	e.clock.Set(end.Add(10 * time.Hour))

	// The bills of both days, as the adapter reads them.
	var bills []*orderpay.Bill
	var accts []*orderpay.AccountBill
	settledAt := map[string]time.Time{} // when each refund in the bills settled, as they say
	for _, date := range []string{"2025-03-14", "2025-03-15"} {
		bill, err := e.ch.DownloadBill(ctx, date)
		if err != nil {
			t.Fatal(err)
		}
		acct, err := e.ch.DownloadAccountBill(ctx, date)
		if err != nil {
			t.Fatal(err)
		}
		bills, accts = append(bills, bill), append(accts, acct)
		for _, r := range bill.Rows {
			if r.Kind == orderpay.BillRefund {
				settledAt[r.OutTradeNo+"/"+r.OutRefundNo] = r.At
			}
		}
	}

	// The expected fees, and shares in the order the refunds settled.
	feeOf, shareOf := channeltest.ExpectedFees(fees, rate, fps, settledAt)

	close := fees.OpeningBalance
	rows := 0
	for i, bill := range bills {
		date := bill.Date
		var paid, refunded, charged, given int64
		for _, r := range bill.Rows {
			switch r.Kind {
			case orderpay.BillPayment:
				if want := feeOf[r.OutTradeNo]; r.Fee != want {
					t.Errorf("%s: payment %s of %d: fee %d, want %d", date, r.OutTradeNo, r.Amount, r.Fee, want)
				}
				paid += r.Amount
				charged += r.Fee
			case orderpay.BillRefund:
				want, ok := shareOf[r.OutTradeNo+"/"+r.OutRefundNo]
				if !ok || r.Fee != want {
					t.Errorf("%s: refund %s/%s: share %d, want %d (%v)", date, r.OutTradeNo, r.OutRefundNo, r.Fee, want, ok)
				}
				refunded += r.Amount
				given += r.Fee
			}
		}
		rows += len(bill.Rows)
		if !bill.HasNetTotal || bill.FeeTotal != charged-given || bill.NetTotal != paid-refunded-charged+given {
			t.Errorf("%s: 汇总 fees %d net %d (has %v), want %d and %d", date, bill.FeeTotal, bill.NetTotal, bill.HasNetTotal,
				charged-given, paid-refunded-charged+given)
		}

		acct := accts[i]
		var sum, in, out int64
		close, sum = channeltest.CheckChain(acct, close, t.Fatalf)
		for _, m := range acct.Movements {
			if m.Amount > 0 {
				in += m.Amount
			} else {
				out -= m.Amount
			}
		}
		if want := paid - charged - refunded + given; sum != want {
			t.Errorf("%s: the account moved %d, want %d", date, sum, want)
		}
		if acct.Income != in || acct.Expense != out {
			t.Errorf("%s: totals in %d out %d, rows %d and %d", date, acct.Income, acct.Expense, in, out)
		}
	}
	if want := len(fps) + len(settledAt); rows != want {
		t.Errorf("the two days' bills have %d rows, want %d", rows, want)
	}
}

package wechat_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
	"orderpay/channel/wechat"
)

const flowHeader = "记账时间,微信支付业务单号,资金流水单号,业务名称,业务类型,收支类型,收支金额(元),账户结余(元),资金变更提交申请人,备注,业务凭证号"

// The fund-flow bill (§F4): a 交易 row is a payment's settlement for the out_trade_no in
// 业务凭证号, a 退款 row a refund's for its out_refund_no, anything else OTHER; 收支类型 gives
// the sign, 账户结余 the balance after; the summary gives the day's totals in and out.
func TestParseFundFlowBill_KindsSignsBalancesAndTotals(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		flowHeader,
		wxRow("2026-11-20 00:00:00", "", "2026112000001", "充值", "充值", "收入", "100.00", "100.00", "1900000001", "", ""),
		wxRow("2026-11-20 10:00:05", "4200001", "2026112000002", "交易", "交易", "收入", "49.60", "149.60", "1900000001", "", "P1A01"),
		wxRow("2026-11-20 11:00:00", "5000001", "2026112000003", "退款", "退款", "支出", "12.23", "137.37", "1900000001", "", "P1A01R1"),
		"资金流水总笔数,收入笔数,收入金额,支出笔数,支出金额",
		wxRow("3", "2", "149.60", "1", "12.23"),
		"",
	}, "\r\n")
	ab, err := wechat.ParseFundFlowBill([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	type mv struct {
		kind            orderpay.MovementKind
		trade, refund   string
		amount, balance int64
	}
	var got []mv
	for _, m := range ab.Movements {
		got = append(got, mv{m.Kind, m.OutTradeNo, m.OutRefundNo, m.Amount, m.Balance})
	}
	want := []mv{
		{orderpay.MovementOther, "", "", 10000, 10000},
		{orderpay.MovementPayment, "P1A01", "", 4960, 14960},
		{orderpay.MovementRefund, "", "P1A01R1", -1223, 13737},
	}
	if !slices.Equal(got, want) || ab.Income != 14960 || ab.Expense != 1223 {
		t.Fatalf("movements %+v, in %d out %d", got, ab.Income, ab.Expense)
	}
	if !ab.Movements[1].At.Equal(time.Date(2026, 11, 20, 10, 0, 5, 0, orderpay.ChinaTime)) || ab.Movements[1].Ref != "2026112000002" {
		t.Fatalf("movement %+v", ab.Movements[1])
	}

	good := wxRow("2026-11-20 10:00:05", "4200001", "2026112000002", "交易", "交易", "收入", "49.60", "149.60", "1900000001", "", "P1A01")
	summary := "\r\n资金流水总笔数,收入笔数,收入金额,支出笔数,支出金额\r\n" + wxRow("1", "1", "49.60", "0", "0.00") + "\r\n"
	for name, text := range map[string]string{
		"empty":           "",
		"no summary":      flowHeader + "\r\n" + good + "\r\n",
		"summary cut":     flowHeader + "\r\n" + good + "\r\n资金流水总笔数,收入笔数\r\n",
		"bad amount":      flowHeader + "\r\n" + strings.Replace(good, "`49.60", "`49.6x", 1) + summary,
		"bad balance":     flowHeader + "\r\n" + strings.Replace(good, "`149.60", "`1,49.60", 1) + summary,
		"bad direction":   flowHeader + "\r\n" + strings.Replace(good, "`收入", "`转入", 1) + summary,
		"bad time":        flowHeader + "\r\n" + strings.Replace(good, "`2026-11-20 10:00:05", "`20/11/2026", 1) + summary,
		"missing column":  "记账时间,收支金额(元)\r\n" + good + summary,
		"no summary sums": flowHeader + "\r\n" + good + "\r\n资金流水总笔数\r\n`1\r\n",
	} {
		if _, err := wechat.ParseFundFlowBill([]byte(text)); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

// day is the test's bill date in China and when its bills are out.
func billDay(now time.Time) (date string, out time.Time) {
	d := now.In(orderpay.ChinaTime)
	start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, orderpay.ChinaTime)
	return start.Format(time.DateOnly), start.AddDate(0, 0, 1).Add(9 * time.Hour)
}

// The adapter reads both bills the simulator draws up: each row's fee and rate, the fee
// total, the account's movements net of fees from an opening top-up the day before; the
// fund-flow bill is T+1 like the trade bill.
func TestDownloadAccountBill_RoundTripsAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *sim.Config) {
		c.WechatFees = sim.FeeConfig{Rate: 38000, OpeningBalance: 12345, OpeningAt: c.Clock.Now().AddDate(0, 0, -1)}
	})
	ctx := context.Background()
	date, out := billDay(e.clock.Now())
	// Late in the day: the trades and refund must all fall on it.
	e.clock.Set(out.Add(-9*time.Hour - 3*time.Hour))
	a := e.paid(t, 10000) // fee 38
	if r := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: a, OutRefundNo: a + "R1", Amount: 2500, Total: 10000}); r.Outcome != orderpay.OutcomeRefunded && r.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("refund %+v", r)
	}
	e.clock.Advance(time.Hour)
	b := e.paid(t, 333) // fee 1.2654 → 1

	e.clock.Set(out.Add(-time.Minute))
	if _, err := e.ch.DownloadAccountBill(ctx, date); orderpay.ErrorCode(err) != orderpay.EUNAVAILABLE {
		t.Fatalf("before 09:00: %v, want EUNAVAILABLE", err)
	}
	if _, err := e.ch.DownloadAccountBill(ctx, "2026-1-1"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("malformed date: %v, want EINVALID", err)
	}
	e.clock.Set(out)
	bill, err := e.ch.DownloadBill(ctx, date)
	if err != nil {
		t.Fatal(err)
	}
	fees := map[string]int64{}
	for _, r := range bill.Rows {
		fees[string(r.Kind)+" "+r.OutTradeNo+" "+r.OutRefundNo] = r.Fee
		if r.Kind == orderpay.BillPayment && (!r.RateKnown || r.Rate != 38000) {
			t.Errorf("row %+v: rate", r)
		}
	}
	// The refund of a quarter gives back a quarter of 38 fen: 9.5, rounded half up.
	want := map[string]int64{"PAYMENT " + a + " ": 38, "REFUND " + a + " " + a + "R1": 10, "PAYMENT " + b + " ": 1}
	if fmt.Sprint(fees) != fmt.Sprint(want) || bill.FeeTotal != 38+1-10 || bill.Account != e.keys.Wechat.MchID || bill.Date != date {
		t.Fatalf("bill fees %v (want %v), total %d, account %q, date %q", fees, want, bill.FeeTotal, bill.Account, bill.Date)
	}
	acct, err := e.ch.DownloadAccountBill(ctx, date)
	if err != nil {
		t.Fatal(err)
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
	wantMv := []mv{
		{orderpay.MovementPayment, a, "", 10000 - 38, 12345 + 9962},
		{orderpay.MovementRefund, "", a + "R1", -(2500 - 10), 12345 + 9962 - 2490},
		{orderpay.MovementPayment, b, "", 333 - 1, 12345 + 9962 - 2490 + 332},
	}
	if !slices.Equal(got, wantMv) || acct.Income != 9962+332 || acct.Expense != 2490 || acct.Account != e.keys.Wechat.MchID {
		t.Fatalf("movements\n got %+v\nwant %+v\n(in %d, out %d, account %q)", got, wantMv, acct.Income, acct.Expense, acct.Account)
	}
	// The day before holds the opening top-up, as an OTHER movement.
	prev, _, _ := orderpay.BillDayRange(date)
	before, err := e.ch.DownloadAccountBill(ctx, orderpay.BillDay(prev.AddDate(0, 0, -1)))
	if err != nil || len(before.Movements) != 1 || before.Movements[0].Kind != orderpay.MovementOther || before.Movements[0].Balance != 12345 {
		t.Fatalf("the day before: %+v, %v", before, err)
	}
}

// A property of random days: whatever the contract (rate, per-method rates, rounding,
// whether refunds keep the fee), with no faults, the bills the adapter reads agree with
// orderpay's own arithmetic: every payment's fee is orderpay.Fee, every refund's share is
// orderpay.RefundFeeShare in the order the refunds settled, 手续费总金额 is their net sum, and
// the fund-flow movements sum to paid − fees − refunds + shares with every balance chaining,
// day 2 opening at day 1's close.
func TestBills_RandomDaysAgreeWithTheFeeArithmetic(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			randomWechatDays(t, seed)
		})
	}
}

func randomWechatDays(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	fees, rate := channeltest.RandomFees(rng, seed, orderpay.MethodQR, orderpay.MethodH5)
	delay := time.Duration(rng.IntN(180)) * time.Minute
	e := setup(t, func(c *sim.Config) { c.WechatFees, c.RefundDelay = fees, delay })
	// Some refunds are slow, so that refunds settle in another order than they were made.
	if err := e.sim.SetFaults(sim.FaultPlan{Seed: seed, Rules: []sim.FaultRule{{Channel: orderpay.ChannelWechat,
		Method: sim.MethodRefund, Kind: sim.FaultSlow, Probability: 0.3, Delay: sim.Duration(5 * time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day1, _ := billDay(e.clock.Now())
	from, _, _ := orderpay.BillDayRange(day1)
	e.clock.Set(from)
	end := from.AddDate(0, 0, 2)

	fps := channeltest.RandomTrading(rng, channeltest.FeeTrader{
		Advance: e.clock.Advance, Now: e.clock.Now,
		Pay: func(amount int64) string { return e.paid(t, amount) },
		Refund: func(no, refundNo string, amount, total int64) {
			if res := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: refundNo, Amount: amount, Total: total}); res.Outcome != orderpay.OutcomeRefunded && res.Outcome != orderpay.OutcomeRefundPending {
				t.Fatalf("refund %s: %+v", refundNo, res)
			}
		},
		RefundNo: func(no string, i int) string { return fmt.Sprintf("%sR%d", no, i) },
		Key:      func(_, refundNo string) string { return refundNo },
	}, end, 150, 900*time.Second)
	e.clock.Set(end.Add(10 * time.Hour))

	var bills []*orderpay.Bill
	var accts []*orderpay.AccountBill
	settledAt := map[string]time.Time{}
	for _, d := range []time.Time{from, from.AddDate(0, 0, 1)} {
		date := orderpay.BillDay(d)
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
				settledAt[r.OutRefundNo] = r.At
			}
		}
	}

	// The expected fees, and shares in the order the bills say the refunds settled.
	feeOf, shareOf := channeltest.ExpectedFees(fees, rate, fps, settledAt)
	closing := fees.OpeningBalance
	rows := 0
	for i, bill := range bills {
		var paid, refunded, charged, given int64
		for _, r := range bill.Rows {
			switch r.Kind {
			case orderpay.BillPayment:
				if want := feeOf[r.OutTradeNo]; r.Fee != want || r.Rate != rate {
					t.Errorf("%s: payment %s of %d: fee %d at %s, want %d at %s", bill.Date, r.OutTradeNo, r.Amount, r.Fee, r.Rate, want, rate)
				}
				paid += r.Amount
				charged += r.Fee
			case orderpay.BillRefund:
				if want := shareOf[r.OutRefundNo]; r.Fee != want {
					t.Errorf("%s: refund %s: share %d, want %d", bill.Date, r.OutRefundNo, r.Fee, want)
				}
				refunded += r.Amount
				given += r.Fee
			}
		}
		rows += len(bill.Rows)
		if bill.FeeTotal != charged-given {
			t.Errorf("%s: 手续费总金额 %d, rows %d", bill.Date, bill.FeeTotal, charged-given)
		}
		var sum int64
		closing, sum = channeltest.CheckChain(accts[i], closing, t.Fatalf)
		if want := paid - charged - refunded + given; sum != want {
			t.Errorf("%s: the account moved %d, want %d", bill.Date, sum, want)
		}
	}
	if want := len(fps) + len(settledAt); rows != want || len(fps) < 50 {
		t.Errorf("the two days' bills have %d rows, want %d (%d payments)", rows, want, len(fps))
	}
}

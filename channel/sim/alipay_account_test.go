package sim_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay"
	adapter "orderpay/channel/alipay"
	"orderpay/channel/sim"
)

// alipayPay precreates no for amount and the buyer pays it at once.
func (b *bundle) alipayPay(t *testing.T, no, amount string) {
	t.Helper()
	qr := b.precreate(t, no, amount, b.clock.Now().Add(time.Hour), "")
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
}

// alipayBillBytes asks for the URL of a bill of billType and downloads the zip.
func (b *bundle) alipayBillBytes(t *testing.T, billType, date string) []byte {
	t.Helper()
	rsp := b.alipayBillURLOf(t, billType, date)
	resp, err := http.Get(rsp.BillDownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", rsp.BillDownloadURL, resp.StatusCode, err)
	}
	return data
}

// summaryRows are the CSV rows of a trade bill's 业务明细(汇总), header first.
func summaryRows(t *testing.T, b *bundle, date string) (name string, rows [][]string) {
	t.Helper()
	rsp := b.alipayBillURL(t, date)
	for _, f := range downloadAlipayBillFiles(t, rsp.BillDownloadURL) {
		if strings.Contains(f.name, "汇总") {
			return f.name, f.rows(t)
		}
	}
	t.Fatalf("the bill of %s has no 汇总 file", date)
	return "", nil
}

// Each rounding rule on amounts whose fee at 1 % is 8.49, 8.5 and 8.51 fen, and on refund
// shares that round apart too: every row's 服务费 and the 汇总's totals; with
// RefundKeepsFee no share is given back.
func TestAlipayBill_FeesPerRowAndSummaryByEachRoundingRule(t *testing.T) {
	t.Parallel()
	type want struct {
		fees   [3]string // 服务费 of A (8.49), B (8.50), C (8.51)
		shares [3]string // of B's refund of 4.25, C's of 5.00, then C's last 3.51
	}
	cases := []struct {
		rounding orderpay.FeeRounding
		keep     bool
		want
	}{
		{orderpay.RoundHalfUp, false, want{[3]string{"-0.08", "-0.09", "-0.09"}, [3]string{"0.05", "0.05", "0.04"}}},
		{orderpay.RoundHalfEven, false, want{[3]string{"-0.08", "-0.08", "-0.09"}, [3]string{"0.04", "0.05", "0.04"}}},
		{orderpay.RoundDown, false, want{[3]string{"-0.08", "-0.08", "-0.08"}, [3]string{"0.04", "0.04", "0.04"}}},
		{orderpay.RoundUp, false, want{[3]string{"-0.09", "-0.09", "-0.09"}, [3]string{"0.05", "0.06", "0.03"}}},
		{"", false, want{[3]string{"-0.08", "-0.09", "-0.09"}, [3]string{"0.05", "0.05", "0.04"}}}, // half up by default
		{orderpay.RoundHalfUp, true, want{[3]string{"-0.08", "-0.09", "-0.09"}, [3]string{"0.00", "0.00", "0.00"}}},
	}
	for _, tc := range cases {
		t.Run(string(tc.rounding)+map[bool]string{true: "_keep"}[tc.keep], func(t *testing.T) {
			t.Parallel()
			b := setup(t, sim.Config{RefundDelay: time.Minute, AlipayFees: sim.FeeConfig{Rate: 100000, Rounding: tc.rounding, RefundKeepsFee: tc.keep}})
			b.alipayPay(t, "FR_A", "8.49")
			b.alipayPay(t, "FR_B", "8.50")
			b.alipayPay(t, "FR_C", "8.51")
			b.alipayRefund(t, "FR_B", "FR_B_r1", "4.25")
			b.clock.Advance(time.Minute)
			b.alipayRefund(t, "FR_C", "FR_C_r1", "5.00")
			b.clock.Advance(time.Minute)
			b.alipayRefund(t, "FR_C", "FR_C_r2", "3.51")
			b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))

			got := map[string]string{}
			for _, r := range downloadAlipayBill(t, b.alipayBillURL(t, "2025-03-14").BillDownloadURL).rows(t)[1:] {
				got[r[1]+"/"+r[21]] = r[22]
			}
			wantRows := map[string]string{
				"FR_A/": tc.fees[0], "FR_B/": tc.fees[1], "FR_C/": tc.fees[2],
				"FR_B/FR_B_r1": tc.shares[0], "FR_C/FR_C_r1": tc.shares[1], "FR_C/FR_C_r2": tc.shares[2],
			}
			for k, w := range wantRows {
				if got[k] != w {
					t.Errorf("服务费 of %s = %q, want %q", k, got[k], w)
				}
			}
			if len(got) != len(wantRows) {
				t.Errorf("rows %v", got)
			}

			var fee int64
			for _, s := range append(tc.fees[:], tc.shares[:]...) {
				v, err := orderpay.ParseSignedYuan(s)
				if err != nil {
					t.Fatal(err)
				}
				fee += v
			}
			name, rows := summaryRows(t, b, "2025-03-14")
			if !strings.HasPrefix(name, b.keys.SellerID+"_20250314_业务明细(汇总).csv") {
				t.Errorf("summary file %q", name)
			}
			// 商家实收: 25.50 paid less 12.76 refunded; 实收净额 that plus 服务费.
			wantTotal := []string{"合计", "", "3", "3", "25.50", "12.74", "0.00", "0.00", "0.00",
				orderpay.FormatYuan(fee), "0.00", orderpay.FormatYuan(1274 + fee)}
			wantStore := slices.Clone(wantTotal)
			wantStore[0] = ""
			want := [][]string{
				{"门店编号", "门店名称", "交易订单总笔数", "退款订单总笔数", "订单金额（元）", "商家实收（元）", "支付宝优惠（元）",
					"商家优惠（元）", "卡消费金额（元）", "服务费（元）", "分润（元）", "实收净额（元）"},
				wantStore, wantTotal,
			}
			if !slices.EqualFunc(rows, want, slices.Equal) {
				t.Errorf("summary\n got %q\nwant %q", rows, want)
			}
		})
	}
}

// The account bill: a payment's money in and its fee out, a refund's money out and its
// share back, each row with the balance after it, from the opening balance on, and the
// next day opening at the day's close.
func TestAlipayAccountBill_RowsAndBalancesChainAcrossDays(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{RefundDelay: 2 * time.Hour, AlipayFees: sim.FeeConfig{OpeningBalance: 100000}})
	b.alipayPay(t, "AC_A", "100.00") // 10:00, fee 0.60
	b.alipayRefund(t, "AC_A", "AC_A_r1", "40.00")
	b.clock.Advance(time.Hour)
	b.alipayPay(t, "AC_B", "0.50") // 11:00, fee 0.003: none, so no 收费 row
	b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))
	b.alipayPay(t, "AC_C", "20.00") // fee 0.12
	qA, qB, qC := b.query(t, "AC_A"), b.query(t, "AC_B"), b.query(t, "AC_C")

	wantDay := func(date string, footer []string, want [][]string) {
		t.Helper()
		bill := downloadAlipayBill(t, b.alipayBillURLOf(t, "signcustomer", date).BillDownloadURL)
		digits := strings.ReplaceAll(date, "-", "")
		if bill.name != b.keys.SellerID+"_"+digits+"_账务明细.csv" {
			t.Errorf("%s: file %q", date, bill.name)
		}
		for _, l := range append([]string{"#支付宝账务明细查询", "#账号：[" + b.keys.SellerID + "]"}, footer...) {
			if !slices.Contains(bill.lines, l) {
				t.Errorf("%s: no line %q in\n%s", date, l, strings.Join(bill.lines, "\n"))
			}
		}
		rows := bill.rows(t)
		if !slices.Equal(rows[0], []string{"账务流水号", "业务流水号", "商户订单号", "商品名称", "发生时间", "对方账号",
			"收入金额（+元）", "支出金额（-元）", "账户余额（元）", "交易渠道", "业务类型", "备注"}) {
			t.Errorf("%s: header %q", date, rows[0])
		}
		refs := map[string]bool{}
		for i, r := range rows[1:] {
			if refs[r[0]] || !strings.HasPrefix(r[0], digits) {
				t.Errorf("%s: 账务流水号 %q repeated or not of the day", date, r[0])
			}
			refs[r[0]] = true
			r = slices.Delete(slices.Clone(r), 0, 1) // the number checked above
			if i >= len(want) || !slices.Equal(r, want[i]) {
				t.Errorf("%s: row %d = %q, want %q", date, i, r, want[min(i, len(want)-1)])
			}
		}
		if len(rows)-1 != len(want) {
			t.Errorf("%s: %d rows, want %d", date, len(rows)-1, len(want))
		}
	}
	b.clock.Set(time.Date(2025, 3, 16, 10, 0, 0, 0, cst))
	row := func(q *alipay.TradeQueryRsp, at, in, out, balance, kind, note string) []string {
		return []string{q.TradeNo, q.OutTradeNo, "order " + q.OutTradeNo, at, q.BuyerLogonId, in, out, balance, "支付宝", kind, note}
	}
	wantDay("2025-03-14", []string{"#收入合计：3笔，共100.74元", "#支出合计：2笔，共40.60元"}, [][]string{
		row(qA, "2025-03-14 10:00:00", "100.00", "", "1100.00", "在线支付", ""),
		row(qA, "2025-03-14 10:00:00", "", "0.60", "1099.40", "收费", ""),
		row(qB, "2025-03-14 11:00:00", "0.50", "", "1099.90", "在线支付", ""),
		row(qA, "2025-03-14 12:00:00", "", "40.00", "1059.90", "交易退款", "AC_A_r1"),
		row(qA, "2025-03-14 12:00:00", "0.24", "", "1060.14", "收费退回", "AC_A_r1"),
	})
	wantDay("2025-03-15", []string{"#收入合计：1笔，共20.00元", "#支出合计：1笔，共0.12元"}, [][]string{
		row(qC, "2025-03-15 10:00:00", "20.00", "", "1080.14", "在线支付", ""),
		row(qC, "2025-03-15 10:00:00", "", "0.12", "1080.02", "收费", ""),
	})
	// A day without movements: no rows, totals of zero.
	wantDay("2025-03-13", []string{"#收入合计：0笔，共0.00元", "#支出合计：0笔，共0.00元"}, nil)
}

// alipayBillURLOf is alipayBillURL for another bill type.
func (b *bundle) alipayBillURLOf(t *testing.T, billType, date string) *alipay.BillDownloadURLQueryRsp {
	t.Helper()
	rsp, err := b.client.BillDownloadURLQuery(context.Background(), alipay.BillDownloadURLQuery{BillType: billType, BillDate: date})
	if err != nil || rsp.Code != alipay.CodeSuccess {
		t.Fatalf("%s bill %s: %+v %v", billType, date, rsp, err)
	}
	return rsp
}

// Every kind of bill fault, alone on a simulator: PlantedFaults lists each with its exact
// money, and each is there in the bills as the adapter reads them, by the same amount.
// Day 1: P1 100.00 paid 10:00 and refunded 30.00 at 11:00, P2 50.00 paid 12:00; day 2: P3
// 20.00 paid 10:00. The contract: 0.6 %, half up, refunds give back their share.
func TestAlipayPlantedFaults_EveryKindWithItsAmountAndInTheBills(t *testing.T) {
	t.Parallel()
	day1 := func(h, m int) time.Time { return time.Date(2025, 3, 14, h, m, 0, 0, cst) }
	pf := func(kind sim.BillFaultKind, date, trade, refund string, amount int64) sim.PlantedFault {
		return sim.PlantedFault{Channel: orderpay.ChannelAlipay, Date: date, Kind: kind, OutTradeNo: trade, OutRefundNo: refund, Amount: amount}
	}
	const d1, d2 = "2025-03-14", "2025-03-15"
	cases := []struct {
		name   string
		fees   sim.FeeConfig
		fault  sim.BillFault
		d1, d2 []sim.PlantedFault
	}{
		{"fee_rate", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultFeeRate, OtherRate: 100000},
			[]sim.PlantedFault{pf(sim.BillFaultFeeRate, d1, "P1", "", 40), pf(sim.BillFaultFeeRate, d1, "P2", "", 20)},
			[]sim.PlantedFault{pf(sim.BillFaultFeeRate, d2, "P3", "", 8)}},
		{"rate_change", sim.FeeConfig{RateChanges: []sim.RateChange{{At: day1(11, 30), Rate: 100000}}}, sim.BillFault{},
			[]sim.PlantedFault{pf(sim.BillFaultRateChange, d1, "P2", "", 20)},
			[]sim.PlantedFault{pf(sim.BillFaultRateChange, d2, "P3", "", 8)}},
		{"refund_fee_kept", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultRefundFeeKept},
			[]sim.PlantedFault{pf(sim.BillFaultRefundFeeKept, d1, "P1", "P1_r1", -18)}, nil},
		{"refund_fee_given", sim.FeeConfig{RefundKeepsFee: true}, sim.BillFault{Kind: sim.BillFaultRefundFeeGiven},
			[]sim.PlantedFault{pf(sim.BillFaultRefundFeeGiven, d1, "P1", "P1_r1", 18)}, nil},
		{"settlement_missing", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultSettlementMissing},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementMissing, d1, "P1", "", -9940), pf(sim.BillFaultSettlementMissing, d1, "P2", "", -4970)},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementMissing, d2, "P3", "", -1988)}},
		{"settlement_short", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultSettlementShort, Amount: 7},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementShort, d1, "P1", "", -7), pf(sim.BillFaultSettlementShort, d1, "P2", "", -7)},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementShort, d2, "P3", "", -7)}},
		{"balance_break", sim.FeeConfig{OpeningBalance: 5000}, sim.BillFault{Kind: sim.BillFaultBalanceBreak, Amount: 100, Channel: orderpay.ChannelAlipay},
			[]sim.PlantedFault{pf(sim.BillFaultBalanceBreak, d1, "P1", "", 100)},
			[]sim.PlantedFault{pf(sim.BillFaultBalanceBreak, d2, "P3", "", 100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sim.Config{RefundDelay: time.Hour, AlipayFees: tc.fees}
			if tc.fault.Kind != "" {
				cfg.BillFaults = []sim.BillFault{tc.fault}
			}
			// The same fault on WeChat only touches nothing of Alipay's.
			cfg.BillFaults = append(cfg.BillFaults, sim.BillFault{Kind: sim.BillFaultSettlementShort, Channel: orderpay.ChannelWechat, Amount: 1})
			b := setup(t, cfg)
			b.alipayPay(t, "P1", "100.00")
			b.alipayRefund(t, "P1", "P1_r1", "30.00")
			b.clock.Set(day1(12, 0))
			b.alipayPay(t, "P2", "50.00")
			b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))
			b.alipayPay(t, "P3", "20.00")
			b.clock.Set(time.Date(2025, 3, 16, 10, 0, 0, 0, cst))

			amounts := map[string]int64{"P1": 10000, "P2": 5000, "P3": 2000}
			contractFee := func(no string) int64 { return orderpay.Fee(amounts[no], sim.DefaultFeeRate, orderpay.RoundHalfUp) }
			close := tc.fees.OpeningBalance
			for _, day := range []struct {
				date string
				want []sim.PlantedFault
			}{{d1, tc.d1}, {d2, tc.d2}} {
				got := sim.AlipayPlantedFaults(b.sim, day.date)
				if !slices.Equal(got, day.want) {
					t.Errorf("%s: planted\n got %v\nwant %v", day.date, got, day.want)
				}
				bill, err := adapter.ParseTradeBill(b.alipayBillBytes(t, "trade", day.date))
				if err != nil {
					t.Fatal(err)
				}
				acct, err := adapter.ParseAccountBill(b.alipayBillBytes(t, "signcustomer", day.date))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range got {
					var seen int64
					switch f.Kind {
					case sim.BillFaultFeeRate, sim.BillFaultRateChange:
						for _, r := range bill.Rows {
							if r.Kind == orderpay.BillPayment && r.OutTradeNo == f.OutTradeNo {
								seen = r.Fee - contractFee(f.OutTradeNo)
							}
						}
					case sim.BillFaultRefundFeeKept, sim.BillFaultRefundFeeGiven:
						var contractShare int64
						if !tc.fees.RefundKeepsFee {
							contractShare = orderpay.RefundFeeShare(contractFee("P1"), 10000, 3000, 0, 0, orderpay.RoundHalfUp)
						}
						for _, r := range bill.Rows {
							if r.Kind == orderpay.BillRefund && r.OutRefundNo == f.OutRefundNo {
								seen = r.Fee - contractShare
							}
						}
					case sim.BillFaultSettlementMissing, sim.BillFaultSettlementShort:
						var settled int64
						for _, m := range acct.Movements {
							if m.OutTradeNo == f.OutTradeNo && (m.Kind == orderpay.MovementPayment || m.Kind == orderpay.MovementFee) {
								settled += m.Amount
							}
						}
						seen = settled - (amounts[f.OutTradeNo] - contractFee(f.OutTradeNo))
					case sim.BillFaultBalanceBreak:
						first := acct.Movements[0]
						if first.OutTradeNo != f.OutTradeNo {
							t.Errorf("%s: the day opens with %s, the fault names %s", day.date, first.OutTradeNo, f.OutTradeNo)
						}
						seen = first.Balance - first.Amount - close
					}
					if seen != f.Amount {
						t.Errorf("%s: %v: the bills show %d", day.date, f, seen)
					}
				}
				// Every other row of the account chains.
				for i := 1; i < len(acct.Movements); i++ {
					if m := acct.Movements[i]; m.Balance != acct.Movements[i-1].Balance+m.Amount {
						t.Errorf("%s: movement %d does not chain: %+v", day.date, i, m)
					}
				}
				if n := len(acct.Movements); n > 0 {
					close = acct.Movements[n-1].Balance
				}
			}
		})
	}
}

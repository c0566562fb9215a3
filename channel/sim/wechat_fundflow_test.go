package sim_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	adapter "orderpay/channel/wechat"
)

// wxBillBytes asks for a bill of kind (tradebill or fundflowbill) with query and downloads
// the file, checking its SHA1 against the answer's.
func (b *wxBundle) wxBillBytes(t *testing.T, kind, query string) []byte {
	t.Helper()
	a := b.call(t, http.MethodGet, "/v3/bill/"+kind+"?"+query, "")
	if a.status != http.StatusOK {
		t.Fatalf("%s %s: %s", kind, query, a)
	}
	url, _ := a.json(t)["download_url"].(string)
	got := b.download(t, url)
	if got.status != http.StatusOK {
		t.Fatalf("download %s %s: %s", kind, query, got)
	}
	return got.body
}

// Each rounding rule on amounts whose fee at 1 % is 8.49, 8.5 and 8.51 fen, and on refund
// shares that round apart too: every row's 手续费 (a refund's written negative) and the
// summary's 手续费总金额; with RefundKeepsFee no share is given back.
func TestWechatBill_FeesPerRowAndTotalByEachRoundingRule(t *testing.T) {
	t.Parallel()
	type want struct {
		fees   [3]string // 手续费 of A (8.49), B (8.50), C (8.51)
		shares [3]string // of B's refund of 4.25, C's of 5.00, then C's last 3.51
	}
	cases := []struct {
		rounding orderpay.FeeRounding
		keep     bool
		want
	}{
		{orderpay.RoundHalfUp, false, want{[3]string{"0.08", "0.09", "0.09"}, [3]string{"-0.05", "-0.05", "-0.04"}}},
		{orderpay.RoundHalfEven, false, want{[3]string{"0.08", "0.08", "0.09"}, [3]string{"-0.04", "-0.05", "-0.04"}}},
		{orderpay.RoundDown, false, want{[3]string{"0.08", "0.08", "0.08"}, [3]string{"-0.04", "-0.04", "-0.04"}}},
		{orderpay.RoundUp, false, want{[3]string{"0.09", "0.09", "0.09"}, [3]string{"-0.05", "-0.06", "-0.03"}}},
		{"", false, want{[3]string{"0.08", "0.09", "0.09"}, [3]string{"-0.05", "-0.05", "-0.04"}}}, // half up by default
		{orderpay.RoundHalfUp, true, want{[3]string{"0.08", "0.09", "0.09"}, [3]string{"0.00", "0.00", "0.00"}}},
	}
	for _, tc := range cases {
		t.Run(string(tc.rounding)+map[bool]string{true: "_keep"}[tc.keep], func(t *testing.T) {
			t.Parallel()
			b := wxSetup(t, sim.Config{RefundDelay: time.Minute, WechatFees: sim.FeeConfig{Rate: 100000, Rounding: tc.rounding, RefundKeepsFee: tc.keep}})
			b.paid(t, "WXFEE_A", 849)
			b.paid(t, "WXFEE_B", 850)
			b.paid(t, "WXFEE_C", 851)
			wxRefundOf(t, b.refund(t, "WXFEE_B", "WXFEE_B_R1", 425, 850))
			b.clock.Advance(time.Minute)
			wxRefundOf(t, b.refund(t, "WXFEE_C", "WXFEE_C_R1", 500, 851))
			b.clock.Advance(time.Minute)
			wxRefundOf(t, b.refund(t, "WXFEE_C", "WXFEE_C_R2", 351, 851))
			b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))

			_, rows, summaryHeader, summary := wxBillLines(t, b.wxBillBytes(t, "tradebill", "bill_date=2025-03-14"))
			got, rates := map[string]string{}, map[string]string{}
			for _, r := range rows {
				key := r[6] + "/" // 商户订单号, and 商户退款单号 on a refund ("0" on a payment)
				if r[9] == "REFUND" {
					key += r[15]
				}
				got[key], rates[key] = r[22], r[23] // 手续费, 费率
			}
			wantRows := map[string]string{
				"WXFEE_A/": tc.fees[0], "WXFEE_B/": tc.fees[1], "WXFEE_C/": tc.fees[2],
				"WXFEE_B/WXFEE_B_R1": tc.shares[0], "WXFEE_C/WXFEE_C_R1": tc.shares[1], "WXFEE_C/WXFEE_C_R2": tc.shares[2],
			}
			for k, w := range wantRows {
				if got[k] != w {
					t.Errorf("手续费 of %s = %q, want %q", k, got[k], w)
				}
				if rates[k] != "1.00000%" {
					t.Errorf("费率 of %s = %q, want 1.00000%%", k, rates[k])
				}
			}
			if len(got) != len(wantRows) {
				t.Errorf("rows %v", got)
			}
			var total int64
			for _, s := range append(tc.fees[:], tc.shares[:]...) {
				v, err := orderpay.ParseSignedYuan(s)
				if err != nil {
					t.Fatal(err)
				}
				total += v
			}
			if i := slices.Index(summaryHeader, "手续费总金额"); i < 0 || summary[i] != orderpay.FormatYuan(total) {
				t.Errorf("summary %q %q, want 手续费总金额 %s", summaryHeader, summary, orderpay.FormatYuan(total))
			}
		})
	}
}

// The fund-flow bill of the basic account: a payment's money in net of its fee, a refund's
// out net of its share, each row with the balance after it, from the opening balance on,
// and the next day opening at the day's close. The other accounts have no movements; any
// other account type is refused.
func TestWechatFundFlow_RowsAndBalancesChainAcrossDays(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{RefundDelay: 2 * time.Hour, WechatFees: sim.FeeConfig{OpeningBalance: 100000}}) // 2025-03-14 10:00
	b.paid(t, "WXFLOW_A", 10000)                                                                               // 10:00, fee 0.60
	refund := wxRefundOf(t, b.refund(t, "WXFLOW_A", "WXFLOW_A_R1", 4000, 10000))
	b.clock.Advance(time.Hour)
	b.paid(t, "WXFLOW_B", 50) // 11:00, fee 0.003: none
	b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))
	b.paid(t, "WXFLOW_C", 2000) // fee 0.12
	a, bb, c := wxEntry(t, b.sim, "WXFLOW_A"), wxEntry(t, b.sim, "WXFLOW_B"), wxEntry(t, b.sim, "WXFLOW_C")

	b.clock.Set(time.Date(2025, 3, 16, 8, 59, 0, 0, cst))
	wantWxError(t, "fund flow before 09:00", b.call(t, http.MethodGet, "/v3/bill/fundflowbill?bill_date=2025-03-15", ""),
		http.StatusBadRequest, "STATEMENT_CREATING")
	b.clock.Set(time.Date(2025, 3, 16, 10, 0, 0, 0, cst))
	wantWxError(t, "account_type ALL", b.call(t, http.MethodGet, "/v3/bill/fundflowbill?bill_date=2025-03-14&account_type=ALL", ""),
		http.StatusBadRequest, "PARAM_ERROR")
	wantWxError(t, "today", b.call(t, http.MethodGet, "/v3/bill/fundflowbill?bill_date=2025-03-16", ""),
		http.StatusBadRequest, "NO_STATEMENT_EXIST")

	header := "记账时间,微信支付业务单号,资金流水单号,业务名称,业务类型,收支类型,收支金额(元),账户结余(元),资金变更提交申请人,备注,业务凭证号"
	wantDay := func(date, query string, summary []string, want [][]string) {
		t.Helper()
		h, rows, sh, s := wxBillLines(t, b.wxBillBytes(t, "fundflowbill", "bill_date="+date+query))
		if strings.Join(h, ",") != header || strings.Join(sh, ",") != "资金流水总笔数,收入笔数,收入金额,支出笔数,支出金额" {
			t.Errorf("%s%s: headers %q, %q", date, query, h, sh)
		}
		digits := strings.ReplaceAll(date, "-", "")
		refs := map[string]bool{}
		for i, r := range rows {
			if len(r) != 11 || refs[r[2]] || !strings.HasPrefix(r[2], digits) {
				t.Errorf("%s: row %q: 资金流水单号 repeated or not of the day", date, r)
				continue
			}
			refs[r[2]] = true
			r = slices.Delete(slices.Clone(r), 2, 3) // the number checked above
			if i >= len(want) || !slices.Equal(r, want[i]) {
				t.Errorf("%s%s: row %d = %q, want %q", date, query, i, r, want[min(i, len(want)-1)])
			}
		}
		if len(rows) != len(want) || !slices.Equal(s, summary) {
			t.Errorf("%s%s: %d rows (want %d), summary %q (want %q)", date, query, len(rows), len(want), s, summary)
		}
	}
	mch := b.wk.MchID
	day1 := [][]string{
		{"2025-03-14 10:00:00", a.TradeNo, "交易", "交易", "收入", "99.40", "1099.40", mch, "", "WXFLOW_A"},
		{"2025-03-14 11:00:00", bb.TradeNo, "交易", "交易", "收入", "0.50", "1099.90", mch, "", "WXFLOW_B"},
		{"2025-03-14 12:00:00", refund.RefundID, "退款", "退款", "支出", "39.76", "1060.14", mch, "", "WXFLOW_A_R1"},
	}
	wantDay("2025-03-14", "", []string{"3", "2", "99.90", "1", "39.76"}, day1)
	wantDay("2025-03-14", "&account_type=BASIC&tar_type=", []string{"3", "2", "99.90", "1", "39.76"}, day1)
	wantDay("2025-03-15", "", []string{"1", "1", "19.88", "0", "0.00"}, [][]string{
		{"2025-03-15 10:00:00", c.TradeNo, "交易", "交易", "收入", "19.88", "1080.02", mch, "", "WXFLOW_C"},
	})
	// A day without movements, and the accounts the simulator keeps empty.
	zero := []string{"0", "0", "0.00", "0", "0.00"}
	wantDay("2025-03-13", "", zero, nil)
	wantDay("2025-03-14", "&account_type=OPERATION", zero, nil)
	wantDay("2025-03-14", "&account_type=FEES", zero, nil)
}

// Every kind of bill fault, alone on a simulator: PlantedFaults lists each with its exact
// money, and each is there in the bills as the adapter reads them, by the same amount.
// Day 1: P1 100.00 paid 10:00 and refunded 30.00 at 11:00, P2 50.00 paid 12:00; day 2: P3
// 20.00 paid 10:00. The contract: 0.6 %, half up, refunds give back their share.
func TestWechatPlantedFaults_EveryKindWithItsAmountAndInTheBills(t *testing.T) {
	t.Parallel()
	day1 := func(h, m int) time.Time { return time.Date(2025, 3, 14, h, m, 0, 0, cst) }
	const d1, d2 = "2025-03-14", "2025-03-15"
	const p1, p2, p3, r1 = "WXPF_P1", "WXPF_P2", "WXPF_P3", "WXPF_P1_R1"
	pf := func(kind sim.BillFaultKind, date, trade, refund string, amount int64) sim.PlantedFault {
		return sim.PlantedFault{Channel: orderpay.ChannelWechat, Date: date, Kind: kind, OutTradeNo: trade, OutRefundNo: refund, Amount: amount}
	}
	cases := []struct {
		name   string
		fees   sim.FeeConfig
		fault  sim.BillFault
		d1, d2 []sim.PlantedFault
	}{
		{"fee_rate", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultFeeRate, OtherRate: 100000},
			[]sim.PlantedFault{pf(sim.BillFaultFeeRate, d1, p1, "", 40), pf(sim.BillFaultFeeRate, d1, p2, "", 20)},
			[]sim.PlantedFault{pf(sim.BillFaultFeeRate, d2, p3, "", 8)}},
		{"rate_change", sim.FeeConfig{RateChanges: []sim.RateChange{{At: day1(11, 30), Rate: 100000}}}, sim.BillFault{},
			[]sim.PlantedFault{pf(sim.BillFaultRateChange, d1, p2, "", 20)},
			[]sim.PlantedFault{pf(sim.BillFaultRateChange, d2, p3, "", 8)}},
		{"refund_fee_kept", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultRefundFeeKept},
			[]sim.PlantedFault{pf(sim.BillFaultRefundFeeKept, d1, p1, r1, -18)}, nil},
		{"refund_fee_given", sim.FeeConfig{RefundKeepsFee: true}, sim.BillFault{Kind: sim.BillFaultRefundFeeGiven},
			[]sim.PlantedFault{pf(sim.BillFaultRefundFeeGiven, d1, p1, r1, 18)}, nil},
		{"settlement_missing", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultSettlementMissing},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementMissing, d1, p1, "", -9940), pf(sim.BillFaultSettlementMissing, d1, p2, "", -4970)},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementMissing, d2, p3, "", -1988)}},
		{"settlement_short", sim.FeeConfig{}, sim.BillFault{Kind: sim.BillFaultSettlementShort, Amount: 7},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementShort, d1, p1, "", -7), pf(sim.BillFaultSettlementShort, d1, p2, "", -7)},
			[]sim.PlantedFault{pf(sim.BillFaultSettlementShort, d2, p3, "", -7)}},
		{"balance_break", sim.FeeConfig{OpeningBalance: 5000}, sim.BillFault{Kind: sim.BillFaultBalanceBreak, Amount: 100, Channel: orderpay.ChannelWechat},
			[]sim.PlantedFault{pf(sim.BillFaultBalanceBreak, d1, p1, "", 100)},
			[]sim.PlantedFault{pf(sim.BillFaultBalanceBreak, d2, p3, "", 100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sim.Config{RefundDelay: time.Hour, WechatFees: tc.fees}
			if tc.fault.Kind != "" {
				cfg.BillFaults = []sim.BillFault{tc.fault}
			}
			// A fault on Alipay only touches nothing of WeChat's.
			cfg.BillFaults = append(cfg.BillFaults, sim.BillFault{Kind: sim.BillFaultSettlementShort, Channel: orderpay.ChannelAlipay, Amount: 1})
			b := wxSetup(t, cfg) // 2025-03-14 10:00
			b.paid(t, p1, 10000)
			wxRefundOf(t, b.refund(t, p1, r1, 3000, 10000))
			b.clock.Set(day1(12, 0))
			b.paid(t, p2, 5000)
			b.clock.Set(time.Date(2025, 3, 15, 10, 0, 0, 0, cst))
			b.paid(t, p3, 2000)
			b.clock.Set(time.Date(2025, 3, 16, 10, 0, 0, 0, cst))

			amounts := map[string]int64{p1: 10000, p2: 5000, p3: 2000}
			contractFee := func(no string) int64 { return orderpay.Fee(amounts[no], sim.DefaultFeeRate, orderpay.RoundHalfUp) }
			close := tc.fees.OpeningBalance
			for _, day := range []struct {
				date string
				want []sim.PlantedFault
			}{{d1, tc.d1}, {d2, tc.d2}} {
				got := b.sim.PlantedFaults(orderpay.ChannelWechat, day.date)
				if !slices.Equal(got, day.want) {
					t.Errorf("%s: planted\n got %v\nwant %v", day.date, got, day.want)
				}
				if other := b.sim.PlantedFaults(orderpay.ChannelAlipay, day.date); len(other) != 0 {
					t.Errorf("%s: Alipay carries %v without a trade", day.date, other)
				}
				bill, err := adapter.ParseTradeBill(b.wxBillBytes(t, "tradebill", "bill_date="+day.date))
				if err != nil {
					t.Fatal(err)
				}
				acct, err := adapter.ParseFundFlowBill(b.wxBillBytes(t, "fundflowbill", "bill_date="+day.date))
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
							contractShare = orderpay.RefundFeeShare(contractFee(p1), 10000, 3000, 0, 0, orderpay.RoundHalfUp)
						}
						for _, r := range bill.Rows {
							if r.Kind == orderpay.BillRefund && r.OutRefundNo == f.OutRefundNo {
								seen = r.Fee - contractShare
							}
						}
					case sim.BillFaultSettlementMissing, sim.BillFaultSettlementShort:
						var settled int64
						for _, m := range acct.Movements {
							if m.OutTradeNo == f.OutTradeNo && m.Kind == orderpay.MovementPayment {
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
				// The trade bill's fee total is its rows', whatever the faults.
				var net int64
				for _, r := range bill.Rows {
					if r.Kind == orderpay.BillRefund {
						net -= r.Fee
					} else {
						net += r.Fee
					}
				}
				if bill.FeeTotal != net {
					t.Errorf("%s: 手续费总金额 %d, rows %d", day.date, bill.FeeTotal, net)
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

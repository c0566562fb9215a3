package chaos

import (
	"fmt"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// Fee and settlement faults (--fee-faults): the simulator's bills disagree with the
// contract, for the end-of-run reconciliation to find. They touch no trade: the buyers and
// the auditor see nothing of them, only the bills do. Every one the simulator plants is
// listed (sim.Simulator.PlantedFaults) and must be found by reconciliation, in its class and
// with its exact amount; anything else unexplained is a failure.
const (
	FeeFaultRate              = "fee_rate"           // a payment charged at another rate (0.38 %)
	FeeFaultRateChange        = "rate_change"        // each channel's rate changes to 1 % part-way through the run
	FeeFaultRefundFee         = "refund_fee"         // a refund gives back no share of its fee
	FeeFaultSettlementMissing = "settlement_missing" // a payment never reaches the merchant account
	FeeFaultSettlementShort   = "settlement_short"   // a payment reaches it 3 fen short
	FeeFaultBalanceBreak      = "balance_break"      // the account's balance jumps before a day's first movement
)

// FeeFaultClasses are every fee fault class, in report order. "all" means all of them.
var FeeFaultClasses = []string{FeeFaultRate, FeeFaultRateChange, FeeFaultRefundFee, FeeFaultSettlementMissing,
	FeeFaultSettlementShort, FeeFaultBalanceBreak}

// Probabilities per payment (refund, day) of the fee faults: a 1,000-order run has some 700
// payments and 500 refunds, so each class is planted a dozen times or more.
const (
	probFeeRate          = 0.02
	probRefundFee        = 0.03
	probSettlementMiss   = 0.02
	probSettlementShort  = 0.02
	settlementShortFen   = 3
	balanceBreakFen      = 1234
	feeFaultOtherRate    = orderpay.FeeRate(38000)  // 0.38 %
	feeFaultChangedRate  = orderpay.FeeRate(100000) // 1 %
	feeFaultRateChangeIn = 6 * time.Second          // wall time after the run starts: buyers pay from about 2 s on
	// openingBalance is the merchant account's balance, put in the day before the run: the
	// run's first day opens from a close the account bill of the day before shows.
	openingBalance = 10_000_000
)

// ParseFeeFaults reads --fee-faults: "none", "all" or a comma-separated list of classes,
// each optionally =probability (per payment or refund; balance_break is per day and always 1).
func ParseFeeFaults(s string) ([]string, map[string]float64, error) {
	return parseClassSpec(s, FeeFaultClasses, "fee fault class")
}

// billFaults is the simulator's configuration for these classes: its bill faults, and each
// channel's rate change (at the zero time when there is none).
// A probability given for a class replaces its default.
func billFaults(classes []string, probs map[string]float64, runStart time.Time) (faults []sim.BillFault, change time.Time) {
	prob := func(c string, def float64) float64 {
		if p, ok := probs[c]; ok {
			return p
		}
		return def
	}
	for _, c := range classes {
		switch c {
		case FeeFaultRate:
			faults = append(faults, sim.BillFault{Kind: sim.BillFaultFeeRate, Probability: prob(c, probFeeRate), OtherRate: feeFaultOtherRate})
		case FeeFaultRateChange:
			change = runStart.Add(feeFaultRateChangeIn)
		case FeeFaultRefundFee:
			faults = append(faults, sim.BillFault{Kind: sim.BillFaultRefundFeeKept, Probability: prob(c, probRefundFee)})
		case FeeFaultSettlementMissing:
			faults = append(faults, sim.BillFault{Kind: sim.BillFaultSettlementMissing, Probability: prob(c, probSettlementMiss)})
		case FeeFaultSettlementShort:
			faults = append(faults, sim.BillFault{Kind: sim.BillFaultSettlementShort, Probability: prob(c, probSettlementShort),
				Amount: settlementShortFen})
		case FeeFaultBalanceBreak:
			faults = append(faults, sim.BillFault{Kind: sim.BillFaultBalanceBreak, Probability: 1, Amount: balanceBreakFen})
		}
	}
	return faults, change
}

// plantedClass is the class reconciliation gives each kind of planted fault.
var plantedClass = map[sim.BillFaultKind]orderpay.ReconClass{
	sim.BillFaultFeeRate:           orderpay.ReconFeeMismatch,
	sim.BillFaultRateChange:        orderpay.ReconFeeRateChanged,
	sim.BillFaultRefundFeeKept:     orderpay.ReconRefundFeeNotReturned,
	sim.BillFaultRefundFeeGiven:    orderpay.ReconRefundFeeReturned,
	sim.BillFaultSettlementMissing: orderpay.ReconSettlementMissing,
	sim.BillFaultSettlementShort:   orderpay.ReconSettlementMismatch,
	sim.BillFaultBalanceBreak:      orderpay.ReconBalanceBreak,
}

// PlantedCount is one kind of planted fault: how many were planted, how many reconciliation
// found in their class with their exact amount, and the money of each.
type PlantedCount struct {
	Kind         string   `json:"kind"`
	Class        string   `json:"class"`
	Planted      int      `json:"planted"`
	Found        int      `json:"found"`
	PlantedFen   int64    `json:"planted_fen"`
	FoundFen     int64    `json:"found_fen"`
	MissedFaults []string `json:"missed,omitempty"`
}

// plantKey and itemKey key a planted fault and a report item alike: class, trade, refund and
// amount (a balance break without its trade: where the day's first movement is, is the bill's
// business).
func plantKey(channel, date string, p sim.PlantedFault) string {
	class := plantedClass[p.Kind]
	if class == orderpay.ReconBalanceBreak {
		return fmt.Sprintf("%s %s %s - - %d", channel, date, class, p.Amount)
	}
	return fmt.Sprintf("%s %s %s %s %s %d", channel, date, class, p.OutTradeNo, p.OutRefundNo, p.Amount)
}

func itemKey(channel, date, class, outTradeNo, outRefundNo string, diff int64) string {
	if class == string(orderpay.ReconBalanceBreak) {
		return fmt.Sprintf("%s %s %s - - %d", channel, date, class, diff)
	}
	return fmt.Sprintf("%s %s %s %s %s %d", channel, date, class, outTradeNo, outRefundNo, diff)
}

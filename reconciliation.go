package orderpay

import (
	"context"
	"time"
)

// Reconciliation against the channels' T+1 trade bills (docs/design.md §5, 支付对账, "the
// last line of defence"): every row of a day's bill is matched to our channel orders and
// refunds by number, and every paid attempt and settled refund of ours on that day is looked
// for in the bill. What does not agree is a difference, classed below; what reconciliation
// could repair or explain is marked so, and the rest is what an operator must look at.

// ChinaTime is the zone the channels' bills, their dates and their times are written in, as
// are order numbers: UTC+8, fixed, so nothing depends on the machine's tz database.
var ChinaTime = time.FixedZone("CST", 8*3600)

// BillDay is the bill date (yyyy-MM-dd, China time) that t falls on.
func BillDay(t time.Time) string { return t.In(ChinaTime).Format(time.DateOnly) }

// BillDayRange is the period [from, to) a bill date covers, in China time. A malformed date
// is EINVALID.
func BillDayRange(date string) (from, to time.Time, err error) {
	d, perr := time.ParseInLocation(time.DateOnly, date, ChinaTime)
	if perr != nil || d.Format(time.DateOnly) != date {
		return from, to, Errorf(EINVALID, "bill date %q is not yyyy-MM-dd", date)
	}
	return d, d.AddDate(0, 0, 1), nil
}

// BillRowKind says what one bill row records.
type BillRowKind string

const (
	BillPayment BillRowKind = "PAYMENT" // a trade paid in the period (Alipay 交易, WeChat SUCCESS)
	BillRefund  BillRowKind = "REFUND"  // a refund settled in the period (Alipay 退款, WeChat REFUND)
)

// BillRow is one detail row of a channel's trade bill, amounts in fen.
type BillRow struct {
	Kind       BillRowKind
	OutTradeNo string
	TradeNo    string
	// OutRefundNo is the refund's number (out_request_no / out_refund_no) on a refund row.
	OutRefundNo string
	// Amount is the trade's total on a payment row and the refund's amount on a refund
	// row, both positive.
	Amount int64
	// At is when the payment was made or the refund settled, as the bill says.
	At time.Time
	// Fee is the service fee the channel charged a payment (≥ 0), or the fee it gave back
	// with a refund (≥ 0), in fen, as the row says (WeChat 手续费, Alipay 服务费（元）).
	Fee int64
	// Rate is the rate the row says it was charged at, when the bill writes one (WeChat
	// 费率): RateKnown.
	Rate      FeeRate
	RateKnown bool
}

// Bill is one channel's trade bill of one day.
type Bill struct {
	Channel string
	Account string // the merchant account it is of (Alipay PID, WeChat Pay 商户号) when it says
	Date    string // yyyy-MM-dd, China time
	Rows    []BillRow
	// FeeTotal is the day's fees net of fees given back, as the bill's summary states it
	// (WeChat 手续费总金额, Alipay 汇总 服务费（元） made positive); NetTotal the summary's
	// net received (Alipay 实收净额（元）), when HasNetTotal. Both fen.
	FeeTotal    int64
	NetTotal    int64
	HasNetTotal bool
}

// MovementKind says what one movement of a merchant account's funds is for.
type MovementKind string

const (
	MovementPayment   MovementKind = "PAYMENT"    // a payment's money in (WeChat: net of its fee)
	MovementRefund    MovementKind = "REFUND"     // a refund's money out (WeChat: net of the fee given back)
	MovementFee       MovementKind = "FEE"        // a payment's service fee out (Alipay 收费)
	MovementFeeReturn MovementKind = "FEE_RETURN" // a refund's share of the fee back in (Alipay)
	MovementOther     MovementKind = "OTHER"      // anything else: a withdrawal, an adjustment
)

// AccountMovement is one row of a merchant account's bill: the WeChat Pay fund-flow bill of
// the basic account, or Alipay's account bill (signcustomer).
type AccountMovement struct {
	At   time.Time
	Kind MovementKind
	// OutTradeNo is the trade the movement is for, OutRefundNo the refund; empty when the
	// bill names none.
	OutTradeNo  string
	OutRefundNo string
	// Amount is signed fen: money in positive, money out negative. Balance is the account's
	// balance after it (WeChat 账户结余, Alipay 账户余额（元）).
	Amount  int64
	Balance int64
	// Ref is the channel's number of the movement (资金流水单号, 账务流水号); Type the bill's
	// own words for it (业务类型 / 业务名称), for the operator.
	Ref  string
	Type string
}

// AccountBill is one merchant account's movements on one day (yyyy-MM-dd, China time), in
// the bill's order, with the bill's own totals of money in and out (fen, both ≥ 0).
type AccountBill struct {
	Channel   string
	Account   string
	Date      string
	Movements []AccountMovement
	Income    int64
	Expense   int64
}

// AccountBillSource is a channel that serves the daily bill of its merchant account, like
// BillSource its trade bill (same timing and errors).
type AccountBillSource interface {
	DownloadAccountBill(ctx context.Context, date string) (*AccountBill, error)
}

// BillSource is a channel that serves its daily trade bills. Bills are T+1: the day's bill
// can be fetched from the next morning (Alipay after 10:00, WeChat from 09:00); earlier, or
// on any failure, DownloadBill returns an error (EUNAVAILABLE for "not out yet or the channel
// did not answer", EINVALID for a bad date) and reconciliation tries again later.
type BillSource interface {
	Name() string
	DownloadBill(ctx context.Context, date string) (*Bill, error)
}

// ReconClass is what reconciliation found about one bill row or one local record.
type ReconClass string

const (
	// ReconMatched: the bill and our records agree.
	ReconMatched ReconClass = "MATCHED"
	// ReconMissingLocal: the bill shows a payment our attempt does not have (a lost order,
	// 掉单): its notification and queries never got through. Repaired by a query.
	ReconMissingLocal ReconClass = "MISSING_LOCAL"
	// ReconMissingChannel: we hold an attempt as paid on that day and the channel's bill
	// does not have it, neither on that day nor the day before.
	ReconMissingChannel ReconClass = "MISSING_CHANNEL"
	// ReconAmountMismatch: the bill's amount of a payment is not our attempt's amount.
	ReconAmountMismatch ReconClass = "AMOUNT_MISMATCH"
	// ReconRefundMismatch: a refund the bill and our records do not agree on: settled in
	// the bill but not settled (or unknown, or of another amount) here, or settled here but
	// not in the bill.
	ReconRefundMismatch ReconClass = "REFUND_MISMATCH"

	// The fees layer: each bill row's fee against the one recorded (docs/reconciliation.md).

	// ReconFeeMismatch: a payment charged another fee than its contract's.
	ReconFeeMismatch ReconClass = "FEE_MISMATCH"
	// ReconFeeRateChanged: from some time of the day to its end, every payment was charged
	// at one other rate: the channel changed the account's rate mid-day.
	ReconFeeRateChanged ReconClass = "FEE_RATE_CHANGED"
	// ReconRefundFeeNotReturned: a refund that should give back a share of the fee gave none.
	ReconRefundFeeNotReturned ReconClass = "REFUND_FEE_NOT_RETURNED"
	// ReconRefundFeeReturned: a refund gave back fee the contract says refunds do not.
	ReconRefundFeeReturned ReconClass = "REFUND_FEE_RETURNED"
	// ReconRefundFeeMismatch: a refund gave back another share of the fee than expected.
	ReconRefundFeeMismatch ReconClass = "REFUND_FEE_MISMATCH"
	// ReconFeeSummaryMismatch: the bill's fee total is not the sum of its rows.
	ReconFeeSummaryMismatch ReconClass = "FEE_SUMMARY_MISMATCH"
	// ReconNotChecked: a layer that could not be checked (no contract in the channels file,
	// or the account bill could not be had).
	ReconNotChecked ReconClass = "NOT_CHECKED"

	// The settlement layer: the account's movements against the trades.

	// ReconSettlementMissing: a trade or refund of the bill with no movement of the account.
	ReconSettlementMissing ReconClass = "SETTLEMENT_MISSING"
	// ReconSettlementMismatch: its movements are of another amount (a settlement short).
	ReconSettlementMismatch ReconClass = "SETTLEMENT_MISMATCH"
	// ReconSettlementUnknown: a movement no trade of the bill explains.
	ReconSettlementUnknown ReconClass = "SETTLEMENT_UNKNOWN"
	// ReconBalanceBreak: the balance does not chain: the day does not open at the previous
	// day's close, or a row's balance is not the one before plus its amount.
	ReconBalanceBreak ReconClass = "BALANCE_BREAK"
)

// ReconLayer is one of reconciliation's three layers.
type ReconLayer string

const (
	LayerTrades     ReconLayer = "TRADES"     // trades and refunds, by number and amount
	LayerFees       ReconLayer = "FEES"       // each row's fee against the recorded one, and the totals
	LayerSettlement ReconLayer = "SETTLEMENT" // the account's movements and balance against the trades
)

// ReconLayers lists the layers in order.
var ReconLayers = []ReconLayer{LayerTrades, LayerFees, LayerSettlement}

// LayerOf is the layer a class belongs to.
func LayerOf(c ReconClass) ReconLayer {
	switch c {
	case ReconFeeMismatch, ReconFeeRateChanged, ReconRefundFeeNotReturned, ReconRefundFeeReturned, ReconRefundFeeMismatch,
		ReconFeeSummaryMismatch:
		return LayerFees
	case ReconSettlementMissing, ReconSettlementMismatch, ReconSettlementUnknown, ReconBalanceBreak:
		return LayerSettlement
	}
	return LayerTrades
}

// ReconResolution says why a difference is explained, or that it is not.
type ReconResolution string

const (
	// ResolutionNone: a matched item; nothing to explain.
	ResolutionNone ReconResolution = ""
	// ResolutionRepairedPaid: missing locally; reconciliation's own query confirmed the
	// payment and it was applied: the attempt is SUCCESS and its order paid.
	ResolutionRepairedPaid ReconResolution = "REPAIRED_PAID"
	// ResolutionRepairedRefund: missing locally; the query confirmed the payment, but the
	// payment could not take it (its order was closed, or another attempt had paid it), so
	// it was recorded and a refund of it created.
	ResolutionRepairedRefund ReconResolution = "REPAIRED_REFUND"
	// ResolutionRefundSettled: a refund settled in the bill that we still held in flight;
	// reconciliation queried it and it is now SUCCESS here too.
	ResolutionRefundSettled ReconResolution = "REFUND_SETTLED"
	// ResolutionRefundInFlight: a refund settled in the bill that we hold as sent and not
	// final (PENDING or PROCESSING, same number, same amount): the refund worker queries it
	// until it is final. The bill is ahead of us, not in disagreement.
	ResolutionRefundInFlight ReconResolution = "REFUND_IN_FLIGHT"
	// ResolutionFollowsPayment: a refund's share of the fee differs from ours because its
	// payment was charged another fee in the same bill, and the channel gave back a share of
	// what it charged: the difference is the payment's item, not counted again.
	ResolutionFollowsPayment ReconResolution = "FOLLOWS_PAYMENT"
	// ResolutionUnexplained: a difference reconciliation could neither repair nor explain:
	// an operator must look at it.
	ResolutionUnexplained ReconResolution = "UNEXPLAINED"
)

// Explained reports whether a difference with this resolution needs no operator.
func (r ReconResolution) Explained() bool { return r != ResolutionUnexplained }

// ReconItem is one line of a reconciliation report.
type ReconItem struct {
	// Layer is the layer the item belongs to (LayerOf its class; a NOT_CHECKED item says
	// which layer it could not check).
	Layer       ReconLayer
	Class       ReconClass
	Resolution  ReconResolution
	Kind        BillRowKind // a payment or a refund
	OutTradeNo  string
	OutRefundNo string
	BillAmount  int64  // fen; 0 when the bill has no row
	LocalAmount int64  // fen; 0 when we have no record
	InBill      bool   // the item comes from a row of this day's bill
	Detail      string // what was found and done, for the operator
	// Difference is the money the item is about, signed, in fen: the bill's figure less ours
	// (a fee charged above the contract is positive, a fee share not given back negative, a
	// settlement short negative).
	Difference int64
}

// Reconciliation is the stored report of one reconciliation of one channel's bill of one day.
type Reconciliation struct {
	ID         int64 // assigned by the store
	Channel    string
	Date       string // the bill date, yyyy-MM-dd China time
	StartedAt  time.Time
	FinishedAt time.Time
	BillRows   int // detail rows in the bill
	// Counts is the number of items per class; Unexplained the number of items whose
	// resolution is ResolutionUnexplained.
	Counts      map[ReconClass]int
	Unexplained int
	// Account is the merchant account the bills are of. Layers sums each layer's items
	// (Tally); Figures are the day's totals the fees and settlement layers compared.
	Account string
	Layers  map[ReconLayer]LayerSummary
	Figures ReconFigures
	// Items lists every difference, repaired, explained or not, and every matched row;
	// Reconciliations (the list) leaves it empty.
	Items []ReconItem
}

// LayerSummary is one layer of a report: its differences (items not MATCHED), how many of
// them nothing explains, and the money those are about (the sum of their differences'
// absolute values, fen).
type LayerSummary struct {
	Differences       int   `json:"differences"`
	Unexplained       int   `json:"unexplained"`
	UnexplainedAmount int64 `json:"unexplained_amount"`
}

// ReconFigures are the day's totals behind the fees and settlement layers, fen.
type ReconFigures struct {
	// FeesChecked: the account has a contract, so fees and settlement were compared.
	FeesChecked bool `json:"fees_checked"`
	// Paid and Refunded are the bill's payments and refunds; FeeExpected the fees we expect
	// net of shares back, FeeBill the bill rows' sum of the same, FeeSummary the bill's own
	// total.
	Paid        int64 `json:"paid"`
	Refunded    int64 `json:"refunded"`
	FeeExpected int64 `json:"fee_expected"`
	FeeBill     int64 `json:"fee_bill"`
	FeeSummary  int64 `json:"fee_summary"`
	// NetExpected is what should have reached the account: paid − fees − refunded + fees
	// given back, by our records; NetBill what the account bill's trade movements add up to.
	SettlementChecked bool  `json:"settlement_checked"`
	NetExpected       int64 `json:"net_expected"`
	NetBill           int64 `json:"net_bill"`
	Movements         int   `json:"movements"`
	// Opening and Closing are the account's balance at the start and end of the day
	// (BalanceKnown); PrevClosing the close of PrevDate, the last earlier day known
	// (PrevKnown), which Opening must equal.
	BalanceKnown bool   `json:"balance_known"`
	Opening      int64  `json:"opening"`
	Closing      int64  `json:"closing"`
	PrevKnown    bool   `json:"prev_known"`
	PrevDate     string `json:"prev_date,omitempty"`
	PrevClosing  int64  `json:"prev_closing"`
}

// Tally fills Counts, Unexplained and Layers from Items.
func (r *Reconciliation) Tally() {
	r.Counts, r.Unexplained = map[ReconClass]int{}, 0
	r.Layers = map[ReconLayer]LayerSummary{}
	for _, l := range ReconLayers {
		r.Layers[l] = LayerSummary{}
	}
	for _, it := range r.Items {
		r.Counts[it.Class]++
		layer := it.Layer
		if layer == "" {
			layer = LayerOf(it.Class)
		}
		sum := r.Layers[layer]
		if it.Class != ReconMatched {
			sum.Differences++
		}
		if !it.Resolution.Explained() {
			r.Unexplained++
			sum.Unexplained++
			sum.UnexplainedAmount += max(it.Difference, -it.Difference)
		}
		r.Layers[layer] = sum
	}
}

// Explained reports whether every layer of the report is explained: no item is
// UNEXPLAINED (a layer that could not be checked is one, NOT_CHECKED).
func (r *Reconciliation) Explained() bool { return r.Unexplained == 0 }

// ReconciliationStore is what reconciliation needs of the database besides Reader: the
// day's paid attempts and settled refunds of a channel, and its reports.
type ReconciliationStore interface {
	// PaidChannelOrders lists the SUCCESS attempts of channel whose PaidAt is in [from, to).
	PaidChannelOrders(ctx context.Context, channel string, from, to time.Time) ([]ChannelOrder, error)
	// SettledChannelRefunds lists the SUCCESS refunds of channel whose RefundedAt is in
	// [from, to).
	SettledChannelRefunds(ctx context.Context, channel string, from, to time.Time) ([]ChannelRefund, error)
	// SaveReconciliation stores a report with its items and sets its ID.
	SaveReconciliation(ctx context.Context, r *Reconciliation) error
	// Reconciliation reads one report with its items (ENOTFOUND if none).
	Reconciliation(ctx context.Context, id int64) (*Reconciliation, error)
	// Reconciliations lists reports, newest first, without their items; channel and date
	// filter when not empty.
	Reconciliations(ctx context.Context, channel, date string, limit int) ([]Reconciliation, error)
	// LastClosingBalance is the closing balance of the latest report of channel for a day
	// before date whose balance is known (Figures.BalanceKnown), with that day; ok is false
	// when there is none.
	LastClosingBalance(ctx context.Context, channel, date string) (day string, balance int64, ok bool, err error)
}

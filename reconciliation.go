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
}

// Bill is one channel's trade bill of one day.
type Bill struct {
	Channel string
	Date    string // yyyy-MM-dd, China time
	Rows    []BillRow
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
)

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
	// ResolutionUnexplained: a difference reconciliation could neither repair nor explain:
	// an operator must look at it.
	ResolutionUnexplained ReconResolution = "UNEXPLAINED"
)

// Explained reports whether a difference with this resolution needs no operator.
func (r ReconResolution) Explained() bool { return r != ResolutionUnexplained }

// ReconItem is one line of a reconciliation report.
type ReconItem struct {
	Class       ReconClass
	Resolution  ReconResolution
	Kind        BillRowKind // a payment or a refund
	OutTradeNo  string
	OutRefundNo string
	BillAmount  int64  // fen; 0 when the bill has no row
	LocalAmount int64  // fen; 0 when we have no record
	InBill      bool   // the item comes from a row of this day's bill
	Detail      string // what was found and done, for the operator
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
	// Items lists every difference, repaired, explained or not, and every matched row;
	// Reconciliations (the list) leaves it empty.
	Items []ReconItem
}

// Tally fills Counts and Unexplained from Items.
func (r *Reconciliation) Tally() {
	r.Counts, r.Unexplained = map[ReconClass]int{}, 0
	for _, it := range r.Items {
		r.Counts[it.Class]++
		if !it.Resolution.Explained() {
			r.Unexplained++
		}
	}
}

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
}

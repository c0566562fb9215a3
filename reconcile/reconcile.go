// Package reconcile matches the channels' T+1 trade bills against the payment center's
// records (docs/design.md §5, 支付对账): "the last line of defence". Every bill row is
// matched by its number to our channel order or refund; every attempt we hold as paid, and
// every refund we hold as settled, on that day is looked for in the bill. Each is classed
// (orderpay.ReconClass), repaired where the payment center's own paths can repair it, and
// the report stored.
//
// What counts as explained (orderpay.ReconResolution), precisely:
//
//   - MATCHED: the bill and our records agree (same number, same amount, final on both
//     sides). A paid attempt or settled refund of ours that is not in this day's bill but is
//     in the previous day's is MATCHED too: the channel dated it before midnight (paid
//     23:59:59) and we after (our time is when we learned of it, never earlier than the
//     channel's), so it is not a difference. Bill rows are matched by number whatever day
//     we dated them, so a row never becomes a difference for its date alone.
//   - MISSING_LOCAL is explained only once repaired: reconciliation queried the channel
//     (payment.Service.QueryAttempt, the same path every active query takes), the verified
//     answer said paid, and it was applied: the attempt is SUCCESS and its order paid
//     (REPAIRED_PAID), or, if the payment could not take it (its order was closed, or
//     another attempt paid it), the money is being refunded (REPAIRED_REFUND). The bill
//     alone is never taken as proof of payment: its file is unsigned.
//   - REFUND_MISMATCH of a refund the bill shows settled and we hold as sent but not final
//     (same number, same trade, same amount) is explained: reconciliation works it at once
//     (payment.Service.SettleRefund) and it is REFUND_SETTLED, or, if the channel still
//     gives no final answer, REFUND_IN_FLIGHT: the refund worker keeps querying it.
//   - Everything else is UNEXPLAINED: a payment we cannot find or the query does not
//     confirm, an amount that differs, a paid attempt or settled refund the channel's bills
//     do not have (MISSING_CHANNEL, REFUND_MISMATCH), a refund the bill settled that we
//     never sent or hold as failed.
//
// "Unexplained differences" is the count of UNEXPLAINED items; after a healthy day it is 0.
package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"orderpay"
)

// Store is what reconciliation reads and writes.
type Store interface {
	orderpay.Reader
	orderpay.ReconciliationStore
}

// Payments is the payment center's repair paths (*payment.Service is one).
type Payments interface {
	// QueryAttempt queries an attempt and applies a verified payment through the full
	// success path (or refunds it if the payment cannot take it).
	QueryAttempt(ctx context.Context, outTradeNo, trigger string) (orderpay.Outcome, error)
	// SettleRefund works one refund now and reports its status afterwards.
	SettleRefund(ctx context.Context, outRefundNo string) (orderpay.ChannelRefundStatus, error)
}

// Config configures a Reconciler.
type Config struct {
	Store    Store                          // required
	Bills    map[string]orderpay.BillSource // required: by channel name
	Payments Payments                       // required
	// Fees are the accounts' contracts: a channel without one has its fees and settlement
	// layers NOT_CHECKED.
	Fees orderpay.FeeSchedule
	// Clock stamps reports. Defaults to the system clock.
	Clock orderpay.Clock
	// Observer hears each run's differences by class, for metrics. Defaults to
	// orderpay.NopObserver.
	Observer orderpay.Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Reconciler runs reconciliations. It is safe for concurrent use; two runs of the same day
// repair through conditional updates and each stores its own report.
type Reconciler struct {
	cfg Config
	log *slog.Logger
}

// New returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("reconcile: Config.Store is required")
	case len(cfg.Bills) == 0:
		return nil, errors.New("reconcile: Config.Bills is required")
	case cfg.Payments == nil:
		return nil, errors.New("reconcile: Config.Payments is required")
	}
	cfg.Clock = cmp.Or[orderpay.Clock](cfg.Clock, orderpay.SystemClock{})
	cfg.Observer = cmp.Or[orderpay.Observer](cfg.Observer, orderpay.NopObserver{})
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Reconciler{cfg: cfg, log: cfg.Logger.With("component", "reconcile")}, nil
}

// Channels lists the channels it can reconcile, Alipay first.
func (r *Reconciler) Channels() []string {
	var out []string
	for _, n := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if _, ok := r.cfg.Bills[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// differenceClasses are the classes that are differences: every class but MATCHED.
var differenceClasses = []orderpay.ReconClass{orderpay.ReconMissingLocal, orderpay.ReconMissingChannel, orderpay.ReconAmountMismatch,
	orderpay.ReconRefundMismatch, orderpay.ReconFeeMismatch, orderpay.ReconFeeRateChanged, orderpay.ReconRefundFeeNotReturned,
	orderpay.ReconRefundFeeReturned, orderpay.ReconRefundFeeMismatch, orderpay.ReconFeeSummaryMismatch, orderpay.ReconNotChecked,
	orderpay.ReconSettlementMissing, orderpay.ReconSettlementMismatch, orderpay.ReconSettlementUnknown, orderpay.ReconBalanceBreak}

// trigger names reconciliation's queries for the observer and the history.
const trigger = "reconcile"

// Run reconciles one channel's bill of one day (yyyy-MM-dd, China time), stores the report
// and returns it. A bill that cannot be had (not out yet, the channel did not answer) is an
// error and stores nothing: nothing was compared.
func (r *Reconciler) Run(ctx context.Context, channel, date string) (*orderpay.Reconciliation, error) {
	src, ok := r.cfg.Bills[channel]
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINVALID, "channel must be one of %v", r.Channels())
	}
	from, to, err := orderpay.BillDayRange(date)
	if err != nil {
		return nil, err
	}
	rep := &orderpay.Reconciliation{Channel: channel, Date: date, StartedAt: orderpay.Now(r.cfg.Clock)}
	bill, err := src.DownloadBill(ctx, date)
	if err != nil {
		return nil, err
	}
	rep.BillRows = len(bill.Rows)
	trades, refunds := map[string]bool{}, map[string]bool{}
	for _, row := range bill.Rows {
		var it orderpay.ReconItem
		if row.Kind == orderpay.BillRefund {
			refunds[row.OutRefundNo] = true
			it, err = r.refundRow(ctx, row)
		} else {
			trades[row.OutTradeNo] = true
			it, err = r.paymentRow(ctx, channel, row)
		}
		if err != nil {
			return nil, err
		}
		rep.Items = append(rep.Items, it)
	}
	local, err := r.localOnly(ctx, channel, date, from, to, trades, refunds)
	if err != nil {
		return nil, err
	}
	rep.Items = append(rep.Items, local...)
	for i := range rep.Items {
		it := &rep.Items[i]
		it.Layer = orderpay.LayerTrades
		if it.Class != orderpay.ReconMatched {
			it.Difference = it.BillAmount - it.LocalAmount
		}
	}
	rep.Account = bill.Account
	if rule, ok := r.cfg.Fees.Rule(channel); !ok {
		why := "the channels file states no fee contract for " + channel
		rep.Items = append(rep.Items, notChecked(orderpay.LayerFees, why), notChecked(orderpay.LayerSettlement, why))
	} else {
		rep.Figures.FeesChecked = true
		fees, err := r.feeLayer(ctx, bill, rule, &rep.Figures)
		if err != nil {
			return nil, err
		}
		settlement, err := r.settlementLayer(ctx, channel, date, bill, &rep.Figures)
		if err != nil {
			return nil, err
		}
		rep.Items = append(append(rep.Items, fees...), settlement...)
	}
	rep.Tally()
	rep.FinishedAt = orderpay.Now(r.cfg.Clock)
	if err := r.cfg.Store.SaveReconciliation(ctx, rep); err != nil {
		return nil, err
	}
	// Once per class and stored report, zeros included, so that an observer hears every
	// run; MATCHED is no difference and is not reported.
	for _, class := range differenceClasses {
		r.cfg.Observer.ReconciliationDifferences(channel, string(class), rep.Counts[class])
	}
	r.cfg.Observer.ReconciliationStored(channel, date, rep.Layers)
	log := r.log.With("channel", channel, "date", date, "id", rep.ID, "bill_rows", rep.BillRows, "counts", rep.Counts)
	if rep.Unexplained > 0 {
		log.Error("reconciliation found differences it could not explain: an operator must look", "unexplained", rep.Unexplained)
	} else {
		log.Info("reconciliation done: every difference explained")
	}
	return rep, nil
}

// paymentRow classes a bill row that says a trade was paid.
func (r *Reconciler) paymentRow(ctx context.Context, channel string, row orderpay.BillRow) (orderpay.ReconItem, error) {
	it := orderpay.ReconItem{Kind: orderpay.BillPayment, OutTradeNo: row.OutTradeNo, BillAmount: row.Amount, InBill: true,
		Class: orderpay.ReconMatched}
	co, err := r.cfg.Store.ChannelOrder(ctx, row.OutTradeNo)
	switch {
	case orderpay.ErrorCode(err) == orderpay.ENOTFOUND:
		it.Class, it.Resolution = orderpay.ReconMissingLocal, orderpay.ResolutionUnexplained
		it.Detail = "paid at the channel; we have no attempt under this number"
		return it, nil
	case err != nil:
		return it, err
	}
	it.LocalAmount = co.Amount
	switch {
	case co.Channel != channel:
		it.Class, it.Resolution = orderpay.ReconMissingLocal, orderpay.ResolutionUnexplained
		it.Detail = fmt.Sprintf("our attempt under this number is at %s", co.Channel)
	case co.Amount != row.Amount:
		// Never repaired: a payment of another amount is not this attempt's payment (the
		// query path refuses it as well), and the money must be looked at by hand.
		it.Class, it.Resolution = orderpay.ReconAmountMismatch, orderpay.ResolutionUnexplained
		it.Detail = fmt.Sprintf("the bill says %s yuan paid, our attempt (%s) is for %s", orderpay.FormatYuan(row.Amount), co.Status,
			orderpay.FormatYuan(co.Amount))
	case co.Status == orderpay.ChannelOrderSuccess:
		// Matched.
	default:
		it.Class = orderpay.ReconMissingLocal
		it.Resolution, it.Detail = r.repairPayment(ctx, co)
	}
	return it, nil
}

// repairPayment is the lost order's repair (掉单): query the channel and apply what
// it verifiably says, through the payment center's own path.
func (r *Reconciler) repairPayment(ctx context.Context, co *orderpay.ChannelOrder) (orderpay.ReconResolution, string) {
	before := co.Status
	outcome, qerr := r.cfg.Payments.QueryAttempt(ctx, co.OutTradeNo, trigger)
	detail := fmt.Sprintf("paid at the channel, %s here; the query said %s", before, outcome)
	if qerr != nil {
		detail += ": " + orderpay.ErrorMessage(qerr)
	}
	cur, err := r.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
	if err != nil || cur.Status != orderpay.ChannelOrderSuccess {
		return orderpay.ResolutionUnexplained, detail + "; not repaired"
	}
	refunds, err := r.cfg.Store.ChannelRefunds(ctx, co.OutTradeNo)
	if err == nil && len(refunds) > 0 {
		r.log.Warn("lost payment found by reconciliation: its order could not take it, refunding", "out_trade_no", co.OutTradeNo, "was", before)
		return orderpay.ResolutionRepairedRefund, detail + "; applied, and refunded (" + refunds[0].Reason + ")"
	}
	r.log.Warn("lost payment found by reconciliation: marked paid", "out_trade_no", co.OutTradeNo, "was", before)
	return orderpay.ResolutionRepairedPaid, detail + "; applied: paid"
}

// refundRow classes a bill row that says a refund settled.
func (r *Reconciler) refundRow(ctx context.Context, row orderpay.BillRow) (orderpay.ReconItem, error) {
	it := orderpay.ReconItem{Kind: orderpay.BillRefund, OutTradeNo: row.OutTradeNo, OutRefundNo: row.OutRefundNo,
		BillAmount: row.Amount, InBill: true, Class: orderpay.ReconMatched}
	ref, err := r.cfg.Store.ChannelRefund(ctx, row.OutRefundNo)
	switch {
	case orderpay.ErrorCode(err) == orderpay.ENOTFOUND:
		it.Class, it.Resolution = orderpay.ReconRefundMismatch, orderpay.ResolutionUnexplained
		it.Detail = "settled at the channel; we never sent a refund under this number"
		return it, nil
	case err != nil:
		return it, err
	}
	it.LocalAmount = ref.Amount
	switch {
	case ref.OutTradeNo != row.OutTradeNo || ref.Amount != row.Amount:
		it.Class, it.Resolution = orderpay.ReconRefundMismatch, orderpay.ResolutionUnexplained
		it.Detail = fmt.Sprintf("the bill refunds %s yuan of %s; ours is %s yuan of %s (%s)", orderpay.FormatYuan(row.Amount), row.OutTradeNo,
			orderpay.FormatYuan(ref.Amount), ref.OutTradeNo, ref.Status)
	case ref.Status == orderpay.ChannelRefundSuccess:
		// Matched.
	case ref.Status == orderpay.ChannelRefundResolved:
		// Paid back outside the channel by an operator, and by the channel too.
		it.Class, it.Resolution = orderpay.ReconRefundMismatch, orderpay.ResolutionUnexplained
		it.Detail = fmt.Sprintf("settled at the channel, and also paid back outside it by %s (reference %s): the buyer got it twice",
			ref.ResolvedBy, ref.ResolvedRef)
	default:
		// Sent, and the bill is ahead of us: ask now.
		it.Class = orderpay.ReconRefundMismatch
		status, err := r.cfg.Payments.SettleRefund(ctx, ref.OutRefundNo)
		it.Detail = fmt.Sprintf("settled at the channel, %s here; now %s", ref.Status, status)
		switch status {
		case orderpay.ChannelRefundSuccess:
			it.Resolution = orderpay.ResolutionRefundSettled
		case orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing:
			it.Resolution = orderpay.ResolutionRefundInFlight
		default:
			it.Resolution = orderpay.ResolutionUnexplained
		}
		if err != nil {
			it.Detail += ": " + orderpay.ErrorMessage(err)
		}
	}
	return it, nil
}

// localOnly classes what we hold as paid or settled on the day but the bill lacks. The
// previous day's bill is fetched only if there is such a thing, to tell a day boundary (the
// channel dated it before midnight, we after) from a real difference.
func (r *Reconciler) localOnly(ctx context.Context, channel, date string, from, to time.Time, trades, refunds map[string]bool) ([]orderpay.ReconItem, error) {
	paid, err := r.cfg.Store.PaidChannelOrders(ctx, channel, from, to)
	if err != nil {
		return nil, err
	}
	settled, err := r.cfg.Store.SettledChannelRefunds(ctx, channel, from, to)
	if err != nil {
		return nil, err
	}
	var items []orderpay.ReconItem
	for _, co := range paid {
		if !trades[co.OutTradeNo] {
			items = append(items, orderpay.ReconItem{Kind: orderpay.BillPayment, OutTradeNo: co.OutTradeNo, LocalAmount: co.Amount})
		}
	}
	for _, ref := range settled {
		if !refunds[ref.OutRefundNo] {
			items = append(items, orderpay.ReconItem{Kind: orderpay.BillRefund, OutTradeNo: ref.OutTradeNo, OutRefundNo: ref.OutRefundNo,
				LocalAmount: ref.Amount})
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	prevDate := orderpay.BillDay(from.AddDate(0, 0, -1))
	prev := map[string]orderpay.BillRow{}
	prevBill, prevErr := r.cfg.Bills[channel].DownloadBill(ctx, prevDate)
	if prevErr == nil {
		for _, row := range prevBill.Rows {
			prev[string(row.Kind)+":"+row.OutTradeNo+":"+row.OutRefundNo] = row
		}
	}
	for i := range items {
		it := &items[i]
		if row, ok := prev[string(it.Kind)+":"+it.OutTradeNo+":"+it.OutRefundNo]; ok && row.Amount == it.LocalAmount {
			it.Class, it.BillAmount = orderpay.ReconMatched, row.Amount
			it.Detail = fmt.Sprintf("dated %s by us; in the bill of %s (%s)", date, prevDate, row.At.In(orderpay.ChinaTime).Format(time.DateTime))
			continue
		}
		it.Resolution = orderpay.ResolutionUnexplained
		if it.Kind == orderpay.BillRefund {
			it.Class = orderpay.ReconRefundMismatch
			it.Detail = "settled here; in neither this bill nor the previous day's"
		} else {
			it.Class = orderpay.ReconMissingChannel
			// The query adds the channel's present word for the operator; on a SUCCESS
			// attempt it changes nothing.
			outcome, qerr := r.cfg.Payments.QueryAttempt(ctx, it.OutTradeNo, trigger)
			it.Detail = fmt.Sprintf("paid here; in neither this bill nor the previous day's; the query says %s", outcome)
			if qerr != nil {
				it.Detail += ": " + orderpay.ErrorMessage(qerr)
			}
		}
		if prevErr != nil {
			it.Detail += "; the previous day's bill could not be had: " + orderpay.ErrorMessage(prevErr)
		}
	}
	return items, nil
}

// Report reads one stored report with its items.
func (r *Reconciler) Report(ctx context.Context, id int64) (*orderpay.Reconciliation, error) {
	return r.cfg.Store.Reconciliation(ctx, id)
}

// Reports lists stored reports, newest first, without items; channel and date filter when
// not empty.
func (r *Reconciler) Reports(ctx context.Context, channel, date string, limit int) ([]orderpay.Reconciliation, error) {
	return r.cfg.Store.Reconciliations(ctx, channel, date, limit)
}

// Yesterday is the bill date the day before now, China time: the one a run today can have.
func Yesterday(now time.Time) string {
	return orderpay.BillDay(now.In(orderpay.ChinaTime).AddDate(0, 0, -1))
}

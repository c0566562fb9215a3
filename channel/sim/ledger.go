package sim

import (
	"cmp"
	"slices"
	"time"

	"orderpay"
)

// LedgerEntry is one trade as the channel sees it: the truth about the money that the chaos
// auditor compares orderpay against. Only trades that exist at the channel appear, which for
// Alipay means trades whose QR code was scanned (docs/channels.md §A3), and for WeChat Pay every
// prepaid order, paid or not (§B1).
type LedgerEntry struct {
	Channel string
	// Method is the way the trade was paid: MethodQR for a precreated code or a Native
	// order, MethodBarcode for a payment code a till scanned, and so on.
	Method orderpay.PayMethod
	// AppID is the Alipay app the trade was made under (the merchant's main app, or its
	// in-app app); "" for WeChat Pay.
	AppID      string
	OutTradeNo string
	TradeNo    string
	// Status is the channel's own trade status, e.g. WAIT_BUYER_PAY, TRADE_SUCCESS,
	// TRADE_CLOSED for Alipay; the trade_state NOTPAY, SUCCESS, REFUND, CLOSED for WeChat.
	Status   string
	Amount   int64     // the trade's total, fen
	Refunded int64     // fen refunded so far: the sum of the Refunds that are SUCCESS
	PaidAt   time.Time // when the buyer paid; zero if never paid
	// Refunds is every refund the channel accepted for the trade, in acceptance order
	// (Alipay's include the one alipay.trade.cancel makes of a paid trade); nil if none. A
	// refund the channel refused (for balance, say) is not one.
	Refunds []LedgerRefund

	seq int64 // creation order, for a stable listing
}

// Refund statuses in the ledger (LedgerRefund.Status): WeChat Pay's own refund statuses.
// Alipay refunds are only ever LedgerRefundSuccess or LedgerRefundProcessing: Alipay
// refuses a refund at once or settles it.
const (
	// LedgerRefundSuccess: the money went back to the buyer.
	LedgerRefundSuccess = "SUCCESS"
	// LedgerRefundProcessing: accepted, not settled yet (Alipay: fund_change=N).
	LedgerRefundProcessing = "PROCESSING"
	// LedgerRefundAbnormal: ended without the money reaching the buyer (WeChat ABNORMAL).
	LedgerRefundAbnormal = "ABNORMAL"
	// LedgerRefundClosed: closed by the channel; no money moved (WeChat CLOSED).
	LedgerRefundClosed = "CLOSED"
)

// LedgerRefund is one refund the channel accepted, as it stands.
type LedgerRefund struct {
	OutRefundNo string    // WeChat out_refund_no, Alipay out_request_no
	Amount      int64     // fen
	Status      string    // a LedgerRefund* status
	SettledAt   time.Time // when the money went back; zero unless Status is SUCCESS
}

// sortLedger orders entries by creation.
func sortLedger(entries []LedgerEntry) {
	slices.SortFunc(entries, func(a, b LedgerEntry) int { return cmp.Compare(a.seq, b.seq) })
}

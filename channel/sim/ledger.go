package sim

import (
	"cmp"
	"slices"
	"time"
)

// LedgerEntry is one trade as the channel sees it: the truth about the money that the chaos
// auditor compares orderpay against. Only trades that exist at the channel appear, which for
// Alipay means trades whose QR code was scanned (protocols §A3), and for WeChat Pay every
// prepaid order, paid or not (§B1).
type LedgerEntry struct {
	Channel    string
	OutTradeNo string
	TradeNo    string
	// Status is the channel's own trade status, e.g. WAIT_BUYER_PAY, TRADE_SUCCESS,
	// TRADE_CLOSED for Alipay; the trade_state NOTPAY, SUCCESS, REFUND, CLOSED for WeChat.
	Status   string
	Amount   int64     // the trade's total, fen
	Refunded int64     // fen refunded so far by refunds that have settled (SUCCESS)
	PaidAt   time.Time // when the buyer paid; zero if never paid

	seq int64 // creation order, for a stable listing
}

// sortLedger orders entries by creation.
func sortLedger(entries []LedgerEntry) {
	slices.SortFunc(entries, func(a, b LedgerEntry) int { return cmp.Compare(a.seq, b.seq) })
}

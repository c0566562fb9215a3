package alipay

import (
	"context"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// Close closes a trade that is waiting for payment (alipay.trade.close).
//
// Outcomes (docs/channels.md §A3, §C):
//   - a verified 10000 for this out_trade_no is Closed: the trade was waiting for the buyer
//     and is now closed, never paid;
//   - 40004 ACQ.TRADE_NOT_EXIST is NotPaid: nobody has scanned the code (or paid the pc,
//     wap or app order signed for the trade), so there is no trade to close yet and the
//     close changed nothing. What stops a later payment is the deadline passed at precreate
//     or signed into the order (time_expire), not this call; after that deadline, or to
//     stop the code at once, use Cancel;
//   - 40004 ACQ.TRADE_STATUS_ERROR is Unknown: the trade is paid, refunded or already
//     closed, and a close answer alone never decides which; the caller queries;
//   - everything else (transport errors and timeouts, non-2xx, unsigned or unverifiable
//     answers, 20000, ACQ.SYSTEM_ERROR, 40005, refusals of the call itself) is Unknown.
//
// An in-app adapter whose app does not know the trade asks the main app (inapp.go).
func (c *Channel) Close(ctx context.Context, outTradeNo string) orderpay.CloseResult {
	res, notExist := c.close(ctx, outTradeNo)
	if notExist && c.main != nil {
		if other, otherNotExist := c.main.close(ctx, outTradeNo); !otherNotExist {
			other.Detail = mainAppSays + other.Detail
			return other
		}
	}
	return res
}

// close is Close of this app alone, and whether the answer was ACQ.TRADE_NOT_EXIST.
func (c *Channel) close(ctx context.Context, outTradeNo string) (orderpay.CloseResult, bool) {
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeCloseRsp, error) {
		return c.client.TradeClose(ctx, sdk.TradeClose{OutTradeNo: outTradeNo})
	})
	res := orderpay.CloseResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res, false
	}
	res.Detail = describeCode(rsp.Error)

	switch {
	case rsp.Code == sdk.CodeSuccess:
		if rsp.OutTradeNo != "" && rsp.OutTradeNo != outTradeNo {
			res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
			return res, false
		}
		res.Outcome = orderpay.OutcomeClosed
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST":
		res.Outcome = orderpay.OutcomeNotPaid
		res.Detail += ": not scanned, nothing to close; only the precreate deadline stops a later scan"
		return res, true
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_STATUS_ERROR":
		res.Detail += ": paid, refunded or already closed; query the trade"
	}
	return res, false
}

// CancelResult is an alipay.trade.cancel answer.
//
// Outcome is one of:
//   - Closed (action=close): the trade is closed and was never paid, and nothing can be
//     paid under this out_trade_no any more.
//   - RefundPending (action=refund): the buyer HAD paid, and the cancel refunded the full
//     amount. The payment must be recorded as paid (and refunded), never as "not paid".
//     The refund is the one numbered OutRefundNo (the out_trade_no, §A3); confirm that the
//     money moved with QueryRefund(outTradeNo, OutRefundNo), as for any refund.
//   - NotPaid: the gateway answered ACQ.TRADE_NOT_EXIST: no trade exists yet (the
//     simulator answers action=close instead; the real answer is unverified).
//   - Unknown: retry_flag=Y (cancel again), or no definite answer; cancel again or query.
type CancelResult struct {
	Outcome     orderpay.Outcome
	TradeNo     string
	OutRefundNo string // set with RefundPending: the number of the cancel's refund
	Detail      string
	Raw         string
}

// Cancel cancels a trade whose payment result is unknown (alipay.trade.cancel): afterwards
// nothing can be paid under outTradeNo, and any payment made is refunded in full. Unlike
// Close it also stops a code nobody has scanned yet, and it works on a paid trade. It is
// not part of orderpay.Channel. A barcode trade is ended by Reverse (barcode.go), the same
// call read as an orderpay.Reverser.
//
// Outcomes (docs/channels.md §A3, §A4, §C): see CancelResult. retry_flag=Y is Unknown whatever
// the code; a verified 10000 with retry_flag other than Y maps action=close to Closed and
// action=refund to RefundPending; ACQ.TRADE_NOT_EXIST is NotPaid; everything else
// (including ACQ.TRADE_STATUS_ERROR, a trade that cannot be cancelled because it has
// refunds or is finished) is Unknown.
func (c *Channel) Cancel(ctx context.Context, outTradeNo string) CancelResult {
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeCancelRsp, error) {
		return c.client.TradeCancel(ctx, sdk.TradeCancel{OutTradeNo: outTradeNo})
	})
	res := CancelResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res
	}
	res.Detail = describeCode(rsp.Error)
	if rsp.Action != "" {
		res.Detail += " action=" + rsp.Action
	}
	if rsp.RetryFlag != "" {
		res.Detail += " retry_flag=" + rsp.RetryFlag
	}
	if rsp.RetryFlag == "Y" {
		// "需要重试": the cancel did not complete, whatever the code says.
		return res
	}

	switch {
	case rsp.Code == sdk.CodeSuccess:
		if rsp.OutTradeNo != "" && rsp.OutTradeNo != outTradeNo {
			res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
			return res
		}
		res.TradeNo = rsp.TradeNo
		switch rsp.Action {
		case "close":
			res.Outcome = orderpay.OutcomeClosed
		case "refund":
			res.Outcome = orderpay.OutcomeRefundPending
			res.OutRefundNo = outTradeNo
		default:
			res.Detail += ": no known action"
		}
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST":
		res.Outcome = orderpay.OutcomeNotPaid
	}
	return res
}

package alipay

import (
	"context"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// maxRequestNo is the longest out_request_no Alipay accepts.
const maxRequestNo = 64

// Sub_codes of alipay.trade.refund that are not refusals for good (docs/channels.md §A4).
const (
	// subCodeSystemError: Alipay could not say whether it took the refund.
	subCodeSystemError = "ACQ.SYSTEM_ERROR"
	// subCodeBalanceNotEnough: the merchant's balance cannot cover the refund (卖家余额不足);
	// nothing was refunded, and the same refund can succeed once the account is topped up.
	subCodeBalanceNotEnough = "ACQ.SELLER_BALANCE_NOT_ENOUGH"
)

// Refund refunds req.Amount of a paid trade under out_request_no = req.OutRefundNo
// (alipay.trade.refund). Resending the same request with the same OutRefundNo never
// refunds twice, so a refund whose outcome is Unknown is resent unchanged.
//
// Outcomes (docs/channels.md §A3, §A4, §C):
//   - a verified 10000 for this out_trade_no with fund_change=Y is Refunded: the money
//     moved. Amount is req.Amount, the amount the channel confirmed under this number
//     (refund_fee is the trade's cumulative refunded total, not this refund's amount; a
//     refund_fee below req.Amount contradicts fund_change=Y and is Unknown);
//   - a verified 10000 with fund_change other than Y is RefundPending, Amount req.Amount:
//     the channel took the request but the money has not moved (or this was a resend,
//     which the real gateway may answer with N); confirm with QueryRefund;
//   - a verified 40004 ACQ.SELLER_BALANCE_NOT_ENOUGH is RefundRetry: the merchant's Alipay
//     balance cannot cover the refund, nothing was refunded under this number, and the same
//     request sent again under the same number once the account is topped up can succeed;
//   - a verified business refusal is Rejected, refused for good: 40004 with any other
//     sub_code but ACQ.SYSTEM_ERROR (e.g. ACQ.TRADE_NOT_ALLOW_REFUND,
//     ACQ.TRADE_HAS_FINISHED, ACQ.TRADE_STATUS_ERROR, ACQ.TRADE_NOT_EXIST,
//     ACQ.REFUND_AMT_NOT_EQUAL_TOTAL, ACQ.REASON_TRADE_BEEN_FREEZEN (the trade is frozen:
//     someone must take it up with Alipay), ACQ.INVALID_PARAMETER, and
//     ACQ.DISCORDANT_REPEAT_REQUEST, where this number already holds a refund of another
//     amount), and 40001/40002/40003/40006/20001;
//   - everything else is Unknown: transport errors and timeouts, non-2xx, unsigned or
//     unverifiable answers, 20000, 40004 ACQ.SYSTEM_ERROR (Alipay's answer when it is
//     busy), 40005 (a gateway call limit). Resend with the same OutRefundNo later, or query.
//
// Alipay has no abnormal refund (a refund is refused at once or it settles), so Refund never
// answers RefundAbnormal, and it has no refund-specific frequency refusal: its busy answer,
// ACQ.SYSTEM_ERROR, is Unknown, which is resent under the same number as RefundRetry is.
//
// A request that breaks Alipay's field rules is Rejected without being sent. Alipay has
// no refund id: RefundID stays empty.
//
// An in-app adapter whose app does not know the trade (ACQ.TRADE_NOT_EXIST: nothing was
// refunded) sends the refund to the main app instead (inapp.go).
func (c *Channel) Refund(ctx context.Context, req orderpay.RefundRequest) orderpay.RefundResult {
	if msg := checkRefund(req); msg != "" {
		return orderpay.RefundResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: " + msg}
	}
	res, notExist := c.refund(ctx, req)
	if notExist && c.main != nil {
		if other, otherNotExist := c.main.refund(ctx, req); !otherNotExist {
			other.Detail = mainAppSays + other.Detail
			return other
		}
	}
	return res
}

// refund is Refund of a checked request by this app alone, and whether the answer was
// ACQ.TRADE_NOT_EXIST.
func (c *Channel) refund(ctx context.Context, req orderpay.RefundRequest) (orderpay.RefundResult, bool) {
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeRefundRsp, error) {
		return c.client.TradeRefund(ctx, sdk.TradeRefund{
			OutTradeNo:   req.OutTradeNo,
			RefundAmount: orderpay.FormatYuan(req.Amount),
			RefundReason: req.Reason,
			OutRequestNo: req.OutRefundNo,
		})
	})
	res := orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res, false
	}
	res.Detail = describeCode(rsp.Error)

	switch rsp.Code {
	case sdk.CodeSuccess:
		if rsp.OutTradeNo != "" && rsp.OutTradeNo != req.OutTradeNo {
			res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
			return res, false
		}
		res.Detail += " fund_change=" + rsp.FundChange + " refund_fee=" + rsp.RefundFee
		if rsp.FundChange != "Y" {
			res.Outcome = orderpay.OutcomeRefundPending
			res.Amount = req.Amount
			return res, false
		}
		if fee, err := orderpay.ParseYuan(rsp.RefundFee); err == nil && fee < req.Amount {
			res.Detail += ": refund_fee is below this refund"
			return res, false
		}
		res.Outcome = orderpay.OutcomeRefunded
		res.Amount = req.Amount
	case sdk.CodeBusinessFailed:
		switch rsp.SubCode {
		case subCodeSystemError:
			// Unknown: the refund may or may not have been taken.
		case subCodeBalanceNotEnough:
			res.Outcome = orderpay.OutcomeRefundRetry
			res.Detail += ": the merchant's Alipay balance cannot cover the refund; top it up, then send the refund again under the same number"
		default:
			res.Outcome = orderpay.OutcomeRejected
			if rsp.SubCode == "ACQ.TRADE_NOT_EXIST" {
				return res, true
			}
		}
	case sdk.CodeMissingParam, sdk.CodeInvalidParam, sdk.CodeInsufficientConditions,
		sdk.CodePermissionDenied, sdk.CodeInvalidAuthToken:
		res.Outcome = orderpay.OutcomeRejected
	}
	return res, false
}

// checkRefund applies Alipay's field rules (docs/channels.md §A3) before sending, and returns why
// req breaks them, or "".
func checkRefund(req orderpay.RefundRequest) string {
	switch {
	case !outTradeNoPattern.MatchString(req.OutTradeNo):
		return "out_trade_no must be 1 to 64 letters, digits or underscores"
	case req.OutRefundNo == "" || len(req.OutRefundNo) > maxRequestNo:
		// Required here although Alipay defaults it to out_trade_no: every refund names
		// itself, so a resend can never be mistaken for another refund.
		return "out_request_no must be 1 to 64 characters"
	case req.Amount < 1 || req.Amount > orderpay.MaxChannelAmount:
		return "amount must be between 0.01 and 100000000 yuan"
	case req.Total != 0 && req.Amount > req.Total:
		return "amount is more than the trade's total"
	}
	return ""
}

// QueryRefund asks Alipay about the refund numbered outRefundNo of outTradeNo
// (alipay.trade.fastpay.refund.query). An empty outRefundNo means the out_trade_no, the
// number of a refund made without one, such as Cancel's (§A3).
//
// Outcomes (docs/channels.md §A3, §C):
//   - a verified refund_status=REFUND_SUCCESS for this trade and number is Refunded, with
//     Amount from refund_amount (0 if absent; an unreadable amount is Unknown);
//   - a verified 10000 without refund_status is RefundPending. Alipay says this means "not
//     received, or failed" (未返回该字段表示退款请求未收到或者退款失败): shortly after a
//     refund call it means the refund has not settled yet. The adapter cannot tell those
//     apart, so the caller resends the refund with the same number (which never refunds
//     twice) and queries again, and decides itself when to give up and alert;
//   - any other refund_status, and everything else (errors, refusals, ACQ.TRADE_NOT_EXIST,
//     unsigned or unverifiable answers, transport failures), is Unknown.
//
// An in-app adapter whose app does not know the trade asks the main app (inapp.go).
func (c *Channel) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) orderpay.RefundResult {
	if outRefundNo == "" {
		outRefundNo = outTradeNo
	}
	res, notExist := c.queryRefund(ctx, outTradeNo, outRefundNo)
	if notExist && c.main != nil {
		if other, otherNotExist := c.main.queryRefund(ctx, outTradeNo, outRefundNo); !otherNotExist {
			other.Detail = mainAppSays + other.Detail
			return other
		}
	}
	return res
}

// queryRefund is QueryRefund by this app alone, and whether the answer was
// ACQ.TRADE_NOT_EXIST.
func (c *Channel) queryRefund(ctx context.Context, outTradeNo, outRefundNo string) (orderpay.RefundResult, bool) {
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeFastPayRefundQueryRsp, error) {
		return c.client.TradeFastPayRefundQuery(ctx, sdk.TradeFastPayRefundQuery{
			OutTradeNo:   outTradeNo,
			OutRequestNo: outRefundNo,
		})
	})
	res := orderpay.RefundResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp == nil {
		return res, false
	}
	res.Detail = describeCode(rsp.Error)
	if rsp.Code != sdk.CodeSuccess {
		return res, rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST"
	}
	switch {
	case rsp.OutTradeNo != "" && rsp.OutTradeNo != outTradeNo:
		res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
		return res, false
	case rsp.OutRequestNo != "" && rsp.OutRequestNo != outRefundNo:
		res.Detail += ": answer for another out_request_no " + rsp.OutRequestNo
		return res, false
	}
	switch rsp.RefundStatus {
	case "REFUND_SUCCESS":
		res.Detail += " REFUND_SUCCESS"
		if rsp.RefundAmount != "" {
			amount, err := orderpay.ParseYuan(rsp.RefundAmount)
			if err != nil {
				// Refunded, but by an amount we cannot read exactly: never guess.
				res.Detail += ": unreadable refund_amount"
				return res, false
			}
			res.Amount = amount
		}
		res.Outcome = orderpay.OutcomeRefunded
	case "":
		res.Detail += ": no refund_status (not received, not settled, or failed)"
		res.Outcome = orderpay.OutcomeRefundPending
	default:
		res.Detail += " refund_status=" + rsp.RefundStatus
	}
	return res, false
}

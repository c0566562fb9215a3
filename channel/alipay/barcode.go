package alipay

import (
	"context"
	"regexp"
	"strings"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// Barcode payments (付款码, docs/channels.md §F3): a till scans the buyer's payment code and
// the merchant sends it with the payment itself, alipay.trade.pay with scene bar_code. The
// call's answer is the payment's first word: 10000 paid, 10003 the trade is made and waits
// for the buyer (a password, a limit), a refusal, or nothing definite. A trade not ended in
// the till's time is ended with alipay.trade.cancel (Reverse). Barcode trades are the main
// app's (ForMethod gives the in-app app only in-app trades), queried like any other.
//
// The SDK's Code.IsSuccess() is true for 10003 as well as 10000: this file reads the code
// itself and never calls it, so a buyer still typing a password is never taken as paid.

// codeWaitingForBuyer is alipay.trade.pay's "order made, payment in process" (订单创建成功，
// 支付处理中): the buyer has not confirmed yet.
const codeWaitingForBuyer = sdk.CodeOrderSuccessPayInProcess // "10003"

// counterPattern is what the adapter sends as store_id and terminal_id: Alipay takes at
// most 32 characters; letters, digits, _ and - are what every counter name fits and the
// simulator checks. A name outside it is left out of the call (it names the counter in the
// bill, and is no reason to refuse the buyer's payment).
var counterPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// barcodePay takes a barcode payment (alipay.trade.pay, scene bar_code, product
// FACE_TO_FACE_PAYMENT) with the code req.AuthCode, the counter's store_id and terminal_id,
// time_expire = the deadline (China time, truncated to the second) and no notify_url: the
// payment center learns the result by querying.
//
// Outcomes (docs/channels.md §F3, §C):
//   - a verified 10000 whose out_trade_no and total_amount are this payment's is Paid (the
//     payment center confirms it with a query before it believes it); a 10000 for another
//     number or amount, or without them, is Unknown;
//   - 10003 is Unknown: the trade exists and waits for the buyer to confirm; query it;
//   - a verified refusal (40004 but ACQ.SYSTEM_ERROR and ACQ.TRADE_HAS_SUCCESS, and
//     40001/40002/40003/40006/20001) is Rejected, with Refusal saying why (barcodeRefusal);
//   - everything else (a transport error or timeout, non-2xx, an unsigned or unverifiable
//     answer, 20000, ACQ.SYSTEM_ERROR, ACQ.TRADE_HAS_SUCCESS, 40005, an unknown code) is
//     Unknown.
//
// A request Alipay would refuse on its face (checkPrecreate's rules, a deadline already past,
// a code that is not an Alipay one) is Rejected unsent. A subject's / = & (which Alipay
// forbids) are sent as spaces.
func (c *Channel) barcodePay(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	rejected := func(refusal orderpay.BarcodeRefusal, msg string) orderpay.PrecreateResult {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Refusal: refusal, Detail: "not sent: " + msg}
	}
	req.Subject = strings.Map(func(r rune) rune {
		if r == '/' || r == '=' || r == '&' {
			return ' '
		}
		return r
	}, req.Subject)
	if msg := checkPrecreate(req); msg != "" {
		return rejected(orderpay.RefusalOther, msg)
	}
	if ch, err := orderpay.BarcodeChannel(req.AuthCode); err != nil || ch != orderpay.ChannelAlipay {
		return rejected(orderpay.RefusalCodeInvalid, "auth_code is not an Alipay payment code (16 to 24 digits starting 25 to 30)")
	}
	expires, timeExpire := channelDeadline(orderpay.MethodBarcode, req.Deadline)
	if !expires.After(c.clock.Now()) {
		return rejected(orderpay.RefusalOther, "the deadline has passed (time_expire "+timeExpire+")")
	}
	pay := sdk.TradePay{
		Trade: sdk.Trade{
			Subject:     req.Subject,
			OutTradeNo:  req.OutTradeNo,
			TotalAmount: orderpay.FormatYuan(req.Amount),
			ProductCode: productCode,
			TimeExpire:  timeExpire,
		},
		Scene:    "bar_code",
		AuthCode: req.AuthCode,
	}
	var left []string
	if req.StoreID != "" {
		if counterPattern.MatchString(req.StoreID) {
			pay.StoreId = req.StoreID
		} else {
			left = append(left, "store_id")
		}
	}
	if req.TillID != "" {
		if counterPattern.MatchString(req.TillID) {
			pay.TerminalId = req.TillID
		} else {
			left = append(left, "terminal_id")
		}
	}
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradePayRsp, error) {
		return c.client.TradePay(ctx, pay)
	})
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Raw: raw, Detail: detail}
	if rsp != nil {
		res = barcodePayOutcome(rsp, req.OutTradeNo, req.Amount)
		res.Raw = raw
	}
	if len(left) > 0 {
		res.Detail += " [" + strings.Join(left, " and ") + " not sent: Alipay takes 1 to 32 letters, digits, _ or -]"
	}
	return res
}

// barcodePayOutcome maps a verified alipay.trade.pay answer for outTradeNo and amount (fen)
// to its outcome, as barcodePay documents. It never asks the SDK's IsSuccess.
func barcodePayOutcome(rsp *sdk.TradePayRsp, outTradeNo string, amount int64) orderpay.PrecreateResult {
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Detail: describeCode(rsp.Error)}
	switch rsp.Code {
	case sdk.CodeSuccess:
		paid, err := orderpay.ParseYuan(rsp.TotalAmount)
		switch {
		case rsp.OutTradeNo != outTradeNo:
			res.Detail += ": paid, but the answer is for out_trade_no " + quoted(rsp.OutTradeNo) + "; query it"
		case err != nil || paid != amount:
			res.Detail += ": paid, but total_amount " + quoted(rsp.TotalAmount) + " is not " + orderpay.FormatYuan(amount) + "; query it"
		default:
			res.Outcome = orderpay.OutcomePaid
			res.Detail += ": paid (trade_no " + rsp.TradeNo + ")"
		}
	case codeWaitingForBuyer:
		// The SDK counts 10003 as success; it is not a payment.
		res.Detail += ": the trade is made and waits for the buyer to confirm (password); query it"
	default:
		if res.Outcome = precreateOutcome(rsp.Error); res.Outcome == orderpay.OutcomeRejected {
			res.Refusal = barcodeRefusal(rsp.Error)
		}
	}
	return res
}

func quoted(s string) string { return `"` + s + `"` }

// barcodeRefusal classes a verified refusal of alipay.trade.pay for the cashier, by its
// sub_code (and, for a code Alipay did not take, its sub_msg):
//   - BALANCE: ACQ.BUYER_BALANCE_NOT_ENOUGH, ACQ.BUYER_BANKCARD_BALANCE_NOT_ENOUGH,
//     ACQ.BEYOND_PAY_RESTRICTION, ACQ.BUYER_PAYMENT_AMOUNT_*_LIMIT_ERROR (day, month…),
//     ACQ.ERROR_BALANCE_PAYMENT_DISABLE, ACQ.NO_PAYMENT_INSTRUMENTS_AVAILABLE;
//   - CODE_USED, CODE_EXPIRED or CODE_INVALID: ACQ.PAYMENT_AUTH_CODE_INVALID, by its sub_msg
//     (已使用 used, 过期 expired; anything else invalid: Alipay's own words do not say);
//   - RISK: ACQ.BUYER_ENABLE_STATUS_FORBID, ACQ.PAYMENT_FAIL,
//     ACQ.ERROR_BUYER_CERTIFY_LEVEL_LIMIT, and any sub_code naming RISK;
//   - OTHER: everything else (the merchant's own limits and settings, a number used for
//     another trade, a refused parameter…): Detail carries Alipay's words.
func barcodeRefusal(e sdk.Error) orderpay.BarcodeRefusal {
	sub := strings.TrimPrefix(e.SubCode, "ACQ.")
	switch {
	case sub == "BUYER_BALANCE_NOT_ENOUGH", sub == "BUYER_BANKCARD_BALANCE_NOT_ENOUGH", sub == "BEYOND_PAY_RESTRICTION",
		sub == "ERROR_BALANCE_PAYMENT_DISABLE", sub == "NO_PAYMENT_INSTRUMENTS_AVAILABLE",
		strings.HasPrefix(sub, "BUYER_PAYMENT_AMOUNT_") && strings.HasSuffix(sub, "_LIMIT_ERROR"):
		return orderpay.RefusalBalance
	case sub == "PAYMENT_AUTH_CODE_INVALID":
		msg := strings.ToLower(e.SubMsg)
		switch {
		case strings.Contains(msg, "已使用") || strings.Contains(msg, "used"):
			return orderpay.RefusalCodeUsed
		case strings.Contains(msg, "过期") || strings.Contains(msg, "expire"):
			return orderpay.RefusalCodeExpired
		}
		return orderpay.RefusalCodeInvalid
	case sub == "BUYER_ENABLE_STATUS_FORBID", sub == "PAYMENT_FAIL", sub == "ERROR_BUYER_CERTIFY_LEVEL_LIMIT",
		strings.Contains(sub, "RISK"):
		return orderpay.RefusalRisk
	}
	return orderpay.RefusalOther
}

var _ orderpay.Reverser = (*Channel)(nil)

// Reverse ends a barcode trade whose buyer did not confirm in time (alipay.trade.cancel):
// afterwards nothing can be paid under the number, and a payment made under it is refunded
// in full.
//
// Outcomes (docs/channels.md §F3, §A3, §C), each with RefundKnown true when Closed (Alipay's
// answer says whether it refunded):
//   - 20000, 40004 ACQ.SYSTEM_ERROR, 40005, an unknown code, a transport error or timeout,
//     non-2xx, an unsigned or unverifiable answer: Unknown (cancel again), whatever
//     retry_flag says;
//   - any other verified answer with retry_flag=Y: RefundRetry (Alipay asks for the cancel
//     again);
//   - 10000 for this out_trade_no: action=close is Closed (nothing was paid); action=refund
//     is Closed with Refunded (the buyer had paid, and the money goes back); no action is
//     Closed (Alipay knew no trade under the number: nothing was paid under it); another
//     action, or an answer for another number, is Unknown;
//   - any other verified refusal (ACQ.TRADE_STATUS_ERROR: refunded or finished already;
//     ACQ.TRADE_CANCEL_TIME_OUT: too old; 40001/40002/40003/40006/20001): Rejected, a
//     person must look. So is ACQ.TRADE_NOT_EXIST: for a number it never saw the simulator
//     answers action=close and fences the number, and what the real gateway answers is
//     open (§D); a "no such trade" from an app the trade is not under says nothing of the
//     trade, so it is never taken as ended.
func (c *Channel) Reverse(ctx context.Context, req orderpay.ReverseRequest) orderpay.ReverseResult {
	if !outTradeNoPattern.MatchString(req.OutTradeNo) {
		return orderpay.ReverseResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: out_trade_no must be 1 to 64 letters, digits or underscores"}
	}
	rsp, raw, detail := call(ctx, c, func(ctx context.Context) (*sdk.TradeCancelRsp, error) {
		return c.client.TradeCancel(ctx, sdk.TradeCancel{OutTradeNo: req.OutTradeNo})
	})
	if rsp == nil {
		return orderpay.ReverseResult{Outcome: orderpay.OutcomeUnknown, Detail: detail, Raw: raw}
	}
	res := reverseOutcome(rsp, req.OutTradeNo)
	res.Raw = raw
	return res
}

// reverseOutcome maps a verified alipay.trade.cancel answer for outTradeNo, as Reverse
// documents.
func reverseOutcome(rsp *sdk.TradeCancelRsp, outTradeNo string) orderpay.ReverseResult {
	res := orderpay.ReverseResult{Outcome: orderpay.OutcomeUnknown, Detail: describeCode(rsp.Error)}
	if rsp.Action != "" {
		res.Detail += " action=" + rsp.Action
	}
	if rsp.RetryFlag != "" {
		res.Detail += " retry_flag=" + rsp.RetryFlag
	}
	closed := func(refunded bool, why string) orderpay.ReverseResult {
		res.Outcome, res.Refunded, res.RefundKnown = orderpay.OutcomeClosed, refunded, true
		res.Detail += ": " + why
		return res
	}
	switch {
	case rsp.Code == sdk.CodeBusinessFailed && rsp.SubCode == "ACQ.SYSTEM_ERROR",
		rsp.Code != sdk.CodeSuccess && precreateOutcome(rsp.Error) != orderpay.OutcomeRejected:
		// No definite answer (20000, ACQ.SYSTEM_ERROR, 40005, a code we do not know).
		res.Detail += ": no definite answer; cancel again"
		return res
	case rsp.RetryFlag == "Y":
		res.Outcome = orderpay.OutcomeRefundRetry
		res.Detail += ": Alipay asks for the cancel again"
		return res
	case rsp.Code == sdk.CodeSuccess:
		if rsp.OutTradeNo != "" && rsp.OutTradeNo != outTradeNo {
			res.Detail += ": answer for another out_trade_no " + rsp.OutTradeNo
			return res
		}
		switch rsp.Action {
		case "close":
			return closed(false, "closed, nothing was paid")
		case "refund":
			return closed(true, "the buyer had paid: refunded in full")
		case "":
			return closed(false, "no trade under this number at Alipay, so nothing was paid under it")
		}
		res.Detail += ": no known action; cancel again"
		return res
	}
	res.Outcome = orderpay.OutcomeRejected
	res.Detail += ": refused; a person must look at the trade"
	return res
}

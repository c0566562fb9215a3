package wechat

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"

	"orderpay"
)

// Barcode payments (付款码, docs/channels.md §F3): a till scans the buyer's payment code and
// the merchant sends it with the payment itself, POST /v3/pay/transactions/codepay; one not
// ended in the till's time is reversed, POST …/out-trade-no/{out_trade_no}/reverse. A
// barcode order is never notified: only the pay call's answer and queries tell. wechatpay-go
// has no codepay service, so these two calls are made here on the SDK's core.Client, which
// signs each request and verifies each 2xx answer (signature, timestamp) exactly as for
// the SDK's own services: nothing here signs or verifies by itself.

// The trade states only payment-code orders have (§B1).
const (
	stateUserPaying = "USERPAYING" // the buyer is confirming (a password)
	statePayError   = "PAYERROR"   // the payment failed; nothing was paid
	stateRevoked    = "REVOKED"    // reversed: nothing can be paid under the number any more
)

// storeIDPattern is what the adapter sends as scene_info.store_info.out_id: 1 to 32
// letters, digits, _ or -, which every counter name fits and the simulator checks. A name
// outside it is left out (it names the counter, and is no reason to refuse a payment).
var storeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// codepayRequest is the body of POST /v3/pay/transactions/codepay: no notify_url, no
// time_expire.
type codepayRequest struct {
	AppID       string `json:"appid"`
	MchID       string `json:"mchid"`
	Description string `json:"description"`
	OutTradeNo  string `json:"out_trade_no"`
	Payer       struct {
		AuthCode string `json:"auth_code"`
	} `json:"payer"`
	Amount struct {
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
	SceneInfo struct {
		DeviceIP  string `json:"device_ip"`
		StoreInfo *struct {
			OutID string `json:"out_id"`
		} `json:"store_info,omitempty"`
	} `json:"scene_info"`
}

// codepay takes a barcode payment: POST /v3/pay/transactions/codepay with the main appid,
// the mchid, the description, out_trade_no, payer.auth_code, amount (CNY) and
// scene_info{device_ip: the till's address, store_info.out_id: the store}, and no
// notify_url.
//
// Outcomes (docs/channels.md §F3, §C): a verified 200 with trade_state SUCCESS for this
// appid, mchid, out_trade_no and amount is Paid (the payment center confirms it with a
// query before it believes it); any other verified 2xx (USERPAYING under 200 or 202, which
// of the two WeChat sends is unverified) is Unknown: query it. A definite 4xx refusal is
// Rejected with its Refusal (codepayFailed); everything else is Unknown. A request WeChat
// would refuse on its face (checkPrecreate's rules, a code that is not WeChat's, a till
// address that is not an IP address) is Rejected unsent.
func (c *Channel) codepay(ctx context.Context, req orderpay.PrecreateRequest) orderpay.PrecreateResult {
	reject := func(refusal orderpay.BarcodeRefusal, msg string) orderpay.PrecreateResult {
		return orderpay.PrecreateResult{Outcome: orderpay.OutcomeRejected, Refusal: refusal, Detail: "not sent: " + msg}
	}
	req.NotifyURL = "" // a barcode payment is never notified
	now := c.clock.Now()
	if msg := checkPrecreate(req, req.Deadline.Truncate(time.Second), now); msg != "" {
		return reject(orderpay.RefusalOther, msg)
	}
	if ch, err := orderpay.BarcodeChannel(req.AuthCode); err != nil || ch != orderpay.ChannelWechat {
		return reject(orderpay.RefusalCodeInvalid, "auth_code is not a WeChat Pay payment code (18 digits starting 10 to 15)")
	}
	if net.ParseIP(req.ClientIP) == nil {
		return reject(orderpay.RefusalOther, "scene_info.device_ip needs the till's IP address (PrecreateRequest.ClientIP)")
	}
	var body codepayRequest
	body.AppID, body.MchID = c.appID, c.mchID
	body.Description = truncateRunes(req.Subject, maxDescription)
	body.OutTradeNo = req.OutTradeNo
	body.Payer.AuthCode = req.AuthCode
	body.Amount.Total, body.Amount.Currency = req.Amount, currency
	body.SceneInfo.DeviceIP = req.ClientIP
	var left string
	if req.StoreID != "" {
		if storeIDPattern.MatchString(req.StoreID) {
			body.SceneInfo.StoreInfo = &struct {
				OutID string `json:"out_id"`
			}{req.StoreID}
		} else {
			left = " [store_info.out_id not sent: WeChat takes 1 to 32 letters, digits, _ or -]"
		}
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	result, err := c.api.Post(ctx, DefaultBaseURL+"/v3/pay/transactions/codepay", body)
	res := orderpay.PrecreateResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		apiErr, detail := describe(err, result)
		res.Outcome, res.Refusal, res.Detail = codepayFailed(apiErr, detail)
		res.Detail += left
		return res
	}
	var txn payments.Transaction
	if uerr := core.UnMarshalResponse(result.Response, &txn); uerr != nil {
		res.Detail = statusDetail(result) + ": unreadable answer" + left
		return res
	}
	res.Outcome, res.Detail = c.codepayAnswer(result.Response.StatusCode, &txn, req.OutTradeNo, req.Amount)
	res.Detail += left
	return res
}

// codepayAnswer maps a verified 2xx codepay answer (status, and its body read as a
// Transaction) for outTradeNo and amount (fen): Paid only for a 200 SUCCESS whose appid
// (the main one), mchid, out_trade_no and amount.total are this payment's; anything else
// is Unknown, USERPAYING under 200 or 202 alike.
func (c *Channel) codepayAnswer(status int, txn *payments.Transaction, outTradeNo string, amount int64) (orderpay.Outcome, string) {
	state := deref(txn.TradeState)
	detail := fmt.Sprintf("HTTP %d %s", status, state)
	if desc := deref(txn.TradeStateDesc); desc != "" {
		detail += " (" + desc + ")"
	}
	switch state {
	case stateSuccess:
		switch {
		case status != http.StatusOK:
			return orderpay.OutcomeUnknown, detail + ": SUCCESS under a status other than 200; query it"
		case deref(txn.OutTradeNo) != outTradeNo:
			return orderpay.OutcomeUnknown, detail + ": answer for another out_trade_no " + deref(txn.OutTradeNo)
		case deref(txn.Mchid) != c.mchID:
			return orderpay.OutcomeUnknown, detail + ": answer for another mchid"
		case deref(txn.Appid) != c.appID:
			return orderpay.OutcomeUnknown, detail + ": answer for another appid"
		case txn.Amount == nil || txn.Amount.Total == nil || *txn.Amount.Total != amount:
			return orderpay.OutcomeUnknown, detail + fmt.Sprintf(": paid, but not amount.total %d; query it", amount)
		}
		return orderpay.OutcomePaid, detail + ": paid (transaction_id " + deref(txn.TransactionId) + ")"
	case stateUserPaying:
		return orderpay.OutcomeUnknown, detail + ": the buyer is confirming (password); query it"
	}
	return orderpay.OutcomeUnknown, detail + ": not a payment; query it"
}

// codepayFailed classifies a codepay that gave no verified 2xx: apiErr is the error answer
// (nil for a transport error, a timeout or an unverified 2xx) and detail describes it.
//
//   - Unknown: no answer, an unverified 2xx, a 5xx (SYSTEM_ERROR, BANKERROR), a 429, any
//     USERPAYING, SYSTEMERROR or BANKERROR whatever its status (v2's micropay answered a
//     waiting buyer with the error code USERPAYING), and the answers that say an order
//     under this out_trade_no exists already (ORDERPAID, OUT_TRADE_NO_USED, INVALID_REQUEST
//     商户订单号重复): a query of it decides, as for a prepay;
//   - Rejected, with its Refusal (codepayRefusal): every other 4xx.
func codepayFailed(apiErr *core.APIError, detail string) (orderpay.Outcome, orderpay.BarcodeRefusal, string) {
	if apiErr == nil {
		return orderpay.OutcomeUnknown, "", detail
	}
	code := strings.ToUpper(apiErr.Code)
	switch {
	case code == stateUserPaying:
		return orderpay.OutcomeUnknown, "", detail + ": the buyer is confirming (password); query it"
	case code == "SYSTEMERROR", code == "SYSTEM_ERROR", code == "BANKERROR", code == "BANK_ERROR":
		return orderpay.OutcomeUnknown, "", detail + ": WeChat does not know the result yet; query it"
	case !isRefusal(apiErr):
		return orderpay.OutcomeUnknown, "", detail
	case code == "ORDERPAID", code == "OUT_TRADE_NO_USED", code == "INVALID_REQUEST" && strings.Contains(apiErr.Message, "订单号重复"):
		return orderpay.OutcomeUnknown, "", detail + ": an order with this out_trade_no exists; query it"
	}
	return orderpay.OutcomeRejected, codepayRefusal(apiErr), detail
}

// codepayRefusal classes a codepay's 4xx refusal for the cashier:
//   - BALANCE: NOTENOUGH (NOT_ENOUGH), NOTSUPORTCARD (the card cannot pay: another one),
//     RULELIMIT (RULE_LIMIT: over a limit);
//   - CODE_EXPIRED: AUTHCODEEXPIRE (AUTH_CODE_EXPIRE), and a code refusal that says 过期;
//   - CODE_USED: AUTH_CODE_INVALID or AUTH_CODE_ERROR saying the code works once
//     (仅限使用一次) or was used (已使用, 已被使用);
//   - CODE_INVALID: any other AUTH_CODE_INVALID or AUTH_CODE_ERROR;
//   - RISK: TRADE_ERROR (the buyer's account or WeChat's risk control);
//   - OTHER: everything else: ORDER_CLOSED (the order under this number ended unpaid),
//     ORDERREVERSED, BUYER_MISMATCH (the code is another buyer's than the order's),
//     PARAM_ERROR, APPID_MCHID_NOT_MATCH, SIGN_ERROR…: Detail carries WeChat's words.
func codepayRefusal(e *core.APIError) orderpay.BarcodeRefusal {
	code, msg := strings.ToUpper(e.Code), e.Message
	switch code {
	case "NOTENOUGH", "NOT_ENOUGH", "NOTSUPORTCARD", "NOT_SUPPORT_CARD", "RULELIMIT", "RULE_LIMIT":
		return orderpay.RefusalBalance
	case "AUTHCODEEXPIRE", "AUTH_CODE_EXPIRE":
		return orderpay.RefusalCodeExpired
	case "AUTH_CODE_INVALID", "AUTH_CODE_ERROR":
		switch {
		case strings.Contains(msg, "过期"):
			return orderpay.RefusalCodeExpired
		case strings.Contains(msg, "仅限使用一次"), strings.Contains(msg, "已使用"), strings.Contains(msg, "已被使用"):
			return orderpay.RefusalCodeUsed
		}
		return orderpay.RefusalCodeInvalid
	case "TRADE_ERROR":
		return orderpay.RefusalRisk
	}
	return orderpay.RefusalOther
}

var _ orderpay.Reverser = (*Channel)(nil)

// Reverse ends a barcode order (POST /v3/pay/transactions/out-trade-no/{out_trade_no}/reverse
// with the main appid and the mchid): afterwards nothing can be paid under the number, and a
// paid order is refunded in full.
//
// WeChat takes a reverse only orderpay.WechatReverseAfter (15 s) after the order: sooner, by
// the adapter's clock, Reverse answers RefundRetry without a call.
//
// Outcomes (docs/channels.md §F3, §C):
//   - a verified 2xx for this order is Closed, with RefundKnown false: WeChat's answer does
//     not say whether the order had been paid (a query before the reverse does); one for
//     another out_trade_no, mchid or appid is Unknown;
//   - RefundRetry, refused for now: USERPAYING (正在支付中不能发起撤销: the buyer is
//     confirming), and INVALID_REQUEST saying the order is less than 15 s old;
//   - Closed too, with RefundKnown true and nothing refunded: 404 ORDER_NOT_EXIST, WeChat
//     never got the order (the codepay was lost on the way), so nothing was made under the
//     number (the payment center sends a reverse only after a query found the trade unpaid);
//   - Rejected, a person must look: every other 4xx but 429 (REVERSE_EXPIRE: older than 7
//     days; TRADE_ERROR: refunded already; INVALID_REQUEST: not a barcode order…);
//   - Unknown: no answer, an unverified 2xx, a 5xx (SYSTEM_ERROR), a 429.
func (c *Channel) Reverse(ctx context.Context, req orderpay.ReverseRequest) orderpay.ReverseResult {
	if !OutTradeNoPattern.MatchString(req.OutTradeNo) {
		return orderpay.ReverseResult{Outcome: orderpay.OutcomeRejected, Detail: "not sent: out_trade_no must be 6 to 32 letters, digits or _-|*"}
	}
	if !req.OrderedAt.IsZero() {
		if age := c.clock.Now().Sub(req.OrderedAt); age < orderpay.WechatReverseAfter {
			return orderpay.ReverseResult{Outcome: orderpay.OutcomeRefundRetry,
				Detail: fmt.Sprintf("not sent: WeChat takes a reverse %s after the order, and this one is %s old",
					orderpay.WechatReverseAfter, age.Round(time.Millisecond))}
		}
	}
	ctx, ex, cancel := c.begin(ctx)
	defer cancel()
	body := map[string]string{"appid": c.appID, "mchid": c.mchID}
	result, err := c.api.Post(ctx, DefaultBaseURL+"/v3/pay/transactions/out-trade-no/"+req.OutTradeNo+"/reverse", body)
	res := orderpay.ReverseResult{Outcome: orderpay.OutcomeUnknown, Raw: ex.raw()}
	if err != nil {
		apiErr, detail := describe(err, result)
		res.Outcome, res.Detail = reverseFailed(apiErr, detail)
		res.RefundKnown = res.Outcome == orderpay.OutcomeClosed // no order, so nothing was paid or refunded
		return res
	}
	res.Detail = statusDetail(result)
	var answer struct {
		AppID      *string `json:"appid"`
		MchID      *string `json:"mchid"`
		OutTradeNo *string `json:"out_trade_no"`
	}
	if raw := strings.TrimSpace(res.Raw); raw != "" {
		if json.Unmarshal([]byte(raw), &answer) != nil {
			res.Detail += ": unreadable answer"
			return res
		}
	}
	if msg := c.checkReversed(answer.OutTradeNo, answer.MchID, answer.AppID, req.OutTradeNo); msg != "" {
		res.Detail += ": " + msg
		return res
	}
	res.Outcome = orderpay.OutcomeClosed
	res.Detail += ": reversed; WeChat does not say whether it refunded a payment"
	return res
}

// checkReversed reports why a verified reverse answer is not for outTradeNo at this
// merchant and its main appid, or "". A field the answer leaves out is not held against it.
func (c *Channel) checkReversed(gotOutTradeNo, mchID, appID *string, outTradeNo string) string {
	switch {
	case gotOutTradeNo != nil && *gotOutTradeNo != outTradeNo:
		return "answer for another out_trade_no " + *gotOutTradeNo
	case mchID != nil && *mchID != c.mchID:
		return "answer for another mchid"
	case appID != nil && *appID != c.appID:
		return "answer for another appid"
	}
	return ""
}

// reverseFailed classifies a reverse that gave no verified 2xx, as Reverse documents.
func reverseFailed(apiErr *core.APIError, detail string) (orderpay.Outcome, string) {
	if apiErr == nil {
		return orderpay.OutcomeUnknown, detail
	}
	code := strings.ToUpper(apiErr.Code)
	switch {
	case code == stateUserPaying:
		return orderpay.OutcomeRefundRetry, detail + ": the buyer is confirming; reverse again later"
	case code == "SYSTEMERROR", code == "SYSTEM_ERROR", code == "BANKERROR", code == "BANK_ERROR", !isRefusal(apiErr):
		return orderpay.OutcomeUnknown, detail + ": no definite answer; reverse again"
	case code == "INVALID_REQUEST" && (strings.Contains(apiErr.Message, "15秒") || strings.Contains(apiErr.Message, "15s")):
		return orderpay.OutcomeRefundRetry, detail + ": too soon after the order; reverse again later"
	case code == "ORDER_NOT_EXIST" || code == "ORDERNOTEXIST":
		// The codepay never reached WeChat (it was lost on the way): nothing was made under
		// this number, nothing can be paid under it, nothing is held. As Alipay's cancel of a
		// number it does not know, the trade is over.
		return orderpay.OutcomeClosed, detail + ": WeChat has no order under this number; nothing to end"
	}
	return orderpay.OutcomeRejected, detail + ": refused; a person must look at the order"
}

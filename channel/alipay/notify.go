package alipay

import (
	"context"
	"crypto"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	sdk "github.com/smartwalle/alipay/v3"
	"github.com/smartwalle/nsign"

	"orderpay"
)

// VerifyNotification checks and decodes an Alipay asynchronous notification (docs/channels.md §A5,
// §E). body is the raw application/x-www-form-urlencoded POST body.
//
// A body that is not a form, or repeats a field, is EINVALID. The signature must verify
// (verifySignature), and app_id, auth_app_id when present (the app the trade was made
// through: our own app, for a merchant's own app) and seller_id must be ours: otherwise
// EUNAUTHORIZED. A verified notification whose total_amount, or refund_fee, does not parse
// exactly is EINVALID. The payment center still checks the order and the amount before
// applying it.
//
// A notification whose app_id is the in-app app's (Config.InApp) is one of its trades: it is
// verified by the in-app app's adapter, with that app's Alipay public key or certificate, and
// its app_id, auth_app_id and seller_id checked against that app's; any other is verified
// as the main app's. So a notification claiming the in-app app but signed with the main
// app's Alipay key does not verify, and one for an app that is neither is EUNAUTHORIZED.
//
// A payment notification is Paid for TRADE_SUCCESS and TRADE_FINISHED, Closed for
// TRADE_CLOSED, NotPaid for WAIT_BUYER_PAY. A refund notification is recognised by its
// refund fields (refundFields), whatever its trade_status: after a partial refund it still
// says TRADE_SUCCESS, which is not a new payment, and after a full one TRADE_CLOSED, which is
// not "closed, never paid". It is Refunded, names the refund by OutRefundNo (out_biz_no, the
// refund's out_request_no), has the trade's total_amount as Amount and the cumulative
// refund_fee in Detail; RefundAmount stays 0, since Alipay gives only the total refunded on
// the trade. A refund notification without out_biz_no or refund_fee is Unknown: recorded,
// never applied.
func (c *Channel) VerifyNotification(ctx context.Context, _ http.Header, body []byte) (*orderpay.Notification, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay notification is not a form body")
	}
	for k, vs := range values {
		if len(vs) > 1 {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay notification repeats field %q", k)
		}
	}
	if c.inApp != nil && values.Get("app_id") == c.inApp.appID {
		return c.inApp.verifyNotification(ctx, values, body)
	}
	return c.verifyNotification(ctx, values, body)
}

// verifyNotification is VerifyNotification of a well-formed notification by this app: its
// signature with this app's Alipay key, then its app and seller.
func (c *Channel) verifyNotification(ctx context.Context, values url.Values, body []byte) (*orderpay.Notification, error) {
	var err error
	if err := c.verifySignature(ctx, values); err != nil {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay notification signature does not verify")
	}
	// A genuine signature on someone else's notification is still not ours to apply.
	if values.Get("app_id") != c.appID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay notification is for another app_id")
	}
	if auth, ok := values["auth_app_id"]; ok && auth[0] != c.appID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay notification is for another auth_app_id")
	}
	if values.Get("seller_id") != c.sellerID {
		return nil, orderpay.Errorf(orderpay.EUNAUTHORIZED, "alipay notification is for another seller_id")
	}
	n := &orderpay.Notification{
		Channel:    orderpay.ChannelAlipay,
		NotifyID:   values.Get("notify_id"),
		OutTradeNo: values.Get("out_trade_no"),
		TradeNo:    values.Get("trade_no"),
		Outcome:    orderpay.OutcomeUnknown,
		PaidAt:     parseTime(values.Get("gmt_payment")),
		Raw:        string(body),
	}
	if n.OutTradeNo == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay notification has no out_trade_no")
	}
	total := values.Get("total_amount")
	if n.Amount, err = orderpay.ParseYuan(total); err != nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "alipay notification total_amount %q is not a yuan amount", total)
	}

	status := values.Get("trade_status")
	if refundFields(values) {
		n.OutRefundNo = values.Get("out_biz_no")
		fee := values.Get("refund_fee")
		if fee == "" {
			n.Detail = "refund notification without refund_fee, trade_status=" + status
			return n, nil
		}
		feeFen, err := orderpay.ParseYuan(fee)
		if err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "alipay refund notification refund_fee %q is not a yuan amount", fee)
		}
		n.Detail = fmt.Sprintf("refund_fee=%s (%d fen refunded on the trade so far) trade_status=%s", fee, feeFen, status)
		if n.OutRefundNo != "" {
			n.Outcome = orderpay.OutcomeRefunded
		}
		return n, nil
	}
	switch sdk.TradeStatus(status) {
	case sdk.TradeStatusSuccess, sdk.TradeStatusFinished:
		n.Outcome = orderpay.OutcomePaid
	case sdk.TradeStatusClosed:
		n.Outcome = orderpay.OutcomeClosed
	case sdk.TradeStatusWaitBuyerPay:
		n.Outcome = orderpay.OutcomeNotPaid
	}
	return n, nil
}

// refundFields reports whether a notification is about a refund: it carries out_biz_no
// (the refund's out_request_no), refund_fee or gmt_refund, which payment notifications do
// not (§E). Any one of them is enough: a notification that might be about a refund is
// never read as a payment, nor as a trade closed unpaid.
func refundFields(values url.Values) bool {
	return values.Get("out_biz_no") != "" || values.Get("refund_fee") != "" || values.Get("gmt_refund") != ""
}

// verifySignature checks a notification's signature with the Alipay key in use.
//
// First as the SDK does: sign, sign_type and alipay_cert_sn left out of the signed
// content, and in certificate mode the key chosen by alipay_cert_sn (absent: the
// configured certificate's). Whether Alipay leaves alipay_cert_sn out is unverified
// (docs/channels.md §D): the official rule leaves out only sign and sign_type (§A5), as gopay and
// the Java SDK's rsaCertCheckV1 do. So a notification that carries alipay_cert_sn and fails
// the first check is checked again that way, with the configured key; both forms can only
// come from the holder of Alipay's private key.
func (c *Channel) verifySignature(ctx context.Context, values url.Values) error {
	err := c.client.VerifySign(ctx, values)
	if err == nil || values.Get("alipay_cert_sn") == "" {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(values.Get("sign"))
	if err != nil {
		return err
	}
	// The SDK's own encoder, so that the content is built exactly as in the first check
	// but for alipay_cert_sn.
	verifier := nsign.New(nsign.WithMethod(nsign.NewRSAMethod(crypto.SHA256, nil, c.alipayKey)), nsign.WithEncoder(sdk.Encoder{}))
	return verifier.VerifyValues(values, sig, nsign.WithIgnore("sign", "sign_type"))
}

package wechat

import (
	"net/http"
	"testing"

	"github.com/wechatpay-apiv3/wechatpay-go/core"

	"orderpay"
)

// The classes of codepay's and reverse's error answers, as tables (the answers are told end
// to end in barcode_test.go).
func TestCodepayFailed(t *testing.T) {
	for _, tc := range []struct {
		status        int
		code, message string
		want          orderpay.Outcome
		refusal       orderpay.BarcodeRefusal
	}{
		{400, "USERPAYING", "", orderpay.OutcomeUnknown, ""},
		{202, "userpaying", "", orderpay.OutcomeUnknown, ""},
		{400, "SYSTEMERROR", "", orderpay.OutcomeUnknown, ""},
		{403, "BANK_ERROR", "", orderpay.OutcomeUnknown, ""},
		{500, "PARAM_ERROR", "", orderpay.OutcomeUnknown, ""},
		{429, "NOTENOUGH", "", orderpay.OutcomeUnknown, ""},
		{400, "ORDERPAID", "", orderpay.OutcomeUnknown, ""},
		{403, "OUT_TRADE_NO_USED", "", orderpay.OutcomeUnknown, ""},
		{400, "INVALID_REQUEST", "201 商户订单号重复", orderpay.OutcomeUnknown, ""},
		{400, "INVALID_REQUEST", "参数错误", orderpay.OutcomeRejected, orderpay.RefusalOther},
		{403, "NOTENOUGH", "", orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{403, "RULE_LIMIT", "", orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{400, "AUTH_CODE_EXPIRE", "", orderpay.OutcomeRejected, orderpay.RefusalCodeExpired},
		{400, "AUTH_CODE_ERROR", "付款码已过期", orderpay.OutcomeRejected, orderpay.RefusalCodeExpired},
		{400, "AUTH_CODE_INVALID", "该付款码已被使用", orderpay.OutcomeRejected, orderpay.RefusalCodeUsed},
		{400, "AUTH_CODE_INVALID", "", orderpay.OutcomeRejected, orderpay.RefusalCodeInvalid},
		{403, "TRADE_ERROR", "", orderpay.OutcomeRejected, orderpay.RefusalRisk},
		{400, "SOMETHING_NEW", "", orderpay.OutcomeRejected, orderpay.RefusalOther},
	} {
		e := &core.APIError{StatusCode: tc.status, Code: tc.code, Message: tc.message}
		got, refusal, _ := codepayFailed(e, "d")
		if got != tc.want || refusal != tc.refusal {
			t.Errorf("%d %s %q: %s %q, want %s %q", tc.status, tc.code, tc.message, got, refusal, tc.want, tc.refusal)
		}
	}
	if got, refusal, _ := codepayFailed(nil, "timeout"); got != orderpay.OutcomeUnknown || refusal != "" {
		t.Errorf("no answer: %s %q", got, refusal)
	}
}

func TestReverseFailed(t *testing.T) {
	for _, tc := range []struct {
		status        int
		code, message string
		want          orderpay.Outcome
	}{
		{403, "USERPAYING", "", orderpay.OutcomeRefundRetry},
		{400, "INVALID_REQUEST", "订单创建15秒内不能撤销", orderpay.OutcomeRefundRetry},
		{400, "INVALID_REQUEST", "order is younger than 15s", orderpay.OutcomeRefundRetry},
		{400, "INVALID_REQUEST", "非付款码订单不能撤销", orderpay.OutcomeRejected},
		{400, "REVERSE_EXPIRE", "", orderpay.OutcomeRejected},
		{http.StatusNotFound, "ORDER_NOT_EXIST", "", orderpay.OutcomeClosed},
		{500, "SYSTEM_ERROR", "", orderpay.OutcomeUnknown},
		{400, "SYSTEMERROR", "", orderpay.OutcomeUnknown},
		{429, "FREQUENCY_LIMITED", "", orderpay.OutcomeUnknown},
	} {
		e := &core.APIError{StatusCode: tc.status, Code: tc.code, Message: tc.message}
		if got, _ := reverseFailed(e, "d"); got != tc.want {
			t.Errorf("%d %s %q: %s, want %s", tc.status, tc.code, tc.message, got, tc.want)
		}
	}
	if got, _ := reverseFailed(nil, "timeout"); got != orderpay.OutcomeUnknown {
		t.Errorf("no answer: %s", got)
	}
}

package alipay

import (
	"testing"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// The refusal classes of alipay.trade.pay's sub_codes, as a table (the signed answers are
// told end to end in barcode_test.go).
func TestBarcodeRefusal(t *testing.T) {
	for _, tc := range []struct {
		sub, msg string
		want     orderpay.BarcodeRefusal
	}{
		{"ACQ.BUYER_BALANCE_NOT_ENOUGH", "", orderpay.RefusalBalance},
		{"ACQ.BUYER_BANKCARD_BALANCE_NOT_ENOUGH", "", orderpay.RefusalBalance},
		{"ACQ.BEYOND_PAY_RESTRICTION", "", orderpay.RefusalBalance},
		{"ACQ.BUYER_PAYMENT_AMOUNT_DAY_LIMIT_ERROR", "", orderpay.RefusalBalance},
		{"ACQ.BUYER_PAYMENT_AMOUNT_MONTH_LIMIT_ERROR", "", orderpay.RefusalBalance},
		{"ACQ.BUYER_PAYMENT_AMOUNT_YEAR_LIMIT_ERROR", "", orderpay.RefusalBalance},
		{"ACQ.ERROR_BALANCE_PAYMENT_DISABLE", "", orderpay.RefusalBalance},
		{"ACQ.NO_PAYMENT_INSTRUMENTS_AVAILABLE", "", orderpay.RefusalBalance},
		{"ACQ.PAYMENT_AUTH_CODE_INVALID", "支付失败，获取顾客账户信息失败，请顾客刷新付款码后重新收款", orderpay.RefusalCodeInvalid},
		{"ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已使用，请顾客刷新付款码后重新收款", orderpay.RefusalCodeUsed},
		{"ACQ.PAYMENT_AUTH_CODE_INVALID", "付款码已过期，请顾客刷新付款码后重新收款", orderpay.RefusalCodeExpired},
		{"ACQ.PAYMENT_AUTH_CODE_INVALID", "The code has expired", orderpay.RefusalCodeExpired},
		{"ACQ.PAYMENT_AUTH_CODE_INVALID", "", orderpay.RefusalCodeInvalid},
		{"ACQ.BUYER_ENABLE_STATUS_FORBID", "", orderpay.RefusalRisk},
		{"ACQ.PAYMENT_FAIL", "", orderpay.RefusalRisk},
		{"ACQ.ERROR_BUYER_CERTIFY_LEVEL_LIMIT", "", orderpay.RefusalRisk},
		{"ACQ.PAYMENT_REQUEST_HAS_RISK", "", orderpay.RefusalRisk},
		{"ACQ.BUYER_PAYMENT_AMOUNT_DAY_LIMIT", "", orderpay.RefusalOther}, // not the limit error's name
		{"ACQ.TRADE_HAS_CLOSE", "", orderpay.RefusalOther},
		{"ACQ.CONTEXT_INCONSISTENT", "", orderpay.RefusalOther},
		{"ACQ.SELLER_BEEN_BLOCKED", "", orderpay.RefusalOther},
		{"isv.invalid-signature", "", orderpay.RefusalOther},
		{"", "", orderpay.RefusalOther},
	} {
		if got := barcodeRefusal(sdk.Error{Code: sdk.CodeBusinessFailed, SubCode: tc.sub, SubMsg: tc.msg}); got != tc.want {
			t.Errorf("%s %q: %s, want %s", tc.sub, tc.msg, got, tc.want)
		}
	}
}

// A verified pay answer is Paid only for 10000, this number and this amount; the SDK's
// IsSuccess plays no part.
func TestBarcodePayOutcome(t *testing.T) {
	paid := func(code sdk.Code, no, total string) *sdk.TradePayRsp {
		return &sdk.TradePayRsp{Error: sdk.Error{Code: code, Msg: "m"}, OutTradeNo: no, TotalAmount: total, TradeNo: "1"}
	}
	for _, tc := range []struct {
		rsp  *sdk.TradePayRsp
		want orderpay.Outcome
	}{
		{paid(sdk.CodeSuccess, "N1", "12.34"), orderpay.OutcomePaid},
		{paid(sdk.CodeSuccess, "N1", "12.35"), orderpay.OutcomeUnknown},
		{paid(sdk.CodeSuccess, "N2", "12.34"), orderpay.OutcomeUnknown},
		{paid(sdk.CodeSuccess, "", "12.34"), orderpay.OutcomeUnknown},
		{paid(sdk.CodeSuccess, "N1", ""), orderpay.OutcomeUnknown},
		{paid(sdk.CodeOrderSuccessPayInProcess, "N1", "12.34"), orderpay.OutcomeUnknown},
		{paid(sdk.CodeUnknowError, "N1", "12.34"), orderpay.OutcomeUnknown},
	} {
		if got := barcodePayOutcome(tc.rsp, "N1", 1234); got.Outcome != tc.want || got.Refusal != "" {
			t.Errorf("%+v: %+v, want %s", tc.rsp, got, tc.want)
		}
	}
}

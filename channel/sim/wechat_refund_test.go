package sim_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// wxRefundView is the part of a Refund the tests look at.
type wxRefundView struct {
	RefundID            string `json:"refund_id"`
	OutRefundNo         string `json:"out_refund_no"`
	TransactionID       string `json:"transaction_id"`
	OutTradeNo          string `json:"out_trade_no"`
	Channel             string `json:"channel"`
	UserReceivedAccount string `json:"user_received_account"`
	Status              string `json:"status"`
	CreateTime          string `json:"create_time"`
	SuccessTime         string `json:"success_time"`
	Amount              struct {
		Total       int64  `json:"total"`
		Refund      int64  `json:"refund"`
		PayerTotal  int64  `json:"payer_total"`
		PayerRefund int64  `json:"payer_refund"`
		Currency    string `json:"currency"`
	} `json:"amount"`
}

func wxRefundOf(t *testing.T, a wxAnswer) wxRefundView {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("refund answer %s, want 200", a)
	}
	var v wxRefundView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWechatRefund_PartialIdempotentDiscordantAndBounded(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	b.paid(t, "REF_001", 1000)
	txnID := wxEntry(t, b.sim, "REF_001").TradeNo

	first := wxRefundOf(t, b.refund(t, "REF_001", "REF_001_R1", 300, 1000))
	if first.Status != "SUCCESS" || first.OutRefundNo != "REF_001_R1" || first.OutTradeNo != "REF_001" ||
		first.TransactionID != txnID || first.Channel != "ORIGINAL" || first.UserReceivedAccount == "" ||
		len(first.RefundID) != 29 || first.Amount.Refund != 300 || first.Amount.Total != 1000 ||
		first.Amount.PayerRefund != 300 || first.Amount.PayerTotal != 1000 || first.Amount.Currency != "CNY" ||
		first.SuccessTime == "" || first.CreateTime == "" {
		t.Fatalf("first refund: %+v", first)
	}
	// The same request again is the same refund, not a second one.
	if again := wxRefundOf(t, b.refund(t, "REF_001", "REF_001_R1", 300, 1000)); again.RefundID != first.RefundID {
		t.Fatalf("replay gave refund %s, first %s", again.RefundID, first.RefundID)
	}
	if e := wxEntry(t, b.sim, "REF_001"); e.Refunded != 300 || e.Status != "SUCCESS" {
		t.Fatalf("after a partial refund and its replay: %+v", e)
	}
	// The same number for another amount or order is a different refund: refused.
	wantWxError(t, "same number, other amount", b.refund(t, "REF_001", "REF_001_R1", 400, 1000), 400, "INVALID_REQUEST")
	b.paid(t, "REF_002", 1000)
	wantWxError(t, "same number, other order", b.refund(t, "REF_002", "REF_001_R1", 300, 1000), 400, "INVALID_REQUEST")
	// Never more than what is left.
	wantWxError(t, "over-refund", b.refund(t, "REF_001", "REF_001_R2", 701, 1000), 400, "INVALID_REQUEST")
	wantWxError(t, "wrong total", b.refund(t, "REF_001", "REF_001_R2", 100, 999), 400, "INVALID_REQUEST")

	rest := wxRefundOf(t, b.refund(t, "REF_001", "REF_001_R3", 700, 1000))
	if rest.Status != "SUCCESS" {
		t.Fatalf("refund of the rest: %+v", rest)
	}
	if e := wxEntry(t, b.sim, "REF_001"); e.Refunded != 1000 || e.Status != "REFUND" {
		t.Fatalf("after the full amount: %+v, want REFUND with 1000 refunded", e)
	}
	if s := b.tradeState(t, "REF_001"); s != "REFUND" {
		t.Fatalf("trade_state after the full amount: %s", s)
	}
	wantWxError(t, "anything more", b.refund(t, "REF_001", "REF_001_R4", 1, 1000), 400, "INVALID_REQUEST")

	// The refund query answers each refund as it is.
	if q := wxRefundOf(t, b.refundQuery(t, "REF_001_R1")); q.RefundID != first.RefundID || q.Status != "SUCCESS" || q.Amount.Refund != 300 {
		t.Fatalf("refund query: %+v", q)
	}
	wantWxError(t, "unknown refund", b.refundQuery(t, "NOSUCH_R1"), 404, "RESOURCE_NOT_EXISTS")
}

func TestWechatRefund_RefusedForUnknownOrUnpaidOrdersAndBadRequests(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wantWxError(t, "unknown order", b.refund(t, "NOSUCH_01", "NOSUCH_01_R1", 100, 100), 404, "RESOURCE_NOT_EXISTS")
	b.prepay(t, "UNPAID_01", 100, time.Time{}, "")
	wantWxError(t, "unpaid order", b.refund(t, "UNPAID_01", "UNPAID_01_R1", 100, 100), 400, "INVALID_REQUEST")
	b.paid(t, "PAID_001", 100)
	for name, body := range map[string]string{
		"no out_refund_no":   `{"out_trade_no":"PAID_001","amount":{"refund":1,"total":100,"currency":"CNY"}}`,
		"no order":           `{"out_refund_no":"R1","amount":{"refund":1,"total":100,"currency":"CNY"}}`,
		"zero refund":        wxRefundBody("PAID_001", "R1", 0, 100),
		"no currency":        `{"out_trade_no":"PAID_001","out_refund_no":"R1","amount":{"refund":1,"total":100}}`,
		"bad out_refund_no":  wxRefundBody("PAID_001", "R 1", 1, 100),
		"not JSON":           `{"out_trade_no":`,
		"refund as a string": `{"out_trade_no":"PAID_001","out_refund_no":"R1","amount":{"refund":"1","total":100,"currency":"CNY"}}`,
	} {
		wantWxError(t, name, b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", body), 400, "PARAM_ERROR")
	}
	if e := wxEntry(t, b.sim, "PAID_001"); e.Refunded != 0 {
		t.Fatalf("refused refunds moved money: %+v", e)
	}
	// By transaction_id instead of out_trade_no.
	txnID := wxEntry(t, b.sim, "PAID_001").TradeNo
	a := b.call(t, http.MethodPost, "/v3/refund/domestic/refunds",
		`{"transaction_id":"`+txnID+`","out_refund_no":"BYID_R1","amount":{"refund":40,"total":100,"currency":"CNY"}}`)
	if v := wxRefundOf(t, a); v.OutTradeNo != "PAID_001" || v.Amount.Refund != 40 {
		t.Fatalf("refund by transaction_id: %+v", v)
	}
}

func TestWechatRefund_ProcessingUntilRefundDelayThenSuccessAndFullRefundIsREFUND(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{RefundDelay: 10 * time.Minute})
	b.paid(t, "SLOW_001", 600)
	created := b.clock.Now()
	r := wxRefundOf(t, b.refund(t, "SLOW_001", "SLOW_001_R1", 600, 600))
	if r.Status != "PROCESSING" || r.SuccessTime != "" {
		t.Fatalf("refund before it settles: %+v", r)
	}
	// Accepted but not settled: no money has moved yet, and the order is still SUCCESS.
	if e := wxEntry(t, b.sim, "SLOW_001"); e.Refunded != 0 || e.Status != "SUCCESS" {
		t.Fatalf("ledger before it settles: %+v", e)
	}
	// A PROCESSING refund still counts against what is left.
	wantWxError(t, "refund beyond a pending one", b.refund(t, "SLOW_001", "SLOW_001_R2", 1, 600), 400, "INVALID_REQUEST")

	b.clock.Advance(10*time.Minute - time.Second)
	if q := wxRefundOf(t, b.refundQuery(t, "SLOW_001_R1")); q.Status != "PROCESSING" {
		t.Fatalf("a second before it settles: %+v", q)
	}
	b.clock.Advance(time.Second)
	q := wxRefundOf(t, b.refundQuery(t, "SLOW_001_R1"))
	if want := created.Add(10 * time.Minute).In(cst).Format(time.RFC3339); q.Status != "SUCCESS" || q.SuccessTime != want {
		t.Fatalf("after it settles: %+v, want SUCCESS at %s", q, want)
	}
	if e := wxEntry(t, b.sim, "SLOW_001"); e.Refunded != 600 || e.Status != "REFUND" {
		t.Fatalf("ledger after it settles: %+v", e)
	}
	if s := b.tradeState(t, "SLOW_001"); s != "REFUND" {
		t.Fatalf("trade_state after it settles: %s", s)
	}
}

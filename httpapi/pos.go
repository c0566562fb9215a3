package httpapi

import (
	"net/http"
	"time"

	"orderpay"
	"orderpay/apppay"
)

// The counter's API (docs/barcode.md): a till is an app of the payments API.
func (s *Server) registerPos(mux *routeMux) {
	mux.HandleFunc("POST /v1/pos/payments", s.appRoute(s.createPosPayment))
	mux.HandleFunc("GET /v1/pos/payments", s.appRoute(s.listPosPayments))
	mux.HandleFunc("GET /v1/pos/payments/{no}", s.appRoute(s.getPosPayment))
}

type posPaymentJSON struct {
	No           string     `json:"pos_payment_no"`
	Status       string     `json:"status"`
	Channel      string     `json:"channel"`
	Amount       int64      `json:"amount"`
	OrderNo      string     `json:"order_no,omitempty"`
	PaymentNo    string     `json:"payment_no"`
	StoreID      string     `json:"store_id,omitempty"`
	TillID       string     `json:"till_id,omitempty"`
	Description  string     `json:"description,omitempty"`
	CodeTail     string     `json:"code_tail"`
	Refusal      string     `json:"refusal,omitempty"`
	Message      string     `json:"message"`
	MessageZh    string     `json:"message_zh"`
	Detail       string     `json:"detail,omitempty"`
	TradeNo      string     `json:"trade_no,omitempty"`
	PaidAt       *time.Time `json:"paid_at,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	Answered     string     `json:"answered,omitempty"`
	AnsweredAt   *time.Time `json:"answered_at,omitempty"`
	PollAfterSec int        `json:"poll_after_seconds,omitempty"`
}

func toPosJSON(v *apppay.PosView) posPaymentJSON {
	t := v.Till
	payment := t.AppPaymentNo
	if payment == "" {
		payment = t.PaymentNo
	}
	out := posPaymentJSON{No: t.OutTradeNo, Status: string(v.Status), Channel: t.Channel, Amount: t.Amount, OrderNo: t.OrderNo,
		PaymentNo: payment, StoreID: t.StoreID, TillID: t.TillID, Description: t.Description, CodeTail: t.CodeTail,
		Refusal: string(v.Refusal), Message: v.Message[0], MessageZh: v.Message[1], Detail: v.Detail, TradeNo: v.TradeNo,
		PaidAt: optionalTime(v.PaidAt), CreatedAt: t.CreatedAt.UTC(), Answered: string(t.Answer), AnsweredAt: optionalTime(t.AnsweredAt)}
	if v.Status == orderpay.BarcodeUnknown {
		out.PollAfterSec = int(orderpay.BarcodeQueryEvery / time.Second)
	}
	return out
}

// createPosPayment is POST /v1/pos/payments: 200 with the payment's end (PAID, REFUSED,
// CANCELLED) or UNKNOWN once the till's wait is over; the same Idempotency-Key and body
// again: the same payment, with Idempotent-Replayed.
func (s *Server) createPosPayment(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	var req struct {
		AuthCode    string `json:"auth_code"`
		Amount      int64  `json:"amount"`
		OrderNo     string `json:"order_no"`
		StoreID     string `json:"store_id"`
		TillID      string `json:"till_id"`
		Description string `json:"description"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.Apps.PosPay(r.Context(), app, apppay.PosRequest{AuthCode: req.AuthCode, Amount: req.Amount, OrderNo: req.OrderNo,
		StoreID: req.StoreID, TillID: req.TillID, Description: req.Description, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		ClientIP: s.clientIP(r)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/pos/payments/"+v.Till.OutTradeNo)
	if v.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, toPosJSON(v))
}

func (s *Server) getPosPayment(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	v, err := s.Apps.PosPayment(r.Context(), app, r.PathValue("no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toPosJSON(v))
}

func (s *Server) listPosPayments(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	n, err := limitParam(r, apppay.PosListDefault, apppay.PosListMax)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.Apps.PosPayments(r.Context(), app, r.URL.Query().Get("till_id"), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]posPaymentJSON, 0, len(list))
	for i := range list {
		out = append(out, toPosJSON(&list[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"payments": out})
}

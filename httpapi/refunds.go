package httpapi

import (
	"net/http"
	"time"
)

// refundRoutes are the operators' refund actions: the queue of refunds that will not end by
// themselves, and what an operator does about one (payment.RetryRefund, ResolveRefund).
func (s *Server) refundRoutes(mux *routeMux) {
	mux.HandleFunc("GET /admin/refunds/needs-action", s.admin(s.refundQueue))
	mux.HandleFunc("GET /admin/refunds/{out_refund_no}", s.admin(s.refund))
	mux.HandleFunc("POST /admin/refunds/{out_refund_no}/retry", s.admin(s.retryRefund))
	mux.HandleFunc("POST /admin/refunds/{out_refund_no}/resolve", s.admin(s.resolveRefund))
}

// operator names who acts on an admin route, as the history records them.
//
// The admin token is one shared secret: every holder is "operator:admin".
func (s *Server) operator(*http.Request) string { return "operator:admin" }

// refundQueue is GET /admin/refunds/needs-action: the operators' queue, oldest first, each
// refund with its problem, amount, order, buyer and how long it has waited.
func (s *Server) refundQueue(w http.ResponseWriter, r *http.Request) {
	rs, err := s.Payments.RefundsNeedingAction(r.Context(), adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	type queuedJSON struct {
		refundJSON
		OrderNo        string `json:"order_no"`
		BuyerID        string `json:"buyer_id"`
		WaitingSeconds int64  `json:"waiting_seconds"`
	}
	now := s.Clock.Now()
	out := make([]queuedJSON, 0, len(rs))
	for i := range rs {
		q := &rs[i]
		out = append(out, queuedJSON{refundJSON: toRefundJSON(&q.ChannelRefund), OrderNo: q.OrderNo, BuyerID: q.BuyerID,
			WaitingSeconds: int64(max(now.Sub(q.NeedsActionAt), 0) / time.Second)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": out})
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	rf, err := s.Payments.Refund(r.Context(), r.PathValue("out_refund_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refund": toRefundJSON(rf)})
}

// retryRefund is POST /admin/refunds/{out_refund_no}/retry: send it again now, under its own
// number. Idempotent.
func (s *Server) retryRefund(w http.ResponseWriter, r *http.Request) {
	rf, err := s.Payments.RetryRefund(r.Context(), r.PathValue("out_refund_no"), s.operator(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refund": toRefundJSON(rf)})
}

// resolveRefund is POST /admin/refunds/{out_refund_no}/resolve {"reference","note"}: the money
// went back outside the channel. Idempotent for the same reference.
func (s *Server) resolveRefund(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reference string `json:"reference"`
		Note      string `json:"note"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	rf, err := s.Payments.ResolveRefund(r.Context(), r.PathValue("out_refund_no"), s.operator(r), req.Reference, req.Note)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refund": toRefundJSON(rf)})
}

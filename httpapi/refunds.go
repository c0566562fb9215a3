package httpapi

import (
	"net/http"
	"time"

	"orderpay/payment"
)

// refundRoutes are the operators' refund actions: the queue of refunds that will not end by
// themselves, and what an operator does about one (payment.RetryRefund, ResolveRefund).
func (s *Server) refundRoutes(mux *routeMux) {
	mux.HandleFunc("GET /admin/refunds/needs-action", s.admin(s.refundQueue))
	mux.HandleFunc("GET /admin/refunds/{out_refund_no}", s.admin(s.refund))
	mux.HandleFunc("POST /admin/refunds/{out_refund_no}/retry", s.admin(s.retryRefund))
	mux.HandleFunc("POST /admin/refunds/{out_refund_no}/resolve", s.admin(s.resolveRefund))
}

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
	s.writeRefund(w, r, rf, err)
}

// writeRefund answers with a refund, its order and its buyer, and names the order in the
// audit log of a write.
func (s *Server) writeRefund(w http.ResponseWriter, r *http.Request, rf *payment.RefundView, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteOrder(r, rf.OrderNo)
	writeJSON(w, http.StatusOK, map[string]any{"refund": toRefundJSON(&rf.ChannelRefund), "order_no": rf.OrderNo, "buyer_id": rf.BuyerID})
}

// retryRefund is POST /admin/refunds/{out_refund_no}/retry: send it again now, under its own
// number. Idempotent.
func (s *Server) retryRefund(w http.ResponseWriter, r *http.Request) {
	rf, err := s.Payments.RetryRefund(r.Context(), r.PathValue("out_refund_no"), s.operator(r))
	s.writeRefund(w, r, rf, err)
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
	s.writeRefund(w, r, rf, err)
}

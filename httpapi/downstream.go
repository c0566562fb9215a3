package httpapi

import (
	"context"
	"net/http"

	"orderpay"
	"orderpay/downstream"
)

// Downstream is what the admin reads of the example downstream consumers need
// (*downstream.Examples is one).
type Downstream interface {
	PointsAccount(ctx context.Context, buyerID string) (*downstream.PointsAccount, error)
	SMSLog(ctx context.Context, orderNo string) ([]downstream.SMSEntry, error)
}

// downstreamRoutes are the example consumers' demo reads: a buyer's points balance and
// ledger, and the SMS log of an order.
func (s *Server) downstreamRoutes(mux *routeMux) {
	mux.HandleFunc("GET /admin/points/{buyer_id}", s.admin(s.points))
	mux.HandleFunc("GET /admin/sms", s.admin(s.smsLog))
}

func (s *Server) examplesOff(w http.ResponseWriter, r *http.Request) bool {
	if s.Downstream == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "example consumers are off"))
		return true
	}
	return false
}

// points is GET /admin/points/{buyer_id}: {buyer_id, balance, ledger: [...]}, newest first.
func (s *Server) points(w http.ResponseWriter, r *http.Request) {
	if s.examplesOff(w, r) {
		return
	}
	a, err := s.Downstream.PointsAccount(r.Context(), r.PathValue("buyer_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// smsLog is GET /admin/sms?order_no=: {sms: [...]}, newest first; without order_no, the
// latest of every order.
func (s *Server) smsLog(w http.ResponseWriter, r *http.Request) {
	if s.examplesOff(w, r) {
		return
	}
	rows, err := s.Downstream.SMSLog(r.Context(), r.URL.Query().Get("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sms": rows})
}

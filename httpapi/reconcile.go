package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"orderpay"
)

// Reconciler is what the reconciliation admin endpoints need (*reconcile.Reconciler is
// one).
type Reconciler interface {
	Run(ctx context.Context, channel, date string) (*orderpay.Reconciliation, error)
	Report(ctx context.Context, id int64) (*orderpay.Reconciliation, error)
	Reports(ctx context.Context, channel, date string, limit int) ([]orderpay.Reconciliation, error)
}

// reconcileRoutes are reconciliation's admin endpoints: run one, list the reports, read one.
func (s *Server) reconcileRoutes(mux *routeMux) {
	mux.HandleFunc("POST /admin/reconciliations", s.admin(s.runReconciliation))
	mux.HandleFunc("GET /admin/reconciliations", s.admin(s.listReconciliations))
	mux.HandleFunc("GET /admin/reconciliations/{id}", s.admin(s.getReconciliation))
}

// reconciliationView is a report as the API shows it; items only when one report is read.
type reconciliationView struct {
	ID          int64                       `json:"id"`
	Channel     string                      `json:"channel"`
	Date        string                      `json:"date"`
	StartedAt   time.Time                   `json:"started_at"`
	FinishedAt  time.Time                   `json:"finished_at"`
	BillRows    int                         `json:"bill_rows"`
	Counts      map[orderpay.ReconClass]int `json:"counts"`
	Unexplained int                         `json:"unexplained"`
	Items       []reconItemView             `json:"items,omitempty"`
}

type reconItemView struct {
	Class       orderpay.ReconClass      `json:"class"`
	Resolution  orderpay.ReconResolution `json:"resolution,omitempty"`
	Explained   bool                     `json:"explained"`
	Kind        orderpay.BillRowKind     `json:"kind"`
	OutTradeNo  string                   `json:"out_trade_no"`
	OutRefundNo string                   `json:"out_refund_no,omitempty"`
	BillAmount  int64                    `json:"bill_amount"`
	LocalAmount int64                    `json:"local_amount"`
	InBill      bool                     `json:"in_bill"`
	Detail      string                   `json:"detail,omitempty"`
}

func viewReconciliation(r *orderpay.Reconciliation) reconciliationView {
	v := reconciliationView{ID: r.ID, Channel: r.Channel, Date: r.Date, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		BillRows: r.BillRows, Counts: r.Counts, Unexplained: r.Unexplained}
	for _, it := range r.Items {
		v.Items = append(v.Items, reconItemView{Class: it.Class, Resolution: it.Resolution, Explained: it.Resolution.Explained(),
			Kind: it.Kind, OutTradeNo: it.OutTradeNo, OutRefundNo: it.OutRefundNo, BillAmount: it.BillAmount,
			LocalAmount: it.LocalAmount, InBill: it.InBill, Detail: it.Detail})
	}
	return v
}

func (s *Server) reconcileOff(w http.ResponseWriter, r *http.Request) bool {
	if s.Reconcile == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "reconciliation is not configured"))
		return true
	}
	return false
}

// runReconciliation is POST /admin/reconciliations {"channel":"alipay|wechat","date":"yyyy-MM-dd"}:
// it reconciles that bill now and answers 201 with the report. date defaults to yesterday
// (China time). A bill that is not out yet is 503 EUNAVAILABLE, and nothing is stored.
func (s *Server) runReconciliation(w http.ResponseWriter, r *http.Request) {
	if s.reconcileOff(w, r) {
		return
	}
	var req struct {
		Channel string `json:"channel"`
		Date    string `json:"date"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Date == "" {
		req.Date = orderpay.BillDay(s.Clock.Now().In(orderpay.ChinaTime).AddDate(0, 0, -1))
	}
	if _, _, err := orderpay.BillDayRange(req.Date); err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.Reconcile.Run(r.Context(), req.Channel, req.Date)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewReconciliation(rep))
}

// listReconciliations is GET /admin/reconciliations?channel=&date=: {reconciliations: [...]},
// newest first, without items.
func (s *Server) listReconciliations(w http.ResponseWriter, r *http.Request) {
	if s.reconcileOff(w, r) {
		return
	}
	q := r.URL.Query()
	if d := q.Get("date"); d != "" {
		if _, _, err := orderpay.BillDayRange(d); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	reps, err := s.Reconcile.Reports(r.Context(), q.Get("channel"), q.Get("date"), adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := []reconciliationView{}
	for i := range reps {
		views = append(views, viewReconciliation(&reps[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"reconciliations": views})
}

// getReconciliation is GET /admin/reconciliations/{id}: one report with every item.
func (s *Server) getReconciliation(w http.ResponseWriter, r *http.Request) {
	if s.reconcileOff(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "reconciliation id must be a positive integer"))
		return
	}
	rep, err := s.Reconcile.Report(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewReconciliation(rep))
}

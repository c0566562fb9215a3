package httpapi

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"orderpay"
	"orderpay/payment"
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
	mux.HandleFunc("GET /admin/reconciliations/{id}/export.csv", s.admin(s.exportReconciliation))
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
	// Account is the merchant account the bills are of; Layers each layer's differences,
	// unexplained ones and the money those are about; Figures the day's totals.
	Account string                                        `json:"account"`
	Layers  map[orderpay.ReconLayer]orderpay.LayerSummary `json:"layers"`
	Figures orderpay.ReconFigures                         `json:"figures"`
	Items   []reconItemView                               `json:"items,omitempty"`
}

type reconItemView struct {
	Layer       orderpay.ReconLayer      `json:"layer"`
	Class       orderpay.ReconClass      `json:"class"`
	Resolution  orderpay.ReconResolution `json:"resolution,omitempty"`
	Explained   bool                     `json:"explained"`
	Kind        orderpay.BillRowKind     `json:"kind,omitempty"`
	OutTradeNo  string                   `json:"out_trade_no"`
	OutRefundNo string                   `json:"out_refund_no,omitempty"`
	// OrderNo is the shop order whose payment the trade is an attempt of, read from the
	// trade's number (payment.OutTradeNo), for the console's link; absent when the number is
	// not one of ours.
	OrderNo     string `json:"order_no,omitempty"`
	BillAmount  int64  `json:"bill_amount"`
	LocalAmount int64  `json:"local_amount"`
	InBill      bool   `json:"in_bill"`
	Detail      string `json:"detail,omitempty"`
	Difference  int64  `json:"difference"` // fen, the bill's figure less ours
}

func viewReconciliation(r *orderpay.Reconciliation) reconciliationView {
	v := reconciliationView{ID: r.ID, Channel: r.Channel, Date: r.Date, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		BillRows: r.BillRows, Counts: r.Counts, Unexplained: r.Unexplained, Account: r.Account, Layers: r.Layers, Figures: r.Figures}
	if v.Layers == nil {
		v.Layers = map[orderpay.ReconLayer]orderpay.LayerSummary{}
	}
	// Every layer is named, an empty one with zeros, so that a reader need not guess.
	for _, l := range orderpay.ReconLayers {
		if _, ok := v.Layers[l]; !ok {
			v.Layers[l] = orderpay.LayerSummary{}
		}
	}
	for _, it := range r.Items {
		v.Items = append(v.Items, reconItemView{Layer: itemLayer(it), Class: it.Class, Resolution: it.Resolution, Explained: it.Resolution.Explained(),
			Kind: it.Kind, OutTradeNo: it.OutTradeNo, OutRefundNo: it.OutRefundNo, OrderNo: orderOfTrade(it.OutTradeNo), BillAmount: it.BillAmount,
			LocalAmount: it.LocalAmount, InBill: it.InBill, Detail: it.Detail, Difference: it.Difference})
	}
	return v
}

// orderOfTrade is the shop order number an attempt's out_trade_no was made from
// (payment.OutTradeNo of payment.PaymentNo), or "" when it was not made so or is a business
// app's payment (its key is no shop order).
func orderOfTrade(outTradeNo string) string {
	rest, ok := strings.CutPrefix(outTradeNo, payment.PaymentNo(""))
	if !ok || len(rest) < 4 {
		return ""
	}
	order, seqText := rest[:len(rest)-3], rest[len(rest)-2:]
	seq, err := strconv.Atoi(seqText)
	if err != nil || seq < 0 || payment.OutTradeNo(payment.PaymentNo(order), seq) != outTradeNo || orderpay.IsAppOrderKey(order) {
		return ""
	}
	return order
}

// itemLayer is the layer an item belongs to: the one it names, or its class's.
func itemLayer(it orderpay.ReconItem) orderpay.ReconLayer {
	if it.Layer != "" {
		return it.Layer
	}
	return orderpay.LayerOf(it.Class)
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
	rep, ok := s.readReconciliation(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, viewReconciliation(rep))
}

// readReconciliation reads the report the path's {id} names, or answers the error.
func (s *Server) readReconciliation(w http.ResponseWriter, r *http.Request) (*orderpay.Reconciliation, bool) {
	if s.reconcileOff(w, r) {
		return nil, false
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "reconciliation id must be a positive integer"))
		return nil, false
	}
	rep, err := s.Reconcile.Report(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return rep, true
}

// exportReconciliation is GET /admin/reconciliations/{id}/export.csv: the report as a
// spreadsheet (reconcileCSV), as an attachment named after its channel, date and id.
func (s *Server) exportReconciliation(w http.ResponseWriter, r *http.Request) {
	rep, ok := s.readReconciliation(w, r)
	if !ok {
		return
	}
	body, err := reconcileCSV(rep)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="reconciliation-%s-%s-%d.csv"`, csvName(rep.Channel), csvName(rep.Date), rep.ID))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// reconcileCSVHeader names the export's item columns; amounts are yuan with two decimals.
var reconcileCSVHeader = []string{"date", "channel", "account", "layer", "class", "resolution", "explained", "kind",
	"out_trade_no", "out_refund_no", "bill amount (yuan)", "our amount (yuan)", "difference (yuan)", "detail"}

// reconcileCSV is a report as CSV for a spreadsheet: UTF-8 with a byte order mark (without
// it, spreadsheets set to a Chinese locale read UTF-8 as GBK), one row per item, then, after
// an empty row, each layer's summary and the day's figures as name and value. An amount the
// item has no record of (the bill's of a trade missing from the bill, ours of one missing
// here, both of a layer not checked) is left empty rather than written as 0.00. Text cells
// that a spreadsheet would read as a formula (=, +, -, @ first) are quoted with a leading
// apostrophe, since numbers and details may come from a channel's bill.
func reconcileCSV(rep *orderpay.Reconciliation) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("\ufeff")
	w := csv.NewWriter(&buf)
	w.UseCRLF = true
	_ = w.Write(reconcileCSVHeader)
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, it := range rep.Items {
		bill, ours := orderpay.FormatYuan(it.BillAmount), orderpay.FormatYuan(it.LocalAmount)
		switch it.Class {
		case orderpay.ReconNotChecked:
			bill, ours = "", ""
		case orderpay.ReconMissingLocal:
			ours = ""
		case orderpay.ReconMissingChannel:
			bill = ""
		}
		if itemLayer(it) == orderpay.LayerTrades && !it.InBill && it.BillAmount == 0 {
			bill = ""
		}
		_ = w.Write([]string{rep.Date, rep.Channel, csvText(rep.Account), string(itemLayer(it)), string(it.Class), string(it.Resolution),
			yesNo[it.Resolution.Explained()], string(it.Kind), csvText(it.OutTradeNo), csvText(it.OutRefundNo), bill, ours,
			orderpay.FormatYuan(it.Difference), csvText(it.Detail)})
	}
	_ = w.Write(nil)
	_ = w.Write([]string{"layer", "differences", "unexplained", "unexplained amount (yuan)"})
	for _, l := range orderpay.ReconLayers {
		sum := rep.Layers[l]
		_ = w.Write([]string{string(l), strconv.Itoa(sum.Differences), strconv.Itoa(sum.Unexplained), orderpay.FormatYuan(sum.UnexplainedAmount)})
	}
	_ = w.Write(nil)
	f := rep.Figures
	yuan := func(checked bool, fen int64) string {
		if !checked {
			return "not checked"
		}
		return orderpay.FormatYuan(fen)
	}
	prev, prevClose := "", "unknown"
	if f.PrevKnown {
		prev, prevClose = f.PrevDate, orderpay.FormatYuan(f.PrevClosing)
	}
	for _, row := range [][]string{
		{"figure", "value"},
		{"bill rows", strconv.Itoa(rep.BillRows)},
		{"unexplained items", strconv.Itoa(rep.Unexplained)},
		{"fees checked", yesNo[f.FeesChecked]},
		{"paid (yuan)", yuan(f.FeesChecked, f.Paid)},
		{"refunded (yuan)", yuan(f.FeesChecked, f.Refunded)},
		{"fees expected (yuan)", yuan(f.FeesChecked, f.FeeExpected)},
		{"fees in the bill's rows (yuan)", yuan(f.FeesChecked, f.FeeBill)},
		{"fees in the bill's summary (yuan)", yuan(f.FeesChecked, f.FeeSummary)},
		{"settlement checked", yesNo[f.SettlementChecked]},
		{"net expected (yuan)", yuan(f.SettlementChecked, f.NetExpected)},
		{"net to the account (yuan)", yuan(f.SettlementChecked, f.NetBill)},
		{"account movements", strconv.Itoa(f.Movements)},
		{"opening balance (yuan)", yuan(f.BalanceKnown, f.Opening)},
		{"closing balance (yuan)", yuan(f.BalanceKnown, f.Closing)},
		{"previous day", prev},
		{"previous closing balance (yuan)", prevClose},
	} {
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "writing the reconciliation CSV: %v", err)
	}
	return buf.Bytes(), nil
}

// csvText keeps a text cell from being read as a formula by a spreadsheet.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csvName is s with anything but letters, digits and '-' dropped, for a file name.
func csvName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return -1
	}, s)
}

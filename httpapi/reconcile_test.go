package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/httpapi"
)

// storedReports is a Reconciler that only reads: the reports it holds, by id.
type storedReports map[int64]*orderpay.Reconciliation

func (s storedReports) Run(context.Context, string, string) (*orderpay.Reconciliation, error) {
	return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "not in this test")
}

func (s storedReports) Report(_ context.Context, id int64) (*orderpay.Reconciliation, error) {
	if r, ok := s[id]; ok {
		return r, nil
	}
	return nil, orderpay.Errorf(orderpay.ENOTFOUND, "reconciliation %d not found", id)
}

func (s storedReports) Reports(context.Context, string, string, int) ([]orderpay.Reconciliation, error) {
	return nil, nil
}

// feeReport is a WeChat Pay report of one day with a difference in each layer: a payment
// matched, a fee charged 6 fen above the contract, a refund that gave back no fee share, a
// settlement 994 fen short, a bill number a spreadsheet would take for a formula, and a
// business app's payment matched.
func feeReport() *orderpay.Reconciliation {
	at := time.Date(2026, 11, 27, 2, 30, 0, 0, time.UTC)
	r := &orderpay.Reconciliation{ID: 7, Channel: "wechat", Date: "2026-11-26", StartedAt: at, FinishedAt: at.Add(time.Second), BillRows: 3,
		Account: "1900000109",
		Items: []orderpay.ReconItem{
			{Layer: orderpay.LayerTrades, Class: orderpay.ReconMatched, Kind: orderpay.BillPayment, OutTradeNo: "PO1126A01", BillAmount: 10000, LocalAmount: 10000, InBill: true},
			{Layer: orderpay.LayerTrades, Class: orderpay.ReconMissingChannel, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillPayment,
				OutTradeNo: "=HYPERLINK(\"x\")", LocalAmount: 500, Difference: -500, Detail: "paid here, not in the bill"},
			{Layer: orderpay.LayerFees, Class: orderpay.ReconFeeMismatch, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillPayment,
				OutTradeNo: "PO1126A01", BillAmount: 66, LocalAmount: 60, InBill: true, Difference: 6, Detail: "charged 0.66 on 100.00 yuan, 费率 0.66%"},
			{Layer: orderpay.LayerFees, Class: orderpay.ReconRefundFeeNotReturned, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillRefund,
				OutTradeNo: "PO1126A01", OutRefundNo: "R1", BillAmount: 0, LocalAmount: 6, InBill: true, Difference: -6, Detail: "no share back"},
			{Layer: orderpay.LayerSettlement, Class: orderpay.ReconSettlementMismatch, Resolution: orderpay.ResolutionUnexplained, Kind: orderpay.BillPayment,
				OutTradeNo: "PO1126A01", BillAmount: 8940, LocalAmount: 9934, InBill: true, Difference: -994, Detail: "settled short"},
			{Layer: orderpay.LayerTrades, Class: orderpay.ReconMatched, Kind: orderpay.BillPayment, OutTradeNo: "PAP2611260001A01", BillAmount: 300, LocalAmount: 300, InBill: true},
		},
		Figures: orderpay.ReconFigures{FeesChecked: true, Paid: 10000, Refunded: 1000, FeeExpected: 54, FeeBill: 66, FeeSummary: 66,
			SettlementChecked: true, NetExpected: 8946, NetBill: 7952, Movements: 2, BalanceKnown: true, Opening: 120000, Closing: 127952,
			PrevKnown: true, PrevDate: "2026-11-25", PrevClosing: 120000},
	}
	r.Tally()
	return r
}

func reconServer() http.Handler {
	return (&httpapi.Server{Reconcile: storedReports{7: feeReport()}, AdminToken: "admin", Logger: slog.New(slog.DiscardHandler)}).Handler()
}

func adminGet(h http.Handler, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// One report read through the API names its account, each layer's differences, unexplained
// items and their money, the day's figures, and each item's layer and difference in fen.
func TestReconciliationViewHasLayersFiguresAndDifferences(t *testing.T) {
	t.Parallel()
	w := adminGet(reconServer(), "/admin/reconciliations/7", "admin")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var got struct {
		Account string                                        `json:"account"`
		Layers  map[orderpay.ReconLayer]orderpay.LayerSummary `json:"layers"`
		Figures orderpay.ReconFigures                         `json:"figures"`
		Items   []struct {
			Layer      orderpay.ReconLayer `json:"layer"`
			Class      orderpay.ReconClass `json:"class"`
			Difference int64               `json:"difference"`
			OrderNo    string              `json:"order_no"`
		} `json:"items"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Account != "1900000109" {
		t.Errorf("account %q", got.Account)
	}
	want := map[orderpay.ReconLayer]orderpay.LayerSummary{
		orderpay.LayerTrades:     {Differences: 1, Unexplained: 1, UnexplainedAmount: 500},
		orderpay.LayerFees:       {Differences: 2, Unexplained: 2, UnexplainedAmount: 12},
		orderpay.LayerSettlement: {Differences: 1, Unexplained: 1, UnexplainedAmount: 994},
	}
	if len(got.Layers) != 3 || got.Layers[orderpay.LayerTrades] != want[orderpay.LayerTrades] ||
		got.Layers[orderpay.LayerFees] != want[orderpay.LayerFees] || got.Layers[orderpay.LayerSettlement] != want[orderpay.LayerSettlement] {
		t.Errorf("layers %+v, want %+v", got.Layers, want)
	}
	if got.Figures != feeReport().Figures {
		t.Errorf("figures %+v", got.Figures)
	}
	if len(got.Items) != 6 {
		t.Fatalf("items %+v", got.Items)
	}
	for i, it := range feeReport().Items {
		// The console links a trade to its order: PO1126A01 is attempt 1 of order O1126's
		// payment; a number not made so, or a business app's payment, names no order.
		order := "O1126"
		if it.Class == orderpay.ReconMissingChannel || strings.HasPrefix(it.OutTradeNo, "PAP") {
			order = ""
		}
		if got.Items[i].Layer != it.Layer || got.Items[i].Class != it.Class || got.Items[i].Difference != it.Difference || got.Items[i].OrderNo != order {
			t.Errorf("item %d: %+v, want layer %s class %s difference %d order %q", i, got.Items[i], it.Layer, it.Class, it.Difference, order)
		}
	}
}

// The export is the report as CSV a spreadsheet opens as UTF-8: a byte order mark, the
// columns in order, amounts in yuan, a cell that would be a formula defused, then each
// layer's summary and the figures. A bad or unknown id, or no token, is the API's JSON error.
func TestReconciliationExportCSV(t *testing.T) {
	t.Parallel()
	h := reconServer()
	w := adminGet(h, "/admin/reconciliations/7/export.csv", "admin")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename="reconciliation-wechat-2026-11-26-7.csv"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	body, ok := bytes.CutPrefix(w.Body.Bytes(), []byte("\xef\xbb\xbf"))
	if !ok {
		t.Fatalf("no byte order mark: %q", w.Body.Bytes()[:min(10, w.Body.Len())])
	}
	cr := csv.NewReader(bytes.NewReader(body))
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wantRows := [][]string{
		{"date", "channel", "account", "layer", "class", "resolution", "explained", "kind", "out_trade_no", "out_refund_no",
			"bill amount (yuan)", "our amount (yuan)", "difference (yuan)", "detail"},
		{"2026-11-26", "wechat", "1900000109", "TRADES", "MATCHED", "", "yes", "PAYMENT", "PO1126A01", "", "100.00", "100.00", "0.00", ""},
		{"2026-11-26", "wechat", "1900000109", "TRADES", "MISSING_CHANNEL", "UNEXPLAINED", "no", "PAYMENT", `'=HYPERLINK("x")`, "", "", "5.00", "-5.00", "paid here, not in the bill"},
		{"2026-11-26", "wechat", "1900000109", "FEES", "FEE_MISMATCH", "UNEXPLAINED", "no", "PAYMENT", "PO1126A01", "", "0.66", "0.60", "0.06", "charged 0.66 on 100.00 yuan, 费率 0.66%"},
		{"2026-11-26", "wechat", "1900000109", "FEES", "REFUND_FEE_NOT_RETURNED", "UNEXPLAINED", "no", "REFUND", "PO1126A01", "R1", "0.00", "0.06", "-0.06", "no share back"},
		{"2026-11-26", "wechat", "1900000109", "SETTLEMENT", "SETTLEMENT_MISMATCH", "UNEXPLAINED", "no", "PAYMENT", "PO1126A01", "", "89.40", "99.34", "-9.94", "settled short"},
	}
	if len(rows) < len(wantRows) {
		t.Fatalf("%d rows: %q", len(rows), rows)
	}
	for i, want := range wantRows {
		if !slices.Equal(rows[i], want) {
			t.Errorf("row %d:\n got %q\nwant %q", i, rows[i], want)
		}
	}
	rest := map[string][]string{}
	for _, r := range rows[len(wantRows):] {
		if len(r) > 0 && r[0] != "" {
			rest[r[0]] = r[1:]
		}
	}
	for name, want := range map[string][]string{
		"TRADES":                            {"1", "1", "5.00"},
		"FEES":                              {"2", "2", "0.12"},
		"SETTLEMENT":                        {"1", "1", "9.94"},
		"paid (yuan)":                       {"100.00"},
		"refunded (yuan)":                   {"10.00"},
		"fees expected (yuan)":              {"0.54"},
		"fees in the bill's rows (yuan)":    {"0.66"},
		"fees in the bill's summary (yuan)": {"0.66"},
		"net expected (yuan)":               {"89.46"},
		"net to the account (yuan)":         {"79.52"},
		"opening balance (yuan)":            {"1200.00"},
		"closing balance (yuan)":            {"1279.52"},
		"previous day":                      {"2026-11-25"},
		"previous closing balance (yuan)":   {"1200.00"},
	} {
		if !slices.Equal(rest[name], want) {
			t.Errorf("%s: %q, want %q", name, rest[name], want)
		}
	}

	for _, tc := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/admin/reconciliations/99/export.csv", "admin", http.StatusNotFound, orderpay.ENOTFOUND},
		{"/admin/reconciliations/abc/export.csv", "admin", http.StatusBadRequest, orderpay.EINVALID},
		{"/admin/reconciliations/7/export.csv", "", http.StatusUnauthorized, orderpay.EUNAUTHORIZED},
		{"/admin/reconciliations/7/export.csv", "wrong", http.StatusUnauthorized, orderpay.EUNAUTHORIZED},
	} {
		w := adminGet(h, tc.path, tc.token)
		var e struct{ Error struct{ Code string } }
		if w.Code != tc.status || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") ||
			json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Code != tc.code {
			t.Errorf("%s (token %q): %d %s %s, want %d %s", tc.path, tc.token, w.Code, w.Header().Get("Content-Type"), w.Body, tc.status, tc.code)
		}
	}
}

// The document's ReconFigures and ReconLayerSummary name exactly the served fields of
// orderpay.ReconFigures and orderpay.LayerSummary: a field added to one and not the other
// fails here.
func TestOpenAPIReconciliationFiguresAreTheServedShape(t *testing.T) {
	t.Parallel()
	w := adminGet(reconServer(), "/openapi.json", "")
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for schema, typ := range map[string]reflect.Type{"ReconFigures": reflect.TypeFor[orderpay.ReconFigures](),
		"ReconLayerSummary": reflect.TypeFor[orderpay.LayerSummary]()} {
		var documented, served []string
		for name := range doc.Components.Schemas[schema].Properties {
			documented = append(documented, name)
		}
		for f := range typ.Fields() {
			served = append(served, strings.Split(f.Tag.Get("json"), ",")[0])
		}
		slices.Sort(documented)
		slices.Sort(served)
		if !slices.Equal(documented, served) {
			t.Errorf("%s documents %v; the served shape has %v", schema, documented, served)
		}
	}
}

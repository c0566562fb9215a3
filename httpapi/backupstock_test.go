package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// POST /admin/skus takes backup_units for a "payment" or "reserve" SKU and answers with the
// backup in its stock; GET /v1/skus shows it, used and left. Units out of range, or a
// backup for the "order" policy, are 400 EINVALID and write nothing.
func TestAdminSKUBackupUnits(t *testing.T) {
	t.Parallel()
	a := newLimitedAPI(t, RateLimits{})
	post := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/admin/skus", strings.NewReader(body))
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("Authorization", "Bearer admin")
		rec := httptest.NewRecorder()
		a.h.ServeHTTP(rec, r)
		return rec
	}
	type stock struct {
		Available   int64 `json:"available"`
		Sold        int64 `json:"sold"`
		Total       int64 `json:"total"`
		BackupUnits int64 `json:"backup_units"`
		BackupUsed  int64 `json:"backup_used"`
		BackupLeft  int64 `json:"backup_left"`
	}
	type sku struct {
		SKU   string `json:"sku"`
		Stock stock  `json:"stock"`
	}
	for _, bad := range []struct{ body, want string }{
		{`{"sku":"b1","merchant_id":"m1","title":"T","price":100,"stock":5,"backup_units":2}`, "backup_units applies only to stock_policy payment or reserve"},
		{`{"sku":"b1","merchant_id":"m1","title":"T","price":100,"stock":5,"stock_policy":"order","backup_units":2}`, "backup_units applies only to stock_policy payment or reserve"},
		{`{"sku":"b1","merchant_id":"m1","title":"T","price":100,"stock":5,"stock_policy":"payment","backup_units":-1}`, "backup_units must be between 0 and 10000000"},
		{`{"sku":"b1","merchant_id":"m1","title":"T","price":100,"stock":5,"stock_policy":"payment","backup_units":10000001}`, "backup_units must be between 0 and 10000000"},
		{`{"sku":"b1","merchant_id":"m1","title":"T","price":100,"stock":5,"stock_policy":"payment","backup_units":"2"}`, "backup_units must be a whole number"},
	} {
		rec := post(bad.body)
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusBadRequest || e.Error.Code != "EINVALID" ||
			!strings.HasPrefix(e.Error.Message, bad.want) {
			t.Fatalf("%s: %d %s; want 400 EINVALID %q", bad.body, rec.Code, rec.Body, bad.want)
		}
	}
	if _, err := a.store.SKU(t.Context(), "b1"); err == nil {
		t.Fatal("a refused SKU was written")
	}

	rec := post(`{"sku":"late","merchant_id":"m1","title":"Late tea","price":100,"stock":5,"stock_policy":"payment","backup_units":2}`)
	var created sku
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || rec.Code != http.StatusCreated ||
		created.Stock != (stock{Available: 5, Total: 5, BackupUnits: 2, BackupLeft: 2}) {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	rec = post(`{"sku":"held","merchant_id":"m1","title":"Held tea","price":100,"stock":1,"stock_policy":"reserve","backup_units":1}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("a reserve SKU with a backup: %d %s", rec.Code, rec.Body)
	}

	list := a.do(http.MethodGet, "/v1/skus", "", "", "192.0.2.1:1")
	var cat struct {
		SKUs []sku `json:"skus"`
	}
	if err := json.Unmarshal(list.Body.Bytes(), &cat); err != nil || list.Code != http.StatusOK {
		t.Fatalf("catalogue: %d %s", list.Code, list.Body)
	}
	got := map[string]stock{}
	for _, s := range cat.SKUs {
		got[s.SKU] = s.Stock
	}
	if got["late"] != (stock{Available: 5, Total: 5, BackupUnits: 2, BackupLeft: 2}) || got["held"] != (stock{Available: 1, Total: 1, BackupUnits: 1, BackupLeft: 1}) ||
		got["tea"] != (stock{Available: 100, Total: 100}) || !strings.Contains(list.Body.String(), `"backup_used":0`) {
		t.Fatalf("catalogue stock %+v (%s)", got, list.Body)
	}
}

package httpapi

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"orderpay"
)

// A panic in a handler becomes a JSON 500 with a generic message: the client never sees the
// panic value, the stack, or a dropped connection.
func TestPanicBecomesJSONInternalError(t *testing.T) {
	s := &Server{Logger: slog.New(slog.DiscardHandler)}
	h := s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret detail: dsn=postgres://user:pw@db")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/orders/x", nil))
	body, _ := io.ReadAll(rec.Body)
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	if rec.Code != http.StatusInternalServerError || e.Error.Code != orderpay.EINTERNAL || e.Error.Message != "internal error" {
		t.Fatalf("got %d %s", rec.Code, body)
	}
}

// Every error code the domain defines has a status in the one table.
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, code := range []string{orderpay.ECONFLICT, orderpay.EINTERNAL, orderpay.EINVALID, orderpay.ENOTFOUND,
		orderpay.EUNAUTHORIZED, orderpay.EOUTOFSTOCK, orderpay.EUNAVAILABLE, orderpay.ECHANNEL} {
		if statusOf[code] == 0 {
			t.Errorf("no status for %s", code)
		}
	}
}

// An internal error of a request whose client went away (its context ended, and with it
// the transaction) is logged as the client's leaving, not as the server's error; the same
// error of a request still waited for is an internal error.
func TestAbandonedRequestIsNotAnInternalError(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.writeError(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/orders", nil).WithContext(ctx), sql.ErrTxDone)
	if got := logs.String(); strings.Contains(got, "level=ERROR") || !strings.Contains(got, "request abandoned by the client") {
		t.Errorf("an abandoned request logged %q", got)
	}
	logs.Reset()
	s.writeError(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/orders", nil), sql.ErrTxDone)
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "internal error") {
		t.Errorf("a request still waited for logged %q", got)
	}
}

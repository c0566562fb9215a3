package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"orderpay"
)

// EMETHOD is the error code of a known route called with a method it does not take (405,
// with Allow). Like ERATELIMITED it lives here: only the API refuses for this reason.
const EMETHOD = "EMETHOD"

// cleanText reports whether s can be stored as text on both engines: valid UTF-8 without
// NUL (PostgreSQL's text refuses NUL, and a byte sequence that is not UTF-8).
func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// storedHeaders are the request headers whose values orderpay stores or looks up.
var storedHeaders = []string{"Idempotency-Key", "X-Device-Id", "X-Buyer-Id"}

// checkInput refuses, with 400 EINVALID, a request whose path, query or stored headers hold
// a NUL or bytes that are not UTF-8, before any handler passes them to the store. (Bodies are
// checked as they are decoded; channel notifications are not refused for their bytes: the
// notification log keeps them escaped.)
func (s *Server) checkInput(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bad := !cleanText(r.URL.Path)
		for k, vs := range r.URL.Query() {
			bad = bad || !cleanText(k) || slices.ContainsFunc(vs, func(v string) bool { return !cleanText(v) })
		}
		for _, h := range storedHeaders {
			bad = bad || !cleanText(r.Header.Get(h))
		}
		if bad {
			s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "the path, query or headers hold a NUL or bytes that are not UTF-8"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyHoldsNUL reports whether any string of the JSON document raw (a member's name or a
// value, at any depth: objects within objects, arrays of them, maps) holds a NUL. It reads
// the document itself, not the Go value it is decoded into, so no field of any body can be
// missed, whatever its Go type: embedded, unexported, behind a pointer, in a slice or a map,
// or kept raw (json.RawMessage) to be decoded later. JSON can carry a NUL only as the
// escape \u0000, which the tokenizer unescapes. A document that is not valid JSON is left
// for the decoder to refuse with its own message.
func bodyHoldsNUL(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, 0) {
			return true
		}
	}
}

// notFoundOrNotAllowed answers a request no route took: 405 with Allow when the path is a
// route's with another method, 404 otherwise; both as JSON errors.
func (s *Server) notFoundOrNotAllowed(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if m == r.Method {
				continue
			}
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path))
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		var body errorBody
		body.Error.Code, body.Error.Message = EMETHOD, r.Method+" is not a method of "+r.URL.Path+"; it takes "+strings.Join(allow, ", ")
		writeJSON(w, http.StatusMethodNotAllowed, body)
	}
}

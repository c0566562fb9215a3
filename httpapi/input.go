package httpapi

import (
	"net/http"
	"reflect"
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

// checkStrings reports the first string in v (a decoded body: structs, pointers, slices and
// maps of them) that holds a NUL; JSON has already made every string valid UTF-8, and the
// raw body was checked for invalid bytes before (decode).
func checkStrings(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return !strings.ContainsRune(v.String(), 0)
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || checkStrings(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !checkStrings(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !checkStrings(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if !checkStrings(k) || !checkStrings(v.MapIndex(k)) {
				return false
			}
		}
	}
	return true
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

package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// goWords are what a message must never show a client: Go's type names and the decoder's
// own account of a syntax error.
var goWords = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|struct|interface|rune|Go)\b|map\[|\[\]|invalid character|unmarshal|json:`)

// A body that does not decode is 400 EINVALID in the API's words: the field, as the body
// spells it, and the kind of value it takes; or where the body stops being JSON. No message
// names a Go type or repeats the decoder's words.
func TestBadBodiesAreRefusedInTheAPIsWords(t *testing.T) {
	a := newLimitedAPI(t, RateLimits{})
	admin := "Bearer admin"
	for _, c := range []struct {
		name, method, path, auth, body string
		want                           string // what the message starts with
	}{
		{"qty as a string", "POST", "/v1/orders", "", `{"buyer_id":"ann","items":[{"sku":"tea","qty":"1"}]}`, "items.qty must be a whole number"},
		{"qty not whole", "POST", "/v1/orders", "", `{"buyer_id":"ann","items":[{"sku":"tea","qty":1.5}]}`, "items.qty must be a whole number"},
		{"qty too large", "POST", "/v1/orders", "", `{"buyer_id":"ann","items":[{"sku":"tea","qty":99999999999999999999}]}`, "items.qty must be a whole number from -9223372036854775808 to 9223372036854775807"},
		{"not JSON", "POST", "/v1/orders", "", `nope`, "the body is not valid JSON (at byte 2)"},
		{"a broken literal", "POST", "/v1/orders", "", `{"buyer_id":nul}`, "the body is not valid JSON (at byte 16)"},
		{"a trailing comma", "POST", "/v1/orders", "", `{"buyer_id":"ann",}`, "the body is not valid JSON (at byte 19)"},
		{"cut short", "POST", "/v1/orders", "", `{"buyer_id":"ann"`, "the body is not valid JSON: it ends before its last value does"},
		{"empty", "POST", "/v1/orders", "", ``, "the body is empty"},
		{"two values", "POST", "/v1/orders", "", `{} {}`, "the body holds more than one JSON value"},
		{"an array for the body", "POST", "/v1/orders", "", `[]`, "the body must be a JSON object"},
		{"a string for the body", "POST", "/v1/orders", "", `"ann"`, "the body must be a JSON object"},
		{"a number for a string", "POST", "/v1/orders", "", `{"buyer_id":1}`, "buyer_id must be a string"},
		{"an object for an array", "POST", "/v1/orders", "", `{"items":{}}`, "items must be an array"},
		{"a number for an element", "POST", "/v1/orders", "", `{"items":[1]}`, "each element of items must be an object"},
		{"a string for an object", "POST", "/v1/orders", "", `{"address":"home"}`, "address must be an object"},
		{"an array for a nested string", "POST", "/v1/orders", "", `{"address":{"name":[]}}`, "address.name must be a string"},
		{"an unknown field", "POST", "/v1/orders", "", `{"quantity":1}`, `the body has an unknown field "quantity"`},
		{"an embedded field", "PATCH", "/v1/orders/nope/address", "", `{"buyer_id":"ann","phone":13800138000}`, "phone must be a string"},
		{"a channel as a number", "POST", "/v1/orders/nope/pay", "", `{"channel":1}`, "channel must be a string"},
		{"a whole number for an int", "POST", "/admin/shipments/S1/extend", admin, `{"by":"merchant","days":"3"}`, "days must be a whole number"},
		{"a fraction for an int", "POST", "/admin/skus", admin, `{"sku":"x","stock_buckets":1.5}`, "stock_buckets must be a whole number"},
		{"a time as a number", "POST", "/admin/coupons", admin, `{"code":"c","valid_from":5}`, "a time in the body must be a string in RFC 3339"},
		{"a time in words", "POST", "/admin/coupons", admin, `{"code":"c","valid_from":"tomorrow"}`, "a time in the body must be a string in RFC 3339"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			r.RemoteAddr = "192.0.2.1:1"
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, r)
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("not JSON: %s", rec.Body)
			}
			if rec.Code != http.StatusBadRequest || e.Error.Code != "EINVALID" {
				t.Fatalf("%d %+v, want 400 EINVALID", rec.Code, e.Error)
			}
			if !strings.HasPrefix(e.Error.Message, c.want) {
				t.Errorf("message %q, want it to say %q", e.Error.Message, c.want)
			}
			if w := goWords.FindString(e.Error.Message); w != "" {
				t.Errorf("message %q shows the client %q", e.Error.Message, w)
			}
		})
	}
}

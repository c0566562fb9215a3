package orderpay_test

import (
	"errors"
	"fmt"
	"testing"

	"orderpay"
)

func TestErrorCodeAndMessage(t *testing.T) {
	domain := orderpay.Errorf(orderpay.ENOTFOUND, "order %q not found", "O1")
	wrapped := fmt.Errorf("loading: %w", domain)
	foreign := errors.New("pq: relation does not exist at /var/lib/secret")
	for _, tc := range []struct {
		err       error
		code, msg string
	}{
		{nil, "", ""},
		{domain, orderpay.ENOTFOUND, `order "O1" not found`},
		{wrapped, orderpay.ENOTFOUND, `order "O1" not found`},
		// A foreign error is internal, and its text (which may hold paths or SQL) is not shown.
		{foreign, orderpay.EINTERNAL, "internal error"},
	} {
		if got := orderpay.ErrorCode(tc.err); got != tc.code {
			t.Errorf("ErrorCode(%v) = %q, want %q", tc.err, got, tc.code)
		}
		if got := orderpay.ErrorMessage(tc.err); got != tc.msg {
			t.Errorf("ErrorMessage(%v) = %q, want %q", tc.err, got, tc.msg)
		}
	}
}

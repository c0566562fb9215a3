package orderpay

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in the API layer's table.
const (
	ECONFLICT     = "ECONFLICT"     // the state does not allow this, or the key is taken
	EINTERNAL     = "EINTERNAL"     // a bug or a failed dependency; details are logged, not shown
	EINVALID      = "EINVALID"      // the request is malformed or breaks a rule
	ENOTFOUND     = "ENOTFOUND"     // no such entity
	EUNAUTHORIZED = "EUNAUTHORIZED" // missing or wrong credentials, or a bad signature
	EOUTOFSTOCK   = "EOUTOFSTOCK"   // not enough stock for the requested quantity
	EUNAVAILABLE  = "EUNAVAILABLE"  // a channel gave no definite answer; safe to retry the same request
	ECHANNEL      = "ECHANNEL"      // the channel definitively refused the request
	EIDEMPOTENCY  = "EIDEMPOTENCY"  // an Idempotency-Key used before for a different request
	EFORBIDDEN    = "EFORBIDDEN"    // the caller may not do this (a blocked buyer, another buyer's id)
	ELIMIT        = "ELIMIT"        // the buyer's purchase limit for a SKU would be exceeded
	// The buyer caps (BuyerCaps), which keep one buyer from locking a SKU's stock unpaid:
	// EQUANTITYCAP, more units of a SKU in one order than its cap; EUNPAIDCAP, more units
	// of a SKU in the buyer's unpaid orders; EUNPAIDORDERS, more unpaid orders.
	EQUANTITYCAP  = "EQUANTITYCAP"
	EUNPAIDCAP    = "EUNPAIDCAP"
	EUNPAIDORDERS = "EUNPAIDORDERS"
	// EPAID: the payment was paid, so it cannot be closed or cancelled; it stays SUCCESS.
	EPAID = "EPAID"
)

// Error is the one error type of the domain. Its Message is safe to show to a client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("orderpay: %s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound is the ENOTFOUND of an entity that does not exist, or that the caller may not
// see: both read the same, so that a number cannot be probed.
func NotFound(what, key string) *Error { return Errorf(ENOTFOUND, "%s %q not found", what, key) }

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any other
// error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err. Foreign errors may carry internal
// detail (SQL, file paths), so they become a generic message.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

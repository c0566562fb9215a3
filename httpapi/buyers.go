package httpapi

import (
	"context"
	"net/http"

	"orderpay"
)

// BuyerAuth says who the buyer of a request is (package buyerauth).
type BuyerAuth interface {
	// Buyer returns the authenticated buyer, "" when requests are not authenticated (the
	// demo's mode none: a request names its buyer itself), or an EUNAUTHORIZED error.
	Buyer(r *http.Request) (string, error)
	// Mode names how: "none", "jwt" or "header".
	Mode() string
	// Wallet returns the authenticated buyer's wallet identity of key (an openid for an
	// appid, an Alipay user id: buyerauth.Wallet), from the same credential that names the
	// buyer; "" when requests are not authenticated.
	Wallet(r *http.Request, key string) (string, error)
}

// caller is who a buyer route's request comes from.
type caller struct {
	// buyer is the authenticated buyer; "" when requests are not authenticated.
	buyer string
}

// buyerRoute authenticates the buyer of a route (401 EUNAUTHORIZED if they cannot be), then,
// for a write, applies the rate limits keyed on them, before anything of the request is
// read or stored.
func (s *Server) buyerRoute(write bool, next func(w http.ResponseWriter, r *http.Request, c caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c caller
		if s.Buyers != nil {
			b, err := s.Buyers.Buyer(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			c.buyer = b
		}
		if write && !s.allowWrite(w, s.limitKey(r, c)) {
			return
		}
		next(w, r, c)
	}
}

// limitKey names the bucket of a buyer's request: the authenticated buyer; without
// authentication (mode none), the X-Buyer-Id header a client or gateway sends, else the
// client's IP. Without authentication it is a rate limit, not an identity: a client can
// send any id; a made-up one gets a fresh bucket, but the global bucket bounds all of those
// together.
func (s *Server) limitKey(r *http.Request, c caller) string {
	if c.buyer != "" {
		return "buyer:" + c.buyer
	}
	return s.buyerKey(r)
}

// buyerID is the buyer a request acts for: the authenticated one, whom a buyer_id in the
// body must name if it is there (EFORBIDDEN otherwise); without authentication, the body's.
func (c caller) buyerID(body string) (string, error) {
	if c.buyer == "" {
		return body, nil
	}
	if body != "" && body != c.buyer {
		return "", orderpay.Errorf(orderpay.EFORBIDDEN, "buyer_id %q is not the signed-in buyer: leave it out, or name yourself", body)
	}
	return c.buyer, nil
}

// ownOrder reads an order the caller may act on. Another buyer's order is ENOTFOUND, in the
// very words of an order that does not exist, so that order numbers cannot be probed.
// Without authentication (the demo) every order is the caller's.
func (s *Server) ownOrder(ctx context.Context, c caller, no string) (*orderpay.Order, error) {
	o, err := s.Orders.Order(ctx, no)
	if err != nil {
		return nil, err
	}
	if err := owns(c, o); err != nil {
		return nil, err
	}
	return o, nil
}

// owns is nil if the caller may see the order o: an operator, or its own buyer. Another
// buyer's order is not found, as if it did not exist.
func owns(c caller, o *orderpay.Order) error {
	if c.buyer != "" && o.BuyerID != c.buyer {
		return orderpay.NotFound("order", o.No)
	}
	return nil
}

// session is GET /v1/session: how buyers are authenticated here, and who the caller is. It
// answers 200 whether or not the caller is signed in (with the reason when not), so that a
// page can tell a missing or expired token from a server that needs none.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	out := struct {
		BuyerAuth string `json:"buyer_auth"`
		BuyerID   string `json:"buyer_id,omitempty"`
		Reason    string `json:"reason,omitempty"`
	}{BuyerAuth: "none"}
	if s.Buyers != nil {
		out.BuyerAuth = s.Buyers.Mode()
		b, err := s.Buyers.Buyer(r)
		if err != nil {
			out.Reason = orderpay.ErrorMessage(err)
		}
		out.BuyerID = b
	}
	writeJSON(w, http.StatusOK, out)
}

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
	// buyer is the authenticated buyer, or in the demo (mode none) the buyer the request's
	// X-Buyer-Id names; "" for a demo request that names none.
	buyer string
	// demo says that buyer was named by X-Buyer-Id, not authenticated.
	demo bool
}

// DemoBuyerHeader is the header a request names its buyer in when buyers are not
// authenticated (mode none, the demo): the buyer's pages send it on every call.
const DemoBuyerHeader = "X-Buyer-Id"

// buyerRoute authenticates the buyer of a route (401 EUNAUTHORIZED if they cannot be), then,
// for a write, applies the rate limits keyed on them, before anything of the request is
// read or stored.
//
// In the demo (mode none) nothing is authenticated: the request's X-Buyer-Id names its
// buyer, who is then held to their own orders exactly as a signed-in one is (another
// buyer's order is 404, a body's buyer_id must name them). A demo request without the
// header names no buyer and acts for whichever buyer its body or path names, as a shell's
// curl does; it is no protection, only the demo's convenience, and says so in docs/api.md.
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
		if c.buyer == "" && s.demoBuyers() {
			if id := r.Header.Get(DemoBuyerHeader); id != "" {
				if !orderpay.ValidID(id) {
					s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "%s must be a buyer id: 1 to 64 letters, digits, '.', '_' or '-'", DemoBuyerHeader))
					return
				}
				c.buyer, c.demo = id, true
			}
		}
		if write && !s.allowWrite(w, s.limitKey(r, c)) {
			return
		}
		next(w, r, c)
	}
}

// demoBuyers says whether buyers are not authenticated here (mode none, the demo).
func (s *Server) demoBuyers() bool { return s.Buyers == nil || s.Buyers.Mode() == "none" }

// limitKey names the bucket of a buyer's request: the authenticated buyer; without
// authentication (mode none), the buyer X-Buyer-Id names, else the client's address.
// Without authentication it is a rate limit, not an identity: a client can send any id; a
// made-up one gets a fresh bucket, but the global bucket bounds all of those together.
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
		if c.demo {
			return "", orderpay.Errorf(orderpay.EFORBIDDEN, "buyer_id %q is not the buyer %s names: leave it out, or name the same buyer", body, DemoBuyerHeader)
		}
		return "", orderpay.Errorf(orderpay.EFORBIDDEN, "buyer_id %q is not the signed-in buyer: leave it out, or name yourself", body)
	}
	return c.buyer, nil
}

// ownOrder reads an order the caller may act on. Another buyer's order is ENOTFOUND, in the
// very words of an order that does not exist, so that order numbers cannot be probed.
// A demo request that names no buyer (no X-Buyer-Id) may act on every order.
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

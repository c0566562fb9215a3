package httpapi

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

	"orderpay/buyerauth"
)

// ECROSSSITE is the error code of a buyer's or an operator's write that a browser sent from
// another site (403), and EMEDIATYPE of one whose body is not JSON where writes must be
// (415). Like ERATELIMITED they live here: only the API refuses for these reasons.
const (
	ECROSSSITE = "ECROSSSITE"
	EMEDIATYPE = "EMEDIATYPE"
)

// guardedWrite reports whether the route of pattern is a write a browser could be made to
// send on someone's behalf: a POST, PUT, PATCH or DELETE of a buyer's order (/v1/orders…,
// whose buyer a gateway may know by a cookie, and whose scan session is one) or of an
// operator (/admin/…, whose token a proxy may add). The channels' notifications
// (/notify/…) and the payments API's and tills' routes (/v1/payments…, /v1/refunds…,
// /v1/pos/…: an app's API key, which no browser adds by itself) are not guarded: channels
// post forms and XML, and apps are servers.
func guardedWrite(pattern string) bool {
	method, path, _ := strings.Cut(pattern, " ")
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return path == "/v1/orders" || strings.HasPrefix(path, "/v1/orders/") || strings.HasPrefix(path, "/admin/")
	}
	return false
}

// sameSiteWrites wraps a guarded write (guardedWrite). A request a browser marks as from
// another site is refused, 403 ECROSSSITE: Sec-Fetch-Site other than same-origin or none,
// or, from a browser too old to send it, an Origin that is neither the request's own host
// nor the public URL's (http.CrossOriginProtection). Clients that are not browsers send
// neither header and pass. With --buyer-auth header, where the shop's gateway may know the
// buyer by a cookie, a write must also be JSON: a body of any other type, or a Content-Type
// that is not application/json, is refused, 415 EMEDIATYPE, since an HTML form or a simple
// cross-site fetch can send only form, multipart or text/plain bodies. A write without a
// body and without a Content-Type (a cancel) passes this check; the one above covers it.
func (s *Server) sameSiteWrites(pattern string, h http.Handler) http.Handler {
	if !guardedWrite(pattern) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.crossOrigin.Check(r); err != nil {
			writeCode(w, http.StatusForbidden, ECROSSSITE, "a write from another site is refused: its Origin or Sec-Fetch-Site is not this service's")
			return
		}
		if s.Buyers != nil && s.Buyers.Mode() == buyerauth.ModeHeader && !jsonOrNoBody(r) {
			writeCode(w, http.StatusUnsupportedMediaType, EMEDIATYPE, "a write's body must be sent as Content-Type: application/json")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// jsonOrNoBody reports whether r's body is JSON (Content-Type application/json, with or
// without parameters), or r has neither a body nor a Content-Type.
func jsonOrNoBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return r.ContentLength == 0
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// newCrossOrigin is the cross-site check of the guarded writes: the request's own host is
// same-origin, and so is the origin of publicURL (--public-url), for a proxy in front that
// rewrites Host.
func (s *Server) newCrossOrigin() *http.CrossOriginProtection {
	c := http.NewCrossOriginProtection()
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err == nil && u.Scheme != "" && u.Host != "" {
			if err := c.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
				s.Logger.Warn("the public URL's origin is not trusted for writes", "err", err)
			}
		}
	}
	return c
}

// writeCode answers a refusal of the API's own (not a domain error): status, and the JSON
// error with code.
func writeCode(w http.ResponseWriter, status int, code, message string) {
	var body errorBody
	body.Error.Code, body.Error.Message = code, message
	writeJSON(w, status, body)
}

package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"

	"orderpay"
)

// The pay page's single code (聚合码, docs/pages.md): one QR code on the desktop cashier that
// either wallet can scan. It holds a URL of the shop's own, /pay/{order_no}/scan?t=TOKEN,
// where TOKEN is an HMAC the server makes for that order and a few minutes. Opened inside
// WeChat or Alipay, the URL sends the browser through the wallet's web OAuth (snsapi_base,
// auth_base: the buyer sees nothing) and back to /pay/{order_no}/oauth/{channel}, which
// learns the scanning buyer's openid or Alipay user id from the wallet itself and keeps it
// in a scan session: an HttpOnly, signed cookie of at most 30 minutes, scoped by its path
// and its signature to that one order. The session is whoever scanned, paying that order
// with their own money: it reads the order (GET /v1/orders/{order_no}: the cashier's view,
// without the buyer's address) and pays it (POST /v1/orders/{order_no}/pay) with the
// wallet identity the wallet vouched for, whatever buyer login is in force; it can do
// nothing else, and nothing of it carries over to another order. A token, state or cookie
// that does not verify gives nothing and stores nothing: tokens and OAuth states are
// signed, never stored.

// Cashier configures the single code. Without Key it is off: its routes answer 404 and no
// request is taken for a scan session.
type Cashier struct {
	// Key signs the codes' tokens, the OAuth states and the scan sessions (a key of its
	// own is derived for each). Instances serving one shop share it.
	Key []byte
	// PublicURL is the shop's address as buyers' phones and the wallets reach it
	// (https://shop.example): the code's URL and the OAuth return are made on it. Required
	// with Key.
	PublicURL string
	// OAuth learns a scanning buyer's wallet identity, by channel. A wallet without it
	// scans the code into a session without an identity, which pays by the methods that
	// need none (Alipay WAP, say).
	OAuth map[string]WalletOAuth
}

// WalletOAuth is one wallet's web OAuth, as its channel adapter runs it
// (wechat.Channel.AuthorizeURL and OpenID; alipay.Channel.AuthorizeURL and UserID).
type WalletOAuth struct {
	// AuthorizeURL is the wallet's page the browser is sent to; it comes back to
	// redirectURI with the code and state.
	AuthorizeURL func(redirectURI, state string) (string, error)
	// Identity exchanges the code for the buyer's openid (WeChat, for the official
	// account's appid) or Alipay user id. A code the wallet refuses is EUNAUTHORIZED.
	Identity func(ctx context.Context, code string) (string, error)
}

// Lifetimes of what the single code hands out.
const (
	// CodeLifetime is how long a code's token opens a scan: the pay page draws a new one
	// before it ends.
	CodeLifetime = 10 * time.Minute
	// OAuthStateLifetime is how long the wallet's OAuth may take to come back.
	OAuthStateLifetime = 10 * time.Minute
	// ScanSessionLifetime is how long a scan session reads and pays its order.
	ScanSessionLifetime = 30 * time.Minute
)

// scanCookie is the scan session's cookie.
const scanCookie = "orderpay_scan"

// cashierRoutes adds the single code's routes, all pages (a browser follows them; they are
// not API): the code's image for the order's own buyer, the URL it holds, and the OAuth
// return. Their errors are JSON, as every route's.
func (s *Server) cashierRoutes(mux *routeMux) {
	mux.HandleFunc("GET /pay/{order_no}/code.png", s.buyerRoute(false, s.oneCodeImage))
	mux.HandleFunc("GET /pay/{order_no}/scan", s.scanEntry)
	mux.HandleFunc("GET /pay/{order_no}/oauth/{channel}", s.oauthReturn)
}

// cashierOn is nil when the single code is configured, and the 404 to answer otherwise.
func (s *Server) cashierOn() error {
	if len(s.Cashier.Key) == 0 || s.Cashier.PublicURL == "" {
		return orderpay.Errorf(orderpay.ENOTFOUND, "the single code is not configured")
	}
	return nil
}

// subKey is the key of one use of the cashier's key, so that a token is never taken for a
// state or a cookie.
func (s *Server) subKey(use string) []byte {
	m := hmac.New(sha256.New, s.Cashier.Key)
	m.Write([]byte("orderpay cashier " + use))
	return m.Sum(nil)
}

// sign is the MAC of parts under the key of use, base64url without padding.
func (s *Server) sign(use string, parts ...string) string {
	m := hmac.New(sha256.New, s.subKey(use))
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// signedUntil is "EXP.MAC": parts signed under use until exp (Unix seconds, base 36).
func (s *Server) signedUntil(use string, exp time.Time, parts ...string) string {
	e := strconv.FormatInt(exp.Unix(), 36)
	return e + "." + s.sign(use, append(parts, e)...)
}

// verifyUntil reports whether v is signedUntil(use, …, parts…) and has not expired, nor
// reaches further ahead than life (a value only this key can make, but never one that
// outlives the rules it was made under).
func (s *Server) verifyUntil(use, v string, life time.Duration, parts ...string) bool {
	e, mac, ok := strings.Cut(v, ".")
	if !ok || len(e) > 13 || len(mac) > 32 {
		return false
	}
	exp, err := strconv.ParseInt(e, 36, 64)
	now := s.Clock.Now()
	if err != nil || !now.Before(time.Unix(exp, 0)) || time.Unix(exp, 0).After(now.Add(life+time.Minute)) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(mac), []byte(s.sign(use, append(parts, e)...))) == 1
}

// payPagePath is the order's pay page.
func payPagePath(orderNo string) string { return "/pay/" + url.PathEscape(orderNo) }

// oneCodeImage is GET /pay/{order_no}/code.png: the single code of the buyer's own unpaid
// order as a PNG, with the URL it holds in X-Orderpay-Code-URL and when its token ends in
// X-Orderpay-Code-Expires-At (the page draws a new one before). 404 when the single code is
// not configured, 409 for an order no longer waiting for payment.
func (s *Server) oneCodeImage(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.cashierOn(); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.ownOrder(r.Context(), c, r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if o.Status != orderpay.OrderPendingPayment {
		s.writeError(w, r, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s: there is nothing to pay", o.No, o.Status))
		return
	}
	exp := s.Clock.Now().Add(CodeLifetime).Truncate(time.Second)
	target := strings.TrimSuffix(s.Cashier.PublicURL, "/") + payPagePath(o.No) + "/scan?t=" + s.signedUntil("code", exp, o.No)
	png, err := qrcode.Encode(target, qrcode.Medium, 256)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Orderpay-Code-URL", target)
	h.Set("X-Orderpay-Code-Expires-At", exp.UTC().Format(time.RFC3339))
	_, _ = w.Write(png)
}

// walletOf is the wallet whose in-app browser sent r, by its User-Agent: "wechat"
// (MicroMessenger), "alipay" (AlipayClient), or "" for any other browser.
func walletOf(r *http.Request) string {
	ua := r.Header.Get("User-Agent")
	switch {
	case strings.Contains(ua, "MicroMessenger"):
		return orderpay.ChannelWechat
	case strings.Contains(ua, "AlipayClient"):
		return orderpay.ChannelAlipay
	}
	return ""
}

// scanEntry is GET /pay/{order_no}/scan?t=TOKEN, what the single code holds. A token that
// does not verify for that order and now is 403, and nothing is stored. Inside a wallet
// with OAuth, the browser goes (302) to the wallet's OAuth page, with a signed state, to
// come back to oauthReturn; any other browser (or a wallet without OAuth) gets a scan
// session without a wallet identity and goes (303) to the pay page.
func (s *Server) scanEntry(w http.ResponseWriter, r *http.Request) {
	if err := s.cashierOn(); err != nil {
		s.writeError(w, r, err)
		return
	}
	no := r.PathValue("order_no")
	if !s.verifyUntil("code", r.URL.Query().Get("t"), CodeLifetime, no) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EFORBIDDEN, "this code is not one of the shop's, or it expired: scan the pay page's code again"))
		return
	}
	wallet := walletOf(r)
	if oauth, ok := s.Cashier.OAuth[wallet]; ok && oauth.AuthorizeURL != nil {
		state := s.signedUntil("state", s.Clock.Now().Add(OAuthStateLifetime), no, wallet)
		to, err := oauth.AuthorizeURL(s.oauthReturnURL(no, wallet), state)
		if err == nil {
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		s.Logger.Warn("single code: no OAuth page", "order_no", no, "channel", wallet, "err", err)
	}
	s.startScanSession(w, r, no, wallet, "")
}

// oauthReturnURL is where a wallet's OAuth sends the browser back for order no.
func (s *Server) oauthReturnURL(no, wallet string) string {
	return strings.TrimSuffix(s.Cashier.PublicURL, "/") + payPagePath(no) + "/oauth/" + wallet
}

// oauthReturn is GET /pay/{order_no}/oauth/{channel}?code|auth_code=…&state=…, where the
// wallet's OAuth comes back. The state must verify for that order and wallet (403
// otherwise, nothing stored); the code is exchanged with the wallet for the scanning
// buyer's identity (at most as often as the buyers' write limits allow, per order), which
// starts the scan session. A code the wallet refuses is 401; a wallet that does not
// answer, or answers nothing usable, 503. Without a code (the buyer declined) the session has no identity.
func (s *Server) oauthReturn(w http.ResponseWriter, r *http.Request) {
	if err := s.cashierOn(); err != nil {
		s.writeError(w, r, err)
		return
	}
	no, wallet := r.PathValue("order_no"), r.PathValue("channel")
	oauth, ok := s.Cashier.OAuth[wallet]
	if !ok || oauth.Identity == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no OAuth for %q", wallet))
		return
	}
	q := r.URL.Query()
	if !s.verifyUntil("state", q.Get("state"), OAuthStateLifetime, no, wallet) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EFORBIDDEN, "this OAuth return is not for this order, or it came too late: scan the pay page's code again"))
		return
	}
	code := q.Get("code")
	if wallet == orderpay.ChannelAlipay {
		code = q.Get("auth_code")
	}
	if code == "" {
		s.startScanSession(w, r, no, wallet, "")
		return
	}
	if !s.allowWrite(w, "scan:"+no) {
		return
	}
	id, err := oauth.Identity(r.Context(), code)
	if err != nil {
		switch orderpay.ErrorCode(err) {
		case orderpay.EUNAUTHORIZED:
			err = orderpay.Errorf(orderpay.EUNAUTHORIZED, "%s did not vouch for the buyer: %s", wallet, orderpay.ErrorMessage(err))
		default:
			s.Logger.Warn("single code: OAuth code exchange failed", "order_no", no, "channel", wallet, "err", err)
			err = orderpay.Errorf(orderpay.EUNAVAILABLE, "%s did not answer: scan the code again", wallet)
		}
		s.writeError(w, r, err)
		return
	}
	if id == "" || len(id) > 128 || !cleanText(id) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EUNAVAILABLE, "%s answered no usable identity", wallet))
		return
	}
	s.startScanSession(w, r, no, wallet, id)
}

// scanSession is whoever scanned the single code of one order: the wallet they scanned it
// with ("" for another browser) and the identity that wallet vouched for ("" for none).
type scanSession struct {
	orderNo, wallet, identity string
	expires                   time.Time
}

// startScanSession sets the scan session's cookie, for the order's own API paths only, and
// sends the browser (303) to the order's pay page.
func (s *Server) startScanSession(w http.ResponseWriter, r *http.Request, no, wallet, identity string) {
	exp := s.Clock.Now().Add(ScanSessionLifetime).Truncate(time.Second)
	payload := strings.Join([]string{no, wallet, identity}, "\n")
	value := base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + s.signedUntil("session", exp, payload)
	http.SetCookie(w, &http.Cookie{Name: scanCookie, Value: value, Path: "/v1/orders/" + url.PathEscape(no),
		MaxAge: int(ScanSessionLifetime / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || strings.HasPrefix(s.Cashier.PublicURL, "https://")})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, payPagePath(no), http.StatusSeeOther)
}

// scanSessionOf is the scan session r carries for the order of its path, or nil: none, or
// none that verifies for that order now.
func (s *Server) scanSessionOf(r *http.Request) *scanSession {
	if len(s.Cashier.Key) == 0 {
		return nil
	}
	no := r.PathValue("order_no")
	for _, c := range r.CookiesNamed(scanCookie) {
		enc, signed, ok := strings.Cut(c.Value, ".")
		if !ok || len(c.Value) > 1024 {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || !s.verifyUntil("session", signed, ScanSessionLifetime, string(raw)) {
			continue
		}
		parts := strings.SplitN(string(raw), "\n", 3)
		if len(parts) != 3 || parts[0] != no {
			continue
		}
		e, _, _ := strings.Cut(signed, ".")
		exp, _ := strconv.ParseInt(e, 36, 64)
		return &scanSession{orderNo: no, wallet: parts[1], identity: parts[2], expires: time.Unix(exp, 0)}
	}
	return nil
}

type scanKey struct{}

// scanSessionFrom is the scan session a request was taken for (scanOr), or nil.
func scanSessionFrom(ctx context.Context) *scanSession {
	sess, _ := ctx.Value(scanKey{}).(*scanSession)
	return sess
}

// scanOr serves a request of an order's route that carries a scan session for that order
// with scanned, as whoever scanned it, whatever buyer login is in force; any other request
// with next.
func (s *Server) scanOr(scanned func(w http.ResponseWriter, r *http.Request, sess *scanSession), next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if sess := s.scanSessionOf(r); sess != nil {
			scanned(w, r.WithContext(context.WithValue(r.Context(), scanKey{}, sess)), sess)
			return
		}
		next(w, r)
	}
}

// scanWrite serves a write of an order's route (pay, return) from a scan session: the
// buyers' write limits, keyed on the order, then next as no buyer (the pay handler's payer
// is the session's, sess.payer).
func (s *Server) scanWrite(next func(w http.ResponseWriter, r *http.Request, c caller)) func(w http.ResponseWriter, r *http.Request, sess *scanSession) {
	return func(w http.ResponseWriter, r *http.Request, sess *scanSession) {
		if !s.allowWrite(w, "scan:"+sess.orderNo) {
			return
		}
		next(w, r, caller{})
	}
}

// payer is the wallet identity a method that needs one pays for, from a scan session: the
// one its wallet vouched for, for that wallet's methods (WeChat's official account: jsapi;
// Alipay: inapp). A method that needs none needs nothing; a request that names one itself
// is refused (400), and a method whose identity the session does not have is 403.
func (sess *scanSession) payer(channel string, m orderpay.PayMethod, openID, alipayUserID string) (string, error) {
	if openID != "" || alipayUserID != "" {
		return "", orderpay.Errorf(orderpay.EINVALID, "paying by the single code, the payer is whom the wallet vouched for, never the request: leave out openid and alipay_user_id")
	}
	need := orderpay.PayerNeeded(channel, m)
	switch {
	case need == "":
		return "", nil
	case sess.identity != "" && channel == sess.wallet && (channel == orderpay.ChannelAlipay || m == orderpay.MethodJSAPI):
		return sess.identity, nil
	}
	return "", orderpay.Errorf(orderpay.EFORBIDDEN, "%s %s pays for the wallet user who scanned the code, and no wallet vouched for one here: scan the code inside that wallet, or pay another way", channel, m)
}

// scanOrderJSON is an order as whoever scanned its single code reads it: what the cashier
// shows (status, amount, deadline, what is bought), never the buyer's id or address.
type scanOrderJSON struct {
	OrderNo          string               `json:"order_no"`
	Status           orderpay.OrderStatus `json:"status"`
	Payable          int64                `json:"payable"`
	PayDeadline      time.Time            `json:"pay_deadline"`
	RemainingSeconds int64                `json:"remaining_seconds"`
	Remaining        string               `json:"remaining"`
	ServerTime       time.Time            `json:"server_time"`
	PaidAt           *time.Time           `json:"paid_at,omitempty"`
	CancelledAt      *time.Time           `json:"cancelled_at,omitempty"`
	Items            []scanItemJSON       `json:"items"`
	// OpenAttempt is the newest instruction the session can pay (not a QR code, and for a
	// method that names its payer, one for the session's identity).
	OpenAttempt *openAttemptJSON `json:"open_attempt,omitempty"`
	Scan        scanJSON         `json:"scan"`
}

type scanItemJSON struct {
	Title string `json:"title"`
	Qty   int64  `json:"qty"`
}

// scanJSON says the request was read as a scan session's: the wallet it was scanned with,
// whether that wallet vouched for the buyer, and when the session ends.
type scanJSON struct {
	Wallet     string    `json:"wallet"`
	Identified bool      `json:"identified"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// scanOrder is GET /v1/orders/{order_no} from a scan session. Like the buyer's own read, it
// asks the channel while the order waits (the payment center's poll), so that the page
// turns to paid by the channel's word alone.
func (s *Server) scanOrder(w http.ResponseWriter, r *http.Request, sess *scanSession) {
	page, err := s.Orders.Page(r.Context(), sess.orderNo)
	if err == nil {
		page, err = s.Orders.WatchPage(r.Context(), page)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, now := page.Order, s.Clock.Now()
	out := scanOrderJSON{OrderNo: o.No, Status: o.Status, Payable: o.Payable, PayDeadline: o.PayDeadline.UTC(),
		RemainingSeconds: o.RemainingSeconds(now), ServerTime: now.UTC(), PaidAt: optionalTime(o.PaidAt), CancelledAt: optionalTime(o.ClosedAt),
		Items: []scanItemJSON{}, Scan: scanJSON{Wallet: sess.wallet, Identified: sess.identity != "", ExpiresAt: sess.expires.UTC()}}
	out.Remaining = orderpay.Countdown(out.RemainingSeconds)
	for _, it := range o.Items {
		out.Items = append(out.Items, scanItemJSON{Title: it.Title, Qty: it.Qty})
	}
	if o.Status == orderpay.OrderPendingPayment {
		var mine []orderpay.ChannelOrder
		for _, co := range page.Attempts {
			if co.Method != "" && co.Method != orderpay.MethodQR && (co.Payer == "" || co.Payer == sess.identity) {
				mine = append(mine, co)
			}
		}
		if co := s.openOf(mine, "", ""); co != nil {
			out.OpenAttempt = openAttemptOf(co)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

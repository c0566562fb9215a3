// Package httpapi is orderpay's REST API: buyer endpoints under /v1, channel notifications
// under /notify, admin endpoints under /admin behind a bearer token, and ops endpoints.
// Every error is JSON {"error":{"code","message"}} with the status from one table; the
// buyers' writes are rate-limited (429 ERATELIMITED with Retry-After) before they reach it.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"orderpay"
	"orderpay/apppay"
	"orderpay/buyerauth"
	"orderpay/order"
	"orderpay/payment"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Server serves the API.
type Server struct {
	Orders   *order.Service
	Payments *payment.Service
	// AdminToken is the single admin of development: its holder is operator "admin" with
	// role admin. Optional with Operators.
	AdminToken string
	// Operators authenticates named operators (the operators file). Optional: without it
	// and without AdminToken every admin request is refused.
	Operators OperatorAuth
	// Audit keeps every operator's write (GET /admin/audit, and the orders' timelines).
	// Optional.
	Audit orderpay.AuditLog
	// Retention runs a retention pass now (POST /admin/retention). Optional.
	Retention func(ctx context.Context) (orderpay.RetentionResult, error)
	Clock     orderpay.Clock
	Logger    *slog.Logger
	// Ready reports whether dependencies are up, for /readyz. Optional.
	Ready func(ctx context.Context) error
	// Channels describes the configured channels for GET /admin/channels: mode, ids and
	// public fingerprints by channel name. Optional.
	Channels func() map[string]orderpay.ChannelDescription
	// Buyers authenticates the buyer of every buyer route. Optional: nil is mode none (the
	// demo), where a request names its buyer itself.
	Buyers BuyerAuth
	// WalletAppID is the WeChat appid a channel's method pays for (the official account's
	// for jsapi, the mini program's for mini): the buyer's openid is the one for it.
	// Optional: without it the buyer's openid is looked for under no appid.
	WalletAppID func(channel string, method orderpay.PayMethod) string
	// TrustedProxies are the addresses of the proxies in front of the API: from them, and
	// only from them, the client's own address is read from X-Forwarded-For (the last
	// address not theirs) or X-Real-IP (clientIP), for every per-address limit, the
	// notification log and the buyer's pay. Optional: without it the peer is the client.
	TrustedProxies []netip.Prefix
	// PublicURL is the API's public base URL (--public-url): a write whose Origin is its
	// origin is same-origin, as is one from the request's own host (crosssite.go).
	// Optional.
	PublicURL string
	// RateLimits bounds the buyers' writes. Zero limits are off.
	RateLimits RateLimits
	// Downstream serves the example consumers' admin reads (downstream.go). Optional: nil
	// answers them 404.
	Downstream Downstream
	// Ops serves the operations console's reads, the buyer's order list and the QR images
	// (ops.go). Optional: nil answers them 404.
	Ops orderpay.OpsReader
	// Webhooks serves the webhook deliveries' admin endpoints (webhooks.go). Optional: nil
	// answers them 404.
	Webhooks Webhooks
	// Apps serves the business apps' payments API and the admins' apps (apps.go).
	// Optional: nil answers them 404.
	Apps *apppay.Service

	// StreamLimits bound the order event streams (events.go). Zero fields take defaults.
	StreamLimits StreamLimits
	streams      streams // the open event streams
	// Reconcile serves reconciliation's admin endpoints (reconcile.go). Optional: nil
	// answers them 404.
	Reconcile Reconciler
	// Cashier configures the pay page's single code, which either wallet scans
	// (cashier.go). Optional: without its key the single code is off.
	Cashier Cashier
	// Returns verifies, by channel, what a cashier adds to the shop's return address
	// (payreturn.go). Optional: without one, every return just asks the channel.
	Returns map[string]ReturnCheck

	global, perBuyer, admins *Limiter                    // made by Handler from RateLimits
	appAuth                  *Limiter                    // the payments API's failed keys, per address and per key id
	crossOrigin              *http.CrossOriginProtection // the guarded writes' cross-site check (crosssite.go)
}

// RateLimits are the token buckets in front of the buyers' writes (create, pay, cancel),
// each of which takes row locks and stock, and pay a signed channel call. Reads, channel
// notifications, ops and admin endpoints are never limited: a notification refused would
// only come back later, and the payment behind it would wait.
type RateLimits struct {
	Global   Limit // all buyers' writes together
	PerBuyer Limit // each buyer's (see limitKey)
	// Admin bounds the admin routes' requests: each operator's (so that the console's reads
	// cannot flood the store), and, apart from them, the requests with a missing or wrong
	// token per client address (clientIP). A wrong token past the limit is 429; a valid one
	// is only ever limited by its own operator's bucket, never by others' failures.
	Admin Limit
	// AppAuthFailures bounds the payments API's requests with a missing or wrong API key,
	// per client address (clientIP) and per key id the key names; a wrong key past either is
	// 429. A valid key is never refused for them.
	AppAuthFailures Limit
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	if s.Clock == nil {
		s.Clock = orderpay.SystemClock{}
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	s.global, s.perBuyer, s.admins = NewLimiter(s.RateLimits.Global), NewLimiter(s.RateLimits.PerBuyer), NewLimiter(s.RateLimits.Admin)
	s.appAuth = NewLimiter(s.RateLimits.AppAuthFailures)
	s.crossOrigin = s.newCrossOrigin()
	mux := newRouteMux()
	mux.guard = s.sameSiteWrites
	s.register(mux)
	mux.mux.HandleFunc("/", s.notFoundOrNotAllowed(mux.mux))
	return s.recoverPanics(s.checkInput(mux.mux))
}

// register adds every route. All of them go through mux, which records their patterns, so
// that the OpenAPI test can check the document against the real list (routes.go).
func (s *Server) register(mux *routeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": orderpay.Build().String()})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	mux.HandleFunc("GET /v1/skus", s.catalogue)
	mux.HandleFunc("GET /v1/session", s.session)
	mux.HandleFunc("POST /v1/orders", s.buyerRoute(true, s.createOrder))
	s.ticketRoutes(mux)
	// An order's read and pay also serve whoever scanned its single code (cashier.go).
	mux.HandleFunc("GET /v1/orders/{order_no}", s.scanOr(s.scanOrder, s.buyerRoute(false, s.getOrder)))
	mux.HandleFunc("POST /v1/orders/{order_no}/pay", s.scanOr(s.scanWrite(s.pay), s.buyerRoute(true, s.pay)))
	mux.HandleFunc("POST /v1/orders/{order_no}/cancel", s.buyerRoute(true, s.cancel))
	mux.HandleFunc("POST /v1/orders/{order_no}/return", s.scanOr(s.scanWrite(s.payReturn), s.buyerRoute(true, s.payReturn)))
	mux.HandleFunc("POST /notify/{channel}", s.notify)
	mux.HandleFunc("POST /admin/skus", s.admin(s.createSKU))
	mux.HandleFunc("POST /admin/payments/{payment_no}/confirm", s.admin(s.confirmPayment))
	mux.HandleFunc("GET /admin/pending-queries", s.admin(s.pendingQueries))
	mux.HandleFunc("GET /admin/payments/stuck", s.admin(s.stuckPayments))
	mux.HandleFunc("GET /admin/blocklist", s.admin(s.blocklist))
	mux.HandleFunc("PUT /admin/blocklist/{kind}/{value}", s.admin(s.block))
	mux.HandleFunc("DELETE /admin/blocklist/{kind}/{value}", s.admin(s.unblock))
	s.couponRoutes(mux)
	s.downstreamRoutes(mux)
	s.fulfilmentRoutes(mux)
	s.opsRoutes(mux)
	s.pageRoutes(mux)
	s.webhookRoutes(mux)
	s.reconcileRoutes(mux)
	s.refundRoutes(mux)
	s.appRoutes(mux)
	mux.HandleFunc("GET /admin/session", s.admin(s.adminSession))
	mux.HandleFunc("GET /admin/audit", s.admin(s.auditLog))
	mux.HandleFunc("POST /admin/retention", s.admin(s.retain))
}

// statusOf is the one table from error code to HTTP status.
var statusOf = map[string]int{
	orderpay.EINVALID:      http.StatusBadRequest,
	orderpay.EUNAUTHORIZED: http.StatusUnauthorized,
	orderpay.ENOTFOUND:     http.StatusNotFound,
	orderpay.ECONFLICT:     http.StatusConflict,
	orderpay.EOUTOFSTOCK:   http.StatusConflict,
	orderpay.EPAID:         http.StatusConflict,
	orderpay.ECHANNEL:      http.StatusBadGateway,
	orderpay.EUNAVAILABLE:  http.StatusServiceUnavailable,
	orderpay.EINTERNAL:     http.StatusInternalServerError,
	orderpay.EIDEMPOTENCY:  http.StatusUnprocessableEntity,
	orderpay.EFORBIDDEN:    http.StatusForbidden,
	orderpay.ELIMIT:        http.StatusConflict,
	orderpay.EQUANTITYCAP:  http.StatusConflict,
	orderpay.EUNPAIDCAP:    http.StatusConflict,
	orderpay.EUNPAIDORDERS: http.StatusConflict,
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers with the error's code and client-safe message. Only internal errors
// are logged with their detail, which the client never sees.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := orderpay.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	switch {
	case code == orderpay.EINTERNAL && r.Context().Err() != nil:
		// The client went away (it hung up, or its deadline passed): the request's context
		// ended, and with it the store's transaction, which then reads as "context
		// canceled" or "transaction has already been committed or rolled back". Nothing
		// is wrong with the server; nobody reads the answer.
		s.Logger.Info("request abandoned by the client", append([]any{"method", r.Method, "path", r.URL.Path, "err", err}, entityAttrs(r)...)...)
	case code == orderpay.EINTERNAL:
		s.Logger.Error("internal error", append([]any{"method", r.Method, "path", r.URL.Path, "err", err}, entityAttrs(r)...)...)
	}
	var body errorBody
	body.Error.Code, body.Error.Message = code, orderpay.ErrorMessage(err)
	noteError(r, code, body.Error.Message)
	writeJSON(w, status, body)
}

// entityAttrs are the order, payment and delivery numbers a request's path names, so that a
// log line about it can be found by them.
func entityAttrs(r *http.Request) []any {
	var attrs []any
	for _, name := range []string{"order_no", "payment_no", "id"} {
		if v := r.PathValue(name); v != "" {
			if name == "id" {
				name = "delivery_id"
			}
			attrs = append(attrs, name, v)
		}
	}
	return attrs
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly: one object, no unknown fields (a misspelt "quantity"
// must not silently become qty 0), within MaxBodyBytes, valid UTF-8 (JSON would quietly turn
// bad bytes into U+FFFD) and no NUL in any string (PostgreSQL's text refuses it): a body
// either engine could not store as sent is refused before anything is written.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return orderpay.Errorf(orderpay.EINVALID, "request body is larger than %d bytes", MaxBodyBytes)
		}
		return orderpay.Errorf(orderpay.EINVALID, "request body unreadable")
	}
	if !utf8.Valid(raw) {
		return orderpay.Errorf(orderpay.EINVALID, "request body is not valid UTF-8")
	}
	if bodyHoldsNUL(raw) {
		return orderpay.Errorf(orderpay.EINVALID, "a string in the body holds a NUL character")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return orderpay.Errorf(orderpay.EINVALID, "%s", jsonProblem(err, dst))
	}
	if dec.More() {
		return orderpay.Errorf(orderpay.EINVALID, "the body holds more than one JSON value: send one object")
	}
	return nil
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// admin guards an admin handler with the bearer token, compared in constant time, behind
// the admin rate limit per client address.

// allowWrite applies the rate limits to a buyer's write before anything of it is read or
// stored, and answers 429 if they refuse it. The buyer's bucket is asked first, so that a
// buyer over its limit is refused without spending the tokens every buyer shares. The clock
// is read with its monotonic reading (not orderpay.Now, which drops it to match stored
// times), so that a step of the wall clock neither refills nor freezes the buckets.
func (s *Server) allowWrite(w http.ResponseWriter, key string) bool {
	now := s.Clock.Now()
	if ok, wait := s.perBuyer.Allow(key, now); !ok {
		refuse(w, wait, "too many requests "+countedBy(key))
		return false
	}
	if ok, wait := s.global.Allow("", now); !ok {
		refuse(w, wait, "too many requests to this service")
		return false
	}
	return true
}

// countedBy says, in a refusal's words, whose requests a per-buyer bucket counts: its key is
// "buyer:<id>" (limitKey), "ip:<address>" (buyerKey) or "scan:<order_no>" (a scan session's
// or an OAuth return's, cashier.go).
func countedBy(key string) string {
	switch {
	case strings.HasPrefix(key, "ip:"):
		return "from this address"
	case strings.HasPrefix(key, "scan:"):
		return "for this order's pay code"
	}
	return "from this buyer"
}

// buyerKey names the bucket of a request that names no buyer (see limitKey): a demo request
// without X-Buyer-Id (one with it is its buyer's) counts against the client's address
// (clientIP).
func (s *Server) buyerKey(r *http.Request) string {
	return "ip:" + s.clientIP(r)
}

// remoteHost is the request's peer, without the port: the client, or the proxy in front of
// it. Only clientIP reads it; every limit and log takes clientIP.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// refuse answers a rate-limited request: 429, when to come back, and the JSON error.
func refuse(w http.ResponseWriter, wait time.Duration, why string) {
	secs := retryAfterSeconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	var body errorBody
	body.Error.Code, body.Error.Message = ERATELIMITED, fmt.Sprintf("%s; retry in %d s", why, secs)
	writeJSON(w, http.StatusTooManyRequests, body)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.Ready != nil {
		if err := s.Ready(r.Context()); err != nil {
			s.writeError(w, r, orderpay.Errorf(orderpay.EUNAVAILABLE, "not ready: %v", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ---- catalogue ----

type skuJSON struct {
	SKU         string               `json:"sku"`
	MerchantID  string               `json:"merchant_id"`
	Title       string               `json:"title"`
	Price       int64                `json:"price"`
	ProductType orderpay.ProductType `json:"product_type"`
	StockPolicy orderpay.StockPolicy `json:"stock_policy"`
	// LimitPerBuyer is 0 for none.
	LimitPerBuyer int64 `json:"limit_per_buyer"`
	// MaxPerOrder and MaxUnpaidPerBuyer are the SKU's own buyer caps; absent where the
	// shop's cap for its product type applies.
	MaxPerOrder       int64 `json:"max_per_order,omitempty"`
	MaxUnpaidPerBuyer int64 `json:"max_unpaid_per_buyer,omitempty"`
	StockBuckets      int   `json:"stock_buckets"`
	// ReserveMinutes is the hold of a "reserve" SKU; absent for the other policies.
	ReserveMinutes int64     `json:"reserve_minutes,omitempty"`
	Warehouse      string    `json:"warehouse"`
	WeightG        int64     `json:"weight_g"`
	VolumeCm3      int64     `json:"volume_cm3"`
	Stock          stockJSON `json:"stock"`
	// Queued SKUs are ordered through their queue (POST /v1/orders answers 202 and a
	// ticket); QueueWaitSeconds and QueuePace are absent for the others.
	Queued           bool  `json:"queued"`
	QueueWaitSeconds int64 `json:"queue_wait_seconds,omitempty"`
	QueuePace        int64 `json:"queue_pace,omitempty"`
}

type stockJSON struct {
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Sold      int64 `json:"sold"`
	Total     int64 `json:"total"`
	// The backup of a "payment" or "reserve" SKU (docs/design.md §6.2): units kept aside
	// for payments that arrive after the sellable ones ran out, how many of them served
	// such payments (in sold and total since), and how many remain. 0 without a backup.
	BackupUnits int64 `json:"backup_units"`
	BackupUsed  int64 `json:"backup_used"`
	BackupLeft  int64 `json:"backup_left"`
}

func toStockJSON(st *orderpay.Stock) stockJSON {
	return stockJSON{Available: st.Available, Locked: st.Locked, Sold: st.Sold, Total: st.Total,
		BackupUnits: st.BackupUnits, BackupUsed: st.BackupUsed, BackupLeft: st.BackupLeft}
}

func toSKUJSON(sku *orderpay.SKU, st *orderpay.Stock) skuJSON {
	return skuJSON{SKU: sku.SKU, MerchantID: sku.MerchantID, Title: sku.Title, Price: sku.Price,
		ProductType: sku.ProductType, StockPolicy: sku.StockPolicy, LimitPerBuyer: sku.LimitPerBuyer, StockBuckets: sku.StockBuckets,
		MaxPerOrder: sku.MaxPerOrder, MaxUnpaidPerBuyer: sku.MaxUnpaidPerBuyer,
		ReserveMinutes: sku.ReserveMinutes, Warehouse: sku.Warehouse, WeightG: sku.WeightG, VolumeCm3: sku.VolumeCm3,
		Stock:  toStockJSON(st),
		Queued: sku.Queued, QueueWaitSeconds: int64(sku.QueueWait / time.Second), QueuePace: sku.QueuePace}
}

func (s *Server) catalogue(w http.ResponseWriter, r *http.Request) {
	entries, err := s.Orders.Catalogue(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]skuJSON, 0, len(entries))
	for i := range entries {
		out = append(out, toSKUJSON(&entries[i].SKU, &entries[i].Stock))
	}
	writeJSON(w, http.StatusOK, map[string]any{"skus": out})
}

func (s *Server) createSKU(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SKU           string `json:"sku"`
		MerchantID    string `json:"merchant_id"`
		Title         string `json:"title"`
		Price         int64  `json:"price"`
		Stock         int64  `json:"stock"`
		BackupUnits   int64  `json:"backup_units"` // 0 to 10000000, for late payments; stock_policy payment or reserve only
		ProductType   string `json:"product_type"`
		StockPolicy   string `json:"stock_policy"`
		LimitPerBuyer int64  `json:"limit_per_buyer"`
		StockBuckets  int    `json:"stock_buckets"`
		Warehouse     string `json:"warehouse"`
		WeightG       int64  `json:"weight_g"`
		VolumeCm3     int64  `json:"volume_cm3"`
		// ReserveMinutes: for stock_policy reserve, 1 to 10080 (default 10); refused with
		// any other policy.
		ReserveMinutes int64 `json:"reserve_minutes"`
		// MaxPerOrder and MaxUnpaidPerBuyer: the SKU's own buyer caps, 0 (the default) for
		// the shop's (--order-qty-cap, --unpaid-qty-cap).
		MaxPerOrder       int64 `json:"max_per_order"`
		MaxUnpaidPerBuyer int64 `json:"max_unpaid_per_buyer"`
		// Queued sells the SKU through its queue: QueueWaitSeconds (1 to 86400, default
		// 600) bounds a ticket's wait, QueuePace the orders a second (0: as fast as the
		// store commits).
		Queued           bool  `json:"queued"`
		QueueWaitSeconds int64 `json:"queue_wait_seconds"`
		QueuePace        int64 `json:"queue_pace"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.QueueWaitSeconds < 0 || req.QueueWaitSeconds > int64(orderpay.QueueWaitMax/time.Second) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "queue_wait_seconds must be between 1 and %d", int64(orderpay.QueueWaitMax/time.Second)))
		return
	}
	sku, st, err := s.Orders.CreateSKU(r.Context(), order.NewSKU{QueueWait: time.Duration(req.QueueWaitSeconds) * time.Second, SKU: req.SKU, MerchantID: req.MerchantID, Title: req.Title,
		Price: req.Price, Stock: req.Stock, BackupUnits: req.BackupUnits, ProductType: orderpay.ProductType(req.ProductType), StockPolicy: orderpay.StockPolicy(req.StockPolicy),
		LimitPerBuyer: req.LimitPerBuyer, StockBuckets: req.StockBuckets, ReserveMinutes: req.ReserveMinutes,
		Warehouse: req.Warehouse, WeightG: req.WeightG, VolumeCm3: req.VolumeCm3, MaxPerOrder: req.MaxPerOrder, MaxUnpaidPerBuyer: req.MaxUnpaidPerBuyer,
		Queued: req.Queued, QueuePace: req.QueuePace})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSKUJSON(sku, st))
}

// ---- orders ----

type orderJSON struct {
	OrderNo          string               `json:"order_no"`
	BuyerID          string               `json:"buyer_id"`
	Status           orderpay.OrderStatus `json:"status"`
	Total            int64                `json:"total"`
	Discount         int64                `json:"discount"`
	Payable          int64                `json:"payable"`
	CouponID         string               `json:"coupon_id,omitempty"`
	ProductType      orderpay.ProductType `json:"product_type"`
	PayDeadline      time.Time            `json:"pay_deadline"`
	RemainingSeconds int64                `json:"remaining_seconds"`
	// ServerTime is when remaining_seconds was computed, for a client to set its countdown
	// by the server's clock rather than its own.
	ServerTime time.Time `json:"server_time"`
	// Remaining is remaining_seconds as the buyer sees it (orderpay.Countdown).
	Remaining   string       `json:"remaining"`
	PaymentNo   string       `json:"payment_no,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	PaidAt      *time.Time   `json:"paid_at,omitempty"`
	CancelledAt *time.Time   `json:"cancelled_at,omitempty"`
	Address     *addressJSON `json:"address,omitempty"`
	Items       []itemJSON   `json:"items"`
	// Shipments, Refunds (after-sales requests) and RefundStatus are shown once the order
	// is paid (see fulfilment.go).
	Shipments    []shipmentJSON  `json:"shipments,omitempty"`
	Refunds      []afterSaleJSON `json:"refunds,omitempty"`
	RefundStatus string          `json:"refund_status,omitempty"`
	Refunded     int64           `json:"refunded,omitempty"`
	// OpenAttempt is the QR code the buyer was last given and can still pay, while the
	// order waits for payment: a pay page opened again shows it without asking for a new
	// one. Only GET /v1/orders/{order_no} shows it.
	OpenAttempt *openAttemptJSON `json:"open_attempt,omitempty"`
}

type openAttemptJSON struct {
	Channel   string                   `json:"channel"`
	Method    orderpay.PayMethod       `json:"method"`
	QRCode    string                   `json:"qr_code,omitempty"`
	ExpiresAt time.Time                `json:"expires_at"`
	Pay       *orderpay.PayInstruction `json:"pay"`
}

// openAttemptOf is co as the order page shows it: its method and the instruction (for an
// attempt of before methods, its QR code as one).
func openAttemptOf(co *orderpay.ChannelOrder) *openAttemptJSON {
	m, pay := co.Method, co.Pay
	if m == "" {
		m = orderpay.MethodQR
	}
	if pay == nil && co.QRCode != "" {
		pay = orderpay.NewInstruction(co.Channel, orderpay.MethodQR, "code", co.QRCode)
	}
	return &openAttemptJSON{Channel: co.Channel, Method: m, QRCode: co.QRCode, ExpiresAt: co.QRExpiresAt.UTC(), Pay: pay}
}

type itemJSON struct {
	Line       int    `json:"line"`
	SKU        string `json:"sku"`
	MerchantID string `json:"merchant_id"`
	Title      string `json:"title"`
	UnitPrice  int64  `json:"unit_price"`
	Qty        int64  `json:"qty"`
	Amount     int64  `json:"amount"`
	Discount   int64  `json:"discount"`
	Payable    int64  `json:"payable"`
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (s *Server) toOrderJSON(o *orderpay.Order) orderJSON {
	now := s.Clock.Now()
	out := orderJSON{OrderNo: o.No, BuyerID: o.BuyerID, Status: o.Status, Total: o.Total, Discount: o.Discount, Payable: o.Payable, CouponID: o.CouponID,
		ProductType: o.ProductType, PayDeadline: o.PayDeadline.UTC(), RemainingSeconds: o.RemainingSeconds(now), ServerTime: now.UTC(),
		PaymentNo: o.PaymentNo, CreatedAt: o.CreatedAt.UTC(), PaidAt: optionalTime(o.PaidAt), CancelledAt: optionalTime(o.ClosedAt)}
	out.Remaining = orderpay.Countdown(out.RemainingSeconds)
	if !o.Address.Empty() {
		out.Address = &addressJSON{Name: o.Address.Name, Phone: o.Address.Phone, Detail: o.Address.Detail}
	}
	for _, it := range o.Items {
		out.Items = append(out.Items, itemJSON{Line: it.Line, SKU: it.SKU, MerchantID: it.MerchantID, Title: it.Title,
			UnitPrice: it.UnitPrice, Qty: it.Qty, Amount: it.Amount, Discount: it.Discount, Payable: it.Payable})
	}
	return out
}

func (s *Server) createOrder(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		BuyerID string `json:"buyer_id"`
		Items   []struct {
			SKU string `json:"sku"`
			Qty int64  `json:"qty"`
		} `json:"items"`
		CouponID string       `json:"coupon_id"`
		Address  *addressJSON `json:"address"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	buyer, err := c.buyerID(req.BuyerID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cr := order.CreateOrderRequest{BuyerID: buyer, IdempotencyKey: r.Header.Get("Idempotency-Key"), DeviceID: r.Header.Get("X-Device-Id"),
		CouponID: req.CouponID}
	if req.Address != nil {
		cr.Address = req.Address.address()
	}
	for _, it := range req.Items {
		cr.Items = append(cr.Items, order.ItemRequest{SKU: it.SKU, Qty: it.Qty})
	}
	placed, err := s.Orders.Place(r.Context(), cr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if t := placed.Ticket; t != nil {
		// A queued SKU: the order comes at the ticket's turn (GET /v1/tickets/{id}).
		w.Header().Set("Location", "/v1/tickets/"+t.ID)
		if placed.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, toTicketJSON(t))
			return
		}
		writeJSON(w, http.StatusAccepted, toTicketJSON(t))
		return
	}
	o, replayed := placed.Order, placed.Replayed
	w.Header().Set("Location", "/v1/orders/"+o.No)
	if replayed {
		// The order an earlier identical request created (same Idempotency-Key, or the
		// same request within 10 s): 200, not 201, and said so.
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, s.toOrderJSON(o))
		return
	}
	writeJSON(w, http.StatusCreated, s.toOrderJSON(o))
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request, c caller) {
	page, err := s.Orders.Page(r.Context(), r.PathValue("order_no"))
	if err == nil {
		err = owns(c, page.Order)
	}
	if err == nil {
		page, err = s.Orders.WatchPage(r.Context(), page)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := s.pageJSON(page)
	if page.Order.Status == orderpay.OrderPendingPayment && s.Ops != nil {
		if co := s.openOf(page.Attempts, "", ""); co != nil { // read with the order: no second read
			out.OpenAttempt = openAttemptOf(co)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// openAttempt is the order's newest attempt (at channel, if given) whose QR code can still
// be paid, or nil: none was asked for, or every code expired or ended. Without Server.Ops
// it is nil.
func (s *Server) openAttempt(ctx context.Context, orderNo, channel string, method orderpay.PayMethod) (*orderpay.ChannelOrder, error) {
	if s.Ops == nil {
		return nil, nil
	}
	// The payment's number is derived from the order's: one read, and none at all of a
	// payment not asked for yet (it has no attempts).
	cos, err := s.Ops.ChannelOrders(ctx, payment.PaymentNo(orderNo))
	if err != nil {
		return nil, err
	}
	return s.openOf(cos, channel, method), nil
}

// openOf is openAttempt among the attempts cos, by Seq: of method too, if given ("" is any;
// MethodQR also finds an attempt of before methods).
func (s *Server) openOf(cos []orderpay.ChannelOrder, channel string, method orderpay.PayMethod) *orderpay.ChannelOrder {
	now := s.Clock.Now()
	var open *orderpay.ChannelOrder
	for i := range cos { // by Seq: the last usable one is the newest
		co := &cos[i]
		m := co.Method
		if m == "" {
			m = orderpay.MethodQR
		}
		if co.Status == orderpay.ChannelOrderPaying && (co.QRCode != "" || co.Pay != nil) && now.Before(co.QRExpiresAt) &&
			(channel == "" || co.Channel == channel) && (method == "" || m == method) {
			open = co
		}
	}
	return open
}

// payJSON is the answer of POST /v1/orders/{order_no}/pay: the instruction the buyer's
// device pays with (pay), and, for a qr one, its code as qr_code too (what clients of
// before methods read).
type payJSON struct {
	PaymentNo string                   `json:"payment_no"`
	Channel   string                   `json:"channel"`
	Method    orderpay.PayMethod       `json:"method"`
	QRCode    string                   `json:"qr_code,omitempty"`
	ExpiresAt time.Time                `json:"expires_at"`
	Pay       *orderpay.PayInstruction `json:"pay"`
}

func (s *Server) pay(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		Channel string             `json:"channel"`
		Method  orderpay.PayMethod `json:"method"`
		// The demo's (--buyer-auth none) way to name the payer's wallet identity; with a
		// buyer login it comes from the login, never from the request.
		OpenID       string `json:"openid"`
		AlipayUserID string `json:"alipay_user_id"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Method == "" {
		req.Method = orderpay.MethodQR
	}
	// The request is checked whole before the order is looked at: a bad channel, method or
	// payer is 400 on any order, whatever its state.
	if _, known := orderpay.ChannelMethods[req.Channel]; known {
		if err := orderpay.CheckMethod(req.Channel, req.Method); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	payer, err := s.payer(r, req.Channel, req.Method, req.OpenID, req.AlipayUserID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Payments != nil {
		if err := s.Payments.CheckPay(req.Channel, req.Method, payer); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	o, err := s.ownOrder(r.Context(), c, r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Orders.PayBy(r.Context(), o, order.PayWith{Channel: req.Channel, Method: req.Method, Payer: payer, ClientIP: s.clientIP(r)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, payJSON{PaymentNo: res.PaymentNo, Channel: res.Channel, Method: res.Method, QRCode: res.QRCode,
		ExpiresAt: res.ExpiresAt.UTC(), Pay: res.Pay})
}

// payer is the wallet identity a method that pays for one wallet user needs
// (orderpay.PayerNeeded), from the buyer's own credential (BuyerAuth.Wallet); in the demo,
// with no buyer login, from the request (openid, alipay_user_id). Another method needs
// none, and a request that names one anyway is refused only where a login is in force.
// A request of a scan session (the single code, cashier.go) pays for whom the scanning
// wallet vouched, and only that.
func (s *Server) payer(r *http.Request, channel string, m orderpay.PayMethod, openID, alipayUserID string) (string, error) {
	if sess := scanSessionFrom(r.Context()); sess != nil {
		return sess.payer(channel, m, openID, alipayUserID)
	}
	need := orderpay.PayerNeeded(channel, m)
	demo := s.Buyers == nil || s.Buyers.Mode() == "none"
	if !demo && (openID != "" || alipayUserID != "") {
		return "", orderpay.Errorf(orderpay.EINVALID, "the payer's wallet identity comes from the buyer's login, never from the request: leave out openid and alipay_user_id")
	}
	key := ""
	switch need {
	case "":
		return "", nil
	case "openid":
		appid := ""
		if s.WalletAppID != nil {
			appid = s.WalletAppID(channel, m)
		}
		key = buyerauth.WalletOpenIDPrefix + appid
		if demo {
			return demoWalletID(openID, "openid")
		}
	default:
		key = buyerauth.WalletAlipayUserID
		if demo {
			return demoWalletID(alipayUserID, "alipay_user_id")
		}
	}
	return s.Buyers.Wallet(r, key)
}

// demoWalletID is the wallet identity a demo's request named in field, checked for shape.
func demoWalletID(id, field string) (string, error) {
	if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
		return "", orderpay.Errorf(orderpay.EINVALID, "%s: this way of paying needs the payer's %s (6 to 64 letters, digits, - or _)", field, field)
	}
	return id, nil
}

// clientIP is the client's own address, the one every per-address limit, the notification
// log and a buyer's pay (WeChat H5 checks it) take: the request's peer, or, when the peer is
// a trusted proxy (TrustedProxies), the last address of X-Forwarded-For that is not one,
// else its X-Real-IP. From any other peer those headers are ignored, so that a client
// cannot name itself another address. A body field never says it.
func (s *Server) clientIP(r *http.Request) string {
	peer := remoteHost(r)
	trusted := func(a string) bool { return orderpay.InNetworks(s.TrustedProxies, a) }
	if !trusted(peer) {
		return peer
	}
	hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if _, err := netip.ParseAddr(hop); err == nil && !trusted(hop) {
			return hop
		}
	}
	if real := strings.TrimSpace(r.Header.Get("X-Real-IP")); real != "" {
		if _, err := netip.ParseAddr(real); err == nil {
			return real
		}
	}
	return peer
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, c caller) {
	if _, err := s.ownOrder(r.Context(), c, r.PathValue("order_no")); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.Orders.Cancel(r.Context(), r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toOrderJSON(o))
}

// ---- admin: the lost-payment defence ----

type paymentJSON struct {
	PaymentNo      string                 `json:"payment_no"`
	OrderNo        string                 `json:"order_no"`
	Status         orderpay.PaymentStatus `json:"status"`
	Amount         int64                  `json:"amount"`
	Refunded       int64                  `json:"refunded"`
	PayDeadline    time.Time              `json:"pay_deadline"`
	PaidChannel    string                 `json:"paid_channel,omitempty"`
	PaidOutTradeNo string                 `json:"paid_out_trade_no,omitempty"`
	PaidAt         *time.Time             `json:"paid_at,omitempty"`
}

func toPaymentJSON(p *orderpay.Payment) paymentJSON {
	return paymentJSON{PaymentNo: p.No, OrderNo: p.OrderNo, Status: p.Status, Amount: p.Amount, Refunded: p.Refunded,
		PayDeadline: p.PayDeadline.UTC(), PaidChannel: p.PaidChannel, PaidOutTradeNo: p.PaidOutTradeNo, PaidAt: optionalTime(p.PaidAt)}
}

type pendingQueryJSON struct {
	OutTradeNo  string    `json:"out_trade_no"`
	PaymentNo   string    `json:"payment_no"`
	Channel     string    `json:"channel"`
	Attempts    int       `json:"attempts"`
	NextAt      time.Time `json:"next_at"`
	Flagged     bool      `json:"flagged"`
	LastOutcome string    `json:"last_outcome,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

func toPendingQueriesJSON(rows []orderpay.PendingQuery) []pendingQueryJSON {
	out := make([]pendingQueryJSON, 0, len(rows))
	for _, q := range rows {
		out = append(out, pendingQueryJSON{OutTradeNo: q.OutTradeNo, PaymentNo: q.PaymentNo, Channel: q.Channel, Attempts: q.Attempts,
			NextAt: q.NextAt.UTC(), Flagged: q.Flagged, LastOutcome: q.LastOutcome, CreatedAt: q.CreatedAt.UTC()})
	}
	return out
}

// confirmPayment is "confirm payment by hand": the channel is queried, and only its
// verified answer changes anything.
func (s *Server) confirmPayment(w http.ResponseWriter, r *http.Request) {
	p, checks, err := s.Payments.Confirm(r.Context(), r.PathValue("payment_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteOrder(r, p.OrderNo)
	type checkJSON struct {
		OutTradeNo string `json:"out_trade_no"`
		Channel    string `json:"channel"`
		Before     string `json:"before"`
		Outcome    string `json:"channel_says,omitempty"`
		After      string `json:"after"`
		Detail     string `json:"detail,omitempty"`
	}
	out := make([]checkJSON, 0, len(checks))
	for _, c := range checks {
		out = append(out, checkJSON{c.OutTradeNo, c.Channel, string(c.Before), string(c.Outcome), string(c.After), c.Detail})
	}
	writeJSON(w, http.StatusOK, map[string]any{"payment": toPaymentJSON(p), "attempts": out})
}

// adminLimit is how many rows an admin list returns.
const adminLimit = 500

func (s *Server) pendingQueries(w http.ResponseWriter, r *http.Request) {
	rows, err := s.Payments.PendingQueries(r.Context(), r.URL.Query().Get("flagged") == "1", adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"pending_queries": toPendingQueriesJSON(rows)})
}

func (s *Server) stuckPayments(w http.ResponseWriter, r *http.Request) {
	payments, flagged, err := s.Payments.Stuck(r.Context(), adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]paymentJSON, 0, len(payments))
	for i := range payments {
		out = append(out, toPaymentJSON(&payments[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"open_past_deadline": out, "queries_exhausted": toPendingQueriesJSON(flagged)})
}

// ---- channel notifications ----

func (s *Server) notify(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "notification body unreadable or larger than %d bytes", MaxBodyBytes))
		return
	}
	reply, err := s.Payments.HandleNotification(r.Context(), r.PathValue("channel"), s.clientIP(r), r.Header, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if reply.ContentType != "" {
		w.Header().Set("Content-Type", reply.ContentType)
	}
	w.WriteHeader(reply.Status)
	_, _ = io.Copy(w, bytes.NewReader(reply.Body))
}

// ---- blocklist ----

type blockJSON struct {
	Kind      string    `json:"kind"`
	Value     string    `json:"value"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
}

func toBlockJSON(e *orderpay.BlockEntry) blockJSON {
	return blockJSON{Kind: e.Kind, Value: e.Value, Reason: e.Reason, CreatedAt: e.CreatedAt.UTC()}
}

func (s *Server) blocklist(w http.ResponseWriter, r *http.Request) {
	entries, err := s.Orders.Blocklist(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]blockJSON, 0, len(entries))
	for i := range entries {
		out = append(out, toBlockJSON(&entries[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"blocklist": out})
}

// block is PUT /admin/blocklist/{buyer|device}/{id} with an optional {"reason"}.
func (s *Server) block(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	e, err := s.Orders.Block(r.Context(), r.PathValue("kind"), r.PathValue("value"), req.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toBlockJSON(e))
}

func (s *Server) unblock(w http.ResponseWriter, r *http.Request) {
	if err := s.Orders.Unblock(r.Context(), r.PathValue("kind"), r.PathValue("value")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// retain is POST /admin/retention: one retention pass now, with the server's policy; the
// answer counts what it removed.
func (s *Server) retain(w http.ResponseWriter, r *http.Request) {
	if s.Retention == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no retention is configured"))
		return
	}
	res, err := s.Retention(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Package httpapi is orderpay's REST API: buyer endpoints under /v1, channel notifications
// under /notify, admin endpoints under /admin behind a bearer token, and ops endpoints.
// Every error is JSON {"error":{"code","message"}} with the status from one table.
package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/payment"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Server serves the API.
type Server struct {
	Orders     *order.Service
	Payments   *payment.Service
	AdminToken string // required: an empty token refuses every admin request
	Clock      orderpay.Clock
	Logger     *slog.Logger
	// Ready reports whether dependencies are up, for /readyz. Optional.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics. Optional.
	Metrics http.Handler
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	if s.Clock == nil {
		s.Clock = orderpay.SystemClock{}
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.Metrics != nil {
		mux.Handle("GET /metrics", s.Metrics)
	}
	mux.HandleFunc("GET /v1/skus", s.catalogue)
	mux.HandleFunc("POST /v1/orders", s.createOrder)
	mux.HandleFunc("GET /v1/orders/{order_no}", s.getOrder)
	mux.HandleFunc("POST /v1/orders/{order_no}/pay", s.pay)
	mux.HandleFunc("POST /v1/orders/{order_no}/cancel", s.cancel)
	mux.HandleFunc("POST /notify/{channel}", s.notify)
	mux.HandleFunc("POST /admin/skus", s.admin(s.createSKU))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path))
	})
	return s.recoverPanics(mux)
}

// statusOf is the one table from error code to HTTP status.
var statusOf = map[string]int{
	orderpay.EINVALID:      http.StatusBadRequest,
	orderpay.EUNAUTHORIZED: http.StatusUnauthorized,
	orderpay.ENOTFOUND:     http.StatusNotFound,
	orderpay.ECONFLICT:     http.StatusConflict,
	orderpay.EOUTOFSTOCK:   http.StatusConflict,
	orderpay.ECHANNEL:      http.StatusBadGateway,
	orderpay.EUNAVAILABLE:  http.StatusServiceUnavailable,
	orderpay.EINTERNAL:     http.StatusInternalServerError,
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
	if code == orderpay.EINTERNAL {
		s.Logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var body errorBody
	body.Error.Code, body.Error.Message = code, orderpay.ErrorMessage(err)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly: one object, no unknown fields (a misspelt "quantity"
// must not silently become qty 0), within MaxBodyBytes.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return orderpay.Errorf(orderpay.EINVALID, "request body is larger than %d bytes", MaxBodyBytes)
		}
		return orderpay.Errorf(orderpay.EINVALID, "malformed JSON body: %s", jsonProblem(err))
	}
	if dec.More() {
		return orderpay.Errorf(orderpay.EINVALID, "malformed JSON body: more than one value")
	}
	return nil
}

func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q must be a %s", typeErr.Field, typeErr.Type)
	}
	if errors.Is(err, io.EOF) {
		return "empty body"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
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

// admin guards an admin handler with the bearer token, compared in constant time.
func (s *Server) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || s.AdminToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.AdminToken)) != 1 {
			s.writeError(w, r, orderpay.Errorf(orderpay.EUNAUTHORIZED, "admin endpoints need Authorization: Bearer <admin token>"))
			return
		}
		next(w, r)
	}
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
	Stock       stockJSON            `json:"stock"`
}

type stockJSON struct {
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Sold      int64 `json:"sold"`
	Total     int64 `json:"total"`
}

func toSKUJSON(sku *orderpay.SKU, st *orderpay.Stock) skuJSON {
	return skuJSON{SKU: sku.SKU, MerchantID: sku.MerchantID, Title: sku.Title, Price: sku.Price,
		ProductType: sku.ProductType, StockPolicy: sku.StockPolicy,
		Stock: stockJSON{Available: st.Available, Locked: st.Locked, Sold: st.Sold, Total: st.Total}}
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
		SKU         string `json:"sku"`
		MerchantID  string `json:"merchant_id"`
		Title       string `json:"title"`
		Price       int64  `json:"price"`
		Stock       int64  `json:"stock"`
		ProductType string `json:"product_type"`
		StockPolicy string `json:"stock_policy"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sku, st, err := s.Orders.CreateSKU(r.Context(), order.NewSKU{SKU: req.SKU, MerchantID: req.MerchantID, Title: req.Title,
		Price: req.Price, Stock: req.Stock, ProductType: orderpay.ProductType(req.ProductType), StockPolicy: orderpay.StockPolicy(req.StockPolicy)})
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
	ProductType      orderpay.ProductType `json:"product_type"`
	PayDeadline      time.Time            `json:"pay_deadline"`
	RemainingSeconds int64                `json:"remaining_seconds"`
	PaymentNo        string               `json:"payment_no,omitempty"`
	CreatedAt        time.Time            `json:"created_at"`
	PaidAt           *time.Time           `json:"paid_at,omitempty"`
	CancelledAt      *time.Time           `json:"cancelled_at,omitempty"`
	Items            []itemJSON           `json:"items"`
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
	out := orderJSON{OrderNo: o.No, BuyerID: o.BuyerID, Status: o.Status, Total: o.Total, Discount: o.Discount, Payable: o.Payable,
		ProductType: o.ProductType, PayDeadline: o.PayDeadline.UTC(), RemainingSeconds: o.RemainingSeconds(s.Clock.Now()),
		PaymentNo: o.PaymentNo, CreatedAt: o.CreatedAt.UTC(), PaidAt: optionalTime(o.PaidAt), CancelledAt: optionalTime(o.ClosedAt)}
	for _, it := range o.Items {
		out.Items = append(out.Items, itemJSON{Line: it.Line, SKU: it.SKU, MerchantID: it.MerchantID, Title: it.Title,
			UnitPrice: it.UnitPrice, Qty: it.Qty, Amount: it.Amount, Discount: it.Discount, Payable: it.Payable})
	}
	return out
}

func (s *Server) createOrder(w http.ResponseWriter, r *http.Request) {
	var req struct {
		BuyerID string `json:"buyer_id"`
		Items   []struct {
			SKU string `json:"sku"`
			Qty int64  `json:"qty"`
		} `json:"items"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	cr := order.CreateOrderRequest{BuyerID: req.BuyerID}
	for _, it := range req.Items {
		cr.Items = append(cr.Items, order.ItemRequest{SKU: it.SKU, Qty: it.Qty})
	}
	o, err := s.Orders.CreateOrder(r.Context(), cr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/orders/"+o.No)
	writeJSON(w, http.StatusCreated, s.toOrderJSON(o))
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	o, err := s.Orders.Watch(r.Context(), r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toOrderJSON(o))
}

func (s *Server) pay(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel string `json:"channel"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Orders.Pay(r.Context(), r.PathValue("order_no"), req.Channel)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		PaymentNo string    `json:"payment_no"`
		Channel   string    `json:"channel"`
		QRCode    string    `json:"qr_code"`
		ExpiresAt time.Time `json:"expires_at"`
	}{res.PaymentNo, res.Channel, res.QRCode, res.ExpiresAt.UTC()})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	o, err := s.Orders.Cancel(r.Context(), r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toOrderJSON(o))
}

// ---- channel notifications ----

func (s *Server) notify(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "notification body unreadable or larger than %d bytes", MaxBodyBytes))
		return
	}
	reply, err := s.Payments.HandleNotification(r.Context(), r.PathValue("channel"), r.Header, body)
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

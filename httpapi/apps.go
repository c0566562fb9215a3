package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/webhook"
)

// appRoutes are the business apps' payments API (/v1/payments, /v1/refunds, with an app's
// API key) and the admins' apps (/admin/apps). Without Server.Apps they answer 404.
func (s *Server) appRoutes(mux *routeMux) {
	mux.HandleFunc("POST /admin/apps", s.admin(s.appsOn(s.createApp)))
	mux.HandleFunc("GET /admin/apps", s.admin(s.appsOn(s.listApps)))
	mux.HandleFunc("GET /admin/apps/{app_id}", s.admin(s.appsOn(s.getApp)))
	mux.HandleFunc("POST /admin/apps/{app_id}/keys/rotate", s.admin(s.appsOn(s.rotateAppKey)))
	mux.HandleFunc("POST /admin/apps/{app_id}/keys/{key_id}/revoke", s.admin(s.appsOn(s.revokeAppKey)))
	mux.HandleFunc("POST /v1/payments", s.appRoute(s.createAppPayment))
	mux.HandleFunc("GET /v1/payments", s.appRoute(s.listAppPayments))
	mux.HandleFunc("GET /v1/payments/{payment_no}", s.appRoute(s.getAppPayment))
	mux.HandleFunc("POST /v1/payments/{payment_no}/close", s.appRoute(s.closeAppPayment))
	mux.HandleFunc("POST /v1/payments/{payment_no}/refunds", s.appRoute(s.createAppRefund))
	mux.HandleFunc("GET /v1/payments/{payment_no}/refunds", s.appRoute(s.listAppRefunds))
	mux.HandleFunc("GET /v1/refunds", s.appRoute(s.listAppRefunds))
	mux.HandleFunc("GET /v1/refunds/{refund_no}", s.appRoute(s.getAppRefund))
	s.registerPos(mux)
}

func (s *Server) appsOff(w http.ResponseWriter, r *http.Request) bool {
	if s.Apps == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "the payments API is not served here"))
		return true
	}
	return false
}

// appsOn runs next only if the server serves apps (404 otherwise).
func (s *Server) appsOn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.appsOff(w, r) {
			next(w, r)
		}
	}
}

// appRoute authenticates the app of a payments API request by its API key (401
// EUNAUTHORIZED: no key, an unknown, expired or revoked one). Every key is looked at: a
// valid one is served whatever others sent. A missing or wrong one takes a token from the
// client address's bucket (clientIP) and from the bucket of the key id it names, if it is
// shaped like a key (RateLimits.AppAuthFailures); past either it is 429, not 401, so that
// neither a client guessing nor keys guessed for one key id get anything but refusals.
func (s *Server) appRoute(next func(w http.ResponseWriter, r *http.Request, app *orderpay.App)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.appsOff(w, r) {
			return
		}
		key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		app, err := s.Apps.Authenticate(r.Context(), key)
		if orderpay.ErrorCode(err) == orderpay.EUNAUTHORIZED {
			now := s.Clock.Now()
			if ok, wait := s.appAuth.Allow("ip:"+s.clientIP(r), now); !ok {
				refuse(w, wait, "too many requests with a wrong API key from this address")
				return
			}
			if id, named := apppay.KeyID(key); named {
				if ok, wait := s.appAuth.Allow("key:"+id, now); !ok {
					refuse(w, wait, "too many requests with a wrong API key for this key id")
					return
				}
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next(w, r, app)
	}
}

// ---- admins' apps ----

type appKeyJSON struct {
	KeyID     string     `json:"key_id"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Valid     bool       `json:"valid"`
}

type appJSON struct {
	AppID       string       `json:"app_id"`
	Name        string       `json:"name"`
	WebhookURLs []string     `json:"webhook_urls"`
	Channels    []string     `json:"channels"`
	CreatedAt   time.Time    `json:"created_at"`
	Keys        []appKeyJSON `json:"keys,omitempty"`
	// Shown once, in the answer of the create.
	APIKey        string `json:"api_key,omitempty"`
	KeyID         string `json:"key_id,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// toAppJSON is a as r's operator may see it: the webhook URLs as they are to an admin, who
// edits them, and with their credentials masked to anyone else (webhook.MaskURL).
func toAppJSON(r *http.Request, a *orderpay.App) appJSON {
	urls := a.WebhookURLs
	if op, _ := r.Context().Value(operatorKey).(orderpay.Operator); !op.Role.Allows(orderpay.RoleAdmin) {
		urls = make([]string, 0, len(a.WebhookURLs))
		for _, u := range a.WebhookURLs {
			urls = append(urls, webhook.MaskURL(u))
		}
	}
	return appJSON{AppID: a.ID, Name: a.Name, WebhookURLs: urls, Channels: a.Channels, CreatedAt: a.CreatedAt.UTC()}
}

func (s *Server) toAppKeyJSON(k *orderpay.AppKey) appKeyJSON {
	return appKeyJSON{KeyID: k.ID, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: optionalTime(k.ExpiresAt), RevokedAt: optionalTime(k.RevokedAt),
		Valid: k.Valid(orderpay.Now(s.Clock))}
}

// createApp is POST /admin/apps {"name","webhook_urls","channels"}: 201 with the app, its
// first API key and its webhook secret, shown this once.
func (s *Server) createApp(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name        string   `json:"name"`
		WebhookURLs []string `json:"webhook_urls"`
		Channels    []string `json:"channels"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, key, err := s.Apps.CreateApp(r.Context(), apppay.CreateAppRequest{Name: req.Name, WebhookURLs: req.WebhookURLs, Channels: req.Channels}, s.operator(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := toAppJSON(r, a)
	out.APIKey, out.WebhookSecret = key, a.WebhookSecret
	out.KeyID, _ = apppay.KeyID(key)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listApps(w http.ResponseWriter, r *http.Request) {
	apps, err := s.Apps.Apps(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]appJSON, 0, len(apps))
	for i := range apps {
		out = append(out, toAppJSON(r, &apps[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": out})
}

func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	v, err := s.Apps.App(r.Context(), r.PathValue("app_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := toAppJSON(r, &v.App)
	out.Keys = make([]appKeyJSON, 0, len(v.Keys))
	for i := range v.Keys {
		out.Keys = append(out.Keys, s.toAppKeyJSON(&v.Keys[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// rotateAppKey is POST /admin/apps/{app_id}/keys/rotate {"overlap_seconds"}: a new key,
// shown this once; the keys before it stay valid for the overlap (default 24 h).
func (s *Server) rotateAppKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OverlapSeconds *int64 `json:"overlap_seconds"`
	}
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	var overlap time.Duration
	if req.OverlapSeconds != nil {
		if *req.OverlapSeconds <= 0 || *req.OverlapSeconds > int64(apppay.MaxOverlap/time.Second) {
			s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "overlap_seconds: 1 to %d", int64(apppay.MaxOverlap/time.Second)))
			return
		}
		overlap = time.Duration(*req.OverlapSeconds) * time.Second
	}
	key, k, until, err := s.Apps.RotateKey(r.Context(), r.PathValue("app_id"), overlap, s.operator(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string]any{"app_id": k.AppID, "key_id": k.ID, "api_key": key,
		"previous_keys_valid_until": until.UTC()})
}

func (s *Server) revokeAppKey(w http.ResponseWriter, r *http.Request) {
	k, err := s.Apps.RevokeKey(r.Context(), r.PathValue("app_id"), r.PathValue("key_id"), s.operator(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAppKeyJSON(k))
}

// ---- the payments API ----

type appPaymentJSON struct {
	PaymentNo       string     `json:"payment_no"`
	MerchantOrderNo string     `json:"merchant_order_no"`
	Amount          int64      `json:"amount"`
	Subject         string     `json:"subject"`
	Channel         string     `json:"channel"`
	Status          string     `json:"status"`
	QRCode          string     `json:"qr_code,omitempty"`
	QRExpiresAt     *time.Time `json:"qr_expires_at,omitempty"`
	ExpiresAt       time.Time  `json:"expires_at"`
	PaidAt          *time.Time `json:"paid_at,omitempty"`
	OutTradeNo      string     `json:"out_trade_no,omitempty"`
	Refunded        int64      `json:"refunded"`
	Refundable      int64      `json:"refundable"`
	CloseReason     string     `json:"close_reason,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
}

func toAppPaymentJSON(v *apppay.PaymentView) appPaymentJSON {
	return appPaymentJSON{PaymentNo: v.PaymentNo, MerchantOrderNo: v.MerchantOrderNo, Amount: v.Amount, Subject: v.Subject, Channel: v.Channel,
		Status: string(v.Status), QRCode: v.QRCode, QRExpiresAt: optionalTime(v.QRExpiresAt), ExpiresAt: v.ExpiresAt.UTC(),
		PaidAt: optionalTime(v.PaidAt), OutTradeNo: v.OutTradeNo, Refunded: v.Refunded, Refundable: v.Refundable(),
		CloseReason: v.CloseReason, CreatedAt: v.CreatedAt.UTC()}
}

type appRefundJSON struct {
	RefundNo        string     `json:"refund_no"`
	OutRefundNo     string     `json:"out_refund_no"`
	PaymentNo       string     `json:"payment_no"`
	MerchantOrderNo string     `json:"merchant_order_no"`
	Amount          int64      `json:"amount"`
	Reason          string     `json:"reason"`
	Status          string     `json:"status"`
	CreatedAt       time.Time  `json:"created_at"`
	RefundedAt      *time.Time `json:"refunded_at,omitempty"`
}

func toAppRefundJSON(v *apppay.RefundView) appRefundJSON {
	return appRefundJSON{RefundNo: v.RefundNo, OutRefundNo: v.OutRefundNo, PaymentNo: v.PaymentNo, MerchantOrderNo: v.MerchantOrderNo,
		Amount: v.Amount, Reason: v.Reason, Status: v.Status, CreatedAt: v.CreatedAt.UTC(), RefundedAt: optionalTime(v.RefundedAt)}
}

// createAppPayment is POST /v1/payments: 201 with the payment and its QR code; the same
// merchant_order_no (or Idempotency-Key) and body again: 200 and Idempotent-Replayed.
func (s *Server) createAppPayment(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	var req struct {
		MerchantOrderNo  string     `json:"merchant_order_no"`
		Amount           int64      `json:"amount"`
		Subject          string     `json:"subject"`
		Channel          string     `json:"channel"`
		ExpiresInSeconds int64      `json:"expires_in_seconds"`
		ExpiresAt        *time.Time `json:"expires_at"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.ExpiresInSeconds < 0 || req.ExpiresInSeconds > int64(apppay.MaxExpiry/time.Second) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "expires_in_seconds: at most %d", int64(apppay.MaxExpiry/time.Second)))
		return
	}
	cr := apppay.CreatePaymentRequest{MerchantOrderNo: req.MerchantOrderNo, Amount: req.Amount, Subject: req.Subject, Channel: req.Channel,
		ExpiresIn: time.Duration(req.ExpiresInSeconds) * time.Second, IdempotencyKey: r.Header.Get("Idempotency-Key")}
	if req.ExpiresAt != nil {
		cr.ExpiresAt = *req.ExpiresAt
	}
	v, replayed, err := s.Apps.CreatePayment(r.Context(), app, cr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/payments/"+v.PaymentNo)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, toAppPaymentJSON(v))
		return
	}
	writeJSON(w, http.StatusCreated, toAppPaymentJSON(v))
}

func (s *Server) getAppPayment(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	v, err := s.Apps.Payment(r.Context(), app, r.PathValue("payment_no"))
	s.writeAppPayment(w, r, v, err)
}

func (s *Server) closeAppPayment(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	v, err := s.Apps.ClosePayment(r.Context(), app, r.PathValue("payment_no"))
	s.writeAppPayment(w, r, v, err)
}

func (s *Server) writeAppPayment(w http.ResponseWriter, r *http.Request, v *apppay.PaymentView, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAppPaymentJSON(v))
}

// limitParam reads ?limit=, 1 to most; def when it is absent.
func limitParam(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, orderpay.Errorf(orderpay.EINVALID, "limit: 1 to %d", most)
	}
	return n, nil
}

// listAppPayments is GET /v1/payments?before=&limit=: the app's payments, newest first; with
// ?merchant_order_no= the one payment of that number of the app's (404 if none).
func (s *Server) listAppPayments(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	if no := r.URL.Query().Get("merchant_order_no"); no != "" {
		v, err := s.Apps.PaymentByMerchantNo(r.Context(), app, no)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"payments": []appPaymentJSON{toAppPaymentJSON(v)}})
		return
	}
	n, err := limitParam(r, apppay.ListLimitDefault, apppay.ListLimitMax)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.Apps.Payments(r.Context(), app, r.URL.Query().Get("before"), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]appPaymentJSON, 0, len(list))
	for i := range list {
		out = append(out, toAppPaymentJSON(&list[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"payments": out})
}

// createAppRefund is POST /v1/payments/{payment_no}/refunds {"refund_no","amount","reason"}.
func (s *Server) createAppRefund(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	var req struct {
		RefundNo string `json:"refund_no"`
		Amount   int64  `json:"amount"`
		Reason   string `json:"reason"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, replayed, err := s.Apps.CreateRefund(r.Context(), app, r.PathValue("payment_no"),
		apppay.CreateRefundRequest{RefundNo: req.RefundNo, Amount: req.Amount, Reason: req.Reason})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/refunds/"+v.RefundNo)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, toAppRefundJSON(v))
		return
	}
	writeJSON(w, http.StatusCreated, toAppRefundJSON(v))
}

func (s *Server) getAppRefund(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	v, err := s.Apps.Refund(r.Context(), app, r.PathValue("refund_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAppRefundJSON(v))
}

// listAppRefunds is GET /v1/refunds and GET /v1/payments/{payment_no}/refunds, newest first.
func (s *Server) listAppRefunds(w http.ResponseWriter, r *http.Request, app *orderpay.App) {
	n, err := limitParam(r, apppay.ListLimitDefault, apppay.ListLimitMax)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.Apps.Refunds(r.Context(), app, r.PathValue("payment_no"), r.URL.Query().Get("before"), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]appRefundJSON, 0, len(list))
	for i := range list {
		out = append(out, toAppRefundJSON(&list[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": out})
}

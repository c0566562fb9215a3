package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"orderpay"
	"orderpay/webhook"
)

// Webhooks is what the webhook admin endpoints need (*webhook.Service is one).
type Webhooks interface {
	Deliveries(ctx context.Context, f webhook.Filter, limit int) ([]webhook.Delivery, error)
	Delivery(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error)
	Resend(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error)
	Replay(ctx context.Context, subscriber string, since time.Time) (int, error)
	Subscribers() []string
}

// webhookRoutes let an operator see the deliveries to business systems and resend one.
func (s *Server) webhookRoutes(mux *routeMux) {
	mux.HandleFunc("GET /admin/webhooks/deliveries", s.admin(s.webhookDeliveries))
	mux.HandleFunc("GET /admin/webhooks/deliveries/{id}", s.admin(s.webhookDelivery))
	mux.HandleFunc("POST /admin/webhooks/deliveries/{id}/resend", s.admin(s.resendWebhook))
	mux.HandleFunc("POST /admin/webhooks/replay", s.admin(s.replayWebhooks))
}

type deliveryJSON struct {
	ID          int64                `json:"id"`
	MsgID       string               `json:"msg_id"`
	Subscriber  string               `json:"subscriber"`
	Event       string               `json:"event"`
	OrderNo     string               `json:"order_no,omitempty"`
	PaymentNo   string               `json:"payment_no,omitempty"`
	Status      webhook.Status       `json:"status"`
	Attempts    int                  `json:"attempts"`
	NextAt      *time.Time           `json:"next_at,omitempty"`
	LastStatus  int                  `json:"last_http_status,omitempty"`
	LastError   string               `json:"last_error,omitempty"`
	CreatedAt   time.Time            `json:"created_at"`
	DeliveredAt *time.Time           `json:"delivered_at,omitempty"`
	Body        json.RawMessage      `json:"body,omitempty"`
	History     []webhookAttemptJSON `json:"history,omitempty"`
}

type webhookAttemptJSON struct {
	Kind       string    `json:"kind"`
	HTTPStatus int       `json:"http_status,omitempty"`
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
}

func toDeliveryJSON(d *webhook.Delivery, attempts []webhook.Attempt) deliveryJSON {
	out := deliveryJSON{ID: d.ID, MsgID: d.MsgID, Subscriber: d.Subscriber, Event: d.Subject, OrderNo: d.OrderNo, PaymentNo: d.PaymentNo,
		Status: d.Status, Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(),
		DeliveredAt: optionalTime(d.DeliveredAt)}
	if d.Status == webhook.StatusPending {
		out.NextAt = optionalTime(d.NextAt)
	}
	if attempts != nil {
		out.Body = json.RawMessage(d.Payload)
		out.History = make([]webhookAttemptJSON, 0, len(attempts))
		for _, a := range attempts {
			out.History = append(out.History, webhookAttemptJSON{Kind: a.Kind, HTTPStatus: a.HTTPStatus, Error: a.Error, At: a.At.UTC()})
		}
	}
	return out
}

func (s *Server) webhooksOff(w http.ResponseWriter, r *http.Request) bool {
	if s.Webhooks == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no webhook subscribers are configured"))
		return true
	}
	return false
}

// webhookDeliveries is GET /admin/webhooks/deliveries?status=&payment_no=&order_no=,
// newest first.
func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	q := r.URL.Query()
	rows, err := s.Webhooks.Deliveries(r.Context(), webhook.Filter{Status: webhook.Status(q.Get("status")), PaymentNo: q.Get("payment_no"),
		OrderNo: q.Get("order_no")}, adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]deliveryJSON, 0, len(rows))
	for i := range rows {
		out = append(out, toDeliveryJSON(&rows[i], nil))
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": out})
}

func deliveryID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, orderpay.Errorf(orderpay.EINVALID, "delivery id must be a positive integer")
	}
	return id, nil
}

// webhookDelivery is GET /admin/webhooks/deliveries/{id}: the delivery, its body and every
// attempt.
func (s *Server) webhookDelivery(w http.ResponseWriter, r *http.Request) {
	s.onDelivery(w, r, func(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error) {
		return s.Webhooks.Delivery(ctx, id)
	})
}

// resendWebhook is POST /admin/webhooks/deliveries/{id}/resend: one more attempt now,
// whatever the delivery's status; the answer is the delivery after it. A subscriber that
// refuses is not an error of this request: the attempt's outcome is in the answer.
func (s *Server) resendWebhook(w http.ResponseWriter, r *http.Request) {
	s.onDelivery(w, r, func(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error) {
		return s.Webhooks.Resend(ctx, id)
	})
}

// onDelivery runs step on the delivery the path names and answers with it.
func (s *Server) onDelivery(w http.ResponseWriter, r *http.Request, step func(ctx context.Context, id int64) (*webhook.Delivery, []webhook.Attempt, error)) {
	if s.webhooksOff(w, r) {
		return
	}
	id, err := deliveryID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, attempts, err := step(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteOrder(r, d.OrderNo)
	writeJSON(w, http.StatusOK, toDeliveryJSON(d, attempts))
}

// replayWebhooks is POST /admin/webhooks/replay {"subscriber","since"}: the payment-center
// results written since then (RFC 3339; default: all the outbox holds) are sent to the
// subscriber, oldest first, except those it has a delivery of. A subscriber configured
// later than they were written receives none of them otherwise.
func (s *Server) replayWebhooks(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	var req struct {
		Subscriber string    `json:"subscriber"`
		Since      time.Time `json:"since"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Subscriber == "" {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "subscriber is required: one of %s", strings.Join(s.Webhooks.Subscribers(), ", ")))
		return
	}
	n, err := s.Webhooks.Replay(r.Context(), req.Subscriber, req.Since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscriber": req.Subscriber, "deliveries": n})
}

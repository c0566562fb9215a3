package chaos

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// AppCreated is the answer to POST /admin/apps: the app, its first API key and its webhook
// secret, shown this once.
type AppCreated struct {
	AppID         string   `json:"app_id"`
	Name          string   `json:"name"`
	WebhookURLs   []string `json:"webhook_urls"`
	Channels      []string `json:"channels"`
	APIKey        string   `json:"api_key"`
	KeyID         string   `json:"key_id"`
	WebhookSecret string   `json:"webhook_secret"`
}

// AppPaymentView is what the payments API shows of an app payment.
type AppPaymentView struct {
	PaymentNo       string    `json:"payment_no"`
	MerchantOrderNo string    `json:"merchant_order_no"`
	Amount          int64     `json:"amount"`
	Subject         string    `json:"subject"`
	Channel         string    `json:"channel"`
	Status          string    `json:"status"`
	QRCode          string    `json:"qr_code"`
	ExpiresAt       time.Time `json:"expires_at"`
	OutTradeNo      string    `json:"out_trade_no"`
	Refunded        int64     `json:"refunded"`
	Refundable      int64     `json:"refundable"`
	CloseReason     string    `json:"close_reason"`
}

// AppPaymentRequest is the body of POST /v1/payments.
type AppPaymentRequest struct {
	MerchantOrderNo  string     `json:"merchant_order_no"`
	Amount           int64      `json:"amount"`
	Subject          string     `json:"subject"`
	Channel          string     `json:"channel"`
	ExpiresInSeconds int64      `json:"expires_in_seconds,omitempty"`
	ExpiresAt        *time.Time `json:"expires_at,omitempty"`
}

// AppRefundView is what the payments API shows of an app refund.
type AppRefundView struct {
	RefundNo        string `json:"refund_no"`
	OutRefundNo     string `json:"out_refund_no"`
	PaymentNo       string `json:"payment_no"`
	MerchantOrderNo string `json:"merchant_order_no"`
	Amount          int64  `json:"amount"`
	Reason          string `json:"reason"`
	Status          string `json:"status"`
}

// CreateApp is an admin's POST /admin/apps.
func (c *Client) CreateApp(ctx context.Context, name string, webhookURLs, channels []string) (*AppCreated, error) {
	var out AppCreated
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/apps", c.admin(),
		map[string]any{"name": name, "webhook_urls": webhookURLs, "channels": channels}, &out)
	return &out, err
}

// AppCall calls the payments API with an app's key.
func (c *Client) AppCall(ctx context.Context, key, method, path string, body, out any) error {
	return c.Call(ctx, method, c.API+path, http.Header{"Authorization": {"Bearer " + key}}, body, out)
}

// CreateAppPayment is POST /v1/payments with an app's key.
func (c *Client) CreateAppPayment(ctx context.Context, key string, req AppPaymentRequest) (*AppPaymentView, error) {
	var out AppPaymentView
	err := c.AppCall(ctx, key, http.MethodPost, "/v1/payments", req, &out)
	return &out, err
}

// AppPayment is GET /v1/payments/{payment_no} with an app's key.
func (c *Client) AppPayment(ctx context.Context, key, paymentNo string) (*AppPaymentView, error) {
	var out AppPaymentView
	err := c.AppCall(ctx, key, http.MethodGet, "/v1/payments/"+url.PathEscape(paymentNo), nil, &out)
	return &out, err
}

// CloseAppPayment is POST /v1/payments/{payment_no}/close with an app's key.
func (c *Client) CloseAppPayment(ctx context.Context, key, paymentNo string) (*AppPaymentView, error) {
	var out AppPaymentView
	err := c.AppCall(ctx, key, http.MethodPost, "/v1/payments/"+url.PathEscape(paymentNo)+"/close", nil, &out)
	return &out, err
}

// RefundAppPayment is POST /v1/payments/{payment_no}/refunds with an app's key.
func (c *Client) RefundAppPayment(ctx context.Context, key, paymentNo, refundNo string, amount int64, reason string) (*AppRefundView, error) {
	var out AppRefundView
	err := c.AppCall(ctx, key, http.MethodPost, "/v1/payments/"+url.PathEscape(paymentNo)+"/refunds",
		map[string]any{"refund_no": refundNo, "amount": amount, "reason": reason}, &out)
	return &out, err
}

// AppRefund is GET /v1/refunds/{refund_no} with an app's key.
func (c *Client) AppRefund(ctx context.Context, key, refundNo string) (*AppRefundView, error) {
	var out AppRefundView
	err := c.AppCall(ctx, key, http.MethodGet, "/v1/refunds/"+url.PathEscape(refundNo), nil, &out)
	return &out, err
}

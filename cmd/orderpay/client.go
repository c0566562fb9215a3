package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// apiClient drives a running orderpay and its simulator through their real HTTP APIs, as a
// buyer, an admin and the buyer's wallet would. The bench and the end-to-end tests use it.
type apiClient struct {
	API, Sim, AdminToken string
	HTTP                 *http.Client
}

func newAPIClient(api, sim, token string) *apiClient {
	return &apiClient{API: api, Sim: sim, AdminToken: token, HTTP: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}}
}

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Code   string
	Body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Body) }

// call sends body (JSON-encoded unless nil) and decodes a 2xx answer into out.
func (c *apiClient) call(ctx context.Context, method, url string, header http.Header, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Body: string(data)}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type orderView struct {
	OrderNo          string `json:"order_no"`
	Status           string `json:"status"`
	Payable          int64  `json:"payable"`
	RemainingSeconds int64  `json:"remaining_seconds"`
	PaymentNo        string `json:"payment_no"`
}

type payView struct {
	PaymentNo string    `json:"payment_no"`
	Channel   string    `json:"channel"`
	QRCode    string    `json:"qr_code"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (c *apiClient) createSKU(ctx context.Context, sku string, price, stock int64, productType string) error {
	return c.call(ctx, http.MethodPost, c.API+"/admin/skus", http.Header{"Authorization": {"Bearer " + c.AdminToken}},
		map[string]any{"sku": sku, "merchant_id": "m-bench", "title": "Bench item " + sku, "price": price, "stock": stock,
			"product_type": productType, "stock_policy": "order"}, nil)
}

func (c *apiClient) createOrder(ctx context.Context, buyer, sku string, qty int64) (*orderView, error) {
	var o orderView
	err := c.call(ctx, http.MethodPost, c.API+"/v1/orders", nil,
		map[string]any{"buyer_id": buyer, "items": []map[string]any{{"sku": sku, "qty": qty}}}, &o)
	return &o, err
}

func (c *apiClient) order(ctx context.Context, no string) (*orderView, error) {
	var o orderView
	err := c.call(ctx, http.MethodGet, c.API+"/v1/orders/"+no, nil, nil, &o)
	return &o, err
}

func (c *apiClient) pay(ctx context.Context, no, channel string) (*payView, error) {
	var p payView
	err := c.call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/pay", nil, map[string]string{"channel": channel}, &p)
	return &p, err
}

// walletPay is the buyer scanning the code and paying in full at the channel.
func (c *apiClient) walletPay(ctx context.Context, qrCode string) error {
	return c.call(ctx, http.MethodPost, c.Sim+"/sim/pay", nil, map[string]string{"qr_code": qrCode}, nil)
}

// waitStatus polls the order every interval until it has the status, and returns when it
// first saw it.
func (c *apiClient) waitStatus(ctx context.Context, no, status string, interval time.Duration) (time.Time, error) {
	for {
		o, err := c.order(ctx, no)
		if err != nil {
			return time.Time{}, err
		}
		if o.Status == status {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("order %s still %s: %w", no, o.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}

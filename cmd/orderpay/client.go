package main

import (
	"context"
	"net/http"
	"time"

	"orderpay/chaos"
)

// apiClient is chaos.Client, the harness's HTTP client of the API and the simulator, with
// the short names the end-to-end tests of this package use.
type apiClient struct{ *chaos.Client }

type (
	apiError  = chaos.APIError
	orderView = chaos.OrderView
	payView   = chaos.PayView
)

func newAPIClient(api, sim, token string) *apiClient {
	return &apiClient{chaos.NewClient(api, sim, token)}
}

func (c *apiClient) call(ctx context.Context, method, url string, header http.Header, body, out any) error {
	return c.Call(ctx, method, url, header, body, out)
}

func (c *apiClient) createSKU(ctx context.Context, sku string, price, stock int64, productType string) error {
	return c.CreateSKU(ctx, sku, price, stock, productType)
}

func (c *apiClient) createOrder(ctx context.Context, buyer, sku string, qty int64) (*orderView, error) {
	return c.CreateOrder(ctx, buyer, "", chaos.Item{SKU: sku, Qty: qty})
}

func (c *apiClient) order(ctx context.Context, no string) (*orderView, error) {
	return c.Order(ctx, no)
}

func (c *apiClient) pay(ctx context.Context, no, channel string) (*payView, error) {
	return c.Pay(ctx, no, channel)
}

func (c *apiClient) walletPay(ctx context.Context, qrCode string) error {
	return c.WalletPay(ctx, qrCode)
}

func (c *apiClient) waitStatus(ctx context.Context, no, status string, interval time.Duration) (time.Time, error) {
	return c.WaitStatus(ctx, no, status, interval)
}

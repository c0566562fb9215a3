package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"orderpay"
)

// Client drives a running orderpay and its channel simulator through their real HTTP APIs,
// as a buyer, an admin and the buyer's wallet would. The harness, the bench and the
// end-to-end tests use it.
type Client struct {
	API, Sim, AdminToken string
	HTTP                 *http.Client
	// RetryFor is how long a call that failed at the transport level (connection refused
	// or reset while the server restarts) is retried, with a short backoff. Answers, even
	// 5xx, are never retried here: they are the buyer's to judge. Defaults to 0: no retry.
	RetryFor time.Duration
	// Tokens signs a buyer's bearer token, for a server whose buyers are authenticated
	// (--buyer-auth jwt): a client made by As sends one on every request. Nil sends none.
	Tokens func(buyer string) string
	// TokensWith signs a buyer's bearer token that also carries claims: the buyer's wallet
	// identities (openid_<appid>, alipay_user_id), as a shop's login puts them in the
	// token once the wallet's OAuth has told it. A client made by AsWith uses it. Nil: the
	// claims are not sent.
	TokensWith func(buyer string, claims map[string]any) string

	buyer  string         // who As made this client act as
	claims map[string]any // what AsWith added to the buyer's token
}

// As returns the client acting as buyer: with Tokens set, each of its requests carries a
// freshly signed bearer token of the buyer (an admin call's own Authorization wins).
func (c *Client) As(buyer string) *Client {
	cp := *c
	cp.buyer = buyer
	cp.claims = nil
	return &cp
}

// AsWith returns the client acting as buyer whose login token carries claims too
// (TokensWith): the wallet identities a method that pays for one wallet user needs.
func (c *Client) AsWith(buyer string, claims map[string]any) *Client {
	cp := c.As(buyer)
	cp.claims = claims
	return cp
}

// NewClient returns a client of the API at api and the simulator at sim.
func NewClient(api, sim, adminToken string) *Client {
	return &Client{API: api, Sim: sim, AdminToken: adminToken, HTTP: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
	}}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Code   string // the error code of the JSON body, "" if there was none
	Body   string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Body) }

// ErrorKey names an error for the report: "<status> <code>" for an answer, "transport" for
// a call that never got one.
func ErrorKey(err error) string {
	var e *APIError
	switch {
	case errors.As(err, &e):
		if e.Code == "" {
			return fmt.Sprint(e.Status)
		}
		return fmt.Sprintf("%d %s", e.Status, e.Code)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "transport"
}

// StatusOf is the HTTP status of an API error, or 0.
func StatusOf(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// CodeOf is the error code of an API error, or "".
func CodeOf(err error) string {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Call sends body (JSON-encoded unless nil) to url and decodes a 2xx answer into out. A
// non-2xx answer is an *APIError.
func (c *Client) Call(ctx context.Context, method, url string, header http.Header, body, out any) error {
	_, err := c.CallStatus(ctx, method, url, header, body, out)
	return err
}

// CallStatus is Call that also says the HTTP status of the answer it returns (0 if there
// was none): a queued order's 202 and its replay's 200 differ only there.
func (c *Client) CallStatus(ctx context.Context, method, url string, header http.Header, body, out any) (int, error) {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		payload = b
	}
	backoff := 25 * time.Millisecond
	giveUp := time.Now().Add(c.RetryFor)
	for {
		status, err := c.once(ctx, method, url, header, payload, out)
		var apiErr *APIError
		if err == nil || errors.As(err, &apiErr) || ctx.Err() != nil || time.Now().Add(backoff).After(giveUp) {
			return status, err
		}
		select {
		case <-ctx.Done():
			return status, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 400*time.Millisecond)
	}
}

func (c *Client) once(ctx context.Context, method, url string, header http.Header, payload []byte, out any) (int, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	switch {
	case c.buyer == "":
	case c.claims != nil && c.TokensWith != nil:
		req.Header.Set("Authorization", "Bearer "+c.TokensWith(c.buyer, c.claims))
	case c.Tokens != nil:
		req.Header.Set("Authorization", "Bearer "+c.Tokens(c.buyer))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Body: string(data)}
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

// OrderView is what the API shows of an order.
type OrderView struct {
	OrderNo          string    `json:"order_no"`
	Status           string    `json:"status"`
	Payable          int64     `json:"payable"`
	ProductType      string    `json:"product_type"`
	PayDeadline      time.Time `json:"pay_deadline"`
	RemainingSeconds int64     `json:"remaining_seconds"`
	Remaining        string    `json:"remaining"` // the countdown as shown, orderpay.Countdown
	PaymentNo        string    `json:"payment_no"`
}

// PayView is the answer to POST /v1/orders/{no}/pay.
type PayView struct {
	PaymentNo string                   `json:"payment_no"`
	Channel   string                   `json:"channel"`
	Method    orderpay.PayMethod       `json:"method"`
	QRCode    string                   `json:"qr_code"`
	ExpiresAt time.Time                `json:"expires_at"`
	Pay       *orderpay.PayInstruction `json:"pay"`
}

// PayRequest is a buyer's pay request: the channel and its method, and, in the demo (no
// buyer login), the payer's wallet identity a method needs.
type PayRequest struct {
	Channel      string             `json:"channel"`
	Method       orderpay.PayMethod `json:"method,omitempty"`
	OpenID       string             `json:"openid,omitempty"`
	AlipayUserID string             `json:"alipay_user_id,omitempty"`
}

// WalletResult is the simulator's answer to the buyer's wallet.
type WalletResult struct {
	Channel    string `json:"channel"`
	OutTradeNo string `json:"out_trade_no"`
	Status     string `json:"status"`
	Amount     int64  `json:"amount"`
	// ReturnURL is where the wallet sends the buyer's browser next, if anywhere: Alipay
	// pc's and wap's return_url after paying (with Alipay's signed return), wap's quit_url
	// after giving up, WeChat H5's redirect_url either way.
	ReturnURL string `json:"return_url,omitempty"`
}

// WalletIdentity is a simulated buyer's identity at the wallets: their openid for one
// WeChat appid, and their Alipay user id (GET /sim/wallet/identity).
type WalletIdentity struct {
	OpenID       string `json:"openid"`
	AlipayUserID string `json:"alipay_user_id"`
}

// Item is one line of an order to create.
type Item struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// CreateSKU adds a SKU with its stock (stock policy "order").
func (c *Client) CreateSKU(ctx context.Context, sku string, price, stock int64, productType string) error {
	return c.AddSKU(ctx, SKUSpec{SKU: sku, Price: price, Stock: stock, ProductType: productType, StockPolicy: "order"}, nil)
}

// SKUSpec is the body of POST /admin/skus. MerchantID and Title default to the harness's.
type SKUSpec struct {
	SKU            string `json:"sku"`
	MerchantID     string `json:"merchant_id"`
	Title          string `json:"title"`
	Price          int64  `json:"price"`
	Stock          int64  `json:"stock"`
	ProductType    string `json:"product_type"`
	StockPolicy    string `json:"stock_policy"`
	ReserveMinutes int64  `json:"reserve_minutes,omitempty"`
	StockBuckets   int    `json:"stock_buckets,omitempty"`
	// Queued makes the SKU take its orders through the queue: a buyer's order is a ticket
	// (202), which becomes an order at its turn. QueueWaitSeconds bounds a ticket's wait
	// (0: the server's default); QueuePace the orders per second per instance (0: as fast
	// as the store commits).
	Queued           bool  `json:"queued,omitempty"`
	QueueWaitSeconds int64 `json:"queue_wait_seconds,omitempty"`
	QueuePace        int64 `json:"queue_pace,omitempty"`
}

// SKUView is a SKU as the API shows it.
type SKUView struct {
	SKU            string `json:"sku"`
	StockPolicy    string `json:"stock_policy"`
	ReserveMinutes int64  `json:"reserve_minutes"`
	Stock          struct {
		Available int64 `json:"available"`
		Locked    int64 `json:"locked"`
		Sold      int64 `json:"sold"`
		Total     int64 `json:"total"`
	} `json:"stock"`
}

// AddSKU adds a SKU of any stock policy; out, if not nil, receives the API's answer.
func (c *Client) AddSKU(ctx context.Context, spec SKUSpec, out *SKUView) error {
	spec.MerchantID = cmp.Or(spec.MerchantID, "m-chaos")
	spec.Title = cmp.Or(spec.Title, "Item "+spec.SKU)
	var into any // a nil *SKUView in an interface is not nil: Call would decode into it
	if out != nil {
		into = out
	}
	return c.Call(ctx, http.MethodPost, c.API+"/admin/skus", http.Header{"Authorization": {"Bearer " + c.AdminToken}}, spec, into)
}

// CreateOrder creates an order for buyer. A non-empty idempotencyKey is sent as the
// Idempotency-Key header, so that a create retried after a crash does not order twice.
func (c *Client) CreateOrder(ctx context.Context, buyer, idempotencyKey string, items ...Item) (*OrderView, error) {
	return c.CreateOrderWithCoupon(ctx, buyer, idempotencyKey, "", items...)
}

// CreateOrderWithCoupon places an order that uses one of the buyer's coupons ("" for none).
func (c *Client) CreateOrderWithCoupon(ctx context.Context, buyer, idempotencyKey, couponID string, items ...Item) (*OrderView, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	body := map[string]any{"buyer_id": buyer, "items": items}
	if couponID != "" {
		body["coupon_id"] = couponID
	}
	var o OrderView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders", h, body, &o)
	return &o, err
}

// CreateCouponTemplate adds a coupon template: amountOff fen off an order of at least
// threshold fen.
func (c *Client) CreateCouponTemplate(ctx context.Context, code string, amountOff, threshold int64) error {
	return c.Call(ctx, http.MethodPost, c.API+"/admin/coupons", c.admin(),
		map[string]any{"code": code, "title": code, "amount_off": amountOff, "threshold": threshold}, nil)
}

// IssueCoupon gives a buyer a coupon of a template and returns its id.
func (c *Client) IssueCoupon(ctx context.Context, code, buyer string) (string, error) {
	var cp struct {
		ID string `json:"id"`
	}
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/coupons/"+code+"/issue", c.admin(), map[string]string{"buyer_id": buyer}, &cp)
	return cp.ID, err
}

// Order reads an order.
func (c *Client) Order(ctx context.Context, no string) (*OrderView, error) {
	var o OrderView
	err := c.Call(ctx, http.MethodGet, c.API+"/v1/orders/"+no, nil, nil, &o)
	return &o, err
}

// Pay asks for a QR code to pay the order by channel.
func (c *Client) Pay(ctx context.Context, no, channel string) (*PayView, error) {
	var p PayView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/pay", nil, map[string]string{"channel": channel}, &p)
	return &p, err
}

// PayBy is the buyer asking to pay the order by req's channel and method.
func (c *Client) PayBy(ctx context.Context, no string, req PayRequest) (*PayView, error) {
	var p PayView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/pay", nil, req, &p)
	return &p, err
}

// WalletPayAs is the buyer's wallet paying (or, with action "decline", leaving) the pay
// instruction the shop handed the device, on the device as as describes it (POST /sim/pay
// with "pay": the simulator checks it as that wallet would).
func (c *Client) WalletPayAs(ctx context.Context, as WalletDevice) (*WalletResult, error) {
	var w WalletResult
	err := c.Call(ctx, http.MethodPost, c.Sim+"/sim/pay", nil, as, &w)
	return &w, err
}

// WalletDevice is a pay instruction and the device it is paid on (the simulator's PayAs).
type WalletDevice struct {
	Pay       *orderpay.PayInstruction `json:"pay"`
	UserAgent string                   `json:"user_agent,omitempty"`
	Referer   string                   `json:"referer,omitempty"`
	ClientIP  string                   `json:"client_ip,omitempty"`
	Buyer     string                   `json:"buyer,omitempty"`
	Action    string                   `json:"action,omitempty"`
}

// Identity asks the simulator for buyer's wallet identity, their openid for the WeChat
// appid ("" for none) and Alipay user id: what the wallets' OAuth flows would tell the
// shop's login.
func (c *Client) Identity(ctx context.Context, buyer, appid string) (*WalletIdentity, error) {
	var id WalletIdentity
	q := url.Values{"buyer": {buyer}}
	if appid != "" {
		q.Set("appid", appid)
	}
	err := c.Call(ctx, http.MethodGet, c.Sim+"/sim/wallet/identity?"+q.Encode(), nil, nil, &id)
	return &id, err
}

// Page is the buyer's browser opening a page (the shop's pay page a wallet sends it back
// to, a cashier): any 2xx answer, whatever its body, is nil.
func (c *Client) Page(ctx context.Context, pageURL string, header http.Header) error {
	return c.Call(ctx, http.MethodGet, pageURL, header, nil, nil)
}

// ReturnView is the answer to POST /v1/orders/{no}/return: whether the query the buyer's
// browser came back with is the channel's signed word for one of the order's attempts (a
// hint for the page's words, never applied), why not, and the order's status.
type ReturnView struct {
	Verified   bool   `json:"verified"`
	Channel    string `json:"channel"`
	OutTradeNo string `json:"out_trade_no"`
	Reason     string `json:"reason"`
	Status     string `json:"status"`
}

// Return is the pay page handing the server the query a cashier sent the buyer's browser
// back with ("" for none).
func (c *Client) Return(ctx context.Context, no, query string) (*ReturnView, error) {
	var v ReturnView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/return", nil, map[string]string{"query": query}, &v)
	return &v, err
}

// Cancel is the buyer cancelling the order.
func (c *Client) Cancel(ctx context.Context, no string) (*OrderView, error) {
	var o OrderView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/cancel", nil, nil, &o)
	return &o, err
}

// Wallet is the buyer's wallet doing action ("pay", "scan" or "decline") on a QR code.
func (c *Client) Wallet(ctx context.Context, qrCode, action string) (*WalletResult, error) {
	var w WalletResult
	err := c.Call(ctx, http.MethodPost, c.Sim+"/sim/pay", nil, map[string]string{"qr_code": qrCode, "action": action}, &w)
	return &w, err
}

// WalletPay is the buyer scanning the code and paying in full at the channel.
func (c *Client) WalletPay(ctx context.Context, qrCode string) error {
	_, err := c.Wallet(ctx, qrCode, "pay")
	return err
}

// WaitStatus polls the order every interval until it has the status, and returns when it
// first saw it.
func (c *Client) WaitStatus(ctx context.Context, no, status string, interval time.Duration) (time.Time, error) {
	saw, _, err := c.waitStatus(ctx, no, status, interval)
	return saw, err
}

// waitStatus is WaitStatus that also says how many times it read the order.
func (c *Client) waitStatus(ctx context.Context, no, status string, interval time.Duration) (time.Time, int, error) {
	for reads := 1; ; reads++ {
		o, err := c.Order(ctx, no)
		if err != nil {
			return time.Time{}, reads, err
		}
		if o.Status == status {
			return time.Now(), reads, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, reads, fmt.Errorf("order %s still %s: %w", no, o.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// PosRequest is the body of POST /v1/pos/payments: the buyer's code, and an amount (a
// walk-in sale) or an order number.
type PosRequest struct {
	AuthCode    string `json:"auth_code"`
	Amount      int64  `json:"amount,omitempty"`
	OrderNo     string `json:"order_no,omitempty"`
	StoreID     string `json:"store_id,omitempty"`
	TillID      string `json:"till_id,omitempty"`
	Description string `json:"description,omitempty"`
}

// PosView is what the counter's API shows of a till payment.
type PosView struct {
	No               string     `json:"pos_payment_no"`
	Status           string     `json:"status"`
	Channel          string     `json:"channel"`
	Amount           int64      `json:"amount"`
	OrderNo          string     `json:"order_no"`
	PaymentNo        string     `json:"payment_no"`
	StoreID          string     `json:"store_id"`
	TillID           string     `json:"till_id"`
	CodeTail         string     `json:"code_tail"`
	Refusal          string     `json:"refusal"`
	Message          string     `json:"message"`
	MessageZh        string     `json:"message_zh"`
	Detail           string     `json:"detail"`
	TradeNo          string     `json:"trade_no"`
	PaidAt           *time.Time `json:"paid_at"`
	Answered         string     `json:"answered"`
	PollAfterSeconds int        `json:"poll_after_seconds"`
	// Replayed: the answer carried Idempotent-Replayed (the key had made this payment).
	Replayed bool `json:"-"`
}

// PayCodeView is the simulator's answer to POST /sim/wallet/codes: a buyer's payment code.
type PayCodeView struct {
	AuthCode  string    `json:"auth_code"`
	Channel   string    `json:"channel"`
	Behaviour string    `json:"behaviour"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueCode is a buyer's wallet showing a payment code of channel, for buyer, who will
// behave as behaviour says (confirm, password, wrong_password, never, short), a password
// buyer confirming after the given time.
func (c *Client) IssueCode(ctx context.Context, channel, buyer, behaviour string, after time.Duration) (*PayCodeView, error) {
	var out PayCodeView
	err := c.Call(ctx, http.MethodPost, c.Sim+"/sim/wallet/codes", nil, map[string]any{"channel": channel, "buyer": buyer,
		"behaviour": behaviour, "after_seconds": after.Seconds()}, &out)
	return &out, err
}

// PosPay is a till's POST /v1/pos/payments with the app's key and an Idempotency-Key. It
// waits as long as the server's --pos-wait and then some; a failure at the transport level
// is retried for the client's RetryFor with the same key, as a till must. RetryFor counts
// from the first failure: a request may wait for its buyer longer than RetryFor before the
// server that holds it is killed, and its till must still send it again.
func (c *Client) PosPay(ctx context.Context, key, idempotencyKey string, req PosRequest) (*PosView, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var giveUp time.Time
	backoff := 25 * time.Millisecond
	for {
		v, err := c.posOnce(ctx, key, idempotencyKey, body)
		var apiErr *APIError
		if err == nil || errors.As(err, &apiErr) || ctx.Err() != nil {
			return v, err
		}
		if giveUp.IsZero() {
			giveUp = time.Now().Add(c.RetryFor)
		}
		if time.Now().Add(backoff).After(giveUp) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 400*time.Millisecond)
	}
}

func (c *Client) posOnce(ctx context.Context, key, idempotencyKey string, body []byte) (*PosView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.API+"/v1/pos/payments", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idempotencyKey)
	req.Header.Set("Content-Type", "application/json")
	// A till waits for the buyer: longer than the client's usual timeout.
	hc := *c.HTTP
	hc.Timeout = 3 * time.Minute
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return nil, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Body: string(data)}
	}
	var v PosView
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	return &v, nil
}

// PosPayment is a till's GET /v1/pos/payments/{no}.
func (c *Client) PosPayment(ctx context.Context, key, no string) (*PosView, error) {
	var v PosView
	err := c.AppCall(ctx, key, http.MethodGet, "/v1/pos/payments/"+no, nil, &v)
	return &v, err
}

// WaitPos polls a till payment until it is no longer UNKNOWN, or ctx ends.
func (c *Client) WaitPos(ctx context.Context, key, no string, every time.Duration) (*PosView, error) {
	for {
		v, err := c.PosPayment(ctx, key, no)
		if err != nil || v.Status != "UNKNOWN" {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(every):
		}
	}
}

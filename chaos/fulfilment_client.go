package chaos

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The fulfilment and after-sales calls of the API, for the harness's buyers and
// merchants and for end-to-end tests.

// Address is a delivery address.
type Address struct {
	Name   string `json:"name"`
	Phone  string `json:"phone"`
	Detail string `json:"detail"`
}

// ShipmentView is one parcel as the API shows it.
type ShipmentView struct {
	ShipmentNo              string     `json:"shipment_no"`
	MerchantID              string     `json:"merchant_id"`
	Warehouse               string     `json:"warehouse"`
	Status                  string     `json:"status"`
	WeightG                 int64      `json:"weight_g"`
	Carrier                 string     `json:"carrier"`
	TrackingNo              string     `json:"tracking_no"`
	ReceiveBy               *time.Time `json:"receive_by"`
	ReceiptRemainingSeconds int64      `json:"receipt_remaining_seconds"`
	ReceiptRemaining        string     `json:"receipt_remaining"`
	BuyerExtended           bool       `json:"buyer_extended"`
	Extensions              int        `json:"extensions"`
	ReceivedBy              string     `json:"received_by"`
	Items                   []struct {
		Line     int    `json:"line"`
		SKU      string `json:"sku"`
		Qty      int64  `json:"qty"`
		Refunded int64  `json:"refunded"`
	} `json:"items"`
}

// AfterSaleItem is some units of one order line.
type AfterSaleItem struct {
	Line   int    `json:"line"`
	SKU    string `json:"sku,omitempty"`
	Qty    int64  `json:"qty"`
	Amount int64  `json:"amount,omitempty"`
}

// AfterSaleView is one after-sales request as the API shows it.
type AfterSaleView struct {
	AfterSaleNo      string          `json:"after_sale_no"`
	OrderNo          string          `json:"order_no"`
	Kind             string          `json:"kind"`
	Status           string          `json:"status"`
	Amount           int64           `json:"amount"`
	AutoReview       bool            `json:"auto_review"`
	ReturnTrackingNo string          `json:"return_tracking_no"`
	Items            []AfterSaleItem `json:"items"`
}

// OrderDetail is GET /v1/orders/{no} with everything after payment.
type OrderDetail struct {
	OrderView
	BuyerID string   `json:"buyer_id"`
	Address *Address `json:"address"`
	Items   []struct {
		Line     int    `json:"line"`
		SKU      string `json:"sku"`
		Qty      int64  `json:"qty"`
		Payable  int64  `json:"payable"`
		Discount int64  `json:"discount"`
	} `json:"items"`
	Shipments    []ShipmentView  `json:"shipments"`
	Refunds      []AfterSaleView `json:"refunds"`
	RefundStatus string          `json:"refund_status"`
	Refunded     int64           `json:"refunded"`
}

// OrderDetail reads an order with its parcels and after-sales.
func (c *Client) OrderDetail(ctx context.Context, no string) (*OrderDetail, error) {
	var o OrderDetail
	err := c.Call(ctx, http.MethodGet, c.API+"/v1/orders/"+no, nil, nil, &o)
	return &o, err
}

func (c *Client) admin() http.Header { return http.Header{"Authorization": {"Bearer " + c.AdminToken}} }

// ChangeAddress is the buyer's PATCH of the delivery address.
func (c *Client) ChangeAddress(ctx context.Context, no, buyer string, a Address) (*OrderDetail, error) {
	var o OrderDetail
	err := c.Call(ctx, http.MethodPatch, c.API+"/v1/orders/"+no+"/address", nil,
		map[string]string{"buyer_id": buyer, "name": a.Name, "phone": a.Phone, "detail": a.Detail}, &o)
	return &o, err
}

// Ship is the merchant handing a parcel to the carrier (an admin call).
func (c *Client) Ship(ctx context.Context, shipmentNo, carrier, trackingNo string) (*ShipmentView, error) {
	var s ShipmentView
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/shipments/"+shipmentNo+"/ship", c.admin(),
		map[string]string{"carrier": carrier, "tracking_no": trackingNo}, &s)
	return &s, err
}

// ConfirmReceipt is the buyer confirming a parcel arrived.
func (c *Client) ConfirmReceipt(ctx context.Context, no, shipmentNo, buyer string) (*ShipmentView, error) {
	var s ShipmentView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/shipments/"+shipmentNo+"/confirm", nil,
		map[string]string{"buyer_id": buyer}, &s)
	return &s, err
}

// ExtendReceipt is the buyer's one extension of a parcel's receipt deadline.
func (c *Client) ExtendReceipt(ctx context.Context, no, shipmentNo, buyer string) (*ShipmentView, error) {
	var s ShipmentView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/shipments/"+shipmentNo+"/extend", nil,
		map[string]string{"buyer_id": buyer}, &s)
	return &s, err
}

// AdminExtendReceipt is the merchant's or the platform's extension, by days.
func (c *Client) AdminExtendReceipt(ctx context.Context, shipmentNo, by string, days int) (*ShipmentView, error) {
	var s ShipmentView
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/shipments/"+shipmentNo+"/extend", c.admin(),
		map[string]any{"by": by, "days": days}, &s)
	return &s, err
}

// RequestAfterSale is the buyer asking for a refund ("refund", before shipping) or a
// return ("return").
func (c *Client) RequestAfterSale(ctx context.Context, no, buyer, kind, reason string, items ...AfterSaleItem) (*AfterSaleView, error) {
	var a AfterSaleView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/refunds", nil,
		map[string]any{"buyer_id": buyer, "kind": kind, "reason": reason, "items": items}, &a)
	return &a, err
}

// ReviewAfterSale is the merchant's approve, reject (with a reason) or receive-goods.
func (c *Client) ReviewAfterSale(ctx context.Context, afterSaleNo, step, reason string) (*AfterSaleView, error) {
	var a AfterSaleView
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/after-sales/"+afterSaleNo+"/"+step, c.admin(), map[string]string{"reason": reason}, &a)
	return &a, err
}

// ShipBack is the buyer sending a return back.
func (c *Client) ShipBack(ctx context.Context, no, afterSaleNo, buyer, carrier, trackingNo string) (*AfterSaleView, error) {
	var a AfterSaleView
	err := c.Call(ctx, http.MethodPost, c.API+"/v1/orders/"+no+"/refunds/"+afterSaleNo+"/ship-back", nil,
		map[string]string{"buyer_id": buyer, "carrier": carrier, "tracking_no": trackingNo}, &a)
	return &a, err
}

// RefundView is a refund as the admin API shows it.
type RefundView struct {
	OutRefundNo   string     `json:"out_refund_no"`
	OutTradeNo    string     `json:"out_trade_no"`
	PaymentNo     string     `json:"payment_no"`
	Channel       string     `json:"channel"`
	Amount        int64      `json:"amount"`
	Reason        string     `json:"reason"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	NextAt        *time.Time `json:"next_at"`
	Tries         int        `json:"tries"`
	Retried       int        `json:"retried"`
	Problem       string     `json:"problem"`
	NeedsActionAt *time.Time `json:"needs_action_at"`
	ResolvedBy    string     `json:"resolved_by"`
	ResolvedRef   string     `json:"resolved_ref"`
	OrderNo       string     `json:"order_no"` // in the queue only
}

// RefundQueue is the operators' queue (GET /admin/refunds/needs-action), oldest first.
func (c *Client) RefundQueue(ctx context.Context) ([]RefundView, error) {
	var out struct {
		Refunds []RefundView `json:"refunds"`
	}
	err := c.Call(ctx, http.MethodGet, c.API+"/admin/refunds/needs-action", c.admin(), nil, &out)
	return out.Refunds, err
}

// Refund reads one refund (GET /admin/refunds/{no}).
func (c *Client) Refund(ctx context.Context, outRefundNo string) (*RefundView, error) {
	return c.refundCall(ctx, http.MethodGet, outRefundNo, "", nil)
}

// RetryRefund is an operator sending a refund again now (POST /admin/refunds/{no}/retry).
func (c *Client) RetryRefund(ctx context.Context, outRefundNo string) (*RefundView, error) {
	return c.refundCall(ctx, http.MethodPost, outRefundNo, "/retry", struct{}{})
}

// ResolveRefund is an operator recording a refund paid back outside the channel (POST
// /admin/refunds/{no}/resolve).
func (c *Client) ResolveRefund(ctx context.Context, outRefundNo, reference, note string) (*RefundView, error) {
	return c.refundCall(ctx, http.MethodPost, outRefundNo, "/resolve", map[string]string{"reference": reference, "note": note})
}

func (c *Client) refundCall(ctx context.Context, method, outRefundNo, action string, body any) (*RefundView, error) {
	var out struct {
		Refund RefundView `json:"refund"`
	}
	err := c.Call(ctx, method, c.API+"/admin/refunds/"+url.PathEscape(outRefundNo)+action, c.admin(), body, &out)
	return &out.Refund, err
}

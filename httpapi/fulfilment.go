package httpapi

import (
	"context"
	"net/http"
	"time"

	"orderpay"
	"orderpay/order"
)

// Fulfilment and after-sales. The buyer's steps act only on the buyer's own orders (another
// buyer's order is 404); without authentication (the demo) they name their buyer_id in the
// body. The merchant's and the platform's steps are admin endpoints (orderpay has no
// merchant accounts of its own).
func (s *Server) fulfilmentRoutes(mux *routeMux) {
	mux.HandleFunc("PATCH /v1/orders/{order_no}/address", s.buyerRoute(true, s.changeAddress))
	mux.HandleFunc("POST /v1/orders/{order_no}/shipments/{shipment_no}/confirm", s.buyerRoute(true, s.confirmReceipt))
	mux.HandleFunc("POST /v1/orders/{order_no}/shipments/{shipment_no}/extend", s.buyerRoute(true, s.buyerExtend))
	mux.HandleFunc("POST /admin/shipments/{shipment_no}/ship", s.admin(s.ship))
	mux.HandleFunc("POST /admin/shipments/{shipment_no}/extend", s.admin(s.adminExtend))
	mux.HandleFunc("POST /v1/orders/{order_no}/refunds", s.buyerRoute(true, s.requestAfterSale))
	mux.HandleFunc("GET /v1/orders/{order_no}/refunds", s.buyerRoute(false, s.listAfterSales))
	mux.HandleFunc("POST /v1/orders/{order_no}/refunds/{after_sale_no}/ship-back", s.buyerRoute(true, s.shipBack))
	mux.HandleFunc("GET /admin/after-sales", s.admin(s.reviewQueue))
	mux.HandleFunc("POST /admin/after-sales/{after_sale_no}/approve", s.admin(s.approveAfterSale))
	mux.HandleFunc("POST /admin/after-sales/{after_sale_no}/reject", s.admin(s.rejectAfterSale))
	mux.HandleFunc("POST /admin/after-sales/{after_sale_no}/receive-goods", s.admin(s.receiveGoods))
}

type addressJSON struct {
	Name   string `json:"name"`
	Phone  string `json:"phone"`
	Detail string `json:"detail"`
}

func (a *addressJSON) address() orderpay.Address {
	return orderpay.Address{Name: a.Name, Phone: a.Phone, Detail: a.Detail}
}

type shipmentJSON struct {
	ShipmentNo string                  `json:"shipment_no"`
	MerchantID string                  `json:"merchant_id"`
	Warehouse  string                  `json:"warehouse"`
	Status     orderpay.ShipmentStatus `json:"status"`
	WeightG    int64                   `json:"weight_g"`
	VolumeCm3  int64                   `json:"volume_cm3"`
	Carrier    string                  `json:"carrier,omitempty"`
	TrackingNo string                  `json:"tracking_no,omitempty"`
	ShippedAt  *time.Time              `json:"shipped_at,omitempty"`
	// ReceiveBy is the receipt deadline; ReceiptRemainingSeconds and ReceiptRemaining count
	// down to it (the same display as the pay countdown).
	ReceiveBy               *time.Time         `json:"receive_by,omitempty"`
	ReceiptRemainingSeconds int64              `json:"receipt_remaining_seconds"`
	ReceiptRemaining        string             `json:"receipt_remaining,omitempty"`
	BuyerExtended           bool               `json:"buyer_extended"`
	Extensions              int                `json:"extensions"`
	ReceivedAt              *time.Time         `json:"received_at,omitempty"`
	ReceivedBy              string             `json:"received_by,omitempty"`
	Items                   []shipmentItemJSON `json:"items"`
}

type shipmentItemJSON struct {
	Line     int    `json:"line"`
	SKU      string `json:"sku"`
	Qty      int64  `json:"qty"`
	Refunded int64  `json:"refunded"`
}

func (s *Server) toShipmentJSON(sh *orderpay.Shipment) shipmentJSON {
	out := shipmentJSON{ShipmentNo: sh.No, MerchantID: sh.MerchantID, Warehouse: sh.Warehouse, Status: sh.Status, WeightG: sh.WeightG,
		VolumeCm3: sh.VolumeCm3, Carrier: sh.Carrier, TrackingNo: sh.TrackingNo, ShippedAt: optionalTime(sh.ShippedAt),
		ReceiveBy: optionalTime(sh.ReceiveBy), ReceiptRemainingSeconds: sh.ReceiptSecondsLeft(s.Clock.Now()),
		BuyerExtended: sh.BuyerExtended, Extensions: sh.Extensions, ReceivedAt: optionalTime(sh.ReceivedAt), ReceivedBy: sh.ReceivedBy}
	if sh.Status == orderpay.ShipmentShipped {
		out.ReceiptRemaining = orderpay.Countdown(out.ReceiptRemainingSeconds)
	}
	for _, it := range sh.Items {
		out.Items = append(out.Items, shipmentItemJSON{Line: it.Line, SKU: it.SKU, Qty: it.Qty, Refunded: it.Refunded})
	}
	return out
}

type afterSaleItemJSON struct {
	Line   int    `json:"line"`
	SKU    string `json:"sku,omitempty"`
	Qty    int64  `json:"qty"`
	Amount int64  `json:"amount,omitempty"`
}

type afterSaleJSON struct {
	AfterSaleNo      string                   `json:"after_sale_no"`
	OrderNo          string                   `json:"order_no"`
	Kind             orderpay.AfterSaleKind   `json:"kind"`
	Status           orderpay.AfterSaleStatus `json:"status"`
	Reason           string                   `json:"reason,omitempty"`
	Amount           int64                    `json:"amount"`
	AutoReview       bool                     `json:"auto_review"`
	ReturnCarrier    string                   `json:"return_carrier,omitempty"`
	ReturnTrackingNo string                   `json:"return_tracking_no,omitempty"`
	CreatedAt        time.Time                `json:"created_at"`
	RefundedAt       *time.Time               `json:"refunded_at,omitempty"`
	Items            []afterSaleItemJSON      `json:"items"`
}

func toAfterSaleJSON(a *orderpay.AfterSale) afterSaleJSON {
	out := afterSaleJSON{AfterSaleNo: a.No, OrderNo: a.OrderNo, Kind: a.Kind, Status: a.Status, Reason: a.Reason, Amount: a.Amount,
		AutoReview: a.AutoReview, ReturnCarrier: a.ReturnCarrier, ReturnTrackingNo: a.ReturnTrackingNo, CreatedAt: a.CreatedAt.UTC(),
		RefundedAt: optionalTime(a.RefundedAt)}
	for _, it := range a.Items {
		out.Items = append(out.Items, afterSaleItemJSON{Line: it.Line, SKU: it.SKU, Qty: it.Qty, Amount: it.Amount})
	}
	return out
}

func toAfterSalesJSON(as []orderpay.AfterSale) []afterSaleJSON {
	out := make([]afterSaleJSON, 0, len(as))
	for i := range as {
		out = append(out, toAfterSaleJSON(&as[i]))
	}
	return out
}

// toFullOrderJSON is the order with its parcels and after-sales, as GET /v1/orders/{no}
// shows it. An order that has been paid is read again with them from one snapshot, so that
// its status and its requests agree (a page that saw every request ended but the order not
// yet REFUNDED would stop following it). An order never paid (no PaymentNo, which is set
// by the transition to PAID) has neither: its parcels are made in that transaction.
func (s *Server) toFullOrderJSON(ctx context.Context, o *orderpay.Order) (orderJSON, error) {
	if o.PaymentNo == "" {
		return s.toOrderJSON(o), nil
	}
	page, err := s.Orders.Page(ctx, o.No)
	if err != nil {
		return orderJSON{}, err
	}
	return s.pageJSON(page), nil
}

// pageJSON is the order of page as GET shows it, with its parcels and after-sales requests.
func (s *Server) pageJSON(page *orderpay.OrderPage) orderJSON {
	out := s.toOrderJSON(page.Order)
	for i := range page.Parcels {
		out.Shipments = append(out.Shipments, s.toShipmentJSON(&page.Parcels[i]))
	}
	if page.Order.PaymentNo == "" {
		return out
	}
	out.Refunds = toAfterSalesJSON(page.Sales)
	out.RefundStatus = orderpay.OrderRefundStatus(page.Order, page.Sales)
	for _, a := range page.Sales {
		if a.Status == orderpay.AfterSaleSucceeded {
			out.Refunded += a.Amount
		}
	}
	return out
}

// writeOrder answers with the order as GET shows it.
func (s *Server) writeOrder(w http.ResponseWriter, r *http.Request, o *orderpay.Order) {
	out, err := s.toFullOrderJSON(r.Context(), o)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) changeAddress(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		BuyerID string `json:"buyer_id"`
		addressJSON
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
	o, err := s.Orders.ChangeAddress(r.Context(), r.PathValue("order_no"), buyer, req.address())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeOrder(w, r, o)
}

// buyerOnly is the body of a buyer's step that carries nothing but who they are.
type buyerOnly struct {
	BuyerID string `json:"buyer_id"`
}

func (s *Server) writeShipment(w http.ResponseWriter, r *http.Request, sh *orderpay.Shipment, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteOrder(r, sh.OrderNo)
	writeJSON(w, http.StatusOK, s.toShipmentJSON(sh))
}

// decodeBuyerOnly reads the body of a buyer's step that carries nothing but who they are
// (and may be empty when the buyer is authenticated), and says who acts.
func (s *Server) decodeBuyerOnly(w http.ResponseWriter, r *http.Request, c caller) (string, error) {
	var req buyerOnly
	if c.buyer == "" || r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return "", err
		}
	}
	return c.buyerID(req.BuyerID)
}

func (s *Server) confirmReceipt(w http.ResponseWriter, r *http.Request, c caller) {
	buyer, err := s.decodeBuyerOnly(w, r, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sh, err := s.Orders.ConfirmReceipt(r.Context(), r.PathValue("order_no"), r.PathValue("shipment_no"), buyer)
	s.writeShipment(w, r, sh, err)
}

func (s *Server) buyerExtend(w http.ResponseWriter, r *http.Request, c caller) {
	buyer, err := s.decodeBuyerOnly(w, r, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sh, err := s.Orders.BuyerExtendReceipt(r.Context(), r.PathValue("order_no"), r.PathValue("shipment_no"), buyer)
	s.writeShipment(w, r, sh, err)
}

func (s *Server) ship(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Carrier    string `json:"carrier"`
		TrackingNo string `json:"tracking_no"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sh, err := s.Orders.Ship(r.Context(), r.PathValue("shipment_no"), req.Carrier, req.TrackingNo, s.operator(r))
	s.writeShipment(w, r, sh, err)
}

func (s *Server) adminExtend(w http.ResponseWriter, r *http.Request) {
	var req struct {
		By   string `json:"by"` // merchant or platform
		Days int    `json:"days"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.By != orderpay.ExtendByMerchant && req.By != orderpay.ExtendByPlatform {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, `"by" must be merchant or platform (the buyer extends through /v1)`))
		return
	}
	sh, err := s.Orders.ExtendReceipt(r.Context(), r.PathValue("shipment_no"), req.By, s.operator(r), time.Duration(req.Days)*24*time.Hour)
	s.writeShipment(w, r, sh, err)
}

func (s *Server) writeAfterSale(w http.ResponseWriter, r *http.Request, status int, a *orderpay.AfterSale, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteOrder(r, a.OrderNo)
	writeJSON(w, status, toAfterSaleJSON(a))
}

func (s *Server) requestAfterSale(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		BuyerID string              `json:"buyer_id"`
		Kind    string              `json:"kind"`
		Reason  string              `json:"reason"`
		Items   []afterSaleItemJSON `json:"items"`
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
	ar := order.AfterSaleRequest{BuyerID: buyer, Kind: orderpay.AfterSaleKind(req.Kind), Reason: req.Reason}
	for _, it := range req.Items {
		ar.Items = append(ar.Items, order.AfterSaleItemRequest{Line: it.Line, Qty: it.Qty})
	}
	a, err := s.Orders.RequestAfterSale(r.Context(), r.PathValue("order_no"), ar)
	s.writeAfterSale(w, r, http.StatusCreated, a, err)
}

func (s *Server) listAfterSales(w http.ResponseWriter, r *http.Request, c caller) {
	if _, err := s.ownOrder(r.Context(), c, r.PathValue("order_no")); err != nil {
		s.writeError(w, r, err)
		return
	}
	as, err := s.Orders.AfterSales(r.Context(), r.PathValue("order_no"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": toAfterSalesJSON(as)})
}

func (s *Server) shipBack(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		BuyerID    string `json:"buyer_id"`
		Carrier    string `json:"carrier"`
		TrackingNo string `json:"tracking_no"`
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
	a, err := s.Orders.ShipBack(r.Context(), r.PathValue("order_no"), r.PathValue("after_sale_no"), buyer, req.Carrier, req.TrackingNo)
	s.writeAfterSale(w, r, http.StatusOK, a, err)
}

func (s *Server) reviewQueue(w http.ResponseWriter, r *http.Request) {
	status := orderpay.AfterSaleStatus(r.URL.Query().Get("status"))
	if status == "" {
		status = orderpay.AfterSaleRequested
	}
	if !orderpay.AfterSaleMachine.Known(status) {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "unknown status %q", status))
		return
	}
	as, err := s.Orders.AfterSalesInStatus(r.Context(), status, 200)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": toAfterSalesJSON(as)})
}

func (s *Server) approveAfterSale(w http.ResponseWriter, r *http.Request) {
	a, err := s.Orders.Approve(r.Context(), r.PathValue("after_sale_no"), s.operator(r))
	s.writeAfterSale(w, r, http.StatusOK, a, err)
}

func (s *Server) rejectAfterSale(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Orders.Reject(r.Context(), r.PathValue("after_sale_no"), s.operator(r), req.Reason)
	s.writeAfterSale(w, r, http.StatusOK, a, err)
}

func (s *Server) receiveGoods(w http.ResponseWriter, r *http.Request) {
	a, err := s.Orders.ReceiveGoods(r.Context(), r.PathValue("after_sale_no"), s.operator(r))
	s.writeAfterSale(w, r, http.StatusOK, a, err)
}

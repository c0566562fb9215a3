package httpapi

import (
	"net/http"
	"time"

	"orderpay"
	"orderpay/order"
)

// Coupons: admins define templates and issue coupons to buyers; a buyer lists
// theirs and names one in POST /v1/orders ("coupon_id").
func (s *Server) couponRoutes(mux *routeMux) {
	mux.HandleFunc("POST /admin/coupons", s.admin(s.createCouponTemplate))
	mux.HandleFunc("POST /admin/coupons/{code}/issue", s.admin(s.issueCoupon))
	mux.HandleFunc("GET /v1/buyers/{buyer_id}/coupons", s.buyerRoute(false, s.buyerCoupons))
}

type couponTemplateJSON struct {
	Code       string     `json:"code"`
	Title      string     `json:"title"`
	AmountOff  int64      `json:"amount_off"`
	Threshold  int64      `json:"threshold"`
	ValidFrom  *time.Time `json:"valid_from,omitempty"`
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
}

func toCouponTemplateJSON(t *orderpay.CouponTemplate) couponTemplateJSON {
	return couponTemplateJSON{Code: t.Code, Title: t.Title, AmountOff: t.AmountOff, Threshold: t.Threshold,
		ValidFrom: optionalTime(t.ValidFrom), ValidUntil: optionalTime(t.ValidUntil), CreatedAt: t.CreatedAt.UTC()}
}

type couponJSON struct {
	ID       string                `json:"id"`
	Code     string                `json:"code"`
	BuyerID  string                `json:"buyer_id"`
	Status   orderpay.CouponStatus `json:"status"`
	OrderNo  string                `json:"order_no,omitempty"`
	IssuedAt time.Time             `json:"issued_at"`
	UsedAt   *time.Time            `json:"used_at,omitempty"`
	// Template is set in a buyer's list, so that the app can show what the coupon is worth.
	Template *couponTemplateJSON `json:"template,omitempty"`
}

func toCouponJSON(c *orderpay.Coupon) couponJSON {
	return couponJSON{ID: c.ID, Code: c.Code, BuyerID: c.BuyerID, Status: c.Status, OrderNo: c.OrderNo,
		IssuedAt: c.IssuedAt.UTC(), UsedAt: optionalTime(c.UsedAt)}
}

// createCouponTemplate is POST /admin/coupons {code,title,amount_off,threshold,valid_from?,valid_until?}.
func (s *Server) createCouponTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Code       string     `json:"code"`
		Title      string     `json:"title"`
		AmountOff  int64      `json:"amount_off"`
		Threshold  int64      `json:"threshold"`
		ValidFrom  *time.Time `json:"valid_from"`
		ValidUntil *time.Time `json:"valid_until"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	n := order.NewCouponTemplate{Code: req.Code, Title: req.Title, AmountOff: req.AmountOff, Threshold: req.Threshold}
	if req.ValidFrom != nil {
		n.ValidFrom = *req.ValidFrom
	}
	if req.ValidUntil != nil {
		n.ValidUntil = *req.ValidUntil
	}
	t, err := s.Orders.CreateCouponTemplate(r.Context(), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toCouponTemplateJSON(t))
}

// issueCoupon is POST /admin/coupons/{code}/issue {buyer_id}.
func (s *Server) issueCoupon(w http.ResponseWriter, r *http.Request) {
	var req struct {
		BuyerID string `json:"buyer_id"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.Orders.IssueCoupon(r.Context(), r.PathValue("code"), req.BuyerID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toCouponJSON(c))
}

// buyerCoupons is GET /v1/buyers/{buyer_id}/coupons: the buyer's coupons, used or not; an
// authenticated buyer's own only.
func (s *Server) buyerCoupons(w http.ResponseWriter, r *http.Request, c caller) {
	buyer, err := c.buyerID(r.PathValue("buyer_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.Orders.ListCoupons(r.Context(), buyer)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]couponJSON, 0, len(list))
	for i := range list {
		c := toCouponJSON(&list[i].Coupon)
		t := toCouponTemplateJSON(&list[i].Template)
		c.Template = &t
		out = append(out, c)
	}
	writeJSON(w, http.StatusOK, map[string]any{"coupons": out})
}

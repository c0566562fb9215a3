package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"

	"orderpay"
	"orderpay/payment"
)

// The operations console's endpoints (under /admin, behind the token), the buyer's order
// list and the QR images. They read through Server.Ops; without it they answer 404.

func (s *Server) opsRoutes(mux *routeMux) {
	mux.HandleFunc("GET /v1/orders", s.buyerRoute(false, s.buyerOrders))
	mux.HandleFunc("GET /v1/orders/{order_no}/qr.png", s.buyerRoute(false, s.qrImage))
	mux.HandleFunc("GET /v1/orders/{order_no}/events", s.buyerRoute(false, s.orderEvents))
	mux.HandleFunc("GET /admin/orders", s.admin(s.withOps(s.searchOrders)))
	mux.HandleFunc("GET /admin/orders/{order_no}/timeline", s.admin(s.withOps(s.timeline)))
	mux.HandleFunc("GET /admin/refunds", s.admin(s.withOps(s.refundsByReason)))
	mux.HandleFunc("GET /admin/charts", s.admin(s.withOps(s.charts)))
	mux.HandleFunc("GET /admin/channels", s.admin(s.channels))
}

// channels is GET /admin/channels: each configured channel's mode, ids and the
// fingerprints of the keys and certificates it verifies with (never a secret), for an
// operator comparing them with the merchant consoles.
func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	out := map[string]orderpay.ChannelDescription{}
	if s.Channels != nil {
		out = s.Channels()
	}
	writeJSON(w, http.StatusOK, map[string]any{"channels": out})
}

func (s *Server) withOps(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Ops == nil {
			s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no operations store configured"))
			return
		}
		next(w, r)
	}
}

// listLimit is how many orders a list returns.
const listLimit = 100

type orderRowJSON struct {
	OrderNo   string               `json:"order_no"`
	BuyerID   string               `json:"buyer_id"`
	Status    orderpay.OrderStatus `json:"status"`
	Payable   int64                `json:"payable"`
	PaymentNo string               `json:"payment_no,omitempty"`
	CreatedAt time.Time            `json:"created_at"`
}

func toOrderRows(orders []orderpay.Order) []orderRowJSON {
	out := make([]orderRowJSON, 0, len(orders))
	for _, o := range orders {
		out = append(out, orderRowJSON{OrderNo: o.No, BuyerID: o.BuyerID, Status: o.Status, Payable: o.Payable, PaymentNo: o.PaymentNo,
			CreatedAt: o.CreatedAt.UTC()})
	}
	return out
}

// buyerOrders is GET /v1/orders: the buyer's orders, newest first. An authenticated buyer
// sees only their own (?buyer_id= may name them, or be left out); without authentication
// (the demo) buyer_id is required.
func (s *Server) buyerOrders(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Ops == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no operations store configured"))
		return
	}
	buyer, err := c.buyerID(r.URL.Query().Get("buyer_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if buyer == "" || len(buyer) > 64 {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "buyer_id is required (at most 64 characters)"))
		return
	}
	orders, err := s.Ops.Orders(r.Context(), orderpay.OrderFilter{BuyerID: buyer}, listLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": toOrderRows(orders)})
}

// searchOrders is GET /admin/orders?q=…: q is an order status, or matches the start of an
// order number (digits), or a buyer id exactly; empty lists the newest orders.
func (s *Server) searchOrders(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 64 {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "q has at most 64 characters"))
		return
	}
	var filters []orderpay.OrderFilter
	switch {
	case q == "":
		filters = []orderpay.OrderFilter{{}}
	case slices.Contains(orderpay.OrderMachine.States(), orderpay.OrderStatus(strings.ToUpper(q))):
		filters = []orderpay.OrderFilter{{Status: orderpay.OrderStatus(strings.ToUpper(q))}}
	case strings.Trim(q, "0123456789") == "":
		// Digits: the start of an order number (or a whole one), or a buyer's id.
		filters = []orderpay.OrderFilter{{NoPrefix: q}, {BuyerID: q}}
	default:
		// Order numbers are digits (orderpay.OrderNoDigits of them): q begins none.
		filters = []orderpay.OrderFilter{{BuyerID: q}}
	}
	seen := map[string]bool{}
	var found []orderpay.Order
	for _, f := range filters {
		orders, err := s.Ops.Orders(r.Context(), f, listLimit)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, o := range orders {
			if !seen[o.No] {
				seen[o.No] = true
				found = append(found, o)
			}
		}
	}
	slices.SortStableFunc(found, func(a, b orderpay.Order) int { return b.CreatedAt.Compare(a.CreatedAt) })
	writeJSON(w, http.StatusOK, map[string]any{"orders": toOrderRows(found[:min(len(found), listLimit)])})
}

// timelineEventJSON is one line of an order's timeline. Kind is "transition" (of the order,
// its payment, an attempt or a refund), "notification" (as received, verified or not) or
// "query" (one question to the channel and its answer).
type timelineEventJSON struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Entity   string    `json:"entity,omitempty"`
	EntityNo string    `json:"entity_no,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Event    string    `json:"event,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Raw      string    `json:"raw,omitempty"`
	Channel  string    `json:"channel,omitempty"`
	Verified *bool     `json:"verified,omitempty"`
	Result   string    `json:"result,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	Trigger  string    `json:"trigger,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	seq      int       // a tie-break that keeps each source's own order
}

type attemptJSON struct {
	OutTradeNo string                      `json:"out_trade_no"`
	Channel    string                      `json:"channel"`
	Seq        int                         `json:"seq"`
	Amount     int64                       `json:"amount"`
	Status     orderpay.ChannelOrderStatus `json:"status"`
	Unknown    bool                        `json:"unknown"`
	TradeNo    string                      `json:"trade_no,omitempty"`
	CreatedAt  time.Time                   `json:"created_at"`
	PaidAt     *time.Time                  `json:"paid_at,omitempty"`
}

type refundJSON struct {
	OutRefundNo string                       `json:"out_refund_no"`
	OutTradeNo  string                       `json:"out_trade_no"`
	PaymentNo   string                       `json:"payment_no"`
	Channel     string                       `json:"channel"`
	Amount      int64                        `json:"amount"`
	Reason      string                       `json:"reason"`
	Status      orderpay.ChannelRefundStatus `json:"status"`
	Attempts    int                          `json:"attempts"`
	// NextAt: when the refund worker sends or queries it next (PENDING, PROCESSING).
	NextAt *time.Time `json:"next_at,omitempty"`
	// Tries: the channel's refusals for now since RetryingSince; Retried: the times it was set
	// to be sent again after one, over its whole life.
	Tries         int        `json:"tries"`
	Retried       int        `json:"retried"`
	RetryingSince *time.Time `json:"retrying_since,omitempty"`
	// Problem: the last refusal, or why it waits for an operator (NeedsActionAt: since when).
	Problem       string     `json:"problem,omitempty"`
	NeedsActionAt *time.Time `json:"needs_action_at,omitempty"`
	ResolvedBy    string     `json:"resolved_by,omitempty"`
	ResolvedRef   string     `json:"resolved_ref,omitempty"`
	ResolvedNote  string     `json:"resolved_note,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	RefundedAt    *time.Time `json:"refunded_at,omitempty"`
	// Sends: the times a worker sent or queried it at the channel; ClaimedUntil: a worker
	// claimed it until then to send or query it, and its answer is not recorded yet;
	// Warning: what to check before settling it outside the channel (payment.RefundWarning).
	Sends        int        `json:"sends"`
	ClaimedUntil *time.Time `json:"claimed_until,omitempty"`
	Warning      string     `json:"warning,omitempty"`
}

func toRefundJSON(r *orderpay.ChannelRefund) refundJSON {
	out := refundJSON{OutRefundNo: r.OutRefundNo, OutTradeNo: r.OutTradeNo, PaymentNo: r.PaymentNo, Channel: r.Channel, Amount: r.Amount,
		Reason: r.Reason, Status: r.Status, Attempts: r.Attempts, Tries: r.Tries, Retried: r.Retried,
		RetryingSince: optionalTime(r.RetryingSince), Problem: r.Problem, NeedsActionAt: optionalTime(r.NeedsActionAt),
		ResolvedBy: r.ResolvedBy, ResolvedRef: r.ResolvedRef, ResolvedNote: r.ResolvedNote,
		CreatedAt: r.CreatedAt.UTC(), RefundedAt: optionalTime(r.RefundedAt), Sends: r.Sends, ClaimedUntil: optionalTime(r.ClaimedUntil),
		Warning: payment.RefundWarning(r)}
	if r.Status == orderpay.ChannelRefundPending || r.Status == orderpay.ChannelRefundProcessing {
		out.NextAt = optionalTime(r.NextAt)
	}
	return out
}

// timelineLimit bounds each source of one order's timeline.
const timelineLimit = 1000

// timeline is GET /admin/orders/{order_no}/timeline: everything that happened to an order,
// its payment, its attempts and their refunds, oldest first. It is read in one read-only
// transaction (ViewOps), so that a change committed while it is read (a payment, a refund
// ending) shows everywhere in it or nowhere.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	var out map[string]any
	err := s.Ops.ViewOps(r.Context(), func(v orderpay.OpsSnapshot) (err error) {
		out, err = s.readTimeline(r.Context(), v, r.PathValue("order_no"))
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// timelineReader gathers one order's timeline from one snapshot.
type timelineReader struct {
	ctx    context.Context
	v      orderpay.OpsSnapshot
	events []timelineEventJSON
}

func (s *Server) readTimeline(ctx context.Context, v orderpay.OpsSnapshot, orderNo string) (map[string]any, error) {
	o, err := v.Order(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	t := &timelineReader{ctx: ctx, v: v}
	out := map[string]any{"order": s.toOrderJSON(o), "payment": nil, "attempts": []attemptJSON{}, "refunds": []refundJSON{}}
	if err := t.addHistory(orderpay.EntityOrder, o.No); err != nil {
		return nil, err
	}
	p, err := v.PaymentByOrder(ctx, o.No)
	switch {
	case orderpay.ErrorCode(err) == orderpay.ENOTFOUND:
		// Never asked to pay: the order's own history is all there is.
	case err != nil:
		return nil, err
	default:
		out["payment"] = toPaymentJSON(p)
		if err := t.payment(p, out); err != nil {
			return nil, err
		}
	}
	if err := s.fulfilmentTimeline(t, o.No, out); err != nil {
		return nil, err
	}
	if s.Audit != nil {
		actions, err := v.OperatorActions(ctx, orderpay.AuditFilter{OrderNo: o.No}, timelineLimit)
		if err != nil {
			return nil, err
		}
		for i := len(actions) - 1; i >= 0; i-- { // oldest first
			a := &actions[i]
			result := "ok"
			if a.Code != "" {
				result = a.Code
			}
			t.add(timelineEventJSON{At: a.At.UTC(), Kind: "operator", Actor: a.Actor, Event: a.Action, Reason: a.Target,
				Result: result, Detail: a.Detail})
		}
	}
	slices.SortStableFunc(t.events, func(a, b timelineEventJSON) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.seq, b.seq))
	})
	out["events"] = t.events
	return out, nil
}

// add appends an event, numbered in the order it was read (the tie-break of equal times).
func (t *timelineReader) add(e timelineEventJSON) {
	e.seq = len(t.events)
	t.events = append(t.events, e)
}

// addHistory adds an entity's transitions.
func (t *timelineReader) addHistory(entity, no string) error {
	h, err := t.v.History(t.ctx, entity, no)
	for _, e := range h {
		t.add(timelineEventJSON{At: e.At.UTC(), Kind: "transition", Entity: e.Entity, EntityNo: e.EntityNo, From: e.From,
			To: e.To, Event: e.Event, Actor: e.Actor, Reason: e.Reason, Raw: e.Raw})
	}
	return err
}

// fulfilmentTimeline adds the order's parcels and after-sales requests, and their
// histories, to the timeline.
func (s *Server) fulfilmentTimeline(t *timelineReader, orderNo string, out map[string]any) error {
	parcels, err := t.v.Shipments(t.ctx, orderNo)
	if err != nil {
		return err
	}
	shipments := make([]shipmentJSON, 0, len(parcels))
	for i := range parcels {
		shipments = append(shipments, s.toShipmentJSON(&parcels[i]))
		if err := t.addHistory(orderpay.EntityShipment, parcels[i].No); err != nil {
			return err
		}
	}
	sales, err := t.v.AfterSales(t.ctx, orderNo)
	if err != nil {
		return err
	}
	afterSales := make([]afterSaleJSON, 0, len(sales))
	for i := range sales {
		afterSales = append(afterSales, toAfterSaleJSON(&sales[i]))
		if err := t.addHistory(orderpay.EntityAfterSale, sales[i].No); err != nil {
			return err
		}
	}
	out["shipments"], out["after_sales"] = shipments, afterSales
	return nil
}

// payment adds the payment's history, its attempts and their refunds, and the
// notifications and queries about the attempts, to the timeline.
func (t *timelineReader) payment(p *orderpay.Payment, out map[string]any) error {
	if err := t.addHistory(orderpay.EntityPayment, p.No); err != nil {
		return err
	}
	cos, err := t.v.ChannelOrders(t.ctx, p.No)
	if err != nil {
		return err
	}
	var trades []string
	var attempts []attemptJSON
	var refunds []refundJSON
	for _, co := range cos {
		trades = append(trades, co.OutTradeNo)
		attempts = append(attempts, attemptJSON{OutTradeNo: co.OutTradeNo, Channel: co.Channel, Seq: co.Seq, Amount: co.Amount, Status: co.Status,
			Unknown: co.Unknown, TradeNo: co.TradeNo, CreatedAt: co.CreatedAt.UTC(), PaidAt: optionalTime(co.PaidAt)})
		if err := t.addHistory(orderpay.EntityChannelOrder, co.OutTradeNo); err != nil {
			return err
		}
		rs, err := t.v.ChannelRefunds(t.ctx, co.OutTradeNo)
		if err != nil {
			return err
		}
		for i := range rs {
			refunds = append(refunds, toRefundJSON(&rs[i]))
			if err := t.addHistory(orderpay.EntityRefund, rs[i].OutRefundNo); err != nil {
				return err
			}
		}
	}
	notes, err := t.v.NotificationLog(t.ctx, trades, timelineLimit)
	if err != nil {
		return err
	}
	for _, n := range notes {
		verified := n.Verified
		t.add(timelineEventJSON{At: n.ReceivedAt.UTC(), Kind: "notification", EntityNo: n.OutTradeNo, Channel: n.Channel,
			Verified: &verified, Result: n.Result, Detail: n.Detail, Raw: n.Raw})
	}
	queries, err := t.v.QueryLog(t.ctx, trades, timelineLimit)
	if err != nil {
		return err
	}
	for _, q := range queries {
		t.add(timelineEventJSON{At: q.At.UTC(), Kind: "query", EntityNo: q.OutTradeNo, Channel: q.Channel, Trigger: q.Trigger,
			Outcome: string(q.Outcome), Detail: q.Detail})
	}
	if attempts != nil {
		out["attempts"] = attempts
	}
	if refunds != nil {
		out["refunds"] = refunds
	}
	return nil
}

// refundsByReason is GET /admin/refunds?reason=…&limit=: the automatic refunds (late and
// duplicate payments, payments for cancelled or sold-out orders or of another amount) by
// default, newest first, at most limit of them (1 to adminLimit, the default).
func (s *Server) refundsByReason(w http.ResponseWriter, r *http.Request) {
	reasons := r.URL.Query()["reason"]
	if len(reasons) == 0 {
		reasons = []string{orderpay.RefundReasonLate, orderpay.RefundReasonDuplicate, orderpay.RefundReasonCancelled,
			orderpay.RefundReasonSoldOut, orderpay.RefundReasonAmountMismatch}
	}
	if len(reasons) > 10 {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "at most 10 reasons"))
		return
	}
	limit, err := limitParam(r, adminLimit, adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rs, err := s.Ops.RefundsByReason(r.Context(), reasons, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]refundJSON, 0, len(rs))
	for i := range rs {
		out = append(out, toRefundJSON(&rs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": out})
}

// latencyBuckets are the upper bounds of the convergence chart's bars; the last bar holds
// everything slower.
var latencyBuckets = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

// charts is GET /admin/charts?hours=N (default 24): how long paid attempts took from
// creation to the verified payment, bucketed, and how the notifications came out, from
// the clock hour N hours ago on (the store's hourly counts: orderpay.ChartHour).
func (s *Server) charts(w http.ResponseWriter, r *http.Request) {
	hours := 24
	maxHours := int(orderpay.ChartWindowMax / time.Hour)
	if v := r.URL.Query().Get("hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHours {
			s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "hours must be a whole number from 1 to %d", maxHours))
			return
		}
		hours = n
	}
	since := orderpay.ChartHour(s.Clock.Now().Add(-time.Duration(hours) * time.Hour))
	lat, err := s.Ops.PaidLatencyCounts(r.Context(), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	outcomes, err := s.Ops.NotificationOutcomes(r.Context(), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	type bucketJSON struct {
		Label string `json:"label"`
		Count int64  `json:"count"`
	}
	buckets := make([]bucketJSON, len(latencyBuckets)+1)
	for i, b := range latencyBuckets {
		buckets[i].Label = "≤" + b.String()
	}
	buckets[len(latencyBuckets)].Label = ">" + latencyBuckets[len(latencyBuckets)-1].String()
	var samples int64
	for _, c := range lat {
		// Each bar's bound is one of the counts' (orderpay.PaidLatencyBounds): a count falls
		// in one bar whole. UpTo 0 is beyond every bound.
		i := len(latencyBuckets)
		if c.UpTo > 0 {
			i, _ = slices.BinarySearch(latencyBuckets, c.UpTo)
		}
		buckets[i].Count += c.Count
		samples += c.Count
	}
	// A percentile is the bound of the count's bucket it falls in: at most that, and more
	// than the bound before (at most a quarter less). Past the last bound it is not known.
	pct := func(p float64) *float64 {
		rank := min(samples, int64(p*float64(samples))+1)
		var seen int64
		for _, c := range lat {
			if seen += c.Count; seen < rank {
				continue
			}
			if c.UpTo == 0 {
				return nil
			}
			v := c.UpTo.Seconds()
			return &v
		}
		return nil
	}
	type outcomeJSON struct {
		Verified bool   `json:"verified"`
		Result   string `json:"result"`
		Count    int    `json:"count"`
	}
	outs := make([]outcomeJSON, 0, len(outcomes))
	for _, c := range outcomes {
		outs = append(outs, outcomeJSON{c.Verified, c.Result, c.Count})
	}
	writeJSON(w, http.StatusOK, map[string]any{"hours": hours, "since": since.UTC(),
		"convergence":   map[string]any{"samples": samples, "p50_seconds": pct(0.50), "p99_seconds": pct(0.99), "buckets": buckets},
		"notifications": outs})
}

// qrImage is GET /v1/orders/{order_no}/qr.png[?channel=…]: the QR code of the order's open
// attempt (the newest, at the channel if given) as a PNG, drawn here so that the code never
// goes to a third-party image service.
func (s *Server) qrImage(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	channel := r.URL.Query().Get("channel")
	if s.Ops == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no operations store configured"))
		return
	}
	if _, err := s.ownOrder(ctx, c, r.PathValue("order_no")); err != nil {
		s.writeError(w, r, err)
		return
	}
	co, err := s.openAttempt(ctx, r.PathValue("order_no"), channel, orderpay.MethodQR)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if co == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "order %s has no QR code that can still be paid", r.PathValue("order_no")))
		return
	}
	png, err := qrcode.Encode(co.QRCode, qrcode.Medium, 256)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(png)
}

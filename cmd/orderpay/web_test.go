package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// get does a GET with optional headers and returns the status, headers and body.
func get(t *testing.T, url string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// The order's event stream sends the order at once, then PAID as soon as the payment is
// found with every notification lost (the stream's reads query the channel), and ends.
func TestOrderEventStreamFlipsToPaidWithNotificationsLost(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Sim.SetFaults(simDropAll()); err != nil {
		t.Fatal(err)
	}
	if err := c.createSKU(ctx, "sse-tea", 990, 5, "fast"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "sse-buyer", "sse-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelWechat)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/v1/orders/"+o.OrderNo+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream answered %d %s", resp.StatusCode, ct)
	}
	type orderEvent struct {
		Status           string    `json:"status"`
		RemainingSeconds int64     `json:"remaining_seconds"`
		PayDeadline      time.Time `json:"pay_deadline"`
		ServerTime       time.Time `json:"server_time"`
	}
	events := make(chan orderEvent)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok && event == "order" {
				var e orderEvent
				if json.Unmarshal([]byte(v), &e) == nil {
					events <- e
				}
			}
		}
	}()
	first := <-events
	// remaining_seconds and server_time come from one reading of the server's clock, so a
	// page can set its countdown by them.
	if first.Status != "PENDING_PAYMENT" || first.ServerTime.IsZero() ||
		first.RemainingSeconds != int64(first.PayDeadline.Sub(first.ServerTime)/time.Second) {
		t.Fatalf("first event %+v", first)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	var last orderEvent
	for e := range events {
		last = e
	}
	if last.Status != "PAID" || last.RemainingSeconds != 0 {
		t.Fatalf("the stream ended with %+v; want PAID", last)
	}
	for _, e := range m.Sim.NotifyStats() {
		if e.Acked {
			t.Fatalf("a notification was acknowledged: %+v", e)
		}
	}
}

// The console's endpoints want the admin token; the buyer's list, the QR image and the
// pages are public; bad input gets the JSON error.
func TestWebEndpoints(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}
	if err := c.createSKU(ctx, "web-tea", 1200, 5, "normal"); err != nil {
		t.Fatal(err)
	}
	o, err := c.createOrder(ctx, "web-buyer", "web-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		header     http.Header
		status     int
		code       string
	}{
		{"search without token", "/admin/orders?q=", nil, 401, orderpay.EUNAUTHORIZED},
		{"timeline without token", "/admin/orders/" + o.OrderNo + "/timeline", nil, 401, orderpay.EUNAUTHORIZED},
		{"charts without token", "/admin/charts", nil, 401, orderpay.EUNAUTHORIZED},
		{"refunds with a wrong token", "/admin/refunds", http.Header{"Authorization": {"Bearer nope"}}, 401, orderpay.EUNAUTHORIZED},
		{"timeline of an unknown order", "/admin/orders/20990101000000000000/timeline", admin, 404, orderpay.ENOTFOUND},
		{"refunds by reason, none of them", "/admin/refunds?limit=0", admin, 400, orderpay.EINVALID},
		{"refunds by reason, more than a page", "/admin/refunds?limit=501", admin, 400, orderpay.EINVALID},
		{"refunds by reason, a limit that is no number", "/admin/refunds?limit=ten", admin, 400, orderpay.EINVALID},
		{"charts over too long", "/admin/charts?hours=100000", admin, 400, orderpay.EINVALID},
		{"charts over nothing", "/admin/charts?hours=0", admin, 400, orderpay.EINVALID},
		{"order list without a buyer", "/v1/orders", nil, 400, orderpay.EINVALID},
		{"QR before paying", "/v1/orders/" + o.OrderNo + "/qr.png", nil, 404, orderpay.ENOTFOUND},
		{"QR of an unknown order", "/v1/orders/20990101000000000000/qr.png", nil, 404, orderpay.ENOTFOUND},
		{"events of an unknown order", "/v1/orders/20990101000000000000/events", nil, 404, orderpay.ENOTFOUND},
	} {
		status, _, body := get(t, m.URL+tc.path, tc.header)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e); status != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
			t.Errorf("%s: %d %s; want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}

	// The buyer's order names the QR code it may still pay (open_attempt) once there is
	// one, so that a pay page opened again shows it; not before, and not once paid.
	openAttempt := func() *struct{ Channel, QRCode string } {
		t.Helper()
		var got struct {
			Status      string `json:"status"`
			OpenAttempt *struct {
				Channel   string    `json:"channel"`
				QRCode    string    `json:"qr_code"`
				ExpiresAt time.Time `json:"expires_at"`
			} `json:"open_attempt"`
		}
		status, _, body := get(t, m.URL+"/v1/orders/"+o.OrderNo, nil)
		if err := json.Unmarshal(body, &got); status != 200 || err != nil {
			t.Fatalf("the order: %d %s", status, body)
		}
		if got.OpenAttempt == nil {
			return nil
		}
		if got.OpenAttempt.ExpiresAt.IsZero() {
			t.Fatalf("open_attempt without expires_at: %s", body)
		}
		return &struct{ Channel, QRCode string }{got.OpenAttempt.Channel, got.OpenAttempt.QRCode}
	}
	if a := openAttempt(); a != nil {
		t.Fatalf("an order never asked to pay shows open attempt %+v", a)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if a := openAttempt(); a == nil || a.Channel != orderpay.ChannelAlipay || a.QRCode != p.QRCode {
		t.Fatalf("after pay the order shows open attempt %+v; want alipay %s", a, p.QRCode)
	}
	status, h, body := get(t, m.URL+"/v1/orders/"+o.OrderNo+"/qr.png?channel=alipay", nil)
	img, err := png.Decode(bytes.NewReader(body))
	if status != 200 || h.Get("Content-Type") != "image/png" || err != nil || img.Bounds().Dx() < 200 {
		t.Fatalf("QR image: %d %s, %v", status, h.Get("Content-Type"), err)
	}
	if status, _, _ := get(t, m.URL+"/v1/orders/"+o.OrderNo+"/qr.png?channel=wechat", nil); status != 404 {
		t.Fatalf("QR of a channel never asked: %d", status)
	}

	status, _, body = get(t, m.URL+"/v1/orders?buyer_id=web-buyer", nil)
	var list struct {
		Orders []struct {
			OrderNo string `json:"order_no"`
		} `json:"orders"`
	}
	if json.Unmarshal(body, &list); status != 200 || len(list.Orders) != 1 || list.Orders[0].OrderNo != o.OrderNo {
		t.Fatalf("buyer's list: %d %s", status, body)
	}
	for _, q := range []string{o.OrderNo[:10], o.OrderNo, "web-buyer", "pending_payment"} {
		status, _, body = get(t, m.URL+"/admin/orders?q="+q, admin)
		if json.Unmarshal(body, &list); status != 200 || len(list.Orders) != 1 || list.Orders[0].OrderNo != o.OrderNo {
			t.Fatalf("search %q: %d %s", q, status, body)
		}
	}

	// A forged notification, then the genuine one: the timeline shows both, each with
	// whether it verified, next to the transitions.
	if err := m.Sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Method: sim.MethodNotify, Kind: sim.FaultForgeSignature, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	type timelineView struct {
		Order  struct{ Status string } `json:"order"`
		Events []struct {
			Kind, Entity, To, Result string
			Verified                 *bool
		} `json:"events"`
		Attempts []struct{ Status string } `json:"attempts"`
	}
	var tl timelineView
	// The timeline reads the order and its events one after the other, so the order's own
	// status may trail the events it has: wait for both.
	waitFor(t, 20*time.Second, "both notifications in the timeline and the order paid", func() bool {
		_, _, body := get(t, m.URL+"/admin/orders/"+o.OrderNo+"/timeline", admin)
		tl = timelineView{}
		json.Unmarshal(body, &tl)
		var forged, genuine bool
		for _, e := range tl.Events {
			forged = forged || (e.Kind == "notification" && e.Verified != nil && !*e.Verified && e.Result == orderpay.NotifyRejected)
			// The forged copy makes the payment center query the trade, and on a busy machine
			// that query can apply the payment before the genuine copy lands: the genuine one
			// is then verified and a duplicate.
			genuine = genuine || (e.Kind == "notification" && e.Verified != nil && *e.Verified &&
				(e.Result == orderpay.NotifyApplied || e.Result == orderpay.NotifyDuplicate))
		}
		return forged && genuine && tl.Order.Status == "PAID"
	}, func() string { return fmt.Sprintf("%+v", tl) })
	if a := openAttempt(); a != nil {
		t.Fatalf("the paid order still shows open attempt %+v", a)
	}
	var paid bool
	for _, e := range tl.Events {
		paid = paid || (e.Kind == "transition" && e.Entity == orderpay.EntityOrder && e.To == "PAID")
	}
	if tl.Order.Status != "PAID" || !paid || len(tl.Attempts) != 1 || tl.Attempts[0].Status != "SUCCESS" {
		t.Fatalf("timeline %+v", tl)
	}

	for path, want := range map[string]string{"/": "text/html", "/orders": "text/html", "/orders/" + o.OrderNo: "text/html",
		"/pay/" + o.OrderNo: "text/html", "/ops": "text/html", "/pos": "text/html", "/assets/pos.js": "text/javascript", "/docs": "text/html", "/assets/docs.js": "text/javascript", "/assets/pay.js": "text/javascript", "/assets/app.css": "text/css",
		"/pay/" + orderpay.NewTicketID(): "text/html", "/assets/queue.js": "text/javascript"} {
		status, h, _ := get(t, m.URL+path, nil)
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), want) || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("GET %s: %d %s, CSP %q", path, status, h.Get("Content-Type"), h.Get("Content-Security-Policy"))
		}
	}
	if status, _, _ := get(t, m.URL+"/assets/nope.js", nil); status != 404 {
		t.Errorf("unknown asset: %d", status)
	}
	if status, h, _ := get(t, m.SimURL+"/sim/wallet", nil); status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("wallet page: %d", status)
	}
}

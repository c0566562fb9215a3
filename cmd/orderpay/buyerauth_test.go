package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/buyerauth/buyerauthtest"
	"orderpay/chaos"
)

// getRaw sends a GET with the client's buyer token (As) and returns the status and body.
func getRaw(ctx context.Context, t *testing.T, c *chaos.Client, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tokens != nil {
		// As's client signs inside Call; a raw request signs the same way.
		req.Header.Set("Authorization", "Bearer "+c.Tokens(asBuyer(c)))
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// asBuyer reads back whom a client acts as, through a request it would sign.
func asBuyer(c *chaos.Client) string {
	var who string
	probe := *c
	probe.Tokens = func(b string) string { who = b; return "" }
	probe.HTTP = &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 204, Body: http.NoBody}, nil
	})}
	_ = probe.Call(context.Background(), http.MethodGet, "http://probe/", nil, nil, nil)
	return who
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Buyers signed in by the shop's login (JWT): alice's token (HS256, the shop's secret) acts
// on alice's orders; bob's (RS256, from the shop's JWKS, rotated mid-test) on bob's. With
// bob's token every buyer route answers 404 for alice's orders, in the words of an order
// that does not exist, and changes nothing; without a token, or with an expired or forged
// one, 401.
func TestBuyersAuthenticatedByJWT(t *testing.T) {
	t.Parallel()
	jwks := buyerauthtest.NewJWKS()
	t.Cleanup(jwks.Close)
	secret := []byte("the-shop-login-secret-0123456789abcdef")
	secretFile := filepath.Join(t.TempDir(), "buyer-jwt.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://login.shop.example", "orderpay"
	m, c := startMain(t, "", func(m *Main) {
		m.Config.BuyerAuth = buyerauth.Config{Mode: buyerauth.ModeJWT, SecretFile: secretFile, JWKSURL: jwks.URL(), Issuer: iss, Audience: aud}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	signed := func(sign func(buyer string) string) *chaos.Client {
		cc := *c.Client
		cc.Tokens = sign
		return &cc
	}
	hs := signed(func(b string) string {
		return buyerauthtest.HS256(secret, b, iss, aud, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	})
	rs := signed(func(b string) string {
		return jwks.Token(b, iss, aud, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	})
	alice, bob := hs.As("alice"), rs.As("bob")
	if err := c.createSKU(ctx, "kettle", 9900, 20, "normal"); err != nil {
		t.Fatal(err)
	}
	item := chaos.Item{SKU: "kettle", Qty: 2}
	home := chaos.Address{Name: "Alice", Phone: "13800138000", Detail: "1 Wensan Road, Hangzhou"}

	// Alice's orders: A paid, shipped and received, with a return approved; C waiting with
	// a QR code; B cancelled.
	a, err := alice.CreateOrder(ctx, "", "", item)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ChangeAddress(ctx, a.OrderNo, "", home); err != nil {
		t.Fatal(err)
	}
	p, err := alice.Pay(ctx, a.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.WalletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitStatus(ctx, a.OrderNo, "PAID", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	detail, err := alice.OrderDetail(ctx, a.OrderNo)
	if err != nil || len(detail.Shipments) != 1 {
		t.Fatalf("alice's paid order %+v, %v", detail, err)
	}
	parcel := detail.Shipments[0].ShipmentNo
	if _, err := alice.Ship(ctx, parcel, "SF Express", "SF900"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ConfirmReceipt(ctx, a.OrderNo, parcel, ""); err != nil {
		t.Fatal(err)
	}
	ret, err := alice.RequestAfterSale(ctx, a.OrderNo, "", "return", "too loud", chaos.AfterSaleItem{Line: 1, Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ReviewAfterSale(ctx, ret.AfterSaleNo, "approve", ""); err != nil {
		t.Fatal(err)
	}
	// (Other quantities: the same request within 10 s would be the same order.)
	b, err := alice.CreateOrder(ctx, "alice", "", chaos.Item{SKU: "kettle", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := alice.Cancel(ctx, b.OrderNo); err != nil || got.Status != "CANCELLED" {
		t.Fatalf("alice cancels her order: %+v, %v", got, err)
	}
	cOrder, err := alice.CreateOrder(ctx, "alice", "", chaos.Item{SKU: "kettle", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Pay(ctx, cOrder.OrderNo, orderpay.ChannelWechat); err != nil {
		t.Fatal(err)
	}
	if status, body := getRaw(ctx, t, alice, m.URL+"/v1/orders/"+cOrder.OrderNo+"/qr.png"); status != http.StatusOK {
		t.Fatalf("alice's QR image: %d %s", status, body)
	}
	var mine struct {
		Orders []struct {
			OrderNo string `json:"order_no"`
		} `json:"orders"`
	}
	if err := alice.Call(ctx, http.MethodGet, m.URL+"/v1/orders", nil, nil, &mine); err != nil || len(mine.Orders) != 3 {
		t.Fatalf("alice's list: %+v, %v", mine, err)
	}
	// A buyer_id in a body must be the signed-in buyer's.
	if _, err := alice.CreateOrder(ctx, "bob", "", item); apiCode(err) != orderpay.EFORBIDDEN {
		t.Fatalf("alice orders for bob: %v", err)
	}

	// Bob, with a token from a rotated key: his own order works; alice's are not there.
	jwks.Rotate()
	own, err := bob.CreateOrder(ctx, "", "", chaos.Item{SKU: "kettle", Qty: 1})
	if err != nil {
		t.Fatalf("bob, with a token of the rotated key: %v", err)
	}
	before := map[string]*chaos.OrderDetail{}
	for _, no := range []string{a.OrderNo, b.OrderNo, cOrder.OrderNo} {
		if before[no], err = alice.OrderDetail(ctx, no); err != nil {
			t.Fatal(err)
		}
	}
	notFound := func(what string, err error, no string) {
		t.Helper()
		var e *chaos.APIError
		if !asAPIError(err, &e) || e.Status != http.StatusNotFound || e.Code != orderpay.ENOTFOUND || !strings.Contains(e.Body, `order \"`+no+`\" not found`) {
			t.Errorf("bob: %s of alice's order %s: %v; want 404 as for an order that does not exist", what, no, err)
		}
	}
	for _, no := range []string{a.OrderNo, b.OrderNo, cOrder.OrderNo} {
		_, err := bob.OrderDetail(ctx, no)
		notFound("read", err, no)
		_, err = bob.Pay(ctx, no, orderpay.ChannelAlipay)
		notFound("pay", err, no)
		_, err = bob.Cancel(ctx, no)
		notFound("cancel", err, no)
		_, err = bob.ChangeAddress(ctx, no, "", chaos.Address{Name: "Bob", Phone: "13900139000", Detail: "elsewhere"})
		notFound("address", err, no)
		_, err = bob.RequestAfterSale(ctx, no, "", "refund", "mine now", chaos.AfterSaleItem{Line: 1, Qty: 1})
		notFound("refund request", err, no)
		err = bob.Call(ctx, http.MethodGet, m.URL+"/v1/orders/"+no+"/refunds", nil, nil, nil)
		notFound("refund list", err, no)
		for _, path := range []string{"/events", "/qr.png"} {
			if status, body := getRaw(ctx, t, bob, m.URL+"/v1/orders/"+no+path); status != http.StatusNotFound || !strings.Contains(body, `order \"`+no+`\" not found`) {
				t.Errorf("bob: GET %s of alice's order: %d %s", path, status, body)
			}
		}
	}
	_, err = bob.ConfirmReceipt(ctx, a.OrderNo, parcel, "")
	notFound("confirm receipt", err, a.OrderNo)
	_, err = bob.ExtendReceipt(ctx, a.OrderNo, parcel, "")
	notFound("extend receipt", err, a.OrderNo)
	_, err = bob.ShipBack(ctx, a.OrderNo, ret.AfterSaleNo, "", "ZTO", "ZT1")
	notFound("ship back", err, a.OrderNo)
	var bobs struct {
		Orders []struct {
			OrderNo string `json:"order_no"`
		} `json:"orders"`
	}
	if err := bob.Call(ctx, http.MethodGet, m.URL+"/v1/orders", nil, nil, &bobs); err != nil || len(bobs.Orders) != 1 || bobs.Orders[0].OrderNo != own.OrderNo {
		t.Fatalf("bob's list: %+v, %v", bobs, err)
	}
	if err := bob.Call(ctx, http.MethodGet, m.URL+"/v1/orders?buyer_id=alice", nil, nil, nil); apiCode(err) != orderpay.EFORBIDDEN {
		t.Fatalf("bob lists alice's orders: %v", err)
	}
	if err := bob.Call(ctx, http.MethodGet, m.URL+"/v1/buyers/alice/coupons", nil, nil, nil); apiCode(err) != orderpay.EFORBIDDEN {
		t.Fatalf("bob lists alice's coupons: %v", err)
	}
	for _, no := range []string{a.OrderNo, b.OrderNo, cOrder.OrderNo} {
		after, err := alice.OrderDetail(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != before[no].Status || len(after.Refunds) != len(before[no].Refunds) || !sameAddress(after.Address, before[no].Address) ||
			len(after.Shipments) != len(before[no].Shipments) || (len(after.Shipments) > 0 && (after.Shipments[0].Status != before[no].Shipments[0].Status ||
			after.Shipments[0].Extensions != before[no].Shipments[0].Extensions)) {
			t.Errorf("alice's order %s changed under bob's token:\nbefore %+v\nafter  %+v", no, before[no], after)
		}
	}

	// No token, an expired one, a forged one, one of another issuer: 401 on buyer routes.
	anon := signed(nil).As("alice")
	expired := signed(func(b string) string {
		return buyerauthtest.HS256(secret, b, iss, aud, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	}).As("alice")
	forged := signed(func(b string) string {
		return buyerauthtest.HS256([]byte("not-the-shop-secret-0123456789abcdef"), b, iss, aud, time.Now(), time.Now().Add(time.Hour))
	}).As("alice")
	other := signed(func(b string) string {
		return buyerauthtest.HS256(secret, b, "https://evil.example", aud, time.Now(), time.Now().Add(time.Hour))
	}).As("alice")
	for name, cl := range map[string]*chaos.Client{"no token": anon, "an expired token": expired, "a forged token": forged, "another issuer's token": other} {
		if _, err := cl.OrderDetail(ctx, a.OrderNo); apiCode(err) != orderpay.EUNAUTHORIZED {
			t.Errorf("%s reads alice's order: %v", name, err)
		}
		if _, err := cl.CreateOrder(ctx, "alice", "", item); apiCode(err) != orderpay.EUNAUTHORIZED {
			t.Errorf("%s creates an order: %v", name, err)
		}
		if _, err := cl.Cancel(ctx, cOrder.OrderNo); apiCode(err) != orderpay.EUNAUTHORIZED {
			t.Errorf("%s cancels alice's order: %v", name, err)
		}
	}
	if got, _ := alice.OrderDetail(ctx, cOrder.OrderNo); got.Status != "PENDING_PAYMENT" {
		t.Fatalf("alice's waiting order is %s", got.Status)
	}
}

func sameAddress(a, b *chaos.Address) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func asAPIError(err error, target **chaos.APIError) bool {
	e, ok := err.(*chaos.APIError)
	if ok {
		*target = e
	}
	return ok
}

// The shop's gateway names the buyer in a header, believed only from the gateway's
// addresses: from 127.0.0.1 when that is the gateway, refused (401) when it is not.
func TestBuyersNamedByTheGatewayHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		proxies string
		trusted bool
	}{{"127.0.0.1/32", true}, {"10.0.0.0/8", false}} {
		t.Run(tc.proxies, func(t *testing.T) {
			t.Parallel()
			proxies, err := buyerauth.ParseCIDRs(tc.proxies)
			if err != nil {
				t.Fatal(err)
			}
			m, c := startMain(t, "", func(m *Main) {
				m.Config.BuyerAuth = buyerauth.Config{Mode: buyerauth.ModeHeader, Header: "X-Shop-Buyer", TrustedProxies: proxies}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.createSKU(ctx, "mug", 1500, 5, "normal"); err != nil {
				t.Fatal(err)
			}
			var o orderView
			err = c.call(ctx, http.MethodPost, m.URL+"/v1/orders", http.Header{"X-Shop-Buyer": {"carol"}},
				map[string]any{"items": []map[string]any{{"sku": "mug", "qty": 1}}}, &o)
			if !tc.trusted {
				if apiCode(err) != orderpay.EUNAUTHORIZED {
					t.Fatalf("the header from an address that is not the gateway: %v", err)
				}
				return
			}
			if err != nil || o.OrderNo == "" {
				t.Fatalf("the gateway's buyer orders: %+v, %v", o, err)
			}
			var got struct {
				BuyerID string `json:"buyer_id"`
			}
			if err := c.call(ctx, http.MethodGet, m.URL+"/v1/orders/"+o.OrderNo, http.Header{"X-Shop-Buyer": {"carol"}}, nil, &got); err != nil || got.BuyerID != "carol" {
				t.Fatalf("carol's order: %+v, %v", got, err)
			}
			if err := c.call(ctx, http.MethodGet, m.URL+"/v1/orders/"+o.OrderNo, http.Header{"X-Shop-Buyer": {"dave"}}, nil, nil); apiCode(err) != orderpay.ENOTFOUND {
				t.Fatalf("dave reads carol's order: %v", err)
			}
		})
	}
}

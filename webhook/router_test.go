package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

// oneApp routes "app.*" messages to one subscriber of its own, with the subject's tail as
// the event type, and claims the results of "AP…" order numbers for nobody.
type oneApp struct{ sub webhook.Subscriber }

func (a oneApp) Route(_ context.Context, m orderpay.Message) ([]webhook.Subscriber, string, []byte, bool, error) {
	if kind, ok := strings.CutPrefix(m.Subject, "app."); ok {
		return []webhook.Subscriber{a.sub}, kind, m.Payload, true, nil
	}
	var keys struct {
		OrderNo string `json:"order_no"`
	}
	if json.Unmarshal(m.Payload, &keys) == nil && strings.HasPrefix(keys.OrderNo, "AP") {
		return nil, "", nil, true, nil
	}
	return nil, "", nil, false, nil
}

func (a oneApp) Subscriber(_ context.Context, name string) (webhook.Subscriber, bool, error) {
	return a.sub, name == a.sub.Name(), nil
}

// A router's messages go to its subscribers only, signed with their own secret, as the
// event type it names; the configured subscribers get the rest; a router's subscriber's
// delivery is posted and resent like any other.
func TestRouterSendsAnAppItsOwnResultsOnly(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	shop, app := newReceiver(t, clock, 204), newReceiver(t, clock, 204)
	store := storetest.OpenSQLite(t)
	router := oneApp{webhook.Subscriber{URL: app.srv.URL + "/app/hooks", Secret: []byte(secret), Key: "app:app_1:" + app.srv.URL + "/app/hooks"}}
	svc, err := webhook.New(webhook.Config{Store: store, Clock: clock, Router: router, AllowNetworks: loopback,
		Subscribers: []webhook.Subscriber{{URL: shop.srv.URL + "/hooks", Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	appEvent := orderpay.Message{ID: "app.payment.succeeded:PAP1", Subject: "app.payment.succeeded",
		Payload: []byte(`{"app_id":"app_1","payment_no":"PAP1"}`), CreatedAt: t0}
	for _, m := range []orderpay.Message{paymentSucceeded("O1"), paymentSucceeded("AP1"), appEvent, appEvent} {
		if err := svc.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := svc.RunOnce(ctx); err != nil || res.Delivered != 2 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	got := shop.received()
	if len(got) != 1 || !strings.Contains(string(got[0].body), `"order_no":"O1"`) {
		t.Fatalf("the shop received %d: %+v", len(got), got)
	}
	got = app.received()
	if len(got) != 1 || got[0].event != "payment.succeeded" || got[0].verifyErr != nil ||
		!strings.Contains(string(got[0].body), `"type":"payment.succeeded"`) || !strings.Contains(string(got[0].body), `"id":"app.payment.succeeded:PAP1"`) {
		t.Fatalf("the app received %+v", got)
	}
	list, err := svc.Deliveries(ctx, webhook.Filter{PaymentNo: "PAP1"}, 10)
	if err != nil || len(list) != 1 || list[0].Subscriber != router.sub.Name() {
		t.Fatalf("deliveries %+v, %v", list, err)
	}
	if _, _, err := svc.Resend(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := app.received(); len(got) != 2 || got[1].delivery != got[0].delivery || got[1].verifyErr != nil {
		t.Fatalf("after the resend the app received %+v", got)
	}
}

package apppay

import (
	"context"
	"encoding/json"
	"strings"

	"orderpay"
	"orderpay/webhook"
)

// Router sends each app its own results as signed webhooks (webhook.Router): the app.*
// events go to the app's webhook URLs, signed with the app's secret, with the type the
// subject without "app."; the payment center's own results about app payments go to
// nobody (the app.* events say what the app needs, and the shop's subscribers never see
// another system's payments). Everything else is the configured subscribers'.
type Router struct{ S *Service }

var _ webhook.Router = Router{}

// appSubscriberPrefix starts the name of every app subscriber: "app:<app id>:<URL name>".
const appSubscriberPrefix = "app:"

func subscriberName(appID, rawURL string) string {
	return appSubscriberPrefix + appID + ":" + webhook.URLName(rawURL)
}

func subscribers(a *orderpay.App) []webhook.Subscriber {
	out := make([]webhook.Subscriber, 0, len(a.WebhookURLs))
	for _, u := range a.WebhookURLs {
		out = append(out, webhook.Subscriber{URL: u, Secret: []byte(a.WebhookSecret), Key: subscriberName(a.ID, u)})
	}
	return out
}

// Route implements webhook.Router.
func (r Router) Route(ctx context.Context, m orderpay.Message) ([]webhook.Subscriber, string, []byte, bool, error) {
	if kind, ok := strings.CutPrefix(m.Subject, "app."); ok {
		var keys struct {
			AppID string `json:"app_id"`
		}
		if err := json.Unmarshal(m.Payload, &keys); err != nil || keys.AppID == "" {
			r.S.log.Error("malformed app event: no webhook", "msg_id", m.ID, "err", err)
			return nil, "", nil, true, nil
		}
		a, err := r.S.cfg.Store.App(ctx, keys.AppID)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			r.S.log.Error("app event of an unknown app: no webhook", "msg_id", m.ID, "app_id", keys.AppID)
			return nil, "", nil, true, nil
		}
		if err != nil {
			return nil, "", nil, true, err
		}
		return subscribers(a), kind, m.Payload, true, nil
	}
	var keys struct {
		OrderNo string `json:"order_no"`
	}
	if json.Unmarshal(m.Payload, &keys) == nil && orderpay.IsAppOrderKey(keys.OrderNo) {
		return nil, "", nil, true, nil
	}
	return nil, "", nil, false, nil
}

// Subscriber implements webhook.Router.
func (r Router) Subscriber(ctx context.Context, name string) (webhook.Subscriber, bool, error) {
	rest, ok := strings.CutPrefix(name, appSubscriberPrefix)
	appID, _, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return webhook.Subscriber{}, false, nil
	}
	a, err := r.S.cfg.Store.App(ctx, appID)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return webhook.Subscriber{}, false, nil
	}
	if err != nil {
		return webhook.Subscriber{}, false, err
	}
	for _, sub := range subscribers(a) {
		if sub.Name() == name {
			return sub, true, nil
		}
	}
	return webhook.Subscriber{}, false, nil
}

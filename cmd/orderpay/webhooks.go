package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/webhook"
)

// WebhookConfig is where payment results go as signed webhooks (package webhook).
type WebhookConfig struct {
	// URLs of the business systems that receive every payment-center result. Defaults to
	// none: no webhooks.
	URLs []string
	// Secret signs every request (HMAC-SHA256); at least 16 bytes. Required with URLs.
	// Read from --webhook-secret, ORDERPAY_WEBHOOK_SECRET, or the file named by
	// --webhook-secret-file / ORDERPAY_WEBHOOK_SECRET_FILE (trailing newline dropped).
	// Never logged or printed.
	Secret     string
	SecretFile string
	// AllowNetworks are the internal networks (loopback, private, link-local…) webhooks,
	// the shop's and the apps', may reach all the same. Defaults to none: a webhook to an
	// internal address is refused when the URL is given and when it is connected to.
	AllowNetworks []netip.Prefix
	badNetworks   string // why the environment's list could not be read
}

// networkList is the --webhook-allow-networks flag: a comma-separated list of networks and
// addresses, repeatable.
type networkList struct{ dst *[]netip.Prefix }

func (n networkList) String() string {
	if n.dst == nil {
		return ""
	}
	parts := make([]string, 0, len(*n.dst))
	for _, p := range *n.dst {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (n networkList) Set(v string) error {
	nets, err := orderpay.ParseNetworks(v)
	if err != nil {
		return err
	}
	*n.dst = append(*n.dst, nets...)
	return nil
}

// urlList is a repeatable --webhook-url flag; the environment variable takes a
// comma-separated list.
type urlList struct{ dst *[]string }

// String masks the credentials the URLs may carry: it is what --help shows as the default
// taken from the environment.
func (u urlList) String() string {
	if u.dst == nil {
		return ""
	}
	masked := make([]string, 0, len(*u.dst))
	for _, raw := range *u.dst {
		masked = append(masked, webhook.MaskURL(raw))
	}
	return strings.Join(masked, ",")
}

func (u urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u.dst = append(*u.dst, s)
		}
	}
	return nil
}

// webhookFlags reads the webhook settings from the environment and registers their flags.
func webhookFlags(fs *flag.FlagSet, c *WebhookConfig) {
	if v, ok := os.LookupEnv(envName("webhook-url")); ok {
		_ = urlList{&c.URLs}.Set(v)
	}
	fs.Var(urlList{&c.URLs}, "webhook-url", "send every payment result to this URL as a signed webhook; repeatable, or a comma-separated list; https:// with real channels ["+envName("webhook-url")+"]")
	if v, ok := os.LookupEnv(envName("webhook-allow-networks")); ok {
		if err := (networkList{&c.AllowNetworks}).Set(v); err != nil {
			// Refused when the settings are checked (webhookSecret), with the variable named.
			c.badNetworks = envName("webhook-allow-networks") + ": " + err.Error()
		}
	}
	fs.Var(networkList{&c.AllowNetworks}, "webhook-allow-networks", "internal networks webhooks may reach all the same, e.g. 10.0.0.0/8,127.0.0.1; by default none: "+
		"no webhook, the shop's or an app's, goes to a loopback, private, link-local, multicast or unspecified address ["+envName("webhook-allow-networks")+"]")
	for _, f := range []struct {
		dst        *string
		name, help string
	}{
		{&c.Secret, "webhook-secret", "HMAC-SHA256 secret that signs the webhooks, 16+ bytes"},
		{&c.SecretFile, "webhook-secret-file", "file holding the webhook secret (instead of --webhook-secret)"},
	} {
		env, def := envName(f.name), *f.dst
		if v, ok := os.LookupEnv(env); ok {
			*f.dst = v
		}
		fs.StringVar(f.dst, f.name, *f.dst, f.help+" ["+env+"]")
		showBuiltInDefault(fs, f.name, def)
	}
}

// webhookSecret is the secret from the flag or its file; the error never quotes it.
func (c *WebhookConfig) webhookSecret() ([]byte, error) {
	if c.badNetworks != "" {
		return nil, fmt.Errorf("%s", c.badNetworks)
	}
	if c.Secret != "" && c.SecretFile != "" {
		return nil, fmt.Errorf("give --webhook-secret or --webhook-secret-file, not both")
	}
	secret := c.Secret
	if c.SecretFile != "" {
		b, err := os.ReadFile(c.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("--webhook-secret-file: %w", err)
		}
		secret = strings.TrimRight(string(b), "\r\n")
	}
	if len(c.URLs) > 0 && len(secret) < 16 {
		return nil, fmt.Errorf("--webhook-url needs a --webhook-secret (or --webhook-secret-file) of 16 or more bytes")
	}
	return []byte(secret), nil
}

// startWebhooks wires the webhook consumer and its delivery worker: to the URLs set, if
// any, and to the business apps' own URLs, which admins add at any time (package apppay).
func (m *Main) startWebhooks(runCtx context.Context, sweep time.Duration) (*webhook.Service, error) {
	c := &m.Config.Webhooks
	secret, err := c.webhookSecret()
	if err != nil {
		return nil, err
	}
	schedule := make([]time.Duration, len(webhook.ScheduleDefault))
	for i, d := range webhook.ScheduleDefault {
		schedule[i] = m.Config.scaled(d)
	}
	due := make(chan struct{}, 1)
	cfg := webhook.Config{Store: m.Store, Schedule: schedule, Created: func() { poke(due) }, Observer: m.Metrics, Logger: m.log,
		AllowNetworks: c.AllowNetworks,
		Router:        apppay.Router{S: m.Apps},
		// A result is told to a business system only once the records confirm it: a
		// forged event on the bus is sent to nobody.
		Confirm: func(ctx context.Context, msg orderpay.Message) error { return orderpay.ConfirmEvent(ctx, m.Store, msg) },
		Forged:  func(msg orderpay.Message) { m.Metrics.Unconfirmed("webhooks", msg.Subject) }}
	for _, u := range c.URLs {
		cfg.Subscribers = append(cfg.Subscribers, webhook.Subscriber{URL: u, Secret: secret})
	}
	wh, err := webhook.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := wh.Start(runCtx); err != nil {
		return nil, err
	}
	// Its own durable consumer: the webhooks neither wait for nor hold back the order
	// system's consumer of the same results.
	stop, err := m.Bus.Subscribe(runCtx, "webhooks", "", wh.Handle)
	if err != nil {
		return nil, err
	}
	m.closeFuncs = append(m.closeFuncs, stop)
	// Dispatch does not wait for the attempts it starts: a slow receiver holds its own lane,
	// never the next run, nor another subscriber's deliveries. Close waits for them.
	m.every(runCtx, "webhooks", sweep, due, func(ctx context.Context) error {
		_, err := wh.Dispatch(ctx)
		return err
	})
	m.closeFuncs = append(m.closeFuncs, wh.Wait)
	return wh, nil
}

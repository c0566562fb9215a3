package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// With no --webhook-allow-networks, an app whose webhook URL names an internal address
// (the cloud's metadata service, loopback, a private address written as IPv4-mapped IPv6)
// is refused with a clear JSON error, and nothing is written. An app's webhook URL with
// credentials (user:password@, ?token=) is shown whole to an admin, who edits it, and
// masked to a viewer and an operator, in the list and in the app; the log never has them.
func TestAppWebhookURLsInternalRefusedCredentialsMasked(t *testing.T) {
	t.Parallel()
	file, viewer, operator, admin := operatorsFile(t)
	logs := &syncBuffer{}
	m, _ := startMain(t, "", func(m *Main) {
		m.Config.OperatorsFile, m.Config.AdminToken = file, ""
		m.Config.LogLevel, m.Stderr = "debug", logs
	})
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://127.0.0.1:8080/hooks", "http://localhost/hooks",
		"http://[::1]/hooks", "https://[::ffff:10.0.0.1]/hooks", "https://100.64.0.7/hooks"} {
		status, body := as(t, admin, http.MethodPost, m.URL+"/admin/apps", `{"name":"x","channels":["alipay"],"webhook_urls":["`+u+`"]}`)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(body, &e); status != http.StatusBadRequest || err != nil || e.Error.Code != "EINVALID" ||
			!strings.Contains(e.Error.Message, "may not reach") {
			t.Fatalf("app with webhook %s: %d %s", u, status, body)
		}
	}
	if status, body := as(t, admin, http.MethodGet, m.URL+"/admin/apps", ""); status != http.StatusOK || !strings.Contains(string(body), `"apps":[]`) {
		t.Fatalf("after the refusals: %d %s", status, body)
	}

	const full = "https://ops:hunter2@erp.example/hooks?token=abc123&v=2"
	const masked = "https://***@erp.example/hooks?token=***&v=***"
	status, body := as(t, admin, http.MethodPost, m.URL+"/admin/apps", `{"name":"erp","channels":["alipay"],"webhook_urls":["`+full+`"]}`)
	var created struct {
		AppID       string   `json:"app_id"`
		WebhookURLs []string `json:"webhook_urls"`
	}
	if err := json.Unmarshal(body, &created); status != http.StatusCreated || err != nil || len(created.WebhookURLs) != 1 || created.WebhookURLs[0] != full {
		t.Fatalf("create: %d %s", status, body)
	}
	for _, who := range []struct {
		name, token, want string
	}{{"viewer", viewer, masked}, {"operator", operator, masked}, {"admin", admin, full}} {
		for _, path := range []string{"/admin/apps", "/admin/apps/" + created.AppID} {
			status, body := as(t, who.token, http.MethodGet, m.URL+path, "")
			var one struct {
				WebhookURLs []string `json:"webhook_urls"`
				Apps        []struct {
					WebhookURLs []string `json:"webhook_urls"`
				} `json:"apps"`
			}
			if err := json.Unmarshal(body, &one); status != http.StatusOK || err != nil {
				t.Fatalf("%s GET %s: %d %s", who.name, path, status, body)
			}
			got := one.WebhookURLs
			if len(one.Apps) == 1 {
				got = one.Apps[0].WebhookURLs
			}
			if len(got) != 1 || got[0] != who.want {
				t.Fatalf("%s GET %s: webhook_urls %q, want %q", who.name, path, got, who.want)
			}
			if who.want == masked && (strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "abc123")) {
				t.Fatalf("%s GET %s shows a credential: %s", who.name, path, body)
			}
		}
	}
	if strings.Contains(logs.String(), "hunter2") || strings.Contains(logs.String(), "abc123") {
		t.Fatalf("the log has a webhook URL's credentials:\n%s", logs.String())
	}
}

package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// getPage answers GET url's status and body.
func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The metrics are served on their own loopback listener, and the API's port no longer has
// them: its /metrics answers 404. The metrics listener serves nothing but /metrics.
// --metrics-addr off serves none.
func TestMetricsAreServedOnTheirOwnAddressOnly(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "")
	if code, body := getPage(t, m.URL+"/metrics"); code != http.StatusNotFound || strings.Contains(body, "orderpay_orders") {
		t.Fatalf("the API's /metrics: %d\n%.200s", code, body)
	}
	if m.MetricsURL == "" {
		t.Fatal("no metrics listener")
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(m.MetricsURL, "http://"))
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("metrics at %s, not on loopback", m.MetricsURL)
	}
	if code, body := getPage(t, m.MetricsURL+"/metrics"); code != http.StatusOK || !strings.Contains(body, `orderpay_orders{status="PAID"}`) {
		t.Fatalf("the metrics listener's /metrics: %d\n%.200s", code, body)
	}
	if code, _ := getPage(t, m.MetricsURL+"/v1/skus"); code != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the API: /v1/skus %d", code)
	}

	off, _ := startMain(t, "", func(m *Main) { m.Config.MetricsAddr = MetricsOff })
	if off.MetricsURL != "" {
		t.Fatalf("--metrics-addr off: metrics at %s", off.MetricsURL)
	}
	if code, _ := getPage(t, off.URL+"/metrics"); code != http.StatusNotFound {
		t.Fatalf("--metrics-addr off: the API's /metrics %d", code)
	}
}

// --metrics-addr defaults to loopback, is checked at parse time, and is in the help with
// --metrics-allow-remote.
func TestMetricsAddrFlag(t *testing.T) {
	if got := NewMain().Config.MetricsAddr; got != "127.0.0.1:8081" || !loopbackAddr(got) {
		t.Fatalf("default --metrics-addr %q", got)
	}
	m := NewMain()
	var help bytes.Buffer
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, s := range []string{"-metrics-addr", "ORDERPAY_METRICS_ADDR", "-metrics-allow-remote", "ORDERPAY_METRICS_ALLOW_REMOTE"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help does not mention %q", s)
		}
	}
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--metrics-addr", "metrics"}); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("--metrics-addr metrics: %v", err)
	}
	t.Setenv("ORDERPAY_METRICS_ADDR", "off")
	m = NewMain()
	if err := m.ParseFlags(nil); err != nil || m.Config.MetricsAddr != MetricsOff {
		t.Fatalf("ORDERPAY_METRICS_ADDR=off: %q, %v", m.Config.MetricsAddr, err)
	}
}

// With real channels, metrics on an address other than loopback are refused unless
// --metrics-allow-remote says the address is fenced; loopback and off are always fine.
func TestMetricsOffLoopbackNeedsAllowingWithRealChannels(t *testing.T) {
	t.Parallel()
	channels := realChannelsFile(t)
	for _, c := range []struct {
		addr  string
		allow bool
		want  string // "" if accepted
	}{
		{"127.0.0.1:8081", false, ""},
		{"[::1]:8081", false, ""},
		{"localhost:8081", false, ""},
		{MetricsOff, false, ""},
		{":8081", false, "--metrics-addr :8081 is not a loopback address"},
		{"0.0.0.0:8081", false, "--metrics-addr 0.0.0.0:8081 is not a loopback address"},
		{"10.0.0.5:8081", false, "--metrics-allow-remote"},
		{"metrics.internal:8081", false, "--metrics-addr metrics.internal:8081 is not a loopback address"},
		{"10.0.0.5:8081", true, ""},
	} {
		m, _ := liveMain(t, channels, "", BusConfig{})
		m.Config.MetricsAddr, m.Config.MetricsAllowRemote = c.addr, c.allow
		err := m.checkPosture(mustLoad(t, channels))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (allow %v): refused: %v", c.addr, c.allow, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (allow %v): %v, want a refusal saying %q", c.addr, c.allow, err, c.want)
		}
	}
}

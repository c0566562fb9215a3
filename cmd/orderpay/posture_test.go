package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderpay/buyerauth"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// postureCase is one setting of a serve with real channels (liveMain), and what the
// refusal must say of it ("" when it is the right form and serve may start).
type postureCase struct {
	name string
	set  func(m *Main)
	want string
}

func trustedProxies(t *testing.T, v string) func(m *Main) {
	t.Helper()
	p, err := buyerauth.ParseCIDRs(v)
	if err != nil {
		t.Fatal(err)
	}
	return func(m *Main) { m.Config.TrustedProxies, m.Config.BuyerAuth.TrustedProxies = v, p }
}

func postureCases(t *testing.T) []postureCase {
	return []postureCase{
		{"an http JWKS", func(m *Main) { m.Config.BuyerAuth.JWKSURL = "http://login.shop.example.com/.well-known/jwks.json" }, "--buyer-jwks-url must be https://"},
		{"an https JWKS", func(m *Main) { m.Config.BuyerAuth.JWKSURL = "https://login.shop.example.com/.well-known/jwks.json" }, ""},
		{"no issuer", func(m *Main) { m.Config.BuyerAuth.Issuer = "" }, "--buyer-jwt-issuer is not set"},
		{"no audience", func(m *Main) { m.Config.BuyerAuth.Audience = "" }, "--buyer-jwt-audience is not set"},
		{"neither", func(m *Main) { m.Config.BuyerAuth.Issuer, m.Config.BuyerAuth.Audience = "", "" }, "--buyer-jwt-issuer and --buyer-jwt-audience are not set"},
		{"the gateway names the buyer", func(m *Main) {
			m.Config.BuyerAuth = buyerauth.Config{Mode: buyerauth.ModeHeader, Header: buyerauth.HeaderDefault}
			trustedProxies(t, "10.1.0.0/16")(m)
		}, ""},
		{"every IPv4 address trusted", trustedProxies(t, "0.0.0.0/0"), "--trusted-proxies 0.0.0.0/0 takes in the public internet"},
		{"every IPv6 address trusted", trustedProxies(t, "10.1.0.0/16, ::/0"), "--trusted-proxies ::/0 takes in the public internet"},
		{"half the IPv4 internet", trustedProxies(t, "128.0.0.0/1"), "--trusted-proxies 128.0.0.0/1 takes in the public internet"},
		{"a /7 of IPv4", trustedProxies(t, "10.0.0.0/7"), "--trusted-proxies 10.0.0.0/7 takes in the public internet"},
		{"IPv6 global unicast", trustedProxies(t, "2000::/3"), "--trusted-proxies 2000::/3 takes in the public internet"},
		{"private ranges", trustedProxies(t, "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fd00::/8"), ""},
		{"a public gateway's own addresses", trustedProxies(t, "203.0.113.7, 198.51.100.0/24, 2001:db8::/32"), ""},
		{"an http webhook", func(m *Main) {
			m.Config.Webhooks.URLs, m.Config.Webhooks.Secret = []string{"https://erp.shop.example.com/hook", "http://bi.shop.example.com/results?key=s3cret"}, "a-webhook-secret-of-16-bytes"
		},
			"--webhook-url http://bi.shop.example.com is plain http"},
		{"https webhooks", func(m *Main) {
			m.Config.Webhooks.URLs, m.Config.Webhooks.Secret = []string{"https://erp.shop.example.com/hook", "HTTPS://bi.shop.example.com/results"}, "a-webhook-secret-of-16-bytes"
		}, ""},
		{"the profiler on every address", func(m *Main) { m.Config.PprofAddr = ":6060" }, "--pprof :6060 is not on a loopback address"},
		{"the profiler on 0.0.0.0", func(m *Main) { m.Config.PprofAddr = "0.0.0.0:6060" }, "--pprof 0.0.0.0:6060 is not on a loopback address"},
		{"the profiler on ::", func(m *Main) { m.Config.PprofAddr = "[::]:6060" }, "--pprof [::]:6060 is not on a loopback address"},
		{"the profiler on the LAN", func(m *Main) { m.Config.PprofAddr = "10.1.2.3:6060" }, "--pprof 10.1.2.3:6060 is not on a loopback address"},
		{"the profiler on 127.0.0.1", func(m *Main) { m.Config.PprofAddr = "127.0.0.1:6060" }, ""},
		{"the profiler on localhost", func(m *Main) { m.Config.PprofAddr = "localhost:6060" }, ""},
		{"the profiler on ::1", func(m *Main) { m.Config.PprofAddr = "[::1]:6060" }, ""},
	}
}

// Real channels with a setting only the demo may have: a JWKS fetched over plain HTTP,
// buyer tokens whose issuer or audience is not checked, a gateway trusted from the public
// internet, webhooks over plain HTTP, the profiler open to the network. Serve refuses to
// start before it opens anything, naming each; the right form of each is accepted.
func TestServeRefusesUnsafeSettingsWithRealChannels(t *testing.T) {
	t.Parallel()
	channels := realChannelsFile(t)
	for _, c := range postureCases(t) {
		m, _ := liveMain(t, channels, "", BusConfig{})
		c.set(m)
		if c.want == "" {
			if err := m.checkPosture(mustLoad(t, channels)); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		msg := runRefused(t, m)
		mustContain(t, c.name+": the refusal", msg, "refusing to start: alipay in ", "is not on this machine, so real money moves, and:\n  - ", c.want)
		mustNotContain(t, c.name+": the refusal", msg, "s3cret")
	}

	// All at once: one line each, in the list of the refusal.
	m, _ := liveMain(t, channels, "", BusConfig{})
	for _, c := range postureCases(t) {
		if c.want != "" {
			c.set(m)
		}
	}
	msg := runRefused(t, m)
	for _, want := range []string{"--buyer-jwks-url must be https://", "--buyer-jwt-issuer and --buyer-jwt-audience are not set",
		"--trusted-proxies 2000::/3 takes in", "--webhook-url http://bi.shop.example.com is plain http", "--pprof 10.1.2.3:6060 is not on a loopback address"} {
		mustContain(t, "the refusal", msg, "\n  - "+want)
	}
	t.Logf("refusal:\n%s", msg)

	// With channels on this machine (a simulator) none of them stops the start.
	sim := loopbackChannelsFile(t)
	demo, _ := liveMain(t, sim, "", BusConfig{})
	for _, c := range postureCases(t) {
		c.set(demo)
	}
	if err := demo.checkPosture(mustLoad(t, sim)); err != nil {
		t.Errorf("channels on this machine: %v", err)
	}
}

// loopbackChannelsFile writes a channels file whose accounts are on a simulator on this machine,
// and returns its path.
func loopbackChannelsFile(t *testing.T) string {
	t.Helper()
	keysDir := filepath.Join(t.TempDir(), "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(keysDir, "channels.toml")
	if err := channelfile.ForSimulator(keysDir, keys, "http://127.0.0.1:1", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The admin token given as a command-line argument is refused with real channels: every
// user of the machine reads it in the process list. From its file or ORDERPAY_ADMIN_TOKEN
// it is accepted.
func TestServeRefusesTheAdminTokenOnTheCommandLine(t *testing.T) {
	channels := realChannelsFile(t)
	const token = "an-admin-token-of-more-than-24-characters"
	m, _ := liveMain(t, channels, "", BusConfig{})
	m.Config.AdminToken = ""
	if err := m.ParseFlags([]string{"--admin-token", token}); err != nil {
		t.Fatal(err)
	}
	msg := runRefused(t, m)
	mustContain(t, "the refusal", msg, "refusing to start", "\n  - --admin-token is given on the command line", "--admin-token-file", "ORDERPAY_ADMIN_TOKEN")
	mustNotContain(t, "the refusal", msg, token)

	m, _ = liveMain(t, channels, "", BusConfig{})
	m.Config.AdminToken = ""
	if err := m.ParseFlags([]string{"--admin-token-file", writeSecret(t, "admin-token", token+"\n")}); err != nil {
		t.Fatal(err)
	}
	if err := m.checkPosture(mustLoad(t, channels)); err != nil {
		t.Errorf("the token from its file: %v", err)
	}

	t.Setenv(envName("admin-token"), token)
	m, _ = liveMain(t, channels, "", BusConfig{})
	m.Config.AdminToken = ""
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if m.Config.AdminToken != token {
		t.Fatalf("the token from %s was not read", envName("admin-token"))
	}
	if err := m.checkPosture(mustLoad(t, channels)); err != nil {
		t.Errorf("the token from %s: %v", envName("admin-token"), err)
	}
}

// The other secrets a flag can carry, the webhook secret and the order-number key, are
// refused on the command line too, each named, its value never quoted; from their
// variables they are accepted.
func TestServeRefusesOtherSecretsOnTheCommandLine(t *testing.T) {
	channels := realChannelsFile(t)
	const secret = "a-secret-of-more-than-16-bytes-0123"
	for _, name := range []string{"webhook-secret", "order-no-key"} {
		m, _ := liveMain(t, channels, "", BusConfig{})
		if err := m.ParseFlags([]string{"--" + name, secret}); err != nil {
			t.Fatalf("--%s: %v", name, err)
		}
		msg := runRefused(t, m)
		mustContain(t, "the refusal", msg, "refusing to start", "\n  - --"+name+" is given on the command line", envName(name))
		mustNotContain(t, "the refusal", msg, secret)

		t.Setenv(envName(name), secret)
		m, _ = liveMain(t, channels, "", BusConfig{})
		if err := m.ParseFlags(nil); err != nil {
			t.Fatalf("%s: %v", envName(name), err)
		}
		if err := m.checkPosture(mustLoad(t, channels)); err != nil {
			t.Errorf("--%s from %s: %v", name, envName(name), err)
		}
		os.Unsetenv(envName(name))
	}
}

// --buyer-jwks-refresh (or its variable) says how often the JWKS is fetched again, 5 minutes
// by default; a value outside 30 s to 1 h is refused, naming the flag and the range.
func TestServeBuyerJWKSRefreshFlag(t *testing.T) {
	m := NewMain()
	var help bytes.Buffer
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if got := m.Config.BuyerAuth.JWKSRefresh; got != 5*time.Minute {
		t.Errorf("the default refresh is %s, want 5m", got)
	}
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-buyer-jwks-refresh") ||
		!strings.Contains(help.String(), "ORDERPAY_BUYER_JWKS_REFRESH") {
		t.Errorf("-h: %v; the help does not name --buyer-jwks-refresh and its variable:\n%s", err, help.String())
	}
	quiet := func() *Main { m := NewMain(); m.Stderr = io.Discard; return m }
	m = quiet()
	if err := m.ParseFlags([]string{"--buyer-jwks-refresh", "1m"}); err != nil || m.Config.BuyerAuth.JWKSRefresh != time.Minute {
		t.Errorf("--buyer-jwks-refresh 1m: %v, %s", err, m.Config.BuyerAuth.JWKSRefresh)
	}
	for _, bad := range []string{"10s", "0s", "-1m", "2h"} {
		err := quiet().ParseFlags([]string{"--buyer-jwks-refresh", bad})
		if err == nil || !strings.Contains(err.Error(), "--buyer-jwks-refresh") || !strings.Contains(err.Error(), "30s to 1h0m0s") {
			t.Errorf("--buyer-jwks-refresh %s: %v", bad, err)
		}
	}
	t.Setenv(envName("buyer-jwks-refresh"), "90s")
	m = quiet()
	if err := m.ParseFlags(nil); err != nil || m.Config.BuyerAuth.JWKSRefresh != 90*time.Second {
		t.Errorf("%s=90s: %v, %s", envName("buyer-jwks-refresh"), err, m.Config.BuyerAuth.JWKSRefresh)
	}
}

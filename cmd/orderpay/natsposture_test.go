package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"orderpay"
	"orderpay/buyerauth"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// realChannelsFile writes a channels file whose Alipay account is on the real gateway, and
// returns its path.
func realChannelsFile(t *testing.T) string {
	t.Helper()
	keysDir := filepath.Join(t.TempDir(), "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(keysDir, keys, "http://127.0.0.1:1", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	f.Alipay.Gateway = "production"
	path := filepath.Join(keysDir, "channels.toml")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// liveMain is a serve with real channels and every posture but the bus's right: an https
// notify URL, buyers by JWT with the issuer and audience checked, an admin token of its own.
func liveMain(t *testing.T, channels, natsURL string, bus BusConfig) (*Main, *bytes.Buffer) {
	t.Helper()
	m := NewMain()
	var out bytes.Buffer
	m.Stdout, m.Stderr = &out, &out
	m.Config.Addr, m.Config.SimAddr, m.Config.DataDir = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(t.TempDir(), "data")
	m.Config.MetricsAddr = "127.0.0.1:0"
	m.Config.Channels, m.Config.PublicURL, m.Config.AdminToken = channels, "https://shop.example.com", "test-admin-token-of-24-chars"
	m.Config.BuyerAuth.Mode = buyerauth.ModeJWT
	m.Config.BuyerAuth.Issuer, m.Config.BuyerAuth.Audience = "https://login.shop.example.com", "orderpay"
	m.Config.NATS, m.Config.Bus = natsURL, bus
	return m, &out
}

// writeSecret writes a secret to a file of its own and returns its path.
func writeSecret(t *testing.T, name, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runRefused runs m, which must refuse to start before it opens anything, and returns
// the refusal.
func runRefused(t *testing.T, m *Main) string {
	t.Helper()
	err := m.Run(context.Background())
	m.Close()
	if err == nil {
		t.Fatal("serve started")
	}
	if m.URL != "" {
		t.Errorf("the API listened at %s", m.URL)
	}
	if _, serr := os.Stat(filepath.Join(m.Config.DataDir, "orderpay.db")); !os.IsNotExist(serr) {
		t.Errorf("the store was opened (%v)", serr)
	}
	return err.Error()
}

func mustContain(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not say %q:\n%s", what, w, s)
		}
	}
}

func mustNotContain(t *testing.T, what, s string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(s, w) {
			t.Errorf("%s says %q:\n%s", what, w, s)
		}
	}
}

// Real channels and an external NATS server off this machine with neither credentials nor
// TLS: serve refuses to start before it opens anything, naming the credential flags and
// the TLS ones, and nothing else (every other posture is right).
func TestServeRefusesAnExternalNATSWithoutCredentialsOrTLS(t *testing.T) {
	t.Parallel()
	m, _ := liveMain(t, realChannelsFile(t), "nats://10.1.2.3:4222", BusConfig{})
	msg := runRefused(t, m)
	mustContain(t, "the refusal", msg, "refusing to start: alipay in ", "is not on this machine, so real money moves, and:\n  - ",
		"--nats is given no credentials", "forged events",
		"set --nats-creds, --nats-nkey, --nats-user with --nats-password-file, or --nats-token-file",
		"\n  - --nats names 10.1.2.3:4222, not on this machine, and TLS is off", "set --nats-ca to the CA of the server's certificate, or use tls:// URLs")
	mustNotContain(t, "the refusal", msg, "--public-url", "--buyer-auth", "admin token")
	t.Logf("refusal:\n%s", msg)
}

// With credentials but no TLS, a server of the list off this machine is refused, and named;
// one on this machine is not. The password of a URL is never quoted.
func TestServeNATSPostureNeedsTLSOffLoopback(t *testing.T) {
	t.Parallel()
	channels := realChannelsFile(t)
	password := writeSecret(t, "nats.password", "s3cret-of-the-bus\n")
	m, _ := liveMain(t, channels, "nats://127.0.0.1:4222, nats://10.1.2.3:4222", BusConfig{User: "orderpay", PasswordFile: password})
	msg := runRefused(t, m)
	mustContain(t, "the refusal", msg, "refusing to start", "--nats names 10.1.2.3:4222, not on this machine, and TLS is off", "--nats-ca", "tls://")
	mustNotContain(t, "the refusal", msg, "no credentials", "127.0.0.1:4222")
	t.Logf("refusal:\n%s", msg)

	m, _ = liveMain(t, channels, "nats://orderpay:hunter2-of-the-bus@nats-a.internal:4222,nats://orderpay:hunter2-of-the-bus@nats-b.internal:4222", BusConfig{})
	err := m.checkPosture(mustLoad(t, channels))
	if err == nil {
		t.Fatal("credentials in the URL, no TLS, off this machine: accepted")
	}
	mustContain(t, "the refusal", err.Error(), "--nats names nats-a.internal:4222 and nats-b.internal:4222, not on this machine, and TLS is off")
	mustNotContain(t, "the refusal", err.Error(), "hunter2", "no credentials")

	// TLS on: a tls:// URL (the system's CAs), --nats-ca, or a client certificate.
	ca := writeSecret(t, "ca.pem", "not read by the posture")
	for _, c := range []struct {
		url string
		bus BusConfig
	}{
		{"tls://10.1.2.3:4222", BusConfig{User: "orderpay", PasswordFile: password}},
		{"nats://10.1.2.3:4222,tls://10.1.2.4:4222", BusConfig{TokenFile: password}},
		{"nats://10.1.2.3:4222", BusConfig{CredsFile: password, CAFile: ca}},
		{"nats://10.1.2.3:4222", BusConfig{NkeyFile: password, CertFile: ca, KeyFile: ca}},
		{"nats://orderpay:hunter2@10.1.2.3:4222", BusConfig{CAFile: ca}},
	} {
		m, _ := liveMain(t, channels, c.url, c.bus)
		if err := m.checkPosture(mustLoad(t, channels)); err != nil {
			t.Errorf("%s with %+v: %v", c.url, c.bus, err)
		}
	}
}

func mustLoad(t *testing.T, path string) *channelfile.File {
	t.Helper()
	f, err := channelfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// On this machine a NATS server needs no TLS but still credentials: another process here
// could publish. The embedded bus needs neither.
func TestServeNATSPostureOnLoopbackNeedsCredentialsOnly(t *testing.T) {
	t.Parallel()
	channels := realChannelsFile(t)
	token := writeSecret(t, "nats.token", "a-token-of-the-bus")
	for _, url := range []string{"nats://127.0.0.1:4222", "localhost:4222", "nats://[::1]:4222,nats://127.0.0.2:4223", "nats://token-in-the-url@127.0.0.1:4222"} {
		bus := BusConfig{TokenFile: token}
		if strings.Contains(url, "@") {
			bus = BusConfig{}
		}
		m, _ := liveMain(t, channels, url, bus)
		if err := m.checkPosture(mustLoad(t, channels)); err != nil {
			t.Errorf("%s with credentials: %v", url, err)
		}
	}
	m, _ := liveMain(t, channels, "", BusConfig{})
	if err := m.checkPosture(mustLoad(t, channels)); err != nil {
		t.Errorf("the embedded bus: %v", err)
	}

	m, _ = liveMain(t, channels, "nats://localhost:4222", BusConfig{})
	msg := runRefused(t, m)
	mustContain(t, "the refusal", msg, "refusing to start", "--nats is given no credentials", "--nats-creds", "--nats-token-file")
	mustNotContain(t, "the refusal", msg, "TLS is off")
}

// Credential and TLS flags that conflict, are half given or come without --nats: serve
// refuses to start, naming the flags, with or without real channels; with them, before it
// opens anything.
func TestServeRefusesConflictingNATSFlags(t *testing.T) {
	t.Parallel()
	channels := realChannelsFile(t)
	password := writeSecret(t, "nats.password", "s3cret-of-the-bus")
	for _, c := range []struct {
		url  string
		bus  BusConfig
		want string
	}{
		{"", BusConfig{User: "orderpay", PasswordFile: password}, "--nats-user and --nats-password-file apply only to an external NATS server: set --nats too, or leave them out"},
		{"", BusConfig{CAFile: password}, "--nats-ca applies only to an external NATS server: set --nats too, or leave it out"},
		{"nats://10.1.2.3:4222", BusConfig{User: "orderpay"}, "--nats-user needs --nats-password-file, a file holding the password"},
		{"nats://10.1.2.3:4222", BusConfig{PasswordFile: password}, "--nats-password-file needs --nats-user"},
		{"nats://10.1.2.3:4222", BusConfig{TokenFile: password, CAFile: password, CertFile: password}, "--nats-cert needs --nats-key, the certificate's private key"},
		{"nats://10.1.2.3:4222", BusConfig{KeyFile: password}, "--nats-key needs --nats-cert"},
		{"nats://10.1.2.3:4222", BusConfig{CredsFile: password, TokenFile: password}, "give one kind of NATS credentials, not several: --nats-creds and --nats-token-file"},
		{"nats://10.1.2.3:4222", BusConfig{NkeyFile: password, User: "orderpay", PasswordFile: password},
			"give one kind of NATS credentials, not several: --nats-nkey and --nats-user with --nats-password-file"},
		{"nats://u:p@10.1.2.3:4222", BusConfig{TokenFile: password}, "give one kind of NATS credentials, not several: credentials in the --nats URL and --nats-token-file"},
		{"nats://10.1.2.3:4222,nats://10.1.2.3:bad", BusConfig{TokenFile: password}, "--nats: server 2 of the list is not a URL such as nats://host:4222"},
	} {
		err := c.bus.checkNATS(c.url)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s with %+v: %v, want %q", c.url, c.bus, err, c.want)
		}
		if c.url == "nats://u:p@10.1.2.3:4222" {
			continue
		}
		// With real channels: refused before anything opens, and not as a posture.
		m, _ := liveMain(t, channels, c.url, c.bus)
		if msg := runRefused(t, m); msg != c.want {
			t.Errorf("serve --channels --nats %q with %+v: %s, want %q", c.url, c.bus, msg, c.want)
		}
	}

	// With the simulator, by the flags: refused at start too.
	m := NewMain()
	var out bytes.Buffer
	m.Stdout, m.Stderr = &out, &out
	if err := m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--sim-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--data", t.TempDir(), "--admin-token", "test-admin-token-of-24-chars",
		"--nats-user", "orderpay", "--nats-password-file", password}); err != nil {
		t.Fatal(err)
	}
	err := m.Run(context.Background())
	m.Close()
	if err == nil || err.Error() != "--nats-user and --nats-password-file apply only to an external NATS server: set --nats too, or leave them out" {
		t.Fatalf("serve --nats-user --nats-password-file without --nats: %v", err)
	}

	// A file that cannot be read, or an empty secret, is named by its flag at start.
	empty := writeSecret(t, "empty", "\n")
	for _, c := range []struct {
		bus  BusConfig
		want string
	}{
		{BusConfig{User: "orderpay", PasswordFile: filepath.Join(t.TempDir(), "missing")}, "--nats-password-file: open "},
		{BusConfig{TokenFile: empty}, "--nats-token-file: " + empty + " is empty"},
		{BusConfig{CredsFile: filepath.Join(t.TempDir(), "missing.creds")}, "--nats-creds: open "},
		{BusConfig{TokenFile: password, CAFile: filepath.Join(t.TempDir(), "missing-ca.pem")}, "--nats-ca: open "},
	} {
		_, err := c.bus.natsConfig("nats://127.0.0.1:4222", "", nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q…", c.bus, err, c.want)
		}
	}
}

// The password and the token are read from their files (without the final line break) into
// natsbus's Config, and the file options are passed on; the embedded bus gets none.
func TestServeNATSConfigReadsTheSecretFiles(t *testing.T) {
	t.Parallel()
	password := writeSecret(t, "nats.password", "s3cret of the bus\r\n")
	token := writeSecret(t, "nats.token", "a-token-of-the-bus\n")
	ca := writeSecret(t, "ca.pem", "x")
	cfg, err := BusConfig{User: "orderpay", PasswordFile: password, CAFile: ca, CertFile: ca, KeyFile: ca}.natsConfig("tls://127.0.0.1:4222", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "orderpay" || cfg.Password != "s3cret of the bus" || cfg.Token != "" || cfg.CAFile != ca || cfg.CertFile != ca || cfg.KeyFile != ca {
		t.Fatalf("user and password: %+v", cfg)
	}
	if cfg, err = (BusConfig{TokenFile: token}).natsConfig("nats://127.0.0.1:4222", "", nil); err != nil || cfg.Token != "a-token-of-the-bus" || cfg.User != "" {
		t.Fatalf("token: %+v, %v", cfg, err)
	}
	if cfg, err = (BusConfig{}).natsConfig("", "store", nil); err != nil || cfg.StoreDir != "store" || cfg.URL != "" {
		t.Fatalf("embedded: %+v, %v", cfg, err)
	}
}

// The credential and TLS flags have ORDERPAY_NATS_* variables; the flags win.
func TestServeNATSSecurityFlagsAndEnvironment(t *testing.T) {
	m := NewMain()
	var help bytes.Buffer
	m.Stdout = &help // -h prints the usage on stdout
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, s := range []string{"-nats-creds", "ORDERPAY_NATS_CREDS", "-nats-nkey", "ORDERPAY_NATS_NKEY", "-nats-user", "ORDERPAY_NATS_USER",
		"-nats-password-file", "ORDERPAY_NATS_PASSWORD_FILE", "-nats-token-file", "ORDERPAY_NATS_TOKEN_FILE", "-nats-ca", "ORDERPAY_NATS_CA",
		"-nats-cert", "ORDERPAY_NATS_CERT", "-nats-key", "ORDERPAY_NATS_KEY"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help does not mention %q", s)
		}
	}

	for env, v := range map[string]string{"ORDERPAY_NATS_CREDS": "/env/bus.creds", "ORDERPAY_NATS_NKEY": "/env/bus.nk", "ORDERPAY_NATS_USER": "env-user",
		"ORDERPAY_NATS_PASSWORD_FILE": "/env/password", "ORDERPAY_NATS_TOKEN_FILE": "/env/token", "ORDERPAY_NATS_CA": "/env/ca.pem",
		"ORDERPAY_NATS_CERT": "/env/cert.pem", "ORDERPAY_NATS_KEY": "/env/key.pem"} {
		t.Setenv(env, v)
	}
	m = NewMain()
	if err := m.ParseFlags([]string{"--nats-user", "flag-user", "--nats-ca", "/flag/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	want := BusConfig{CredsFile: "/env/bus.creds", NkeyFile: "/env/bus.nk", User: "flag-user", PasswordFile: "/env/password", TokenFile: "/env/token",
		CAFile: "/flag/ca.pem", CertFile: "/env/cert.pem", KeyFile: "/env/key.pem"}
	got := m.Config.Bus
	got.Replicas, got.MaxAge, got.MaxBytes, got.TimerMaxAge, got.TimerMaxBytes = 0, 0, 0, 0, 0
	if got != want {
		t.Fatalf("from the environment and flags %+v, want %+v", got, want)
	}
}

// serve --nats to a server on this machine that asks for a user and password: with the
// right password from --nats-password-file the bus gets ready; with a wrong one serve
// still starts, and /readyz says the bus is not connected.
func TestServeNATSWithAUserAndPassword(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		Username: "orderpay", Password: "s3cret-of-the-bus", NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	right := writeSecret(t, "right", "s3cret-of-the-bus\n")
	m, c := startMain(t, "", func(m *Main) {
		m.Config.NATS, m.Config.Bus.User, m.Config.Bus.PasswordFile = srv.ClientURL(), "orderpay", right
	})
	waitFor(t, 30*time.Second, "/readyz with the right password", func() bool { return readyz(ctx, c, m.URL) == nil })

	wrong := writeSecret(t, "wrong", "not-the-password")
	m, c = startMain(t, "", func(m *Main) {
		m.Config.NATS, m.Config.Bus.User, m.Config.Bus.PasswordFile = srv.ClientURL(), "orderpay", wrong
	})
	err = readyz(ctx, c, m.URL)
	if apiCode(err) != orderpay.EUNAVAILABLE || !strings.Contains(err.Error(), "bus: not ready (not connected to NATS)") {
		t.Fatalf("/readyz with a wrong password: %v", err)
	}
}

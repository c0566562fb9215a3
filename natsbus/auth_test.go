package natsbus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"orderpay"
)

// startServer starts a NATS server with JetStream on 127.0.0.1, asking for what opts say,
// and stops it when the test ends.
func startServer(t *testing.T, opts server.Options) *server.Server {
	srv, _ := startServerOpts(t, opts)
	return srv
}

// startServerOpts is startServer, and returns the options the server started with, its
// port included.
func startServerOpts(t *testing.T, opts server.Options) (*server.Server, server.Options) {
	t.Helper()
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, t.TempDir(), true, true
	given := opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { stopServer(srv) })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	given.Port = srv.Addr().(*net.TCPAddr).Port
	return srv, given
}

// openLogged opens a bus whose log lines the test reads, and closes it when the test ends.
func openLogged(t *testing.T, cfg Config) (*Bus, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b, logs
}

// authFailures counts the connections the server closed for their credentials.
func authFailures(t *testing.T, srv *server.Server) int {
	t.Helper()
	c, err := srv.Connz(&server.ConnzOptions{State: server.ConnClosed, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ci := range c.Conns {
		if ci.Reason == server.AuthenticationViolation.String() {
			n++
		}
	}
	return n
}

// connectsAndPublishes checks that a bus gets ready and the broker stores what it publishes.
func connectsAndPublishes(t *testing.T, b *Bus) {
	t.Helper()
	if err := b.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(t.Context(), paymentSucceeded("P1")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if n := streamMsgs(t, b); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

// refused checks that a bus the server refuses is open but not ready, says why in its log
// once, and keeps trying (the client's default is to give up after the same refusal twice).
func refused(t *testing.T, srv *server.Server, b *Bus, logs *syncBuffer) {
	t.Helper()
	waitFor(t, 30*time.Second, "the server to refuse the bus three times", func() bool { return authFailures(t, srv) >= 3 })
	if err := b.Ready(); err == nil || err.Error() != "not connected to NATS" {
		t.Errorf("Ready: %v, want not connected to NATS", err)
	}
	if err := b.Conn().LastError(); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("the connection's last error: %v, want %v", err, nats.ErrAuthorization)
	}
	if b.Conn().IsClosed() {
		t.Error("the client gave up after the server refused it")
	}
	if !strings.Contains(logs.String(), "could not connect to NATS; retrying") || !strings.Contains(strings.ToLower(logs.String()), "authorization violation") {
		t.Errorf("the log does not say why the bus cannot connect:\n%s", logs)
	}
	if err := b.Publish(t.Context(), paymentSucceeded("P2")); !errors.Is(err, errNotConnected) {
		t.Errorf("publish while refused: %v", err)
	}
}

// A server that asks for a user and password, or a token: the bus with the right ones
// connects and publishes; with wrong ones or none it is open, not ready, and keeps trying.
func TestAuth_userPasswordAndToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		server     server.Options
		right      func(url string) Config
		wrong, not Config
	}{
		{"user and password", server.Options{Username: "orderpay", Password: "s3cret-of-the-bus"},
			func(u string) Config { return Config{URL: u, User: "orderpay", Password: "s3cret-of-the-bus"} },
			Config{User: "orderpay", Password: "not-the-password"}, Config{}},
		{"token", server.Options{Authorization: "a-token-of-the-bus"},
			func(u string) Config { return Config{URL: u, Token: "a-token-of-the-bus"} },
			Config{Token: "not-the-token"}, Config{}},
		{"credentials in the URL", server.Options{Username: "orderpay", Password: "s3cret-of-the-bus"},
			func(u string) Config {
				p, err := url.Parse(u)
				if err != nil {
					t.Fatal(err)
				}
				p.User = url.UserPassword("orderpay", "s3cret-of-the-bus")
				return Config{URL: p.String()}
			},
			Config{User: "intruder", Password: "s3cret-of-the-bus"}, Config{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, c.server)
			b, _ := openLogged(t, c.right(srv.ClientURL()))
			connectsAndPublishes(t, b)
			b.Close()

			for _, cfg := range []Config{c.wrong, c.not} {
				srv := startServer(t, c.server) // a server of its own, to count its refusals
				cfg.URL = srv.ClientURL()
				b, logs := openLogged(t, cfg)
				refused(t, srv, b, logs)
				if strings.Contains(logs.String(), "not-the-") {
					t.Errorf("the log quotes the secret:\n%s", logs)
				}
				b.Close()
			}
		})
	}
}

// The server's password changes after the bus was refused: the bus, which kept trying,
// connects with it and gets ready.
func TestAuth_keepsTryingUntilTheServerTakesTheCredentials(t *testing.T) {
	t.Parallel()
	srv, opts := startServerOpts(t, server.Options{Username: "orderpay", Password: "the-old-password"})
	b, logs := openLogged(t, Config{URL: srv.ClientURL(), User: "orderpay", Password: "the-new-password"})
	refused(t, srv, b, logs)

	opts.Password = "the-new-password"
	if err := srv.ReloadOptions(&opts); err != nil {
		t.Fatal(err)
	}
	connectsAndPublishes(t, b)
}

// tlsFiles are a CA made for the test, and a server and client certificate it signed, as
// PEM files.
type tlsFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	pool                                             *x509.CertPool
}

func makeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "orderpay test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (cert, key string) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	f := tlsFiles{CA: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	f.pool.AddCert(ca)
	f.ServerCert, f.ServerKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	f.ClientCert, f.ClientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return f
}

// A server that takes only TLS with a client certificate signed by its CA, and a password:
// the bus with --nats-ca, the client certificate and the password connects over TLS and
// publishes; without the CA (the system's CAs do not know the test's) or without the
// client certificate it is open, not ready, and its log says why.
func TestAuth_mutualTLS(t *testing.T) {
	t.Parallel()
	files := makeTLSFiles(t)
	cert, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, server.Options{Username: "orderpay", Password: "s3cret-of-the-bus", TLSVerify: true,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: files.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	good := Config{URL: srv.ClientURL(), User: "orderpay", Password: "s3cret-of-the-bus", CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}

	b, _ := openLogged(t, good)
	connectsAndPublishes(t, b)
	if st, err := b.Conn().TLSConnectionState(); err != nil || !st.HandshakeComplete || len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "server" {
		t.Fatalf("not over TLS to the test's server: %+v, %v", st, err)
	}
	b.Close()

	for _, c := range []struct {
		name string
		cfg  Config
		says string
	}{
		{"no CA", Config{URL: good.URL, User: good.User, Password: good.Password, CertFile: good.CertFile, KeyFile: good.KeyFile}, "certificate signed by unknown authority"},
		// The server's alert may reach the client as the alert, a reset or an EOF.
		{"no client certificate", Config{URL: good.URL, User: good.User, Password: good.Password, CAFile: good.CAFile}, ""},
	} {
		b, logs := openLogged(t, c.cfg)
		waitFor(t, 30*time.Second, c.name+": the failure logged", func() bool { return strings.Contains(logs.String(), "could not connect to NATS; retrying") })
		if !strings.Contains(logs.String(), c.says) {
			t.Errorf("%s: the log does not say %q:\n%s", c.name, c.says, logs)
		}
		t.Logf("%s: %s", c.name, logs)
		if err := b.Ready(); err == nil {
			t.Errorf("%s: ready", c.name)
		}
		if b.Conn().IsClosed() {
			t.Errorf("%s: the client gave up", c.name)
		}
		b.Close()
	}
}

// Credentials and TLS apply to an external server only, one kind of credentials at a time,
// the halves of a pair together; a creds or nkey file that cannot be read fails Open.
func TestAuth_configValidation(t *testing.T) {
	t.Parallel()
	const ext = "nats://127.0.0.1:4222"
	for name, bad := range map[string]Config{
		"embedded with a user":        {StoreDir: "x", User: "u", Password: "p"},
		"embedded with a CA":          {StoreDir: "x", CAFile: "ca.pem"},
		"creds and token":             {URL: ext, CredsFile: "a.creds", Token: "t"},
		"nkey and user":               {URL: ext, NkeyFile: "a.nk", User: "u", Password: "p"},
		"URL credentials and a token": {URL: "nats://u:p@127.0.0.1:4222", Token: "t"},
		"user without password":       {URL: ext, User: "u"},
		"password without user":       {URL: ext, Password: "p"},
		"cert without key":            {URL: ext, CertFile: "c.pem"},
		"key without cert":            {URL: ext, KeyFile: "k.pem"},
	} {
		if err := bad.withDefaults().validate(); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: got %v, want EINVALID", name, err)
		}
	}
	for name, good := range map[string]Config{
		"user and password, CA, client certificate": {URL: ext, User: "u", Password: "p", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"},
		"token": {URL: ext, Token: "t"}, "creds": {URL: ext, CredsFile: "a.creds"}, "nkey": {URL: ext, NkeyFile: "a.nk"},
		"URL credentials": {URL: "tls://u:p@127.0.0.1:4222,tls://u:p@127.0.0.1:4223"},
	} {
		if err := good.withDefaults().validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	missing := filepath.Join(t.TempDir(), "missing")
	for _, cfg := range []Config{{URL: ext, CredsFile: missing}, {URL: ext, NkeyFile: missing}, {URL: ext, CAFile: missing}, {URL: ext, Token: "t", CertFile: missing, KeyFile: missing}} {
		if b, err := Open(t.Context(), cfg); err == nil {
			b.Close()
			t.Errorf("%+v: Open succeeded", cfg)
		}
	}
}

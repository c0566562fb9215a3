package alipay_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/clocktest"
)

// setupWith is setup with a simulator configured by cfg (Keys, Clock, TimeScale and Logger
// are filled in) and adapter options applied after the defaults.
func setupWith(t *testing.T, cfg sim.Config, mods ...func(*alipay.Config)) *env {
	t.Helper()
	keys, _ := simtest.Keys(t)
	clock := clocktest.New(time.Date(2025, 3, 14, 10, 0, 0, 0, cst))
	cfg.Keys, cfg.Clock, cfg.TimeScale = keys, clock, 1e6
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &env{sim: s, srv: srv, keys: keys, clock: clock}
	e.ch = newChannel(t, keys, srv.URL+"/gateway.do", append([]func(*alipay.Config){func(c *alipay.Config) { c.Clock = clock }}, mods...)...)
	return e
}

// shortTimeout makes the adapter give up after 300 ms, so that a timeout fault costs little.
func shortTimeout(c *alipay.Config) { c.Timeout = 300 * time.Millisecond }

// accepted precreates outTradeNo through the adapter and returns its QR code.
func (e *env) accepted(t *testing.T, outTradeNo string, amount int64) string {
	t.Helper()
	pre := e.precreate(t, outTradeNo, amount, e.clock.Now().Add(time.Hour), "")
	if pre.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("precreate %s: %+v", outTradeNo, pre)
	}
	return pre.QRCode
}

// paid precreates outTradeNo and the buyer pays it.
func (e *env) paid(t *testing.T, outTradeNo string, amount int64) {
	t.Helper()
	if _, err := e.sim.Pay(context.Background(), e.accepted(t, outTradeNo, amount)); err != nil {
		t.Fatal(err)
	}
}

// scanned precreates outTradeNo and the buyer scans it without paying.
func (e *env) scanned(t *testing.T, outTradeNo string, amount int64) string {
	t.Helper()
	qr := e.accepted(t, outTradeNo, amount)
	if _, err := e.sim.Scan(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	return qr
}

// fault puts one Alipay call fault in force.
func (e *env) fault(t *testing.T, method, kind string, applied bool) {
	t.Helper()
	err := e.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{
		{Channel: orderpay.ChannelAlipay, Method: method, Kind: kind, Applied: applied},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) noFaults() { _ = e.sim.SetFaults(sim.FaultPlan{}) }

// refunded returns the settled refunded total of outTradeNo at the channel.
func (e *env) refunded(t *testing.T, outTradeNo string) int64 {
	t.Helper()
	for _, l := range e.sim.Ledger() {
		if l.OutTradeNo == outTradeNo {
			return l.Refunded
		}
	}
	t.Fatalf("no trade %s at the channel", outTradeNo)
	return 0
}

// callFaults are the call fault kinds, each with whether the operation takes effect.
var callFaults = []struct {
	kind    string
	applied bool
}{
	{sim.FaultTimeout, true},
	{sim.FaultTimeout, false},
	{sim.FaultHTTP500, true},
	{sim.FaultHTTP500, false},
	{sim.FaultSystemError, true},
	{sim.FaultSystemError, false},
	{sim.FaultUnknownError, true},
	{sim.FaultUnknownError, false},
	{sim.FaultUnsigned, true},
	{sim.FaultUnsigned, false},
	{sim.FaultBadSignature, true},
	{sim.FaultBadSignature, false},
	{sim.FaultRateLimited, false},
}

// faulty is the adapter for the one call under a fault of kind: a timeout fault holds the
// answer until the adapter gives up, so for it a second adapter on the same gateway gives up
// after 300 ms; any other fault goes through e.ch with its usual timeout (a forged signature
// may first wait for the forger's key). Every other call of the test goes through e.ch, so
// that a busy machine does not turn a slow answer into a false unknown.
func (e *env) faulty(t *testing.T, kind string) *alipay.Channel {
	if kind != sim.FaultTimeout {
		return e.ch
	}
	clock := func(c *alipay.Config) { c.Clock = e.clock }
	return newChannel(t, e.keys, e.srv.URL+"/gateway.do", clock, shortTimeout)
}

func faultName(kind string, applied bool) string {
	if applied {
		return kind + " applied"
	}
	return kind + " not applied"
}

// certMode configures the adapter for certificate mode with keys' certificates, in place of
// the Alipay public key.
func certMode(t *testing.T, keys *sim.Keys) func(*alipay.Config) {
	t.Helper()
	return func(c *alipay.Config) {
		c.AlipayPublicKeyPEM = ""
		c.AppCertPEM = keys.AlipayCerts.AppCertPEM
		c.AlipayCertPEM = keys.AlipayCerts.AlipayCertPEM
		c.AlipayRootCertPEM = keys.AlipayCerts.RootPEM
	}
}

// setupCert is setupWith for an app, and an adapter, in certificate mode.
func setupCert(t *testing.T, cfg sim.Config, mods ...func(*alipay.Config)) *env {
	t.Helper()
	keys, _ := simtest.Keys(t)
	cfg.AlipayMode = sim.AlipayModeCert
	return setupWith(t, cfg, append([]func(*alipay.Config){certMode(t, keys)}, mods...)...)
}

// setupMode is setupWith in public-key or certificate mode.
func setupMode(t *testing.T, mode sim.AlipayMode, cfg sim.Config, mods ...func(*alipay.Config)) *env {
	t.Helper()
	if mode == sim.AlipayModeCert {
		return setupCert(t, cfg, mods...)
	}
	return setupWith(t, cfg, mods...)
}

// selfSignedCert is a certificate of key's public key that no Alipay root issued.
func selfSignedCert(t *testing.T, key *rsa.PrivateKey) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "not an Alipay app"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

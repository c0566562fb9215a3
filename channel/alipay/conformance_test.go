package alipay_test

import (
	"testing"

	"orderpay/channel/alipay"
	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// The shared stories every adapter tells against the simulator (channel/channeltest), with
// the app in public-key mode; the Alipay-only rows (cancel, ACQ.* sub_codes, retry_flag) are
// in this package's own tests.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance(t, sim.AlipayModeKey)
}

// The same stories with the app, and the adapter, in certificate mode.
func TestConformance_CertificateMode(t *testing.T) {
	t.Parallel()
	conformance(t, sim.AlipayModeCert)
}

func conformance(t *testing.T, mode sim.AlipayMode) {
	channeltest.Run(t, func(t *testing.T, opts channeltest.Options) *channeltest.Env {
		keys, foreign := simtest.Keys(t)
		adapterMode, foreignMode := func(*alipay.Config) {}, func(c *alipay.Config) {}
		if mode == sim.AlipayModeCert {
			adapterMode = certMode(t, keys)
			// A merchant with another key, and the certificate of that key: Alipay knows
			// neither.
			foreignMode = func(c *alipay.Config) { certMode(t, keys)(c); c.AppCertPEM = selfSignedCert(t, foreign) }
		}
		e := setupWith(t, sim.Config{Faults: opts.Faults, RefundDelay: opts.RefundDelay, AlipayMode: mode}, adapterMode)
		impatient := newChannel(t, e.keys, e.srv.URL+"/gateway.do", adapterMode, shortTimeout, func(c *alipay.Config) { c.Clock = e.clock })
		misconfigured := newChannel(t, e.keys, e.srv.URL+"/gateway.do", foreignMode, func(c *alipay.Config) {
			c.Clock = e.clock
			c.AppPrivateKeyPEM = simtest.PEM(t, func() (string, error) { return sim.PrivateKeyPEM(foreign) })
		})
		return &channeltest.Env{Channel: e.ch, Sim: e.sim, Clock: e.clock, Misconfigured: misconfigured, Impatient: impatient}
	})
}

package alipay_test

import (
	"testing"

	"orderpay/channel/alipay"
	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// The shared stories every adapter tells against the simulator (channel/channeltest); the
// Alipay-only rows (cancel, ACQ.* sub_codes, retry_flag) are in this package's own tests.
func TestConformance(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, func(t *testing.T, opts channeltest.Options) *channeltest.Env {
		e := setupWith(t, sim.Config{Faults: opts.Faults, RefundDelay: opts.RefundDelay})
		impatient := newChannel(t, e.keys, e.srv.URL+"/gateway.do", shortTimeout, func(c *alipay.Config) { c.Clock = e.clock })
		_, foreign := simtest.Keys(t)
		misconfigured := newChannel(t, e.keys, e.srv.URL+"/gateway.do", func(c *alipay.Config) {
			c.Clock = e.clock
			c.AppPrivateKeyPEM = simtest.PEM(t, func() (string, error) { return sim.PrivateKeyPEM(foreign) })
		})
		return &channeltest.Env{Channel: e.ch, Sim: e.sim, Clock: e.clock, Misconfigured: misconfigured, Impatient: impatient}
	})
}

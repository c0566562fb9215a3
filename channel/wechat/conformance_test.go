package wechat_test

import (
	"testing"
	"time"

	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
)

// The shared stories every adapter tells against the simulator (channel/channeltest), for a
// merchant in each mode: public key, and platform certificates the adapter downloads.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		sim     func(*sim.Config)
		adapter func(*wechat.Config)
	}{
		{"public_key", func(*sim.Config) {}, func(*wechat.Config) {}},
		{"platform_certificate", simCertificateMode, certificateMode},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			channeltest.Run(t, func(t *testing.T, opts channeltest.Options) *channeltest.Env {
				e := setup(t, func(c *sim.Config) {
					mode.sim(c)
					c.Faults = opts.Faults
					c.RefundDelay = opts.RefundDelay
				})
				ch := newChannel(t, e.keys, e.srv.URL, mode.adapter, func(c *wechat.Config) { c.Clock = e.clock })
				impatient := newChannel(t, e.keys, e.srv.URL, mode.adapter, func(c *wechat.Config) {
					c.Clock = e.clock
					c.Timeout = 300 * time.Millisecond
				})
				_, foreign := simtest.Keys(t)
				misconfigured := newChannel(t, e.keys, e.srv.URL, mode.adapter, func(c *wechat.Config) {
					c.Clock = e.clock
					pem, err := sim.PrivateKeyPEM(foreign)
					if err != nil {
						t.Fatal(err)
					}
					c.MerchantPrivateKeyPEM = pem
				})
				return &channeltest.Env{Channel: ch, Sim: e.sim, Clock: e.clock, Misconfigured: misconfigured, Impatient: impatient}
			})
		})
	}
}

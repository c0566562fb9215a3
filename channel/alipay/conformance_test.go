package alipay_test

import (
	"testing"

	"orderpay/channel/channeltest"
	"orderpay/channel/sim"
)

// The shared stories every adapter tells against the simulator (channel/channeltest); the
// Alipay-only rows (cancel, ACQ.* sub_codes, retry_flag) are in this package's own tests.
func TestConformance(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, func(t *testing.T, opts channeltest.Options) *channeltest.Env {
		e := setupWith(t, sim.Config{Faults: opts.Faults, RefundDelay: opts.RefundDelay}, shortTimeout)
		return &channeltest.Env{Channel: e.ch, Sim: e.sim, Clock: e.clock}
	})
}

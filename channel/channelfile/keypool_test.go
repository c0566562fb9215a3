package channelfile_test

import "orderpay/channel/sim/simtest"

// The tests write channel files for many fresh key sets: their keys come from the tests'
// pool.
func init() { simtest.UseKeyPool() }

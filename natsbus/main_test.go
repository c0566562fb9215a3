package natsbus

import (
	"os"
	"testing"

	"orderpay/natsbus/natstest"
)

// TestMain lets this test binary also be a NATS node of natstest.Processes.
func TestMain(m *testing.M) {
	natstest.RunNodeIfChild()
	os.Exit(m.Run())
}

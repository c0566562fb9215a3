//go:build !linux

package chaos

import (
	"os/exec"
	"time"
)

// setParentDeathSignal has no portable equivalent outside Linux.
func setParentDeathSignal(*exec.Cmd) {}

// threadCPU is not available outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

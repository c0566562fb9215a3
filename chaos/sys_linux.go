package chaos

import (
	"os/exec"
	"syscall"
	"time"
)

// setParentDeathSignal kills the server if the harness dies, so that an interrupted run
// leaves no orderpay behind holding the port and the database.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage only.
const rusageThread = 1

// threadCPU is the calling OS thread's CPU time (user + system). The caller locks its
// goroutine to the thread.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

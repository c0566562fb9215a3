package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverStartTimeout bounds how long a (re)started server may take to answer /healthz.
const serverStartTimeout = 60 * time.Second

// ServerProcess is `orderpay serve` run as a child process, on an address picked once so
// that every restart listens where the buyers and the simulator already send requests.
type ServerProcess struct {
	Binary string
	Args   []string // after "serve"
	Addr   string   // host:port of the API
	// MetricsAddr is host:port of the metrics listener (--metrics-addr), picked with Addr.
	MetricsAddr string
	Log         string // file the child's stdout and stderr are appended to

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
	exitErr  error
	expected bool // the harness ended the process (crash or stop)
	// unexpected counts exits nobody asked for (the server died by itself).
	unexpected []string
}

// URL is the API's base URL.
func (p *ServerProcess) URL() string { return "http://" + p.Addr }

// MetricsURL is the page of the server's Prometheus metrics, on its metrics listener: the
// one place the benchmarks' samplers and scrapers take it from.
func (p *ServerProcess) MetricsURL() string { return "http://" + p.MetricsAddr + "/metrics" }

// freeAddr picks a free loopback port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start runs the server and waits until /healthz answers.
func (p *ServerProcess) Start(ctx context.Context) error {
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Binary, append([]string{"serve"}, p.Args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start server: %w", err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.expected = cmd, exited, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.exitErr = err
		if !p.expected && p.cmd == cmd {
			p.unexpected = append(p.unexpected, fmt.Sprint(err))
		}
		p.mu.Unlock()
		close(exited)
	}()
	if err := p.waitHealthy(ctx, exited); err != nil {
		p.kill()
		return fmt.Errorf("%w\n--- end of %s ---\n%s", err, p.Log, tail(p.Log, 30))
	}
	return nil
}

// childEnv is the harness's environment without ORDERPAY_* variables: the server takes
// everything from its flags, never from a setting left in the shell (ORDERPAY_DB would
// send it to another database than the one the audit reads).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ORDERPAY_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *ServerProcess) waitHealthy(ctx context.Context, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(serverStartTimeout)
	for {
		resp, err := client.Get(p.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("chaos: server exited during start-up: %v", p.exitError())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: server not healthy after %s", serverStartTimeout)
		}
	}
}

func (p *ServerProcess) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *ServerProcess) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.expected = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Crash kills the server with SIGKILL, as a power cut or the OOM killer would, and starts
// it again at once with the same flags. It returns how long the API was down.
func (p *ServerProcess) Crash(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	p.kill()
	err := p.Start(ctx)
	return time.Since(start), err
}

// Stop ends the server with SIGTERM (a clean shutdown), or SIGKILL after 15 s.
func (p *ServerProcess) Stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.expected = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Exited reports whether the current process has exited, and takes the exits nobody asked
// for so far.
func (p *ServerProcess) Exited() (bool, []string) {
	p.mu.Lock()
	exited, unexpected := p.exited, p.unexpected
	p.unexpected = nil
	p.mu.Unlock()
	select {
	case <-exited:
		return true, unexpected
	default:
		return false, unexpected
	}
}

// PID is the current process's id.
func (p *ServerProcess) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// tail is the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ProcessCPU is a process's CPU time (user + system) so far, read from /proc/<pid>/stat
// in clock ticks (ClockTicks per second).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces; count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("chaos: malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(3) ppid(4) … utime is field 14 and stime field 15 (1-based).
	if len(f) < 13 {
		return 0, errors.New("chaos: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / time.Duration(ClockTicks()), nil
}

var (
	clkTckOnce sync.Once
	clkTck     int64
)

// ClockTicks is the kernel's clock ticks per second (getconf CLK_TCK), 100 if it cannot
// be read.
func ClockTicks() int64 {
	clkTckOnce.Do(func() {
		clkTck = 100
		if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && v > 0 {
				clkTck = v
			}
		}
	})
	return clkTck
}

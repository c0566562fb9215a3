// Package natstest runs a NATS JetStream cluster for tests: clustered servers on loopback
// ports, each with its own store directory, that a test kills, wipes and restarts as an
// operator's cluster loses a node or a disk.
//
// The servers run inside the test process, or each in a child process (Processes), which
// is the test binary itself running one server: a kill is then a SIGKILL, with no chance
// for the server to hand its leaderships over as a shutdown does, so the cluster has to
// notice the loss and elect new leaders, as after a crash or a power loss. A test package
// that uses Processes calls RunNodeIfChild first in its TestMain.
package natstest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is n clustered JetStream servers on 127.0.0.1.
type Cluster struct {
	t         testing.TB
	name      string
	processes bool
	dir       string // the nodes' stores are in it
	mu        sync.Mutex
	nodes     []*node
}

type node struct {
	spec  nodeSpec
	srv   *server.Server // in process, while up
	cmd   *exec.Cmd      // in a child process, while up
	stdin io.Closer      // the child's stdin, held open while it runs
}

// nodeSpec is what a node needs to run, in this process or a child.
type nodeSpec struct {
	Name        string
	Cluster     string
	StoreDir    string
	ClientPort  int
	ClusterPort int
	Routes      []string
}

// Option changes how StartCluster runs the servers.
type Option func(*Cluster)

// Processes runs each server in a child process, so that Kill is a SIGKILL. The test
// package's TestMain must call RunNodeIfChild.
func Processes() Option { return func(c *Cluster) { c.processes = true } }

// readyTimeout bounds the wait for a server to accept clients, and for the cluster to
// elect its JetStream meta leader.
const readyTimeout = 30 * time.Second

// childEnv carries a child's nodeSpec.
const childEnv = "ORDERPAY_NATSTEST_NODE"

// StartCluster starts n clustered JetStream servers, named n1…nn, and returns once the
// cluster answers JetStream requests. They are stopped when the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, name: "orderpay-test"}
	for _, o := range opts {
		o(c)
	}
	// The nodes' stores are under a directory of the cluster's, removed once every node is
	// down: a test's TempDir may be removed while a node still writes to it (its cleanup
	// runs before those of the nodes'), and a server just shut down can still be finishing
	// a write for a moment.
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() {
		c.killAll()
		for try := 0; ; try++ {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if try == 20 {
				t.Errorf("natstest: removing the nodes' stores: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// Ports are picked now and kept: a restarted node must come back where its peers'
	// routes and the clients' URLs point. A port picked free may be taken before its node
	// listens on it (another test's listener, a connection's local port): then every node
	// starts again on new ones.
	for attempt := 1; ; attempt++ {
		c.pickPorts(n)
		err := c.startAll()
		if err == nil {
			break
		}
		c.killAll()
		if attempt == 3 {
			t.Fatalf("natstest: %v (the third time, each on new ports)", err)
		}
		t.Logf("natstest: %v; starting the cluster again on new ports", err)
	}
	c.WaitJetStream()
	return c
}

// pickPorts gives n nodes free ports and the routes to each other.
func (c *Cluster) pickPorts(n int) {
	var nodes []*node
	for i := range n {
		store, err := os.MkdirTemp(c.dir, fmt.Sprintf("n%d-", i+1))
		if err != nil {
			c.t.Fatal(err)
		}
		nodes = append(nodes, &node{spec: nodeSpec{Name: fmt.Sprintf("n%d", i+1), Cluster: c.name, StoreDir: store,
			ClientPort: freePort(c.t), ClusterPort: freePort(c.t)}})
	}
	for _, nd := range nodes {
		for _, peer := range nodes {
			if peer != nd {
				nd.spec.Routes = append(nd.spec.Routes, fmt.Sprintf("nats://127.0.0.1:%d", peer.spec.ClusterPort))
			}
		}
	}
	c.mu.Lock()
	c.nodes = nodes
	c.mu.Unlock()
}

// killAll kills every node.
func (c *Cluster) killAll() {
	for i := range c.nodes {
		c.Kill(i)
	}
}

// startAll starts every node, all of them down, on its ports.
func (c *Cluster) startAll() error {
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			return err
		}
	}
	return nil
}

// URLs is the client URLs of every node, comma-separated, as `serve --nats` takes them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// URL is node i's client URL, whether it is up or not.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].spec.ClientPort)
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Name is node i's server name, the name stream and consumer cluster info reports.
func (c *Cluster) Name(i int) string { return c.nodes[i].spec.Name }

// Index is the node named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, nd := range c.nodes {
		if nd.spec.Name == name {
			return i
		}
	}
	return -1
}

// Up reports whether node i is running.
func (c *Cluster) Up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv != nil || c.nodes[i].cmd != nil
}

// Kill stops node i (its store stays): a SIGKILL with Processes, else a shutdown, which
// hands the node's leaderships over first. Killing a node that is down does nothing.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	nd := c.nodes[i]
	srv, cmd, stdin := nd.srv, nd.cmd, nd.stdin
	nd.srv, nd.cmd, nd.stdin = nil, nil, nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		stdin.Close()
	}
}

// WipeStore deletes node i's JetStream store, as a lost disk would; the node must be down.
func (c *Cluster) WipeStore(i int) {
	c.t.Helper()
	if c.Up(i) {
		c.t.Fatalf("natstest: wiping the store of %s, which is running", c.Name(i))
	}
	dir := c.nodes[i].spec.StoreDir
	if err := os.RemoveAll(dir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// Restart starts node i (again) on its ports and store, and returns once it accepts
// clients. Restarting a running node does nothing.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Up(i) {
		return
	}
	if err := c.start(i); err != nil {
		c.t.Fatal(err)
	}
}

// start starts node i, which is down, on its ports.
func (c *Cluster) start(i int) error {
	nd := c.nodes[i]
	if !c.processes {
		srv, err := startNode(nd.spec)
		if err != nil {
			return fmt.Errorf("natstest: %s: %v", nd.spec.Name, err)
		}
		c.mu.Lock()
		nd.srv = srv
		c.mu.Unlock()
		return nil
	}
	cmd, stdin, err := startChild(nd.spec)
	if err != nil {
		return fmt.Errorf("natstest: %s: %v", nd.spec.Name, err)
	}
	c.mu.Lock()
	nd.cmd, nd.stdin = cmd, stdin
	c.mu.Unlock()
	return nil
}

// WaitJetStream waits until every running node answers JetStream requests: the cluster has
// a meta leader that they know.
func (c *Cluster) WaitJetStream() {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for i := range c.nodes {
		if !c.Up(i) {
			continue
		}
		for {
			err := accountInfo(c.URL(i))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("natstest: %s does not answer JetStream requests after %s: %v", c.Name(i), readyTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func accountInfo(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// startNode runs spec's server in this process and returns once it accepts clients.
func startNode(spec nodeSpec) (*server.Server, error) {
	routes := make([]*url.URL, 0, len(spec.Routes))
	for _, r := range spec.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, err
		}
		routes = append(routes, u)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: spec.Name,
		Host:       "127.0.0.1",
		Port:       spec.ClientPort,
		JetStream:  true,
		StoreDir:   spec.StoreDir,
		// Limits, not allocations: enough for the streams' reservations on any disk.
		JetStreamMaxStore:  8 << 30,
		JetStreamMaxMemory: 256 << 20,
		Cluster:            server.ClusterOpts{Name: spec.Cluster, Host: "127.0.0.1", Port: spec.ClusterPort},
		Routes:             routes,
		NoLog:              true,
		NoSigs:             true,
	})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		clients, routes := srv.Addr() != nil, srv.ClusterAddr() != nil
		srv.Shutdown()
		return nil, fmt.Errorf("not ready after %s (listening for clients on %d: %v, for routes on %d: %v)",
			readyTimeout, spec.ClientPort, clients, spec.ClusterPort, routes)
	}
	return srv, nil
}

// startChild runs spec's server in a child process (the test binary, through
// RunNodeIfChild) and returns once it accepts clients, with the child's stdin, which the
// caller holds open while the child should run.
func startChild(spec nodeSpec) (*exec.Cmd, io.Closer, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	// The child reads its stdin until EOF: it ends with the test process, however that
	// ends, instead of living on as an orphan holding ports.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("child said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, out)
	}()
	select {
	case err = <-ready:
	case <-time.After(readyTimeout):
		err = fmt.Errorf("not ready after %s", readyTimeout)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, fmt.Errorf("child server (is natstest.RunNodeIfChild in TestMain?): %w", err)
	}
	return cmd, stdin, nil
}

// RunNodeIfChild runs a NATS server and never returns if this process is a node that
// StartCluster started with Processes; otherwise it returns at once. Call it first in
// TestMain.
func RunNodeIfChild() {
	v := os.Getenv(childEnv)
	if v == "" {
		return
	}
	var spec nodeSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "natstest: bad node spec:", err)
		os.Exit(2)
	}
	srv, err := startNode(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "natstest: %s: %v\n", spec.Name, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // until the test process goes
	srv.Shutdown()
	os.Exit(0)
}

// Peers is how many servers hold a stream or consumer, from its cluster info: its leader
// and its replicas (a replica on a node that is down stays a peer, offline).
func Peers(ci *jetstream.ClusterInfo) int {
	if ci == nil {
		return 0
	}
	n := len(ci.Replicas)
	if ci.Leader != "" {
		n++
	}
	return n
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Package natstest runs a NATS JetStream cluster inside a test process: clustered servers
// on loopback ports, each with its own store directory, that a test can kill, wipe and
// restart as an operator's cluster loses a node or a disk.
package natstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is n clustered JetStream servers on 127.0.0.1.
type Cluster struct {
	t     testing.TB
	name  string
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	name        string
	storeDir    string
	clientPort  int
	clusterPort int
	srv         *server.Server // nil while down
}

// readyTimeout bounds the wait for a server to accept clients, and for the cluster to
// elect its JetStream meta leader.
const readyTimeout = 30 * time.Second

// StartCluster starts n clustered JetStream servers, named n1…nn, and returns once the
// cluster has a JetStream meta leader. They are shut down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, name: "orderpay-test"}
	// Ports are picked now and kept: a restarted node must come back where its peers'
	// routes and the clients' URLs point.
	for i := range n {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("n%d", i+1), storeDir: t.TempDir(),
			clientPort: freePort(t), clusterPort: freePort(t)})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Kill(i)
		}
	})
	for i := range c.nodes {
		c.Restart(i)
	}
	c.WaitMetaLeader()
	return c
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
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].clientPort)
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Name is node i's server name, the name stream and consumer cluster info reports.
func (c *Cluster) Name(i int) string { return c.nodes[i].name }

// Index is the node named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, nd := range c.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// Up reports whether node i is running.
func (c *Cluster) Up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv != nil
}

// Kill shuts node i down (its store stays). Killing a node that is down does nothing.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// WipeStore deletes node i's JetStream store, as a lost disk would; the node must be down.
func (c *Cluster) WipeStore(i int) {
	c.t.Helper()
	if c.Up(i) {
		c.t.Fatalf("natstest: wiping the store of %s, which is running", c.nodes[i].name)
	}
	if err := os.RemoveAll(c.nodes[i].storeDir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(c.nodes[i].storeDir, 0o755); err != nil {
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
	nd := c.nodes[i]
	routes := make([]*url.URL, 0, len(c.nodes))
	for _, peer := range c.nodes {
		if peer != nd {
			routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", peer.clusterPort)})
		}
	}
	opts := &server.Options{
		ServerName: nd.name,
		Host:       "127.0.0.1",
		Port:       nd.clientPort,
		JetStream:  true,
		StoreDir:   nd.storeDir,
		// Limits, not allocations: enough for the streams' reservations on any disk.
		JetStreamMaxStore:  8 << 30,
		JetStreamMaxMemory: 256 << 20,
		Cluster:            server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: nd.clusterPort},
		Routes:             routes,
		NoLog:              true,
		NoSigs:             true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatalf("natstest: %s: %v", nd.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		c.t.Fatalf("natstest: %s not ready after %s", nd.name, readyTimeout)
	}
	c.mu.Lock()
	nd.srv = srv
	c.mu.Unlock()
}

// WaitMetaLeader waits until a running node is the JetStream meta leader and every running
// node knows it.
func (c *Cluster) WaitMetaLeader() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for {
		c.mu.Lock()
		leader, current := false, true
		for _, nd := range c.nodes {
			if nd.srv == nil {
				continue
			}
			leader = leader || nd.srv.JetStreamIsLeader()
			current = current && nd.srv.JetStreamIsCurrent()
		}
		c.mu.Unlock()
		if leader && current {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("natstest: no JetStream meta leader after %s", readyTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
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

package clusterproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/amqpopen"
	"github.com/warrenmq/warren/internal/jepsen"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// The harness runs each node of a 3-node cluster as a child process (this
// test binary, re-executed with WARREN_NODE_* set), on loopback, each
// with its own data directory, AMQP port and cluster port, so that a node
// can be killed with SIGKILL and restarted from its data.

// Timeouts of the waits, generous for a loaded 2-core machine.
const (
	startTimeout = 90 * time.Second
	waitTimeout  = 30 * time.Second
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("WARREN_NODE_DIR"); dir != "" {
		runNode(dir)
		return
	}
	os.Exit(m.Run())
}

func runNode(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	zerolog.TimeFieldFormat = "15:04:05.000" // to read against the test's log
	log := zerolog.New(f).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	cc := cluster.Config{
		NodeName: os.Getenv("WARREN_NODE_NAME"),
		Listen:   os.Getenv("WARREN_NODE_CLUSTER"),
		Seeds:    strings.Split(os.Getenv("WARREN_NODE_SEEDS"), ","),
		Secret:   "cluster-test-secret",
	}
	if j := os.Getenv("WARREN_NODE_JOIN"); j != "" {
		cc.Seeds, cc.Join = nil, j
	}
	srv, err := server.New(server.Config{
		Listen: os.Getenv("WARREN_NODE_ADDR"), DataDir: filepath.Join(dir, "data"), Log: &log,
		LoopbackUsers: []string{}, // guest from a network namespace's address
		Cluster:       cc,
	})
	if err != nil {
		fmt.Fprintln(f, "node:", err)
		os.Exit(2)
	}
	// SIGTERM stops the node cleanly, as cmd/warren's: Serve's shutdown
	// (procCluster.stopGracefully); SIGKILL (procCluster.kill) does not.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if a := os.Getenv("WARREN_NODE_MGMT"); a != "" {
		mg := mgmt.New(srv, mgmt.Options{Listen: a, Log: &log})
		if err := mg.Listen(); err != nil {
			fmt.Fprintln(f, "node: management:", err)
			os.Exit(2)
		}
		go mg.Serve(ctx)
	}
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintln(f, "node:", err)
		os.Exit(2)
	}
}

type node struct {
	i                                      int // index in procCluster.nodes
	name, dir, addr, clusterAddr, mgmtAddr string
	join                                   string // a cluster address to join through instead of the seeds
	cmd                                    *exec.Cmd
	exited                                 chan struct{}
	paused                                 bool
}

type procCluster struct {
	t     *testing.T
	nodes []*node
	seeds string
	net   *jepsen.Netns // nil: every node on 127.0.0.1
}

// uniqueAddr is a free port on 127.0.0.1 that no cluster of this process
// was given before.
func uniqueAddr(t *testing.T) string { return testaddr.Free(t) }

// newCluster starts n nodes on 127.0.0.1 with the same seeds, at once.
func newCluster(t *testing.T, n int) *procCluster { return startCluster(t, n, nil) }

// newNetnsCluster starts n nodes each in a network namespace of its own
// (jepsen.Netns), so that pairs of them can be partitioned; it skips the
// test where namespaces cannot be made (not root, no ip).
func newNetnsCluster(t *testing.T, n int) *procCluster {
	nn, err := jepsen.NewNetns(n)
	if err != nil {
		t.Skip("partitions need network namespaces: " + err.Error())
	}
	return startCluster(t, n, nn)
}

func startCluster(t *testing.T, n int, nn *jepsen.Netns) *procCluster {
	c := &procCluster{t: t, net: nn}
	var seeds []string
	for i := range n {
		nd := &node{i: i, name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		if nn != nil {
			// Each namespace has its own ports: RabbitMQ's.
			ip := nn.Addr(i)
			nd.addr, nd.clusterAddr, nd.mgmtAddr = ip+":5672", ip+":25672", ip+":15672"
		} else {
			nd.addr, nd.clusterAddr, nd.mgmtAddr = uniqueAddr(t), uniqueAddr(t), uniqueAddr(t)
		}
		c.nodes = append(c.nodes, nd)
		seeds = append(seeds, nd.clusterAddr)
	}
	c.seeds = strings.Join(seeds, ",")
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.kill(nd)
		}
		if t.Failed() {
			keep := os.Getenv("WARREN_TEST_LOGDIR")
			for _, nd := range c.nodes {
				b, _ := os.ReadFile(filepath.Join(nd.dir, "broker.log"))
				t.Logf("--- %s log (last 6000 bytes):\n%s", nd.name, tail(b, 6000))
				if keep != "" {
					keepLog(t, keep, nd.name, b)
				}
			}
		}
		if nn != nil {
			if err := nn.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		c.spawn(nd)
	}
	for _, nd := range c.nodes {
		wg.Go(func() { c.waitReady(nd) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return c
}

// keepLog writes a failed test's node log whole to dir (the harness
// prints only its end), as dir/TEST/NODE.log.
func keepLog(t *testing.T, dir, node string, b []byte) {
	sub := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Log(err)
		return
	}
	p := filepath.Join(sub, node+".log")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Log(err)
		return
	}
	t.Logf("--- %s log whole: %s", node, p)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (c *procCluster) spawn(nd *node) {
	var cmd *exec.Cmd
	if c.net != nil {
		cmd = c.net.Command(nd.i, os.Args[0], "-test.run=^$")
	} else {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), "WARREN_NODE_DIR="+nd.dir, "WARREN_NODE_ADDR="+nd.addr, "WARREN_NODE_NAME="+nd.name,
		"WARREN_NODE_CLUSTER="+nd.clusterAddr, "WARREN_NODE_SEEDS="+c.seeds, "WARREN_NODE_MGMT="+nd.mgmtAddr,
		"WARREN_NODE_JOIN="+nd.join)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	nd.cmd = cmd
	nd.exited = make(chan struct{})
	nd.paused = false
	go func() { cmd.Wait(); close(nd.exited) }()
}

// amqpConfig dials nd (inside its namespace when it has one).
func (c *procCluster) amqpConfig(nd *node) amqp091.Config {
	cfg := amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)}
	if c.net != nil {
		cfg.Dial = func(network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return c.net.Dial(ctx, nd.i, network, addr)
		}
	}
	return cfg
}

// connect dials nd once, without failing the test.
func (c *procCluster) connect(nd *node) (*amqp091.Connection, error) {
	return amqp091.DialConfig(c.url(nd), c.amqpConfig(nd))
}

// open dials nd and opens a channel, without failing the test; closing
// the connection closes the channel.
func (c *procCluster) open(nd *node) (*amqp091.Connection, *amqp091.Channel, error) {
	return amqpopen.Channel(func() (*amqp091.Connection, error) { return c.connect(nd) })
}

// waitReady waits until the node answers AMQP (its Listen returns once
// it has applied the metadata log up to its start).
func (c *procCluster) waitReady(nd *node) {
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := c.connect(nd)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-nd.exited:
			c.t.Errorf("node %s exited before it was ready", nd.name)
			return
		default:
		}
		if time.Now().After(deadline) {
			c.t.Errorf("node %s not ready after %v: %v", nd.name, startTimeout, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *procCluster) url(nd *node) string { return "amqp://guest:guest@" + nd.addr + "/" }

func (c *procCluster) kill(nd *node) {
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.exited
	nd.cmd = nil
}

func (c *procCluster) restart(nd *node) {
	c.spawn(nd)
	c.waitReady(nd)
	if c.t.Failed() {
		c.t.FailNow()
	}
}

func (c *procCluster) dial(nd *node) *amqp091.Connection {
	c.t.Helper()
	conn, err := c.connect(nd)
	if err != nil {
		c.t.Fatalf("dial %s: %v", nd.name, err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

func (c *procCluster) channel(nd *node) *amqp091.Channel {
	c.t.Helper()
	ch, err := c.dial(nd).Channel()
	if err != nil {
		c.t.Fatal(err)
	}
	return ch
}

// passive declares name passively on nd on a channel of its own.
func (c *procCluster) passive(nd *node, name string) (amqp091.Queue, error) {
	conn, ch, err := c.open(nd)
	if err != nil {
		return amqp091.Queue{}, err
	}
	defer conn.Close()
	return ch.QueueDeclarePassive(name, true, false, false, false, nil)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s (last: %s)", d, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func amqpCode(err error) (int, string) {
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Reason
	}
	return 0, fmt.Sprint(err)
}

// publishConfirmed publishes bodies persistent to the default exchange
// with key, with confirms, and returns which were acked and which nacked.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, key string, bodies []string) (acked, nacked []string) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(bodies)+1))
	for _, b := range bodies {
		if err := ch.Publish("", key, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(waitTimeout)
	for range bodies {
		select {
		case cf := <-confirms:
			if cf.Ack {
				acked = append(acked, bodies[cf.DeliveryTag-1])
			} else {
				nacked = append(nacked, bodies[cf.DeliveryTag-1])
			}
		case <-timeout:
			t.Fatalf("confirms: %d of %d after %v", len(acked)+len(nacked), len(bodies), waitTimeout)
		}
	}
	return acked, nacked
}

// consumeN takes n messages from q on ch (prefetch 10), acking each
// when ack, then cancels its consumer; it fails on a duplicate or a
// timeout.
func consumeN(t *testing.T, ch *amqp091.Channel, q string, n int, ack bool) map[string]amqp091.Delivery {
	t.Helper()
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("consumeN-%d", time.Now().UnixNano())
	ds, err := ch.Consume(q, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Cancel(tag, false)
	got := map[string]amqp091.Delivery{}
	timeout := time.After(waitTimeout)
	for len(got) < n {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("consumer closed after %d of %d", len(got), n)
			}
			if _, dup := got[string(d.Body)]; dup {
				t.Fatalf("%q delivered twice", d.Body)
			}
			got[string(d.Body)] = d
			if ack {
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
			}
		case <-timeout:
			t.Fatalf("consumed %d of %d after %v", len(got), n, waitTimeout)
		}
	}
	return got
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func mustContain(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !bytes.Contains([]byte(got), []byte(w)) {
			t.Fatalf("%q does not contain %q", got, w)
		}
	}
}

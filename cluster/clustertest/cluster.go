package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/cluster"
)

// Secret is the harness's cluster secret.
const Secret = "clustertest-secret"

// Cluster is N in-process nodes on 127.0.0.1 random ports, all seeds of
// one another, dialling through one Net. A node's stores (Raft's
// InmemStore for its log and votes, a file snapshot store in a temporary
// directory) outlive Stop, so Start again is a restart from stored
// state; Wipe throws them away.
type Cluster struct {
	t     testing.TB
	Net   *Net
	Nodes []*Slot
	// Timing is every node's (set before starting them); New sets a
	// short Probe so formation retries are quick.
	Timing cluster.Timing
	// Config, when set, adjusts a node's Config before each start.
	Config func(i int, c *cluster.Config)
	// Options, when set, adjusts a node's Options before each start.
	Options func(i int, o *cluster.Options)
}

// Slot is one node of a Cluster, running or not.
type Slot struct {
	Name string
	Addr string
	Log  *LogBuffer
	FSM  *FSM // the state machine of the node's current run

	mu   sync.Mutex
	node *cluster.Node
	ln   net.Listener // reserved until the first start

	logs, stable *raft.InmemStore
	snapDir      string
	wipes        int
}

// New reserves n nodes named n1..nN (not started). The cluster is
// stopped at the end of the test, and a failed test prints each node's
// log.
func New(t testing.TB, n int) *Cluster {
	c := &Cluster{t: t, Net: NewNet()}
	c.Timing.Probe = 200 * time.Millisecond
	dir := t.TempDir()
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &Slot{Name: fmt.Sprintf("n%d", i+1), Addr: ln.Addr().String(), ln: ln, Log: &LogBuffer{},
			snapDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))}
		s.logs, s.stable = raft.NewInmemStore(), raft.NewInmemStore()
		c.Net.Register(s.Name, s.Addr)
		c.Nodes = append(c.Nodes, s)
	}
	t.Cleanup(func() {
		for _, s := range c.Nodes {
			s.stop()
		}
		if t.Failed() {
			for _, s := range c.Nodes {
				t.Logf("log of %s:\n%s", s.Name, s.Log.String())
			}
		}
	})
	return c
}

// Seeds are every node's address.
func (c *Cluster) Seeds() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// NodeConfig is node i's Config: all nodes as seeds, the harness secret.
func (c *Cluster) NodeConfig(i int) cluster.Config {
	s := c.Nodes[i]
	cfg := cluster.Config{NodeName: s.Name, Listen: s.Addr, Seeds: c.Seeds(), Secret: Secret}
	if c.Config != nil {
		c.Config(i, &cfg)
	}
	return cfg
}

// Start starts node i (again, after Stop: from its stored state).
func (c *Cluster) Start(i int) *cluster.Node {
	c.t.Helper()
	n, err := c.TryStart(i)
	if err != nil {
		c.t.Fatalf("start %s: %v", c.Nodes[i].Name, err)
	}
	return n
}

// TryStart is Start returning the error.
func (c *Cluster) TryStart(i int) (*cluster.Node, error) {
	s := c.Nodes[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != nil {
		return s.node, nil
	}
	ln := s.ln
	s.ln = nil
	if ln == nil {
		var err error
		for try := 0; ; try++ { // the port was ours a moment ago
			if ln, err = net.Listen("tcp", s.Addr); err == nil || try == 50 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
	}
	log := zerolog.New(s.Log).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	fsm := &FSM{}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(s.snapDir, fmt.Sprint(s.wipes)), 2, io.Discard)
	if err != nil {
		ln.Close()
		return nil, err
	}
	logs, stable := s.logs, s.stable
	opts := cluster.Options{
		Log:      &log,
		Metadata: fsm,
		Timing:   c.Timing,
		Listener: ln,
		Dial:     c.Net.Dialer(s.Name),
		Storage: func(group string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
			return logs, stable, snaps, nil
		},
	}
	if c.Options != nil {
		c.Options(i, &opts)
	}
	n, err := cluster.Start(c.NodeConfig(i), opts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.node, s.FSM = n, fsm
	return n, nil
}

// Stop stops node i at once, as a process that dies; its stores stay.
func (c *Cluster) Stop(i int) { c.Nodes[i].stop() }

func (s *Slot) stop() {
	s.mu.Lock()
	n := s.node
	s.node = nil
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
	s.mu.Unlock()
	if n != nil {
		_ = n.Close()
	}
}

// Wipe throws away stopped node i's stores: its next start is a node
// with an empty data directory.
func (c *Cluster) Wipe(i int) {
	s := c.Nodes[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != nil {
		c.t.Fatalf("wipe %s: running", s.Name)
	}
	s.logs, s.stable = raft.NewInmemStore(), raft.NewInmemStore()
	s.wipes++
}

// Node is node i, nil when stopped.
func (c *Cluster) Node(i int) *cluster.Node {
	s := c.Nodes[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// Running are the indexes of the running nodes.
func (c *Cluster) Running() []int {
	var out []int
	for i := range c.Nodes {
		if c.Node(i) != nil {
			out = append(out, i)
		}
	}
	return out
}

// Index is the index of the node named name (-1: none).
func (c *Cluster) Index(name string) int {
	return slices.IndexFunc(c.Nodes, func(s *Slot) bool { return s.Name == name })
}

// WaitFor polls cond every 20 ms until it holds or timeout passes (then
// the test fails with what).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitLeader waits until every node of among (default: all running) sees
// the same leader, itself one of them, and returns its index.
func (c *Cluster) WaitLeader(timeout time.Duration, among ...int) int {
	c.t.Helper()
	if len(among) == 0 {
		among = c.Running()
	}
	leader := -1
	WaitFor(c.t, timeout, fmt.Sprintf("one leader among %v", c.names(among)), func() bool {
		name := ""
		for _, i := range among {
			n := c.Node(i)
			if n == nil {
				return false
			}
			l := n.Leader()
			if l == "" || (name != "" && l != name) {
				return false
			}
			name = l
		}
		leader = c.Index(name)
		return slices.Contains(among, leader) && c.Node(leader).IsLeader()
	})
	return leader
}

func (c *Cluster) names(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = c.Nodes[i].Name
	}
	return out
}

// WaitConverged waits until every node of among (default: all running)
// has applied the same commands, at least want of them, and returns them.
func (c *Cluster) WaitConverged(timeout time.Duration, want int, among ...int) []string {
	c.t.Helper()
	if len(among) == 0 {
		among = c.Running()
	}
	var got []string
	WaitFor(c.t, timeout, fmt.Sprintf("nodes %v apply the same %d+ commands", c.names(among), want), func() bool {
		var first []string
		for k, i := range among {
			cmds := c.Nodes[i].FSM.Commands()
			if k == 0 {
				first = cmds
			} else if !slices.Equal(first, cmds) {
				return false
			}
		}
		got = first
		return len(first) >= want
	})
	return got
}

// Propose proposes cmd on node i within timeout.
func (c *Cluster) Propose(i int, cmd string, timeout time.Duration) ([]byte, error) {
	n := c.Node(i)
	if n == nil {
		return nil, fmt.Errorf("%s is stopped", c.Nodes[i].Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.Propose(ctx, []byte(cmd))
}

// FSM is the harness's state machine: the list of commands applied, in
// order; a command's result is "<position>:<command>".
type FSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *FSM) Apply(index uint64, cmd []byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(cmd))
	return fmt.Appendf(nil, "%d:%s", len(f.cmds), cmd)
}

func (f *FSM) Snapshot() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(f.cmds)
}

func (f *FSM) Restore(b []byte) error {
	var cmds []string
	if err := json.Unmarshal(b, &cmds); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

// Commands are the commands applied so far (nil for a nil FSM).
func (f *FSM) Commands() []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

// LogBuffer is a node's log, safe for concurrent writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Contains reports whether the log has a line with every one of parts.
func (l *LogBuffer) Contains(parts ...string) bool {
	for line := range strings.SplitSeq(l.String(), "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

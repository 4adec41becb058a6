package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/clustertest"
)

// Timeouts of the waits: generous for a loaded 2-core machine; a healthy
// run takes a fraction of them.
const (
	formTimeout   = 20 * time.Second
	leaderTimeout = 20 * time.Second
	applyTimeout  = 20 * time.Second
)

// TestFormationStartOrders starts three nodes with the same seeds in each
// of the six orders, the next one only after the ones before it have
// tried to reach it: they form one cluster with no further command.
func TestFormationStartOrders(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			t.Parallel()
			c := clustertest.New(t, 3)
			for k, i := range order {
				c.Start(i)
				if k < 2 {
					// The started ones look for the others: wait until
					// they have dialled the next one's listener twice.
					next := c.Nodes[order[k+1]].Addr
					before := c.Net.Dials(next)
					clustertest.WaitFor(t, formTimeout, "a started node dials the next seed", func() bool {
						return c.Net.Dials(next) >= before+2
					})
					for _, j := range order[:k+1] {
						if c.Node(j).Bootstrapped() {
							t.Fatalf("%s bootstrapped before every seed was reachable", c.Nodes[j].Name)
						}
					}
				}
			}
			l := c.WaitLeader(leaderTimeout)
			// A node that joined knows the leader from its first
			// heartbeat, the configuration a moment later.
			clustertest.WaitFor(t, formTimeout, "every node sees three members, running", func() bool {
				for i := range c.Nodes {
					ms := c.Node(i).Members()
					if len(ms) != 3 {
						return false
					}
					for _, m := range ms {
						if !m.Running {
							return false
						}
					}
				}
				return true
			})
			if _, err := c.Propose(l, "x", applyTimeout); err != nil {
				t.Fatal(err)
			}
			c.WaitConverged(applyTimeout, 1)
		})
	}
}

// TestProposeFromEveryNode proposes from each node, concurrently; every
// node applies the same commands in the same order, and each Propose
// returns after its own node applied it, with the state machine's result.
func TestProposeFromEveryNode(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	c.WaitLeader(leaderTimeout)
	const per = 20
	errs := make(chan error, 3*per)
	for i := range c.Nodes {
		go func() {
			for k := range per {
				cmd := fmt.Sprintf("%s-%d", c.Nodes[i].Name, k)
				res, err := c.Propose(i, cmd, applyTimeout)
				if err == nil {
					// Applied here already: it is in this node's list at
					// the position the result names.
					var pos int
					var got string
					if _, e := fmt.Sscanf(string(res), "%d:%s", &pos, &got); e != nil || got != cmd {
						err = fmt.Errorf("result %q for %s", res, cmd)
					} else if cmds := c.Nodes[i].FSM.Commands(); len(cmds) < pos || cmds[pos-1] != cmd {
						err = fmt.Errorf("%s: Propose returned before %s applied it at %d", cmd, c.Nodes[i].Name, pos)
					}
				}
				errs <- err
			}
		}()
	}
	for range 3 * per {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cmds := c.WaitConverged(applyTimeout, 3*per)
	if len(cmds) != 3*per {
		t.Fatalf("%d commands applied, want %d", len(cmds), 3*per)
	}
	for i := range c.Nodes {
		for k := range per {
			if !slices.Contains(cmds, fmt.Sprintf("%s-%d", c.Nodes[i].Name, k)) {
				t.Fatalf("%s-%d missing", c.Nodes[i].Name, k)
			}
		}
	}
}

// TestLeaderKilled stops the leader: the others elect a new one within a
// few seconds (logged as the failover time) and proposals go on; the old
// leader restarts from its stored state and catches up.
func TestLeaderKilled(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	old := c.WaitLeader(leaderTimeout)
	if _, err := c.Propose(old, "before", applyTimeout); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(applyTimeout, 1)
	start := time.Now()
	c.Stop(old)
	nl := c.WaitLeader(leaderTimeout)
	t.Logf("failover: %s led again %v after %s stopped", c.Nodes[nl].Name, time.Since(start).Round(time.Millisecond), c.Nodes[old].Name)
	for _, i := range c.Running() {
		if _, err := c.Propose(i, "after-"+c.Nodes[i].Name, applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(applyTimeout, 3)
	clustertest.WaitFor(t, formTimeout, "the stopped leader is seen not running", func() bool {
		for _, m := range c.Node(nl).Members() {
			if m.Name == c.Nodes[old].Name {
				return !m.Running
			}
		}
		return false
	})
	c.Start(old)
	got := c.WaitConverged(applyTimeout, 3)
	if !c.Nodes[old].Log.Contains("restarted from its stored state") {
		t.Fatal("the old leader did not restart from its stored state")
	}
	if got[0] != "before" {
		t.Fatalf("commands %v", got)
	}
}

// TestMinorityPartition isolates the leader: it commits nothing (its
// Propose fails or times out) while the majority elects a new leader and
// commits; after the heal every node converges, without the isolated
// leader's command.
func TestMinorityPartition(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	old := c.WaitLeader(leaderTimeout)
	var rest []int
	var restNames []string
	for i := range c.Nodes {
		if i != old {
			rest = append(rest, i)
			restNames = append(restNames, c.Nodes[i].Name)
		}
	}
	c.Net.Partition([]string{c.Nodes[old].Name}, restNames)
	start := time.Now()
	res, err := c.Propose(old, "stale", 5*time.Second)
	if err == nil {
		t.Fatalf("the isolated leader committed a command: %q", res)
	}
	t.Logf("isolated leader's Propose: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	nl := c.WaitLeader(leaderTimeout, rest...)
	t.Logf("majority leader %s after %v", c.Nodes[nl].Name, time.Since(start).Round(time.Millisecond))
	for _, i := range rest {
		if _, err := c.Propose(i, "majority-"+c.Nodes[i].Name, applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(applyTimeout, 2, rest...)
	if c.Node(old).IsLeader() {
		t.Fatal("the isolated node still leads")
	}
	c.Net.Heal()
	got := c.WaitConverged(applyTimeout, 2)
	if slices.Contains(got, "stale") {
		t.Fatalf("the isolated leader's command was applied: %v", got)
	}
	if _, err := c.Propose(old, "healed", applyTimeout); err != nil {
		t.Fatal(err)
	}
	got = c.WaitConverged(applyTimeout, 3)
	if len(got) != 3 || slices.Contains(got, "stale") {
		t.Fatalf("commands %v", got)
	}
}

// TestWrongSecret: a node with another secret is refused, and both ends
// log the refusal; it forms nothing with the others.
func TestWrongSecret(t *testing.T) {
	c := clustertest.New(t, 3)
	c.Config = func(i int, cfg *cluster.Config) {
		if i == 2 {
			cfg.Secret = "not-the-secret"
		}
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	clustertest.WaitFor(t, formTimeout, "both ends log the refusal", func() bool {
		return c.Nodes[2].Log.Contains("cluster connection refused", "cluster secrets differ") &&
			c.Nodes[0].Log.Contains("cluster connection refused", "cluster secrets differ")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.Node(2).CallAddr(ctx, c.Nodes[0].Addr, "cluster.ping", nil)
	if !errors.Is(err, cluster.ErrRefused) {
		t.Fatalf("call with the wrong secret: %v", err)
	}
	for i := range c.Nodes {
		if c.Node(i).Bootstrapped() {
			t.Fatalf("%s bootstrapped without every seed", c.Nodes[i].Name)
		}
	}
}

// TestRPC: the RPC channel carries a method name and bytes each way; a
// handler's error and an unknown method come back as errors.
func TestRPC(t *testing.T) {
	c := clustertest.New(t, 2)
	c.Config = func(i int, cfg *cluster.Config) { cfg.Seeds = nil } // two lone nodes
	a, b := c.Start(0), c.Start(1)
	b.Handle("test.echo", func(_ context.Context, from string, req []byte) ([]byte, error) {
		return []byte(from + ":" + strings.ToUpper(string(req))), nil
	})
	b.Handle("test.fail", func(context.Context, string, []byte) ([]byte, error) {
		return nil, errors.New("it failed")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for k := range 3 { // pooled connections are reused
		res, err := a.CallAddr(ctx, b.Addr(), "test.echo", []byte(fmt.Sprint("hello", k)))
		if err != nil || string(res) != fmt.Sprintf("n1:HELLO%d", k) {
			t.Fatalf("echo: %q, %v", res, err)
		}
	}
	big := make([]byte, 1<<20)
	if res, err := a.CallAddr(ctx, b.Addr(), "test.echo", big); err != nil || len(res) != len(big)+3 {
		t.Fatalf("1 MiB echo: %d bytes, %v", len(res), err)
	}
	_, err := a.CallAddr(ctx, b.Addr(), "test.fail", nil)
	var re *cluster.RemoteError
	if !errors.As(err, &re) || re.Msg != "it failed" || re.Node != "n2" {
		t.Fatalf("failing handler: %v", err)
	}
	if _, err := a.CallAddr(ctx, b.Addr(), "test.nothing", nil); !errors.Is(err, cluster.ErrNoMethod) {
		t.Fatalf("unknown method: %v", err)
	}
	// A call cut off by the network ends at its context's deadline.
	c.Net.Drop("n1", "n2")
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := a.CallAddr(short, b.Addr(), "test.echo", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call over a dropped link: %v", err)
	}
	c.Net.Heal()
	if _, err := a.CallAddr(ctx, b.Addr(), "test.echo", nil); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	// A restarted peer: the pooled connection is dead, a new one is used.
	c.Stop(1)
	b = c.Start(1)
	b.Handle("test.echo", func(_ context.Context, from string, req []byte) ([]byte, error) { return req, nil })
	if res, err := a.CallAddr(ctx, b.Addr(), "test.echo", []byte("again")); err != nil || string(res) != "again" {
		t.Fatalf("after the peer restarted: %q, %v", res, err)
	}
}

// TestSlowLinkAndNoQuorum: a slow link to one follower does not hold
// commits back (the other follower makes the majority) and the slow one
// converges; with two of three nodes stopped the survivor commits
// nothing, and commits again once one is back.
func TestSlowLinkAndNoQuorum(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout)
	slow := (l + 1) % 3
	c.Net.Delay(c.Nodes[l].Name, c.Nodes[slow].Name, 300*time.Millisecond)
	c.Net.Delay(c.Nodes[slow].Name, c.Nodes[l].Name, 300*time.Millisecond)
	start := time.Now()
	for k := range 5 {
		if _, err := c.Propose(l, fmt.Sprint("slow-", k), applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*300*time.Millisecond {
		t.Errorf("5 proposals took %v over a majority without the slow link", d)
	}
	c.WaitConverged(applyTimeout, 5)
	c.Net.Heal()

	c.Stop(slow)
	c.Stop(l)
	survivor := 3 - l - slow
	_, err := c.Propose(survivor, "alone", 4*time.Second)
	if !errors.Is(err, cluster.ErrNoLeader) {
		t.Fatalf("Propose without a majority: %v, want ErrNoLeader", err)
	}
	t.Logf("Propose without a majority: %v", err)
	c.Start(l)
	nl := c.WaitLeader(leaderTimeout, survivor, l)
	if _, err := c.Propose(nl, "two-again", applyTimeout); err != nil {
		t.Fatal(err)
	}
	got := c.WaitConverged(applyTimeout, 6, survivor, l)
	if slices.Contains(got, "alone") {
		t.Fatalf("the command proposed without a majority was applied: %v", got)
	}
}

// TestRPCNotSentTwice: a call whose peer dies after its handler ran but
// before it answered fails, and not as NotSentError; it is not sent
// again, to the restarted peer or at all (a forwarded publish would be
// enqueued twice).
func TestRPCNotSentTwice(t *testing.T) {
	c := clustertest.New(t, 2)
	c.Config = func(i int, cfg *cluster.Config) { cfg.Seeds = nil }
	a, b := c.Start(0), c.Start(1)
	var runs atomic.Int32
	ran, release := make(chan struct{}, 1), make(chan struct{})
	count := func(context.Context, string, []byte) ([]byte, error) {
		if runs.Add(1) == 1 {
			ran <- struct{}{}
			<-release // the node's connections close before it answers
		}
		return []byte("ran"), nil
	}
	echo := func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil }
	b.Handle("test.echo", echo)
	b.Handle("test.count", count)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.CallAddr(ctx, b.Addr(), "test.echo", nil); err != nil { // a pooled connection
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.CallAddr(ctx, b.Addr(), "test.count", nil)
		done <- err
	}()
	<-ran
	// A call sent again waits for the restarted node (the link held)
	// and runs there.
	c.Net.Drop("n1", "n2")
	stopped := make(chan struct{})
	go func() { c.Stop(1); close(stopped) }()
	var err error
	answered := false
	select {
	case err = <-done:
		answered = true
	case <-time.After(5 * time.Second):
		t.Error("the call did not fail when its peer's connection closed: sent again?")
	}
	close(release)
	<-stopped
	b = c.Start(1)
	b.Handle("test.echo", echo)
	b.Handle("test.count", count)
	c.Net.Heal()
	if !answered {
		err = <-done
	}
	var ns *cluster.NotSentError
	if err == nil || errors.As(err, &ns) {
		// Not sent is what a caller may safely send elsewhere: false.
		t.Errorf("a call whose peer died before it answered: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
	if res, err := a.CallAddr(ctx, b.Addr(), "test.echo", []byte("x")); err != nil || string(res) != "x" {
		t.Fatalf("a call after the restart: %q, %v", res, err)
	}
}

// TestPeerRestarted: a peer's new process is told once, before any RPC
// of it is served, whichever way the first connection goes; the first
// sight of a peer and a peer's same process are not.
func TestPeerRestarted(t *testing.T) {
	c := clustertest.New(t, 2)
	c.Config = func(i int, cfg *cluster.Config) { cfg.Seeds = nil }
	var mu sync.Mutex
	var told []string // "<node> told <peer>"
	c.Options = func(i int, o *cluster.Options) {
		self := c.Nodes[i].Name
		o.PeerRestarted = func(node string) {
			mu.Lock()
			told = append(told, self+" told "+node)
			mu.Unlock()
		}
	}
	toldList := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	a, b := c.Start(0), c.Start(1)
	// What a's handler sees of the hook when the new process calls.
	var seen []string
	a.Handle("test.seen", func(context.Context, string, []byte) ([]byte, error) {
		got := toldList()
		mu.Lock()
		seen = got
		mu.Unlock()
		return nil, nil
	})
	echo := func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil }
	b.Handle("test.echo", echo)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if _, err := a.CallAddr(ctx, b.Addr(), "test.echo", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CallAddr(ctx, a.Addr(), "test.seen", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := toldList(); len(got) != 0 {
		t.Fatalf("told of a restart that was none: %v", got)
	}
	c.Stop(1)
	b = c.Start(1)
	// The new process calls first: a is told before it serves the call.
	if _, err := b.CallAddr(ctx, a.Addr(), "test.seen", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	firstSeen := seen
	mu.Unlock()
	if !slices.Equal(firstSeen, []string{"n1 told n2"}) {
		t.Fatalf("when the new process's first call was served: %v", firstSeen)
	}
	b.Handle("test.echo", echo)
	if _, err := a.CallAddr(ctx, b.Addr(), "test.echo", nil); err != nil {
		t.Fatal(err)
	}
	// a restarts and calls first this time: b is told when a's
	// connection arrives.
	c.Stop(0)
	a = c.Start(0)
	if _, err := a.CallAddr(ctx, b.Addr(), "test.echo", nil); err != nil {
		t.Fatal(err)
	}
	if got := toldList(); !slices.Equal(got, []string{"n1 told n2", "n2 told n1"}) {
		t.Fatalf("told: %v", got)
	}
}

// A peer's new process runs for a node as soon as a handshake with it
// completes, not at the next probe round (once an hour here): a node
// restarted fast has its clients' requests (a consumer's attach) reach
// the others over such connections, and they must not take it for down
// then.
func TestRestartedPeerRunsAtHandshake(t *testing.T) {
	c := clustertest.New(t, 3)
	c.Timing.Probe = time.Hour
	for i := range 3 {
		c.Start(i)
	}
	c.WaitLeader(30 * time.Second)
	c.Stop(2)
	clustertest.WaitFor(t, 20*time.Second, "n1 finds n3 gone", func() bool { return c.Node(0).KnownDown("n3") })
	if c.Node(0).Running("n3") {
		t.Fatal("n3 running for n1 after it was found gone")
	}
	c.Start(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Node(2).CallAddr(ctx, c.Node(0).Addr(), "cluster.ping", nil); err != nil {
		t.Fatal(err)
	}
	if !c.Node(0).Running("n3") || c.Node(0).KnownDown("n3") {
		t.Fatalf("after the new n3's call: running %v, known down %v; want running", c.Node(0).Running("n3"), c.Node(0).KnownDown("n3"))
	}
	for _, m := range c.Node(0).Members() {
		if m.Name == "n3" && !m.Running {
			t.Fatal("n1's Members has n3 not running after its new process's call")
		}
	}
}

// TestPeerLost: a node whose process is gone (its connections end, its
// listener refuses) is lost at once to the others: Options.PeerLost is
// called on each, once (the probes never call it), and they no longer
// count it running; Options.PeerDown is not called for it (the probes
// find it down after PeerLost). Nothing is lost while every node runs.
func TestPeerLost(t *testing.T) {
	c := clustertest.New(t, 3)
	var mu sync.Mutex
	lost := map[string][]string{} // node -> the peers it was told of
	var downs []string
	c.Options = func(i int, o *cluster.Options) {
		self := c.Nodes[i].Name
		o.PeerLost = func(node string) {
			mu.Lock()
			lost[self] = append(lost[self], node)
			mu.Unlock()
		}
		o.PeerDown = func(node string) {
			mu.Lock()
			downs = append(downs, self+" told "+node+" is down")
			mu.Unlock()
		}
	}
	told := func(node string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lost[node])
	}
	for i := range 3 {
		c.Start(i)
	}
	for i := range 3 {
		// Not heard from yet, or running: not known down.
		if c.Node(i).KnownDown("n1") || c.Node(i).KnownDown("n2") || c.Node(i).KnownDown("n3") {
			t.Fatalf("n%d knows a node down as the three start", i+1)
		}
	}
	c.WaitLeader(30 * time.Second)
	clustertest.WaitFor(t, 20*time.Second, "every node sees the three running", func() bool {
		for i := range 3 {
			// A node that has not got the configuration yet lists
			// no members at all.
			ms := c.Node(i).Members()
			if len(ms) != 3 {
				return false
			}
			for _, m := range ms {
				if !m.Running {
					return false
				}
			}
		}
		return true
	})
	for _, s := range c.Nodes {
		if got := told(s.Name); len(got) != 0 {
			t.Fatalf("%s told of lost nodes while all run: %v", s.Name, got)
		}
	}
	c.Stop(2)
	// Told of n3 alone (a node stopping cleanly may answer a probe on a
	// connection it still serves after its listener closed, and be told
	// of again when that one ends).
	onlyN3 := func(got []string) bool {
		return len(got) > 0 && !slices.ContainsFunc(got, func(n string) bool { return n != "n3" })
	}
	clustertest.WaitFor(t, 20*time.Second, "n1 and n2 told that n3 is lost", func() bool {
		return onlyN3(told("n1")) && onlyN3(told("n2"))
	})
	clustertest.WaitFor(t, 20*time.Second, "n3 not running for n1 and n2", func() bool {
		for _, i := range []int{0, 1} {
			for _, m := range c.Node(i).Members() {
				if m.Name == "n3" && m.Running {
					return false
				}
			}
		}
		return true
	})
	c.WaitLeader(30*time.Second, 0, 1)
	if !c.Node(0).KnownDown("n3") || !c.Node(1).KnownDown("n3") || c.Node(0).KnownDown("n2") {
		t.Fatal("KnownDown disagrees: n3 is gone, n1 and n2 run")
	}
	if got := told("n1"); !onlyN3(got) {
		t.Fatalf("n1 told %v, want n3 alone", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(downs) > 0 {
		t.Fatalf("PeerDown called for a lost node: %v", downs)
	}
}

// TestPeerRefusingProbeLost: a running member whose listener refuses a
// probe (a node stopping cleanly that answered one more probe on a
// connection it still served after its listener closed, then went) is
// lost, as one found by its connections ending: Options.PeerLost is
// called for it, never PeerDown, which is for a member that hangs. The
// observer is a follower, so it holds no Raft link to the member whose
// end would tell it first.
func TestPeerRefusingProbeLost(t *testing.T) {
	c := clustertest.New(t, 3)
	var mu sync.Mutex
	var lost, downs []string
	refuse := map[string]bool{} // addresses the observer's dials are refused
	var dialled []net.Conn      // the observer's connections, to close
	obs := -1
	c.Options = func(i int, o *cluster.Options) {
		self := c.Nodes[i].Name
		dial := o.Dial
		o.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			if i == obs && refuse[addr] {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			}
			conn, err := dial(ctx, addr)
			if err == nil {
				dialled = append(dialled, conn)
			}
			return conn, err
		}
		o.PeerLost = func(node string) {
			mu.Lock()
			if i == obs {
				lost = append(lost, node)
			}
			mu.Unlock()
		}
		o.PeerDown = func(node string) {
			mu.Lock()
			downs = append(downs, self+" told "+node+" is down")
			mu.Unlock()
		}
	}
	for i := range 3 {
		c.Start(i)
	}
	leader := c.WaitLeader(leaderTimeout)
	var others []int
	for i := range 3 {
		if i != leader {
			others = append(others, i)
		}
	}
	o, target := others[0], others[1]
	name := c.Nodes[target].Name
	clustertest.WaitFor(t, 20*time.Second, "the observer sees the target running", func() bool {
		return c.Node(o).Running(name)
	})
	mu.Lock()
	obs = o
	refuse[c.NodeConfig(target).Listen] = true
	for _, conn := range dialled {
		if conn.RemoteAddr().String() == c.NodeConfig(target).Listen {
			conn.Close() // its pooled probe connection: the next probe dials
		}
	}
	mu.Unlock()
	clustertest.WaitFor(t, 20*time.Second, "the observer told the target is lost", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(lost, name)
	})
	if !c.Node(o).KnownDown(name) || c.Node(o).Running(name) {
		t.Fatal("a lost member is running or not known down")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(downs) > 0 {
		t.Fatalf("PeerDown called for a member whose listener refuses: %v", downs)
	}
}

// TestPeerDown: a node cut off from the others (it runs, nothing reaches
// it) is found down by their probes: Options.PeerDown is called on each
// of them with its name, and on it with theirs; Running tells who
// answers, KnownDown who does not. Healed, each counts the others running
// again.
func TestPeerDown(t *testing.T) {
	c := clustertest.New(t, 3)
	var mu sync.Mutex
	downs := map[string][]string{} // node -> the peers it was told are down
	c.Options = func(i int, o *cluster.Options) {
		self := c.Nodes[i].Name
		o.PeerDown = func(node string) {
			mu.Lock()
			downs[self] = append(downs[self], node)
			mu.Unlock()
		}
	}
	told := func(node string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(downs[node]))
	}
	for i := range 3 {
		c.Start(i)
	}
	c.WaitLeader(leaderTimeout)
	running := func(i int, names ...string) bool {
		for _, n := range names {
			if !c.Node(i).Running(n) {
				return false
			}
		}
		return true
	}
	clustertest.WaitFor(t, 20*time.Second, "every node sees the three running", func() bool {
		return running(0, "n1", "n2", "n3") && running(1, "n1", "n2", "n3") && running(2, "n1", "n2", "n3")
	})
	c.Net.Partition([]string{"n3"}, []string{"n1", "n2"})
	clustertest.WaitFor(t, 20*time.Second, "n1 and n2 told n3 is down, n3 told both are", func() bool {
		return slices.Equal(told("n1"), []string{"n3"}) && slices.Equal(told("n2"), []string{"n3"}) &&
			slices.Equal(told("n3"), []string{"n1", "n2"})
	})
	if running(0, "n3") || running(1, "n3") || running(2, "n1") || running(2, "n2") || !running(0, "n1", "n2") || !running(2, "n3") {
		t.Fatal("Running disagrees with the partition")
	}
	if !c.Node(0).KnownDown("n3") || !c.Node(2).KnownDown("n1") || c.Node(0).KnownDown("n2") || c.Node(2).KnownDown("n3") {
		t.Fatal("KnownDown disagrees with the partition")
	}
	c.Net.Heal()
	clustertest.WaitFor(t, 20*time.Second, "every node sees the three running again", func() bool {
		return running(0, "n1", "n2", "n3") && running(1, "n1", "n2", "n3") && running(2, "n1", "n2", "n3")
	})
	if c.Node(0).KnownDown("n3") || c.Node(2).KnownDown("n1") {
		t.Fatal("KnownDown: a healed node still down")
	}
	for _, n := range []string{"n1", "n2"} {
		if got := told(n); !slices.Equal(got, []string{"n3"}) {
			t.Fatalf("%s told %v are down, want n3 once", n, got)
		}
	}
}

// TestMetadataNudge: a command the leader applied reaches the other
// nodes' state machines without raft's next AppendEntries of nothing (a
// commit timeout of an hour here): the leader nudges them with a
// barrier. Each command is the last one for a while, the case the nudge
// is for.
func TestMetadataNudge(t *testing.T) {
	c := clustertest.New(t, 3)
	c.Timing.CommitTimeout = time.Hour
	for i := range c.Nodes {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout)
	for k := range 3 {
		if _, err := c.Propose(l, fmt.Sprint("cmd-", k), applyTimeout); err != nil {
			t.Fatal(err)
		}
		if cmds := c.WaitConverged(applyTimeout, k+1); len(cmds) != k+1 {
			t.Fatalf("%d commands applied, want %d", len(cmds), k+1)
		}
	}
}

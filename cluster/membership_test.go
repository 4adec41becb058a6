package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/clustertest"
)

// firstThree makes nodes 0-2 the seeds of a 4-slot cluster; node 3 joins
// through join(), or presents other TLS files.
func firstThree(c *clustertest.Cluster, join func() string) {
	seeds := c.Seeds()[:3]
	c.Config = func(i int, cfg *cluster.Config) {
		cfg.Seeds = seeds
		if i == 3 {
			cfg.Seeds, cfg.Join = nil, join()
		}
	}
}

// TestTLS forms a cluster over mutual TLS; a node whose certificate is
// from another CA is refused by the TLS handshake, logged on both ends.
func TestTLS(t *testing.T) {
	c := clustertest.New(t, 4)
	ca, other := clustertest.NewCA(t, "cluster"), clustertest.NewCA(t, "other")
	firstThree(c, func() string { return c.Nodes[0].Addr })
	base := c.Config
	c.Config = func(i int, cfg *cluster.Config) {
		base(i, cfg)
		if i < 3 {
			cfg.TLS = ca.Node(c.Nodes[i].Name)
		} else {
			cfg.TLS = other.Node(c.Nodes[i].Name)
			cfg.TLS.CA = ca.File // it trusts the cluster, the cluster does not trust it
		}
	}
	for i := range 3 {
		c.Start(i)
	}
	c.WaitLeader(leaderTimeout)
	for i := range 3 {
		if _, err := c.Propose(i, fmt.Sprint("tls-", i), applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(applyTimeout, 3)
	if !c.Nodes[0].Log.Contains(`"tls":true`, "cluster node started") {
		t.Fatal("n1 did not start with TLS")
	}
	c.Start(3)
	clustertest.WaitFor(t, formTimeout, "both ends log the refused TLS handshake", func() bool {
		return c.Nodes[3].Log.Contains("TLS handshake failed") && c.Nodes[0].Log.Contains("TLS handshake failed")
	})
	if n := len(c.Node(0).Members()); n != 3 {
		t.Fatalf("%d members after an untrusted node tried to join", n)
	}
}

// TestJoin adds a fourth node through a follower (which forwards to the
// leader): it becomes a voter, gets the state, and proposes.
func TestJoin(t *testing.T) {
	c := clustertest.New(t, 4)
	var through string
	firstThree(c, func() string { return through })
	for i := range 3 {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout, 0, 1, 2)
	for i := range 5 {
		if _, err := c.Propose(l, fmt.Sprint("early-", i), applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	through = c.Nodes[(l+1)%3].Addr
	c.Start(3)
	clustertest.WaitFor(t, formTimeout, "every node lists n4 as a running voter", func() bool {
		for i := range 4 {
			ms := c.Node(i).Members()
			k := slices.IndexFunc(ms, func(m cluster.Member) bool { return m.Name == "n4" })
			if k < 0 || !ms[k].Voter || !ms[k].Running || len(ms) != 4 {
				return false
			}
		}
		return true
	})
	if _, err := c.Propose(3, "from-n4", applyTimeout); err != nil {
		t.Fatal(err)
	}
	got := c.WaitConverged(applyTimeout, 6)
	if got[0] != "early-0" || got[5] != "from-n4" {
		t.Fatalf("commands %v", got)
	}
	if !c.Nodes[3].Log.Contains("cluster joined", through) {
		t.Fatal("n4 did not log its join")
	}
}

// TestWipeAndRejoin wipes a follower's storage after the leader compacted
// its log: the node starts with no state, finds its seeds in a cluster,
// joins, and gets the state as a snapshot install.
func TestWipeAndRejoin(t *testing.T) {
	c := clustertest.New(t, 3)
	c.Timing.TrailingLogs = 2
	for i := range c.Nodes {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout)
	for i := range 10 {
		if _, err := c.Propose(l, fmt.Sprint("a", i), applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(applyTimeout, 10)
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	if err := c.Node(l).Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % 3
	c.Stop(f)
	c.Wipe(f)
	for i := range 3 {
		if _, err := c.Propose(l, fmt.Sprint("b", i), applyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	c.Start(f)
	got := c.WaitConverged(applyTimeout, 13)
	if len(got) != 13 || got[0] != "a0" || got[12] != "b2" {
		t.Fatalf("commands %v", got)
	}
	if !c.Nodes[f].Log.Contains("Installed remote snapshot") {
		t.Fatal("the wiped node did not install a snapshot")
	}
	if !c.Nodes[f].Log.Contains("cluster joined") {
		t.Fatal("the wiped node did not join (it bootstrapped?)")
	}
	if _, err := c.Propose(f, "from-wiped", applyTimeout); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(applyTimeout, 14)
}

// TestWatchAndRemove watches a follower while the leader dies: it sees
// the leader go and a new one come, the dead member go down; removing it
// (from a follower, forwarded to the leader) takes it out of Members.
func TestWatchAndRemove(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout)
	w := (l + 1) % 3
	clustertest.WaitFor(t, formTimeout, "all running", func() bool {
		for _, m := range c.Node(w).Members() {
			if !m.Running {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Node(w).Watch(ctx)
	dead := c.Nodes[l].Name
	c.Stop(l)
	// The watcher hears the dead member go down: a MemberDown, or (when
	// w's configuration was replaced while it caught up, which a fast
	// election right after formation can do) a MemberAdded with no
	// MemberUp after it; either way w's Members agree.
	var newLeader string
	var heardDown bool
	deadRunning := func() bool {
		for _, m := range c.Node(w).Members() {
			if m.Name == dead {
				return m.Running
			}
		}
		return false
	}
	deadline := time.After(leaderTimeout)
	for newLeader == "" || !heardDown || deadRunning() {
		select {
		case e := <-events:
			t.Logf("event %s %s", e.Kind, e.Node)
			if e.Kind == cluster.LeaderChanged && e.Node != "" && e.Node != dead {
				newLeader = e.Node
			}
			if e.Node == dead {
				switch e.Kind {
				case cluster.MemberDown, cluster.MemberAdded:
					heardDown = true
				case cluster.MemberUp:
					heardDown = false
				}
			}
		case <-time.After(50 * time.Millisecond):
			// Members may lag the events: look again.
		case <-deadline:
			t.Fatalf("events seen: new leader %q, dead member heard down %v, running in Members %v", newLeader, heardDown, deadRunning())
		}
	}
	rctx, rcancel := context.WithTimeout(context.Background(), applyTimeout)
	defer rcancel()
	other := 3 - l - w // the third node: a follower or the new leader
	if err := c.Node(other).Remove(rctx, dead); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, formTimeout, "the removed member leaves Members and the watcher hears it", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == cluster.MemberRemoved && e.Node == dead {
					return len(c.Node(w).Members()) == 2
				}
				continue
			default:
			}
			return false
		}
	})
	if err := c.Node(w).Remove(rctx, "nobody"); err == nil {
		t.Fatal("removing an unknown node succeeded")
	}
	if _, err := c.Propose(w, "after-remove", applyTimeout); err != nil {
		t.Fatal(err)
	}
}

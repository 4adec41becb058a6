package cluster_test

import (
	"bytes"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/clustertest"
)

// longTiming makes raft's own elections take a minute or more: longer
// than the tests' waits, so that a leader elected within them was elected
// by the restarted members' questions (standAfterRestart).
func longTiming(c *clustertest.Cluster) {
	c.Timing.HeartbeatTimeout = time.Minute
	c.Timing.ElectionTimeout = time.Minute
	c.Timing.LeaderLeaseTimeout = time.Minute
}

// startWithOne starts a 3-node cluster, has its leader commit "before",
// and returns the cluster and the leader once every node applied it.
func startWithOne(t *testing.T) (*clustertest.Cluster, int) {
	t.Helper()
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	l := c.WaitLeader(leaderTimeout)
	if _, err := c.Propose(l, "before", applyTimeout); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(applyTimeout, 1)
	return c, l
}

// A whole cluster restarted elects its metadata leader without waiting
// for raft's heartbeat timeout, and commits again.
func TestWholeRestartElects(t *testing.T) {
	c, l := startWithOne(t)
	for i := range c.Nodes {
		c.Stop(i)
	}
	longTiming(c)
	for i := range c.Nodes {
		c.Start(i)
	}
	l = c.WaitLeader(leaderTimeout)
	if !c.Nodes[l].Log.Contains("standing for election") {
		t.Fatalf("%s leads, but did not say it stood after the restart", c.Nodes[l].Name)
	}
	if _, err := c.Propose(l, "after", applyTimeout); err != nil {
		t.Fatal(err)
	}
	if got := c.WaitConverged(applyTimeout, 2); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("commands after the restart: %v", got)
	}
}

// A member restarted alone does not stand while the others know their
// leader, although the leader's messages do not reach it for a while
// and its log is as up to date as theirs (it is the first in name order
// of the followers): the leader keeps leading, with no election.
func TestRestartedMemberLeavesLeader(t *testing.T) {
	c, l := startWithOne(t)
	var followers []int
	for i := range c.Nodes {
		if i != l {
			followers = append(followers, i)
		}
	}
	f, other := followers[0], followers[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []<-chan cluster.Event
	for _, i := range []int{l, other} {
		events = append(events, c.Node(i).Watch(ctx))
	}
	var asked atomic.Int64
	c.Node(other).CountCalls("cluster.view", &asked)

	c.Stop(f)
	longTiming(c)
	c.Net.Drop(c.Nodes[l].Name, c.Nodes[f].Name)
	c.Start(f)
	clustertest.WaitFor(t, applyTimeout, "three questions from the restarted member", func() bool { return asked.Load() >= 3 })
	if got := c.Node(f).Leader(); got != "" {
		t.Fatalf("%s knows leader %q while the leader's messages to it are dropped", c.Nodes[f].Name, got)
	}
	c.Net.Heal()
	clustertest.WaitFor(t, applyTimeout, "the restarted member follows the leader", func() bool {
		return c.Node(f).Leader() == c.Nodes[l].Name
	})
	if _, err := c.Propose(f, "after", applyTimeout); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(applyTimeout, 2)
	for _, ch := range events {
		for len(ch) > 0 {
			if e := <-ch; e.Kind == cluster.LeaderChanged {
				t.Fatalf("leader changed to %q after a member restarted alone", e.Node)
			}
		}
	}
	if c.Nodes[f].Log.Contains("standing for election") {
		t.Fatal("the member restarted alone stood for election")
	}
}

// Views travel as they are; a length that is no list of views is
// refused.
func TestViewsCodec(t *testing.T) {
	vs := []cluster.View{
		{},
		{Open: true, LastTerm: 3, LastIndex: 1<<64 - 1},
		{Open: true, Leader: true, LastTerm: 7, LastIndex: 12},
		{Open: true, Asking: true, LastTerm: 7, LastIndex: 12},
	}
	b := cluster.EncodeViews(vs)
	got, err := cluster.DecodeViews(b)
	if err != nil || !slices.Equal(got, vs) {
		t.Fatalf("%+v came back as %+v (%v)", vs, got, err)
	}
	if _, err := cluster.DecodeViews(bytes.Repeat([]byte{1}, 16)); err == nil {
		t.Fatal("16 bytes decoded as views")
	}
}

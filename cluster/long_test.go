//go:build clusterlong

package cluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/clustertest"
)

// TestLateSeedMinutes: two seeds wait two minutes for the third, never
// bootstrapping without it, and the three form a cluster once it starts.
func TestLateSeedMinutes(t *testing.T) {
	c := clustertest.New(t, 3)
	c.Start(0)
	c.Start(1)
	until := time.Now().Add(2 * time.Minute)
	for time.Now().Before(until) {
		for i := range 2 {
			if c.Node(i).Bootstrapped() {
				t.Fatalf("%s bootstrapped without the third seed", c.Nodes[i].Name)
			}
		}
		time.Sleep(time.Second)
	}
	c.Start(2)
	l := c.WaitLeader(leaderTimeout)
	if _, err := c.Propose(l, "late", applyTimeout); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(applyTimeout, 1)
}

// TestFailoverRounds kills the leader ten times (restarting it each time
// from its stored state) and reports the failover times.
func TestFailoverRounds(t *testing.T) {
	c := clustertest.New(t, 3)
	for i := range c.Nodes {
		c.Start(i)
	}
	var times []time.Duration
	for round := range 10 {
		l := c.WaitLeader(leaderTimeout)
		start := time.Now()
		c.Stop(l)
		nl := c.WaitLeader(leaderTimeout)
		times = append(times, time.Since(start))
		if _, err := c.Propose(nl, fmt.Sprint("round-", round), applyTimeout); err != nil {
			t.Fatal(err)
		}
		c.Start(l)
		c.WaitConverged(applyTimeout, round+1)
	}
	slices.Sort(times)
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	t.Logf("failover over %d rounds: min %v, median %v, max %v, mean %v", len(times), times[0], times[len(times)/2], times[len(times)-1], sum/time.Duration(len(times)))
}

package clusterproc

import (
	"fmt"
	"testing"
	"time"
)

// A node that was down for a while catches up with the metadata log (and
// serves) within seconds of its restart. Raft's leader backs off on a
// follower that fails, up to 10 s between attempts after a dozen failures
// (hashicorp/raft's replicateTo); the cluster's transport keeps a dead
// follower's failures from piling up (cluster.GroupTransport), so the
// returning node is not left waiting out that backoff. Without it the
// node served 5.9, 6.1, 9.1 and 9.6 s after its restart (the phase of
// the 10 s backoff decides); with it 0.8 to 2.0 s.
func TestCatchUpAfterDowntime(t *testing.T) {
	c := newCluster(t, 3)
	n1, n3 := c.nodes[0], c.nodes[2]
	c.kill(n3)
	ch := c.channel(n1)
	// Down long enough for the backoff to reach its cap, with
	// declarations for the node to catch up on meanwhile.
	down := time.Now()
	for i := 0; time.Since(down) < 25*time.Second; i++ {
		if _, err := ch.QueueDeclare(fmt.Sprintf("while-down-%d", i), true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	start := time.Now()
	c.restart(n3)
	took := time.Since(start)
	t.Logf("n3 caught up and served %v after its restart", took)
	if _, err := c.passive(n3, "while-down-0"); err != nil {
		t.Fatalf("n3 after its restart: %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("n3 took %v to catch up after 25 s down; want under 5 s", took)
	}
}

package quorum_test

import (
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/quorum"
)

// Every replica's Stats count the group's consumers, on every node, the
// waiting ones of a single active consumer too (the management API's
// figure: rabbit_fifo's query_consumer_count), not only its own node's.
func TestReplicatedStatsCountEveryNodesConsumers(t *testing.T) {
	r := newReplicas(t, "a", "b", "c")
	p := quorum.Placement{Group: 1<<62 | 32, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "sac", Durable: true}
	limits := replLimits
	limits.SingleActive = true
	qs := newMembers(t, r, p, decl, limits)
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	recs := map[string]*queuetest.Recorder{}
	for _, n := range []string{"b", "c"} {
		recs[n] = queuetest.NewRecorder(100, false)
		if err := qs[n].AddConsumer(queue.ConsumeOptions{Tag: n, Consumer: recs[n], Prefetch: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range r.names {
		waitUntil(t, "2 consumers in "+n+"'s stats", func() bool { return qs[n].Stats().Consumers == 2 })
	}
	// declare-ok's figure still counts the active one only.
	if _, c := qs["a"].Counts(); c != 1 {
		t.Fatalf("Counts on a: %d consumers, want 1 (the active one)", c)
	}
	qs["b"].RemoveConsumer("b", recs["b"])
	for _, n := range r.names {
		waitUntil(t, "1 consumer in "+n+"'s stats", func() bool { return qs[n].Stats().Consumers == 1 })
	}
}

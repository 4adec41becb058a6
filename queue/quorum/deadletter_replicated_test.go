package quorum_test

import (
	"sync"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// A message a replicated queue dead-letters is handed to the DeadLetter
// hook once in the group, by the leader (RabbitMQ's rabbit_fifo effects
// run on the leader only), not once by every replica applying the entry.
func TestReplicatedDeadLetterOnce(t *testing.T) {
	r := newReplicas(t, "a", "b", "c")
	p := quorum.Placement{Group: 1<<62 | 31, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "dl", Durable: true}
	limits := replLimits
	limits.HasDLX, limits.DeadLetterExchange = true, ""
	limits.DeadLetterRoutingKey, limits.HasDLRK = "dlq", true
	var mu sync.Mutex
	calls := map[string]int{}
	qs := map[string]*quorum.Queue{}
	for _, node := range r.names {
		hooks := queue.Hooks{DeadLetter: func(_ queue.Queue, dead []queue.Dead) {
			mu.Lock()
			calls[node] += len(dead)
			mu.Unlock()
		}}
		q, err := r.typ(node).NewMember(decl, limits, hooks, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[node] = q
	}
	if err := qs["a"].Sync(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	publishWait(t, qs["b"], "m")
	waitUntil(t, "on c", func() bool { return qs["c"].Stats().Ready == 1 })
	e, _, ok := qs["c"].Get(false)
	if !ok {
		t.Fatal("get on c: nothing")
	}
	qs["c"].Settle([]queue.Entry{e}, queue.Reject)
	// Every replica applied the reject: then a publish after it.
	publishWait(t, qs["b"], "after")
	for _, n := range r.names {
		waitUntil(t, "the reject and the publish applied on "+n, func() bool {
			st := qs[n].Stats()
			return st.Ready == 1 && st.Unacked == 0
		})
	}
	waitUntil(t, "dead-lettered", func() bool { mu.Lock(); defer mu.Unlock(); return calls["a"] > 0 })
	mu.Lock()
	defer mu.Unlock()
	if calls["a"] != 1 || calls["b"] != 0 || calls["c"] != 0 {
		t.Fatalf("dead-lettered %v, want once, by the leader a", calls)
	}
}

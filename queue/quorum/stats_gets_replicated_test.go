package quorum_test

import (
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// A message basic.get took unsettled counts as a consumer, on every
// replica, in declare-ok's figure and the management API's, until it is
// settled: rabbit_fifo checks it out to a consumer of its own (lifetime
// once), and RabbitMQ 3.10 answers a passive declare with consumers=1
// while a basic.get's delivery is unacknowledged. A no-ack get counts
// nothing.
func TestReplicatedUnsettledGetCountsAsConsumer(t *testing.T) {
	r := newReplicas(t, "a", "b", "c")
	p := quorum.Placement{Group: 1<<62 | 33, Members: []string{"a", "b", "c"}, Leader: "a"}
	qs := newMembers(t, r, p, queue.Decl{VHost: "/", Name: "gets", Durable: true}, replLimits)
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	for _, b := range []string{"1", "2", "3"} {
		publishWait(t, qs["a"], b)
	}
	counts := func(want int) func() bool {
		return func() bool {
			for _, n := range r.names {
				if _, c := qs[n].Counts(); c != want || qs[n].Stats().Consumers != want {
					return false
				}
			}
			return true
		}
	}
	if _, _, ok := qs["b"].Get(true); !ok {
		t.Fatal("no-ack get on b: nothing")
	}
	e1, _, ok1 := qs["b"].Get(false)
	e2, _, ok2 := qs["c"].Get(false)
	if !ok1 || !ok2 {
		t.Fatal("get on b and c: nothing")
	}
	waitUntil(t, "2 consumers (the unsettled gets) on every replica", counts(2))
	qs["b"].Settle([]queue.Entry{e1}, queue.Ack)
	waitUntil(t, "1 consumer on every replica after b's ack", counts(1))
	qs["c"].Settle([]queue.Entry{e2}, queue.Nack)
	waitUntil(t, "no consumer on every replica after c's nack", counts(0))
}

package quorum_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// restartTimeout is the groups' raft timeouts in these tests: longer than
// waitUntil's deadline, so that a leader elected within it was elected by
// the restarted replicas' questions (restart.go), not by raft's timers.
const restartTimeout = time.Minute

// restartGroup starts replicas a, b and c of a group whose first leader
// is leader, with restartTimeout, and publishes n messages. The leader
// opens its replica last: its first vote requests find the others'
// open (a candidate whose votes failed would wait restartTimeout).
func restartGroup(t *testing.T, leader string, n int) (*replicas, quorum.Placement, queue.Decl, map[string]*quorum.Queue) {
	t.Helper()
	r := newReplicasTimeout(t, restartTimeout, "a", "b", "c")
	p := quorum.Placement{Group: 1<<62 | 40, Members: []string{"a", "b", "c"}, Leader: leader}
	decl := queue.Decl{VHost: "/", Name: "restart", Durable: true}
	qs := map[string]*quorum.Queue{}
	order := append(slices.DeleteFunc(slices.Clone(r.names), func(n string) bool { return n == leader }), leader)
	for _, node := range order {
		q, err := r.typ(node).NewMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[node] = q
	}
	if err := qs[leader].Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		publishWait(t, qs[leader], fmt.Sprint("m", i))
	}
	return r, p, decl, qs
}

// reopen restarts the given nodes' types and reopens their replicas.
func reopen(t *testing.T, r *replicas, p quorum.Placement, decl queue.Decl, qs map[string]*quorum.Queue, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		r.start(n)
		q, err := r.typ(n).RecoverMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[n] = q
	}
}

// leaderOf is the replica that leads among qs, "" none.
func leaderOf(qs map[string]*quorum.Queue, nodes ...string) string {
	for _, n := range nodes {
		if qs[n].Leads() {
			return n
		}
	}
	return ""
}

// When every member of a group restarted, the reopened replicas elect a
// leader without waiting for raft's timeouts (a minute here), and the
// queue has its messages and takes publishes again.
func TestReplicatedWholeRestartElects(t *testing.T) {
	r, p, decl, qs := restartGroup(t, "a", 3)
	for _, n := range r.names {
		r.stop(n)
	}
	reopen(t, r, p, decl, qs, "c", "b", "a")
	waitUntil(t, "a leader after the restart", func() bool { return leaderOf(qs, r.names...) != "" })
	l := leaderOf(qs, r.names...)
	// A new leader applies the log once an entry of its term commits.
	waitUntil(t, "3 ready on the leader", func() bool { return qs[l].Stats().Ready == 3 })
	publishWait(t, qs["b"], "after")
	waitUntil(t, "4 ready on every replica", func() bool {
		for _, n := range r.names {
			if qs[n].Stats().Ready != 4 {
				return false
			}
		}
		return true
	})
}

// After a whole restart, the replica whose log is behind (its node was
// down while the others took messages) does not stand although it is
// first in name order: the most up to date of the others does, and wins.
// (Standing, a would lose: b and c refuse a stale log their vote.)
func TestReplicatedWholeRestartUpToDateStands(t *testing.T) {
	r, p, decl, qs := restartGroup(t, "c", 1)
	r.stop("a")
	for i := range 5 {
		publishWait(t, qs["c"], fmt.Sprint("n", i))
	}
	r.stop("b")
	r.stop("c")
	reopen(t, r, p, decl, qs, "a", "b", "c")
	waitUntil(t, "a leader after the restart", func() bool { return leaderOf(qs, r.names...) != "" })
	if l := leaderOf(qs, r.names...); l == "a" {
		t.Fatal("a leads after the restart with a log that was behind")
	}
	waitUntil(t, "6 ready on a", func() bool { return qs["a"].Stats().Ready == 6 })
}

// A member restarted alone does not stand: its members know their
// leader, which reaches it; the term does not move (a replica standing
// at once would depose the leader, as its vote request carries raft's
// leadership-transfer flag). Here the restarted member is first in name
// order and its log is as up to date as the others', and the leader's
// messages do not reach it for a few of its rounds, so only what its
// members tell it keeps it from standing.
func TestReplicatedRestartedMemberLeavesLeader(t *testing.T) {
	r, p, decl, qs := restartGroup(t, "c", 2)
	term := quorum.Term(qs["c"])
	waitUntil(t, "a's log as long as the leader's", func() bool {
		return qs["a"].Stats().Ready == 2 && qs["a"].Raft().LastIndex() == qs["c"].Raft().LastIndex()
	})
	r.stop("a")
	r.block("c", "a")
	asked := r.viewsAsked.Load()
	reopen(t, r, p, decl, qs, "a")
	waitUntil(t, "a asked its members three times", func() bool { return r.viewsAsked.Load() >= asked+6 })
	if l := qs["a"].Replica().Leader; l != "" {
		t.Fatalf("a knows leader %q while c's messages to it are dropped", l)
	}
	r.unblock("c", "a")
	waitUntil(t, "a follows c", func() bool { return qs["a"].Replica().Leader == "c" })
	if !qs["c"].Leads() || quorum.Term(qs["c"]) != term {
		t.Fatalf("after a's restart: c leads %v in term %d, want c still leading in term %d", qs["c"].Leads(), quorum.Term(qs["c"]), term)
	}
	waitUntil(t, "2 ready on a", func() bool { return qs["a"].Stats().Ready == 2 })
}

// The leader's node restarts before its members found its old process
// gone: they still name it their leader, which its new replica is not.
// They tell it they know no leader (their leader is the one asking), and
// of the members with the most up-to-date log it is the one that asks,
// so it stands, although a is first in name order.
func TestReplicatedLeaderRestartedUnnoticed(t *testing.T) {
	r, p, decl, qs := restartGroup(t, "c", 2)
	waitUntil(t, "every log as long as the leader's", func() bool {
		last := qs["c"].Raft().LastIndex()
		return qs["a"].Raft().LastIndex() == last && qs["b"].Raft().LastIndex() == last
	})
	r.stop("c")
	reopen(t, r, p, decl, qs, "c")
	if qs["a"].Replica().Leader != "c" || qs["b"].Replica().Leader != "c" {
		t.Fatalf("a and b follow %q and %q, want c (its old process)", qs["a"].Replica().Leader, qs["b"].Replica().Leader)
	}
	waitUntil(t, "c leads again", func() bool { return qs["c"].Leads() })
	publishWait(t, qs["a"], "after")
	waitUntil(t, "3 ready on c", func() bool { return qs["c"].Stats().Ready == 3 })
}

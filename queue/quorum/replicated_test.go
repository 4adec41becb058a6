package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/quorum"
)

// replicas is an in-process cluster of quorum types, one per node, whose
// groups talk over raft's in-memory transports and forward entries with
// direct calls.
type replicas struct {
	t       *testing.T
	names   []string
	dirs    map[string]string
	timeout time.Duration // raft's timeouts (default 200 ms)
	commit  time.Duration // raft's commit timeout (0: the type's default)
	// bootstrapWait: the types' Config.BootstrapWait (0: the default)
	bootstrapWait time.Duration

	mu    sync.Mutex
	types map[string]*quorum.Type
	trans map[string]*raft.InmemTransport
	// fifo is the types' Config.Features for FeatureFifoRules (nil: yes).
	fifo func(members []string) bool
	// noKeepOnLeave: the types' members lack FeatureKeepOnLeave.
	noKeepOnLeave bool
	// hung: entries forwarded to these nodes wait for their context to
	// end, whose error goes to hungErr.
	hung    map[string]bool
	hungIn  chan struct{}
	hungErr chan error
	// holdsAsked counts the types' Config.Holds questions answered.
	holdsAsked atomic.Int64
	// viewsAsked counts the types' Config.Views questions answered.
	viewsAsked atomic.Int64
	// blocked: raft's messages from one node to another are dropped
	// (block), by "from>to".
	blocked map[string]bool
}

func newReplicas(t *testing.T, names ...string) *replicas {
	return newReplicasTimeout(t, 200*time.Millisecond, names...)
}

func newReplicasTimeout(t *testing.T, timeout time.Duration, names ...string) *replicas {
	return newReplicasCommit(t, timeout, 0, names...)
}

func newReplicasCommit(t *testing.T, timeout, commit time.Duration, names ...string) *replicas {
	return newReplicasBoot(t, timeout, commit, 0, names...)
}

// newReplicasBoot: the types' Config.BootstrapWait is boot too (0: the
// default).
func newReplicasBoot(t *testing.T, timeout, commit, boot time.Duration, names ...string) *replicas {
	r := &replicas{t: t, names: names, dirs: map[string]string{}, timeout: timeout, commit: commit, bootstrapWait: boot,
		types: map[string]*quorum.Type{}, trans: map[string]*raft.InmemTransport{}}
	for _, n := range names {
		r.dirs[n] = t.TempDir()
		r.start(n)
	}
	t.Cleanup(func() {
		for _, n := range names {
			r.stop(n)
		}
	})
	return r
}

// start (re)starts node n's type from its directory.
func (r *replicas) start(n string) {
	typ := quorum.NewType(quorum.Config{
		Dir: r.dirs[n], NodeID: n, Timeout: r.timeout, CommitTimeout: r.commit, BootstrapWait: r.bootstrapWait, SnapshotThreshold: 32, NoSync: true,
		Features: func(feature string, members []string) bool {
			r.mu.Lock()
			f, keep := r.fifo, r.noKeepOnLeave
			r.mu.Unlock()
			switch feature {
			case quorum.FeatureFifoRules:
				return f == nil || f(members)
			case quorum.FeatureKeepOnLeave:
				return !keep
			}
			return true
		},
		Log: func(err error, msg string) { r.t.Logf("%s: %s: %v", n, msg, err) },
		Transport: func(uint64) (raft.ServerAddress, raft.Transport, error) {
			addr, tr := raft.NewInmemTransport(raft.ServerAddress(n))
			r.mu.Lock()
			defer r.mu.Unlock()
			for peer, pt := range r.trans {
				if !r.blocked[n+">"+peer] {
					tr.Connect(raft.ServerAddress(peer), pt)
				}
				if !r.blocked[peer+">"+n] {
					pt.Connect(addr, tr)
				}
			}
			r.trans[n] = tr
			return addr, tr, nil
		},
		Addr: func(node string) (raft.ServerAddress, bool) { return raft.ServerAddress(node), true },
		Holds: func(ctx context.Context, node string, gid uint64, keys []uint64) ([]uint64, error) {
			typ := r.typ(node)
			if typ == nil {
				return nil, fmt.Errorf("node %s is down", node)
			}
			defer r.holdsAsked.Add(1)
			return typ.Holds(gid, keys), nil
		},
		Views: func(ctx context.Context, node string, gids []uint64) ([]cluster.View, error) {
			asker := n
			typ := r.typ(node)
			if typ == nil {
				return nil, fmt.Errorf("node %s is down", node)
			}
			defer r.viewsAsked.Add(1)
			return typ.Views(asker, gids), nil
		},
		Forward: func(ctx context.Context, node string, gid uint64, data []byte) ([]byte, error) {
			r.mu.Lock()
			typ, hung := r.types[node], r.hung[node]
			r.mu.Unlock()
			if hung {
				select {
				case r.hungIn <- struct{}{}:
				default:
				}
				<-ctx.Done()
				select {
				case r.hungErr <- ctx.Err():
				default:
				}
				return nil, ctx.Err()
			}
			if typ == nil {
				return nil, fmt.Errorf("node %s is down", node)
			}
			// As over a network: the caller gives up when ctx ends.
			type answer struct {
				resp []byte
				err  error
			}
			ch := make(chan answer, 1)
			go func() {
				resp, err := typ.Forwarded(gid, data)
				ch <- answer{resp, err}
			}()
			select {
			case a := <-ch:
				return a.resp, a.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	r.mu.Lock()
	r.types[n] = typ
	r.mu.Unlock()
}

// stop stops node n: its groups shut down and its transport is cut off.
func (r *replicas) stop(n string) {
	r.mu.Lock()
	typ, tr := r.types[n], r.trans[n]
	delete(r.types, n)
	delete(r.trans, n)
	for _, pt := range r.trans {
		pt.Disconnect(raft.ServerAddress(n))
	}
	r.mu.Unlock()
	if tr != nil {
		tr.DisconnectAll()
	}
	if typ != nil {
		typ.Close()
	}
}

// cutOff cuts node n's raft transport off from the others' (both ways);
// n keeps running.
func (r *replicas) cutOff(n string) {
	r.mu.Lock()
	tn := r.trans[n]
	for m, tr := range r.trans {
		if m != n {
			tr.Disconnect(raft.ServerAddress(n))
		}
	}
	r.mu.Unlock()
	tn.DisconnectAll()
}

// block drops raft's messages from node from to node to, also of groups
// opened later; unblock undoes it.
func (r *replicas) block(from, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocked == nil {
		r.blocked = map[string]bool{}
	}
	r.blocked[from+">"+to] = true
	if tr := r.trans[from]; tr != nil {
		tr.Disconnect(raft.ServerAddress(to))
	}
}

func (r *replicas) unblock(from, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.blocked, from+">"+to)
	if tr, pt := r.trans[from], r.trans[to]; tr != nil && pt != nil {
		tr.Connect(raft.ServerAddress(to), pt)
	}
}

// transport is node n's raft transport (its groups share it).
func (r *replicas) transport(n string) *raft.InmemTransport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trans[n]
}

func (r *replicas) typ(n string) *quorum.Type {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.types[n]
}

var replLimits = queue.Limits{MaxLength: -1, MaxLengthBytes: -1}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A replicated queue: published to through a follower, consumed on
// another, its leader stopped (another leads, publishing goes on), and a
// replica that was down while the leader's log was compacted catches up
// from a snapshot that carries the bodies of the messages below it.
func TestReplicated(t *testing.T) {
	r, p, decl, qs := newGroup(t, 7, "rq")
	// b learns the leader with a's first message to it.
	waitUntil(t, "b knows a leader", func() bool { return qs["b"].Replica().Leader != "" })
	if l := qs["b"].Replica().Leader; l != "a" {
		t.Fatalf("leader %q, want a (the placement's)", l)
	}

	// Through follower b; every replica has them.
	for i := range 20 {
		publishWait(t, qs["b"], fmt.Sprint("b", i))
	}
	for _, n := range r.names {
		waitUntil(t, "20 ready on "+n, func() bool { return qs[n].Stats().Ready == 20 })
	}
	// Consumed on c (attach forwarded, deliveries from c's own apply).
	rec := queuetest.NewRecorder(100, false)
	if err := qs["c"].AddConsumer(queue.ConsumeOptions{Tag: "c1", Consumer: rec, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "20 delivered on c", func() bool { return rec.Len() == 20 })
	got := rec.Take()
	for i, e := range got {
		if want := fmt.Sprint("b", i); string(e.Msg.Body) != want {
			t.Fatalf("delivery %d: %q, want %q", i, e.Msg.Body, want)
		}
	}
	qs["c"].Settle(got, queue.Ack)
	waitUntil(t, "acks applied on a", func() bool { st := qs["a"].Stats(); return st.Ready == 0 && st.Unacked == 0 })
	qs["c"].RemoveConsumer("c1", rec)

	// c goes down; many entries later (snapshots, compaction), with ten
	// messages left below the last snapshot, it comes back.
	r.stop("c")
	for i := range 400 {
		publishWait(t, qs["a"], fmt.Sprint("x", i))
	}
	for range 390 {
		e, _, ok := qs["a"].Get(true)
		if !ok {
			t.Fatal("queue ended early")
		}
		_ = e
	}
	if err := qs["a"].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, _ := qs["a"].Raft().Stats()["last_snapshot_index"], 0
	t.Logf("leader's last snapshot index %s", first)
	r.start("c")
	cq, err := r.typ("c").RecoverMember(decl, replLimits, queue.Hooks{}, p)
	if err != nil {
		t.Fatal(err)
	}
	qs["c"] = cq
	waitUntil(t, "10 ready on the returned c", func() bool { return cq.Stats().Ready == 10 })

	// a stops: b or c leads; publishing through b goes on; c delivers the
	// ten it got with the snapshot, bodies and all, then the new ones.
	r.stop("a")
	publishWait(t, qs["b"], "after")
	waitUntil(t, "a new leader", func() bool { l := qs["b"].Replica().Leader; return l == "b" || l == "c" })
	rec = queuetest.NewRecorder(100, false)
	if err := cq.AddConsumer(queue.ConsumeOptions{Tag: "c2", Consumer: rec, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "11 delivered on c", func() bool { return rec.Len() == 11 })
	for i, e := range rec.Take() {
		want := fmt.Sprint("x", 390+i)
		if i == 10 {
			want = "after"
		}
		if string(e.Msg.Body) != want {
			t.Fatalf("delivery %d on c: %q, want %q", i, e.Msg.Body, want)
		}
	}
}

// A follower learns that an entry is committed, and delivers it to its
// node's consumer, without raft's next AppendEntries of nothing (a
// commit timeout of an hour here): the leader nudges it with a barrier.
// Each publish is the last entry for a while, the case the nudge is for.
func TestReplicatedNudge(t *testing.T) {
	_, _, _, qs := newGroupOn(t, newReplicasCommit(t, 200*time.Millisecond, time.Hour, "a", "b", "c"), 12, "nudge")
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	rec := queuetest.NewRecorder(100, false)
	if err := qs["b"].AddConsumer(queue.ConsumeOptions{Tag: "b1", Consumer: rec, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publishWait(t, qs["a"], fmt.Sprint("m", i))
		waitUntil(t, fmt.Sprintf("m%d delivered on b", i), func() bool { return rec.Len() == i+1 })
	}
}

// A publish through a follower to a reject-publish queue over its limit
// is refused (the leader's verdict comes back with the forwarded entry);
// the others are confirmed, the one that took the queue over its limit
// too (rabbit_fifo's reject-publish).
func TestReplicatedRejectPublish(t *testing.T) {
	r := newReplicas(t, "a", "b", "c")
	p := quorum.Placement{Group: 1<<62 | 8, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "full", Durable: true}
	qs := newMembers(t, r, p, decl, queue.Limits{MaxLength: 2, MaxLengthBytes: -1, Overflow: queue.RejectPublish})
	publishWait(t, qs["b"], "1")
	publishWait(t, qs["b"], "2")
	publishWait(t, qs["b"], "3")
	ch := make(chan error, 1)
	qs["b"].Type().Publish(&queue.Message{Body: []byte("4"), Persistent: true}, []queue.Queue{qs["b"]}, nil, func(err error) { ch <- err })
	select {
	case err := <-ch:
		if !errors.Is(err, quorum.ErrRejected) {
			t.Fatalf("fourth publish: %v, want ErrRejected", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fourth publish: no answer")
	}
}

// A leader that takes a live node for down detaches its consumer (what it
// held goes back); the node, which still has the consumer, attaches it
// again: the consumer gets what it held again, redelivered, and what is
// published after. Without the reattach the consumer stalls for ever.
func TestReplicatedDetachedLiveConsumerReattaches(t *testing.T) {
	_, _, _, qs := newGroup(t, 9, "rd")
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	rec := queuetest.NewRecorder(100, false)
	if err := qs["b"].AddConsumer(queue.ConsumeOptions{Tag: "b1", Consumer: rec, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		publishWait(t, qs["a"], fmt.Sprint("m", i))
	}
	waitUntil(t, "5 delivered on b", func() bool { return rec.Len() == 5 })
	held := rec.Take()

	// a holds b for down: b's consumer is detached, its 5 go back.
	qs["a"].DetachDown(func(node string) bool { return node != "b" })
	waitUntil(t, "5 redelivered on b", func() bool { return rec.Len() == 5 })
	again := rec.Take()
	for i, e := range again {
		if !e.Redelivered || string(e.Msg.Body) != string(held[i].Msg.Body) {
			t.Fatalf("redelivery %d: %q redelivered=%v, want %q redelivered", i, e.Msg.Body, e.Redelivered, held[i].Msg.Body)
		}
	}
	// The leader still holds b for down: a later pass detaches nothing
	// of the consumer's new attach.
	qs["a"].DetachDown(func(node string) bool { return node != "b" })
	publishWait(t, qs["a"], "after")
	waitUntil(t, "the new one delivered on b", func() bool { return rec.Len() == 1 })
	if e := rec.Take()[0]; string(e.Msg.Body) != "after" || e.Redelivered {
		t.Fatalf("after the reattach: %q redelivered=%v", e.Msg.Body, e.Redelivered)
	}
	qs["b"].Settle(again, queue.Ack)
	waitUntil(t, "nothing unacked on a but the last", func() bool {
		st := qs["a"].Stats()
		return st.Unacked == 1 && st.Ready == 0
	})
	if n := qs["b"].Stats().Consumers; n != 1 {
		t.Fatalf("b has %d consumers, want 1", n)
	}
}

// HandOver on the leader moves the leadership to another member, which
// goes on confirming; on a follower it does nothing.
func TestReplicatedHandOver(t *testing.T) {
	r, p, _, qs := newGroup(t, 10, "ho")
	waitUntil(t, "a leads, b knows it", func() bool { return qs["a"].Leads() && qs["b"].Replica().Leader == "a" })
	if err := r.typ("b").HandOver(p.Group); err != nil {
		t.Fatalf("HandOver on a follower: %v", err)
	}
	if !qs["a"].Leads() {
		t.Fatal("a follower's HandOver moved the leadership")
	}
	if err := r.typ("a").HandOver(p.Group); err != nil {
		t.Fatalf("HandOver on the leader: %v", err)
	}
	if qs["a"].Leads() {
		t.Fatal("a still leads after its HandOver")
	}
	waitUntil(t, "b or c leads", func() bool { return qs["b"].Leads() || qs["c"].Leads() })
	publishWait(t, qs["a"], "after")
	waitUntil(t, "on every replica", func() bool {
		return qs["a"].Stats().Ready == 1 && qs["b"].Stats().Ready == 1 && qs["c"].Stats().Ready == 1
	})
}

// HandOverAll, a node stopping: the groups it leads get a leader
// elsewhere at once (raft's timeouts are ten minutes here), and it
// returns only once this node's replica has heard from that leader, so
// the others have too: their PeerLost for the stopped node moves
// nothing. A group it follows, one of which it is the only voter, or one
// whose other voters are down, is not counted.
func TestReplicatedHandOverAll(t *testing.T) {
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 14, "hoa")
	publishWait(t, qs["c"], "before")
	waitUntil(t, "b and c know a leads", func() bool {
		return qs["b"].Replica().Leader == "a" && qs["c"].Replica().Leader == "a"
	})
	if led, moved := r.typ("b").HandOverAll(context.Background(), nil); led != 0 || moved != 0 {
		t.Fatalf("HandOverAll on a follower: led %d, handed over %d; want none", led, moved)
	}
	solo := newReplicasTimeout(t, 10*time.Minute, "z")
	one, err := solo.typ("z").NewMember(queue.Decl{VHost: "/", Name: "solo", Durable: true}, replLimits, queue.Hooks{},
		quorum.Placement{Group: 1<<62 | 15, Members: []string{"z"}, Leader: "z"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "z leads its group", one.Leads)
	if led, moved := solo.typ("z").HandOverAll(context.Background(), nil); led != 0 || moved != 0 || !one.Leads() {
		t.Fatalf("HandOverAll, the only voter: led %d, handed over %d, leads %v; want none and still leading", led, moved, one.Leads())
	}
	term := quorum.Term(qs["b"])

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if led, moved := r.typ("a").HandOverAll(ctx, func(n string) bool { return n == "a" }); led != 0 || moved != 0 || !qs["a"].Leads() {
		t.Fatalf("HandOverAll, the other voters down: led %d, handed over %d, leads %v; want none and still leading", led, moved, qs["a"].Leads())
	}
	led, moved := r.typ("a").HandOverAll(ctx, nil)
	if led != 1 || moved != 1 {
		t.Fatalf("HandOverAll: led %d, handed over %d; want 1 and 1", led, moved)
	}
	s := qs["a"].Replica()
	if s.Leader == "" || s.Leader == "a" {
		t.Fatalf("after HandOverAll a's replica knows leader %q, want another", s.Leader)
	}
	next := qs[s.Leader]
	if !next.Leads() || quorum.Term(next) != term+1 {
		t.Fatalf("%s: leads %v in term %d, want the leader of term %d", s.Leader, next.Leads(), quorum.Term(next), term+1)
	}

	r.stop("a")
	for _, n := range []string{"b", "c"} {
		// The check PeerLost("a") makes: none stands.
		if cluster.Campaign(qs[n].Raft(), n, "a", quorum.LedTerm(qs[n], "a"), 0, nil, func() error {
			t.Errorf("%s stood for election after a handed over to %s", n, s.Leader)
			return nil
		}) {
			t.Fatalf("%s campaigned", n)
		}
	}
	publishWait(t, qs["c"], "after")
	waitUntil(t, "both on b and c", func() bool { return qs["b"].Stats().Ready == 2 && qs["c"].Stats().Ready == 2 })
}

// Campaign's first voter does not stand once it has seen a vote request
// of a later term than the lost leader's: another voter is being elected
// (the one the lost leader handed over to as it stopped; it may not
// have heard from it yet). Without the term it would, as before.
func TestReplicatedCampaignLeavesAnElectionAlone(t *testing.T) {
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 17, "cl")
	publishWait(t, qs["c"], "before")
	waitUntil(t, "b and c know a leads", func() bool {
		return qs["b"].Replica().Leader == "a" && qs["c"].Replica().Leader == "a"
	})
	term := quorum.Term(qs["b"])
	if got := quorum.LedTerm(qs["b"], "a"); got != term {
		t.Fatalf("b knew a as leader in term %d, want %d", got, term)
	}
	r.stop("a")
	// c's vote request of a leadership transfer, with a log b will not
	// vote for: b takes the term and forgets its leader, and no one wins.
	var resp raft.RequestVoteResponse
	req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("c"), Addr: []byte("c")},
		Term: term + 1, LeadershipTransfer: true}
	if err := r.transport("c").RequestVote("b", "b", req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Granted || quorum.Term(qs["b"]) != term+1 || qs["b"].Replica().Leader != "" {
		t.Fatalf("b after the vote request: granted %v, term %d, leader %q; want refused, %d, none",
			resp.Granted, quorum.Term(qs["b"]), qs["b"].Replica().Leader, term+1)
	}
	stood := false
	standNow := func() error { stood = true; return nil }
	if cluster.Campaign(qs["b"].Raft(), "b", "a", quorum.LedTerm(qs["b"], "a"), 0, nil, standNow) || stood {
		t.Fatal("b stood while another voter's election was under way")
	}
	if !cluster.Campaign(qs["b"].Raft(), "b", "a", 0, 0, nil, standNow) || !stood {
		t.Fatal("b, the lost leader's term not known, did not stand")
	}
}

// PeerLost: the members left of a group whose leader's node is gone
// elect a new leader at once, the first of them in name order, not
// after raft's timeouts (ten minutes here, so nothing else could elect
// one within the test), and publishing through the other one goes on.
// A node lost that led nothing moves no leadership.
func TestReplicatedPeerLostStandsAtOnce(t *testing.T) {
	// a's replica opens last: its first election (at once, it is the
	// first leader) finds the others' open.
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 11, "pl")
	publishWait(t, qs["c"], "before")
	waitUntil(t, "on every replica, b and c know a leads", func() bool {
		return qs["b"].Stats().Ready == 1 && qs["c"].Stats().Ready == 1 &&
			qs["b"].Replica().Leader == "a" && qs["c"].Replica().Leader == "a"
	})
	r.typ("b").PeerLost("c") // c led nothing
	r.typ("a").PeerLost("b")
	if !qs["a"].Leads() || qs["b"].Replica().State != "Follower" {
		t.Fatalf("a lost node that led nothing moved the leadership: a %+v, b %+v", qs["a"].Replica(), qs["b"].Replica())
	}
	r.stop("a")
	r.typ("c").PeerLost("a")
	r.typ("b").PeerLost("a")
	waitUntil(t, "b leads, c knows it", func() bool { return qs["b"].Leads() && qs["c"].Replica().Leader == "b" })
	publishWait(t, qs["c"], "after")
	waitUntil(t, "both on b and c", func() bool { return qs["b"].Stats().Ready == 2 && qs["c"].Stats().Ready == 2 })
}

// PeerDown: when the leader's node hangs or is cut off, the members on
// the side of a majority of the group's voters elect a new leader at
// once (raft's timeouts are ten minutes here), the first of them in name
// order; a member that sees only a minority running stands for nothing
// (its raised term would depose the leader when the cut heals).
func TestReplicatedPeerDownStandsOnMajoritySide(t *testing.T) {
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 13, "pd")
	publishWait(t, qs["c"], "before")
	waitUntil(t, "on every replica, b and c know a leads", func() bool {
		return qs["b"].Stats().Ready == 1 && qs["c"].Stats().Ready == 1 &&
			qs["b"].Replica().Leader == "a" && qs["c"].Replica().Leader == "a"
	})
	term := quorum.Term(qs["b"])
	r.cutOff("a")

	only := func(up ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(up, n) }
	}
	for _, call := range []struct {
		on, down string
		up       []string
	}{
		{"b", "c", []string{"a", "b"}}, // c led nothing
		{"b", "a", []string{"b"}},      // b alone: a minority
		{"c", "a", []string{"c"}},
	} {
		if n := r.typ(call.on).PeerDown(call.down, only(call.up...)); n != 0 {
			t.Fatalf("%s, %s down, %v running: %d groups stand, want none", call.on, call.down, call.up, n)
		}
	}
	if s := qs["b"].Replica(); s.State != "Follower" || s.Leader != "a" || quorum.Term(qs["b"]) != term {
		t.Fatalf("b stood for election on a minority's side: %+v, term %d (was %d)", s, quorum.Term(qs["b"]), term)
	}
	if s := qs["c"].Replica(); s.State != "Follower" || quorum.Term(qs["c"]) != term {
		t.Fatalf("c stood for election on a minority's side: %+v, term %d (was %d)", s, quorum.Term(qs["c"]), term)
	}
	if n := r.typ("c").PeerDown("a", only("b", "c")); n != 1 {
		t.Fatalf("c, a down, b and c running: %d groups stand, want 1", n)
	}
	if n := r.typ("b").PeerDown("a", only("b", "c")); n != 1 {
		t.Fatalf("b, a down, b and c running: %d groups stand, want 1", n)
	}
	waitUntil(t, "b leads, c knows it", func() bool { return qs["b"].Leads() && qs["c"].Replica().Leader == "b" })
	if got := quorum.Term(qs["b"]); got != term+1 {
		t.Fatalf("b leads in term %d, want %d: more than one election", got, term+1)
	}
	publishWait(t, qs["c"], "after")
	waitUntil(t, "both on b and c", func() bool { return qs["b"].Stats().Ready == 2 && qs["c"].Stats().Ready == 2 })
}

// A new group whose first leader never opens its replica (its node is
// down): the other members bootstrap the same configuration after
// Config.BootstrapWait and elect one of them at once (raft's timeouts are ten
// minutes here), and the queue takes publishes.
func TestReplicatedSilentFirstLeader(t *testing.T) {
	r := newReplicasBoot(t, 10*time.Minute, 0, 200*time.Millisecond, "b", "c")
	p := quorum.Placement{Group: 1<<62 | 15, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "sf", Durable: true}
	qs := map[string]*quorum.Queue{}
	for _, node := range []string{"b", "c"} {
		q, err := r.typ(node).NewMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[node] = q
	}
	waitUntil(t, "b leads, c knows it", func() bool { return qs["b"].Leads() && qs["c"].Replica().Leader == "b" })
	publishWait(t, qs["c"], "m")
	waitUntil(t, "on b and c", func() bool { return qs["b"].Stats().Ready == 1 && qs["c"].Stats().Ready == 1 })
}

// A new group whose first leader could not open its replica, and says
// so (BootstrapNow): its members bootstrap at once, not after their wait
// (ten minutes here, as raft's timeouts), whether asked after they opened
// theirs (c) or before (b), and the queue takes publishes.
func TestReplicatedBootstrapNow(t *testing.T) {
	r := newReplicasBoot(t, 10*time.Minute, 0, 10*time.Minute, "b", "c")
	p := quorum.Placement{Group: 1<<62 | 18, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "bn", Durable: true}
	r.typ("b").BootstrapNow(p.Group)
	qs := map[string]*quorum.Queue{}
	for _, node := range []string{"c", "b"} {
		q, err := r.typ(node).NewMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[node] = q
	}
	r.typ("c").BootstrapNow(p.Group)
	waitUntil(t, "b leads, c knows it", func() bool { return qs["b"].Leads() && qs["c"].Replica().Leader == "b" })
	publishWait(t, qs["c"], "m")
	waitUntil(t, "on b and c", func() bool { return qs["b"].Stats().Ready == 1 && qs["c"].Stats().Ready == 1 })
}

// An entry forwarded to a leader that hangs is given up as soon as the
// replica sees another leader (or an election), not after the forward's
// timeout, and goes to the new leader.
func TestReplicatedForwardToHungLeaderGivenUp(t *testing.T) {
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 14, "hl")
	publishWait(t, qs["c"], "before")
	waitUntil(t, "b and c know a leads", func() bool {
		return qs["b"].Replica().Leader == "a" && qs["c"].Replica().Leader == "a"
	})
	r.mu.Lock()
	r.hung = map[string]bool{"a": true}
	r.hungIn = make(chan struct{}, 16)
	r.hungErr = make(chan error, 16)
	r.mu.Unlock()
	r.cutOff("a")
	done := make(chan error, 1)
	qs["c"].Type().Publish(&queue.Message{Body: []byte("after"), Persistent: true}, []queue.Queue{qs["c"]}, nil, func(err error) { done <- err })
	select {
	case <-r.hungIn:
	case <-time.After(10 * time.Second):
		t.Fatal("c's publish was not forwarded to a")
	}
	select {
	case err := <-r.hungErr:
		t.Fatalf("the forward to a ended before any election: %v", err)
	default:
	}
	up := func(n string) bool { return n != "a" }
	r.typ("c").PeerDown("a", up)
	r.typ("b").PeerDown("a", up)
	select {
	case err := <-r.hungErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the forward to the hung a ended with %v, want it given up (context.Canceled)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the forward to the hung a never ended")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the publish: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the publish was not confirmed")
	}
	waitUntil(t, "both on b and c", func() bool { return qs["b"].Stats().Ready == 2 && qs["c"].Stats().Ready == 2 })
}

// A follower that reaches no leader for longer than a proposal waits
// (its forwards to the leader hang) fails the batch then (a publish in
// it would be nacked), but the settlement in it is sent again once the
// leader answers: a message it acknowledged is settled in the group,
// not left checked out for good.
func TestReplicatedSettleSentAgainAfterLeaderless(t *testing.T) {
	r, _, _, qs := newGroupOn(t, newReplicasTimeout(t, 10*time.Minute, "c", "b", "a"), 15, "sl")
	publishWait(t, qs["a"], "m")
	waitUntil(t, "c has it and knows a leads", func() bool {
		return qs["c"].Stats().Ready == 1 && qs["c"].Replica().Leader == "a"
	})
	e, _, ok := qs["c"].Get(false)
	if !ok {
		t.Fatal("get on c: nothing")
	}
	waitUntil(t, "checked out on a", func() bool { st := qs["a"].Stats(); return st.Unacked == 1 && st.Ready == 0 })
	r.mu.Lock()
	r.hung = map[string]bool{"a": true}
	r.hungIn = make(chan struct{}, 16)
	r.hungErr = make(chan error, 16)
	r.mu.Unlock()
	before := quorum.Leaderless(qs["c"])
	qs["c"].Settle([]queue.Entry{e}, queue.Ack)
	waitUntil(t, "c's batch failed for want of a leader", func() bool { return quorum.Leaderless(qs["c"]) > before })
	if st := qs["a"].Stats(); st.Unacked != 1 {
		t.Fatalf("settled on a while its forwards hang: %+v", st)
	}
	r.mu.Lock()
	r.hung = nil
	r.mu.Unlock()
	for _, n := range []string{"a", "b", "c"} {
		waitUntil(t, "the ack applied on "+n, func() bool { st := qs[n].Stats(); return st.Unacked == 0 && st.Ready == 0 })
	}
}

// A replica that leaves and is made a member again at once opens only
// once the old one has stopped and its data is gone (same group id, same
// transport name): the new one is not refused, and its data is not
// deleted under it by the old one's cleanup.
func TestReplicatedLeaveThenJoin(t *testing.T) {
	r, p, decl, qs := newGroup(t, 11, "lj")
	for i := range 5 {
		publishWait(t, qs["a"], fmt.Sprint("m", i))
	}
	waitUntil(t, "5 on c", func() bool { return qs["c"].Stats().Ready == 5 })
	qs["c"].Leave()
	cq, err := r.typ("c").JoinMember(decl, replLimits, queue.Hooks{}, p)
	if err != nil {
		t.Fatalf("join right after leave: %v", err)
	}
	waitUntil(t, "the rejoined c has the 5 again", func() bool { return cq.Stats().Ready == 5 })
	publishWait(t, cq, "after")
	waitUntil(t, "6 on a", func() bool { return qs["a"].Stats().Ready == 6 })
	waitUntil(t, "6 on c", func() bool { return cq.Stats().Ready == 6 })
}

// What basic.get checked out on a node is returned when the leader finds
// that node down, and only then: another node's restart leaves it be.
func TestReplicatedGetReturnedWithItsNode(t *testing.T) {
	r, p, decl, qs := newGroup(t, 12, "gr")
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	publishWait(t, qs["a"], "g")
	waitUntil(t, "on b", func() bool { return qs["b"].Stats().Ready == 1 })
	if e, _, ok := qs["b"].Get(false); !ok || string(e.Msg.Body) != "g" {
		t.Fatalf("get on b: %v %v", ok, e.Msg)
	}
	waitUntil(t, "unacked on a", func() bool { st := qs["a"].Stats(); return st.Unacked == 1 && st.Ready == 0 })

	// c restarts: its reset returns its own gets, not b's.
	r.stop("c")
	r.start("c")
	cq, err := r.typ("c").RecoverMember(decl, replLimits, queue.Hooks{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := cq.Sync(); err != nil {
		t.Fatal(err)
	}
	publishWait(t, cq, "after-c") // c's reset is applied before this
	waitUntil(t, "after-c on a", func() bool { return qs["a"].Stats().Ready == 1 })
	if st := qs["a"].Stats(); st.Unacked != 1 {
		t.Fatalf("after c's restart: %d unacked on a, want b's get still out", st.Unacked)
	}

	// b found down: its get comes back, redelivered.
	qs["a"].DetachDown(func(node string) bool { return node != "b" })
	waitUntil(t, "b's get back on a", func() bool { st := qs["a"].Stats(); return st.Unacked == 0 && st.Ready == 2 })
	e, _, ok := qs["a"].Get(true)
	if !ok || string(e.Msg.Body) != "g" || !e.Redelivered {
		t.Fatalf("after b was found down: %v %q redelivered=%v, want g redelivered", ok, e.Msg.Body, e.Redelivered)
	}
}

// newMembers opens every replica of r as a new member of p's group with
// limits, and waits until the first one (the leader) applied an entry.
func newMembers(t *testing.T, r *replicas, p quorum.Placement, decl queue.Decl, limits queue.Limits) map[string]*quorum.Queue {
	t.Helper()
	qs := map[string]*quorum.Queue{}
	for _, n := range r.names {
		q, err := r.typ(n).NewMember(decl, limits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[n] = q
	}
	if err := qs[r.names[0]].Sync(); err != nil {
		t.Fatal(err)
	}
	return qs
}

// newGroup starts replicas a, b and c of a new replicated queue (group
// 1<<62|n, first leader a) and waits until a leads it.
func newGroup(t *testing.T, n uint64, name string) (*replicas, quorum.Placement, queue.Decl, map[string]*quorum.Queue) {
	t.Helper()
	return newGroupOn(t, newReplicas(t, "a", "b", "c"), n, name)
}

func newGroupOn(t *testing.T, r *replicas, n uint64, name string) (*replicas, quorum.Placement, queue.Decl, map[string]*quorum.Queue) {
	t.Helper()
	p := quorum.Placement{Group: 1<<62 | n, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: name, Durable: true}
	qs := map[string]*quorum.Queue{}
	for _, node := range r.names {
		q, err := r.typ(node).NewMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		qs[node] = q
	}
	if err := qs["a"].Sync(); err != nil {
		t.Fatal(err)
	}
	return r, p, decl, qs
}

// The leader's counts are queue.declare-ok's (RabbitMQ asks the leader):
// right after publishes through a follower are confirmed they count
// them, and they count the consumers of every node; a replica that does
// not lead refuses and names the leader.
func TestReplicatedLeaderCounts(t *testing.T) {
	r, _, _, qs := newGroup(t, 11, "lc")
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	rec := queuetest.NewRecorder(100, false)
	if err := qs["c"].AddConsumer(queue.ConsumeOptions{Tag: "c1", Consumer: rec, Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publishWait(t, qs["b"], fmt.Sprint("m", i))
		ready, consumers, leader, err := r.typ("a").LeaderCounts(1<<62 | 11)
		if err != nil || leader != "a" {
			t.Fatalf("LeaderCounts on a: %v (leader %q)", err, leader)
		}
		// The consumer on c holds the first (prefetch 1).
		if ready != i || consumers != 1 {
			t.Fatalf("after %d confirmed publishes: leader counts ready=%d consumers=%d, want %d and 1", i+1, ready, consumers, i)
		}
	}
	_, _, leader, err := r.typ("b").LeaderCounts(1<<62 | 11)
	if !errors.Is(err, raft.ErrNotLeader) || leader != "a" {
		t.Fatalf("LeaderCounts on b: %v (leader %q), want ErrNotLeader and a", err, leader)
	}
	if _, _, _, err := r.typ("b").LeaderCounts(1<<62 | 99); !errors.Is(err, quorum.ErrNoGroup) {
		t.Fatalf("LeaderCounts of an unknown group: %v, want ErrNoGroup", err)
	}
	// Every replica comes to the same counts as it applies the log; the
	// consumer on c is one of b's too.
	waitUntil(t, "b's counts", func() bool { m, c := qs["b"].Counts(); return m == 2 && c == 1 })
}

// A replica that leaves its group (delete_member) lets its consumers
// keep what their channels were handed, as RabbitMQ's do: the group
// holds it checked out, and another consumer gets only what comes after.
// Their settlements after the replica stopped reach the group (forwarded
// to a member): an ack ends a message, a requeue gives it back; what is
// still held when the consumers' node restarts comes back then.
func TestReplicatedLeaveKeepsDeliveries(t *testing.T) {
	r, qs, held := leaveHolding(t, false)
	waitUntil(t, "c stopped", func() bool { return qs["c"].Replica().State == "Shutdown" })
	onA := queuetest.NewRecorder(100, false)
	if err := qs["a"].AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: onA, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	publishWait(t, qs["a"], "m3")
	waitUntil(t, "m3 delivered on a", func() bool { return onA.Len() == 1 })
	if got := queuetest.Bodies(onA.Take()); !slices.Equal(got, []string{"m3"}) {
		t.Fatalf("a's consumer got %v, want m3 alone: c's consumer keeps m0 to m2", got)
	}
	if st := qs["a"].Stats(); st.Ready != 0 || st.Unacked != 4 {
		t.Fatalf("on a: %d ready, %d unacked; want 0 and 4", st.Ready, st.Unacked)
	}

	qs["c"].Settle(held[:1], queue.Ack)
	waitUntil(t, "c's ack of m0 applied on a", func() bool { return qs["a"].Stats().Unacked == 3 })
	qs["c"].Settle(held[1:2], queue.Requeue)
	waitUntil(t, "m1, requeued by c, redelivered on a", func() bool { return onA.Len() == 1 })
	if e := onA.Take()[0]; string(e.Msg.Body) != "m1" || !e.Redelivered {
		t.Fatalf("after c's requeue a got %q redelivered=%v, want m1 redelivered", e.Msg.Body, e.Redelivered)
	}

	// c's node restarts: m2, still held by its old consumer, comes back.
	r.typ("a").NodeRestarted("c")
	waitUntil(t, "m2 redelivered on a", func() bool { return onA.Len() == 1 })
	if e := onA.Take()[0]; string(e.Msg.Body) != "m2" || !e.Redelivered {
		t.Fatalf("after c's restart a got %q redelivered=%v, want m2 redelivered", e.Msg.Body, e.Redelivered)
	}
	if hs := qs["a"].ConsumerHolds(); len(hs) != 1 || hs[0].Node != "a" {
		t.Fatalf("consumers on a: %+v, want a's alone", hs)
	}
}

// A leader that did not see the node of a consumer that kept its
// deliveries on leaving (opLeave) restart asks that node, once the
// consumer has been a non-voter's for OrphanGrace, whether it still holds
// it: while its process runs it does (its channel may settle them yet),
// and nothing moves; its new process holds none, and the consumer is
// detached, what it held delivered again.
func TestReplicatedLeftConsumerOfRestartedNodeDetached(t *testing.T) {
	r, qs, _ := leaveHolding(t, false)
	waitUntil(t, "c stopped", func() bool { return qs["c"].Replica().State == "Shutdown" })
	onA := queuetest.NewRecorder(100, false)
	if err := qs["a"].AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: onA, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	running := func(string) bool { return true }
	// ask runs the leader's check at now and waits for its answers.
	ask := func(now time.Time) {
		t.Helper()
		asked := r.holdsAsked.Load()
		quorum.DetachDownAt(qs["a"], running, now)
		waitUntil(t, "c asked", func() bool { return r.holdsAsked.Load() > asked && !quorum.AskingOrphans(qs["a"]) })
	}
	t0 := time.Now()
	quorum.DetachDownAt(qs["a"], running, t0) // first seen: not asked yet
	if quorum.AskingOrphans(qs["a"]) || r.holdsAsked.Load() != 0 {
		t.Fatal("asked about c's consumer at once, before OrphanGrace")
	}
	ask(t0.Add(quorum.OrphanGrace))
	publishWait(t, qs["a"], "m3")
	waitUntil(t, "m3 delivered on a", func() bool { return onA.Len() >= 1 })
	if got := queuetest.Bodies(onA.Take()); !slices.Equal(got, []string{"m3"}) {
		t.Fatalf("a's consumer got %v, want m3 alone: c's running process still holds m0 to m2", got)
	}

	// c restarts; a does not hear of it (no NodeRestarted).
	r.stop("c")
	r.start("c")
	ask(t0.Add(2 * quorum.OrphanGrace))
	waitUntil(t, "m0 to m2 redelivered on a", func() bool { return onA.Len() == 3 })
	got := onA.Take()
	if bodies := queuetest.Bodies(got); !slices.Equal(bodies, []string{"m0", "m1", "m2"}) {
		t.Fatalf("after c's restart a got %v, want m0 to m2", bodies)
	}
	for _, e := range got {
		if !e.Redelivered {
			t.Fatalf("%q delivered again without the redelivered flag", e.Msg.Body)
		}
	}
	if hs := qs["a"].ConsumerHolds(); len(hs) != 1 || hs[0].Node != "a" {
		t.Fatalf("consumers on a: %+v, want a's alone", hs)
	}
}

// leaveHolding starts group a, b, c (a leads), delivers m0 to m2 to a
// consumer on c that holds them, removes c from the group and has its
// replica leave; it returns what c's consumer holds. noKeep: the members
// lack FeatureKeepOnLeave.
func leaveHolding(t *testing.T, noKeep bool) (*replicas, map[string]*quorum.Queue, []queue.Entry) {
	t.Helper()
	r, p, _, qs := newGroup(t, 13, "ls")
	r.mu.Lock()
	r.noKeepOnLeave = noKeep
	r.mu.Unlock()
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	for i := range 3 {
		publishWait(t, qs["a"], fmt.Sprint("m", i))
	}
	onC := queuetest.NewRecorder(100, false)
	if err := qs["c"].AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: onC, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "3 delivered on c", func() bool { return onC.Len() == 3 })
	held := onC.Take()
	if _, err := r.typ("a").ChangeMember(p.Group, false, "c", ""); err != nil {
		t.Fatal(err)
	}
	if refs := qs["c"].Leave(); len(refs) != 1 || refs[0].Tag != "c" {
		t.Fatalf("Leave returned %+v, want c's consumer to move", refs)
	}
	return r, qs, held
}

// Members that lack FeatureKeepOnLeave (a rolling upgrade) apply no
// opLeave: a replica that leaves detaches its consumers, and what they
// held comes back, redelivered, for the others. A settlement of one of
// their deliveries after the replica stopped still reaches the group and
// ends the message, even though another consumer has it now.
func TestReplicatedLeaveWithoutKeepOnLeaveDetaches(t *testing.T) {
	_, qs, held := leaveHolding(t, true)
	waitUntil(t, "c's checkouts back on a", func() bool { st := qs["a"].Stats(); return st.Ready == 3 && st.Unacked == 0 })
	onA := queuetest.NewRecorder(100, false)
	if err := qs["a"].AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: onA, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "3 redelivered on a", func() bool { return onA.Len() == 3 })
	for _, e := range onA.Take() {
		if !e.Redelivered {
			t.Fatalf("%q delivered on a without the redelivered flag", e.Msg.Body)
		}
	}
	waitUntil(t, "c stopped", func() bool { return qs["c"].Replica().State == "Shutdown" })
	qs["c"].Settle(held[:1], queue.Ack)
	waitUntil(t, "c's ack of m0 applied on a", func() bool { st := qs["a"].Stats(); return st.Unacked == 2 })
}

// A replicated group's configs select fifoRules only once every member
// runs a build that applies them (Config.Features): until then the
// queue keeps the rules of before (reject-publish refuses at the limit),
// which an earlier build's members apply alike; a config proposed again
// then turns them on (the message that goes over the limit is taken, the
// next refused).
func TestReplicatedFifoRulesOnlyWhenEveryMemberHasThem(t *testing.T) {
	r := newReplicas(t, "a", "b", "c")
	var everyone atomic.Bool
	r.mu.Lock()
	r.fifo = func(members []string) bool { return everyone.Load() }
	r.mu.Unlock()
	p := quorum.Placement{Group: 1<<62 | 14, Members: []string{"a", "b", "c"}, Leader: "a"}
	decl := queue.Decl{VHost: "/", Name: "gated", Durable: true}
	qs := newMembers(t, r, p, decl, queue.Limits{MaxLength: 2, MaxLengthBytes: -1, Overflow: queue.RejectPublish})
	publish := func(body string) error {
		ch := make(chan error, 1)
		qs["b"].Type().Publish(&queue.Message{Body: []byte(body), Persistent: true}, []queue.Queue{qs["b"]}, nil, func(err error) { ch <- err })
		select {
		case err := <-ch:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("publish %s: no answer", body)
		}
		return nil
	}
	for i, want := range []error{nil, nil, quorum.ErrRejected} {
		if err := publish(fmt.Sprint(i)); !errors.Is(err, want) {
			t.Fatalf("publish %d with a member without fifoRules: %v, want %v", i, err, want)
		}
	}
	everyone.Store(true)
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })
	qs["a"].RefreshConfig()
	if err := qs["a"].Sync(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, quorum.ErrRejected} {
		if err := publish(fmt.Sprint("after-", i)); !errors.Is(err, want) {
			t.Fatalf("publish %d once every member has fifoRules: %v, want %v", i, err, want)
		}
	}
}

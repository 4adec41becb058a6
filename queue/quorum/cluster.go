package quorum

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/queue"
)

// A quorum queue in a cluster (issue 14) is a Raft group whose voters are
// the members of its Placement, each a node of the cluster running this
// type with the group's id. Every member applies the log and delivers to
// its own consumers; a member that does not lead forwards what it
// proposes to the leader (Config.Forward, Type.Forwarded there). A
// publish is confirmed when its enqueue is applied on the proposing
// member, so once a majority stored it.

// Placement is a replicated queue's replica set.
type Placement struct {
	// Group is the group's id, the same on every member.
	Group uint64
	// Members are the nodes holding a replica (their Config.NodeID).
	Members []string
	// Leader is the member that stands for election at once when the
	// group is new ("" none: raft's election timeout decides).
	Leader string
	// join: a replica added to a running group (JoinMember), which must
	// not bootstrap.
	join bool
}

// Has reports whether node is a member.
func (p *Placement) Has(node string) bool { return slices.Contains(p.Members, node) }

// NewMember creates this node's replica of a new replicated queue: the
// definition is stored, any data left under the group's id goes, and the
// group starts with the placement's members as its voters. It does not
// wait for a leader (the metadata group applies it on every member):
// the declaring node waits with Sync.
func (t *Type) NewMember(d queue.Decl, l queue.Limits, h queue.Hooks, p Placement) (*Queue, error) {
	if !p.Has(t.cfg.NodeID) {
		return nil, fmt.Errorf("quorum: node %s is not a member of group %d", t.cfg.NodeID, p.Group)
	}
	return t.create(d, l, h, func(uint64) uint64 { return p.Group }, &p)
}

// RecoverMember reopens this node's replica of a replicated queue after a
// restart (d.ID: its stored definition's). It does not wait for the
// group: the other members may not be up yet.
func (t *Type) RecoverMember(d queue.Decl, l queue.Limits, h queue.Hooks, p Placement) (*Queue, error) {
	if _, err := t.raftStore(); err != nil {
		return nil, err
	}
	if err := t.awaitLeft(p.Group); err != nil {
		return nil, err
	}
	q, err := t.open(d, l, h, p.Group, false, &p)
	if err == nil {
		t.awaitLeader(q)
	}
	return q, err
}

// Placement is the queue's replica set, nil for a one-voter group.
func (q *Queue) Placement() *Placement { return q.place }

// ReplicaState is what one member knows of its group.
type ReplicaState struct {
	Leader  string   // the leader's node, "" none known
	Members []string // the voters, sorted
	State   string   // this replica's raft state (Leader, Follower, Candidate, Shutdown)
	Applied uint64   // the last index applied here
}

// Replica reports this member's view of the group.
func (q *Queue) Replica() ReplicaState {
	_, id := q.r.LeaderWithID()
	rs := ReplicaState{Leader: string(id), State: q.r.State().String(), Applied: q.r.AppliedIndex()}
	if f := q.r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				rs.Members = append(rs.Members, string(s.ID))
			}
		}
	}
	sort.Strings(rs.Members)
	return rs
}

// Leads reports whether this replica is its group's leader.
func (q *Queue) Leads() bool { return q.r.State() == raft.Leader }

// LeaderNode is the node of the group's leader as this replica knows it
// ("" none known).
func (q *Queue) LeaderNode() string {
	_, id := q.r.LeaderWithID()
	return string(id)
}

// Counts are the queue's ready messages and its consumers on every node
// as this replica's applied state has them: queue.declare-ok's figures
// on the leader (rabbit_fifo's query_stat). A follower's lag behind the
// leader (what it has not applied yet), so a node that does not lead
// asks the leader (LeaderCounts there).
//
// query_stat counts rabbit_fifo's consumers map, which with single
// active consumer holds the active consumer only: the waiting ones are
// not counted (RabbitMQ 3.10 answers 1 for such a queue with 3
// consumers, where a classic queue answers 3). A consumer of this node
// that is gone here but whose cancel is not applied yet (basic.cancel-ok
// does not wait for it) is not counted either; a cancelled one that
// still holds messages is, until they are settled (RabbitMQ's too).
func (q *Queue) Counts() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	active := 0
	for _, c := range q.m.consumers {
		if c.cancelled {
			consumers++ // cancelled but holding messages: counted until they are settled, as RabbitMQ's
			continue
		}
		if c.node == q.typ.cfg.NodeID && q.consumers[c.key] == nil {
			// Cancelled here, the cancel not applied yet: one that acks
			// will hold what it holds now (a no-ack one's settles are on
			// their way).
			if c.out > 0 && q.cancelling[c.key] {
				consumers++
			}
			continue
		}
		active++
	}
	if q.m.cfg.SAC {
		active = min(active, 1)
	}
	// And a consumer per message basic.get took unsettled (rabbit_fifo's
	// once consumers, in its consumers map until the message is settled
	// or returned).
	return q.m.readyN, consumers + active + q.m.gotOut()
}

// DeclareCounts implements queue.DeclareCounter: the counts of a queue
// that is not replicated are Counts (this replica is its leader).
func (q *Queue) DeclareCounts() (messages, consumers int) { return q.Counts() }

// LeaderCounts is Counts of this node's replica of group if it leads
// the group; raft.ErrNotLeader and the leader it knows ("" none) if it
// does not, ErrNoGroup without a replica here.
func (t *Type) LeaderCounts(group uint64) (ready, consumers int, leader string, err error) {
	t.mu.Lock()
	q := t.queues[group]
	t.mu.Unlock()
	if q == nil {
		return 0, 0, "", ErrNoGroup
	}
	if !q.Leads() {
		return 0, 0, q.LeaderNode(), raft.ErrNotLeader
	}
	ready, consumers = q.Counts()
	return ready, consumers, t.cfg.NodeID, nil
}

// DetachDown runs on the leader: the consumers of nodes that running says
// are down are detached (what they held comes back with x-delivery-count
// raised), as rabbit_fifo does for a node that went down. Only the
// consumers the node had when this leader first saw it down go: a node
// that comes back attaches new ones before every leader has heard from
// it again, and reattaches nothing of before (its own reset detaches
// those). A detach that arrives late names the consumers it meant.
// The consumers of running nodes that are not voters are asked about
// (askOrphans).
func (q *Queue) DetachDown(running func(node string) bool) {
	q.detachDown(running, time.Now())
}

// detachDown is DetachDown at now (the orphans' clock; tests pass theirs).
func (q *Queue) detachDown(running func(node string) bool, now time.Time) {
	if q.r.State() != raft.Leader {
		q.mu.Lock()
		q.downKeys, q.orphans = nil, nil
		q.mu.Unlock()
		return
	}
	defer q.askOrphans(running, now)
	var keys []uint64
	q.mu.Lock()
	if q.downKeys == nil {
		q.downKeys = map[string]map[uint64]bool{}
	}
	for node := range q.downKeys {
		if running(node) {
			delete(q.downKeys, node)
		}
	}
	// A member first seen down: what basic.get checked out there goes
	// back (consumers' deliveries go back with their detach, below).
	var gets []string
	if q.place != nil {
		for _, node := range q.place.Members {
			if node == q.typ.cfg.NodeID || running(node) || q.downKeys[node] != nil {
				continue
			}
			seen := map[uint64]bool{}
			for _, o := range q.m.consumers {
				if o.node == node {
					seen[o.key] = true
				}
			}
			q.downKeys[node] = seen
			gets = append(gets, node)
		}
	}
	for _, c := range q.m.consumers {
		if c.node == q.typ.cfg.NodeID || running(c.node) {
			continue
		}
		seen := q.downKeys[c.node]
		if seen == nil {
			// First seen down: what it has now is what it had.
			seen = map[uint64]bool{}
			for _, o := range q.m.consumers {
				if o.node == c.node {
					seen[o.key] = true
				}
			}
			q.downKeys[c.node] = seen
		}
		if seen[c.key] && !q.detaching[c.key] {
			keys = append(keys, c.key)
		}
	}
	q.markDetaching(keys)
	q.mu.Unlock()
	for _, node := range gets {
		q.propose(opReturnGets, func(e *encoder) { e.str(node) }, nil)
	}
	q.proposeDetach(keys)
}

// markDetaching notes that this leader detaches keys (q.detaching), so
// that it does not propose their detach again meanwhile. Under q.mu.
func (q *Queue) markDetaching(keys []uint64) {
	if q.detaching == nil {
		q.detaching = map[uint64]bool{}
	}
	for _, k := range keys {
		q.detaching[k] = true
	}
}

// proposeDetach proposes the detach of each of keys (marked by
// markDetaching), each unmarked once its entry is done.
func (q *Queue) proposeDetach(keys []uint64) {
	for _, k := range keys {
		key := k
		q.propose(opDetach, func(e *encoder) { e.u64(key) }, &waiter{done: func(error) {
			q.mu.Lock()
			delete(q.detaching, key)
			q.mu.Unlock()
		}})
	}
}

// Queues lists the open replicated queues of this node.
func (t *Type) Queues() []*Queue {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Queue, 0, len(t.queues))
	for _, q := range t.queues {
		if q.place != nil {
			out = append(out, q)
		}
	}
	return out
}

// JoinMember opens this node's replica of an existing group it was just
// made a member of: it starts empty and never bootstraps; the leader
// sends it the log, or a snapshot with the messages' bodies, once it is
// added as a voter (ChangeMember on the leader).
func (t *Type) JoinMember(d queue.Decl, l queue.Limits, h queue.Hooks, p Placement) (*Queue, error) {
	p.Leader = ""
	p.join = true
	return t.NewMember(d, l, h, p)
}

// ChangeMember adds node (at addr) to group's voters, or removes it, on
// the group's leader; elsewhere it fails with raft.ErrNotLeader and
// leader, the leader this replica knows ("" none).
func (t *Type) ChangeMember(group uint64, add bool, node string, addr raft.ServerAddress) (leader string, err error) {
	t.mu.Lock()
	q := t.queues[group]
	t.mu.Unlock()
	if q == nil {
		return "", ErrNoGroup
	}
	if q.r.State() != raft.Leader {
		_, id := q.r.LeaderWithID()
		return string(id), raft.ErrNotLeader
	}
	if add {
		return "", q.r.AddVoter(raft.ServerID(node), addr, 0, forwardTimeout).Error()
	}
	return "", q.r.RemoveServer(raft.ServerID(node), 0, forwardTimeout).Error()
}

// HandOver gives group's leadership to another voter (raft picks the one
// most up to date) if this replica leads it, and waits for that: a
// member about to be removed steps aside first, so that the group has a
// leader throughout instead of waiting for an election timeout once the
// removed leader stops. Not leading: nothing to do.
func (t *Type) HandOver(group uint64) error {
	t.mu.Lock()
	q := t.queues[group]
	t.mu.Unlock()
	if q == nil {
		return ErrNoGroup
	}
	if q.r.State() != raft.Leader {
		return nil
	}
	return q.r.LeadershipTransfer().Error()
}

// handOverParallel bounds the leadership transfers HandOverAll runs at
// once.
const handOverParallel = 32

// HandOverAll gives the leadership of every replicated group this node
// leads to another voter (HandOver), several at a time, and waits for
// them until ctx ends: a node about to stop steps aside first. Its
// groups then have a leader throughout, and what their leader had in
// flight is committed by the new one, instead of waiting until this
// node's peers find it gone and elect. It reports how many groups it led
// and how many of them have a leader elsewhere now; a transfer still
// under way when ctx ends goes on until raft shuts down. A group none of
// whose other voters mayRun says may run (nil: all may) is not counted:
// there is no one to hand over to.
func (t *Type) HandOverAll(ctx context.Context, mayRun func(node string) bool) (led, moved int) {
	t.mu.Lock()
	var qs []*Queue
	for _, q := range t.queues {
		if q.place != nil && q.r.State() == raft.Leader {
			qs = append(qs, q)
		}
	}
	t.mu.Unlock()
	// A group of one voter, or whose other voters are down, has no one
	// to hand over to.
	qs = slices.DeleteFunc(qs, func(q *Queue) bool {
		f := q.r.GetConfiguration()
		if f.Error() != nil {
			return true
		}
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter && string(s.ID) != t.cfg.NodeID && (mayRun == nil || mayRun(string(s.ID))) {
				return false
			}
		}
		return true
	})
	if len(qs) == 0 {
		return 0, 0
	}
	sem := make(chan struct{}, handOverParallel)
	results := make(chan bool, len(qs))
	go func() {
		for _, q := range qs {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				defer func() { <-sem }()
				err := q.r.LeadershipTransfer().Error()
				results <- (err == nil || q.r.State() != raft.Leader) && q.awaitOtherLeader(ctx)
			}()
		}
	}()
	for range qs {
		select {
		case ok := <-results:
			if ok {
				moved++
			}
		case <-ctx.Done():
			return len(qs), moved
		}
	}
	return len(qs), moved
}

// awaitOtherLeader waits until this replica hears from a leader other
// than itself, or ctx ends. A transfer is done once this replica steps
// down, when the new leader may still be collecting its votes: the other
// replicas hear from it at about the time this one does, and then know
// that this node's going is not their leader's (cluster.Campaign would
// depose the new leader otherwise).
func (q *Queue) awaitOtherLeader(ctx context.Context) bool {
	for {
		if _, id := q.r.LeaderWithID(); id != "" && string(id) != q.typ.cfg.NodeID {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Leave stops this node's replica of a group it is no longer a member of
// and deletes its data; its consumers are returned for their channels to
// move them to the queue as served now (or to tell their clients).
//
// Their consumers keep what their channels were handed, as RabbitMQ's
// do when a member is deleted (their channels do not depend on it): an
// opLeave per consumer cancels it in the group, keeping those messages
// checked out to it until its channel settles them (Settle forwards to a
// member after the replica stopped) or its node is found down or
// restarts. The rest goes back, redelivered: what it holds refused, and
// what the leader checked out to it in entries this replica, no longer
// sent any, never applied (delivered to no channel, it would stay out for
// good). A group whose members lack FeatureKeepOnLeave detaches them
// instead (opDetach): everything goes back, redelivered, and what their
// channels hold comes again (at least once); a settlement of it still
// ends the message if nobody took it meanwhile.
//
// It returns at once: what the replica's proposer still holds, those
// commands included, is sent to the group's leader (a publish routed
// here just before is confirmed, not failed) before the replica stops
// and its data goes, on a goroutine.
func (q *Queue) Leave() []queue.ConsumerRef {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil
	}
	q.deleted = true
	keep := q.membersHave(FeatureKeepOnLeave)
	var refs []queue.ConsumerRef
	var kept []uint64 // its consumers that keep deliveries (Type.Holds)
	for key, lc := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: lc.tag, Consumer: lc.c})
		if !keep {
			q.propose(opDetach, func(e *encoder) { e.u64(key) }, nil)
			continue
		}
		// What this replica checked out to the consumer and handed to
		// it: every message the consumer owns here but those it holds
		// refused (never handed over). What the leader checked out to it
		// in entries not applied here goes back too.
		refused := make(map[uint64]bool, len(lc.held))
		for _, h := range lc.held {
			refused[h.m.id] = true
		}
		var ids []uint64
		for _, m := range q.m.ownedBy(key) {
			if !refused[m.id] {
				ids = append(ids, m.id)
			}
		}
		q.propose(opLeave, func(e *encoder) { e.u64(key); e.ids(ids) }, nil)
		kept = append(kept, key)
	}
	q.consumers = map[uint64]*local{}
	q.mu.Unlock()
	for _, key := range kept {
		q.typ.keep(q.gid, key)
	}
	others := q.otherMembers()
	q.pmu.Lock()
	q.leaving = true
	q.leftTo = others
	q.pmu.Unlock()
	left := make(chan struct{})
	t := q.typ
	t.mu.Lock()
	if t.leaving == nil {
		t.leaving = map[uint64]chan struct{}{}
	}
	t.leaving[q.gid] = left
	t.mu.Unlock()
	go func() {
		defer close(left)
		q.shutdown()
		q.dropData()
		// Kept a while for settlements of what it delivered (they
		// forward), it holds none of the queue's state meanwhile.
		q.mu.Lock()
		q.m = newMachine(q.m.cfg)
		q.reader = entryReader{}
		q.mu.Unlock()
		t.mu.Lock()
		if t.leaving[q.gid] == left {
			delete(t.leaving, q.gid)
		}
		t.mu.Unlock()
	}()
	return refs
}

// otherMembers lists the group's voters but this node, as its
// configuration and its placement name them.
func (q *Queue) otherMembers() []string {
	var out []string
	add := func(n string) {
		if n != q.typ.cfg.NodeID && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if _, id := q.r.LeaderWithID(); id != "" {
		add(string(id)) // the leader first: most likely to take it
	}
	if f := q.r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				add(string(s.ID))
			}
		}
	}
	if q.place != nil {
		for _, n := range q.place.Members {
			add(n)
		}
	}
	return out
}

// forwardLeft sends an entry of a replica that left its group to
// whichever of the members it knew leads the group now, until one takes
// it or deadline passes.
func (q *Queue) forwardLeft(data []byte, deadline time.Time) ([]byte, error) {
	q.pmu.Lock()
	to := q.leftTo
	q.pmu.Unlock()
	if len(to) == 0 || q.typ.cfg.Forward == nil {
		return nil, ErrNoLeader
	}
	err := ErrNoLeader
	for {
		for _, n := range to {
			ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
			var resp []byte
			resp, err = q.typ.cfg.Forward(ctx, n, q.gid, data)
			cancel()
			if err == nil {
				return resp, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settleLeft proposes a settlement of a replica that left its group
// (its channels still hold deliveries it made): as an entry of its own,
// forwarded to a member, on a goroutine.
func (q *Queue) settleLeft(op uint8, ids []uint64) {
	q.pmu.Lock()
	q.seq++
	seq := q.seq
	q.pmu.Unlock()
	var e encoder
	q.header(&e, 1)
	e.u8(op)
	e.u64(seq)
	e.ids(ids)
	go func() {
		if _, err := q.forwardLeft(e.b, time.Now().Add(leaderWait)); err != nil {
			q.typ.logErr(err, fmt.Sprintf("quorum queue %q: a settlement after this replica left its group was not taken", q.decl.Name))
		}
	}()
}

// NodeRestarted: node runs a new process (cluster.Options.PeerRestarted),
// perhaps too fast for this node to see it down. A member's replica
// resets its node's consumers as it opens (opResetNode2); a node that
// left a group has none there to, so every group this node leads detaches
// the consumers a node not among its voters still has (those a replica
// leaving let keep their deliveries: opLeave), giving back what they
// held, redelivered. It does not block.
func (t *Type) NodeRestarted(node string) {
	for _, q := range t.replicated() {
		if q.r.State() != raft.Leader {
			continue
		}
		var keys []uint64
		q.mu.Lock()
		for _, c := range q.m.consumers {
			if c.node == node {
				keys = append(keys, c.key)
			}
		}
		q.mu.Unlock()
		if len(keys) == 0 || q.hasVoter(node) {
			continue
		}
		for _, key := range keys {
			q.propose(opDetach, func(e *encoder) { e.u64(key) }, nil)
		}
	}
}

// hasVoter reports whether node is a voter of the group's configuration.
func (q *Queue) hasVoter(node string) bool {
	f := q.r.GetConfiguration()
	if f.Error() != nil {
		return true // not known: leave it be
	}
	return slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool {
		return s.Suffrage == raft.Voter && string(s.ID) == node
	})
}

// PeerLost: node's process is gone (cluster.Options.PeerLost). Every
// group here that node led stands for election now, one surviving voter
// first (cluster.Campaign), instead of after raft's heartbeat and
// election timeouts: publishing to its queue resumes in milliseconds.
// It does not block.
func (t *Type) PeerLost(node string) {
	for _, q := range t.replicated() {
		if _, id := q.r.LeaderWithID(); string(id) != node && id != "" {
			continue
		}
		go cluster.Campaign(q.r, t.cfg.NodeID, node, q.ledTerm(node), cluster.CampaignStagger, q.done, q.standNow)
	}
}

// PeerDown: node stopped answering this node's probes, and its process
// is not known to be gone (cluster.Options.PeerDown): it hangs (SIGSTOP,
// a stalled machine) or is cut off from here. Every group here that
// node leads stands for election, one surviving voter first
// (cluster.Campaign), if this node sees a majority of the group's voters
// running (itself included; running says which): a replica cut off
// with the leader must not stand, as its raised term would depose the
// leader when the cut heals. The groups' own raft timeouts (Config.Timeout,
// 5 s in a cluster, kept long so that an idle group wakes rarely) are
// the fallback. A group with no leader known is electing one already,
// and is left alone. It does not block; it returns how many groups may
// stand (Campaign decides, in its goroutine, whether this replica does).
func (t *Type) PeerDown(node string, running func(node string) bool) int {
	n := 0
	for _, q := range t.replicated() {
		if _, id := q.r.LeaderWithID(); string(id) != node || !majorityRunning(q.r, running) {
			continue
		}
		n++
		go cluster.Campaign(q.r, t.cfg.NodeID, node, q.ledTerm(node), cluster.CampaignStagger, q.done, q.standNow)
	}
	return n
}

// majorityRunning reports whether running counts a majority of r's
// voters.
func majorityRunning(r *raft.Raft, running func(node string) bool) bool {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters, up := 0, 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if running(string(s.ID)) {
			up++
		}
	}
	return up > voters/2
}

// replicated lists the queues of this node that are replicas of a
// cluster's group.
func (t *Type) replicated() []*Queue {
	t.mu.Lock()
	defer t.mu.Unlock()
	var qs []*Queue
	for _, q := range t.queues {
		if q.place != nil {
			qs = append(qs, q)
		}
	}
	return qs
}

// ConsumerHold is one consumer of a quorum queue as its machine has it:
// for diagnostics (tests, logs).
type ConsumerHold struct {
	Key       uint64
	Node      string
	Out       int    // messages checked out to it
	Cancelled bool   // basic.cancel applied; it goes once it holds nothing
	Tag       string // "" for a consumer of another node (or gone here)
}

// ConsumerHolds lists the machine's consumers, in attach order.
func (q *Queue) ConsumerHolds() []ConsumerHold {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]ConsumerHold, 0, len(q.m.consumers))
	for _, c := range q.m.consumers {
		h := ConsumerHold{Key: c.key, Node: c.node, Out: c.out, Cancelled: c.cancelled}
		if lc := q.consumers[c.key]; lc != nil {
			h.Tag = lc.tag
		}
		out = append(out, h)
	}
	return out
}

// watchLeaders has raft tell this type when a replica of a cluster's
// group sees its leader change (or learns of none), so that an entry
// being forwarded to the old leader is given up at once (forwardCtx)
// instead of after forwardTimeout: a hung leader's followers elect
// another in 2 to 3 s (PeerDown), and their publishes go there then.
// One goroutine for every replica of the node; a change the buffer
// cannot take is missed, and its forwards wait for their timeout.
func (t *Type) watchLeaders(q *Queue) {
	t.obsOnce.Do(func() {
		t.obs = make(chan raft.Observation, 256)
		stop := make(chan struct{})
		t.mu.Lock()
		t.obsStop = stop
		t.mu.Unlock()
		go func() {
			for {
				select {
				case o := <-t.obs:
					t.mu.Lock()
					q := t.byRaft[o.Raft]
					t.mu.Unlock()
					if q != nil {
						q.leaderChanged()
					}
				case <-stop:
					return
				}
			}
		}()
	})
	q.obs = raft.NewObserver(t.obs, false, func(o *raft.Observation) bool {
		lo, ok := o.Data.(raft.LeaderObservation)
		if ok && lo.LeaderID != "" {
			// On raft's goroutine, as it sets the leader: the term is
			// the leader's (raft sets the term first).
			q.seen.Store(&leaderSeen{id: string(lo.LeaderID), term: o.Raft.CurrentTerm()})
		}
		return ok
	})
	t.mu.Lock()
	t.byRaft[q.r] = q
	t.mu.Unlock()
	q.r.RegisterObserver(q.obs)
}

// unwatchLeaders undoes watchLeaders for q, stopping.
func (t *Type) unwatchLeaders(q *Queue) {
	if q.obs == nil {
		return
	}
	q.r.DeregisterObserver(q.obs)
	t.mu.Lock()
	delete(t.byRaft, q.r)
	t.mu.Unlock()
}

// leaderSeen is a leader a replica knew, and the term it led in.
type leaderSeen struct {
	id   string
	term uint64
}

// ledTerm is the term in which this replica last knew node as its
// leader, 0 if it did not (cluster.Campaign's lostTerm).
func (q *Queue) ledTerm(node string) uint64 {
	if s := q.seen.Load(); s != nil && s.id == node {
		return s.term
	}
	return 0
}

// leaderChanged gives up the forwards under way (forwardCtx).
func (q *Queue) leaderChanged() {
	q.lmu.Lock()
	defer q.lmu.Unlock()
	if q.lcancel != nil {
		q.lcancel()
	}
	q.lctx, q.lcancel = context.WithCancel(context.Background())
}

// forwardCtx bounds an entry forwarded to the leader this replica knows:
// it ends after forwardTimeout, or when the replica sees the leader
// change. Take it before reading the leader.
func (q *Queue) forwardCtx() (context.Context, context.CancelFunc) {
	q.lmu.Lock()
	if q.lctx == nil {
		q.lctx, q.lcancel = context.WithCancel(context.Background())
	}
	parent := q.lctx
	q.lmu.Unlock()
	return context.WithTimeout(parent, forwardTimeout)
}

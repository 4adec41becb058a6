package server

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// Quorum queues in a cluster (issue 14): the metadata group's record of a
// quorum queue names its members (the nodes holding a replica, chosen by
// the declaring node: itself first, then running nodes) and the member
// that leads first (x-queue-leader-locator). Every node applies the
// record; a member opens its replica of the queue's Raft group (group id
// quorumGroupBase | the record's incarnation, the same on every node;
// transport "q<id>" over the cluster listener), a node that is not a
// member gets a stand-in that forwards to a member, as for a classic
// queue's home. Members forward what they propose to the group's leader
// ("quorum.apply"). The leader of each group detaches the consumers of
// nodes that are down, so what they held is delivered again.

// quorumGroupBase marks the Raft group ids of replicated quorum queues in
// a node's Raft store: their ids are this bit and the metadata
// incarnation, apart from the ids of one node's queues (store ids).
const quorumGroupBase = quorum.ReplicatedGroups

// defaultQuorumSize is RabbitMQ's default x-quorum-initial-group-size.
const defaultQuorumSize = 3

// quorumReconcile is how often each leader looks for consumers of nodes
// that are down (also at every membership change).
const quorumReconcile = time.Second

// replicaRetrySpacing is how long retryReplicas waits before it asks
// again for a replica of this node that did not open; tests shorten it.
var replicaRetrySpacing = time.Minute

// quorumBootstrapWait is quorum.Config.BootstrapWait (0: its default);
// tests lengthen it.
var quorumBootstrapWait time.Duration

// startGrace is how long a node just started takes the members it has
// not heard from yet for running.
var startGrace = 15 * time.Second // a var for the tests

func quorumGroupName(gid uint64) string { return fmt.Sprintf("q%x", gid) }

// clusterQuorumConfig fills in what the quorum type needs in a cluster.
func (s *Server) clusterQuorumConfig(c *quorum.Config) {
	c.NodeID = s.cfg.Cluster.NodeName
	// An idle group's leader wakes for each follower every tenth of the
	// heartbeat timeout (raft's heartbeat) and every commit timeout or up
	// to twice that (raft's AppendEntries of nothing); with a thousand
	// queues those wakeups are most of what a node does at rest. So the
	// groups' timeouts are long, and raft's own (5 to 10 s) only the
	// fallback: a stopping leader hands over first (handOverQuorum), a
	// dead one is replaced at once (PeerLost), a hung or cut-off one once
	// two probe rounds in a row went unanswered (PeerDown, 2 to 3 s).
	// Followers learn the commit index after each entry anyway (the
	// nudges), not from the commit timeout, so it is longer still: 10 s
	// took 1,000 idle queues from 11.7% of a core per node to 8.8%. What
	// it still does is bring an idle queue's follower that missed entries
	// (cut off, then healed) up to date; a restarted one proposes its
	// reset, a new entry, as it opens.
	c.Timeout = 5 * time.Second
	c.CommitTimeout = 10 * time.Second
	c.BootstrapWait = quorumBootstrapWait
	c.Features = func(f string, members []string) bool { return s.meta.hasFeature(f, members) }
	// When a node dies, every group it was a member of fails to reach
	// it: one rate-limited warning, not an error per group and retry.
	c.RaftLogger = cluster.NewRaftLogger(s.log, hclog.Error).Named("quorum")
	c.Transport = func(gid uint64) (raft.ServerAddress, raft.Transport, error) {
		n := s.cluster
		if n == nil {
			return "", nil, errClusterDown
		}
		t, err := n.Transport(quorumGroupName(gid))
		if err != nil {
			return "", nil, err
		}
		t.SetHeartbeatTimeout(c.Timeout)
		return raft.ServerAddress(n.Addr()), t, nil
	}
	c.Addr = func(node string) (raft.ServerAddress, bool) {
		n := s.cluster
		if n == nil {
			return "", false
		}
		for _, m := range n.Members() {
			if m.Name == node {
				return raft.ServerAddress(m.Addr), true
			}
		}
		return "", false
	}
	c.Forward = func(ctx context.Context, node string, gid uint64, data []byte) ([]byte, error) {
		n := s.cluster
		if n == nil {
			return nil, errClusterDown
		}
		req := make([]byte, 8, 8+len(data))
		binary.BigEndian.PutUint64(req, gid)
		return n.Call(ctx, node, "quorum.apply", append(req, data...))
	}
	c.Holds = func(ctx context.Context, node string, gid uint64, keys []uint64) ([]uint64, error) {
		n := s.cluster
		if n == nil {
			return nil, errClusterDown
		}
		resp, err := n.Call(ctx, node, "quorum.holds", encodeUint64s(append([]uint64{gid}, keys...)))
		if err != nil {
			return nil, err
		}
		return decodeUint64s(resp)
	}
	c.Views = func(ctx context.Context, node string, gids []uint64) ([]cluster.View, error) {
		n := s.cluster
		if n == nil {
			return nil, errClusterDown
		}
		resp, err := n.Call(ctx, node, "quorum.views", encodeUint64s(gids))
		if err != nil {
			return nil, err
		}
		return cluster.DecodeViews(resp)
	}
}

// encodeUint64s and decodeUint64s: quorum.holds' request (the group id,
// then consumer keys) and answer (keys), and quorum.views' request (group
// ids), 8 bytes each, big-endian.
func encodeUint64s(vs []uint64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decodeUint64s(b []byte) ([]uint64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes: not a list of 8-byte numbers", len(b))
	}
	vs := make([]uint64, 0, len(b)/8)
	for ; len(b) > 0; b = b[8:] {
		vs = append(vs, binary.BigEndian.Uint64(b))
	}
	return vs, nil
}

// startQuorumCluster serves forwarded entries and starts the leaders'
// reconciliation.
func (s *Server) startQuorumCluster(n *cluster.Node) {
	n.Handle("quorum.apply", func(_ context.Context, _ string, req []byte) ([]byte, error) {
		if len(req) < 8 {
			return nil, errors.New("short quorum.apply")
		}
		return s.quorum.Forwarded(binary.BigEndian.Uint64(req), req[8:])
	})
	n.Handle("quorum.bootstrap", func(_ context.Context, _ string, req []byte) ([]byte, error) {
		if len(req) != 8 {
			return nil, errors.New("quorum.bootstrap: a group id is 8 bytes")
		}
		s.quorum.BootstrapNow(binary.BigEndian.Uint64(req))
		return nil, nil
	})
	n.Handle("quorum.member", s.whenReady(s.handleMember))
	// A leader asks which consumers of a group this node still holds
	// (quorum.Type.Holds); only once ready: its replicas are open then.
	n.Handle("quorum.holds", s.whenReady(func(_ context.Context, _ string, req []byte) ([]byte, error) {
		vs, err := decodeUint64s(req)
		if err != nil || len(vs) == 0 {
			return nil, fmt.Errorf("quorum.holds: %d bytes: want a group id and keys", len(req))
		}
		return encodeUint64s(s.quorum.Holds(vs[0], vs[1:])), nil
	}))
	// A replica reopened after a restart asks what this node knows of
	// its groups (quorum.Type.Views). Not only once ready: a whole
	// cluster's nodes reopen their replicas as they catch up, and they
	// elect their leaders meanwhile.
	n.Handle("quorum.views", func(_ context.Context, from string, req []byte) ([]byte, error) {
		gids, err := decodeUint64s(req)
		if err != nil {
			return nil, fmt.Errorf("quorum.views: %w", err)
		}
		return cluster.EncodeViews(s.quorum.Views(from, gids)), nil
	})
	n.Handle("quorum.stat", s.whenReady(s.handleQuorumStat))
	s.clusterWG.Add(1)
	go func() {
		defer s.clusterWG.Done()
		ch := n.Watch(s.clusterCtx)
		t := time.NewTicker(quorumReconcile)
		defer t.Stop()
		// A node not heard from yet is not down: right after this node
		// started, the probes have not reached everyone, and a leader that
		// took them for down would detach live consumers. Down is a node
		// seen running that stopped answering, or one silent past
		// startGrace.
		started := time.Now()
		seenUp := map[string]bool{}
		tried := map[qkey]time.Time{}
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-t.C:
			case <-s.clusterCtx.Done():
				return
			}
			running := map[string]bool{}
			grace := time.Since(started) < startGrace
			for _, m := range n.Members() {
				if m.Running {
					seenUp[m.Name] = true
				}
				// A node restarted fast runs as soon as its new
				// process's handshake reached this one (cluster's
				// sawPeer), before its clients' attaches can.
				running[m.Name] = m.Running || (grace && !seenUp[m.Name])
			}
			for _, q := range s.quorum.Queues() {
				q.DetachDown(func(node string) bool { return running[node] })
			}
			up := map[string]bool{}
			for _, m := range n.Members() {
				up[m.Name] = m.Running
			}
			s.repointStandIns(up)
			s.retryReplicas(tried)
		}
	}()
}

// repointStandIns gives a quorum queue's stand-in (on a node without a
// replica) a new member to forward to when its own is down or no longer
// a member, or stopped while it had consumers (lost): a running member,
// in the record's order. The new stand-in takes the old one's place in
// the vhost (routing finds queues by name), and the old one's consumers
// move to it.
func (s *Server) repointStandIns(up map[string]bool) {
	for _, v := range s.vhostList() {
		v.mu.Lock()
		for name, r := range v.replicas {
			rq, ok := v.queues[name].(*remoteQueue)
			if !ok || rq.typ != s.remote.quorumType || rq.ghost || len(r.members) == 0 {
				continue
			}
			if up[rq.home] && slices.Contains(r.members, rq.home) && !rq.lost.Load() {
				continue
			}
			i := slices.IndexFunc(r.members, func(m string) bool { return up[m] && m != s.meta.self })
			if i < 0 {
				continue
			}
			nq := newRemoteQueue(v, rq.decl, r.members[i])
			nq.typ = s.remote.quorumType
			v.queues[name] = nq
			s.log.Info().Str("vhost", v.name).Str("queue", name).Str("from", rq.home).Str("to", nq.home).Msg("quorum queue without a replica here: now served through another member")
			v.moveConsumers(name, rq, rq.consumerRefs())
		}
		v.mu.Unlock()
	}
}

// failedReplica is the stand-in of a member whose replica did not open:
// it forwards to another member until retryReplicas opens the replica.
func (m *meta) failedReplica(v *vhost, d queue.Decl, r *replica) *remoteQueue {
	home := ""
	for _, n := range r.members {
		if n != m.self {
			home = n
			break
		}
	}
	rq := newRemoteQueue(v, d, home)
	rq.typ = m.s.remote.quorumType
	return rq
}

// retryReplicas asks again for the replicas of this node that failed to
// open (a stand-in where the record names this node a member): an add of
// this node, which it applies by opening the replica as a member its
// group's leader already has (it catches up). At most once a minute
// (replicaRetrySpacing) per queue (tried: when).
func (s *Server) retryReplicas(tried map[qkey]time.Time) {
	type ask struct {
		vhost, name string
		inc         uint64
	}
	var asks []ask
	for _, v := range s.vhostList() {
		v.mu.RLock()
		for name, r := range v.replicas {
			rq, ok := v.queues[name].(*remoteQueue)
			if !ok || rq.typ != s.remote.quorumType || !slices.Contains(r.members, s.meta.self) {
				continue
			}
			k := qkey{v.name, name}
			if time.Since(tried[k]) < replicaRetrySpacing {
				continue
			}
			tried[k] = time.Now()
			asks = append(asks, ask{v.name, name, r.inc})
		}
		v.mu.RUnlock()
	}
	for _, a := range asks {
		if _, err := s.propose(&metaCmd{Op: opQuorumAdd, VHost: a.vhost, Name: a.name, Inc: a.inc, Node: s.meta.self, System: true}); err != nil {
			s.log.Warn().Err(err).Str("vhost", a.vhost).Str("queue", a.name).Msg("asking to open this node's quorum replica again failed")
		}
	}
}

// quorumPlacement chooses a new quorum queue's members and first leader,
// on the declaring node: this node first, then the other nodes (running
// ones first) in an order rotated by the queue's name (so that queues
// spread), up to x-quorum-initial-group-size (default 3, or fewer
// nodes).
func (s *Server) quorumPlacement(vhost, name string, args map[string]any) (members []string, lead string) {
	size := defaultQuorumSize
	if v, ok := queue.IntValue(args["x-quorum-initial-group-size"]); ok && v > 0 {
		size = int(v)
	}
	self := s.cfg.Cluster.NodeName
	var up, down []string
	if n := s.cluster; n != nil {
		for _, m := range n.Members() {
			switch {
			case m.Name == self:
			case m.Running:
				up = append(up, m.Name)
			default:
				down = append(down, m.Name)
			}
		}
	}
	rotate := func(ns []string) []string {
		slices.Sort(ns)
		if len(ns) == 0 {
			return ns
		}
		h := fnv.New32a()
		h.Write([]byte(vhost + "\x00" + name))
		k := int(h.Sum32() % uint32(len(ns)))
		return append(ns[k:], ns[:k]...)
	}
	// Running nodes first; a node not heard from lately (just started,
	// or down) still gets its replica when it applies the record.
	others := append(rotate(up), rotate(down)...)
	members = append([]string{self}, others...)
	if len(members) > size {
		members = members[:size]
	}
	lead = self
	if loc, _ := args["x-queue-leader-locator"].(string); loc == "balanced" {
		lead = s.leastLeading(members)
	}
	return members, lead
}

// leastLeading is the member leading the fewest quorum queues this node
// knows of (ties: the first).
func (s *Server) leastLeading(members []string) string {
	count := map[string]int{}
	for _, q := range s.quorum.Queues() {
		count[q.Replica().Leader]++
	}
	best := members[0]
	for _, m := range members[1:] {
		if count[m] < count[best] {
			best = m
		}
	}
	return best
}

// isQuorumDecl reports whether a declaration is of a quorum queue.
func isQuorumDecl(args map[string]any) bool {
	t, _ := args["x-queue-type"].(string)
	return t == "quorum"
}

// placementOf is a replicated quorum queue's placement.
func (r *replica) placementOf() quorum.Placement {
	return quorum.Placement{Group: quorumGroupBase | r.inc, Members: r.members, Leader: r.lead}
}

// newQuorumReplica makes a quorum queue's replica here (a member), or its
// stand-in (not a member: it forwards to the first member). v.mu is held.
func (m *meta) newQuorumReplica(v *vhost, d queue.Decl, l queue.Limits, r *replica) (queue.Queue, error) {
	p := r.placementOf()
	if !p.Has(m.self) {
		home := r.lead
		if home == "" && len(r.members) > 0 {
			home = r.members[0]
		}
		rq := newRemoteQueue(v, d, home)
		rq.typ = m.s.remote.quorumType
		m.s.log.Info().Str("vhost", v.name).Str("queue", d.Name).Strs("members", r.members).Msg("quorum queue without a replica here: served by its members")
		return rq, nil
	}
	k := qkey{v.name, d.Name}
	if st, ok := m.stash[k]; ok {
		delete(m.stash, k)
		if st.inc == r.inc {
			d.ID = st.rec.ID
			q, err := m.s.quorum.RecoverMember(d, l, v.hooks, p)
			if err == nil {
				m.incs[k] = r.inc
				m.s.log.Info().Str("vhost", v.name).Str("queue", d.Name).Strs("members", r.members).Msg("quorum replica reopened")
				return q, nil
			}
			m.s.log.Warn().Err(err).Str("queue", d.Name).Msg("reopening a quorum replica failed: it starts empty and catches up")
		}
		// An older incarnation's replica: its data goes.
		if rs := m.s.quorum.Store(); rs != nil {
			rs.DeleteGroup(quorumGroupBase | st.inc)
		}
		if st.rec.ID != 0 {
			m.s.store.DeleteQueue(st.rec.VHost, st.rec.Name, st.rec.ID)
		}
	}
	var q *quorum.Queue
	err := m.s.openReplicaFault(v.name, d.Name)
	if err == nil {
		q, err = m.s.quorum.NewMember(d, l, v.hooks, p)
	}
	if err != nil {
		// The other members have theirs: this node serves the queue
		// through them, and the reconcile loop opens its replica again
		// (retryReplicas).
		m.s.log.Error().Err(err).Str("vhost", v.name).Str("queue", d.Name).Strs("members", r.members).Msg("quorum replica not opened here: served through the other members until it is")
		if p.Leader == m.self {
			// The group's first leader: its members would wait for it.
			m.s.askBootstrap(p)
		}
		return m.failedReplica(v, d, r), nil
	}
	m.incs[k] = r.inc
	m.saveIncarnations()
	m.s.log.Info().Str("vhost", v.name).Str("queue", d.Name).Strs("members", r.members).Str("leader", r.lead).Msg("quorum replica created")
	return q, nil
}

// askBootstrap asks the other members of a new group, whose first
// leader this node is and whose replica did not open here, to bootstrap
// it now (quorum.Type.BootstrapNow) rather than after waiting for this
// node. It does not block; a member that cannot be asked (an earlier
// build answers an unknown method) bootstraps after its wait.
func (s *Server) askBootstrap(p quorum.Placement) {
	n := s.cluster
	if n == nil {
		return
	}
	req := binary.BigEndian.AppendUint64(nil, p.Group)
	for _, node := range p.Members {
		if node == s.cfg.Cluster.NodeName {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(s.clusterCtx, askBootstrapTimeout)
			defer cancel()
			if _, err := n.Call(ctx, node, "quorum.bootstrap", req); err != nil {
				s.log.Debug().Err(err).Str("peer_node", node).Msg("asking a member to bootstrap a quorum queue's group failed: it does after its wait")
			}
		}()
	}
}

// askBootstrapTimeout bounds asking one member to bootstrap a group.
const askBootstrapTimeout = 5 * time.Second

// openReplicaFault is the error a test makes opening this node's replica
// of a quorum queue fail with (Server.openReplicaHook); nil in
// production, where the hook is nil.
func (s *Server) openReplicaFault(vhost, name string) error {
	if s.openReplicaHook == nil {
		return nil
	}
	return s.openReplicaHook(vhost, name)
}

// awaitQuorum waits, on the declaring node, until a new quorum queue's
// group has a leader and applied what was proposed (so declare-ok means
// a publish is taken at once).
func awaitQuorum(q queue.Queue) error {
	qq, ok := q.(*quorum.Queue)
	if !ok {
		return nil
	}
	if err := qq.Sync(); err != nil {
		return amqp.Errorf(amqp.InternalError, 0, 0, "quorum queue '%s' in vhost '%s' has no leader: %v", qq.Decl().Name, qq.Decl().VHost, err)
	}
	return nil
}

// QuorumReplicaInfo is a quorum queue's leader and replicas as this node
// knows them (cluster_status).
type QuorumReplicaInfo struct {
	VHost, Name, Leader string
	Members, Online     []string
}

// standInAsk bounds how long QuorumReplicas waits for the members that
// its stand-ins forward to to name their leaders.
const standInAsk = time.Second

// QuorumReplicas lists every quorum queue's leader and replicas as this
// node knows them. Where it has no replica, the member its stand-in
// forwards to names the leader: all of them are asked at once, and what
// has not answered within standInAsk keeps the leader it named before
// ("" for none), so it answers while peers do not.
func (s *Server) QuorumReplicas() []QuorumReplicaInfo {
	type entry struct {
		v *vhost
		q queue.Queue
	}
	var qs []entry
	var standIns []*remoteQueue
	for _, v := range s.vhostList() {
		for _, q := range v.queueList() {
			if q.Type().Info().Name != "quorum" {
				continue
			}
			qs = append(qs, entry{v, q})
			if rq, ok := q.(*remoteQueue); ok && !rq.ghost {
				standIns = append(standIns, rq)
			}
		}
	}
	if len(standIns) > 0 {
		// Up to 32 asks at a time; none starts after the deadline, so a
		// member that does not answer holds up no more than those.
		done, late := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			sem := make(chan struct{}, 32)
		ask:
			for _, rq := range standIns {
				select {
				case sem <- struct{}{}:
				case <-late:
					break ask
				}
				wg.Go(func() {
					defer func() { <-sem }()
					rq.Stats() // caches the leader its member names
				})
			}
			wg.Wait()
		}()
		t := time.NewTimer(standInAsk)
		select {
		case <-done:
		case <-t.C:
			close(late)
		}
		t.Stop()
	}
	var out []QuorumReplicaInfo
	for _, e := range qs {
		qi := QueueInfo{VHost: e.v.name, Name: e.q.Decl().Name}
		s.replicaInfo(e.v, e.q, &qi)
		if qi.Members == nil {
			// A single node's quorum queue: its one replica is here.
			self := s.NodeName()
			qi.Leader, qi.Members, qi.Online = self, []string{self}, []string{self}
		}
		out = append(out, QuorumReplicaInfo{VHost: qi.VHost, Name: qi.Name, Leader: qi.Leader, Members: qi.Members, Online: qi.Online})
	}
	slices.SortFunc(out, func(a, b QuorumReplicaInfo) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// replicaInfo adds a replicated quorum queue's leader and replicas to qi.
func (s *Server) replicaInfo(v *vhost, q queue.Queue, qi *QueueInfo) {
	var members []string
	switch qq := q.(type) {
	case *quorum.Queue:
		if qq.Placement() == nil {
			return
		}
		rs := qq.Replica()
		qi.Leader, members = rs.Leader, rs.Members
		if len(members) == 0 || qi.Leader == "" {
			// A member that has not heard from its group yet (just
			// declared, or restarted): the record's members, and the
			// first leader.
			v.mu.RLock()
			if r := v.replicas[qq.Decl().Name]; r != nil {
				if len(members) == 0 {
					members = slices.Clone(r.members)
					slices.Sort(members)
				}
				if qi.Leader == "" {
					qi.Leader = r.lead
				}
			}
			v.mu.RUnlock()
		}
	case *remoteQueue:
		// A node without a replica: the members are the record's, the
		// leader the one its member named (queueInfo's Stats just asked).
		if qq.typ != s.remote.quorumType {
			return
		}
		qi.Leader = qq.lastLeader()
		v.mu.RLock()
		if r := v.replicas[qq.decl.Name]; r != nil {
			members = slices.Clone(r.members)
		}
		v.mu.RUnlock()
		slices.Sort(members)
	default:
		return
	}
	qi.Members = members
	running := map[string]bool{}
	if n := s.cluster; n != nil {
		for _, m := range n.Members() {
			running[m.Name] = m.Running
		}
	}
	for _, m := range members {
		if running[m] {
			qi.Online = append(qi.Online, m)
		}
	}
}

// quorumStatTimeout bounds asking a quorum queue's leader for its counts
// (RabbitMQ's stat/1 waits 250 ms for its leader's, then answers 0, 0;
// here the asking replica's own counts are the answer then).
const quorumStatTimeout = time.Second

// replicatedCounts are quorumCounts of q if it is this node's replica of
// a replicated quorum queue (ok), nothing otherwise.
func (s *Server) replicatedCounts(q queue.Queue) (ready, consumers int, ok bool) {
	qq, ok := q.(*quorum.Queue)
	if !ok || qq.Placement() == nil {
		return 0, 0, false
	}
	ready, consumers = s.quorumCounts(qq)
	return ready, consumers, true
}

// quorumCounts are a replicated quorum queue's queue.declare-ok and
// queue.delete-ok figures: its ready messages and its consumers on every
// node, as its leader has them (RabbitMQ's rabbit_quorum_queue:stat asks
// the leader). A follower's own lag the publishes confirmed through
// other nodes (they are confirmed once the leader applied them), so it
// asks the leader ("quorum.stat"), or another member to ask it; when
// none answers, its own.
func (s *Server) quorumCounts(q *quorum.Queue) (ready, consumers int) {
	if q.Leads() {
		return q.Counts()
	}
	self, gid := s.meta.self, q.GroupID()
	leader := q.LeaderNode()
	if leader != "" && leader != self {
		if r, c, err := s.askQuorumStat(leader, gid, false); err == nil {
			return r, c
		}
	}
	// No leader known here (a replica just created or restarted has not
	// heard from it yet: a new one knows no voters either, a restarted
	// one has applied nothing of its log), or it did not answer: a member
	// that knows the leader asks it.
	members := q.Replica().Members
	for _, m := range q.Placement().Members {
		if !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	for _, m := range members {
		if m == self || m == leader {
			continue
		}
		if r, c, err := s.askQuorumStat(m, gid, true); err == nil {
			return r, c
		}
	}
	return q.Counts()
}

// askQuorumStat asks node for the counts of quorum group gid; relay: a
// node that does not lead it asks the leader it knows (a stand-in asks
// its member, which may not lead).
func (s *Server) askQuorumStat(node string, gid uint64, relay bool) (ready, consumers int, err error) {
	n := s.cluster
	if n == nil {
		return 0, 0, errClusterDown
	}
	req := binary.BigEndian.AppendUint64(make([]byte, 0, 9), gid)
	req = append(req, b2u(relay))
	ctx, cancel := context.WithTimeout(s.clusterCtx, quorumStatTimeout)
	defer cancel()
	out, err := n.Call(ctx, node, "quorum.stat", req)
	if err != nil {
		return 0, 0, err
	}
	r := rbuf{b: out}
	ready, consumers = int(r.uv()), int(r.uv())
	return ready, consumers, r.err
}

// handleQuorumStat is "quorum.stat": the counts of a group this node
// leads; with relay set, a member that does not lead asks the leader.
func (s *Server) handleQuorumStat(_ context.Context, _ string, req []byte) ([]byte, error) {
	if len(req) < 9 {
		return nil, errShortRPC
	}
	gid, relay := binary.BigEndian.Uint64(req), req[8] == 1
	ready, consumers, leader, err := s.quorum.LeaderCounts(gid)
	if errors.Is(err, raft.ErrNotLeader) && relay && leader != "" && leader != s.meta.self {
		ready, consumers, err = s.askQuorumStat(leader, gid, false)
	}
	if err != nil {
		return nil, err
	}
	var w wbuf
	w.uv(uint64(ready))
	w.uv(uint64(consumers))
	return w.b, nil
}

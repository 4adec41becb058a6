package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// Quorum queue membership, as rabbitmq-queues has it: add_member,
// delete_member, grow, shrink. The replica set is the metadata record's
// (opQuorumMembers: every node applies it, a node added opens an empty
// replica, a node removed drops its replica for a stand-in); the group's
// voters are changed on its leader ("quorum.member": raft's AddVoter or
// RemoveServer): after the record for an added node, so that a voter
// added has its replica open; before the record for a removed node (a
// leader hands its leadership over first), so that the group keeps a
// leader and a majority while the node's replica stops.

// Membership commands (Name, Inc, Node): the new members are computed in
// Apply, from the record as every node has it.
const (
	opQuorumAdd    = "quorum.add"
	opQuorumRemove = "quorum.remove"
)

// errLastMember: a quorum queue keeps at least one member.
var errLastMember = errors.New("cannot remove the last member of a quorum queue")

// memberChangeTimeout bounds one membership change on the group's leader.
const memberChangeTimeout = 30 * time.Second

// Errors of membership changes, worded as rabbitmq-queues prints them.
var (
	// ErrNotQuorum: the queue is not a quorum queue.
	ErrNotQuorum = errors.New("Cannot add members to a classic queue")
	// ErrNodeNotRunning: the node named is not a running member of the
	// cluster.
	ErrNodeNotRunning = errors.New("node_not_running")
	// ErrNodeLacksFeature: the node runs an earlier build, without a
	// feature every member of the queue's group has (a rolling upgrade
	// not done yet): as a replica it would apply the group's log by the
	// earlier rules (cluster_features.go).
	ErrNodeLacksFeature = errors.New("node_lacks_feature")
	// ErrNoCluster: membership needs a cluster.
	ErrNoCluster = errors.New("not a cluster: a single node's quorum queues have one replica")
)

// MemberChange is one queue's result in grow or shrink.
type MemberChange struct {
	VHost, Name string
	Size        int    // members after the change
	Result      string // "ok" or the error
}

// quorumRecord finds a replicated quorum queue's record.
func (s *Server) quorumRecord(vhost, name string) (*vhost, *replica, error) {
	if !s.clustered() {
		return nil, nil, ErrNoCluster
	}
	v := s.vhost(vhost)
	if v == nil {
		return nil, nil, &NotFoundError{Kind: "vhost", Name: vhost}
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	q, r := v.queues[name], v.replicas[name]
	if q == nil || r == nil {
		return nil, nil, &NotFoundError{Kind: "queue", Name: name, VHost: vhost}
	}
	if q.Type().Info().Name != "quorum" || len(r.members) == 0 {
		return nil, nil, ErrNotQuorum
	}
	cp := *r
	cp.members = slices.Clone(r.members)
	return v, &cp, nil
}

// running reports whether node is a running member of the cluster.
func (s *Server) running(node string) (string, bool) {
	for _, m := range s.cluster.Members() {
		if m.Name == node {
			return m.Addr, m.Running
		}
	}
	return "", false
}

// AddQuorumMember adds a replica of a quorum queue on node (a running
// member of the cluster). Adding a member it has is a no-op that makes
// sure the group's voters include it.
func (s *Server) AddQuorumMember(vhost, name, node string) error {
	_, r, err := s.quorumRecord(vhost, name)
	if err != nil {
		return err
	}
	addr, up := s.running(node)
	if !up {
		return ErrNodeNotRunning
	}
	if f := s.meta.missingFeature(node, r.members); f != "" {
		return fmt.Errorf("%w: %s has no %s, which every member of the queue has: upgrade it first", ErrNodeLacksFeature, node, f)
	}
	if _, err := s.propose(&metaCmd{Op: opQuorumAdd, VHost: vhost, Name: name, Inc: r.inc, Node: node, System: true}); err != nil {
		return err
	}
	return s.changeVoter(r.members, r.inc, true, node, addr)
}

// DeleteQuorumMember removes node's replica of a quorum queue (none:
// nothing to do, as rabbitmq-queues). The last member cannot go.
func (s *Server) DeleteQuorumMember(vhost, name, node string) error {
	_, r, err := s.quorumRecord(vhost, name)
	if err != nil {
		return err
	}
	if !slices.Contains(r.members, node) {
		return nil
	}
	if len(r.members) == 1 {
		return errLastMember
	}
	// The group lets the node go first, so that the others keep a
	// leader and a majority throughout (a group of two that lost its
	// leader's replica first could elect no one); the record follows.
	if _, up := s.running(node); up {
		s.handOver(r.inc, node)
	}
	rest := slices.DeleteFunc(slices.Clone(r.members), func(m string) bool { return m == node })
	if err := s.changeVoter(append(rest, node), r.inc, false, node, ""); err != nil {
		return err
	}
	_, err = s.propose(&metaCmd{Op: opQuorumRemove, VHost: vhost, Name: name, Inc: r.inc, Node: node, System: true})
	return err
}

// GrowQuorum adds a replica on node to every quorum queue whose vhost and
// name match the patterns, that lacks one: all of them, or (even) only
// those with an even number of members.
func (s *Server) GrowQuorum(node, vhostPattern, queuePattern string, even bool) ([]MemberChange, error) {
	return s.eachQuorum(vhostPattern, queuePattern, func(vh, name string, r *replica) (int, error, bool) {
		if slices.Contains(r.members, node) || (even && len(r.members)%2 != 0) {
			return 0, nil, false
		}
		return len(r.members) + 1, s.AddQuorumMember(vh, name, node), true
	})
}

// ShrinkQuorum removes node's replica from every quorum queue that has
// one (but a queue's last).
func (s *Server) ShrinkQuorum(node string) ([]MemberChange, error) {
	return s.eachQuorum(".*", ".*", func(vh, name string, r *replica) (int, error, bool) {
		if !slices.Contains(r.members, node) {
			return 0, nil, false
		}
		return len(r.members) - 1, s.DeleteQuorumMember(vh, name, node), true
	})
}

func (s *Server) eachQuorum(vhostPattern, queuePattern string, f func(vhost, name string, r *replica) (int, error, bool)) ([]MemberChange, error) {
	if !s.clustered() {
		return nil, ErrNoCluster
	}
	vre, err := regexp.Compile(vhostPattern)
	if err != nil {
		return nil, fmt.Errorf("vhost pattern: %w", err)
	}
	qre, err := regexp.Compile(queuePattern)
	if err != nil {
		return nil, fmt.Errorf("queue pattern: %w", err)
	}
	var out []MemberChange
	for _, v := range s.vhostList() {
		if !vre.MatchString(v.name) {
			continue
		}
		v.mu.RLock()
		var names []string
		for name, r := range v.replicas {
			if len(r.members) > 0 && qre.MatchString(name) {
				names = append(names, name)
			}
		}
		v.mu.RUnlock()
		sort.Strings(names)
		for _, name := range names {
			_, r, err := s.quorumRecord(v.name, name)
			if err != nil {
				continue
			}
			size, err, did := f(v.name, name, r)
			if !did {
				continue
			}
			mc := MemberChange{VHost: v.name, Name: name, Size: size, Result: "ok"}
			if err != nil {
				mc.Result = err.Error()
			}
			out = append(out, mc)
		}
	}
	return out, nil
}

// memberReq is a "quorum.member" request.
type memberReq struct {
	Group uint64 `json:"group"`
	Add   bool   `json:"add"`
	Node  string `json:"node"`
	Addr  string `json:"addr,omitempty"`
	// HandOver: the node is about to be removed; if it leads the
	// group, it hands the leadership over first (quorum.Type.HandOver).
	HandOver bool `json:"handover,omitempty"`
}

// changeVoter makes the group's leader add or remove node as a voter,
// trying the members in turn (only the leader does it) until one does or
// memberChangeTimeout.
func (s *Server) changeVoter(members []string, inc uint64, add bool, node, addr string) error {
	req, _ := json.Marshal(memberReq{Group: quorumGroupBase | inc, Add: add, Node: node, Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), memberChangeTimeout)
	defer cancel()
	var last error
	for {
		for _, m := range members {
			if _, err := s.cluster.Call(ctx, m, "quorum.member", req); err == nil {
				return nil
			} else {
				last = err
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("quorum queue membership not changed: %w", last)
		}
	}
}

// handOver asks node to give up the leadership of a queue's group before
// it is removed from it. Best effort: if it fails, the group elects a
// leader once the removed one stops (an election timeout later).
func (s *Server) handOver(inc uint64, node string) {
	req, _ := json.Marshal(memberReq{Group: quorumGroupBase | inc, Node: node, HandOver: true})
	ctx, cancel := context.WithTimeout(context.Background(), memberChangeTimeout)
	defer cancel()
	if _, err := s.cluster.Call(ctx, node, "quorum.member", req); err != nil {
		s.log.Warn().Err(err).Str("node", node).Msg("quorum member to remove did not hand its leadership over")
	}
}

// handleMember serves "quorum.member" on a member: the change if it
// leads the group, else raft.ErrNotLeader.
func (s *Server) handleMember(_ context.Context, _ string, b []byte) ([]byte, error) {
	var req memberReq
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, err
	}
	if req.HandOver {
		return nil, s.quorum.HandOver(req.Group)
	}
	_, err := s.quorum.ChangeMember(req.Group, req.Add, req.Node, raft.ServerAddress(req.Addr))
	return nil, err
}

// applyMembers is opQuorumMembers on this node: the record's members
// change; a node added opens its empty replica in place of its stand-in,
// a node removed drops its replica for a stand-in (its consumers move
// along: moveConsumers).
func (m *meta) applyMembers(v *vhost, c *metaCmd) (changed int, err error) {
	v.mu.Lock()
	r := v.replicas[c.Name]
	if v.queues[c.Name] == nil || r == nil || (c.Inc != 0 && r.inc != c.Inc) || len(r.members) == 0 {
		v.mu.Unlock()
		return 0, &NotFoundError{Kind: "queue", Name: c.Name, VHost: v.name}
	}
	members := slices.Clone(r.members)
	has := slices.Contains(members, c.Node)
	switch {
	case c.Op == opQuorumAdd && !has:
		members = append(members, c.Node)
	case c.Op == opQuorumRemove && has && len(members) == 1:
		v.mu.Unlock()
		return 0, errLastMember
	case c.Op == opQuorumRemove && has:
		members = slices.DeleteFunc(members, func(n string) bool { return n == c.Node })
	case c.Op == opQuorumAdd && c.Node == m.self:
		// A member already: its replica here failed to open and a
		// stand-in serves the queue (retryReplicas asks again).
		if rq, ok := v.queues[c.Name].(*remoteQueue); ok {
			if _, err := m.openJoined(v, c.Name, r); err == nil {
				v.moveConsumers(c.Name, rq, rq.consumerRefs())
				v.mu.Unlock()
				return 1, nil
			}
		}
		v.mu.Unlock()
		return 0, nil
	default:
		v.mu.Unlock()
		return 0, nil
	}
	err = m.setMembers(v, c.Name, r, members)
	v.mu.Unlock()
	return 1, err
}

// openJoined opens this node's empty replica of a running group in place
// of the queue's stand-in. v.mu is held.
func (m *meta) openJoined(v *vhost, name string, r *replica) (queue.Queue, error) {
	q := v.queues[name]
	limits, err := v.effectiveLimits(name, q.Decl().Args)
	if err != nil {
		limits, _ = queue.ParseArgs(nil)
	}
	d := *q.Decl()
	d.ID = 0
	var nq *quorum.Queue
	err = m.s.openReplicaFault(v.name, name)
	if err == nil {
		nq, err = m.s.quorum.JoinMember(d, limits, v.hooks, r.placementOf())
	}
	if err != nil {
		m.s.log.Warn().Err(err).Str("queue", name).Msg("opening a new quorum replica failed")
		return nil, err
	}
	v.queues[name] = nq
	m.incs[qkey{v.name, name}] = r.inc
	m.saveIncarnations()
	m.s.log.Info().Str("vhost", v.name).Str("queue", name).Strs("members", r.members).Msg("quorum replica added here")
	return nq, nil
}

// setMembers gives the quorum queue name (record r) its members: a node
// added opens its empty replica in place of its stand-in, a node removed
// drops its replica for a stand-in; the consumers of the object replaced
// move to the new one (moveConsumers). v.mu is held.
func (m *meta) setMembers(v *vhost, name string, r *replica, members []string) error {
	q := v.queues[name]
	was := slices.Contains(r.members, m.self)
	r.members = slices.Clone(members)
	is := slices.Contains(r.members, m.self)
	switch {
	case !was && is:
		if _, err := m.openJoined(v, name, r); err != nil {
			return err
		}
		if rq, ok := q.(*remoteQueue); ok {
			v.moveConsumers(name, rq, rq.consumerRefs())
		}
		return nil
	case was && !is:
		var moving []queue.ConsumerRef
		if qq, ok := q.(*quorum.Queue); ok {
			moving = qq.Leave()
			m.s.home.retire(v.name, name, qq)
		}
		home := r.members[0]
		for _, n := range r.members {
			if _, up := m.s.running(n); up {
				home = n
				break
			}
		}
		rq := newRemoteQueue(v, *q.Decl(), home)
		rq.typ = m.s.remote.quorumType
		v.queues[name] = rq
		m.forgetIncarnation(qkey{v.name, name})
		m.s.log.Info().Str("vhost", v.name).Str("queue", name).Strs("members", r.members).Msg("quorum replica removed here")
		// A home's proxies among them are moved by their own nodes,
		// whose stand-ins forwarded here (the branch below, there).
		v.moveConsumers(name, q, moving)
		return nil
	case !was && !is:
		// A stand-in here whose member left forwards to one that stays
		// (a running one, if this node knows one).
		rq, ok := q.(*remoteQueue)
		if !ok || slices.Contains(r.members, rq.home) || len(r.members) == 0 {
			return nil
		}
		home := r.members[0]
		for _, n := range r.members {
			if _, up := m.s.running(n); up {
				home = n
				break
			}
		}
		nq := newRemoteQueue(v, rq.decl, home)
		nq.typ = m.s.remote.quorumType
		v.queues[name] = nq
		m.s.log.Info().Str("vhost", v.name).Str("queue", name).Str("from", rq.home).Str("to", home).Msg("quorum queue without a replica here: now served through another member")
		v.moveConsumers(name, rq, rq.consumerRefs())
	}
	return nil
}

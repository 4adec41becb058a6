package cluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Member is a node of the cluster as this node sees it.
type Member struct {
	Name    string
	Addr    string
	Voter   bool // a voter of the metadata group (else a non-voter)
	Running bool // this node, or one that answered a ping in the last three probes
	Leader  bool // the metadata group's leader
}

// EventKind says what changed.
type EventKind int

const (
	// LeaderChanged: the metadata group has a new leader (Event.Node), or
	// none ("").
	LeaderChanged EventKind = iota + 1
	// MemberAdded and MemberRemoved: the configuration gained or lost a
	// node.
	MemberAdded
	MemberRemoved
	// MemberUp and MemberDown: a member started or stopped answering.
	MemberUp
	MemberDown
)

func (k EventKind) String() string {
	switch k {
	case LeaderChanged:
		return "leader_changed"
	case MemberAdded:
		return "member_added"
	case MemberRemoved:
		return "member_removed"
	case MemberUp:
		return "member_up"
	case MemberDown:
		return "member_down"
	}
	return "unknown"
}

// Event is one membership or leadership change.
type Event struct {
	Kind EventKind
	Node string
}

// membership is what the probe loop and the leader watcher learn.
type membership struct {
	mu       sync.Mutex // a leaf lock
	lastSeen map[string]time.Time
	lostAt   map[string]time.Time // peerLost's: a probe that began before does not count
	// suspect holds the members that missed the probes of more than
	// suspectAfter probe intervals and have not answered since (PeerDown).
	suspect  map[string]bool
	prev     map[string]Member // the last Members computed, for events
	leader   string
	changed  chan struct{} // closed and replaced at each leader change
	probed   chan struct{} // closed and replaced after each probe round
	watchers map[chan Event]struct{}
	closed   bool
}

func (m *membership) init() {
	m.lastSeen = map[string]time.Time{}
	m.lostAt = map[string]time.Time{}
	m.suspect = map[string]bool{}
	m.prev = map[string]Member{}
	m.changed = make(chan struct{})
	m.probed = make(chan struct{})
	m.watchers = map[chan Event]struct{}{}
}

// seenAfter reports whether name answered a probe round that started
// after t, and else returns a channel closed after the next round.
func (m *membership) seenAfter(name string, t time.Time) (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seen, ok := m.lastSeen[name]; ok && seen.After(t) {
		return true, nil
	}
	return false, m.probed
}

// leaderChanged is a channel closed at the next leader change.
func (m *membership) leaderChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// lost forgets that name answered, as of at: a probe round that began
// before does not count. It reports whether name was running. An answer
// after at (a handshake with its new process) stands: nothing changes.
func (m *membership) lost(name string, at time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen, ok := m.lastSeen[name]
	if ok && seen.After(at) {
		return false
	}
	delete(m.lastSeen, name)
	m.lostAt[name] = at
	return ok
}

// answered records that member name answered at at: a probe round begun
// then, or a handshake with its process. An answer from before peerLost
// found it gone does not count. Call with m.mu held.
func (m *membership) answeredLocked(name string, at time.Time) {
	if lost, ok := m.lostAt[name]; ok {
		if !at.After(lost) {
			return // the answer may be from before the loss
		}
		delete(m.lostAt, name)
	}
	if seen, ok := m.lastSeen[name]; !ok || at.After(seen) {
		m.lastSeen[name] = at
	}
	delete(m.suspect, name)
}

func (m *membership) answered(name string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answeredLocked(name, at)
}

// Running reports whether name, a member, answers this node's probes
// (this node itself: true). Unlike Members' Running, a member is no
// longer running here as soon as it is suspect (Options.PeerDown).
func (n *Node) Running(name string) bool {
	if name == n.cfg.NodeName {
		return true
	}
	m := &n.members
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.lastSeen[name]
	return ok && !m.suspect[name]
}

// KnownDown reports whether name, a member, is known not to run: it is
// suspect (Options.PeerDown) or its process was found gone
// (Options.PeerLost), and it has not answered since. A member not heard
// from yet (this node just started) is not known down.
func (n *Node) KnownDown(name string) bool {
	if name == n.cfg.NodeName {
		return false
	}
	m := &n.members
	m.mu.Lock()
	defer m.mu.Unlock()
	_, lost := m.lostAt[name]
	return lost || m.suspect[name]
}

// suspectAfter: a member whose probes went unanswered for more than this
// many probe intervals is suspect (Options.PeerDown): two rounds in a
// row, 2 to 3 s after it stopped answering, about when raft's timeouts
// (1.5 to 3 s) would find a hung metadata leader. It is counted not
// running (Members, MemberDown) later, after 3.5 intervals.
const suspectAfter = 1.5

func (m *membership) running(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.lastSeen[name]
	return ok
}

// emit sends e to every watcher; a watcher whose buffer is full loses
// its oldest event, never the newest. Call with m.mu held.
func (m *membership) emit(e Event) {
	for ch := range m.watchers {
		for {
			select {
			case ch <- e:
			default:
				select {
				case <-ch:
				default:
				}
				continue
			}
			break
		}
	}
}

func (m *membership) closeWatchers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for ch := range m.watchers {
		close(ch)
		delete(m.watchers, ch)
	}
}

// Watch returns a channel of membership and leadership changes until ctx
// is done or the node closes (then it is closed). It holds the latest 64;
// a watcher that falls behind loses the oldest. Members and Leader are
// the state itself.
func (n *Node) Watch(ctx context.Context) <-chan Event {
	ch := make(chan Event, 64)
	m := &n.members
	m.mu.Lock()
	if m.closed {
		close(ch)
		m.mu.Unlock()
		return ch
	}
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.watchers[ch]; ok {
			delete(m.watchers, ch)
			close(ch)
		}
	})
	return ch
}

// Members lists the metadata group's configuration with what this node
// knows of each member, in name order.
func (n *Node) Members() []Member {
	cfg := n.meta.GetConfiguration().Configuration()
	_, leader := n.meta.LeaderWithID()
	m := &n.members
	m.mu.Lock()
	defer m.mu.Unlock()
	return n.membersLocked(cfg, string(leader))
}

func (n *Node) membersLocked(cfg raft.Configuration, leader string) []Member {
	out := make([]Member, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		name := string(s.ID)
		_, seen := n.members.lastSeen[name]
		out = append(out, Member{
			Name: name, Addr: string(s.Address), Voter: s.Suffrage == raft.Voter,
			Running: name == n.cfg.NodeName || seen, Leader: name == leader,
		})
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// watchLeader turns Raft's leader observations into events.
func (n *Node) watchLeader(ch chan raft.Observation) {
	defer n.wg.Done()
	for {
		select {
		case o := <-ch:
			lo, ok := o.Data.(raft.LeaderObservation)
			if !ok {
				continue
			}
			n.setLeader(string(lo.LeaderID))
		case <-n.ctx.Done():
			return
		}
	}
}

func (n *Node) setLeader(leader string) {
	m := &n.members
	m.mu.Lock()
	if leader == m.leader {
		m.mu.Unlock()
		return
	}
	m.leader = leader
	close(m.changed)
	m.changed = make(chan struct{})
	m.emit(Event{Kind: LeaderChanged, Node: leader})
	m.mu.Unlock()
	if leader == "" {
		n.log.Warn().Msg("cluster has no leader")
	} else {
		n.log.Info().Str("leader", leader).Bool("this_node", leader == n.cfg.NodeName).Msg("cluster leader elected")
	}
}

// probeLoop pings every other member each Timing.Probe and turns what
// changed (configuration, running or not) into events and log lines.
func (n *Node) probeLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.timing.Probe)
	defer t.Stop()
	for {
		down, lost := n.probe()
		for _, name := range lost {
			n.log.Warn().Str("peer_node", name).Msg("cluster peer lost: its listener refuses this node's probe")
			n.lostNow(name)
		}
		for _, name := range down {
			if n.opts.PeerDown != nil {
				n.log.Warn().Str("peer_node", name).Msg("cluster peer down: it no longer answers this node's probes")
				n.opts.PeerDown(name)
			}
		}
		select {
		case <-t.C:
		case <-n.probeNow:
		case <-n.ctx.Done():
			return
		}
	}
}

// probe runs one probe round. It returns the members it found suspect
// that were not, less those found gone (see Options.PeerDown), and the
// running members whose listener refused the probe: gone, as peerLost
// finds them (a member stopping cleanly can answer one more probe on a
// connection it still serves after its listener closed; the next finds
// it gone).
func (n *Node) probe() (down, lost []string) {
	cfg := n.meta.GetConfiguration().Configuration()
	ctx, cancel := context.WithTimeout(n.ctx, n.timing.Probe)
	defer cancel()
	now := time.Now()
	answered := make([]bool, len(cfg.Servers))
	refused := make([]bool, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range cfg.Servers {
		if string(s.ID) == n.cfg.NodeName {
			continue
		}
		wg.Go(func() {
			_, err := n.CallAddr(ctx, string(s.Address), "cluster.ping", nil)
			answered[i] = err == nil
			refused[i] = errors.Is(err, syscall.ECONNREFUSED)
		})
	}
	wg.Wait()
	if n.ctx.Err() != nil {
		return nil, nil
	}
	_, leader := n.meta.LeaderWithID()
	n.setLeader(string(leader)) // observations can be dropped: catch up here
	m := &n.members
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range cfg.Servers {
		if refused[i] {
			// Unless it answered since the round began (a handshake
			// of its new process).
			if seen, ok := m.lastSeen[string(s.ID)]; ok && !seen.After(now) {
				delete(m.lastSeen, string(s.ID))
				m.lostAt[string(s.ID)] = now
				lost = append(lost, string(s.ID))
			}
			continue
		}
		if answered[i] {
			m.answeredLocked(string(s.ID), now)
		}
	}
	for name, t := range m.lastSeen {
		if now.Sub(t) > time.Duration(suspectAfter*float64(n.timing.Probe)) && !m.suspect[name] {
			m.suspect[name] = true
			if _, gone := m.lostAt[name]; !gone {
				down = append(down, name)
			}
		}
		if now.Sub(t) > 3*n.timing.Probe+n.timing.Probe/2 {
			delete(m.lastSeen, name)
		}
	}
	close(m.probed)
	m.probed = make(chan struct{})
	cur := map[string]Member{}
	var changed bool
	for _, mb := range n.membersLocked(cfg, string(leader)) {
		cur[mb.Name] = mb
		old, ok := m.prev[mb.Name]
		switch {
		case !ok:
			changed = true
			m.emit(Event{Kind: MemberAdded, Node: mb.Name})
			if mb.Running {
				m.emit(Event{Kind: MemberUp, Node: mb.Name})
			}
		case old.Running != mb.Running:
			changed = true
			if mb.Running {
				m.emit(Event{Kind: MemberUp, Node: mb.Name})
			} else {
				m.emit(Event{Kind: MemberDown, Node: mb.Name})
			}
		}
	}
	for name := range m.prev {
		if _, ok := cur[name]; !ok {
			changed = true
			m.emit(Event{Kind: MemberRemoved, Node: name})
		}
	}
	m.prev = cur
	if changed {
		ev := n.log.Info()
		for _, name := range slices.Sorted(maps.Keys(cur)) {
			mb := cur[name]
			state := "not running"
			if mb.Running {
				state = "running"
			}
			if mb.Leader {
				state += ", leader"
			}
			ev = ev.Str(name, state)
		}
		ev.Msg("cluster membership")
	}
	return down, lost
}

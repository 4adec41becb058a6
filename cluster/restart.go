package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A member of a group that restarted follows no leader, and raft makes it
// stand only after its heartbeat timeout (the metadata group's 1.5 to 3 s,
// a quorum queue's 5 to 10 s). When the whole cluster restarted, every
// member waits so, and the group commits nothing meanwhile. Standing at
// once (a TimeoutNow, which skips raft's pre-vote) is no answer: a node
// restarted alone would depose the healthy leader it has not heard from
// yet, since its members grant a TimeoutNow's vote although they have a
// leader.
//
// So a restarted member that knows no leader asks the group's other
// voters, every RestartRound, what they know (a View each). It stands once
// none of those that have the group open knows a leader, they and it are a
// majority of the voters, and its log is the most up to date of theirs
// (ShouldStand): the one member that wins their votes, as raft grants a
// vote only to a log at least as up to date as the voter's. Among equals,
// one that asks too (restarted as well) comes first, then name order: a
// member that does not ask would not stand. (A member whose leader is the
// asker knows none: the asker's new process does not lead; it restarted
// before that member found its old one gone.) Any member that knows a
// leader (the node restarted alone) keeps it from standing: the leader
// reaches it. It stands again no sooner than RestartRestand after, should
// the election fail (a member went down meanwhile), and stops asking after
// RestartAskFor, leaving the group to raft's timeouts.
//
// Not covered: a member that does not ask may be strictly the most up to
// date (it did not restart, or it stands on its own already: a candidate
// knows no leader); the restarted ones leave it to raft's timeouts.
const (
	RestartRound   = 300 * time.Millisecond
	RestartRestand = 2 * time.Second
	RestartAskFor  = 2 * time.Minute
)

// View is what a node knows of its member of a group, as a restarted
// member asks.
type View struct {
	Open      bool   // the node has the group open
	Leader    bool   // it knows the group's leader (itself included), not the asker
	Asking    bool   // it is a restarted member asking too
	LastTerm  uint64 // its log's last entry (or snapshot's)
	LastIndex uint64
}

// ViewOf is r's View as member asker is told it (the zero View once r is
// shut down); asking: this member asks too. A leader known here that is
// the asker is none: the asker restarted (its new process does not lead),
// faster than this member found its old process gone.
func ViewOf(r *raft.Raft, asker string, asking bool) View {
	st := r.State()
	if st == raft.Shutdown {
		return View{}
	}
	_, id := r.LeaderWithID()
	v := View{Open: true, Leader: id != "" && string(id) != asker || st == raft.Leader, Asking: asking}
	v.LastTerm, v.LastIndex = lastEntry(r)
	return v
}

// lastEntry is the term and index of r's last log entry (or of its
// snapshot, when the log is empty past it), as raft's vote rule compares
// them.
func lastEntry(r *raft.Raft) (term, index uint64) {
	s := r.Stats()
	num := func(k string) uint64 { v, _ := strconv.ParseUint(s[k], 10, 64); return v }
	term, index = num("last_log_term"), num("last_log_index")
	if st := num("last_snapshot_term"); st > term {
		term, index = st, num("last_snapshot_index")
	}
	return term, index
}

// ShouldStand decides whether r, restarted and named self, stands for
// election now, from what the group's other voters told it (views, by
// node; a voter missing did not answer): see the comment at the top.
func ShouldStand(r *raft.Raft, self string, views map[string]View) bool {
	if r.State() != raft.Follower {
		return false
	}
	if _, id := r.LeaderWithID(); id != "" {
		return false
	}
	voters, ok := Voters(r, "")
	if !ok {
		return false
	}
	best := View{Open: true, Asking: true}
	best.LastTerm, best.LastIndex = lastEntry(r)
	bestName, votes, member := self, 0, false
	for _, v := range voters {
		if v == self {
			votes++
			member = true
			continue
		}
		view, ok := views[v]
		if !ok || !view.Open {
			continue
		}
		if view.Leader {
			return false
		}
		votes++
		if before(view, v, best, bestName) {
			best, bestName = view, v
		}
	}
	return member && votes > len(voters)/2 && bestName == self
}

// before reports whether member a (view, name) comes before b to stand:
// its log is more up to date, or as up to date and it asks while b does
// not, or it is first in name order.
func before(a View, aName string, b View, bName string) bool {
	switch {
	case a.LastTerm != b.LastTerm:
		return a.LastTerm > b.LastTerm
	case a.LastIndex != b.LastIndex:
		return a.LastIndex > b.LastIndex
	case a.Asking != b.Asking:
		return a.Asking
	}
	return aName < bName
}

// EncodeViews and DecodeViews: a list of views, three 8-byte big-endian
// numbers each: flags (viewOpen, viewLeader, viewAsking), the last
// entry's term, its index.
func EncodeViews(vs []View) []byte {
	b := make([]byte, 0, 24*len(vs))
	for _, v := range vs {
		var f uint64
		if v.Open {
			f |= viewOpen
		}
		if v.Leader {
			f |= viewLeader
		}
		if v.Asking {
			f |= viewAsking
		}
		b = binary.BigEndian.AppendUint64(b, f)
		b = binary.BigEndian.AppendUint64(b, v.LastTerm)
		b = binary.BigEndian.AppendUint64(b, v.LastIndex)
	}
	return b
}

func DecodeViews(b []byte) ([]View, error) {
	if len(b)%24 != 0 {
		return nil, fmt.Errorf("cluster: %d bytes: not a list of views (24 bytes each)", len(b))
	}
	vs := make([]View, 0, len(b)/24)
	for ; len(b) > 0; b = b[24:] {
		f := binary.BigEndian.Uint64(b)
		vs = append(vs, View{Open: f&viewOpen != 0, Leader: f&viewLeader != 0, Asking: f&viewAsking != 0,
			LastTerm: binary.BigEndian.Uint64(b[8:]), LastIndex: binary.BigEndian.Uint64(b[16:])})
	}
	return vs, nil
}

const (
	viewOpen = 1 << iota
	viewLeader
	viewAsking
)

// standAfterRestart: the metadata group's member, restarted, asks the
// other voters (cluster.view) and stands as the comment at the top says,
// until it knows a leader, RestartAskFor passed or the node stops.
func (n *Node) standAfterRestart() {
	defer n.wg.Done()
	defer n.asking.Store(false)
	start := time.Now()
	var stood time.Time
	for time.Since(start) < RestartAskFor {
		select {
		case <-time.After(RestartRound):
		case <-n.ctx.Done():
			return
		}
		if _, id := n.meta.LeaderWithID(); id != "" || n.meta.State() == raft.Leader || n.meta.State() == raft.Shutdown {
			return
		}
		if time.Since(stood) < RestartRestand {
			continue
		}
		views := n.askViews()
		if ShouldStand(n.meta, n.cfg.NodeName, views) {
			n.log.Info().Msg("cluster restarted: no member knows a leader; this node's log is the most up to date of theirs: standing for election")
			stood = time.Now()
			if err := TimeoutNow(n.metaTrans, n.cfg.NodeName); err != nil {
				n.log.Warn().Err(err).Msg("cannot stand for election")
			}
		}
	}
}

// askViews asks every other voter of the metadata group, at once, for
// its view of the group.
func (n *Node) askViews() map[string]View {
	views := map[string]View{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range n.meta.GetConfiguration().Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.NodeName {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, RestartRound)
			defer cancel()
			resp, err := n.CallAddr(ctx, string(s.Address), "cluster.view", nil)
			if err != nil {
				return
			}
			vs, err := DecodeViews(resp)
			if err != nil || len(vs) != 1 {
				return
			}
			mu.Lock()
			views[string(s.ID)] = vs[0]
			mu.Unlock()
		}()
	}
	wg.Wait()
	return views
}

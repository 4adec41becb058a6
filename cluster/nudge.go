package cluster

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Nudger tells a group's followers at once that what its leader applied
// is committed. hashicorp/raft tells a follower the commit index only in
// its next AppendEntries: with entries when more come, else one of
// nothing a commit timeout later. So the last entry of a burst reached
// the followers' state machines (a quorum queue's deliveries to their
// nodes' consumers, a declared queue's record on the other nodes) a
// commit timeout late. Applied, called by the leader's FSM after each
// entry, arms a nudge: if nothing is appended after that entry within
// nudgeDelay, the leader appends a barrier (an entry of no effect, which
// FSMs never see, so it arms nothing), whose AppendEntries carries the
// commit index. Entries appended meanwhile carry it anyway.
type Nudger struct {
	r     atomic.Pointer[raft.Raft]
	armed atomic.Bool
	at    atomic.Uint64 // the index it was armed at
}

// nudgeDelay is how long a leader waits, after applying its last entry,
// before it appends a barrier.
const nudgeDelay = 2 * time.Millisecond

// Set gives the nudger its raft (an FSM may apply entries before
// raft.NewRaft returns: they arm nothing).
func (n *Nudger) Set(r *raft.Raft) { n.r.Store(r) }

// Leads reports whether the raft Set gave it leads its group (false
// before Set).
func (n *Nudger) Leads() bool {
	r := n.r.Load()
	return r != nil && r.State() == raft.Leader
}

// Applied is called after the FSM applied entry idx.
func (n *Nudger) Applied(idx uint64) {
	r := n.r.Load()
	if r == nil || r.State() != raft.Leader || r.LastIndex() != idx {
		return
	}
	n.at.Store(idx)
	if n.armed.CompareAndSwap(false, true) {
		time.AfterFunc(nudgeDelay, n.nudge)
	}
}

func (n *Nudger) nudge() {
	n.armed.Store(false)
	r := n.r.Load()
	if r.State() == raft.Leader && r.LastIndex() == n.at.Load() {
		r.Barrier(0) // its outcome does not matter: what follows tells the followers too
	}
}

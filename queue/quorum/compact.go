package quorum

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// compactBytes: once a replica has applied this many bytes of entries
// since it last asked, and its queue holds few messages (compactHeld),
// it takes a snapshot at once instead of at raft's next snapshot check
// (every SnapshotInterval to twice that). raft compacts a group's log
// only at its snapshots, so a busy queue that keeps up would otherwise
// hold half a minute of traffic in the shared log, and every segment it
// writes meanwhile is a new one to zero-fill, whose sync the other syncs
// wait behind; compacted sooner, the freed segments are recycled (the
// log keeps a few spares). A snapshot is the machine's state without
// bodies, so with few messages held it is small; with a backlog raft's
// own schedule stays, since the entries live messages are in cannot go
// anyway.
const (
	compactBytes = 32 << 20
	compactHeld  = 4096
)

// compactor asks the group for a snapshot when compaction pays.
type compactor struct {
	r       atomic.Pointer[raft.Raft]
	since   int64 // bytes applied since it last asked (FSM goroutine)
	running atomic.Bool
}

func (c *compactor) set(r *raft.Raft) { c.r.Store(r) }

// applied runs on the FSM goroutine after each entry: n bytes applied,
// held the messages the queue holds now.
func (c *compactor) applied(n, held int) {
	c.since += int64(n)
	if c.since < compactBytes || held > compactHeld {
		return
	}
	r := c.r.Load()
	if r == nil || !c.running.CompareAndSwap(false, true) {
		return
	}
	c.since = 0
	// raft's Snapshot waits for the snapshot goroutine, which waits for
	// this one (the FSM's snapshot): it cannot be called from here.
	go func() {
		defer c.running.Store(false)
		r.Snapshot().Error() // nothing new, or shut down: nothing to do
	}()
}

package quorum

import (
	"sync/atomic"
	"time"

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
//
// A queue that goes idle with a little traffic applied since its last
// snapshot (at least compactIdleBytes, so a queue that sees one message
// now and then does not snapshot for each) snapshots after
// Config.CompactIdle without an entry applied: otherwise its last
// entries stay in the shared log for good (nothing more comes to reach
// compactBytes, nor raft's threshold), and the log cannot let go of the
// segments after them without copying them on.
const (
	compactBytes     = 32 << 20
	compactHeld      = 4096
	compactIdleBytes = 1 << 20
)

// compactor asks the group for a snapshot when compaction pays.
type compactor struct {
	r       atomic.Pointer[raft.Raft]
	idle    time.Duration
	since   atomic.Int64  // bytes applied since it last asked
	applies atomic.Uint64 // entries applied
	held    atomic.Int64  // messages held after the last one
	armed   atomic.Bool   // the idle check is pending
	running atomic.Bool
}

func (c *compactor) set(r *raft.Raft, idle time.Duration) {
	c.idle = idle
	c.r.Store(r)
}

// applied runs on the FSM goroutine after each entry: n bytes applied,
// held the messages the queue holds now.
func (c *compactor) applied(n, held int) {
	since := c.since.Add(int64(n))
	c.applies.Add(1)
	c.held.Store(int64(held))
	switch {
	case held > compactHeld:
	case since >= compactBytes:
		c.snapshot()
	case since >= compactIdleBytes && c.idle > 0 && c.armed.CompareAndSwap(false, true):
		c.checkIdle(c.applies.Load())
	}
}

// checkIdle looks again after c.idle: if nothing was applied since seen,
// with few messages held, it snapshots; while entries keep coming it
// looks again later.
func (c *compactor) checkIdle(seen uint64) {
	time.AfterFunc(c.idle, func() {
		if now := c.applies.Load(); now != seen {
			c.checkIdle(now)
			return
		}
		c.armed.Store(false)
		if c.held.Load() <= compactHeld && c.since.Load() >= compactIdleBytes {
			c.snapshot()
		}
	})
}

// snapshot asks raft for a snapshot, unless one asked for is running.
func (c *compactor) snapshot() {
	r := c.r.Load()
	if r == nil || !c.running.CompareAndSwap(false, true) {
		return
	}
	c.since.Store(0)
	// raft's Snapshot waits for the snapshot goroutine, which waits for
	// the FSM goroutine (the FSM's snapshot): it cannot be called from
	// there.
	go func() {
		defer c.running.Store(false)
		r.Snapshot().Error() // nothing new, or shut down: nothing to do
	}()
}

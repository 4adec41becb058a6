package classic

import (
	"fmt"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// pagedBacklog is the backlog of a queue: it keeps a bounded window of
// ready messages in memory and leaves the rest on disk, loading the next
// slice as consumers catch up. Memory stays flat however long the queue
// grows.
//
// Ready entries live in up to three places. mem holds the loaded window
// and requeued entries. The store segment (durable queues) is every entry
// stored for the queue with Seq >= stored.from that is not in mem. The
// spill segment is the entries in the queue's spill log (spill.go): plain
// files, not the store, which a restart drops. A non-durable queue spills
// every message past its window; a durable queue spills its transient
// messages, which are not in the store and do not survive a restart
// either.
//
// Invariant, for each segment: every entry of its kind in mem (stored, or
// spillable) has a Seq below every entry of the segment, so a scan of the
// store from stored.from finds exactly the store segment; an entry joins a
// segment only when its Seq is above every entry of that kind pushed to mem
// (the segment's memMax). Before mem's head is handed out, each segment
// whose head may come first is loaded, so entries leave in Seq order.
//
// Like every backlog it is guarded by its queue's lock. It reads the store
// under that lock: one Sync and one scan per loaded slice.
type pagedBacklog struct {
	store  persist.Store
	qid    uint64 // the queue's store id; 0 for a non-durable queue
	window int
	log    func(err error)
	spill  *spillLog // the overflow of entries not in the store; nil: none

	mem     Backlog
	stored  segment // entries left in the store
	spilled segment // entries in the spill log
	// redeliveredTo is the queue's recovery mark (type.go): stored
	// entries up to it are redelivered.
	redeliveredTo uint64
}

// segment counts the entries of one kind that are on disk.
type segment struct {
	n      int
	bytes  int64
	from   uint64 // no entry of the segment has a lower Seq
	memMax uint64 // the highest Seq of an entry of this kind pushed to mem
}

func (s *segment) add(e queue.Entry) {
	if s.n == 0 || e.Seq < s.from {
		s.from = e.Seq
	}
	s.n++
	s.bytes += e.Msg.Size()
}

// loaded accounts for n entries moved from the segment to mem, the last
// with Seq last.
func (s *segment) loaded(n int, last uint64) {
	if n == 0 {
		// The disk has fewer entries than counted (settled by another
		// path): forget the segment rather than spin.
		s.n, s.bytes = 0, 0
		return
	}
	s.n -= n
	s.from = last + 1
	s.memMax = max(s.memMax, last)
	if s.n <= 0 || s.bytes < 0 {
		s.n = max(s.n, 0)
		s.bytes = max(s.bytes, 0)
	}
}

// due reports whether the segment's head may come before mem's.
func (s *segment) due(mem Backlog) bool {
	if s.n == 0 {
		return false
	}
	e, ok := mem.Peek()
	return !ok || e.Seq >= s.from
}

func newPagedBacklog(store persist.Store, qid uint64, window int, log func(error)) *pagedBacklog {
	return &pagedBacklog{store: store, qid: qid, window: window, log: log, mem: NewMemBacklog()}
}

// recovered makes the queue's stored entries (count of them, all on disk)
// its store segment, for start-up.
func (b *pagedBacklog) recovered(count int) {
	b.stored.n, b.stored.from = count, 1
}

func (b *pagedBacklog) Push(e queue.Entry) {
	full := b.stored.n > 0 || b.spilled.n > 0 || b.mem.Len() >= b.window
	// A message stored for a durable queue has a store id; the same
	// message may reach a non-durable queue, where it is not stored.
	if b.qid != 0 && e.Msg.StoreID != 0 {
		if full && e.Seq > b.stored.memMax {
			b.stored.add(e)
			return
		}
		b.mem.Push(e)
		b.stored.memMax = max(b.stored.memMax, e.Seq)
		return
	}
	if b.spill != nil && full && e.Seq > b.spilled.memMax {
		if err := b.spill.append(e); err != nil {
			// Out of disk, say: keep the message in memory instead.
			b.log(fmt.Errorf("spilling a transient message: %w", err))
		} else {
			b.spilled.add(e)
			return
		}
	}
	b.mem.Push(e)
	b.spilled.memMax = max(b.spilled.memMax, e.Seq)
}

func (b *pagedBacklog) Requeue(e queue.Entry) { b.mem.Requeue(e) }

// fill loads the next slice of each segment whose head may come before
// everything in mem. A failed load ends it: the entries in mem go first.
func (b *pagedBacklog) fill() {
	for {
		switch {
		case b.stored.due(b.mem):
			if !b.fillFromStore() {
				return
			}
		case b.spilled.due(b.mem):
			if !b.fillFromSpill() {
				return
			}
		default:
			return
		}
	}
}

// fillFromStore loads the next slice of the store segment. It reports
// whether the segment changed.
func (b *pagedBacklog) fillFromStore() bool {
	if err := b.store.Sync(); err != nil {
		b.log(err)
		return false
	}
	loaded := 0
	last := b.stored.from
	err := b.store.ScanQueue(b.qid, b.stored.from, max(b.window/2, 1), true, func(r persist.RecoveredEntry) error {
		m := queue.NewStored(r.Msg.Exchange, r.Msg.RoutingKey, r.Msg.Props, r.Msg.Body, r.MsgID)
		b.mem.Push(queue.Entry{Seq: r.Seq, Msg: m, Redelivered: r.Redelivered || r.Seq <= b.redeliveredTo, Expires: r.Expires})
		b.stored.bytes -= m.Size()
		loaded++
		last = r.Seq
		return nil
	})
	if err != nil {
		b.log(err)
	}
	b.stored.loaded(loaded, last)
	return true
}

// fillFromSpill loads the next slice of the spill log. It reports whether
// the segment changed.
func (b *pagedBacklog) fillFromSpill() bool {
	loaded, last := 0, b.spilled.from
	for loaded < max(b.window/2, 1) && loaded < b.spilled.n {
		e, err := b.spill.next()
		if err != nil {
			b.log(fmt.Errorf("reading a queue's spilled messages back: %w", err))
			break
		}
		b.mem.Push(e)
		b.spilled.bytes -= e.Msg.Size()
		loaded++
		last = e.Seq
	}
	b.spilled.loaded(loaded, last)
	return true
}

func (b *pagedBacklog) Peek() (queue.Entry, bool) {
	b.fill()
	return b.mem.Peek()
}

func (b *pagedBacklog) Pop() (queue.Entry, bool) {
	b.fill()
	return b.mem.Pop()
}

// Remove takes out a ready entry; one in the store segment, which a
// message the store failed to write is only by count, is taken off the
// count.
func (b *pagedBacklog) Remove(e queue.Entry) bool {
	if b.mem.Remove(e) {
		return true
	}
	if b.qid != 0 && e.Msg.StoreID != 0 && b.stored.n > 0 && e.Seq >= b.stored.from {
		b.stored.n--
		b.stored.bytes = max(b.stored.bytes-e.Msg.Size(), 0)
		return true
	}
	return false
}

func (b *pagedBacklog) Len() int     { return b.mem.Len() + b.stored.n + b.spilled.n }
func (b *pagedBacklog) Bytes() int64 { return b.mem.Bytes() + b.stored.bytes + b.spilled.bytes }

// Purge forgets every ready entry. The store's entries are the caller's
// business (queue deletion drops them all; a purge pops entries instead).
func (b *pagedBacklog) Purge() int {
	n := b.Len()
	if b.spill != nil {
		if err := b.spill.remove(); err != nil {
			b.log(err)
		}
	}
	b.mem.Purge()
	b.stored, b.spilled = segment{}, segment{}
	return n
}

package server

import (
	"fmt"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// pagedBacklog is the backlog of a durable queue: it keeps a bounded window
// of ready messages in memory and leaves the rest in the store, loading the
// next slice as consumers catch up. Memory stays flat however long the
// queue grows.
//
// Ready entries live in two places. mem holds the loaded window, requeued
// entries and anything that is not in the store (transient messages);
// the disk segment is every stored entry with Seq >= diskFrom that is not in
// mem. Invariant: every stored entry in mem has a Seq below every entry of
// the disk segment, so a scan of the store from diskFrom finds exactly the
// disk segment, and a stored entry joins the disk segment only when its Seq
// is above every stored entry pushed to mem (storedMax). Transient entries
// stay in mem whatever their Seq.
//
// A non-durable queue pages too (transient backlog): past the window its
// messages go to a spill log of plain files (spill.go), not to the store,
// and are read back in order; a restart drops them.
//
// Like every backlog it is guarded by its queue's lock. It reads the store
// under that lock: one Sync and one scan per loaded slice.
type pagedBacklog struct {
	store  persist.Store
	qid    uint64
	window int
	log    func(err error)
	spill  *spillLog // a non-durable queue's overflow; nil for durable queues

	mem       queue.Backlog
	storedMax uint64
	diskN     int
	diskBytes int64
	diskFrom  uint64
}

func newPagedBacklog(store persist.Store, qid uint64, window int, log func(error)) *pagedBacklog {
	return &pagedBacklog{store: store, qid: qid, window: window, log: log, mem: queue.NewMemBacklog()}
}

// recovered makes the queue's stored entries (count of them, all on disk)
// its disk segment, for start-up.
func (b *pagedBacklog) recovered(count int) {
	b.diskN, b.diskFrom = count, 1
}

func (b *pagedBacklog) Push(e queue.Entry) {
	if b.spill != nil && e.Seq > b.storedMax && (b.diskN > 0 || b.mem.Len() >= b.window) {
		if err := b.spill.append(e); err != nil {
			// Out of disk, say: keep the message in memory instead.
			b.log(fmt.Errorf("spilling a transient message: %w", err))
		} else {
			if b.diskN == 0 || e.Seq < b.diskFrom {
				b.diskFrom = e.Seq
			}
			b.diskN++
			b.diskBytes += e.Msg.Size()
			return
		}
	}
	if b.spill == nil && e.Msg.StoreID != 0 && e.Seq > b.storedMax && (b.diskN > 0 || b.mem.Len() >= b.window) {
		if b.diskN == 0 || e.Seq < b.diskFrom {
			b.diskFrom = e.Seq
		}
		b.diskN++
		b.diskBytes += e.Msg.Size()
		return
	}
	b.mem.Push(e)
	if b.spill != nil || e.Msg.StoreID != 0 {
		b.storedMax = max(b.storedMax, e.Seq)
	}
}

func (b *pagedBacklog) Requeue(e queue.Entry) { b.mem.Requeue(e) }

// fill loads the next slice of the disk segment when the disk segment's
// head comes before everything in mem.
func (b *pagedBacklog) fill() {
	if b.diskN == 0 {
		return
	}
	if e, ok := b.mem.Peek(); ok && e.Seq < b.diskFrom {
		return
	}
	if b.spill != nil {
		b.fillFromSpill()
		return
	}
	if err := b.store.Sync(); err != nil {
		b.log(err)
		return
	}
	loaded := 0
	last := b.diskFrom
	err := b.store.ScanQueue(b.qid, b.diskFrom, max(b.window/2, 1), true, func(r persist.RecoveredEntry) error {
		m := &queue.Message{
			Exchange: r.Msg.Exchange, RoutingKey: r.Msg.RoutingKey, Props: r.Msg.Props, Body: r.Msg.Body,
			Persistent: true, StoreID: r.MsgID, Priority: priority(r.Msg.Props),
		}
		if exp, ok := amqp.PropExpiration(r.Msg.Props); ok {
			m.TTL, m.HasTTL = parseExpiration(exp)
		}
		b.mem.Push(queue.Entry{Seq: r.Seq, Msg: m, Redelivered: r.Redelivered, Expires: r.Expires})
		b.diskBytes -= m.Size()
		loaded++
		last = r.Seq
		return nil
	})
	if err != nil {
		b.log(err)
	}
	b.loaded(loaded, last)
}

// fillFromSpill loads the next slice of a transient queue's spill log.
func (b *pagedBacklog) fillFromSpill() {
	loaded, last := 0, b.diskFrom
	for loaded < max(b.window/2, 1) && loaded < b.diskN {
		e, err := b.spill.next()
		if err != nil {
			b.log(fmt.Errorf("reading a transient queue's spilled messages back: %w", err))
			break
		}
		b.mem.Push(e)
		b.diskBytes -= e.Msg.Size()
		loaded++
		last = e.Seq
	}
	b.loaded(loaded, last)
}

// loaded accounts for n entries moved from the disk segment to mem, the
// last with Seq last.
func (b *pagedBacklog) loaded(loaded int, last uint64) {
	if loaded == 0 {
		// The store has fewer entries than counted (settled by another
		// path): forget the segment rather than spin.
		b.diskN, b.diskBytes = 0, 0
		return
	}
	b.diskN -= loaded
	b.diskFrom = last + 1
	b.storedMax = max(b.storedMax, last)
	if b.diskN <= 0 || b.diskBytes < 0 {
		b.diskN = max(b.diskN, 0)
		b.diskBytes = max(b.diskBytes, 0)
	}
}

func (b *pagedBacklog) Peek() (queue.Entry, bool) {
	b.fill()
	return b.mem.Peek()
}

func (b *pagedBacklog) Pop() (queue.Entry, bool) {
	b.fill()
	return b.mem.Pop()
}

// Remove takes out a ready entry; one in the disk segment, which a message
// the store failed to write is only by count, is taken off the count.
func (b *pagedBacklog) Remove(e queue.Entry) bool {
	if b.mem.Remove(e) {
		return true
	}
	if b.spill == nil && b.diskN > 0 && e.Seq >= b.diskFrom && e.Msg.StoreID != 0 {
		b.diskN--
		b.diskBytes = max(b.diskBytes-e.Msg.Size(), 0)
		return true
	}
	return false
}

func (b *pagedBacklog) Len() int     { return b.mem.Len() + b.diskN }
func (b *pagedBacklog) Bytes() int64 { return b.mem.Bytes() + b.diskBytes }

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
	b.diskN, b.diskBytes, b.storedMax = 0, 0, 0
	return n
}

package server

import (
	"errors"

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
// messages are written to the store under a store-only queue id that has
// no queue record (so a restart drops them), and deleted from the store
// again as they are loaded back.
//
// Like every backlog it is guarded by its queue's lock. It reads the store
// under that lock: one Sync and one scan per loaded slice.
type pagedBacklog struct {
	store     persist.Store
	qid       uint64
	window    int
	log       func(err error)
	transient bool          // spill everything, settle as loaded
	spills    int           // transient: messages spilled so far
	nextMsgID func() uint64 // transient: ids for spilled messages

	mem       queue.Backlog
	storedMax uint64
	diskN     int
	diskBytes int64
	diskFrom  uint64
}

// spillSyncEvery is how many transient spills go by between waits for the
// store's committer.
const spillSyncEvery = 1024

func newPagedBacklog(store persist.Store, qid uint64, window int, log func(error)) *pagedBacklog {
	return &pagedBacklog{store: store, qid: qid, window: window, log: log, mem: queue.NewMemBacklog()}
}

// recovered makes the queue's stored entries (count of them, all on disk)
// its disk segment, for start-up.
func (b *pagedBacklog) recovered(count int) {
	b.diskN, b.diskFrom = count, 1
}

func (b *pagedBacklog) Push(e queue.Entry) {
	if b.transient && e.Seq > b.storedMax && (b.diskN > 0 || b.mem.Len() >= b.window) {
		id := b.nextMsgID()
		m := e.Msg
		b.store.Publish(id, persist.MessageRecord{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Props: m.Props, Body: m.Body},
			[]persist.QueueSeq{{QueueID: b.qid, Seq: e.Seq, MsgID: id, Expires: e.Expires}}, nil)
		if b.diskN == 0 || e.Seq < b.diskFrom {
			b.diskFrom = e.Seq
		}
		b.diskN++
		b.diskBytes += m.Size()
		// The store holds each spilled body until its batch is written;
		// waiting for the committer now and then keeps that bounded and
		// paces a publisher to the disk (it is under this queue's lock, on
		// the publisher's reader).
		if b.spills++; b.spills%spillSyncEvery == 0 {
			if err := b.store.Sync(); err != nil {
				b.log(err)
			}
		}
		return
	}
	if !b.transient && e.Msg.StoreID != 0 && e.Seq > b.storedMax && (b.diskN > 0 || b.mem.Len() >= b.window) {
		if b.diskN == 0 || e.Seq < b.diskFrom {
			b.diskFrom = e.Seq
		}
		b.diskN++
		b.diskBytes += e.Msg.Size()
		return
	}
	b.mem.Push(e)
	if b.transient || e.Msg.StoreID != 0 {
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
	if err := b.store.Sync(); err != nil {
		b.log(err)
		return
	}
	loaded := 0
	last := b.diskFrom
	var spilled []persist.QueueSeq
	err := b.store.ScanQueue(b.qid, b.diskFrom, max(b.window/2, 1), true, func(r persist.RecoveredEntry) error {
		m := &queue.Message{
			Exchange: r.Msg.Exchange, RoutingKey: r.Msg.RoutingKey, Props: r.Msg.Props, Body: r.Msg.Body,
			Persistent: true, StoreID: r.MsgID, Priority: priority(r.Msg.Props),
		}
		if b.transient {
			// Back in memory for good: the spilled copy goes.
			m.Persistent = amqp.PropDeliveryMode(r.Msg.Props) == 2
			m.StoreID = 0
			spilled = append(spilled, persist.QueueSeq{QueueID: b.qid, Seq: r.Seq})
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
	if len(spilled) > 0 {
		b.store.Settle(spilled, nil)
	}
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

func (b *pagedBacklog) Len() int     { return b.mem.Len() + b.diskN }
func (b *pagedBacklog) Bytes() int64 { return b.mem.Bytes() + b.diskBytes }

// Purge forgets every ready entry. The store's entries are the caller's
// business (queue deletion drops them all; a purge pops entries instead).
func (b *pagedBacklog) Purge() int {
	n := b.Len()
	if b.transient && b.diskN > 0 {
		// A spill queue has no record: drop its entries (and bodies), in
		// the background, since this runs under the queue's lock and a
		// large spill takes a while. A restart drops them too.
		store, qid, logErr := b.store, b.qid, b.log
		go func() {
			if err := store.DeleteQueue("", "", qid); err != nil && !errors.Is(err, persist.ErrClosed) {
				logErr(err)
			}
		}()
	}
	b.mem.Purge()
	b.diskN, b.diskBytes, b.storedMax = 0, 0, 0
	return n
}

package classic

import (
	"container/heap"

	"github.com/warrenmq/warren/queue"
)

// Backlog keeps a queue's ready entries in Seq order. It is the storage seam:
// the in-memory backlog below serves transient queues and tests; a
// disk-paging backlog implements the same contract. A Backlog is guarded by
// its queue's lock and is never used concurrently.
type Backlog interface {
	// Push adds a ready entry. Entries normally come in ascending Seq; one
	// that comes late (its Seq was reserved before a later one was pushed)
	// is placed in Seq order.
	Push(e queue.Entry)
	// Requeue returns an entry that was taken earlier to its place by Seq.
	Requeue(e queue.Entry)
	// Peek returns the first entry without removing it.
	Peek() (queue.Entry, bool)
	// Pop removes and returns the first entry.
	Pop() (queue.Entry, bool)
	// Len is the number of ready entries; Bytes their body bytes.
	Len() int
	Bytes() int64
	// Purge drops every entry and returns how many there were.
	Purge() int
	// Remove takes out the ready entry e (found by Seq and Msg) wherever
	// it is, reporting whether it was there. It is for a message the store
	// failed to write (Queue.Withdraw), a rare path: it may be slow.
	Remove(e queue.Entry) bool
}

// memBacklog is a FIFO ring of fresh entries plus a min-heap of requeued
// ones. Every entry ever taken has a smaller Seq than every entry still in
// the ring (entries leave from the head, new ones join at the tail), so a
// requeued entry always belongs before the whole ring and the heap is
// consulted first.
type memBacklog struct {
	ring     []queue.Entry
	head     int
	n        int
	requeued seqHeap
	bytes    int64
}

// NewMemBacklog returns an empty in-memory backlog.
func NewMemBacklog() Backlog { return &memBacklog{} }

func (b *memBacklog) Push(e queue.Entry) {
	if b.n == len(b.ring) {
		b.grow()
	}
	size := len(b.ring)
	i := b.n
	// Walk back past entries with a larger Seq; normally none.
	for i > 0 {
		prev := b.ring[(b.head+i-1)%size]
		if prev.Seq <= e.Seq {
			break
		}
		b.ring[(b.head+i)%size] = prev
		i--
	}
	b.ring[(b.head+i)%size] = e
	b.n++
	b.bytes += e.Msg.Size()
}

func (b *memBacklog) grow() {
	size := 2 * len(b.ring)
	if size == 0 {
		size = 16
	}
	ring := make([]queue.Entry, size)
	for i := 0; i < b.n; i++ {
		ring[i] = b.ring[(b.head+i)%len(b.ring)]
	}
	b.ring, b.head = ring, 0
}

func (b *memBacklog) Requeue(e queue.Entry) {
	heap.Push(&b.requeued, e)
	b.bytes += e.Msg.Size()
}

func (b *memBacklog) Peek() (queue.Entry, bool) {
	if len(b.requeued) > 0 {
		return b.requeued[0], true
	}
	if b.n == 0 {
		return queue.Entry{}, false
	}
	return b.ring[b.head], true
}

func (b *memBacklog) Pop() (queue.Entry, bool) {
	var e queue.Entry
	switch {
	case len(b.requeued) > 0:
		e = heap.Pop(&b.requeued).(queue.Entry)
	case b.n > 0:
		e = b.ring[b.head]
		b.ring[b.head] = queue.Entry{}
		b.head = (b.head + 1) % len(b.ring)
		b.n--
		if b.n == 0 {
			b.head = 0
		}
	default:
		return queue.Entry{}, false
	}
	b.bytes -= e.Msg.Size()
	return e, true
}

func (b *memBacklog) Len() int     { return b.n + len(b.requeued) }
func (b *memBacklog) Bytes() int64 { return b.bytes }

func (b *memBacklog) Purge() int {
	n := b.Len()
	*b = memBacklog{}
	return n
}

func (b *memBacklog) Remove(e queue.Entry) bool {
	for i, r := range b.requeued {
		if r.Seq == e.Seq && r.Msg == e.Msg {
			heap.Remove(&b.requeued, i)
			b.bytes -= r.Msg.Size()
			return true
		}
	}
	// The ring is in Seq order: find the place, then close the gap.
	size := len(b.ring)
	at := func(i int) queue.Entry { return b.ring[(b.head+i)%size] }
	lo, hi := 0, b.n
	for lo < hi {
		m := (lo + hi) / 2
		if at(m).Seq < e.Seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo; i < b.n && at(i).Seq == e.Seq; i++ {
		if at(i).Msg != e.Msg {
			continue
		}
		for j := i; j < b.n-1; j++ {
			b.ring[(b.head+j)%size] = at(j + 1)
		}
		b.ring[(b.head+b.n-1)%size] = queue.Entry{}
		b.n--
		if b.n == 0 {
			b.head = 0
		}
		b.bytes -= e.Msg.Size()
		return true
	}
	return false
}

type seqHeap []queue.Entry

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i].Seq < h[j].Seq }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(queue.Entry)) }
func (h *seqHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = queue.Entry{}
	*h = old[:len(old)-1]
	return e
}

// priorityBacklog keeps one FIFO backlog per priority level and serves the
// highest non-empty level first; within a level, order is by Seq as in a
// plain queue. A message priority above the maximum counts as the maximum.
type priorityBacklog struct {
	levels []memBacklog
	n      int
	bytes  int64
}

// NewPriorityBacklog returns a backlog for x-max-priority = max.
func NewPriorityBacklog(max uint8) Backlog {
	return &priorityBacklog{levels: make([]memBacklog, int(max)+1)}
}

func (b *priorityBacklog) level(e queue.Entry) *memBacklog {
	p := int(e.Msg.Priority)
	if p >= len(b.levels) {
		p = len(b.levels) - 1
	}
	return &b.levels[p]
}

func (b *priorityBacklog) Push(e queue.Entry) {
	b.level(e).Push(e)
	b.n++
	b.bytes += e.Msg.Size()
}

func (b *priorityBacklog) Requeue(e queue.Entry) {
	b.level(e).Requeue(e)
	b.n++
	b.bytes += e.Msg.Size()
}

func (b *priorityBacklog) top() *memBacklog {
	for i := len(b.levels) - 1; i >= 0; i-- {
		if b.levels[i].Len() > 0 {
			return &b.levels[i]
		}
	}
	return nil
}

func (b *priorityBacklog) Peek() (queue.Entry, bool) {
	if l := b.top(); l != nil {
		return l.Peek()
	}
	return queue.Entry{}, false
}

func (b *priorityBacklog) Pop() (queue.Entry, bool) {
	l := b.top()
	if l == nil {
		return queue.Entry{}, false
	}
	e, _ := l.Pop()
	b.n--
	b.bytes -= e.Msg.Size()
	return e, true
}

func (b *priorityBacklog) Len() int     { return b.n }
func (b *priorityBacklog) Bytes() int64 { return b.bytes }

func (b *priorityBacklog) Remove(e queue.Entry) bool {
	if !b.level(e).Remove(e) {
		return false
	}
	b.n--
	b.bytes -= e.Msg.Size()
	return true
}

func (b *priorityBacklog) Purge() int {
	n := b.n
	for i := range b.levels {
		b.levels[i].Purge()
	}
	b.n, b.bytes = 0, 0
	return n
}

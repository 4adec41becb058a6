// watermark.go: the committed offset of one (group, partition): the
// deliveries its owner has not settled, the offsets to redeliver, and the
// assignment generation that fences acks from a former owner (issue 13,
// section 3).

package group

import (
	"container/heap"
	"errors"
	"fmt"
	"sort"
)

// Generation numbers the assignments of one (group, partition): it grows by
// one each time the partition gets a new owner (see Handoff). The broker
// stamps every delivery with the generation it was made under and passes it
// back with the delivery's ack or nack; a settlement from an older
// generation is a former owner's and never moves the committed offset.
// Zero is "never assigned".
type Generation uint64

// ErrDeliveryOrder is a new delivery below High: within a partition, new
// offsets are delivered in increasing order (redeliveries go through
// NextRedelivery).
var ErrDeliveryOrder = errors.New("group: offset delivered out of order")

// ErrGeneration is a handover that does not move the generation forward.
var ErrGeneration = errors.New("group: generation does not advance")

type slotState uint8

const (
	inFlight slotState = iota // delivered, not settled
	pending                   // to be redelivered (requeued, or in flight at a handover)
	done                      // acked, or rejected without requeue
)

type slot struct {
	off   int64
	state slotState
}

// Watermark tracks one (group, partition). Its committed offset is the next
// offset the group has to process: the lowest offset delivered and not yet
// processed, or High when every delivery is processed. It never passes an
// unprocessed delivery, whatever the order of acks.
//
// Cost: Deliver, Ack and Committed are amortised O(log k) for k
// outstanding deliveries (a binary search in an offset-ordered window, and
// a pop of the settled prefix); requeues keep a min-heap.
//
// Not safe for concurrent use: the broker keeps one per (group, partition)
// under the lock (or on the goroutine) that serialises that partition's
// deliveries and settlements.
type Watermark struct {
	// win holds every delivered offset from the committed one up, in
	// increasing order: new deliveries only append (they are above High).
	// win[head:] is live; processed offsets at its front are popped.
	win  []slot
	head int
	high int64 // one past the highest offset delivered or passed
	gen  Generation

	inFlight int
	pending  int
	redo     offHeap // offsets in state pending, lowest first
}

// NewWatermark starts a watermark at committed offset start, the offset the
// partition is (re)assigned or resumed at, under generation gen.
func NewWatermark(start int64, gen Generation) *Watermark {
	return &Watermark{high: start, gen: gen}
}

// Committed is the committed offset.
func (w *Watermark) Committed() int64 {
	if w.head < len(w.win) {
		return w.win[w.head].off
	}
	return w.high
}

// High is one past the highest offset delivered or passed: where the
// partition's reader continues with new messages.
func (w *Watermark) High() int64 { return w.high }

// Generation is the current assignment generation.
func (w *Watermark) Generation() Generation { return w.gen }

// InFlight is the number of deliveries the owner has not settled: the
// number a revoking Handoff waits for.
func (w *Watermark) InFlight() int { return w.inFlight }

// Pending is the number of offsets waiting for redelivery.
func (w *Watermark) Pending() int { return w.pending }

// Outstanding is InFlight plus Pending: the offsets that hold the
// committed offset back.
func (w *Watermark) Outstanding() int { return w.inFlight + w.pending }

// Deliver records the first delivery of off under the current generation.
// off must be at least High; offsets between High and off that were not
// delivered (filtered out, or below the first retained offset) count as
// processed.
func (w *Watermark) Deliver(off int64) error {
	if off < w.high {
		return fmt.Errorf("%w: %d below %d", ErrDeliveryOrder, off, w.high)
	}
	w.compact()
	w.win = append(w.win, slot{off: off, state: inFlight})
	w.high = off + 1
	w.inFlight++
	return nil
}

// Pass records that the reader moved past off without delivering it (a
// filtered-out message, or the start of retention above High): with nothing
// outstanding the committed offset moves past it.
func (w *Watermark) Pass(off int64) {
	if off >= w.high {
		w.high = off + 1
	}
}

// Skip records that off (at least High) was processed before, without a
// delivery now: an offset its group acknowledged out of order before a
// restart. Unlike Pass, while a lower offset is outstanding it stays
// listed by Processed, so that it is committed as processed again.
func (w *Watermark) Skip(off int64) error {
	if off < w.high {
		return fmt.Errorf("%w: %d below %d", ErrDeliveryOrder, off, w.high)
	}
	w.high = off + 1
	if w.head < len(w.win) {
		w.compact()
		w.win = append(w.win, slot{off: off, state: done})
	}
	return nil
}

// Processed appends to dst, in increasing order, the offsets above
// Committed that are processed (acked, rejected without requeue, or
// skipped) while a lower one is outstanding: what a group resumed at
// Committed after a restart must pass over.
func (w *Watermark) Processed(dst []int64) []int64 {
	for i := w.head; i < len(w.win); i++ {
		if w.win[i].state == done {
			dst = append(dst, w.win[i].off)
		}
	}
	return dst
}

// find is the index in win of a live slot for off, or -1.
func (w *Watermark) find(off int64) int {
	live := w.win[w.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].off >= off })
	if i < len(live) && live[i].off == off {
		return w.head + i
	}
	return -1
}

// Ack settles the delivery of off made under generation gen as processed.
// It reports whether the committed state changed: false for a fenced
// generation (a former owner's ack: the broker still settles its delivery
// tag), an offset not in flight, or a repeated ack.
func (w *Watermark) Ack(gen Generation, off int64) bool {
	return w.settle(gen, off, done)
}

// Nack settles the delivery of off made under generation gen as a nack or
// reject. With requeue the offset is redelivered to the owner (see
// NextRedelivery) and keeps holding the committed offset; without, it
// counts as processed. The result is Ack's.
func (w *Watermark) Nack(gen Generation, off int64, requeue bool) bool {
	if requeue {
		return w.settle(gen, off, pending)
	}
	return w.settle(gen, off, done)
}

func (w *Watermark) settle(gen Generation, off int64, to slotState) bool {
	if gen != w.gen {
		return false
	}
	i := w.find(off)
	if i < 0 || w.win[i].state != inFlight {
		return false
	}
	w.inFlight--
	w.win[i].state = to
	if to == pending {
		w.pending++
		heap.Push(&w.redo, off)
		return true
	}
	w.popDone()
	return true
}

// NextRedelivery takes the lowest offset waiting for redelivery and marks
// it in flight again under the current generation; the broker delivers it
// (redelivered=true) before new offsets. ok is false when none waits.
func (w *Watermark) NextRedelivery() (off int64, ok bool) {
	for w.redo.Len() > 0 {
		off = heap.Pop(&w.redo).(int64)
		if i := w.find(off); i >= 0 && w.win[i].state == pending {
			w.win[i].state = inFlight
			w.pending--
			w.inFlight++
			return off, true
		}
	}
	return 0, false
}

// Handover moves the partition to generation gen (a new owner): every
// delivery still in flight under the old generation waits for redelivery
// to the new owner, and the old owner's later settlements are fenced.
// gen must be above the current generation (ErrGeneration otherwise, and
// nothing changes).
func (w *Watermark) Handover(gen Generation) error {
	if gen <= w.gen {
		return fmt.Errorf("%w: handover to %d from %d", ErrGeneration, gen, w.gen)
	}
	w.gen = gen
	for i := w.head; i < len(w.win); i++ {
		if w.win[i].state == inFlight {
			w.win[i].state = pending
			w.inFlight--
			w.pending++
			heap.Push(&w.redo, w.win[i].off)
		}
	}
	return nil
}

// popDone drops processed slots from the front of the window.
func (w *Watermark) popDone() {
	for w.head < len(w.win) && w.win[w.head].state == done {
		w.head++
	}
	if w.head == len(w.win) {
		w.win, w.head = w.win[:0], 0
		if cap(w.win) > 4096 { // a burst is over: give its memory back
			w.win = nil
		}
	}
}

// compact reuses the window's array once its dead front outweighs the live
// part, so appends stay amortised O(1) and memory tracks what is live.
func (w *Watermark) compact() {
	if w.head > 0 && w.head >= len(w.win)-w.head && len(w.win) == cap(w.win) {
		n := copy(w.win, w.win[w.head:])
		w.win, w.head = w.win[:n], 0
	}
}

// offHeap is a min-heap of offsets.
type offHeap []int64

func (h offHeap) Len() int           { return len(h) }
func (h offHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h offHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *offHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *offHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

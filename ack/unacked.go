// Package ack tracks one channel's deliveries awaiting acknowledgement and
// its publisher-confirm sequence.
package ack

import (
	"sort"

	"github.com/warrenmq/warren/queue"
)

// Delivery is one message delivered on a channel and not yet settled: the
// queue it came from and the queue's reference to it.
type Delivery struct {
	Tag   uint64
	Queue queue.Queue
	Entry queue.Entry
	// Credit is the prefetch credit of the consumer it went to, nil for
	// basic.get.
	Credit *ConsumerCredit
	// At is when it was delivered, on the channel's monotonic clock (the
	// consumer acknowledgement timeout); 0 when nobody asks.
	At int64
}

// Unacked holds a channel's unsettled deliveries in delivery-tag order.
// Settled deliveries leave tombstones that are trimmed from the front and
// compacted when they dominate, so ack, multiple ack and requeue-all are all
// cheap. It is not safe for concurrent use; the channel guards it.
type Unacked struct {
	list []Delivery // ascending Tag; Queue == nil marks a tombstone
	live int
}

// Add records d; its tag must be larger than every tag added before.
func (u *Unacked) Add(d Delivery) {
	u.list = append(u.list, d)
	u.live++
}

// Len is the number of unsettled deliveries.
func (u *Unacked) Len() int { return u.live }

// Oldest returns the unsettled delivery with the lowest tag, the one
// delivered first; ok is false when there is none.
func (u *Unacked) Oldest() (d Delivery, ok bool) {
	for _, d := range u.list {
		if d.Queue != nil {
			return d, true
		}
	}
	return Delivery{}, false
}

// Take removes and appends to out the deliveries an ack, nack or reject
// names: tag alone, or with multiple every delivery up to and including tag
// (tag 0 with multiple means all). It reports false, removing nothing, when
// tag is not an unsettled delivery, as RabbitMQ answers 406 then.
func (u *Unacked) Take(tag uint64, multiple bool, out []Delivery) ([]Delivery, bool) {
	if multiple && tag == 0 {
		return u.TakeAll(out), true
	}
	i := sort.Search(len(u.list), func(i int) bool { return u.list[i].Tag >= tag })
	if i == len(u.list) || u.list[i].Tag != tag || u.list[i].Queue == nil {
		return out, false
	}
	start := i
	if multiple {
		start = 0
	}
	for k := start; k <= i; k++ {
		if u.list[k].Queue != nil {
			out = append(out, u.list[k])
			u.list[k] = Delivery{Tag: u.list[k].Tag}
			u.live--
		}
	}
	u.trim()
	return out, true
}

// TakeAll removes and appends every unsettled delivery, in tag order.
func (u *Unacked) TakeAll(out []Delivery) []Delivery {
	for _, d := range u.list {
		if d.Queue != nil {
			out = append(out, d)
		}
	}
	clear(u.list)
	u.list = u.list[:0]
	u.live = 0
	return out
}

// trim drops tombstones from the front, and compacts the list when
// tombstones make up most of it.
func (u *Unacked) trim() {
	n := 0
	for n < len(u.list) && u.list[n].Queue == nil {
		n++
	}
	if n == len(u.list) {
		clear(u.list)
		u.list = u.list[:0]
		return
	}
	if n < 64 && u.live >= len(u.list)/2 {
		return
	}
	k := 0
	for _, d := range u.list {
		if d.Queue != nil {
			u.list[k] = d
			k++
		}
	}
	clear(u.list[k:])
	u.list = u.list[:k]
}

// Restore puts back deliveries taken earlier (a rolled-back transaction's
// acks), keeping tag order.
func (u *Unacked) Restore(ds []Delivery) {
	if len(ds) == 0 {
		return
	}
	u.list = append(u.list, ds...)
	sort.SliceStable(u.list, func(i, j int) bool { return u.list[i].Tag < u.list[j].Tag })
	u.live += len(ds)
}

// SameQueue reports whether every delivery of ds is from one queue.
func SameQueue(ds []Delivery) bool {
	for _, d := range ds[1:] {
		if d.Queue != ds[0].Queue {
			return false
		}
	}
	return true
}

// Entries returns the queue entries of ds.
func Entries(ds []Delivery) []queue.Entry {
	out := make([]queue.Entry, len(ds))
	for i, d := range ds {
		out[i] = d.Entry
	}
	return out
}

// QueueGroup is the entries of a set of deliveries that came from one
// queue.
type QueueGroup struct {
	Queue   queue.Queue
	Entries []queue.Entry
}

// ByQueue groups ds by queue, in the order the queues first appear, each
// group's entries in delivery order.
func ByQueue(ds []Delivery) []QueueGroup {
	var out []QueueGroup
	at := map[queue.Queue]int{}
	for _, d := range ds {
		i, ok := at[d.Queue]
		if !ok {
			i = len(out)
			at[d.Queue] = i
			out = append(out, QueueGroup{Queue: d.Queue})
		}
		out[i].Entries = append(out[i].Entries, d.Entry)
	}
	return out
}

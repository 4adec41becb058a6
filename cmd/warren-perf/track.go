package main

import "math/bits"

// bitset is a growable set of uint32 sequence numbers.
type bitset struct{ w []uint64 }

// set adds n and reports whether it was already present.
func (b *bitset) set(n uint32) (was bool) {
	i := int(n >> 6)
	if i >= len(b.w) {
		nw := make([]uint64, max(i+1, 2*len(b.w)))
		copy(nw, b.w)
		b.w = nw
	}
	m := uint64(1) << (n & 63)
	was = b.w[i]&m != 0
	b.w[i] |= m
	return was
}

func (b *bitset) has(n uint32) bool {
	i := int(n >> 6)
	return i < len(b.w) && b.w[i]&(uint64(1)<<(n&63)) != 0
}

// orCount merges o into b and returns how many members were in both.
func (b *bitset) orCount(o *bitset) (both int64) {
	if len(o.w) > len(b.w) {
		nw := make([]uint64, len(o.w))
		copy(nw, b.w)
		b.w = nw
	}
	for i, x := range o.w {
		both += int64(bits.OnesCount64(b.w[i] & x))
		b.w[i] |= x
	}
	return both
}

// seqTracker follows what one consumer received from one producer through
// one queue.
type seqTracker struct {
	seen       bitset
	last       uint32
	any        bool
	outOfOrder int64
	duplicates int64
	count      int // messages added, duplicates included
}

func (t *seqTracker) add(seq uint32) {
	t.count++
	if t.seen.set(seq) {
		t.duplicates++
		return
	}
	if t.any && seq < t.last {
		t.outOfOrder++
	} else {
		t.last = seq
	}
	t.any = true
}

func trackKey(producer uint32, queue int) uint64 {
	return uint64(producer)<<32 | uint64(uint32(queue))
}

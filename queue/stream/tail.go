// tail.go: a partition's tail cache: the records the writer synced last,
// kept as the messages they were published as, so that the consumers at
// the tail (however many: plain consumers, one member per group) share one
// copy of each instead of each reading, decoding and copying it from the
// file. A partition keeps one only while it has cursors; its size is
// bounded (tailBudget over the stream's partitions), so a stream's memory
// stays flat however long it is or however far behind a reader is: a
// cursor behind the cache reads the file.

package stream

import (
	"sync"

	"github.com/warrenmq/warren/queue"
)

const (
	// tailBudget is the bytes of message data a stream's tail caches hold
	// at most, shared by its partitions (tailMin each at least).
	tailBudget = 8 << 20
	tailMin    = 256 << 10
	// tailMaxEntries bounds a cache's entries whatever their size.
	tailMaxEntries = 16384
)

type tailEnt struct {
	msg       *queue.Message
	size      int64
	filter    string
	hasFilter bool
}

// tailCache holds the offsets [first, first+len(ents)) of a partition.
type tailCache struct {
	mu      sync.RWMutex
	first   uint64
	ents    []tailEnt
	head    int // ents[head:] are live
	bytes   int64
	limit   int64
	readers int // cursors on the partition; the cache fills only while some exist
}

func newTailCache(partitions int) *tailCache {
	return &tailCache{limit: max(tailBudget/int64(partitions), tailMin)}
}

// add appends a synced batch (offsets following the cache's, or a new
// start), then drops the oldest entries over the bounds. It keeps nothing
// while the partition has no cursors.
func (t *tailCache) add(recs []Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.readers == 0 || len(recs) == 0 {
		t.reset()
		return
	}
	if t.live() == 0 || t.first+uint64(t.live()) != recs[0].Offset {
		t.reset()
		t.first = recs[0].Offset
	}
	for i := range recs {
		r := &recs[i]
		m := queue.NewStored(r.Exchange, r.RoutingKey, r.Props, r.Body, 0)
		e := tailEnt{msg: m, size: int64(len(r.Props) + len(r.Body)), filter: r.Filter, hasFilter: r.HasFilter}
		t.ents = append(t.ents, e)
		t.bytes += e.size
	}
	for t.live() > 1 && (t.bytes > t.limit || t.live() > tailMaxEntries) {
		t.bytes -= t.ents[t.head].size
		t.ents[t.head] = tailEnt{}
		t.head++
		t.first++
	}
	if t.head > 0 && t.head >= len(t.ents)/2 {
		n := copy(t.ents, t.ents[t.head:])
		clear(t.ents[n:])
		t.ents, t.head = t.ents[:n], 0
	}
}

func (t *tailCache) live() int { return len(t.ents) - t.head }

func (t *tailCache) reset() {
	clear(t.ents)
	t.ents, t.head, t.bytes = t.ents[:0], 0, 0
}

// get returns the entry at off, if the cache holds it.
func (t *tailCache) get(off uint64) (tailEnt, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if off < t.first || off >= t.first+uint64(t.live()) {
		return tailEnt{}, false
	}
	return t.ents[t.head+int(off-t.first)], true
}

// attach and detach count the partition's cursors.
func (t *tailCache) attach() {
	t.mu.Lock()
	t.readers++
	t.mu.Unlock()
}

func (t *tailCache) detach() {
	t.mu.Lock()
	t.readers--
	if t.readers == 0 {
		t.reset()
	}
	t.mu.Unlock()
}

// drop forgets the entries below first (retention dropped them).
func (t *tailCache) drop(first uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.live() > 0 && t.first < first {
		t.bytes -= t.ents[t.head].size
		t.ents[t.head] = tailEnt{}
		t.head++
		t.first++
	}
}

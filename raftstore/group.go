package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// Group is one Raft group's view of the store: a raft.LogStore, a
// raft.StableStore and a raft.CommitTrackingLogStore. Log writes go
// through the store's committer; reads find the entry's place in the
// group's index and read it from its segment.
type Group struct {
	s  *Store
	id uint64

	mu          sync.Mutex
	first, last uint64 // 0, 0: no entries
	locs        []loc  // locs[i]: entry first+i (n 0: none)
	staged      uint64 // commit index to write with the next StoreLogs
	commit      uint64 // the last commit index written
	// recent holds the entries last stored, by index mod its size: raft
	// reads each entry back right after storing it (a leader to send it
	// to each follower, a follower to apply it).
	recent [recentSize]*raft.Log

	// durable is the last index known synced (StoreLogsEarly answers
	// before the sync); durableCh is closed and replaced when it rises
	// while someone waits (waiting).
	durable   atomic.Uint64
	durableCh chan struct{}
	waiting   bool
}

// recentSize is how many of its last entries a group keeps in memory.
const recentSize = 8

// loc is where a record lies: segment, offset, length.
type loc struct{ seq, off, n uint32 }

var (
	_ raft.LogStore               = (*Group)(nil)
	_ raft.StableStore            = (*Group)(nil)
	_ raft.CommitTrackingLogStore = (*Group)(nil)
)

// ID is the group's id.
func (g *Group) ID() uint64 { return g.id }

// The index: put, deleteRange and drop run on the committer (or at open)
// with g.mu held or before anyone else can see g; they keep the
// segments' live counts.

func (g *Group) live(l loc, d int64) {
	if l.n == 0 {
		return
	}
	if seg := g.s.segs[l.seq]; seg != nil {
		seg.live += d
		seg.liveBytes += d * int64(l.n)
	}
}

// put records that entry idx lies at l (replacing a place it had).
func (g *Group) put(idx uint64, l loc) {
	g.live(l, 1)
	switch {
	case g.last == 0:
		g.first, g.last = idx, idx
		g.locs = append(g.locs[:0], l)
	case idx > g.last:
		for g.last+1 < idx {
			g.locs = append(g.locs, loc{})
			g.last++
		}
		g.locs = append(g.locs, l)
		g.last = idx
	case idx < g.first:
		front := make([]loc, g.first-idx, uint64(len(g.locs))+g.first-idx)
		front[0] = l
		g.locs = append(front, g.locs...)
		g.first = idx
	default:
		i := idx - g.first
		g.live(g.locs[i], -1)
		g.locs[i] = l
	}
}

// deleteRange removes entries min..max.
func (g *Group) deleteRange(min, max uint64) {
	if g.last == 0 || max < g.first || min > g.last {
		return
	}
	min, max = maxU(min, g.first), minU(max, g.last)
	for i := min; i <= max; i++ {
		g.live(g.locs[i-g.first], -1)
		g.locs[i-g.first] = loc{}
	}
	for i, c := range g.recent {
		if c != nil && c.Index >= min && c.Index <= max {
			g.recent[i] = nil
		}
	}
	// The bounds are the first and last entry still there.
	lo, hi := 0, len(g.locs)
	for lo < hi && g.locs[lo].n == 0 {
		lo++
	}
	for hi > lo && g.locs[hi-1].n == 0 {
		hi--
	}
	if lo == hi {
		g.first, g.last, g.locs = 0, 0, nil
		return
	}
	g.first += uint64(lo)
	g.last = g.first + uint64(hi-lo) - 1
	if lo > 0 && lo > len(g.locs)/2 {
		// Let go of the front's memory now and then.
		g.locs = append([]loc(nil), g.locs[lo:hi]...)
	} else {
		g.locs = g.locs[lo:hi]
	}
}

// drop removes every entry and the commit index.
func (g *Group) drop() {
	for _, l := range g.locs {
		g.live(l, -1)
	}
	g.first, g.last, g.locs, g.commit = 0, 0, nil, 0
	g.recent = [recentSize]*raft.Log{}
}

// applied updates the index after r was written (the committer calls it).
func (g *Group) applied(r *request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.dropAll:
		g.drop()
		g.durable.Store(0)
	case r.del:
		suffix := g.last != 0 && r.delMax >= g.last // the whole log too
		g.deleteRange(r.delMin, r.delMax)
		if suffix && g.durable.Load() >= r.delMin {
			// A suffix cut (a follower's conflict): what is durable ends
			// before it until entries there are synced again. (A prefix
			// cut, compaction, changes nothing; a cut of all of it may be
			// compaction after a snapshot: a lower durable index only
			// waits for entries synced anyway.)
			g.durable.Store(r.delMin - 1)
		}
	}
	for _, e := range r.ents {
		g.put(e.idx, loc{seq: r.at.seq, off: r.at.off + e.off, n: e.n})
	}
	for _, l := range r.logs {
		g.recent[l.Index%recentSize] = l
	}
	if r.commit > g.commit {
		g.commit = r.commit
	}
}

// synced raises the durable index past r's entries once they are synced.
func (g *Group) synced(r *request) {
	if len(r.logs) == 0 {
		return
	}
	last := r.logs[len(r.logs)-1].Index
	g.mu.Lock()
	if last > g.durable.Load() {
		g.durable.Store(last)
		if g.waiting {
			close(g.durableCh)
			g.durableCh, g.waiting = nil, false
		}
	}
	g.mu.Unlock()
}

// Durable is the last index of the group's log known synced.
func (g *Group) Durable() uint64 { return g.durable.Load() }

// WaitDurable waits until the group's log is synced up to idx (at once if
// it is); an error if the store failed or closed first.
func (g *Group) WaitDurable(idx uint64) error {
	for g.durable.Load() < idx {
		if p := g.s.failed.Load(); p != nil {
			return *p
		}
		g.mu.Lock()
		if g.durable.Load() >= idx {
			g.mu.Unlock()
			return nil
		}
		if g.durableCh == nil {
			g.durableCh = make(chan struct{})
		}
		g.waiting = true
		ch := g.durableCh
		g.mu.Unlock()
		select {
		case <-ch:
		case <-g.s.stopped:
			if g.durable.Load() >= idx {
				return nil
			}
			return ErrClosed
		}
	}
	return nil
}

// FirstIndex implements raft.LogStore.
func (g *Group) FirstIndex() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first, nil
}

// LastIndex implements raft.LogStore.
func (g *Group) LastIndex() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, nil
}

// GetLog implements raft.LogStore; an entry that fails its checksum is a
// *CorruptError.
func (g *Group) GetLog(index uint64, l *raft.Log) error {
	if g.s.closed.Load() {
		return ErrClosed
	}
	g.mu.Lock()
	var at loc
	if g.last != 0 && index >= g.first && index <= g.last {
		at = g.locs[index-g.first]
		if c := g.recent[index%recentSize]; c != nil && c.Index == index && at.n != 0 {
			*l = *c
			g.mu.Unlock()
			return nil
		}
	}
	if at.n == 0 {
		g.mu.Unlock()
		return raft.ErrLogNotFound
	}
	// The segment is looked up before g.mu is let go: the committer may
	// move the entry on (copies) and remove its old segment, but not
	// while the read holds segMu.
	g.s.segMu.RLock()
	g.mu.Unlock()
	seg := g.s.segs[at.seq]
	buf := make([]byte, at.n)
	var err error
	if seg != nil {
		_, err = seg.f.ReadAt(buf, int64(at.off))
	}
	g.s.segMu.RUnlock()
	if seg == nil {
		return fmt.Errorf("raftstore: group %d entry %d: segment %d is gone", g.id, index, at.seq)
	}
	if err != nil {
		return err
	}
	body, ok := checkRecord(buf, seg.seed)
	if !ok {
		return &CorruptError{g.id, index, "checksum mismatch"}
	}
	if body[0] != recEntry || binary.BigEndian.Uint64(body[1:9]) != g.id {
		return &CorruptError{g.id, index, "not this group's entry"}
	}
	return decodeEntry(g.id, index, body[recBody:], l)
}

// StoreLog implements raft.LogStore.
func (g *Group) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries (and a staged commit
// index) are durable when it returns, written with whatever other groups
// wrote at the same time.
func (g *Group) StoreLogs(logs []*raft.Log) error {
	return g.storeLogs(logs, false)
}

func (g *Group) storeLogs(logs []*raft.Log, early bool) error {
	if len(logs) == 0 {
		return nil
	}
	g.mu.Lock()
	staged := g.staged
	g.mu.Unlock()
	n := 0
	for _, l := range logs {
		n += recHeader + recBody + entryHeader + 4 + len(l.Extensions)
		if len(l.Data) < 256 {
			n += len(l.Data)
		}
	}
	if staged > 0 {
		n += recHeader + recBody + 8
	}
	r := &request{group: g, appends: 1, early: early, arena: make([]byte, 0, n), ents: make([]entryPos, 0, len(logs)), logs: logs,
		pieces: make([][]byte, 0, 2*len(logs)+1), recs: make([]int, 0, len(logs)+1)}
	for _, l := range logs {
		r.entry(g.id, l, false)
	}
	if staged > 0 {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], staged)
		r.record(appendRecord(nil, recCommit, g.id, v[:]))
		r.commit = staged
	}
	return g.s.submit(r)
}

// StoreLogsEarly stores logs as StoreLogs does but returns once they are
// written, before the sync that makes them durable (Durable, WaitDurable
// tell when it is done): for a leader, whose own copy need not be on disk
// before it sends the entries to its followers, as long as nothing acts
// on an entry (applies it, confirms it, tells a follower it is committed)
// before it is durable here too.
func (g *Group) StoreLogsEarly(logs []*raft.Log) error {
	return g.storeLogs(logs, true)
}

// DeleteRange implements raft.LogStore: entries min..max inclusive.
func (g *Group) DeleteRange(min, max uint64) error {
	g.mu.Lock()
	first, last := g.first, g.last
	g.mu.Unlock()
	if first == 0 || max < first || min > last {
		return nil
	}
	min, max = maxU(min, first), minU(max, last)
	var p [16]byte
	binary.BigEndian.PutUint64(p[:], min)
	binary.BigEndian.PutUint64(p[8:], max)
	r := &request{group: g, del: true, delMin: min, delMax: max}
	r.record(appendRecord(nil, recDelete, g.id, p[:]))
	return g.s.submit(r)
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// StageCommitIndex implements raft.CommitTrackingLogStore: the index is
// written with the next StoreLogs, atomically with it.
func (g *Group) StageCommitIndex(idx uint64) error {
	g.mu.Lock()
	if idx > g.staged {
		g.staged = idx
	}
	g.mu.Unlock()
	return nil
}

// GetCommitIndex implements raft.CommitTrackingLogStore: the last commit
// index written, never above the last entry.
func (g *Group) GetCommitIndex() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return minU(g.commit, g.last), nil
}

func (g *Group) get(k []byte) ([]byte, error) {
	if g.s.closed.Load() {
		return nil, ErrClosed
	}
	var v []byte
	err := g.s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	return v, err
}

// Set implements raft.StableStore (durable when it returns).
func (g *Group) Set(key, val []byte) error {
	if g.s.closed.Load() {
		return ErrClosed
	}
	g.s.stableMu.Lock()
	defer g.s.stableMu.Unlock()
	if err := g.s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(stableKey(g.id, key), append([]byte{}, val...))
	}); err != nil {
		return err
	}
	return g.s.syncStable()
}

// Get implements raft.StableStore: ErrNotFound for a key never set.
func (g *Group) Get(key []byte) ([]byte, error) { return g.get(stableKey(g.id, key)) }

// SetUint64 implements raft.StableStore.
func (g *Group) SetUint64(key []byte, val uint64) error {
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, val)
	return g.Set(key, v)
}

// GetUint64 implements raft.StableStore: 0 and ErrNotFound for a key never
// set.
func (g *Group) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errors.New("raftstore: stable value is not 8 bytes")
	}
	return binary.BigEndian.Uint64(v), nil
}

func logKey(group, idx uint64) []byte {
	k := make([]byte, 17)
	k[0] = kindLog
	binary.BigEndian.PutUint64(k[1:], group)
	binary.BigEndian.PutUint64(k[9:], idx)
	return k
}

func stableKey(group uint64, key []byte) []byte {
	k := make([]byte, 9+len(key))
	k[0] = kindStable
	binary.BigEndian.PutUint64(k[1:], group)
	copy(k[9:], key)
	return k
}

func commitKey(group uint64) []byte {
	k := make([]byte, 9)
	k[0] = kindCommit
	binary.BigEndian.PutUint64(k[1:], group)
	return k
}

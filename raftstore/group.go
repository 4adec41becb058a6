package raftstore

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// Group is one Raft group's view of the store: a raft.LogStore, a
// raft.StableStore and a raft.CommitTrackingLogStore. Writes go through
// the store's committer; reads go to Badger directly.
type Group struct {
	s  *Store
	id uint64

	mu          sync.Mutex
	first, last uint64 // 0, 0: no entries
	staged      uint64 // commit index to write with the next StoreLogs
}

var (
	_ raft.LogStore               = (*Group)(nil)
	_ raft.StableStore            = (*Group)(nil)
	_ raft.CommitTrackingLogStore = (*Group)(nil)
)

// ID is the group's id.
func (g *Group) ID() uint64 { return g.id }

func (g *Group) loadBounds() error {
	prefix := make([]byte, 9)
	prefix[0] = kindLog
	binary.BigEndian.PutUint64(prefix[1:], g.id)
	return g.s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		it.Rewind()
		if it.Valid() {
			g.first = binary.BigEndian.Uint64(it.Item().Key()[9:])
		}
		it.Close()
		rit := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		defer rit.Close()
		end := append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		rit.Seek(end)
		if rit.Valid() {
			g.last = binary.BigEndian.Uint64(rit.Item().Key()[9:])
		}
		return nil
	})
}

// applied updates the bounds after r was written (the committer calls it).
func (g *Group) applied(r *request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.dropAll:
		g.first, g.last = 0, 0
	case r.del:
		switch {
		case r.delMin <= g.first && r.delMax >= g.last:
			g.first, g.last = 0, 0
		case r.delMin <= g.first:
			g.first = r.delMax + 1
		case r.delMax >= g.last:
			g.last = r.delMin - 1
		}
	}
	if r.appends > 0 {
		if g.first == 0 || r.first < g.first {
			g.first = r.first
		}
		if r.last > g.last {
			g.last = r.last
		}
	}
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
	err := g.s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(g.id, index))
		if err != nil {
			return err
		}
		b, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return decodeLog(g.id, index, b, l)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return raft.ErrLogNotFound
	}
	return err
}

// StoreLog implements raft.LogStore.
func (g *Group) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries (and a staged commit
// index) are durable when it returns, written with whatever other groups
// wrote at the same time.
func (g *Group) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	r := &request{group: g, appends: 1, first: logs[0].Index, last: logs[0].Index}
	r.sets = make([]kv, 0, len(logs)+1)
	for _, l := range logs {
		r.sets = append(r.sets, kv{logKey(g.id, l.Index), encodeLog(l)})
		r.first, r.last = min(r.first, l.Index), max(r.last, l.Index)
	}
	g.mu.Lock()
	staged := g.staged
	g.mu.Unlock()
	if staged > 0 {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, staged)
		r.sets = append(r.sets, kv{commitKey(g.id), v})
	}
	return g.s.submit(r)
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
	return g.s.submit(&request{group: g, del: true, delMin: min, delMax: max})
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
	v, err := g.get(commitKey(g.id))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, nil
	}
	idx := binary.BigEndian.Uint64(v)
	last, _ := g.LastIndex()
	return minU(idx, last), nil
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
	return g.s.submit(&request{group: g, sets: []kv{{stableKey(g.id, key), append([]byte{}, val...)}}})
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

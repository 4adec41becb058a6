package persist

import (
	"math"
	"sort"
	"strings"
	"sync"
)

// MemoryDisk is the committed state of in-memory stores. A store opened
// with OpenMemory on a MemoryDisk that an earlier store used (and closed)
// sees that store's committed state, as after a restart. It can also fail
// commits on demand, for fault-injection tests.
type MemoryDisk struct {
	mu   sync.RWMutex
	data map[string][]byte
	fail func() error
}

// NewMemoryDisk returns an empty disk.
func NewMemoryDisk() *MemoryDisk { return &MemoryDisk{data: make(map[string][]byte)} }

// FailCommits makes every later commit call fn first; a non-nil error fails
// the commit and nothing of the transaction is applied. A nil fn restores
// normal commits.
func (d *MemoryDisk) FailCommits(fn func() error) {
	d.mu.Lock()
	d.fail = fn
	d.mu.Unlock()
}

// Len is the number of keys on the disk (for tests).
func (d *MemoryDisk) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.data)
}

// NewMemory returns an in-memory Store on a fresh MemoryDisk. It has the
// Badger store's contract, group commit included: done callbacks are called
// asynchronously, from the committer goroutine, after the op's batch is
// applied.
func NewMemory() Store {
	s, err := OpenMemory(NewMemoryDisk())
	if err != nil {
		panic("persist: recovery of an empty memory disk failed: " + err.Error()) // cannot happen
	}
	return s
}

// OpenMemory opens an in-memory Store on d, recovering what earlier stores
// committed to it. Only one open store may use d at a time.
func OpenMemory(d *MemoryDisk) (Store, error) {
	return newEngine(memKV{d}, nil, logOptions{})
}

type memKV struct{ d *MemoryDisk }

func (m memKV) begin() kvTxn { return &memTxn{d: m.d, pending: make(map[string][]byte)} }

func (m memKV) view(fn func(r kvReader) error) error { return fn(memView(m)) }

func (memKV) limits() (int64, int64) { return math.MaxInt64 / 4, math.MaxInt64 / 4 }

func (memKV) entrySize(klen, vlen int) int64 { return int64(klen + vlen) }

func (memKV) close() error { return nil }

// memView reads the committed state; values are never mutated in place, so
// a view sees each key's value at the time it reads it.
type memView struct{ d *MemoryDisk }

func (v memView) get(k []byte, fn func([]byte) error) error {
	v.d.mu.RLock()
	val, ok := v.d.data[string(k)]
	v.d.mu.RUnlock()
	if !ok {
		return ErrNotFound
	}
	return fn(val)
}

func (v memView) scan(prefix []byte, keysOnly bool, fn func(k, v []byte) error) error {
	return scanSorted(v.d, nil, prefix, prefix, keysOnly, fn)
}

func (v memView) scanFrom(prefix, start []byte, keysOnly bool, fn func(k, v []byte) error) error {
	return scanSorted(v.d, nil, prefix, start, keysOnly, fn)
}

// scanSorted snapshots the keys with prefix (merged with a transaction's
// pending writes, nil meaning deleted), sorts them, and calls fn without
// holding the lock.
func scanSorted(d *MemoryDisk, pending map[string][]byte, prefix, start []byte, keysOnly bool, fn func(k, v []byte) error) error {
	type kvp struct {
		k string
		v []byte
	}
	p, from := string(prefix), string(start)
	var items []kvp
	d.mu.RLock()
	for k, v := range d.data {
		if strings.HasPrefix(k, p) && k >= from {
			if _, over := pending[k]; !over {
				items = append(items, kvp{k, v})
			}
		}
	}
	d.mu.RUnlock()
	for k, v := range pending {
		if v != nil && strings.HasPrefix(k, p) && k >= from {
			items = append(items, kvp{k, v})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].k < items[j].k })
	for _, it := range items {
		v := it.v
		if keysOnly {
			v = nil
		}
		if err := fn([]byte(it.k), v); err != nil {
			return err
		}
	}
	return nil
}

type memTxn struct {
	d       *MemoryDisk
	pending map[string][]byte // nil value: delete
}

func (t *memTxn) get(k []byte, fn func([]byte) error) error {
	if v, ok := t.pending[string(k)]; ok {
		if v == nil {
			return ErrNotFound
		}
		return fn(v)
	}
	return memView{t.d}.get(k, fn)
}

func (t *memTxn) scan(prefix []byte, keysOnly bool, fn func(k, v []byte) error) error {
	return scanSorted(t.d, t.pending, prefix, prefix, keysOnly, fn)
}

func (t *memTxn) scanFrom(prefix, start []byte, keysOnly bool, fn func(k, v []byte) error) error {
	return scanSorted(t.d, t.pending, prefix, start, keysOnly, fn)
}

func (t *memTxn) set(k, v []byte) error {
	t.pending[string(k)] = append([]byte{}, v...) // never nil: nil means deleted
	return nil
}

func (t *memTxn) del(k []byte) error {
	t.pending[string(k)] = nil
	return nil
}

func (t *memTxn) commit() error {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.d.fail != nil {
		if err := t.d.fail(); err != nil {
			return err
		}
	}
	for k, v := range t.pending {
		if v == nil {
			delete(t.d.data, k)
		} else {
			t.d.data[k] = v
		}
	}
	return nil
}

func (t *memTxn) discard() {}

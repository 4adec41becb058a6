// Package raftstore is the storage every Raft group of a node shares, as
// RabbitMQ's Ra shares one write-ahead log: one Badger database holds the
// log entries and stable values of all groups, keyed by a group id, and
// one committer goroutine writes what the groups hand it. Concurrent
// StoreLogs calls of many groups are written as one Badger transaction and
// made durable with one sync (group commit across groups). Each group's
// snapshots are a raft.FileSnapshotStore under <dir>/snapshots/<group>/.
//
// Keys: a kind byte, the group id (8 bytes, big-endian), then for log
// entries the index (8 bytes, big-endian), for stable values the key.
// Every log entry carries a CRC-32C over its encoding: an entry that fails
// it is an error, never served (Badger itself cuts a torn tail of its
// write-ahead log at open, a transaction at a time).
package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Key kinds.
const (
	kindLog    = 'l'
	kindStable = 's'
	kindCommit = 'c' // the staged commit index (raft.CommitTrackingLogStore)
)

// ErrNotFound is what Get and GetUint64 return for a key never set, worded
// as raft's own stores word it ("not found"), which raft tests by text.
var ErrNotFound = errors.New("not found")

// ErrClosed: the store is closed.
var ErrClosed = errors.New("raftstore: closed")

// CorruptError is a log entry that fails its checksum or does not decode.
type CorruptError struct {
	Group, Index uint64
	Reason       string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("raftstore: group %d log entry %d is damaged: %s", e.Group, e.Index, e.Reason)
}

// Options configure a store.
type Options struct {
	// Logger receives Badger's warnings (nil: dropped).
	Logger func(format string, args ...any)
	// NoSync skips the syncs (tests of logic only).
	NoSync bool
	// MaxBatchBytes bounds one group commit (default 8 MiB); more waiting
	// is written by the next one.
	MaxBatchBytes int
}

// Stats are the store's counters since Open.
type Stats struct {
	Syncs    uint64 // group commits made durable
	Appends  uint64 // StoreLogs calls written
	Entries  uint64 // log entries written
	Bytes    uint64 // encoded bytes written
	SyncTime time.Duration
}

// AppendsPerSync is Appends / Syncs.
func (s Stats) AppendsPerSync() float64 {
	if s.Syncs == 0 {
		return 0
	}
	return float64(s.Appends) / float64(s.Syncs)
}

// Store is one node's Raft storage. Its methods are safe for concurrent
// use; Group returns the per-group view raft uses.
type Store struct {
	dir  string
	db   *badger.DB
	opts Options

	reqs    chan *request
	stop    chan struct{}
	stopped chan struct{}
	gcDone  chan struct{}
	closed  atomic.Bool

	mu     sync.Mutex // groups
	groups map[uint64]*Group

	syncs, appends, entries, bytes, syncNanos atomic.Uint64
}

// request is one write for the committer.
type request struct {
	group *Group
	sets  []kv
	// del, when set, deletes the group's log entries in [delMin, delMax].
	del            bool
	delMin, delMax uint64
	// dropAll deletes everything of the group.
	dropAll bool
	first   uint64 // for StoreLogs: the first index written, last the last
	last    uint64
	appends int
	done    chan error
}

type kv struct{ k, v []byte }

// Open opens (or creates) the store in dir. It owns a committer goroutine
// until Close.
func Open(dir string, opts Options) (*Store, error) {
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 8 << 20
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bo := badger.DefaultOptions(filepath.Join(dir, "log")).
		WithSyncWrites(false). // the committer syncs once per group commit
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		// Entries go to the value log (appended once); the LSM tree
		// keeps keys and pointers, so its flushes and compactions stay
		// small under load. The GC goroutine reclaims what was deleted.
		WithValueThreshold(512).
		WithMemTableSize(16 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(16 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithValueLogFileSize(64 << 20).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithLogger(badgerLogger{opts.Logger})
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dir, err)
	}
	s := &Store{dir: dir, db: db, opts: opts, reqs: make(chan *request, 1024), stop: make(chan struct{}), stopped: make(chan struct{}), gcDone: make(chan struct{}),
		groups: map[uint64]*Group{}}
	go s.committer()
	go s.gc()
	return s, nil
}

// gcInterval is how often the value-log GC looks for files to rewrite.
const gcInterval = 30 * time.Second

// gc rewrites value-log files that are mostly deleted entries (raft's
// compaction after snapshots, deleted groups), until Close.
func (s *Store) gc() {
	defer close(s.gcDone)
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for range 16 {
			if s.db.RunValueLogGC(0.5) != nil {
				break
			}
		}
	}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Syncs: s.syncs.Load(), Appends: s.appends.Load(), Entries: s.entries.Load(), Bytes: s.bytes.Load(),
		SyncTime: time.Duration(s.syncNanos.Load())}
}

// Close stops the committer (after what waits is written) and closes the
// database. Groups must not be used afterwards.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.stopped
	<-s.gcDone
	return s.db.Close()
}

// Group returns group id's view of the store, reading its first and last
// log index the first time.
func (s *Store) Group(id uint64) (*Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[id]; g != nil {
		return g, nil
	}
	g := &Group{s: s, id: id}
	if err := g.loadBounds(); err != nil {
		return nil, err
	}
	s.groups[id] = g
	return g, nil
}

// SnapshotDir is where group id keeps its snapshots.
func (s *Store) SnapshotDir(id uint64) string {
	return filepath.Join(s.dir, "snapshots", strconv.FormatUint(id, 10))
}

// SnapshotStore returns group id's snapshot store (raft.FileSnapshotStore,
// keeping retain snapshots).
func (s *Store) SnapshotStore(id uint64, retain int) (raft.SnapshotStore, error) {
	return raft.NewFileSnapshotStoreWithLogger(s.SnapshotDir(id), retain, hclog.NewNullLogger())
}

// DeleteGroup removes everything group id stored: log, stable values and
// snapshots. The group must no longer be used by a raft.
func (s *Store) DeleteGroup(id uint64) error {
	g, err := s.Group(id)
	if err != nil {
		return err
	}
	err = s.submit(&request{group: g, dropAll: true})
	s.mu.Lock()
	delete(s.groups, id)
	s.mu.Unlock()
	if rerr := os.RemoveAll(s.SnapshotDir(id)); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// GroupIDs lists the groups that have anything stored (a log entry, a
// stable value or a snapshot directory).
func (s *Store) GroupIDs() ([]uint64, error) {
	seen := map[uint64]bool{}
	var ids []uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			k := it.Item().Key()
			if len(k) < 9 {
				it.Next()
				continue
			}
			id := binary.BigEndian.Uint64(k[1:9])
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
			// Skip the rest of this kind and group.
			next := append([]byte{k[0]}, k[1:9]...)
			if !incr(next) {
				break
			}
			it.Seek(next)
		}
		return nil
	})
	if ents, rerr := os.ReadDir(filepath.Join(s.dir, "snapshots")); rerr == nil {
		for _, e := range ents {
			if id, perr := strconv.ParseUint(e.Name(), 10, 64); perr == nil && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, err
}

// incr makes b the next key after every key it prefixes; false if b was
// all 0xff.
func incr(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}

func (s *Store) submit(r *request) error {
	if s.closed.Load() {
		return ErrClosed
	}
	r.done = make(chan error, 1)
	select {
	case s.reqs <- r:
	case <-s.stop:
		return ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-s.stopped:
		// The committer drains what it took before it stops.
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// committer writes what the groups hand it: every request waiting is
// written in one transaction (split where Badger's limit says) and synced
// once, then each caller is told, in order.
func (s *Store) committer() {
	defer close(s.stopped)
	for {
		var first *request
		select {
		case first = <-s.reqs:
		case <-s.stop:
			for {
				select {
				case r := <-s.reqs:
					s.commit([]*request{r})
				default:
					return
				}
			}
		}
		batch := []*request{first}
		size := reqSize(first)
	more:
		for size < s.opts.MaxBatchBytes {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
				size += reqSize(r)
			default:
				break more
			}
		}
		s.commit(batch)
	}
}

func reqSize(r *request) int {
	n := 0
	for _, x := range r.sets {
		n += len(x.k) + len(x.v)
	}
	return n
}

// commit writes batch and syncs it. Deletions of ranges run in the same
// order as the writes around them.
func (s *Store) commit(batch []*request) {
	var err error
	txn := s.db.NewTransaction(true)
	set := func(k, v []byte) error {
		e := txn.Set(k, v)
		if errors.Is(e, badger.ErrTxnTooBig) {
			if e = txn.Commit(); e != nil {
				return e
			}
			txn = s.db.NewTransaction(true)
			e = txn.Set(k, v)
		}
		return e
	}
	del := func(k []byte) error {
		e := txn.Delete(k)
		if errors.Is(e, badger.ErrTxnTooBig) {
			if e = txn.Commit(); e != nil {
				return e
			}
			txn = s.db.NewTransaction(true)
			e = txn.Delete(k)
		}
		return e
	}
	appends, entries, bytes := 0, 0, 0
	errs := make([]error, len(batch))
	for i, r := range batch {
		var rerr error
		switch {
		case r.dropAll:
			// Written at once: a drop must not wait behind the batch's
			// transaction, and it is ordered after what came before.
			if rerr = txn.Commit(); rerr == nil {
				rerr = s.dropGroup(r.group.id)
			}
			txn = s.db.NewTransaction(true)
		case r.del:
			for idx := r.delMin; idx <= r.delMax && rerr == nil; idx++ {
				rerr = del(logKey(r.group.id, idx))
				if idx == ^uint64(0) {
					break
				}
			}
		}
		for _, x := range r.sets {
			if rerr != nil {
				break
			}
			rerr = set(x.k, x.v)
			bytes += len(x.k) + len(x.v)
		}
		if rerr != nil {
			errs[i] = rerr
			err = rerr
		}
		if r.appends > 0 {
			appends += r.appends
			entries += len(r.sets)
		}
	}
	if cerr := txn.Commit(); cerr != nil && err == nil {
		err = cerr
	}
	if err == nil && !s.opts.NoSync {
		t := time.Now()
		err = s.db.Sync()
		s.syncNanos.Add(uint64(time.Since(t)))
	}
	s.syncs.Add(1)
	s.appends.Add(uint64(appends))
	s.entries.Add(uint64(entries))
	s.bytes.Add(uint64(bytes))
	for i, r := range batch {
		e := errs[i]
		if e == nil {
			e = err
		}
		if e == nil {
			r.group.applied(r)
		}
		r.done <- e
	}
}

func (s *Store) dropGroup(id uint64) error {
	var prefixes [][]byte
	for _, k := range []byte{kindLog, kindStable, kindCommit} {
		p := make([]byte, 9)
		p[0] = k
		binary.BigEndian.PutUint64(p[1:], id)
		prefixes = append(prefixes, p)
	}
	// DropPrefix blocks writes while it runs; a queue deletion is rare.
	return s.db.DropPrefix(prefixes...)
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeLog is l's stored form: CRC-32C (of the rest), index, term,
// type, appended-at (Unix ns), data and extensions with their lengths.
func encodeLog(l *raft.Log) []byte {
	n := 4 + 8 + 8 + 1 + 8 + 4 + len(l.Data) + 4 + len(l.Extensions)
	b := make([]byte, n)
	p := b[4:]
	binary.BigEndian.PutUint64(p, l.Index)
	binary.BigEndian.PutUint64(p[8:], l.Term)
	p[16] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(p[17:], uint64(at))
	binary.BigEndian.PutUint32(p[25:], uint32(len(l.Data)))
	copy(p[29:], l.Data)
	q := p[29+len(l.Data):]
	binary.BigEndian.PutUint32(q, uint32(len(l.Extensions)))
	copy(q[4:], l.Extensions)
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

func decodeLog(group, idx uint64, b []byte, l *raft.Log) error {
	if len(b) < 37 {
		return &CorruptError{group, idx, fmt.Sprintf("%d bytes, shorter than a header", len(b))}
	}
	if crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return &CorruptError{group, idx, "checksum mismatch"}
	}
	p := b[4:]
	l.Index = binary.BigEndian.Uint64(p)
	l.Term = binary.BigEndian.Uint64(p[8:])
	l.Type = raft.LogType(p[16])
	at := int64(binary.BigEndian.Uint64(p[17:]))
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	dn := int(binary.BigEndian.Uint32(p[25:]))
	if 29+dn+4 > len(p) {
		return &CorruptError{group, idx, "data length past the end"}
	}
	l.Data = p[29 : 29+dn : 29+dn]
	q := p[29+dn:]
	en := int(binary.BigEndian.Uint32(q))
	if 4+en != len(q) {
		return &CorruptError{group, idx, "extensions length does not match"}
	}
	l.Extensions = nil
	if en > 0 {
		l.Extensions = q[4 : 4+en : 4+en]
	}
	if l.Index != idx {
		return &CorruptError{group, idx, fmt.Sprintf("holds index %d", l.Index)}
	}
	return nil
}

type badgerLogger struct{ f func(string, ...any) }

func (l badgerLogger) Errorf(f string, a ...any) { l.log("badger error: "+f, a...) }
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log("badger warning: "+f, a...)
}
func (l badgerLogger) Infof(string, ...any)  {}
func (l badgerLogger) Debugf(string, ...any) {}
func (l badgerLogger) log(f string, a ...any) {
	if l.f != nil {
		l.f(f, a...)
	}
}

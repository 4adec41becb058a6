// Package raftstore is the storage every Raft group of a node shares, as
// RabbitMQ's Ra shares one write-ahead log: the log entries of all groups
// go to one segmented append-only log (wal.go) written by one committer
// goroutine. Concurrent StoreLogs calls of many groups are written with
// one pwritev and made durable with one fdatasync (group commit across
// groups); where each entry lies is kept in memory, per group, and read
// back with one pread. The stable values (raft's term and vote) live in a
// small Badger database beside it, written and synced on their own (they
// change at elections only). Each group's snapshots are a
// raft.FileSnapshotStore under <dir>/snapshots/<group>/.
//
// Every record of the log carries a CRC-32C: an entry that fails it is an
// error, never served; a torn tail is cut at open. A store written by an
// older Warren (log entries in Badger) is moved into the log at open.
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

// Badger key kinds.
const (
	kindLog      = 'l' // a log entry (stores before the log: migrated at open)
	kindStable   = 's'
	kindCommit   = 'c' // the staged commit index (stores before the log)
	kindMigrated = 'm' // the Badger-held entries are in the log: drop them
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
	// SegmentBytes is the size of a log segment (default 64 MiB).
	SegmentBytes int64
	// Spares is how many spare segments (at most maxSpares) are made in
	// the background once the store opens, before any write needs one
	// (0: each is made when writes ask for it). A zero-fill while the
	// log takes writes costs them: its sync pushes a segment to the disk
	// that every other sync waits behind.
	Spares int
}

// Stats are the store's counters since Open.
type Stats struct {
	Syncs    uint64 // group commits made durable
	Appends  uint64 // StoreLogs calls written
	Entries  uint64 // log entries written
	Bytes    uint64 // encoded bytes written
	SyncTime time.Duration
	Segments int // log segments on disk now
	Copied   uint64
	// ZeroFilled counts the spare segments made by zero-filling (the
	// others are reclaimed segments, recycled).
	ZeroFilled uint64
	// Rolls counts the switches to a new segment; RollTime is the time
	// the committer spent in them (sealing the old one, the new one's
	// rename and directory sync). RollsUnprepared counts those that found
	// no spare and started a file that grows.
	Rolls, RollsUnprepared uint64
	RollTime               time.Duration
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
	dir    string
	walDir string
	db     *badger.DB
	opts   Options

	reqs    chan *request
	stop    chan struct{}
	stopped chan struct{}
	spareCh chan struct{}
	bgDone  sync.WaitGroup
	closed  atomic.Bool
	failed  atomic.Pointer[error] // a write or sync of the log failed: no more writes
	// spareReady: a spare segment of SegmentBytes is there (set by the
	// spare maker and reclaim; roll, which takes one, sets it to whether
	// another is left).
	spareReady atomic.Bool

	mu     sync.Mutex // groups
	groups map[uint64]*Group

	// segMu guards segs for readers; the committer alone changes it
	// (and order, cur, and the segments' live counts).
	segMu sync.RWMutex
	segs  map[uint32]*segment
	order []*segment // oldest first
	cur   *segment

	stableMu sync.Mutex // Set's write and sync

	syncs, appends, entries, bytes, syncNanos, copied, zeroFilled atomic.Uint64
	rolls, rollsUnprepared, rollNanos                             atomic.Uint64
	nsegs                                                         atomic.Int64
}

// request is one write for the committer.
type request struct {
	group *Group
	// The records: pieces in order, the first of each record starting
	// with its header (CRC empty: the committer fills it in, it depends
	// on the segment); recs[i] is how many pieces record i spans. An
	// entry's data is a piece of its own, the caller's slice (not
	// copied).
	pieces [][]byte
	recs   []int
	size   int
	arena  []byte     // the headers' bytes
	ents   []entryPos // the entries among the records
	logs   []*raft.Log
	// del, when set, deletes the group's log entries in [delMin, delMax].
	del            bool
	delMin, delMax uint64
	// dropAll deletes the group's entries and commit index.
	dropAll bool
	commit  uint64 // a commit index written with it (0: none)
	appends int
	copied  bool
	at      loc // where the records were written (the committer sets it)
	// early: answered once written, before the sync (StoreLogsEarly).
	early bool
	done  chan error
}

// record adds a record of one piece.
func (r *request) record(b []byte) {
	r.pieces = append(r.pieces, b)
	r.recs = append(r.recs, 1)
	r.size += len(b)
}

// entry adds l's record; its data is copied only if copyData.
func (r *request) entry(group uint64, l *raft.Log, copyData bool) {
	off := r.size
	n := recBody + entryHeader + len(l.Data) + 4 + len(l.Extensions)
	start := len(r.arena)
	r.arena = binary.BigEndian.AppendUint32(r.arena, uint32(n))
	r.arena = binary.BigEndian.AppendUint32(r.arena, 0)
	r.arena = append(r.arena, recEntry)
	r.arena = binary.BigEndian.AppendUint64(r.arena, group)
	r.arena = binary.BigEndian.AppendUint64(r.arena, l.Index)
	r.arena = binary.BigEndian.AppendUint64(r.arena, l.Term)
	r.arena = append(r.arena, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	r.arena = binary.BigEndian.AppendUint64(r.arena, uint64(at))
	r.arena = binary.BigEndian.AppendUint32(r.arena, uint32(len(l.Data)))
	pieces := 1
	if copyData || len(l.Data) < 256 {
		r.arena = append(r.arena, l.Data...)
	} else {
		r.pieces = append(r.pieces, r.arena[start:len(r.arena):len(r.arena)])
		r.pieces = append(r.pieces, l.Data)
		start = len(r.arena)
		pieces += 2 // the header, the data; the tail follows
	}
	r.arena = binary.BigEndian.AppendUint32(r.arena, uint32(len(l.Extensions)))
	r.arena = append(r.arena, l.Extensions...)
	r.pieces = append(r.pieces, r.arena[start:len(r.arena):len(r.arena)])
	r.recs = append(r.recs, pieces)
	r.size += recHeader + n
	r.ents = append(r.ents, entryPos{idx: l.Index, off: uint32(off), n: uint32(recHeader + n)})
}

// seal fills in the CRC of each record for a segment of seed.
func (r *request) seal(seed uint32) {
	p := 0
	for _, k := range r.recs {
		head := r.pieces[p]
		crc := crc32.Update(seed, castagnoli, head[recHeader:])
		for j := 1; j < k; j++ {
			crc = crc32.Update(crc, castagnoli, r.pieces[p+j])
		}
		binary.BigEndian.PutUint32(head[4:], crc)
		p += k
	}
}

// entryPos is an entry's place in a request's buffer.
type entryPos struct {
	idx    uint64
	off, n uint32
}

// Open opens (or creates) the store in dir. It owns a committer goroutine
// until Close.
func Open(dir string, opts Options) (*Store, error) {
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 8 << 20
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 64 << 20
	}
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return nil, err
	}
	bo := badger.DefaultOptions(filepath.Join(dir, "log")).
		WithSyncWrites(false). // Set syncs
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithValueThreshold(512).
		WithMemTableSize(4 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(4 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithValueLogFileSize(16 << 20).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithLogger(badgerLogger{opts.Logger})
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dir, err)
	}
	s := &Store{dir: dir, walDir: walDir, db: db, opts: opts, reqs: make(chan *request, 1024), stop: make(chan struct{}),
		stopped: make(chan struct{}), spareCh: make(chan struct{}, 1), groups: map[uint64]*Group{}, segs: map[uint32]*segment{}}
	if err := s.openLog(); err != nil {
		s.closeSegments()
		db.Close()
		return nil, err
	}
	// What the log holds at open is durable (openLog sealed it).
	for _, g := range s.groups {
		g.durable.Store(g.last)
	}
	go s.committer()
	if !opts.NoSync {
		s.bgDone.Add(1)
		go s.spares()
	}
	if err := s.migrate(); err != nil {
		s.Close()
		return nil, fmt.Errorf("raftstore: move the log out of Badger: %w", err)
	}
	return s, nil
}

// openLog reads every segment into the groups' indexes, seals the last
// at the tail it found and starts a new one.
func (s *Store) openLog() error {
	seqs, err := listSegments(s.walDir)
	if err != nil {
		return err
	}
	for i, seq := range seqs {
		if seq > 1<<32-1 {
			return fmt.Errorf("raftstore: segment %s: seq out of range", segName(seq))
		}
		f, err := os.OpenFile(filepath.Join(s.walDir, segName(seq)), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		seg := &segment{seq: seq, seed: seqSeed(seq), f: f, size: fi.Size()}
		s.segs[uint32(seq)] = seg
		s.order = append(s.order, seg)
		sealed, err := scanSegment(seg, func(off int64, n int, body []byte) error {
			return s.replay(seg, off, n, body)
		})
		if err != nil {
			return fmt.Errorf("raftstore: segment %s: %w", segName(seq), err)
		}
		if !sealed && i < len(seqs)-1 {
			return fmt.Errorf("raftstore: segment %s is damaged at offset %d (not the last segment, so not a torn tail)", segName(seq), seg.end)
		}
		if !sealed {
			// The tail a crash left: sealed where the valid records end.
			if err := s.seal(seg); err != nil {
				return err
			}
		}
	}
	s.nsegs.Store(int64(len(s.order)))
	return s.roll(0)
}

// replay applies one record read at open.
func (s *Store) replay(seg *segment, off int64, n int, body []byte) error {
	kind, gid, p := body[0], binary.BigEndian.Uint64(body[1:9]), body[9:]
	g := s.groupState(gid)
	switch kind {
	case recEntry:
		if len(p) < 8 {
			return fmt.Errorf("an entry record of %d bytes at %d", len(body), off)
		}
		g.put(binary.BigEndian.Uint64(p), loc{seq: uint32(seg.seq), off: uint32(off), n: uint32(n)})
	case recCommit:
		if len(p) == 8 {
			g.commit = binary.BigEndian.Uint64(p)
		}
	case recDelete:
		if len(p) == 16 {
			g.deleteRange(binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:]))
		}
	case recDrop:
		g.drop()
	}
	return nil
}

// groupState is group id's state, created empty if new.
func (s *Store) groupState(id uint64) *Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	if g == nil {
		g = &Group{s: s, id: id}
		s.groups[id] = g
	}
	return g
}

// seal writes seg's seal record at its end and syncs it.
func (s *Store) seal(seg *segment) error {
	b := appendRecord(nil, recSeal, 0)
	sealRecords(b, seg.seed)
	if _, err := seg.f.WriteAt(b, seg.end); err != nil {
		return err
	}
	seg.end += int64(len(b))
	if s.opts.NoSync {
		return nil
	}
	return fdatasync(seg.f)
}

// roll seals the current segment (synced) and starts the next, of at
// least need bytes: the spare file when it fits, else a new file.
func (s *Store) roll(need int64) error {
	t := time.Now()
	defer func() { s.rollNanos.Add(uint64(time.Since(t))) }()
	seq := uint64(1)
	if n := len(s.order); n > 0 {
		seq = s.order[n-1].seq + 1
	}
	if s.cur != nil {
		if err := s.seal(s.cur); err != nil {
			return err
		}
	}
	if seq > 1<<32-1 {
		return errors.New("raftstore: out of segment numbers")
	}
	size := s.opts.SegmentBytes
	path := filepath.Join(s.walDir, segName(seq))
	prealloc := false
	if need+sealSize > size {
		size = need + sealSize
	} else if !s.opts.NoSync {
		if spare := s.spareFile(size); spare != "" {
			if err := os.Rename(spare, path); err != nil {
				return err
			}
			prealloc = true
		}
		s.spareReady.Store(s.spareFile(size) != "")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if !s.opts.NoSync {
		if err := syncDir(s.walDir); err != nil {
			f.Close()
			return err
		}
	}
	seg := &segment{seq: seq, seed: seqSeed(seq), f: f, size: size, prealloc: prealloc}
	if s.cur != nil {
		s.rolls.Add(1)
		if !prealloc {
			s.rollsUnprepared.Add(1)
		}
	}
	s.segMu.Lock()
	s.segs[uint32(seq)] = seg
	s.order = append(s.order, seg)
	s.cur = seg
	s.segMu.Unlock()
	s.nsegs.Store(int64(len(s.order)))
	return nil
}

// spares makes Options.Spares spare segments, then one whenever the
// committer asks, until Close.
func (s *Store) spares() {
	defer s.bgDone.Done()
	s.prepare(min(s.opts.Spares, maxSpares))
	for {
		select {
		case <-s.stop:
			return
		case <-s.spareCh:
		}
		if s.spareFile(s.opts.SegmentBytes) != "" {
			s.spareReady.Store(true) // reclaim recycled one meanwhile
			continue
		}
		made, err := makeSpare(s.walDir, spareName, s.opts.SegmentBytes, s.stop)
		if made {
			s.zeroFilled.Add(1)
		}
		if err == nil {
			s.spareReady.Store(true)
		} else if s.opts.Logger != nil && !s.closed.Load() {
			s.opts.Logger("raftstore: cannot make a spare log segment: %v", err)
		}
	}
}

// prepare makes spares in free slots until n are there (a slot the
// committer recycles a segment into meanwhile may be taken twice: one
// spare fewer).
func (s *Store) prepare(n int) {
	for s.spareCount(s.opts.SegmentBytes) < n {
		slot := s.freeSpareSlot()
		if slot == "" {
			return
		}
		made, err := makeSpare(s.walDir, filepath.Base(slot), s.opts.SegmentBytes, s.stop)
		if made {
			s.zeroFilled.Add(1)
		}
		if err != nil {
			if s.opts.Logger != nil && !s.closed.Load() {
				s.opts.Logger("raftstore: cannot make a spare log segment: %v", err)
			}
			return
		}
		s.spareReady.Store(true)
	}
}

// spareCount is how many spare segments of size bytes there are.
func (s *Store) spareCount(size int64) int {
	n := 0
	for i := range maxSpares {
		if fi, err := os.Stat(filepath.Join(s.walDir, spareSlot(i))); err == nil && fi.Size() == size {
			n++
		}
	}
	return n
}

// spareFile returns the path of a spare segment of size bytes, "" when
// there is none.
func (s *Store) spareFile(size int64) string {
	for i := range maxSpares {
		path := filepath.Join(s.walDir, spareSlot(i))
		if fi, err := os.Stat(path); err == nil && fi.Size() == size {
			return path
		}
	}
	return ""
}

// freeSpareSlot returns the path of a spare slot that holds no file, ""
// when every one does.
func (s *Store) freeSpareSlot() string {
	for i := range maxSpares {
		path := filepath.Join(s.walDir, spareSlot(i))
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			return path
		}
	}
	return ""
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Syncs: s.syncs.Load(), Appends: s.appends.Load(), Entries: s.entries.Load(), Bytes: s.bytes.Load(),
		SyncTime: time.Duration(s.syncNanos.Load()), Segments: int(s.nsegs.Load()), Copied: s.copied.Load(),
		ZeroFilled: s.zeroFilled.Load(), Rolls: s.rolls.Load(), RollsUnprepared: s.rollsUnprepared.Load(),
		RollTime: time.Duration(s.rollNanos.Load())}
}

// Close stops the committer (after what waits is written) and closes the
// log and the database. Groups must not be used afterwards.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.stopped
	s.bgDone.Wait()
	s.segMu.Lock()
	s.closeSegments()
	s.segMu.Unlock()
	return s.db.Close()
}

func (s *Store) closeSegments() {
	for _, seg := range s.order {
		seg.f.Close()
	}
	s.segs = map[uint32]*segment{}
	s.order = nil
}

// Group returns group id's view of the store.
func (s *Store) Group(id uint64) (*Group, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return s.groupState(id), nil
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
	r := &request{group: g, dropAll: true}
	r.record(appendRecord(nil, recDrop, id))
	err = s.submit(r)
	if derr := s.dropStable(id); derr != nil && err == nil {
		err = derr
	}
	if rerr := os.RemoveAll(s.SnapshotDir(id)); rerr != nil && err == nil {
		err = rerr
	}
	s.dropGroupState(id)
	return err
}

// dropStable removes group id's stable values (and a commit index an
// older store kept in Badger).
func (s *Store) dropStable(id uint64) error {
	var prefixes [][]byte
	for _, k := range []byte{kindStable, kindCommit} {
		p := make([]byte, 9)
		p[0] = k
		binary.BigEndian.PutUint64(p[1:], id)
		prefixes = append(prefixes, p)
	}
	// Deleted key by key (a group has a handful), not with DropPrefix:
	// that blocks every write to the database while it runs, and a
	// running group whose raft saves its term meanwhile gets an error,
	// on which raft panics.
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, p := range prefixes {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: false})
			for it.Rewind(); it.Valid(); it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	s.stableMu.Lock()
	defer s.stableMu.Unlock()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return s.syncStable()
}

func (s *Store) syncStable() error {
	if s.opts.NoSync {
		return nil
	}
	return s.db.Sync()
}

// GroupIDs lists the groups that have anything stored (a log entry, a
// commit index, a stable value or a snapshot directory).
func (s *Store) GroupIDs() ([]uint64, error) {
	seen := map[uint64]bool{}
	var ids []uint64
	add := func(id uint64) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	s.mu.Lock()
	gs := make([]*Group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	s.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		any := g.last != 0 || g.commit != 0
		g.mu.Unlock()
		if any {
			add(g.id)
		}
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			k := it.Item().Key()
			if len(k) < 9 {
				it.Next()
				continue
			}
			add(binary.BigEndian.Uint64(k[1:9]))
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
			if id, perr := strconv.ParseUint(e.Name(), 10, 64); perr == nil {
				add(id)
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
	if p := s.failed.Load(); p != nil {
		return *p
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

// committer writes what the groups hand it: every request waiting (up to
// MaxBatchBytes) is written with one pwritev and synced once, then each
// caller is told, in order.
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
		size := first.size
	more:
		for size < s.opts.MaxBatchBytes {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
				size += r.size
			default:
				break more
			}
		}
		if cs := s.copies(copyBudget(size)); len(cs) > 0 {
			// Ahead of the batch: its requests (a compaction of the
			// entries copied, say) apply after the copies.
			batch = append(cs, batch...)
		}
		s.commit(batch)
		s.reclaim()
	}
}

// commit writes batch at the log's end and syncs it, then applies each
// request to its group's index and answers it.
func (s *Store) commit(batch []*request) {
	err := s.write(batch)
	answered := false
	if err == nil {
		// Written: readable now, and the early requests are answered
		// before the sync (their groups' durable index waits for it).
		for _, r := range batch {
			r.group.applied(r)
			if r.early {
				r.done <- nil
				answered = true
			}
		}
		err = s.sync()
	}
	if err != nil && s.failed.Load() == nil {
		// What the file holds past its last sync is unknown now: the
		// store takes no more writes (a restart reads what is durable).
		werr := fmt.Errorf("raftstore: log write failed: %w", err)
		s.failed.Store(&werr)
	}
	appends, entries, bytes := 0, 0, 0
	for _, r := range batch {
		if err == nil {
			r.group.synced(r)
			appends += r.appends
			entries += len(r.ents)
			bytes += r.size
		}
	}
	s.syncs.Add(1)
	s.appends.Add(uint64(appends))
	s.entries.Add(uint64(entries))
	s.bytes.Add(uint64(bytes))
	for _, r := range batch {
		if !(answered && r.early) {
			r.done <- err
		}
	}
	if err != nil && answered {
		// An early request's group waits in WaitDurable: it sees failed.
		s.mu.Lock()
		for _, g := range s.groups {
			g.mu.Lock()
			if g.waiting {
				close(g.durableCh)
				g.durableCh, g.waiting = nil, false
			}
			g.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

// write puts the requests' records at the end of the log (rolling to a
// new segment where one does not fit) and syncs them. Each request's
// entries get their place (r.at).
func (s *Store) write(batch []*request) error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	var bufs [][]byte
	start := s.cur.end
	flush := func() error {
		if len(bufs) == 0 {
			return nil
		}
		if err := writev(s.cur.f, bufs, start); err != nil {
			return err
		}
		bufs = bufs[:0]
		start = s.cur.end
		return nil
	}
	if s.growing() && s.spareReady.Load() {
		// A file that grows costs its fdatasync a metadata update: on to
		// the preallocated spare now rather than at the segment's end.
		if err := s.roll(0); err != nil {
			return err
		}
		start = s.cur.end
	}
	for _, r := range batch {
		n := int64(r.size)
		if n == 0 {
			continue
		}
		if s.cur.end+n > s.cur.size-sealSize {
			// The segment's writes so far, its seal (synced), then the
			// next segment.
			if err := flush(); err != nil {
				return err
			}
			if err := s.roll(n); err != nil {
				return err
			}
			start = s.cur.end
		}
		r.seal(s.cur.seed)
		r.at = loc{seq: uint32(s.cur.seq), off: uint32(s.cur.end)}
		s.cur.end += n
		bufs = append(bufs, r.pieces...)
	}
	return flush()
}

// sync makes what write wrote durable.
func (s *Store) sync() error {
	if !s.opts.NoSync {
		t := time.Now()
		err := fdatasync(s.cur.f)
		s.syncNanos.Add(uint64(time.Since(t)))
		if err != nil {
			return err
		}
		if (s.cur.end > s.cur.size/2 && s.cur.size == s.opts.SegmentBytes) || s.growing() {
			select {
			case s.spareCh <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// growing reports whether the current segment is a file that grows (not
// made from a spare) and has seen traffic: a store that takes more than
// a few writes gets a spare at once. (Not at open: every broker start
// in a test would zero-fill a segment.)
func (s *Store) growing() bool {
	return !s.opts.NoSync && !s.cur.prealloc && s.cur.end >= growingBytes
}

// growingBytes: a growing segment with this much written asks for a spare.
const growingBytes = 1 << 20

// reclaim removes the oldest segments no group has a live entry in (up
// to maxSpares of them are kept as spares for reuse). Only the oldest:
// a later segment's records may delete entries of an earlier one, so
// segments go in order (copies moves the live entries out of the
// oldest when that pays).
func (s *Store) reclaim() {
	removed := false
	defer func() {
		// Removals are durable in order: a removed segment that came back
		// could hold entries whose deletion was in a later removed one.
		if removed && !s.opts.NoSync {
			syncDir(s.walDir)
		}
	}()
	for len(s.order) > 1 && s.order[0] != s.cur && s.order[0].live <= 0 {
		removed = true
		old := s.order[0]
		s.segMu.Lock()
		delete(s.segs, uint32(old.seq))
		s.order = s.order[1:]
		s.segMu.Unlock()
		s.nsegs.Store(int64(len(s.order)))
		old.f.Close()
		path := filepath.Join(s.walDir, segName(old.seq))
		recycled := false
		// Only a segment made from a spare is of full size on disk (a
		// growing one is as long as what was written to it).
		if !s.opts.NoSync && old.prealloc && old.size == s.opts.SegmentBytes {
			if spare := s.freeSpareSlot(); spare != "" {
				recycled = os.Rename(path, spare) == nil
				if recycled {
					s.spareReady.Store(true)
				}
			}
		}
		if !recycled {
			os.Remove(path)
		}
	}
}

func (s *Store) dropGroupState(id uint64) {
	s.mu.Lock()
	delete(s.groups, id)
	s.mu.Unlock()
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

// decodeLog reads an entry of the Badger-held log (migrate.go): a CRC-32C
// of the rest, then the layout of a log record's entry (decodeEntry).
func decodeLog(group, idx uint64, b []byte, l *raft.Log) error {
	if len(b) < 4+entryHeader+4 {
		return &CorruptError{group, idx, fmt.Sprintf("%d bytes, shorter than a header", len(b))}
	}
	if crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return &CorruptError{group, idx, "checksum mismatch"}
	}
	return decodeEntry(group, idx, b[4:], l)
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

// copyMin and copyMax bound what one batch carries of copies: as many
// bytes as the batch's own, within these (a batch costs its writes and
// one sync; copies ride along rather than costing syncs of their own).
const (
	copyMin = 256 << 10
	copyMax = 4 << 20
)

func copyBudget(batchBytes int) int { return min(max(batchBytes, copyMin), copyMax) }

// copyDue reports whether the live entries of the oldest segment are to
// be copied to the head of the log, so that it can go: when it is mostly
// dead (a queue holding a few old messages then pins one segment, not
// every segment written since), or when most of the sealed log is dead
// behind it (an idle queue's last entries, or a backlog, hold the
// oldest while the segments after it are free: the log on disk then
// stays within twice what is live, plus the segment being written).
func (s *Store) copyDue() bool {
	if len(s.order) < 3 || s.failed.Load() != nil {
		return false
	}
	old := s.order[0]
	if old == s.cur {
		return false
	}
	if old.liveBytes*4 <= old.size {
		return true
	}
	var live, size int64
	for _, seg := range s.order {
		if seg != s.cur {
			live += seg.liveBytes
			size += seg.size
		}
	}
	return live*2 <= size
}

// copies returns requests that write the live entries of the oldest
// segment again, up to about budget bytes, when copyDue (else none). The
// committer writes them with its next batch, before the batch's own
// requests, and nothing changes the groups' indexes in between, so the
// places read here are still the entries' when the copies apply. A copy
// is a record like any other: a reopen takes an entry's later place.
func (s *Store) copies(budget int) []*request {
	if !s.copyDue() {
		return nil
	}
	old := s.order[0]
	s.mu.Lock()
	gs := make([]*Group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	s.mu.Unlock()
	var batch []*request
	total, n := 0, 0
	for _, g := range gs {
		if total >= budget {
			break
		}
		g.mu.Lock()
		var r *request
		for i, l := range g.locs {
			if l.seq != uint32(old.seq) || l.n == 0 {
				continue
			}
			if r == nil {
				r = &request{group: g, copied: true, done: make(chan error, 1)}
			}
			b := make([]byte, l.n)
			if _, err := old.f.ReadAt(b, int64(l.off)); err != nil {
				continue
			}
			r.ents = append(r.ents, entryPos{idx: g.first + uint64(i), off: uint32(r.size), n: l.n})
			r.record(b)
			total += int(l.n)
			n++
			if total >= budget {
				break
			}
		}
		g.mu.Unlock()
		if r != nil {
			batch = append(batch, r)
		}
	}
	s.copied.Add(uint64(n))
	return batch
}

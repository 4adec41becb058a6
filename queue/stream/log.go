package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/queue/stream/group"
)

// The log of one stream: segment files <first offset>.seg of CRC-checked
// records with dense offsets, each with a sparse index <first offset>.idx
// (an entry every indexEvery bytes: offset, timestamp, position) that a
// reader seeks with, so that neither a lookup nor the log's memory grows
// with the stream. Only the last segment is written; it rolls once it
// would pass the stream's segment size.
//
// Record: len u32 | crc u32 (CRC-32C of the len bytes after it) | offset
// u64 | timestamp ms i64 | flags u8 | exchange (u8 length) | routing key
// (u8 length) | [filter value (u8 length), with flagFilter] | props (u32
// length) | body (the rest). Little-endian.
//
// Segment: a 16-byte header (magic, then the size the previous segment
// had when this one started, 0 for the first) and records. At open the
// last segment is scanned: a record cut short or failing its CRC with
// nothing valid after it is a torn write and is cut off; one with a valid
// record after it is damage and the open fails naming the file. Earlier
// segments must have the size the next one's header says.
//
// A partitioned stream's records are also in its journal (journal.go)
// until its partitions' files are synced; such a log is opened with a cut
// (OpenLogCut): the active segment is cut at the journal's first offset
// for it, whatever the bytes from there on, and the writer appends the
// journal's records again.

const (
	segMagic   = "WSTRSEG1"
	segHeader  = 16
	recHeader  = 8
	recFixed   = 8 + 8 + 1 + 1 + 1 + 4 // after the record header, before the strings' bytes
	idxEntry   = 24
	indexEvery = 16 << 10
	// flagChunk marks the first record of a batch written together (a
	// chunk, as RabbitMQ's "last" offset names it).
	flagChunk = 1
	// flagFilter: the record carries its publisher's x-stream-filter-value.
	flagFilter = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Record is one message of the log.
type Record struct {
	Offset     uint64
	Timestamp  int64 // Unix milliseconds
	Flags      uint8
	Exchange   string
	RoutingKey string
	// Filter is the x-stream-filter-value header the message was
	// published with (at most 255 bytes); HasFilter says it had one.
	Filter    string
	HasFilter bool
	Props     []byte
	Body      []byte
}

// encodedSize is the size of r's encoding.
func encodedSize(r *Record) int {
	n := recHeader + recFixed + len(r.Exchange) + len(r.RoutingKey) + len(r.Props) + len(r.Body)
	if r.HasFilter {
		n += 1 + len(r.Filter)
	}
	return n
}

// encodeRecord appends r's encoding to dst.
func encodeRecord(dst []byte, r *Record) []byte {
	n := encodedSize(r) - recHeader
	flags := r.Flags &^ flagFilter
	if r.HasFilter {
		flags |= flagFilter
	}
	start := len(dst)
	dst = slices.Grow(dst, recHeader+n)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, r.Offset)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.Timestamp))
	dst = append(dst, flags, byte(len(r.Exchange)))
	dst = append(dst, r.Exchange...)
	dst = append(dst, byte(len(r.RoutingKey)))
	dst = append(dst, r.RoutingKey...)
	if r.HasFilter {
		dst = append(dst, byte(len(r.Filter)))
		dst = append(dst, r.Filter...)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Props)))
	dst = append(dst, r.Props...)
	dst = append(dst, r.Body...)
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+recHeader:], crcTable))
	return dst
}

// errShort: the bytes end before the record does.
var errShort = errors.New("record cut short")

// decodeRecord reads the record at the start of b, returning it and its
// encoded size. Its slices point into b.
func decodeRecord(b []byte) (Record, int, error) {
	var r Record
	if len(b) < recHeader {
		return r, 0, errShort
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < recFixed || n > maxRecord {
		return r, 0, fmt.Errorf("bad record length %d", n)
	}
	if len(b) < recHeader+n {
		return r, 0, errShort
	}
	p := b[recHeader : recHeader+n]
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return r, 0, errors.New("record fails its CRC")
	}
	r.Offset = binary.LittleEndian.Uint64(p)
	r.Timestamp = int64(binary.LittleEndian.Uint64(p[8:]))
	r.Flags = p[16]
	i := 17
	el := int(p[i])
	i++
	if i+el+1 > n {
		return r, 0, errors.New("bad exchange length")
	}
	r.Exchange = string(p[i : i+el])
	i += el
	rl := int(p[i])
	i++
	if i+rl+4 > n {
		return r, 0, errors.New("bad routing key length")
	}
	r.RoutingKey = string(p[i : i+rl])
	i += rl
	if r.Flags&flagFilter != 0 {
		fl := int(p[i])
		i++
		if i+fl+4 > n {
			return r, 0, errors.New("bad filter value length")
		}
		r.Filter, r.HasFilter = string(p[i:i+fl]), true
		i += fl
	}
	pl := int(binary.LittleEndian.Uint32(p[i:]))
	i += 4
	if pl > n-i {
		return r, 0, errors.New("bad properties length")
	}
	r.Props = p[i : i+pl : i+pl]
	r.Body = p[i+pl:]
	return r, recHeader + n, nil
}

// maxRecord bounds a record's length field (a message body is at most
// 512 MiB in Warren, RabbitMQ's largest max_message_size).
const maxRecord = 1<<29 + 1<<17

// DamageError is a damaged log: an invalid record with valid records
// after it, or a segment that is not as long as the next one says.
type DamageError struct {
	File   string
	Offset int64 // byte position in File
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("stream: log damaged: %s at byte %d: %s; this is not a torn write, so the stream will not open (move the file aside to open the rest)",
		e.File, e.Offset, e.Reason)
}

// segment is one file of the log.
type segment struct {
	base      uint64 // offset of its first record
	firstTs   int64  // timestamp of its first record (0: none yet)
	lastTs    int64  // timestamp of its last record (0: none yet)
	size      int64  // bytes written (header included)
	committed int64  // bytes readers may read
}

func segName(base uint64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// Log is a stream's segmented log. Append, Sync and Write are for the
// stream's single writer; readers and lookups may run concurrently with it.
type Log struct {
	dir    string
	maxSeg atomic.Int64 // the segment size; SetSegmentSize changes it

	// rmu serializes Retain: drops happen one at a time.
	rmu sync.Mutex

	mu        sync.RWMutex
	segs      []*segment
	next      uint64 // offset the next appended record takes
	committed uint64 // records below it are readable
	lastChunk uint64 // offset of the last chunk's first record
	lastTs    int64
	chunkSeen bool // the last scan found a chunk's start

	// the writer's
	f, idx     *os.File
	lastIdx    int64 // position of the last index entry in the active segment (-1: none)
	rollSizes  []int64
	wbuf, widx []byte // Append's buffers, kept between batches
	unsynced   pendingWrite
	// cut: at open, the active segment keeps only records below it (the
	// journal holds the rest).
	cut uint64
}

// noCut: the log opens with every valid record.
const noCut = ^uint64(0)

// OpenLog opens or creates the log in dir; maxSeg is the segment size.
func OpenLog(dir string, maxSeg int64) (*Log, error) { return OpenLogCut(dir, maxSeg, noCut) }

// OpenLogCut opens the log in dir keeping, in its active segment, only
// the records below offset cut: from the first record at or above it (or
// the first invalid one after it) the segment is cut off, damaged or not.
// Closed segments were synced when the next one started; they are kept
// whole.
func OpenLogCut(dir string, maxSeg int64, cut uint64) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, lastIdx: -1, cut: cut}
	l.maxSeg.Store(maxSeg)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		b, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stream: unexpected file %s in %s", name, dir)
		}
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if n := len(bases); n > 1 {
		// A kill while the writer created the next segment leaves it
		// without a whole header: it never held a record (records follow
		// the header's sync), so it goes and the one before stays active.
		last := filepath.Join(dir, segName(bases[n-1], ".seg"))
		if st, err := os.Stat(last); err == nil && st.Size() < segHeader {
			if err := os.Remove(last); err != nil {
				return nil, err
			}
			if err := os.Remove(filepath.Join(dir, segName(bases[n-1], ".idx"))); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
			bases = bases[:n-1]
		}
	}
	if len(bases) == 0 {
		if err := l.create(0, 0); err != nil {
			return nil, err
		}
		return l, nil
	}
	for i, b := range bases {
		path := filepath.Join(dir, segName(b, ".seg"))
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		l.segs = append(l.segs, &segment{base: b, size: st.Size(), committed: st.Size()})
		if i > 0 {
			prev, err := readHeader(path)
			if err != nil {
				return nil, err
			}
			if p := l.segs[i-1]; prev != p.size {
				return nil, &DamageError{File: filepath.Join(dir, segName(p.base, ".seg")), Offset: p.size,
					Reason: fmt.Sprintf("the segment is %d bytes, the next one says it ends at %d", p.size, prev)}
			}
		}
	}
	for i, s := range l.segs[:len(l.segs)-1] {
		if err := l.loadClosed(s, l.segs[i+1].base); err != nil {
			return nil, err
		}
	}
	if err := l.openActive(); err != nil {
		return nil, err
	}
	return l, nil
}

func readHeader(path string) (prev int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [segHeader]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:8]) != segMagic {
		return 0, &DamageError{File: path, Offset: 0, Reason: "no segment header"}
	}
	return int64(binary.LittleEndian.Uint64(h[8:])), nil
}

// loadClosed reads a closed segment's first timestamp from its index,
// rebuilding the index when it does not fit the segment.
func (l *Log) loadClosed(s *segment, nextBase uint64) error {
	path := filepath.Join(l.dir, segName(s.base, ".idx"))
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= idxEntry && len(b)%idxEntry == 0 {
		last := b[len(b)-idxEntry:]
		if binary.LittleEndian.Uint64(b) == s.base && int64(binary.LittleEndian.Uint64(last[16:])) < s.size &&
			binary.LittleEndian.Uint64(last) < nextBase {
			s.firstTs = int64(binary.LittleEndian.Uint64(b[8:]))
			if ts, err := l.tailTimestamp(s, int64(binary.LittleEndian.Uint64(last[16:]))); err == nil {
				s.lastTs = ts
				return nil
			}
		}
	}
	// Rebuild: scan the segment, which must be whole.
	_, err = l.scan(s, true)
	return err
}

// scan reads every record of s, checking offsets, and rewrites its index.
// A closed segment must be whole; the active one's torn tail is cut off.
// It returns the offset after the last record.
func (l *Log) scan(s *segment, closed bool) (uint64, error) {
	path := filepath.Join(l.dir, segName(s.base, ".seg"))
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(data) < segHeader || string(data[:8]) != segMagic {
		if !closed && len(data) < segHeader && len(l.segs) == 1 && s.base == 0 {
			// A first segment torn while it was being created.
			return 0, l.rewriteHeader(path, s)
		}
		return 0, &DamageError{File: path, Reason: "no segment header"}
	}
	var idx []byte
	next, pos, lastIdx := s.base, int64(segHeader), int64(-1)
	l.lastChunk, l.chunkSeen = 0, false
	for pos < int64(len(data)) {
		if !closed && next >= l.cut {
			// The journal holds the records from here on.
			if err := os.Truncate(path, pos); err != nil {
				return 0, err
			}
			break
		}
		r, n, err := decodeRecord(data[pos:])
		if err == nil && r.Offset != next {
			err = fmt.Errorf("record has offset %d, want %d", r.Offset, next)
		}
		if err != nil {
			if closed || validAfter(data[pos+1:]) {
				return 0, &DamageError{File: path, Offset: pos, Reason: err.Error()}
			}
			// A torn tail: cut it off.
			if err := os.Truncate(path, pos); err != nil {
				return 0, err
			}
			break
		}
		if next == s.base {
			s.firstTs = r.Timestamp
		}
		s.lastTs = r.Timestamp
		if lastIdx < 0 || pos-lastIdx >= indexEvery {
			idx = appendIdx(idx, r.Offset, r.Timestamp, pos)
			lastIdx = pos
		}
		if r.Flags&flagChunk != 0 || next == 0 {
			l.lastChunk, l.chunkSeen = r.Offset, true
		}
		l.lastTs = max(l.lastTs, r.Timestamp)
		next++
		pos += int64(n)
	}
	s.size, s.committed = pos, pos
	if !closed {
		l.lastIdx = lastIdx
	}
	if err := os.WriteFile(filepath.Join(l.dir, segName(s.base, ".idx")), idx, 0o644); err != nil {
		return 0, err
	}
	return next, nil
}

func (l *Log) rewriteHeader(path string, s *segment) error {
	var h [segHeader]byte
	copy(h[:], segMagic)
	if err := os.WriteFile(path, h[:], 0o644); err != nil {
		return err
	}
	s.size, s.committed = segHeader, segHeader
	return nil
}

// validAfter reports whether a valid record starts anywhere in b.
func validAfter(b []byte) bool {
	for i := range b {
		if len(b)-i < recHeader+recFixed {
			return false
		}
		if _, _, err := decodeRecord(b[i:]); err == nil {
			return true
		}
	}
	return false
}

func appendIdx(b []byte, off uint64, ts int64, pos int64) []byte {
	b = binary.LittleEndian.AppendUint64(b, off)
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	return binary.LittleEndian.AppendUint64(b, uint64(pos))
}

// openActive scans the last segment and opens it for appending.
func (l *Log) openActive() error {
	s := l.segs[len(l.segs)-1]
	next, err := l.scan(s, false)
	if err != nil {
		return err
	}
	// When no chunk starts in the last segment, the last chunk started
	// in one before it, which was whole when the next one started.
	for i := len(l.segs) - 2; i >= 0 && !l.chunkSeen; i-- {
		if _, err := l.scan(l.segs[i], true); err != nil {
			return err
		}
	}
	l.next, l.committed = next, next
	path := filepath.Join(l.dir, segName(s.base, ".seg"))
	if l.f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		return err
	}
	if _, err := l.f.Seek(s.size, io.SeekStart); err != nil {
		return err
	}
	l.idx, err = os.OpenFile(filepath.Join(l.dir, segName(s.base, ".idx")), os.O_WRONLY|os.O_APPEND, 0)
	return err
}

// create starts a new segment at base, after one of prevSize bytes.
func (l *Log) create(base uint64, prevSize int64) error {
	var h [segHeader]byte
	copy(h[:], segMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(prevSize))
	f, err := os.OpenFile(filepath.Join(l.dir, segName(base, ".seg")), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	idx, err := os.OpenFile(filepath.Join(l.dir, segName(base, ".idx")), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(h[:]); err != nil {
		f.Close()
		idx.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		idx.Close()
		return err
	}
	if err := syncDir(l.dir); err != nil {
		f.Close()
		idx.Close()
		return err
	}
	l.f, l.idx, l.lastIdx = f, idx, -1
	l.mu.Lock()
	l.segs = append(l.segs, &segment{base: base, size: segHeader, committed: segHeader})
	l.mu.Unlock()
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Next is the offset the next appended record takes.
func (l *Log) Next() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next
}

// Write appends a batch of records, whose offsets must follow the log's,
// syncs it and makes it readable: Append, then Sync.
func (l *Log) Write(recs []Record) error {
	if err := l.Append(recs); err != nil {
		return err
	}
	return l.Sync()
}

// Append writes a batch of records, whose offsets must follow the log's,
// to the active segment's file without syncing it: readers see them once
// Sync returned. The first is marked as a chunk's start. The records are
// encoded straight into the log's write buffer (one copy of each
// message); their slices are not kept. A segment that fills up on the
// way is synced and closed, and its records become readable.
func (l *Log) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	recs[0].Flags |= flagChunk
	buf, idx := l.wbuf[:0], l.widx[:0]
	defer func() {
		// Keep the buffers for the next batch unless a burst made them
		// large.
		if cap(buf) <= maxKeptWriteBuf {
			l.wbuf, l.widx = buf[:0], idx[:0]
		} else {
			l.wbuf, l.widx = nil, nil
		}
	}()
	l.mu.RLock()
	s := l.segs[len(l.segs)-1]
	size, lastTs := s.size, s.lastTs
	l.mu.RUnlock()
	if l.unsynced.seg == s {
		size, lastTs = l.unsynced.size, l.unsynced.lastTs
	} else {
		l.unsynced = pendingWrite{first: recs[0].Offset}
	}
	write := func() error {
		if len(buf) > 0 {
			if _, err := l.f.Write(buf); err != nil {
				return err
			}
		}
		if len(idx) > 0 {
			if _, err := l.idx.Write(idx); err != nil {
				return err
			}
		}
		buf, idx = buf[:0], idx[:0]
		return nil
	}
	for i := range recs {
		r := &recs[i]
		off, ts, n := r.Offset, r.Timestamp, int64(encodedSize(r))
		if size > segHeader && size+n > l.maxSeg.Load() {
			// Roll: the full segment is synced and whole before the next
			// one names its size.
			if err := write(); err != nil {
				return err
			}
			if err := l.f.Sync(); err != nil {
				return err
			}
			l.mu.Lock()
			s.size, s.committed, s.lastTs = size, size, lastTs
			l.committed = off
			l.mu.Unlock()
			l.f.Close()
			l.idx.Close()
			if err := l.create(off, size); err != nil {
				return err
			}
			l.mu.RLock()
			s = l.segs[len(l.segs)-1]
			l.mu.RUnlock()
			size = s.size
		}
		if size == segHeader {
			l.mu.Lock()
			s.firstTs = ts
			l.mu.Unlock()
		}
		if l.lastIdx < 0 || size-l.lastIdx >= indexEvery {
			idx = appendIdx(idx, off, ts, size)
			l.lastIdx = size
		}
		buf = encodeRecord(buf, r)
		size += n
		lastTs = ts
	}
	if err := write(); err != nil {
		return err
	}
	l.unsynced.seg, l.unsynced.size, l.unsynced.lastTs, l.unsynced.last = s, size, lastTs, recs[len(recs)-1].Offset
	return nil
}

// pendingWrite is what Append wrote and Sync has yet to sync: the active
// segment's size and last timestamp after it, the first and last offsets.
type pendingWrite struct {
	seg         *segment // nil: nothing waits
	size        int64
	lastTs      int64
	first, last uint64
}

// Sync syncs what Append wrote and makes it readable.
func (l *Log) Sync() error {
	if l.unsynced.seg == nil {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	l.Publish()
	return nil
}

// Publish makes what Append wrote readable without syncing it: the
// stream's journal holds it, synced (journal.go).
func (l *Log) Publish() {
	u := l.unsynced
	if u.seg == nil {
		return
	}
	l.unsynced = pendingWrite{}
	l.mu.Lock()
	u.seg.size, u.seg.committed, u.seg.lastTs = u.size, u.size, u.lastTs
	l.committed, l.lastChunk = u.last+1, u.first
	l.mu.Unlock()
}

// activeFile is the file Append writes to, for a journal checkpoint to
// sync (writer only). A segment that rolls after the call was synced
// before its file closed: syncing the closed file fails with
// os.ErrClosed, and nothing is lost.
func (l *Log) activeFile() *os.File { return l.f }

// replay appends records that the log lost and the journal kept, in
// offset order from the log's next offset, without syncing them.
func (l *Log) replay(recs []Record) error {
	for i := range recs {
		off, ts := l.reserve(recs[i].Timestamp)
		if recs[i].Offset != off {
			return fmt.Errorf("journal record has offset %d, the log goes on at %d", recs[i].Offset, off)
		}
		if ts != recs[i].Timestamp {
			recs[i].Timestamp = ts
		}
	}
	return l.Append(recs)
}

// maxKeptWriteBuf is the largest write buffer a log keeps between batches.
const maxKeptWriteBuf = 4 << 20

// reserve takes the next offset for an appended record and its
// timestamp: now (Unix ms), or the last one when the clock went back, so
// that timestamps never decrease along the log.
func (l *Log) reserve(now int64) (uint64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	l.next++
	l.lastTs = max(l.lastTs, now)
	return n, l.lastTs
}

// Close closes the writer's files.
func (l *Log) Close() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.idx.Close()
		l.f, l.idx = nil, nil
	}
	return err
}

// Bounds returns the first retained offset, the committed end (the
// offset after the last readable record) and the last chunk's first
// offset.
func (l *Log) Bounds() (first, end, lastChunk uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base, l.committed, l.lastChunk
}

// Segments is the number of segment files.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// segFor returns the segment holding offset off (the last one whose base
// is at most off). l.mu is held.
func (l *Log) segFor(off uint64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > off })
	return max(i-1, 0)
}

// Reader is a cursor over the log: it reads committed records in order
// from its position, through a small buffer of its own.
type Reader struct {
	l      *Log
	base   uint64 // the segment it reads
	f      *os.File
	pos    int64  // byte position of the next record
	next   uint64 // offset of the next record
	buf    []byte
	bufPos int64 // file position of buf[0]
	last   int   // size of the record Next returned last
}

// ReaderAt returns a reader whose first record is the one at off, or the
// first retained one when off is below it; off may be the end.
func (l *Log) ReaderAt(off uint64) (*Reader, error) {
	return l.readerFrom(func() (*segment, uint64) {
		o := min(max(off, l.segs[0].base), l.committed)
		return l.segs[l.segFor(o)], o
	}, func(o uint64, _ int64, at uint64) bool { return o <= at },
		func(rec *Record, at uint64) bool { return rec.Offset < at })
}

// ReaderAtTime returns a reader at the first record with a timestamp at
// or after ts (Unix ms), or at the end.
func (l *Log) ReaderAtTime(ts int64) (*Reader, error) {
	return l.readerFrom(func() (*segment, uint64) {
		i := 0
		for j, s := range l.segs {
			if s.firstTs != 0 && s.firstTs < ts {
				i = j
			}
		}
		return l.segs[i], 0
	}, func(_ uint64, t int64, _ uint64) bool { return t < ts },
		func(rec *Record, _ uint64) bool { return rec.Timestamp < ts })
}

// readerFrom places a reader in the segment pick chooses (under l.mu, with
// the offset it aims at), at the last index entry before holds for, then
// past the records pass holds for. A segment dropped meanwhile is chosen
// again.
func (l *Log) readerFrom(pick func() (*segment, uint64), before func(off uint64, ts int64, at uint64) bool,
	pass func(rec *Record, at uint64) bool) (*Reader, error) {
	for {
		l.mu.RLock()
		s, at := pick()
		l.mu.RUnlock()
		r := &Reader{l: l, base: s.base, pos: segHeader, next: s.base}
		err := r.open()
		if err == nil {
			err = r.seekIndex(func(o uint64, t int64) bool { return before(o, t, at) })
		}
		if err == nil {
			err = r.skip(func(rec *Record) bool { return pass(rec, at) })
		}
		if err == errDropped {
			r.Close()
			continue
		}
		if err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}

func (r *Reader) open() error {
	f, err := os.Open(filepath.Join(r.l.dir, segName(r.base, ".seg")))
	if errors.Is(err, os.ErrNotExist) && r.l.dropped(r.base) {
		return errDropped
	}
	if err != nil {
		return err
	}
	r.f, r.buf, r.bufPos = f, r.buf[:0], r.pos
	return nil
}

// seekIndex moves to the last index entry of the segment for which
// before holds (entries are in offset and time order).
func (r *Reader) seekIndex(before func(off uint64, ts int64) bool) error {
	f, err := os.Open(filepath.Join(r.l.dir, segName(r.base, ".idx")))
	if errors.Is(err, os.ErrNotExist) && r.l.dropped(r.base) {
		return errDropped
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	n := int(st.Size() / idxEntry)
	var e [idxEntry]byte
	read := func(i int) (uint64, int64, int64) {
		if _, err := f.ReadAt(e[:], int64(i)*idxEntry); err != nil {
			return 0, 0, -1
		}
		return binary.LittleEndian.Uint64(e[:]), int64(binary.LittleEndian.Uint64(e[8:])), int64(binary.LittleEndian.Uint64(e[16:]))
	}
	k := sort.Search(n, func(i int) bool {
		o, t, p := read(i)
		return p < 0 || !before(o, t)
	}) - 1
	if k < 0 {
		return nil
	}
	o, _, p := read(k)
	if p < segHeader {
		return nil
	}
	r.pos, r.next, r.buf, r.bufPos = p, o, r.buf[:0], p
	return nil
}

// skip reads past the records for which pass holds.
func (r *Reader) skip(pass func(*Record) bool) error {
	for {
		rec, ok, err := r.Next()
		if err != nil || !ok {
			return err
		}
		if !pass(&rec) {
			// Unread it: it is in the current segment and buffer.
			r.pos -= int64(r.last)
			r.next--
			return nil
		}
	}
}

// Offset is the offset of the record Next returns next.
func (r *Reader) Offset() uint64 { return r.next }

// Next returns the next committed record, false when there is none yet.
// The record's slices are valid until the next call.
func (r *Reader) Next() (Record, bool, error) {
	for {
		r.l.mu.RLock()
		if r.next >= r.l.committed {
			r.l.mu.RUnlock()
			return Record{}, false, nil
		}
		i := r.l.segFor(r.base)
		s := r.l.segs[i]
		var nextBase uint64
		limit := s.committed
		if s.base == r.base && i+1 < len(r.l.segs) {
			nextBase = r.l.segs[i+1].base
		}
		r.l.mu.RUnlock()
		if s.base != r.base {
			// Its segment was dropped: start at the first retained one.
			r.Close()
			r.base, r.pos, r.next = s.base, segHeader, s.base
			if err := r.open(); err != nil && err != errDropped {
				return Record{}, false, err
			}
			continue
		}
		if r.f == nil {
			// Released (Release) or dropped while it was being opened.
			if err := r.open(); err != nil && err != errDropped {
				return Record{}, false, err
			}
			continue
		}
		if r.pos >= limit {
			if nextBase == 0 {
				return Record{}, false, nil
			}
			r.Close()
			r.base, r.pos, r.next = nextBase, segHeader, nextBase
			if err := r.open(); err != nil && err != errDropped {
				return Record{}, false, err
			}
			continue
		}
		rec, n, err := r.read(limit)
		if err != nil {
			return Record{}, false, &DamageError{File: filepath.Join(r.l.dir, segName(r.base, ".seg")), Offset: r.pos, Reason: err.Error()}
		}
		if rec.Offset != r.next {
			return Record{}, false, &DamageError{File: filepath.Join(r.l.dir, segName(r.base, ".seg")), Offset: r.pos,
				Reason: fmt.Sprintf("record has offset %d, want %d", rec.Offset, r.next)}
		}
		r.pos += int64(n)
		r.next++
		r.last = n
		return rec, true, nil
	}
}

// read decodes the record at r.pos, refilling the buffer from r.pos (64
// KiB, or the whole record) but never past limit.
func (r *Reader) read(limit int64) (Record, int, error) {
	for range 3 {
		if start := r.pos - r.bufPos; start >= 0 && start <= int64(len(r.buf)) {
			rec, n, err := decodeRecord(r.buf[start:])
			if err != errShort {
				return rec, n, err
			}
		}
		want := int64(64 << 10)
		if start := r.pos - r.bufPos; start >= 0 && start+recHeader <= int64(len(r.buf)) {
			want = max(want, int64(binary.LittleEndian.Uint32(r.buf[start:]))+recHeader)
		}
		want = min(want, limit-r.pos)
		if want < recHeader {
			return Record{}, 0, errShort
		}
		if int64(cap(r.buf)) < want {
			r.buf = make([]byte, want)
		}
		r.buf = r.buf[:want]
		if _, err := r.f.ReadAt(r.buf, r.pos); err != nil {
			return Record{}, 0, err
		}
		r.bufPos = r.pos
	}
	return Record{}, 0, errShort
}

// Close releases the reader's file.
func (r *Reader) Close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// errDropped: the reader's segment was dropped by retention as it opened
// it; it continues at the first retained one.
var errDropped = errors.New("stream: segment dropped")

// dropped reports whether retention dropped the segment at base.
func (l *Log) dropped(base uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return base < l.segs[0].base
}

// Release closes the reader's file when its segment is below first (it
// was dropped), so that the disk space comes back at once; the next Next
// continues at the first retained record. Not concurrent with Next.
func (r *Reader) Release(first uint64) {
	if r.base < first {
		r.Close()
	}
}

// SetSegmentSize changes the segment size, from the next append on.
func (l *Log) SetSegmentSize(n int64) { l.maxSeg.Store(n) }

// tailTimestamp reads the timestamp of the last record of closed segment
// s by walking the record headers from pos, a record's position (its last
// index entry's): at most an index interval and a record.
func (l *Log) tailTimestamp(s *segment, pos int64) (int64, error) {
	f, err := os.Open(filepath.Join(l.dir, segName(s.base, ".seg")))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [recHeader + 16]byte
	var ts int64
	for pos < s.size {
		if _, err := f.ReadAt(h[:], pos); err != nil {
			return 0, err
		}
		n := int64(binary.LittleEndian.Uint32(h[:]))
		if n < recFixed || pos+recHeader+n > s.size {
			return 0, fmt.Errorf("bad record length %d at %d", n, pos)
		}
		ts = int64(binary.LittleEndian.Uint64(h[recHeader+8:]))
		pos += recHeader + n
	}
	return ts, nil
}

// Retain drops the oldest segments that r says go at now (never the one
// being written), removing their files at once. It returns how many it
// dropped. Readers in them continue at the first retained record.
func (l *Log) Retain(r group.Retention, now time.Time) (int, error) {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	l.mu.RLock()
	segs := make([]group.Segment, len(l.segs))
	for i, s := range l.segs {
		g := group.Segment{First: int64(s.base), Last: int64(l.committed) - 1, Bytes: s.committed}
		if i+1 < len(l.segs) {
			g.Last = int64(l.segs[i+1].base) - 1
		}
		if s.lastTs != 0 {
			g.Newest = time.UnixMilli(s.lastTs)
		}
		segs[i] = g
	}
	l.mu.RUnlock()
	n := r.Drop(segs, now)
	if n == 0 {
		return 0, nil
	}
	l.mu.Lock()
	gone := slices.Clone(l.segs[:n])
	l.segs = slices.Delete(l.segs, 0, n)
	l.mu.Unlock()
	var first error
	for _, s := range gone {
		// The index first: a segment without one is rebuilt at open.
		for _, ext := range []string{".idx", ".seg"} {
			if err := os.Remove(filepath.Join(l.dir, segName(s.base, ext))); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
				first = err
			}
		}
	}
	return n, first
}

// Remove deletes the log's files.
func (l *Log) Remove() error {
	l.Close()
	return os.RemoveAll(l.dir)
}

// Bytes is the size of the log's segments.
func (l *Log) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.committed
	}
	return n
}

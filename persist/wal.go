package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The message log (WAL) sits in front of the kv for message ops: see the
// "Message log" section of doc.go for how the engine uses it.
//
// On disk it is a directory of segment files named by a 16-digit hex
// segment number that only grows. A segment is a sequence of records:
//
//	len u32 | crc u32 | segment u64 | payload (len bytes)
//
// crc is CRC-32C of the segment number and the payload. A record is valid
// only if its segment field is the file's own number and the CRC matches,
// so the end of a segment is the first invalid record: a zero length
// (never-written space), a torn write, or a record of an earlier segment
// that used the same file (segments are recycled: a released file is
// renamed into the next segment's name, so its blocks are already
// allocated and fdatasync has no file size to update).
//
// One record holds the message ops of one committer batch (walEncode), so a
// batch is in the log entirely or not at all.

const (
	walSegmentSize = 32 << 20 // a segment is rolled when the next record would pass this
	walHeaderLen   = 16
	walMaxRecord   = 1 << 30 // larger lengths are corrupt
	walMaxSpares   = 2       // released segments kept for reuse
	walDir         = "wal"
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// walPos is a position in the log: segment number and byte offset.
type walPos struct {
	seg uint64
	off int64
}

func (p walPos) bytes() []byte {
	b := binary.BigEndian.AppendUint64(nil, p.seg)
	return binary.BigEndian.AppendUint64(b, uint64(p.off))
}

func parseWALPos(v []byte) (walPos, bool) {
	if len(v) != 16 {
		return walPos{}, false
	}
	return walPos{binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:]))}, true
}

// wal is the log writer. Only the committer uses it (and Open before the
// committer starts).
type wal struct {
	dir    string
	noSync bool
	f      *os.File // current segment; nil until the first append
	pos    walPos   // end of the last record written to f
	buf    []byte   // the record being encoded, reused
	dirty  bool     // f has writes not yet synced
	// prev is where the segment before f ended, markEnd where f's marker
	// record ends.
	prev    walPos
	markEnd int64
	// maxPayload is the largest record payload written (0: walMaxRecord);
	// tests lower it.
	maxPayload int
	spares     []string // released segment files waiting for reuse
	maxSpare   uint64   // the largest segment number a spare had at open
	// disk watches the free space under the log (nil: not watched).
	disk *diskWatch
	// written counts bytes appended since the store opened.
	written int64
}

func segName(dir string, n uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x.log", n))
}

// listSegments returns the segment numbers in dir, ascending, and the
// spare files.
func listSegments(dir string) (segs []uint64, spares []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "spare-") {
			spares = append(spares, filepath.Join(dir, name))
			continue
		}
		base, ok := strings.CutSuffix(name, ".log")
		if !ok || len(base) != 16 {
			continue
		}
		n, err := strconv.ParseUint(base, 16, 64)
		if err != nil {
			continue
		}
		segs = append(segs, n)
	}
	slices.Sort(segs)
	return segs, spares, nil
}

// openWAL prepares dir for writing; segments already there are left for
// replay (see replayWAL) and released by the caller afterwards.
func openWAL(dir string, noSync bool) (*wal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	_, spares, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	w := &wal{dir: dir, noSync: noSync, spares: spares}
	for _, sp := range spares {
		if n, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(sp), "spare-"), 16, 64); err == nil {
			w.maxSpare = max(w.maxSpare, n)
		}
	}
	return w, nil
}

// start begins writing at the start of segment n (larger than every
// segment in the directory).
func (w *wal) start(n uint64) error {
	if err := w.sync(); err != nil {
		return err
	}
	var f *os.File
	var err error
	name := segName(w.dir, n)
	if k := len(w.spares); k > 0 {
		sp := w.spares[k-1]
		w.spares = w.spares[:k-1]
		if err = os.Rename(sp, name); err == nil {
			f, err = os.OpenFile(name, os.O_RDWR, 0o644)
		}
	} else {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		return fmt.Errorf("persist: wal segment %x: %w", n, err)
	}
	// The marker: where the previous segment ends. It is made durable by
	// the fdatasync of the first record after it.
	mark := appendMarker(make([]byte, walHeaderLen, walHeaderLen+24), w.pos)
	putHeader(mark, n)
	if _, err := f.WriteAt(mark, 0); err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("persist: wal segment %x: %w", n, err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	w.prev = w.pos
	w.pos = walPos{seg: n, off: int64(len(mark))}
	w.markEnd = w.pos.off
	w.dirty = true
	return nil
}

// putHeader fills in the header of record rec (header and payload) of
// segment seg.
func putHeader(rec []byte, seg uint64) {
	h, payload := rec[:walHeaderLen], rec[walHeaderLen:]
	binary.BigEndian.PutUint32(h[0:], uint32(len(payload)))
	binary.BigEndian.PutUint64(h[8:], seg)
	crc := crc32.Update(0, walCRC, h[8:16])
	binary.BigEndian.PutUint32(h[4:], crc32.Update(crc, walCRC, payload))
}

// appendOps writes the message ops of ops as log records and makes them
// durable with an fdatasync. ops go into one record unless their encoding
// would pass maxPayload: then they are cut into several records between
// ops, each synced (an op is always in one record; rejectOversized refuses
// an op that no record can hold). On an error the segment is abandoned: the next
// append starts a new one, so no valid record ever follows a damaged one.
func (w *wal) appendOps(ops []op) error {
	limit := w.payloadLimit()
	for i := 0; i < len(ops); {
		j, n := i, 0
		for j < len(ops) {
			z := walSize(ops[j : j+1])
			if j > i && n+z > limit {
				break
			}
			n += z
			j++
		}
		if err := w.writeRecord(ops[i:j], n); err != nil {
			return err
		}
		// Each record is synced before the next is written, so a valid
		// record after an invalid one always means damage (replaySegment).
		if err := w.sync(); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// payloadLimit is the largest record payload appendOps writes.
func (w *wal) payloadLimit() int {
	if w.maxPayload > 0 {
		return w.maxPayload
	}
	return walMaxRecord
}

// writeRecord writes ops as one record of at most size payload bytes (an
// upper bound from walSize), without syncing.
func (w *wal) writeRecord(ops []op, size int) error {
	if n := walHeaderLen + size; cap(w.buf) < n {
		w.buf = make([]byte, 0, n) // one allocation, not a growth per message
	}
	w.buf = walEncode(append(w.buf[:0], make([]byte, walHeaderLen)...), ops)
	payload := w.buf[walHeaderLen:]
	if len(payload) == 0 {
		return nil // a zero length marks the end of a segment
	}
	if len(payload) > walMaxRecord {
		return fmt.Errorf("persist: wal record of %d bytes is over the limit of %d", len(payload), walMaxRecord)
	}
	need := int64(len(w.buf))
	w.checkDisk(need)
	if w.f == nil || (w.pos.off > w.markEnd && w.pos.off+need > walSegmentSize) {
		if err := w.start(w.pos.seg + 1); err != nil {
			return err
		}
	}
	putHeader(w.buf, w.pos.seg)
	if _, err := w.f.WriteAt(w.buf, w.pos.off); err != nil {
		w.abandon()
		return fmt.Errorf("persist: wal write: %w", err)
	}
	w.dirty = true
	w.pos.off += need
	w.written += need
	if cap(w.buf) > 4*walSegmentSize/16 {
		w.buf = nil // a burst made it large
	}
	return nil
}

// sync makes what was written to the current segment durable.
func (w *wal) sync() error {
	if !w.dirty || w.f == nil {
		return nil
	}
	if !w.noSync {
		if err := fdatasync(w.f); err != nil {
			w.abandon()
			return fmt.Errorf("persist: wal sync: %w", err)
		}
	}
	w.dirty = false
	return nil
}

// abandon closes the current segment after a failed write; the next
// append starts a new segment.
func (w *wal) abandon() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
		if w.pos.off <= w.markEnd {
			// Nothing but the marker: remove the file, so that failing
			// writes (a full disk) do not leave a segment each, and the
			// next segment takes its number.
			if err := os.Remove(segName(w.dir, w.pos.seg)); err == nil {
				w.pos = w.prev
			}
		}
	}
	w.dirty = false
}

// release removes (or keeps as spares) every segment numbered below seg.
func (w *wal) release(seg uint64) error {
	segs, _, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	for _, n := range segs {
		if n >= seg || (w.f != nil && n == w.pos.seg) {
			continue
		}
		name := segName(w.dir, n)
		if len(w.spares) < walMaxSpares && (w.disk == nil || !w.disk.low) {
			sp := filepath.Join(w.dir, fmt.Sprintf("spare-%016x", n))
			if err := os.Rename(name, sp); err == nil {
				w.spares = append(w.spares, sp)
				continue
			}
		}
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// CorruptLogError is a damaged record in the middle of the message log: a
// record that is not valid although the log holds valid records after it
// (so it had been written and synced), as opposed to a torn tail, the last
// record cut short by a crash, which is never acknowledged and is dropped
// quietly. Open refuses a store with one unless Options.RepairLog is set.
type CorruptLogError struct {
	File   string
	Offset int64
	Reason string
	// Next is the offset of the next valid record in File (-1: none; the
	// log continues in the next segment).
	Next int64
}

func (e *CorruptLogError) Error() string {
	next := "the rest of the file"
	if e.Next >= 0 {
		next = fmt.Sprintf("%d bytes up to the next valid record at offset %d", e.Next-e.Offset, e.Next)
	}
	return fmt.Sprintf("persist: message log corrupt: %s at offset %d: %s; valid records follow it, so this is damage, not a torn write. "+
		"Starting with the message log repair option (warren --repair-message-log) drops %s and replays everything else", e.File, e.Offset, e.Reason, next)
}

// replayOptions are what replayWAL needs beyond the position.
type replayOptions struct {
	// repair drops a damaged stretch of a segment (reporting it through
	// logf) instead of failing with a *CorruptLogError.
	repair bool
	logf   func(string, ...any)
}

// replayWAL calls fn with the payload of every valid record at or after
// from, in order; payloads are fresh slices fn may keep. It returns the
// end of the log: the largest segment number present (0 if none) and the
// offset after its last valid record.
//
// Each segment but the first starts with a marker record naming the end
// of the segment before it (walSegStart): a replay checks that the
// previous segment's valid records reach exactly there, and replays none
// past it (records past it belong to a write that failed and was
// abandoned). Where no marker says where a segment ends, its end is the
// first invalid record, unless a valid record of the segment follows.
func replayWAL(dir string, from walPos, ro replayOptions, fn func(payload []byte) error) (end walPos, err error) {
	segs, _, err := listSegments(dir)
	if err != nil {
		return walPos{}, err
	}
	for i, n := range segs {
		end = walPos{seg: n}
		if n < from.seg {
			continue
		}
		off := int64(0)
		if n == from.seg {
			off = from.off
		}
		limit := int64(-1)
		if i+1 < len(segs) && segs[i+1] == n+1 {
			if prev, ok := readMarker(segName(dir, n+1)); ok && prev.seg == n {
				limit = prev.off
			}
		}
		e, err := replaySegment(segName(dir, n), n, off, limit, ro, fn)
		if err != nil {
			return end, err
		}
		end.off = e
	}
	return end, nil
}

// readRecord reads the record of segment seg at off in f (size bytes
// long). It returns the payload, or a reason why there is no valid record
// there.
func readRecord(f *os.File, size int64, seg uint64, off int64) ([]byte, string, error) {
	var h [walHeaderLen]byte
	if off+walHeaderLen > size {
		return nil, "end of file", nil
	}
	if _, err := f.ReadAt(h[:], off); err != nil {
		return nil, "", err
	}
	n := int64(binary.BigEndian.Uint32(h[0:]))
	switch {
	case n == 0:
		return nil, "zero length", nil
	case binary.BigEndian.Uint64(h[8:]) != seg:
		return nil, "record of another segment", nil
	case n > walMaxRecord || off+walHeaderLen+n > size:
		return nil, fmt.Sprintf("length %d past the end of the file", n), nil
	}
	payload := make([]byte, n)
	if _, err := f.ReadAt(payload, off+walHeaderLen); err != nil {
		return nil, "", err
	}
	crc := crc32.Update(0, walCRC, h[8:16])
	if crc32.Update(crc, walCRC, payload) != binary.BigEndian.Uint32(h[4:]) {
		return nil, "checksum mismatch", nil
	}
	return payload, "", nil
}

// nextValid returns the offset of the first valid record of segment seg
// in f at or after from and before to, or -1.
func nextValid(f *os.File, size int64, seg uint64, from, to int64) (int64, error) {
	const window = 4 << 20
	var pat [8]byte
	binary.BigEndian.PutUint64(pat[:], seg)
	buf := make([]byte, window+walHeaderLen)
	for base := from; base < to; base += window {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-base)], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, err
		}
		b := buf[:n]
		for i := 0; ; {
			k := bytes.Index(b[i:], pat[:])
			if k < 0 {
				break
			}
			at := base + int64(i+k) - 8 // the segment field is at header offset 8
			i += k + 1
			if at < from || at >= to || at >= base+window {
				continue
			}
			p, _, err := readRecord(f, size, seg, at)
			if err != nil {
				return -1, err
			}
			if p != nil {
				return at, nil
			}
		}
	}
	return -1, nil
}

// readMarker returns the previous segment's end named by the marker that
// starts segment file name, if it has one.
func readMarker(name string) (walPos, bool) {
	f, err := os.Open(name)
	if err != nil {
		return walPos{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return walPos{}, false
	}
	base, _ := strings.CutSuffix(filepath.Base(name), ".log")
	seg, err := strconv.ParseUint(base, 16, 64)
	if err != nil {
		return walPos{}, false
	}
	p, _, err := readRecord(f, st.Size(), seg, 0)
	if err != nil || p == nil {
		return walPos{}, false
	}
	return parseMarker(p)
}

// replaySegment replays segment seg from off; limit, when not -1, is where
// the next segment's marker says the segment ends. It returns the offset
// after the last record replayed.
func replaySegment(name string, seg uint64, off, limit int64, ro replayOptions, fn func([]byte) error) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return off, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return off, err
	}
	size := st.Size()
	to := size
	if limit >= 0 {
		to = min(limit, size)
	}
	for {
		if limit >= 0 && off >= limit {
			return off, nil
		}
		payload, reason, err := readRecord(f, size, seg, off)
		if err != nil {
			return off, err
		}
		if payload != nil {
			next := off + walHeaderLen + int64(len(payload))
			if limit >= 0 && next > limit {
				reason = fmt.Sprintf("record runs past the end (%d) the next segment names", limit)
			} else {
				off = next
				if _, ok := parseMarker(payload); ok {
					continue
				}
				if err := fn(payload); err != nil {
					return off, err
				}
				continue
			}
		}
		// No valid record at off: the end of the segment, or damage.
		next, err := nextValid(f, size, seg, off+1, to)
		if err != nil {
			return off, err
		}
		if limit < 0 && next < 0 {
			return off, nil // the end, or a torn tail
		}
		ce := &CorruptLogError{File: name, Offset: off, Reason: reason, Next: next}
		if limit >= 0 && next < 0 {
			ce.Reason += fmt.Sprintf(", and the next segment says this one ends at %d", limit)
		}
		if !ro.repair {
			return off, ce
		}
		if next < 0 {
			ro.logf("persist: repair: message log %s: dropped %d bytes from offset %d (%s)", name, to-off, off, reason)
			return to, nil
		}
		ro.logf("persist: repair: message log %s: dropped %d bytes from offset %d to the next valid record (%s)", name, next-off, off, reason)
		off = next
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ---- op encoding ----

// Op tags in a record payload.
const (
	walPublish   byte = 1
	walSettle    byte = 2
	walDelivered byte = 3
	walAtomic    byte = 4
	walSegStart  byte = 5 // a segment's first record: the previous segment's end
)

// appendMarker encodes the payload of the record that starts a segment:
// where the previous segment ended (its number and the offset after its
// last record).
func appendMarker(b []byte, prev walPos) []byte {
	b = append(b, walSegStart)
	b = binary.AppendUvarint(b, prev.seg)
	return binary.AppendUvarint(b, uint64(prev.off))
}

func parseMarker(p []byte) (walPos, bool) {
	if len(p) == 0 || p[0] != walSegStart {
		return walPos{}, false
	}
	r := walReader{reader{b: p[1:]}}
	seg, off := r.uvarint(), r.uvarint()
	if r.err != nil || len(r.b) != 0 {
		return walPos{}, false
	}
	return walPos{seg, int64(off)}, true
}

// walLoggable reports whether o is a message op the log carries.
func walLoggable(k opKind) bool {
	return k == opPublish || k == opSettle || k == opDelivered || k == opAtomic
}

// walEncode appends the message ops of ops to b.
func walEncode(b []byte, ops []op) []byte {
	for i := range ops {
		o := &ops[i]
		if o.err != nil {
			continue
		}
		switch o.kind {
		case opPublish:
			b = append(b, walPublish)
			b = walAppendPublish(b, o.msgID, &o.msg, o.qs)
		case opSettle:
			b = append(b, walSettle)
			b = walAppendSeqs(b, o.qs)
		case opDelivered:
			b = append(b, walDelivered)
			b = walAppendSeqs(b, o.qs)
		case opAtomic:
			b = append(b, walAtomic)
			b = binary.AppendUvarint(b, uint64(len(o.pubs)))
			for j := range o.pubs {
				p := &o.pubs[j]
				b = walAppendPublish(b, p.MsgID, &p.Msg, p.Entries)
			}
			b = walAppendSeqs(b, o.qs)
		}
	}
	return b
}

// walSize is an upper bound of what walEncode appends for ops.
func walSize(ops []op) int {
	const perEntry = 3 * binary.MaxVarintLen64
	n := 0
	pub := func(m *MessageRecord, entries int) int {
		return 3*binary.MaxVarintLen64 + entries*perEntry + 4*binary.MaxVarintLen64 +
			len(m.Exchange) + len(m.RoutingKey) + len(m.Props) + len(m.Body)
	}
	for i := range ops {
		o := &ops[i]
		if o.err != nil {
			continue
		}
		n += 1 + binary.MaxVarintLen64 + len(o.qs)*perEntry
		switch o.kind {
		case opPublish:
			n += pub(&o.msg, len(o.qs))
		case opAtomic:
			for j := range o.pubs {
				n += pub(&o.pubs[j].Msg, len(o.pubs[j].Entries))
			}
		}
	}
	return n
}

func walAppendPublish(b []byte, msgID uint64, m *MessageRecord, qs []QueueSeq) []byte {
	b = binary.AppendUvarint(b, msgID)
	b = binary.AppendUvarint(b, uint64(len(qs)))
	for _, e := range qs {
		b = binary.AppendUvarint(b, e.QueueID)
		b = binary.AppendUvarint(b, e.Seq)
		b = binary.AppendVarint(b, e.Expires)
	}
	b = appendString(b, m.Exchange)
	b = appendString(b, m.RoutingKey)
	b = appendBytes(b, m.Props)
	return appendBytes(b, m.Body)
}

func walAppendSeqs(b []byte, qs []QueueSeq) []byte {
	b = binary.AppendUvarint(b, uint64(len(qs)))
	for _, e := range qs {
		b = binary.AppendUvarint(b, e.QueueID)
		b = binary.AppendUvarint(b, e.Seq)
	}
	return b
}

// walDecode returns the ops of a payload. Messages alias payload.
func walDecode(payload []byte) ([]op, error) {
	r := walReader{reader{b: payload}}
	var ops []op
	for len(r.b) > 0 && r.err == nil {
		switch tag := r.byte1(); tag {
		case walPublish:
			o := op{kind: opPublish}
			o.msgID, o.qs, o.msg = r.publish()
			for i := range o.qs {
				o.qs[i].MsgID = o.msgID
			}
			ops = append(ops, o)
		case walSettle, walDelivered:
			k := opSettle
			if tag == walDelivered {
				k = opDelivered
			}
			ops = append(ops, op{kind: k, qs: r.seqs()})
		case walAtomic:
			n := r.count()
			o := op{kind: opAtomic, pubs: make([]PublishOp, 0, n)}
			for range n {
				var p PublishOp
				p.MsgID, p.Entries, p.Msg = r.publish()
				for i := range p.Entries {
					p.Entries[i].MsgID = p.MsgID
				}
				o.pubs = append(o.pubs, p)
			}
			o.qs = r.seqs()
			ops = append(ops, o)
		default:
			r.fail(fmt.Sprintf("unknown op tag %d", tag))
		}
	}
	return ops, r.err
}

type walReader struct{ reader }

func (r *walReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *walReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[k:]
	return v
}

// count reads a length that must fit in what is left (each element takes
// at least two bytes).
func (r *walReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("bad count")
		return 0
	}
	return int(n)
}

func (r *walReader) publish() (uint64, []QueueSeq, MessageRecord) {
	id := r.uvarint()
	n := r.count()
	qs := make([]QueueSeq, 0, n)
	for range n {
		q, s, x := r.uvarint(), r.uvarint(), r.varint()
		qs = append(qs, QueueSeq{QueueID: q, Seq: s, Expires: x})
	}
	var m MessageRecord
	m.Exchange, m.RoutingKey = r.str(), r.str()
	m.Props, m.Body = r.bytes(), r.bytes()
	return id, qs, m
}

func (r *walReader) seqs() []QueueSeq {
	n := r.count()
	qs := make([]QueueSeq, 0, n)
	for range n {
		q, s := r.uvarint(), r.uvarint()
		qs = append(qs, QueueSeq{QueueID: q, Seq: s})
	}
	return qs
}

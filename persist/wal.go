package persist

import (
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

func (p walPos) less(q walPos) bool {
	return p.seg < q.seg || p.seg == q.seg && p.off < q.off
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
	// maxPayload is the largest record payload written (0: walMaxRecord);
	// tests lower it.
	maxPayload int
	spares     []string // released segment files waiting for reuse
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
	return &wal{dir: dir, noSync: noSync, spares: spares}, nil
}

// start begins writing at the start of segment n (larger than every
// segment in the directory).
func (w *wal) start(n uint64) error {
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
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	if err := w.sync(); err != nil { // records of one batch span the roll
		f.Close()
		return err
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	w.pos = walPos{seg: n}
	return nil
}

// appendOps writes the message ops of ops as log records and makes them
// durable with one fdatasync. ops go into one record unless their encoding
// would pass maxPayload: then they are cut into several records between
// ops (an op is always in one record; rejectOversized refuses an op that
// no record can hold). On an error the segment is abandoned: the next
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
		i = j
	}
	return w.sync()
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
	if w.f == nil || (w.pos.off > 0 && w.pos.off+need > walSegmentSize) {
		if err := w.start(w.pos.seg + 1); err != nil {
			return err
		}
	}
	h := w.buf[:walHeaderLen]
	binary.BigEndian.PutUint32(h[0:], uint32(len(payload)))
	binary.BigEndian.PutUint64(h[8:], w.pos.seg)
	crc := crc32.Update(0, walCRC, h[8:16])
	binary.BigEndian.PutUint32(h[4:], crc32.Update(crc, walCRC, payload))
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
		if len(w.spares) < walMaxSpares {
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

// replayWAL calls fn with the payload of every valid record at or after
// from, in order; payloads are fresh slices fn may keep. It returns the
// largest segment number present (0 if none).
func replayWAL(dir string, from walPos, fn func(payload []byte) error) (last uint64, err error) {
	segs, _, err := listSegments(dir)
	if err != nil {
		return 0, err
	}
	for _, n := range segs {
		last = max(last, n)
		if n < from.seg {
			continue
		}
		off := int64(0)
		if n == from.seg {
			off = from.off
		}
		if err := replaySegment(segName(dir, n), n, off, fn); err != nil {
			return last, err
		}
	}
	return last, nil
}

func replaySegment(name string, seg uint64, off int64, fn func([]byte) error) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [walHeaderLen]byte
	for {
		if _, err := f.ReadAt(h[:], off); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(h[0:])
		if n == 0 || n > walMaxRecord || binary.BigEndian.Uint64(h[8:]) != seg {
			return nil
		}
		payload := make([]byte, n)
		if _, err := f.ReadAt(payload, off+walHeaderLen); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // torn tail
			}
			return err
		}
		crc := crc32.Update(0, walCRC, h[8:16])
		if crc32.Update(crc, walCRC, payload) != binary.BigEndian.Uint32(h[4:]) {
			return nil
		}
		if err := fn(payload); err != nil {
			return err
		}
		off += walHeaderLen + int64(n)
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
)

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
